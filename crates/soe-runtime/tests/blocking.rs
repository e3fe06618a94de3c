//! The blocking driver over real loopback UDP: threads only, no async runtime.
#![allow(missing_docs)]

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use soe_runtime::blocking::{Connection, Endpoint};
use soe_runtime::{DisconnectReason, EndpointConfig, RecvTimeoutError, SessionConfig};

fn session() -> Arc<SessionConfig> {
    Arc::new(SessionConfig::new("SoeBlockingTest").with_connect_timeout(Duration::from_secs(2)))
}

#[test]
fn blocking_echo_then_close_from_the_client() {
    let server = Endpoint::bind(
        "127.0.0.1:0".parse().unwrap(),
        EndpointConfig::server(session()),
    )
    .unwrap();
    let server_addr = server.local_addr();
    let acceptor = server.clone();
    let echo = thread::spawn(move || {
        let conn = acceptor.accept().expect("a session");
        let mut echoed = 0;
        while let Some(message) = conn.recv() {
            conn.send(message).unwrap();
            echoed += 1;
        }
        (echoed, conn.closed())
    });

    let client = Endpoint::bind(
        "127.0.0.1:0".parse().unwrap(),
        EndpointConfig::client(session()),
    )
    .unwrap();
    let conn = client.connect(server_addr).unwrap();
    assert_eq!(conn.remote_addr(), server_addr);
    // Nothing sent yet: a short wait times out.
    let started = Instant::now();
    assert_eq!(
        conn.recv_timeout(Duration::from_millis(50)),
        Err(RecvTimeoutError::Timeout(Duration::from_millis(50)))
    );
    assert!(started.elapsed() >= Duration::from_millis(50));
    for i in 0..200u32 {
        // Every fifth one is fragmented.
        let len = if i % 5 == 0 {
            3000 + i as usize
        } else {
            1 + i as usize
        };
        let message = Bytes::from(vec![(i % 251) as u8; len]);
        conn.send(message.clone()).unwrap();
        assert_eq!(conn.recv_timeout(Duration::from_secs(5)).unwrap(), message);
    }
    conn.close(DisconnectReason::Application);
    let (echoed, reason) = echo.join().unwrap();
    assert_eq!(echoed, 200);
    assert_eq!(reason.reason, DisconnectReason::Application);
    assert!(reason.by_peer);
    assert_eq!(conn.recv(), None);

    client.close(DisconnectReason::Application);
    client.wait_idle();
    server.close(DisconnectReason::ManagerDeleted);
    server.wait_idle();
    assert!(server.accept().is_none());
}

