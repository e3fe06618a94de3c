//! Life of a session: heartbeats and timeouts in virtual time, closing (under loss, every
//! reason, both ways), CRC failures, corrupt packets, CRC-less quirks, remapping, stateless
//! replies, half-open expiry.

mod common;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::{CLIENT, NetConfig, Pair, SERVER, client_config, server_config};
use soe_session::{
    Channel, Delivery, DisconnectReason, Endpoint, EndpointConfig, Event, SessionHandle, State,
};
use soe_wire::{CrcLength, FrameConfig, Framer, Packet, RemapConnection};

fn connected(seed: u64, net: NetConfig) -> (Pair, SessionHandle, SessionHandle) {
    let mut p = Pair::new(common::seed(seed), server_config(), client_config(), net);
    let (c, s) = p.connect();
    (p, c, s)
}

/// A framer with the session's negotiated framing, to forge packets as the peer would.
fn peer_framer(p: &Pair, s: SessionHandle) -> Framer {
    let seed = p.server.session(s).unwrap().crc_seed();
    Framer::new(FrameConfig::new(seed).with_crc_length(CrcLength::TWO))
}

fn sealed(framer: &mut Framer, packet: &[u8]) -> Vec<u8> {
    let mut buf = packet.to_vec();
    framer.seal(&mut buf, 0);
    buf
}

#[test]
fn an_idle_client_keeps_the_session_alive_with_heartbeats() {
    let (mut p, c, s) = connected(20, NetConfig::default());
    p.run_for(Duration::from_secs(300));
    assert!(Pair::closed(&p.client_events, c).is_none());
    assert!(Pair::closed(&p.server_events, s).is_none());
    let cs = p.client.stats(c).unwrap();
    let ss = p.server.stats(s).unwrap();
    // One heartbeat per 10 s of silence, each answered once: no ping-pong.
    assert!((29..=31).contains(&cs.heartbeats_sent), "{cs:?}");
    assert_eq!(ss.heartbeats_received, cs.heartbeats_sent);
    assert_eq!(
        ss.heartbeats_sent, cs.heartbeats_sent,
        "server answers each"
    );
    assert_eq!(cs.heartbeats_received, ss.heartbeats_sent);
    // Virtual time, not wall time: five minutes took a few hundred steps.
    assert!(p.net.delivered < 100, "{:?}", p.net);
}

#[test]
fn heartbeats_survive_loss_through_retries() {
    // At 30 % loss each way (plus corruption, duplication, reordering) a heartbeat's round
    // trip fails more than half the time. An idle session has the twenty tries between 10 s
    // and the 30 s timeout in each of its sixty idle stretches; with the old 25 s it had five,
    // and these seeds lost the session within the ten minutes.
    for seed in 21..27 {
        let (mut p, c, s) = connected(seed, NetConfig::hostile(0.3));
        p.run_for(Duration::from_secs(600));
        assert!(
            Pair::closed(&p.client_events, c).is_none(),
            "seed {seed}: {:?}",
            p.client_events
        );
        assert!(Pair::closed(&p.server_events, s).is_none());
    }
}

#[test]
fn a_silent_client_times_out_at_the_configured_idle_time() {
    let mut p = Pair::new(
        common::seed(22),
        server_config().with_idle_timeout(Some(Duration::from_secs(12))),
        client_config(),
        NetConfig::default(),
    );
    let (_c, s) = p.connect();
    let quiet_from = p.now;
    p.client_alive = false;
    assert!(p.run_until(Duration::from_secs(60), |p| {
        Pair::closed(&p.server_events, s).is_some()
    }));
    assert_eq!(
        Pair::closed(&p.server_events, s),
        Some(Event::Closed {
            reason: DisconnectReason::Timeout,
            by_peer: false
        })
    );
    let silent_for = p.now - quiet_from;
    assert!(
        silent_for >= Duration::from_millis(11_900) && silent_for <= Duration::from_secs(12),
        "{silent_for:?}"
    );
}

