//! The async endpoint handle.

use std::fmt;
use std::future::poll_fn;
use std::io;
use std::marker::PhantomData;
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use soe_wire::Channel;
use soe_wire::DisconnectReason;

use crate::config::{Config, EventMode};
use crate::connection::{CloseReason, Connection, ConnectionId};
use crate::driver::Driver;
use crate::error::ConnectError;
use crate::runtime::Runtime;
use crate::shared::{Deferral, EndpointRef, Phase, RawEvent, Shared};

/// The most events one [`Endpoint::handle_events`] call hands out.
const EVENT_BUDGET: usize = 64;

/// One UDP socket serving any number of SOE sessions, driven by a background task.
///
/// `R` is the async runtime the driver runs on; the adapter crates name it
/// (`soe_tokio::Endpoint`, `soe_async_std::Endpoint`). Clones share the endpoint. The driver task
/// stops once the endpoint is closed (or every `Endpoint` handle dropped) and no session is left.
pub struct Endpoint<R> {
    core: Core,
    _runtime: PhantomData<fn() -> R>,
}

impl<R> Clone for Endpoint<R> {
    fn clone(&self) -> Self {
        Self {
            core: self.core.clone(),
            _runtime: PhantomData,
        }
    }
}

impl<R> fmt::Debug for Endpoint<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("local_addr", &self.core.local_addr)
            .finish_non_exhaustive()
    }
}

impl<R: Runtime + Default> Endpoint<R> {
    /// Binds a UDP socket to `addr` (with `config.socket`'s options) and starts the driver on
    /// the current runtime. The endpoint accepts sessions if `config.endpoint` allows it (a
    /// server configuration); otherwise it only connects.
    pub fn bind(addr: SocketAddr, config: impl Into<Config>) -> io::Result<Self> {
        let config = config.into();
        let socket = config.socket.bind(addr)?;
        Self::with_socket(socket, config, R::default())
    }

    /// A client endpoint on an ephemeral port of every IPv4 interface (`0.0.0.0:0`).
    pub fn client(config: impl Into<Config>) -> io::Result<Self> {
        Self::bind(SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)), config)
    }
}

impl<R: Runtime> Endpoint<R> {
    /// Runs an endpoint on an already bound socket with the given runtime.
    ///
    /// A client that talks to one server may pass a socket
    /// [connected](std::net::UdpSocket::connect) to it: the socket then receives from that
    /// server only, and the system reports the server's closed port to it, which
    /// [`port_unreachable`](Self::port_unreachable) counts. Only where the system lets a
    /// connected UDP socket send with a destination address (Linux, Android, Windows; not
    /// macOS or the BSDs, which refuse it with `EISCONN`).
    pub fn with_socket(
        socket: std::net::UdpSocket,
        config: Config,
        runtime: R,
    ) -> io::Result<Self> {
        socket.set_nonblocking(true)?;
        crate::platform::quiet_closed_ports(&socket);
        let socket = if config.receive_coalesce.is_zero() {
            runtime.wrap_udp_socket(socket)?
        } else {
            runtime.wrap_coalescing_udp_socket(socket)?
        };
        let local_addr = socket.local_addr()?;
        let proto = crate::shards::protocol_endpoint(&config, local_addr)?;
        let shared = Arc::new(Shared::new(proto, &config));
        let runtime: Arc<dyn Runtime> = Arc::new(runtime);
        {
            let mut state = shared.lock();
            state.socket = Some(socket.clone());
            state.runtime = Some(runtime.clone());
        }
        let driver = Driver::new(shared.clone(), socket, runtime.clone(), &config);
        runtime.spawn(Box::pin(driver));
        Ok(Self {
            core: Core::new(shared, local_addr),
            _runtime: PhantomData,
        })
    }