#[test]
fn blocking_connect_to_nobody_times_out() {
    let dead = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let client = Endpoint::bind(
        "127.0.0.1:0".parse().unwrap(),
        EndpointConfig::client(session()),
    )
    .unwrap();
    let started = Instant::now();
    let err = client.connect(dead).unwrap_err();
    assert!(
        matches!(err, soe_runtime::ConnectError::TimedOut { .. }),
        "{err:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(4));
}

/// Issue 35 §2: a closed endpoint gives its port back once `wait_idle` returns, while its
/// handles (a clone, connections on both sides) are still held.
#[test]
fn a_closed_blocking_endpoint_gives_its_port_back_at_once() {
    for _ in 0..5 {
        let (server, client, on_server, on_client) = connected_pair();
        let addr = server.local_addr();
        let clone = server.clone();
        server.close(DisconnectReason::ManagerDeleted);
        clone.wait_idle();
        let again = Endpoint::bind(addr, EndpointConfig::server(session()));
        assert!(again.is_ok(), "port {addr} still taken: {again:?}");
        assert_eq!(on_client.closed().reason, DisconnectReason::ManagerDeleted);
        assert_eq!(on_server.remote_addr(), client.local_addr());
        assert_eq!(on_client.remote_addr(), addr);
        drop((server, clone, on_server, on_client, again));
    }
}

/// Issue 43 §5: without the OS random generator no endpoint is made, and the error says so
/// (it used to fall back to the clock and std's hash keys, with a log line nobody saw).
#[test]
fn bind_fails_closed_without_the_os_random_generator() {
    soe_session::fail_os_random(true);
    let made = Endpoint::bind(
        "127.0.0.1:0".parse().unwrap(),
        EndpointConfig::server(session()),
    );
    soe_session::fail_os_random(false);
    let err = made.expect_err("an endpoint with weaker keys");
    assert_eq!(err.kind(), std::io::ErrorKind::Other);
    let inner = err
        .get_ref()
        .and_then(|e| e.downcast_ref::<soe_session::EndpointError>());
    assert!(
        matches!(
            inner,
            Some(soe_session::EndpointError::RandomUnavailable { .. })
        ),
        "{err}"
    );
}

/// Issue 43 §1: shards on one port (`reuse_port`) share one set of per-source limits. One
/// host sends a SessionRequest from each of 60 source ports; the kernel spreads them over two
/// shards by the 4-tuple. Each shard used to answer up to its own 30.
#[cfg(target_os = "linux")]
#[test]
fn reuse_port_shards_give_a_host_one_share() {
    use soe_wire::{Packet, SessionRequest};
    let config = || {
        soe_runtime::Config::from(
            EndpointConfig::server(session())
                .with_limit_loopback(true)
                .with_requests_per_source_per_minute(30),
        )
        .with_socket(soe_runtime::SocketConfig::default().with_reuse_port(true))
    };
    let first = Endpoint::bind("127.0.0.1:0".parse().unwrap(), config()).unwrap();
    let addr = first.local_addr();
    let second = Endpoint::bind(addr, config()).unwrap();
    let mut request = Vec::new();
    let mut answered = 0;
    let mut buf = [0u8; 64];
    for port in 0..60u32 {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        request.clear();
        Packet::SessionRequest(SessionRequest {
            protocol_version: 3,
            session_id: 0x4300 + port,
            udp_length: 512,
            application_protocol: b"SoeBlockingTest",
        })
        .encode(&mut request);
        socket.send_to(&request, addr).unwrap();
        if let Ok((n, _)) = socket.recv_from(&mut buf) {
            answered += usize::from(matches!(
                Packet::decode(&buf[..n]),
                Ok(Packet::SessionResponse(_))
            ));
        }
    }
    println!("one host through 60 ports to two shards: {answered} SessionResponses");
    // One share: the bucket's 30, and what it refills meanwhile (one a two seconds).
    assert!((30..=40).contains(&answered), "{answered}");
    for shard in [first, second] {
        shard.close(DisconnectReason::ManagerDeleted);
    }
}

/// Issue 43 §2: the driver threads of endpoints sharing a port (`SO_REUSEPORT`) woke each
/// other with a datagram to the shared port, which the kernel gave to one of them. With no
/// session there is no deadline: only a wake-up that reaches each thread lets `wait_idle`
/// after `close` return.
#[cfg(any(target_os = "linux", target_os = "android"))]
#[test]
fn close_wakes_the_thread_of_every_shard_on_a_shared_port() {
    let config = || {
        soe_runtime::Config::new(Arc::new(EndpointConfig::server(session())))
            .with_socket(soe_runtime::SocketConfig::default().with_reuse_port(true))
    };
    let first = Endpoint::bind("127.0.0.1:0".parse().unwrap(), config()).unwrap();
    let addr = first.local_addr();
    let mut shards = vec![first];
    for _ in 1..4 {
        shards.push(Endpoint::bind(addr, config()).unwrap());
    }
    // The threads block (none has a deadline); close holds whether or not they did yet.
    thread::sleep(Duration::from_millis(200));
    let (done, ended) = std::sync::mpsc::channel();
    for (i, shard) in shards.into_iter().enumerate() {
        let done = done.clone();
        thread::spawn(move || {
            shard.close(DisconnectReason::ManagerDeleted);
            shard.wait_idle();
            let _ = done.send(i);
        });
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut which = Vec::new();
    while let Ok(i) = ended.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        which.push(i);
        if which.len() == 4 {
            break;
        }
    }
    which.sort_unstable();
    assert_eq!(which, [0, 1, 2, 3], "shards whose thread ended after close");
}

/// A server and a client endpoint, and the session between them, seen from each side.
fn connected_pair() -> (Endpoint, Endpoint, Connection, Connection) {
    let server = Endpoint::bind(
        "127.0.0.1:0".parse().unwrap(),
        EndpointConfig::server(session()),
    )
    .unwrap();
    let acceptor = server.clone();
    let accept = thread::spawn(move || acceptor.accept().expect("a session"));
    let client = Endpoint::bind(
        "127.0.0.1:0".parse().unwrap(),
        EndpointConfig::client(session()),
    )
    .unwrap();
    let on_client = client.connect(server.local_addr()).unwrap();
    let on_server = accept.join().unwrap();
    (server, client, on_server, on_client)
}

/// A receive timeout past what an `Instant` holds is no timeout (it overflowed and panicked).
#[test]
fn a_receive_timeout_past_what_an_instant_holds_is_no_timeout() {
    let (_server, _client, on_server, conn) = connected_pair();
    let closer = thread::spawn(move || {
        thread::sleep(Duration::from_millis(50));
        on_server.close(DisconnectReason::Application);
    });
    assert_eq!(
        conn.recv_timeout(Duration::MAX),
        Err(RecvTimeoutError::Closed)
    );
    closer.join().unwrap();
}

/// The flight recorder through the runtime: a connection recorded on request gives its
/// recording while it runs and, after an abnormal end, the whole of it once; a clean end keeps
/// nothing.
#[test]
fn a_connection_keeps_its_recording_after_an_abnormal_end() {
    let server = Endpoint::bind(
        "127.0.0.1:0".parse().unwrap(),
        EndpointConfig::server(session()),
    )
    .unwrap();
    let client = Endpoint::bind(
        "127.0.0.1:0".parse().unwrap(),
        EndpointConfig::client(session()),
    )
    .unwrap();
    for (reason, kept) in [
        (DisconnectReason::ConnectError, true),
        (DisconnectReason::Application, false),
    ] {
        let conn = client.connect(server.local_addr()).unwrap();
        conn.send(Bytes::from_static(b"first")).unwrap();
        let accepted = server.accept().unwrap();
        assert!(accepted.set_recording(true));
        assert_eq!(accepted.recv().unwrap(), "first");
        conn.send(Bytes::from_static(b"second")).unwrap();
        assert_eq!(accepted.recv().unwrap(), "second");
        let live = accepted.take_recording().expect("a live recording");
        assert!(live.entries().count() >= 2, "the datagram and the message");
        assert_eq!(live.end(), None);
        conn.send(Bytes::from_static(b"third")).unwrap();
        assert_eq!(accepted.recv().unwrap(), "third");
        conn.close(reason);
        let closed = accepted.closed();
        assert_eq!((closed.reason, closed.by_peer), (reason, true));
        let recording = accepted.take_recording();
        assert_eq!(recording.is_some(), kept, "{reason:?}");
        if let Some(recording) = recording {
            assert_eq!(recording.end(), Some((reason, true)));
            let delivered = recording.entries().filter(|e| e.data == b"third").count();
            assert_eq!(delivered, 1);
            assert!(accepted.take_recording().is_none(), "taken once");
        }
    }
    client.close(DisconnectReason::Application);
    server.close(DisconnectReason::Application);
    server.wait_idle();
}
