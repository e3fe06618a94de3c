//! The socket of an endpoint with a receive-coalescing window, on Linux and Android.
//!
//! tokio registers a socket with its reactor once, edge-triggered, for reading and writing. The
//! kernel then reports every datagram that arrives, and every send buffer that frees, to the
//! reactor's `epoll_wait`: inside a coalescing window, where the driver leaves the socket
//! unread, each arrival still wakes the runtime's thread, which finds no task to run and goes
//! back to sleep. Measured on `soe serve` at 10,000 echoes a second with a 1 ms window, that was
//! four to five sleeps and wake-ups per window where one is needed.
//!
//! [`HeldSocket`] keeps the socket out of tokio's reactor. It sits alone in an epoll set of its
//! own, which tokio watches instead, and its interest there is one-shot: armed for reading only
//! when a receive found nothing, for writing only when a send found the buffer full, and
//! disarmed by the first event. While the driver holds the socket unread, nothing is armed, so
//! no arrival wakes anyone: the driver's timer ends the window.

use std::io::{self, IoSliceMut};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::OwnedFd;
use std::sync::{Mutex, PoisonError};
use std::task::{Context, Poll, ready};

use rustix::event::Timespec;
use rustix::event::epoll::{self, Event, EventData, EventFlags};
use soe_runtime::AsyncUdpSocket;
use soe_runtime::platform::UdpIo;
use soe_runtime::udp::RecvMeta;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// An unconnected UDP socket in an epoll set of its own, armed one-shot on demand.
#[derive(Debug)]
pub(crate) struct HeldSocket {
    /// The socket, non-blocking; not registered with tokio.
    io: UdpSocket,
    /// quinn-udp's batched I/O, or the plain path where it cannot start.
    state: UdpIo,
    /// The epoll set that holds the socket alone, registered with tokio for reading: it is
    /// readable when an armed interest of the socket has fired.
    set: AsyncFd<OwnedFd>,
    /// What is armed and what has fired; only the driver's task uses the socket, so the lock
    /// is never contended.
    interest: Mutex<Interests>,
}

/// The socket's one-shot interest in its set.
#[derive(Debug, Default)]
struct Interests {
    /// Armed and not yet taken from the set.
    armed: EventFlags,
    /// Taken from the set and not yet handed to the wait that asked for it.
    fired: EventFlags,
}

/// A wait that does not block: the set is only read once tokio says it is readable.
const NO_WAIT: Timespec = Timespec {
    tv_sec: 0,
    tv_nsec: 0,
};

impl HeldSocket {
    /// Puts `io` (non-blocking, unconnected) in an epoll set of its own, nothing armed, and
    /// registers the set with the tokio runtime of the caller.
    pub(crate) fn new(io: UdpSocket) -> io::Result<Self> {
        let set = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        epoll::add(&set, &io, EventData::new_u64(0), EventFlags::ONESHOT)?;
        // tokio 1.54 deprecates the safe constructor in favour of an `unsafe` one, because an
        // arbitrary `AsRawFd` may change or close its descriptor while registered. An
        // `OwnedFd` cannot: it owns one descriptor until the `AsyncFd` drops it, which is the
        // unsafe constructor's whole contract. This crate forbids `unsafe`, and supports tokio
        // from 1.40, which has only the safe one.
        #[allow(deprecated)]
        let set = AsyncFd::with_interest(set, Interest::READABLE)?;
        let state = UdpIo::new((&io).into());
        Ok(Self {
            io,
            state,
            set,
            interest: Mutex::new(Interests::default()),
        })
    }

    fn interests(&self) -> std::sync::MutexGuard<'_, Interests> {
        self.interest.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes what fired from the set once tokio reports it readable, which disarms the socket
    /// (one-shot). Until it is taken, a fired interest keeps the set on tokio's ready list,
    /// and every further arrival would wake the reactor again. `Pending` when nothing fired;
    /// `cx` is then woken when something armed does.
    fn poll_take(&self, interests: &mut Interests, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut guard = ready!(self.set.poll_read_ready(cx))?;
        let mut events = [Event {
            flags: EventFlags::empty(),
            data: EventData::new_u64(0),
        }];
        let taken = epoll::wait(self.set.get_ref(), &mut events[..], Some(&NO_WAIT))?;
        // Nothing can fire between the take and this: the socket is disarmed.
        guard.clear_ready();
        if let (true, Some(event)) = (taken > 0, events.first()) {
            interests.armed = EventFlags::empty();
            interests.fired |= event.flags;
        }
        Poll::Ready(Ok(()))
    }

    /// Ready once `want` (or an error or hang-up, which every wait must see) has fired; arms it
    /// first when it is not armed.
    fn poll_event(&self, cx: &mut Context<'_>, want: EventFlags) -> Poll<io::Result<()>> {
        let mut interests = self.interests();
        loop {
            let hit = interests.fired & (want | EventFlags::ERR | EventFlags::HUP);
            if !hit.is_empty() {
                interests.fired.remove(hit);
                return Poll::Ready(Ok(()));
            }
            if !interests.armed.contains(want) {
                let armed = interests.armed | want;
                epoll::modify(
                    self.set.get_ref(),
                    &self.io,
                    EventData::new_u64(0),
                    armed | EventFlags::ONESHOT,
                )?;
                interests.armed = armed;
            }
            ready!(self.poll_take(&mut interests, cx))?;
        }
    }

