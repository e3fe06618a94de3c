//! The sending half: queue, packetizer (escape, Group, fragments), in-flight table, acks,
//! retransmission and congestion control.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use soe_crypto::Rc4;
use soe_wire::reliable::{DATA_HEADER_LEN, FIRST_FRAGMENT_EXTRA, GROUP_PREFIX, needs_escape};
use soe_wire::varint::group_len_size;

use crate::arena::{ARENA_CHUNK, reserve};
use crate::channel::{Opcodes, put_header};
use crate::congestion::Congestion;
use crate::rtt::RttEstimator;
use crate::seq::expand;
use crate::{ChannelStats, ReliableConfig, ReliableError, SendError};

/// What the packet header says about the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Header {
    /// ReliableData.
    Whole,
    /// ReliableDataFragment; the first one carries the total length.
    Fragment { total: Option<u32> },
}

/// A sequenced packet kept until it is acknowledged.
#[derive(Debug)]
struct InFlight {
    header: Header,
    /// A zero byte goes before `data` (the message's escape byte).
    escape: bool,
    data: Bytes,
    first_sent: Instant,
    last_sent: Instant,
    transmissions: u32,
    /// In the resend queue.
    resend_queued: bool,
    /// Queued for resend because an ack showed a gap (counted when sent).
    fast: bool,
}

impl InFlight {
    fn encoded_len(&self) -> usize {
        DATA_HEADER_LEN
            + match self.header {
                Header::Fragment { total: Some(_) } => FIRST_FRAGMENT_EXTRA,
                _ => 0,
            }
            + usize::from(self.escape)
            + self.data.len()
    }

    fn encode(&self, sequence: u64, ops: &Opcodes, out: &mut Vec<u8>) -> usize {
        let start = out.len();
        match self.header {
            Header::Whole => put_header(out, ops.data, sequence),
            Header::Fragment { total } => {
                put_header(out, ops.fragment, sequence);
                if let Some(total) = total {
                    out.extend_from_slice(&total.to_be_bytes());
                }
            }
        }
        if self.escape {
            out.push(0);
        }
        out.extend_from_slice(&self.data);
        debug_assert_eq!(out.len() - start, self.encoded_len());
        out.len() - start
    }
}

/// A message too large for one packet, being cut into fragments.
#[derive(Debug)]
struct Fragmenting {
    message: Bytes,
    escape: bool,
    /// Bytes of the escaped message (escape byte included) already sequenced.
    offset: usize,
    /// The escaped length.
    total: usize,
}

#[derive(Debug)]
pub(crate) struct Sender {
    cipher: Option<Rc4>,
    arena: BytesMut,
    queue: VecDeque<Bytes>,
    fragmenting: Option<Fragmenting>,
    /// The next sequence to assign.
    next: u64,
    /// The oldest unacknowledged sequence (`next` when nothing is in flight).
    base: u64,
    /// `in_flight[i]` is sequence `base + i`; `None` once selectively acknowledged. The front is
    /// never `None`.
    in_flight: VecDeque<Option<InFlight>>,
    resend: VecDeque<u64>,
    highest_acked: Option<u64>,
    rtt: RttEstimator,
    congestion: Congestion,
    /// The earliest retransmission deadline among packets not already queued for resend.
    rto_deadline: Option<Instant>,
}

impl Sender {
    pub(crate) fn new(config: &ReliableConfig, cipher: Option<Rc4>) -> Self {
        Self {
            arena: if cipher.is_some() {
                BytesMut::with_capacity(ARENA_CHUNK)
            } else {
                BytesMut::new()
            },
            cipher,
            queue: VecDeque::new(),
            fragmenting: None,
            next: 0,
            base: 0,
            in_flight: VecDeque::new(),
            resend: VecDeque::new(),
            highest_acked: None,
            rtt: RttEstimator::new(),
            congestion: Congestion::new(config.initial_send_window, config.max_send_window),
            rto_deadline: None,
        }
    }

