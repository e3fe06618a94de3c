//! The task that owns an endpoint's socket and timer and drives the protocol endpoint.
//!
//! One wake-up does, in order: receive (a bounded batch of datagrams), handle expired timers,
//! route events to the handles, transmit (a bounded batch), then re-arm the single timer, only if
//! the endpoint's next deadline moved. There is no periodic tick: the task sleeps until the next
//! datagram, the next deadline, or a handle's request. When a batch bound is hit, the task wakes
//! itself and yields, so other tasks (and other endpoints on the same runtime) run in between.

use std::future::Future;
use std::io::{self, IoSliceMut};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use quinn_udp::{BATCH_SIZE, RecvMeta};

use crate::config::Config;
use crate::runtime::{AsyncTimer, AsyncUdpSocket, Runtime};
use crate::shared::{Shared, State, is_port_unreachable};
use crate::tx::{self, TxBatch};

/// The most datagrams one wake-up reads before yielding (with GRO, the last receive call may
/// bring one slot's coalesced datagrams, at most 63, past it).
pub(crate) const RECV_BUDGET: usize = 64;
/// The most datagrams one wake-up sends before yielding (exactly: a GSO batch is cut to what is
/// left of it).
pub(crate) const SEND_BUDGET: usize = 64;
/// The smallest receive buffer per datagram, when one is configured.
const MIN_DATAGRAM_SIZE: usize = 512;
/// The smallest receive buffer per datagram by default: peers that ignore the udp_length this
/// side announces (soe-protocol sends up to its own; docs/interop.md) still have their datagrams
/// read whole up to this size, without GRO too.
pub(crate) const DEFAULT_MIN_DATAGRAM_SIZE: usize = 9000;
/// The fewest slots a receive call offers (see `Driver::offer`): 8, or all there are where a
/// call takes fewer (quinn-udp's `BATCH_SIZE` is 1 where there is no `recvmmsg`, as on Windows).
const SMALL_OFFER: usize = if BATCH_SIZE < 8 { BATCH_SIZE } else { 8 };
/// Receive buffers of one batch, all slots together, when the platform coalesces (GRO).
const GRO_BUFFER_BUDGET: usize = 1024 * 1024;

/// The driver future; see the module documentation.
pub(crate) struct Driver {
    shared: Arc<Shared>,
    /// `None` once the driver stopped: the port is given back before anyone hears of it.
    socket: Option<Arc<dyn AsyncUdpSocket>>,
    runtime: Arc<dyn Runtime>,
    timer: Option<Pin<Box<dyn AsyncTimer>>>,
    timer_deadline: Option<Instant>,
    recv_buf: Box<[u8]>,
    slot_size: usize,
    slots: usize,
    metas: [RecvMeta; BATCH_SIZE],
    /// How many slots the next receive call offers: twice what the last one filled (a full
    /// one: twice what it offered), from [`SMALL_OFFER`] to [`BATCH_SIZE`]. Each slot offered
    /// costs setting up (here and in `quinn-udp`'s `recvmmsg` headers), filled or not; a call
    /// that fills all it offered leaves the socket marked readable, so the next call, at once,
    /// reads on with more.
    offer: usize,
    /// The batch being sent.
    tx: TxBatch,
    /// How many datagrams one send may carry (the socket's GSO limit; 1 without GSO).
    max_send_segments: usize,
    /// The receive-coalescing window ([`Config::receive_coalesce`]); zero: off.
    coalesce: Duration,
    /// While coalescing: the socket is not read before this instant (set by a wake-up that
    /// read datagrams, but not a full budget of them).
    hold_until: Option<Instant>,
}

impl Driver {
    pub(crate) fn new(
        shared: Arc<Shared>,
        socket: Arc<dyn AsyncUdpSocket>,
        runtime: Arc<dyn Runtime>,
        config: &Config,
    ) -> Self {
        let datagram = announced_datagram_size(config);
        let segments = socket.max_receive_segments().max(1);
        let max_send_segments = socket.max_send_segments().clamp(1, SEND_BUDGET);
        // With GRO a slot takes `segments` coalesced datagrams, or one datagram of up to the
        // whole slot; it is never smaller than one datagram buffer.
        let slot_size = datagram
            .saturating_mul(segments)
            .max(max_datagram_size(config));
        let slots = (GRO_BUFFER_BUDGET / slot_size.max(1)).clamp(1, BATCH_SIZE);
        let slots = if segments == 1 { BATCH_SIZE } else { slots };
        Self {
            shared,
            socket: Some(socket),
            runtime,
            timer: None,
            timer_deadline: None,
            recv_buf: vec![0; slot_size * slots].into_boxed_slice(),
            slot_size,
            slots,
            metas: [RecvMeta::default(); BATCH_SIZE],
            offer: BATCH_SIZE,
            tx: TxBatch::default(),
            max_send_segments,
            coalesce: config
                .receive_coalesce
                .min(crate::config::MAX_RECEIVE_COALESCE),
            hold_until: None,
        }
    }

