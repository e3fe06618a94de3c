//! Issue 35 §3.1 and §3.2: keep-alives in virtual time. A round trip longer than the retry
//! interval must not start a Heartbeat ping-pong (each side answering the other's answers), and
//! a healthy session must not keep a stale "keep-alive outstanding" after one lost answer.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{CLIENT, NetConfig, Pair, SERVER, client_config, server_config};
use soe_session::{Channel, Event, SessionHandle};

/// Heartbeats sent by (client, server) so far.
fn heartbeats(p: &Pair, c: SessionHandle, s: SessionHandle) -> (u64, u64) {
    let sent = |st: Option<soe_session::SessionStats>| st.map_or(0, |st| st.heartbeats_sent);
    (sent(p.client.stats(c)), sent(p.server.stats(s)))
}

/// Connects on a fast path, then stretches the round trip to `rtt` and leaves the session
/// idle. Returns the Heartbeats each side sent in the second minute after the change.
fn heartbeats_per_minute_at(seed: u64, rtt: Duration) -> (u64, u64) {
    let net = NetConfig {
        loss: 0.01,
        ..NetConfig::default()
    };
    let mut p = Pair::new(common::seed(seed), server_config(), client_config(), net);
    let (c, s) = p.connect();
    p.client
        .send(c, Channel::ZERO, Bytes::from_static(b"hello"))
        .unwrap();
    p.run_for(Duration::from_secs(1));
    for dir in [&mut p.up, &mut p.down] {
        dir.delay = rtt / 2;
        dir.jitter = Duration::from_millis(40);
    }
    p.run_for(Duration::from_secs(60));
    let before = heartbeats(&p, c, s);
    p.run_for(Duration::from_secs(60));
    let after = heartbeats(&p, c, s);
    assert!(
        Pair::closed(&p.client_events, c).is_none() && Pair::closed(&p.server_events, s).is_none(),
        "seed {seed}, rtt {rtt:?}: the idle session stays open on its keep-alives"
    );
    // The idle timeout still works: a peer gone silent is timed out.
    p.client_alive = false;
    p.run_for(Duration::from_secs(40));
    assert_eq!(
        Pair::closed(&p.server_events, s),
        Some(Event::Closed {
            reason: soe_session::DisconnectReason::Timeout,
            by_peer: false
        }),
        "seed {seed}, rtt {rtt:?}"
    );
    (after.0 - before.0, after.1 - before.1)
}

#[test]
fn no_round_trip_from_half_a_second_to_six_starts_a_heartbeat_ping_pong() {
    for ms in [500, 900, 1000, 1100, 1500, 2000, 3000, 4000, 5000, 6000] {
        let rtt = Duration::from_millis(ms);
        for seed in 0..4 {
            let (client, server) = heartbeats_per_minute_at(seed, rtt);
            // A round of keep-alives starts after 10 s of silence, and lasts until the first
            // answer: one Heartbeat, and one more per second of round trip.
            let per_round = 2 + ms / 1000;
            let bound = 6 * per_round;
            if seed == 0 {
                println!(
                    "rtt {ms} ms: {client} Heartbeats a minute from the client, {server} from the server"
                );
            }
            assert!(
                client <= bound && server <= bound,
                "seed {seed}, rtt {ms} ms: {client} and {server} Heartbeats a minute (at most {bound})"
            );
            assert!(
                client >= 4,
                "seed {seed}, rtt {ms} ms: the client keeps the session alive"
            );
        }
    }
}

/// Whether a datagram is a RemapConnection.
fn is_remap(d: &[u8]) -> bool {
    d.starts_with(&[0x00, 0x1E])
}

