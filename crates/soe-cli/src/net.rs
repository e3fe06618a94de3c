//! Addresses, and how a client hears of a closed port: host names resolved like `IP:port`,
//! and an ICMP "port unreachable" told from a silent server, by the session's own connected
//! socket where the system allows it, or else by a probe.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use soe_tokio::Endpoint;
use tokio::net::UdpSocket;

/// Parses `HOST:PORT` or `IP:PORT` (`[v6]:PORT` for IPv6), resolving a host name; the first
/// address the resolver gives is used, IPv4 before IPv6.
pub(crate) fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = s.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let Some((host, port)) = s.rsplit_once(':') else {
        return Err(format!("{s:?} is not HOST:PORT (the port is missing)"));
    };
    if host.is_empty() {
        return Err(format!("{s:?} is not HOST:PORT (the host is missing)"));
    }
    if port.parse::<u16>().is_err() {
        return Err(format!("{s:?} is not HOST:PORT ({port:?} is not a port)"));
    }
    let addrs: Vec<SocketAddr> = s
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host:?}: {e}"))?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or_else(|| addrs.first())
        .copied()
        .ok_or_else(|| format!("{host:?} resolves to no address"))
}

/// A UDP socket connected to a server, which sends empty datagrams (SOE servers ignore them:
/// there is no opcode to read) to learn whether anything listens on the server's port. A
/// closed port answers with ICMP port unreachable, which a connected socket reports as
/// `ConnectionRefused`; on loopback at once.
///
/// Only where the session's own socket cannot hear of a closed port ([`CONNECTED_SOCKETS`]),
/// and only once the server has been silent for a [`PROBE_PERIOD`]: a server that answers in
/// time never sees a probe.
#[derive(Debug)]
pub(crate) struct Probe {
    /// The connected socket.
    socket: UdpSocket,
}

impl Probe {
    /// A probe of `server`; `None` when no socket can be opened (the probe is then skipped).
    pub(crate) async fn new(server: SocketAddr) -> Option<Self> {
        let local: SocketAddr = if server.is_ipv4() {
            (Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let socket = UdpSocket::bind(local).await.ok()?;
        socket.connect(server).await.ok()?;
        Some(Self { socket })
    }

    /// Sends one probe and waits up to `wait` for a refusal: true when the port is closed.
    pub(crate) async fn refused(&self, wait: Duration) -> bool {
        if let Err(e) = self.socket.send(&[]).await {
            return is_refusal(&e);
        }
        let mut buf = [0u8; 1];
        match tokio::time::timeout(wait, self.socket.recv(&mut buf)).await {
            Ok(Err(e)) => is_refusal(&e),
            // Something answered the probe: the port is open.
            Ok(Ok(_)) => false,
            // No word within `wait`: open, unless the refusal waits as the socket's pending
            // error (wine 8 reports it there only, never on the receive).
            Err(_) => matches!(self.socket.take_error(), Ok(Some(e)) if is_refusal(&e)),
        }
    }

    /// Waits a [`PROBE_PERIOD`], then probes every period until the port is found closed;
    /// never returns otherwise. Dropped (the server answered) before the first period ends,
    /// it sends nothing.
    pub(crate) async fn until_refused(&self) {
        tokio::time::sleep(PROBE_PERIOD).await;
        loop {
            if self.refused(PROBE_PERIOD).await {
                return;
            }
        }
    }
}

/// A closed port's answer on a connected socket: `ConnectionRefused` on Unix, `WSAECONNRESET`
/// (`ConnectionReset`) on Windows.
fn is_refusal(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionReset
    )
}

/// How long a server may stay silent (no SessionResponse, no echo) before a probe asks
/// whether its port is still open, and how often it asks again.
pub(crate) const PROBE_PERIOD: Duration = Duration::from_millis(500);

/// Whether a client's session socket can be connected to its server, so that the system
/// reports a closed port to it: where a connected UDP socket still sends with a destination
/// address, as the endpoint's driver always does (Linux, Android, Windows). macOS and the BSDs
/// refuse that with `EISCONN`; there a [`Probe`] asks instead.
pub(crate) const CONNECTED_SOCKETS: bool =
    cfg!(any(target_os = "linux", target_os = "android", windows));

/// How often a [`PortWatch::Socket`] looks at the endpoint's count of closed-port reports.
const WATCH_PERIOD: Duration = Duration::from_millis(10);

/// How a client command hears that nothing listens on its server's port.
#[derive(Debug)]
pub(crate) enum PortWatch {
    /// The session's own socket is connected to the server, and the system reports a closed
    /// port to it as soon as one of its datagrams meets it: no datagram of its own is sent.
    Socket(Endpoint),
    /// A separate socket probes the port after a [`PROBE_PERIOD`] of silence.
    Probe(Probe),
    /// Neither: only timeouts tell.
    Blind,
}

impl PortWatch {
    /// Returns once the port is known to be closed; never otherwise.
    pub(crate) async fn closed(&self) {
        match self {
            Self::Socket(endpoint) => {
                while endpoint.port_unreachable() == 0 {
                    tokio::time::sleep(WATCH_PERIOD).await;
                }
            }
            Self::Probe(probe) => probe.until_refused().await,
            Self::Blind => std::future::pending().await,
        }
    }

    /// Whether the port is known to be closed now; a probe asks once more (a timeout shorter
    /// than a probe period leaves it no time to have asked).
    pub(crate) async fn closed_now(&self) -> bool {
        match self {
            Self::Socket(endpoint) => endpoint.port_unreachable() > 0,
            Self::Probe(probe) => probe.refused(PROBE_PERIOD).await,
            Self::Blind => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_host_names() {
        assert_eq!(
            parse_addr("127.0.0.1:20042"),
            Ok("127.0.0.1:20042".parse().unwrap())
        );
        assert_eq!(parse_addr("[::1]:7"), Ok("[::1]:7".parse().unwrap()));
        let local = parse_addr("localhost:20042").unwrap();
        assert!(local.ip().is_loopback() && local.port() == 20042, "{local}");
        assert!(
            parse_addr("localhost")
                .unwrap_err()
                .contains("port is missing")
        );
        assert!(
            parse_addr("localhost:http")
                .unwrap_err()
                .contains("not a port")
        );
        assert!(
            parse_addr(":20042")
                .unwrap_err()
                .contains("host is missing")
        );
        assert!(
            parse_addr("no-such-host.invalid:1")
                .unwrap_err()
                .contains("cannot resolve")
        );
    }

    #[tokio::test]
    async fn a_closed_port_is_refused_and_an_open_one_is_not() {
        let open = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let closed = {
            let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            s.local_addr().unwrap()
        };
        let probe = Probe::new(closed).await.unwrap();
        assert!(probe.refused(Duration::from_secs(2)).await);
        let probe = Probe::new(open.local_addr().unwrap()).await.unwrap();
        assert!(!probe.refused(Duration::from_millis(200)).await);
    }
}
