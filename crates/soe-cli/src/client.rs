//! What the client commands (`ping`, `load`) share: connecting, and the messages they send.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use soe_tokio::bytes::Bytes;
use soe_tokio::{
    Config, ConnectError, Connection, Endpoint, EndpointConfig, SessionConfig, TokioRuntime,
};

use crate::keycheck::{HELLO, HELLO_ACK, HELLO_EVERY, HELLO_WAIT, KeyCheck, is_noise, probe};
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

/// A session opened by a client command, its key checked.
pub(crate) struct Opened {
    /// The endpoint (closed with the session).
    pub(crate) endpoint: Endpoint,
    /// The session.
    pub(crate) conn: Connection,
    /// How a closed port is heard of.
    pub(crate) watch: PortWatch,
    /// What the key check found.
    pub(crate) key: KeyCheck,
    /// `--rc4-after-first-message` and no probe went first: RC4 is to be switched on right
    /// after the workload's first message, whose echo must come back before more is sent.
    pub(crate) switch_after_first: bool,
}

/// How a client command opens its session: the session flags it needs beyond the config.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Opening {
    /// Whether a probe may ask after a closed port (see [`connect`]).
    pub(crate) port_probe: bool,
    /// `--rc4-after-first-message`.
    pub(crate) rc4_after_first: bool,
    /// Whether this side has an RC4 key.
    pub(crate) key: bool,
    /// How long the key check may wait for each answer.
    pub(crate) timeout: Duration,
    /// The probe's random bytes.
    pub(crate) random: u64,
}

/// Connects to `server` and checks the RC4 key ([`crate::keycheck`]).
pub(crate) async fn open(
    server: SocketAddr,
    session: Arc<SessionConfig>,
    how: Opening,
) -> Result<Opened, ConnectFailure> {
    let (endpoint, conn, watch) = connect(server, session, how.port_probe).await?;
    let (key, probe_sent) = check_key(&conn, how).await;
    Ok(Opened {
        endpoint,
        conn,
        watch,
        key,
        switch_after_first: how.rc4_after_first && !probe_sent,
    })
}

/// What became of the key-check hello.
enum Hello {
    /// A `soe serve` answered: it takes the next reliable message as the probe.
    Answered,
    /// Not answered as a key check: why.
    NotChecked(String),
}

/// The client's side of the key check; also says whether the probe was sent (it is then the
/// session's first reliable message, after which `--rc4-after-first-message` switched).
async fn check_key(conn: &Connection, how: Opening) -> (KeyCheck, bool) {
    let hello_wait = how.timeout.min(HELLO_WAIT);
    let hello_deadline = tokio::time::Instant::now() + hello_wait;
    if let Hello::NotChecked(why) = hello(conn, hello_deadline, hello_wait).await {
        return (KeyCheck::Unchecked(why), false);
    }
    let deadline = tokio::time::Instant::now() + how.timeout;
    let sent = probe(how.random);
    if conn.send(Bytes::copy_from_slice(&sent)).await.is_err() {
        return (KeyCheck::Unchecked("the session ended".into()), true);
    }
    if how.rc4_after_first {
        conn.set_encryption(true);
    }
    loop {
        match tokio::time::timeout_at(deadline, conn.recv()).await {
            Err(_) => {
                let why = format!(
                    "no answer to the key probe within {:.1} s",
                    how.timeout.as_secs_f64()
                );
                return (KeyCheck::Unchecked(why), true);
            }
            Ok(None) => return (KeyCheck::Unchecked("the session ended".into()), true),
            Ok(Some(m)) if is_noise(&m) => {}
            Ok(Some(m)) => return (KeyCheck::of_answer(&sent, &m, how.key), true),
        }
    }
}

/// Sends the hello until it is answered, echoed, or `deadline` passes.
async fn hello(conn: &Connection, deadline: tokio::time::Instant, timeout: Duration) -> Hello {
    loop {
        if conn.send_unreliable(Bytes::from_static(HELLO)).is_err() {
            return Hello::NotChecked("the session ended".into());
        }
        let again = (tokio::time::Instant::now() + HELLO_EVERY).min(deadline);
        loop {
            match tokio::time::timeout_at(again, conn.recv()).await {
                Err(_) if again >= deadline => {
                    return Hello::NotChecked(format!(
                        "no answer to the key-check hello within {:.1} s",
                        timeout.as_secs_f64()
                    ));
                }
                Err(_) => break,
                Ok(None) => return Hello::NotChecked("the session ended".into()),
                Ok(Some(m)) if m == HELLO_ACK => return Hello::Answered,
                Ok(Some(m)) if m == HELLO => {
                    return Hello::NotChecked(
                        "the server sends back the key-check hello as it came: a plain echo \
                         server, not `soe serve`"
                            .into(),
                    );
                }
                Ok(Some(_)) => {}
            }
        }
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

/// 64 random bits (from the standard library's per-process random hash keys).
pub(crate) fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(0x5eed);
    hasher.finish()
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
