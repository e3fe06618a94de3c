//! The [`Runtime`] implementation for tokio.

use std::future::Future;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Instant;

use soe_runtime::platform::UdpIo;
use soe_runtime::udp::RecvMeta;
use soe_runtime::{AsyncTimer, AsyncUdpSocket, Runtime};
use tokio::io::{Interest, Ready};

/// Runs the driver on tokio: the runtime of the caller (the default), or the one behind a
/// [`Handle`](tokio::runtime::Handle).
#[derive(Debug, Clone, Default)]
pub struct TokioRuntime {
    handle: Option<tokio::runtime::Handle>,
}

impl TokioRuntime {
    /// Runs on the runtime behind `handle`, wherever the endpoint is bound from.
    pub fn from_handle(handle: tokio::runtime::Handle) -> Self {
        Self {
            handle: Some(handle),
        }
    }

    /// The chosen runtime, or the caller's; an error (rather than a panic) outside any.
    fn handle(&self) -> io::Result<tokio::runtime::Handle> {
        match &self.handle {
            Some(handle) => Ok(handle.clone()),
            None => tokio::runtime::Handle::try_current()
                .map_err(|e| io::Error::other(format!("no tokio runtime to bind in: {e}"))),
        }
    }
}

impl Runtime for TokioRuntime {
    fn new_timer(&self, deadline: Instant) -> Pin<Box<dyn AsyncTimer>> {
        // Called from the driver task, which runs inside the runtime.
        let _guard = self.handle.as_ref().map(tokio::runtime::Handle::enter);
        Box::pin(Timer(Box::pin(tokio::time::sleep_until(deadline.into()))))
    }

    fn spawn(&self, future: Pin<Box<dyn Future<Output = ()> + Send>>) {
        match &self.handle {
            Some(handle) => drop(handle.spawn(future)),
            None => drop(tokio::spawn(future)),
        }
    }

    /// tokio's clock, which its timers run on: the system's, or the paused test clock
    /// (`tokio::time::pause`, `start_paused`) where that is on, so the driver sees its timer's
    /// deadline pass when the timer fires.
    fn now(&self) -> Instant {
        let _guard = self.handle.as_ref().map(tokio::runtime::Handle::enter);
        tokio::time::Instant::now().into_std()
    }

    fn wrap_udp_socket(&self, socket: std::net::UdpSocket) -> io::Result<Arc<dyn AsyncUdpSocket>> {
        let handle = self.handle()?;
        socket.set_nonblocking(true)?;
        let state = UdpIo::new((&socket).into());
        let connected = socket.peer_addr().is_ok();
        let _guard = handle.enter();
        let io = Arc::new(tokio::net::UdpSocket::from_std(socket)?);
        // Windows reports a connected socket's closed port on the receive itself.
        let errors =
            (cfg!(unix) && connected).then(|| Mutex::new(Some(ErrorWait::new(io.clone()))));
        Ok(Arc::new(Socket {
            io,
            state,
            errors,
            registered: AtomicBool::new(false),
        }))
    }

    /// On Linux and Android, an unconnected socket goes in an epoll set of its own, which
    /// tokio watches, armed only while a receive or a send waits: tokio would otherwise be
    /// woken by every datagram that arrives inside the window (see `held.rs`). Elsewhere, and
    /// for a connected socket, as [`wrap_udp_socket`](Runtime::wrap_udp_socket).
    fn wrap_coalescing_udp_socket(
        &self,
        socket: std::net::UdpSocket,
    ) -> io::Result<Arc<dyn AsyncUdpSocket>> {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if socket.peer_addr().is_err() {
            let handle = self.handle()?;
            socket.set_nonblocking(true)?;
            let _guard = handle.enter();
            return Ok(Arc::new(crate::held::HeldSocket::new(socket)?));
        }
        self.wrap_udp_socket(socket)
    }
}

/// The tokio timer; boxed so the `Timer` is `Unpin` and needs no pin projection.
#[derive(Debug)]
struct Timer(Pin<Box<tokio::time::Sleep>>);

impl AsyncTimer for Timer {
    fn reset(mut self: Pin<&mut Self>, deadline: Instant) {
        self.0.as_mut().reset(deadline.into());
    }

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.0.as_mut().poll(cx)
    }
}

#[derive(Debug)]
struct Socket {
    io: Arc<tokio::net::UdpSocket>,
    /// quinn-udp's batched I/O, or the plain path where it cannot start.
    state: UdpIo,
    /// Only for a socket connected to one peer on Unix, to which the system reports that peer's
    /// closed port as a socket error (Windows fails the next receive instead). tokio's read
    /// readiness leaves errors out, so without this wait the driver would only hear of one at
    /// its next send.
    errors: Option<Mutex<Option<ErrorWait>>>,
    /// Whether the last `poll_recv` ran the socket empty and registered for the next datagram
    /// (see [`AsyncUdpSocket::registered_after_recv`]); only the driver's task receives.
    registered: AtomicBool,
}