#[test]
fn a_client_whose_server_goes_silent_retries_heartbeats_then_times_out() {
    let (mut p, c, _s) = connected(23, NetConfig::default());
    let quiet_from = p.now;
    p.server_alive = false;
    assert!(p.run_until(Duration::from_secs(60), |p| {
        Pair::closed(&p.client_events, c).is_some()
    }));
    assert_eq!(
        Pair::closed(&p.client_events, c),
        Some(Event::Closed {
            reason: DisconnectReason::Timeout,
            by_peer: false
        })
    );
    let t = p.now - quiet_from;
    // 30 s after the last datagram from the server (the probe's answer, 20 ms in flight).
    assert!(
        t > Duration::from_secs(30) && t <= Duration::from_millis(30_100),
        "{t:?}"
    );
    // Heartbeat at 10 s, then one retry per second until the timeout at 30 s.
    let hb = p.client.stats(c).map(|s| s.heartbeats_sent);
    assert!(
        hb.is_none() || hb.is_some_and(|n| (20..=21).contains(&n)),
        "{hb:?}"
    );
}

#[test]
fn graceful_close_flushes_data_then_the_peer_sees_the_reason_under_30_percent_loss() {
    for i in 0..12u64 {
        let seed = 300 + i;
        // A close timeout long enough for 50 messages at 30% loss: what is tested here is that
        // the data goes first and the Disconnect then reaches the peer.
        let mut p = Pair::new(
            common::seed(seed),
            server_config(),
            client_config().with_close_timeout(Duration::from_secs(60)),
            NetConfig::hostile(0.3),
        );
        let (c, s) = p.connect();
        for n in 0..50u32 {
            p.client
                .send(c, Channel::ZERO, Bytes::from(n.to_be_bytes().repeat(100)))
                .unwrap();
        }
        p.client.close(p.now, c, DisconnectReason::Application);
        assert_eq!(p.client.state(c), Some(State::Closing));
        assert!(
            p.client
                .send(c, Channel::ZERO, Bytes::from_static(b"late"))
                .is_err()
        );
        assert!(
            p.run_until(Duration::from_secs(60), |p| Pair::closed(
                &p.server_events,
                s
            )
            .is_some()
                && Pair::closed(&p.client_events, c).is_some()),
            "seed {seed}"
        );
        assert_eq!(
            Pair::closed(&p.server_events, s),
            Some(Event::Closed {
                reason: DisconnectReason::Application,
                by_peer: true
            }),
            "seed {seed}: the peer hears the Disconnect, not its timeout"
        );
        assert_eq!(
            Pair::closed(&p.client_events, c),
            Some(Event::Closed {
                reason: DisconnectReason::Application,
                by_peer: false
            })
        );
        let got = Pair::take_messages(&mut p.server_events, s);
        assert_eq!(
            got.len(),
            50,
            "seed {seed}: every queued message before the close"
        );
        for (n, m) in got.iter().enumerate() {
            assert_eq!(m.1, Bytes::from((n as u32).to_be_bytes().repeat(100)));
        }
        // Closed is the session's last event.
        assert!(matches!(
            p.server_events.iter().rfind(|(h, _)| *h == s),
            Some((_, Event::Closed { .. }))
        ));
        // Both sides reap the session once drained.
        p.run_for(Duration::from_secs(2));
        assert!(p.client.is_empty() && p.server.is_empty(), "seed {seed}");
    }
}

