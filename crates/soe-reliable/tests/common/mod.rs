//! A deterministic lossy-link simulator: two channels, a seeded network emulator between them
//! (loss, duplication, reordering, delay, jitter), and a virtual clock that jumps to the next
//! deadline. Every failure message carries the seed.
#![allow(dead_code, unreachable_pub)]

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use soe_reliable::{ReliableChannel, ReliableConfig, SendError};
use soe_wire::Channel;

mod memory_link;
// Not every test binary uses both.
#[allow(unused_imports)]
pub use memory_link::{MemoryLink, dispatch};

/// SplitMix64: a tiny seedable generator, good enough for a network emulator.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let word = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}

/// What the emulated network does to each datagram.
#[derive(Debug, Clone, Copy)]
pub struct NetConfig {
    /// Probability a datagram is dropped.
    pub loss: f64,
    /// Probability a datagram is delivered twice.
    pub duplicate: f64,
    /// Probability a datagram is held back (delivered after later ones).
    pub reorder: f64,
    /// One-way base delay.
    pub delay: Duration,
    /// Uniform extra delay in `0..jitter`.
    pub jitter: Duration,
}

impl NetConfig {
    pub fn lossy(loss: f64) -> Self {
        Self {
            loss,
            duplicate: 0.02,
            reorder: 0.05,
            delay: Duration::from_millis(20),
            jitter: Duration::from_millis(10),
        }
    }

    pub fn perfect() -> Self {
        Self {
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            delay: Duration::from_millis(5),
            jitter: Duration::ZERO,
        }
    }
}

/// One direction of the network.
pub struct Link {
    net: NetConfig,
    rng: Rng,
    in_transit: BinaryHeap<Reverse<(Instant, u64, Vec<u8>)>>,
    order: u64,
    pub sent: u64,
    pub dropped: u64,
}

impl Link {
    pub fn new(net: NetConfig, seed: u64) -> Self {
        Self {
            net,
            rng: Rng::new(seed),
            in_transit: BinaryHeap::new(),
            order: 0,
            sent: 0,
            dropped: 0,
        }
    }

    pub fn send(&mut self, now: Instant, datagram: &[u8]) {
        self.sent += 1;
        if self.rng.chance(self.net.loss) {
            self.dropped += 1;
            return;
        }
        let copies = if self.rng.chance(self.net.duplicate) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let jitter_us = self.net.jitter.as_micros() as u64;
            let mut delay = self.net.delay
                + Duration::from_micros(if jitter_us == 0 {
                    0
                } else {
                    self.rng.below(jitter_us)
                });
            if self.rng.chance(self.net.reorder) {
                delay += self.net.delay + self.net.jitter * 2;
            }
            self.order += 1;
            self.in_transit
                .push(Reverse((now + delay, self.order, datagram.to_vec())));
        }
    }

    pub fn next_arrival(&self) -> Option<Instant> {
        self.in_transit.peek().map(|Reverse((at, _, _))| *at)
    }

    pub fn pop_due(&mut self, now: Instant) -> Option<Vec<u8>> {
        if self.next_arrival()? <= now {
            self.in_transit.pop().map(|Reverse((_, _, d))| d)
        } else {
            None
        }
    }
}

/// The messages one side sends: message `i` for `i < count`, made by `make`.
pub struct Script {
    pub count: u64,
    pub make: Box<dyn Fn(u64) -> Bytes>,
}

impl Script {
    pub fn none() -> Self {
        Self {
            count: 0,
            make: Box::new(|_| Bytes::new()),
        }
    }

    pub fn from_vec(messages: Vec<Bytes>) -> Self {
        let messages = Arc::new(messages);
        Self {
            count: messages.len() as u64,
            make: Box::new(move |i| messages[i as usize].clone()),
        }
    }
}

struct Side {
    channel: ReliableChannel,
    script: Script,
    next_send: u64,
    /// Messages received from the other side.
    delivered: u64,
}

/// Two channels joined by an emulated network, driven in virtual time.
pub struct Pair {
    pub seed: u64,
    pub start: Instant,
    pub now: Instant,
    a: Side,
    b: Side,
    pub a_to_b: Link,
    pub b_to_a: Link,
    buf: Vec<u8>,
    /// The largest packet either side emitted.
    pub largest_packet: usize,
    /// What `a` has in flight, as seen on the wire.
    pub a_flight: WireFlight,
}

