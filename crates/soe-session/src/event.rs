//! What a session reports to the application.

use bytes::Bytes;
use soe_wire::{Channel, DisconnectReason};

/// How a message was delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Delivery {
    /// On a reliable channel: exactly once, in order within the channel.
    Reliable,
    /// As a bare datagram (first byte non-zero), or an item of a Group packet: at most once, in
    /// any order.
    Unreliable,
    /// As an Ordered (0x1A) or Ordered2 (0x1B) packet: at most once, never older than one
    /// already delivered.
    Ordered,
}

/// An event of one session, from [`Session::poll_event`](crate::Session::poll_event) or, with
/// its handle, [`Endpoint::poll_event`](crate::Endpoint::poll_event).
///
/// A session's events come in this order: `Connected` or `Accepted` once, then its messages,
/// then `Closed` once, after every message received before the close.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// Client side: the server answered the SessionRequest; the session is established.
    Connected,
    /// Server side: a client completed its handshake (its first valid packet after our
    /// SessionResponse arrived). Half-open sessions that never complete produce no event.
    Accepted,
    /// A message from the peer.
    Message {
        /// The reliable channel; [`Channel::ZERO`] for unreliable and ordered messages.
        channel: Channel,
        /// The message, decrypted and unescaped.
        data: Bytes,
        /// How it travelled.
        kind: Delivery,
    },
    /// The session ended. `by_peer` tells whether the peer sent the Disconnect (with `reason`)
    /// or this side ended it (application close, timeout, error).
    Closed {
        /// Why. Local reasons: [`DisconnectReason::Timeout`] (peer silent),
        /// [`DisconnectReason::ConnectFail`] (connect timeout),
        /// [`DisconnectReason::UnacknowledgedTimeout`], [`DisconnectReason::CorruptPacket`],
        /// [`DisconnectReason::UnreachableConnection`] (the server forgot us and remapping
        /// failed), or what the application passed to `close`.
        reason: DisconnectReason,
        /// Whether the peer ended the session.
        by_peer: bool,
    },
}