    /// The address the socket is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.core.local_addr
    }

    /// Queues messages on any of this endpoint's connections under one lock, then sends what
    /// they made ready from the calling thread, in as few system calls as the socket allows,
    /// instead of waking the driver's task to send them.
    ///
    /// For an application that answers many sessions at once (a game server's tick, an event
    /// loop handing out a batch of replies, a binding whose host thread sends): one lock for the
    /// batch rather than one per message, and no hand-off between threads for the sends. The
    /// driver still sends what the socket refuses (a full send buffer), what is due later
    /// (pacing, retransmissions) and, past one wake-up's worth of datagrams (64), the rest.
    ///
    /// `queue` must not call other methods of this endpoint or its connections (the lock is
    /// held while it runs): it only queues, through the [`SendBatch`] it is given.
    pub fn send_batch<T>(&self, queue: impl FnOnce(&mut SendBatch<'_>) -> T) -> T {
        self.core.send_batch(queue)
    }

    /// The next session a peer opened; `None` once the endpoint is closed (and always in
    /// [`EventMode::Stream`], where new sessions come out of [`next_event`](Self::next_event)).
    pub async fn accept(&self) -> Option<Connection> {
        poll_fn(|cx| self.core.poll_accept(cx)).await
    }

    /// Opens a session to `remote` and waits for the handshake.
    ///
    /// Fails with [`ConnectError::Refused`] when the server answers with a Disconnect and with
    /// [`ConnectError::TimedOut`] when nothing answers within the session's connect timeout.
    /// Dropping the future abandons the attempt (the session is closed).
    pub async fn connect(&self, remote: SocketAddr) -> Result<Connection, ConnectError> {
        self.core.connect(remote).await
    }

    /// Closes every session with `reason` (each peer gets a Disconnect) and stops accepting new
    /// ones. Use [`wait_idle`](Self::wait_idle) to wait until the Disconnects are out.
    pub fn close(&self, reason: DisconnectReason) {
        self.core.close(reason);
    }

    /// Waits until the endpoint has no session left and nothing left to send. After
    /// [`close`](Self::close), also until the driver has stopped: the UDP socket is then
    /// closed and its port free to bind again, even while clones of this handle and
    /// connections are still held (they report the endpoint closed).
    pub async fn wait_idle(&self) {
        poll_fn(|cx| self.core.poll_idle(cx)).await;
    }

    /// The next event, in [`EventMode::Stream`]; `None` once the endpoint is closed and every
    /// event was taken (or right away in [`EventMode::PerConnection`]).
    pub async fn next_event(&self) -> Option<EndpointEvent> {
        poll_fn(|cx| self.core.poll_event(cx)).await
    }

    /// Waits for the next event, as [`next_event`](Self::next_event) does, then passes it to
    /// `handle`, and after it every other event ready now (up to 64); returns `false` instead
    /// once the endpoint is closed and every event was taken (`next_event`'s `None`).
    ///
    /// The messages `handle` queues on this endpoint's connections
    /// ([`Connection::try_send_on`] and the like) go out from the calling task, together, once
    /// it has handled the last event, instead of each waking the driver's task to send them:
    /// an echo or a reply costs no hand-off between tasks, and replies queued together still
    /// share datagrams. Sends made anywhere else (another task, another thread) wake the driver
    /// as ever. Taking no event until one is ready, it can be raced against other futures
    /// (`select!`) without losing one.
    pub async fn handle_events(&self, mut handle: impl FnMut(EndpointEvent)) -> bool {
        poll_fn(|cx| self.core.poll_handle_events(cx, &mut handle)).await
    }

    /// The events of [`next_event`](Self::next_event) as a [`Stream`](futures_lite::Stream).
    pub fn events(&self) -> Events {
        Events {
            core: self.core.clone(),
        }
    }

    /// How many sessions the protocol endpoint holds: established, half-open, and closing ones
    /// still sending their Disconnects.
    pub fn session_count(&self) -> usize {
        self.core.shared().lock().proto.len()
    }

    /// The endpoint-wide counters (datagrams, refusals, rate limiting, timer wake-ups).
    pub fn stats(&self) -> soe_session::EndpointStats {
        self.core.shared().lock().proto.endpoint_stats().clone()
    }

    /// How many times the socket reported that a datagram it sent met a closed port (an ICMP
    /// port unreachable from the peer's host).
    ///
    /// Linux, Android and the BSDs report these to a socket [connected](Self::with_socket) to
    /// the peer only, Windows to any socket. A client that sees the count rise while a
    /// session waits for its server knows that nothing listens there any more, seconds
    /// before the session times out. The sessions themselves do not act on it: an ICMP
    /// message is not authenticated, and anyone on the path can forge one.
    pub fn port_unreachable(&self) -> u64 {
        self.core.shared().lock().port_unreachable
    }
}

