//! Arbitrary input never panics a session or an endpoint: random datagrams, mutations of real
//! ones, and garbage with a valid CRC (which may end the session, never the process).
//!
//! The garbage is aimed at live sessions. Datagrams the session's framer rejects (a CRC that does
//! not match, and not one of the two CRC-less shapes real peers send) must leave the session
//! untouched: one session takes a long barrage of them and keeps carrying data. Datagrams that
//! pass the framer may end the session (valid-CRC garbage is corruption; a forged SessionRequest
//! or Disconnect may end it too): in the mixed barrage, a session that ends is wound down,
//! checked, and replaced before the next datagram, and each end is traced to a datagram that
//! passed the framer. The virtual clock moves between datagrams, so acks, resends, heartbeats and
//! idle timers run while the garbage arrives; the test counts itself how many datagrams reached
//! an established session.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{NetConfig, Pair, SERVER, client_config, server_config};
use soe_session::{
    Channel, DisconnectReason, Event, RandomSource, SessionHandle, SplitMix64, State,
};
use soe_wire::{CrcLength, FrameConfig, Framer};

/// A connected pair with real traffic logged, and a framer holding its CRC seed.
struct Live {
    seed: u64,
    pair: Pair,
    client: SessionHandle,
    server: SessionHandle,
    framer: Framer,
    samples: Vec<Vec<u8>>,
}

impl Live {
    fn open(seed: u64) -> Self {
        let mut p = Pair::new(seed, server_config(), client_config(), NetConfig::default());
        p.log_datagrams = true;
        let (c, s) = p.connect();
        p.client
            .send(c, Channel::ZERO, Bytes::from(vec![0u8; 3000]))
            .unwrap();
        p.server
            .send(s, Channel::ZERO, Bytes::from(vec![1u8; 700]))
            .unwrap();
        p.run_for(Duration::from_millis(200));
        let crc_seed = p.server.session(s).map(|x| x.crc_seed()).unwrap_or(0);
        let framer = Framer::new(FrameConfig::new(crc_seed).with_crc_length(CrcLength::TWO));
        let samples: Vec<Vec<u8>> = p
            .to_server_log
            .iter()
            .chain(p.from_server_log.iter())
            .cloned()
            .collect();
        assert!(samples.len() >= 6, "seed {seed}: real traffic was logged");
        p.log_datagrams = false;
        p.client_events.clear();
        p.server_events.clear();
        Self {
            seed,
            pair: p,
            client: c,
            server: s,
            framer,
            samples,
        }
    }

    fn both_connected(&self) -> bool {
        self.pair.server.state(self.server) == Some(State::Connected)
            && self.pair.client.state(self.client) == Some(State::Connected)
    }

    /// Whether the sessions' framer would take `d` (a valid CRC, a contextless packet, or one
    /// of the CRC-less shapes), i.e. whether `d` can reach the session's packet handling.
    fn passes_framer(&mut self, d: &[u8]) -> bool {
        self.framer.open(d).is_ok() || self.framer.open_crcless(d).is_some()
    }

    /// One hostile datagram: noise, a mutated real datagram, or garbage behind a real opcode
    /// with a valid CRC (`framed` of the time).
    fn garbage(&mut self, rng: &mut SplitMix64, framed: f64) -> Vec<u8> {
        let roll = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        if roll < framed {
            let op = (rng.next_u32() % 0x20) as u8;
            let len = (rng.next_u32() % 40) as usize;
            let mut d = vec![0x00, op];
            d.extend((0..len).map(|_| rng.next_u32() as u8));
            self.framer.seal(&mut d, 0);
            return d;
        }
        if rng.next_u32() % 2 == 0 {
            let len = (rng.next_u32() % 80) as usize;
            return (0..len).map(|_| rng.next_u32() as u8).collect();
        }
        let n = self.samples.len();
        let mut d = self.samples[(rng.next_u32() as usize) % n].clone();
        for _ in 0..1 + rng.next_u32() % 3 {
            if !d.is_empty() {
                let at = (rng.next_u32() as usize) % d.len();
                d[at] = rng.next_u32() as u8;
            }
        }
        d.truncate((rng.next_u32() as usize) % (d.len() + 4));
        d
    }

    /// Delivers `d` to one side (`to_server`), a stranger's noise to the server, some real
    /// traffic, and moves the clock up to `max_step`.
    fn inject(&mut self, rng: &mut SplitMix64, i: u32, d: &[u8], max_step: Duration) {
        let p = &mut self.pair;
        if i % 2 == 0 {
            p.server.handle_datagram(p.now, p.client_public, d);
        } else {
            p.client.handle_datagram(p.now, SERVER, d);
        }
        let len = (rng.next_u32() % 80) as usize;
        let stranger: Vec<u8> = (0..len).map(|_| rng.next_u32() as u8).collect();
        p.server.handle_datagram(p.now, 5000 + i, &stranger);
        if i % 64 == 0 {
            let _ = p
                .client
                .send(self.client, Channel::ZERO, Bytes::from_static(b"ping"));
            let _ = p
                .server
                .send(self.server, Channel::ZERO, Bytes::from_static(b"pong"));
        }
        let step = rng.next_u64() % (max_step.as_micros() as u64 + 1);
        p.run_for(Duration::from_micros(step));
    }

    /// Sends a tagged message each way; true when both arrived within 5 s.
    fn probe(&mut self, i: u32) -> bool {
        let (c, s) = (self.client, self.server);
        let p = &mut self.pair;
        let tag = Bytes::from(format!("probe {i}"));
        if p.client.send(c, Channel::ZERO, tag.clone()).is_err()
            || p.server.send(s, Channel::ZERO, tag.clone()).is_err()
        {
            return false;
        }
        let got = |events: &[(SessionHandle, Event)], h| {
            events
                .iter()
                .any(|(eh, e)| *eh == h && matches!(e, Event::Message { data, .. } if *data == tag))
        };
        p.run_until(Duration::from_secs(5), |p| {
            got(&p.server_events, s) && got(&p.client_events, c)
        })
    }

