//! Data: bulk reliable transfer both ways under a hostile network (plain, RC4, compression),
//! unreliable and ordered messages, packing into MultiPackets, statistics.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{NetConfig, Pair, client_config, server_config};
use soe_session::{Channel, Delivery, SendError, SessionConfig, SessionHandle};
use soe_wire::{PROTOCOL_VERSION, Packet};

/// A message whose content encodes its direction, channel and index; sizes vary from 1 byte to
/// several fragments, and some start with 0x00 (to exercise the zero escape).
fn message(dir: u8, channel: u8, i: u32) -> Bytes {
    let len = match i % 7 {
        0 => 1,
        1 => 10,
        2 => 100,
        3 => 300,
        4 => 1500,
        5 => 40,
        _ => 5000,
    };
    let mut v = Vec::with_capacity(len);
    let mut x = (u32::from(dir) << 24) ^ (u32::from(channel) << 20) ^ i;
    for _ in 0..len {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        v.push((x >> 16) as u8);
    }
    if i % 5 == 0 {
        v[0] = 0;
    }
    // Highly compressible tail for some, so compression has something to do.
    if i % 3 == 0 {
        let half = len / 2;
        v[half..].fill(b'A');
    }
    Bytes::from(v)
}

/// Sends `n` messages each way on `channels`, keeping queues full, and checks every message
/// arrives exactly once and in order per channel.
fn bulk(p: &mut Pair, c: SessionHandle, s: SessionHandle, n: u32, channels: &[u8]) {
    let mut next_up = [0u32; 4];
    let mut next_down = [0u32; 4];
    let mut recv_up = [0u32; 4];
    let mut recv_down = [0u32; 4];
    let seed = p.seed;
    let done = p.run_until(Duration::from_secs(600), |p| {
        for &ch in channels {
            let channel = Channel::new(ch).unwrap();
            let k = usize::from(ch);
            while next_up[k] < n {
                match p.client.send(c, channel, message(0, ch, next_up[k])) {
                    Ok(()) => next_up[k] += 1,
                    Err(SendError::QueueFull(_)) => break,
                    Err(e) => panic!("send: {e} (seed {seed})"),
                }
            }
            while next_down[k] < n {
                match p.server.send(s, channel, message(1, ch, next_down[k])) {
                    Ok(()) => next_down[k] += 1,
                    Err(SendError::QueueFull(_)) => break,
                    Err(e) => panic!("send: {e} (seed {seed})"),
                }
            }
        }
        for (channel, data, kind) in Pair::take_messages(&mut p.server_events, s) {
            assert_eq!(kind, Delivery::Reliable);
            let k = channel.index();
            assert_eq!(
                data,
                message(0, k as u8, recv_up[k]),
                "client->server channel {k} message {} (seed {seed})",
                recv_up[k]
            );
            recv_up[k] += 1;
        }
        for (channel, data, kind) in Pair::take_messages(&mut p.client_events, c) {
            assert_eq!(kind, Delivery::Reliable);
            let k = channel.index();
            assert_eq!(
                data,
                message(1, k as u8, recv_down[k]),
                "server->client channel {k} message {} (seed {seed})",
                recv_down[k]
            );
            recv_down[k] += 1;
        }
        channels
            .iter()
            .all(|&ch| recv_up[usize::from(ch)] == n && recv_down[usize::from(ch)] == n)
    });
    assert!(
        done,
        "transfer incomplete after {:?}: up {recv_up:?} down {recv_down:?} (seed {seed})",
        p.elapsed()
    );
    // Nothing extra arrives afterwards (no duplicate delivery).
    p.run_for(Duration::from_secs(2));
    assert!(Pair::take_messages(&mut p.server_events, s).is_empty());
    assert!(Pair::take_messages(&mut p.client_events, c).is_empty());
    assert!(Pair::closed(&p.client_events, c).is_none(), "seed {seed}");
    assert!(Pair::closed(&p.server_events, s).is_none(), "seed {seed}");
}

fn run_bulk(
    seed: u64,
    server: SessionConfig,
    client: SessionConfig,
    net: NetConfig,
    n: u32,
) -> Pair {
    let mut p = Pair::new(common::seed(seed), server, client, net);
    let (c, s) = p.connect();
    bulk(&mut p, c, s, n, &[0]);
    p
}

