//! The C ABI driven from Rust through its exported functions (the same symbols C calls): a
//! handshake, messages both ways on every kind of delivery, RC4, fragments, the caller-buffer
//! rules, stale handles, and the clock mapping. The C programs in tests/c and examples/c run
//! the same paths from C under `cargo xtask c-abi`.

use std::ptr;

use soe_ffi::*;

mod support;
use support::{Config, addr, cstr, last_error};

const KEY: &[u8] = b"abi test key";

/// One `soe_endpoint_poll_transmit` into `buf`: the status, the length and the destination.
fn poll_transmit(ep: *mut soe_endpoint, now: u64, buf: &mut [u8]) -> (soe_status, usize, soe_addr) {
    let (mut len, mut dest) = (0usize, addr(0, 0));
    let status =
        soe_endpoint_poll_transmit(ep, now, buf.as_mut_ptr(), buf.len(), &mut len, &mut dest);
    (status, len, dest)
}

struct Pair {
    client: *mut soe_endpoint,
    server: *mut soe_endpoint,
    now: u64,
    c_addr: soe_addr,
    s_addr: soe_addr,
}

impl Pair {
    fn new(key: Option<&[u8]>) -> Self {
        let (mut server_cfg, mut client_cfg) = (config(SOE_ROLE_SERVER), config(SOE_ROLE_CLIENT));
        if let Some(k) = key {
            server_cfg = server_cfg.key(k);
            client_cfg = client_cfg.key(k);
        }
        let now = 5_000_000_000;
        let mut server = ptr::null_mut();
        let mut client = ptr::null_mut();
        assert_eq!(
            soe_endpoint_new(server_cfg.ptr(), now, &mut server),
            soe_status::SOE_OK
        );
        assert_eq!(
            soe_endpoint_new(client_cfg.ptr(), now, &mut client),
            soe_status::SOE_OK
        );
        Self {
            client,
            server,
            now,
            c_addr: addr(2, 40_000),
            s_addr: addr(1, 20_042),
        }
    }

    fn flush(&mut self, from_client: bool) -> usize {
        let (from, to, source) = if from_client {
            (self.client, self.server, self.c_addr)
        } else {
            (self.server, self.client, self.s_addr)
        };
        let mut buf = vec![0u8; 65_536];
        let mut moved = 0;
        loop {
            let (status, len, _) = poll_transmit(from, self.now, &mut buf);
            match status {
                soe_status::SOE_DONE => return moved,
                soe_status::SOE_OK => {}
                other => panic!("{other:?}: {}", last_error()),
            }
            assert!(len <= 512, "{len}");
            assert_eq!(
                soe_endpoint_handle_datagram(to, self.now, &source, buf.as_ptr(), len),
                soe_status::SOE_OK
            );
            moved += 1;
        }
    }

    fn step(&mut self, micros: u64) {
        self.now += micros;
        assert_eq!(
            soe_endpoint_handle_timeout(self.client, self.now),
            soe_status::SOE_OK
        );
        assert_eq!(
            soe_endpoint_handle_timeout(self.server, self.now),
            soe_status::SOE_OK
        );
        self.flush(true);
        self.flush(false);
    }

    fn events(&mut self, server: bool) -> Vec<(soe_event, Vec<u8>)> {
        let ep = if server { self.server } else { self.client };
        let mut out = Vec::new();
        let mut buf = vec![0u8; 64];
        loop {
            let mut ev = empty_event();
            match soe_endpoint_poll_event(ep, &mut ev, buf.as_mut_ptr(), buf.len()) {
                soe_status::SOE_DONE => return out,
                soe_status::SOE_OK => out.push((ev, buf[..ev.len].to_vec())),
                soe_status::SOE_ERR_BUFFER_TOO_SMALL => buf.resize(ev.len, 0),
                other => panic!("{other:?}: {}", last_error()),
            }
        }
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        soe_endpoint_free(self.client);
        soe_endpoint_free(self.server);
    }
}

fn config(role: u32) -> Config {
    Config::new(role).protocol(c"AbiTest")
}

