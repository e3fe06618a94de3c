//! Compression with the peer (soe-protocol 2.3.0). The peer inflates what it receives but never
//! deflates what it sends (it writes the flag byte, always 0). Our server announces
//! compression and compresses; our client adopts compression from the peer's server and
//! compresses too. Either way the peer must read every compressed datagram of ours.

mod common;

use bytes::Bytes;
use common::*;
use soe_protocol::{ClientEvent, SocketEvent};
use soe_tokio::DisconnectReason;

const COUNT: usize = 500;

/// Message `i`, 1 to 4,000 bytes: even ones are text that deflates well, odd ones
/// pseudo-random bytes that do not (so both flag values appear on the wire).
fn comp_message(i: usize) -> Bytes {
    let len = message_len(i);
    if i % 2 == 1 {
        let mut state = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        return (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 24) as u8 | 1
            })
            .collect::<Vec<u8>>()
            .into();
    }
    let text = format!("message {i} of the compression test, the same words again and again; ");
    text.bytes().cycle().take(len).collect::<Vec<u8>>().into()
}

/// The compression flag of a contextual datagram (byte 2), for the ops that carry one.
fn flag(r: &Record) -> Option<u8> {
    match r.op() {
        Some(OP_REQUEST | OP_RESPONSE | OP_UNKNOWN_SENDER | 0x1E) | None => None,
        Some(_) => r.bytes.get(2).copied(),
    }
}

/// Checks the flags on the wire: some datagrams of ours are deflated, none of the peer's is.
fn check_flags(ours: &[Record], theirs: &[Record]) {
    let compressed = ours.iter().filter(|r| flag(r) == Some(1)).count();
    let plain = ours.iter().filter(|r| flag(r) == Some(0)).count();
    let plain_data = ours
        .iter()
        .filter(|r| flag(r) == Some(0) && r.bytes.len() > 200)
        .count();
    assert!(
        compressed >= COUNT / 4,
        "we deflated {compressed} datagrams"
    );
    assert!(plain_data > 0, "we sent incompressible data plain");
    let theirs_contextual: Vec<u8> = theirs.iter().filter_map(flag).collect();
    assert!(!theirs_contextual.is_empty());
    assert!(
        theirs_contextual.iter().all(|&f| f == 0),
        "the peer deflated something"
    );
    eprintln!(
        "ours: {compressed} deflated, {plain} plain; the peer's: {} contextual, none deflated",
        theirs_contextual.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_compressing_server_with_the_peer_client() {
    let _serial = serial().await;
    let ours = our_server(our_session().with_compression(true));
    let relay = Relay::new(ours.local_addr()).await;
    let mut client = Peer::default().client(relay.addr).await;
    let handle = client.handle();
    peer_connected(&mut client).await;
    for i in 0..COUNT {
        handle.enqueue_data(comp_message(i));
    }

    // Our server echoes everything.
    let conn = within(PATIENCE, "accept", ours.accept()).await.unwrap();
    let echo = tokio::spawn({
        let conn = conn.clone();
        async move {
            for i in 0..COUNT {
                let got = within(PATIENCE, "the peer's message", conn.recv())
                    .await
                    .expect("open");
                assert_eq!(got, comp_message(i), "message {i} at our server");
                conn.send(got).await.unwrap();
            }
        }
    });
    for i in 0..COUNT {
        match client_event(&mut client).await {
            ClientEvent::DataReceived { data, .. } => {
                assert_eq!(data, comp_message(i), "echo {i} at the peer")
            }
            other => panic!("echo {i}: unexpected {other:?}"),
        }
    }
    echo.await.unwrap();

    let response = first_with_op(&relay.sent(Dir::ToClient), OP_RESPONSE, "SessionResponse");
    assert_eq!(response.bytes[11], 1, "compression announced");
    check_flags(&relay.sent(Dir::ToClient), &relay.sent(Dir::ToServer));

    conn.close(DisconnectReason::Application);
    match client_event(&mut client).await {
        ClientEvent::Disconnected { reason } => {
            assert_eq!(reason, soe_protocol::DisconnectReason::Application)
        }
        other => panic!("unexpected {other:?}"),
    }
    client.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_compresses_for_a_compressing_peer_server() {
    let _serial = serial().await;
    let mut server = Peer {
        compression: true,
        ..Peer::default()
    }
    .server()
    .await;
    let handle = server.handle();
    let relay = Relay::new(server.local_addr()).await;
    let ours = our_client(our_session());
    let conn = within(PATIENCE, "connect", ours.connect(relay.addr))
        .await
        .unwrap();

    // The peer server echoes everything.
    let echo = tokio::spawn(async move {
        let mut received = 0;
        loop {
            match server_event(&mut server).await {
                SocketEvent::SessionOpened { .. } => {}
                SocketEvent::DataReceived { remote, data, .. } => {
                    assert_eq!(
                        data,
                        comp_message(received),
                        "message {received} at the peer"
                    );
                    received += 1;
                    handle.enqueue_data(remote, data);
                }
                SocketEvent::SessionClosed { reason, .. } => return (received, reason, server),
            }
        }
    });
    let sender = tokio::spawn({
        let conn = conn.clone();
        async move {
            for i in 0..COUNT {
                conn.send(comp_message(i)).await.unwrap();
            }
        }
    });
    for i in 0..COUNT {
        let got = within(PATIENCE, "an echo", conn.recv())
            .await
            .expect("open");
        assert_eq!(got, comp_message(i), "echo {i} at our client");
    }
    sender.await.unwrap();
    conn.close(DisconnectReason::Application);
    let (received, reason, server) = within(PATIENCE, "the peer", echo).await.unwrap();
    assert_eq!(received, COUNT);
    assert_eq!(reason, soe_protocol::DisconnectReason::Application);

    let response = first_with_op(&relay.sent(Dir::ToClient), OP_RESPONSE, "SessionResponse");
    assert_eq!(response.bytes[11], 1, "compression announced");
    check_flags(&relay.sent(Dir::ToServer), &relay.sent(Dir::ToClient));
    server.abort();
}
