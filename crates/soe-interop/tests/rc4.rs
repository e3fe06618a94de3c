//! RC4 on both sides with the same raw key (the H1Z1 login key), in both pairings with the peer
//! (soe-protocol 2.3.0): the first message is checked on the wire against our own RC4, then
//! 2,000 messages go each way, among them messages starting `00`, `00 00` and `00 19`, which
//! the zero-escape rule touches (with RC4 the peer escapes after encryption, as we do).

mod common;

use bytes::Bytes;
use common::*;
use soe_crypto::Rc4;
use soe_protocol::{ClientEvent, SocketEvent};
use soe_tokio::{Connection, DisconnectReason};

const COUNT: usize = 2_000;
const OURS: u8 = 11;
const THEIRS: u8 = 12;

/// Message `i` of stream `salt`: the first few start with zero bytes, the rest are the usual
/// test messages of 1 to 4,000 bytes.
fn rc4_message(i: usize, salt: u8) -> Bytes {
    let special: [&[u8]; 7] = [
        b"\x00",
        b"\x00\x00",
        b"\x00\x19\x03ABC",
        b"\x00\x00\x41",
        b"\x00\x05\x00\x00\x00\x00\x00\x06",
        b"\x00\x03\x04\x00\x15\x00\x01",
        b"\x00\x19",
    ];
    match special.get(i) {
        Some(m) => {
            let mut v = m.to_vec();
            v.push(salt);
            Bytes::from(v)
        }
        None if i % 100 == 7 => {
            // A long message starting with zero: the escape byte goes on the first fragment.
            let mut v = message(i, salt).to_vec();
            v[0] = 0;
            Bytes::from(v)
        }
        None => message(i, salt),
    }
}

/// RC4 of `plain` with a fresh key state.
fn encrypt_first(plain: &[u8]) -> Vec<u8> {
    let mut rc4 = Rc4::new(&h1z1_key()).unwrap();
    let mut out = plain.to_vec();
    rc4.apply(&mut out);
    out
}

/// The data of the first reliable packet in `records`, standing alone or inside a MultiPacket
/// (our side sends a delayed ack in the same datagram as data): after opcode and sequence, the
/// 2-byte CRC stripped (no compression).
fn first_data(records: &[Record]) -> Vec<u8> {
    for r in records {
        let Some(packet) = r.bytes.get(..r.bytes.len().saturating_sub(2)) else {
            continue;
        };
        match soe_wire::Packet::decode(packet) {
            Ok(soe_wire::Packet::ReliableData(d)) => return d.data.to_vec(),
            Ok(soe_wire::Packet::MultiPacket(m)) => {
                for p in m.packets() {
                    if let Ok(soe_wire::Packet::ReliableData(d)) = p {
                        return d.data.to_vec();
                    }
                }
            }
            _ => {}
        }
    }
    panic!("no ReliableData datagram among {} records", records.len());
}