    pub(crate) fn send(
        &mut self,
        message: Bytes,
        config: &ReliableConfig,
        stats: &mut ChannelStats,
    ) -> Result<(), SendError> {
        if message.len() > config.max_message_size {
            return Err(SendError::TooLarge {
                len: message.len(),
                max: config.max_message_size,
            });
        }
        if self.queued() >= config.max_queued_messages {
            return Err(SendError::QueueFull(message));
        }
        stats.messages_sent += 1;
        stats.bytes_sent += message.len() as u64;
        let message = match self.cipher.as_mut() {
            Some(cipher) if !message.is_empty() => {
                reserve(&mut self.arena, message.len());
                self.arena.extend_from_slice(&message);
                cipher.apply(&mut self.arena);
                self.arena.split().freeze()
            }
            _ => message,
        };
        self.queue.push_back(message);
        Ok(())
    }

    pub(crate) fn queued(&self) -> usize {
        self.queue.len() + usize::from(self.fragmenting.is_some())
    }

    pub(crate) fn is_flushed(&self) -> bool {
        self.queue.is_empty() && self.fragmenting.is_none() && self.in_flight.is_empty()
    }

    pub(crate) fn rtt(&self) -> &RttEstimator {
        &self.rtt
    }

    pub(crate) fn congestion_window(&self) -> u32 {
        self.congestion.window()
    }

    fn rto(&self, config: &ReliableConfig) -> Duration {
        self.rtt
            .rto(config.initial_rto, config.min_rto, config.max_rto)
    }

    /// When the oldest unacknowledged packet reaches the unacknowledged limit.
    pub(crate) fn give_up_deadline(&self, config: &ReliableConfig) -> Option<Instant> {
        let oldest = self.in_flight.front()?.as_ref()?;
        oldest.first_sent.checked_add(config.unacknowledged_timeout)
    }

    pub(crate) fn rto_deadline(&self) -> Option<Instant> {
        self.rto_deadline
    }

    /// Writes one retransmission or one new data packet.
    pub(crate) fn poll_transmit(
        &mut self,
        now: Instant,
        out: &mut Vec<u8>,
        max_packet_len: usize,
        config: &ReliableConfig,
        ops: &Opcodes,
        stats: &mut ChannelStats,
    ) -> Option<usize> {
        let rto = self.rto(config);
        while let Some(sequence) = self.resend.pop_front() {
            let Some(index) = sequence.checked_sub(self.base) else {
                continue;
            };
            let Some(Some(packet)) = usize::try_from(index)
                .ok()
                .and_then(|i| self.in_flight.get_mut(i))
            else {
                continue;
            };
            if !packet.resend_queued {
                continue;
            }
            packet.resend_queued = false;
            packet.last_sent = now;
            packet.transmissions = packet.transmissions.saturating_add(1);
            stats.packets_resent += 1;
            if packet.fast {
                stats.fast_resends += 1;
                packet.fast = false;
            }
            let len = packet.encode(sequence, ops, out);
            self.arm(now + rto);
            return Some(len);
        }

        let window = u64::from(self.congestion.window());
        if self.next - self.base >= window {
            return None;
        }
        let (header, escape, data) = self.next_packet(max_packet_len, config.bundle_messages)?;
        let packet = InFlight {
            header,
            escape,
            data,
            first_sent: now,
            last_sent: now,
            transmissions: 1,
            resend_queued: false,
            fast: false,
        };
        let sequence = self.next;
        self.next += 1;
        stats.packets_sent += 1;
        let len = packet.encode(sequence, ops, out);
        debug_assert!(len <= max_packet_len, "{len} > {max_packet_len}");
        self.in_flight.push_back(Some(packet));
        self.arm(now + rto);
        Some(len)
    }

    fn arm(&mut self, deadline: Instant) {
        self.rto_deadline = Some(self.rto_deadline.map_or(deadline, |d| d.min(deadline)));
    }