fn empty_event() -> soe_event {
    soe_event {
        kind: soe_event_kind::SOE_EVENT_ACCEPTED,
        session: 0,
        channel: 0,
        delivery: soe_delivery::SOE_DELIVERY_RELIABLE,
        len: 0,
        reason: 0,
        by_peer: 0,
        user: ptr::null_mut(),
    }
}

fn connect(pair: &mut Pair) -> (soe_session, soe_session) {
    let mut session = 0;
    assert_eq!(
        soe_connect(pair.client, pair.now, &pair.s_addr, &mut session),
        soe_status::SOE_OK
    );
    for _ in 0..5 {
        pair.step(1_000);
    }
    let client_events = pair.events(false);
    assert_eq!(client_events[0].0.kind, soe_event_kind::SOE_EVENT_CONNECTED);
    assert_eq!(client_events[0].0.session, session);
    let server_events = pair.events(true);
    assert_eq!(server_events[0].0.kind, soe_event_kind::SOE_EVENT_ACCEPTED);
    (session, server_events[0].0.session)
}

#[test]
fn messages_of_every_kind_cross_both_ways_with_rc4_and_fragments() {
    for key in [None, Some(KEY)] {
        let mut pair = Pair::new(key);
        let (client_session, server_session) = connect(&mut pair);
        let big: Vec<u8> = (0..20_000u32).map(|i| (i * 7) as u8).collect();
        for channel in 0..4u8 {
            assert_eq!(
                soe_send(
                    pair.client,
                    client_session,
                    channel,
                    big.as_ptr(),
                    big.len()
                ),
                soe_status::SOE_OK
            );
        }
        assert_eq!(
            soe_send_unreliable(pair.client, client_session, b"hi".as_ptr(), 2),
            soe_status::SOE_OK
        );
        assert_eq!(
            soe_send_ordered(pair.server, server_session, b"\x01ordered".as_ptr(), 8),
            soe_status::SOE_OK
        );
        for _ in 0..50 {
            pair.step(2_000);
        }
        let got = pair.events(true);
        let reliable: Vec<_> = got
            .iter()
            .filter(|(e, _)| e.delivery == soe_delivery::SOE_DELIVERY_RELIABLE)
            .collect();
        assert_eq!(reliable.len(), 4, "{key:?}");
        for (i, (e, data)) in reliable.iter().enumerate() {
            assert_eq!(e.kind, soe_event_kind::SOE_EVENT_MESSAGE);
            assert_eq!(e.session, server_session);
            assert_eq!(usize::from(e.channel), i);
            assert_eq!(data, &big);
        }
        assert!(
            got.iter()
                .any(|(e, d)| e.delivery == soe_delivery::SOE_DELIVERY_UNRELIABLE && d == b"hi")
        );
        let back = pair.events(false);
        assert!(
            back.iter()
                .any(|(e, d)| e.delivery == soe_delivery::SOE_DELIVERY_ORDERED
                    && d == b"\x01ordered")
        );
        let mut stats = soe_stats::default();
        assert_eq!(
            soe_session_stats(pair.client, client_session, &mut stats),
            soe_status::SOE_OK
        );
        assert_eq!(stats.reliable_messages_sent, 4);
        assert!(stats.reliable_packets_sent >= 4 * 40, "{stats:?}");
    }
}

#[test]
fn close_reaches_both_sides_and_then_the_handles_are_stale() {
    let mut pair = Pair::new(None);
    let (c, s) = connect(&mut pair);
    assert_eq!(
        soe_close(pair.client, pair.now, c, SOE_REASON_APPLICATION),
        soe_status::SOE_OK
    );
    for _ in 0..20 {
        pair.step(5_000);
    }
    let closed = |evs: Vec<(soe_event, Vec<u8>)>| {
        evs.into_iter()
            .find(|(e, _)| e.kind == soe_event_kind::SOE_EVENT_CLOSED)
            .map(|(e, _)| (e.session, e.reason, e.by_peer))
    };
    assert_eq!(closed(pair.events(false)), Some((c, 6, 0)));
    assert_eq!(closed(pair.events(true)), Some((s, 6, 1)));
    for (ep, h) in [(pair.client, c), (pair.server, s)] {
        assert_eq!(
            soe_send(ep, h, 0, b"x".as_ptr(), 1),
            soe_status::SOE_ERR_STALE_SESSION
        );
        assert!(last_error().contains("does not exist"), "{}", last_error());
    }
    // A new session never reuses a number.
    let mut again = 0;
    assert_eq!(
        soe_connect(pair.client, pair.now, &pair.s_addr, &mut again),
        soe_status::SOE_OK
    );
    assert!(again > c);
}

