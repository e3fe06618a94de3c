//! Channel reassembly: the in-order receiver one direction and channel of a session is
//! emulated with, as `soe-reliable`'s receiver works, and what it does when the capture lost
//! packets.
//!
//! # Gaps the capture lost
//!
//! A missing sequence is waited for while a resend may still fill it. It is given up as lost
//! to the capture (a [`CaptureGap`]) once it cannot come any more: the receiver acknowledged
//! past it (so the sender will not send it again), it lies [`Limits::gap_window`] or more
//! behind the newest sequence (further than a sender keeps unacknowledged), or the capture
//! ended ([`crate::Dissector::flush`]). The stream then goes on past it:
//!
//! * A whole packet (ReliableData) always starts a message: it holds whole messages, and a
//!   fragmented message cannot be interrupted by one. So it is delivered, and marks a message
//!   boundary.
//! * A fragment (ReliableDataFragment) is a first fragment (its data starts with the message's
//!   total length) or a continuation (no length); the wire does not say which: only its place
//!   does. A fragment is placed only where its place is known: right after a message boundary
//!   it is a first fragment. After a gap it is not known (the gap may have held a first
//!   fragment), so every fragment until the next whole packet is counted as unplaced and not
//!   delivered: nothing is guessed.
//! * A fragmented message the gap cut is dropped and counted (`unassembled_messages`), with
//!   its announced length and the bytes seen of it in the gap's record.
//! * RC4 runs one keystream through every message of a direction, so after a gap on an
//!   encrypted channel its position is unknown: later messages are shown as sent, not
//!   decrypted, and parsed as escaped data (as an encrypting peer sends them).

use std::collections::BTreeMap;
use std::time::Duration;

use soe_crypto::Rc4;
use soe_wire::PayloadMessages;
use soe_wire::payload::is_ack_elicitor;
use soe_wire::reliable::split_first_fragment;

use crate::config::{ASCII_PREVIEW, Limits};
use crate::judge::{Judge, verdict_note};
use crate::records::{CaptureGap, CrcVerdict, DirectionStats, Encryption, MessageRecord};

/// The datagram that carried a packet, as its messages report it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Carrier {
    /// Its index (1 for the first datagram dissected; 0 for none).
    pub(crate) frame: u64,
    /// Whether it was zlib-compressed.
    pub(crate) compressed: bool,
    /// Its CRC verdict.
    pub(crate) crc: CrcVerdict,
}

impl Default for Carrier {
    fn default() -> Self {
        Self {
            frame: 0,
            compressed: false,
            crc: CrcVerdict::Unknown,
        }
    }
}

impl Carrier {
    /// What a message carried by `self` and then `next` reports: the first frame, compressed
    /// if either was, and the weaker CRC verdict (`ok` only when both checked out).
    fn and(self, next: Self) -> Self {
        let strength = |v: CrcVerdict| match v {
            CrcVerdict::Ok => 4,
            CrcVerdict::Missing => 3,
            CrcVerdict::None => 2,
            CrcVerdict::Unknown => 1,
            CrcVerdict::Bad => 0,
        };
        Self {
            frame: self.frame,
            compressed: self.compressed || next.compressed,
            crc: if strength(next.crc) < strength(self.crc) {
                next.crc
            } else {
                self.crc
            },
        }
    }
}

/// A packet buffered ahead of a gap.
pub(crate) struct Stored {
    /// Whether it is a ReliableDataFragment.
    pub(crate) fragment: bool,
    /// Its data after the sequence.
    pub(crate) data: Vec<u8>,
    /// The datagram that carried it.
    pub(crate) carrier: Carrier,
}

/// A fragmented message in progress.
pub(crate) enum Reassembly {
    /// Collecting its bytes.
    Collecting {
        /// The message length the first fragment announced.
        total: usize,
        /// The bytes so far.
        buf: Vec<u8>,
        /// The datagrams that carried them (the first one's frame).
        carriers: Carrier,
    },
    /// Counting its bytes only (over a limit), to stay in step with the fragments.
    Skipping {
        /// The message length the first fragment announced.
        total: usize,
        /// The bytes seen so far.
        seen: usize,
    },
}

