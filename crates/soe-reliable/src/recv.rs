//! The receiving half: reorder window, duplicate detection, reassembly, acks, unbundling and
//! decryption.

use std::collections::VecDeque;
use std::time::Instant;

use bytes::Bytes;
use soe_crypto::Rc4;
use soe_wire::payload::is_plain_message;
use soe_wire::reliable::split_first_fragment;
use soe_wire::{PayloadMessages, WireError};

use crate::arena::{Arena, copy_to_arena, reserve};
use crate::channel::{Opcodes, put_header};
use crate::seq::expand;
use crate::{ChannelStats, ReliableConfig, ReliableError};

/// Whether a data packet is whole or a fragment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Whole,
    Fragment,
}

/// The most a first fragment makes the receiver reserve before more data arrives.
const FIRST_RESERVE: usize = 16 * 1024;

/// A packet stored ahead of the window.
/// What a channel's receiver holds ([`crate::ReliableChannel::receive_backlog`]). Each part
/// has its bound in [`ReliableConfig`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReceiveBacklog {
    /// Packets that arrived ahead of a missing one and wait for it (at most
    /// [`ReliableConfig::receive_window`]).
    pub early_packets: usize,
    /// Their payload bytes.
    pub early_bytes: usize,
    /// Bytes of a fragmented message assembled so far (at most
    /// [`ReliableConfig::max_message_size`] plus the escape byte).
    pub reassembly_bytes: usize,
    /// Messages received in order and not yet taken with `poll_message` (at most
    /// [`ReliableConfig::max_queued_messages`]).
    pub messages: usize,
    /// Their bytes.
    pub bytes: usize,
}

#[derive(Debug)]
struct Slot {
    kind: Kind,
    data: Bytes,
}

/// A fragmented message being put back together. The buffer grows only as data arrives.
#[derive(Debug)]
struct Reassembly {
    total: usize,
    buf: Vec<u8>,
}

/// What became of an in-order packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Admit {
    /// Taken: delivered, or added to a reassembly.
    Taken,
    /// Its messages would take the undelivered queue past `max_queued_messages` or
    /// `max_message_size`: it must wait, unacknowledged, until the application takes messages.
    NoRoom(Need),
}

/// The undelivered messages and bytes a packet would add.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Need {
    messages: usize,
    bytes: usize,
}

/// Packet data on its way to delivery.
enum Payload<'a> {
    Borrowed(&'a [u8]),
    Shared(Bytes),
    Owned(Vec<u8>),
}

impl Payload<'_> {
    fn as_slice(&self) -> &[u8] {
        match self {
            Self::Borrowed(s) => s,
            Self::Shared(b) => b,
            Self::Owned(v) => v,
        }
    }
}

#[derive(Debug)]
pub(crate) struct Receiver {
    cipher: Option<Rc4>,
    /// Whether messages completed now are decrypted (the cipher's state runs on only while so).
    decrypt: bool,
    arena: Arena,
    /// The next sequence to deliver.
    expected: u64,
    /// `slots[i]` holds sequence `expected + i` when it arrived early. `slots[0]` is always
    /// empty; the length never exceeds the receive window.
    slots: VecDeque<Option<Slot>>,
    reassembly: Option<Reassembly>,
    delivered: VecDeque<Bytes>,
    delivered_bytes: usize,
    /// Scratch: the message ranges of the payload being delivered.
    ranges: Vec<(usize, usize)>,
    /// When the cumulative ack is due, if one is owed.
    ack_all_due: Option<Instant>,
    /// In-order packets since the last cumulative ack.
    unacked: u16,
    /// Sequences stored ahead of the window, to acknowledge selectively.
    selective: VecDeque<u64>,
    /// The expected packet is held in `slots[0]`, unacknowledged, because its messages do not
    /// fit the undelivered queue; this is what it needs.
    blocked: Option<Need>,
    /// The latest time a packet arrived or a timer ran (a held packet delivered later is
    /// acknowledged as of then).
    last_now: Option<Instant>,
}

impl Receiver {
    pub(crate) fn new(cipher: Option<Rc4>) -> Self {
        Self {
            decrypt: cipher.is_some(),
            cipher,
            arena: Arena::new(),
            expected: 0,
            slots: VecDeque::new(),
            reassembly: None,
            delivered: VecDeque::new(),
            delivered_bytes: 0,
            ranges: Vec::new(),
            ack_all_due: None,
            unacked: 0,
            selective: VecDeque::new(),
            blocked: None,
            last_now: None,
        }
    }