#[test]
fn a_short_buffer_keeps_the_datagram_and_the_event_for_the_next_call() {
    let mut pair = Pair::new(None);
    let (c, _) = connect(&mut pair);
    let msg = [9u8; 300];
    assert_eq!(
        soe_send(pair.client, c, 0, msg.as_ptr(), msg.len()),
        soe_status::SOE_OK
    );
    let mut small = [0u8; 8];
    let (status, len, _) = poll_transmit(pair.client, pair.now, &mut small);
    assert_eq!(status, soe_status::SOE_ERR_BUFFER_TOO_SMALL);
    assert!(len > 300, "{len}");
    assert!(last_error().contains(&len.to_string()));
    let first = len;
    let mut big = vec![0u8; first];
    let (status, len, dest) = poll_transmit(pair.client, pair.now, &mut big);
    assert_eq!(status, soe_status::SOE_OK);
    assert_eq!((len, dest), (first, pair.s_addr));
    assert_eq!(
        soe_endpoint_handle_datagram(pair.server, pair.now, &pair.c_addr, big.as_ptr(), len),
        soe_status::SOE_OK
    );
    let mut ev = empty_event();
    assert_eq!(
        soe_endpoint_poll_event(pair.server, &mut ev, small.as_mut_ptr(), small.len()),
        soe_status::SOE_ERR_BUFFER_TOO_SMALL
    );
    assert_eq!(ev.len, 300);
    // A NULL buffer with room claimed keeps the event too.
    assert_eq!(
        soe_endpoint_poll_event(pair.server, &mut ev, ptr::null_mut(), 300),
        soe_status::SOE_ERR_NULL
    );
    let mut buf = [0u8; 300];
    assert_eq!(
        soe_endpoint_poll_event(pair.server, &mut ev, buf.as_mut_ptr(), buf.len()),
        soe_status::SOE_OK
    );
    assert_eq!(buf, msg);
}

#[test]
fn deadlines_are_on_the_hosts_clock() {
    let mut pair = Pair::new(None);
    let mut deadline = 0;
    // An endpoint with no session has no deadline.
    assert_eq!(
        soe_endpoint_next_timeout(pair.server, &mut deadline),
        soe_status::SOE_DONE
    );
    let mut session = 0;
    assert_eq!(
        soe_connect(pair.client, pair.now, &pair.s_addr, &mut session),
        soe_status::SOE_OK
    );
    pair.flush(true);
    assert_eq!(
        soe_endpoint_next_timeout(pair.client, &mut deadline),
        soe_status::SOE_OK
    );
    // The SessionRequest is retried within a second or so, on the clock the host passed in.
    assert!(
        deadline > pair.now && deadline <= pair.now + 2_000_000,
        "{deadline} vs {}",
        pair.now
    );
}

#[test]
fn status_names_and_version_are_static_strings() {
    assert_eq!(cstr(soe_status_name(-7)), "SOE_ERR_QUEUE_FULL");
    assert_eq!(cstr(soe_status_name(42)), "SOE_UNKNOWN");
    assert_eq!(cstr(soe_version()), env!("CARGO_PKG_VERSION"));
}