/// The receiver emulation of one direction and channel.
pub(crate) struct ChannelRx {
    /// The channel number.
    pub(crate) channel: u8,
    /// Whether the stream start is set.
    pub(crate) synced: bool,
    /// The first sequence of the stream (0 after a handshake).
    pub(crate) start: u64,
    /// The next sequence to process.
    pub(crate) expected: u64,
    /// The highest sequence seen.
    pub(crate) highest: Option<u64>,
    /// Packets buffered ahead of `expected`, by full sequence.
    pub(crate) slots: BTreeMap<u64, Stored>,
    /// A fragmented message in progress.
    pub(crate) reassembly: Option<Reassembly>,
    /// The RC4 state of this direction and channel.
    pub(crate) cipher: Option<Rc4>,
    /// First appearance of each sequence not yet acknowledged.
    pub(crate) pending: BTreeMap<u64, Duration>,
    /// Everything up to this was acknowledged cumulatively.
    pub(crate) acked_through: Option<u64>,
    /// A gap was given up and no whole packet came since: whether a fragment starts a
    /// message or continues one is unknown, so fragments cannot be placed.
    pub(crate) adrift: bool,
    /// A gap was given up on an encrypted channel: the RC4 keystream's position is lost, so
    /// messages are shown as sent (still parsed as escaped, encrypted data).
    pub(crate) keystream_lost: bool,
    /// The last gap given up ends just before `expected`, and no packet came since: a gap
    /// given up next grows it rather than making another.
    pub(crate) gap_open: bool,
    /// Whether that open gap is listed in the direction's `gaps` (the last of its channel
    /// there); an unlisted one (over `max_gaps_listed`) grows in the counts only.
    pub(crate) open_gap_listed: bool,
}

/// The full-width sequence congruent to `wire` nearest to `reference`.
pub(crate) fn expand(reference: u64, wire: u16) -> Option<u64> {
    let delta = wire.wrapping_sub(reference as u16) as i16;
    reference.checked_add_signed(i64::from(delta))
}

/// Printable ASCII of the first bytes, `.` for the rest.
pub(crate) fn ascii_preview(bytes: &[u8]) -> String {
    bytes
        .iter()
        .take(ASCII_PREVIEW)
        .map(|&b| {
            if (0x20..0x7F).contains(&b) {
                char::from(b)
            } else {
                '.'
            }
        })
        .collect()
}

impl ChannelRx {
    /// A receiver for `channel`, decrypting with `key` when given.
    pub(crate) fn new(channel: u8, key: Option<&[u8]>) -> Self {
        Self {
            channel,
            synced: false,
            start: 0,
            expected: 0,
            highest: None,
            slots: BTreeMap::new(),
            reassembly: None,
            cipher: key.and_then(|k| Rc4::new(k).ok()),
            pending: BTreeMap::new(),
            acked_through: None,
            adrift: false,
            keystream_lost: false,
            gap_open: false,
            open_gap_listed: false,
        }
    }

    /// Bytes this receiver holds (counted against the global budget).
    pub(crate) fn held(&self) -> usize {
        let slots: usize = self.slots.values().map(|s| s.data.len()).sum();
        let partial = match &self.reassembly {
            Some(Reassembly::Collecting { buf, .. }) => buf.len(),
            _ => 0,
        };
        slots + partial
    }

    /// Records the first appearance of `sequence` for round trips.
    pub(crate) fn note_sent(&mut self, sequence: u64, time: Duration, limit: usize) {
        if self.acked_through.is_some_and(|a| sequence <= a) {
            return;
        }
        if self.pending.len() >= limit && !self.pending.contains_key(&sequence) {
            self.pending.pop_first();
        }
        self.pending.entry(sequence).or_insert(time);
    }
}

/// Where processing a reliable packet reports to.
pub(crate) struct Sink<'a> {
    /// The sending side's counters.
    pub(crate) stats: &'a mut DirectionStats,
    /// Messages completed.
    pub(crate) messages: &'a mut Vec<MessageRecord>,
    /// Messages not listed.
    pub(crate) omitted: &'a mut u64,
    /// Remarks.
    pub(crate) notes: &'a mut Vec<String>,
    /// Bytes buffered across all sessions.
    pub(crate) budget: &'a mut usize,
    /// Out-of-order packets buffered by the sending side (all channels).
    pub(crate) stored: &'a mut usize,
    /// The limits.
    pub(crate) limits: Limits,
    /// The randomness judge of the sending side.
    pub(crate) judge: &'a mut Judge,
    /// The datagram that carried the packet being processed.
    pub(crate) carrier: Carrier,
    /// The session's first reliable message is still to come, and is sent in plaintext
    /// before RC4 switches on ([`DissectConfig::rc4_after_first_message`](crate::DissectConfig)).
    pub(crate) plain_first: &'a mut bool,
}

