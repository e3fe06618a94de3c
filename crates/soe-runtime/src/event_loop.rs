//! The blocking event loop ([`EventLoop`]): the endpoint driven on the application's own thread.

use std::future::Future;
use std::io::{self, IoSliceMut};
use std::net::{SocketAddr, UdpSocket};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use quinn_udp::RecvMeta;
use soe_wire::DisconnectReason;

use crate::config::{Config, EventMode};
use crate::connection::Connection;
use crate::driver::Driver;
use crate::endpoint::{Core, EndpointEvent, SendBatch};
use crate::error::{ConnectError, RecvTimeoutError};
use crate::platform::{Notify, UdpIo, Waiter};
use crate::runtime::{AsyncTimer, AsyncUdpSocket, Outgoing, Runtime};
use crate::shared::Shared;

/// The blocking event loop: the endpoint driven on the application's own thread, which blocks in
/// the kernel between wake-ups, with no async runtime and no hand-over between threads.
///
/// [`EventLoop::next_event`] drives the endpoint until an event is ready, and hands the events of
/// one wake-up out one by one before it drives again. Messages the application queues while it
/// handles them (an echo, a reply) go out together on the next call, in one transmit pass for
/// every session (one `sendmmsg` on Linux), before the thread blocks again. A wake-up is: wait
/// for the socket or the endpoint's next deadline (`poll(2)` with the deadline as its timeout;
/// on Windows a peeking receive with a read timeout), read what arrived in batches (`recvmmsg`
/// through `quinn-udp` where the platform has it, at most 64 datagrams), run the due timers,
/// hand the events out, then transmit. It is the same driver as the async
/// [`Endpoint`](crate::Endpoint)'s, polled by this loop instead of a runtime's executor, so its
/// bounds and its order of work are the same.
///
/// Other threads may hold [`Connection`](crate::Connection)s and an [`EventLoopHandle`]: what they
/// queue wakes the loop, except a [batch](EventLoopHandle::send_batch), which they send
/// themselves (only while it is blocked; while it runs, a flag is enough). On Unix the
/// wake-up goes through a socket pair the loop polls beside its socket, so it reaches this loop
/// even when shards share the port (`SO_REUSEPORT`); on Windows, which has no `SO_REUSEPORT`,
/// it is an empty datagram to the socket's own address (see [`platform`](crate::platform)).
///
/// ```no_run
/// use soe_runtime::blocking::EventLoop;
/// use soe_runtime::{Config, EndpointConfig, EndpointEvent, SessionConfig};
/// # use std::sync::Arc;
/// # fn main() -> std::io::Result<()> {
/// let config = EndpointConfig::server(Arc::new(SessionConfig::new("Echo")));
/// let mut server = EventLoop::bind("127.0.0.1:20042".parse().unwrap(), Config::new(Arc::new(config)))?;
/// let mut conns = std::collections::HashMap::new();
/// while let Some(event) = server.next_event() {
///     match event {
///         EndpointEvent::Accepted(conn) => {
///             conns.insert(conn.id(), conn);
///         }
///         EndpointEvent::Message { connection, data, .. } => {
///             if let Some(conn) = conns.get(&connection) {
///                 let _ = conn.try_send(data);
///             }
///         }
///         EndpointEvent::Closed { connection, .. } => {
///             conns.remove(&connection);
///         }
///         _ => {}
///     }
/// }
/// # Ok(()) }
/// ```
///
/// Events come as in [`EventMode::Stream`] (the configured mode is overridden): one
/// [`EndpointEvent`] at a time, for every session.
///
/// With a receive-coalescing window ([`Config::receive_coalesce`]), a wake-up that read
/// datagrams is followed by a wait on the wake-up from other threads and the deadlines alone,
/// until the window ends: what arrives meanwhile is read in one wake-up.
pub struct EventLoop {
    core: Core,
    /// `None` once the driver finished (closed and no session left). The socket goes with
    /// it, so that the port is free once the driver has stopped.
    running: Option<Running>,
    wake: Arc<LoopWake>,
    waker: Waker,
}

impl std::fmt::Debug for EventLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventLoop")
            .field("local_addr", &self.core.local_addr)
            .field("running", &self.running.is_some())
            .finish_non_exhaustive()
    }
}

