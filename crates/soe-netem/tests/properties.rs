//! Seeded properties of our stack over the emulated path: every message delivered exactly once,
//! in order, byte for byte; no session death; and no spurious resends against a slow acker on a
//! clean path. Each failure names its seeds; replay one with `SOE_NETEM_SEED=<seed>`.
//!
//! Every one of these failed with the loss recovery that waited for a 100 ms-floored timer and
//! gave up on a peer that never re-acknowledges duplicates (see `BEFORE.md`).

use std::time::Duration;

use soe_netem::{Condition, RunConfig, RunResult, StackKind, Workload, run};

/// Seeds per condition, or the one in `SOE_NETEM_SEED`.
fn seeds() -> Vec<u64> {
    match std::env::var("SOE_NETEM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        Some(seed) => vec![seed],
        None => (1..=10).collect(),
    }
}

/// Round trips every condition runs at.
const RTTS: [u64; 3] = [1, 30, 150];
/// Traffic time per run; every message sent must then arrive within [`DRAIN`].
const TRAFFIC: Duration = Duration::from_secs(3);
/// How long after the traffic stops every message must have arrived. The bulk workload leaves
/// up to 256 messages of 4 KiB queued; at 30 % loss each way and 150 ms against the slow acker,
/// the last ones take up to about 43 s.
const DRAIN: Duration = Duration::from_secs(60);

fn describe(r: &RunResult, w: Workload) -> String {
    format!(
        "seed {} ({}): connected {}, death {:?}, longest stall {:?}, {:?}, resends {}/{}, {} \
         arrived twice (replay with SOE_NETEM_SEED={})",
        r.seed,
        w.name(),
        r.connected,
        r.death,
        r.longest_stall,
        r.verdict,
        r.counters.packets_resent,
        r.counters.packets_sent,
        r.counters.duplicates_received,
        r.seed
    )
}

/// Runs `config(seed, rtt, workload)` for every seed, round trip and workload; returns a line
/// for each run that is unclean or that `fails`.
fn failing_runs(
    config: impl Fn(u64, Duration, Workload) -> RunConfig,
    fails: impl Fn(&RunResult, Workload) -> bool,
) -> Vec<String> {
    let mut failures = Vec::new();
    for seed in seeds() {
        for rtt in RTTS.map(Duration::from_millis) {
            for workload in Workload::ALL {
                let r = run(&config(seed, rtt, workload));
                if !r.is_clean() || fails(&r, workload) {
                    failures.push(format!("RTT {rtt:?}: {}", describe(&r, workload)));
                }
            }
        }
    }
    failures
}

/// Runs echo, bulk and tick traffic under `condition` at each round trip for every seed; fails
/// listing every unclean run.
fn exactly_once(stack: StackKind, condition: Condition) {
    exactly_once_within(stack, condition, DRAIN);
}