/// A wait for a socket's error readiness.
struct ErrorWait(Pin<Box<dyn Future<Output = io::Result<Ready>> + Send>>);

impl ErrorWait {
    fn new(io: Arc<tokio::net::UdpSocket>) -> Self {
        Self(Box::pin(async move { io.ready(Interest::ERROR).await }))
    }
}

impl std::fmt::Debug for ErrorWait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ErrorWait")
    }
}

impl Socket {
    /// The error a connected socket has pending, once error readiness comes; `None` while
    /// there is none (the waker is then registered for the next).
    fn poll_error(&self, cx: &mut Context<'_>) -> Option<io::Error> {
        let mut slot = self
            .errors
            .as_ref()?
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        loop {
            let wait = slot.as_mut()?;
            match wait.0.as_mut().poll(cx) {
                Poll::Pending => return None,
                // The I/O driver is gone: receiving fails too, and says so.
                Poll::Ready(Err(_)) => {
                    *slot = None;
                    return None;
                }
                Poll::Ready(Ok(_)) => {}
            }
            *wait = ErrorWait::new(self.io.clone());
            // Takes the pending error; when there is none, the readiness is cleared, and the
            // new wait registers for the next on the next turn of the loop.
            let taken = self
                .io
                .try_io(Interest::ERROR, || match self.io.take_error()? {
                    Some(e) => Ok(e),
                    None => Err(io::ErrorKind::WouldBlock.into()),
                });
            match taken {
                Ok(e) => return Some(e),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Some(e),
            }
        }
    }
}

impl Socket {
    /// One transmit, batched or plain; tokio clears its write readiness when it is refused.
    fn send(&self, transmit: &soe_runtime::udp::Transmit<'_>) -> io::Result<()> {
        self.io.try_io(Interest::WRITABLE, || {
            self.state.try_send((&self.io).into(), transmit, |d, to| {
                self.io.try_send_to(d, to)
            })
        })
    }
}

impl AsyncUdpSocket for Socket {
    fn poll_recv(
        &self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        self.registered.store(false, Ordering::Relaxed);
        if let Some(e) = self.poll_error(cx) {
            return Poll::Ready(Err(e));
        }
        let slots = bufs.len().min(self.state.batch_size());
        loop {
            ready!(self.io.poll_recv_ready(cx))?;
            // A receive that fills fewer slots than offered emptied the socket: tell tokio so
            // (a WouldBlock clears its readiness), sparing the next wake-up's receive call that
            // would only find nothing. tokio keeps the readiness when a datagram came in since
            // it was observed, so none is missed. Then register for the next datagram here,
            // which spares the driver a second call that would only do that; should one have
            // come in meanwhile, the driver is told nothing and calls again.
            let mut short = None;
            let received = self.io.try_io(Interest::READABLE, || {
                let n = self.state.recv((&self.io).into(), bufs, meta, |buf| {
                    self.io.try_recv_from(buf)
                })?;
                if n < slots {
                    short = Some(n);
                    return Err(io::ErrorKind::WouldBlock.into());
                }
                Ok(n)
            });
            match (received, short) {
                (_, Some(n)) => {
                    let registered = self.io.poll_recv_ready(cx).is_pending();
                    self.registered.store(registered, Ordering::Relaxed);
                    return Poll::Ready(Ok(n));
                }
                (Err(e), None) if e.kind() == io::ErrorKind::WouldBlock => continue,
                (other, None) => return Poll::Ready(other),
            }
        }
    }

    fn try_send(&self, destination: SocketAddr, datagram: &[u8]) -> io::Result<()> {
        let transmit = soe_runtime::socket::datagram_transmit(destination, datagram);
        self.send(&transmit)
    }

    fn try_send_segments(
        &self,
        destination: SocketAddr,
        contents: &[u8],
        segment_size: usize,
    ) -> io::Result<()> {
        let transmit = soe_runtime::socket::segments_transmit(destination, contents, segment_size);
        self.send(&transmit)
    }

    #[cfg(target_os = "linux")]
    fn try_send_batch(&self, buf: &[u8], batch: &[soe_runtime::Outgoing]) -> io::Result<usize> {
        // tokio clears its write readiness when the batch meets a full buffer.
        self.io.try_io(Interest::WRITABLE, || {
            soe_runtime::socket::send_batch(self, &*self.io, buf, batch)
        })
    }

    fn max_send_segments(&self) -> usize {
        self.state.max_gso_segments()
    }

    fn poll_writable(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.io.poll_send_ready(cx)
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }

    fn max_receive_segments(&self) -> usize {
        self.state.gro_segments()
    }

    fn registered_after_recv(&self) -> bool {
        self.registered.load(Ordering::Relaxed)
    }
}
