//! Plaintext messages that start with a zero byte, without RC4, with the peer
//! (soe-protocol 2.3.0).
//!
//! A reassembled reliable payload that starts with `00` is read as a protocol packet: `00 19`
//! is a Group, `00 00` an escaped message. We escape every message that starts with `00` (one
//! more `00` in front). Without RC4 the peer neither escapes nor unescapes, so:
//!
//! * what we send reaches its application with our escape byte still in front;
//! * what its application sends starting `00 19` we read as a Group, `00 00` as escaped, exactly
//!   as the peer reads its own traffic;
//! * a plaintext `00 19 …` that is not a well-formed, non-empty Group (a bare `00 19` included)
//!   is delivered whole as one message, and the session goes on (it used to end with
//!   CorruptPacket; the tests at the bottom hold the fix).
//!
//! With RC4 all of these round-trip exactly (see `rc4.rs`).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use soe_protocol::SocketEvent;
use soe_tokio::Connection;

/// Plaintext messages starting with zero, each followed by what the peer's application
/// receives when we send it.
const FROM_US: [(&[u8], &[u8]); 6] = [
    (b"\x00\x19\x03ABC", b"\x00\x00\x19\x03ABC"),
    (b"\x00\x00\x41", b"\x00\x00\x00\x41"),
    (b"\x00", b"\x00\x00"),
    (b"\x00\x05\x01", b"\x00\x00\x05\x01"),
    (b"\x00\x19", b"\x00\x00\x19"),
    (b"\x00\x19\x02\x00\x19", b"\x00\x00\x19\x02\x00\x19"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_zero_leading_plaintext_reaches_the_peer_with_the_escape_byte() {
    let mut server = Peer::default().server().await;
    let ours = our_client(our_session());
    let conn = within(PATIENCE, "connect", ours.connect(server.local_addr()))
        .await
        .unwrap();
    // Sent in one go: small messages travel together in Groups, whose items the peer does not
    // unescape either.
    for (sent, _) in FROM_US {
        conn.send(Bytes::from_static(sent)).await.unwrap();
    }
    conn.send(Bytes::from_static(b"after")).await.unwrap();

    let mut got = Vec::new();
    while got.len() < FROM_US.len() + 1 {
        match server_event(&mut server).await {
            SocketEvent::SessionOpened { .. } => {}
            SocketEvent::DataReceived { data, .. } => got.push(data),
            other => panic!("unexpected {other:?}"),
        }
    }
    for (i, (sent, delivered)) in FROM_US.iter().enumerate() {
        assert_eq!(&got[i][..], *delivered, "we sent {sent:02x?}");
    }
    assert_eq!(&got[FROM_US.len()][..], b"after");
    assert!(conn.close_reason().is_none());
    server.abort();
}

/// Plaintext messages the peer's application sends, each followed by what our application
/// receives (`None`: nothing; the message is lost but the session goes on).
const FROM_THE_PEER: [(&[u8], Option<&[u8]>); 7] = [
    // Read as a Group of one item, "ABC" (the peer reads its own traffic the same way).
    (b"\x00\x19\x03ABC", Some(b"ABC")),
    // Read as an escaped message: one zero goes.
    (b"\x00\x00\x41", Some(b"\x00\x41")),
    (b"\x00", Some(b"\x00")),
    (b"\x00\x05\x01", Some(b"\x00\x05\x01")),
    // Exactly `00 19`: an ack elicitor to us (an empty Group), so no message, although the
    // peer itself would deliver these two bytes. The one plaintext message we cannot carry from
    // a peer that does not escape; see docs/interop.md.
    (b"\x00\x19", None),
    // A Group of one item, a lone zero byte.
    (b"\x00\x19\x01\x00", Some(b"\x00")),
    (b"after", Some(b"after")),
];

/// Our server with a peer client that has sent `first` and been accepted.
async fn accepted_peer() -> (
    soe_tokio::Endpoint,
    soe_protocol::TokioSoeClient,
    Connection,
) {
    let ours = our_server(our_session());
    let mut client = Peer::default().client(ours.local_addr()).await;
    peer_connected(&mut client).await;
    client.handle().enqueue_data(&b"first"[..]);
    let conn = within(PATIENCE, "accept", ours.accept()).await.unwrap();
    let first = within(PATIENCE, "first", conn.recv()).await;
    assert_eq!(first.as_deref(), Some(&b"first"[..]));
    (ours, client, conn)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_peers_zero_leading_plaintext_as_we_read_it() {
    let (_ours, client, conn) = accepted_peer().await;
    for (sent, _) in FROM_THE_PEER {
        client.handle().enqueue_data(Bytes::from_static(sent));
    }
    let want: Vec<&[u8]> = FROM_THE_PEER.iter().filter_map(|(_, d)| *d).collect();
    for (i, w) in want.iter().enumerate() {
        let got = within(PATIENCE, "the peer's next message", conn.recv()).await;
        assert_eq!(got.as_deref(), Some(*w), "message {i}");
    }
    // Nothing more came, and the session is alive: a marker the peer sends after them is the
    // very next message (event-driven, so a slow machine cannot make this pass vacuously).
    client.handle().enqueue_data(Bytes::from_static(b"marker"));
    let next = within(PATIENCE, "the marker", conn.recv()).await;
    assert_eq!(
        next.as_deref(),
        Some(&b"marker"[..]),
        "unexpected message before it"
    );
    assert!(conn.close_reason().is_none());
    conn.send(Bytes::from_static(b"still here")).await.unwrap();
    client.abort();
}

/// Plaintext messages of the peer's application that start `00 19` but are not well-formed
/// Groups: a zero-length item, a truncated item, a nested Group, a truncated length.
const NOT_GROUPS: [&[u8]; 5] = [
    b"\x00\x19\x00",
    b"\x00\x19\x00\x01A",
    b"\x00\x19\x05A",
    b"\x00\x19\x02\x00\x19",
    b"\x00\x19\xff",
];

/// Each of these once ended our session with CorruptPacket, so any peer application message
/// that happened to start `00 19` killed the session. Now a plaintext channel delivers the payload
/// whole as one message and goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_group_from_the_peer_must_not_end_our_session() {
    let mut failures = Vec::new();
    for m in NOT_GROUPS {
        let (_ours, client, conn) = accepted_peer().await;
        client.handle().enqueue_data(Bytes::from_static(m));
        client.handle().enqueue_data(&b"after"[..]);
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_millis(500);
        while let Ok(Some(d)) = tokio::time::timeout_at(deadline.into(), conn.recv()).await {
            got.push(d);
            if got.last().map(|d| &d[..]) == Some(b"after") {
                break;
            }
        }
        if got.last().map(|d| &d[..]) != Some(b"after") || conn.close_reason().is_some() {
            failures.push(format!(
                "{m:02x?}: received {got:02x?}, session {:?}",
                conn.close_reason()
            ));
        }
        client.abort();
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The same at the reliable layer, without sockets: one ReliableData packet whose payload is
/// `00 19 05 41` is delivered as a message, not failed with a wire error (which the session
/// would map to CorruptPacket).
#[test]
fn minimal_malformed_group_payload_is_not_fatal_to_the_channel() {
    let config = Arc::new(soe_reliable::ReliableConfig::default());
    let mut rx = soe_reliable::ReliableChannel::new(soe_wire::Channel::ZERO, config, 496, None)
        .expect("channel");
    let now = Instant::now();
    let result = rx.handle_data(now, 0, b"\x00\x19\x05A");
    assert!(result.is_ok(), "handle_data: {result:?}");
    rx.handle_data(now, 1, b"after").expect("the next packet");
    let mut got = Vec::new();
    while let Some(m) = rx.poll_message() {
        got.push(m);
    }
    assert_eq!(got.last().map(|m| &m[..]), Some(&b"after"[..]), "{got:?}");
}
