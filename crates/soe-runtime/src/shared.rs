//! The state a driver shares with the application's handles: the protocol endpoint, the
//! per-connection queues and every waker.
//!
//! One `std::sync::Mutex` guards it; nobody holds it across an `.await` or a blocking call. The
//! driver (async task or blocking thread) feeds the protocol endpoint and calls
//! [`State::route_events`]; handles take messages out and queue sends.

use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Waker;
use std::time::Instant;

use bytes::Bytes;
use soe_session::{Delivery, Event, SessionHandle, SessionStats};
use soe_wire::{Channel, DisconnectReason};

use crate::config::{Config, EventMode};
use crate::connection::{CloseReason, ConnectionId};
use crate::error::{ConnectError, TrySendError};
use crate::runtime::AsyncUdpSocket;
use crate::tx::{self, TxBatch};

/// Whether a socket error is the system's report that a datagram sent earlier met a closed
/// port: ICMP port unreachable, which Linux, Android and the BSDs report as `ECONNREFUSED` to a
/// connected socket, and Windows as `WSAECONNRESET` to any socket.
pub(crate) fn is_port_unreachable(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::ConnectionReset
    )
}

/// A hasher for the ids this crate and the protocol endpoint hand out themselves (connection
/// ids, session handles): a multiply and a fold per word. They are counters and slab keys, never
/// chosen by a peer, so they need none of the default hasher's resistance to collisions forced
/// from outside (addresses, which peers choose, stay behind it in the protocol endpoint).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        // Fibonacci hashing: the high bits (which the table uses) depend on every bit of n.
        self.0 = (self.0.rotate_left(26) ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

/// A map keyed by an id of ours (see [`IdHasher`]).
pub(crate) type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// The lock and what it guards.
#[derive(Debug)]
pub(crate) struct Shared {
    state: Mutex<State>,
}

impl Shared {
    pub(crate) fn new(proto: soe_session::Endpoint, config: &Config) -> Self {
        Self {
            state: Mutex::new(State {
                proto,
                conns: IdMap::default(),
                by_handle: IdMap::default(),
                next_id: 0,
                accept_queue: VecDeque::new(),
                accept_wakers: Wakers::default(),
                events: VecDeque::new(),
                event_wakers: Wakers::default(),
                blocked: Vec::new(),
                idle_wakers: Wakers::default(),
                driver_waker: None,
                closing: None,
                endpoint_alive: true,
                driver_done: false,
                tx_pending: false,
                mode: config.event_mode,
                receive_queue_bytes: config.receive_queue_bytes,
                connect_timeout: config.endpoint.client_config().connect_timeout(),
                port_unreachable: 0,
                socket: None,
                runtime: None,
                inline: TxBatch::default(),
                deferred: None,
                armed: None,
                batching: false,
            }),
        }
    }

    /// Locks the state. A panic while it was held does not make it unusable: every update leaves
    /// it consistent, so the poison flag is ignored.
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

thread_local! {
    /// The [`Deferral`] this thread is in: the address of the state it defers sends of (0:
    /// none), and whether a send was deferred since it began.
    static DEFERRAL: Cell<(usize, bool)> = const { Cell::new((0, false)) };
}

/// While it lives, sends that this thread queues on the endpoint's connections do not wake the
/// driver's task; when it ends, what they made ready goes out from this thread
/// ([`State::transmit_inline`]), once for all of them, so that messages queued together are
/// still bundled together.
///
/// Only the thread that made the deferral defers, and only for the code it runs until the
/// deferral ends: no other task can run on this thread in between when that code does not
/// `.await` (the caller's duty: [`Core::poll_handle_events`](crate::endpoint::Core) runs a
/// synchronous closure in it). Sends from any other thread or task wake the driver as ever. A
/// send can therefore never wait for an unrelated event: either the driver was woken for it,
/// or the deferral's end, which always comes, sends it.
pub(crate) struct Deferral<'a> {
    shared: &'a Shared,
    /// The deferral this one is inside of (nested ones, of this endpoint or another).
    outer: (usize, bool),
}

impl Deferral<'_> {
    /// Starts deferring this thread's sends on `shared`'s endpoint.
    pub(crate) fn new(shared: &Shared) -> Deferral<'_> {
        let key = std::ptr::from_ref::<State>(&*shared.lock()) as usize;
        let outer = DEFERRAL
            .try_with(|d| d.replace((key, false)))
            .unwrap_or((0, false));
        Deferral { shared, outer }
    }
}

