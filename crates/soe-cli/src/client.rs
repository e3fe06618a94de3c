//! What the client commands (`ping`, `load`) share: connecting, and the messages they send.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use soe_tokio::bytes::Bytes;
use soe_tokio::{
    Channel, Config, ConnectError, Connection, Delivery, Endpoint, EndpointConfig, EndpointEvent,
    EventMode, SessionConfig, TokioRuntime,
};

use crate::keycheck::{ClientCheck, HELLO_EVERY, HELLO_WAIT, KeyCheck, Seen};
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
    // Stream mode: each message says how it came (reliable on its channel, or not), which
    // tells an echo from what the server sends on its own.
    let config =
        Config::new(Arc::new(EndpointConfig::client(session))).with_event_mode(EventMode::Stream);
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
    /// What the server sends, each message with how it came.
    pub(crate) inbox: Inbox,
    /// How a closed port is heard of.
    pub(crate) watch: PortWatch,
    /// What the key check found.
    pub(crate) key: KeyCheck,
    /// `--rc4-after-first-message` and no probe went first: RC4 is to be switched on right
    /// after the workload's first message, whose echo must come back before more is sent.
    pub(crate) switch_after_first: bool,
    /// What the server sent on its own during the key check.
    pub(crate) unsolicited: Unsolicited,
    /// How long the handshake took (the key check not included).
    pub(crate) connect_time: Duration,
    /// How long the key check took.
    pub(crate) check_time: Duration,
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
    let started = Instant::now();
    let (endpoint, conn, watch) = connect(server, session, how.port_probe).await?;
    let connect_time = started.elapsed();
    let inbox = Inbox {
        endpoint: endpoint.clone(),
    };
    let checked = check_key(&conn, &inbox, how).await;
    Ok(Opened {
        endpoint,
        conn,
        inbox,
        watch,
        key: checked.key,
        switch_after_first: how.rc4_after_first && !checked.probe_sent,
        unsolicited: checked.unsolicited,
        connect_time,
        check_time: started.elapsed().saturating_sub(connect_time),
    })
}

/// A message from the server.
#[derive(Debug, Clone)]
pub(crate) struct Incoming {
    /// Its channel ([`Channel::ZERO`] for unreliable and ordered messages).
    pub(crate) channel: Channel,
    /// How it travelled.
    pub(crate) kind: Delivery,
    /// The message.
    pub(crate) data: Bytes,
}

/// The messages of a client command's one session (its endpoint runs in stream mode).
pub(crate) struct Inbox {
    endpoint: Endpoint,
}

impl Inbox {
    /// The next message; `None` once the session has ended.
    pub(crate) async fn next(&self) -> Option<Incoming> {
        loop {
            match self.endpoint.next_event().await? {
                EndpointEvent::Message {
                    channel,
                    data,
                    kind,
                    ..
                } => {
                    return Some(Incoming {
                        channel,
                        kind,
                        data,
                    });
                }
                EndpointEvent::Closed { .. } => return None,
                _ => {}
            }
        }
    }
}

/// Messages the server sent on its own (a game server's ticks and world updates): neither
/// echoes nor the key check's, counted apart and never judged.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct Unsolicited {
    /// Reliable ones (on any channel).
    pub(crate) reliable: u64,
    /// Unreliable and ordered ones.
    pub(crate) unreliable: u64,
}

impl Unsolicited {
    /// Counts one that travelled as `kind`.
    pub(crate) fn count(&mut self, kind: Delivery) {
        if kind == Delivery::Reliable {
            self.reliable += 1;
        } else {
            self.unreliable += 1;
        }
    }

    /// Adds another count.
    pub(crate) fn add(&mut self, other: Self) {
        self.reliable += other.reliable;
        self.unreliable += other.unreliable;
    }

    /// One line for the user, or `None` when there were none.
    pub(crate) fn describe(&self) -> Option<String> {
        (*self != Self::default()).then(|| {
            format!(
                "unsolicited: {} reliable and {} unreliable message(s) the server sent on its \
                 own (not echoes; counted, not judged)",
                self.reliable, self.unreliable
            )
        })
    }
}

/// What the key check came to.
struct Checked {
    key: KeyCheck,
    /// Whether the probe went (it is then the session's first reliable message, after which
    /// `--rc4-after-first-message` switched).
    probe_sent: bool,
    unsolicited: Unsolicited,
}

