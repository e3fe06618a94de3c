//! A handle to one session.

use std::fmt;
use std::future::poll_fn;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::Poll;

use bytes::Bytes;
use soe_session::SessionStats;
use soe_wire::{Channel, DisconnectReason};

use crate::error::{SendError, TrySendError};
use crate::shared::{Phase, Shared};

/// Names a connection within its endpoint; never reused by that endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectionId(pub(crate) u64);

impl ConnectionId {
    /// The number behind the id.
    pub fn value(self) -> u64 {
        self.0
    }
}

impl fmt::Display for ConnectionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// Why and by whom a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct CloseReason {
    /// The reason, as sent in (or as it would be sent in) the Disconnect packet.
    pub reason: DisconnectReason,
    /// Whether the peer ended it (its Disconnect arrived), rather than this side (the
    /// application, a timeout, or a protocol violation detected here).
    pub by_peer: bool,
}

impl CloseReason {
    /// A close for `reason`, by the peer or by this side.
    pub fn new(reason: DisconnectReason, by_peer: bool) -> Self {
        Self { reason, by_peer }
    }
}

impl fmt::Display for CloseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let side = if self.by_peer {
            "the peer"
        } else {
            "this side"
        };
        write!(
            f,
            "{:?} (reason {}) by {side}",
            self.reason,
            self.reason.to_u16()
        )
    }
}

/// A handle to one session: send, receive, close.
///
/// Clones share the session. Dropping the last clone closes the session with reason
/// `Application` (unless it already ended). Messages come out of [`recv`](Self::recv) in the
/// order they were sent, per channel.
#[derive(Debug, Clone)]
pub struct Connection {
    inner: Arc<ConnRef>,
}

#[derive(Debug)]
struct ConnRef {
    shared: Arc<Shared>,
    id: ConnectionId,
}

impl Drop for ConnRef {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        let now = state.now();
        state.release(self.id, now);
    }
}

impl Connection {
    /// Wraps one reference to `id` that the caller already counted.
    pub(crate) fn from_counted(shared: Arc<Shared>, id: ConnectionId) -> Self {
        Self {
            inner: Arc::new(ConnRef { shared, id }),
        }
    }

    /// Whether this connection belongs to the endpoint whose state is `shared`.
    pub(crate) fn is_of(&self, shared: &Arc<Shared>) -> bool {
        Arc::ptr_eq(&self.inner.shared, shared)
    }

    /// This connection's id within its endpoint.
    pub fn id(&self) -> ConnectionId {
        self.inner.id
    }

    /// The peer's address (it can change if the peer's NAT rebinds and it remaps the session).
    pub fn remote_addr(&self) -> SocketAddr {
        let state = self.inner.shared.lock();
        let Some(conn) = state.conns.get(&self.inner.id) else {
            return SocketAddr::from(([0, 0, 0, 0], 0));
        };
        match conn.phase {
            Phase::Closed(_) => conn.remote,
            _ => state.proto.remote(conn.handle).unwrap_or(conn.remote),
        }
    }

    /// The SOE session id (the client chose it in its SessionRequest); `None` once the session
    /// has left the endpoint.
    pub fn session_id(&self) -> Option<u32> {
        let state = self.inner.shared.lock();
        let conn = state.conns.get(&self.inner.id)?;
        state.proto.session(conn.handle).map(|s| s.session_id())
    }

    /// The application protocol name the session runs: for a server that
    /// [accepts any name](soe_session::SessionConfig::with_any_application_protocol), the one the
    /// client asked for. `None` once the session has left the endpoint.
    pub fn application_protocol(&self) -> Option<Vec<u8>> {
        let state = self.inner.shared.lock();
        let conn = state.conns.get(&self.inner.id)?;
        state
            .proto
            .session(conn.handle)
            .map(|s| s.config().application_protocol().to_vec())
    }

