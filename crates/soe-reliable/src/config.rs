//! Limits and timings of a reliable channel.

use std::time::Duration;

use crate::ReliableError;

/// The largest receive window: sequences are 16 bits on the wire, so a receiver can tell "ahead"
/// from "behind" only within half the sequence space.
pub const MAX_WINDOW: u16 = 32768;

/// The longest duration [`ReliableConfig::validate`] accepts for any timing (one year, as
/// `SessionConfig` keeps): deadlines are computed as `now + duration`, and a longer duration
/// could overflow `Instant` there.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// Limits and timings shared by the channels of a session (wrap it in an `Arc`).
///
/// Every limit bounds memory or time a peer can make this side spend; the defaults are safe for
/// an Internet-facing server. Build one with [`ReliableConfig::default`] and the `with_*` setters;
/// [`ReliableChannel::new`](crate::ReliableChannel::new) checks it with
/// [`ReliableConfig::validate`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReliableConfig {
    /// Messages the application may queue per channel before [`send`] answers
    /// [`SendError::QueueFull`](crate::SendError::QueueFull). Also bounds messages received and
    /// not yet taken with [`poll_message`], exactly: an in-order packet whose messages would go
    /// past it (or past `max_message_size` bytes) is kept within the receive window but not
    /// acknowledged, and is delivered once the application has taken enough messages. The one
    /// exception is an empty queue, which takes any single packet (a Group may carry more
    /// messages than the limit). Default 4096; at least 1.
    ///
    /// [`send`]: crate::ReliableChannel::send
    /// [`poll_message`]: crate::ReliableChannel::poll_message
    pub max_queued_messages: usize,
    /// The largest application message, sent or received (a received reassembly may be one byte
    /// longer, for the zero-escape byte). A first fragment announcing more is
    /// [`ReliableError::MessageTooLarge`] and nothing is allocated for it. Also bounds the bytes
    /// received and not yet taken with `poll_message`. Default 4 MiB; 1 to `u32::MAX - 1`.
    pub max_message_size: usize,
    /// Packets buffered ahead of the next expected sequence; later ones are dropped unstored (the
    /// peer sends them again). Memory for out-of-order data is at most this many packets.
    /// Default 256; 1 to [`MAX_WINDOW`].
    pub receive_window: u16,
    /// The most packets in flight (sequenced and not yet acknowledged, counted from the oldest
    /// unacknowledged one); caps the congestion window. Keep it at or below the peer's receive
    /// window (256 in known peers). Default 196; 1 to `MAX_WINDOW - 1`.
    pub max_send_window: u16,
    /// The most bytes in flight beside the packet window: a new packet is sequenced only while
    /// the packets sequenced and not yet cumulatively acknowledged (selectively acknowledged ones
    /// included: the peer holds them) plus one whole packet stay within it, so the bytes the
    /// peer may have to take at once never exceed it. Counted as each reliable packet's encoded
    /// length (opcode, sequence, fragment header, data: what the CRC, compression flag and
    /// MultiPacket framing wrap). An ack elicitor (at most 7 bytes, no application data) is
    /// not counted and may go past it, as a probe may go past `max_send_window`: a peer that
    /// never re-acknowledges duplicates would otherwise stall a full window whose acks were
    /// lost. When nothing is in flight one packet always goes, so a cap below one packet sends
    /// one at a time. Default 200 KiB (204,800; the original library's default), which never
    /// binds at the default 512-byte `udp_length` (196 packets of at most 512 bytes are 98 KiB)
    /// and bounds the data kept for resending per channel when `udp_length` is raised (196
    /// packets of 65,507 bytes would be 12.5 MiB). The Free Realms client needs 64 KiB (see
    /// `SessionConfig::preset`). At least 1.
    pub max_outstanding_bytes: usize,
    /// The congestion window (packets in flight) at the start. Losses never shrink the window
    /// below half of this (and never below 2, unless this is 1). Default 8; 1 to
    /// `max_send_window` (larger values are capped).
    pub initial_send_window: u16,
    /// How long an in-order packet may wait before a cumulative AcknowledgeAll goes out.
    /// Default 2 ms.
    pub ack_delay: Duration,
    /// A cumulative ack goes out at once when this many in-order packets are unacknowledged.
    /// Default 16; at least 1.
    pub ack_every: u16,
    /// The probe timeout before the first round-trip sample. Default 500 ms.
    pub initial_rto: Duration,
    /// The floor of the probe timeout (max(2 SRTT, SRTT + 4 RTTVAR) plus the peer's observed ack
    /// delay). It only guards against timer and scheduling jitter on very short paths: losses
    /// followed by acknowledged packets are repaired without waiting for any timer, and a
    /// slow acker's hold is already in the observed ack delay. Default 4 ms (a lost tail on a
    /// 1 ms path is probed after about 4 ms rather than 10).
    pub min_rto: Duration,
    /// The ceiling of the probe timeout, backoff included. Default 1 s (the original library
    /// resends every 500 ms without backing off; h1z1-server every 250 ms plus its ping).
    pub max_rto: Duration,
    /// The longest the peer is taken to hold an ack back: the observed ack delay that the probe
    /// timeout adds is capped here, so an ack lost or stuck behind a loss does not read as a
    /// slow acker. Known peers delay acks by 2 ms (the original library, Sanctuary, this crate)
    /// to 24 ms (h1z1-server). Default 100 ms.
    pub max_ack_delay: Duration,
    /// A packet still unacknowledged this long after its first transmission ends the session
    /// ([`ReliableError::UnacknowledgedTimeout`]). Default 30 s.
    pub unacknowledged_timeout: Duration,
    /// Whether small messages are packed into one packet as a Group (`00 19` + items). Some peers
    /// read Groups but never send them; all known peers read them. Default true.
    pub bundle_messages: bool,
    /// Whether a duplicate of an already-delivered packet makes this side acknowledge again
    /// (default true, as the original library and Sanctuary do). Some peers (h1z1-server,
    /// soe-protocol 2.3.0) never re-acknowledge a duplicate; `false` imitates them, for tests and
    /// emulation of those peers.
    pub reack_duplicates: bool,
    /// What this side sends, after a retransmission timeout with no new data to send, in the
    /// next sequence to elicit an ack. A peer that never re-acknowledges a duplicate
    /// (h1z1-server, soe-protocol 2.3.0) would otherwise leave a packet whose ack was lost
    /// unacknowledged until `unacknowledged_timeout` ends the session. Default
    /// [`AckElicitor::EmptyGroup`]; see that type for which peers take which form.
    pub ack_elicitor: AckElicitor,
    /// Whether packets sent within the congestion window are paced: spread over the round trip
    /// at 5/4 of the window per SRTT, in bursts of at most 10 packets or 2 ms of sending, rather
    /// than sent all at once into a bottleneck queue that may hold fewer. Probes are never
    /// paced, and neither is anything before the first round-trip sample. Default true.
    pub pacing: bool,
}

