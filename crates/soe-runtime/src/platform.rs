//! What differs between the platforms' UDP sockets, met on purpose in this one module.
//!
//! The protocol crates never see a platform; this module is where the runtime meets each
//! difference, by name:
//!
//! * **The batching layer may not start.** [`UdpIo`] is `quinn-udp`'s socket state (`recvmmsg`,
//!   GSO, GRO where the platform has them) or, where `quinn-udp` cannot set its socket up, the
//!   plain `send_to`/`recv_from` path. Under wine 8, `quinn-udp` 0.6 fails on every IPv4
//!   socket with `WSAEOPNOTSUPP` (10045): it reads `IPV6_V6ONLY` from the socket to learn
//!   whether it is dual-stack, and wine refuses that IPv6 option on an IPv4 socket. Windows
//!   itself answers it (quinn's own tests bind IPv4 sockets on its Windows CI).
//! * **Windows has no `recvmmsg`, `sendmmsg`, GSO or GRO** in use: `quinn-udp` reads one
//!   datagram per call there and the driver's plain paths (one send per datagram) are the ones
//!   that run.
//! * **A closed port comes back on the next receive.** Windows reports the ICMP port
//!   unreachable of a datagram sent to a closed port as `WSAECONNRESET` on a later receive of
//!   the socket, connected or not; Linux reports it only on a connected socket. On Windows the
//!   runtime turns that report off (`SIO_UDP_CONNRESET`, through `soe-winsock`) on every socket
//!   that is not connected, so a server that answers a peer gone away hears nothing, as on
//!   Linux; a connected client socket keeps it, as on Linux. Should a report come anyway (the
//!   control code refused), every receive path takes it as concerning one datagram, counts it
//!   ([`Endpoint::port_unreachable`](crate::Endpoint::port_unreachable)) and goes on. Wine 8
//!   reports neither: an unconnected socket hears nothing, and a connected one only through
//!   `SO_ERROR`, which wine never clears.
//! * **A datagram longer than the buffer** is truncated silently on Linux but fails with
//!   `WSAEMSGSIZE` on Windows; both drop it (every receive buffer is at least 9000 bytes, more
//!   than any datagram an SOE peer sends). A send longer than UDP allows fails with `EMSGSIZE`
//!   or `WSAEMSGSIZE`, and the driver drops that datagram alone.
//! * **Sharing a port.** `SO_REUSEPORT` ([`SocketConfig::with_reuse_port`]) exists on Linux
//!   and the BSDs only; elsewhere it is an [`io::ErrorKind::Unsupported`] error. A second bind
//!   of a bound port fails everywhere. On Windows, another socket that sets `SO_REUSEADDR`
//!   could still bind a port in use and take its datagrams: every socket the runtime binds sets
//!   `SO_EXCLUSIVEADDRUSE` first (through `soe-winsock`), so that bind fails too.
//! * **Kernel buffers.** Linux grants at most `net.core.rmem_max`/`wmem_max` (and reports
//!   double what it keeps); Windows grants what is asked. Neither refusal is an error.
//! * **The blocking drivers' wait and cross-thread wake-up.** On Unix
//!   the thread blocks in `poll(2)` on its socket and on one end of a socket pair, and other
//!   threads wake it by writing to the other end, so a wake-up always reaches its own loop,
//!   even when shards share a port. Windows has no `poll` that std or a safe crate offers for
//!   a std socket: the thread blocks in a receive that peeks with a read timeout, and other
//!   threads wake it with an empty datagram to the socket's own address. That reaches this
//!   socket alone, because there is no `SO_REUSEPORT` on Windows.
//!
//! [`SocketConfig::with_reuse_port`]: crate::SocketConfig::with_reuse_port

use std::io::{self, IoSliceMut};
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use quinn_udp::{RecvMeta, Transmit, UdpSockRef, UdpSocketState};
use socket2::Socket;

/// The socket's datagram I/O: `quinn-udp`'s batched state, or the plain `send_to`/`recv_from`
/// path where that state cannot be set up (see the [module documentation](self)).
///
/// The runtime adapters keep one beside their socket and pass their own plain receive and
/// send in, so the fallback uses the adapter's socket as it is.
#[derive(Debug)]
pub struct UdpIo {
    state: Option<UdpSocketState>,
}

