//! Hostile input: every case is answered with a typed error or ignored, and memory stays bounded.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{Rng, dispatch};
use soe_reliable::{ReliableChannel, ReliableConfig, ReliableError};
use soe_wire::{Channel, WireError};

fn channel(config: ReliableConfig) -> ReliableChannel {
    ReliableChannel::new(Channel::ZERO, Arc::new(config), 496, None).unwrap()
}

/// Every packet the channel wants to send now.
fn drain(ch: &mut ReliableChannel, now: Instant) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while let Some(len) = ch.poll_transmit(now, &mut buf) {
        assert_eq!(len, buf.len());
        out.push(std::mem::take(&mut buf));
    }
    out
}

fn first_fragment(total: u32, data: &[u8]) -> Vec<u8> {
    let mut v = total.to_be_bytes().to_vec();
    v.extend_from_slice(data);
    v
}

#[test]
fn huge_announced_length_is_refused_before_any_allocation() {
    let now = Instant::now();
    let mut rx = channel(ReliableConfig::default());
    let err = rx
        .handle_fragment(now, 0, &first_fragment(u32::MAX, b"abc"))
        .unwrap_err();
    assert_eq!(
        err,
        ReliableError::MessageTooLarge {
            len: u32::MAX as usize,
            max: 4 * 1024 * 1024 + 1
        }
    );
    let mut rx = channel(ReliableConfig::default().with_max_message_size(1000));
    assert!(matches!(
        rx.handle_fragment(now, 0, &first_fragment(1002, b"abc")),
        Err(ReliableError::MessageTooLarge {
            len: 1002,
            max: 1001
        })
    ));
    // One byte of room for the escape byte.
    let mut rx = channel(ReliableConfig::default().with_max_message_size(1000));
    rx.handle_fragment(now, 0, &first_fragment(1001, b"abc"))
        .unwrap();
}

#[test]
fn mid_fragment_taken_as_first_is_an_error() {
    let now = Instant::now();
    // Leading bytes that read as a huge total.
    let mut rx = channel(ReliableConfig::default());
    assert!(matches!(
        rx.handle_fragment(now, 0, &[0x41; 400]),
        Err(ReliableError::MessageTooLarge { .. })
    ));
    // Leading bytes that read as a small total, with more data than that.
    let mut rx = channel(ReliableConfig::default());
    assert_eq!(
        rx.handle_fragment(now, 0, &first_fragment(10, &[7; 20])),
        Err(ReliableError::FragmentOverflow {
            total: 10,
            received: 20
        })
    );
    // Too short to hold a total at all.
    let mut rx = channel(ReliableConfig::default());
    assert!(matches!(
        rx.handle_fragment(now, 0, &[1, 2]),
        Err(ReliableError::Corrupt(WireError::Truncated { .. }))
    ));
    // A plausible total, then a whole packet before the message is complete.
    let mut rx = channel(ReliableConfig::default());
    rx.handle_fragment(now, 0, &first_fragment(100, &[1; 50]))
        .unwrap();
    assert_eq!(
        rx.handle_data(now, 1, b"whole"),
        Err(ReliableError::InterruptedReassembly {
            sequence: 1,
            received: 50,
            total: 100
        })
    );
}

#[test]
fn fragment_data_past_the_announced_total_is_an_error() {
    let now = Instant::now();
    let mut rx = channel(ReliableConfig::default());
    rx.handle_fragment(now, 0, &first_fragment(10, &[1; 8]))
        .unwrap();
    assert_eq!(
        rx.handle_fragment(now, 1, &[2; 5]),
        Err(ReliableError::FragmentOverflow {
            total: 10,
            received: 13
        })
    );
    assert_eq!(rx.poll_message(), None);
    // Exactly the total completes the message.
    let mut rx = channel(ReliableConfig::default());
    rx.handle_fragment(now, 0, &first_fragment(10, &[1; 8]))
        .unwrap();
    rx.handle_fragment(now, 1, &[2; 2]).unwrap();
    assert_eq!(
        rx.poll_message().as_deref(),
        Some(&[1, 1, 1, 1, 1, 1, 1, 1, 2, 2][..])
    );
}