async fn our_side(conn: Connection) -> Connection {
    let sender = tokio::spawn({
        let conn = conn.clone();
        async move {
            for i in 0..COUNT {
                conn.send(rc4_message(i, OURS)).await.expect("send");
            }
        }
    });
    for i in 0..COUNT {
        let got = within(PATIENCE, "the peer's next message", conn.recv())
            .await
            .unwrap_or_else(|| panic!("our connection closed after {i} messages"));
        assert_eq!(got, rc4_message(i, THEIRS), "message {i}");
    }
    sender.await.unwrap();
    conn
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rc4_our_client_with_the_peer_server() {
    let _serial = serial().await;
    let key = h1z1_key();
    let mut server = Peer::default().with_key(&key).server().await;
    let handle = server.handle();
    let relay = Relay::new(server.local_addr()).await;
    let ours = our_client(with_key(our_session(), &key));
    let conn = within(PATIENCE, "connect", ours.connect(relay.addr))
        .await
        .unwrap();

    // One message each way first, to see the ciphertext on the wire.
    conn.send(Bytes::from_static(b"first from us"))
        .await
        .unwrap();
    let remote = loop {
        match server_event(&mut server).await {
            SocketEvent::SessionOpened { .. } => {}
            SocketEvent::DataReceived { remote, data, .. } => {
                assert_eq!(&data[..], b"first from us");
                break remote;
            }
            other => panic!("unexpected {other:?}"),
        }
    };
    handle.enqueue_data(remote, &b"first from the peer"[..]);
    let got = within(PATIENCE, "the peer's first", conn.recv()).await;
    assert_eq!(got.as_deref(), Some(&b"first from the peer"[..]));
    assert_eq!(
        first_data(&relay.sent(Dir::ToServer)),
        encrypt_first(b"first from us")
    );
    assert_eq!(
        first_data(&relay.sent(Dir::ToClient)),
        encrypt_first(b"first from the peer")
    );

    let peer = tokio::spawn(async move {
        for i in 0..COUNT {
            handle.enqueue_data(remote, rc4_message(i, THEIRS));
        }
        let mut received = 0;
        loop {
            match server_event(&mut server).await {
                SocketEvent::DataReceived { data, .. } => {
                    assert_eq!(data, rc4_message(received, OURS), "message {received}");
                    received += 1;
                }
                SocketEvent::SessionClosed { reason, .. } => return (received, reason, server),
                other => panic!("unexpected {other:?}"),
            }
        }
    });
    let t = std::time::Instant::now();
    let conn = our_side(conn).await;
    eprintln!(
        "{COUNT} RC4 messages each way in {:?}; our stats {:?}",
        t.elapsed(),
        conn.stats()
    );
    conn.close(DisconnectReason::Application);
    let (received, reason, server) = within(PATIENCE, "the peer", peer).await.unwrap();
    assert_eq!(received, COUNT);
    assert_eq!(reason, soe_protocol::DisconnectReason::Application);
    // No plaintext on the wire: a distinctive run of a long message never appears.
    let long = rc4_message(20, OURS);
    assert!(long.len() > 140);
    let probe = &long[100..140];
    assert!(
        !relay
            .log()
            .iter()
            .any(|r| r.bytes.windows(probe.len()).any(|w| w == probe)),
        "plaintext seen on the wire"
    );
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rc4_the_peer_client_with_our_server() {
    let _serial = serial().await;
    let key = h1z1_key();
    let ours = our_server(with_key(our_session(), &key));
    let relay = Relay::new(ours.local_addr()).await;
    let mut client = Peer::default().with_key(&key).client(relay.addr).await;
    let handle = client.handle();
    peer_connected(&mut client).await;

    handle.enqueue_data(&b"first from the peer"[..]);
    let conn = within(PATIENCE, "accept", ours.accept()).await.unwrap();
    let got = within(PATIENCE, "the peer's first", conn.recv()).await;
    assert_eq!(got.as_deref(), Some(&b"first from the peer"[..]));
    conn.send(Bytes::from_static(b"first from us"))
        .await
        .unwrap();
    match client_event(&mut client).await {
        ClientEvent::DataReceived { data, .. } => assert_eq!(&data[..], b"first from us"),
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(
        first_data(&relay.sent(Dir::ToServer)),
        encrypt_first(b"first from the peer")
    );
    assert_eq!(
        first_data(&relay.sent(Dir::ToClient)),
        encrypt_first(b"first from us")
    );

    for i in 0..COUNT {
        handle.enqueue_data(rc4_message(i, THEIRS));
    }
    let peer = tokio::spawn(async move {
        let mut received = 0;
        loop {
            match client_event(&mut client).await {
                ClientEvent::DataReceived { data, .. } => {
                    assert_eq!(data, rc4_message(received, OURS), "message {received}");
                    received += 1;
                }
                ClientEvent::Disconnected { reason } => return (received, reason, client),
                ClientEvent::Connected => panic!("connected twice"),
            }
        }
    });
    let t = std::time::Instant::now();
    let conn = our_side(conn).await;
    eprintln!(
        "{COUNT} RC4 messages each way in {:?}; our stats {:?}",
        t.elapsed(),
        conn.stats()
    );
    conn.close(DisconnectReason::Application);
    let (received, reason, client) = within(PATIENCE, "the peer", peer).await.unwrap();
    assert_eq!(received, COUNT);
    assert_eq!(reason, soe_protocol::DisconnectReason::Application);
    client.abort();
}