/// The bytes one side has sequenced and not yet seen cumulatively acknowledged, worked out from
/// the packets alone (not from the channel's own count): each new sequence's packet length, ack
/// elicitors (`00 19`, `00 19 01`) aside, until an AcknowledgeAll that reached the sender
/// covers it.
#[derive(Debug, Default)]
pub struct WireFlight {
    /// (sequence, encoded length) of each packet in flight, oldest first.
    packets: std::collections::VecDeque<(u16, usize)>,
    /// The next new sequence.
    next: u16,
    /// The bytes of `packets`.
    pub bytes: usize,
    /// The most `bytes` ever were.
    pub peak: usize,
}

impl WireFlight {
    /// A packet the side sent.
    pub fn sent(&mut self, packet: &[u8]) {
        let [0x00, op, hi, lo, data @ ..] = packet else {
            return;
        };
        if !matches!(op, 0x09 | 0x0D) || u16::from_be_bytes([*hi, *lo]) != self.next {
            return; // an ack, or a resend
        }
        let elicitor = *op == 0x09 && matches!(data, [0x00, 0x19] | [0x00, 0x19, 0x01]);
        let len = if elicitor { 0 } else { packet.len() };
        self.packets.push_back((self.next, len));
        self.next = self.next.wrapping_add(1);
        self.bytes += len;
        self.peak = self.peak.max(self.bytes);
    }

    /// A packet that reached the side.
    pub fn received(&mut self, packet: &[u8]) {
        let [0x00, 0x15, hi, lo, ..] = packet else {
            return;
        };
        let acked = u16::from_be_bytes([*hi, *lo]);
        while let Some(&(sequence, len)) = self.packets.front() {
            if acked.wrapping_sub(sequence) >= 0x8000 {
                break;
            }
            self.packets.pop_front();
            self.bytes -= len;
        }
    }
}

pub struct PairConfig {
    pub config: ReliableConfig,
    pub max_packet_len: usize,
    pub key: Option<Vec<u8>>,
    pub net: NetConfig,
}

impl Pair {
    pub fn new(seed: u64, setup: &PairConfig, a_sends: Script, b_sends: Script) -> Self {
        let config = Arc::new(setup.config.clone());
        let make = || {
            ReliableChannel::new(
                Channel::ZERO,
                config.clone(),
                setup.max_packet_len,
                setup.key.as_deref(),
            )
            .expect("valid channel setup")
        };
        let start = Instant::now();
        Self {
            seed,
            start,
            now: start,
            a: Side {
                channel: make(),
                script: a_sends,
                next_send: 0,
                delivered: 0,
            },
            b: Side {
                channel: make(),
                script: b_sends,
                next_send: 0,
                delivered: 0,
            },
            a_to_b: Link::new(setup.net, seed.wrapping_mul(2).wrapping_add(1)),
            b_to_a: Link::new(setup.net, seed.wrapping_mul(2).wrapping_add(2)),
            buf: Vec::new(),
            largest_packet: 0,
            a_flight: WireFlight::default(),
        }
    }

    pub fn a(&self) -> &ReliableChannel {
        &self.a.channel
    }

    pub fn b(&self) -> &ReliableChannel {
        &self.b.channel
    }

    fn done(&self) -> bool {
        self.a.next_send == self.a.script.count
            && self.b.next_send == self.b.script.count
            && self.b.delivered == self.a.script.count
            && self.a.delivered == self.b.script.count
            && self.a.channel.is_flushed()
            && self.b.channel.is_flushed()
    }

