//! A client and a server session (soe-session on both sides) joined by a 5 ms link in virtual
//! time, every datagram either side sends recorded as a capture point at the senders would see
//! it: the recordings that soe-dissect's gap tests and soe-cli's decode tests cut and decode.
//! soe-cli's tests include this file by path.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use soe_session::{Channel, DisconnectReason, Event, Session, SessionConfig, SplitMix64};
use soe_wire::Packet;

/// One datagram of the recorded session.
#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    /// When it was sent, since the start.
    pub(crate) at: Duration,
    /// Whether the client sent it.
    pub(crate) from_client: bool,
    /// The datagram.
    pub(crate) bytes: Vec<u8>,
}

/// What a run recorded, and the messages each side received.
pub(crate) struct SessionPair {
    /// Every datagram either side sent, in the order sent.
    pub(crate) datagrams: Vec<Recorded>,
    /// The messages the server received, in order.
    pub(crate) got_by_server: Vec<Vec<u8>>,
    /// The messages the client received, in order.
    pub(crate) got_by_client: Vec<Vec<u8>>,
}

/// Runs the pair with `config` on both sides: the client sends `to_server`, the server sends
/// `to_client` once it accepted the session, and the client closes once each side received as
/// many messages as the other sent. The link loses the server's `n`-th datagram (counting
/// from 1) when `lose_server(n)` (it is still recorded: the capture point is the sender's).
/// Panics when the pair has not finished within `max_steps` steps.
#[allow(dead_code)]
pub(crate) fn run(
    config: &Arc<SessionConfig>,
    to_server: &[Vec<u8>],
    to_client: &[Vec<u8>],
    lose_server: impl Fn(usize) -> bool,
    max_steps: usize,
) -> SessionPair {
    run_switching(config, to_server, to_client, lose_server, max_steps, false)
}

/// [`run`]; with `switch_after_first` (and a config whose encryption is off at the start), RC4
/// switches on after the first message, as the H1Z1 gateway does after its login request: the
/// client right after sending it, the server on receiving it, and only then does the server
/// send its messages; the client sends the rest once it received the server's first.
#[allow(dead_code)]
pub(crate) fn run_switching(
    config: &Arc<SessionConfig>,
    to_server: &[Vec<u8>],
    to_client: &[Vec<u8>],
    lose_server: impl Fn(usize) -> bool,
    max_steps: usize,
    switch_after_first: bool,
) -> SessionPair {
    let start = Instant::now();
    let delay = Duration::from_millis(5);
    let mut now = start;
    let mut client = Session::client(now, config.clone(), &mut SplitMix64::new(7));
    let queued_at_start = if switch_after_first {
        1
    } else {
        to_server.len()
    };
    for m in &to_server[..queued_at_start.min(to_server.len())] {
        client.send(Channel::ZERO, Bytes::from(m.clone())).unwrap();
    }
    if switch_after_first {
        client.set_encryption(true);
    }
    let mut server: Option<Session> = None;
    let mut datagrams = Vec::new();
    let mut in_flight: Vec<(Instant, bool, Vec<u8>)> = Vec::new();
    let mut server_sent = 0usize;
    let mut got_by_server = Vec::new();
    let mut got_by_client = Vec::new();
    let mut closing = false;
    let mut buf = Vec::new();
    for _ in 0..max_steps {
        // Deliver what has arrived, in order.
        in_flight.sort_by_key(|(at, _, _)| *at);
        while in_flight.first().is_some_and(|(at, _, _)| *at <= now) {
            let (_, to_server_side, bytes) = in_flight.remove(0);
            if !to_server_side {
                client.handle_datagram(now, &bytes);
            } else if let Some(s) = server.as_mut() {
                s.handle_datagram(now, &bytes);
            } else {
                let Ok(Packet::SessionRequest(r)) = Packet::decode(&bytes) else {
                    panic!("the first datagram is no SessionRequest");
                };
                server = Some(Session::server(now, config.clone(), &r, 0x6EC1_4BF6).unwrap());
            }
        }
        client.handle_timeout(now);
        if let Some(s) = server.as_mut() {
            s.handle_timeout(now);
        }
        while let Some(e) = client.poll_event() {
            if let Event::Message { data, .. } = e {
                if got_by_client.is_empty() && switch_after_first {
                    for m in to_server.iter().skip(1) {
                        client.send(Channel::ZERO, Bytes::from(m.clone())).unwrap();
                    }
                }
                got_by_client.push(data.to_vec());
            }
        }
        if let Some(s) = server.as_mut() {
            while let Some(e) = s.poll_event() {
                let first = got_by_server.is_empty();
                let send_now = match e {
                    Event::Accepted => !switch_after_first,
                    Event::Message { data, .. } => {
                        got_by_server.push(data.to_vec());
                        first && switch_after_first
                    }
                    _ => false,
                };
                if send_now {
                    if switch_after_first {
                        s.set_encryption(true);
                    }
                    for m in to_client {
                        s.send(Channel::ZERO, Bytes::from(m.clone())).unwrap();
                    }
                }
            }
        }
        if !closing
            && got_by_client.len() == to_client.len()
            && got_by_server.len() == to_server.len()
        {
            client.close(now, DisconnectReason::Application);
            closing = true;
        }
        let at = now.duration_since(start);
        while let Some(n) = client.poll_transmit(now, &mut buf) {
            datagrams.push(Recorded {
                at,
                from_client: true,
                bytes: buf[..n].to_vec(),
            });
            in_flight.push((now + delay, true, buf[..n].to_vec()));
        }
        if let Some(s) = server.as_mut() {
            while let Some(n) = s.poll_transmit(now, &mut buf) {
                datagrams.push(Recorded {
                    at,
                    from_client: false,
                    bytes: buf[..n].to_vec(),
                });
                server_sent += 1;
                if !lose_server(server_sent) {
                    in_flight.push((now + delay, false, buf[..n].to_vec()));
                }
            }
        }
        let server_closed = server.as_ref().is_none_or(Session::is_closed);
        if closing && client.is_closed() && server_closed && in_flight.is_empty() {
            return SessionPair {
                datagrams,
                got_by_server,
                got_by_client,
            };
        }
        let next = [
            in_flight.iter().map(|(at, _, _)| *at).min(),
            client.poll_timeout(),
            server.as_ref().and_then(Session::poll_timeout),
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(next) = next else { break };
        now = next.max(now + Duration::from_micros(100));
    }
    panic!(
        "the session pair did not finish: server got {} of {}, client {} of {}",
        got_by_server.len(),
        to_server.len(),
        got_by_client.len(),
        to_client.len()
    );
}
