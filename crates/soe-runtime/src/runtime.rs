//! The runtime seam: the three small traits an async runtime implements so the driver can run on it.
//!
//! The driver needs a timer, a way to spawn its task, and a UDP socket it can poll. Each adapter
//! crate (`soe-tokio`, `soe-async-std`) implements these traits in about a hundred lines; the
//! driver itself never names a runtime.

use std::fmt::Debug;
use std::future::Future;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use crate::udp;

/// An async runtime the driver can run on.
pub trait Runtime: Send + Sync + Debug + 'static {
    /// Builds a timer that fires at `deadline`.
    fn new_timer(&self, deadline: Instant) -> Pin<Box<dyn AsyncTimer>>;
    /// Runs `future` to completion in the background.
    fn spawn(&self, future: Pin<Box<dyn Future<Output = ()> + Send>>);
    /// Registers a bound std socket with the runtime's reactor.
    ///
    /// The socket is already in non-blocking mode.
    fn wrap_udp_socket(&self, socket: std::net::UdpSocket) -> io::Result<Arc<dyn AsyncUdpSocket>>;
    /// Registers the socket of an endpoint with a receive-coalescing window
    /// ([`Config::receive_coalesce`](crate::Config::receive_coalesce)), which its driver
    /// leaves unread for the window after a short batch.
    ///
    /// A runtime whose reactor would be woken by every datagram that arrives meanwhile, even
    /// with no task waiting for one (tokio's), can register this socket so that it reports
    /// readiness only while a receive waits for it. The default registers it as
    /// [`wrap_udp_socket`](Self::wrap_udp_socket) does.
    fn wrap_coalescing_udp_socket(
        &self,
        socket: std::net::UdpSocket,
    ) -> io::Result<Arc<dyn AsyncUdpSocket>> {
        self.wrap_udp_socket(socket)
    }
    /// The current time, as the runtime's timers see it.
    ///
    /// The driver compares it with the deadlines its timer fires at, and the handles stamp
    /// connects and closes with it. A runtime whose timers run on a clock other than the
    /// system's (tokio's paused test clock) returns that clock's time: on the system's, the
    /// driver would see a timer that fired as still to come.
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// One entry of a batch for [`AsyncUdpSocket::try_send_batch`]: the `len` bytes at `offset` in
/// the batch's buffer go to `destination`, as one datagram, or as datagrams of `segment_size`
/// bytes each (the last one maybe shorter) when `segment_size` is less than `len`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outgoing {
    /// Where the datagrams go.
    pub destination: SocketAddr,
    /// Where they start in the batch's buffer.
    pub offset: usize,
    /// Their bytes, together.
    pub len: usize,
    /// The size of each datagram (all but the last, which may be shorter); `len` for one.
    pub segment_size: usize,
}

impl Outgoing {
    /// How many datagrams the entry holds.
    pub fn datagrams(&self) -> usize {
        self.len.div_ceil(self.segment_size.max(1)).max(1)
    }

    /// Whether the entry is several datagrams sent as one segmented send.
    pub fn is_segmented(&self) -> bool {
        self.segment_size < self.len
    }

    /// The entry's bytes in `buf` (empty when `buf` is too short).
    pub fn contents<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        buf.get(self.offset..self.offset.saturating_add(self.len))
            .unwrap_or_default()
    }
}

/// [`AsyncUdpSocket::try_send_batch`] one entry at a time: [`AsyncUdpSocket::try_send`] or
/// [`AsyncUdpSocket::try_send_segments`] each. Adapters may call it for what their platform does
/// not batch.
pub fn send_one_by_one<S: AsyncUdpSocket + ?Sized>(
    socket: &S,
    buf: &[u8],
    batch: &[Outgoing],
) -> io::Result<usize> {
    let mut sent = 0;
    for entry in batch {
        let contents = entry.contents(buf);
        let result = if entry.is_segmented() {
            socket.try_send_segments(entry.destination, contents, entry.segment_size)
        } else {
            socket.try_send(entry.destination, contents)
        };
        match result {
            Ok(()) => sent += 1,
            Err(e) if sent == 0 => return Err(e),
            // Reported when the caller sends this entry again, first of its batch.
            Err(_) => break,
        }
    }
    Ok(sent)
}

