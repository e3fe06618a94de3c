//! The blocking driver over real loopback UDP: threads only, no async runtime.
#![allow(missing_docs)]

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use soe_runtime::blocking::Endpoint;
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
        let server = Endpoint::bind(
            "127.0.0.1:0".parse().unwrap(),
            EndpointConfig::server(session()),
        )
        .unwrap();
        let addr = server.local_addr();
        let clone = server.clone();
        let acceptor = server.clone();
        let accept = thread::spawn(move || acceptor.accept().expect("a session"));
        let client = Endpoint::bind(
            "127.0.0.1:0".parse().unwrap(),
            EndpointConfig::client(session()),
        )
        .unwrap();
        let on_client = client.connect(addr).unwrap();
        let on_server = accept.join().unwrap();
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