    /// Until when the driver leaves the socket unread (the receive-coalescing window), if it
    /// does: a blocking loop then waits without the socket until this instant.
    pub(crate) fn hold_until(&self) -> Option<Instant> {
        self.hold_until
    }

    /// Whether this wake-up leaves the socket unread: a coalescing window is open. A window
    /// that has passed is closed here.
    fn holding(&mut self) -> bool {
        let Some(until) = self.hold_until else {
            return false;
        };
        if self.runtime.now() < until {
            return true;
        }
        self.hold_until = None;
        false
    }

    /// Reads up to [`RECV_BUDGET`] datagrams into the protocol endpoint; returns how many.
    fn receive(&mut self, cx: &mut Context<'_>, socket: &dyn AsyncUdpSocket) -> usize {
        let mut received = 0;
        // The loop's socket knows when a receive would find nothing (no readiness since its
        // last short batch): the buffers are then not set up at all.
        while received < RECV_BUDGET && socket.may_be_readable() {
            // No more slots than the budget has datagrams left: without GRO a wake-up reads at
            // most RECV_BUDGET datagrams; with GRO, the last slot may bring up to one slot's
            // coalesced datagrams past it. And no more than the last receive suggests (see
            // `offer`): a full batch asks again, with twice the slots.
            let slots = self
                .slots
                .min(self.offer)
                .min(RECV_BUDGET.saturating_sub(received).max(1));
            let polled = if slots <= SMALL_OFFER {
                self.poll_recv_into::<SMALL_OFFER>(cx, socket, slots)
            } else {
                self.poll_recv_into::<BATCH_SIZE>(cx, socket, slots)
            };
            // Asked at once: the flag is the last call's.
            let registered = socket.registered_after_recv();
            let filled = match polled {
                Poll::Ready(Ok(n)) => {
                    self.offer = if n >= slots {
                        slots.saturating_mul(2)
                    } else {
                        n.saturating_mul(2)
                    }
                    .clamp(SMALL_OFFER, BATCH_SIZE);
                    n
                }
                Poll::Ready(Err(e)) => {
                    // UDP receive errors (an ICMP error reported late, an interrupted call)
                    // concern one datagram, not the socket: note and go on.
                    tracing::debug!(error = %e, "UDP receive error");
                    if e.kind() == io::ErrorKind::WouldBlock {
                        return received;
                    }
                    if is_port_unreachable(&e) {
                        self.shared.lock().port_unreachable += 1;
                    }
                    received += 1;
                    continue;
                }
                Poll::Pending => return received,
            };
            let now = self.runtime.now();
            let mut state = self.shared.lock();
            for (i, meta) in self.metas.iter().take(filled).enumerate() {
                let start = i * self.slot_size;
                let Some(buf) = self
                    .recv_buf
                    .get(start..start + meta.len.min(self.slot_size))
                else {
                    continue;
                };
                let stride = if meta.stride == 0 {
                    buf.len().max(1)
                } else {
                    meta.stride
                };
                // Once the endpoint is closing, strangers cannot open sessions any more (their
                // datagrams still count against the budget).
                if state.closing.is_some() && state.proto.handle_of(meta.addr).is_none() {
                    received += buf.len().div_ceil(stride);
                    continue;
                }
                for datagram in buf.chunks(stride) {
                    state.proto.handle_datagram(now, meta.addr, datagram);
                    received += 1;
                }
            }
            // The socket ran empty and already waits for the next datagram. Or, coalescing, it
            // ran empty: the window this wake-up opens brings the driver back when it ends, so
            // the call that would find nothing and register for readiness is not made. With a
            // runtime's reactor (tokio), nothing then wakes the driver inside the window: its
            // datagrams wait for the timer, one wake-up for all of them.
            if registered || (filled > 0 && filled < slots && !self.coalesce.is_zero()) {
                break;
            }
        }
        received
    }

