//! The task that owns an endpoint's socket and timer and drives the protocol endpoint.
//!
//! One wake-up does, in order: receive (a bounded batch of datagrams), handle expired timers,
//! route events to the handles, transmit (a bounded batch), then re-arm the single timer, only if
//! the endpoint's next deadline moved. There is no periodic tick: the task sleeps until the next
//! datagram, the next deadline, or a handle's request. When a batch bound is hit, the task wakes
//! itself and yields, so other tasks (and other endpoints on the same runtime) run in between.

use std::future::Future;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use quinn_udp::{BATCH_SIZE, RecvMeta};

use crate::config::Config;
use crate::runtime::{AsyncTimer, AsyncUdpSocket, Runtime};
use crate::shared::{Shared, State};

/// The most datagrams one wake-up reads before yielding.
pub(crate) const RECV_BUDGET: usize = 64;
/// The most datagrams one wake-up sends before yielding.
pub(crate) const SEND_BUDGET: usize = 64;
/// The smallest receive buffer per datagram.
const MIN_DATAGRAM_SIZE: usize = 512;
/// Receive buffers of one batch, all slots together, when the platform coalesces (GRO).
const GRO_BUFFER_BUDGET: usize = 1024 * 1024;

/// The driver future; see the module documentation.
pub(crate) struct Driver {
    shared: Arc<Shared>,
    socket: Arc<dyn AsyncUdpSocket>,
    runtime: Arc<dyn Runtime>,
    timer: Option<Pin<Box<dyn AsyncTimer>>>,
    timer_deadline: Option<Instant>,
    recv_buf: Box<[u8]>,
    slot_size: usize,
    slots: usize,
    metas: [RecvMeta; BATCH_SIZE],
    tx_buf: Vec<u8>,
    /// A datagram in `tx_buf` the socket would not take yet.
    pending: Option<(SocketAddr, usize)>,
}

impl Driver {
    pub(crate) fn new(
        shared: Arc<Shared>,
        socket: Arc<dyn AsyncUdpSocket>,
        runtime: Arc<dyn Runtime>,
        config: &Config,
    ) -> Self {
        let datagram = max_datagram_size(config);
        let segments = socket.max_receive_segments().max(1);
        let slot_size = datagram.saturating_mul(segments);
        let slots = (GRO_BUFFER_BUDGET / slot_size.max(1)).clamp(1, BATCH_SIZE);
        let slots = if segments == 1 { BATCH_SIZE } else { slots };
        Self {
            shared,
            socket,
            runtime,
            timer: None,
            timer_deadline: None,
            recv_buf: vec![0; slot_size * slots].into_boxed_slice(),
            slot_size,
            slots,
            metas: [RecvMeta::default(); BATCH_SIZE],
            tx_buf: Vec::with_capacity(datagram),
            pending: None,
        }
    }

    /// Reads up to [`RECV_BUDGET`] datagrams into the protocol endpoint; returns how many.
    fn receive(&mut self, cx: &mut Context<'_>) -> usize {
        let mut received = 0;
        while received < RECV_BUDGET {
            let filled = {
                let mut chunks = self.recv_buf.chunks_mut(self.slot_size);
                let mut iovs: [IoSliceMut<'_>; BATCH_SIZE] =
                    std::array::from_fn(|_| IoSliceMut::new(chunks.next().unwrap_or_default()));
                let slots = self.slots.min(BATCH_SIZE);
                let (Some(iovs), Some(metas)) =
                    (iovs.get_mut(..slots), self.metas.get_mut(..slots))
                else {
                    return received;
                };
                match self.socket.poll_recv(cx, iovs, metas) {
                    Poll::Ready(Ok(n)) => n,
                    Poll::Ready(Err(e)) => {
                        // UDP receive errors (an ICMP error reported late, an interrupted call)
                        // concern one datagram, not the socket: note and go on.
                        tracing::debug!(error = %e, "UDP receive error");
                        if e.kind() == io::ErrorKind::WouldBlock {
                            return received;
                        }
                        received += 1;
                        continue;
                    }
                    Poll::Pending => return received,
                }
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
                // Once the endpoint is closing, strangers cannot open sessions any more.
                if state.closing.is_some() && state.proto.handle_of(meta.addr).is_none() {
                    continue;
                }
                for datagram in buf.chunks(stride) {
                    state.proto.handle_datagram(now, meta.addr, datagram);
                    received += 1;
                }
            }
        }
        received
    }

    /// Sends up to [`SEND_BUDGET`] datagrams; returns whether the budget ran out with more to
    /// send.
    fn transmit(&mut self, cx: &mut Context<'_>, state: &mut State, now: Instant) -> bool {
        let mut sent = 0;
        loop {
            let (destination, len) = match self.pending {
                Some(pending) => pending,
                None => {
                    if sent >= SEND_BUDGET {
                        return true;
                    }
                    match state.proto.poll_transmit(now, &mut self.tx_buf) {
                        Some(t) => (t.destination, t.len),
                        None => return false,
                    }
                }
            };
            let datagram = self.tx_buf.get(..len).unwrap_or(&self.tx_buf);
            match self.socket.try_send(destination, datagram) {
                Ok(()) => {
                    self.pending = None;
                    sent += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.pending = Some((destination, len));
                    match self.socket.poll_writable(cx) {
                        Poll::Ready(_) if sent < SEND_BUDGET => sent += 1,
                        Poll::Ready(_) => return true,
                        Poll::Pending => return false,
                    }
                }
                Err(e) => {
                    // Lost like any datagram; the protocol resends what matters.
                    tracing::debug!(%destination, error = %e, "UDP send error; datagram dropped");
                    self.pending = None;
                    sent += 1;
                }
            }
        }
    }
}

impl Future for Driver {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        {
            let mut state = this.shared.lock();
            let current = state.driver_waker.as_ref();
            if !current.is_some_and(|w| w.will_wake(cx.waker())) {
                state.driver_waker = Some(cx.waker().clone());
            }
        }

        let received = this.receive(cx);
        let mut again = received >= RECV_BUDGET;

        let now = this.runtime.now();
        let shared = this.shared.clone();
        let mut state = shared.lock();
        if state.proto.poll_timeout().is_some_and(|t| t <= now) {
            state.proto.handle_timeout(now);
        }
        state.route_events(now);
        again |= this.transmit(cx, &mut state, now);
        // Sending can finish a close (its last Disconnect went out).
        state.route_events(now);
        // Acknowledgements (and sending) may have freed room in full send queues.
        state.wake_senders_with_room();
        state.tx_pending = this.pending.is_some();

        if state.may_stop() && this.pending.is_none() {
            state.driver_stopped();
            return Poll::Ready(());
        }
        if state.is_idle() && this.pending.is_none() {
            state.idle_wakers.wake_all();
        }
        let deadline = state.proto.poll_timeout();
        drop(state);

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

/// The receive buffer size per datagram: the configured one, else the largest `udp_length` this
/// endpoint announces; at least [`MIN_DATAGRAM_SIZE`].
pub(crate) fn max_datagram_size(config: &Config) -> usize {
    let size = config.max_datagram_size.unwrap_or_else(|| {
        let endpoint = &config.endpoint;
        let client = endpoint.client_config().udp_length();
        let server = endpoint.server_config().map_or(0, |s| s.udp_length());
        usize::try_from(client.max(server)).unwrap_or(usize::MAX)
    });
    size.max(MIN_DATAGRAM_SIZE)
}