/// A timer that can be moved to a new deadline without being rebuilt.
pub trait AsyncTimer: Send + Debug + 'static {
    /// Moves the timer to `deadline`, whether or not it already fired.
    fn reset(self: Pin<&mut Self>, deadline: Instant);
    /// Ready once the deadline has passed.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()>;
}

/// A UDP socket registered with a runtime's reactor.
///
/// Receiving is batched: one call may fill several buffers (`recvmmsg` where the platform has it)
/// and, when the platform coalesces datagrams (GRO), one buffer may hold several datagrams of
/// `stride` bytes each.
pub trait AsyncUdpSocket: Send + Sync + Debug + 'static {
    /// Receives as many datagrams as are ready, up to `bufs.len()` buffers.
    ///
    /// Returns the number of buffers filled; `meta[i]` describes `bufs[i]`. Registers `cx` for
    /// wake-up when nothing is ready.
    fn poll_recv(
        &self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [udp::RecvMeta],
    ) -> Poll<io::Result<usize>>;

    /// Sends one datagram without waiting.
    ///
    /// Fails with [`io::ErrorKind::WouldBlock`] when the socket's send buffer is full; then
    /// [`poll_writable`](Self::poll_writable) tells when to try again.
    fn try_send(&self, destination: SocketAddr, datagram: &[u8]) -> io::Result<()>;

    /// Sends several datagrams to one destination in one call: `contents` holds them back to
    /// back, each `segment_size` bytes except perhaps the last, which may be shorter. The
    /// platform splits them (UDP GSO). Only called with more than one segment, and at most
    /// [`max_send_segments`](Self::max_send_segments) of them; either all go or none
    /// ([`io::ErrorKind::WouldBlock`] as for [`try_send`](Self::try_send)).
    ///
    /// The default, for sockets without segmentation offload, sends them one by one and may
    /// therefore send only some; adapters whose socket has GSO override it.
    fn try_send_segments(
        &self,
        destination: SocketAddr,
        contents: &[u8],
        segment_size: usize,
    ) -> io::Result<()> {
        for datagram in contents.chunks(segment_size.max(1)) {
            self.try_send(destination, datagram)?;
        }
        Ok(())
    }

    /// Sends the entries of a batch in order, each to its own destination, in as few system
    /// calls as the platform allows (one `sendmmsg` on Linux for a run of single datagrams).
    /// An entry of several segments (`segment_size < len`) goes as one segmented send.
    ///
    /// Returns how many entries went: at least one, and the first `n` of them. Fails with the
    /// first entry's error when none went: [`io::ErrorKind::WouldBlock`] as for
    /// [`try_send`](Self::try_send), or an error of that datagram alone (the caller drops it and
    /// goes on with the rest).
    ///
    /// The default sends them one by one; adapters whose platform batches override it.
    fn try_send_batch(&self, buf: &[u8], batch: &[Outgoing]) -> io::Result<usize> {
        send_one_by_one(self, buf, batch)
    }

    /// How many datagrams one [`try_send_segments`](Self::try_send_segments) may carry (1: the
    /// driver never calls it).
    fn max_send_segments(&self) -> usize {
        1
    }

    /// Ready when the socket may accept a datagram again; registers `cx` otherwise.
    fn poll_writable(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;

    /// The address the socket is bound to.
    fn local_addr(&self) -> io::Result<SocketAddr>;

    /// How many datagrams the platform may coalesce into one receive buffer (1 without GRO).
    fn max_receive_segments(&self) -> usize {
        1
    }

    /// `false` only when the socket knows that no datagram waits and that
    /// [`poll_recv`](Self::poll_recv) would return `Pending` without registering anything (a
    /// socket whose readiness its owner polls itself, as the blocking event loop's); the
    /// driver then skips setting up its receive buffers for nothing. The default, `true`, is
    /// right for every socket: `poll_recv` is then always asked.
    fn may_be_readable(&self) -> bool {
        true
    }

    /// `true` only when the last [`poll_recv`](Self::poll_recv) filled fewer buffers than it was
    /// given because the socket ran empty, and left its `cx` registered for the next datagram
    /// (as a `Pending` return would have): the driver then makes no further receive call in that
    /// wake-up, one that would only register. The default, `false`, is right for every socket:
    /// the driver then calls again until `poll_recv` returns `Pending`.
    fn registered_after_recv(&self) -> bool {
        false
    }
}