    /// One receive call into the first `slots` (at most `N`) slots of the receive buffer. The
    /// buffer descriptions live on the stack, `N` of them, so that a call offering a few slots
    /// does not describe thirty-two.
    fn poll_recv_into<const N: usize>(
        &mut self,
        cx: &mut Context<'_>,
        socket: &dyn AsyncUdpSocket,
        slots: usize,
    ) -> Poll<io::Result<usize>> {
        let mut chunks = self.recv_buf.chunks_mut(self.slot_size);
        let mut iovs: [IoSliceMut<'_>; N] =
            std::array::from_fn(|_| IoSliceMut::new(chunks.next().unwrap_or_default()));
        match (iovs.get_mut(..slots), self.metas.get_mut(..slots)) {
            (Some(iovs), Some(metas)) => socket.poll_recv(cx, iovs, metas),
            _ => Poll::Ready(Ok(0)),
        }
    }

    /// Sends up to [`SEND_BUDGET`] datagrams; returns whether the budget ran out with more to
    /// send.
    ///
    /// The datagrams due go out in batches ([`TxBatch`]): each in as few system calls as the
    /// socket allows (one `sendmmsg` for datagrams to many peers on Linux, one segmented send
    /// for a run to one peer where the socket has GSO). Datagrams an application's thread took
    /// but the socket refused ([`State::deferred`]) go first.
    fn transmit(
        &mut self,
        cx: &mut Context<'_>,
        socket: &dyn AsyncUdpSocket,
        state: &mut State,
        now: Instant,
    ) -> bool {
        let mut sent = 0;
        loop {
            if !self.tx.has_pending() {
                if let Some(deferred) = state.deferred.take() {
                    self.tx = deferred;
                    continue;
                }
                if sent >= SEND_BUDGET {
                    return true;
                }
                let budget = SEND_BUDGET.saturating_sub(sent);
                if self
                    .tx
                    .fill(&mut state.proto, now, budget, self.max_send_segments)
                    == 0
                {
                    return false;
                }
            }
            match self.tx.send(socket) {
                tx::Sent::Some(n) => sent += n,
                tx::Sent::WouldBlock => match socket.poll_writable(cx) {
                    Poll::Ready(_) if sent < SEND_BUDGET => sent += 1,
                    Poll::Ready(_) => return true,
                    Poll::Pending => return false,
                },
                tx::Sent::Dropped(n, entry, e) => {
                    sent += n;
                    state.on_send_error(entry.destination, &e);
                }
            }
        }
    }

    /// Whether datagrams taken from the endpoint wait for the socket.
    fn has_pending(&self) -> bool {
        self.tx.has_pending()
    }
}

impl Future for Driver {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let Some(socket) = this.socket.clone() else {
            return Poll::Ready(());
        };
        {
            let mut state = this.shared.lock();
            let current = state.driver_waker.as_ref();
            if !current.is_some_and(|w| w.will_wake(cx.waker())) {
                state.driver_waker = Some(cx.waker().clone());
            }
        }

        let received = if this.holding() {
            0
        } else {
            this.receive(cx, &*socket)
        };
        let mut again = received >= RECV_BUDGET;

        let now = this.runtime.now();
        // Coalescing: what arrives from now on is read when the window ends, together. A full
        // budget opens no window: more is waiting, and the next wake-up (at once) reads on.
        if received > 0 && !again && !this.coalesce.is_zero() {
            // Never `None` here: the receive above may have left the socket unregistered,
            // and only this window's timer brings the driver back to it.
            this.hold_until = Some(now.checked_add(this.coalesce).unwrap_or(now));
        }
        let shared = this.shared.clone();
        let mut state = shared.lock();
        // The deadline the timer was armed with at the end of the last wake-up (or since, by a
        // handle's call that moved it earlier) decides: asking the endpoint here would ask
        // every session this wake-up's datagrams touched, which it does anyway, once, after the
        // transmit pass. A deadline those datagrams moved earlier and that is already due shows
        // at the end of this wake-up, which then comes round again at once.
        if state.armed.is_some_and(|t| t <= now) {
            state.proto.handle_timeout(now);
        }
        state.route_events(now);
        again |= this.transmit(cx, &*socket, &mut state, now);
        // Sending can finish a close (its last Disconnect went out).
        state.route_events(now);
        // Acknowledgements (and sending) may have freed room in full send queues.
        state.wake_senders_with_room();
        state.tx_pending = this.has_pending() || state.deferred.is_some();

        if state.may_stop() && !this.has_pending() {
            // The port is free before anyone waiting in `wait_idle` hears the driver stopped
            // (`driver_stopped` drops the shared state's reference too).
            this.socket = None;
            drop(socket);
            state.driver_stopped();
            return Poll::Ready(());
        }
        if state.is_idle() && !this.has_pending() {
            state.idle_wakers.wake_all();
        }
        let deadline = state.proto.poll_timeout();
        state.armed = deadline;
        drop(state);

