//! One reliable channel, both directions.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use soe_crypto::Rc4;
use soe_wire::reliable::{DATA_HEADER_LEN, FIRST_FRAGMENT_EXTRA};
use soe_wire::{Channel, OpCode};

use crate::recv::{Kind, ReceiveBacklog, Receiver};
use crate::send::Sender;
use crate::{ChannelStats, ReliableConfig, ReliableError, RttEstimate, SendError};

/// The smallest `max_packet_len` a channel accepts: a first-fragment header (opcode, sequence,
/// total length) and a few data bytes.
pub const MIN_PACKET_LEN: usize = DATA_HEADER_LEN + FIRST_FRAGMENT_EXTRA + 8;

/// The wire opcodes of one channel.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Opcodes {
    pub(crate) data: u16,
    pub(crate) fragment: u16,
    pub(crate) ack: u16,
    pub(crate) ack_all: u16,
}

/// The earlier of two optional deadlines.
#[inline]
pub(crate) fn earlier(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Appends `opcode | u16 sequence` (the sequence truncated to its wire width).
#[inline]
pub(crate) fn put_header(out: &mut Vec<u8>, opcode: u16, sequence: u64) {
    let [op_hi, op_lo] = opcode.to_be_bytes();
    let [seq_hi, seq_lo] = (sequence as u16).to_be_bytes();
    // One append of four bytes: one capacity check.
    out.extend_from_slice(&[op_hi, op_lo, seq_hi, seq_lo]);
}

/// One reliable channel (0 to 3) of a session: the sending and the receiving half.
///
/// See the [crate documentation](crate) for the driving order. With an RC4 key, each direction
/// runs its own cipher state started from that key (games use channel 0 only, so in practice this
/// is the session's one state per direction).
///
/// Memory is bounded by the configuration: the send queue by `max_queued_messages` (plus the
/// packets in flight, at most `max_send_window`), out-of-order storage by `receive_window`
/// packets (the expected packet, when held for lack of room, included), reassembly by
/// `max_message_size`, and undelivered messages by `max_queued_messages` and `max_message_size`
/// exactly (an empty queue takes any one packet, which may exceed them).
#[derive(Debug)]
pub struct ReliableChannel {
    channel: Channel,
    ops: Opcodes,
    config: Arc<ReliableConfig>,
    max_packet_len: usize,
    closed: bool,
    tx: Sender,
    rx: Receiver,
    stats: ChannelStats,
}

impl ReliableChannel {
    /// A channel whose packets (`opcode | body`, framing excluded) stay within `max_packet_len`
    /// bytes: the peer's `udp_length` minus the framing (compression flag, CRC, any MultiPacket
    /// overhead the session adds). `cipher` is the RC4 key, when the application protocol
    /// encrypts. Fails on an invalid `config`, a `max_packet_len` below [`MIN_PACKET_LEN`], or a
    /// rejected key.
    pub fn new(
        channel: Channel,
        config: Arc<ReliableConfig>,
        max_packet_len: usize,
        cipher: Option<&[u8]>,
    ) -> Result<Self, ReliableError> {
        config.validate()?;
        if max_packet_len < MIN_PACKET_LEN {
            return Err(ReliableError::PacketTooSmall {
                len: max_packet_len,
                min: MIN_PACKET_LEN,
            });
        }
        let (tx_cipher, rx_cipher) = match cipher {
            Some(key) => {
                let rc4 = Rc4::new(key)?;
                (Some(rc4.clone()), Some(rc4))
            }
            None => (None, None),
        };
        Ok(Self {
            channel,
            ops: Opcodes {
                data: OpCode::ReliableData(channel).to_u16(),
                fragment: OpCode::ReliableDataFragment(channel).to_u16(),
                ack: OpCode::Acknowledge(channel).to_u16(),
                ack_all: OpCode::AcknowledgeAll(channel).to_u16(),
            },
            tx: Sender::new(&config, tx_cipher),
            rx: Receiver::new(rx_cipher),
            config,
            max_packet_len,
            closed: false,
            stats: ChannelStats::default(),
        })
    }

    /// The channel number.
    #[inline]
    pub fn channel(&self) -> Channel {
        self.channel
    }

    /// The largest packet this channel emits.
    pub fn max_packet_len(&self) -> usize {
        self.max_packet_len
    }

    /// Changes the largest packet; applies to packets not yet sequenced (retransmissions keep
    /// their size). Values below [`MIN_PACKET_LEN`] are raised to it.
    pub fn set_max_packet_len(&mut self, len: usize) {
        self.max_packet_len = len.max(MIN_PACKET_LEN);
    }

    /// Queues one application message. With an RC4 key it is encrypted now (one copy); without,
    /// the `Bytes` is kept as it is until it is written into a packet.
    #[inline]
    pub fn send(&mut self, message: Bytes) -> Result<(), SendError> {
        if self.closed {
            return Err(SendError::Closed);
        }
        self.tx.send(message, &self.config, &mut self.stats)
    }

    /// Messages queued and not yet fully sequenced (a message being fragmented counts).
    pub fn queued(&self) -> usize {
        self.tx.queued()
    }

    /// How many more messages [`ReliableChannel::send`] takes now.
    pub fn capacity(&self) -> usize {
        self.config
            .max_queued_messages
            .saturating_sub(self.tx.queued())
    }

    /// Stops taking messages; queued ones are still sent. [`ReliableChannel::is_flushed`] tells
    /// when they are all acknowledged.
    pub fn close(&mut self) {
        self.closed = true;
    }

    /// Whether [`ReliableChannel::poll_message`] has a message.
    #[inline]
    pub fn has_message(&self) -> bool {
        self.rx.has_message()
    }

    /// The next received message, in order; each is delivered exactly once.
    #[inline]
    pub fn poll_message(&mut self) -> Option<Bytes> {
        self.rx.poll_message()
    }

    /// Handles a ReliableData packet's `sequence` and data.
    #[inline]
    pub fn handle_data(
        &mut self,
        now: Instant,
        sequence: u16,
        data: &[u8],
    ) -> Result<(), ReliableError> {
        self.rx.on_packet(
            now,
            Kind::Whole,
            sequence,
            data,
            &self.config,
            &mut self.stats,
        )
    }

    /// Handles a ReliableDataFragment packet's `sequence` and data (the first fragment's data
    /// starts with the u32 total length).
    pub fn handle_fragment(
        &mut self,
        now: Instant,
        sequence: u16,
        data: &[u8],
    ) -> Result<(), ReliableError> {
        self.rx.on_packet(
            now,
            Kind::Fragment,
            sequence,
            data,
            &self.config,
            &mut self.stats,
        )
    }

    /// Handles a selective Acknowledge. Acks for sequences never sent, or already acknowledged,
    /// are ignored.
    pub fn handle_ack(&mut self, now: Instant, sequence: u16) {
        self.tx.on_ack(now, sequence, &self.config, &mut self.stats);
    }

    /// Handles an AcknowledgeAll: everything up to and including `sequence`. Stale acks and acks
    /// for sequences never sent are ignored.
    #[inline]
    pub fn handle_ack_all(&mut self, now: Instant, sequence: u16) {
        self.tx
            .on_ack_all(now, sequence, &self.config, &mut self.stats);
    }

    /// Appends one encoded packet (`opcode | body`, no framing, at most `max_packet_len` bytes) to
    /// `out` and returns its length, or `None` when nothing is to be sent now. Order: a due
    /// AcknowledgeAll, selective Acknowledges, retransmissions, then new data within the
    /// congestion window. Once data has gone out, a delayed AcknowledgeAll is due at once, so
    /// the next call returns it to travel in the same datagram (piggybacked).
    #[inline]
    pub fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> Option<usize> {
        if let Some(len) = self.rx.poll_ack(now, out, &self.ops, &mut self.stats) {
            return Some(len);
        }
        if !self.tx.has_pending() {
            // Nothing to send: the answer without the packetizer's and the pacer's work.
            self.tx.idle_poll();
            return None;
        }
        let len = self.tx.poll_transmit(
            now,
            out,
            self.max_packet_len,
            &self.config,
            &self.ops,
            &mut self.stats,
        )?;
        // A delayed ack goes out with this data (the next call returns it) rather than alone later.
        self.rx.hasten_ack(now);
        Some(len)
    }

    /// Whether [`ReliableChannel::poll_transmit`] may have a packet now or later without any
    /// other call in between: an ack owed, a resend or a message waiting. An over-estimate
    /// (an ack not yet due, a window that is full), never short of it.
    #[inline]
    pub fn has_pending(&self) -> bool {
        self.rx.owes_ack() || self.tx.has_pending()
    }

    /// The earliest timer: delayed cumulative ack, delivery of a packet held for lack of room
    /// (due once the application has taken enough messages), loss detection (a loss candidate's time
    /// threshold, or the probe timeout), the pacer releasing a held-back packet, or the
    /// unacknowledged limit.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let rx = earlier(
            self.rx.ack_deadline(),
            self.rx.resume_deadline(&self.config),
        );
        earlier(rx, self.tx.deadline(&self.config))
    }

    /// Runs the timers due at `now`; an early call does nothing. Fails with
    /// [`ReliableError::UnacknowledgedTimeout`] when a packet has waited past
    /// `unacknowledged_timeout`.
    pub fn handle_timeout(&mut self, now: Instant) -> Result<(), ReliableError> {
        self.rx.resume(now, &self.config, &mut self.stats)?;
        self.tx.on_timeout(now, &self.config, &mut self.stats)
    }

    /// Whether nothing is queued and nothing is in flight (for a graceful close).
    pub fn is_flushed(&self) -> bool {
        self.tx.is_flushed()
    }

    /// The round-trip estimate, once an ack has given a sample.
    pub fn rtt(&self) -> Option<RttEstimate> {
        self.tx.rtt().estimate()
    }

    /// The congestion window: packets allowed in flight now.
    pub fn congestion_window(&self) -> u32 {
        self.tx.congestion_window()
    }

    /// The bytes sequenced and not yet cumulatively acknowledged, ack elicitors aside: what
    /// [`ReliableConfig::max_outstanding_bytes`](crate::ReliableConfig::max_outstanding_bytes)
    /// caps.
    pub fn bytes_in_flight(&self) -> usize {
        self.tx.bytes_in_flight()
    }

    /// Turns RC4 on or off for both directions of a channel created with a key, as h1z1-server's
    /// `setEncryption` does for a session: messages sent from now on are encrypted (or not),
    /// and so are messages completed from now on. Each direction's keystream runs only while
    /// encryption is on, so a channel that starts in plaintext and switches on encrypts its
    /// first message with the keystream's first bytes, as h1z1-server and the game client
    /// expect; switching off and on again continues the keystream. Messages already queued or
    /// already received keep the state they had. Returns `false` (and changes nothing) when the
    /// channel has no key.
    pub fn set_encryption(&mut self, on: bool) -> bool {
        self.tx.set_encryption(on) && self.rx.set_decryption(on)
    }

    /// Whether messages sent now are encrypted.
    pub fn is_encrypting(&self) -> bool {
        self.tx.is_encrypting()
    }

    /// What the receiving side holds now: early packets, a partial message, undelivered
    /// messages.
    pub fn receive_backlog(&self) -> ReceiveBacklog {
        self.rx.backlog()
    }

    /// Counters.
    pub fn stats(&self) -> &ChannelStats {
        &self.stats
    }
}