/// The payload of a reliable packet sent only to elicit an ack from the peer: new to it, so
/// even a peer that never re-acknowledges a duplicate acknowledges it (and, cumulatively,
/// everything before it), yet read by the peer as no application message. This side delivers
/// neither form to the application.
///
/// Which form a peer reads as nothing depends on its Group reader (docs/interop.md has the
/// evidence per peer):
///
/// | peer | `EmptyGroup` (`00 19`) | `TruncatedGroup` (`00 19 01`) |
/// |---|---|---|
/// | this crate | nothing | nothing |
/// | the original UdpLibrary (the real game clients' lineage), h1z1-server | nothing: their Group loops run zero times (read in their sources) | not proven |
/// | soe-protocol 2.3.0 | **a 2-byte message `00 19`; with RC4 it decrypts one byte of it and the cipher runs out of step for good** (tested) | nothing: the item's length runs past the end and its loop stops (tested, plaintext and RC4) |
/// | Sanctuary (C#, Zig) | **as soe-protocol** (read in its sources: it takes a bundle only past 2 bytes) | not proven |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum AckElicitor {
    /// Never send one: a lost ack from a peer that never re-acknowledges duplicates is then
    /// repaired only by the application's next message.
    Off,
    /// `00 19`, a Group of no items. The default: the form the original library's readers (the
    /// real game clients) and h1z1-server take as nothing.
    #[default]
    EmptyGroup,
    /// `00 19 01`, a Group whose only item is cut short: for soe-protocol 2.3.0 peers.
    /// (Sanctuary peers take a bare `00 19` as a message too; this form is untested there.)
    TruncatedGroup,
}