        // The timer wakes the driver for the endpoint's deadline or the end of the coalescing
        // window, whichever comes first.
        let deadline = match (deadline, this.hold_until) {
            (Some(d), Some(h)) => Some(d.min(h)),
            (d, h) => d.or(h),
        };
        if let Some(deadline) = deadline {
            if this.timer_deadline != Some(deadline) {
                match this.timer.as_mut() {
                    Some(timer) => timer.as_mut().reset(deadline),
                    None => this.timer = Some(this.runtime.new_timer(deadline)),
                }
                this.timer_deadline = Some(deadline);
            }
            if let Some(timer) = this.timer.as_mut() {
                if timer.as_mut().poll(cx).is_ready() {
                    again = true;
                }
            }
        }
        if again {
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // The runtime dropped the task (it is shutting down): nobody must wait forever.
        let mut state = self.shared.lock();
        if !state.driver_done {
            state.driver_stopped();
        }
        state.driver_waker = None;
    }
}

/// The receive buffer size per datagram: the configured one (at least [`MIN_DATAGRAM_SIZE`]),
/// else the largest `udp_length` this endpoint announces but at least
/// [`DEFAULT_MIN_DATAGRAM_SIZE`].
pub(crate) fn max_datagram_size(config: &Config) -> usize {
    match config.max_datagram_size {
        Some(size) => size.max(MIN_DATAGRAM_SIZE),
        None => announced(config).max(DEFAULT_MIN_DATAGRAM_SIZE),
    }
}

/// The per-datagram size GRO slots are counted in: the configured size, else the largest
/// announced `udp_length` (at least [`MIN_DATAGRAM_SIZE`]); coalesced datagrams are at most that.
fn announced_datagram_size(config: &Config) -> usize {
    config
        .max_datagram_size
        .unwrap_or_else(|| announced(config))
        .max(MIN_DATAGRAM_SIZE)
}

/// The largest `udp_length` this endpoint announces.
fn announced(config: &Config) -> usize {
    let endpoint = &config.endpoint;
    let client = endpoint.client_config().udp_length();
    let server = endpoint.server_config().map_or(0, |s| s.udp_length());
    usize::try_from(client.max(server)).unwrap_or(usize::MAX)
}

#[cfg(test)]
pub(crate) mod tests {
    use std::net::SocketAddr;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Waker;

    use soe_session::{EndpointConfig, SessionConfig};

    use super::*;

    /// A socket that always has `per_call` datagrams of garbage ready (or fewer, if fewer
    /// buffers are offered) and counts what it handed out.
    #[derive(Debug)]
    struct Flood {
        per_call: AtomicUsize,
        /// The slots each receive call offered.
        offered: Mutex<Vec<usize>>,
        handed: AtomicUsize,
        buffer_sizes: Mutex<Vec<usize>>,
        /// Datagrams sent, segments of a GSO send counted one by one.
        sent: AtomicUsize,
        /// The entries of each batch handed to `try_send_batch`.
        batches: Mutex<Vec<usize>>,
        /// Whether a call that fills fewer buffers than offered says it registered.
        registers: std::sync::atomic::AtomicBool,
        /// Whether the last call filled fewer buffers than offered.
        short: std::sync::atomic::AtomicBool,
        /// Datagrams waiting (`usize::MAX`: never runs out). Once none is left a receive is
        /// `Pending`, as a real socket's would be.
        left: AtomicUsize,
    }

    impl Flood {
        /// `per_call` datagrams a call at most, `left` waiting; `registers`: a short call
        /// says it registered for readiness.
        fn new(per_call: usize, registers: bool, left: usize) -> Self {
            Self {
                per_call: AtomicUsize::new(per_call),
                offered: Mutex::new(Vec::new()),
                handed: AtomicUsize::new(0),
                buffer_sizes: Mutex::new(Vec::new()),
                sent: AtomicUsize::new(0),
                batches: Mutex::new(Vec::new()),
                registers: std::sync::atomic::AtomicBool::new(registers),
                short: std::sync::atomic::AtomicBool::new(false),
                left: AtomicUsize::new(left),
            }
        }
    }