#[test]
fn garbage_groups_are_corrupt_when_encrypted_and_one_message_when_plain_and_empty_groups_nothing() {
    let now = Instant::now();
    let cases: [&[u8]; 5] = [
        b"\x00\x19\xff\x01",      // Group length marker cut short
        b"\x00\x19\x05ab",        // item longer than the Group
        b"\x00\x19\x03\x00\x19x", // Group nested in a Group
        b"\x00\x19\x00",          // zero-length item
        b"\x00\x19",              // empty Group
    ];
    for (i, payload) in cases.into_iter().enumerate() {
        // With RC4 every peer escapes its ciphertext: a malformed Group is corruption.
        let mut rx = ReliableChannel::new(
            Channel::ZERO,
            Arc::new(ReliableConfig::default()),
            496,
            Some(b"key"),
        )
        .unwrap();
        let result = rx.handle_data(now, 0, payload);
        if i < 4 {
            assert!(
                matches!(result, Err(ReliableError::Corrupt(_))),
                "case {i}: {result:?}"
            );
        } else {
            assert!(result.is_ok(), "case {i}: {result:?}");
        }
        assert_eq!(rx.poll_message(), None, "case {i}: nothing delivered");
        // In plaintext a peer that does not escape (soe-protocol 2.3.0) sends messages that
        // start `00 19`: such a payload is delivered whole, once, and the channel goes on. The
        // empty Group alone is no message in either mode: it is the ack-eliciting probe.
        let mut rx = channel(ReliableConfig::default());
        assert_eq!(rx.handle_data(now, 0, payload), Ok(()), "case {i}");
        if i < 4 {
            assert_eq!(rx.poll_message().as_deref(), Some(payload), "case {i}");
        }
        assert_eq!(rx.poll_message(), None, "case {i}: delivered once");
        rx.handle_data(now, 1, b"next").unwrap();
        assert_eq!(rx.poll_message().as_deref(), Some(&b"next"[..]), "case {i}");
    }
    // Random bytes never panic; each is delivered as a message, or is an error.
    let mut rng = Rng::new(99);
    for seq in 0..5000u16 {
        let mut rx = channel(ReliableConfig::default());
        let mut data = vec![0u8; rng.below(40) as usize];
        rng.fill(&mut data);
        if data.len() >= 2 && seq % 2 == 0 {
            data[..2].copy_from_slice(&[0, 0x19]);
        }
        let _ = rx.handle_data(now, 0, &data);
        let _ = rx.handle_fragment(now, 1, &data);
        let _ = rx.handle_fragment(now, 2, &data);
    }
}

#[test]
fn acks_for_unsent_and_far_future_sequences_are_ignored() {
    let now = Instant::now();
    let mut tx = channel(ReliableConfig::default().with_bundle_messages(false));
    for i in 0..3u8 {
        tx.send(Bytes::from(vec![i + 1; 10])).unwrap();
    }
    assert_eq!(drain(&mut tx, now).len(), 3);
    for seq in [3u16, 100, 40_000, 0x8000, 0xFFFF] {
        tx.handle_ack(now, seq);
        tx.handle_ack_all(now, seq);
    }
    assert!(!tx.is_flushed(), "nothing was acknowledged");
    assert_eq!(tx.stats().acks_ignored, 10);
    // The real acks still work.
    tx.handle_ack(now, 1);
    tx.handle_ack_all(now, 2);
    assert!(tx.is_flushed());
    // And now the same acks are stale.
    tx.handle_ack_all(now, 2);
    tx.handle_ack(now, 0);
    assert_eq!(tx.stats().acks_ignored, 12);
}

#[test]
fn ack_storm_changes_nothing_it_should_not() {
    let t0 = Instant::now();
    let mut tx = channel(ReliableConfig::default().with_bundle_messages(false));
    for i in 0..8u8 {
        tx.send(Bytes::from(vec![i; 30])).unwrap();
    }
    assert_eq!(drain(&mut tx, t0).len(), 8);
    let mut rng = Rng::new(5);
    for _ in 0..100_000 {
        // Only sequences outside 0..8 (never sent) and duplicates of an acked one.
        let seq = 8 + rng.below(65_536 - 8) as u16;
        if rng.chance(0.5) {
            tx.handle_ack(t0, seq);
        } else {
            tx.handle_ack_all(t0, seq);
        }
    }
    assert!(!tx.is_flushed());
    assert_eq!(tx.stats().acks_ignored, 100_000);
    assert_eq!(tx.stats().acks_received, 100_000);
    tx.handle_ack(t0 + Duration::from_millis(30), 4);
    for _ in 0..100_000 {
        tx.handle_ack(t0 + Duration::from_millis(31), 4);
    }
    assert_eq!(tx.stats().acks_ignored, 200_000);
    tx.handle_ack_all(t0 + Duration::from_millis(40), 7);
    assert!(tx.is_flushed());
}