#[test]
fn every_disconnect_reason_travels_both_ways() {
    let mut reasons: Vec<DisconnectReason> = (0..=16).map(DisconnectReason::from_u16).collect();
    reasons.push(DisconnectReason::Other(77));
    for (i, &reason) in reasons.iter().enumerate() {
        for server_closes in [false, true] {
            let (mut p, c, s) = connected(400 + i as u64, NetConfig::default());
            if server_closes {
                p.server.close(p.now, s, reason);
            } else {
                p.client.close(p.now, c, reason);
            }
            p.run_for(Duration::from_secs(1));
            let (closer, hearer) = if server_closes {
                (&p.server_events, &p.client_events)
            } else {
                (&p.client_events, &p.server_events)
            };
            let (ch, hh) = if server_closes { (s, c) } else { (c, s) };
            assert_eq!(
                Pair::closed(closer, ch),
                Some(Event::Closed {
                    reason,
                    by_peer: false
                })
            );
            assert_eq!(
                Pair::closed(hearer, hh),
                Some(Event::Closed {
                    reason,
                    by_peer: true
                }),
                "{reason:?} server_closes={server_closes}"
            );
        }
    }
}

#[test]
fn close_all_shuts_every_session_down_gracefully() {
    let (mut p, c, s) = connected(24, NetConfig::default());
    p.server.close_all(p.now, DisconnectReason::ManagerDeleted);
    p.run_for(Duration::from_secs(1));
    assert_eq!(
        Pair::closed(&p.client_events, c),
        Some(Event::Closed {
            reason: DisconnectReason::ManagerDeleted,
            by_peer: true
        })
    );
    assert!(Pair::closed(&p.server_events, s).is_some());
    assert!(p.server.is_empty() && p.client.is_empty());
}

#[test]
fn the_disconnect_is_sent_several_times() {
    let (mut p, c, _s) = connected(25, NetConfig::default());
    p.log_datagrams = true;
    p.server_alive = true;
    // Drop everything to the server so the client's Disconnects are all we see (logged on
    // arrival... so instead count what the client sends).
    let before = p.client.endpoint_stats().datagrams_sent;
    p.client.close(p.now, c, DisconnectReason::Application);
    p.up.loss = 1.0;
    p.run_for(Duration::from_secs(2));
    let sent = p.client.endpoint_stats().datagrams_sent - before;
    assert_eq!(sent, 5, "default disconnect_repeats");
    assert!(p.client.is_empty());
}

#[test]
fn bad_crc_is_dropped_and_counted_and_the_session_lives_on() {
    let (mut p, c, s) = connected(26, NetConfig::default());
    let mut f = peer_framer(&p, s);
    for i in 0..50u8 {
        let mut d = sealed(&mut f, &[0x00, 0x09, 0x00, i, 1, 2, 3]);
        let last = d.len() - 1;
        d[last] ^= 0x5A; // break the CRC
        p.server.handle_datagram(p.now, CLIENT, &d);
    }
    // Too short to hold a CRC at all.
    p.server.handle_datagram(p.now, CLIENT, &[0x00]);
    p.server.handle_datagram(p.now, CLIENT, &[0x00, 0x09, 0x01]);
    p.flush();
    assert_eq!(p.server.state(s), Some(State::Connected));
    assert_eq!(p.server.stats(s).unwrap().crc_rejects, 52);
    assert!(Pair::take_messages(&mut p.server_events, s).is_empty());
    // Data still flows.
    p.client
        .send(c, Channel::ZERO, Bytes::from_static(b"still here"))
        .unwrap();
    p.run_for(Duration::from_millis(200));
    assert_eq!(
        Pair::take_messages(&mut p.server_events, s),
        [(
            Channel::ZERO,
            Bytes::from_static(b"still here"),
            Delivery::Reliable
        )]
    );
}

#[test]
fn a_bare_disconnect_from_the_session_address_ends_it_with_reason_none() {
    // h1z1-server's client ends a session with `00 05` alone: no session id, no reason.
    let (mut p, _c, s) = connected(480, NetConfig::default());
    let mut f = peer_framer(&p, s);
    let bare = sealed(&mut f, &[0x00, 0x05]);
    // From another address it is nobody's: the session lives on.
    p.server.handle_datagram(p.now, 3, &bare);
    // Without the session's CRC it proves nothing: dropped as a bad CRC.
    p.server.handle_datagram(p.now, CLIENT, &[0x00, 0x05]);
    p.run_for(Duration::from_secs(1));
    assert_eq!(Pair::closed(&p.server_events, s), None);
    assert_eq!(p.server.session(s).unwrap().state(), State::Connected);
    p.server.handle_datagram(p.now, CLIENT, &bare);
    p.run_for(Duration::from_secs(1));
    assert_eq!(
        Pair::closed(&p.server_events, s),
        Some(Event::Closed {
            reason: DisconnectReason::None,
            by_peer: true
        })
    );
}