#[test]
fn one_lost_heartbeat_answer_leaves_no_stale_keep_alive_behind() {
    for seed in 0..8 {
        let mut p = Pair::new(
            common::seed(seed),
            server_config(),
            client_config(),
            NetConfig::default(),
        );
        p.log_datagrams = true;
        let (c, s) = p.connect();
        // Idle until the client's keep-alive goes out...
        let sent = p.run_until(Duration::from_secs(30), |p| {
            p.client.stats(c).is_some_and(|st| st.heartbeats_sent == 1)
        });
        assert!(sent, "seed {seed}: the client sent a keep-alive");
        // ... and lose its answer.
        p.down.loss = 1.0;
        p.run_for(Duration::from_millis(100));
        p.down.loss = 0.0;
        // The server talks on (well within the client's retry interval), every 2 s for 30 s,
        // then the session idles: the client's next keep-alive is answered at once.
        for i in 0..15u8 {
            p.server
                .send(s, Channel::ZERO, Bytes::from(vec![i; 8]))
                .unwrap();
            p.run_for(Duration::from_secs(2));
        }
        p.run_for(Duration::from_secs(60));
        let remaps = p.to_server_log.iter().filter(|d| is_remap(d)).count();
        assert_eq!(
            remaps, 0,
            "seed {seed}: unprompted RemapConnections from a healthy client"
        );
        assert!(Pair::closed(&p.client_events, c).is_none(), "seed {seed}");
        assert_eq!(p.server.remote(s), Some(CLIENT), "seed {seed}");
        let _ = SERVER;
    }
}

/// The case: one delay of `rtt` while a keep-alive is out, then the path is fast
/// again. Returns the Heartbeats each side sent in the minute after.
fn heartbeats_after_one_delay(seed: u64, rtt: Duration) -> (u64, u64) {
    let mut p = Pair::new(
        common::seed(seed),
        server_config(),
        client_config(),
        NetConfig::default(),
    );
    let (c, s) = p.connect();
    let fast = p.up;
    // Slow while the first keep-alive round (10 s after the handshake) and its retries go.
    p.run_for(Duration::from_secs(9));
    for dir in [&mut p.up, &mut p.down] {
        dir.delay = rtt / 2;
    }
    p.run_for(Duration::from_secs(4) + rtt);
    (p.up, p.down) = (fast, fast);
    p.run_for(Duration::from_secs(20));
    let before = heartbeats(&p, c, s);
    p.run_for(Duration::from_secs(60));
    let after = heartbeats(&p, c, s);
    (after.0 - before.0, after.1 - before.1)
}

#[test]
fn one_long_delay_does_not_leave_a_ping_pong_behind() {
    for ms in [1200, 1500, 2500, 5000] {
        for seed in 0..3 {
            let (client, server) = heartbeats_after_one_delay(seed, Duration::from_millis(ms));
            if seed == 0 {
                println!("after one {ms} ms delay: {client} and {server} Heartbeats a minute");
            }
            // Back on a fast path: one keep-alive and its answer every 10 s.
            assert!(
                client <= 7 && server <= 7,
                "seed {seed}, delay {ms} ms: {client} and {server} Heartbeats a minute"
            );
        }
    }
}

// ----- Issue 43 §4: the count of unanswered Heartbeats -----

/// A datagram that holds one Heartbeat and nothing else (`00 06` and a 2-byte CRC): how a
/// session answers a Heartbeat when it has nothing else to send.
fn is_lone_heartbeat(d: &[u8]) -> bool {
    d.len() == 4 && d.starts_with(&[0x00, 0x06])
}

/// RemapConnections the client sent.
fn client_remaps(p: &Pair) -> usize {
    p.from_client_log.iter().filter(|d| is_remap(d)).count()
}

