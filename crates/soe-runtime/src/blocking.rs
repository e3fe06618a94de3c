//! A blocking API on std threads only: no async runtime needed.
//!
//! [`Endpoint::bind`] starts one background thread that owns a std `UdpSocket` and drives the
//! protocol endpoint: it blocks until the socket is readable, the endpoint's next deadline, or a
//! wake-up from a handle (after queuing a send or a close), then reads what arrived. On Unix it
//! blocks in `poll(2)` on the socket and on a socket pair that the handles write to, so a wake-up
//! reaches this thread even when shards share the port (`SO_REUSEPORT`). On Windows it blocks in
//! a peeking receive with a read timeout, and the handles send an empty datagram to the socket's
//! own address (no SOE packet is empty, so the thread just takes it as a wake-up); see
//! [`platform`](crate::platform).
//!
//! [`EventLoop`] runs the endpoint on the caller's thread instead: no thread of its own, no
//! hand-over of events or sends between threads, batched receives and sends.
//!
//! ```no_run
//! use soe_runtime::blocking::Endpoint;
//! use soe_runtime::Config;
//! # fn main() -> std::io::Result<()> {
//! let client = Endpoint::client(Config::default())?;
//! let conn = client.connect("127.0.0.1:20042".parse().unwrap())?;
//! conn.send(bytes::Bytes::from_static(b"hello"))?;
//! let reply = conn.recv();
//! # Ok(()) }
//! ```

use std::future::Future;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, JoinHandle, Thread};
use std::time::{Duration, Instant};

use bytes::Bytes;
use soe_session::SessionStats;
use soe_wire::{Channel, DisconnectReason};

use crate::config::Config;
use crate::connection::{self, CloseReason, ConnectionId};
use crate::driver::{RECV_BUDGET, max_datagram_size};
use crate::endpoint::Core;
use crate::error::{ConnectError, RecvTimeoutError, SendError, TrySendError};
use crate::platform::{Notify, Waiter};
use crate::shared::{Shared, is_port_unreachable};

pub use crate::event_loop::{EventLoop, EventLoopHandle};

/// An endpoint driven by a background thread; see the [module documentation](self).
#[derive(Debug, Clone)]
pub struct Endpoint {
    core: Core,
    thread: Arc<Mutex<Option<JoinHandle<()>>>>,
}

impl Endpoint {
    /// Binds a UDP socket to `addr` and starts the driver thread.
    pub fn bind(addr: SocketAddr, config: impl Into<Config>) -> io::Result<Self> {
        let config = config.into();
        let socket = config.socket.bind(addr)?;
        Self::with_socket(socket, config)
    }

    /// A client endpoint on an ephemeral port of every IPv4 interface.
    pub fn client(config: impl Into<Config>) -> io::Result<Self> {
        Self::bind(SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)), config)
    }

    /// Runs an endpoint on an already bound socket. On Windows it must not be connected (the
    /// handles wake the driver thread there with a datagram to the socket's own address).
    pub fn with_socket(socket: UdpSocket, config: Config) -> io::Result<Self> {
        socket.set_nonblocking(true)?;
        crate::platform::quiet_closed_ports(&socket);
        let local_addr = socket.local_addr()?;
        let proto = crate::shards::protocol_endpoint(&config, local_addr)?;
        let shared = Arc::new(Shared::new(proto, &config));
        let (waiter, notify) = crate::platform::waker_pair(&socket)?;
        let waker = Arc::new(SelfWake {
            notify,
            armed: AtomicBool::new(false),
        });
        shared.lock().driver_waker = Some(Waker::from(waker.clone()));
        let buf_len = max_datagram_size(&config);
        let thread_shared = shared.clone();
        let thread = thread::Builder::new()
            .name(format!("soe-endpoint {local_addr}"))
            .spawn(move || run(&thread_shared, &socket, &waiter, &waker, buf_len))?;
        Ok(Self {
            core: Core::new(shared, local_addr),
            thread: Arc::new(Mutex::new(Some(thread))),
        })
    }

    /// The address the socket is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.core.local_addr
    }

    /// How many times the socket reported that a datagram it sent met a closed port; see
    /// [`Endpoint::port_unreachable`](crate::Endpoint::port_unreachable). On Windows the
    /// socket hears of closed ports without being connected.
    pub fn port_unreachable(&self) -> u64 {
        self.core.shared().lock().port_unreachable
    }

    /// Waits for the next session a peer opens; `None` once the endpoint is closed.
    pub fn accept(&self) -> Option<Connection> {
        block_on(std::future::poll_fn(|cx| self.core.poll_accept(cx))).map(Connection)
    }

    /// Opens a session to `remote` and waits for the handshake (at most the connect timeout).
    pub fn connect(&self, remote: SocketAddr) -> Result<Connection, ConnectError> {
        block_on(self.core.connect(remote)).map(Connection)
    }

    /// Closes every session with `reason` and stops accepting new ones.
    pub fn close(&self, reason: DisconnectReason) {
        self.core.close(reason);
    }

    /// Waits until no session is left and nothing is left to send. After
    /// [`close`](Self::close), also waits for the driver thread to finish: the UDP socket is
    /// then closed and its port free to bind again, even while handles are still held.
    pub fn wait_idle(&self) {
        block_on(std::future::poll_fn(|cx| self.core.poll_idle(cx)));
        let closing = self.core.shared().lock().closing.is_some();
        if closing {
            let thread = self
                .thread
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take();
            if let Some(thread) = thread {
                // Wake it so it sees it may stop, then wait for it.
                self.core.shared().lock().wake_driver();
                let _ = thread.join();
            }
        }
    }
}

