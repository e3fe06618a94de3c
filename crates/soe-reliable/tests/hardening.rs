//! Regression tests for issue 22 (hardening): the receiver's undelivered-message limit holds
//! exactly and nothing beyond it is acknowledged; configs whose durations would overflow a
//! deadline are refused, and the extreme accepted ones run without a panic.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{Link, NetConfig, dispatch};
use soe_reliable::{AckElicitor, ReliableChannel, ReliableConfig, ReliableError, SendError};
use soe_wire::{Channel, Packet};

/// One year: the longest duration the config accepts.
const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);

/// Message `i`: its index, then filler, `len` bytes in all (at least 8).
fn message(i: u64, len: usize) -> Bytes {
    let mut m = vec![0xA5u8; len.max(8)];
    m[..8].copy_from_slice(&i.to_be_bytes());
    Bytes::from(m)
}

/// Message `i` as a plain one: a non-zero first byte (so the receiver takes it as one message
/// without decoding: `soe_wire::payload::is_plain_message`), then its index, then filler.
fn plain_message(i: u64, len: usize) -> Bytes {
    let mut m = vec![0xA5u8; len.max(9)];
    m[1..9].copy_from_slice(&i.to_be_bytes());
    Bytes::from(m)
}

/// What a slow reader run observed.
struct SlowRead {
    /// The most messages the receiver held undelivered at any check.
    max_held: usize,
    /// Messages taken, all in order.
    taken: u64,
}