    /// Sends `data` reliably on channel 0, waiting while the session's send queue is full.
    pub async fn send(&self, data: Bytes) -> Result<(), SendError> {
        self.send_on(Channel::ZERO, data).await
    }

    /// Sends `data` reliably on `channel`, waiting while the session's send queue is full.
    ///
    /// Returns once the message is queued in the session (not once the peer acknowledged it).
    /// `data` is never copied: sending one `Bytes` to many connections shares its buffer.
    pub async fn send_on(&self, channel: Channel, data: Bytes) -> Result<(), SendError> {
        let mut data = Some(data);
        poll_fn(|cx| {
            let mut state = self.inner.shared.lock();
            let Some(message) = data.take() else {
                return Poll::Ready(Ok(()));
            };
            match state.try_send(self.inner.id, channel, message) {
                Ok(()) => Poll::Ready(Ok(())),
                Err(TrySendError::Full(message)) => {
                    data = Some(message);
                    state.block_sender(self.inner.id, channel, cx.waker());
                    Poll::Pending
                }
                Err(TrySendError::Closed(reason)) => Poll::Ready(Err(SendError::Closed(reason))),
                Err(TrySendError::Session(e)) => Poll::Ready(Err(SendError::Session(e))),
            }
        })
        .await
    }

    /// Queues `data` on channel 0 if the session has room, without waiting.
    pub fn try_send(&self, data: Bytes) -> Result<(), TrySendError> {
        self.try_send_on(Channel::ZERO, data)
    }

    /// Queues `data` on `channel` if the session has room, without waiting.
    pub fn try_send_on(&self, channel: Channel, data: Bytes) -> Result<(), TrySendError> {
        self.inner
            .shared
            .lock()
            .try_send(self.inner.id, channel, data)
    }

    /// Sends `data` unreliably: one bare datagram, at most once, in any order. Its first byte
    /// must not be zero and it must fit one datagram; fails rather than waits when the session's
    /// unreliable queue is full.
    pub fn send_unreliable(&self, data: Bytes) -> Result<(), TrySendError> {
        self.inner
            .shared
            .lock()
            .try_send_as(self.inner.id, data, |proto, handle, data| {
                proto.send_unreliable(handle, data)
            })
    }

    /// Sends `data` as ordered unreliable data: at most once, and never delivered after a newer
    /// one (stale ones are dropped). Same limits as [`send_unreliable`](Self::send_unreliable).
    pub fn send_ordered(&self, data: Bytes) -> Result<(), TrySendError> {
        self.inner
            .shared
            .lock()
            .try_send_as(self.inner.id, data, |proto, handle, data| {
                proto.send_ordered(handle, data)
            })
    }

    /// The next message, in order; `None` once the connection is closed and its queue is empty.
    pub async fn recv(&self) -> Option<Bytes> {
        self.recv_with_channel().await.map(|(_, data)| data)
    }

    /// The next message with the channel it came on; `None` once closed and drained.
    pub async fn recv_with_channel(&self) -> Option<(Channel, Bytes)> {
        poll_fn(|cx| {
            let mut state = self.inner.shared.lock();
            if let Some(message) = state.take_message(self.inner.id) {
                return Poll::Ready(Some(message));
            }
            let Some(conn) = state.conns.get_mut(&self.inner.id) else {
                return Poll::Ready(None);
            };
            if let Phase::Closed(_) = conn.phase {
                return Poll::Ready(None);
            }
            conn.wakers.register(cx.waker());
            Poll::Pending
        })
        .await
    }

    /// Closes the session: a Disconnect with `reason` goes to the peer. Messages already queued
    /// for reading stay readable.
    pub fn close(&self, reason: DisconnectReason) {
        let mut state = self.inner.shared.lock();
        let Some(conn) = state.conns.get(&self.inner.id) else {
            return;
        };
        if let Phase::Closed(_) = conn.phase {
            return;
        }
        let handle = conn.handle;
        let now = state.now();
        state.proto.close(now, handle, reason);
        state.wake_driver();
    }

