//! Issue 22 A9 on the async driver: a 1400-byte udp_length end to end, and datagrams larger
//! than the server announced (from a peer that ignores it) read whole.
#![allow(missing_docs)]

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use bytes::Bytes;
use soe_tokio::{DisconnectReason, Endpoint, EndpointConfig, SessionConfig};

/// How long the test waits for an event that must happen; it goes on as soon as it does.
const PATIENCE: Duration = Duration::from_secs(30);

fn session(udp_length: u32) -> Arc<SessionConfig> {
    Arc::new(
        SessionConfig::new("SoeUdpLengthTest")
            .with_connect_timeout(Duration::from_secs(5))
            .with_udp_length(udp_length),
    )
}

fn local() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// A one-socket relay that rewrites the udp_length of the server's SessionReply, so the client
/// sends datagrams larger than the server announced. Returns its address and, when `stop` is
/// set, the largest datagram the client sent.
fn rewriting_relay(
    server: SocketAddr,
    udp_length: u32,
    stop: Arc<AtomicBool>,
) -> (SocketAddr, thread::JoinHandle<usize>) {
    let socket = UdpSocket::bind(local()).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let addr = socket.local_addr().unwrap();
    let relay = thread::spawn(move || {
        let mut buf = vec![0u8; 65536];
        let mut client = None;
        let mut largest = 0;
        while !stop.load(Ordering::SeqCst) {
            let Ok((len, from)) = socket.recv_from(&mut buf) else {
                continue;
            };
            let datagram = &mut buf[..len];
            if from == server {
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

/// Echoes 10 messages of 5,000 bytes from a client with `client_udp_length` to a server with
/// `server_udp_length`, through a relay announcing `relay_to` to the client if given; returns
/// the client's session statistics and the largest datagram the relay saw from the client.
async fn echo(
    server_udp_length: u32,
    client_udp_length: u32,
    relay_to: Option<u32>,
) -> (soe_tokio::SessionStats, usize) {
    let server =
        Endpoint::bind(local(), EndpointConfig::server(session(server_udp_length))).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (target, relay) = match relay_to {
        Some(n) => {
            let (addr, relay) = rewriting_relay(server.local_addr(), n, stop.clone());
            (addr, Some(relay))
        }
        None => (server.local_addr(), None),
    };
    let acceptor = server.clone();
    let echo = tokio::spawn(async move {
        let conn = acceptor.accept().await.expect("a session");
        while let Some(m) = conn.recv().await {
            if conn.send(m).await.is_err() {
                break;
            }
        }
    });
    let client =
        Endpoint::bind(local(), EndpointConfig::client(session(client_udp_length))).unwrap();
    let conn = client.connect(target).await.unwrap();
    for i in 0..10u8 {
        let message = Bytes::from(vec![i; 5000]);
        conn.send(message.clone()).await.unwrap();
        let back = tokio::time::timeout(PATIENCE, conn.recv())
            .await
            .unwrap_or_else(|_| panic!("message {i} not echoed"))
            .expect("open");
        assert_eq!(back, message);
    }
    let stats = conn.stats().expect("open");
    conn.close(DisconnectReason::Application);
    tokio::time::timeout(PATIENCE, echo).await.unwrap().unwrap();
    stop.store(true, Ordering::SeqCst);
    let largest = relay.map_or(0, |r| r.join().unwrap());
    client.close(DisconnectReason::Application);
    server.close(DisconnectReason::ManagerDeleted);
    client.wait_idle().await;
    server.wait_idle().await;
    (stats, largest)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_1400_byte_udp_length_works_end_to_end() {
    let (stats, _) = echo(1400, 1400, None).await;
    assert_eq!(stats.crc_rejects, 0);
    assert!(
        stats.bytes_received / stats.datagrams_received.max(1) > 700,
        "datagrams of up to 1400 bytes were used: {stats:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn datagrams_beyond_the_announced_udp_length_are_read_whole() {
    let (_, largest) = echo(512, 1400, Some(1400)).await;
    assert!(
        largest > 1000,
        "the client sent datagrams of up to 1400 bytes: {largest}"
    );
}