/// The server probes a live session (a SessionRequest with a new session id came from its
/// address) and the client's answer is lost, on a path of round trip `rtt`. Returns the
/// client's RemapConnections and the Heartbeats each side sent in the minute after.
fn after_a_lost_probe_answer(seed: u64, rtt: Duration) -> (usize, u64, u64) {
    let net = NetConfig {
        delay: rtt / 2,
        jitter: Duration::from_millis(20),
        ..NetConfig::default()
    };
    let mut p = Pair::new(common::seed(seed), server_config(), client_config(), net);
    p.log_datagrams = true;
    let (c, s) = p.connect();
    p.run_for(Duration::from_secs(3) + rtt);
    let remaps_before = client_remaps(&p);
    // One probe; the client's answer (a lone Heartbeat) is lost.
    let mut lost = false;
    p.drop_to_server = Some(Box::new(move |d| {
        let drop = !lost && is_lone_heartbeat(d);
        lost |= drop;
        drop
    }));
    p.server
        .handle_datagram(p.now, CLIENT, &common::session_request(0x0BAD_0001));
    p.run_for(Duration::from_secs(30));
    let before = heartbeats(&p, c, s);
    p.run_for(Duration::from_secs(60));
    let after = heartbeats(&p, c, s);
    assert!(
        Pair::closed(&p.client_events, c).is_none() && Pair::closed(&p.server_events, s).is_none(),
        "seed {seed}, rtt {rtt:?}: the session stays open"
    );
    (
        client_remaps(&p) - remaps_before,
        after.0 - before.0,
        after.1 - before.1,
    )
}

#[test]
fn a_lost_answer_to_a_liveness_probe_makes_no_remap_and_no_ping_pong() {
    for ms in [40, 1000, 2500, 4000, 6000] {
        let rtt = Duration::from_millis(ms);
        for seed in 0..4 {
            let (remaps, client, server) = after_a_lost_probe_answer(seed, rtt);
            if seed == 0 {
                println!(
                    "rtt {ms} ms: {remaps} RemapConnections; then {client} and {server} Heartbeats a minute"
                );
            }
            assert_eq!(
                remaps, 0,
                "seed {seed}, rtt {ms} ms: unprompted RemapConnections from a healthy client"
            );
            // Idle: a round of keep-alives every 10 s, one Heartbeat and one more per second
            // of round trip, each answered once.
            let bound = 6 * (2 + ms / 1000);
            assert!(
                client <= bound && server <= bound,
                "seed {seed}, rtt {ms} ms: {client} and {server} Heartbeats a minute (at most {bound})"
            );
        }
    }
}

#[test]
fn a_client_that_never_answers_probes_keeps_its_keep_alives_answered() {
    for seed in 0..3 {
        let mut p = Pair::new(
            common::seed(seed),
            server_config(),
            client_config(),
            NetConfig::default(),
        );
        p.log_datagrams = true;
        let (c, s) = p.connect();
        // For five minutes the client never answers the server's Heartbeats (its lone ones
        // are lost), while it sends a message every second, so both sides hear each other;
        // a SessionRequest from its address every 2 s makes the server probe it 150 times.
        p.drop_to_server = Some(Box::new(is_lone_heartbeat));
        let probes_before = p.server.stats(s).map_or(0, |st| st.heartbeats_sent);
        for i in 0..300u32 {
            p.client
                .send(c, Channel::ZERO, Bytes::from(vec![1u8; 8]))
                .unwrap();
            p.run_for(Duration::from_millis(500));
            if i % 2 == 1 {
                p.server
                    .handle_datagram(p.now, CLIENT, &common::session_request(0x0BAD_0000 + i));
            }
            p.run_for(Duration::from_millis(500));
        }
        let probes = p.server.stats(s).map_or(0, |st| st.heartbeats_sent) - probes_before;
        assert!(probes >= 100, "seed {seed}: only {probes} probes");
        // Then it behaves: it answers, and goes idle. Its keep-alives must be answered.
        p.drop_to_server = None;
        let remaps_before = client_remaps(&p);
        p.run_for(Duration::from_secs(120));
        let remaps = client_remaps(&p) - remaps_before;
        if seed == 0 {
            println!("after {probes} unanswered probes: {remaps} RemapConnections from the client");
        }
        assert_eq!(
            Pair::closed(&p.client_events, c),
            None,
            "seed {seed}: the client's keep-alives went unanswered"
        );
        assert_eq!(remaps, 0, "seed {seed}: unprompted RemapConnections");
        assert_eq!(p.server.remote(s), Some(CLIENT), "seed {seed}");
    }
}