#[test]
fn bulk_transfer_both_ways_on_a_hostile_network() {
    let p = run_bulk(
        10,
        server_config(),
        client_config(),
        NetConfig::hostile(0.1),
        300,
    );
    let cs = p
        .client
        .stats(p.client.handle_of(common::SERVER).unwrap())
        .unwrap();
    assert!(cs.resends > 0, "loss forces resends: {cs:?}");
    assert!(cs.acks_received > 0 && cs.acks_sent > 0, "{cs:?}");
    assert!(
        cs.crc_rejects > 0,
        "corruption is caught by the CRC: {cs:?}"
    );
    assert!(cs.rtt.is_some() && cs.min_rtt.is_some(), "{cs:?}");
    assert!(cs.duplicates > 0 || cs.out_of_order > 0, "{cs:?}");
    assert!(
        cs.datagrams_sent > 0 && cs.bytes_sent > cs.datagrams_sent,
        "{cs:?}"
    );
    assert_eq!(cs.reliable_messages_sent, 300);
    assert_eq!(cs.reliable_messages_received, 300);
}

#[test]
fn bulk_transfer_with_rc4_both_ways() {
    let key = Bytes::from_static(b"0123456789abcdef");
    let server = server_config().with_encryption_key(key.clone()).unwrap();
    let client = client_config().with_encryption_key(key).unwrap();
    run_bulk(11, server, client, NetConfig::hostile(0.1), 200);
}

#[test]
fn bulk_transfer_with_compression_and_rc4() {
    let key = Bytes::from_static(b"secret");
    let server = server_config()
        .with_compression(true)
        .with_encryption_key(key.clone())
        .unwrap();
    let client = client_config().with_encryption_key(key).unwrap();
    run_bulk(12, server, client, NetConfig::hostile(0.1), 200);
}

#[test]
fn compression_is_negotiated_by_the_server_and_shrinks_datagrams() {
    let mut plain = Pair::new(
        common::seed(13),
        server_config(),
        client_config(),
        NetConfig::default(),
    );
    let mut packed = Pair::new(
        common::seed(13),
        server_config().with_compression(true),
        client_config(),
        NetConfig::default(),
    );
    let mut bytes = [0u64; 2];
    for (i, p) in [&mut plain, &mut packed].into_iter().enumerate() {
        let (c, s) = p.connect();
        bulk(p, c, s, 100, &[0]);
        bytes[i] = p.client.stats(c).unwrap().bytes_sent + p.server.stats(s).unwrap().bytes_sent;
    }
    assert!(
        bytes[1] * 10 < bytes[0] * 9,
        "compressed {} vs plain {}",
        bytes[1],
        bytes[0]
    );
}

#[test]
fn all_four_channels_carry_data() {
    let mut p = Pair::new(
        common::seed(14),
        server_config(),
        client_config(),
        NetConfig::hostile(0.05),
    );
    let (c, s) = p.connect();
    bulk(&mut p, c, s, 60, &[0, 1, 2, 3]);
}

#[test]
fn a_larger_udp_length_is_capped_by_the_peer() {
    let mut p = Pair::new(
        common::seed(15),
        server_config().with_udp_length(1400),
        client_config().with_udp_length(600),
        NetConfig::default(),
    );
    p.log_datagrams = true;
    let (c, s) = p.connect();
    assert_eq!(p.client.session(c).unwrap().remote_udp_length(), 600);
    assert_eq!(p.server.session(s).unwrap().remote_udp_length(), 600);
    bulk(&mut p, c, s, 50, &[0]);
    let biggest_down = p.from_server_log.iter().map(Vec::len).max().unwrap();
    let biggest_up = p.to_server_log.iter().map(Vec::len).max().unwrap();
    assert!(biggest_down <= 600 && biggest_down > 500, "{biggest_down}");
    assert!(biggest_up <= 600 && biggest_up > 500, "{biggest_up}");
}