impl AckElicitor {
    /// The payload sent, or `None` for [`AckElicitor::Off`].
    pub fn payload(self) -> Option<&'static [u8]> {
        match self {
            Self::Off => None,
            Self::EmptyGroup => Some(soe_wire::payload::EMPTY_GROUP),
            Self::TruncatedGroup => Some(soe_wire::payload::TRUNCATED_GROUP),
        }
    }

    /// Whether a received reassembled payload is one of the elicitor forms (no message); the
    /// rule is [`soe_wire::payload::is_ack_elicitor`].
    pub fn is_elicitor(payload: &[u8]) -> bool {
        soe_wire::payload::is_ack_elicitor(payload)
    }
}

impl Default for ReliableConfig {
    fn default() -> Self {
        Self {
            max_queued_messages: 4096,
            max_message_size: 4 * 1024 * 1024,
            receive_window: 256,
            max_send_window: 196,
            max_outstanding_bytes: 200 * 1024,
            initial_send_window: 8,
            ack_delay: Duration::from_millis(2),
            ack_every: 16,
            initial_rto: Duration::from_millis(500),
            min_rto: Duration::from_millis(4),
            max_rto: Duration::from_secs(1),
            max_ack_delay: Duration::from_millis(100),
            unacknowledged_timeout: Duration::from_secs(30),
            bundle_messages: true,
            reack_duplicates: true,
            ack_elicitor: AckElicitor::EmptyGroup,
            pacing: true,
        }
    }
}