#[test]
fn packets_beyond_the_window_are_dropped_unstored() {
    let now = Instant::now();
    let config = ReliableConfig::default().with_receive_window(64);
    let mut rx = channel(config);
    for seq in 64..=0x7FFFu16 {
        rx.handle_data(now, seq, b"far ahead").unwrap();
    }
    let stats = rx.stats().clone();
    assert_eq!(stats.dropped, 0x7FFF - 64 + 1);
    assert_eq!(stats.out_of_order, 0);
    assert!(drain(&mut rx, now).is_empty(), "nothing to acknowledge");
    // Behind the window (the other half of the circle) reads as duplicates: re-acked only
    // once something was delivered.
    for seq in 0x8000..=0xFFFFu16 {
        rx.handle_data(now, seq, b"behind").unwrap();
    }
    assert_eq!(rx.stats().duplicates, 0x8000);
    assert!(drain(&mut rx, now).is_empty());
    assert_eq!(rx.poll_message(), None);
}

#[test]
fn out_of_order_flood_is_bounded_by_the_window() {
    let now = Instant::now();
    let window = 128u16;
    let mut rx = channel(ReliableConfig::default().with_receive_window(window));
    let mut rng = Rng::new(77);
    let payload = vec![0x42u8; 400];
    for _ in 0..50_000 {
        let seq = 1 + rng.below(u64::from(window) * 2) as u16;
        rx.handle_data(now, seq, &payload).unwrap();
    }
    let stats = rx.stats().clone();
    assert_eq!(
        stats.out_of_order,
        u64::from(window) - 1,
        "one store per slot"
    );
    assert!(stats.duplicates > 20_000, "{stats:?}");
    assert!(stats.dropped > 20_000, "{stats:?}");
    let acks = drain(&mut rx, now);
    assert!(
        acks.len() <= usize::from(window),
        "selective acks are bounded too: {}",
        acks.len()
    );
    assert!(acks.iter().all(|a| a.len() == 4 && a[1] == 0x11));
    // Filling the hole delivers the whole window at once and acks it cumulatively.
    rx.handle_data(now, 0, &payload).unwrap();
    let mut delivered = 0;
    while let Some(m) = rx.poll_message() {
        assert_eq!(m, payload);
        delivered += 1;
    }
    assert_eq!(delivered, window);
    let acks = drain(&mut rx, now);
    assert_eq!(acks, vec![vec![0x00, 0x15, 0x00, (window - 1) as u8]]);
}

#[test]
fn duplicates_are_dropped_and_reacknowledged_at_once() {
    let t0 = Instant::now();
    let config = ReliableConfig::default();
    let mut tx = channel(config.clone());
    let mut rx = channel(config);
    tx.send(Bytes::from_static(b"once")).unwrap();
    let packets = drain(&mut tx, t0);
    assert_eq!(packets.len(), 1);
    dispatch(&mut rx, t0, &packets[0]).unwrap();
    assert!(
        drain(&mut rx, t0).is_empty(),
        "cumulative ack waits ack_delay"
    );
    let later = t0 + Duration::from_millis(2);
    let acks = drain(&mut rx, later);
    assert_eq!(acks, vec![vec![0x00, 0x15, 0x00, 0x00]]);
    // The ack was lost; the sender resends; the duplicate is re-acked without delay.
    let t1 = t0 + Duration::from_millis(100);
    dispatch(&mut rx, t1, &packets[0]).unwrap();
    assert_eq!(drain(&mut rx, t1), vec![vec![0x00, 0x15, 0x00, 0x00]]);
    assert_eq!(rx.poll_message().as_deref(), Some(&b"once"[..]));
    assert_eq!(rx.poll_message(), None, "exactly once");
    assert_eq!(rx.stats().duplicates, 1);
}

