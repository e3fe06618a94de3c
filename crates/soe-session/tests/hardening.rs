//! Regression tests for issue 22 (hardening), section A items 5 to 8 and 10, in virtual time:
//! a spoofed SessionRequest cannot end a live session, `max_sessions` holds whatever datagram
//! completes a handshake, a channel's packet size does not depend on which side created it,
//! live remaps are rate limited and their log throttled, and closed sessions stay closed to
//! their cookie.

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{CLIENT, NetConfig, Pair, SERVER, client_config, server_config};
use soe_session::{Channel, Endpoint, EndpointConfig, Event, SessionConfig, SessionHandle};
use soe_wire::{DisconnectReason, Packet, RemapConnection, SessionRequest};
use tracing::Level;

const SECOND: Duration = Duration::from_secs(1);

fn request(session_id: u32) -> Vec<u8> {
    let mut out = Vec::new();
    Packet::SessionRequest(SessionRequest {
        protocol_version: 3,
        session_id,
        udp_length: 512,
        application_protocol: b"TestProto_1",
    })
    .encode(&mut out);
    out
}

fn remap(session_id: u32, crc_seed: u32) -> Vec<u8> {
    let mut out = Vec::new();
    Packet::RemapConnection(RemapConnection {
        session_id,
        crc_seed,
    })
    .encode(&mut out);
    out
}

fn closed_events(events: &[(SessionHandle, Event)]) -> Vec<Event> {
    events
        .iter()
        .filter(|(_, e)| matches!(e, Event::Closed { .. }))
        .map(|(_, e)| e.clone())
        .collect()
}

/// A log writer that keeps every line in memory.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut b) = self.0.lock() {
            b.extend_from_slice(buf);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs `f` with a subscriber recording INFO and above; returns the lines logged.
fn logged(f: impl FnOnce()) -> Vec<String> {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(Level::INFO)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, f);
    let bytes = captured.0.lock().map(|b| b.clone()).unwrap_or_default();
    String::from_utf8_lossy(&bytes)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn spoofed_session_requests_do_not_end_a_live_session() {
    // Issue 22 A5: one SessionRequest with a new session id from the client's address ended an
    // established session. Now the server probes the old session, and a live client answers.
    for seed in 0..8 {
        let mut p = Pair::new(
            common::seed(seed),
            server_config(),
            client_config(),
            NetConfig {
                loss: 0.05,
                ..NetConfig::default()
            },
        );
        let (ch, sh) = p.connect();
        // A spoofed request every 500 ms for 30 s, each with a new session id; the client only
        // answers what it hears (it sends nothing of its own).
        for i in 0..60u32 {
            let now = p.now;
            p.server
                .handle_datagram(now, CLIENT, &request(0x5000_0000 + i));
            p.run_for(Duration::from_millis(500));
        }
        assert_eq!(
            closed_events(&p.server_events),
            vec![],
            "seed {seed}: the server session survived"
        );
        assert_eq!(closed_events(&p.client_events), vec![], "seed {seed}");
        assert!(p.server.handle_of(CLIENT).is_some());
        let stats = p.server.endpoint_stats().clone();
        assert_eq!(stats.replaced, 0, "seed {seed}");
        assert!(
            stats.replacements_deferred > 0,
            "seed {seed}: the requests were seen"
        );
        // And the session still carries data both ways.
        p.client
            .send(ch, Channel::ZERO, Bytes::from_static(b"up"))
            .unwrap();
        p.server
            .send(sh, Channel::ZERO, Bytes::from_static(b"down"))
            .unwrap();
        p.run_for(2 * SECOND);
        assert_eq!(Pair::take_messages(&mut p.server_events, sh).len(), 1);
        assert_eq!(Pair::take_messages(&mut p.client_events, ch).len(), 1);
    }
}