/// Counts a message and lists it, within the per-record limit.
pub(crate) fn report_message(
    stats: &mut DirectionStats,
    messages: &mut Vec<MessageRecord>,
    omitted: &mut u64,
    message: MessageRecord,
    max_listed: usize,
) {
    stats.messages += 1;
    stats.message_bytes += message.len as u64;
    if messages.len() < max_listed {
        messages.push(message);
    } else {
        *omitted += 1;
    }
}

/// Where an in-order packet went: its position (`whole`, `first`, `continuation`, or
/// `unplaced` after a gap) and a first fragment's announced total.
pub(crate) type Placement = (&'static str, Option<u32>);

/// Processes the in-order packet `sequence`, as `soe-reliable`'s receiver does (see the module
/// documentation for what changes after a gap).
pub(crate) fn process(
    rx: &mut ChannelRx,
    fragment: bool,
    sequence: u16,
    data: &[u8],
    sink: &mut Sink<'_>,
) -> Placement {
    rx.gap_open = false;
    if rx.adrift {
        if fragment {
            unplaced(rx, sequence, data, sink);
            return ("unplaced", None);
        }
        // A whole packet: a message boundary again.
        rx.adrift = false;
    }
    match (fragment, rx.reassembly.take()) {
        (false, None) => {
            deliver(rx, sequence, data, None, sink);
            ("whole", None)
        }
        (false, Some(partial)) => {
            interrupted(rx, sequence, partial, sink);
            deliver(rx, sequence, data, None, sink);
            ("whole", None)
        }
        (
            true,
            Some(Reassembly::Collecting {
                total,
                buf,
                carriers,
            }),
        ) => {
            collect(rx, sequence, data, (total, buf, carriers), sink);
            ("continuation", None)
        }
        (true, Some(Reassembly::Skipping { total, seen })) => {
            skip(rx, sequence, data, total, seen, sink);
            ("continuation", None)
        }
        (true, None) => first_fragment(rx, sequence, data, sink),
    }
}

/// A whole packet arrived while a fragmented message was in progress: the message is dropped.
fn interrupted(rx: &mut ChannelRx, sequence: u16, partial: Reassembly, sink: &mut Sink<'_>) {
    let (got, total) = match &partial {
        Reassembly::Collecting { total, buf, .. } => (buf.len(), *total),
        Reassembly::Skipping { total, seen } => (*seen, *total),
    };
    if let Reassembly::Collecting { buf, .. } = &partial {
        *sink.budget = sink.budget.saturating_sub(buf.len());
    }
    sink.stats.malformed += 1;
    sink.notes.push(format!(
        "channel {} sequence {sequence}: a whole packet interrupts a fragmented message \
         ({got} of {total} bytes), which is dropped (our receiver ends the session)",
        rx.channel
    ));
}

/// A continuation of a message being collected (its announced total, its bytes so far, and
/// the datagrams that carried them).
fn collect(
    rx: &mut ChannelRx,
    sequence: u16,
    data: &[u8],
    (total, mut buf, carriers): (usize, Vec<u8>, Carrier),
    sink: &mut Sink<'_>,
) {
    let carriers = carriers.and(sink.carrier);
    let received = buf.len().saturating_add(data.len());
    if received > total {
        *sink.budget = sink.budget.saturating_sub(buf.len());
        sink.stats.malformed += 1;
        sink.notes.push(format!(
            "channel {} sequence {sequence}: fragments overflow their message \
             ({received} of {total} bytes): dropped (our receiver ends the session)",
            rx.channel
        ));
        return;
    }
    if sink.budget.saturating_add(data.len()) > sink.limits.max_buffered {
        *sink.budget = sink.budget.saturating_sub(buf.len());
        skip_over_budget(rx, sequence, total, received, sink);
        return;
    }
    buf.extend_from_slice(data);
    *sink.budget += data.len();
    if received == total {
        *sink.budget = sink.budget.saturating_sub(buf.len());
        deliver(rx, sequence, &buf, Some(carriers), sink);
    } else {
        rx.reassembly = Some(Reassembly::Collecting {
            total,
            buf,
            carriers,
        });
    }
}

/// A continuation of a message being skipped (over a limit): counted up to its end.
fn skip(
    rx: &mut ChannelRx,
    sequence: u16,
    data: &[u8],
    total: usize,
    seen: usize,
    sink: &mut Sink<'_>,
) {
    let ch = rx.channel;
    let seen = seen.saturating_add(data.len());
    if seen > total {
        sink.notes.push(format!(
            "channel {ch} sequence {sequence}: fragments overflow a skipped message"
        ));
    } else if seen == total {
        sink.notes.push(format!(
            "channel {ch} sequence {sequence}: the end of a skipped message of {total} bytes"
        ));
    } else {
        rx.reassembly = Some(Reassembly::Skipping { total, seen });
    }
}

/// A first fragment: its announced length is checked, then its message collected (or, whole
/// in one fragment, delivered).
fn first_fragment(
    rx: &mut ChannelRx,
    sequence: u16,
    data: &[u8],
    sink: &mut Sink<'_>,
) -> Placement {
    let ch = rx.channel;
    let (claimed, rest) = match split_first_fragment(data) {
        Ok(split) => split,
        Err(e) => {
            sink.stats.malformed += 1;
            sink.notes.push(format!(
                "channel {ch} sequence {sequence}: {e} (our receiver ends the session)"
            ));
            return ("first", None);
        }
    };
    let total = usize::try_from(claimed).unwrap_or(usize::MAX);
    if total > sink.limits.max_message.saturating_add(1) {
        sink.stats.dropped += 1;
        sink.notes.push(format!(
            "channel {ch} sequence {sequence}: a first fragment claims {total} bytes, over \
             the {} MiB limit: the message is skipped (our receiver ends the session)",
            sink.limits.max_message >> 20
        ));
        rx.reassembly = Some(Reassembly::Skipping {
            total,
            seen: rest.len(),
        });
    } else if rest.len() > total {
        sink.stats.malformed += 1;
        sink.notes.push(format!(
            "channel {ch} sequence {sequence}: a first fragment holds {} bytes of a \
             {total}-byte message (our receiver ends the session)",
            rest.len()
        ));
    } else if rest.len() == total {
        deliver(rx, sequence, rest, Some(sink.carrier), sink);
    } else if sink.budget.saturating_add(rest.len()) > sink.limits.max_buffered {
        skip_over_budget(rx, sequence, total, rest.len(), sink);
    } else {
        *sink.budget += rest.len();
        rx.reassembly = Some(Reassembly::Collecting {
            total,
            buf: rest.to_vec(),
            carriers: sink.carrier,
        });
    }
    ("first", Some(claimed))
}

/// A fragment after a gap, before any whole packet: its place is unknown (see the module
/// documentation), so it is counted and not delivered.
fn unplaced(rx: &mut ChannelRx, sequence: u16, data: &[u8], sink: &mut Sink<'_>) {
    sink.stats.unplaced_fragments += 1;
    sink.stats.unplaced_bytes += data.len() as u64;
    sink.notes.push(format!(
        "channel {} sequence {sequence}: a fragment after a gap the capture lost: whether it \
         starts a message or continues one is unknown until a whole packet comes, so it is \
         not placed",
        rx.channel
    ));
}

/// The reassembly budget cannot take a fragmented message's next bytes: the message is skipped
/// (its remaining fragments are counted, not kept), and the record says why.
fn skip_over_budget(
    rx: &mut ChannelRx,
    sequence: u16,
    total: usize,
    seen: usize,
    sink: &mut Sink<'_>,
) {
    sink.stats.dropped += 1;
    sink.notes.push(format!(
        "channel {} sequence {sequence}: the reassembly budget ({} MiB) is spent: this message \
         is skipped",
        rx.channel,
        sink.limits.max_buffered >> 20
    ));
    rx.reassembly = Some(Reassembly::Skipping { total, seen });
}

/// Unbundles, unescapes and decrypts a complete payload, reporting its messages in order. The
/// cipher runs on across messages and payloads; ack elicitors and malformed payloads leave it
/// untouched, as in `soe-reliable`. `fragments`: the datagrams that carried a fragmented
/// payload (`None` for a whole packet).
pub(crate) fn deliver(
    rx: &mut ChannelRx,
    sequence: u16,
    payload: &[u8],
    fragments: Option<Carrier>,
    sink: &mut Sink<'_>,
) {
    let ch = rx.channel;
    if is_ack_elicitor(payload) {
        sink.notes.push(format!(
            "channel {ch} sequence {sequence}: an ack elicitor ({}), no message",
            hex::encode(payload)
        ));
        return;
    }
    if sink.judge.key_rejected {
        rx.cipher = None;
        rx.keystream_lost = false;
    }
    // An encrypting peer escapes its ciphertext, so the plaintext fallback applies only to a
    // channel without encryption (the key rejected counts as none).
    let plaintext = rx.cipher.is_none() && !rx.keystream_lost;
    match PayloadMessages::decode(payload, plaintext) {
        Ok(list) => {
            for message in list {
                deliver_one(rx, sequence, message, fragments, sink);
            }
        }
        Err(e) => {
            sink.stats.malformed += 1;
            sink.notes.push(format!(
                "channel {ch} sequence {sequence}: a malformed reliable payload: {e} \
                 (our receiver ends the session with CorruptPacket)"
            ));
        }
    }
}

/// Decrypts (when a key applies), judges and reports one message. With RC4 switched on after
/// the session's first message, that message is shown as sent and left out of the key's
/// judgement, and the keystream starts at the next one.
fn deliver_one(
    rx: &mut ChannelRx,
    sequence: u16,
    message: &[u8],
    fragments: Option<Carrier>,
    sink: &mut Sink<'_>,
) {
    let plain_first = std::mem::take(sink.plain_first);
    let mut bytes = message.to_vec();
    let decrypted = match rx.cipher.as_mut() {
        Some(cipher) if !plain_first => {
            cipher.apply(&mut bytes);
            true
        }
        _ => false,
    };
    // The plaintext first message says nothing of the key: it is judged on the rest.
    let unjudged = rx.keystream_lost || (plain_first && rx.cipher.is_some());
    if !unjudged {
        let plain = decrypted.then_some(bytes.as_slice());
        if let Some(verdict) = sink.judge.observe(message, plain) {
            sink.stats.encryption = verdict;
            if let Some(note) = verdict_note(verdict) {
                sink.notes.push(note.to_owned());
            }
        }
    }
    let max_listed = sink.limits.max_listed;
    let carriers = fragments.map_or(sink.carrier, |f| f.and(sink.carrier));
    let verdict = sink.judge.verdict();
    let encrypted = decrypted
        || rx.keystream_lost
        || (rx.cipher.is_none() && verdict == Encryption::LooksEncrypted);
    report_message(
        sink.stats,
        sink.messages,
        sink.omitted,
        MessageRecord {
            channel: rx.channel,
            kind: "reliable",
            sequence: Some(sequence),
            len: bytes.len(),
            decrypted,
            verdict,
            hex: hex::encode(&bytes),
            ascii: ascii_preview(&bytes),
            fragmented: fragments.is_some(),
            first_frame: carriers.frame,
            last_frame: sink.carrier.frame,
            compressed: carriers.compressed,
            encrypted,
            crc: carriers.crc,
        },
        max_listed,
    );
    if sink.judge.key_rejected && rx.cipher.is_some() {
        rx.cipher = None;
    }
}

/// Processes the buffered packets that continue the sequence, in order.
pub(crate) fn drain(rx: &mut ChannelRx, sink: &mut Sink<'_>) {
    while let Some(entry) = rx.slots.first_entry() {
        if *entry.key() != rx.expected {
            break;
        }
        let stored = entry.remove();
        *sink.stored = sink.stored.saturating_sub(1);
        *sink.budget = sink.budget.saturating_sub(stored.data.len());
        let sequence = rx.expected as u16;
        rx.expected += 1;
        let carrier = std::mem::replace(&mut sink.carrier, stored.carrier);
        process(rx, stored.fragment, sequence, &stored.data, sink);
        sink.carrier = carrier;
    }
}

/// Gives up the gaps that can no longer be filled: what the receiver acknowledged, and what
/// lies [`Limits::gap_window`] or more behind the newest sequence seen.
pub(crate) fn settle(rx: &mut ChannelRx, sink: &mut Sink<'_>) {
    let Some(highest) = rx.highest else {
        return;
    };
    let behind = highest
        .checked_sub(sink.limits.gap_window)
        .filter(|&s| s >= rx.expected);
    // An ack past every sequence seen (crafted, or a server acknowledging what it never got)
    // vouches only for what was sent: the rest is still to come as first transmissions.
    let acked = rx
        .acked_through
        .map(|a| a.min(highest))
        .filter(|&s| s >= rx.expected);
    match (acked, behind) {
        (Some(a), Some(b)) if a >= b => give_up(rx, a, "acknowledged", sink),
        (_, Some(b)) => give_up(rx, b, "window", sink),
        (Some(a), None) => give_up(rx, a, "acknowledged", sink),
        (None, None) => {}
    }
}

/// The capture ended: every gap is given up and the packets behind it processed; a fragmented
/// message still incomplete is counted as not reassembled.
pub(crate) fn flush(rx: &mut ChannelRx, sink: &mut Sink<'_>) {
    if let Some(highest) = rx.highest.filter(|&h| h >= rx.expected) {
        give_up(rx, highest, "capture_end", sink);
    }
    let partial = match rx.reassembly.take() {
        Some(Reassembly::Collecting { total, buf, .. }) => {
            *sink.budget = sink.budget.saturating_sub(buf.len());
            Some((buf.len(), total))
        }
        Some(Reassembly::Skipping { total, seen }) => Some((seen, total)),
        None => None,
    };
    if let Some((seen, total)) = partial {
        sink.stats.unassembled_messages += 1;
        sink.notes.push(format!(
            "channel {}: the capture ended inside a fragmented message ({seen} of {total} \
             bytes seen): it cannot be reassembled",
            rx.channel
        ));
    }
}

/// Gives up every missing sequence up to `upto` as lost to the capture, processing the
/// buffered packets between and after the gaps in order.
fn give_up(rx: &mut ChannelRx, upto: u64, why: &'static str, sink: &mut Sink<'_>) {
    while rx.expected <= upto {
        let next = rx.slots.first_key_value().map(|(&k, _)| k);
        if next == Some(rx.expected) {
            drain(rx, sink);
            continue;
        }
        let last = next.map_or(upto, |n| n.saturating_sub(1).min(upto));
        if last < rx.expected {
            // Never so: the buffer holds only sequences ahead of the expected one.
            debug_assert!(false, "a buffered packet behind the expected sequence");
            rx.slots.pop_first();
            continue;
        }
        record_gap(rx, rx.expected, last, why, sink);
        rx.expected = last + 1;
    }
    drain(rx, sink);
}

/// Records the gap `first..=last` and loses what it cut: a message in progress, the stream
/// position, and (encrypted) the keystream position. A gap right after the last one, with no
/// packet between, grows it.
fn record_gap(rx: &mut ChannelRx, first: u64, last: u64, why: &'static str, sink: &mut Sink<'_>) {
    let ch = rx.channel;
    let packets = last - first + 1;
    sink.stats.capture_lost_packets += packets;
    if rx.gap_open {
        let listed = sink.stats.gaps.iter_mut().rev().find(|g| g.channel == ch);
        if let (true, Some(gap)) = (rx.open_gap_listed, listed) {
            gap.last = last as u16;
            gap.packets += packets;
        }
        sink.notes.push(format!(
            "channel {ch} sequence {}{} also lost to the capture: the gap grows",
            first as u16,
            range_end(first, last)
        ));
        return;
    }
    let cut = match rx.reassembly.take() {
        Some(Reassembly::Collecting { total, buf, .. }) => {
            *sink.budget = sink.budget.saturating_sub(buf.len());
            Some((total, buf.len()))
        }
        Some(Reassembly::Skipping { total, seen }) => Some((total, seen)),
        None => None,
    };
    sink.stats.capture_gaps += 1;
    let reason = match why {
        "acknowledged" => "the receiver acknowledged past them",
        "window" => "they lie a window behind the newest sequence",
        _ => "the capture ended",
    };
    let mut note = format!(
        "channel {ch} sequence {}{} ({packets} packet{}) lost to the capture ({reason}): given up",
        first as u16,
        range_end(first, last),
        if packets > 1 { "s" } else { "" }
    );
    if let Some((total, seen)) = cut {
        sink.stats.unassembled_messages += 1;
        note.push_str(&format!(
            "; a fragmented message it cut ({seen} of {total} bytes seen) cannot be reassembled"
        ));
    }
    if rx.cipher.is_some() {
        rx.cipher = None;
        rx.keystream_lost = true;
        note.push_str(
            "; the RC4 keystream's position is lost with it, so later messages are shown as sent",
        );
    }
    rx.adrift = true;
    rx.gap_open = true;
    rx.open_gap_listed = sink.stats.gaps.len() < sink.limits.max_gaps_listed;
    sink.notes.push(note);
    if rx.open_gap_listed {
        sink.stats.gaps.push(CaptureGap {
            channel: ch,
            first: first as u16,
            last: last as u16,
            packets,
            why,
            cut_message_len: cut.map(|(total, _)| total),
            cut_message_seen: cut.map(|(_, seen)| seen),
        });
    }
}

/// ` to LAST` for a range of more than one sequence.
fn range_end(first: u64, last: u64) -> String {
    if last > first {
        format!(" to {}", last as u16)
    } else {
        String::new()
    }
}