    impl AsyncUdpSocket for Flood {
        fn poll_recv(
            &self,
            _cx: &mut Context<'_>,
            bufs: &mut [IoSliceMut<'_>],
            meta: &mut [RecvMeta],
        ) -> Poll<io::Result<usize>> {
            self.offered.lock().unwrap().push(bufs.len());
            let left = self.left.load(Ordering::SeqCst);
            if left == 0 {
                self.short.store(true, Ordering::SeqCst);
                return Poll::Pending;
            }
            let n = self
                .per_call
                .load(Ordering::SeqCst)
                .min(bufs.len())
                .min(left);
            if left != usize::MAX {
                self.left.store(left - n, Ordering::SeqCst);
            }
            let from: SocketAddr = "127.0.0.1:9"
                .parse()
                .unwrap_or(SocketAddr::from(([0; 4], 9)));
            for (buf, m) in bufs.iter_mut().zip(meta.iter_mut()).take(n) {
                self.buffer_sizes.lock().unwrap().push(buf.len());
                buf[..4].copy_from_slice(&[0xDE, 0xAD, 0xBE, 0xEF]);
                m.addr = from;
                m.len = 4;
                m.stride = 4;
            }
            self.handed.fetch_add(n, Ordering::SeqCst);
            self.short.store(n < bufs.len(), Ordering::SeqCst);
            Poll::Ready(Ok(n))
        }
        fn registered_after_recv(&self) -> bool {
            self.registers.load(Ordering::SeqCst) && self.short.load(Ordering::SeqCst)
        }
        fn try_send(&self, _: SocketAddr, _: &[u8]) -> io::Result<()> {
            self.sent.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
        fn try_send_segments(&self, _: SocketAddr, contents: &[u8], size: usize) -> io::Result<()> {
            self.sent
                .fetch_add(contents.chunks(size.max(1)).count(), Ordering::SeqCst);
            Ok(())
        }
        fn max_send_segments(&self) -> usize {
            64
        }
        fn try_send_batch(&self, buf: &[u8], batch: &[crate::Outgoing]) -> io::Result<usize> {
            self.batches.lock().unwrap().push(batch.len());
            crate::runtime::send_one_by_one(self, buf, batch)
        }
        fn poll_writable(&self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn local_addr(&self) -> io::Result<SocketAddr> {
            Ok(SocketAddr::from(([127, 0, 0, 1], 1)))
        }
    }

    #[derive(Debug)]
    struct NoRuntime;

    impl Runtime for NoRuntime {
        fn new_timer(&self, _: Instant) -> Pin<Box<dyn AsyncTimer>> {
            unreachable!("receive builds no timer")
        }
        fn spawn(&self, _: Pin<Box<dyn Future<Output = ()> + Send>>) {}
        fn wrap_udp_socket(&self, _: std::net::UdpSocket) -> io::Result<Arc<dyn AsyncUdpSocket>> {
            Err(io::ErrorKind::Unsupported.into())
        }
    }

    fn driver(per_call: usize, udp_length: u32) -> (Driver, Arc<Flood>) {
        let session = Arc::new(SessionConfig::new("T").with_udp_length(udp_length));
        // Many stateless replies to one source at one instant: more than its own share allows.
        let config = Config::new(Arc::new(
            EndpointConfig::server(session).with_stateless_replies_per_source(1000),
        ));
        let proto = soe_session::Endpoint::new(config.endpoint.clone());
        let shared = Arc::new(Shared::new(proto, &config));
        let socket = Arc::new(Flood::new(per_call, false, usize::MAX));
        let driver = Driver::new(shared, socket.clone(), Arc::new(NoRuntime), &config);
        (driver, socket)
    }

    #[test]
    fn one_wake_up_reads_at_most_the_budget() {
        // Issue 22 A10: the loop checked the budget only between batches, so a wake-up could
        // read 63 datagrams and then a whole batch more.
        let mut cx = Context::from_waker(Waker::noop());
        for per_call in [1, 7, 31, 32, 33, 63, 64] {
            let (mut driver, socket) = driver(per_call, 512);
            let received = driver.receive(&mut cx, &*driver.socket.clone().unwrap());
            assert_eq!(received, RECV_BUDGET, "per_call {per_call}");
            assert_eq!(
                socket.handed.load(Ordering::SeqCst),
                RECV_BUDGET,
                "per_call {per_call}: datagrams read in one wake-up"
            );
        }
    }

    #[test]
    #[cfg_attr(
        windows,
        ignore = "one datagram per receive call there (quinn-udp's BATCH_SIZE is 1), so no batch is short"
    )]
    fn a_short_batch_that_registered_ends_the_receiving() {
        // Issue 44: a socket that registers for the next datagram when a receive runs it empty
        // spares the driver a second call that would only register; one that does not is
        // asked again (the flood never runs empty: the budget ends the wake-up).
        let mut cx = Context::from_waker(Waker::noop());
        for registers in [true, false] {
            let (mut driver, socket) = driver(3, 512);
            socket.registers.store(registers, Ordering::SeqCst);
            let received = driver.receive(&mut cx, &*driver.socket.clone().unwrap());
            let calls = socket.offered.lock().unwrap().len();
            if registers {
                assert_eq!((received, calls), (3, 1));
            } else {
                assert_eq!(received, RECV_BUDGET);
                assert_eq!(calls, RECV_BUDGET.div_ceil(3));
            }
        }
        // A full batch is asked again even so: the socket may hold more.
        let (mut driver, socket) = driver(64, 512);
        socket.registers.store(true, Ordering::SeqCst);
        let received = driver.receive(&mut cx, &*driver.socket.clone().unwrap());
        assert_eq!(received, RECV_BUDGET);
        assert!(socket.offered.lock().unwrap().len() > 1);
    }