/// A blocking handle to one session. Clones share it; dropping the last one closes it.
#[derive(Debug, Clone)]
pub struct Connection(connection::Connection);

impl Connection {
    /// The async handle behind this one.
    pub fn as_async(&self) -> &connection::Connection {
        &self.0
    }

    /// This connection's id within its endpoint.
    pub fn id(&self) -> ConnectionId {
        self.0.id()
    }

    /// The peer's address.
    pub fn remote_addr(&self) -> SocketAddr {
        self.0.remote_addr()
    }

    /// Sends `data` reliably on channel 0, blocking while the send queue is full.
    pub fn send(&self, data: Bytes) -> Result<(), SendError> {
        block_on(self.0.send(data))
    }

    /// Sends `data` reliably on `channel`, blocking while the send queue is full.
    pub fn send_on(&self, channel: Channel, data: Bytes) -> Result<(), SendError> {
        block_on(self.0.send_on(channel, data))
    }

    /// Queues `data` on channel 0 if there is room, without blocking.
    pub fn try_send(&self, data: Bytes) -> Result<(), TrySendError> {
        self.0.try_send(data)
    }

    /// Blocks for the next message; `None` once closed and drained.
    pub fn recv(&self) -> Option<Bytes> {
        block_on(self.0.recv())
    }

    /// Blocks for the next message at most `timeout`.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<Bytes, RecvTimeoutError> {
        match block_on_timeout(self.0.recv(), timeout) {
            Some(Some(data)) => Ok(data),
            Some(None) => Err(RecvTimeoutError::Closed),
            None => Err(RecvTimeoutError::Timeout(timeout)),
        }
    }

    /// Closes the session with `reason`.
    pub fn close(&self, reason: DisconnectReason) {
        self.0.close(reason);
    }

    /// Turns RC4 on or off for this session from now on (see
    /// [`Connection::set_encryption`](crate::Connection::set_encryption)).
    pub fn set_encryption(&self, on: bool) -> bool {
        self.0.set_encryption(on)
    }

    /// Blocks until the session ends and tells why.
    pub fn closed(&self) -> CloseReason {
        block_on(self.0.closed())
    }

    /// The session's counters.
    pub fn stats(&self) -> Option<SessionStats> {
        self.0.stats()
    }

    /// Starts or stops recording this session (see
    /// [`Connection::set_recording`](crate::Connection::set_recording)).
    pub fn set_recording(&self, on: bool) -> bool {
        self.0.set_recording(on)
    }

    /// Takes this session's recording (see
    /// [`Connection::take_recording`](crate::Connection::take_recording)).
    pub fn take_recording(&self) -> Option<soe_session::Recording> {
        self.0.take_recording()
    }
}

