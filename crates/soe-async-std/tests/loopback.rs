//! The shared loopback scenarios on async-std / async-io (real UDP on 127.0.0.1).
#![allow(missing_docs)]

#[path = "../../soe-runtime/tests/support/scenarios.rs"]
mod scenarios;

use async_std::task::block_on;
use soe_async_std::AsyncStdRuntime as R;

#[test]
#[cfg_attr(
    windows,
    ignore = "under wine 8, async-io's reactor (IOCP with AFD polls) at times reports readiness seconds late: 6 s round trips on loopback, sessions closed with UnacknowledgedTimeout; tokio's passes this scenario under wine"
)]
fn fifty_sessions_echo_a_thousand_messages_each() {
    block_on(scenarios::echo_many::<R>(50, 1000, false));
}

#[test]
#[cfg_attr(
    windows,
    ignore = "under wine 8, async-io's reactor (IOCP with AFD polls) at times reports readiness seconds late: 6 s round trips on loopback, sessions closed with UnacknowledgedTimeout; tokio's passes this scenario under wine"
)]
fn fifty_sessions_echo_a_thousand_rc4_messages_each() {
    block_on(scenarios::echo_many::<R>(50, 1000, true));
}

#[test]
fn close_from_either_side_is_seen_by_the_other() {
    block_on(scenarios::close_from_either_side::<R>());
}

#[test]
fn connect_to_a_port_nobody_serves_times_out() {
    block_on(scenarios::connect_to_nobody_times_out::<R>());
}

#[cfg(any(target_os = "linux", target_os = "android", windows))]
#[cfg_attr(
    windows,
    ignore = "wine 8 reports a connected UDP socket's closed port only through SO_ERROR, which it never clears; Windows reports it on the receive"
)]
#[test]
fn a_connected_socket_hears_a_closed_port() {
    block_on(scenarios::connected_socket_hears_a_closed_port::<R>());
}

#[test]
fn a_server_keeps_serving_after_sending_to_a_closed_port() {
    block_on(scenarios::serves_on_after_sending_to_a_closed_port::<R>());
}

#[test]
fn server_keeps_serving_through_garbage() {
    block_on(scenarios::survives_garbage::<R>());
}

#[test]
fn stream_mode_routes_every_session_through_one_task() {
    block_on(scenarios::stream_mode_routes_everything::<R>());
}

#[test]
fn a_receive_coalescing_window_serves_every_message() {
    block_on(scenarios::a_receive_coalescing_window_serves_every_message::<R>());
}

#[test]
fn handle_events_answers_from_the_application_task() {
    block_on(scenarios::handle_events_answers_from_the_application_task::<R>());
}

/// The endpoint's reactor is async-io's, so it serves a future driven by any executor: here
/// futures-lite's `block_on` (what smol uses), not async-std's.
#[test]
fn runs_under_a_foreign_executor() {
    futures_lite::future::block_on(scenarios::close_from_either_side::<R>());
}

#[test]
fn a_connection_nobody_reads_is_closed_with_reliable_overflow() {
    block_on(scenarios::unread_queue_overflows::<R>());
}

#[test]
fn a_refused_connect_names_the_servers_reason() {
    block_on(scenarios::refused_connect_names_the_reason::<R>());
}

#[test]
fn send_waits_for_room_in_a_full_queue() {
    block_on(scenarios::send_waits_for_room::<R>());
}

#[cfg(target_os = "linux")]
#[test]
fn reuse_port_shards_share_one_port() {
    block_on(scenarios::reuse_port_shards_share_a_port::<R>());
}

#[test]
fn the_driver_stops_and_releases_the_port() {
    block_on(scenarios::driver_stops_and_releases_the_port::<R>());
}

#[test]
fn a_closed_endpoint_gives_its_port_back_at_once() {
    for _ in 0..5 {
        block_on(scenarios::closed_endpoint_gives_its_port_back_at_once::<R>());
    }
}

#[test]
fn accepted_sessions_report_their_protocol_and_id() {
    block_on(scenarios::accepted_sessions_report_their_protocol_and_id::<R>());
}

#[test]
fn send_batch_answers_many_sessions_from_the_calling_thread() {
    block_on(scenarios::send_batch_answers_many_sessions::<R>());
}

#[test]
fn a_closed_stream_endpoint_gives_its_port_back_when_its_events_end() {
    for _ in 0..5 {
        block_on(scenarios::closed_stream_endpoint_gives_its_port_back_when_its_events_end::<R>());
    }
}