impl Drop for Deferral<'_> {
    fn drop(&mut self) {
        let Ok((_, sent)) = DEFERRAL.try_with(|d| d.replace(self.outer)) else {
            return;
        };
        if !sent {
            return;
        }
        let mut state = self.shared.lock();
        if std::thread::panicking() {
            // The code it ran panicked: leave the sending to the driver.
            state.wake_driver();
            return;
        }
        let now = state.now();
        state.transmit_inline(now);
    }
}

/// A small set of wakers, woken all at once.
#[derive(Debug, Default)]
pub(crate) struct Wakers(Vec<Waker>);

impl Wakers {
    /// Adds `waker` unless an equivalent one is already there.
    pub(crate) fn register(&mut self, waker: &Waker) {
        if !self.0.iter().any(|w| w.will_wake(waker)) {
            self.0.push(waker.clone());
        }
    }

    pub(crate) fn wake_all(&mut self) {
        for waker in self.0.drain(..) {
            waker.wake();
        }
    }
}

/// Where a connection is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// `connect` was called; no answer yet.
    Connecting,
    /// The handshake is done.
    Established,
    /// The session ended.
    Closed(CloseReason),
}

/// What one received message counts against [`Config::receive_queue_bytes`]: its length plus
/// [`MESSAGE_OVERHEAD`], so empty or tiny messages cannot queue without bound.
///
/// [`Config::receive_queue_bytes`]: crate::Config::receive_queue_bytes
/// [`MESSAGE_OVERHEAD`]: crate::MESSAGE_OVERHEAD
fn charge(data: &Bytes) -> usize {
    data.len().saturating_add(crate::config::MESSAGE_OVERHEAD)
}

/// One connection's queues.
#[derive(Debug)]
pub(crate) struct ConnState {
    pub(crate) handle: SessionHandle,
    pub(crate) remote: SocketAddr,
    pub(crate) phase: Phase,
    /// Received messages not yet read (per-connection mode).
    pub(crate) recv: VecDeque<(Channel, Bytes)>,
    /// Bytes received and not yet taken by the application, in either mode.
    pub(crate) queued_bytes: usize,
    /// Tasks waiting for a message, the handshake or the close.
    pub(crate) wakers: Wakers,
    /// Senders waiting for room in a full send queue.
    pub(crate) send_wakers: Wakers,
    /// The channels those senders wait on, one bit per channel.
    pub(crate) blocked_channels: u8,
    /// Live `Connection` handles plus undelivered accept-queue or event entries naming it.
    pub(crate) refs: usize,
    /// The last statistics seen, kept for after the close.
    pub(crate) last_stats: Option<SessionStats>,
    /// A session this side opened whose handshake ends in an event (stream mode):
    /// [`RawEvent::Connected`] or [`RawEvent::ConnectFailed`] (see
    /// [`EventLoopHandle::connect`](crate::blocking::EventLoopHandle::connect)).
    pub(crate) report_connect: bool,
    /// The flight recorder's recording of a session that ended abnormally, until the
    /// application takes it ([`Connection::take_recording`](crate::Connection::take_recording)).
    pub(crate) recording: Option<Box<soe_session::Recording>>,
}

/// An event as queued in stream mode (a `Connection` is built only when it is taken, so no
/// handle is ever dropped while the lock is held).
#[derive(Debug)]
pub(crate) enum RawEvent {
    Accepted(ConnectionId),
    Message {
        id: ConnectionId,
        channel: Channel,
        data: Bytes,
        kind: Delivery,
    },
    Closed {
        id: ConnectionId,
        reason: CloseReason,
    },
    /// The handshake of a session with `report_connect` finished.
    Connected(ConnectionId),
    /// The handshake of a session with `report_connect` failed.
    ConnectFailed {
        id: ConnectionId,
        error: ConnectError,
    },
}