macro_rules! setter {
    ($(#[$doc:meta])* $name:ident, $field:ident: $ty:ty) => {
        $(#[$doc])*
        #[must_use]
        pub fn $name(mut self, $field: $ty) -> Self {
            self.$field = $field;
            self
        }
    };
}

impl ReliableConfig {
    setter!(
        /// Sets [`ReliableConfig::max_queued_messages`].
        with_max_queued_messages, max_queued_messages: usize
    );
    setter!(
        /// Sets [`ReliableConfig::max_message_size`].
        with_max_message_size, max_message_size: usize
    );
    setter!(
        /// Sets [`ReliableConfig::receive_window`].
        with_receive_window, receive_window: u16
    );
    setter!(
        /// Sets [`ReliableConfig::max_send_window`].
        with_max_send_window, max_send_window: u16
    );
    setter!(
        /// Sets [`ReliableConfig::max_outstanding_bytes`].
        with_max_outstanding_bytes, max_outstanding_bytes: usize
    );
    setter!(
        /// Sets [`ReliableConfig::initial_send_window`].
        with_initial_send_window, initial_send_window: u16
    );
    setter!(
        /// Sets [`ReliableConfig::ack_delay`].
        with_ack_delay, ack_delay: Duration
    );
    setter!(
        /// Sets [`ReliableConfig::ack_every`].
        with_ack_every, ack_every: u16
    );
    setter!(
        /// Sets [`ReliableConfig::initial_rto`].
        with_initial_rto, initial_rto: Duration
    );
    setter!(
        /// Sets [`ReliableConfig::min_rto`].
        with_min_rto, min_rto: Duration
    );
    setter!(
        /// Sets [`ReliableConfig::max_rto`].
        with_max_rto, max_rto: Duration
    );
    setter!(
        /// Sets [`ReliableConfig::max_ack_delay`].
        with_max_ack_delay, max_ack_delay: Duration
    );
    setter!(
        /// Sets [`ReliableConfig::unacknowledged_timeout`].
        with_unacknowledged_timeout, unacknowledged_timeout: Duration
    );
    setter!(
        /// Sets [`ReliableConfig::bundle_messages`].
        with_bundle_messages, bundle_messages: bool
    );
    setter!(
        /// Sets [`ReliableConfig::reack_duplicates`].
        with_reack_duplicates, reack_duplicates: bool
    );
    setter!(
        /// Sets [`ReliableConfig::pacing`].
        with_pacing, pacing: bool
    );
    setter!(
        /// Sets [`ReliableConfig::ack_elicitor`].
        with_ack_elicitor, ack_elicitor: AckElicitor
    );

    /// Checks every field against its documented range. Every duration must be at most
    /// [`MAX_DURATION`].
    pub fn validate(&self) -> Result<(), ReliableError> {
        fn check(
            ok: bool,
            field: &'static str,
            value: u64,
            range: &'static str,
        ) -> Result<(), ReliableError> {
            if ok {
                Ok(())
            } else {
                Err(ReliableError::InvalidConfig {
                    field,
                    value,
                    range,
                })
            }
        }
        let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        for (field, d) in [
            ("ack_delay (ms)", self.ack_delay),
            ("initial_rto (ms)", self.initial_rto),
            ("min_rto (ms)", self.min_rto),
            ("max_rto (ms)", self.max_rto),
            ("max_ack_delay (ms)", self.max_ack_delay),
            ("unacknowledged_timeout (ms)", self.unacknowledged_timeout),
        ] {
            check(
                d <= MAX_DURATION,
                field,
                millis(d),
                "at most MAX_DURATION (one year)",
            )?;
        }
        check(
            self.max_queued_messages >= 1,
            "max_queued_messages",
            self.max_queued_messages as u64,
            "at least 1",
        )?;
        check(
            (1..u32::MAX as usize).contains(&self.max_message_size),
            "max_message_size",
            self.max_message_size as u64,
            "1 to u32::MAX - 1",
        )?;
        check(
            (1..=MAX_WINDOW).contains(&self.receive_window),
            "receive_window",
            self.receive_window.into(),
            "1 to 32768",
        )?;
        check(
            (1..MAX_WINDOW).contains(&self.max_send_window),
            "max_send_window",
            self.max_send_window.into(),
            "1 to 32767",
        )?;
        check(
            self.max_outstanding_bytes >= 1,
            "max_outstanding_bytes",
            self.max_outstanding_bytes as u64,
            "at least 1",
        )?;
        check(
            self.initial_send_window >= 1,
            "initial_send_window",
            self.initial_send_window.into(),
            "at least 1",
        )?;
        check(
            self.ack_every >= 1,
            "ack_every",
            self.ack_every.into(),
            "at least 1",
        )?;
        check(
            !self.min_rto.is_zero(),
            "min_rto (ms)",
            millis(self.min_rto),
            "more than 0",
        )?;
        check(
            self.max_rto >= self.min_rto,
            "max_rto (ms)",
            millis(self.max_rto),
            "at least min_rto",
        )?;
        check(
            !self.unacknowledged_timeout.is_zero(),
            "unacknowledged_timeout (ms)",
            millis(self.unacknowledged_timeout),
            "more than 0",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_setters_apply() {
        ReliableConfig::default().validate().unwrap();
        let c = ReliableConfig::default()
            .with_receive_window(512)
            .with_bundle_messages(false);
        assert_eq!(c.receive_window, 512);
        assert!(!c.bundle_messages);
        c.validate().unwrap();
    }

    #[test]
    fn out_of_range_fields_are_named() {
        let err = ReliableConfig::default()
            .with_receive_window(0)
            .validate()
            .unwrap_err();
        assert!(err.to_string().contains("receive_window"), "{err}");
        assert!(
            ReliableConfig::default()
                .with_max_send_window(MAX_WINDOW)
                .validate()
                .is_err()
        );
        assert!(
            ReliableConfig::default()
                .with_max_outstanding_bytes(0)
                .validate()
                .is_err()
        );
        assert!(
            ReliableConfig::default()
                .with_max_rto(Duration::from_millis(3))
                .validate()
                .is_err()
        );
        assert!(
            ReliableConfig::default()
                .with_max_message_size(0)
                .validate()
                .is_err()
        );
        let err = ReliableConfig::default()
            .with_ack_delay(MAX_DURATION + Duration::from_nanos(1))
            .validate()
            .unwrap_err();
        assert!(err.to_string().contains("ack_delay"), "{err}");
        ReliableConfig::default()
            .with_ack_delay(MAX_DURATION)
            .validate()
            .unwrap();
    }
}