#[test]
fn rc4_switched_on_for_one_session_hides_what_follows() {
    // Both ends hold the key and start in plaintext.
    let mut pair = Pair::new(Some(KEY));
    let [server_cfg, client_cfg] = [SOE_ROLE_SERVER, SOE_ROLE_CLIENT]
        .map(|role| config(role).key(KEY).set(SOE_OPT_RC4_AT_START, 0));
    soe_endpoint_free(pair.client);
    soe_endpoint_free(pair.server);
    assert_eq!(
        soe_endpoint_new(server_cfg.ptr(), pair.now, &mut pair.server),
        soe_status::SOE_OK
    );
    assert_eq!(
        soe_endpoint_new(client_cfg.ptr(), pair.now, &mut pair.client),
        soe_status::SOE_OK
    );
    let (c, s) = connect(&mut pair);
    let send_and_sniff = |pair: &mut Pair, m: &[u8]| -> bool {
        assert_eq!(
            soe_send(pair.client, c, 0, m.as_ptr(), m.len()),
            soe_status::SOE_OK
        );
        let mut buf = vec![0u8; 2048];
        let (status, len, _) = poll_transmit(pair.client, pair.now, &mut buf);
        assert_eq!(status, soe_status::SOE_OK);
        assert_eq!(
            soe_endpoint_handle_datagram(pair.server, pair.now, &pair.c_addr, buf.as_ptr(), len),
            soe_status::SOE_OK
        );
        buf[..len].windows(m.len()).any(|w| w == m)
    };
    assert!(send_and_sniff(&mut pair, b"LoginRequest, in plaintext"));
    assert_eq!(soe_set_encryption(pair.client, c, 1), soe_status::SOE_OK);
    assert_eq!(soe_set_encryption(pair.server, s, 1), soe_status::SOE_OK);
    assert!(!send_and_sniff(&mut pair, b"after the switch, hidden"));
    let got: Vec<Vec<u8>> = pair.events(true).into_iter().map(|(_, d)| d).collect();
    assert_eq!(
        got,
        [
            b"LoginRequest, in plaintext".to_vec(),
            b"after the switch, hidden".to_vec()
        ]
    );
    assert_eq!(
        soe_set_encryption(pair.client, c, 2),
        soe_status::SOE_ERR_INVALID_ARGUMENT
    );
    // Without a key there is nothing to switch on.
    let mut plain = Pair::new(None);
    let (pc, _) = connect(&mut plain);
    assert_eq!(
        soe_set_encryption(plain.client, pc, 1),
        soe_status::SOE_ERR_INVALID_ARGUMENT
    );
    assert!(last_error().contains("no RC4 key"), "{}", last_error());
    assert_eq!(
        soe_set_encryption(ptr::null_mut(), pc, 1),
        soe_status::SOE_ERR_NULL
    );
}

#[test]
fn a_null_transmit_buffer_keeps_the_datagram_for_the_next_call() {
    let mut pair = Pair::new(None);
    let mut session = 0;
    assert_eq!(
        soe_connect(pair.client, pair.now, &pair.s_addr, &mut session),
        soe_status::SOE_OK
    );
    let (mut len, mut dest) = (0usize, addr(0, 0));
    // A NULL buffer that claims room: refused, and the SessionRequest stays queued.
    assert_eq!(
        soe_endpoint_poll_transmit(
            pair.client,
            pair.now,
            ptr::null_mut(),
            512,
            &mut len,
            &mut dest
        ),
        soe_status::SOE_ERR_NULL
    );
    assert!(last_error().contains("buf"), "{}", last_error());
    // A NULL buffer of no room asks for the size; still kept.
    assert_eq!(
        soe_endpoint_poll_transmit(
            pair.client,
            pair.now,
            ptr::null_mut(),
            0,
            &mut len,
            &mut dest
        ),
        soe_status::SOE_ERR_BUFFER_TOO_SMALL
    );
    assert!(len > 0);
    let needed = len;
    let mut buf = vec![0u8; 512];
    let (status, got, to) = poll_transmit(pair.client, pair.now, &mut buf);
    assert_eq!(status, soe_status::SOE_OK, "{}", last_error());
    assert_eq!((got, to), (needed, pair.s_addr));
    // It is the SessionRequest: the handshake completes with it, no retry needed.
    assert_eq!(
        soe_endpoint_handle_datagram(pair.server, pair.now, &pair.c_addr, buf.as_ptr(), got),
        soe_status::SOE_OK
    );
    pair.flush(false);
    let events = pair.events(false);
    assert_eq!(events[0].0.kind, soe_event_kind::SOE_EVENT_CONNECTED);
}

