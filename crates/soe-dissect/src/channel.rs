//! Channel reassembly: the in-order receiver one direction and channel of a session is
//! emulated with, as `soe-reliable`'s receiver works.

use std::collections::BTreeMap;
use std::time::Duration;

use soe_crypto::Rc4;
use soe_wire::PayloadMessages;
use soe_wire::payload::is_ack_elicitor;
use soe_wire::reliable::split_first_fragment;

use crate::config::{ASCII_PREVIEW, Limits};
use crate::records::{DirectionStats, Encryption, MessageRecord};

/// A packet buffered ahead of a gap.
pub(crate) struct Stored {
    /// Whether it is a ReliableDataFragment.
    pub(crate) fragment: bool,
    /// Its data after the sequence.
    pub(crate) data: Vec<u8>,
}

/// A fragmented message in progress.
pub(crate) enum Reassembly {
    /// Collecting its bytes.
    Collecting {
        /// The message length the first fragment announced.
        total: usize,
        /// The bytes so far.
        buf: Vec<u8>,
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
    /// The limits.
    pub(crate) limits: Limits,
    /// The randomness judge of the sending side.
    pub(crate) judge: &'a mut Judge,
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

/// Processes the in-order packet `sequence`, as `soe-reliable`'s receiver does; returns the
/// packet's position (whole, first, continuation) and a first fragment's total.
pub(crate) fn process(
    rx: &mut ChannelRx,
    fragment: bool,
    sequence: u16,
    data: &[u8],
    sink: &mut Sink<'_>,
) -> (&'static str, Option<u32>) {
    let ch = rx.channel;
    match (fragment, rx.reassembly.take()) {
        (false, None) => {
            deliver(rx, sequence, data, sink);
            ("whole", None)
        }
        (false, Some(partial)) => {
            let (got, total) = match &partial {
                Reassembly::Collecting { total, buf } => (buf.len(), *total),
                Reassembly::Skipping { total, seen } => (*seen, *total),
            };
            if let Reassembly::Collecting { buf, .. } = &partial {
                *sink.budget = sink.budget.saturating_sub(buf.len());
            }
            sink.stats.malformed += 1;
            sink.notes.push(format!(
                "channel {ch} sequence {sequence}: a whole packet interrupts a fragmented message \
                 ({got} of {total} bytes), which is dropped (our receiver ends the session)"
            ));
            deliver(rx, sequence, data, sink);
            ("whole", None)
        }
        (true, Some(Reassembly::Collecting { total, mut buf })) => {
            let received = buf.len().saturating_add(data.len());
            if received > total {
                *sink.budget = sink.budget.saturating_sub(buf.len());
                sink.stats.malformed += 1;
                sink.notes.push(format!(
                    "channel {ch} sequence {sequence}: fragments overflow their message \
                     ({received} of {total} bytes): dropped (our receiver ends the session)"
                ));
                return ("continuation", None);
            }
            if sink.budget.saturating_add(data.len()) > sink.limits.max_buffered {
                *sink.budget = sink.budget.saturating_sub(buf.len());
                skip_over_budget(rx, sequence, total, received, sink);
                return ("continuation", None);
            }
            buf.extend_from_slice(data);
            *sink.budget += data.len();
            if received == total {
                *sink.budget = sink.budget.saturating_sub(buf.len());
                deliver(rx, sequence, &buf, sink);
            } else {
                rx.reassembly = Some(Reassembly::Collecting { total, buf });
            }
            ("continuation", None)
        }
        (true, Some(Reassembly::Skipping { total, seen })) => {
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
            ("continuation", None)
        }
        (true, None) => {
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
                return ("first", Some(claimed));
            }
            if rest.len() > total {
                sink.stats.malformed += 1;
                sink.notes.push(format!(
                    "channel {ch} sequence {sequence}: a first fragment holds {} bytes of a \
                     {total}-byte message (our receiver ends the session)",
                    rest.len()
                ));
                return ("first", Some(claimed));
            }
            if rest.len() == total {
                deliver(rx, sequence, rest, sink);
                return ("first", Some(claimed));
            }
            if sink.budget.saturating_add(rest.len()) > sink.limits.max_buffered {
                skip_over_budget(rx, sequence, total, rest.len(), sink);
                return ("first", Some(claimed));
            }
            *sink.budget += rest.len();
            rx.reassembly = Some(Reassembly::Collecting {
                total,
                buf: rest.to_vec(),
            });
            ("first", Some(claimed))
        }
    }
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
/// untouched, as in `soe-reliable`.
pub(crate) fn deliver(rx: &mut ChannelRx, sequence: u16, payload: &[u8], sink: &mut Sink<'_>) {
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
    }
    let plaintext = rx.cipher.is_none();
    match PayloadMessages::decode(payload, plaintext) {
        Ok(list) => {
            for message in list {
                let mut bytes = message.to_vec();
                if let Some(cipher) = rx.cipher.as_mut() {
                    cipher.apply(&mut bytes);
                }
                let decrypted = (!plaintext).then_some(bytes.as_slice());
                if let Some(verdict) = sink.judge.observe(message, decrypted) {
                    sink.stats.encryption = verdict;
                    if let Some(note) = verdict_note(verdict) {
                        sink.notes.push(note.to_owned());
                    }
                }
                let max_listed = sink.limits.max_listed;
                report_message(
                    sink.stats,
                    sink.messages,
                    sink.omitted,
                    MessageRecord {
                        channel: ch,
                        kind: "reliable",
                        sequence: Some(sequence),
                        len: bytes.len(),
                        decrypted: !plaintext,
                        hex: hex::encode(&bytes),
                        ascii: ascii_preview(&bytes),
                    },
                    max_listed,
                );
                if sink.judge.key_rejected && rx.cipher.is_some() {
                    rx.cipher = None;
                }
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

/// Message bytes judged before a verdict is given.
const JUDGE_MIN: usize = 256;
/// Message bytes judged at most; the verdict is final then.
const JUDGE_MAX: usize = 4096;

/// A count of byte values.
#[derive(Clone)]
struct Histogram {
    /// Occurrences of each byte value.
    counts: [u32; 256],
    /// Bytes counted.
    total: usize,
}

impl Default for Histogram {
    fn default() -> Self {
        Self {
            counts: [0; 256],
            total: 0,
        }
    }
}

impl Histogram {
    /// Counts the bytes of `data`, up to [`JUDGE_MAX`] in all.
    fn add(&mut self, data: &[u8]) {
        let room = JUDGE_MAX.saturating_sub(self.total);
        for &b in data.iter().take(room) {
            self.counts[usize::from(b)] += 1;
        }
        self.total += data.len().min(room);
    }

    /// Whether the bytes look uniformly random: a chi-square test against the uniform
    /// distribution (255 degrees of freedom), at six standard deviations (about 390). Text and
    /// game structures score in the thousands; RC4 output about 255.
    fn looks_random(&self) -> bool {
        if self.total == 0 {
            return false;
        }
        let expected = self.total as f64 / 256.0;
        let chi2: f64 = self
            .counts
            .iter()
            .map(|&c| {
                let d = f64::from(c) - expected;
                d * d / expected
            })
            .sum();
        chi2 < 255.0 + 6.0 * (2.0f64 * 255.0).sqrt()
    }
}

/// Judges whether one direction's reliable data is encrypted, and whether a key fits it, from
/// the randomness of the bytes sent and of the bytes decrypted.
#[derive(Default)]
pub(crate) struct Judge {
    /// The bytes as sent.
    sent: Histogram,
    /// The bytes after decryption (when a key applies).
    decrypted: Histogram,
    /// The verdict so far.
    verdict: Encryption,
    /// Whether the verdict is final.
    done: bool,
    /// The key was judged not to fit: this direction's channels stop decrypting.
    pub(crate) key_rejected: bool,
}

impl Judge {
    /// Adds a message; returns the verdict when it changes.
    pub(crate) fn observe(&mut self, sent: &[u8], decrypted: Option<&[u8]>) -> Option<Encryption> {
        if self.done {
            return None;
        }
        self.sent.add(sent);
        if let Some(d) = decrypted {
            self.decrypted.add(d);
        }
        if self.sent.total < JUDGE_MIN {
            return None;
        }
        let sent_random = self.sent.looks_random();
        let verdict = match decrypted {
            None if sent_random => Encryption::LooksEncrypted,
            None => Encryption::Plaintext,
            Some(_) => match (sent_random, self.decrypted.looks_random()) {
                (true, false) => Encryption::Decrypted,
                (false, true) => Encryption::KeyDoesNotFit,
                _ => Encryption::Unknown,
            },
        };
        if verdict == Encryption::KeyDoesNotFit {
            self.key_rejected = true;
            self.done = true;
        }
        if self.sent.total >= JUDGE_MAX {
            self.done = true;
        }
        (verdict != self.verdict).then(|| {
            self.verdict = verdict;
            verdict
        })
    }
}

/// The note a datagram carries when a direction's verdict becomes `verdict`.
fn verdict_note(verdict: Encryption) -> Option<&'static str> {
    match verdict {
        Encryption::LooksEncrypted => Some(
            "this direction's reliable data looks encrypted (its bytes are uniformly random): \
             give its RC4 key to decrypt it",
        ),
        Encryption::KeyDoesNotFit => Some(
            "the RC4 key does not fit this direction: the bytes sent are not random, the \
             decrypted ones are, so the data is plaintext; its messages are shown as sent from \
             here on",
        ),
        _ => None,
    }
}