/// Everything behind the lock.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) proto: soe_session::Endpoint,
    pub(crate) conns: IdMap<ConnectionId, ConnState>,
    /// Live sessions only: removed when the protocol reports the close, since it may reuse the
    /// handle afterwards.
    pub(crate) by_handle: IdMap<SessionHandle, ConnectionId>,
    next_id: u64,
    pub(crate) accept_queue: VecDeque<ConnectionId>,
    pub(crate) accept_wakers: Wakers,
    pub(crate) events: VecDeque<RawEvent>,
    pub(crate) event_wakers: Wakers,
    /// Connections with a sender waiting for room (see [`State::wake_senders_with_room`]).
    pub(crate) blocked: Vec<ConnectionId>,
    pub(crate) idle_wakers: Wakers,
    pub(crate) driver_waker: Option<Waker>,
    /// Set by `Endpoint::close`: no new sessions, and the driver ends once idle.
    pub(crate) closing: Option<DisconnectReason>,
    /// False once every `Endpoint` handle is gone.
    pub(crate) endpoint_alive: bool,
    /// The driver has stopped; nothing more will happen.
    pub(crate) driver_done: bool,
    /// The driver holds a datagram the socket would not take yet.
    pub(crate) tx_pending: bool,
    pub(crate) mode: EventMode,
    receive_queue_bytes: usize,
    /// The client sessions' connect timeout, for error messages.
    pub(crate) connect_timeout: std::time::Duration,
    /// How many times the socket reported a datagram sent earlier as undeliverable to a closed
    /// port (see [`is_port_unreachable`]).
    pub(crate) port_unreachable: u64,
    /// The socket, for sends made from an application's thread ([`State::transmit_inline`]);
    /// `None` for `blocking::Endpoint`, whose thread does all the sending.
    pub(crate) socket: Option<Arc<dyn AsyncUdpSocket>>,
    /// The driver's runtime, for its clock.
    pub(crate) runtime: Option<Arc<dyn crate::runtime::Runtime>>,
    /// The batch those sends use.
    pub(crate) inline: TxBatch,
    /// Datagrams such a send took from the protocol endpoint that the socket would not take
    /// yet: the driver sends them before anything else.
    pub(crate) deferred: Option<TxBatch>,
    /// The endpoint's next deadline as the driver's last wake-up left it, which its timer is
    /// set for (`None`: no deadline); a wake-up runs the timers when it has passed.
    pub(crate) armed: Option<Instant>,
    /// Set while a [`SendBatch`](crate::SendBatch) queues messages: its sends do not wake the
    /// driver (the batch sends from the calling thread when it ends).
    pub(crate) batching: bool,
}

impl State {
    /// Wakes the driver so it transmits what a handle just queued.
    pub(crate) fn wake_driver(&self) {
        if let Some(waker) = &self.driver_waker {
            waker.wake_by_ref();
        }
    }

    /// The driver's clock (the system's where there is no driver's runtime).
    pub(crate) fn now(&self) -> Instant {
        self.runtime
            .as_ref()
            .map_or_else(Instant::now, |runtime| runtime.now())
    }

    /// Whether this thread is inside a [`Deferral`] of this state: then it notes that it queued
    /// a send, which the deferral's end sends, and the driver need not be woken.
    fn defer_here(&self) -> bool {
        let key = std::ptr::from_ref(self) as usize;
        // `try_with`: a send from a thread-local's destructor, when this one may be gone, is
        // simply not deferred.
        DEFERRAL
            .try_with(|d| {
                let (scope, _) = d.get();
                let here = scope == key;
                if here {
                    d.set((scope, true));
                }
                here
            })
            .unwrap_or(false)
    }

    /// Files a new connection for `handle` and returns its id; `refs` counts who names it.
    pub(crate) fn insert_conn(
        &mut self,
        handle: SessionHandle,
        remote: SocketAddr,
        phase: Phase,
        refs: usize,
    ) -> ConnectionId {
        let id = ConnectionId(self.next_id);
        self.next_id += 1;
        self.conns.insert(
            id,
            ConnState {
                handle,
                remote,
                phase,
                recv: VecDeque::new(),
                queued_bytes: 0,
                wakers: Wakers::default(),
                send_wakers: Wakers::default(),
                blocked_channels: 0,
                refs,
                last_stats: None,
                report_connect: false,
                recording: None,
            },
        );
        self.by_handle.insert(handle, id);
        id
    }

    /// Whether the endpoint has no session left, not even one still sending its Disconnects
    /// (closed connections whose handles are still held do not count).
    pub(crate) fn is_idle(&self) -> bool {
        self.by_handle.is_empty() && self.proto.is_empty()
    }

    /// Whether the driver may stop once its transmit queue is empty: the endpoint was closed or
    /// dropped, and no session is left.
    pub(crate) fn may_stop(&self) -> bool {
        (self.closing.is_some() || !self.endpoint_alive) && self.is_idle()
    }