impl UdpIo {
    /// Sets `quinn-udp`'s state up on `socket`, or falls back to the plain path (logged) when it
    /// cannot be. Never fails: the plain path needs nothing.
    pub fn new(socket: UdpSockRef<'_>) -> Self {
        match UdpSocketState::new(socket) {
            Ok(state) => Self { state: Some(state) },
            Err(e) => {
                tracing::debug!(
                    error = %e,
                    "the batched UDP layer (quinn-udp) cannot start on this socket; \
                     using plain send_to/recv_from"
                );
                Self::plain()
            }
        }
    }

    /// The plain path, whatever the platform offers.
    pub fn plain() -> Self {
        Self { state: None }
    }

    /// Whether the batched layer runs (`false`: the plain path).
    pub fn is_batched(&self) -> bool {
        self.state.is_some()
    }

    /// The most buffers one [`recv`](Self::recv) fills: `quinn-udp`'s batch size, or 1 on the
    /// plain path. A receive that fills fewer than this (and fewer than it was offered) found
    /// the socket empty.
    pub fn batch_size(&self) -> usize {
        if self.is_batched() {
            quinn_udp::BATCH_SIZE
        } else {
            1
        }
    }

    /// Receives what is ready into `bufs`, describing each filled buffer in `meta`; returns
    /// how many were filled. `recv_from` is the adapter's own non-blocking receive, used on the
    /// plain path (one datagram per call).
    pub fn recv(
        &self,
        socket: UdpSockRef<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
        recv_from: impl FnOnce(&mut [u8]) -> io::Result<(usize, SocketAddr)>,
    ) -> io::Result<usize> {
        if let Some(state) = &self.state {
            return state.recv(socket, bufs, meta);
        }
        let (Some(buf), Some(slot)) = (bufs.first_mut(), meta.first_mut()) else {
            return Ok(0);
        };
        let (len, addr) = recv_from(buf)?;
        let mut filled = RecvMeta::default();
        filled.addr = addr;
        filled.len = len;
        filled.stride = len;
        *slot = filled;
        Ok(1)
    }

    /// Sends one transmit without waiting. `send_to` is the adapter's own non-blocking send,
    /// used on the plain path; a segmented transmit goes there datagram by datagram (the plain
    /// path reports [`max_gso_segments`](Self::max_gso_segments) 1, so the driver makes none).
    pub fn try_send(
        &self,
        socket: UdpSockRef<'_>,
        transmit: &Transmit<'_>,
        mut send_to: impl FnMut(&[u8], SocketAddr) -> io::Result<usize>,
    ) -> io::Result<()> {
        if let Some(state) = &self.state {
            return state.try_send(socket, transmit);
        }
        let size = transmit.segment_size.unwrap_or(transmit.contents.len());
        for datagram in transmit.contents.chunks(size.max(1)) {
            send_to(datagram, transmit.destination)?;
        }
        Ok(())
    }

    /// How many datagrams one segmented send may carry (1 without GSO or on the plain path).
    pub fn max_gso_segments(&self) -> usize {
        self.state
            .as_ref()
            .map_or(1, UdpSocketState::max_gso_segments)
    }

    /// How many datagrams the platform may coalesce into one receive buffer (1 without GRO or
    /// on the plain path).
    pub fn gro_segments(&self) -> usize {
        self.state.as_ref().map_or(1, UdpSocketState::gro_segments)
    }
}

/// Sets `SO_REUSEPORT` on `socket`.
#[cfg(all(
    unix,
    not(any(
        target_os = "solaris",
        target_os = "illumos",
        target_os = "cygwin",
        target_os = "nuttx",
        target_os = "wasi"
    ))
))]
pub(crate) fn set_reuse_port(socket: &Socket) -> io::Result<()> {
    socket.set_reuse_port(true)
}

/// There is no `SO_REUSEPORT` here: a clear error rather than a port that is not shared.
#[cfg(not(all(
    unix,
    not(any(
        target_os = "solaris",
        target_os = "illumos",
        target_os = "cygwin",
        target_os = "nuttx",
        target_os = "wasi"
    ))
)))]
pub(crate) fn set_reuse_port(_socket: &Socket) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "SO_REUSEPORT (reuse_port, shards on one port) does not exist on this platform",
    ))
}

/// Windows: no other socket may bind this one's address, even with `SO_REUSEADDR`
/// (`SO_EXCLUSIVEADDRUSE`, set before `bind`). Elsewhere a second bind fails without it.
pub(crate) fn exclusive_address(socket: &Socket) -> io::Result<()> {
    #[cfg(windows)]
    {
        soe_winsock::set_exclusive_addr_use(socket)
    }
    #[cfg(not(windows))]
    {
        let _ = socket;
        Ok(())
    }
}

