//! 10,000 messages each way, concurrently, with the peer (soe-protocol 2.3.0), in both pairings.
//! Sizes run from 1 to 4,000 bytes, so most messages are fragmented (the datagram limit is 512);
//! every message is compared whole, in order. Plaintext (no RC4), no compression: the plain
//! configuration of a PlanetSide 2 login.

mod common;

use std::time::Instant;

use common::*;
use soe_protocol::{ClientEvent, SocketEvent};
use soe_tokio::{Connection, DisconnectReason};

const COUNT: usize = 10_000;
/// The stream our side sends.
const OURS: u8 = 1;
/// The stream the peer sends.
const THEIRS: u8 = 2;

/// Sends our stream on `conn` while reading and checking the peer's.
async fn our_side(conn: Connection) -> Connection {
    let sender = tokio::spawn({
        let conn = conn.clone();
        async move {
            for i in 0..COUNT {
                conn.send(message(i, OURS)).await.expect("send");
            }
        }
    });
    for i in 0..COUNT {
        let got = within(PATIENCE, "the peer's next message", conn.recv())
            .await
            .unwrap_or_else(|| panic!("our connection closed after {i} messages"));
        check_message(&got, i, THEIRS);
    }
    sender.await.unwrap();
    conn
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_each_way_our_client_with_the_peer_server() {
    let _serial = serial().await;
    let start = Instant::now();
    let mut server = Peer::default().server().await;
    let handle = server.handle();
    let ours = our_client(our_session());
    let conn = within(PATIENCE, "connect", ours.connect(server.local_addr()))
        .await
        .unwrap();

    let peer = tokio::spawn(async move {
        let mut received = 0;
        let mut closed = None;
        while closed.is_none() {
            match server_event(&mut server).await {
                SocketEvent::SessionOpened { remote } => {
                    for i in 0..COUNT {
                        handle.enqueue_data(remote, message(i, THEIRS));
                    }
                }
                SocketEvent::DataReceived { data, .. } => {
                    check_message(&data, received, OURS);
                    received += 1;
                }
                SocketEvent::SessionClosed { reason, .. } => closed = Some(reason),
            }
        }
        (received, closed, server)
    });

    let conn = our_side(conn).await;
    // Everything was delivered both ways; our close reaches the peer once its data is acked.
    conn.close(DisconnectReason::Application);
    let (received, closed, server) = within(PATIENCE, "the peer's close", peer).await.unwrap();
    assert_eq!(received, COUNT);
    assert_eq!(closed, Some(soe_protocol::DisconnectReason::Application));
    let stats = conn.stats().unwrap();
    eprintln!(
        "our client <-> peer server: {COUNT} messages each way in {:?}; our stats {stats:?}",
        start.elapsed()
    );
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_each_way_the_peer_client_with_our_server() {
    let _serial = serial().await;
    let start = Instant::now();
    let ours = our_server(our_session());
    let mut client = Peer::default().client(ours.local_addr()).await;
    let handle = client.handle();
    peer_connected(&mut client).await;
    for i in 0..COUNT {
        handle.enqueue_data(message(i, THEIRS));
    }
    let peer = tokio::spawn(async move {
        let mut received = 0;
        let mut closed = None;
        while closed.is_none() {
            match client_event(&mut client).await {
                ClientEvent::Connected => panic!("connected twice"),
                ClientEvent::DataReceived { data, .. } => {
                    check_message(&data, received, OURS);
                    received += 1;
                }
                ClientEvent::Disconnected { reason } => closed = Some(reason),
            }
        }
        (received, closed, client)
    });

    let conn = within(PATIENCE, "accept", ours.accept()).await.unwrap();
    let conn = our_side(conn).await;
    conn.close(DisconnectReason::Application);
    let (received, closed, client) = within(PATIENCE, "the peer's close", peer).await.unwrap();
    assert_eq!(received, COUNT);
    assert_eq!(closed, Some(soe_protocol::DisconnectReason::Application));
    let stats = conn.stats().unwrap();
    eprintln!(
        "peer client <-> our server: {COUNT} messages each way in {:?}; our stats {stats:?}",
        start.elapsed()
    );
    client.abort();
}