    /// Runs until every message arrived and both sides are flushed, checking each message on
    /// arrival. Panics (with the seed) on any mismatch, error, or stall past `limit` of virtual
    /// time.
    pub fn run(&mut self, limit: Duration) {
        let seed = self.seed;
        let mut idle_rounds = 0u32;
        loop {
            let now = self.now;
            for side in [&mut self.a, &mut self.b] {
                while side.next_send < side.script.count {
                    let message = (side.script.make)(side.next_send);
                    match side.channel.send(message) {
                        Ok(()) => side.next_send += 1,
                        Err(SendError::QueueFull(_)) => break,
                        Err(e) => panic!("seed {seed}: send failed: {e}"),
                    }
                }
                side.channel
                    .handle_timeout(now)
                    .unwrap_or_else(|e| panic!("seed {seed}: timeout error: {e}"));
            }
            while let Some(d) = self.a_to_b.pop_due(now) {
                dispatch(&mut self.b.channel, now, &d)
                    .unwrap_or_else(|e| panic!("seed {seed}: b rejected a packet: {e}"));
            }
            while let Some(d) = self.b_to_a.pop_due(now) {
                self.a_flight.received(&d);
                dispatch(&mut self.a.channel, now, &d)
                    .unwrap_or_else(|e| panic!("seed {seed}: a rejected a packet: {e}"));
            }
            let (a, b) = (&mut self.a, &mut self.b);
            check_deliveries(seed, "a->b", &mut b.channel, &mut b.delivered, &a.script);
            check_deliveries(seed, "b->a", &mut a.channel, &mut a.delivered, &b.script);
            for (side, link, flight) in [
                (&mut self.a, &mut self.a_to_b, Some(&mut self.a_flight)),
                (&mut self.b, &mut self.b_to_a, None),
            ] {
                let mut flight = flight;
                while let Some(len) = side.channel.poll_transmit(now, &mut self.buf) {
                    assert_eq!(len, self.buf.len(), "seed {seed}: reported length");
                    if let Some(flight) = flight.as_deref_mut() {
                        flight.sent(&self.buf);
                        assert_eq!(
                            flight.bytes,
                            side.channel.bytes_in_flight(),
                            "seed {seed}: bytes in flight on the wire and in the channel"
                        );
                    }
                    self.largest_packet = self.largest_packet.max(len);
                    link.send(now, &self.buf);
                    self.buf.clear();
                }
            }
            if self.done() {
                return;
            }
            let next = [
                self.a.channel.poll_timeout(),
                self.b.channel.poll_timeout(),
                self.a_to_b.next_arrival(),
                self.b_to_a.next_arrival(),
            ]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or_else(|| {
                panic!(
                    "seed {seed}: stalled with nothing scheduled: a sent {}/{} got {}/{}, b sent {}/{} got {}/{}",
                    self.a.next_send,
                    self.a.script.count,
                    self.a.delivered,
                    self.b.script.count,
                    self.b.next_send,
                    self.b.script.count,
                    self.b.delivered,
                    self.a.script.count,
                )
            });
            if next <= now {
                idle_rounds += 1;
                assert!(
                    idle_rounds < 1000,
                    "seed {seed}: spinning at a past deadline"
                );
            } else {
                idle_rounds = 0;
                self.now = next;
            }
            assert!(
                self.now - self.start <= limit,
                "seed {seed}: not done after {limit:?} of virtual time: b got {}/{}, a got {}/{}",
                self.b.delivered,
                self.a.script.count,
                self.a.delivered,
                self.b.script.count,
            );
        }
    }
}

/// Takes every message `receiver` has and checks it against the sender's script.
fn check_deliveries(
    seed: u64,
    name: &str,
    receiver: &mut ReliableChannel,
    delivered: &mut u64,
    script: &Script,
) {
    while let Some(message) = receiver.poll_message() {
        let index = *delivered;
        assert!(
            index < script.count,
            "seed {seed}: {name}: extra message {index} delivered"
        );
        let expected = (script.make)(index);
        assert!(
            message == expected,
            "seed {seed}: {name}: message {index} differs: got {} bytes {:02x?}.., want {} bytes {:02x?}..",
            message.len(),
            &message[..message.len().min(16)],
            expected.len(),
            &expected[..expected.len().min(16)],
        );
        *delivered += 1;
    }
}

/// Mixed messages 0..=10 KiB: many small, some large, some empty, some starting with `00` or
/// with `00 19` (the Group prefix), all from `seed`.
pub fn mixed_messages(seed: u64, count: usize) -> Vec<Bytes> {
    let mut rng = Rng::new(seed ^ 0xABCD);
    (0..count)
        .map(|_| {
            let len = match rng.below(10) {
                0 => 0,
                1..=5 => rng.below(64) as usize,
                6..=8 => 64 + rng.below(1500) as usize,
                _ => 1500 + rng.below(10 * 1024 - 1500 + 1) as usize,
            };
            let mut m = vec![0u8; len];
            rng.fill(&mut m);
            match rng.below(6) {
                0 if len >= 1 => m[0] = 0,
                1 if len >= 2 => m[..2].copy_from_slice(&[0x00, 0x19]),
                2 if len >= 2 => m[..2].copy_from_slice(&[0x00, 0x00]),
                _ => {}
            }
            Bytes::from(m)
        })
        .collect()
}
