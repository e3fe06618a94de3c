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
/// The most bytes one segmented send carries (a UDP datagram's limit, before splitting).
const GSO_MAX_BYTES: usize = 64_000;
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
    /// The datagram last taken from the endpoint.
    tx_buf: Vec<u8>,
    /// The datagrams of the batch being sent, back to back.
    batch: Vec<u8>,
    /// `batch` when the socket would not take it yet: destination, segment size, datagrams.
    pending: Option<(SocketAddr, usize, usize)>,
    /// A datagram in `tx_buf` that did not fit the last batch: destination, length.
    carry: Option<(SocketAddr, usize)>,
    /// How many datagrams one send may carry (the socket's GSO limit; 1 without GSO).
    max_send_segments: usize,
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
        let max_send_segments = socket.max_send_segments().clamp(1, SEND_BUDGET);
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
            batch: Vec::with_capacity(datagram),
            pending: None,
            carry: None,
            max_send_segments,
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
    ///
    /// Consecutive datagrams to one destination go out in one call where the socket has
    /// segmentation offload (GSO): a batch is a run of datagrams of the first one's size, closed
    /// by a shorter one (as when a message is split into fragments) or by the socket's limit.
    fn transmit(&mut self, cx: &mut Context<'_>, state: &mut State, now: Instant) -> bool {
        let mut sent = 0;
        loop {
            let (destination, segment, count) = match self.pending {
                Some(pending) => pending,
                None => {
                    if sent >= SEND_BUDGET {
                        return true;
                    }
                    match self.fill_batch(state, now) {
                        Some(batch) => batch,
                        None => return false,
                    }
                }
            };
            let result = if count > 1 {
                self.socket
                    .try_send_segments(destination, &self.batch, segment)
            } else {
                self.socket.try_send(destination, &self.batch)
            };
            match result {
                Ok(()) => {
                    self.pending = None;
                    sent += count;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.pending = Some((destination, segment, count));
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
                    sent += count;
                }
            }
        }
    }

    /// Moves the next batch into `batch`: (destination, segment size, datagrams), or `None` when
    /// the endpoint has nothing to send. A datagram that cannot join stays in `tx_buf` for the
    /// next batch.
    fn fill_batch(
        &mut self,
        state: &mut State,
        now: Instant,
    ) -> Option<(SocketAddr, usize, usize)> {
        self.batch.clear();
        let (destination, segment) = match self.carry.take() {
            Some(first) => first,
            None => {
                let t = state.proto.poll_transmit(now, &mut self.tx_buf)?;
                (t.destination, t.len)
            }
        };
        self.batch
            .extend_from_slice(self.tx_buf.get(..segment).unwrap_or(&self.tx_buf));
        let max = self
            .max_send_segments
            .min(GSO_MAX_BYTES / segment.max(1))
            .max(1);
        let mut count = 1;
        while count < max {
            let Some(t) = state.proto.poll_transmit(now, &mut self.tx_buf) else {
                break;
            };
            if t.destination != destination || t.len > segment {
                self.carry = Some((t.destination, t.len));
                break;
            }
            self.batch
                .extend_from_slice(self.tx_buf.get(..t.len).unwrap_or(&self.tx_buf));
            count += 1;
            if t.len < segment {
                break;
            }
        }
        Some((destination, segment, count))
    }

    /// Whether datagrams wait for the socket (a batch it refused, or one taken from the endpoint
    /// but not yet batched).
    fn has_pending(&self) -> bool {
        self.pending.is_some() || self.carry.is_some()
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
        state.tx_pending = this.has_pending();

        if state.may_stop() && !this.has_pending() {
            state.driver_stopped();
            return Poll::Ready(());
        }
        if state.is_idle() && !this.has_pending() {
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
