//! The shared loopback scenarios on tokio (real UDP on 127.0.0.1).
#![allow(missing_docs)]

#[path = "../../soe-runtime/tests/support/scenarios.rs"]
mod scenarios;

use soe_tokio::TokioRuntime as R;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_sessions_echo_a_thousand_messages_each() {
    scenarios::echo_many::<R>(50, 1000, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_sessions_echo_a_thousand_rc4_messages_each() {
    scenarios::echo_many::<R>(50, 1000, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_from_either_side_is_seen_by_the_other() {
    scenarios::close_from_either_side::<R>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_to_a_port_nobody_serves_times_out() {
    scenarios::connect_to_nobody_times_out::<R>().await;
}

#[cfg(any(target_os = "linux", target_os = "android", windows))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    windows,
    ignore = "wine 8 reports a connected UDP socket's closed port only through SO_ERROR, which it never clears; Windows reports it on the receive"
)]
async fn a_connected_socket_hears_a_closed_port() {
    scenarios::connected_socket_hears_a_closed_port::<R>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_keeps_serving_after_sending_to_a_closed_port() {
    scenarios::serves_on_after_sending_to_a_closed_port::<R>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_keeps_serving_through_garbage() {
    scenarios::survives_garbage::<R>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_mode_routes_every_session_through_one_task() {
    scenarios::stream_mode_routes_everything::<R>().await;
}

#[test]
fn bind_outside_a_runtime_is_an_error_not_a_panic() {
    let err = soe_tokio::Endpoint::bind(
        "127.0.0.1:0".parse().unwrap(),
        scenarios::client_config(false),
    )
    .unwrap_err();
    assert!(err.to_string().contains("tokio"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_nobody_reads_is_closed_with_reliable_overflow() {
    scenarios::unread_queue_overflows::<R>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connect_names_the_servers_reason() {
    scenarios::refused_connect_names_the_reason::<R>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_waits_for_room_in_a_full_queue() {
    scenarios::send_waits_for_room::<R>().await;
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reuse_port_shards_share_one_port() {
    scenarios::reuse_port_shards_share_a_port::<R>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_driver_stops_and_releases_the_port() {
    scenarios::driver_stops_and_releases_the_port::<R>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_endpoint_gives_its_port_back_at_once() {
    for _ in 0..5 {
        scenarios::closed_endpoint_gives_its_port_back_at_once::<R>().await;
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_closed_endpoint_gives_its_port_back_at_once_on_one_thread() {
    scenarios::closed_endpoint_gives_its_port_back_at_once::<R>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepted_sessions_report_their_protocol_and_id() {
    scenarios::accepted_sessions_report_their_protocol_and_id::<R>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_batch_answers_many_sessions_from_the_calling_thread() {
    scenarios::send_batch_answers_many_sessions::<R>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_stream_endpoint_gives_its_port_back_when_its_events_end() {
    for _ in 0..5 {
        scenarios::closed_stream_endpoint_gives_its_port_back_when_its_events_end::<R>().await;
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_receive_coalescing_window_serves_every_message() {
    scenarios::a_receive_coalescing_window_serves_every_message::<R>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handle_events_answers_from_the_application_task() {
    scenarios::handle_events_answers_from_the_application_task::<R>().await;
}

#[tokio::test]
async fn handle_events_answers_from_the_application_task_on_one_thread() {
    scenarios::handle_events_answers_from_the_application_task::<R>().await;
}