    pub(crate) fn has_message(&self) -> bool {
        !self.delivered.is_empty()
    }

    #[inline]
    pub(crate) fn poll_message(&mut self) -> Option<Bytes> {
        let message = self.delivered.pop_front()?;
        self.delivered_bytes -= message.len();
        Some(message)
    }

    /// Decrypts messages completed from now on, or stops; the keystream continues where it
    /// stopped. Returns whether the receiver has a key (without one nothing changes).
    pub(crate) fn set_decryption(&mut self, on: bool) -> bool {
        if self.cipher.is_none() {
            return false;
        }
        self.decrypt = on;
        true
    }

    fn decrypting(&self) -> bool {
        self.decrypt && self.cipher.is_some()
    }

    pub(crate) fn backlog(&self) -> ReceiveBacklog {
        let early = self.slots.iter().flatten();
        ReceiveBacklog {
            early_packets: early.clone().count(),
            early_bytes: early.map(|s| s.data.len()).sum(),
            reassembly_bytes: self.reassembly.as_ref().map_or(0, |r| r.buf.len()),
            messages: self.delivered.len(),
            bytes: self.delivered_bytes,
        }
    }

    pub(crate) fn ack_deadline(&self) -> Option<Instant> {
        self.ack_all_due
    }

    /// When a held packet can be delivered: at once (as of the last packet or timer), once the
    /// application has taken enough messages for it.
    pub(crate) fn resume_deadline(&self, config: &ReliableConfig) -> Option<Instant> {
        let need = self.blocked?;
        fits(need, self.delivered.len(), self.delivered_bytes, config)
            .then_some(self.last_now)
            .flatten()
    }

    /// Delivers the held packets that fit now (see [`Receiver::resume_deadline`]).
    pub(crate) fn resume(
        &mut self,
        now: Instant,
        config: &ReliableConfig,
        stats: &mut ChannelStats,
    ) -> Result<(), ReliableError> {
        self.last_now = Some(now);
        if self.resume_deadline(config).is_none() {
            return Ok(());
        }
        self.blocked = None;
        if self.drain(now, config, stats)? {
            self.ack_now(now);
        }
        Ok(())
    }

    fn ack_now(&mut self, now: Instant) {
        if self.expected > 0 {
            self.ack_all_due = Some(now);
        }
    }

    pub(crate) fn on_packet(
        &mut self,
        now: Instant,
        kind: Kind,
        sequence: u16,
        data: &[u8],
        config: &ReliableConfig,
        stats: &mut ChannelStats,
    ) -> Result<(), ReliableError> {
        self.resume(now, config, stats)?;
        let Some(sequence) = expand(self.expected, sequence).filter(|&s| s >= self.expected) else {
            // Already delivered: the ack was lost, so say it again.
            stats.duplicates += 1;
            if config.reack_duplicates {
                self.ack_now(now);
            }
            return Ok(());
        };
        let offset = sequence - self.expected;
        if offset >= u64::from(config.receive_window) {
            stats.dropped += 1;
            return Ok(());
        }
        if offset > 0 {
            self.store(offset as usize, kind, data, config, stats);
            return Ok(());
        }
        if matches!(self.slots.front(), Some(Some(_))) {
            // Held, unacknowledged, for lack of room: the peer sent it again.
            stats.duplicates += 1;
            return Ok(());
        }
        stats.packets_received += 1;
        if kind == Kind::Whole && self.deliver_plain(data, config, stats) {
            self.advance(now, config);
            if self.drain(now, config, stats)? {
                self.ack_now(now);
            }
            return Ok(());
        }
        if let Admit::NoRoom(need) =
            self.process(sequence, kind, Payload::Borrowed(data), config, stats)?
        {
            // Kept (the receive window bounds it) but not acknowledged: delivered once the
            // application takes messages.
            let data = copy_to_arena(&mut self.arena, data);
            match self.slots.front_mut() {
                Some(slot) => *slot = Some(Slot { kind, data }),
                None => self.slots.push_back(Some(Slot { kind, data })),
            }
            self.blocked = Some(need);
            return Ok(());
        }
        self.advance(now, config);
        if self.drain(now, config, stats)? {
            self.ack_now(now);
        }
        Ok(())
    }

