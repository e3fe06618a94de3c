//! Per-session counters.

use std::time::Duration;

/// Counters of one session, both directions; the reliable figures are summed over its channels.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionStats {
    /// The smoothed round trip: the reliable channels' estimate when they have one, else the
    /// NetStatus one.
    pub rtt: Option<Duration>,
    /// The shortest round trip seen (channels and NetStatus).
    pub min_rtt: Option<Duration>,
    /// Datagrams sent.
    pub datagrams_sent: u64,
    /// Bytes sent (whole datagrams, framing included).
    pub bytes_sent: u64,
    /// Datagrams received and accepted (CRC passed or an accepted CRC-less quirk).
    pub datagrams_received: u64,
    /// Bytes of accepted datagrams.
    pub bytes_received: u64,
    /// Datagrams dropped because their CRC did not match (or they were too short to carry it).
    pub crc_rejects: u64,
    /// Datagrams accepted without a valid CRC because they had a known CRC-less shape.
    pub crcless_accepted: u64,
    /// Reliable data packets sent for the first time.
    pub reliable_packets_sent: u64,
    /// Reliable data packets sent again.
    pub resends: u64,
    /// Of those, packets declared lost because later ones were acknowledged (no timer waited).
    pub fast_resends: u64,
    /// Of those, resends found unnecessary (the original's ack came back).
    pub spurious_resends: u64,
    /// Reliable data packets counted as lost ([`soe_reliable::ChannelStats::packets_lost`]):
    /// declared lost, resent, and not found spurious once acknowledged. Over
    /// `reliable_packets_sent`, the loss rate.
    pub packets_lost: u64,
    /// Packets sent in a new sequence only to elicit an ack from a peer that does not
    /// re-acknowledge duplicates ([`soe_reliable::AckElicitor`]).
    pub ack_elicitors: u64,
    /// Reliable data packets received again.
    pub duplicates: u64,
    /// Reliable data packets that arrived ahead of the next expected one.
    pub out_of_order: u64,
    /// Acknowledge and AcknowledgeAll packets sent.
    pub acks_sent: u64,
    /// Acknowledge and AcknowledgeAll packets received.
    pub acks_received: u64,
    /// Reliable messages accepted by `send`.
    pub reliable_messages_sent: u64,
    /// Reliable messages delivered.
    pub reliable_messages_received: u64,
    /// Unreliable and ordered messages sent.
    pub unreliable_sent: u64,
    /// Unreliable and ordered messages delivered.
    pub unreliable_received: u64,
    /// Unreliable and ordered messages dropped on receipt (stale ordered, or queue full).
    pub unreliable_dropped: u64,
    /// Heartbeats sent.
    pub heartbeats_sent: u64,
    /// Heartbeats received.
    pub heartbeats_received: u64,
}
