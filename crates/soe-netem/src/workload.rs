//! Application traffic with verifiable payloads.
//!
//! Every message is `A5 | stream id | u64 sequence | pattern`, where the pattern bytes are a
//! function of (stream, sequence, offset). The receiver regenerates the expected message and
//! compares it byte for byte, so a lost, duplicated, reordered, truncated or corrupted message is
//! always seen.

use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};

use crate::stack::{Side, Stack};

/// The first byte of every message (non-zero, so no stack treats it as a protocol packet).
const MAGIC: u8 = 0xA5;
/// Header bytes: magic, stream id, sequence.
const HEADER: usize = 10;

/// The application traffic of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Workload {
    /// The client keeps [`ECHO_OUTSTANDING`] requests of [`ECHO_SIZE`] bytes in flight; the
    /// server echoes each. Latency is the round trip, send to echo delivery.
    Echo,
    /// The client sends [`BULK_SIZE`]-byte messages as fast as the stack takes them, with at
    /// most [`BULK_OUTSTANDING`] sent and not yet delivered. Latency is one way.
    Bulk,
    /// Every [`TICK_PERIOD`] the server sends a [`TICK_STATE_SIZE`]-byte state update and the
    /// client a [`TICK_INPUT_SIZE`]-byte input. Latency is the state updates' one-way delay.
    Tick,
}

/// Echo requests kept in flight.
pub const ECHO_OUTSTANDING: u64 = 8;
/// Echo message size.
pub const ECHO_SIZE: usize = 64;
/// Bulk message size.
pub const BULK_SIZE: usize = 4096;
/// Bulk messages sent and not yet delivered, at most (the application's own flow control: one
/// stack under test has no send-queue limit).
pub const BULK_OUTSTANDING: u64 = 256;
/// Game tick period (20 Hz).
pub const TICK_PERIOD: Duration = Duration::from_millis(50);
/// Server state update size.
pub const TICK_STATE_SIZE: usize = 200;
/// Client input size.
pub const TICK_INPUT_SIZE: usize = 32;

impl Workload {
    /// All workloads, in report order.
    pub const ALL: [Self; 3] = [Self::Echo, Self::Bulk, Self::Tick];

    /// A short name for tables and filters.
    pub fn name(self) -> &'static str {
        match self {
            Self::Echo => "echo",
            Self::Bulk => "bulk",
            Self::Tick => "tick",
        }
    }
}

/// Builds message `seq` of `stream`, `len` bytes (at least the header).
pub fn message(stream: u8, seq: u64, len: usize) -> Bytes {
    let len = len.max(HEADER);
    let mut b = BytesMut::with_capacity(len);
    b.put_u8(MAGIC);
    b.put_u8(stream);
    b.put_u64(seq);
    for k in HEADER..len {
        b.put_u8(pattern(stream, seq, k));
    }
    b.freeze()
}

fn pattern(stream: u8, seq: u64, k: usize) -> u8 {
    let x = seq
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .rotate_left((k % 61) as u32);
    (x as u8) ^ (k as u8).wrapping_mul(31) ^ stream
}

/// The sequence a message claims, if it is well formed for `stream` and `len` bytes long.
fn check(stream: u8, len: usize, data: &[u8]) -> Option<u64> {
    if data.len() != len.max(HEADER) || data[0] != MAGIC || data[1] != stream {
        return None;
    }
    let seq = u64::from_be_bytes(data[2..10].try_into().ok()?);
    data[HEADER..]
        .iter()
        .enumerate()
        .all(|(i, &b)| b == pattern(stream, seq, HEADER + i))
        .then_some(seq)
}

/// What went wrong on one stream, summed over streams in [`Verdict`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Messages sent.
    pub sent: u64,
    /// Messages delivered exactly in order.
    pub delivered: u64,
    /// Messages delivered again.
    pub duplicated: u64,
    /// Messages delivered ahead of one not yet delivered.
    pub reordered: u64,
    /// Messages whose bytes were not those sent.
    pub corrupted: u64,
    /// Messages sent and never delivered (counted at the end of the run).
    pub lost: u64,
}

impl Verdict {
    /// Whether every message arrived exactly once, in order, intact.
    pub fn is_clean(&self) -> bool {
        self.duplicated == 0 && self.reordered == 0 && self.corrupted == 0 && self.lost == 0
    }