impl EventLoop {
    /// Binds a UDP socket to `addr` (with `config.socket`'s options).
    pub fn bind(addr: SocketAddr, config: impl Into<Config>) -> io::Result<Self> {
        let config = config.into();
        let socket = config.socket.bind(addr)?;
        Self::with_socket(socket, config)
    }

    /// Runs the loop on an already bound socket. On Windows it must not be connected (other
    /// threads wake the loop there with a datagram to the socket's own address).
    pub fn with_socket(socket: UdpSocket, config: Config) -> io::Result<Self> {
        let io = UdpIo::new((&socket).into());
        Self::with_io(socket, io, config)
    }

    /// [`with_socket`](Self::with_socket) with the socket's datagram I/O chosen: the plain
    /// path's tests run it where the batched layer would start.
    #[doc(hidden)]
    pub fn with_io(socket: UdpSocket, io: UdpIo, config: Config) -> io::Result<Self> {
        let config = config.with_event_mode(EventMode::Stream);
        socket.set_nonblocking(true)?;
        crate::platform::quiet_closed_ports(&socket);
        let local_addr = socket.local_addr()?;
        let (waiter, notify) = crate::platform::waker_pair(&socket)?;
        let wake = Arc::new(LoopWake {
            notify,
            blocked: AtomicBool::new(false),
            wanted: AtomicBool::new(false),
        });
        let io = Arc::new(LoopSocket {
            socket,
            io,
            waiter,
            readable: AtomicBool::new(true),
            writable: AtomicBool::new(true),
        });
        let proto = crate::shards::protocol_endpoint(&config, local_addr)?;
        let shared = Arc::new(Shared::new(proto, &config));
        let waker = Waker::from(wake.clone());
        {
            let mut state = shared.lock();
            state.driver_waker = Some(waker.clone());
            // A batch queued from another thread is sent from that thread, as the async
            // endpoint's is (see `EventLoopHandle::send_batch`).
            state.socket = Some(io.clone());
        }
        let driver = Driver::new(shared.clone(), io.clone(), Arc::new(LoopRuntime), &config);
        Ok(Self {
            core: Core::new(shared, local_addr),
            running: Some(Running { driver, io }),
            wake,
            waker,
        })
    }