    #[test]
    fn a_receive_offers_twice_the_slots_the_last_one_filled() {
        let mut cx = Context::from_waker(Waker::noop());
        let (mut driver, socket) = driver(1, 512);
        let mut wake_up = |per_call: usize| {
            socket.per_call.store(per_call, Ordering::SeqCst);
            socket.offered.lock().unwrap().clear();
            let received = driver.receive(&mut cx, &*driver.socket.clone().unwrap());
            assert_eq!(received, RECV_BUDGET);
            std::mem::take(&mut *socket.offered.lock().unwrap())
        };
        if BATCH_SIZE == 1 {
            // No `recvmmsg` (Windows): every call offers its one slot, whatever came before.
            for per_call in [1, 64, 3] {
                assert!(wake_up(per_call).iter().all(|&n| n == 1));
            }
            return;
        }
        // One datagram a call: the first call offers 32 slots, the next ones 8 (or what is
        // left of the budget).
        let offered = wake_up(1);
        assert_eq!(offered.len(), RECV_BUDGET);
        assert_eq!(offered[0], BATCH_SIZE);
        for (i, &n) in offered.iter().enumerate().skip(1) {
            assert_eq!(n, SMALL_OFFER.min(RECV_BUDGET - i), "{offered:?}");
        }
        // Full batches: twice as many each call, up to 32, and no more than the budget left.
        assert_eq!(wake_up(64), [8, 16, 32, 8]);
        // Short batches of 3: back to 8 after one call.
        let offered = wake_up(3);
        assert_eq!(offered[..3], [16, 8, 8]);
    }

    #[test]
    fn one_wake_up_sends_at_most_the_budget() {
        // Issue 22 A10: a GSO batch was filled whole after the budget check, so a wake-up could
        // send 63 datagrams and then a whole batch of 64 more.
        let mut cx = Context::from_waker(Waker::noop());
        let (mut driver, socket) = driver(0, 512);
        let shared = driver.shared.clone();
        let now = Instant::now();
        let mut state = shared.lock();
        // Stateless UnknownSender replies: one to A, then 150 of one size to B (a GSO run).
        let a = SocketAddr::from(([127, 0, 0, 1], 7));
        let b = SocketAddr::from(([127, 0, 0, 1], 8));
        state.proto.handle_datagram(now, a, &[0, 9, 0, 0]);
        for _ in 0..150 {
            state.proto.handle_datagram(now, b, &[0, 9, 0, 0]);
        }
        let more = driver.transmit(&mut cx, &*driver.socket.clone().unwrap(), &mut state, now);
        assert!(more, "the budget ran out with more to send");
        assert_eq!(socket.sent.load(Ordering::SeqCst), SEND_BUDGET);
        // The rest goes out over the next wake-ups.
        while driver.transmit(&mut cx, &*driver.socket.clone().unwrap(), &mut state, now) {}
        assert_eq!(socket.sent.load(Ordering::SeqCst), 151);
    }

    #[test]
    fn datagrams_to_many_peers_go_in_one_batch_and_runs_to_one_in_one_entry() {
        let mut cx = Context::from_waker(Waker::noop());
        let (mut driver, socket) = driver(0, 512);
        let shared = driver.shared.clone();
        let now = Instant::now();
        let mut state = shared.lock();
        // Stateless UnknownSender replies to 20 peers, then 5 to one more: 20 single entries
        // and one segmented run of 5, all in one batch.
        for port in 0..20 {
            let peer = SocketAddr::from(([127, 0, 0, 1], 1000 + port));
            state.proto.handle_datagram(now, peer, &[0, 9, 0, 0]);
        }
        let last = SocketAddr::from(([127, 0, 0, 1], 999));
        for _ in 0..5 {
            state.proto.handle_datagram(now, last, &[0, 9, 0, 0]);
        }
        let more = driver.transmit(&mut cx, &*driver.socket.clone().unwrap(), &mut state, now);
        assert!(!more);
        assert_eq!(socket.sent.load(Ordering::SeqCst), 25);
        assert_eq!(*socket.batches.lock().unwrap(), vec![21]);
    }

    /// A socket that takes datagrams only while `open`, counts them and keeps them.
    #[derive(Debug, Default)]
    pub(crate) struct Gate {
        pub(crate) open: std::sync::atomic::AtomicBool,
        sent: AtomicUsize,
        /// Each datagram taken, with its destination.
        pub(crate) kept: Mutex<Vec<(SocketAddr, Vec<u8>)>>,
    }