    /// Delivers the stored packets that continue the sequence, while their messages fit the
    /// undelivered queue. Returns whether any was delivered.
    #[inline]
    fn drain(
        &mut self,
        now: Instant,
        config: &ReliableConfig,
        stats: &mut ChannelStats,
    ) -> Result<bool, ReliableError> {
        // Usually nothing is stored: answered without the call.
        if !matches!(self.slots.front(), Some(Some(_))) {
            return Ok(false);
        }
        self.drain_stored(now, config, stats)
    }

    /// [`Receiver::drain`] once the next packet is stored.
    fn drain_stored(
        &mut self,
        now: Instant,
        config: &ReliableConfig,
        stats: &mut ChannelStats,
    ) -> Result<bool, ReliableError> {
        let mut any = false;
        while let Some(Some(slot)) = self.slots.front() {
            let (kind, data) = (slot.kind, slot.data.clone());
            let sequence = self.expected;
            if let Admit::NoRoom(need) =
                self.process(sequence, kind, Payload::Shared(data), config, stats)?
            {
                self.blocked = Some(need);
                break;
            }
            self.advance(now, config);
            any = true;
        }
        Ok(any)
    }

    /// Moves the window past the expected packet and schedules the cumulative ack.
    #[inline]
    fn advance(&mut self, now: Instant, config: &ReliableConfig) {
        self.slots.pop_front();
        self.expected += 1;
        self.unacked = self.unacked.saturating_add(1);
        if self.unacked >= config.ack_every {
            self.ack_all_due = Some(now);
        } else {
            let due = now + config.ack_delay;
            self.ack_all_due = Some(self.ack_all_due.map_or(due, |d| d.min(due)));
        }
    }

    /// Keeps a packet that arrived `offset` ahead of the expected one.
    fn store(
        &mut self,
        offset: usize,
        kind: Kind,
        data: &[u8],
        config: &ReliableConfig,
        stats: &mut ChannelStats,
    ) {
        if self.slots.len() <= offset {
            self.slots.resize_with(offset + 1, || None);
        }
        let sequence = self.expected + offset as u64;
        let Some(slot) = self.slots.get_mut(offset) else {
            return;
        };
        if slot.is_some() {
            stats.duplicates += 1;
        } else {
            stats.packets_received += 1;
            stats.out_of_order += 1;
            *slot = Some(Slot {
                kind,
                data: copy_to_arena(&mut self.arena, data),
            });
        }
        if self.selective.len() < usize::from(config.receive_window) {
            self.selective.push_back(sequence);
        }
    }

    /// Handles the in-order packet `sequence`, unless the messages it completes do not fit the
    /// undelivered queue: then nothing changes and it must wait.
    fn process(
        &mut self,
        sequence: u64,
        kind: Kind,
        data: Payload<'_>,
        config: &ReliableConfig,
        stats: &mut ChannelStats,
    ) -> Result<Admit, ReliableError> {
        match (kind, &mut self.reassembly) {
            (Kind::Whole, None) => self.deliver(data, config, stats),
            (Kind::Whole, Some(r)) => Err(ReliableError::InterruptedReassembly {
                sequence,
                received: r.buf.len(),
                total: r.total,
            }),
            (Kind::Fragment, Some(r)) => {
                let bytes = data.as_slice();
                let received = r.buf.len().saturating_add(bytes.len());
                if received > r.total {
                    return Err(ReliableError::FragmentOverflow {
                        total: r.total,
                        received,
                    });
                }
                let before = r.buf.len();
                append_bounded(&mut r.buf, bytes, r.total);
                if received < r.total {
                    return Ok(Admit::Taken);
                }
                self.ranges.clear();
                message_ranges(
                    &r.buf,
                    !(self.decrypt && self.cipher.is_some()),
                    &mut self.ranges,
                )?;
                let need = need_of(&self.ranges);
                if !fits(need, self.delivered.len(), self.delivered_bytes, config) {
                    r.buf.truncate(before);
                    return Ok(Admit::NoRoom(need));
                }
                let buf = std::mem::take(&mut r.buf);
                self.reassembly = None;
                self.push_ranges(Payload::Owned(buf), stats);
                Ok(Admit::Taken)
            }
            (Kind::Fragment, None) => {
                let (total, rest) = split_first_fragment(data.as_slice())?;
                let total = usize::try_from(total).unwrap_or(usize::MAX);
                let max = config.max_message_size.saturating_add(1);
                if total > max {
                    return Err(ReliableError::MessageTooLarge { len: total, max });
                }
                if rest.len() > total {
                    return Err(ReliableError::FragmentOverflow {
                        total,
                        received: rest.len(),
                    });
                }
                if rest.len() == total {
                    // A message in a single fragment.
                    let payload = match &data {
                        Payload::Shared(b) => Payload::Shared(b.slice_ref(rest)),
                        _ => Payload::Borrowed(rest),
                    };
                    return self.deliver(payload, config, stats);
                }
                // Room for the first chunk of the message only: the total is the peer's claim,
                // so the buffer grows by doubling as data arrives rather than being reserved.
                let mut buf = Vec::with_capacity(total.min(FIRST_RESERVE.max(rest.len())));
                append_bounded(&mut buf, rest, total);
                self.reassembly = Some(Reassembly { total, buf });
                Ok(Admit::Taken)
            }
        }
    }