/// Issue 30 §4: the spoofed request lands in the same turn as the client's own keep-alive,
/// after it and before the server sends anything (one batch of datagrams). The server owes the
/// keep-alive its answer and probes the session at once: were both one Heartbeat, the client
/// would take it for the answer to its own and not answer the probe, and the next spoofed
/// request, past `replace_after_silence`, would replace a live session.
#[test]
fn a_spoofed_request_in_the_same_turn_as_the_clients_keep_alive_does_not_end_it() {
    use std::cell::RefCell;
    use std::rc::Rc;
    for seed in 0..8 {
        let mut p = Pair::new(
            common::seed(seed),
            server_config(),
            client_config(),
            NetConfig::default(),
        );
        let (ch, sh) = p.connect();
        // Spoof a request right after each of the client's keep-alives; remember when.
        let spoofed_at: Rc<RefCell<Vec<Instant>>> = Rc::default();
        let log = spoofed_at.clone();
        let mut next_id = 0x6000_0000u32 + (seed as u32) * 0x100;
        p.server_hook = Some(Box::new(move |now, server, from, datagram| {
            if from == CLIENT && datagram.starts_with(&[0x00, 0x06]) {
                next_id += 1;
                server.handle_datagram(now, CLIENT, &request(next_id));
                log.borrow_mut().push(now);
            }
        }));
        // Each keep-alive turn is followed by another spoofed request once the probe would
        // have gone unanswered for longer than replace_after_silence (2 s; the probe's age is
        // understated by up to a second).
        let mut followed = 0u32;
        while p.elapsed() < Duration::from_secs(65) {
            p.run_for(Duration::from_millis(100));
            let due = spoofed_at.borrow().get(followed as usize).copied();
            if due.is_some_and(|at| p.now >= at + Duration::from_millis(3500)) {
                followed += 1;
                let now = p.now;
                p.server
                    .handle_datagram(now, CLIENT, &request(0x7000_0000 + followed));
            }
        }
        p.server_hook = None;
        assert!(
            followed >= 5,
            "seed {seed}: the client kept the session alive with keep-alives ({followed})"
        );
        assert_eq!(
            closed_events(&p.server_events),
            vec![],
            "seed {seed}: the server session survived"
        );
        assert_eq!(closed_events(&p.client_events), vec![], "seed {seed}");
        assert_eq!(p.server.endpoint_stats().replaced, 0, "seed {seed}");
        p.client
            .send(ch, Channel::ZERO, Bytes::from_static(b"up"))
            .unwrap();
        p.server
            .send(sh, Channel::ZERO, Bytes::from_static(b"down"))
            .unwrap();
        p.run_for(2 * SECOND);
        assert_eq!(Pair::take_messages(&mut p.server_events, sh).len(), 1);
        assert_eq!(Pair::take_messages(&mut p.client_events, ch).len(), 1);
    }
}

#[test]
fn a_client_that_restarted_on_the_same_address_gets_in_after_the_probe() {
    for seed in 0..4 {
        let mut p = Pair::new(
            common::seed(seed),
            server_config(),
            client_config(),
            NetConfig::default(),
        );
        let (_, sh) = p.connect();
        p.run_for(SECOND);
        // The client process dies and a new one starts on the same address.
        p.client = Endpoint::new(Arc::new(
            EndpointConfig::client(Arc::new(client_config())).with_rng_seed(seed ^ 0xBEEF),
        ));
        p.client_events.clear();
        let restarted = p.now;
        let h = p.client.connect(p.now, SERVER).unwrap();
        let ok = p.run_until(Duration::from_secs(30), |p| {
            p.client_events
                .iter()
                .any(|(eh, e)| *eh == h && *e == Event::Connected)
        });
        assert!(ok, "seed {seed}: the restarted client connected");
        let took = p.now - restarted;
        assert!(
            took >= Duration::from_secs(2) && took < Duration::from_secs(10),
            "seed {seed}: after the 2 s probe wait, within the connect timeout: {took:?}"
        );
        assert_eq!(
            Pair::closed(&p.server_events, sh),
            Some(Event::Closed {
                reason: DisconnectReason::NewConnectionAttempt,
                by_peer: true
            }),
            "seed {seed}"
        );
        assert_eq!(p.server.endpoint_stats().replaced, 1, "seed {seed}");
    }
}

/// Moves every datagram between `server` (address [`SERVER`]) and the clients (addresses 2
/// and 3) at `now` until none is left; datagrams to the server pass only if `pass` says so.
fn pump(
    now: Instant,
    server: &mut Endpoint<u32>,
    clients: &mut [(u32, Endpoint<u32>)],
    pass: impl Fn(&[u8]) -> bool,
) {
    let mut buf = Vec::new();
    loop {
        let mut any = false;
        while let Some(t) = server.poll_transmit(now, &mut buf) {
            if let Some((_, c)) = clients.iter_mut().find(|(a, _)| *a == t.destination) {
                c.handle_datagram(now, SERVER, &buf[..t.len]);
            }
            any = true;
        }
        for (addr, c) in clients.iter_mut() {
            while let Some(t) = c.poll_transmit(now, &mut buf) {
                if pass(&buf[..t.len]) {
                    server.handle_datagram(now, *addr, &buf[..t.len]);
                }
                any = true;
            }
        }
        if !any {
            return;
        }
    }
}