/// [`exactly_once`] with another drain time.
///
/// Up to 15 % loss (and in 10 % bursts) a stall also fails a run: messages outstanding and none
/// delivered for [`soe_netem::STALL`]. At 30 % loss each way, retransmission timeouts backed
/// off to their 1 s ceiling leave gaps past 10 s with any loss recovery (the one before the
/// h1z1-server model did too, at 150 ms), so there the property is exactly once and no death.
fn exactly_once_within(stack: StackKind, condition: Condition, drain: Duration) {
    let stalls_count = condition.mean_loss() <= 0.15;
    let failures = failing_runs(
        |seed, rtt, workload| {
            let mut config = RunConfig::new(stack, workload, rtt, condition.clone(), seed)
                .with_duration(TRAFFIC);
            config.drain = drain;
            config
        },
        |r, workload| {
            assert!(r.verdict.sent > 0, "{}", describe(r, workload));
            stalls_count && r.stalled()
        },
    );
    assert!(
        failures.is_empty(),
        "{} under {}: {} unclean runs:\n{}",
        stack.name(),
        condition.name,
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn ours_clean_path() {
    exactly_once(StackKind::Ours, Condition::loss(0.0));
}

#[test]
fn ours_ten_percent_loss() {
    exactly_once(StackKind::Ours, Condition::loss(0.10));
}

#[test]
fn ours_thirty_percent_loss() {
    exactly_once(StackKind::Ours, Condition::loss(0.30));
}

#[test]
fn ours_burst_loss() {
    exactly_once(StackKind::Ours, Condition::burst());
}

#[test]
fn ours_reordering() {
    exactly_once(StackKind::Ours, Condition::reorder());
}

#[test]
fn ours_duplication() {
    exactly_once(StackKind::Ours, Condition::duplicate());
}

#[test]
fn slow_acker_clean_path() {
    exactly_once(StackKind::OursVsSlowAcker, Condition::loss(0.0));
}

#[test]
fn slow_acker_ten_percent_loss() {
    exactly_once(StackKind::OursVsSlowAcker, Condition::loss(0.10));
}

#[test]
fn slow_acker_thirty_percent_loss() {
    exactly_once(StackKind::OursVsSlowAcker, Condition::loss(0.30));
}

#[test]
fn slow_acker_burst_loss() {
    exactly_once(StackKind::OursVsSlowAcker, Condition::burst());
}

#[test]
fn slow_acker_reordering() {
    exactly_once(StackKind::OursVsSlowAcker, Condition::reorder());
}

#[test]
fn slow_acker_duplication() {
    exactly_once(StackKind::OursVsSlowAcker, Condition::duplicate());
}

// Against the model of h1z1-server (soe_netem::h1z1): acks only from its 24 ms loop and never
// for a duplicate, CRC-less OutOfOrder, delivery that stops behind a packet yielding no message.
// With the loss recovery before this model existed, 5 % loss and more left sessions stalled
// (an empty Group elicitor lost, newer packets buffered behind it) and, with the elicitor off,
// dead (UnacknowledgedTimeout: only the oldest packet was ever resent, and the server drops it
// silently).

#[test]
fn h1z1_clean_path() {
    exactly_once(StackKind::OursVsH1z1, Condition::loss(0.0));
}

#[test]
fn h1z1_one_percent_loss() {
    exactly_once(StackKind::OursVsH1z1, Condition::loss(0.01));
}

#[test]
fn h1z1_five_percent_loss() {
    exactly_once(StackKind::OursVsH1z1, Condition::loss(0.05));
}

#[test]
fn h1z1_ten_percent_loss() {
    exactly_once(StackKind::OursVsH1z1, Condition::loss(0.10));
}

/// The bulk workload leaves about 1 MiB queued when its traffic stops. At 15 % loss each way
/// and a 30 ms path, a loss-based window stays near three packets per round of about 54 ms (the
/// path plus the server's 24 ms loop), so the last messages take up to about 70 s: the drain is
/// longer here. A stall (10 s without a delivery) still fails the run.
#[test]
fn h1z1_fifteen_percent_loss() {
    exactly_once_within(
        StackKind::OursVsH1z1,
        Condition::loss(0.15),
        Duration::from_secs(120),
    );
}

#[test]
fn h1z1_burst_loss() {
    exactly_once(StackKind::OursVsH1z1, Condition::burst());
}

/// On a loss-free path with no bottleneck, a sender facing an acker that waits 24 ms resends
/// (spuriously, since nothing is lost) at most 1 % of its packets.
#[test]
fn slow_acker_no_spurious_resends_on_clean_path() {
    let failures = failing_runs(
        |seed, rtt, workload| RunConfig {
            rate: 0,
            ..RunConfig::new(
                StackKind::OursVsSlowAcker,
                workload,
                rtt,
                Condition::loss(0.0),
                seed,
            )
            .with_duration(TRAFFIC)
        },
        |r, _| r.counters.packets_resent * 100 > r.counters.packets_sent,
    );
    assert!(
        failures.is_empty(),
        "spurious resends above 1% (or unclean runs):\n{}",
        failures.join("\n")
    );
}

/// At 1 % random loss through the bottleneck, a sender facing an acker that holds its
/// cumulative acks for 24 ms resends mostly what the peer lacks: packets that reach it a second
/// time stay at or below 3 % of the packets sent (timer-driven resends of a tail whose ack is
/// late account for what remains, about 2 % at worst). It must not resend the in-order packets
/// the peer is only late to acknowledge each time a later packet is lost and the ones after it
/// are acknowledged selectively (that made 7 % to 11 % of bulk packets arrive twice).
#[test]
fn slow_acker_resends_what_the_peer_lacks() {
    let failures = failing_runs(
        |seed, rtt, workload| {
            RunConfig::new(
                StackKind::OursVsSlowAcker,
                workload,
                rtt,
                Condition::loss(0.01),
                seed,
            )
            .with_duration(TRAFFIC)
        },
        |r, _| r.counters.duplicates_received * 100 > r.counters.packets_sent * 3,
    );
    assert!(
        failures.is_empty(),
        "needless resends above 3% at 1% loss (or unclean runs):\n{}",
        failures.join("\n")
    );
}
