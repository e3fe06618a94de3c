//! Binding UDP sockets with the options a busy SOE endpoint wants.

use std::io;
use std::net::{SocketAddr, UdpSocket};

use socket2::{Domain, Protocol, Socket, Type};

/// The default size asked for the kernel's receive and send buffers: 4 MiB.
pub const DEFAULT_BUFFER_SIZE: usize = 4 * 1024 * 1024;

/// Options for the UDP socket an endpoint binds.
///
/// The defaults ask for 4 MiB kernel buffers each way (the OS may grant less, silently: on Linux
/// the ceiling is `net.core.rmem_max` / `wmem_max`) and do not share the port.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SocketConfig {
    /// The `SO_RCVBUF` size to ask for, in bytes; `None` keeps the OS default.
    pub recv_buffer_size: Option<usize>,
    /// The `SO_SNDBUF` size to ask for, in bytes; `None` keeps the OS default.
    pub send_buffer_size: Option<usize>,
    /// Sets `SO_REUSEPORT` (Unix only) so several endpoints ("shards", e.g. one per core) can bind
    /// the same address; the kernel spreads peers over them by address hash.
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
            set_reuse_port(&socket)?;
        }
        socket.bind(&addr.into())?;
        Ok(socket.into())
    }
}

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
fn set_reuse_port(socket: &Socket) -> io::Result<()> {
    socket.set_reuse_port(true)
}

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
fn set_reuse_port(_socket: &Socket) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "SO_REUSEPORT is not available on this platform",
    ))
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
}
