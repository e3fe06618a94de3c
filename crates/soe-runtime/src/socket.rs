//! Binding UDP sockets with the options a busy SOE endpoint wants.

use std::io;
use std::net::{SocketAddr, UdpSocket};

use socket2::{Domain, Protocol, Socket, Type};

/// The default size asked for the kernel's receive and send buffers: 4 MiB.
pub const DEFAULT_BUFFER_SIZE: usize = 4 * 1024 * 1024;

/// Options for the UDP socket an endpoint binds.
///
/// The defaults ask for 4 MiB kernel buffers each way (the OS may grant less, silently: on Linux
/// the ceiling is `net.core.rmem_max` / `wmem_max`; Windows grants what is asked) and do not
/// share the port. What differs between platforms is listed in [`platform`](crate::platform).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SocketConfig {
    /// The `SO_RCVBUF` size to ask for, in bytes; `None` keeps the OS default.
    pub recv_buffer_size: Option<usize>,
    /// The `SO_SNDBUF` size to ask for, in bytes; `None` keeps the OS default.
    pub send_buffer_size: Option<usize>,
    /// Sets `SO_REUSEPORT` (Linux and the BSDs) so several endpoints ("shards", e.g. one per
    /// core) can bind the same address; the kernel spreads peers over them by a hash of their
    /// addresses and ports. The endpoints of one process bound to one address this way share one
    /// secret and one set of per-source limits (a `soe_session::ShardGroup`), so a host that
    /// varies its source port still has one share; a session stays on its shard (see the crate
    /// docs). Binding fails with [`io::ErrorKind::Unsupported`] where the option does not exist
    /// (Windows). Without it, a second bind of a bound port fails on every platform.
    pub reuse_port: bool,
}

impl Default for SocketConfig {
    fn default() -> Self {
        Self {
            recv_buffer_size: Some(DEFAULT_BUFFER_SIZE),
            send_buffer_size: Some(DEFAULT_BUFFER_SIZE),
            reuse_port: false,
        }
    }
}

impl SocketConfig {
    /// Sets the receive buffer size to ask for (`None`: the OS default).
    pub fn with_recv_buffer_size(mut self, bytes: Option<usize>) -> Self {
        self.recv_buffer_size = bytes;
        self
    }

    /// Sets the send buffer size to ask for (`None`: the OS default).
    pub fn with_send_buffer_size(mut self, bytes: Option<usize>) -> Self {
        self.send_buffer_size = bytes;
        self
    }

    /// Shares the port with other sockets that set the same option (`SO_REUSEPORT`).
    pub fn with_reuse_port(mut self, reuse: bool) -> Self {
        self.reuse_port = reuse;
        self
    }

    /// Binds a UDP socket to `addr` with these options, in blocking mode.
    ///
    /// Buffer sizes the OS refuses or lowers are not an error. `reuse_port` on a platform without
    /// `SO_REUSEPORT` is: [`io::ErrorKind::Unsupported`].
    pub fn bind(&self, addr: SocketAddr) -> io::Result<UdpSocket> {
        let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
        if let Some(bytes) = self.recv_buffer_size {
            if let Err(e) = socket.set_recv_buffer_size(bytes) {
                tracing::debug!(bytes, error = %e, "SO_RCVBUF refused; keeping the OS default");
            }
        }
        if let Some(bytes) = self.send_buffer_size {
            if let Err(e) = socket.set_send_buffer_size(bytes) {
                tracing::debug!(bytes, error = %e, "SO_SNDBUF refused; keeping the OS default");
            }
        }
        if self.reuse_port {
            crate::platform::set_reuse_port(&socket)?;
        }
        crate::platform::exclusive_address(&socket)?;
        socket.bind(&addr.into())?;
        Ok(socket.into())
    }
}

/// The quinn-udp [`Transmit`](quinn_udp::Transmit) for one SOE datagram: no ECN, no segmentation
/// offload (SOE datagrams vary in size), the OS's choice of source address. Runtime adapters
/// hand it to [`UdpSocketState::try_send`](quinn_udp::UdpSocketState::try_send).
pub fn datagram_transmit(destination: SocketAddr, datagram: &[u8]) -> quinn_udp::Transmit<'_> {
    quinn_udp::Transmit {
        destination,
        ecn: None,
        contents: datagram,
        segment_size: None,
        src_ip: None,
    }
}