#[test]
fn a_malformed_packet_with_a_valid_crc_ends_the_session_with_corrupt_packet() {
    let malformed: [&[u8]; 5] = [
        &[0x00, 0x09],                   // ReliableData without a sequence
        &[0x00, 0x06, 0xFF],             // Heartbeat with a body
        &[0x00, 0x04, 1, 2],             // unknown opcode
        &[0x00, 0x03, 0x05, 0x00, 0x06], // MultiPacket entry longer than the rest
        &[0x00, 0x11, 0x00],             // truncated Acknowledge
    ];
    for (i, bytes) in malformed.iter().enumerate() {
        let (mut p, c, s) = connected(500 + i as u64, NetConfig::default());
        let mut f = peer_framer(&p, s);
        let d = sealed(&mut f, bytes);
        p.server.handle_datagram(p.now, CLIENT, &d);
        p.run_for(Duration::from_secs(1));
        assert_eq!(
            Pair::closed(&p.server_events, s),
            Some(Event::Closed {
                reason: DisconnectReason::CorruptPacket,
                by_peer: false
            }),
            "{bytes:02x?}"
        );
        assert_eq!(
            Pair::closed(&p.client_events, c),
            Some(Event::Closed {
                reason: DisconnectReason::CorruptPacket,
                by_peer: true
            }),
            "the peer is told: {bytes:02x?}"
        );
    }
}

#[test]
fn crcless_heartbeat_and_ack_are_accepted_as_real_servers_send_them() {
    let (mut p, c, _s) = connected(27, NetConfig::default());
    // h1z1-server answers heartbeats and sends selective acks without a CRC trailer.
    p.client.handle_datagram(p.now, SERVER, &[0x00, 0x06]);
    p.client
        .handle_datagram(p.now, SERVER, &[0x00, 0x11, 0x00, 0x00]);
    p.flush();
    let st = p.client.stats(c).unwrap();
    assert_eq!(st.crcless_accepted, 2);
    assert_eq!(st.crc_rejects, 0);
    assert_eq!(p.client.state(c), Some(State::Connected));
    // Other shapes without a CRC are still rejected.
    p.client
        .handle_datagram(p.now, SERVER, &[0x00, 0x15, 0x00, 0x00]);
    p.client
        .handle_datagram(p.now, SERVER, &[0x00, 0x09, 0x00, 0x00]);
    assert_eq!(p.client.stats(c).unwrap().crc_rejects, 2);

    // A CRC-less heartbeat counts as liveness: a server that only sends those keeps us alive.
    p.server_alive = false;
    for _ in 0..10 {
        p.run_for(Duration::from_secs(20));
        p.client.handle_datagram(p.now, SERVER, &[0x00, 0x06]);
    }
    assert!(Pair::closed(&p.client_events, c).is_none());
}

#[test]
fn crcless_ack_is_accepted_with_compression_on() {
    let mut p = Pair::new(
        common::seed(30),
        server_config().with_compression(true),
        client_config(),
        NetConfig::default(),
    );
    let (c, _s) = p.connect();
    // With compression negotiated, a CRC-less selective ack carries the zero flag byte between
    // opcode and sequence, and a heartbeat ends with it.
    p.client
        .handle_datagram(p.now, SERVER, &[0x00, 0x11, 0x00, 0x00, 0x00]);
    p.client.handle_datagram(p.now, SERVER, &[0x00, 0x06, 0x00]);
    p.flush();
    let st = p.client.stats(c).unwrap();
    assert_eq!((st.crcless_accepted, st.crc_rejects), (2, 0));
    assert_eq!(p.client.state(c), Some(State::Connected));
}