/// Windows: a socket that is not connected stops hearing of closed ports
/// (`SIO_UDP_CONNRESET` off), as on Linux; a connected one keeps hearing of its peer's. When
/// the control code is refused the receive paths still take each report as one datagram's.
pub(crate) fn quiet_closed_ports(socket: &UdpSocket) {
    #[cfg(windows)]
    if socket.peer_addr().is_err() {
        if let Err(e) = soe_winsock::disable_udp_connreset(socket) {
            tracing::debug!(
                error = %e,
                "SIO_UDP_CONNRESET refused: closed ports will be counted on receive"
            );
        }
    }
    #[cfg(not(windows))]
    let _ = socket;
}

/// What a [`Waiter::wait`] saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Ready {
    /// Datagrams (or a pending error) may be waiting on the socket.
    pub(crate) readable: bool,
    /// The socket may take datagrams again.
    pub(crate) writable: bool,
    /// The wait took a [`Notify`]'s wake-up (on Unix; on Windows the wake-up stays queued on
    /// the socket and is `readable`).
    pub(crate) woken: bool,
}

/// Wakes a blocking driver's thread out of [`Waiter::wait`] from any thread.
#[derive(Debug)]
pub(crate) struct Notify {
    #[cfg(unix)]
    tx: std::os::unix::net::UnixDatagram,
    /// A handle on the driver's own socket, which the wake-up is sent from; `None` once
    /// [`release`](Notify::release)d, so that a stopped driver's port is free even while
    /// handles that could wake it live on. Shared so that a wake-up is sent outside the lock
    /// (threads waking the driver at once do not queue behind each other's system call).
    #[cfg(not(unix))]
    socket: std::sync::Mutex<Option<std::sync::Arc<UdpSocket>>>,
    #[cfg(not(unix))]
    target: SocketAddr,
}

/// Where a blocking driver's thread waits for its socket, its deadline or a [`Notify`].
#[derive(Debug)]
pub(crate) struct Waiter {
    #[cfg(unix)]
    rx: std::os::unix::net::UnixDatagram,
}

/// A waiter for `socket` (non-blocking, bound) and the notifier that wakes it.
pub(crate) fn waker_pair(socket: &UdpSocket) -> io::Result<(Waiter, Notify)> {
    #[cfg(unix)]
    {
        let _ = socket;
        let (tx, rx) = std::os::unix::net::UnixDatagram::pair()?;
        tx.set_nonblocking(true)?;
        rx.set_nonblocking(true)?;
        Ok((Waiter { rx }, Notify { tx }))
    }
    #[cfg(not(unix))]
    {
        let target = wake_target(socket.local_addr()?);
        let socket = std::sync::Mutex::new(Some(std::sync::Arc::new(socket.try_clone()?)));
        Ok((Waiter {}, Notify { socket, target }))
    }
}

impl Notify {
    /// The driver has stopped and will not wait again: let go of what keeps its socket open
    /// (on Windows, the handle the wake-ups are sent from), so its port is free while handles
    /// that could still call [`notify`](Self::notify) live on. Later notifications do nothing.
    pub(crate) fn release(&self) {
        #[cfg(not(unix))]
        drop(
            self.socket
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take(),
        );
    }

    /// Wakes the waiter (now, or at its next wait if it is not waiting).
    pub(crate) fn notify(&self) {
        #[cfg(unix)]
        let sent = self.tx.send(&[1]);
        #[cfg(not(unix))]
        let sent = {
            // Taken out under the lock, sent outside it. A release meanwhile closes the handle
            // once this last wake-up is out.
            let socket = self
                .socket
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone();
            match socket {
                Some(socket) => socket.send_to(&[], self.target),
                // The driver stopped: nobody waits.
                None => return,
            }
        };
        match sent {
            // A full pair already holds a wake-up.
            Err(e) if e.kind() != io::ErrorKind::WouldBlock => {
                tracing::debug!(error = %e, "wake-up failed");
            }
            _ => {}
        }
    }
}

impl Waiter {
    /// Blocks until `socket` is readable (or writable, when `write`), a [`Notify`] came, or
    /// `timeout` passed (`None`: no timeout). Takes the notifications it finds.
    pub(crate) fn wait(&self, socket: &UdpSocket, write: bool, timeout: Option<Duration>) -> Ready {
        #[cfg(unix)]
        {
            self.poll(socket, write, timeout)
        }
        #[cfg(not(unix))]
        {
            peek_wait(socket, write, timeout)
        }
    }