#[test]
fn small_packets_share_multipackets_and_lone_packets_go_unwrapped() {
    // Without Group bundling, each small message is a packet of its own, to be packed.
    let unbundled =
        std::sync::Arc::new(soe_session::ReliableConfig::default().with_bundle_messages(false));
    let mut p = Pair::new(
        common::seed(16),
        server_config(),
        client_config().with_reliable(unbundled).unwrap(),
        NetConfig::default(),
    );
    p.log_datagrams = true;
    let (c, s) = p.connect();
    // Many small reliable messages, one unreliable and one ordered, all queued at once.
    for i in 0..40u32 {
        p.client
            .send(c, Channel::ZERO, Bytes::from(vec![1 + i as u8; 30]))
            .unwrap();
    }
    p.client
        .send_ordered(c, Bytes::from_static(b"ord"))
        .unwrap();
    p.run_for(Duration::from_secs(1));
    let got = Pair::take_messages(&mut p.server_events, s);
    assert_eq!(got.len(), 41);
    let mut multi = 0;
    for d in &p.to_server_log {
        assert!(d.len() <= 512);
        // Framing: 2-byte CRC; opcode first.
        if d[..2] == [0x00, 0x03] {
            multi += 1;
        }
    }
    assert!(multi > 0, "some datagram is a MultiPacket");
    // 40 messages of 34-byte packets (plus acks) took far fewer than 40 datagrams.
    let data_datagrams = p.to_server_log.len();
    assert!(data_datagrams < 20, "{data_datagrams} datagrams");
    // Every MultiPacket holds sub-packets of 255 bytes or less and is within udp_length.
    for d in p.to_server_log.iter().filter(|d| d[..2] == [0x00, 0x03]) {
        let body = &d[2..d.len() - 2];
        let subs: Vec<_> = soe_wire::MultiPacket::new(body)
            .iter()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(subs.len() >= 2, "a lone packet is sent unwrapped");
        assert!(subs.iter().all(|s| s.len() <= 255));
    }
    // The handshake's SessionRequest went out alone and unframed.
    assert!(matches!(
        Packet::decode(&p.to_server_log[0]),
        Ok(Packet::SessionRequest(r)) if r.protocol_version == PROTOCOL_VERSION
    ));
}

#[test]
fn unreliable_and_ordered_messages_are_delivered_with_their_kind() {
    let mut p = Pair::new(
        common::seed(17),
        server_config(),
        client_config(),
        NetConfig::default(),
    );
    let (c, s) = p.connect();
    p.client
        .send_unreliable(c, Bytes::from_static(b"\x07bare datagram"))
        .unwrap();
    for i in 1..=5u8 {
        p.client.send_ordered(c, Bytes::from(vec![i; 3])).unwrap();
    }
    p.server
        .send_unreliable(s, Bytes::from(vec![0xAB; 300]))
        .unwrap();
    p.run_for(Duration::from_millis(200));
    let up = Pair::take_messages(&mut p.server_events, s);
    assert_eq!(up.len(), 6, "{up:?}");
    assert!(up.contains(&(
        Channel::ZERO,
        Bytes::from_static(b"\x07bare datagram"),
        Delivery::Unreliable
    )));
    let ordered: Vec<u8> = up
        .iter()
        .filter(|m| m.2 == Delivery::Ordered)
        .map(|m| m.1[0])
        .collect();
    assert_eq!(ordered, [1, 2, 3, 4, 5]);
    let down = Pair::take_messages(&mut p.client_events, c);
    assert_eq!(
        down,
        [(
            Channel::ZERO,
            Bytes::from(vec![0xAB; 300]),
            Delivery::Unreliable
        )]
    );
    let st = p.server.stats(s).unwrap();
    assert_eq!((st.unreliable_received, st.unreliable_sent), (6, 1));
}

#[test]
fn stale_ordered_messages_are_dropped_under_reordering() {
    let mut p = Pair::new(
        common::seed(18),
        server_config(),
        client_config(),
        NetConfig {
            reorder: 0.5,
            reorder_delay: Duration::from_millis(50),
            ..NetConfig::default()
        },
    );
    let (c, s) = p.connect();
    for i in 0..200u32 {
        p.client
            .send_ordered(c, Bytes::copy_from_slice(&i.to_be_bytes()))
            .unwrap();
        p.run_for(Duration::from_millis(5));
    }
    p.run_for(Duration::from_millis(200));
    let got: Vec<u32> = Pair::take_messages(&mut p.server_events, s)
        .iter()
        .map(|m| u32::from_be_bytes(m.1[..4].try_into().unwrap()))
        .collect();
    assert!(got.windows(2).all(|w| w[0] < w[1]), "never older: {got:?}");
    assert!(got.len() < 200, "some were stale and dropped");
    assert!(got.len() > 50, "most arrive: {}", got.len());
    assert_eq!(
        p.server.stats(s).unwrap().unreliable_dropped as usize,
        200 - got.len()
    );
}

