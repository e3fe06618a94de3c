//! What the peer (soe-protocol 2.3.0) does differently from us, observed through the relay,
//! and how our side copes. (Two more are in other files: it never compresses, in
//! `compression.rs`; it does not resend a lost Disconnect, in `disconnect.rs`.)

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use common::*;
use soe_protocol::{ClientEvent, SocketEvent, TokioSoeClient};
use soe_tokio::{CloseReason, Config, DisconnectReason, Endpoint, EndpointConfig};

type PeerReason = soe_protocol::DisconnectReason;

/// The longest datagram in `records` that carries reliable data.
fn longest_data(records: &[Record]) -> usize {
    records
        .iter()
        .filter(|r| is_data(r.op()))
        .map(|r| r.bytes.len())
        .max()
        .unwrap_or(0)
}

/// The peer client sends `count` test messages; our server echoes them; the peer checks the
/// echoes. Returns the peer client.
async fn echo_through_our_server(
    ours: &Endpoint,
    mut client: TokioSoeClient,
    count: usize,
) -> TokioSoeClient {
    peer_connected(&mut client).await;
    for i in 0..count {
        client.handle().enqueue_data(message(i, 31));
    }
    let conn = within(PATIENCE, "accept", ours.accept()).await.unwrap();
    let echo = tokio::spawn({
        let conn = conn.clone();
        async move {
            for i in 0..count {
                let got = within(PATIENCE, "a message", conn.recv()).await.unwrap();
                check_message(&got, i, 31);
                conn.send(got).await.unwrap();
            }
        }
    });
    for i in 0..count {
        match client_event(&mut client).await {
            ClientEvent::DataReceived { data, .. } => check_message(&data, i, 31),
            other => panic!("echo {i}: unexpected {other:?}"),
        }
    }
    echo.await.unwrap();
    assert!(conn.close_reason().is_none());
    client
}

/// Our server announces udp_length 400. The peer's client ignores it and fragments against its
/// own 512: its datagrams are 512 bytes, longer than we announced. Our receive path does not
/// reject them (the driver's buffer is at least 9,000 bytes and the session checks no length),
/// so everything arrives; our own datagrams stay within 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_peer_fragments_against_its_own_udp_length_and_we_accept_it() {
    let _serial = serial().await;
    let ours = our_server(our_session().with_udp_length(400));
    let relay = Relay::new(ours.local_addr()).await;
    let client = Peer::default().client(relay.addr).await;
    let client = echo_through_our_server(&ours, client, 100).await;

    let response = first_with_op(&relay.sent(Dir::ToClient), OP_RESPONSE, "SessionResponse");
    assert_eq!(&response.bytes[13..17], &400u32.to_be_bytes());
    let theirs = longest_data(&relay.sent(Dir::ToServer));
    let ours_max = longest_data(&relay.sent(Dir::ToClient));
    assert_eq!(theirs, 512, "the peer's longest datagram");
    assert!(ours_max <= 400, "our longest datagram: {ours_max}");
    eprintln!(
        "udp_length 400 announced: the peer sent up to {theirs} bytes, we sent up to {ours_max}"
    );
    client.abort();
}

