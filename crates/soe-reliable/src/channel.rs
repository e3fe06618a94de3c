//! One reliable channel, both directions.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use soe_wire::Channel;

use crate::{ChannelStats, ReliableConfig, ReliableError, RttEstimate, SendError};

/// The smallest `max_packet_len` a channel accepts: a fragment header (opcode, sequence, total
/// length) and a few data bytes.
pub const MIN_PACKET_LEN: usize = 16;

/// One reliable channel (0 to 3) of a session: the sending and the receiving half.
///
/// See the [crate documentation](crate) for the driving order. With an RC4 key, each direction
/// runs its own cipher state started from that key (games use channel 0 only, so in practice this
/// is the session's one state per direction).
#[derive(Debug)]
pub struct ReliableChannel {
    channel: Channel,
    config: Arc<ReliableConfig>,
    max_packet_len: usize,
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
        todo!()
    }

    /// The channel number.
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
        todo!()
    }

    /// Queues one application message. With an RC4 key it is encrypted now (one copy); without,
    /// the `Bytes` is kept as it is until it is written into a packet.
    pub fn send(&mut self, message: Bytes) -> Result<(), SendError> {
        todo!()
    }

    /// Messages queued and not yet fully sequenced (a message being fragmented counts).
    pub fn queued(&self) -> usize {
        todo!()
    }

    /// How many more messages [`ReliableChannel::send`] takes now.
    pub fn capacity(&self) -> usize {
        todo!()
    }

    /// Stops taking messages; queued ones are still sent. [`ReliableChannel::is_flushed`] tells
    /// when they are all acknowledged.
    pub fn close(&mut self) {
        todo!()
    }

    /// The next received message, in order; each is delivered exactly once.
    pub fn poll_message(&mut self) -> Option<Bytes> {
        todo!()
    }

    /// Handles a ReliableData packet's `sequence` and data.
    pub fn handle_data(
        &mut self,
        now: Instant,
        sequence: u16,
        data: &[u8],
    ) -> Result<(), ReliableError> {
        todo!()
    }

    /// Handles a ReliableDataFragment packet's `sequence` and data (the first fragment's data
    /// starts with the u32 total length).
    pub fn handle_fragment(
        &mut self,
        now: Instant,
        sequence: u16,
        data: &[u8],
    ) -> Result<(), ReliableError> {
        todo!()
    }

    /// Handles a selective Acknowledge. Acks for sequences never sent, or already acknowledged,
    /// are ignored.
    pub fn handle_ack(&mut self, now: Instant, sequence: u16) {
        todo!()
    }

    /// Handles an AcknowledgeAll: everything up to and including `sequence`. Stale acks and acks
    /// for sequences never sent are ignored.
    pub fn handle_ack_all(&mut self, now: Instant, sequence: u16) {
        todo!()
    }

    /// Appends one encoded packet (`opcode | body`, no framing, at most `max_packet_len` bytes) to
    /// `out` and returns its length, or `None` when nothing is to be sent now. Order: a due
    /// AcknowledgeAll, selective Acknowledges, retransmissions, then new data within the
    /// congestion window.
    pub fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> Option<usize> {
        todo!()
    }

    /// The earliest timer: delayed cumulative ack, retransmission, or the unacknowledged limit.
    pub fn poll_timeout(&self) -> Option<Instant> {
        todo!()
    }

    /// Runs the timers due at `now`; an early call does nothing. Fails with
    /// [`ReliableError::UnacknowledgedTimeout`] when a packet has waited past
    /// `unacknowledged_timeout`.
    pub fn handle_timeout(&mut self, now: Instant) -> Result<(), ReliableError> {
        todo!()
    }

    /// Whether nothing is queued and nothing is in flight (for a graceful close).
    pub fn is_flushed(&self) -> bool {
        todo!()
    }

    /// The round-trip estimate, once an ack has given a sample.
    pub fn rtt(&self) -> Option<RttEstimate> {
        todo!()
    }

    /// The congestion window: packets allowed in flight now.
    pub fn congestion_window(&self) -> u32 {
        todo!()
    }

    /// Counters.
    pub fn stats(&self) -> &ChannelStats {
        &self.stats
    }
}