/// The driver thread's loop.
fn run(shared: &Shared, socket: &UdpSocket, waiter: &Waiter, waker: &SelfWake, buf_len: usize) {
    let mut buf = vec![0u8; buf_len];
    let mut tx = Vec::with_capacity(buf_len);
    loop {
        // From here on, a handle's wake-up notifies the waiter (see `SelfWake`).
        waker.armed.store(false, Ordering::SeqCst);
        let now = Instant::now();
        let mut state = shared.lock();
        if state.proto.poll_timeout().is_some_and(|t| t <= now) {
            state.proto.handle_timeout(now);
        }
        state.route_events(now);
        while let Some(t) = state.proto.poll_transmit(now, &mut tx) {
            let datagram = tx.get(..t.len).unwrap_or(&tx);
            if let Err(e) = send_to(socket, waiter, waker, datagram, t.destination) {
                tracing::debug!(destination = %t.destination, error = %e, "UDP send error");
                if is_port_unreachable(&e) {
                    state.port_unreachable += 1;
                }
            }
        }
        state.route_events(now);
        state.wake_senders_with_room();
        if state.may_stop() {
            state.driver_stopped();
            state.driver_waker = None;
            waker.notify.release();
            return;
        }
        if state.is_idle() {
            state.idle_wakers.wake_all();
        }
        let timeout = state
            .proto
            .poll_timeout()
            .map(|deadline| deadline.saturating_duration_since(now));
        drop(state);
        if timeout != Some(Duration::ZERO) {
            waiter.wait(socket, false, timeout);
        }
        receive(shared, socket, &mut buf);
    }
}

/// Reads what the socket holds, at most [`RECV_BUDGET`] datagrams, into the protocol endpoint.
fn receive(shared: &Shared, socket: &UdpSocket, buf: &mut [u8]) {
    for _ in 0..RECV_BUDGET {
        match socket.recv_from(buf) {
            Ok((0, _)) => {} // a wake-up (Windows)
            Ok((len, from)) => {
                let mut state = shared.lock();
                // Once the endpoint is closing, strangers cannot open sessions any more.
                let stranger = state.closing.is_some() && state.proto.handle_of(from).is_none();
                if let (Some(datagram), false) = (buf.get(..len), stranger) {
                    state.proto.handle_datagram(Instant::now(), from, datagram);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            // A closed port (Windows reports it on any socket, Linux on a connected one), a
            // datagram longer than the buffer (Windows), an interrupted call: each concerns one
            // datagram, not the socket.
            Err(e) => {
                tracing::debug!(error = %e, "UDP receive error");
                if is_port_unreachable(&e) {
                    shared.lock().port_unreachable += 1;
                }
            }
        }
    }
}

/// Sends one datagram, waiting (a few times, briefly) while the socket's buffer is full, as the
/// blocking socket this driver had did. A wake-up the wait takes is given back, so the loop does
/// not sleep through it.
fn send_to(
    socket: &UdpSocket,
    waiter: &Waiter,
    waker: &SelfWake,
    datagram: &[u8],
    destination: SocketAddr,
) -> io::Result<usize> {
    const WAITS: u32 = 10;
    const WAIT: Duration = Duration::from_millis(100);
    let mut waits = 0;
    loop {
        match socket.send_to(datagram, destination) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && waits < WAITS => {
                waits += 1;
                if waiter.wait(socket, true, Some(WAIT)).woken {
                    waker.notify.notify();
                }
            }
            result => return result,
        }
    }
}

/// Wakes the driver thread out of its wait. `armed` keeps it to one notification per loop of
/// the thread.
#[derive(Debug)]
struct SelfWake {
    notify: Notify,
    armed: AtomicBool,
}

impl Wake for SelfWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.armed.swap(true, Ordering::SeqCst) {
            self.notify.notify();
        }
    }
}

/// Unparks the thread that blocks on a future.
struct ThreadWaker(Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `future` on the calling thread, parking between polls.
fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let waker = Waker::from(Arc::new(ThreadWaker(thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        thread::park();
    }
}

/// Like [`block_on`], giving up (`None`) after `timeout` (never, when `timeout` is too far away
/// for an [`Instant`] to hold).
fn block_on_timeout<F: Future>(future: F, timeout: Duration) -> Option<F::Output> {
    let Some(deadline) = Instant::now().checked_add(timeout) else {
        return Some(block_on(future));
    };
    let mut future = pin!(future);
    let waker = Waker::from(Arc::new(ThreadWaker(thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return Some(output);
        }
        let now = Instant::now();
        if now >= deadline {
            return None;
        }
        thread::park_timeout(deadline - now);
    }
}
