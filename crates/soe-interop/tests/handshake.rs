//! Handshake with the peer (soe-protocol 2.3.0), both ways, with equal and with mismatched
//! application protocol names.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use soe_protocol::{ClientEvent, SocketEvent};
use soe_tokio::{ConnectError, DisconnectReason};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_connects_to_the_peer_server() {
    let mut server = Peer::default().server().await;
    let relay = Relay::new(server.local_addr()).await;
    let ours = our_client(our_session());

    let conn = within(PATIENCE, "our connect", ours.connect(relay.addr))
        .await
        .expect("the handshake with the peer server");

    // The peer server reports the session only once a packet follows its SessionResponse: our
    // client's NetStatusRequest probe, sent right after the handshake, does it.
    match server_event(&mut server).await {
        SocketEvent::SessionOpened { remote } => assert_eq!(remote, relay.addr),
        other => panic!("expected SessionOpened, got {other:?}"),
    }

    // The session works both ways.
    conn.send(Bytes::from_static(b"ping")).await.unwrap();
    let remote = match server_event(&mut server).await {
        SocketEvent::DataReceived { remote, data, .. } => {
            assert_eq!(&data[..], b"ping");
            remote
        }
        other => panic!("expected DataReceived, got {other:?}"),
    };
    server.handle().enqueue_data(remote, &b"pong"[..]);
    let got = within(PATIENCE, "the peer's reply", conn.recv()).await;
    assert_eq!(got.as_deref(), Some(&b"pong"[..]));

    // On the wire: our request carries our udp_length and the name; its response echoes our
    // session id, and announces CRC length 2, no compression, udp_length 512, version 3.
    let log = relay.log();
    let request = &first_with_op(&log, OP_REQUEST, "SessionRequest").bytes;
    let response = &first_with_op(&log, OP_RESPONSE, "SessionResponse").bytes;
    assert_eq!(&request[2..6], &3u32.to_be_bytes(), "protocol version");
    assert_eq!(&request[10..14], &512u32.to_be_bytes(), "our udp_length");
    assert_eq!(&request[14..], b"InteropProto\0");
    assert_eq!(response.len(), 21);
    assert_eq!(&response[2..6], &request[6..10], "session id echoed");
    assert_eq!(response[10], 2, "crc_length");
    assert_eq!(response[11], 0, "compression");
    assert_eq!(&response[13..17], &512u32.to_be_bytes(), "peer udp_length");
    assert_eq!(&response[17..21], &3u32.to_be_bytes(), "protocol version");
    // Exactly one request: the response came before our first retry.
    assert_eq!(log.iter().filter(|r| r.op() == Some(OP_REQUEST)).count(), 1);
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_peer_client_connects_to_our_server() {
    let ours = our_server(our_session());
    let relay = Relay::new(ours.local_addr()).await;
    let mut client = Peer::default().client(relay.addr).await;
    peer_connected(&mut client).await;

    // Our server keeps the session half-open (not yet accepted) until the client's first
    // packet with a valid CRC. The peer's client sends nothing after the handshake until it has
    // data (or after 25 s of silence, a heartbeat), so `accept` waits for its first message.
    let early = tokio::time::timeout(Duration::from_millis(100), ours.accept()).await;
    assert!(early.is_err(), "accepted before the peer sent anything");

    client.handle().enqueue_data(&b"hello"[..]);
    let conn = within(PATIENCE, "accept", ours.accept()).await.unwrap();
    assert_eq!(conn.remote_addr(), relay.addr);
    let got = within(PATIENCE, "the peer's first message", conn.recv()).await;
    assert_eq!(got.as_deref(), Some(&b"hello"[..]));
    conn.send(Bytes::from_static(b"welcome")).await.unwrap();
    match client_event(&mut client).await {
        ClientEvent::DataReceived { data, .. } => assert_eq!(&data[..], b"welcome"),
        other => panic!("expected DataReceived, got {other:?}"),
    }

    let log = relay.log();
    let request = &first_with_op(&log, OP_REQUEST, "SessionRequest").bytes;
    let response = &first_with_op(&log, OP_RESPONSE, "SessionResponse").bytes;
    assert_eq!(&request[10..14], &512u32.to_be_bytes(), "peer udp_length");
    assert_eq!(&request[14..], b"InteropProto\0");
    assert_eq!(&response[2..6], &request[6..10], "session id echoed");
    assert_eq!(response[10], 2, "crc_length");
    client.abort();
}

/// Our client asks for a name the peer server does not serve: the peer drops the request
/// without any answer (it raises `SessionClosed { ProtocolMismatch }` locally, with no
/// `SessionOpened` before), so our client retries and then gives up with its connect timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mismatch_our_client_with_the_peer_server_times_out() {
    let mut server = Peer {
        proto: "SomethingElse".into(),
        ..Peer::default()
    }
    .server()
    .await;
    let relay = Relay::new(server.local_addr()).await;
    let ours = our_client(
        our_session()
            .with_retry_interval(Duration::from_millis(50))
            .with_connect_timeout(Duration::from_millis(300)),
    );
    let err = within(PATIENCE, "our connect", ours.connect(relay.addr))
        .await
        .expect_err("a mismatched name must not connect");
    assert!(matches!(err, ConnectError::TimedOut { .. }), "{err:?}");

    // Each of our requests made the peer open and close a session silently.
    let requests = relay
        .sent(Dir::ToServer)
        .iter()
        .filter(|r| r.op() == Some(OP_REQUEST))
        .count();
    assert!(requests >= 2, "our client retried ({requests} requests)");
    assert!(
        relay.sent(Dir::ToClient).is_empty(),
        "the peer answered a mismatched request: {:?}",
        relay.sent(Dir::ToClient)
    );
    for _ in 0..requests {
        match server_event(&mut server).await {
            SocketEvent::SessionClosed { reason, .. } => {
                assert_eq!(reason, soe_protocol::DisconnectReason::ProtocolMismatch);
            }
            other => panic!("expected SessionClosed, got {other:?}"),
        }
    }
    server.abort();
}

