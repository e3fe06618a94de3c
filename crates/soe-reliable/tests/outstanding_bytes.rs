//! `max_outstanding_bytes`: the bytes sequenced and not yet cumulatively acknowledged never go
//! past the cap (worked out from the packets on the wire, over seeds, loss rates and fragmented
//! messages, in virtual time), and nothing is lost, duplicated or reordered however small it is.

mod common;

use std::time::Duration;

use common::{NetConfig, Pair, PairConfig, Script, mixed_messages};
use soe_reliable::ReliableConfig;

const PACKET: usize = 496;

fn run(seed: u64, cap: usize, loss: f64, messages: usize) -> Pair {
    let setup = PairConfig {
        config: ReliableConfig::default()
            .with_max_outstanding_bytes(cap)
            .with_unacknowledged_timeout(Duration::from_secs(600)),
        max_packet_len: PACKET,
        key: None,
        net: NetConfig::lossy(loss),
    };
    let mut pair = Pair::new(
        seed,
        &setup,
        Script::from_vec(mixed_messages(seed, messages)),
        Script::from_vec(mixed_messages(seed + 7_000_000, messages / 4)),
    );
    // `run` checks every message, in order, exactly once, and that the channel's own count
    // equals the one worked out from the wire after every packet.
    pair.run(Duration::from_secs(3600));
    pair
}

#[test]
fn the_cap_is_never_exceeded() {
    for cap in [1_500, 8 * 1024, 64 * 1024] {
        let mut highest = 0;
        for seed in 0..24u64 {
            let loss = [0.0, 0.05, 0.2][(seed % 3) as usize];
            let pair = run(seed + cap as u64, cap, loss, 400);
            assert!(
                pair.a_flight.peak <= cap,
                "seed {seed} cap {cap} loss {loss}: {} bytes in flight",
                pair.a_flight.peak
            );
            highest = highest.max(pair.a_flight.peak);
        }
        // The cap binds: the sender filled it to within one packet.
        assert!(
            highest + PACKET > cap,
            "cap {cap}: at most {highest} bytes were in flight; the test never reached the cap"
        );
    }
}

#[test]
fn without_the_cap_more_than_64_kib_go_out() {
    // The packet window alone (196 packets of up to 496 bytes) lets more than 64 KiB out: what
    // the cap of the Free Realms preset prevents.
    let highest = (0..6u64)
        .map(|seed| run(seed, 200 * 1024, 0.0, 400).a_flight.peak)
        .max()
        .unwrap_or(0);
    assert!(
        highest > 64 * 1024,
        "only {highest} bytes were ever in flight"
    );
}

#[test]
fn a_small_cap_loses_nothing_under_loss() {
    // One packet at a time (a cap below one packet), and three.
    for (cap, seeds) in [(1, 0..8u64), (1_500, 100..124)] {
        for seed in seeds {
            let loss = [0.1, 0.3][(seed % 2) as usize];
            let pair = run(seed, cap, loss, 120);
            let bound = cap.max(PACKET);
            assert!(
                pair.a_flight.peak <= bound,
                "seed {seed} cap {cap}: {} bytes in flight",
                pair.a_flight.peak
            );
            assert!(
                pair.a().stats().packets_resent > 0 || loss == 0.0,
                "seed {seed}"
            );
        }
    }
}