    /// One transmit, batched or plain.
    fn send(&self, transmit: &soe_runtime::udp::Transmit<'_>) -> io::Result<()> {
        self.state
            .try_send((&self.io).into(), transmit, |d, to| self.io.send_to(d, to))
    }
}

impl AsyncUdpSocket for HeldSocket {
    fn poll_recv(
        &self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        {
            // An armed read that fired is taken now, whether or not the driver was woken for
            // it, so that arrivals stop waking the reactor; the receive below reads what came.
            let mut interests = self.interests();
            if !interests.armed.is_empty() {
                let _ = self.poll_take(&mut interests, cx)?;
            }
            interests
                .fired
                .remove(EventFlags::IN | EventFlags::ERR | EventFlags::HUP);
        }
        loop {
            let received = self
                .state
                .recv((&self.io).into(), bufs, meta, |buf| self.io.recv_from(buf));
            match received {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    ready!(self.poll_event(cx, EventFlags::IN))?;
                }
                other => return Poll::Ready(other),
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

    fn try_send_batch(&self, buf: &[u8], batch: &[soe_runtime::Outgoing]) -> io::Result<usize> {
        soe_runtime::socket::send_batch(self, &self.io, buf, batch)
    }

    fn max_send_segments(&self) -> usize {
        self.state.max_gso_segments()
    }

    fn poll_writable(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_event(cx, EventFlags::OUT)
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }

    fn max_receive_segments(&self) -> usize {
        self.state.gro_segments()
    }
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;
    use std::time::Duration;

    use super::*;

    fn bound() -> UdpSocket {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket.set_nonblocking(true).unwrap();
        socket
    }

    /// Whether the socket's set holds an event for tokio: what would wake the reactor.
    fn set_is_readable(socket: &HeldSocket) -> bool {
        // A look that takes nothing: `epoll_wait` on the set would take (and disarm) it, so
        // ask `poll(2)`, as tokio's epoll does.
        let mut fds = [rustix::event::PollFd::new(
            socket.set.get_ref(),
            rustix::event::PollFlags::IN,
        )];
        rustix::event::poll(&mut fds, Some(&NO_WAIT)).unwrap() > 0
    }

    /// Returns once a datagram waits in the socket (`poll(2)` on it, which takes nothing and
    /// leaves its interest in the set as it was), so that what the test asserts next is about
    /// an arrival that has happened.
    fn wait_for_arrival(socket: &HeldSocket) {
        let mut fds = [rustix::event::PollFd::new(
            &socket.io,
            rustix::event::PollFlags::IN,
        )];
        let bound = Timespec {
            tv_sec: 30,
            tv_nsec: 0,
        };
        assert_eq!(rustix::event::poll(&mut fds, Some(&bound)).unwrap(), 1);
    }

    async fn recv(socket: &HeldSocket) -> io::Result<usize> {
        let mut buf = [0_u8; 2048];
        let mut meta = [RecvMeta::default()];
        poll_fn(|cx| {
            let mut bufs = [IoSliceMut::new(&mut buf)];
            socket.poll_recv(cx, &mut bufs, &mut meta)
        })
        .await
    }

    #[tokio::test(flavor = "current_thread")]
    async fn arrivals_reach_the_reactor_only_while_a_receive_waits() {
        let socket = std::sync::Arc::new(HeldSocket::new(bound()).unwrap());
        let to = socket.local_addr().unwrap();
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        // Nothing armed: a datagram is not reported to tokio.
        peer.send_to(b"one", to).unwrap();
        wait_for_arrival(&socket);
        assert!(!set_is_readable(&socket));
        assert_eq!(recv(&socket).await.unwrap(), 1);
        // A receive that finds nothing arms the socket, and waits until one comes.
        let waiting = tokio::spawn({
            let socket = socket.clone();
            async move { recv(&socket).await }
        });
        let mut turns = 0;
        while !socket.interests().armed.contains(EventFlags::IN) {
            assert!(turns < 1_000, "the receive never waited");
            turns += 1;
            tokio::task::yield_now().await;
        }
        assert!(!waiting.is_finished());
        peer.send_to(b"two", to).unwrap();
        let n = tokio::time::timeout(Duration::from_secs(30), waiting)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(n.unwrap(), 1);
        // That arrival disarmed it: those after it, left unread, are not reported.
        for _ in 0..3 {
            peer.send_to(b"more", to).unwrap();
        }
        wait_for_arrival(&socket);
        assert!(!set_is_readable(&socket));
        // The next receive reads them without waiting.
        let mut read = 0;
        while read < 3 {
            read += recv(&socket).await.unwrap();
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_send_wait_ends_once_the_socket_can_send() {
        let socket = HeldSocket::new(bound()).unwrap();
        tokio::time::timeout(
            Duration::from_secs(30),
            poll_fn(|cx| socket.poll_writable(cx)),
        )
        .await
        .unwrap()
        .unwrap();
        // The wait took its event: nothing is left armed or reported.
        assert!(!set_is_readable(&socket));
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket
            .try_send(peer.local_addr().unwrap(), b"sent")
            .unwrap();
        let mut buf = [0_u8; 16];
        peer.set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        assert_eq!(peer.recv(&mut buf).unwrap(), 4);
    }
}