/// The peer's client asks our server for a name it does not serve. Our server refuses with an
/// 8-byte Disconnect(ProtocolMismatch) carrying no CRC (the client has no seed yet). The peer
/// cannot read that refusal as such: it is shorter than the 10 bytes it expects of a
/// Disconnect with a 2-byte CRC, so it ends the attempt at once as `CorruptPacket` (and sends
/// a Disconnect(CorruptPacket) of its own, which our server, having no session, answers with
/// UnknownSender). Either way the attempt fails at once rather than by timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mismatch_the_peer_client_with_our_server_is_refused() {
    let ours = our_server(our_session());
    let relay = Relay::new(ours.local_addr()).await;
    let mut client = Peer {
        proto: "SomethingElse".into(),
        ..Peer::default()
    }
    .client(relay.addr)
    .await;
    let reason = match client_event(&mut client).await {
        ClientEvent::Disconnected { reason } => reason,
        other => panic!("expected Disconnected, got {other:?}"),
    };
    assert_eq!(reason, soe_protocol::DisconnectReason::CorruptPacket);

    let to_client = relay.sent(Dir::ToClient);
    let refusal = &to_client.first().expect("our refusal").bytes;
    let mut want = vec![0x00, 0x05];
    let request = &relay.sent(Dir::ToServer)[0].bytes;
    want.extend_from_slice(&request[6..10]);
    want.extend_from_slice(&DisconnectReason::ProtocolMismatch.to_u16().to_be_bytes());
    assert_eq!(refusal, &want, "our refusal");
    let ours_accepted = tokio::time::timeout(Duration::from_millis(50), ours.accept()).await;
    assert!(ours_accepted.is_err(), "nothing is accepted");
    client.abort();
}

/// The peer server's SessionResponse is lost. Our client repeats its SessionRequest; the peer
/// takes a second request for a running session as an error and ends that session with
/// Disconnect(ConnectError), which our client, still without a CRC seed, ignores; the third
/// request finds no session at the peer and opens a fresh one. So we connect, one retry
/// interval later than with a server that answers a repeated request again (as ours does).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_session_response_costs_our_client_two_retries() {
    let mut server = Peer::default().server().await;
    let mut dropped = false;
    let relay = Relay::with_filter(
        server.local_addr(),
        Box::new(move |dir, bytes| {
            let hit = !dropped && dir == Dir::ToClient && op(bytes) == Some(OP_RESPONSE);
            dropped |= hit;
            hit
        }),
    )
    .await;
    let ours = our_client(our_session().with_retry_interval(Duration::from_millis(100)));
    let conn = within(PATIENCE, "our connect", ours.connect(relay.addr))
        .await
        .expect("connect despite the lost response");
    conn.send(Bytes::from_static(b"made it")).await.unwrap();
    loop {
        match server_event(&mut server).await {
            SocketEvent::SessionClosed { reason, .. } => {
                assert_eq!(reason, soe_protocol::DisconnectReason::ConnectError);
            }
            SocketEvent::SessionOpened { .. } => {}
            SocketEvent::DataReceived { data, .. } => {
                assert_eq!(&data[..], b"made it");
                break;
            }
        }
    }
    let log = relay.log();
    let requests = log.iter().filter(|r| r.op() == Some(OP_REQUEST)).count();
    let responses = log.iter().filter(|r| r.op() == Some(OP_RESPONSE)).count();
    let refusal = log
        .iter()
        .find(|r| r.dir == Dir::ToClient && r.op() == Some(OP_DISCONNECT))
        .expect("the peer's Disconnect after our second request");
    // `00 05 | session id | reason 11 | CRC`: framed with the seed our client never got.
    assert_eq!(refusal.bytes.len(), 10);
    assert_eq!(&refusal.bytes[6..8], &11u16.to_be_bytes());
    assert_eq!((requests, responses), (3, 2));
    assert!(conn.close_reason().is_none());
    server.abort();
}