/// The client's side of the key check ([`crate::keycheck`]): the hello goes every
/// [`HELLO_EVERY`] until a verdict; the first answer must come within [`HELLO_WAIT`] (or the
/// command's timeout, when shorter), the verdict within the timeout after the probe.
async fn check_key(conn: &Connection, inbox: &Inbox, how: Opening) -> Checked {
    let mut check = ClientCheck::new(random_u64(), how.random, how.key);
    let mut unsolicited = Unsolicited::default();
    let mut wait = how.timeout.min(HELLO_WAIT);
    let mut deadline = tokio::time::Instant::now() + wait;
    let mut next_hello = tokio::time::Instant::now();
    let ended = |check: &ClientCheck, unsolicited, why: String| Checked {
        key: KeyCheck::Unchecked(why),
        probe_sent: check.is_probe_sent(),
        unsolicited,
    };
    loop {
        if tokio::time::Instant::now() >= next_hello {
            if conn.send_unreliable(Bytes::from(check.hello())).is_err() {
                return ended(&check, unsolicited, "the session ended".into());
            }
            next_hello = tokio::time::Instant::now() + HELLO_EVERY;
        }
        let message = match tokio::time::timeout_at(next_hello.min(deadline), inbox.next()).await {
            Err(_) if tokio::time::Instant::now() >= deadline => {
                let what = if check.is_probe_sent() {
                    "no verdict on the key probe"
                } else {
                    "no answer to the key-check hello"
                };
                let why = format!("{what} within {:.1} s", wait.as_secs_f64());
                return ended(&check, unsolicited, why);
            }
            Err(_) => continue,
            Ok(None) => return ended(&check, unsolicited, "the session ended".into()),
            Ok(Some(m)) => m,
        };
        let seen = if message.kind == Delivery::Reliable {
            check.on_reliable(message.channel.index(), &message.data)
        } else {
            check.on_unreliable(&message.data)
        };
        match seen {
            Seen::Verdict(key) => {
                return Checked {
                    key,
                    probe_sent: check.is_probe_sent(),
                    unsolicited,
                };
            }
            Seen::SendProbe => {
                if conn
                    .send(Bytes::copy_from_slice(&check.probe()))
                    .await
                    .is_err()
                {
                    return ended(&check, unsolicited, "the session ended".into());
                }
                check.probe_sent();
                if how.rc4_after_first {
                    conn.set_encryption(true);
                }
                // Ask for the verdict at once (the answer itself may say it first).
                wait = how.timeout;
                deadline = tokio::time::Instant::now() + wait;
                next_hello = tokio::time::Instant::now();
            }
            Seen::Check => {}
            Seen::Other => unsolicited.count(message.kind),
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

/// The length of the id that begins each message `ping` and `load` send: the sequence number
/// and the session's tag, 8 bytes each.
pub(crate) const ID_LEN: usize = 16;

/// The message number `seq` of `size` bytes: its id (the sequence number, big-endian, then the
/// session's random `tag`, as much of those 16 bytes as fits), then a repeating text, so every
/// message is distinct, checkable byte for byte, and compressible like real game traffic.
/// The id tells an echo from what the server sends on its own, and from an echo of another
/// session's message.
pub(crate) fn message(seq: u64, tag: u64, size: usize) -> Bytes {
    const FILL: &[u8] = b" soe message payload;";
    let mut out = Vec::with_capacity(size);
    out.extend(
        seq.to_be_bytes()
            .iter()
            .chain(&tag.to_be_bytes())
            .take(size),
    );
    let mut i = 0usize;
    while out.len() < size {
        out.push(FILL[i % FILL.len()]);
        i += 1;
    }
    Bytes::from(out)
}

/// The sequence number of a message of the session with `tag`; `None` for a message that does
/// not carry a whole id with that tag (another's, or one shorter than the id).
pub(crate) fn seq_of(message: &[u8], tag: u64) -> Option<u64> {
    let (seq, rest) = message.split_first_chunk::<8>()?;
    let (theirs, _) = rest.split_first_chunk::<8>()?;
    (u64::from_be_bytes(*theirs) == tag).then_some(u64::from_be_bytes(*seq))
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
    fn messages_carry_their_id_and_fill_their_size() {
        let tag = 0x1112_1314_1516_1718;
        for size in [1, 7, 8, 9, 15, 16, 17, 64, 3000] {
            let m = message(0x0102_0304_0506_0708, tag, size);
            assert_eq!(m.len(), size);
            let id = [
                1u8, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18,
            ];
            assert_eq!(&m[..size.min(ID_LEN)], &id[..size.min(ID_LEN)]);
            let seq = seq_of(&m, tag);
            assert_eq!(seq, (size >= ID_LEN).then_some(0x0102_0304_0506_0708));
            assert_eq!(seq_of(&m, tag + 1), None);
        }
        assert_ne!(message(1, tag, 100), message(2, tag, 100));
        assert_ne!(message(1, tag, 100), message(1, tag + 1, 100));
    }
}