    /// The address the socket is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.core.local_addr
    }

    /// A handle for other threads: close the endpoint, read its counters.
    pub fn handle(&self) -> EventLoopHandle {
        EventLoopHandle {
            core: self.core.clone(),
        }
    }

    /// Drives the endpoint until the next event; `None` once the endpoint is closed (by
    /// [`EventLoopHandle::close`]) and every session is gone.
    pub fn next_event(&mut self) -> Option<EndpointEvent> {
        self.next_event_until(None).ok()
    }

    /// Like [`next_event`](Self::next_event), giving up after `timeout`
    /// ([`RecvTimeoutError::Timeout`]); [`RecvTimeoutError::Closed`] once the endpoint is closed
    /// and every session gone. For a loop that has its own work on a schedule (a game tick).
    /// A timeout too far away for an [`Instant`] to hold (such as [`Duration::MAX`]) is no
    /// timeout.
    pub fn next_event_timeout(
        &mut self,
        timeout: Duration,
    ) -> Result<EndpointEvent, RecvTimeoutError> {
        let until = Instant::now().checked_add(timeout).map(|at| (at, timeout));
        self.next_event_until(until)
    }

    /// Drives the endpoint for one wake-up without handing out events: blocks until a datagram
    /// arrives, the endpoint's next deadline, `timeout` (one past what [`Instant`] can hold is
    /// no limit), or a wake-up from another thread (a send, a close, [`EventLoopHandle::wake`]),
    /// then receives, runs the timers that are due and transmits. Events wait in the queue,
    /// counted against [`Config::receive_queue_bytes`], until
    /// [`try_next_event`](Self::try_next_event) takes them.
    ///
    /// For a loop that hands events on to another thread and must keep the sessions going
    /// (acks, resends, keep-alives) while that thread is busy: a binding's pump thread. Returns
    /// `false` once the driver has stopped (the endpoint closed and every session gone), and
    /// then at once.
    pub fn drive(&mut self, timeout: Duration) -> bool {
        self.block(Instant::now().checked_add(timeout));
        self.turn();
        self.running.is_some()
    }

    /// The next event already queued, without driving the endpoint or blocking:
    /// [`RecvTimeoutError::Timeout`] (of zero) when there is none, [`RecvTimeoutError::Closed`]
    /// once the endpoint is closed and every event was taken. See [`drive`](Self::drive).
    pub fn try_next_event(&mut self) -> Result<EndpointEvent, RecvTimeoutError> {
        self.take()
            .unwrap_or(Err(RecvTimeoutError::Timeout(Duration::ZERO)))
    }

    /// The loop's socket while the driver runs (`None` once it stopped and closed it): for a
    /// host that waits for the socket on an event loop of its own (Node's libuv loop, through
    /// a duplicate of it), then turns this loop with [`turn_ready`](Self::turn_ready).
    pub fn socket(&self) -> Option<&UdpSocket> {
        self.running.as_ref().map(|r| &r.io.socket)
    }

    /// When the loop needs its next turn, for a host that waits on its own event loop instead
    /// of [`drive`](Self::drive): now (or earlier) when something asked for a turn since the
    /// last one (a send, a close, [`EventLoopHandle::wake`], the driver's own yield), else the
    /// endpoint's next deadline; `None` when only a datagram can bring work, and once the
    /// driver has stopped. Such a host calls it after every turn and after its own calls into
    /// the endpoint, which may move the deadline.
    pub fn next_turn(&self) -> Option<Instant> {
        self.running.as_ref()?;
        if self.wake.wanted.load(Ordering::SeqCst) {
            return Some(Instant::now());
        }
        self.core.shared().lock().proto.poll_timeout()
    }

    /// Whether a send was refused for a full socket buffer: a host waiting on its own event
    /// loop then waits for the socket to take datagrams too, and passes `writable` to
    /// [`turn_ready`](Self::turn_ready).
    pub fn wants_writable(&self) -> bool {
        self.running
            .as_ref()
            .is_some_and(|r| !r.io.writable.load(Ordering::Relaxed))
    }

    /// One turn of the loop without blocking, after a host's own wait found the socket
    /// `readable` (datagrams may wait) or `writable`, or a deadline from
    /// [`next_turn`](Self::next_turn) passed: receives (only when `readable`), runs the timers
    /// that are due, routes the events and transmits. Events wait for
    /// [`try_next_event`](Self::try_next_event), as after [`drive`](Self::drive). Returns
    /// `false` once the driver has stopped.
    pub fn turn_ready(&mut self, readable: bool, writable: bool) -> bool {
        if let Some(Running { io, .. }) = self.running.as_ref() {
            if readable {
                io.readable.store(true, Ordering::Relaxed);
            }
            if writable {
                io.writable.store(true, Ordering::Relaxed);
            }
        }
        self.turn();
        self.running.is_some()
    }

    /// Closes every session with `reason` and stops accepting new ones; the loop ends once
    /// they are gone.
    pub fn close(&self, reason: DisconnectReason) {
        self.core.close(reason);
    }

    /// How many sessions the protocol endpoint holds.
    pub fn session_count(&self) -> usize {
        self.core.shared().lock().proto.len()
    }

    fn next_event_until(
        &mut self,
        until: Option<(Instant, Duration)>,
    ) -> Result<EndpointEvent, RecvTimeoutError> {
        loop {
            if let Some(taken) = self.take() {
                return taken;
            }
            self.turn();
            if let Some(taken) = self.take() {
                return taken;
            }
            if let Some((at, timeout)) = until {
                if Instant::now() >= at {
                    return Err(RecvTimeoutError::Timeout(timeout));
                }
            }
            self.block(until.map(|(at, _)| at));
        }
    }

    /// The next queued event, or the end; `None` while there is neither.
    fn take(&self) -> Option<Result<EndpointEvent, RecvTimeoutError>> {
        match self.core.try_event() {
            Poll::Ready(Some(event)) => Some(Ok(event)),
            Poll::Ready(None) => Some(Err(RecvTimeoutError::Closed)),
            Poll::Pending if self.running.is_none() => Some(Err(RecvTimeoutError::Closed)),
            Poll::Pending => None,
        }
    }

    /// One wake-up of the driver: receive what is there, run due timers, route the events,
    /// transmit what every session has ready.
    fn turn(&mut self) {
        let Some(running) = self.running.as_mut() else {
            return;
        };
        self.wake.wanted.store(false, Ordering::SeqCst);
        let mut cx = Context::from_waker(&self.waker);
        if Pin::new(&mut running.driver).poll(&mut cx).is_ready() {
            self.running = None;
            self.wake.notify.release();
        }
    }

    /// Blocks until the socket is readable (or writable, when a send was refused), the
    /// endpoint's next deadline, `until`, or a wake-up from another thread.
    fn block(&mut self, until: Option<Instant>) {
        let Some(Running { io, driver }) = self.running.as_ref() else {
            return;
        };
        let deadline = self.core.shared().lock().proto.poll_timeout();
        let now = Instant::now();
        let wait = plan_wait(deadline, until, driver.hold_until(), now);
        // From here on a wake-up from another thread sends a datagram; one that came before
        // is seen in `wanted`.
        self.wake.blocked.store(true, Ordering::SeqCst);
        if self.wake.wanted.swap(false, Ordering::SeqCst) || wait.timeout == Some(Duration::ZERO) {
            // No wait, so `poll(2)` does not say whether datagrams came: the next turn tries
            // the socket (a receive that finds it empty costs what a zero-timeout poll would).
            // Otherwise a loop woken before every block (a host thread's sends, due timers)
            // would never read its socket again, acknowledgements included.
            io.readable.store(true, Ordering::Relaxed);
        } else if wait.socket {
            io.wait(wait.timeout);
        } else {
            // A coalescing window: datagrams wait in the socket until it ends, then the turn
            // that reads them does not know whether any came, so it tries.
            io.wait_without_socket(wait.timeout);
            io.readable.store(true, Ordering::Relaxed);
        }
        self.wake.blocked.store(false, Ordering::SeqCst);
    }
}