    impl AsyncUdpSocket for Gate {
        fn poll_recv(
            &self,
            _: &mut Context<'_>,
            _: &mut [IoSliceMut<'_>],
            _: &mut [RecvMeta],
        ) -> Poll<io::Result<usize>> {
            Poll::Pending
        }
        fn try_send(&self, destination: SocketAddr, datagram: &[u8]) -> io::Result<()> {
            if !self.open.load(Ordering::SeqCst) {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            self.sent.fetch_add(1, Ordering::SeqCst);
            let mut kept = self.kept.lock().unwrap();
            kept.push((destination, datagram.to_vec()));
            Ok(())
        }
        fn poll_writable(&self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Pending
        }
        fn local_addr(&self) -> io::Result<SocketAddr> {
            Ok(SocketAddr::from(([127, 0, 0, 1], 1)))
        }
    }

    /// Counts its wake-ups.
    #[derive(Debug, Default)]
    pub(crate) struct CountWakes(pub(crate) AtomicUsize);

    impl std::task::Wake for CountWakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn an_application_thread_sends_and_the_driver_takes_over_what_the_socket_refused() {
        let mut cx = Context::from_waker(Waker::noop());
        let (mut driver, _) = driver(0, 512);
        let gate = Arc::new(Gate::default());
        driver.socket = Some(gate.clone());
        let wakes = Arc::new(CountWakes::default());
        let shared = driver.shared.clone();
        let now = Instant::now();
        let mut state = shared.lock();
        state.socket = Some(gate.clone());
        state.driver_waker = Some(Waker::from(wakes.clone()));
        let reply_to = |state: &mut State, ports: std::ops::Range<u16>| {
            for port in ports {
                let peer = SocketAddr::from(([127, 0, 0, 1], port));
                state.proto.handle_datagram(now, peer, &[0, 9, 0, 0]);
            }
        };
        // Sent from this thread, the driver not woken.
        gate.open.store(true, Ordering::SeqCst);
        reply_to(&mut state, 1000..1010);
        state.transmit_inline(now);
        assert_eq!(gate.sent.load(Ordering::SeqCst), 10);
        assert_eq!(wakes.0.load(Ordering::SeqCst), 0);
        assert!(state.deferred.is_none());
        // The socket refuses: the datagrams wait for the driver, which is woken.
        gate.open.store(false, Ordering::SeqCst);
        reply_to(&mut state, 2000..2005);
        state.transmit_inline(now);
        assert_eq!(gate.sent.load(Ordering::SeqCst), 10);
        assert!(state.deferred.is_some() && state.tx_pending);
        assert_eq!(wakes.0.load(Ordering::SeqCst), 1);
        // While they wait, a later batch is the driver's too (nothing overtakes them).
        reply_to(&mut state, 3000..3003);
        state.transmit_inline(now);
        assert_eq!(wakes.0.load(Ordering::SeqCst), 2);
        // The driver sends the refused ones first, then the rest.
        gate.open.store(true, Ordering::SeqCst);
        assert!(!driver.transmit(&mut cx, &*driver.socket.clone().unwrap(), &mut state, now));
        assert_eq!(gate.sent.load(Ordering::SeqCst), 18);
        assert!(state.deferred.is_none());
    }

    #[test]
    fn receive_slots_follow_the_udp_length_with_a_floor() {
        let mut cx = Context::from_waker(Waker::noop());
        for (udp_length, expected) in [(512, 9000), (1400, 9000), (12_000, 12_000)] {
            let (mut driver, socket) = driver(1, udp_length);
            driver.receive(&mut cx, &*driver.socket.clone().unwrap());
            let sizes = socket.buffer_sizes.lock().unwrap();
            assert!(!sizes.is_empty());
            // The test socket has no GRO: one datagram per slot.
            assert!(
                sizes.iter().all(|&s| s == expected),
                "udp_length {udp_length}: slots {:?}",
                &sizes[..1]
            );
        }
    }

    /// A runtime on a clock the test moves, whose timers record their deadlines.
    #[derive(Debug, Default)]
    struct Virtual {
        now: Mutex<Option<Instant>>,
        /// Every deadline a timer was armed with, in order.
        armed: Arc<Mutex<Vec<Instant>>>,
    }

    impl Virtual {
        fn at(&self, at: Instant) {
            *self.now.lock().unwrap() = Some(at);
        }
    }

    #[derive(Debug)]
    struct VirtualTimer {
        armed: Arc<Mutex<Vec<Instant>>>,
    }

    impl AsyncTimer for VirtualTimer {
        fn reset(self: Pin<&mut Self>, deadline: Instant) {
            self.armed.lock().unwrap().push(deadline);
        }
        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
            // The test polls the driver itself when it moves the clock.
            Poll::Pending
        }
    }

    impl Runtime for Arc<Virtual> {
        fn new_timer(&self, deadline: Instant) -> Pin<Box<dyn AsyncTimer>> {
            self.armed.lock().unwrap().push(deadline);
            Box::pin(VirtualTimer {
                armed: self.armed.clone(),
            })
        }
        fn spawn(&self, _: Pin<Box<dyn Future<Output = ()> + Send>>) {}
        fn wrap_udp_socket(&self, _: std::net::UdpSocket) -> io::Result<Arc<dyn AsyncUdpSocket>> {
            Err(io::ErrorKind::Unsupported.into())
        }
        fn now(&self) -> Instant {
            self.now.lock().unwrap().unwrap_or_else(Instant::now)
        }
    }

