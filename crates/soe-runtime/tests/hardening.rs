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

/// Echoes `count` messages of `len` bytes between two blocking endpoints with `udp_length`;
/// returns the client's statistics.
fn blocking_echo(udp_length: u32, count: usize, len: usize) -> soe_runtime::SessionStats {
    let server = Endpoint::bind(local(), EndpointConfig::server(session(udp_length))).unwrap();
    let addr = server.local_addr();
    let acceptor = server.clone();
    let echo = thread::spawn(move || {
        let conn = acceptor.accept().expect("a session");
        while let Some(m) = conn.recv() {
            conn.send(m).unwrap();
        }
    });
    let client = Endpoint::bind(local(), EndpointConfig::client(session(udp_length))).unwrap();
    let conn = client.connect(addr).unwrap();
    for i in 0..count {
        let message = Bytes::from(vec![(i % 251) as u8; len]);
        conn.send(message.clone()).unwrap();
        let back = conn
            .recv_timeout(PATIENCE)
            .unwrap_or_else(|e| panic!("message {i} of {len} bytes not echoed: {e:?}"));
        assert_eq!(back, message, "message {i}");
    }
    let stats = conn.stats().expect("open");
    conn.close(DisconnectReason::Application);
    echo.join().unwrap();
    client.close(DisconnectReason::Application);
    server.close(DisconnectReason::ManagerDeleted);
    client.wait_idle();
    server.wait_idle();
    stats
}

#[test]
fn a_1400_byte_udp_length_works_end_to_end_on_the_blocking_driver() {
    // Issue 22 A9: the blocking driver reads each datagram whole up to the announced udp_length.
    let stats = blocking_echo(1400, 20, 6000);
    assert_eq!(stats.crc_rejects, 0, "no datagram was cut");
    assert!(
        stats.bytes_received / stats.datagrams_received.max(1) > 700,
        "datagrams of up to 1400 bytes were used: {stats:?}"
    );
}

/// A one-socket relay between a client and `server` that rewrites the udp_length of the
/// server's SessionReply to `udp_length`, so the client sends datagrams larger than the server
/// announced (as peers that ignore the other side's udp_length do). Runs until `stop` is set.
fn rewriting_relay(
    server: std::net::SocketAddr,
    udp_length: u32,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> (std::net::SocketAddr, thread::JoinHandle<usize>) {
    let socket = std::net::UdpSocket::bind(local()).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let addr = socket.local_addr().unwrap();
    let relay = thread::spawn(move || {
        let mut buf = vec![0u8; 65536];
        let mut client = None;
        let mut largest = 0;
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            let Ok((len, from)) = socket.recv_from(&mut buf) else {
                continue;
            };
            let datagram = &mut buf[..len];
            if from == server {
                // SessionReply: 00 02, id, seed, crc length, compression, encryption, udp_length.
                if len == 21 && datagram[..2] == [0, 2] {
                    datagram[13..17].copy_from_slice(&udp_length.to_be_bytes());
                }
                if let Some(client) = client {
                    let _ = socket.send_to(datagram, client);
                }
            } else {
                client = Some(from);
                largest = largest.max(len);
                let _ = socket.send_to(datagram, server);
            }
        }
        largest
    });
    (addr, relay)
}

#[test]
fn datagrams_beyond_the_announced_udp_length_are_read_whole() {
    // Issue 22 A9 (and docs/interop.md): a peer may send up to its own udp_length whatever we
    // announce; without GRO (the blocking driver, non-Linux platforms) the receive slot must
    // still hold such a datagram whole, or it is cut and fails its CRC for good.
    let server = Endpoint::bind(local(), EndpointConfig::server(session(512))).unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (relay_addr, relay) = rewriting_relay(server.local_addr(), 1400, stop.clone());
    let acceptor = server.clone();
    let echo = thread::spawn(move || {
        let conn = acceptor.accept().expect("a session");
        while let Some(m) = conn.recv() {
            conn.send(m).unwrap();
        }
        conn.stats()
    });
    let client = Endpoint::bind(local(), EndpointConfig::client(session(1400))).unwrap();
    let conn = client.connect(relay_addr).unwrap();
    for i in 0..10 {
        let message = Bytes::from(vec![i as u8; 5000]);
        conn.send(message.clone()).unwrap();
        let back = conn
            .recv_timeout(PATIENCE)
            .unwrap_or_else(|e| panic!("message {i} not echoed: {e:?}"));
        assert_eq!(back, message);
    }
    conn.close(DisconnectReason::Application);
    let _ = echo.join().unwrap();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let largest = relay.join().unwrap();
    assert!(
        largest > 1000,
        "the client sent datagrams of up to 1400 bytes: {largest}"
    );
    client.close(DisconnectReason::Application);
    server.close(DisconnectReason::ManagerDeleted);
    client.wait_idle();
    server.wait_idle();
}