/// How the loop waits: until when, and whether for its socket too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Wait {
    /// `None`: until woken.
    timeout: Option<Duration>,
    /// Whether a datagram ends the wait: not while the driver holds the socket unread (a
    /// receive-coalescing window), so the datagrams of the window cost one wake-up together.
    socket: bool,
}

/// The wait before the next turn, at `now`: until the endpoint's `deadline`, the caller's
/// `until` or the end of the driver's coalescing window `hold`, whichever comes first; for the
/// socket too unless the window is still open.
fn plan_wait(
    deadline: Option<Instant>,
    until: Option<Instant>,
    hold: Option<Instant>,
    now: Instant,
) -> Wait {
    let hold = hold.filter(|&h| h > now);
    let wake_at = [deadline, until, hold].into_iter().flatten().min();
    Wait {
        timeout: wake_at.map(|at| at.saturating_duration_since(now)),
        socket: hold.is_none(),
    }
}

/// What other threads may do with an [`EventLoop`]: close it, read its counters. Clones share
/// the endpoint.
#[derive(Debug, Clone)]
pub struct EventLoopHandle {
    core: Core,
}

impl EventLoopHandle {
    /// Closes every session with `reason` and stops accepting new ones (wakes the loop).
    pub fn close(&self, reason: DisconnectReason) {
        self.core.close(reason);
    }

    /// How many sessions the protocol endpoint holds.
    pub fn session_count(&self) -> usize {
        self.core.shared().lock().proto.len()
    }

    /// The endpoint-wide counters.
    pub fn stats(&self) -> soe_session::EndpointStats {
        self.core.shared().lock().proto.endpoint_stats().clone()
    }