    /// Blocks until a [`Notify`] came or `timeout` passed, and, when `write`, until `socket`
    /// may take datagrams again; a datagram arriving does not end it (a receive-coalescing
    /// window). On Windows, where a wake-up is itself a datagram to the socket, this is a
    /// sleep of `timeout` (a wake-up from another thread waits for its end).
    pub(crate) fn wait_without_socket(
        &self,
        socket: &UdpSocket,
        write: bool,
        timeout: Option<Duration>,
    ) -> Ready {
        #[cfg(unix)]
        {
            if write {
                // Readable datagrams cannot end the wait: only the socket's room is asked.
                return self.poll_flags(socket, rustix::event::PollFlags::OUT, timeout);
            }
            self.poll_wake_only(timeout)
        }
        #[cfg(not(unix))]
        {
            let _ = socket;
            std::thread::sleep(timeout.unwrap_or(Duration::from_millis(1)));
            Ready {
                readable: false,
                writable: write,
                woken: false,
            }
        }
    }

    #[cfg(unix)]
    fn poll(&self, socket: &UdpSocket, write: bool, timeout: Option<Duration>) -> Ready {
        use rustix::event::PollFlags;
        let mut flags = PollFlags::IN;
        if write {
            flags |= PollFlags::OUT;
        }
        self.poll_flags(socket, flags, timeout)
    }

    /// Waits for the wake-up pair alone.
    #[cfg(unix)]
    fn poll_wake_only(&self, timeout: Option<Duration>) -> Ready {
        use rustix::event::{PollFd, PollFlags, poll};
        let mut fds = [PollFd::new(&self.rx, PollFlags::IN)];
        if let Err(e) = poll(&mut fds, timespec(timeout).as_ref()) {
            if e != rustix::io::Errno::INTR {
                tracing::debug!(error = %e, "poll failed");
            }
            return Ready::default();
        }
        let woken = !fds[0].revents().is_empty();
        if woken {
            let mut byte = [0u8; 8];
            while self.rx.recv(&mut byte).is_ok() {}
        }
        Ready {
            readable: false,
            writable: false,
            woken,
        }
    }

    #[cfg(unix)]
    fn poll_flags(
        &self,
        socket: &UdpSocket,
        flags: rustix::event::PollFlags,
        timeout: Option<Duration>,
    ) -> Ready {
        use rustix::event::{PollFd, PollFlags, poll};
        let mut fds = [
            PollFd::new(socket, flags),
            PollFd::new(&self.rx, PollFlags::IN),
        ];
        let timeout = timespec(timeout);
        if let Err(e) = poll(&mut fds, timeout.as_ref()) {
            if e != rustix::io::Errno::INTR {
                tracing::debug!(error = %e, "poll failed");
            }
            return Ready::default();
        }
        let [socket, wake] = fds.map(|fd| fd.revents());
        if !wake.is_empty() {
            let mut byte = [0u8; 8];
            while self.rx.recv(&mut byte).is_ok() {}
        }
        Ready {
            readable: socket.intersects(PollFlags::IN | PollFlags::ERR | PollFlags::HUP),
            writable: socket.intersects(PollFlags::OUT | PollFlags::ERR),
            woken: !wake.is_empty(),
        }
    }
}