    /// Lets whatever the garbage started finish, then closes everything and checks that both
    /// endpoints end empty. Returns how many sessions ended as corrupt.
    fn wind_down(mut self) -> usize {
        let seed = self.seed;
        let p = &mut self.pair;
        p.run_for(Duration::from_secs(40));
        let corrupt = p
            .server_events
            .iter()
            .chain(p.client_events.iter())
            .filter(|(_, e)| {
                matches!(
                    e,
                    Event::Closed {
                        reason: DisconnectReason::CorruptPacket,
                        ..
                    }
                )
            })
            .count();
        p.server.close_all(p.now, DisconnectReason::Application);
        p.client.close_all(p.now, DisconnectReason::Application);
        p.run_for(Duration::from_secs(15));
        assert!(p.client.is_empty(), "seed {seed}");
        assert!(p.server.is_empty(), "seed {seed}");
        corrupt
    }
}

#[test]
fn garbage_the_framer_rejects_never_disturbs_a_live_session() {
    let seed = common::seed(61);
    let mut rng = SplitMix64::new(seed);
    let mut live = Live::open(seed);
    let start = live.pair.now;
    let mut reached_live = 0u32;
    let mut skipped = 0u32;
    let mut probes = 0u32;
    let mut i = 0u32;
    while reached_live < 10_000 {
        let d = live.garbage(&mut rng, 0.0);
        if live.passes_framer(&d) {
            // A mutated SessionRequest or SessionResponse (contextless: no CRC), or noise that
            // happens to pass. Not this test's subject.
            skipped += 1;
            continue;
        }
        if live.both_connected() {
            reached_live += 1;
        }
        live.inject(&mut rng, i, &d, Duration::from_millis(10));
        i += 1;
        if i % 500 == 0 {
            assert!(live.probe(i), "seed {seed}: probe {i} not delivered");
            probes += 1;
        }
    }
    let elapsed = live.pair.now - start;
    let stats = live.pair.server.stats(live.server).unwrap();
    let client_stats = live.pair.client.stats(live.client).unwrap();
    println!(
        "{reached_live} of {i} reached the live session ({skipped} skipped as framer-valid); \
         {probes} probes; {elapsed:?}; server {stats:?}"
    );
    // The session never ended: every datagram reached it, and it still works.
    assert_eq!(reached_live, i, "seed {seed}");
    assert!(live.both_connected(), "seed {seed}");
    assert!(skipped < i / 10, "{skipped}");
    assert_eq!(probes, 20);
    // About 5 ms per datagram: well past the heartbeat and ack timers.
    assert!(elapsed >= Duration::from_secs(40), "{elapsed:?}");
    // Each one was seen, and rejected, by the session it was aimed at.
    assert_eq!(
        stats.crc_rejects + client_stats.crc_rejects,
        u64::from(i),
        "{stats:?} {client_stats:?}"
    );
    assert_eq!(live.wind_down(), 0, "seed {seed}");
}

#[test]
fn mixed_garbage_ends_sessions_only_through_datagrams_the_framer_accepts() {
    const AIMED: u32 = 20_000;
    let seed = common::seed(60);
    let mut rng = SplitMix64::new(seed);
    let mut generation = 0u64;
    let mut live = Live::open(seed);
    let mut reached_live = 0u32;
    let mut framer_valid = 0u32;
    let mut reopened = 0u32;
    let mut corrupt_closes = 0;
    let mut virtual_time = Duration::ZERO;
    let mut probes = 0u32;
    for i in 0..AIMED {
        if !live.both_connected() {
            virtual_time += live.pair.elapsed();
            corrupt_closes += live.wind_down();
            generation += 1;
            reopened += 1;
            live = Live::open(seed ^ generation);
        }
        let d = live.garbage(&mut rng, 0.1);
        let passes = live.passes_framer(&d);
        if live.both_connected() {
            reached_live += 1;
            framer_valid += u32::from(passes);
        }
        live.inject(&mut rng, i, &d, Duration::from_millis(5));
        assert!(
            passes || live.both_connected(),
            "seed {}: datagram {i} ({d:02x?}) failed the framer yet ended the session",
            live.seed
        );
        if i % 500 == 499 && live.both_connected() {
            // Garbage in flight may still end the session before the probe arrives: only a
            // session still established must have delivered it.
            let delivered = live.probe(i);
            assert!(
                delivered || !live.both_connected(),
                "seed {}: probe {i} not delivered on a live session",
                live.seed
            );
            probes += u32::from(delivered);
        }
    }
    virtual_time += live.pair.elapsed();
    corrupt_closes += live.wind_down();
    println!(
        "{reached_live} of {AIMED} reached a live session ({framer_valid} framer-valid); \
         {reopened} reopened; {corrupt_closes} corrupt closes; {probes} probes; {virtual_time:?}"
    );
    assert_eq!(
        reached_live, AIMED,
        "a session is reopened before each datagram"
    );
    assert!(framer_valid >= 1_500, "{framer_valid}");
    // Valid-CRC garbage does end sessions, so reopening was exercised; each costs one.
    assert!(corrupt_closes >= 20, "{corrupt_closes}");
    assert!((20..=framer_valid).contains(&reopened), "{reopened}");
    assert!(probes >= 5, "{probes}");
    assert!(virtual_time >= Duration::from_secs(40), "{virtual_time:?}");
}