    /// The address the socket is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.core.local_addr
    }

    /// Wakes the loop's thread for one turn: a [`drive`](EventLoop::drive) blocked in the
    /// kernel returns. For a thread that has work for the loop's thread outside the endpoint
    /// (a binding's host thread that made room for more events).
    pub fn wake(&self) {
        self.core.shared().lock().wake_driver();
    }

    /// Opens a session to `remote` and returns its handle without waiting for the handshake;
    /// the loop reports how the handshake ended: [`EndpointEvent::Connected`] (then the
    /// session's messages and its close come as for an accepted session) or
    /// [`EndpointEvent::ConnectFailed`] (within the connect timeout). Fails at once when the
    /// endpoint is closed or the protocol endpoint refuses to start the session. Dropping every
    /// handle before the handshake ended abandons it, and no event follows.
    pub fn connect(&self, remote: SocketAddr) -> Result<Connection, ConnectError> {
        self.core.start_connect(remote, true)
    }

    /// Queues messages on any of the loop's connections under one lock, then sends what they
    /// made ready from the calling thread, in as few system calls as the socket allows, as
    /// [`Endpoint::send_batch`](crate::Endpoint::send_batch) does: for a host thread that
    /// answers many sessions at once (a binding's JS thread, a game tick on a thread of its
    /// own), one lock for the batch and no wake-up of the loop. The loop still sends what the
    /// socket refuses, what is due later and, past one wake-up's worth of datagrams (64), the
    /// rest (the batch wakes it for those). As there, `queue` must not call other methods of
    /// this endpoint or its connections. On the loop's own thread, plain
    /// [`Connection`](crate::Connection) sends cost no wake-up at all.
    pub fn send_batch<T>(&self, queue: impl FnOnce(&mut SendBatch<'_>) -> T) -> T {
        self.core.send_batch(queue)
    }
}

/// Wakes the loop from another thread: a flag while it runs, a [`Notify`] while it is
/// blocked.
#[derive(Debug)]
struct LoopWake {
    notify: Notify,
    /// The loop is (about to be) blocked in the kernel.
    blocked: AtomicBool,
    /// Something asked for a wake-up since the loop's last turn.
    wanted: AtomicBool,
}

impl Wake for LoopWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.wanted.store(true, Ordering::SeqCst);
        if self.blocked.swap(false, Ordering::SeqCst) {
            self.notify.notify();
        }
    }
}

/// A loop whose driver has not finished, and its socket (for the waits).
struct Running {
    driver: Driver,
    io: Arc<LoopSocket>,
}

/// The loop's socket: non-blocking, with the readiness the loop last saw, so that the driver
/// makes no system call that can only find nothing.
#[derive(Debug)]
struct LoopSocket {
    socket: UdpSocket,
    io: UdpIo,
    waiter: Waiter,
    /// Datagrams may be waiting: set by the wait, cleared by a receive that found fewer than
    /// it asked for.
    readable: AtomicBool,
    /// The socket takes datagrams: cleared by a refused send, set by the wait.
    writable: AtomicBool,
}

impl LoopSocket {
    /// Blocks until the socket is readable (or writable, if a send was refused), a wake-up
    /// from another thread, or `timeout` passed.
    fn wait(&self, timeout: Option<Duration>) {
        let write = !self.writable.load(Ordering::Relaxed);
        let ready = self.waiter.wait(&self.socket, write, timeout);
        if ready.readable {
            self.readable.store(true, Ordering::Relaxed);
        }
        if ready.writable {
            self.writable.store(true, Ordering::Relaxed);
        }
    }

    /// Blocks until a wake-up from another thread or `timeout` passed, leaving the socket
    /// alone (its datagrams wait for the end of a coalescing window).
    fn wait_without_socket(&self, timeout: Option<Duration>) {
        let write = !self.writable.load(Ordering::Relaxed);
        let ready = self
            .waiter
            .wait_without_socket(&self.socket, write, timeout);
        if ready.writable {
            self.writable.store(true, Ordering::Relaxed);
        }
    }

    /// Sends one transmit through the batched layer or the plain path.
    fn send(&self, transmit: &quinn_udp::Transmit<'_>) -> io::Result<()> {
        self.io.try_send((&self.socket).into(), transmit, |d, to| {
            self.socket.send_to(d, to)
        })
    }

    /// Notes a refused send.
    fn refused<T>(&self, result: io::Result<T>) -> io::Result<T> {
        if result
            .as_ref()
            .is_err_and(|e| e.kind() == io::ErrorKind::WouldBlock)
        {
            self.writable.store(false, Ordering::Relaxed);
        }
        result
    }
}