    /// A driver over a [`Flood`] that hands out what has arrived (as many a call as the
    /// call offers slots; a short call registers for readiness, as a real socket's does), on
    /// a virtual clock, with the coalescing `window`.
    fn coalescing(window: Duration) -> (Driver, Arc<Flood>, Arc<Virtual>) {
        let session = Arc::new(SessionConfig::new("T"));
        let config =
            Config::new(Arc::new(EndpointConfig::server(session))).with_receive_coalesce(window);
        let proto = soe_session::Endpoint::new(config.endpoint.clone());
        let shared = Arc::new(Shared::new(proto, &config));
        let socket = Arc::new(Flood::new(usize::MAX, true, 0));
        let clock = Arc::new(Virtual::default());
        let driver = Driver::new(shared, socket.clone(), Arc::new(clock.clone()), &config);
        (driver, socket, clock)
    }

    /// `arrived` more datagrams wait in the socket, then the driver is polled once at `at`;
    /// returns how many receive calls it made (one where `recvmmsg` reads them all; on
    /// Windows, one a datagram and one more that finds none).
    fn wake_up_at(
        driver: &mut Driver,
        socket: &Flood,
        clock: &Virtual,
        at: Instant,
        arrived: usize,
    ) -> usize {
        clock.at(at);
        socket.left.fetch_add(arrived, Ordering::SeqCst);
        let before = socket.offered.lock().unwrap().len();
        let mut cx = Context::from_waker(Waker::noop());
        assert!(Pin::new(&mut *driver).poll(&mut cx).is_pending());
        socket.offered.lock().unwrap().len() - before
    }

    #[test]
    fn a_coalescing_window_leaves_the_socket_unread_until_it_ends() {
        let window = Duration::from_millis(1);
        let (mut driver, socket, clock) = coalescing(window);
        let handed = || socket.handed.load(Ordering::SeqCst);
        let t0 = Instant::now();
        // The first wake-up reads what is there, and opens the window.
        assert!(wake_up_at(&mut driver, &socket, &clock, t0, 3) >= 1);
        assert_eq!(handed(), 3);
        assert_eq!(driver.hold_until(), Some(t0 + window));
        // The timer wakes the driver at the window's end (nothing else is due).
        assert_eq!(clock.armed.lock().unwrap().last(), Some(&(t0 + window)));
        // A wake-up inside the window (a readiness wake-up, a handle's send) reads nothing,
        // while datagrams keep arriving.
        for at in [t0, t0 + window / 2, t0 + window - Duration::from_nanos(1)] {
            assert_eq!(wake_up_at(&mut driver, &socket, &clock, at, 1), 0, "{at:?}");
        }
        assert_eq!(handed(), 3);
        // At its end the driver reads all of them at once, and opens the next window.
        assert!(wake_up_at(&mut driver, &socket, &clock, t0 + window, 0) >= 1);
        assert_eq!(handed(), 6);
        assert_eq!(driver.hold_until(), Some(t0 + 2 * window));
        // A read that finds nothing opens none: the next datagram is read when it comes.
        let t2 = t0 + 2 * window;
        assert!(wake_up_at(&mut driver, &socket, &clock, t2, 0) >= 1);
        assert_eq!(driver.hold_until(), None);
        assert!(wake_up_at(&mut driver, &socket, &clock, t2, 3) >= 1);
        assert_eq!(handed(), 9);
    }

    #[test]
    fn a_full_budget_opens_no_window_and_no_window_without_the_setting() {
        // A wake-up that read its whole budget leaves more waiting: the next one reads on.
        let (mut driver, socket, clock) = coalescing(Duration::from_millis(1));
        let t0 = Instant::now();
        assert!(wake_up_at(&mut driver, &socket, &clock, t0, RECV_BUDGET + 10) >= 1);
        assert_eq!(socket.handed.load(Ordering::SeqCst), RECV_BUDGET);
        assert_eq!(driver.hold_until(), None);
        assert!(wake_up_at(&mut driver, &socket, &clock, t0, 0) >= 1);
        assert_eq!(socket.handed.load(Ordering::SeqCst), RECV_BUDGET + 10);
        // Off (the default): every wake-up reads.
        let (mut driver, socket, clock) = coalescing(Duration::ZERO);
        for _ in 0..3 {
            assert!(wake_up_at(&mut driver, &socket, &clock, t0, 3) >= 1);
            assert_eq!(driver.hold_until(), None);
        }
        assert_eq!(socket.handed.load(Ordering::SeqCst), 9);
        assert!(
            clock.armed.lock().unwrap().is_empty(),
            "no timer without a deadline"
        );
    }

    #[test]
    fn a_window_past_the_bound_is_cut_to_it() {
        let (mut driver, socket, clock) = coalescing(Duration::from_secs(10));
        let t0 = Instant::now();
        wake_up_at(&mut driver, &socket, &clock, t0, 3);
        assert_eq!(
            driver.hold_until(),
            Some(t0 + crate::config::MAX_RECEIVE_COALESCE)
        );
    }
}
