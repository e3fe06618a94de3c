//! The sending half: queue, packetizer (escape, Group, fragments), in-flight table, acks,
//! retransmission and congestion control.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use soe_crypto::Rc4;
use soe_wire::reliable::{DATA_HEADER_LEN, FIRST_FRAGMENT_EXTRA, GROUP_PREFIX, needs_escape};
use soe_wire::varint::group_len_size;

use crate::arena::{Arena, reserve};
use crate::channel::{Opcodes, earlier, put_header};
use crate::congestion::{Congestion, PathShare};
use crate::pacing::Pacer;
use crate::rtt::RttEstimator;
use crate::seq::expand;
use crate::{AckElicitor, ChannelStats, ReliableConfig, ReliableError, SendError};

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
    /// Queued as a probe: a copy goes out, but the packet was never taken out of flight.
    probe: bool,
    /// Declared lost because a packet sent after it was acknowledged (counted when resent, and
    /// used to widen the reordering allowance if the resend proves spurious).
    fast: bool,
    /// Declared lost at least once (by the packet or time threshold, or as the oldest at a
    /// retransmission timeout; a tail-loss probe's copy, and the other packets a timeout resends
    /// in case the peer lacks them, do not declare it): counted in
    /// [`ChannelStats::packets_lost`] once acknowledged, unless the resend proves spurious.
    declared_lost: bool,
    /// Selectively acknowledged. A selective ack is a hint, not a proof of delivery: it carries
    /// no proof of origin (peers send it without a CRC), so the packet stays here until a
    /// cumulative ack covers it, out of the window count and out of loss detection, and a
    /// retransmission timeout still resends it if the cumulative ack never comes.
    sacked: bool,
    /// An ack elicitor: not counted in [`Sender::bytes`].
    elicitor: bool,
}

impl InFlight {
    /// Whether the packet counts toward the congestion window: sent and neither acknowledged
    /// nor declared lost (a probe copy leaves it counted).
    fn counted(&self) -> bool {
        !self.sacked && (!self.resend_queued || self.probe)
    }

    fn encoded_len(&self) -> usize {
        DATA_HEADER_LEN
            + match self.header {
                Header::Fragment { total: Some(_) } => FIRST_FRAGMENT_EXTRA,
                _ => 0,
            }
            + usize::from(self.escape)
            + self.data.len()
    }

    #[inline(always)]
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
    /// Whether messages sent now are encrypted (the cipher's state runs on only while so).
    encrypt: bool,
    arena: Arena,
    queue: VecDeque<Bytes>,
    fragmenting: Option<Fragmenting>,
    /// The next sequence to assign.
    next: u64,
    /// The oldest unacknowledged sequence (`next` when nothing is in flight).
    base: u64,
    /// `in_flight[i]` is sequence `base + i`, kept until a cumulative ack covers it (a selective
    /// ack only marks it [`InFlight::sacked`]). The `Option` is always `Some`.
    in_flight: VecDeque<Option<InFlight>>,
    /// Packets marked [`InFlight::sacked`].
    sacked: u32,
    /// The sequence of the last ack elicitor, while it is not cumulatively acknowledged: no new
    /// data is sequenced after it until it is. A peer that stops delivering at a packet that
    /// yields no message (h1z1-server) would otherwise hold every later packet undelivered,
    /// acknowledged, until yet another packet arrived.
    elicitor_at: Option<u64>,
    /// The packet a retransmission timeout last resent besides the oldest
    /// ([`Sender::resend_second`]); the next takes the one below it.
    rto_cursor: Option<u64>,
    resend: VecDeque<u64>,
    /// Packets counted toward the congestion window ([`InFlight::counted`]).
    flight: u32,
    /// The encoded bytes of the packets in `in_flight` but ack elicitors: what
    /// `max_outstanding_bytes` caps.
    bytes: usize,
    /// The longest packet `poll_transmit` was last asked for (the room a new packet needs
    /// under `max_outstanding_bytes`).
    packet_len: usize,
    /// The highest sequence acknowledged so far.
    largest_acked: Option<u64>,
    /// The latest send time of a packet known delivered (RACK): an unacknowledged packet sent
    /// before it is a loss candidate.
    rack_sent: Option<Instant>,
    /// When the earliest loss candidate passes the time threshold.
    loss_time: Option<Instant>,
    /// The latest (re)transmission of a data packet: the probe timer runs from it.
    last_send: Option<Instant>,
    /// Probe timeouts in a row without an ack (the backoff exponent).
    pto_count: u32,
    /// New-data packets allowed past the congestion window (a probe's).
    probe_budget: u8,
    /// Resends allowed past the congestion window (a retransmission timeout's).
    resend_budget: u8,
    /// An empty Group is due in the next sequence, to elicit an ack.
    elicit: bool,
    /// When a retransmission timeout last queued the oldest packet.
    last_timeout: Option<Instant>,
    /// Extra wait before a packet is declared lost, grown when such a declaration was spurious.
    reorder_extra: Duration,
    rtt: RttEstimator,
    /// The probe timeout before backoff, as [`RttEstimator::pto`] gives it for the current
    /// estimate: computed again whenever the estimate changes, not at every deadline asked.
    base_pto: Duration,
    congestion: Congestion,
    pacer: Pacer,
    /// When the pacer next allows a packet, while it is what holds one back.
    paced_until: Option<Instant>,
    /// The hold allowed to the peer before its acks have shown it (`max_ack_delay`).
    prior_hold: Duration,
}