/// A sender pushes `count` messages of `len` bytes through a lossy, reordering network to a
/// receiver whose `max_queued_messages` is `limit` and whose application reads only every 50 ms
/// (after 200 ms at first), taking all it holds. Checks the order of every message and, with
/// one message per packet, that no packet was cumulatively acknowledged before its message was
/// delivered. Returns when all messages are taken.
/// `plain`: messages that start with a non-zero byte ([`plain_message`]) instead of their index.
fn backlog_run(
    seed: u64,
    limit: usize,
    bundle: bool,
    plain: bool,
    count: u64,
    len: usize,
) -> SlowRead {
    let (make, at): (fn(u64, usize) -> Bytes, usize) = if plain {
        (plain_message, 1)
    } else {
        (message, 0)
    };
    // No ack elicitors: they take sequences that carry no message.
    let sender = ReliableConfig::default()
        .with_bundle_messages(bundle)
        .with_ack_elicitor(AckElicitor::Off);
    let receiver = ReliableConfig::default().with_max_queued_messages(limit);
    let mut tx = ReliableChannel::new(Channel::ZERO, Arc::new(sender), 496, None).unwrap();
    let mut rx = ReliableChannel::new(Channel::ZERO, Arc::new(receiver), 496, None).unwrap();
    let net = NetConfig {
        loss: 0.05,
        duplicate: 0.02,
        reorder: 0.05,
        delay: Duration::from_millis(10),
        jitter: Duration::from_millis(5),
    };
    let mut up = Link::new(net, seed * 2 + 1);
    let mut down = Link::new(net, seed * 2 + 2);
    let start = Instant::now();
    let mut now = start;
    let mut next_read = start + Duration::from_millis(200);
    let mut sent = 0u64;
    let mut taken = 0u64;
    let mut max_held = 0usize;
    let mut highest_ack: Option<u16> = None;
    let mut buf = Vec::new();
    loop {
        while sent < count {
            match tx.send(make(sent, len)) {
                Ok(()) => sent += 1,
                Err(SendError::QueueFull(_)) => break,
                Err(e) => panic!("seed {seed}: send: {e}"),
            }
        }
        tx.handle_timeout(now).unwrap();
        rx.handle_timeout(now).unwrap();
        while let Some(d) = up.pop_due(now) {
            dispatch(&mut rx, now, &d).unwrap();
        }
        while let Some(d) = down.pop_due(now) {
            dispatch(&mut tx, now, &d).unwrap();
        }
        if now >= next_read {
            next_read = now + Duration::from_millis(50);
            // Everything the channel holds, counted, then checked in order.
            let mut held = 0;
            while let Some(m) = rx.poll_message() {
                let index = u64::from_be_bytes(m[at..at + 8].try_into().unwrap());
                assert_eq!(index, taken, "seed {seed}: messages arrive in order, once");
                assert_eq!(m.len(), len, "seed {seed}: message {index} length");
                taken += 1;
                held += 1;
            }
            max_held = max_held.max(held);
            if !bundle {
                // One message per packet: sequence s carries message s, so a cumulative ack
                // of s says message s was delivered.
                if let Some(ack) = highest_ack {
                    assert!(
                        u64::from(ack) < taken,
                        "seed {seed}: packet {ack} acknowledged, only {taken} messages delivered"
                    );
                }
            }
        }
        while let Some(n) = tx.poll_transmit(now, &mut buf) {
            up.send(now, &buf[..n]);
            buf.clear();
        }
        while let Some(n) = rx.poll_transmit(now, &mut buf) {
            if let Ok(Packet::AcknowledgeAll(a)) = Packet::decode(&buf[..n]) {
                highest_ack = Some(highest_ack.map_or(a.sequence, |h| h.max(a.sequence)));
            }
            down.send(now, &buf[..n]);
            buf.clear();
        }
        if taken == count {
            return SlowRead { max_held, taken };
        }
        let next = [
            tx.poll_timeout(),
            rx.poll_timeout(),
            up.next_arrival(),
            down.next_arrival(),
            Some(next_read),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap();
        now = next.max(now);
        assert!(
            now - start < Duration::from_secs(600),
            "seed {seed}: stalled: {taken}/{count} taken"
        );
    }
}

#[test]
fn undelivered_messages_never_exceed_max_queued_messages() {
    // Issue 22 A3: 46,550 messages were held with a limit of 16.
    for seed in 0..12 {
        let run = backlog_run(seed, 16, false, false, 600, 24);
        assert_eq!(run.taken, 600, "seed {seed}");
        assert_eq!(
            run.max_held, 16,
            "seed {seed}: the limit holds exactly, and is reached"
        );
    }
}

#[test]
fn plain_messages_respect_the_limit_too() {
    // Messages that do not start with a zero take the receiver's shortcut for one plain message
    // per packet; the limit holds there exactly as on the general path.
    for seed in 0..12 {
        let run = backlog_run(seed, 16, false, true, 600, 24);
        assert_eq!(run.taken, 600, "seed {seed}");
        assert_eq!(
            run.max_held, 16,
            "seed {seed}: the limit holds exactly, and is reached"
        );
    }
}

#[test]
fn bundled_messages_respect_the_limit_too() {
    // 40-byte messages: at most 11 per 496-byte packet, so any packet fits a limit of 16 from
    // an empty queue and the limit holds exactly.
    for seed in 0..12 {
        let run = backlog_run(seed, 16, true, false, 600, 40);
        assert_eq!(run.taken, 600, "seed {seed}");
        assert!(run.max_held <= 16, "seed {seed}: held {}", run.max_held);
    }
}

#[test]
fn a_packet_larger_than_the_limit_is_delivered_into_an_empty_queue() {
    // Limit 1, bundles of several messages: progress is still made (one packet at a time).
    for seed in 0..4 {
        let run = backlog_run(seed, 1, true, false, 200, 12);
        assert_eq!(run.taken, 200, "seed {seed}");
    }
}

/// Every duration field, set to `value`.
fn with_duration(field: usize, value: Duration) -> ReliableConfig {
    let c = ReliableConfig::default();
    match field {
        0 => c.with_ack_delay(value),
        1 => c.with_initial_rto(value),
        2 => c.with_min_rto(value),
        3 => c.with_max_rto(value),
        4 => c.with_max_ack_delay(value),
        _ => c.with_unacknowledged_timeout(value),
    }
}

/// Sends a few messages each way between two channels with `config`, over a lossy network, for
/// up to `span` of virtual time, jumping to each deadline. Returns the first channel error, if
/// any; panics only through a bug.
fn exchange(seed: u64, config: ReliableConfig, span: Duration) -> Result<u64, ReliableError> {
    let config = Arc::new(config);
    let mut a = ReliableChannel::new(Channel::ZERO, config.clone(), 496, None)?;
    let mut b = ReliableChannel::new(Channel::ZERO, config, 496, None)?;
    let mut ab = Link::new(NetConfig::lossy(0.2), seed * 2 + 1);
    let mut ba = Link::new(NetConfig::lossy(0.2), seed * 2 + 2);
    let start = Instant::now();
    let mut now = start;
    let mut buf = Vec::new();
    for i in 0..20 {
        a.send(message(i, 100 + 200 * i as usize)).unwrap();
        b.send(message(i, 30)).unwrap();
    }
    let mut delivered = 0;
    for _ in 0..5000 {
        a.handle_timeout(now)?;
        b.handle_timeout(now)?;
        while let Some(d) = ab.pop_due(now) {
            dispatch(&mut b, now, &d)?;
        }
        while let Some(d) = ba.pop_due(now) {
            dispatch(&mut a, now, &d)?;
        }
        while a.poll_message().is_some() || b.poll_message().is_some() {
            delivered += 1;
        }
        while let Some(n) = a.poll_transmit(now, &mut buf) {
            ab.send(now, &buf[..n]);
            buf.clear();
        }
        while let Some(n) = b.poll_transmit(now, &mut buf) {
            ba.send(now, &buf[..n]);
            buf.clear();
        }
        let Some(next) = [
            a.poll_timeout(),
            b.poll_timeout(),
            ab.next_arrival(),
            ba.next_arrival(),
        ]
        .into_iter()
        .flatten()
        .min() else {
            break;
        };
        now = next.max(now);
        if now - start > span {
            break;
        }
    }
    Ok(delivered)
}

#[test]
fn durations_that_would_overflow_a_deadline_are_refused() {
    // Issue 22 A4: ack_delay = Duration::MAX validated and then panicked at now + ack_delay.
    for field in 0..6 {
        for value in [Duration::MAX, YEAR + Duration::from_nanos(1)] {
            let config = with_duration(field, value);
            let err = config.validate().unwrap_err();
            assert!(
                matches!(err, ReliableError::InvalidConfig { .. }),
                "field {field}: {err}"
            );
            // And a channel cannot be built with it, so no data packet reaches such a config.
            assert!(exchange(0, config, Duration::from_secs(1)).is_err());
        }
    }
}

#[test]
fn the_extreme_accepted_durations_run_without_a_panic() {
    for field in 0..6 {
        for value in [YEAR, Duration::from_nanos(1), Duration::ZERO] {
            let config = with_duration(field, value);
            if config.validate().is_err() {
                continue;
            }
            for seed in 0..3 {
                // Long enough to pass a year of deadlines.
                let _ = exchange(seed, config.clone(), 3 * YEAR);
            }
        }
    }
    // Every duration at its largest at once.
    let all = (0..6).fold(ReliableConfig::default(), |c, field| match field {
        0 => c.with_ack_delay(YEAR),
        1 => c.with_initial_rto(YEAR),
        2 => c.with_min_rto(YEAR),
        3 => c.with_max_rto(YEAR),
        4 => c.with_max_ack_delay(YEAR),
        _ => c.with_unacknowledged_timeout(YEAR),
    });
    all.validate().unwrap();
    for seed in 0..3 {
        // A lost packet is probed only after min_rto, a year, which is also the
        // unacknowledged limit: the run ends in that typed error or completes, never panics.
        match exchange(seed, all.clone(), 10 * YEAR) {
            Ok(_) | Err(ReliableError::UnacknowledgedTimeout { .. }) => {}
            Err(e) => panic!("seed {seed}: {e}"),
        }
    }
    // With only the limits at a year, the lossy exchange completes.
    let long = ReliableConfig::default()
        .with_unacknowledged_timeout(YEAR)
        .with_max_ack_delay(YEAR)
        .with_ack_delay(YEAR);
    for seed in 0..3 {
        let delivered = exchange(seed, long.clone(), 10 * YEAR).unwrap();
        assert_eq!(delivered, 40, "seed {seed}: all 40 messages delivered");
    }
}