    /// Adds `other`'s counts.
    pub fn add(&mut self, other: &Self) {
        self.sent += other.sent;
        self.delivered += other.delivered;
        self.duplicated += other.duplicated;
        self.reordered += other.reordered;
        self.corrupted += other.corrupted;
        self.lost += other.lost;
    }
}

/// One ordered stream of messages from one side to the other.
#[derive(Debug)]
struct Stream {
    id: u8,
    from: Side,
    len: usize,
    /// Send time of each message, by sequence.
    sent_at: Vec<Instant>,
    expected: u64,
    verdict: Verdict,
    bytes_delivered: u64,
}

impl Stream {
    fn new(id: u8, from: Side, len: usize) -> Self {
        Self {
            id,
            from,
            len,
            sent_at: Vec::new(),
            expected: 0,
            verdict: Verdict::default(),
            bytes_delivered: 0,
        }
    }

    fn next_seq(&self) -> u64 {
        self.sent_at.len() as u64
    }

    fn outstanding(&self) -> u64 {
        self.next_seq().saturating_sub(self.expected)
    }

    fn try_send(&mut self, now: Instant, stack: &mut dyn Stack) -> bool {
        let seq = self.next_seq();
        if stack.send(self.from, message(self.id, seq, self.len)) {
            self.sent_at.push(now);
            self.verdict.sent += 1;
            true
        } else {
            false
        }
    }

    /// Checks one delivered message; returns its sequence when it is the next expected one.
    fn receive(&mut self, data: &[u8]) -> Option<u64> {
        let Some(seq) = check(self.id, self.len, data) else {
            self.verdict.corrupted += 1;
            return None;
        };
        if seq == self.expected && seq < self.next_seq() {
            self.expected += 1;
            self.verdict.delivered += 1;
            self.bytes_delivered += data.len() as u64;
            Some(seq)
        } else if seq < self.expected {
            self.verdict.duplicated += 1;
            None
        } else {
            self.verdict.reordered += 1;
            None
        }
    }

    fn done(&self) -> bool {
        self.expected >= self.next_seq()
    }
}

/// The traffic of one run: its streams, its timer and its latency samples.
#[derive(Debug)]
pub struct Traffic {
    workload: Workload,
    streams: Vec<Stream>,
    sending: bool,
    next_tick: Option<Instant>,
    /// Echoes the server owes but its stack refused for now.
    echo_backlog: u64,
    latencies: Vec<Duration>,
    /// Delivered bytes counted until [`Traffic::stop`].
    measured_bytes: u64,
    rx: Vec<Bytes>,
    /// The last instant a message was delivered, or nothing was outstanding.
    last_progress: Instant,
    /// The longest time messages were outstanding with none delivered.
    longest_stall: Duration,
}

impl Traffic {
    /// Traffic of `workload`, starting at `now`.
    pub fn new(workload: Workload, now: Instant) -> Self {
        let streams = match workload {
            Workload::Echo => vec![
                Stream::new(0, Side::Client, ECHO_SIZE),
                Stream::new(1, Side::Server, ECHO_SIZE),
            ],
            Workload::Bulk => vec![Stream::new(0, Side::Client, BULK_SIZE)],
            Workload::Tick => vec![
                Stream::new(0, Side::Server, TICK_STATE_SIZE),
                Stream::new(1, Side::Client, TICK_INPUT_SIZE),
            ],
        };
        Self {
            workload,
            streams,
            sending: true,
            next_tick: (workload == Workload::Tick).then_some(now),
            echo_backlog: 0,
            latencies: Vec::new(),
            measured_bytes: 0,
            rx: Vec::new(),
            last_progress: now,
            longest_stall: Duration::ZERO,
        }
    }

    /// The longest time, up to the last [`Traffic::pump`] or [`Traffic::observe`], during which
    /// messages were outstanding and none was delivered. A session that stays connected but
    /// delivers nothing more shows here rather than as a death.
    pub fn longest_stall(&self) -> Duration {
        self.longest_stall
    }

    /// Brings [`Traffic::longest_stall`] up to `now`.
    pub fn observe(&mut self, now: Instant) {
        if self.streams.iter().all(Stream::done) && self.echo_backlog == 0 {
            self.last_progress = now;
        }
        self.longest_stall = self
            .longest_stall
            .max(now.saturating_duration_since(self.last_progress));
    }