    /// The common case of [`Receiver::process`], answered without its general path: a whole
    /// packet, no reassembly under way, no decryption, and a payload that is one message as it
    /// stands ([`is_plain_message`]). Queues the message if it fits and returns true; returns
    /// false, having changed nothing, when the packet is not such a case or does not fit (the
    /// general path then decides).
    #[inline]
    fn deliver_plain(
        &mut self,
        data: &[u8],
        config: &ReliableConfig,
        stats: &mut ChannelStats,
    ) -> bool {
        if self.reassembly.is_some() || self.decrypting() || !is_plain_message(data) {
            return false;
        }
        let need = Need {
            messages: 1,
            bytes: data.len(),
        };
        if !fits(need, self.delivered.len(), self.delivered_bytes, config) {
            return false;
        }
        let message = copy_to_arena(&mut self.arena, data);
        self.push(message, stats);
        true
    }

    /// Unbundles, unescapes and decrypts a complete payload and queues its messages, if they fit.
    fn deliver(
        &mut self,
        payload: Payload<'_>,
        config: &ReliableConfig,
        stats: &mut ChannelStats,
    ) -> Result<Admit, ReliableError> {
        self.ranges.clear();
        message_ranges(payload.as_slice(), !self.decrypting(), &mut self.ranges)?;
        let need = need_of(&self.ranges);
        if !fits(need, self.delivered.len(), self.delivered_bytes, config) {
            return Ok(Admit::NoRoom(need));
        }
        self.push_ranges(payload, stats);
        Ok(Admit::Taken)
    }

    /// Decrypts a complete payload and queues the messages `self.ranges` finds in it.
    fn push_ranges(&mut self, payload: Payload<'_>, stats: &mut ChannelStats) {
        let bytes = match (payload, self.cipher.as_mut().filter(|_| self.decrypt)) {
            (Payload::Shared(b), None) => b,
            (Payload::Owned(v), None) => Bytes::from(v),
            (Payload::Borrowed(s), None) => copy_to_arena(&mut self.arena, s),
            (Payload::Owned(mut v), Some(cipher)) => {
                decrypt(cipher, &mut v, &self.ranges);
                Bytes::from(v)
            }
            (payload @ (Payload::Borrowed(_) | Payload::Shared(_)), Some(cipher)) => {
                let s = payload.as_slice();
                reserve(&mut self.arena, s.len());
                self.arena.extend_from_slice(s);
                decrypt(cipher, &mut self.arena, &self.ranges);
                self.arena.split().freeze()
            }
        };
        let whole = self.ranges.len() == 1 && self.ranges.first() == Some(&(0, bytes.len()));
        if whole {
            self.push(bytes, stats);
        } else {
            for i in 0..self.ranges.len() {
                let Some(&(start, end)) = self.ranges.get(i) else {
                    break;
                };
                self.push(bytes.slice(start..end), stats);
            }
        }
    }

    fn push(&mut self, message: Bytes, stats: &mut ChannelStats) {
        stats.messages_delivered += 1;
        stats.bytes_delivered += message.len() as u64;
        self.delivered_bytes += message.len();
        self.delivered.push_back(message);
    }