/// A packet with this many later sequences acknowledged is lost (RFC 9002's kPacketThreshold).
const PACKET_THRESHOLD: u64 = 3;

/// Transmissions of an unacknowledged ack elicitor before another may follow it
/// ([`Sender::may_elicit`]).
const ELICITOR_TRIES: u32 = 3;

/// Probe timeouts in a row before a retransmission timeout also resends the unacknowledged
/// packets in turn ([`Sender::resend_second`]). Earlier, that costs throughput on a lossy path
/// (each resend of a packet the peer holds takes a slot of the window).
const ROTATE_AFTER: u32 = 3;

/// Sequences a probe may go past `max_send_window` (see [`Sender::span_open`]).
const PROBE_SPAN_SLACK: u64 = 32;

/// Probe timeouts in a row, without any ack, that count as persistent congestion.
const PERSISTENT_CONGESTION: u32 = 3;

impl Sender {
    pub(crate) fn new(config: &ReliableConfig, cipher: Option<Rc4>) -> Self {
        Self {
            arena: Arena::new(),
            encrypt: cipher.is_some(),
            cipher,
            queue: VecDeque::new(),
            fragmenting: None,
            next: 0,
            base: 0,
            in_flight: VecDeque::new(),
            sacked: 0,
            elicitor_at: None,
            rto_cursor: None,
            resend: VecDeque::new(),
            flight: 0,
            bytes: 0,
            packet_len: 0,
            largest_acked: None,
            rack_sent: None,
            loss_time: None,
            last_send: None,
            pto_count: 0,
            probe_budget: 0,
            resend_budget: 0,
            elicit: false,
            reorder_extra: Duration::ZERO,
            last_timeout: None,
            rtt: RttEstimator::new(),
            base_pto: base_pto(&RttEstimator::new(), config),
            congestion: Congestion::new(config.initial_send_window, config.max_send_window),
            pacer: Pacer::new(),
            paced_until: None,
            prior_hold: config.max_ack_delay,
        }
    }

