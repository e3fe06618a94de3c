//! Disconnect between our side and the peer (soe-protocol 2.3.0), from either side, in both
//! pairings; and what happens when a Disconnect is lost: we repeat ours (5 times, 100 ms
//! apart), the peer sends its own once and never again, so we notice its close only by our idle
//! timeout.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use soe_protocol::{ClientEvent, SocketEvent, TokioSoeServer};
use soe_tokio::{CloseReason, Connection, DisconnectReason, Endpoint};

type PeerReason = soe_protocol::DisconnectReason;

/// Our client connected to a peer server through `relay`, with one message exchanged so that
/// both sides know the session. Returns our connection and the peer's view of our address.
async fn our_client_session(
    server: &mut TokioSoeServer,
    relay: &Relay,
    ours: &Endpoint,
) -> (Connection, SocketAddr) {
    let conn = within(PATIENCE, "connect", ours.connect(relay.addr))
        .await
        .unwrap();
    conn.send(Bytes::from_static(b"hi")).await.unwrap();
    loop {
        match server_event(server).await {
            SocketEvent::SessionOpened { .. } => {}
            SocketEvent::DataReceived { remote, .. } => return (conn, remote),
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_closes_and_the_peer_server_sees_it() {
    let mut server = Peer::default().server().await;
    let relay = Relay::new(server.local_addr()).await;
    let ours = our_client(our_session());
    let (conn, remote) = our_client_session(&mut server, &relay, &ours).await;

    conn.close(DisconnectReason::Application);
    match server_event(&mut server).await {
        SocketEvent::SessionClosed { remote: r, reason } => {
            assert_eq!(r, remote);
            assert_eq!(reason, PeerReason::Application);
        }
        other => panic!("unexpected {other:?}"),
    }
    let closed = within(PATIENCE, "our close", conn.closed()).await;
    assert_eq!(
        closed,
        CloseReason::new(DisconnectReason::Application, false)
    );
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_peer_server_closes_and_our_client_sees_it() {
    let mut server = Peer::default().server().await;
    let relay = Relay::new(server.local_addr()).await;
    let ours = our_client(our_session());
    let (conn, remote) = our_client_session(&mut server, &relay, &ours).await;

    server.handle().terminate(remote, PeerReason::Application);
    let closed = within(PATIENCE, "our close", conn.closed()).await;
    assert_eq!(
        closed,
        CloseReason::new(DisconnectReason::Application, true)
    );
    match server_event(&mut server).await {
        SocketEvent::SessionClosed { reason, .. } => assert_eq!(reason, PeerReason::Application),
        other => panic!("unexpected {other:?}"),
    }
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_peer_client_closes_and_our_server_sees_it() {
    let ours = our_server(our_session());
    let mut client = Peer::default().client(ours.local_addr()).await;
    peer_connected(&mut client).await;
    client.handle().enqueue_data(&b"hi"[..]);
    let conn = within(PATIENCE, "accept", ours.accept()).await.unwrap();
    assert_eq!(
        within(PATIENCE, "hi", conn.recv()).await.as_deref(),
        Some(&b"hi"[..])
    );

    client.handle().terminate(PeerReason::Application);
    let closed = within(PATIENCE, "our close", conn.closed()).await;
    assert_eq!(
        closed,
        CloseReason::new(DisconnectReason::Application, true)
    );
    match client_event(&mut client).await {
        ClientEvent::Disconnected { reason } => assert_eq!(reason, PeerReason::Application),
        other => panic!("unexpected {other:?}"),
    }
    client.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_server_closes_and_the_peer_client_sees_it() {
    let ours = our_server(our_session());
    let mut client = Peer::default().client(ours.local_addr()).await;
    peer_connected(&mut client).await;
    client.handle().enqueue_data(&b"hi"[..]);
    let conn = within(PATIENCE, "accept", ours.accept()).await.unwrap();

    conn.close(DisconnectReason::ConnectionRefused);
    match client_event(&mut client).await {
        ClientEvent::Disconnected { reason } => {
            assert_eq!(reason, PeerReason::ConnectionRefused)
        }
        other => panic!("unexpected {other:?}"),
    }
    let closed = within(PATIENCE, "our close", conn.closed()).await;
    assert_eq!(
        closed,
        CloseReason::new(DisconnectReason::ConnectionRefused, false)
    );
    client.abort();
}

/// The peer's Disconnect is lost: it never sends another, so our client learns of the close
/// only from its idle timeout (shortened to 400 ms here; 30 s by default).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_peer_does_not_resend_a_lost_disconnect() {
    let mut server = Peer::default().server().await;
    let relay = Relay::with_filter(
        server.local_addr(),
        Box::new(|dir, bytes| dir == Dir::ToClient && op(bytes) == Some(OP_DISCONNECT)),
    )
    .await;
    let idle = Duration::from_millis(400);
    let ours = our_client(our_session().with_idle_timeout(Some(idle)));
    let (conn, remote) = our_client_session(&mut server, &relay, &ours).await;

    let start = relay.now();
    server.handle().terminate(remote, PeerReason::Application);
    let closed = within(PATIENCE, "our close", conn.closed()).await;
    let waited = relay.now() - start;
    assert_eq!(closed, CloseReason::new(DisconnectReason::Timeout, false));
    assert!(waited >= idle / 2, "closed after {waited:?}");

    // Give a resend every chance, then count: one Disconnect from the peer, dropped.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let theirs: Vec<Record> = relay
        .sent(Dir::ToClient)
        .into_iter()
        .filter(|r| r.op() == Some(OP_DISCONNECT))
        .collect();
    assert_eq!(theirs.len(), 1, "the peer's Disconnects: {theirs:?}");
    // Ours (Timeout) went out repeatedly to a peer that had forgotten the session; it answers
    // nothing (no UnknownSender).
    let ours_disconnects: Vec<Record> = relay
        .sent(Dir::ToServer)
        .into_iter()
        .filter(|r| r.op() == Some(OP_DISCONNECT))
        .collect();
    assert!(!ours_disconnects.is_empty());
    assert!(
        relay
            .sent(Dir::ToClient)
            .iter()
            .all(|r| r.at < ours_disconnects[0].at || r.op() == Some(OP_DISCONNECT)),
        "the peer answered after its close"
    );
    eprintln!(
        "our client closed {waited:?} after the peer's lost Disconnect; we sent {} Disconnects",
        ours_disconnects.len()
    );
    server.abort();
}

/// Our first Disconnect is lost: we repeat it, so the peer still sees the close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_repeated_disconnect_survives_a_loss() {
    let mut server = Peer::default().server().await;
    let mut dropped = 0;
    let relay = Relay::with_filter(
        server.local_addr(),
        Box::new(move |dir, bytes| {
            let hit = dir == Dir::ToServer && op(bytes) == Some(OP_DISCONNECT) && dropped == 0;
            dropped += usize::from(hit);
            hit
        }),
    )
    .await;
    let ours = our_client(our_session());
    let (conn, remote) = our_client_session(&mut server, &relay, &ours).await;

    conn.close(DisconnectReason::Application);
    match server_event(&mut server).await {
        SocketEvent::SessionClosed { remote: r, reason } => {
            assert_eq!(r, remote);
            assert_eq!(reason, PeerReason::Application);
        }
        other => panic!("unexpected {other:?}"),
    }
    let ours_disconnects: Vec<Record> = relay
        .sent(Dir::ToServer)
        .into_iter()
        .filter(|r| r.op() == Some(OP_DISCONNECT))
        .collect();
    assert!(ours_disconnects.len() >= 2);
    assert!(ours_disconnects[0].dropped && !ours_disconnects[1].dropped);
    server.abort();
}