#[test]
fn unreliable_sends_are_checked() {
    let mut p = Pair::new(
        common::seed(19),
        server_config(),
        client_config(),
        NetConfig::default(),
    );
    let (c, _s) = p.connect();
    assert_eq!(
        p.client.send_unreliable(c, Bytes::new()),
        Err(SendError::EmptyUnreliable)
    );
    assert_eq!(
        p.client.send_unreliable(c, Bytes::from_static(b"\0abc")),
        Err(SendError::ZeroFirstByte)
    );
    let max = p.client.session(c).unwrap().max_packet_len();
    assert_eq!(max, 510, "512 minus a 2-byte CRC");
    assert_eq!(
        p.client.send_unreliable(c, Bytes::from(vec![1; max + 1])),
        Err(SendError::TooLarge { len: max + 1, max })
    );
    assert!(
        p.client
            .send_unreliable(c, Bytes::from(vec![1; max]))
            .is_ok()
    );
    assert_eq!(
        p.client.send_ordered(c, Bytes::from(vec![1; max - 3])),
        Err(SendError::TooLarge {
            len: max - 3,
            max: max - 4
        })
    );
    // The reliable queue hands a message back when full.
    let cap = p.client.send_capacity(c, Channel::ZERO);
    assert_eq!(cap, 4096);
    for _ in 0..cap {
        p.client
            .send(c, Channel::ZERO, Bytes::from_static(b"x"))
            .unwrap();
    }
    assert_eq!(p.client.send_capacity(c, Channel::ZERO), 0);
    let err = p
        .client
        .send(c, Channel::ZERO, Bytes::from_static(b"back"))
        .unwrap_err();
    assert_eq!(err.into_message(), Some(Bytes::from_static(b"back")));
}

#[test]
fn rc4_hides_reliable_data_on_the_wire_and_plaintext_does_not() {
    let secret = Bytes::from_static(b"a very recognisable plaintext message");
    for encrypted in [false, true] {
        let (server, client) = if encrypted {
            let key = Bytes::from_static(b"k3y");
            (
                server_config().with_encryption_key(key.clone()).unwrap(),
                client_config().with_encryption_key(key).unwrap(),
            )
        } else {
            (server_config(), client_config())
        };
        let mut p = Pair::new(common::seed(40), server, client, NetConfig::default());
        p.log_datagrams = true;
        let (c, s) = p.connect();
        p.client.send(c, Channel::ZERO, secret.clone()).unwrap();
        p.server.send(s, Channel::ZERO, secret.clone()).unwrap();
        p.run_for(Duration::from_millis(300));
        assert_eq!(Pair::take_messages(&mut p.server_events, s)[0].1, secret);
        assert_eq!(Pair::take_messages(&mut p.client_events, c)[0].1, secret);
        let seen = |log: &[Vec<u8>]| {
            log.iter()
                .any(|d| d.windows(secret.len()).any(|w| w == secret))
        };
        assert_eq!(seen(&p.to_server_log), !encrypted, "client to server");
        assert_eq!(seen(&p.from_server_log), !encrypted, "server to client");
    }
}

#[test]
fn messages_sent_while_connecting_go_out_once_connected() {
    let mut p = Pair::new(
        common::seed(41),
        server_config(),
        client_config(),
        NetConfig::hostile(0.2),
    );
    let c = p.client.connect(p.now, common::SERVER).unwrap();
    for i in 0..20u8 {
        p.client
            .send(c, Channel::ZERO, Bytes::from(vec![i + 1; 700]))
            .unwrap();
    }
    p.client
        .send_ordered(c, Bytes::from_static(b"ordered"))
        .unwrap();
    assert!(p.run_until(Duration::from_secs(30), |p| {
        p.server_events
            .iter()
            .filter(|(_, e)| {
                matches!(
                    e,
                    soe_session::Event::Message {
                        kind: Delivery::Reliable,
                        ..
                    }
                )
            })
            .count()
            == 20
    }));
    let s = p.server.handle_of(common::CLIENT).unwrap();
    let got = Pair::take_messages(&mut p.server_events, s);
    let reliable: Vec<_> = got.iter().filter(|m| m.2 == Delivery::Reliable).collect();
    for (i, m) in reliable.iter().enumerate() {
        assert_eq!(m.1, Bytes::from(vec![i as u8 + 1; 700]));
    }
}