#[test]
fn a_new_config_names_the_default_protocol_soe_echo() {
    let client_cfg = Config::new(SOE_ROLE_CLIENT);
    // A client with the default talks to a server that names "SoeEcho" itself.
    let server_cfg = config(SOE_ROLE_SERVER).protocol(c"SoeEcho");
    let mut pair = Pair::new(None);
    soe_endpoint_free(pair.client);
    soe_endpoint_free(pair.server);
    assert_eq!(
        soe_endpoint_new(server_cfg.ptr(), pair.now, &mut pair.server),
        soe_status::SOE_OK
    );
    assert_eq!(
        soe_endpoint_new(client_cfg.ptr(), pair.now, &mut pair.client),
        soe_status::SOE_OK
    );
    connect(&mut pair);
}

#[test]
fn max_message_size_above_4_mib_is_refused_and_a_4_5_mb_message_is_too_large() {
    for (value, accepted) in [
        (4_194_304u32, true),
        (4_194_305, false),
        (5_000_000, false),
        (u32::MAX, false),
    ] {
        let c = config(SOE_ROLE_SERVER);
        let status = soe_config_set(c.ptr(), SOE_OPT_MAX_MESSAGE_SIZE, i64::from(value));
        if accepted {
            assert_eq!(status, soe_status::SOE_OK, "{value}: {}", last_error());
            let mut ep = ptr::null_mut();
            assert_eq!(soe_endpoint_new(c.ptr(), 0, &mut ep), soe_status::SOE_OK);
            soe_endpoint_free(ep);
        } else {
            assert_eq!(status, soe_status::SOE_ERR_INVALID_CONFIG, "{value}");
            let e = last_error();
            assert!(
                e.contains("SOE_OPT_MAX_MESSAGE_SIZE") && e.contains("4194304"),
                "{e}"
            );
            assert_eq!(c.get(SOE_OPT_MAX_MESSAGE_SIZE), 4_194_304, "unchanged");
        }
    }
    let mut pair = Pair::new(None);
    let (c, _) = connect(&mut pair);
    let big = vec![7u8; 4_500_000];
    assert_eq!(
        soe_send(pair.client, c, 0, big.as_ptr(), big.len()),
        soe_status::SOE_ERR_MESSAGE_TOO_LARGE
    );
    assert!(last_error().contains("4500000"), "{}", last_error());
    assert_eq!(
        soe_send(pair.client, c, 0, big.as_ptr(), 4_194_304),
        soe_status::SOE_OK,
        "{}",
        last_error()
    );
}

#[test]
fn close_sends_the_callers_reason_and_refuses_codes_that_are_no_reason() {
    let mut pair = Pair::new(None);
    let (c, s) = connect(&mut pair);
    for bad in [17u16, 255, u16::MAX] {
        assert_eq!(
            soe_close(pair.client, pair.now, c, bad),
            soe_status::SOE_ERR_INVALID_ARGUMENT
        );
        assert!(last_error().contains(&bad.to_string()), "{}", last_error());
    }
    // Refused: the session is untouched.
    assert_eq!(
        soe_send(pair.client, c, 0, b"still open".as_ptr(), 10),
        soe_status::SOE_OK
    );
    assert_eq!(
        soe_close(pair.client, pair.now, c, SOE_REASON_RELIABLE_OVERFLOW),
        soe_status::SOE_OK
    );
    for _ in 0..20 {
        pair.step(5_000);
    }
    let closed = |evs: Vec<(soe_event, Vec<u8>)>| {
        evs.into_iter()
            .find(|(e, _)| e.kind == soe_event_kind::SOE_EVENT_CLOSED)
            .map(|(e, _)| (e.session, e.reason, e.by_peer))
    };
    let server_events = pair.events(true);
    assert!(
        server_events
            .iter()
            .any(|(e, d)| e.kind == soe_event_kind::SOE_EVENT_MESSAGE && d == b"still open")
    );
    assert_eq!(closed(server_events), Some((s, 13, 1)));
    assert_eq!(closed(pair.events(false)), Some((c, 13, 0)));
}

#[test]
fn version_macros_match_the_library() {
    assert_eq!(
        cstr(soe_version()),
        format!("{SOE_VERSION_MAJOR}.{SOE_VERSION_MINOR}.{SOE_VERSION_PATCH}")
    );
    assert_eq!(
        SOE_VERSION_NUMBER,
        SOE_VERSION_MAJOR * 10_000 + SOE_VERSION_MINOR * 100 + SOE_VERSION_PATCH
    );
    assert_eq!(soe_abi_version(), SOE_ABI_VERSION);
}
