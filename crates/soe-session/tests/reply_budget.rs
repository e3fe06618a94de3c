//! Issue 30 §1.9: the stateless-reply budget (UnknownSender and refusals) under a flood, in
//! virtual time. A client whose NAT rebinds mid-session learns it from the server's
//! UnknownSender and remaps; a flood of datagrams from strangers, far above the budget, must
//! not leave it unable to do so until it idles out.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{CLIENT, NetConfig, Pair, SERVER, client_config, server_config};
use soe_session::{Channel, Delivery, Endpoint, EndpointConfig, RandomSource, SplitMix64};

/// The client's address after its NAT rebinds.
const REBOUND: u32 = 77;
/// Flood datagrams per millisecond: 10,000 a second, 50 times the default budget.
const FLOOD_PER_MS: usize = 10;

/// Where the flood comes from.
#[derive(Debug, Clone, Copy)]
enum Flood {
    /// Four sources (a few hosts, not spoofing).
    Few,
    /// A new random source for every datagram (spoofed).
    Many,
}

impl Flood {
    fn source(self, rng: &mut SplitMix64) -> u32 {
        match self {
            Self::Few => 1_000 + (rng.next_u32() % 4),
            Self::Many => 1_000 + (rng.next_u32() % 4_000_000_000),
        }
    }
}

/// A contextual packet (reliable data) from nobody the server knows: answered with
/// UnknownSender within the budget.
fn garbage(rng: &mut SplitMix64) -> [u8; 8] {
    let x = rng.next_u64().to_be_bytes();
    [0x00, 0x09, x[0], x[1], x[2], x[3], x[4], x[5]]
}

/// Connects, floods the server from `flood` for 2 s, then rebinds the client's NAT and has it
/// send a message. Returns how long after the rebinding the server had moved the session to the
/// new address and delivered the message (`None`: not within 25 s), and whether the session
/// stayed open on both sides.
fn rebind_under_flood(seed: u64, flood: Flood) -> (Option<Duration>, bool) {
    let mut p = Pair::new(
        common::seed(seed),
        server_config(),
        client_config(),
        NetConfig {
            loss: 0.05,
            ..NetConfig::default()
        },
    );
    p.nat = true;
    let (c, s) = p.connect();
    let mut rng = SplitMix64::new(seed ^ 0xF100D);
    let mut rebound_at = None;
    let mut took = None;
    while p.elapsed() < Duration::from_secs(30) && took.is_none() {
        for _ in 0..FLOOD_PER_MS {
            let from = flood.source(&mut rng);
            debug_assert!(![SERVER, CLIENT, REBOUND].contains(&from));
            let now = p.now;
            p.server.handle_datagram(now, from, &garbage(&mut rng));
        }
        p.run_for(Duration::from_millis(1));
        if rebound_at.is_none() && p.elapsed() >= Duration::from_secs(3) {
            p.client_public = REBOUND;
            p.client
                .send(c, Channel::ZERO, Bytes::from_static(b"after rebinding"))
                .unwrap();
            rebound_at = Some(p.now);
        }
        if let Some(at) = rebound_at {
            let delivered = p.server_events.iter().any(|(h, e)| {
                *h == s
                    && matches!(e, soe_session::Event::Message { data, kind, .. }
                        if kind == &Delivery::Reliable && &data[..] == b"after rebinding")
            });
            if delivered && p.server.remote(s) == Some(REBOUND) {
                took = Some(p.now - at);
            }
        }
    }
    let open =
        Pair::closed(&p.client_events, c).is_none() && Pair::closed(&p.server_events, s).is_none();
    (took, open)
}

#[test]
fn a_flood_from_a_few_sources_leaves_a_rebound_client_its_unknown_sender() {
    for seed in 0..6 {
        let (took, open) = rebind_under_flood(seed, Flood::Few);
        assert!(open, "seed {seed}: the session stayed open");
        // Its first datagram from the new address is answered (unless the 5 % loss strikes),
        // and the message arrives with its first resend.
        assert!(
            took.is_some_and(|t| t < Duration::from_secs(2)),
            "seed {seed}: remapped {took:?} after the rebinding"
        );
    }
}

#[test]
fn a_spoofed_flood_from_many_sources_does_not_strand_a_rebound_client() {
    for seed in 0..6 {
        let (took, open) = rebind_under_flood(seed, Flood::Many);
        assert!(open, "seed {seed}: the session stayed open");
        // A spoofed flood spread over every source leaves a source a share of the budget in
        // proportion (2 % here); the client also remaps once its keep-alive goes unanswered
        // (10 s of silence, then 1 s), well before its 30 s idle timeout.
        assert!(
            took.is_some_and(|t| t < Duration::from_secs(15)),
            "seed {seed}: remapped {took:?} after the rebinding"
        );
    }
}

/// The UnknownSender replies `ep` sends to `n` contextual packets from `from` at `now`.
fn answered(ep: &mut Endpoint<u32>, now: Instant, from: u32, n: usize) -> usize {
    let mut buf = Vec::new();
    let mut rng = SplitMix64::new(u64::from(from));
    for _ in 0..n {
        ep.handle_datagram(now, from, &garbage(&mut rng));
    }
    let mut answered = 0;
    while let Some(t) = ep.poll_transmit(now, &mut buf) {
        assert_eq!((t.destination, &buf[..t.len]), (from, &[0x00, 0x1D][..]));
        answered += 1;
    }
    answered
}

#[test]
fn each_source_has_its_own_share_of_the_stateless_replies() {
    for seed in 0..4 {
        let t0 = Instant::now();
        let mut ep = Endpoint::<u32>::new(Arc::new(
            EndpointConfig::server(Arc::new(server_config()))
                .with_rng_seed(seed)
                .with_stateless_reply_rate(100)
                .with_stateless_replies_per_source(3)
                .with_stateless_reply_slots(4096),
        ));
        // One source gets its share (a second's worth) and no more...
        assert_eq!(answered(&mut ep, t0, 1000, 50), 3, "seed {seed}");
        // ... which leaves the endpoint's budget to everyone else.
        assert_eq!(answered(&mut ep, t0, 1001, 1), 1, "seed {seed}");
        // Many sources share the endpoint's budget: 100 a second, 4 spent.
        let many: usize = (2000..2200).map(|a| answered(&mut ep, t0, a, 1)).sum();
        assert_eq!(many, 96, "seed {seed}");
        assert_eq!(
            answered(&mut ep, t0, 1002, 1),
            0,
            "seed {seed}: the budget is spent"
        );
        // Both refill with time: half a second later, 50 for the endpoint, 1.5 for a source.
        let t1 = t0 + Duration::from_millis(500);
        assert_eq!(answered(&mut ep, t1, 1000, 50), 1, "seed {seed}");
        let stats = ep.endpoint_stats();
        assert_eq!(stats.unknown_sender_sent, 101, "seed {seed}");
        assert_eq!(stats.replies_dropped, 47 + 104 + 1 + 49, "seed {seed}");
    }
}