    /// The next instant the traffic wants [`Traffic::pump`] (its tick), if any.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_tick.filter(|_| self.sending)
    }

    /// Stops new traffic (echoes of requests already sent still go out). Bytes delivered from
    /// now on no longer count towards [`Traffic::measured_bytes`].
    pub fn stop(&mut self) {
        if self.sending {
            self.sending = false;
            self.measured_bytes = self.streams.iter().map(|s| s.bytes_delivered).sum();
        }
    }

    /// Application bytes delivered (both directions) until [`Traffic::stop`].
    pub fn measured_bytes(&self) -> u64 {
        if self.sending {
            self.streams.iter().map(|s| s.bytes_delivered).sum()
        } else {
            self.measured_bytes
        }
    }

    /// Whether every message sent has been delivered (and every echo owed was sent).
    pub fn is_drained(&self) -> bool {
        self.echo_backlog == 0 && self.streams.iter().all(Stream::done)
    }

    /// Latency samples of the workload's measured stream, in delivery order.
    pub fn latencies(&self) -> &[Duration] {
        &self.latencies
    }

    /// The verdict of all streams, with undelivered messages counted as lost.
    pub fn verdict(&self) -> Verdict {
        let mut v = Verdict::default();
        for s in &self.streams {
            let mut sv = s.verdict;
            sv.lost = s.next_seq().saturating_sub(s.expected);
            v.add(&sv);
        }
        v
    }

    /// Takes deliveries, checks them, and sends what the workload wants to send at `now`.
    pub fn pump(&mut self, now: Instant, stack: &mut dyn Stack) {
        for side in [Side::Client, Side::Server] {
            let mut rx = std::mem::take(&mut self.rx);
            stack.poll_delivered(side, &mut rx);
            if !rx.is_empty() {
                self.last_progress = now;
            }
            for data in rx.drain(..) {
                self.on_message(now, side, &data);
            }
            self.rx = rx;
        }
        self.observe(now);
        match self.workload {
            Workload::Echo => {
                while self.echo_backlog > 0 && self.streams[1].try_send(now, stack) {
                    self.echo_backlog -= 1;
                }
                // In flight: requests sent whose echo has not come back.
                while self.sending
                    && self.streams[0].next_seq() - self.streams[1].expected < ECHO_OUTSTANDING
                    && self.streams[0].try_send(now, stack)
                {}
            }
            Workload::Bulk => {
                while self.sending
                    && self.streams[0].outstanding() < BULK_OUTSTANDING
                    && self.streams[0].try_send(now, stack)
                {}
            }
            Workload::Tick => {
                if let Some(t) = self.next_tick.filter(|&t| self.sending && t <= now) {
                    // A refused update is skipped, not queued: the next tick supersedes it.
                    self.streams[0].try_send(now, stack);
                    self.streams[1].try_send(now, stack);
                    let mut next = t + TICK_PERIOD;
                    while next <= now {
                        next += TICK_PERIOD;
                    }
                    self.next_tick = Some(next);
                }
            }
        }
    }

    fn on_message(&mut self, now: Instant, at: Side, data: &[u8]) {
        let Some(index) = data
            .get(1)
            .map(|&id| usize::from(id))
            .filter(|&i| i < self.streams.len() && self.streams[i].from != at)
        else {
            // Not a message of any stream towards this side.
            if let Some(s) = self.streams.iter_mut().find(|s| s.from != at) {
                s.verdict.corrupted += 1;
            }
            return;
        };
        let Some(seq) = self.streams[index].receive(data) else {
            return;
        };
        let seq = seq as usize;
        match (self.workload, index) {
            (Workload::Echo, 0) => self.echo_backlog += 1,
            (Workload::Echo, _) => {
                // Round trip: from the request's send to the echo's delivery.
                self.latencies.push(now - self.streams[0].sent_at[seq]);
            }
            (Workload::Bulk | Workload::Tick, 0) => {
                self.latencies.push(now - self.streams[0].sent_at[seq]);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_and_corruption_is_seen() {
        let m = message(3, 77, 200);
        assert_eq!(m.len(), 200);
        assert_eq!(check(3, 200, &m), Some(77));
        let mut bad = m.to_vec();
        bad[150] ^= 1;
        assert_eq!(check(3, 200, &bad), None);
        assert_eq!(check(2, 200, &m), None);
        assert_eq!(check(3, 200, &m[..199]), None);
        assert_ne!(message(3, 78, 200)[HEADER..], m[HEADER..]);
    }
}