impl AsyncUdpSocket for LoopSocket {
    fn poll_recv(
        &self,
        _cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        if !self.readable.load(Ordering::Relaxed) {
            return Poll::Pending;
        }
        let asked = bufs.len().min(self.io.batch_size());
        match self.io.recv((&self.socket).into(), bufs, meta, |buf| {
            self.socket.recv_from(buf)
        }) {
            Ok(n) => {
                // Fewer than asked for: the socket is empty (the wait tells of the next).
                if n < asked {
                    self.readable.store(false, Ordering::Relaxed);
                }
                Poll::Ready(Ok(n))
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.readable.store(false, Ordering::Relaxed);
                Poll::Pending
            }
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    fn try_send(&self, destination: SocketAddr, datagram: &[u8]) -> io::Result<()> {
        let transmit = crate::socket::datagram_transmit(destination, datagram);
        self.refused(self.send(&transmit))
    }

    fn try_send_segments(
        &self,
        destination: SocketAddr,
        contents: &[u8],
        segment_size: usize,
    ) -> io::Result<()> {
        let transmit = crate::socket::segments_transmit(destination, contents, segment_size);
        self.refused(self.send(&transmit))
    }

    #[cfg(target_os = "linux")]
    fn try_send_batch(&self, buf: &[u8], batch: &[Outgoing]) -> io::Result<usize> {
        self.refused(crate::socket::send_batch(self, &self.socket, buf, batch))
    }

    #[cfg(not(target_os = "linux"))]
    fn try_send_batch(&self, buf: &[u8], batch: &[Outgoing]) -> io::Result<usize> {
        crate::runtime::send_one_by_one(self, buf, batch)
    }

    fn max_send_segments(&self) -> usize {
        self.io.max_gso_segments()
    }

    fn poll_writable(&self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.writable.load(Ordering::Relaxed) {
            Poll::Ready(Ok(()))
        } else {
            Poll::Pending
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    fn max_receive_segments(&self) -> usize {
        self.io.gro_segments()
    }

    fn may_be_readable(&self) -> bool {
        self.readable.load(Ordering::Relaxed)
    }
}

/// The loop's "runtime": a clock and a timer that is due once its deadline passed (the loop
/// blocks until the endpoint's next deadline, so the timer needs no waker).
#[derive(Debug)]
struct LoopRuntime;

impl Runtime for LoopRuntime {
    fn new_timer(&self, deadline: Instant) -> Pin<Box<dyn AsyncTimer>> {
        Box::pin(LoopTimer(deadline))
    }

    fn spawn(&self, _future: Pin<Box<dyn Future<Output = ()> + Send>>) {
        debug_assert!(false, "the event loop spawns nothing");
    }

    fn wrap_udp_socket(&self, _socket: UdpSocket) -> io::Result<Arc<dyn AsyncUdpSocket>> {
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// See [`LoopRuntime`].
#[derive(Debug)]
struct LoopTimer(Instant);

impl AsyncTimer for LoopTimer {
    fn reset(mut self: Pin<&mut Self>, deadline: Instant) {
        self.0 = deadline;
    }

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.0 {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_coalescing_window_keeps_the_socket_out_of_the_wait_until_it_ends() {
        let now = Instant::now();
        let ms = Duration::from_millis;
        // No window: the socket, until the earliest of the deadline and the caller's limit.
        let plain = plan_wait(Some(now + ms(30)), Some(now + ms(20)), None, now);
        assert_eq!(
            plain,
            Wait {
                timeout: Some(ms(20)),
                socket: true
            }
        );
        assert_eq!(
            plan_wait(None, None, None, now),
            Wait {
                timeout: None,
                socket: true
            }
        );
        // An open window: without the socket, until the window ends (or sooner).
        assert_eq!(
            plan_wait(None, None, Some(now + ms(1)), now),
            Wait {
                timeout: Some(ms(1)),
                socket: false
            }
        );
        assert_eq!(
            plan_wait(Some(now + ms(2)), Some(now + ms(5)), Some(now + ms(3)), now),
            Wait {
                timeout: Some(ms(2)),
                socket: false
            }
        );
        // A window that has ended: the socket again.
        assert_eq!(
            plan_wait(Some(now + ms(9)), None, Some(now), now),
            Wait {
                timeout: Some(ms(9)),
                socket: true
            }
        );
    }
}