#[test]
fn unacknowledged_packet_ends_the_channel() {
    let t0 = Instant::now();
    let limit = Duration::from_secs(30);
    let mut tx = channel(ReliableConfig::default().with_unacknowledged_timeout(limit));
    tx.send(Bytes::from_static(b"into the void")).unwrap();
    assert_eq!(drain(&mut tx, t0).len(), 1);
    let mut now = t0;
    let mut resends = 0;
    let err = loop {
        let deadline = tx
            .poll_timeout()
            .expect("a timer runs while data is in flight");
        assert!(deadline > now, "deadlines move forward");
        // A spurious early call does nothing.
        tx.handle_timeout(now).unwrap();
        assert!(drain(&mut tx, now).is_empty());
        now = deadline;
        match tx.handle_timeout(now) {
            Ok(()) => resends += drain(&mut tx, now).len(),
            Err(e) => break e,
        }
    };
    assert_eq!(
        err,
        ReliableError::UnacknowledgedTimeout {
            sequence: 0,
            elapsed: limit
        }
    );
    // Probes at 0.5 and 1.5 s, then every second (the backoff capped at max_rto): the first
    // resends the packet as a tail-loss probe; each later one (a retransmission timeout)
    // resends the oldest packet and the newest (an earlier elicitor), from the third also
    // another in turn, and adds an empty Group to elicit an ack only once the last one went
    // out three times (so no elicitor can overtake a missing one).
    let stats = tx.stats();
    assert!((27..=30).contains(&stats.timeouts), "{stats:?}");
    assert_eq!(stats.probes, stats.timeouts + 1, "{stats:?}");
    assert!(stats.packets_resent >= 2 * stats.timeouts, "{stats:?}");
    assert!(
        (5..=stats.timeouts / 2 + 1).contains(&stats.ack_elicitors),
        "{stats:?}"
    );
    assert_eq!(resends as u64, stats.packets_resent + stats.ack_elicitors);
    assert_eq!(
        tx.congestion_window(),
        4,
        "persistent congestion: the floor"
    );
}

/// Where a 16-bit sequence falls nearest `reference` on the 64-bit line.
fn unwrap16(reference: u64, wire: u16) -> u64 {
    let delta = i64::from(wire.wrapping_sub(reference as u16) as i16);
    reference.saturating_add_signed(delta)
}

/// One direction of an adversarial network: loss, duplication, and reordering (a random extra
/// delay of up to `jitter`).
struct Wire {
    queue: std::collections::BinaryHeap<std::cmp::Reverse<(Instant, u64, Vec<u8>)>>,
    order: u64,
    loss: f64,
    duplicate: f64,
    delay: Duration,
    jitter: Duration,
}

impl Wire {
    fn new(loss: f64, duplicate: f64) -> Self {
        Self {
            queue: std::collections::BinaryHeap::new(),
            order: 0,
            loss,
            duplicate,
            delay: Duration::from_millis(15),
            jitter: Duration::from_millis(40),
        }
    }

    fn send(&mut self, rng: &mut Rng, now: Instant, packet: Vec<u8>) {
        if rng.chance(self.loss) {
            return;
        }
        let copies = if rng.chance(self.duplicate) { 2 } else { 1 };
        for _ in 0..copies {
            let jitter = self.jitter.mul_f64(rng.unit());
            self.order += 1;
            self.queue.push(std::cmp::Reverse((
                now + self.delay + jitter,
                self.order,
                packet.clone(),
            )));
        }
    }

    fn pop_due(&mut self, now: Instant) -> Option<Vec<u8>> {
        if self.queue.peek()?.0.0 > now {
            return None;
        }
        self.queue.pop().map(|r| r.0.2)
    }
}

/// What the hostile phase injected and what must hold afterwards.
#[derive(Debug, Default)]
struct Forged {
    selective_acks: u64,
    future_acks: u64,
    behind: u64,
    ahead: u64,
    replays: u64,
}

/// Random bytes shaped like a payload: plain, a Group, a first fragment with a wild total.
fn forged_payload(rng: &mut Rng) -> Vec<u8> {
    let mut data = vec![0u8; rng.below(600) as usize];
    rng.fill(&mut data);
    match rng.below(3) {
        0 if data.len() >= 2 => data[..2].copy_from_slice(&[0, 0x19]),
        1 if data.len() >= 4 => data[..4].copy_from_slice(&u32::MAX.to_be_bytes()),
        _ => {}
    }
    data
}