/// The quinn-udp [`Transmit`](quinn_udp::Transmit) for `contents` sent as datagrams of
/// `segment_size` bytes (the last may be shorter) in one call: segmentation offload where the
/// socket has it, as [`datagram_transmit`] otherwise.
pub fn segments_transmit(
    destination: SocketAddr,
    contents: &[u8],
    segment_size: usize,
) -> quinn_udp::Transmit<'_> {
    let mut transmit = datagram_transmit(destination, contents);
    transmit.segment_size = Some(segment_size);
    transmit
}

/// [`AsyncUdpSocket::try_send_batch`](crate::AsyncUdpSocket::try_send_batch) for an adapter
/// whose platform socket is `fd`: a lone datagram, or a leading segmented entry, through the
/// adapter's own sends (`socket`); a run of single datagrams in one `sendmmsg` ([`send_many`]).
#[cfg(target_os = "linux")]
pub fn send_batch<S: crate::AsyncUdpSocket + ?Sized>(
    socket: &S,
    fd: impl std::os::fd::AsFd,
    buf: &[u8],
    batch: &[crate::Outgoing],
) -> io::Result<usize> {
    if batch.len() == 1 || batch.first().is_some_and(crate::Outgoing::is_segmented) {
        let first = batch.get(..1).unwrap_or_default();
        return crate::runtime::send_one_by_one(socket, buf, first);
    }
    send_many(fd, buf, batch)
}

/// The most entries [`send_many`] passes to one `sendmmsg`.
#[cfg(target_os = "linux")]
pub const SEND_MANY_MAX: usize = 32;

/// Sends the leading run of single datagrams of `batch` (up to [`SEND_MANY_MAX`], stopping at
/// the first segmented entry) in one `sendmmsg` on `socket`, a non-blocking UDP socket. Returns
/// how many entries went (at least one), or the first entry's error when none went, as
/// [`AsyncUdpSocket::try_send_batch`](crate::AsyncUdpSocket::try_send_batch) does; `Ok(0)` only
/// when the batch is empty or starts with a segmented entry (send that one apart).
///
/// No ECN and no source address are set, as [`datagram_transmit`] sets none.
#[cfg(target_os = "linux")]
pub fn send_many(
    socket: impl std::os::fd::AsFd,
    buf: &[u8],
    batch: &[crate::Outgoing],
) -> io::Result<usize> {
    let run = batch
        .iter()
        .take(SEND_MANY_MAX)
        .take_while(|e| !e.is_segmented())
        .count();
    let Some(batch) = batch.get(..run).filter(|b| !b.is_empty()) else {
        return Ok(0);
    };
    // The headers live on the stack, as many as the run needs (rounded up), so a batch of two
    // does not set up thirty-two.
    if batch.len() <= 4 {
        send_run::<4>(socket, buf, batch)
    } else {
        send_run::<SEND_MANY_MAX>(socket, buf, batch)
    }
}