/// The other way: the peer's server announces 1,024 and our client 512. The peer sends
/// 1,024-byte datagrams to a client that asked for 512; we accept them, and send at most 512.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_peer_server_sends_beyond_our_udp_length_and_we_accept_it() {
    let _serial = serial().await;
    let mut server = Peer {
        udp_length: 1024,
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
    let count = 100;
    let echo = tokio::spawn(async move {
        let mut n = 0;
        while n < count {
            match server_event(&mut server).await {
                SocketEvent::SessionOpened { .. } => {}
                SocketEvent::DataReceived { remote, data, .. } => {
                    handle.enqueue_data(remote, data);
                    n += 1;
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        server
    });
    for i in 0..count {
        conn.send(message(i, 32)).await.unwrap();
    }
    for i in 0..count {
        let got = within(PATIENCE, "an echo", conn.recv()).await.unwrap();
        check_message(&got, i, 32);
    }
    let server = echo.await.unwrap();
    assert_eq!(longest_data(&relay.sent(Dir::ToClient)), 1024);
    assert!(longest_data(&relay.sent(Dir::ToServer)) <= 512);
    assert!(conn.close_reason().is_none());
    server.abort();
}

/// How far that tolerance goes: a peer with udp_length 12,000 sends an 11,000-byte message as
/// one 11,006-byte ReliableData datagram. Our driver's receive slots are `max(announced udp_length, 9000)`
/// bytes, times the GRO segment count where the platform coalesces (Linux: 64), so on Linux
/// even such a datagram is read whole and accepted. Without GRO the slot is 9,000 bytes: the
/// datagram would be cut, fail its CRC and never arrive (the peer resending it forever), unless
/// `Config::max_datagram_size` is raised, which the second half checks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_udp_length_beyond_9000_bytes() {
    let _serial = serial().await;
    let peer = Peer {
        udp_length: 12_000,
        ..Peer::default()
    };
    let big = Bytes::from(vec![0x42u8; 11_000]);

    // Default configuration.
    let ours = our_server(our_session());
    let relay = Relay::new(ours.local_addr()).await;
    let mut client = peer.client(relay.addr).await;
    peer_connected(&mut client).await;
    client.handle().enqueue_data(big.clone());
    let conn = within(PATIENCE, "accept", ours.accept()).await.unwrap();
    let got = tokio::time::timeout(Duration::from_millis(700), conn.recv()).await;
    assert_eq!(longest_data(&relay.sent(Dir::ToServer)), 11_006);
    if cfg!(target_os = "linux") {
        assert_eq!(
            got.ok().flatten(),
            Some(big.clone()),
            "default config on Linux"
        );
    } else {
        eprintln!(
            "default config, no GRO: the big datagram arrived: {}",
            got.is_ok()
        );
    }
    assert!(conn.close_reason().is_none());
    client.abort();

    // A receive buffer sized for it, whatever the platform.
    let config = Config::new(Arc::new(EndpointConfig::server(Arc::new(our_session()))))
        .with_max_datagram_size(Some(16 * 1024));
    let ours = Endpoint::bind(localhost(), config).unwrap();
    let mut client = peer.client(ours.local_addr()).await;
    peer_connected(&mut client).await;
    client.handle().enqueue_data(big.clone());
    let conn = within(PATIENCE, "accept", ours.accept()).await.unwrap();
    assert_eq!(within(PATIENCE, "big", conn.recv()).await, Some(big));
    client.abort();
}

/// The peer sends every reliable packet and every ack as a datagram of its own: no
/// MultiPacket, no Group. 50 small messages from it take 50 data datagrams; 50 from us take a
/// few (we pack them into Groups and MultiPackets). It never answers our NetStatusRequest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_peer_sends_one_datagram_per_packet() {
    let _serial = serial().await;
    let mut server = Peer::default().server().await;
    let handle = server.handle();
    let relay = Relay::new(server.local_addr()).await;
    let ours = our_client(our_session());
    let conn = within(PATIENCE, "connect", ours.connect(relay.addr))
        .await
        .unwrap();
    let remote = match server_event(&mut server).await {
        SocketEvent::SessionOpened { remote } => remote,
        other => panic!("unexpected {other:?}"),
    };
    let small = |i: usize| Bytes::from(format!("small message {i:02}"));
    for i in 0..50 {
        conn.try_send(small(i)).unwrap();
        handle.enqueue_data(remote, small(i));
    }
    for i in 0..50 {
        let got = within(PATIENCE, "a message", conn.recv()).await;
        assert_eq!(got, Some(small(i)));
    }
    let mut n = 0;
    while n < 50 {
        if let SocketEvent::DataReceived { data, .. } = server_event(&mut server).await {
            assert_eq!(data, small(n));
            n += 1;
        }
    }
    tokio::time::sleep(Duration::from_millis(20)).await;

    let theirs = relay.sent(Dir::ToClient);
    let ours_sent = relay.sent(Dir::ToServer);
    let their_data: Vec<&Record> = theirs.iter().filter(|r| is_data(r.op())).collect();
    assert_eq!(their_data.len(), 50, "one datagram per message");
    assert!(
        their_data
            .iter()
            .all(|r| !r.bytes[4..].starts_with(&[0, 0x19]))
    );
    assert!(theirs.iter().all(|r| r.op() != Some(OP_MULTI)));
    // Its acks: 4-byte packets (opcode, sequence) plus the 2-byte CRC, each alone.
    let their_acks: Vec<&Record> = theirs
        .iter()
        .filter(|r| matches!(r.op(), Some(OP_ACK | OP_ACK_ALL)))
        .collect();
    assert!(!their_acks.is_empty());
    assert!(their_acks.iter().all(|r| r.bytes.len() == 6));
    assert!(
        theirs.iter().all(|r| r.op() != Some(0x08)),
        "NetStatusResponse"
    );
    assert!(ours_sent.iter().any(|r| r.op() == Some(OP_NET_REQUEST)));
    let our_datagrams = ours_sent
        .iter()
        .filter(|r| is_data(r.op()) || r.op() == Some(OP_MULTI))
        .count();
    assert!(
        our_datagrams <= 10,
        "we sent 50 small messages in {our_datagrams} datagrams"
    );
    eprintln!(
        "50 small messages: the peer used {} data + {} ack datagrams, we used {our_datagrams}",
        their_data.len(),
        their_acks.len()
    );
    server.abort();
}

/// The peer sends cumulative acks only from its tick (20 ms here): at most one AckAll per tick
/// however many packets arrived, so consecutive AckAlls are a tick apart. Our sender is not
/// troubled by it (its RTO is far above a tick).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_peer_acks_once_per_tick() {
    let _serial = serial().await;
    let tick = Duration::from_millis(20);
    let mut server = Peer {
        tick,
        ..Peer::default()
    }
    .server()
    .await;
    let relay = Relay::new(server.local_addr()).await;
    let ours = our_client(our_session());
    let conn = within(PATIENCE, "connect", ours.connect(relay.addr))
        .await
        .unwrap();
    // 100 messages, one every 2 ms: about ten ticks' worth.
    let sender = tokio::spawn({
        let conn = conn.clone();
        async move {
            for i in 0..100 {
                conn.send(message(i % 20 + 2, 33)).await.unwrap();
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
    });
    let mut n = 0;
    while n < 100 {
        if let SocketEvent::DataReceived { .. } = server_event(&mut server).await {
            n += 1;
        }
    }
    sender.await.unwrap();
    tokio::time::sleep(tick * 3).await;

    let ack_alls: Vec<Duration> = relay
        .sent(Dir::ToClient)
        .iter()
        .filter(|r| r.op() == Some(OP_ACK_ALL))
        .map(|r| r.at)
        .collect();
    let data_packets = relay
        .sent(Dir::ToServer)
        .iter()
        .filter(|r| is_data(r.op()) || r.op() == Some(OP_MULTI))
        .count();
    let gaps: Vec<Duration> = ack_alls.windows(2).map(|w| w[1] - w[0]).collect();
    let min_gap = gaps.iter().min().copied().unwrap_or_default();
    assert!(ack_alls.len() >= 3, "AckAlls: {ack_alls:?}");
    assert!(min_gap >= tick / 2, "AckAlls closer than a tick: {gaps:?}");
    assert!(ack_alls.len() < data_packets);
    let stats = conn.stats().unwrap();
    assert_eq!(stats.resends, 0, "{stats:?}");
    eprintln!(
        "{data_packets} data datagrams from us, {} AckAlls from the peer, at least {min_gap:?} apart",
        ack_alls.len()
    );
    server.abort();
}

/// A duplicate of a packet the peer already acknowledged gets no answer from it (it re-acks
/// only within 2 ms of its last AckAll). We re-ack a duplicate at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_peer_does_not_re_ack_duplicates_and_we_do() {
    let _serial = serial().await;
    let mut server = Peer::default().server().await;
    let handle = server.handle();
    let relay = Relay::new(server.local_addr()).await;
    let ours = our_client(our_session());
    let conn = within(PATIENCE, "connect", ours.connect(relay.addr))
        .await
        .unwrap();
    conn.send(Bytes::from_static(b"from us")).await.unwrap();
    let remote = loop {
        if let SocketEvent::DataReceived { remote, .. } = server_event(&mut server).await {
            break remote;
        }
    };
    handle.enqueue_data(remote, &b"from the peer"[..]);
    assert!(within(PATIENCE, "the peer's", conn.recv()).await.is_some());
    tokio::time::sleep(Duration::from_millis(100)).await;

    // Our data packet, again, 100 ms later: no answer from the peer.
    let our_data = first_with_op(&relay.sent(Dir::ToServer), OP_DATA, "our data datagram");
    let before = relay.sent(Dir::ToClient).len();
    relay.inject(Dir::ToServer, &our_data.bytes).await;
    // 500 ms: the peer ticks every 2 ms and acks within one tick, so this is far past any answer
    // even on a loaded 2-core machine. That it can answer at all is shown below: our next
    // message draws an ack.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let answers: Vec<Record> = relay.sent(Dir::ToClient).split_off(before);
    assert!(answers.is_empty(), "the peer answered: {answers:?}");
    conn.send(Bytes::from_static(b"new to the peer"))
        .await
        .unwrap();
    within(PATIENCE, "an ack of new data", async {
        loop {
            if relay.sent(Dir::ToClient).len() > before {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;

    // The peer's data packet, again: we acknowledge it again.
    let their_data = first_with_op(
        &relay.sent(Dir::ToClient),
        OP_DATA,
        "the peer's data datagram",
    );
    let at = relay.now();
    relay.inject(Dir::ToClient, &their_data.bytes).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let reacks = relay
        .sent(Dir::ToServer)
        .iter()
        .filter(|r| r.at >= at && matches!(r.op(), Some(OP_ACK | OP_ACK_ALL | OP_MULTI)))
        .count();
    assert!(reacks >= 1, "we did not re-ack a duplicate");
    // The duplicate was not delivered twice: a marker the peer sends next is the very next
    // message we receive (event-driven, so a slow machine cannot make this pass vacuously).
    handle.enqueue_data(remote, &b"marker"[..]);
    let next = within(PATIENCE, "the marker", conn.recv()).await;
    assert_eq!(
        next.as_deref(),
        Some(&b"marker"[..]),
        "the duplicate was delivered"
    );
    server.abort();
}

/// The consequence of not re-acking: if the peer's one AckAll for our last packet is lost and
/// we have nothing more to send, resends alone are never acknowledged. With the ack elicitor off,
/// our session ends with UnacknowledgedTimeout (30 s by default; 1 s here), although the peer got
/// the message. With it on, a packet in the next sequence gets the ack. The elicitor must be one
/// the peer reads as no message: with this peer `00 19 01` is (its Group loop stops at the cut
/// item), in plaintext and with RC4, while `00 19` is not (it delivers the two bytes as a message,
/// and with RC4 decrypts one byte of it, so the next message comes out wrong). Each variant is
/// checked here: what the peer's application receives, and whether our session lives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_ack_from_the_peer_is_repaired_by_an_ack_elicitor_the_peer_reads_as_nothing() {
    let _serial = serial().await;
    use soe_reliable::AckElicitor;
    let cases = [
        (AckElicitor::Off, false),
        (AckElicitor::TruncatedGroup, false),
        (AckElicitor::TruncatedGroup, true),
        (AckElicitor::EmptyGroup, false),
        (AckElicitor::EmptyGroup, true),
    ];
    for (elicitor, rc4) in cases {
        let reliable = soe_reliable::ReliableConfig::default()
            .with_unacknowledged_timeout(Duration::from_secs(1))
            .with_max_rto(Duration::from_millis(200))
            .with_ack_elicitor(elicitor);
        let mut session = our_session()
            .with_reliable(Arc::new(reliable))
            .expect("valid reliable config");
        let mut peer = Peer::default();
        if rc4 {
            session = with_key(session, &h1z1_key());
            peer = peer.with_key(&h1z1_key());
        }
        let mut server = peer.server().await;
        let drop_acks = Arc::new(AtomicBool::new(false));
        let relay = Relay::with_filter(
            server.local_addr(),
            Box::new({
                let drop_acks = drop_acks.clone();
                move |dir, bytes| {
                    dir == Dir::ToClient
                        && matches!(op(bytes), Some(OP_ACK | OP_ACK_ALL))
                        && drop_acks.load(Ordering::SeqCst)
                }
            }),
        )
        .await;
        let ours = our_client(session);
        let conn = within(PATIENCE, "connect", ours.connect(relay.addr))
            .await
            .unwrap();
        drop_acks.store(true, Ordering::SeqCst);
        conn.send(Bytes::from_static(b"one")).await.unwrap();
        let mut received: Vec<Bytes> = Vec::new();
        loop {
            if let SocketEvent::DataReceived { data, .. } = server_event(&mut server).await {
                received.push(data.clone());
                break;
            }
        }
        // Its AckAll goes out on its next tick and is dropped; then acks pass again.
        tokio::time::sleep(Duration::from_millis(30)).await;
        drop_acks.store(false, Ordering::SeqCst);
        let what = format!("{elicitor:?}, rc4 {rc4}");
        let outcome = tokio::time::timeout(Duration::from_millis(1800), conn.closed()).await;
        if elicitor == AckElicitor::Off {
            assert_eq!(
                *outcome.as_ref().expect("our session should have ended"),
                CloseReason::new(DisconnectReason::UnacknowledgedTimeout, false),
                "{what}"
            );
            let resends = relay
                .sent(Dir::ToServer)
                .iter()
                .filter(|r| is_data(r.op()) || r.op() == Some(OP_MULTI))
                .count();
            assert!(resends >= 3, "{what}: we resent {resends} times");
            // The peer got "one" exactly once, and hears our Disconnect.
            loop {
                match server_event(&mut server).await {
                    SocketEvent::SessionClosed { reason, .. } => {
                        assert_eq!(reason, PeerReason::UnacknowledgedTimeout);
                        break;
                    }
                    SocketEvent::DataReceived { data, .. } => panic!("delivered again: {data:?}"),
                    SocketEvent::SessionOpened { .. } => {}
                }
            }
            server.abort();
            continue;
        }
        assert!(outcome.is_err(), "{what}: closed: {outcome:?}");
        assert!(conn.close_reason().is_none(), "{what}");
        let stats = conn.stats().expect("the session is open");
        assert!(
            stats.ack_elicitors >= 1,
            "{what}: no elicitor was needed: {stats:?}"
        );
        // What the peer's application saw, up to and including our next real message.
        conn.send(Bytes::from_static(b"two")).await.unwrap();
        while received.len() < 8 {
            match server_event(&mut server).await {
                SocketEvent::DataReceived { data, .. } => {
                    let done = data.len() == 3 && received.len() > 1 || &data[..] == b"two";
                    received.push(data);
                    if done {
                        break;
                    }
                }
                SocketEvent::SessionClosed { reason, .. } => {
                    panic!("{what}: peer closed {reason:?}")
                }
                SocketEvent::SessionOpened { .. } => {}
            }
        }
        eprintln!("{what}: the peer's application received {received:02x?}");
        match elicitor {
            AckElicitor::TruncatedGroup => assert_eq!(
                received,
                [&b"one"[..], b"two"],
                "{what}: the elicitor was read as nothing, and RC4 stayed in step"
            ),
            _ => {
                assert_eq!(received[0], &b"one"[..], "{what}");
                assert!(
                    received.len() > 2 || received.last().is_some_and(|m| &m[..] != b"two"),
                    "{what}: the peer read 00 19 as nothing after all: {received:02x?}"
                );
            }
        }
        server.abort();
    }
}

/// Our server keeps a session half-open until the client's first packet with a valid CRC. The
/// peer's client sends nothing after the handshake until it has data (or 25 s of silence have
/// passed), so our server keeps a half-open session for the longer of its connect timeout and
/// its idle timeout: a peer client idle past the connect timeout (200 ms here) is still served.
/// Only one idle past the idle timeout too finds its session gone: our server answers its first
/// message with UnknownSender and the peer ends with UnreachableConnection (it never remaps).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_client_idle_after_connecting_keeps_its_half_open_session_until_the_idle_timeout() {
    // Idle past the connect timeout, within the idle timeout (30 s by default): served.
    let ours = our_server(our_session().with_connect_timeout(Duration::from_millis(200)));
    let mut client = Peer::default().client(ours.local_addr()).await;
    peer_connected(&mut client).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    client.handle().enqueue_data(&b"late hello"[..]);
    let conn = within(PATIENCE, "accept", ours.accept()).await.unwrap();
    let got = within(PATIENCE, "late hello", conn.recv()).await;
    assert_eq!(got.as_deref(), Some(&b"late hello"[..]));
    client.abort();

    // Idle past both: the half-open session is gone.
    let ours = our_server(
        our_session()
            .with_connect_timeout(Duration::from_millis(200))
            .with_idle_timeout(Some(Duration::from_millis(300))),
    );
    let relay = Relay::new(ours.local_addr()).await;
    let mut client = Peer::default().client(relay.addr).await;
    peer_connected(&mut client).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    client.handle().enqueue_data(&b"late hello"[..]);
    match client_event(&mut client).await {
        ClientEvent::Disconnected { reason } => {
            assert_eq!(reason, PeerReason::UnreachableConnection)
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(
        relay
            .sent(Dir::ToClient)
            .iter()
            .any(|r| r.op() == Some(OP_UNKNOWN_SENDER))
    );
    let accepted = tokio::time::timeout(Duration::from_millis(50), ours.accept()).await;
    assert!(accepted.is_err(), "accepted {accepted:?}");
    client.abort();
}
