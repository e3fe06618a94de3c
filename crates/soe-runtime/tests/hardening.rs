//! Regression tests for issue 22 (hardening) on the blocking driver over loopback UDP.
#![allow(missing_docs)]

use std::sync::Arc;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use bytes::Bytes;
use soe_runtime::blocking::Endpoint;
use soe_runtime::{Config, DisconnectReason, EndpointConfig, SessionConfig};

/// How long a test waits for an event that must happen (a loaded 2-core machine included);
/// the tests finish as soon as it does.
const PATIENCE: Duration = Duration::from_secs(30);

fn session(udp_length: u32) -> Arc<SessionConfig> {
    Arc::new(
        SessionConfig::new("SoeHardeningTest")
            .with_connect_timeout(Duration::from_secs(5))
            .with_udp_length(udp_length),
    )
}

fn local() -> std::net::SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

#[test]
fn empty_messages_count_against_the_receive_bound() {
    // Issue 22 A2: with receive_queue_bytes 1024, 100,000 unread empty messages were queued and
    // the connection stayed open. Each message now counts its length plus 64 bytes.
    assert_eq!(soe_runtime::MESSAGE_OVERHEAD, 64);
    let server = Endpoint::bind(
        local(),
        Config::new(Arc::new(EndpointConfig::server(session(512)))).with_receive_queue_bytes(1024),
    )
    .unwrap();
    let addr = server.local_addr();
    let acceptor = server.clone();
    let (tx, rx) = mpsc::channel();
    let reader = thread::spawn(move || {
        // Accepts, never reads, and reports how the connection ended.
        let conn = acceptor.accept().expect("a session");
        tx.send(conn.closed()).unwrap();
    });
    let client = Endpoint::bind(local(), EndpointConfig::client(session(512))).unwrap();
    let conn = client.connect(addr).unwrap();
    for _ in 0..200 {
        if conn.send(Bytes::new()).is_err() {
            break;
        }
    }
    let closed = rx
        .recv_timeout(PATIENCE)
        .expect("the server closes a connection holding 200 unread empty messages");
    assert_eq!(closed.reason, DisconnectReason::ReliableOverflow);
    assert!(!closed.by_peer);
    assert_eq!(conn.closed().reason, DisconnectReason::ReliableOverflow);
    reader.join().unwrap();
    client.close(DisconnectReason::Application);
    server.close(DisconnectReason::ManagerDeleted);
    client.wait_idle();
    server.wait_idle();
}

#[test]
fn a_few_empty_messages_within_the_bound_are_delivered() {
    // The bound still lets a reader that keeps up take every message, empty ones included.
    let server = Endpoint::bind(
        local(),
        Config::new(Arc::new(EndpointConfig::server(session(512)))).with_receive_queue_bytes(1024),
    )
    .unwrap();
    let addr = server.local_addr();
    let acceptor = server.clone();
    let reader = thread::spawn(move || {
        let conn = acceptor.accept().expect("a session");
        let mut got = 0;
        while let Some(m) = conn.recv() {
            assert!(m.is_empty());
            got += 1;
            if got == 10 {
                conn.close(DisconnectReason::Application);
            }
        }
        got
    });
    let client = Endpoint::bind(local(), EndpointConfig::client(session(512))).unwrap();
    let conn = client.connect(addr).unwrap();
    for _ in 0..10 {
        conn.send(Bytes::new()).unwrap();
    }
    assert_eq!(conn.closed().reason, DisconnectReason::Application);
    assert_eq!(reader.join().unwrap(), 10);
    client.close(DisconnectReason::Application);
    server.close(DisconnectReason::ManagerDeleted);
    client.wait_idle();
    server.wait_idle();
}