#[test]
fn max_sessions_holds_when_an_unreliable_datagram_completes_the_handshake() {
    // Issue 22 A6: refusal covered only datagrams whose first byte is 0, so with max_sessions 1
    // two half-open sessions completed by unreliable datagrams both got in.
    let server_ep = EndpointConfig::server(Arc::new(server_config()))
        .with_rng_seed(1)
        .with_max_sessions(1);
    let mut server: Endpoint<u32> = Endpoint::new(Arc::new(server_ep));
    let mut clients: Vec<(u32, Endpoint<u32>)> = (2..4u32)
        .map(|addr| {
            let config =
                EndpointConfig::client(Arc::new(client_config())).with_rng_seed(addr.into());
            (addr, Endpoint::new(Arc::new(config)))
        })
        .collect();
    let now = Instant::now();
    let handles: Vec<SessionHandle> = clients
        .iter_mut()
        .map(|(_, c)| c.connect(now, SERVER).unwrap())
        .collect();
    // Requests and responses cross; the clients' own SOE packets (first byte 0: the NetStatus
    // probe) are lost, so only their unreliable messages reach the server.
    let unreliable_or_request = |d: &[u8]| d.first() != Some(&0) || d.get(1) == Some(&1);
    pump(now, &mut server, &mut clients, unreliable_or_request);
    assert_eq!(server.half_open(), 2);
    for ((_, c), &h) in clients.iter_mut().zip(&handles) {
        while c.poll_event().is_some() {}
        c.send_unreliable(h, Bytes::from_static(b"hello")).unwrap();
    }
    pump(now, &mut server, &mut clients, unreliable_or_request);
    let mut accepted = 0;
    while let Some((_, e)) = server.poll_event() {
        accepted += usize::from(e == Event::Accepted);
    }
    assert_eq!(accepted, 1, "one session accepted");
    let connected = [2u32, 3]
        .iter()
        .filter_map(|&a| server.handle_of(a))
        .filter(|&h| server.state(h) == Some(soe_session::State::Connected))
        .count();
    assert_eq!(
        connected, 1,
        "one session connected; the other refused and draining"
    );
    // The second client hears the refusal.
    pump(now, &mut server, &mut clients, |_| true);
    let mut refused = 0;
    for (_, c) in clients.iter_mut() {
        while let Some((_, e)) = c.poll_event() {
            if let Event::Closed { reason, .. } = e {
                assert_eq!(reason, DisconnectReason::ConnectionRefused);
                refused += 1;
            }
        }
    }
    assert_eq!(refused, 1, "the other client was refused");
}

/// The largest datagram the server sends while it sends a 5,000-byte message, the channel
/// created by a receive (`client_first`) or by the send.
fn largest_server_datagram(client_first: bool) -> usize {
    let mut p = Pair::new(
        common::seed(7),
        server_config(),
        client_config(),
        NetConfig::default(),
    );
    let (ch, sh) = p.connect();
    if client_first {
        p.client
            .send(ch, Channel::ZERO, Bytes::from_static(b"first"))
            .unwrap();
        p.run_for(SECOND);
        assert_eq!(Pair::take_messages(&mut p.server_events, sh).len(), 1);
    }
    p.log_datagrams = true;
    p.server
        .send(sh, Channel::ZERO, Bytes::from(vec![7u8; 5000]))
        .unwrap();
    p.run_for(SECOND);
    assert_eq!(Pair::take_messages(&mut p.client_events, ch).len(), 1);
    p.from_server_log.iter().map(Vec::len).max().unwrap_or(0)
}

#[test]
fn packet_size_does_not_depend_on_which_side_created_the_channel() {
    // Issue 22 A7: a channel created while the session handled a packet (its framer taken
    // out) assumed the worst framing: 509-byte datagrams instead of 512.
    assert_eq!(largest_server_datagram(false), 512);
    assert_eq!(largest_server_datagram(true), 512);
}

