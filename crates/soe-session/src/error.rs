//! The error types of this crate: what the application's calls can be refused with.
//!
//! Failures that come from the network never surface as errors: they end the session, and the
//! application learns of it through [`Event::Closed`](crate::Event::Closed) with a
//! [`DisconnectReason`](soe_wire::DisconnectReason).

use bytes::Bytes;

/// Why a message was not queued. Nothing is dropped silently: when the message could be sent
/// later ([`SendError::QueueFull`]) it is handed back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// The queue is full (reliable: `max_queued_messages` of the channel; unreliable:
    /// `max_queued_unreliable` of the session). Here is the message back.
    #[error("send queue is full; the {} byte message was returned", .0.len())]
    QueueFull(Bytes),
    /// The message is longer than the limit: `max_message_size` for reliable data, one datagram
    /// for unreliable and ordered data.
    #[error("message of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// The message length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// An unreliable message must not be empty: the receiver could not tell it from nothing.
    #[error("unreliable message is empty")]
    EmptyUnreliable,
    /// An unreliable message travels as a bare datagram, which the receiver reads as application
    /// data only when its first byte is not zero.
    #[error("unreliable message starts with byte 0x00; its first byte must be non-zero")]
    ZeroFirstByte,
    /// The session is closing or closed and takes no more messages.
    #[error("session is closing or closed")]
    Closed,
    /// The handle names no session of this endpoint (it was closed and reaped).
    #[error("no session for this handle")]
    UnknownSession,
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

impl From<soe_reliable::SendError> for SendError {
    fn from(e: soe_reliable::SendError) -> Self {
        match e {
            soe_reliable::SendError::QueueFull(m) => Self::QueueFull(m),
            soe_reliable::SendError::TooLarge { len, max } => Self::TooLarge { len, max },
            _ => Self::Closed,
        }
    }
}

/// Why [`Endpoint::connect`](crate::Endpoint::connect) did not start a session.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The endpoint already has a session with this remote address.
    #[error("a session with this remote address already exists")]
    AddressInUse,
    /// The endpoint holds `max_sessions` sessions.
    #[error("the endpoint holds {max} sessions, its max_sessions limit")]
    TooManySessions {
        /// The limit.
        max: usize,
    },
    /// The session configuration is invalid.
    #[error("invalid configuration: {0}")]
    InvalidConfig(#[from] ConfigError),
}

/// A configuration field out of its documented range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A numeric field is out of range.
    #[error("{field} = {value} is out of range; allowed {range}")]
    OutOfRange {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
        /// The allowed range.
        range: &'static str,
    },
    /// The reliable channel configuration or the RC4 key was rejected.
    #[error("reliable channel setup rejected: {0}")]
    Reliable(#[from] soe_reliable::ReliableError),
}

/// Why an [`Endpoint`](crate::Endpoint) (or a [`ShardGroup`](crate::ShardGroup)) could not be
/// made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EndpointError {
    /// The operating system's random generator (`getrandom`) failed. The endpoint's secret
    /// (its CRC-seed cookies) and its session ids must be what no peer can predict, and
    /// nothing else the process has is, so no endpoint is made: it fails closed.
    #[error("the operating system's random generator failed: {message}")]
    RandomUnavailable {
        /// What the generator reported.
        message: String,
        /// The OS error code, where there is one (`errno`, or a Windows error).
        raw_os_error: Option<i32>,
    },
}