/// What an endpoint in [`EventMode::Stream`] reports.
#[derive(Debug)]
#[non_exhaustive]
pub enum EndpointEvent {
    /// A peer opened a session. Keep the handle: dropping its last clone closes the session.
    Accepted(Connection),
    /// A message arrived, in order for its channel.
    Message {
        /// The connection it came on.
        connection: ConnectionId,
        /// Its channel ([`Channel::ZERO`] for unreliable and ordered messages).
        channel: Channel,
        /// The message.
        data: Bytes,
        /// How it travelled: reliable, unreliable or ordered.
        kind: soe_session::Delivery,
    },
    /// A session ended (only for connections that were handed out and not yet dropped).
    Closed {
        /// The connection.
        connection: ConnectionId,
        /// Why.
        reason: CloseReason,
    },
    /// The handshake of a session opened with
    /// [`EventLoopHandle::connect`](crate::blocking::EventLoopHandle::connect) finished: its
    /// messages and its close follow as for an accepted session. (A session opened with
    /// [`Endpoint::connect`] is handed out by that call instead.)
    Connected(ConnectionId),
    /// The handshake of a session opened with
    /// [`EventLoopHandle::connect`](crate::blocking::EventLoopHandle::connect) failed; nothing
    /// more follows for it.
    ConnectFailed {
        /// The connection.
        connection: ConnectionId,
        /// Why, as [`Endpoint::connect`] would have said.
        error: ConnectError,
    },
}

/// Messages queued under one lock and sent from the calling thread; see
/// [`Endpoint::send_batch`]. When it ends (at the end of the closure), what the messages made
/// ready goes out.
pub struct SendBatch<'a> {
    shared: &'a Arc<Shared>,
    state: std::sync::MutexGuard<'a, crate::shared::State>,
    /// Whether anything was queued (nothing to send otherwise).
    queued: bool,
}

impl fmt::Debug for SendBatch<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendBatch")
            .field("queued", &self.queued)
            .finish_non_exhaustive()
    }
}

impl SendBatch<'_> {
    /// Queues `data` reliably on `channel` of `conn` if its session has room, as
    /// [`Connection::try_send_on`] does. A connection of another endpoint is
    /// [`TrySendError::Closed`](crate::TrySendError::Closed) (it is not this endpoint's to send on).
    pub fn try_send_on(
        &mut self,
        conn: &Connection,
        channel: Channel,
        data: Bytes,
    ) -> Result<(), crate::TrySendError> {
        self.queue(conn, data, |proto, handle, data| {
            proto.send(handle, channel, data)
        })
    }

    /// Messages the reliable `channel` of `conn` takes now: a
    /// [`try_send_on`](Self::try_send_on) finds room for that many. 0 once the session is
    /// closing, and for another endpoint's connection. Asking costs nothing, where a refused
    /// `try_send_on` wakes the driver (to make room): a host thread that passes on what waited
    /// for room, after each turn of an [`EventLoop`](crate::blocking::EventLoop), asks first.
    pub fn send_capacity(&self, conn: &Connection, channel: Channel) -> usize {
        if !conn.is_of(self.shared) {
            return 0;
        }
        match self.state.conns.get(&conn.id()) {
            Some(c) if !matches!(c.phase, Phase::Closed(_)) => {
                self.state.proto.send_capacity(c.handle, channel)
            }
            _ => 0,
        }
    }

    /// Turns RC4 on or off for `conn` from now on, as [`Connection::set_encryption`] does:
    /// between the messages queued on it before and after this call. `false` (and nothing
    /// changed) when the session has no key, has ended, or is another endpoint's.
    pub fn set_encryption(&mut self, conn: &Connection, on: bool) -> bool {
        conn.is_of(self.shared) && self.state.set_encryption(conn.id(), on)
    }

    /// Queues `data` as an unreliable datagram of `conn`, as [`Connection::send_unreliable`]
    /// does.
    pub fn send_unreliable(
        &mut self,
        conn: &Connection,
        data: Bytes,
    ) -> Result<(), crate::TrySendError> {
        self.queue(conn, data, |proto, handle, data| {
            proto.send_unreliable(handle, data)
        })
    }

    /// Queues `data` as an ordered unreliable message of `conn`, as
    /// [`Connection::send_ordered`] does.
    pub fn send_ordered(
        &mut self,
        conn: &Connection,
        data: Bytes,
    ) -> Result<(), crate::TrySendError> {
        self.queue(conn, data, |proto, handle, data| {
            proto.send_ordered(handle, data)
        })
    }

    fn queue(
        &mut self,
        conn: &Connection,
        data: Bytes,
        send: impl FnOnce(
            &mut soe_session::Endpoint,
            soe_session::SessionHandle,
            Bytes,
        ) -> Result<(), soe_session::SendError>,
    ) -> Result<(), crate::TrySendError> {
        if !conn.is_of(self.shared) {
            return Err(crate::TrySendError::Closed(CloseReason::new(
                DisconnectReason::Application,
                false,
            )));
        }
        let result = self.state.try_send_as(conn.id(), data, send);
        self.queued |= result.is_ok();
        result
    }
}

