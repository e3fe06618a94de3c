//! A peer that acknowledges only from a periodic timer, as h1z1-server's client does (every
//! 50 ms, and only when the highest in-order sequence changed), on a loopback-like path with no
//! loss: the sender must learn how long that peer holds its acks and not probe inside the hold.
//! Virtual time, many seeds, each with its own timer phase and traffic pattern.

mod common;

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::Rng;
use soe_reliable::{ReliableChannel, ReliableConfig};
use soe_wire::{Channel, Packet};

const MS: Duration = Duration::from_millis(1);

/// What one run saw.
#[derive(Debug, Default, Clone, Copy)]
struct Outcome {
    /// Data packets sent for the first time.
    packets: u64,
    /// Data packets sent again.
    resends: u64,
    /// Copies the peer had already (a resend it did not need).
    duplicates: u64,
    /// Packets the sender counts as lost (resends not found spurious).
    lost: u64,
    /// Data packets the path dropped.
    dropped: u64,
}

/// The peer: takes data packets, acks the highest in-order sequence at each tick of its timer.
struct PeriodicAcker {
    period: Duration,
    next_tick: Instant,
    /// The next sequence expected in order.
    expected: u64,
    /// Sequences stored ahead of `expected`.
    ahead: BTreeSet<u64>,
    /// The last cumulative ack sent (h1z1-server's client sends one only when it changed).
    last_acked: Option<u64>,
    duplicates: u64,
    /// Selective acks (OutOfOrder) for packets stored ahead, sent from a 10 ms timer as
    /// h1z1-server's client does.
    out_of_order: Vec<u16>,
    next_out_of_order: Instant,
}

impl PeriodicAcker {
    fn on_data(&mut self, sequence: u16) {
        // No loss on this path: sequences stay far below the 16-bit wrap in these runs.
        let sequence = u64::from(sequence);
        if sequence < self.expected || self.ahead.contains(&sequence) {
            self.duplicates += 1;
            return;
        }
        self.ahead.insert(sequence);
        if sequence > self.expected {
            self.out_of_order.push(sequence as u16);
        }
        while self.ahead.remove(&self.expected) {
            self.expected += 1;
        }
    }

    /// The cumulative ack of this tick, if it changed.
    fn on_tick(&mut self) -> Option<u16> {
        self.next_tick += self.period;
        let highest = self.expected.checked_sub(1)?;
        if self.last_acked == Some(highest) {
            return None;
        }
        self.last_acked = Some(highest);
        Some(highest as u16)
    }
}

/// A loopback-like one-way delay: 30 to 130 µs, in order (a loopback does not reorder).
fn arrival(rng: &mut Rng, now: Instant, last: &mut Instant) -> Instant {
    *last = (now + Duration::from_micros(30 + rng.below(100))).max(*last);
    *last
}

/// The gap before the next message: bursts (under 2 ms apart), a game's ticks (10 to 60 ms)
/// and quiet spells (up to 300 ms), mixed per seed.
fn gap(rng: &mut Rng) -> Duration {
    match rng.below(10) {
        0..=3 => Duration::from_micros(rng.below(2_000)),
        4..=8 => Duration::from_micros(10_000 + rng.below(50_000)),
        _ => Duration::from_micros(rng.below(300_000)),
    }
}