#[test]
fn a_peer_that_acks_late_and_rarely_still_gets_everything() {
    // Like h1z1-server: cumulative acks about every 24 ms, many packets per ack.
    let lazy = std::sync::Arc::new(
        soe_session::ReliableConfig::default()
            .with_ack_delay(Duration::from_millis(24))
            .with_ack_every(64),
    );
    let mut p = Pair::new(
        common::seed(42),
        server_config().with_reliable(lazy).unwrap(),
        client_config(),
        NetConfig::hostile(0.05),
    );
    let (c, s) = p.connect();
    bulk(&mut p, c, s, 150, &[0]);
}

/// The H1Z1 gateway's flow: both sides hold the key but start in plaintext; after the login
/// request the server switches that one session to RC4, and the client switches when it has
/// sent the request. Later messages are hidden on the wire and still arrive intact, under
/// loss, on two channels; another session of the same server stays in plaintext.
#[test]
fn rc4_switched_on_for_one_session_after_its_login_request() {
    let key = Bytes::from_static(b"gateway key");
    let server = server_config()
        .with_encryption_key(key.clone())
        .unwrap()
        .with_encryption_at_start(false);
    let client = client_config()
        .with_encryption_key(key)
        .unwrap()
        .with_encryption_at_start(false);
    let login = Bytes::from_static(b"LoginRequest: a recognisable plaintext");
    let secret = Bytes::from_static(b"LoginReply: a recognisable secret message");
    let mut p = Pair::new(common::seed(42), server, client, NetConfig::hostile(0.1));
    p.log_datagrams = true;
    let (c, s) = p.connect();
    assert!(!p.client.session(c).unwrap().is_encrypting());
    p.client.send(c, Channel::ZERO, login.clone()).unwrap();
    assert!(p.client.set_encryption(c, true), "the client has the key");
    assert!(p.run_until(Duration::from_secs(30), |p| {
        !Pair::take_messages(&mut p.server_events, s).is_empty()
    }));
    // The server got the login request in plaintext, and switches now.
    assert!(p.server.set_encryption(s, true));
    assert!(p.server.session(s).unwrap().is_encrypting());
    for i in 0..50u8 {
        let mut m = secret.to_vec();
        m.push(i);
        p.server
            .send(s, Channel::ZERO, Bytes::from(m.clone()))
            .unwrap();
        p.client
            .send(c, Channel::new(1).unwrap(), Bytes::from(m))
            .unwrap();
    }
    let mut down = Vec::new();
    let mut up = Vec::new();
    assert!(p.run_until(Duration::from_secs(60), |p| {
        down.extend(Pair::take_messages(&mut p.client_events, c));
        up.extend(Pair::take_messages(&mut p.server_events, s));
        down.len() == 50 && up.len() == 50
    }));
    for (i, (d, u)) in down.iter().zip(&up).enumerate() {
        assert_eq!(&d.1[..secret.len()], &secret[..], "message {i} down");
        assert_eq!(&u.1[..secret.len()], &secret[..], "message {i} up");
        assert_eq!((d.1[secret.len()], u.1[secret.len()]), (i as u8, i as u8));
    }
    let seen = |log: &[Vec<u8>], m: &[u8]| log.iter().any(|d| d.windows(m.len()).any(|w| w == m));
    assert!(
        seen(&p.to_server_log, &login),
        "the login request went in plaintext"
    );
    assert!(
        !seen(&p.to_server_log, &secret),
        "client to server after the switch"
    );
    assert!(
        !seen(&p.from_server_log, &secret),
        "server to client after the switch"
    );
    // No key, nothing to switch.
    let mut plain = Pair::new(
        common::seed(43),
        server_config(),
        client_config(),
        NetConfig::default(),
    );
    let (c, _) = plain.connect();
    assert!(!plain.client.set_encryption(c, true));
}
