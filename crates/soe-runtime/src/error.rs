//! What the handles' calls can fail with.
//!
//! One enum per operation, as in quinn and tokio's channels, so a caller matches only what its
//! call can return; each converts to [`io::Error`] for code that wants one error type.

use std::io;
use std::time::Duration;

use bytes::Bytes;
use soe_wire::DisconnectReason;

use crate::connection::CloseReason;

/// Why [`Endpoint::connect`](crate::Endpoint::connect) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The server answered with a Disconnect instead of a SessionResponse.
    #[error("the server refused the session: {reason:?} (reason {code})", code = .reason.to_u16())]
    Refused {
        /// The reason in the server's Disconnect.
        reason: DisconnectReason,
    },
    /// No SessionResponse arrived within the session's connect timeout.
    #[error("no answer from the server within the connect timeout of {timeout:?}")]
    TimedOut {
        /// The connect timeout that ran out.
        timeout: Duration,
    },
    /// The session ended during the handshake for another reason.
    #[error("the session ended during the handshake: {0}")]
    Failed(CloseReason),
    /// The protocol endpoint refused to start the session.
    #[error("cannot start the session: {0}")]
    Session(#[from] soe_session::ConnectError),
    /// The endpoint was closed, or its driver stopped.
    #[error("the endpoint is closed")]
    EndpointClosed,
}

impl From<ConnectError> for io::Error {
    fn from(e: ConnectError) -> Self {
        let kind = match &e {
            ConnectError::Refused { .. } => io::ErrorKind::ConnectionRefused,
            ConnectError::TimedOut { .. } => io::ErrorKind::TimedOut,
            ConnectError::Failed(_) => io::ErrorKind::ConnectionAborted,
            ConnectError::Session(_) => io::ErrorKind::InvalidInput,
            ConnectError::EndpointClosed => io::ErrorKind::NotConnected,
        };
        Self::new(kind, e)
    }
}

/// Why [`Connection::send`](crate::Connection::send) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// The connection has ended.
    #[error("the connection is closed: {0}")]
    Closed(CloseReason),
    /// The session refused the message (for example, it is larger than `max_message_size`).
    #[error("the session refused the message: {0}")]
    Session(soe_session::SendError),
}

impl From<SendError> for io::Error {
    fn from(e: SendError) -> Self {
        let kind = match &e {
            SendError::Closed(_) => io::ErrorKind::NotConnected,
            SendError::Session(_) => io::ErrorKind::InvalidInput,
        };
        Self::new(kind, e)
    }
}

/// Why [`Connection::try_send`](crate::Connection::try_send) did not queue the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TrySendError {
    /// The session's send queue is full; here is the message back. Try again later, or use
    /// [`Connection::send`](crate::Connection::send), which waits.
    #[error("the send queue is full; the {} byte message was returned", .0.len())]
    Full(Bytes),
    /// The connection has ended.
    #[error("the connection is closed: {0}")]
    Closed(CloseReason),
    /// The session refused the message (for example, it is larger than `max_message_size`).
    #[error("the session refused the message: {0}")]
    Session(soe_session::SendError),
}

impl From<TrySendError> for io::Error {
    fn from(e: TrySendError) -> Self {
        let kind = match &e {
            TrySendError::Full(_) => io::ErrorKind::WouldBlock,
            TrySendError::Closed(_) => io::ErrorKind::NotConnected,
            TrySendError::Session(_) => io::ErrorKind::InvalidInput,
        };
        Self::new(kind, e)
    }
}

/// Why [`blocking::Connection::recv_timeout`](crate::blocking::Connection::recv_timeout)
/// returned no message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecvTimeoutError {
    /// Nothing arrived within the timeout.
    #[error("no message within {0:?}")]
    Timeout(Duration),
    /// The connection is closed and every message was read.
    #[error("the connection is closed")]
    Closed,
}
