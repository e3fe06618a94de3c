//! The [`Runtime`] implementation on async-io (the reactor of async-std and smol).

use std::future::Future;
use std::io::{self, IoSliceMut};
use std::net::{SocketAddr, UdpSocket};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Instant;

use async_io::{Async, Timer};
use soe_runtime::platform::UdpIo;
use soe_runtime::udp::RecvMeta;
use soe_runtime::{AsyncTimer, AsyncUdpSocket, Runtime};

/// Runs the driver task on async-std's executor, with async-io timers and sockets.
///
/// The socket and timers belong to async-io's global reactor, so an endpoint bound with this
/// runtime also serves applications running on smol or any other executor.
#[derive(Debug, Clone, Copy, Default)]
pub struct AsyncStdRuntime;

impl Runtime for AsyncStdRuntime {
    fn new_timer(&self, deadline: Instant) -> Pin<Box<dyn AsyncTimer>> {
        Box::pin(IoTimer(Timer::at(deadline)))
    }

    fn spawn(&self, future: Pin<Box<dyn Future<Output = ()> + Send>>) {
        drop(async_std::task::spawn(future));
    }

    fn wrap_udp_socket(&self, socket: UdpSocket) -> io::Result<Arc<dyn AsyncUdpSocket>> {
        let state = UdpIo::new((&socket).into());
        Ok(Arc::new(Socket {
            io: Async::new(socket)?,
            state,
            registered: AtomicBool::new(false),
        }))
    }
}

#[derive(Debug)]
struct IoTimer(Timer);

impl AsyncTimer for IoTimer {
    fn reset(mut self: Pin<&mut Self>, deadline: Instant) {
        self.0.set_at(deadline);
    }

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx).map(|_| ())
    }
}

#[derive(Debug)]
struct Socket {
    io: Async<UdpSocket>,
    /// quinn-udp's batched I/O, or the plain path where it cannot start.
    state: UdpIo,
    /// Whether the last `poll_recv` ran the socket empty and registered for the next datagram
    /// (see [`AsyncUdpSocket::registered_after_recv`]); only the driver's task receives.
    registered: AtomicBool,
}

impl AsyncUdpSocket for Socket {
    fn poll_recv(
        &self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        // Receive first, and wait for readiness only once the socket is empty: async-io reports
        // each readiness once, so waiting before every receive would cost one turn of the
        // reactor per call (per datagram on the plain path, which is Windows' only path).
        // A receive that fills fewer slots than offered emptied the socket: register for the
        // next datagram in the same call, sparing the driver a second receive call (a system
        // call that finds nothing) only to register. Should the reactor already hold a
        // readiness, the driver is told nothing and calls again.
        self.registered.store(false, Ordering::Relaxed);
        let slots = bufs.len().min(self.state.batch_size());
        loop {
            let socket = self.io.get_ref();
            match self
                .state
                .recv(socket.into(), bufs, meta, |buf| socket.recv_from(buf))
            {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Ok(n) if n < slots => {
                    let registered = self.io.poll_readable(cx).is_pending();
                    self.registered.store(registered, Ordering::Relaxed);
                    return Poll::Ready(Ok(n));
                }
                other => return Poll::Ready(other),
            }
            ready!(self.io.poll_readable(cx))?;
        }
    }

    fn try_send(&self, destination: SocketAddr, datagram: &[u8]) -> io::Result<()> {
        let transmit = soe_runtime::socket::datagram_transmit(destination, datagram);
        let socket = self.io.get_ref();
        self.state
            .try_send(socket.into(), &transmit, |d, to| socket.send_to(d, to))
    }

    #[cfg(target_os = "linux")]
    fn try_send_batch(&self, buf: &[u8], batch: &[soe_runtime::Outgoing]) -> io::Result<usize> {
        soe_runtime::socket::send_batch(self, self.io.get_ref(), buf, batch)
    }

    fn poll_writable(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.io.poll_writable(cx)
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    fn max_receive_segments(&self) -> usize {
        self.state.gro_segments()
    }

    fn registered_after_recv(&self) -> bool {
        self.registered.load(Ordering::Relaxed)
    }
}