    #[inline]
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
        let message = match self.cipher.as_mut().filter(|_| self.encrypt) {
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

    /// Encrypts messages sent from now on, or stops; the keystream continues where it stopped.
    /// Returns whether the sender has a key (without one nothing changes).
    pub(crate) fn set_encryption(&mut self, on: bool) -> bool {
        if self.cipher.is_none() {
            return false;
        }
        self.encrypt = on;
        true
    }

    pub(crate) fn is_encrypting(&self) -> bool {
        self.encrypt && self.cipher.is_some()
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

    /// The round trip and how long the peer holds acks, for a window reduction. The observed
    /// ack delay is measured against the shortest round trip, so it also holds the queueing of
    /// the moment; that part (SRTT beyond the shortest round trip) is on the path, not held.
    fn path_share(&self) -> PathShare {
        let rtt = self.rtt.smoothed().unwrap_or_default();
        let queueing = rtt.saturating_sub(self.rtt.min().unwrap_or_default());
        PathShare {
            rtt,
            hold: self.rtt.ack_delay().saturating_sub(queueing),
        }
    }

    pub(crate) fn congestion_window(&self) -> u32 {
        self.congestion.window()
    }

    /// The probe timeout for the current backoff: the measured one doubled per timeout in a row,
    /// at most `max_rto`.
    #[inline]
    fn pto(&self, config: &ReliableConfig) -> Duration {
        if self.pto_count == 0 {
            return self.base_pto.min(config.max_rto);
        }
        self.base_pto
            .checked_mul(1u32 << self.pto_count.min(16))
            .unwrap_or(config.max_rto)
            .min(config.max_rto)
    }

    /// When the oldest unacknowledged packet reaches the unacknowledged limit.
    #[inline]
    pub(crate) fn give_up_deadline(&self, config: &ReliableConfig) -> Option<Instant> {
        let oldest = self.in_flight.front()?.as_ref()?;
        oldest.first_sent.checked_add(config.unacknowledged_timeout)
    }

    /// The sender's earliest timer: the loss-detection timer, the pacer's release (while it
    /// holds a packet back) and the unacknowledged limit ([`Sender::give_up_deadline`]).
    ///
    /// The loss-detection timer is the earlier of a loss candidate's time threshold and the
    /// probe timeout while packets are in flight. It never postpones the probe timeout: its
    /// delay follows the smoothed round trip, which a peer holding acks (flow control, a
    /// stalled application) can inflate to seconds, while the probe timeout is capped at
    /// `max_rto`.
    #[inline]
    pub(crate) fn deadline(&self, config: &ReliableConfig) -> Option<Instant> {
        if self.in_flight.is_empty() && self.loss_time.is_none() {
            // Nothing in flight: no probe timeout (the packets `flight` and `sacked` count are
            // in `in_flight`), no unacknowledged limit.
            return self.paced_until;
        }
        self.deadline_in_flight(config)
    }

    /// [`Sender::deadline`] while packets are in flight (or a loss timer is armed).
    #[inline]
    fn deadline_in_flight(&self, config: &ReliableConfig) -> Option<Instant> {
        let (probe, limit_later) = self.probe_deadline_and_limit(config);
        let timer = earlier(earlier(self.loss_time, probe), self.paced_until);
        if limit_later {
            timer
        } else {
            earlier(timer, self.give_up_deadline(config))
        }
    }

    /// The probe timeout while packets are in flight (or selectively acknowledged only): a
    /// probe timeout after the last send, or the oldest packet's own deadline if sooner.
    #[inline]
    fn probe_deadline(&self, config: &ReliableConfig) -> Option<Instant> {
        self.probe_deadline_and_limit(config).0
    }

    /// [`Sender::probe_deadline`], and whether the unacknowledged limit is sure to come no
    /// sooner (so that [`Sender::deadline`] need not work it out): the oldest packet, sent once,
    /// was the last send, and `max_rto` (the longest probe timeout) is within
    /// `unacknowledged_timeout`.
    #[inline]
    fn probe_deadline_and_limit(&self, config: &ReliableConfig) -> (Option<Instant>, bool) {
        if self.flight == 0 && self.sacked == 0 {
            return (None, false);
        }
        let pto = self.pto(config);
        let Some(last_send) = self.last_send else {
            return (None, false);
        };
        let after_send = last_send.checked_add(pto);
        // The oldest packet's own deadline is two probe timeouts after it went: when that was
        // the last send, it comes after the probe timeout and need not be worked out.
        if let (Some(at), Some(Some(oldest))) = (after_send, self.in_flight.front()) {
            if oldest.last_sent >= last_send {
                // Sent once, its first send is its last: the limit is at least
                // `unacknowledged_timeout` after the last send, the probe at most `max_rto`.
                let limit_later =
                    oldest.transmissions == 1 && config.max_rto <= config.unacknowledged_timeout;
                return (Some(at), limit_later);
            }
        }
        (earlier(after_send, self.oldest_deadline(pto)), false)
    }

    /// When the oldest unacknowledged packet is due for a retransmission timeout of its own:
    /// two probe timeouts after it last went. Every send restarts the probe timer, so without
    /// this a stream of selective acks (forged, or real ones behind a lost packet) that keeps
    /// other packets going would leave the oldest unsent until UnacknowledgedTimeout.
    fn oldest_deadline(&self, pto: Duration) -> Option<Instant> {
        let oldest = self.in_flight.front()?.as_ref()?;
        let due = oldest.last_sent.checked_add(pto.saturating_mul(2))?;
        // A resend the window or the pacer holds back must not leave the deadline in the past
        // (the caller would be woken at the same instant forever): a probe timeout after the
        // last timeout that queued it at the earliest.
        Some(match self.last_timeout.and_then(|t| t.checked_add(pto)) {
            Some(retry) => due.max(retry),
            None => due,
        })
    }

    /// Whether the peer's receive window (counted from the oldest unacknowledged sequence) has
    /// room for a new sequence. A probe may go [`PROBE_SPAN_SLACK`] past `max_send_window`: when
    /// the whole span may have arrived with its acks lost, only a sequence beyond it gets an ack
    /// from a peer that ignores duplicates (and `max_send_window` stays below the peers'
    /// 256-packet receive windows by more than that).
    fn span_open(&self, config: &ReliableConfig, probe: bool) -> bool {
        let limit = u64::from(config.max_send_window) + if probe { PROBE_SPAN_SLACK } else { 0 };
        self.next - self.base < limit
    }

    /// Whether `max_outstanding_bytes` leaves room for one more packet of up to `packet_len`
    /// bytes (always, when nothing is in flight).
    fn bytes_open(&self, config: &ReliableConfig, packet_len: usize) -> bool {
        self.bytes == 0 || self.bytes.saturating_add(packet_len) <= config.max_outstanding_bytes
    }

    /// The encoded bytes of the packets sequenced and not yet cumulatively acknowledged, ack
    /// elicitors aside (what `max_outstanding_bytes` caps).
    pub(crate) fn bytes_in_flight(&self) -> usize {
        self.bytes
    }

    /// Checks the running count of packets in flight against the table (debug builds only).
    fn check_flight(&self) {
        debug_assert_eq!(
            self.flight as usize,
            self.in_flight
                .iter()
                .flatten()
                .filter(|p| p.counted())
                .count(),
            "packets in flight"
        );
        debug_assert_eq!(
            self.bytes,
            self.in_flight
                .iter()
                .flatten()
                .filter(|p| !p.elicitor)
                .map(InFlight::encoded_len)
                .sum::<usize>(),
            "bytes in flight"
        );
    }

    /// Whether a message, or part of one, waits for a sequence and may have one now (not held
    /// behind an unacknowledged ack elicitor).
    fn has_new_data(&self) -> bool {
        (!self.queue.is_empty() || self.fragmenting.is_some()) && !self.behind_elicitor()
    }

    /// Whether a new ack elicitor may go out while one is unacknowledged: only when the peer
    /// almost surely holds every packet before it, so that the new one arrives in order. A
    /// second elicitor that arrived ahead of a missing packet would stay unprocessed at a peer
    /// that stops delivering at each packet yielding no message (h1z1-server), and hold back
    /// the next data packet at every later arrival.
    ///
    /// The evidence: the outstanding elicitor was sent [`ELICITOR_TRIES`] times and never drew
    /// a selective ack (a peer holding it ahead of a hole acknowledges it selectively at each
    /// arrival), or it was selectively acknowledged and every packet not selectively
    /// acknowledged was sent that many times.
    fn may_elicit(&self) -> bool {
        let Some(at) = self.elicitor_at.filter(|&e| e >= self.base) else {
            return true;
        };
        let elicitor = usize::try_from(at - self.base)
            .ok()
            .and_then(|i| self.in_flight.get(i))
            .and_then(Option::as_ref);
        match elicitor {
            None => true,
            Some(e) if !e.sacked => e.transmissions >= ELICITOR_TRIES,
            Some(_) => self
                .in_flight
                .iter()
                .flatten()
                .all(|p| p.sacked || p.transmissions >= ELICITOR_TRIES),
        }
    }

    /// Whether an ack elicitor is out and not cumulatively acknowledged.
    fn behind_elicitor(&self) -> bool {
        self.elicitor_at.is_some_and(|e| e >= self.base)
    }

    /// Whether [`Sender::poll_transmit`] may have a packet: a resend queued, a message (or the
    /// rest of one) waiting, or an ack elicitor due. An over-estimate, never short of it.
    pub(crate) fn has_pending(&self) -> bool {
        !self.resend.is_empty()
            || !self.queue.is_empty()
            || self.fragmenting.is_some()
            || self.elicit
    }

    /// What [`Sender::poll_transmit`] does when nothing is pending (no packet, and nothing the
    /// pacer holds back), without consulting the pacer.
    pub(crate) fn idle_poll(&mut self) {
        self.paced_until = None;
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
        self.packet_len = max_packet_len;
        let window = self.congestion.window();
        // Whether the pacer holds back a packet sent within the window (a timer's probes and
        // budgeted resends are not paced).
        let pace = if config.pacing {
            self.pacer.delay(now, window, self.rtt.smoothed_nanos())
        } else {
            None
        };
        self.paced_until = None;
        while let Some(&sequence) = self.resend.front() {
            let packet = sequence
                .checked_sub(self.base)
                .and_then(|index| usize::try_from(index).ok())
                .and_then(|i| self.in_flight.get_mut(i))
                .and_then(Option::as_mut)
                .filter(|p| p.resend_queued);
            let Some(packet) = packet else {
                self.resend.pop_front();
                continue;
            };
            // A resend of a lost packet enters the window again, so it waits for room, unless a
            // timer granted a probe; a tail-loss probe's copy never left it.
            if !packet.probe {
                if self.flight >= window {
                    if self.resend_budget == 0 {
                        break;
                    }
                    self.resend_budget -= 1;
                } else if pace.is_some() {
                    self.paced_until = pace;
                    return None;
                } else {
                    self.pacer.on_sent();
                }
                self.flight += 1;
            }
            self.resend.pop_front();
            packet.resend_queued = false;
            packet.probe = false;
            packet.last_sent = now;
            packet.transmissions = packet.transmissions.saturating_add(1);
            stats.packets_resent += 1;
            if packet.fast {
                stats.fast_resends += 1;
            }
            self.last_send = Some(now);
            return Some(packet.encode(sequence, ops, out));
        }

        let probing = self.elicit || self.probe_budget > 0;
        if !self.span_open(config, probing) {
            return None;
        }
        let elicitor = self.elicit.then(|| config.ack_elicitor.payload()).flatten();
        let (header, escape, data) = if let Some(payload) = elicitor {
            // New to the peer, so even a peer that never re-acknowledges a duplicate
            // acknowledges it, and everything before it.
            self.elicit = false;
            self.elicitor_at = Some(self.next);
            stats.ack_elicitors += 1;
            (Header::Whole, false, Bytes::from_static(payload))
        } else {
            if self.behind_elicitor() || !self.bytes_open(config, max_packet_len) {
                return None;
            }
            let within = self.flight < window && self.span_open(config, false);
            if !within && self.probe_budget == 0 {
                return None;
            }
            if within && pace.is_some() {
                if self.has_new_data() {
                    self.paced_until = pace;
                }
                return None;
            }
            let next = self.next_packet(max_packet_len, config.bundle_messages)?;
            if within {
                self.pacer.on_sent();
            } else {
                self.probe_budget -= 1;
            }
            next
        };
        let packet = InFlight {
            header,
            escape,
            data,
            first_sent: now,
            last_sent: now,
            transmissions: 1,
            resend_queued: false,
            probe: false,
            fast: false,
            declared_lost: false,
            sacked: false,
            elicitor: elicitor.is_some(),
        };
        if !packet.elicitor {
            self.bytes += packet.encoded_len();
        }
        let sequence = self.next;
        self.next += 1;
        stats.packets_sent += 1;
        let len = packet.encode(sequence, ops, out);
        debug_assert!(len <= max_packet_len, "{len} > {max_packet_len}");
        self.in_flight.push_back(Some(packet));
        self.flight += 1;
        self.last_send = Some(now);
        self.check_flight();
        Some(len)
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
                // Nothing else queued, nothing to bundle with (what `group_with` would find).
                if bundle && len > 0 && !self.queue.is_empty() {
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
        // The round trip comes from the packet sent last of those newly acknowledged: the ack
        // cannot have left the peer before it arrived. By Karn's rule only a packet sent once
        // gives an unambiguous sample, so when the last one sent was a resend there is none. A
        // packet sent once long ago may be covered only now because the peer held it behind a
        // hole that a resend just filled; timing the ack from its send would inflate the
        // estimate by the whole recovery (seconds), and with it the pacing interval and the
        // loss timer. The oldest unacknowledged one, if it was sent once and this is its first
        // ack, shows how long the peer held the ack back: nothing before it was missing, so
        // only the peer's ack timer (and queueing) kept it waiting.
        let mut latest: Option<(Instant, u32)> = None;
        let oldest_wait = match self.in_flight.front() {
            Some(Some(p)) if p.transmissions == 1 && !p.sacked => {
                Some((p.last_sent, now.saturating_duration_since(p.last_sent)))
            }
            _ => None,
        };
        // `last < next`, so `last + 1` cannot overflow (and a `Range` steps cheaper than a
        // `RangeInclusive`).
        for sequence in self.base..last + 1 {
            if let Some(Some(packet)) = self.in_flight.pop_front() {
                if !packet.elicitor {
                    self.bytes = self.bytes.saturating_sub(packet.encoded_len());
                }
                if packet.sacked {
                    // Counted as delivered when its selective ack came.
                    self.sacked = self.sacked.saturating_sub(1);
                    continue;
                }
                acked += 1;
                if latest.is_none_or(|(sent, _)| packet.last_sent >= sent) {
                    latest = Some((packet.last_sent, packet.transmissions));
                }
                self.on_delivered(now, sequence, &packet, stats);
            }
        }
        // Often the packet sampled is the oldest one, whose wait is already worked out.
        let sample = latest
            .and_then(|(sent, transmissions)| (transmissions == 1).then_some(sent))
            .map(|sent| match oldest_wait {
                Some((oldest, waited)) if oldest == sent => waited,
                _ => now.saturating_duration_since(sent),
            });
        self.base = last + 1;
        self.after_ack(now, last, acked, sample, true, stats);
        if let Some((_, waited)) = oldest_wait {
            self.rtt.on_ack_wait(waited, config.max_ack_delay);
        }
        self.base_pto = base_pto(&self.rtt, config);
    }

    /// Handles a selective Acknowledge: the packet counts as delivered for the window, the
    /// round trip and loss detection, but stays until a cumulative ack covers it
    /// ([`InFlight::sacked`]).
    pub(crate) fn on_ack(
        &mut self,
        now: Instant,
        sequence: u16,
        config: &ReliableConfig,
        stats: &mut ChannelStats,
    ) {
        stats.acks_received += 1;
        let found = expand(self.base, sequence)
            .filter(|s| (self.base..self.next).contains(s))
            .and_then(|s| {
                let index = usize::try_from(s - self.base).ok()?;
                let slot = self.in_flight.get_mut(index)?;
                if slot.as_ref()?.sacked {
                    return None;
                }
                Some((s, index, slot.take()?))
            });
        let Some((sequence, index, mut packet)) = found else {
            stats.acks_ignored += 1;
            return;
        };
        self.on_delivered(now, sequence, &packet, stats);
        let sample =
            (packet.transmissions == 1).then(|| now.saturating_duration_since(packet.last_sent));
        packet.sacked = true;
        packet.resend_queued = false;
        packet.probe = false;
        self.sacked += 1;
        if let Some(slot) = self.in_flight.get_mut(index) {
            *slot = Some(packet);
        }
        self.after_ack(now, sequence, 1, sample, false, stats);
        self.base_pto = base_pto(&self.rtt, config);
    }

    /// Bookkeeping for one newly acknowledged packet: the window count, the RACK send time, and
    /// the spurious-resend check (an ack sooner after the resend than any round trip seen is
    /// for the original).
    #[inline]
    fn on_delivered(
        &mut self,
        now: Instant,
        sequence: u64,
        packet: &InFlight,
        stats: &mut ChannelStats,
    ) {
        if packet.counted() {
            self.flight = self.flight.saturating_sub(1);
        }
        // A packet sent once (the usual case) is no resend, so neither lost nor spurious.
        if packet.transmissions > 1 && self.on_resend_delivered(now, sequence, packet, stats) {
            return;
        }
        self.rack_sent = Some(
            self.rack_sent
                .map_or(packet.last_sent, |t| t.max(packet.last_sent)),
        );
    }

    /// [`Sender::on_delivered`] for a packet sent more than once: counts it lost, unless the
    /// ack came sooner after the resend than any round trip seen, so it was for the original
    /// (spurious: returns true, and the packet's send time is no RACK evidence).
    #[cold]
    fn on_resend_delivered(
        &mut self,
        now: Instant,
        sequence: u64,
        packet: &InFlight,
        stats: &mut ChannelStats,
    ) -> bool {
        let spurious = self
            .rtt
            .min()
            .is_some_and(|min| now.saturating_duration_since(packet.last_sent) < min);
        if packet.declared_lost && !spurious {
            stats.packets_lost += 1;
        }
        if spurious {
            stats.spurious_resends += 1;
            self.congestion.on_spurious(sequence);
            if packet.fast {
                // Reordering, not loss: wait longer before the next such call.
                let min = self.rtt.min().unwrap_or_default();
                let cap = self.rtt.smoothed().unwrap_or_default();
                self.reorder_extra = (self.reorder_extra + min / 4).min(cap);
            }
        }
        spurious
    }

    /// Bookkeeping after `acked > 0` packets up to `highest` were newly acknowledged: the round
    /// trip (`sample`, when Karn's rule gives one), the window, and loss detection.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn after_ack(
        &mut self,
        now: Instant,
        highest: u64,
        acked: u32,
        sample: Option<Duration>,
        cumulative: bool,
        stats: &mut ChannelStats,
    ) {
        while let Some(None) = self.in_flight.front() {
            self.in_flight.pop_front();
            self.base += 1;
        }
        if acked == 0 {
            return;
        }
        if cumulative {
            // Progress: the probe timer starts over, and a pending ack elicitor is not needed.
            self.pto_count = 0;
            self.probe_budget = 0;
            self.resend_budget = 0;
            self.elicit = false;
        } else {
            // A selective ack is only a hint (anyone can forge one): it shows the path carries
            // packets, so the backoff stops growing short of persistent congestion, but it
            // never cancels the retransmission timeout that resends the oldest packet, nor the
            // resends a timeout granted. Otherwise a stream of them, forged or real, would keep
            // the oldest packet from ever going again until UnacknowledgedTimeout.
            self.pto_count = self.pto_count.min(1);
        }
        if let Some(rtt) = sample {
            self.rtt.on_sample(rtt);
        }
        let highest = self.largest_acked.map_or(highest, |h| h.max(highest));
        self.largest_acked = Some(highest);
        self.congestion.on_ack(acked, highest);
        self.detect_losses(now, stats);
        self.check_flight();
    }

    /// Declares lost every unacknowledged packet sent before a delivered one that is known to be
    /// missing at the peer and either [`PACKET_THRESHOLD`] sequences behind the highest
    /// acknowledged or out longer than the time threshold; arms the loss timer for the rest of
    /// the candidates.
    ///
    /// A peer acknowledges selectively only packets that arrive ahead of its next expected
    /// sequence, and may hold the cumulative ack of the packets before that hole for its ack
    /// delay (h1z1-server: about 24 ms). So an unacknowledged packet is known to be missing when
    /// a selectively acknowledged one precedes it or comes right after it; the unacknowledged
    /// run below the lowest selective ack may instead have arrived in order and be waiting for
    /// that delayed cumulative ack. Packets of that run are declared lost only by the time
    /// threshold plus the peer's observed ack delay, so a slow acker's in-order packets are not
    /// resent each time a later packet is lost.
    #[inline]
    fn detect_losses(&mut self, now: Instant, stats: &mut ChannelStats) {
        self.loss_time = None;
        // Often the ack took every packet in flight: answered without the call.
        if !self.in_flight.is_empty() {
            self.detect_losses_in_flight(now, stats);
        }
    }

    /// [`Sender::detect_losses`] while packets are in flight.
    fn detect_losses_in_flight(&mut self, now: Instant, stats: &mut ChannelStats) {
        let (Some(rack), Some(delay)) = (self.rack_sent, self.rtt.loss_delay(self.reorder_extra))
        else {
            return;
        };
        let held_delay = delay + self.rtt.hold_allowance(self.prior_hold);
        let largest = self.largest_acked.unwrap_or(0);
        let mut first_lost = None;
        // Whether a selectively acknowledged packet precedes the current one.
        let mut past_hole = false;
        for index in 0..self.in_flight.len() {
            let before_acked = matches!(self.in_flight.get(index + 1), Some(Some(p)) if p.sacked);
            let Some(Some(packet)) = self.in_flight.get_mut(index) else {
                continue;
            };
            if packet.sacked {
                past_hole = true;
                continue;
            }
            let sequence = self.base + index as u64;
            let sent_before = packet.last_sent < rack
                || (packet.last_sent == rack && packet.transmissions == 1 && sequence < largest);
            if packet.resend_queued || !sent_before {
                continue;
            }
            let missing = past_hole || before_acked;
            let by_count =
                missing && packet.transmissions == 1 && sequence + PACKET_THRESHOLD <= largest;
            let lost_at = packet.last_sent + if missing { delay } else { held_delay };
            if by_count || lost_at <= now {
                packet.resend_queued = true;
                packet.fast = true;
                packet.declared_lost = true;
                self.flight = self.flight.saturating_sub(1);
                self.resend.push_back(sequence);
                first_lost.get_or_insert(sequence);
            } else {
                self.loss_time = Some(self.loss_time.map_or(lost_at, |t| t.min(lost_at)));
            }
        }
        if let Some(sequence) = first_lost {
            stats.window_reductions += u64::from(self.congestion.on_loss(
                sequence,
                self.next,
                self.rtt.queueing(),
                self.path_share(),
            ));
        }
    }

    /// Runs the loss timer, the probe timer and the unacknowledged limit.
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
        if let Some(at) = self.loss_time {
            if at <= now {
                self.detect_losses(now, stats);
                return Ok(());
            }
        }
        if self.probe_deadline(config).is_none_or(|d| d > now) {
            return Ok(());
        }
        if self
            .oldest_deadline(self.pto(config))
            .is_some_and(|d| d <= now)
        {
            // The oldest packet is overdue: this expiry is a retransmission timeout.
            self.pto_count = self.pto_count.max(1);
        }
        self.on_probe_timeout(now, config, stats);
        Ok(())
    }

    /// The probe timer expired with no ack since the last transmission. The first expiry sends
    /// one probe: new data when some is queued (past the congestion window if need be), else
    /// the newest unacknowledged packet again (a tail-loss probe). A second one in a row is a
    /// retransmission timeout: the oldest unacknowledged packet is lost (once it is acknowledged,
    /// the time threshold finds the rest), and when no new data can carry an ack request, an
    /// empty Group in the next sequence asks for one: a peer that never re-acknowledges a
    /// duplicate still acknowledges a new packet, and everything before it.
    fn on_probe_timeout(
        &mut self,
        now: Instant,
        config: &ReliableConfig,
        stats: &mut ChannelStats,
    ) {
        let base_pto = self.base_pto;
        self.pto_count = self.pto_count.saturating_add(1);
        stats.probes += 1;
        // The timer restarts from its expiry (backed off), whatever this expiry manages to
        // send: a probe or resend the pacer holds back, or none at all, must not leave the
        // deadline in the past, or the caller is woken at the same instant forever.
        self.last_send = Some(now);
        let new_data = self.has_new_data()
            && self.span_open(config, true)
            && self.bytes_open(config, self.packet_len);
        let mut resends = u8::from(self.pto_count >= 2);
        if self.pto_count >= 2 {
            let base = self.base;
            let mut resent_oldest = false;
            if let Some(Some(oldest)) = self.in_flight.front_mut() {
                if oldest.resend_queued && !oldest.probe && !oldest.sacked {
                    // Already declared lost, and held back by the window or the pacer: this
                    // timeout puts it first in line and restarts its deadline. Left as it was,
                    // the deadline would stay in the past (nothing sent moves it), and the
                    // caller would be woken at the same instant forever (soe-sim seeds 651
                    // and 869: stuck).
                    if self.resend.front() != Some(&base) {
                        self.resend.retain(|&s| s != base);
                        self.resend.push_front(base);
                    }
                    resent_oldest = true;
                    self.last_timeout = Some(now);
                } else if (oldest.counted() || oldest.sacked)
                    && now.saturating_duration_since(oldest.last_sent) >= base_pto
                {
                    if oldest.sacked {
                        oldest.sacked = false;
                        self.sacked = self.sacked.saturating_sub(1);
                    } else {
                        self.flight = self.flight.saturating_sub(1);
                    }
                    resent_oldest = true;
                    self.last_timeout = Some(now);
                    // Resent first: the peer cannot deliver anything past it.
                    if oldest.resend_queued {
                        self.resend.retain(|&s| s != base);
                    }
                    self.resend.push_front(base);
                    oldest.resend_queued = true;
                    oldest.probe = false;
                    oldest.fast = false;
                    oldest.declared_lost = true;
                    stats.timeouts += 1;
                    if self.pto_count >= PERSISTENT_CONGESTION {
                        self.congestion.on_persistent_congestion(self.next);
                    } else {
                        stats.window_reductions += u64::from(self.congestion.on_loss(
                            base,
                            self.next,
                            self.rtt.queueing(),
                            self.path_share(),
                        ));
                    }
                }
            }
            // The oldest packet may have arrived with its ack lost, and a peer that never
            // re-acknowledges a duplicate (h1z1-server) then ignores its resend. The newest
            // unacknowledged packet goes again too: if the peer lacks it, its arrival draws a
            // fresh cumulative ack (or a selective one, which shows what else is missing).
            if resent_oldest {
                if self.resend_second(now, base_pto) {
                    resends += 1;
                }
                if self.resend_newest(now, base_pto) {
                    resends += 1;
                }
            }
            // Never between two fragments of one message (the peer would take the elicitor
            // as a whole packet inside the message), which only `max_outstanding_bytes` can
            // hold back.
            if !new_data
                && self.fragmenting.is_none()
                && config.ack_elicitor != AckElicitor::Off
                && self.span_open(config, true)
                && self.may_elicit()
            {
                self.elicit = true;
            }
        } else if !new_data {
            // A tail-loss probe: the newest unacknowledged packet once more.
            let newest = self
                .in_flight
                .iter_mut()
                .enumerate()
                .rev()
                .find_map(|(i, slot)| Some((i, slot.as_mut().filter(|p| !p.sacked)?)));
            if let Some((index, packet)) = newest {
                if !packet.resend_queued {
                    packet.resend_queued = true;
                    packet.probe = true;
                    packet.fast = false;
                    self.resend.push_back(self.base + index as u64);
                }
            }
        }
        // Packets the timer lets past the congestion window: one probe with new data, and at a
        // retransmission timeout the oldest packet's resend. Kept apart, so queued resends of
        // packets the peer may already hold cannot use up the new data's turn.
        self.probe_budget = u8::from(new_data);
        self.resend_budget = resends;
        self.check_flight();
    }

    /// At a retransmission timeout, queues the newest unacknowledged packet still counted in
    /// flight (the tail: if the peer lacks it, its arrival draws an ack at once) right behind
    /// the oldest's resend. Returns whether there was one.
    fn resend_newest(&mut self, now: Instant, pto: Duration) -> bool {
        let newest = (1..self.in_flight.len())
            .rev()
            .find(|&i| self.timer_resendable(i, now, pto));
        newest.is_some_and(|index| self.queue_behind_oldest(index))
    }

    /// Whether `in_flight[index]` is still counted in flight and was last sent `pto` ago: one
    /// a retransmission timeout may resend besides the oldest.
    fn timer_resendable(&self, index: usize, now: Instant, pto: Duration) -> bool {
        matches!(self.in_flight.get(index), Some(Some(p))
            if p.counted() && now.saturating_duration_since(p.last_sent) >= pto)
    }

    /// Declares `in_flight[index]` lost and queues its resend right behind the oldest's.
    /// Returns whether there was such a packet.
    fn queue_behind_oldest(&mut self, index: usize) -> bool {
        let Some(Some(packet)) = self.in_flight.get_mut(index) else {
            return false;
        };
        packet.resend_queued = true;
        packet.probe = false;
        packet.fast = false;
        // Resent in case, not known missing: the peer may hold it (not counted as lost).
        self.flight = self.flight.saturating_sub(1);
        let at = usize::from(!self.resend.is_empty());
        self.resend.insert(at, self.base + index as u64);
        true
    }

    /// At a retransmission timeout, sends one more packet right behind the oldest's resend.
    /// Returns whether there was one.
    ///
    /// The oldest may have arrived with its ack lost, and a peer that never re-acknowledges a
    /// duplicate (h1z1-server) ignores its resend; only a packet it lacks draws a fresh
    /// cumulative ack (or, ahead of a hole, a selective one that shows the hole). So the second
    /// resend is a packet already declared lost, if any waits (the window may never reopen for
    /// it, with the acks of what the peer holds lost); otherwise, from the [`ROTATE_AFTER`]th
    /// timeout in a row, the timeouts take the other unacknowledged packets in turn, from the
    /// newest down, so that each is tried.
    fn resend_second(&mut self, now: Instant, pto: Duration) -> bool {
        if let Some(i) = self.resend.iter().position(|&s| s != self.base) {
            if let Some(sequence) = self.resend.remove(i) {
                let at = usize::from(!self.resend.is_empty());
                self.resend.insert(at, sequence);
                return true;
            }
        }
        if self.pto_count < ROTATE_AFTER {
            return false;
        }
        let base = self.base;
        let below = self
            .rto_cursor
            .filter(|&c| c > base)
            .and_then(|c| usize::try_from(c - base).ok())
            .unwrap_or(0);
        let len = self.in_flight.len();
        let index = (1..below.min(len))
            .rev()
            .find(|&i| self.timer_resendable(i, now, pto))
            .or_else(|| (1..len).rev().find(|&i| self.timer_resendable(i, now, pto)));
        let Some(index) = index else {
            return false;
        };
        self.rto_cursor = Some(base + index as u64);
        self.queue_behind_oldest(index)
    }
}

/// The probe timeout before backoff for `rtt`'s estimate (see [`RttEstimator::pto`]).
#[inline]
fn base_pto(rtt: &RttEstimator, config: &ReliableConfig) -> Duration {
    rtt.pto(
        config.initial_rto,
        config.min_rto,
        config.max_rto,
        config.max_ack_delay,
    )
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