/// h1z1-server's CRC-less selective ack `00 11 | u16` has, one time in 65,536, a sequence equal
/// to the CRC of `00 11`. It must be read as the selective ack it is, not as a truncated
/// Acknowledge with a valid CRC (that ended the session with CorruptPacket).
#[test]
fn a_crcless_ack_whose_sequence_passes_as_a_crc_is_still_an_ack() {
    let (mut p, c, s) = connected(31, NetConfig::default());
    let mut f = peer_framer(&p, s);
    let looks_sealed = sealed(&mut f, &[0x00, 0x11]);
    assert_eq!(looks_sealed.len(), 4);
    p.client.handle_datagram(p.now, SERVER, &looks_sealed);
    p.flush();
    p.run_for(Duration::from_secs(1));
    assert_eq!(p.client.state(c), Some(State::Connected));
    assert!(Pair::closed(&p.client_events, c).is_none());
}

/// Server sessions take no CRC-less packets unless told to: no known client sends them, and a
/// packet without a CRC is one anybody can forge from the client's address.
#[test]
fn server_sessions_refuse_crcless_acks_by_default() {
    let (mut p, _c, s) = connected(32, NetConfig::default());
    p.server
        .handle_datagram(p.now, CLIENT, &[0x00, 0x11, 0x00, 0x01]);
    p.server.handle_datagram(p.now, CLIENT, &[0x00, 0x06]);
    let st = p.server.stats(s).unwrap();
    assert_eq!((st.crcless_accepted, st.crc_rejects), (0, 2));
    let mut p = Pair::new(
        common::seed(33),
        server_config().with_accept_crcless_quirks(true),
        client_config(),
        NetConfig::default(),
    );
    let (_c, s) = p.connect();
    p.server
        .handle_datagram(p.now, CLIENT, &[0x00, 0x11, 0x00, 0x01]);
    assert_eq!(p.server.stats(s).unwrap().crcless_accepted, 1);
}

#[test]
fn crcless_quirks_can_be_turned_off() {
    let mut p = Pair::new(
        common::seed(28),
        server_config(),
        client_config().with_accept_crcless_quirks(false),
        NetConfig::default(),
    );
    let (c, _s) = p.connect();
    p.client.handle_datagram(p.now, SERVER, &[0x00, 0x06]);
    let st = p.client.stats(c).unwrap();
    assert_eq!((st.crcless_accepted, st.crc_rejects), (0, 1));
}

#[test]
fn remap_moves_a_session_only_when_id_and_seed_both_match() {
    let (mut p, c, s) = connected(29, NetConfig::default());
    let id = p.server.session(s).unwrap().session_id();
    let seed = p.server.session(s).unwrap().crc_seed();
    let remap = |session_id, crc_seed| {
        let mut v = Vec::new();
        Packet::RemapConnection(RemapConnection {
            session_id,
            crc_seed,
        })
        .encode(&mut v);
        v
    };
    // Wrong seed, wrong id: nothing moves, nothing is answered.
    p.server.handle_datagram(p.now, 99, &remap(id, seed ^ 1));
    p.server.handle_datagram(p.now, 99, &remap(id ^ 1, seed));
    let mut buf = Vec::new();
    assert!(p.server.poll_transmit(p.now, &mut buf).is_none());
    assert_eq!(p.server.remote(s), Some(CLIENT));
    assert_eq!(p.server.endpoint_stats().remaps, 0);
    // Right pair: the session now lives at 99.
    p.server.handle_datagram(p.now, 99, &remap(id, seed));
    assert_eq!(p.server.remote(s), Some(99));
    assert_eq!(p.server.handle_of(99), Some(s));
    assert_eq!(p.server.handle_of(CLIENT), None);
    assert_eq!(p.server.endpoint_stats().remaps, 1);
    // And the client, now seen at 99, keeps talking.
    p.client_public = 99;
    p.client
        .send(c, Channel::ZERO, Bytes::from_static(b"from 99"))
        .unwrap();
    p.run_for(Duration::from_millis(300));
    assert_eq!(Pair::take_messages(&mut p.server_events, s).len(), 1);
}