/// One `sendmmsg` of `batch` (at most `N` single datagrams) on `socket`.
#[cfg(target_os = "linux")]
fn send_run<const N: usize>(
    socket: impl std::os::fd::AsFd,
    buf: &[u8],
    batch: &[crate::Outgoing],
) -> io::Result<usize> {
    use rustix::net::{MMsgHdr, SendAncillaryBuffer, SendFlags, SocketAddrAny, sendmmsg};
    use std::io::IoSlice;

    let batch = batch.get(..batch.len().min(N)).unwrap_or_default();
    let unspecified = SocketAddr::from(([0, 0, 0, 0], 0));
    let addrs: [SocketAddrAny; N] = std::array::from_fn(|i| {
        SocketAddrAny::from(batch.get(i).map_or(unspecified, |e| e.destination))
    });
    let iovs: [[IoSlice<'_>; 1]; N] = std::array::from_fn(|i| {
        [IoSlice::new(
            batch.get(i).map_or(&[][..], |e| e.contents(buf)),
        )]
    });
    let mut controls: [SendAncillaryBuffer<'_, '_, '_>; N] =
        std::array::from_fn(|_| SendAncillaryBuffer::default());
    // One header per slot, each borrowing its own address, bytes and (empty) control buffer.
    let mut slot = 0;
    let mut headers = controls.each_mut().map(|control| {
        let i = slot % N;
        slot += 1;
        MMsgHdr::new_with_addr(&addrs[i], &iovs[i], control)
    });
    let headers = headers.get_mut(..batch.len()).unwrap_or_default();
    sendmmsg(socket, headers, SendFlags::empty()).map_err(io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binds_loopback_with_big_buffers() {
        let socket = SocketConfig::default()
            .bind("127.0.0.1:0".parse().unwrap())
            .unwrap();
        let sock = socket2::SockRef::from(&socket);
        // The OS may grant less than asked, but never less than its default (> 0).
        assert!(sock.recv_buffer_size().unwrap() > 0);
        assert_ne!(socket.local_addr().unwrap().port(), 0);
        // Windows has no system ceiling: it grants what was asked.
        if cfg!(windows) {
            assert_eq!(sock.recv_buffer_size().unwrap(), DEFAULT_BUFFER_SIZE);
            assert_eq!(sock.send_buffer_size().unwrap(), DEFAULT_BUFFER_SIZE);
        }
    }

    #[test]
    fn a_second_bind_of_a_bound_port_fails() {
        let first = SocketConfig::default()
            .bind("127.0.0.1:0".parse().unwrap())
            .unwrap();
        let addr = first.local_addr().unwrap();
        let second = SocketConfig::default().bind(addr).unwrap_err();
        assert_eq!(second.kind(), io::ErrorKind::AddrInUse, "{second}");
    }

    #[cfg(windows)]
    #[test]
    fn reuse_port_is_a_clear_unsupported_error_on_windows() {
        let e = SocketConfig::default()
            .with_reuse_port(true)
            .bind("127.0.0.1:0".parse().unwrap())
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Unsupported);
        assert!(e.to_string().contains("SO_REUSEPORT"), "{e}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn reuse_port_lets_two_shards_share_a_port() {
        let config = SocketConfig::default().with_reuse_port(true);
        let a = config.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = a.local_addr().unwrap();
        let b = config.bind(addr).unwrap();
        assert_eq!(b.local_addr().unwrap(), addr);
        // Without the option the port is taken.
        assert!(SocketConfig::default().bind(addr).is_err());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn send_many_sends_a_run_to_many_peers_and_stops_at_a_segmented_entry() {
        let loopback = "127.0.0.1:0".parse().unwrap();
        let sender = SocketConfig::default().bind(loopback).unwrap();
        sender.set_nonblocking(true).unwrap();
        let peers: Vec<UdpSocket> = (0..3)
            .map(|_| SocketConfig::default().bind(loopback).unwrap())
            .collect();
        let mut buf = Vec::new();
        let mut batch = Vec::new();
        for (i, peer) in peers.iter().enumerate() {
            let offset = buf.len();
            buf.extend(std::iter::repeat_n(b'a' + i as u8, 10 + i));
            batch.push(crate::Outgoing {
                destination: peer.local_addr().unwrap(),
                offset,
                len: 10 + i,
                segment_size: 10 + i,
            });
        }
        // A segmented entry after the run: left for its own send.
        batch.push(crate::Outgoing {
            destination: peers[0].local_addr().unwrap(),
            offset: 0,
            len: 20,
            segment_size: 10,
        });
        assert_eq!(send_many(&sender, &buf, &batch).unwrap(), 3);
        for (i, peer) in peers.iter().enumerate() {
            let mut got = [0u8; 64];
            let (n, from) = peer.recv_from(&mut got).unwrap();
            assert_eq!(from, sender.local_addr().unwrap());
            assert_eq!(&got[..n], &vec![b'a' + i as u8; 10 + i][..]);
        }
        assert_eq!(send_many(&sender, &buf, &batch[3..]).unwrap(), 0);
        assert_eq!(send_many(&sender, &buf, &[]).unwrap(), 0);
    }
}