    /// Drops one reference to `id`. The last one closes a session still open (reason
    /// `Application`) and forgets the connection once the protocol reported its close.
    pub(crate) fn release(&mut self, id: ConnectionId, now: Instant) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        conn.refs = conn.refs.saturating_sub(1);
        if conn.refs > 0 {
            return;
        }
        match conn.phase {
            Phase::Closed(_) => {
                self.conns.remove(&id);
                self.idle_wakers.wake_all();
            }
            Phase::Connecting | Phase::Established => {
                let handle = conn.handle;
                conn.recv.clear();
                self.proto.close(now, handle, DisconnectReason::Application);
                self.wake_driver();
            }
        }
    }

    /// Queues `data` on `id`'s session if it has room, and wakes the driver to send it.
    pub(crate) fn try_send(
        &mut self,
        id: ConnectionId,
        channel: Channel,
        data: Bytes,
    ) -> Result<(), TrySendError> {
        self.try_send_as(id, data, |proto, handle, data| {
            proto.send(handle, channel, data)
        })
    }

    /// Like [`try_send`](Self::try_send), with the session call chosen by the caller (reliable,
    /// unreliable or ordered).
    pub(crate) fn try_send_as(
        &mut self,
        id: ConnectionId,
        data: Bytes,
        send: impl FnOnce(
            &mut soe_session::Endpoint,
            SessionHandle,
            Bytes,
        ) -> Result<(), soe_session::SendError>,
    ) -> Result<(), TrySendError> {
        let gone = CloseReason::new(DisconnectReason::Application, false);
        let Some(conn) = self.conns.get(&id) else {
            return Err(TrySendError::Closed(gone));
        };
        if let Phase::Closed(reason) = conn.phase {
            return Err(TrySendError::Closed(reason));
        }
        let handle = conn.handle;
        match send(&mut self.proto, handle, data) {
            Ok(()) => {
                if !self.batching && !self.defer_here() {
                    self.wake_driver();
                }
                Ok(())
            }
            Err(soe_session::SendError::QueueFull(data)) => {
                self.wake_driver();
                Err(TrySendError::Full(data))
            }
            // Closing: the close event is on its way.
            Err(soe_session::SendError::Closed | soe_session::SendError::UnknownSession) => {
                Err(TrySendError::Closed(gone))
            }
            Err(e) => Err(TrySendError::Session(e)),
        }
    }

    /// Turns RC4 on or off for `id`'s session (see
    /// [`Connection::set_encryption`](crate::Connection::set_encryption)).
    pub(crate) fn set_encryption(&mut self, id: ConnectionId, on: bool) -> bool {
        let Some(conn) = self.conns.get(&id) else {
            return false;
        };
        if let Phase::Closed(_) = conn.phase {
            return false;
        }
        let handle = conn.handle;
        self.proto.set_encryption(handle, on)
    }

    /// Notes a datagram the socket refused with an error other than a full buffer: it is lost,
    /// like any datagram, and the protocol resends what matters. A connected socket may report
    /// an earlier datagram's ICMP error here instead of on the next receive.
    pub(crate) fn on_send_error(&mut self, destination: SocketAddr, e: &std::io::Error) {
        tracing::debug!(%destination, error = %e, "UDP send error; datagram dropped");
        if is_port_unreachable(e) {
            self.port_unreachable += 1;
        }
    }

    /// Sends, from the calling thread, what the sessions have ready, up to [`SEND_BUDGET`]
    /// datagrams; the driver sends the rest. Leaves it to the driver (and wakes it) when it
    /// holds datagrams the socket refused, when there is no socket here (`blocking::Endpoint`),
    /// and when the socket refuses this batch (which the driver then sends first). Wakes the
    /// driver too when the endpoint's next deadline moved before the one its timer is set for.
    ///
    /// [`SEND_BUDGET`]: crate::driver::SEND_BUDGET
    pub(crate) fn transmit_inline(&mut self, now: Instant) {
        let Some(socket) = self.socket.clone() else {
            self.wake_driver();
            return;
        };
        if self.tx_pending || self.deferred.is_some() {
            self.wake_driver();
            return;
        }
        let segments = socket
            .max_send_segments()
            .clamp(1, crate::driver::SEND_BUDGET);
        let mut tx = std::mem::take(&mut self.inline);
        let mut sent = 0;
        loop {
            if !tx.has_pending() {
                let budget = crate::driver::SEND_BUDGET.saturating_sub(sent);
                if budget == 0 {
                    // More than one wake-up's worth: the driver sends the rest.
                    self.wake_driver();
                    break;
                }
                if tx.fill(&mut self.proto, now, budget, segments) == 0 {
                    break;
                }
            }
            match tx.send(&*socket) {
                tx::Sent::Some(n) => sent += n,
                tx::Sent::WouldBlock => {
                    self.deferred = Some(tx);
                    self.tx_pending = true;
                    self.wake_driver();
                    return;
                }
                tx::Sent::Dropped(n, entry, e) => {
                    sent += n;
                    self.on_send_error(entry.destination, &e);
                }
            }
        }
        self.inline = tx;
        // Sending can finish a close (its last Disconnect went out).
        self.route_events(now);
        let deadline = self.proto.poll_timeout();
        if deadline.is_some_and(|d| self.armed.is_none_or(|armed| d < armed)) {
            self.wake_driver();
        }
    }

    /// Takes one queued message of `id` (per-connection mode).
    pub(crate) fn take_message(&mut self, id: ConnectionId) -> Option<(Channel, Bytes)> {
        let conn = self.conns.get_mut(&id)?;
        let (channel, data) = conn.recv.pop_front()?;
        conn.queued_bytes = conn.queued_bytes.saturating_sub(charge(&data));
        Some((channel, data))
    }

    /// Takes the next stream-mode event, settling its byte accounting.
    pub(crate) fn take_event(&mut self) -> Option<RawEvent> {
        let event = self.events.pop_front()?;
        if let RawEvent::Message { id, data, .. } = &event {
            if let Some(conn) = self.conns.get_mut(id) {
                conn.queued_bytes = conn.queued_bytes.saturating_sub(charge(data));
            }
        }
        Some(event)
    }

    /// Moves every event the protocol endpoint has into the connections' queues and wakes whoever
    /// waits for them.
    pub(crate) fn route_events(&mut self, now: Instant) {
        while let Some((handle, event)) = self.proto.poll_event() {
            match event {
                Event::Accepted => self.on_accepted(now, handle),
                Event::Connected => self.on_connected(handle),
                Event::Message {
                    channel,
                    data,
                    kind,
                } => self.on_message(now, handle, channel, data, kind),
                Event::Closed {
                    reason, by_peer, ..
                } => self.on_closed(handle, CloseReason::new(reason, by_peer)),
                _ => {}
            }
        }
    }

    fn on_accepted(&mut self, now: Instant, handle: SessionHandle) {
        if let Some(reason) = self.closing {
            self.proto.close(now, handle, reason);
            return;
        }
        if !self.endpoint_alive {
            // Nobody can accept it any more.
            self.proto
                .close(now, handle, DisconnectReason::ManagerDeleted);
            return;
        }
        let remote = self.proto.remote(handle);
        let Some(remote) = remote else {
            return;
        };
        // The queue entry holds the one reference until the application takes it.
        let id = self.insert_conn(handle, remote, Phase::Established, 1);
        match self.mode {
            EventMode::PerConnection => {
                self.accept_queue.push_back(id);
                self.accept_wakers.wake_all();
            }
            EventMode::Stream => {
                self.events.push_back(RawEvent::Accepted(id));
                self.event_wakers.wake_all();
            }
        }
    }

    fn on_connected(&mut self, handle: SessionHandle) {
        let Some(&id) = self.by_handle.get(&handle) else {
            return;
        };
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        if conn.phase != Phase::Connecting {
            return;
        }
        conn.phase = Phase::Established;
        conn.wakers.wake_all();
        if conn.report_connect && conn.refs > 0 && self.mode == EventMode::Stream {
            self.events.push_back(RawEvent::Connected(id));
            self.event_wakers.wake_all();
        }
    }

    fn on_message(
        &mut self,
        now: Instant,
        handle: SessionHandle,
        channel: Channel,
        data: Bytes,
        kind: Delivery,
    ) {
        let limit = self.receive_queue_bytes;
        let mode = self.mode;
        let Some(&id) = self.by_handle.get(&handle) else {
            return;
        };
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        if conn.refs == 0 || matches!(conn.phase, Phase::Closed(_)) {
            // Nobody will read it: the connection was dropped and is closing.
            return;
        }
        let cost = charge(&data);
        if conn.queued_bytes > 0 && conn.queued_bytes.saturating_add(cost) > limit {
            tracing::debug!(
                connection = %id,
                queued = conn.queued_bytes,
                limit,
                "receive queue full; closing with ReliableOverflow"
            );
            self.proto
                .close(now, handle, DisconnectReason::ReliableOverflow);
            return;
        }
        conn.queued_bytes += cost;
        match mode {
            EventMode::PerConnection => {
                conn.recv.push_back((channel, data));
                conn.wakers.wake_all();
            }
            EventMode::Stream => {
                self.events.push_back(RawEvent::Message {
                    id,
                    channel,
                    data,
                    kind,
                });
                self.event_wakers.wake_all();
            }
        }
    }

    fn on_closed(&mut self, handle: SessionHandle, reason: CloseReason) {
        let Some(id) = self.by_handle.remove(&handle) else {
            return;
        };
        let stats = self.proto.stats(handle);
        let mode = self.mode;
        let Some(conn) = self.conns.get_mut(&id) else {
            self.idle_wakers.wake_all();
            return;
        };
        let was_connecting = conn.phase == Phase::Connecting;
        conn.phase = Phase::Closed(reason);
        // Kept by the protocol endpoint only when the session ended abnormally.
        conn.recording = self.proto.take_recording(handle).map(Box::new);
        if stats.is_some() {
            conn.last_stats = stats;
        }
        conn.wakers.wake_all();
        conn.send_wakers.wake_all();
        if conn.refs == 0 {
            self.conns.remove(&id);
        } else if mode == EventMode::Stream && !was_connecting {
            self.events.push_back(RawEvent::Closed { id, reason });
            self.event_wakers.wake_all();
        } else if mode == EventMode::Stream && conn.report_connect {
            let error = crate::endpoint::connect_error(reason, self.connect_timeout);
            self.events.push_back(RawEvent::ConnectFailed { id, error });
            self.event_wakers.wake_all();
        }
        self.idle_wakers.wake_all();
    }

    /// Closes the sessions nobody accepted yet (the endpoint was closed or dropped), so that
    /// their queue entries do not keep the endpoint busy.
    pub(crate) fn drop_unaccepted(&mut self, now: Instant) {
        let mut ids: Vec<ConnectionId> = self.accept_queue.drain(..).collect();
        self.events.retain(|event| match event {
            RawEvent::Accepted(id) => {
                ids.push(*id);
                false
            }
            _ => true,
        });
        for id in ids {
            self.release(id, now);
        }
    }

    /// Registers a sender of `id` waiting for room on `channel`.
    pub(crate) fn block_sender(&mut self, id: ConnectionId, channel: Channel, waker: &Waker) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        conn.send_wakers.register(waker);
        if conn.blocked_channels == 0 {
            self.blocked.push(id);
        }
        conn.blocked_channels |= 1 << channel.index();
    }

    /// Wakes the senders whose session has room again on a channel they wait on (or ended).
    /// Called after input, which is what frees room (acknowledgements); costs one check per
    /// blocked connection, not per connection.
    pub(crate) fn wake_senders_with_room(&mut self) {
        let conns = &mut self.conns;
        let proto = &self.proto;
        self.blocked.retain(|id| {
            let Some(conn) = conns.get_mut(id) else {
                return false;
            };
            let room = matches!(conn.phase, Phase::Closed(_))
                || Channel::ALL.iter().any(|channel| {
                    conn.blocked_channels & (1 << channel.index()) != 0
                        && proto.send_capacity(conn.handle, *channel) > 0
                });
            if room {
                conn.blocked_channels = 0;
                conn.send_wakers.wake_all();
            }
            !room
        });
    }

    /// Marks the driver stopped, drops the shared reference to the socket (so the port is
    /// free whatever handles are still held), and wakes everyone so nothing waits forever.
    pub(crate) fn driver_stopped(&mut self) {
        self.driver_done = true;
        self.socket = None;
        for conn in self.conns.values_mut() {
            if !matches!(conn.phase, Phase::Closed(_)) {
                conn.phase =
                    Phase::Closed(CloseReason::new(DisconnectReason::ManagerDeleted, false));
            }
            conn.wakers.wake_all();
            conn.send_wakers.wake_all();
        }
        self.by_handle.clear();
        self.blocked.clear();
        self.accept_wakers.wake_all();
        self.event_wakers.wake_all();
        self.idle_wakers.wake_all();
    }
}

/// Shared by every handle; the last one gone tells the driver.
#[derive(Debug)]
pub(crate) struct EndpointRef {
    pub(crate) shared: Arc<Shared>,
}

impl Drop for EndpointRef {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.endpoint_alive = false;
        let now = state.now();
        state.drop_unaccepted(now);
        state.accept_wakers.wake_all();
        state.event_wakers.wake_all();
        state.wake_driver();
    }
}