#[test]
fn a_rebound_client_is_told_unknown_sender_and_remaps_itself() {
    let (mut p, c, s) = connected(30, NetConfig::default());
    // The NAT gives the client a new public address.
    p.client_public = 1234;
    p.client
        .send(c, Channel::ZERO, Bytes::from_static(b"after rebinding"))
        .unwrap();
    p.run_for(Duration::from_secs(3));
    assert_eq!(p.server.remote(s), Some(1234));
    assert!(p.server.endpoint_stats().unknown_sender_sent >= 1);
    assert_eq!(p.server.endpoint_stats().remaps, 1);
    assert_eq!(
        Pair::take_messages(&mut p.server_events, s),
        [(
            Channel::ZERO,
            Bytes::from_static(b"after rebinding"),
            Delivery::Reliable
        )]
    );
    assert_eq!(p.client.state(c), Some(State::Connected));
}

#[test]
fn a_client_forgotten_by_its_server_gives_up_with_unreachable_connection() {
    let (mut p, c, s) = connected(31, NetConfig::default());
    // The server loses the session without telling the client.
    p.server_alive = false;
    p.server.close(p.now, s, DisconnectReason::Application);
    p.run_for(Duration::from_secs(2));
    assert!(p.server.is_empty());
    p.server_alive = true;
    p.client
        .send(c, Channel::ZERO, Bytes::from_static(b"anyone?"))
        .unwrap();
    assert!(p.run_until(Duration::from_secs(20), |p| {
        Pair::closed(&p.client_events, c).is_some()
    }));
    assert_eq!(
        Pair::closed(&p.client_events, c),
        Some(Event::Closed {
            reason: DisconnectReason::UnreachableConnection,
            by_peer: false
        })
    );
}

#[test]
fn unknown_sender_answers_only_contextual_packets_and_is_rate_limited() {
    let now = std::time::Instant::now();
    let mut ep = Endpoint::<u32>::new(Arc::new(
        EndpointConfig::server(Arc::new(server_config()))
            .with_rng_seed(3)
            .with_stateless_reply_rate(10),
    ));
    let mut buf = Vec::new();
    let source = std::cell::Cell::new(7);
    let mut replies = |ep: &mut Endpoint<u32>, d: &[u8]| {
        ep.handle_datagram(now, source.get(), d);
        let mut n = 0;
        while let Some(t) = ep.poll_transmit(now, &mut buf) {
            assert_eq!(&buf[..t.len], [0x00, 0x1D]);
            assert!(t.len <= d.len(), "never larger than what it answers");
            n += 1;
        }
        n
    };
    // Never answered: UnknownSender, SessionResponse, RemapConnection (no match), Disconnect,
    // unreliable data, garbage.
    assert_eq!(replies(&mut ep, &[0x00, 0x1D]), 0);
    assert_eq!(replies(&mut ep, &[0x00, 0x02, 0, 0, 0, 0]), 0);
    assert_eq!(replies(&mut ep, &[0x00, 0x1E, 0, 0, 0, 1, 0, 0, 0, 2]), 0);
    assert_eq!(replies(&mut ep, &[0x00, 0x05, 0, 0, 0, 1, 0, 6]), 0);
    assert_eq!(replies(&mut ep, &[0x42, 0x01]), 0);
    assert_eq!(replies(&mut ep, &[0x00]), 0);
    assert_eq!(replies(&mut ep, &[0x00, 0x30, 1]), 0);
    // Contextual packets are answered, within the budget of 10 per second (from 100 sources:
    // each source's own share is tests/reply_budget.rs's business).
    let mut answered = 0;
    for _ in 0..100 {
        answered += replies(&mut ep, &[0x00, 0x09, 0x00, 0x01, 0xAA, 0xBB, 0xCC]);
        source.set(source.get() + 1);
    }
    assert_eq!(answered, 10);
    assert_eq!(ep.endpoint_stats().unknown_sender_sent, 10);
    assert_eq!(ep.endpoint_stats().replies_dropped, 90);
    assert!(ep.is_empty());
}

