//! The error types of this crate.

use std::time::Duration;

use bytes::Bytes;
use soe_crypto::CryptoError;
use soe_wire::WireError;

/// Why a reliable channel cannot go on. Every variant except [`ReliableError::InvalidConfig`],
/// [`ReliableError::PacketTooSmall`] and [`ReliableError::Cipher`] (raised at creation) comes from
/// the peer's input or silence and should end the session.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReliableError {
    /// A configuration field is out of its documented range.
    #[error("invalid reliable config: {field} = {value}, allowed {range}")]
    InvalidConfig {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
        /// The allowed range.
        range: &'static str,
    },
    /// The largest packet the channel may emit is too small to carry a fragment.
    #[error("max_packet_len {len} is below the minimum of {min} bytes")]
    PacketTooSmall {
        /// The length asked for.
        len: usize,
        /// [`crate::MIN_PACKET_LEN`].
        min: usize,
    },
    /// The RC4 key was rejected.
    #[error("RC4 key rejected: {0}")]
    Cipher(#[from] CryptoError),
    /// A first fragment announces a message longer than the configured limit.
    #[error("first fragment announces {len} bytes; max_message_size allows {max}")]
    MessageTooLarge {
        /// The announced total length.
        len: usize,
        /// The limit (max_message_size plus the escape byte).
        max: usize,
    },
    /// Fragment data goes past the total length the first fragment announced.
    #[error("fragment data reaches {received} bytes; the first fragment announced {total}")]
    FragmentOverflow {
        /// The announced total.
        total: usize,
        /// The bytes received including this fragment.
        received: usize,
    },
    /// A whole (unfragmented) packet arrived while a fragmented message was incomplete.
    #[error(
        "whole data packet {sequence} arrived while a fragmented message had {received} of {total} bytes"
    )]
    InterruptedReassembly {
        /// The full-width sequence of the whole packet.
        sequence: u64,
        /// Bytes of the fragmented message received so far.
        received: usize,
        /// Its announced total.
        total: usize,
    },
    /// A reassembled payload is malformed (bad Group, nested Group, truncated first fragment).
    #[error("corrupt reliable payload: {0}")]
    Corrupt(#[from] WireError),
    /// A packet stayed unacknowledged past `unacknowledged_timeout`.
    #[error("reliable packet {sequence} unacknowledged for {elapsed:?}")]
    UnacknowledgedTimeout {
        /// The full-width sequence of the packet.
        sequence: u64,
        /// How long since its first transmission.
        elapsed: Duration,
    },
}

/// Why [`ReliableChannel::send`](crate::ReliableChannel::send) refused a message. Nothing is
/// dropped silently: a refused message is either returned or was too large to take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// The send queue holds `max_queued_messages`; here is the message back. Retry after
    /// [`ReliableChannel::capacity`](crate::ReliableChannel::capacity) is non-zero.
    #[error("send queue is full; the {} byte message was returned", .0.len())]
    QueueFull(Bytes),
    /// The message is longer than `max_message_size`.
    #[error("message of {len} bytes exceeds max_message_size {max}")]
    TooLarge {
        /// The message length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The channel was closed with [`ReliableChannel::close`](crate::ReliableChannel::close) or
    /// failed; it takes no more messages.
    #[error("channel is closed")]
    Closed,
}

impl SendError {
    /// The refused message, when the error gives it back.
    pub fn into_message(self) -> Option<Bytes> {
        match self {
            Self::QueueFull(message) => Some(message),
            _ => None,
        }
    }
}
