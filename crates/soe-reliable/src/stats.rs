//! Counters a channel keeps.

/// Counters of one channel, both directions. Packets are data packets (whole or fragment); acks
/// are counted apart.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChannelStats {
    /// Data packets sent for the first time (sequences used).
    pub packets_sent: u64,
    /// Data packets sent again (timeout or gap reported by a selective ack).
    pub packets_resent: u64,
    /// Of those, resends caused by a selective ack showing a gap.
    pub fast_resends: u64,
    /// Retransmission timer expiries that resent at least one packet.
    pub timeouts: u64,
    /// Data packets accepted (in order, or stored ahead of the window).
    pub packets_received: u64,
    /// Data packets received again (already delivered or already stored).
    pub duplicates: u64,
    /// Data packets that arrived ahead of the next expected one and were stored.
    pub out_of_order: u64,
    /// Data packets dropped unstored: beyond the receive window, or in order while the
    /// application had not taken delivered messages.
    pub dropped: u64,
    /// Acknowledge and AcknowledgeAll packets sent.
    pub acks_sent: u64,
    /// Acknowledge and AcknowledgeAll packets received.
    pub acks_received: u64,
    /// Received acks that acknowledged nothing new (stale, duplicate, or for unsent sequences).
    pub acks_ignored: u64,
    /// Application messages accepted by `send`.
    pub messages_sent: u64,
    /// Application messages delivered to `poll_message`'s queue.
    pub messages_delivered: u64,
    /// Application bytes accepted by `send`.
    pub bytes_sent: u64,
    /// Application bytes delivered.
    pub bytes_delivered: u64,
}