#[test]
fn a_half_open_session_expires_unseen() {
    let (mut p, _c, _s) = connected(32, NetConfig::default());
    let mut wire = Vec::new();
    Packet::SessionRequest(soe_wire::SessionRequest {
        protocol_version: 3,
        session_id: 5,
        udp_length: 512,
        application_protocol: b"TestProto_1",
    })
    .encode(&mut wire);
    p.server.handle_datagram(p.now, 4444, &wire);
    assert_eq!(p.server.half_open(), 1);
    assert_eq!(p.server.len(), 2);
    // Kept past the 10 s connect timeout, up to the 30 s idle timeout: some clients stay silent
    // after the handshake until their first heartbeat.
    p.run_for(Duration::from_secs(25));
    assert_eq!(p.server.half_open(), 1);
    p.run_for(Duration::from_secs(6));
    assert_eq!(p.server.half_open(), 0);
    assert_eq!(p.server.len(), 1);
    assert_eq!(p.server.endpoint_stats().half_open_expired, 1);
    assert!(
        p.server_events
            .iter()
            .all(|(h, _)| p.server.remote(*h) != Some(4444)),
        "a half-open session surfaces no event"
    );
}

#[test]
fn net_status_gives_a_round_trip_estimate_right_after_the_handshake() {
    let (mut p, c, s) = connected(33, NetConfig::default());
    p.run_for(Duration::from_millis(100));
    let st = p.client.stats(c).unwrap();
    // 20 ms each way.
    assert_eq!(st.rtt, Some(Duration::from_millis(40)));
    assert_eq!(st.min_rtt, Some(Duration::from_millis(40)));
    // The server answered exactly one probe (the first one was heard).
    assert_eq!(p.server.stats(s).unwrap().datagrams_sent, 2);
    // PortAlive is accepted and ignored.
    let mut f = peer_framer(&p, s);
    let d = sealed(&mut f, &[0x00, 0x1C, 1, 2, 3]);
    p.server.handle_datagram(p.now, CLIENT, &d);
    p.flush();
    assert_eq!(p.server.state(s), Some(State::Connected));
}

#[test]
fn a_lenient_net_status_request_is_answered() {
    let (mut p, _c, s) = connected(34, NetConfig::default());
    p.log_datagrams = true;
    let mut f = peer_framer(&p, s);
    // A short body (only the tick) still gets a response echoing the tick.
    let d = sealed(&mut f, &[0x00, 0x07, 0x12, 0x34]);
    p.server.handle_datagram(p.now, CLIENT, &d);
    p.flush();
    let last = p.from_server_log.last().unwrap().clone();
    let mut out = f;
    let opened = out.open(&last).unwrap().to_vec();
    match Packet::decode(&opened) {
        Ok(Packet::NetStatusResponse(r)) => assert_eq!(r.client_tick, 0x1234),
        other => panic!("{other:?}"),
    }
    assert_eq!(p.server.state(s), Some(State::Connected));
}

#[test]
fn closing_while_connecting_ends_at_once() {
    let mut p = Pair::new(
        common::seed(35),
        server_config(),
        client_config(),
        NetConfig::default(),
    );
    p.server_alive = false;
    let h = p.client.connect(p.now, SERVER).unwrap();
    p.flush();
    p.client.close(p.now, h, DisconnectReason::Application);
    p.flush();
    assert_eq!(
        Pair::closed(&p.client_events, h),
        Some(Event::Closed {
            reason: DisconnectReason::Application,
            by_peer: false
        })
    );
    assert!(p.client.is_empty());
    assert_eq!(
        p.client.send(h, Channel::ZERO, Bytes::from_static(b"x")),
        Err(soe_session::SendError::UnknownSession)
    );
}