    /// Cuts the next packet's data from the queue: the next fragment of a large message, a Group
    /// of the queued messages that fit one packet, or one message.
    fn next_packet(
        &mut self,
        max_packet_len: usize,
        bundle: bool,
    ) -> Option<(Header, bool, Bytes)> {
        let room = max_packet_len.saturating_sub(DATA_HEADER_LEN);
        if self.fragmenting.is_none() {
            let message = self.queue.pop_front()?;
            let escape = needs_escape(&message);
            let len = message.len() + usize::from(escape);
            if len > room {
                self.fragmenting = Some(Fragmenting {
                    message,
                    escape,
                    offset: 0,
                    total: len,
                });
            } else {
                if bundle && len > 0 {
                    if let Some(group) = self.group_with(&message, len, room) {
                        return Some((Header::Whole, false, group));
                    }
                }
                return Some((Header::Whole, escape, message));
            }
        }
        let f = self.fragmenting.as_mut()?;
        let first = f.offset == 0;
        let capacity = if first {
            room.saturating_sub(FIRST_FRAGMENT_EXTRA)
        } else {
            room
        };
        let end = f.total.min(f.offset + capacity.max(1));
        let shift = usize::from(f.escape);
        let escape = first && f.escape;
        let start = if first { 0 } else { f.offset - shift };
        let data = f.message.slice(start..end - shift);
        let header = Header::Fragment {
            // The total fits: messages are at most max_message_size < u32::MAX bytes.
            total: first.then(|| u32::try_from(f.total).unwrap_or(u32::MAX)),
        };
        f.offset = end;
        if end >= f.total {
            self.fragmenting = None;
        }
        Some((header, escape, data))
    }

    /// When the messages after `first` (escaped length `len`) fit one packet with it, packs them
    /// into a Group written into the arena, and takes them off the queue.
    fn group_with(&mut self, first: &Bytes, len: usize, room: usize) -> Option<Bytes> {
        let mut size = GROUP_PREFIX.len() + group_len_size(len) + len;
        let mut count = 0;
        for message in &self.queue {
            let item = message.len() + usize::from(needs_escape(message));
            let add = group_len_size(item) + item;
            if item == 0 || size + add > room {
                break;
            }
            size += add;
            count += 1;
        }
        if count == 0 {
            return None;
        }
        reserve(&mut self.arena, size);
        self.arena.put_slice(&GROUP_PREFIX);
        put_item(&mut self.arena, first);
        for message in self.queue.drain(..count) {
            put_item(&mut self.arena, &message);
        }
        debug_assert_eq!(self.arena.len(), size);
        Some(self.arena.split().freeze())
    }

    /// Handles an AcknowledgeAll.
    pub(crate) fn on_ack_all(
        &mut self,
        now: Instant,
        sequence: u16,
        config: &ReliableConfig,
        stats: &mut ChannelStats,
    ) {
        stats.acks_received += 1;
        let Some(last) = expand(self.base, sequence).filter(|s| (self.base..self.next).contains(s))
        else {
            stats.acks_ignored += 1;
            return;
        };
        let mut acked = 0;
        let mut sample = None;
        for _ in self.base..=last {
            if let Some(Some(packet)) = self.in_flight.pop_front() {
                acked += 1;
                // Karn's rule: only a packet sent once gives an unambiguous sample.
                if packet.transmissions == 1 {
                    sample = Some(packet.last_sent);
                }
            }
        }
        self.base = last + 1;
        self.after_ack(now, last, acked, sample, config);
    }

    /// Handles a selective Acknowledge.
    pub(crate) fn on_ack(
        &mut self,
        now: Instant,
        sequence: u16,
        config: &ReliableConfig,
        stats: &mut ChannelStats,
    ) {
        stats.acks_received += 1;
        let packet = expand(self.base, sequence)
            .filter(|s| (self.base..self.next).contains(s))
            .and_then(|s| {
                let slot = self
                    .in_flight
                    .get_mut(usize::try_from(s - self.base).ok()?)?;
                Some((s, slot.take()?))
            });
        let Some((sequence, packet)) = packet else {
            stats.acks_ignored += 1;
            return;
        };
        let sample = (packet.transmissions == 1).then_some(packet.last_sent);
        self.after_ack(now, sequence, 1, sample, config);
    }