    /// Turns RC4 on or off for this session's reliable data from now on, both directions
    /// ([`soe_session::Session::set_encryption`]): the H1Z1 gateway's switch after a login
    /// request, with [`SessionConfig::with_encryption_at_start`](soe_session::SessionConfig::with_encryption_at_start)
    /// `false`. Messages already sent or already received keep the state they had, so switch at
    /// a quiet point of the application protocol. Returns `false` (and changes nothing) when
    /// the session has no encryption key or has ended.
    pub fn set_encryption(&self, on: bool) -> bool {
        self.inner.shared.lock().set_encryption(self.inner.id, on)
    }

    /// The longest message [`send_unreliable`](Self::send_unreliable) takes: what fits one
    /// datagram of the peer's `udp_length` after the session's framing (CRC, compression flag);
    /// [`send_ordered`](Self::send_ordered) takes 4 bytes less (its header). Known once the
    /// handshake is done; `None` before, and once the session has left the endpoint.
    pub fn max_unreliable_len(&self) -> Option<usize> {
        let state = self.inner.shared.lock();
        let conn = state.conns.get(&self.inner.id)?;
        if conn.phase != Phase::Established {
            return None;
        }
        state.proto.session(conn.handle).map(|s| s.max_packet_len())
    }

    /// Waits for the session to end and tells why.
    pub async fn closed(&self) -> CloseReason {
        poll_fn(|cx| {
            let mut state = self.inner.shared.lock();
            let Some(conn) = state.conns.get_mut(&self.inner.id) else {
                return Poll::Ready(CloseReason::new(DisconnectReason::ManagerDeleted, false));
            };
            if let Phase::Closed(reason) = conn.phase {
                return Poll::Ready(reason);
            }
            conn.wakers.register(cx.waker());
            Poll::Pending
        })
        .await
    }

    /// Why the session ended, or `None` while it is open.
    pub fn close_reason(&self) -> Option<CloseReason> {
        let state = self.inner.shared.lock();
        match state.conns.get(&self.inner.id)?.phase {
            Phase::Closed(reason) => Some(reason),
            _ => None,
        }
    }

    /// Starts (`on`) or stops recording this session with the flight recorder (see
    /// [`soe_session::recorder`]; [`EndpointConfig::with_recording`](soe_session::EndpointConfig::with_recording)
    /// records every session). `false` once the session has ended, or when the endpoint's
    /// recording budget is under two chunks.
    pub fn set_recording(&self, on: bool) -> bool {
        let mut state = self.inner.shared.lock();
        let Some(conn) = state.conns.get(&self.inner.id) else {
            return false;
        };
        if matches!(conn.phase, Phase::Closed(_)) {
            return false;
        }
        let handle = conn.handle;
        state.proto.set_recording(handle, on)
    }

    /// Takes this session's recording: while it runs, what was recorded so far (recording goes
    /// on from empty); after an abnormal end ([`soe_session::recorder::ends_abnormally`]), the
    /// whole recording, once. `None` when the session is not recorded, or ended cleanly.
    /// Write it with `soe_dissect::recording::write_recording`.
    pub fn take_recording(&self) -> Option<soe_session::Recording> {
        let mut state = self.inner.shared.lock();
        let conn = state.conns.get_mut(&self.inner.id)?;
        if matches!(conn.phase, Phase::Closed(_)) {
            return conn.recording.take().map(|r| *r);
        }
        let handle = conn.handle;
        state.proto.take_recording(handle)
    }

    /// The session's counters; after the close, the last ones seen.
    pub fn stats(&self) -> Option<SessionStats> {
        let state = self.inner.shared.lock();
        let conn = state.conns.get(&self.inner.id)?;
        match conn.phase {
            Phase::Closed(_) => conn.last_stats.clone(),
            _ => state
                .proto
                .stats(conn.handle)
                .or_else(|| conn.last_stats.clone()),
        }
    }
}
