//! Counters a channel keeps.

/// Counters of one channel, both directions. Packets are data packets (whole or fragment); acks
/// are counted apart.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChannelStats {
    /// Data packets sent for the first time (sequences used).
    pub packets_sent: u64,
    /// Data packets sent again (declared lost, or a tail-loss probe).
    pub packets_resent: u64,
    /// Of those, resends of packets declared lost because packets sent after them were
    /// acknowledged (the packet or time threshold), without waiting for a timer.
    pub fast_resends: u64,
    /// Of those, resends found unnecessary: the ack came sooner after the resend than any round
    /// trip seen, so it acknowledged the original.
    pub spurious_resends: u64,
    /// Data packets counted as lost: declared lost (by the packet or time threshold, or a
    /// retransmission timeout), resent, and acknowledged later than a resend found spurious
    /// would be. Each packet counts once however often it went, and only once acknowledged; a
    /// resend the ack shows unnecessary is not loss, and neither is a tail-loss probe's copy of
    /// a packet still taken as in flight. This over `packets_sent` is the loss rate.
    pub packets_lost: u64,
    /// Probe timeouts: no ack for a probe timeout while data was in flight.
    pub probes: u64,
    /// Of those, retransmission timeouts (a second probe timeout in a row) that declared
    /// packets lost.
    pub timeouts: u64,
    /// Empty Groups sent in a new sequence to elicit an ack from a peer that does not
    /// acknowledge duplicates.
    pub ack_elicitors: u64,
    /// Times the congestion window was reduced (at most once per recovery episode, and only
    /// when the round trips show a queue).
    pub window_reductions: u64,
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
