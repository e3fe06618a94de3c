//! The [`Runtime`] implementation for tokio.

use std::future::Future;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use soe_runtime::udp::{RecvMeta, Transmit, UdpSocketState};
use soe_runtime::{AsyncTimer, AsyncUdpSocket, Runtime};
use tokio::io::Interest;

/// Runs the driver on the tokio runtime the endpoint was bound in.
#[derive(Debug, Clone)]
pub struct TokioRuntime {
    handle: tokio::runtime::Handle,
}

impl TokioRuntime {
    /// The runtime of the calling task.
    ///
    /// Fails (rather than panicking) when called outside a tokio runtime.
    pub fn current() -> io::Result<Self> {
        tokio::runtime::Handle::try_current()
            .map(|handle| Self { handle })
            .map_err(|e| io::Error::other(format!("no tokio runtime: {e}")))
    }

    /// Runs on the runtime behind `handle`.
    pub fn from_handle(handle: tokio::runtime::Handle) -> Self {
        Self { handle }
    }
}

impl Runtime for TokioRuntime {
    fn new_timer(&self, deadline: Instant) -> Pin<Box<dyn AsyncTimer>> {
        let _guard = self.handle.enter();
        Box::pin(Timer(Box::pin(tokio::time::sleep_until(deadline.into()))))
    }

    fn spawn(&self, future: Pin<Box<dyn Future<Output = ()> + Send>>) {
        drop(self.handle.spawn(future));
    }

    fn wrap_udp_socket(&self, socket: std::net::UdpSocket) -> io::Result<Arc<dyn AsyncUdpSocket>> {
        socket.set_nonblocking(true)?;
        let state = UdpSocketState::new((&socket).into())?;
        let _guard = self.handle.enter();
        let io = tokio::net::UdpSocket::from_std(socket)?;
        Ok(Arc::new(Socket { io, state }))
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
    io: tokio::net::UdpSocket,
    state: UdpSocketState,
}

impl AsyncUdpSocket for Socket {
    fn poll_recv(
        &self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        loop {
            ready!(self.io.poll_recv_ready(cx))?;
            match self.io.try_io(Interest::READABLE, || {
                self.state.recv((&self.io).into(), bufs, meta)
            }) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                other => return Poll::Ready(other),
            }
        }
    }

    fn try_send(&self, destination: SocketAddr, datagram: &[u8]) -> io::Result<()> {
        let transmit = Transmit {
            destination,
            ecn: None,
            contents: datagram,
            segment_size: None,
            src_ip: None,
        };
        self.io.try_io(Interest::WRITABLE, || {
            self.state.try_send((&self.io).into(), &transmit)
        })
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
}