#[test]
fn periodic_net_status_and_server_heartbeats_when_configured() {
    let mut p = Pair::new(
        common::seed(36),
        server_config()
            .with_server_heartbeats(true)
            .with_heartbeat_interval(Some(Duration::from_secs(4))),
        client_config()
            .with_heartbeat_interval(None)
            .with_net_status_interval(Some(Duration::from_secs(5))),
        NetConfig::default(),
    );
    let (c, s) = p.connect();
    p.run_for(Duration::from_secs(60));
    let cs = p.client.stats(c).unwrap();
    let ss = p.server.stats(s).unwrap();
    // The client answers each (the last may still be in flight), and never more.
    assert!(
        cs.heartbeats_sent <= ss.heartbeats_sent && cs.heartbeats_sent + 1 >= ss.heartbeats_sent,
        "{cs:?} {ss:?}"
    );
    assert!(ss.heartbeats_sent >= 5, "{ss:?}");
    // Probe plus one request every 5 s: about 13 round trips measured.
    assert!(ss.datagrams_received >= 12 + ss.heartbeats_sent, "{ss:?}");
    assert_eq!(cs.rtt, Some(Duration::from_millis(40)));
    assert!(Pair::closed(&p.client_events, c).is_none());
}

#[test]
fn an_idle_timeout_sends_a_disconnect_the_peer_still_hears() {
    // Only the client-to-server direction fails: the server times out, and its Disconnect
    // (reason Timeout) reaches the client, which learns why instead of timing out in turn.
    let mut p = Pair::new(
        common::seed(24),
        server_config()
            .with_idle_timeout(Some(Duration::from_secs(12)))
            .with_server_heartbeats(true)
            .with_heartbeat_interval(Some(Duration::from_secs(5))),
        client_config().with_idle_timeout(Some(Duration::from_secs(60))),
        NetConfig::default(),
    );
    let (c, s) = p.connect();
    p.up.loss = 1.0;
    assert!(p.run_until(Duration::from_secs(40), |p| {
        Pair::closed(&p.client_events, c).is_some()
    }));
    assert_eq!(
        Pair::closed(&p.server_events, s),
        Some(Event::Closed {
            reason: DisconnectReason::Timeout,
            by_peer: false
        })
    );
    assert_eq!(
        Pair::closed(&p.client_events, c),
        Some(Event::Closed {
            reason: DisconnectReason::Timeout,
            by_peer: true
        })
    );
}

#[test]
fn a_nat_rebinding_before_the_server_hears_the_client_remaps_the_half_open_session() {
    // The client has the server's SessionResponse, but its first packet is lost and its NAT
    // then moves it to a new port: the server's session is still half-open at the old address.
    // Its RemapConnection must find the half-open session (found by soe-sim: the client gave
    // up with UnreachableConnection).
    let mut p = Pair::new(
        common::seed(33),
        server_config(),
        client_config(),
        NetConfig::default(),
    );
    let c = p.client.connect(p.now, SERVER).unwrap();
    assert!(p.run_until(Duration::from_secs(5), |p| p.server.half_open() == 1));
    p.up.loss = 1.0;
    assert!(p.run_until(Duration::from_secs(5), |p| {
        p.client_events
            .iter()
            .any(|(h, e)| *h == c && *e == Event::Connected)
    }));
    assert_eq!(
        p.server.half_open(),
        1,
        "the server has not heard the client"
    );
    p.up.loss = 0.0;
    p.client_public = CLIENT + 100;
    p.client
        .send(c, Channel::ZERO, Bytes::from_static(b"from a new port"))
        .unwrap();
    assert!(p.run_until(Duration::from_secs(20), |p| {
        p.server_events
            .iter()
            .any(|(_, e)| matches!(e, Event::Message { data, .. } if data == "from a new port"))
    }));
    assert_eq!(Pair::closed(&p.client_events, c), None);
    assert_eq!(p.server.endpoint_stats().remaps, 1);
    assert_eq!(p.server.half_open(), 0);
}