/// One channel pair lives through more than two wraps of the 16-bit sequence while a hostile
/// network loses (10 %), duplicates (5 %) and reorders (up to 40 ms) packets both ways, and an
/// attacker who can see the traffic injects, at every step:
///
/// * selective acks for any sequence and cumulative acks for sequences never sent, at the
///   sender: they must not make it forget anything (a selective ack is only a hint);
/// * forged data and fragments (Groups, first fragments announcing 4 GiB) behind the receive
///   window and beyond it, and replays of recent genuine packets the receiver already
///   acknowledged, at the receiver: each is answered `Ok` (a duplicate or a drop) and none
///   changes what is delivered. (Replays of packets still missing would hand the receiver data
///   the sender must resend itself, and hide a sender that forgot it.)
///
/// Messages from empty to 4 KB (fragmented into up to 9 packets) are sent with RC4 on and off,
/// while the application takes its messages only now and then (so the receiver's backlog
/// limit is reached). Checked at every step: each message arrives exactly once, in order, byte
/// for byte; the receiver holds at most the window's early packets, one message's reassembly
/// and `max_queued_messages` messages; every packet fits the packet size; no channel errors.
/// At the end, with the attacker gone and the network clean, everything is delivered and
/// acknowledged.
#[test]
fn a_long_lived_channel_pair_survives_a_hostile_network_and_forgeries_across_wraps() {
    for (seed, key) in [(1u64, None), (2, Some(&b"hostile key"[..]))] {
        hostile_run(seed, key);
    }
}