/// Sends `messages` messages of 20 to 600 bytes from a default channel to a peer that acks
/// every `period`, over a path that drops data packets with probability `loss`, and reports
/// what happened.
fn run(seed: u64, period: Duration, messages: u64, loss: f64) -> Outcome {
    let mut rng = Rng::new(seed);
    let config = Arc::new(ReliableConfig::default());
    let mut tx = ReliableChannel::new(Channel::ZERO, config, 496, None).unwrap();
    let start = Instant::now();
    let mut now = start;
    let mut peer = PeriodicAcker {
        period,
        next_tick: start + Duration::from_micros(rng.below(period.as_micros() as u64)),
        expected: 0,
        ahead: BTreeSet::new(),
        last_acked: None,
        duplicates: 0,
        out_of_order: Vec::new(),
        next_out_of_order: start,
    };
    // (arrival, order, sequence): data on its way to the peer; (arrival, order, sequence,
    // selective) acks on their way back.
    let mut to_peer: BinaryHeap<Reverse<(Instant, u64, u16)>> = BinaryHeap::new();
    let mut to_sender: BinaryHeap<Reverse<(Instant, u64, u16, bool)>> = BinaryHeap::new();
    let mut order = 0u64;
    let mut sent = 0u64;
    let mut next_message = start;
    let mut buf = Vec::new();
    let mut dropped = 0;
    let (mut last_to_peer, mut last_to_sender) = (start, start);
    let end_by = start + Duration::from_secs(3600);
    while sent < messages || !tx.is_flushed() {
        assert!(now < end_by, "seed {seed}: no progress");
        while sent < messages && next_message <= now {
            let len = 20 + rng.below(580) as usize;
            tx.send(Bytes::from(vec![0x5A; len])).unwrap();
            sent += 1;
            next_message += gap(&mut rng);
        }
        while let Some(Reverse((at, _, sequence, selective))) = to_sender.peek().copied() {
            if at > now {
                break;
            }
            to_sender.pop();
            if selective {
                tx.handle_ack(now, sequence);
            } else {
                tx.handle_ack_all(now, sequence);
            }
        }
        while let Some(Reverse((at, _, sequence))) = to_peer.peek().copied() {
            if at > now {
                break;
            }
            to_peer.pop();
            peer.on_data(sequence);
        }
        while peer.next_tick <= now {
            if let Some(sequence) = peer.on_tick() {
                order += 1;
                let at = arrival(&mut rng, now, &mut last_to_sender);
                to_sender.push(Reverse((at, order, sequence, false)));
            }
        }
        while peer.next_out_of_order <= now {
            peer.next_out_of_order += 10 * MS;
            for sequence in peer.out_of_order.drain(..) {
                order += 1;
                let at = arrival(&mut rng, now, &mut last_to_sender);
                to_sender.push(Reverse((at, order, sequence, true)));
            }
        }
        if tx.poll_timeout().is_some_and(|t| t <= now) {
            tx.handle_timeout(now).unwrap();
        }
        buf.clear();
        while tx.poll_transmit(now, &mut buf).is_some() {
            match Packet::decode(&buf).unwrap() {
                Packet::ReliableData(_) | Packet::ReliableDataFragment(_) if rng.chance(loss) => {
                    dropped += 1;
                }
                Packet::ReliableData(d) | Packet::ReliableDataFragment(d) => {
                    order += 1;
                    let at = arrival(&mut rng, now, &mut last_to_peer);
                    to_peer.push(Reverse((at, order, d.sequence)));
                }
                other => panic!("seed {seed}: unexpected {other:?}"),
            }
            buf.clear();
        }
        let next = [
            (sent < messages).then_some(next_message),
            to_sender.peek().map(|Reverse((at, _, _, _))| *at),
            to_peer.peek().map(|Reverse((at, _, _))| *at),
            Some(peer.next_tick),
            (!peer.out_of_order.is_empty()).then_some(peer.next_out_of_order),
            tx.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap();
        now = next.max(now);
    }
    let stats = tx.stats();
    Outcome {
        packets: stats.packets_sent,
        resends: stats.packets_resent,
        duplicates: peer.duplicates,
        lost: stats.packets_lost,
        dropped,
    }
}

fn sweep(period: Duration, seeds: std::ops::Range<u64>, messages: u64) -> Outcome {
    let mut total = Outcome::default();
    for seed in seeds {
        let o = run(seed, period, messages, 0.0);
        total.lost += o.lost;
        total.packets += o.packets;
        total.resends += o.resends;
        total.duplicates += o.duplicates;
    }
    total
}

#[test]
fn a_50_ms_acker_gets_at_most_one_needless_resend_per_thousand_packets() {
    let total = sweep(50 * MS, 0..24, 1_500);
    println!("50 ms acker: {total:?}");
    assert_eq!(total.lost, 0, "nothing was lost on this path: {total:?}");
    assert!(
        total.resends * 1000 <= total.packets,
        "{} resends for {} packets: {total:?}",
        total.resends,
        total.packets
    );
    assert!(total.duplicates <= total.resends);
}

#[test]
fn slower_and_faster_periodic_ackers_are_learned_too() {
    for period in [2 * MS, 24 * MS, 100 * MS] {
        let total = sweep(period, 100..108, 1_000);
        println!("{period:?} acker: {total:?}");
        assert_eq!(total.lost, 0, "{period:?}: nothing was lost: {total:?}");
        assert!(
            total.resends * 1000 <= total.packets,
            "{period:?}: {} resends for {} packets: {total:?}",
            total.resends,
            total.packets
        );
    }
}

#[test]
fn real_losses_are_counted_once_each_and_no_more() {
    for seed in 200..208 {
        let o = run(seed, 50 * MS, 1_000, 0.02);
        println!("2 % loss: {o:?}");
        assert!(o.dropped > 0, "seed {seed}");
        assert!(
            o.lost > 0 && o.lost <= o.dropped,
            "seed {seed}: each packet counted once at most: {o:?}"
        );
    }
}