    /// Makes a delayed cumulative ack due at once: data is leaving anyway, so the ack rides in the
    /// same datagram instead of waiting for its timer (and a peer whose window is smaller than
    /// `ack_every` is not left stalled for `ack_delay`).
    #[inline]
    pub(crate) fn hasten_ack(&mut self, now: Instant) {
        if let Some(due) = self.ack_all_due.as_mut() {
            *due = (*due).min(now);
        }
    }

    /// Whether an ack is owed, due now or later (an over-estimate of [`Receiver::poll_ack`]).
    pub(crate) fn owes_ack(&self) -> bool {
        self.ack_all_due.is_some() || !self.selective.is_empty()
    }

    /// Writes a due cumulative ack, or a selective one.
    #[inline]
    pub(crate) fn poll_ack(
        &mut self,
        now: Instant,
        out: &mut Vec<u8>,
        ops: &Opcodes,
        stats: &mut ChannelStats,
    ) -> Option<usize> {
        // Most calls find nothing due: answered here, inlined into the caller.
        if self.selective.is_empty() && self.ack_all_due.is_none_or(|due| due > now) {
            return None;
        }
        self.write_ack(now, out, ops, stats)
    }

    /// [`Receiver::poll_ack`] once an ack may be due.
    fn write_ack(
        &mut self,
        now: Instant,
        out: &mut Vec<u8>,
        ops: &Opcodes,
        stats: &mut ChannelStats,
    ) -> Option<usize> {
        if self.ack_all_due.is_some_and(|due| due <= now) && self.expected > 0 {
            self.ack_all_due = None;
            self.unacked = 0;
            stats.acks_sent += 1;
            put_header(out, ops.ack_all, self.expected - 1);
            return Some(4);
        }
        while let Some(sequence) = self.selective.pop_front() {
            if sequence < self.expected {
                // Delivered since; the cumulative ack covers it.
                continue;
            }
            stats.acks_sent += 1;
            put_header(out, ops.ack, sequence);
            return Some(4);
        }
        None
    }
}

/// The undelivered messages and bytes that the message ranges of a payload add.
fn need_of(ranges: &[(usize, usize)]) -> Need {
    Need {
        messages: ranges.len(),
        bytes: ranges.iter().map(|&(start, end)| end - start).sum(),
    }
}

/// Whether `need` fits beside `held` undelivered messages of `held_bytes` bytes. An empty queue
/// takes any one packet (a packet whose messages alone exceed the limits could otherwise never
/// be delivered); otherwise `max_queued_messages` and `max_message_size` hold exactly.
fn fits(need: Need, held: usize, held_bytes: usize, config: &ReliableConfig) -> bool {
    held == 0
        || (held.saturating_add(need.messages) <= config.max_queued_messages
            && held_bytes.saturating_add(need.bytes) <= config.max_message_size)
}

/// Finds each message of a reassembled payload as a range of it, by the one rule in
/// [`soe_wire::payload`] (ack elicitor, Group items unescaped, plaintext fallback).
fn message_ranges(
    payload: &[u8],
    plaintext: bool,
    ranges: &mut Vec<(usize, usize)>,
) -> Result<(), WireError> {
    if is_plain_message(payload) {
        // The common case, one message as it stands: the rule's answer without decoding.
        ranges.push((0, payload.len()));
        return Ok(());
    }
    let messages = PayloadMessages::decode(payload, plaintext)?;
    ranges.extend(messages.ranges().map(|r| (r.start, r.end)));
    Ok(())
}

fn decrypt(cipher: &mut Rc4, buf: &mut [u8], ranges: &[(usize, usize)]) {
    for &(start, end) in ranges {
        if let Some(message) = buf.get_mut(start..end) {
            cipher.apply(message);
        }
    }
}

/// Appends to a reassembly buffer, growing it by doubling but never past `total`.
fn append_bounded(buf: &mut Vec<u8>, data: &[u8], total: usize) {
    let needed = buf.len() + data.len();
    if buf.capacity() < needed {
        let target = needed
            .max(buf.capacity().saturating_mul(2))
            .min(total)
            .max(needed);
        buf.reserve_exact(target - buf.len());
    }
    buf.extend_from_slice(data);
}