impl Drop for SendBatch<'_> {
    fn drop(&mut self) {
        self.state.batching = false;
        if std::thread::panicking() {
            // The closure panicked: leave the sending to the driver.
            self.state.wake_driver();
            return;
        }
        if self.queued {
            let now = self.state.now();
            self.state.transmit_inline(now);
        }
    }
}

/// The stream of [`EndpointEvent`]s; see [`Endpoint::events`].
#[derive(Debug)]
pub struct Events {
    core: Core,
}

impl futures_lite::Stream for Events {
    type Item = EndpointEvent;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<EndpointEvent>> {
        self.core.poll_event(cx)
    }
}

/// The runtime-independent part of an endpoint handle, shared with the blocking API.
#[derive(Debug, Clone)]
pub(crate) struct Core {
    endpoint: Arc<EndpointRef>,
    pub(crate) local_addr: SocketAddr,
}

impl Core {
    pub(crate) fn new(shared: Arc<Shared>, local_addr: SocketAddr) -> Self {
        Self {
            endpoint: Arc::new(EndpointRef { shared }),
            local_addr,
        }
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.endpoint.shared
    }

    /// See [`Endpoint::send_batch`].
    pub(crate) fn send_batch<T>(&self, queue: impl FnOnce(&mut SendBatch<'_>) -> T) -> T {
        let shared = self.shared();
        let mut state = shared.lock();
        state.batching = true;
        let mut batch = SendBatch {
            shared,
            state,
            queued: false,
        };
        queue(&mut batch)
    }

    pub(crate) fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<Option<Connection>> {
        let mut state = self.shared().lock();
        if let Some(id) = state.accept_queue.pop_front() {
            // The queue's reference moves to the handle.
            return Poll::Ready(Some(Connection::from_counted(self.shared().clone(), id)));
        }
        if state.closing.is_some() || state.driver_done || state.mode == EventMode::Stream {
            return Poll::Ready(None);
        }
        state.accept_wakers.register(cx.waker());
        Poll::Pending
    }

    /// Starts a session to `remote`; with `report`, its handshake ends in an event
    /// ([`EndpointEvent::Connected`] or [`EndpointEvent::ConnectFailed`]).
    pub(crate) fn start_connect(
        &self,
        remote: SocketAddr,
        report: bool,
    ) -> Result<Connection, ConnectError> {
        let mut state = self.shared().lock();
        if state.closing.is_some() || state.driver_done {
            return Err(ConnectError::EndpointClosed);
        }
        let now = state.now();
        let handle = state.proto.connect(now, remote)?;
        let id = state.insert_conn(handle, remote, Phase::Connecting, 1);
        if let Some(conn) = state.conns.get_mut(&id) {
            conn.report_connect = report;
        }
        state.wake_driver();
        Ok(Connection::from_counted(self.shared().clone(), id))
    }

    pub(crate) async fn connect(&self, remote: SocketAddr) -> Result<Connection, ConnectError> {
        let connection = self.start_connect(remote, false)?;
        let timeout = self.connect_timeout();
        poll_fn(|cx| {
            let mut state = self.shared().lock();
            let Some(conn) = state.conns.get_mut(&connection.id()) else {
                return Poll::Ready(Err(ConnectError::EndpointClosed));
            };
            match conn.phase {
                Phase::Established => Poll::Ready(Ok(())),
                Phase::Closed(reason) => Poll::Ready(Err(connect_error(reason, timeout))),
                Phase::Connecting => {
                    conn.wakers.register(cx.waker());
                    Poll::Pending
                }
            }
        })
        .await?;
        Ok(connection)
    }

    fn connect_timeout(&self) -> std::time::Duration {
        self.shared().lock().connect_timeout
    }

    pub(crate) fn close(&self, reason: DisconnectReason) {
        let mut state = self.shared().lock();
        if state.closing.is_none() {
            state.closing = Some(reason);
        }
        let now = state.now();
        state.proto.close_all(now, reason);
        state.drop_unaccepted(now);
        state.accept_wakers.wake_all();
        state.event_wakers.wake_all();
        state.wake_driver();
    }

    pub(crate) fn poll_idle(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = self.shared().lock();
        // A closed endpoint is idle once its driver stopped, which gives the port back.
        let idle = if state.closing.is_some() {
            state.driver_done
        } else {
            state.driver_done || (state.is_idle() && !state.tx_pending)
        };
        if idle {
            return Poll::Ready(());
        }
        state.idle_wakers.register(cx.waker());
        state.wake_driver();
        Poll::Pending
    }

    /// See [`Endpoint::handle_events`].
    pub(crate) fn poll_handle_events(
        &self,
        cx: &mut Context<'_>,
        handle: &mut dyn FnMut(EndpointEvent),
    ) -> Poll<bool> {
        let Some(first) = std::task::ready!(self.poll_event(cx)) else {
            return Poll::Ready(false);
        };
        // Sends `handle` queues from this thread wait for the deferral's end, which sends them
        // all; `handle` is synchronous, so no other task runs here before it.
        let _deferral = Deferral::new(self.shared());
        handle(first);
        for _ in 1..EVENT_BUDGET {
            match self.try_event() {
                Poll::Ready(Some(event)) => handle(event),
                _ => break,
            }
        }
        Poll::Ready(true)
    }

    pub(crate) fn poll_event(&self, cx: &mut Context<'_>) -> Poll<Option<EndpointEvent>> {
        self.event_for(Some(cx))
    }

    /// [`poll_event`](Self::poll_event) without a waker to register: for the blocking event
    /// loop, which drives the endpoint itself and so needs no wake-up when an event comes.
    pub(crate) fn try_event(&self) -> Poll<Option<EndpointEvent>> {
        self.event_for(None)
    }

    fn event_for(&self, cx: Option<&mut Context<'_>>) -> Poll<Option<EndpointEvent>> {
        let mut state = self.shared().lock();
        if let Some(event) = state.take_event() {
            let event = match event {
                RawEvent::Accepted(id) => {
                    EndpointEvent::Accepted(Connection::from_counted(self.shared().clone(), id))
                }
                RawEvent::Message {
                    id,
                    channel,
                    data,
                    kind,
                } => EndpointEvent::Message {
                    connection: id,
                    channel,
                    data,
                    kind,
                },
                RawEvent::Closed { id, reason } => EndpointEvent::Closed {
                    connection: id,
                    reason,
                },
                RawEvent::Connected(id) => EndpointEvent::Connected(id),
                RawEvent::ConnectFailed { id, error } => EndpointEvent::ConnectFailed {
                    connection: id,
                    error,
                },
            };
            return Poll::Ready(Some(event));
        }
        // The stream ends once the driver stopped (the port is then free): a closed endpoint
        // with nothing left is about to stop, and wakes this when it has.
        if state.driver_done || state.mode == EventMode::PerConnection {
            return Poll::Ready(None);
        }
        if state.closing.is_some() && state.is_idle() {
            state.wake_driver();
        }
        if let Some(cx) = cx {
            state.event_wakers.register(cx.waker());
        }
        Poll::Pending
    }
}

/// Maps the close of a session still in its handshake to the connect error it means.
/// The error of a connect whose session ended with `reason` during the handshake.
pub(crate) fn connect_error(reason: CloseReason, timeout: std::time::Duration) -> ConnectError {
    match reason.reason {
        _ if reason.by_peer => ConnectError::Refused {
            reason: reason.reason,
        },
        DisconnectReason::Timeout | DisconnectReason::ConnectFail => {
            ConnectError::TimedOut { timeout }
        }
        DisconnectReason::ManagerDeleted => ConnectError::EndpointClosed,
        _ => ConnectError::Failed(reason),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::task::Waker;
    use std::time::Instant;

    use soe_session::{EndpointConfig, Event, SessionConfig};

    use super::*;
    use crate::driver::tests::{CountWakes, Gate};

    /// Moves every datagram `from` has ready into `to`, which sees them from `source`.
    fn deliver(
        from: &mut soe_session::Endpoint,
        to: &mut soe_session::Endpoint,
        source: SocketAddr,
        now: Instant,
    ) {
        let mut buf = Vec::new();
        while let Some(t) = from.poll_transmit(now, &mut buf) {
            to.handle_datagram(now, source, &buf[..t.len]);
        }
    }

    #[test]
    fn replies_queued_in_handle_events_go_out_without_the_driver() {
        // No driver runs here: what the application's task does not send itself stays unsent,
        // so a deferred send left unflushed fails the test.
        let session = Arc::new(SessionConfig::new("T"));
        let config = Config::new(Arc::new(EndpointConfig::server(session.clone())))
            .with_event_mode(EventMode::Stream);
        let server_addr = SocketAddr::from(([127, 0, 0, 1], 1));
        let client_addr = SocketAddr::from(([127, 0, 0, 1], 2));
        let shared = Arc::new(Shared::new(
            soe_session::Endpoint::new(config.endpoint.clone()),
            &config,
        ));
        let socket = Arc::new(Gate::default());
        socket.open.store(true, Ordering::SeqCst);
        let wakes = Arc::new(CountWakes::default());
        {
            let mut state = shared.lock();
            state.socket = Some(socket.clone());
            state.driver_waker = Some(Waker::from(wakes.clone()));
        }
        let core = Core::new(shared.clone(), server_addr);
        let mut client = soe_session::Endpoint::new(Arc::new(EndpointConfig::client(session)));
        let now = Instant::now();
        let session = client.connect(now, server_addr).unwrap();
        // The handshake and one message, carried by hand (the driver's work).
        let pump = |client: &mut soe_session::Endpoint| {
            let mut state = shared.lock();
            deliver(client, &mut state.proto, client_addr, now);
            deliver(&mut state.proto, client, server_addr, now);
            state.route_events(now);
            // The driver's timer is set for now: no deadline the sends make is earlier.
            state.armed = Some(now);
        };
        pump(&mut client);
        client
            .send(session, Channel::ZERO, Bytes::from_static(b"ping"))
            .unwrap();
        pump(&mut client);
        assert!(socket.kept.lock().unwrap().is_empty());

        let mut cx = Context::from_waker(Waker::noop());
        let mut conns = Vec::new();
        let mut echoed = 0;
        let handled = core.poll_handle_events(&mut cx, &mut |event| match event {
            EndpointEvent::Accepted(conn) => conns.push(conn),
            EndpointEvent::Message { data, .. } => {
                conns[0].try_send(data).unwrap();
                echoed += 1;
                // A send from another thread meanwhile is that thread's: it wakes the driver.
                std::thread::scope(|s| {
                    s.spawn(|| conns[0].try_send(Bytes::from_static(b"other")).unwrap());
                });
                assert_eq!(wakes.0.load(Ordering::SeqCst), 1);
            }
            _ => {}
        });
        assert_eq!(handled, Poll::Ready(true));
        assert_eq!(echoed, 1);
        // The echo went out from this thread, the driver not woken for it; nothing is left
        // for the driver to send.
        assert_eq!(wakes.0.load(Ordering::SeqCst), 1);
        let sent = std::mem::take(&mut *socket.kept.lock().unwrap());
        assert!(!sent.is_empty());
        assert!(sent.iter().all(|(to, _)| *to == client_addr));
        let mut buf = Vec::new();
        assert!(shared.lock().proto.poll_transmit(now, &mut buf).is_none());
        for (_, datagram) in &sent {
            client.handle_datagram(now, server_addr, datagram);
        }
        let mut received = Vec::new();
        while let Some((_, event)) = client.poll_event() {
            if let Event::Message { data, .. } = event {
                received.push(data);
            }
        }
        assert_eq!(received, [&b"ping"[..], &b"other"[..]]);

        // Outside `handle_events`, a send wakes the driver and leaves the sending to it.
        conns[0].try_send(Bytes::from_static(b"later")).unwrap();
        assert_eq!(wakes.0.load(Ordering::SeqCst), 2);
        assert!(socket.kept.lock().unwrap().is_empty());
    }
}