/// A wait's timeout as `poll(2)` takes it (`None`: no timeout).
#[cfg(unix)]
fn timespec(timeout: Option<Duration>) -> Option<rustix::event::Timespec> {
    timeout.map(|t| rustix::event::Timespec {
        tv_sec: i64::try_from(t.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(t.subsec_nanos()),
    })
}

/// Windows: blocks in a peeking receive with a read timeout. A wake-up is an empty datagram to
/// the socket's own address (it stays queued: the driver reads and ignores it). A datagram
/// longer than the one-byte buffer fails the peek with `WSAEMSGSIZE` (and a closed port with
/// `WSAECONNRESET`): both mean there is something to receive. There is no wait for room to
/// send: while a send was refused the wait lasts at most a millisecond.
#[cfg(not(unix))]
fn peek_wait(socket: &UdpSocket, write: bool, timeout: Option<Duration>) -> Ready {
    const WRITE_RETRY: Duration = Duration::from_millis(1);
    let timeout = if write {
        Some(timeout.map_or(WRITE_RETRY, |t| t.min(WRITE_RETRY)))
    } else {
        timeout
    };
    if timeout == Some(Duration::ZERO) {
        return Ready {
            readable: true,
            writable: true,
            woken: false,
        };
    }
    let blocking = socket
        .set_nonblocking(false)
        .and_then(|()| socket.set_read_timeout(timeout));
    let peeked = match blocking {
        Ok(()) => socket.peek_from(&mut [0u8; 1]).map(|_| ()),
        Err(e) => Err(e),
    };
    if let Err(e) = socket.set_nonblocking(true) {
        tracing::debug!(error = %e, "cannot make the socket non-blocking again");
    }
    let readable = match peeked {
        Ok(()) => true,
        Err(e) => !matches!(
            e.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
        ),
    };
    Ready {
        readable,
        writable: write,
        woken: false,
    }
}

/// Where a wake-up datagram goes: the socket's own address, with the loopback address for an
/// unspecified one.
#[cfg(not(unix))]
fn wake_target(local: SocketAddr) -> SocketAddr {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let ip = match local.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, local.port())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Instant;

    fn bound() -> UdpSocket {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket.set_nonblocking(true).unwrap();
        socket
    }

    #[test]
    fn a_notify_from_another_thread_ends_a_wait_without_deadline() {
        let socket = bound();
        let (waiter, notify) = waker_pair(&socket).unwrap();
        let notify = Arc::new(notify);
        let other = notify.clone();
        let woken = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            other.notify();
        });
        // No deadline: only the notification can end this wait.
        let ready = waiter.wait(&socket, false, None);
        woken.join().unwrap();
        assert_eq!(ready.woken, cfg!(unix));
        // A notification sent before the wait is not lost either.
        notify.notify();
        let start = Instant::now();
        waiter.wait(&socket, false, Some(Duration::from_secs(20)));
        assert!(start.elapsed() < Duration::from_secs(10));
        // On Windows the wake-up is a datagram on the socket itself.
        assert_eq!(ready.readable, cfg!(not(unix)));
    }

    #[test]
    fn a_wait_ends_at_its_timeout_and_when_a_datagram_comes() {
        let socket = bound();
        let (waiter, _notify) = waker_pair(&socket).unwrap();
        let ready = waiter.wait(&socket, false, Some(Duration::from_millis(20)));
        assert!(!ready.readable);
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        peer.send_to(b"hello", socket.local_addr().unwrap())
            .unwrap();
        let ready = waiter.wait(&socket, false, Some(Duration::from_secs(20)));
        assert!(ready.readable);
        let mut buf = [0u8; 16];
        assert_eq!(socket.recv_from(&mut buf).unwrap().0, 5);
    }

    /// A socket bound as the runtime binds it, non-blocking, with closed ports quieted.
    fn runtime_socket() -> UdpSocket {
        let socket = crate::SocketConfig::default()
            .bind("127.0.0.1:0".parse().unwrap())
            .unwrap();
        socket.set_nonblocking(true).unwrap();
        quiet_closed_ports(&socket);
        socket
    }

    /// Receives one datagram within 20 s (or the error of the first receive that fails).
    fn recv_one(socket: &UdpSocket, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let (waiter, _notify) = waker_pair(socket).unwrap();
        let start = Instant::now();
        loop {
            match socket.recv_from(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                other => return other,
            }
            assert!(start.elapsed() < Duration::from_secs(20), "nothing came");
            waiter.wait(socket, false, Some(Duration::from_millis(100)));
        }
    }

    #[test]
    fn a_receive_after_sending_to_a_closed_port_gets_the_next_datagram() {
        let socket = runtime_socket();
        let closed = bound().local_addr().unwrap();
        socket.send_to(b"to nobody", closed).unwrap();
        // A connected socket hears the same closed port: once it has, so has the ICMP answer
        // to ours, sent before (Linux and Windows report it on the receive, wine 8 only
        // through SO_ERROR).
        let witness = bound();
        witness.connect(closed).unwrap();
        witness.send(b"to nobody").unwrap();
        let start = Instant::now();
        loop {
            let heard = match witness.recv(&mut [0u8; 16]) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    witness.take_error().unwrap().is_some()
                }
                Err(e) => is_refusal(&e),
                Ok(_) => panic!("a closed port answered"),
            };
            if heard {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(20), "no ICMP answer");
            std::thread::sleep(Duration::from_millis(5));
        }
        // Without SIO_UDP_CONNRESET off, Windows would fail this receive with WSAECONNRESET.
        let peer = bound();
        peer.send_to(b"next", socket.local_addr().unwrap()).unwrap();
        let mut buf = [0u8; 16];
        let (len, from) = recv_one(&socket, &mut buf).unwrap();
        assert_eq!(
            (&buf[..len], from),
            (&b"next"[..], peer.local_addr().unwrap())
        );
    }

    fn is_refusal(e: &io::Error) -> bool {
        matches!(
            e.kind(),
            io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionReset
        )
    }

    #[test]
    fn no_other_socket_takes_a_bound_port_even_with_reuse_address() {
        let ours = runtime_socket();
        let addr = ours.local_addr().unwrap();
        let thief = Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None).unwrap();
        thief.set_reuse_address(true).unwrap();
        // Windows lets this bind succeed unless the port's socket set SO_EXCLUSIVEADDRUSE.
        let e = thief.bind(&addr.into()).unwrap_err();
        assert!(
            matches!(
                e.kind(),
                io::ErrorKind::AddrInUse | io::ErrorKind::PermissionDenied
            ),
            "{e}"
        );
    }

    #[test]
    fn a_datagram_longer_than_the_buffer_is_lost_alone() {
        let socket = runtime_socket();
        let peer = bound();
        let to = socket.local_addr().unwrap();
        peer.send_to(&[7u8; 3000], to).unwrap();
        peer.send_to(b"next", to).unwrap();
        let mut buf = [0u8; 100];
        let first = recv_one(&socket, &mut buf);
        if cfg!(windows) {
            // WSAEMSGSIZE, the datagram dropped.
            let e = first.unwrap_err();
            assert_eq!(e.raw_os_error(), Some(10040), "{e}");
        } else {
            // The first 100 bytes, the rest dropped.
            assert_eq!(first.unwrap().0, 100);
        }
        let (len, _) = recv_one(&socket, &mut buf).unwrap();
        assert_eq!(&buf[..len], b"next");
    }

    #[test]
    fn a_send_longer_than_udp_allows_fails_alone() {
        let socket = runtime_socket();
        let peer = bound();
        let to = peer.local_addr().unwrap();
        let e = socket.send_to(&vec![0u8; 70_000], to).unwrap_err();
        // EMSGSIZE (Linux 90) or WSAEMSGSIZE (10040).
        let expected = if cfg!(windows) { 10040 } else { 90 };
        if cfg!(any(windows, target_os = "linux")) {
            assert_eq!(e.raw_os_error(), Some(expected), "{e}");
        }
        socket.send_to(b"next", to).unwrap();
        let mut buf = [0u8; 16];
        let (len, _) = recv_one(&peer, &mut buf).unwrap();
        assert_eq!(&buf[..len], b"next");
    }

    #[test]
    fn the_plain_path_sends_and_receives_one_datagram_per_call() {
        let a = bound();
        let b = bound();
        let io = UdpIo::plain();
        assert!(!io.is_batched());
        assert_eq!(
            (io.batch_size(), io.max_gso_segments(), io.gro_segments()),
            (1, 1, 1)
        );
        let to = b.local_addr().unwrap();
        // A segmented transmit goes datagram by datagram.
        let mut transmit = crate::socket::datagram_transmit(to, b"abcdefg");
        transmit.segment_size = Some(4);
        io.try_send((&a).into(), &transmit, |d, to| a.send_to(d, to))
            .unwrap();
        let (waiter, _notify) = waker_pair(&b).unwrap();
        let mut got = Vec::new();
        while got.len() < 2 {
            waiter.wait(&b, false, Some(Duration::from_secs(20)));
            let mut bufs = [[0u8; 64]; 2];
            let [x, y] = &mut bufs;
            let mut slices = [IoSliceMut::new(x), IoSliceMut::new(y)];
            let mut meta = [RecvMeta::default(); 2];
            match io.recv((&b).into(), &mut slices, &mut meta, |buf| b.recv_from(buf)) {
                Ok(n) => {
                    assert_eq!(n, 1);
                    assert_eq!(meta[0].addr, a.local_addr().unwrap());
                    assert_eq!(meta[0].stride, meta[0].len);
                    got.push(bufs[0][..meta[0].len].to_vec());
                }
                Err(e) => assert_eq!(e.kind(), io::ErrorKind::WouldBlock),
            }
        }
        assert_eq!(got, [b"abcd".to_vec(), b"efg".to_vec()]);
    }
}
