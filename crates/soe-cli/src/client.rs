//! What the client commands (`ping`, `load`) share: connecting, and the messages they send.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use soe_tokio::bytes::Bytes;
use soe_tokio::{
    Config, ConnectError, Connection, Endpoint, EndpointConfig, SessionConfig, TokioRuntime,
};

use crate::net::{CONNECTED_SOCKETS, PortWatch, Probe};

/// Why a session could not be opened.
#[derive(Debug)]
pub(crate) enum ConnectFailure {
    /// Nothing listens on the server's port: it answered with ICMP port unreachable.
    NotListening,
    /// No answer within the connect timeout.
    TimedOut(Duration),
    /// The server answered with a refusal.
    Refused(String),
    /// The client socket could not be opened, or another error.
    Other(String),
}

impl ConnectFailure {
    /// What to tell the user. `others`: how many other sessions to the same server did
    /// connect (`load`), which tells a slow, overloaded server from an absent one.
    pub(crate) fn describe(&self, server: SocketAddr, others: Option<u64>) -> String {
        match self {
            Self::NotListening => {
                format!("nothing listens on {server}: its port is closed (ICMP port unreachable)")
            }
            Self::TimedOut(timeout) => match others {
                Some(n) if n > 0 => format!(
                    "{server} did not answer within {:.1} s, though it answered {n} other \
                     session(s): the server is overloaded or dropping requests (raise \
                     --connect-timeout, or open fewer --sessions)",
                    timeout.as_secs_f64()
                ),
                _ => format!(
                    "{server} did not answer within {:.1} s (is an SOE server listening there, \
                     with the same --protocol?)",
                    timeout.as_secs_f64()
                ),
            },
            Self::Refused(reason) => format!("{server} refused the session: {reason}"),
            Self::Other(e) => format!("cannot connect to {server}: {e}"),
        }
    }
}

/// Opens a client endpoint on an ephemeral port and connects it to `server`.
///
/// Where the system allows it ([`CONNECTED_SOCKETS`]), the endpoint's socket is connected to
/// the server, so that the system reports a closed port to it; elsewhere, with `probe`, a
/// [`Probe`] asks after a probe period of silence. The returned [`PortWatch`] goes on telling
/// during the session. The session config's connect timeout bounds the wait; a closed port
/// ends it as soon as it is heard of, and a timeout is told from a closed port.
pub(crate) async fn connect(
    server: SocketAddr,
    session: Arc<SessionConfig>,
    probe: bool,
) -> Result<(Endpoint, Connection, PortWatch), ConnectFailure> {
    let timeout = session.connect_timeout();
    let config = Config::new(Arc::new(EndpointConfig::client(session)));
    let endpoint = client_endpoint(server, config)
        .map_err(|e| ConnectFailure::Other(format!("cannot open a client socket: {e}")))?;
    let watch = if CONNECTED_SOCKETS {
        PortWatch::Socket(endpoint.clone())
    } else if probe {
        Probe::new(server)
            .await
            .map_or(PortWatch::Blind, PortWatch::Probe)
    } else {
        PortWatch::Blind
    };
    let result = tokio::select! {
        result = endpoint.connect(server) => result,
        () = watch.closed() => return Err(ConnectFailure::NotListening),
    };
    match result {
        Ok(conn) => Ok((endpoint, conn, watch)),
        Err(ConnectError::TimedOut { .. }) if watch.closed_now().await => {
            Err(ConnectFailure::NotListening)
        }
        Err(ConnectError::TimedOut { .. }) => Err(ConnectFailure::TimedOut(timeout)),
        Err(ConnectError::Refused { reason }) => {
            Err(ConnectFailure::Refused(format!("{reason:?}")))
        }
        Err(e) => Err(ConnectFailure::Other(e.to_string())),
    }
}

/// A client endpoint on an ephemeral port, its socket connected to `server` where
/// [`CONNECTED_SOCKETS`] says the system allows it.
fn client_endpoint(server: SocketAddr, config: Config) -> std::io::Result<Endpoint> {
    if !CONNECTED_SOCKETS {
        return Endpoint::client(config);
    }
    let local: SocketAddr = if server.is_ipv4() {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let socket = config.socket.bind(local)?;
    socket.connect(server)?;
    Endpoint::with_socket(socket, config, TokioRuntime::default())
}

/// The message number `seq` of `size` bytes: the sequence number (big-endian, as many of its 8
/// bytes as fit) then a repeating text, so every message is distinct, checkable byte for byte,
/// and compressible like real game traffic.
pub(crate) fn message(seq: u64, size: usize) -> Bytes {
    const FILL: &[u8] = b" soe message payload;";
    let mut out = Vec::with_capacity(size);
    out.extend(seq.to_be_bytes().iter().take(size));
    let mut i = 0usize;
    while out.len() < size {
        out.push(FILL[i % FILL.len()]);
        i += 1;
    }
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_tell_an_absent_server_from_an_overloaded_one() {
        let server: SocketAddr = "127.0.0.1:20042".parse().unwrap();
        let closed = ConnectFailure::NotListening.describe(server, None);
        assert!(
            closed.contains("nothing listens on 127.0.0.1:20042"),
            "{closed}"
        );
        let timeout = ConnectFailure::TimedOut(Duration::from_millis(2500));
        let silent = timeout.describe(server, None);
        assert!(silent.contains("did not answer within 2.5 s"), "{silent}");
        assert!(silent.contains("--protocol"), "{silent}");
        // None of the others connected either: the same words as for a single session.
        assert_eq!(timeout.describe(server, Some(0)), silent);
        let busy = timeout.describe(server, Some(37));
        assert!(busy.contains("answered 37 other session(s)"), "{busy}");
        assert!(busy.contains("overloaded"), "{busy}");
        assert!(!busy.contains("--protocol"), "{busy}");
    }

    #[test]
    fn messages_carry_their_number_and_fill_their_size() {
        for size in [1, 7, 8, 9, 64, 3000] {
            let m = message(0x0102_0304_0506_0708, size);
            assert_eq!(m.len(), size);
            let head = &[1u8, 2, 3, 4, 5, 6, 7, 8][..size.min(8)];
            assert_eq!(&m[..size.min(8)], head);
        }
        assert_ne!(message(1, 100), message(2, 100));
    }
}