fn hostile_run(seed: u64, key: Option<&[u8]>) {
    const WINDOW: u16 = 64;
    const QUEUE: usize = 32;
    const PACKET: usize = 496;
    let config = Arc::new(
        ReliableConfig::default()
            .with_receive_window(WINDOW)
            .with_max_queued_messages(QUEUE)
            .with_max_message_size(8 * 1024),
    );
    let make = || ReliableChannel::new(Channel::ZERO, config.clone(), PACKET, key).unwrap();
    let (mut tx, mut rx) = (make(), make());
    let mut rng = Rng::new(seed);
    let (mut up, mut down) = (Wire::new(0.10, 0.05), Wire::new(0.10, 0.05));
    let t0 = Instant::now();
    let mut now = t0;
    let mut buf = Vec::new();
    let mut pending = std::collections::VecDeque::<Bytes>::new();
    let (mut sent, mut delivered) = (0u64, 0u64);
    // The highest sequence the sender has used, and the receiver's latest cumulative ack.
    let mut max_sent: Option<u64> = None;
    let mut acked: Option<u64> = None;
    // Recent genuine packets and their sequences.
    let mut recent: std::collections::VecDeque<(u64, Vec<u8>)> = std::collections::VecDeque::new();
    let mut forged = Forged::default();
    let wraps = 2 * 65_536;
    let mut hostile = true;
    let mut clean_since = None;
    loop {
        now += Duration::from_millis(1);
        // The application: keeps the sender busy while hostile, takes messages now and then.
        while hostile && tx.capacity() > 0 {
            let len = match rng.below(10) {
                0..=5 => rng.below(60),
                6..=8 => 60 + rng.below(900),
                _ => 1000 + rng.below(3000),
            } as usize;
            let mut m = vec![0u8; len];
            rng.fill(&mut m);
            let m = Bytes::from(m);
            tx.send(m.clone()).unwrap();
            pending.push_back(m);
            sent += 1;
        }
        if !hostile || rng.chance(0.3) {
            while let Some(m) = rx.poll_message() {
                let expected = pending.pop_front().expect("no more was sent");
                assert_eq!(m, expected, "seed {seed}: message {delivered} corrupted");
                delivered += 1;
            }
        }
        // The network.
        while let Some(p) = up.pop_due(now) {
            dispatch(&mut rx, now, &p).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        }
        while let Some(p) = down.pop_due(now) {
            dispatch(&mut tx, now, &p).unwrap();
        }
        for ch in [&mut tx, &mut rx] {
            if ch.poll_timeout().is_some_and(|t| t <= now) {
                ch.handle_timeout(now)
                    .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            }
        }
        while let Some(len) = tx.poll_transmit(now, &mut buf) {
            assert!(len <= PACKET, "{len}");
            let sequence = match soe_wire::Packet::decode(&buf).unwrap() {
                soe_wire::Packet::ReliableData(d) => d.sequence,
                soe_wire::Packet::ReliableDataFragment(d) => d.sequence,
                other => panic!("{other:?}"),
            };
            let s = unwrap16(max_sent.unwrap_or(0), sequence);
            max_sent = Some(max_sent.map_or(s, |m| m.max(s)));
            if recent.len() == 512 {
                recent.pop_front();
            }
            recent.push_back((s, buf.clone()));
            up.send(&mut rng, now, std::mem::take(&mut buf));
        }
        while let Some(len) = rx.poll_transmit(now, &mut buf) {
            assert!(len <= PACKET);
            if let soe_wire::Packet::AcknowledgeAll(a) = soe_wire::Packet::decode(&buf).unwrap() {
                let s = unwrap16(acked.or(max_sent).unwrap_or(0), a.sequence);
                acked = Some(acked.map_or(s, |m| m.max(s)));
            }
            down.send(&mut rng, now, std::mem::take(&mut buf));
        }
        // The attacker.
        if hostile {
            if let Some(top) = max_sent {
                if rng.chance(0.5) {
                    tx.handle_ack(now, rng.next_u64() as u16);
                    forged.selective_acks += 1;
                }
                if rng.chance(0.2) {
                    tx.handle_ack_all(now, (top + 1 + rng.below(20_000)) as u16);
                    forged.future_acks += 1;
                }
                // Forged data or a forged fragment at `sequence`, outside the window: answered
                // `Ok` (a drop or a duplicate), never an error that would end the session.
                let mut forge = |rng: &mut Rng, sequence: u64, what: &str| {
                    let data = forged_payload(rng);
                    let result = if rng.chance(0.5) {
                        rx.handle_data(now, sequence as u16, &data)
                    } else {
                        rx.handle_fragment(now, sequence as u16, &data)
                    };
                    assert_eq!(result, Ok(()), "seed {seed}: forged data {what} the window");
                };
                if rng.chance(0.3) {
                    let ahead = top + 1 + u64::from(WINDOW) + rng.below(20_000);
                    forge(&mut rng, ahead, "beyond");
                    forged.ahead += 1;
                }
                if let Some(last) = acked.filter(|_| rng.chance(0.3)) {
                    let behind = last.saturating_sub(rng.below(20_000));
                    forge(&mut rng, behind, "behind");
                    forged.behind += 1;
                }
                if !recent.is_empty() && rng.chance(0.2) {
                    let (sequence, p) = &recent[rng.below(recent.len() as u64) as usize];
                    if acked.is_some_and(|a| *sequence <= a) {
                        dispatch(&mut rx, now, p).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                        forged.replays += 1;
                    }
                }
            }
            if max_sent.is_some_and(|m| m > wraps) {
                hostile = false;
                up = Wire::new(0.0, 0.0);
                down = Wire::new(0.0, 0.0);
                clean_since = Some(now);
            }
        }
        // The receiver's backlog stays within its limits.
        let backlog = rx.receive_backlog();
        assert!(backlog.early_packets <= usize::from(WINDOW), "{backlog:?}");
        assert!(backlog.messages <= QUEUE, "{backlog:?}");
        assert!(backlog.reassembly_bytes <= 8 * 1024 + 1, "{backlog:?}");
        if !hostile && delivered == sent && tx.is_flushed() {
            break;
        }
        if let Some(since) = clean_since {
            assert!(
                now - since < Duration::from_secs(60),
                "seed {seed}: stalled on a clean network: {delivered} of {sent} delivered, {:?}",
                tx.stats()
            );
        }
    }
    assert!(pending.is_empty());
    assert_eq!(rx.stats().messages_delivered, sent);
    assert_eq!(
        rx.receive_backlog(),
        soe_reliable::ReceiveBacklog::default()
    );
    // The forgeries happened, and each kind was answered as it should be.
    assert!(
        forged.selective_acks > 10_000 && forged.future_acks > 4_000,
        "{forged:?}"
    );
    assert!(
        forged.ahead > 5_000 && forged.behind > 5_000 && forged.replays > 4_000,
        "{forged:?}"
    );
    assert!(tx.stats().acks_ignored >= forged.future_acks);
    assert!(rx.stats().dropped >= forged.ahead, "{:?}", rx.stats());
    assert!(rx.stats().duplicates >= forged.behind, "{:?}", rx.stats());
    println!("seed {seed}: {sent} messages, {forged:?}, {:?}", tx.stats());
}