#[test]
fn live_remaps_are_rate_limited_and_their_log_throttled() {
    // Issue 22 A8: every RemapConnection with the right (session id, CRC seed) moved the
    // session, and each move logged at INFO.
    let mut remaps = 0;
    let mut limited = 0;
    let lines = logged(|| {
        let mut p = Pair::new(
            common::seed(3),
            server_config(),
            client_config(),
            NetConfig::default(),
        );
        let (_, sh) = p.connect();
        let session = p.server.session(sh).unwrap();
        let datagram = remap(session.session_id(), session.crc_seed());
        // 200 remaps within one second, alternating between 20 addresses.
        for i in 0..200u32 {
            let now = p.now + Duration::from_millis(u64::from(i) * 4);
            p.server.handle_datagram(now, 100 + i % 20, &datagram);
        }
        remaps = p.server.endpoint_stats().remaps;
        limited = p.server.endpoint_stats().remaps_limited;
    });
    assert_eq!(remaps, 1, "one move per remap_interval (1 s)");
    // The rest were dropped, or (from the address it moved to) went to the session itself.
    assert!(limited >= 190, "{limited}");
    let moved = lines
        .iter()
        .filter(|l| l.contains("session remapped"))
        .count();
    assert_eq!(moved, 1, "{lines:#?}");
    let dropped = lines
        .iter()
        .filter(|l| l.contains("RemapConnections dropped"))
        .count();
    assert!(dropped <= 1, "throttled to one line a second: {lines:#?}");
}

#[test]
fn a_remap_after_the_interval_moves_the_session_again() {
    let mut p = Pair::new(
        common::seed(4),
        server_config(),
        client_config(),
        NetConfig::default(),
    );
    let (_, sh) = p.connect();
    let session = p.server.session(sh).unwrap();
    let datagram = remap(session.session_id(), session.crc_seed());
    let now = p.now;
    p.server.handle_datagram(now, 50, &datagram);
    p.server.handle_datagram(now + 2 * SECOND, 51, &datagram);
    assert_eq!(p.server.endpoint_stats().remaps, 2);
    assert_eq!(p.server.remote(sh), Some(51));
}

#[test]
fn closed_sessions_stay_closed_to_their_cookie_when_tombstones_overflow() {
    // Issue 22 A10: tombstones were capped at 4,096, so once more sessions than that closed
    // within the cookie lifetime, the oldest could be rebuilt from its cookie. With a cap of 2,
    // close 3 sessions and try to bring back the first.
    let server_ep = EndpointConfig::server(Arc::new(server_config()))
        .with_rng_seed(5)
        .with_max_tombstones(2);
    let mut server: Endpoint<u32> = Endpoint::new(Arc::new(server_ep));
    let now = Instant::now();
    let mut first = None;
    for addr in 2..5u32 {
        let config = EndpointConfig::client(Arc::new(client_config())).with_rng_seed(addr.into());
        let mut clients = vec![(addr, Endpoint::new(Arc::new(config)))];
        let h = clients[0].1.connect(now, SERVER).unwrap();
        pump(now, &mut server, &mut clients, |_| true);
        let sh = server.handle_of(addr).expect("accepted");
        let s = server.session(sh).unwrap();
        first.get_or_insert((addr, s.session_id(), s.crc_seed()));
        clients[0].1.close(now, h, DisconnectReason::Application);
        pump(now, &mut server, &mut clients, |_| true);
        while server.poll_event().is_some() {}
        // Let the closed session finish and be reaped.
        let later = now + Duration::from_secs(2);
        server.handle_timeout(later);
        while server.poll_event().is_some() {}
        pump(later, &mut server, &mut clients, |_| true);
        assert!(server.handle_of(addr).is_none(), "session at {addr} reaped");
    }
    let (addr, id, seed) = first.unwrap();
    server.handle_datagram(now + Duration::from_secs(3), addr, &remap(id, seed));
    assert_eq!(server.endpoint_stats().recovered, 0, "not rebuilt");
    assert!(server.handle_of(addr).is_none());
    // Once its tombstone would have expired the cookie is stale anyway; meanwhile a fresh
    // session from another client still works.
    let config = EndpointConfig::client(Arc::new(SessionConfig::new("TestProto_1")));
    let mut clients = vec![(9u32, Endpoint::new(Arc::new(config.with_rng_seed(9))))];
    clients[0].1.connect(now, SERVER).unwrap();
    pump(
        now + Duration::from_secs(3),
        &mut server,
        &mut clients,
        |_| true,
    );
    assert!(server.handle_of(9).is_some());
}