    /// Bookkeeping after `acked > 0` packets up to `highest` were newly acknowledged.
    fn after_ack(
        &mut self,
        now: Instant,
        highest: u64,
        acked: u32,
        sample: Option<Instant>,
        config: &ReliableConfig,
    ) {
        while let Some(None) = self.in_flight.front() {
            self.in_flight.pop_front();
            self.base += 1;
        }
        if acked == 0 {
            return;
        }
        self.congestion.on_ack(acked);
        match sample {
            Some(sent) => self.rtt.on_sample(now.saturating_duration_since(sent)),
            None => self.rtt.on_progress(),
        }
        let highest = self.highest_acked.map_or(highest, |h| h.max(highest));
        self.highest_acked = Some(highest);

        // Packets sent before the highest acknowledged one and out for over a round trip are
        // taken as lost: resend them now (at most once per round trip each).
        let rto = self.rto(config);
        let srtt = self.rtt.smoothed().unwrap_or(rto);
        let threshold = srtt + (srtt / 8).max(Duration::from_millis(1));
        let mut lost = false;
        let mut deadline: Option<Instant> = None;
        for (index, slot) in self.in_flight.iter_mut().enumerate() {
            let Some(packet) = slot else { continue };
            if packet.resend_queued {
                continue;
            }
            let sequence = self.base + index as u64;
            if sequence < highest && now.saturating_duration_since(packet.last_sent) >= threshold {
                packet.resend_queued = true;
                packet.fast = true;
                self.resend.push_back(sequence);
                lost = true;
            } else {
                let due = packet.last_sent + rto;
                deadline = Some(deadline.map_or(due, |d| d.min(due)));
            }
        }
        self.rto_deadline = deadline;
        if lost {
            self.congestion.on_loss(now, srtt);
        }
    }

    /// Runs the retransmission timer and the unacknowledged limit.
    pub(crate) fn on_timeout(
        &mut self,
        now: Instant,
        config: &ReliableConfig,
        stats: &mut ChannelStats,
    ) -> Result<(), ReliableError> {
        if let Some(Some(oldest)) = self.in_flight.front() {
            let elapsed = now.saturating_duration_since(oldest.first_sent);
            if elapsed >= config.unacknowledged_timeout {
                return Err(ReliableError::UnacknowledgedTimeout {
                    sequence: self.base,
                    elapsed,
                });
            }
        }
        if self.rto_deadline.is_none_or(|d| d > now) {
            return Ok(());
        }
        let rto = self.rto(config);
        let mut expired = false;
        for (index, slot) in self.in_flight.iter_mut().enumerate() {
            if let Some(packet) = slot {
                if !packet.resend_queued && packet.last_sent + rto <= now {
                    packet.resend_queued = true;
                    self.resend.push_back(self.base + index as u64);
                    expired = true;
                }
            }
        }
        if expired {
            stats.timeouts += 1;
            self.rtt.on_timeout();
            let srtt = self.rtt.smoothed().unwrap_or(rto);
            self.congestion.on_loss(now, srtt);
        }
        let rto = self.rto(config);
        self.rto_deadline = self
            .in_flight
            .iter()
            .flatten()
            .filter(|p| !p.resend_queued)
            .map(|p| p.last_sent + rto)
            .min();
        Ok(())
    }
}

/// Appends one Group item: its length (the Group varint, written here because
/// `soe_wire::varint::write_group` writes to a `Vec`), then the message escaped.
fn put_item(out: &mut BytesMut, message: &[u8]) {
    let escape = needs_escape(message);
    let len = message.len() + usize::from(escape);
    if len < 0xFF {
        out.put_u8(len as u8);
    } else if len < 0xFFFF {
        out.put_u8(0xFF);
        out.put_u16(len as u16);
    } else {
        out.put_slice(&[0xFF, 0xFF, 0xFF]);
        out.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
    }
    if escape {
        out.put_u8(0);
    }
    out.put_slice(message);
}
