//! The config handle (ABI 1): every option's default as soe.h and docs/c-api.md state it,
//! refusals that name the option, "never" for the optional timers, the check of the protocol
//! name against `SOE_OPT_UDP_LENGTH`, and what the new session calls do: the user pointer in
//! events, closing every session, closing at once, and the close timing the options set.

use std::collections::BTreeMap;
use std::path::Path;
use std::ptr;

use soe_ffi::*;

mod support;
use support::{Config, addr, endpoint, last_error};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `Default N` (or `Default SOE_NEVER`...) in a piece of documentation, as a number.
fn stated_default(doc: &str) -> Option<i64> {
    let rest = doc.split("Default ").nth(1)?;
    let word: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(|c| *c != ',')
        .collect();
    word.parse().ok()
}

/// Each `#define SOE_OPT_*` of soe.h with the comment above it.
fn header_options() -> BTreeMap<String, String> {
    let header = std::fs::read_to_string(root().join("include/soe.h")).unwrap();
    let mut out = BTreeMap::new();
    let mut comment = String::new();
    for line in header.lines() {
        if let Some(c) = line.strip_prefix("// ") {
            comment.push_str(c);
            comment.push(' ');
        } else if let Some(rest) = line.strip_prefix("#define SOE_OPT_") {
            let name = format!("SOE_OPT_{}", rest.split(' ').next().unwrap());
            out.insert(name, std::mem::take(&mut comment));
        } else {
            comment.clear();
        }
    }
    out
}

#[test]
fn every_option_states_its_default_in_the_header_and_the_docs() {
    let header = header_options();
    let doc = std::fs::read_to_string(root().join("../../docs/c-api.md")).unwrap();
    let table: BTreeMap<String, String> = doc
        .lines()
        .filter(|l| l.starts_with("| `SOE_OPT_"))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            (cells[0].trim_matches('`').to_owned(), cells[1].to_owned())
        })
        .collect();
    let options = options();
    assert_eq!(header.len(), options.len(), "{:?}", header.keys());
    assert_eq!(
        table.len(),
        options.len(),
        "docs/c-api.md: {:?}",
        table.keys()
    );
    for role in [SOE_ROLE_SERVER, SOE_ROLE_CLIENT] {
        let c = Config::new(role);
        for (number, name, default) in &options {
            assert_eq!(c.get(*number), *default, "{name}");
            let doc = &header[*name];
            assert_eq!(stated_default(doc), Some(*default), "soe.h, {name}: {doc}");
            let cell = table[*name].replace(',', "");
            assert!(
                cell.split_whitespace()
                    .any(|w| w.trim_matches('`') == default.to_string()),
                "docs/c-api.md, {name}: {cell} (default {default})"
            );
        }
    }
}

#[test]
fn refusals_name_the_option_its_range_and_leave_it_unchanged() {
    let c = Config::new(SOE_ROLE_SERVER);
    for (option, value, words) in [
        (
            SOE_OPT_UDP_LENGTH,
            63,
            "SOE_OPT_UDP_LENGTH = 63 is out of range; allowed 64..=65507",
        ),
        (
            SOE_OPT_CRC_LENGTH,
            3,
            "SOE_OPT_CRC_LENGTH = 3 is out of range; allowed 0, 2 or 4",
        ),
        (SOE_OPT_DISCONNECT_REPEATS, 17, "allowed 1..=16 (default 5)"),
        (
            SOE_OPT_CONNECT_TIMEOUT_MS,
            SOE_NEVER,
            "SOE_OPT_CONNECT_TIMEOUT_MS = -1",
        ),
        (SOE_OPT_IDLE_TIMEOUT_MS, -2, "or SOE_NEVER (-1)"),
    ] {
        let before = c.get(option);
        assert_eq!(
            soe_config_set(c.ptr(), option, value),
            soe_status::SOE_ERR_INVALID_CONFIG
        );
        assert!(last_error().contains(words), "{}", last_error());
        assert_eq!(c.get(option), before);
    }
    // An option from a newer header: a status of its own, not a misread struct.
    assert_eq!(
        soe_config_set(c.ptr(), 4242, 1),
        soe_status::SOE_ERR_UNKNOWN_OPTION
    );
    assert!(last_error().contains("option 4242"), "{}", last_error());
    let c = c.set(SOE_OPT_IDLE_TIMEOUT_MS, SOE_NEVER);
    assert_eq!(c.get(SOE_OPT_IDLE_TIMEOUT_MS), SOE_NEVER);
}

/// Issue 35 §4.3: a protocol name whose SessionRequest does not fit `udp_length` was accepted,
/// and the first `soe_endpoint_poll_transmit` into a buffer of `udp_length` bytes then failed.
#[test]
fn a_protocol_name_too_long_for_udp_length_is_refused_at_endpoint_new() {
    let name: Vec<u8> = [b'p'; 200].iter().chain(&[0]).copied().collect();
    let c = Config::new(SOE_ROLE_CLIENT).set(SOE_OPT_UDP_LENGTH, 64);
    assert_eq!(
        soe_config_set_application_protocol(c.ptr(), name.as_ptr().cast()),
        soe_status::SOE_OK
    );
    let mut ep = ptr::null_mut();
    assert_eq!(
        soe_endpoint_new(c.ptr(), 0, &mut ep),
        soe_status::SOE_ERR_INVALID_CONFIG
    );
    assert!(ep.is_null());
    let e = last_error();
    assert!(
        e.contains("SOE_OPT_UDP_LENGTH = 64") && e.contains("215"),
        "{e}"
    );
    // At exactly 215 the SessionRequest fits the promised buffer.
    let c = c.set(SOE_OPT_UDP_LENGTH, 215);
    let ep = endpoint(&c, 0);
    let mut session = 0;
    assert_eq!(
        soe_connect(ep, 0, &addr(1, 9), &mut session),
        soe_status::SOE_OK
    );
    let mut buf = [0u8; 215];
    let (mut len, mut to) = (0, addr(0, 0));
    assert_eq!(
        soe_endpoint_poll_transmit(ep, 0, buf.as_mut_ptr(), buf.len(), &mut len, &mut to),
        soe_status::SOE_OK,
        "{}",
        last_error()
    );
    assert_eq!(len, 215);
    soe_endpoint_free(ep);
}

/// A client and a server endpoint in memory.
struct Pair {
    client: *mut soe_endpoint,
    server: *mut soe_endpoint,
    now: u64,
}

impl Pair {
    fn new(server: &Config, client: &Config) -> Self {
        Self {
            server: endpoint(server, 0),
            client: endpoint(client, 0),
            now: 0,
        }
    }

    /// Moves every datagram each way; the number of datagrams moved.
    fn flush(&mut self) -> usize {
        let mut moved = 0;
        let mut buf = vec![0u8; 65_536];
        for (from, to, source) in [
            (self.client, self.server, addr(2, 2000)),
            (self.server, self.client, addr(1, 1000)),
        ] {
            let (mut len, mut dest) = (0, addr(0, 0));
            while soe_endpoint_poll_transmit(
                from,
                self.now,
                buf.as_mut_ptr(),
                buf.len(),
                &mut len,
                &mut dest,
            ) == soe_status::SOE_OK
            {
                soe_endpoint_handle_datagram(to, self.now, &source, buf.as_ptr(), len);
                moved += 1;
            }
        }
        moved
    }

    fn step(&mut self, micros: u64) {
        self.now += micros;
        soe_endpoint_handle_timeout(self.client, self.now);
        soe_endpoint_handle_timeout(self.server, self.now);
        self.flush();
    }

    fn events(&mut self, server: bool) -> Vec<soe_event> {
        let ep = if server { self.server } else { self.client };
        let mut buf = vec![0u8; 65_536];
        let mut out = Vec::new();
        let mut ev = support::empty_event();
        while soe_endpoint_poll_event(ep, &mut ev, buf.as_mut_ptr(), buf.len())
            == soe_status::SOE_OK
        {
            out.push(ev);
        }
        out
    }

    fn count(&self, server: bool) -> usize {
        let mut n = 0;
        let ep = if server { self.server } else { self.client };
        assert_eq!(soe_endpoint_session_count(ep, &mut n), soe_status::SOE_OK);
        n
    }

    /// Connects; the client's and the server's handles.
    fn connect(&mut self) -> (soe_session, soe_session) {
        let mut session = 0;
        assert_eq!(
            soe_connect(self.client, self.now, &addr(1, 1000), &mut session),
            soe_status::SOE_OK
        );
        for _ in 0..5 {
            self.step(1_000);
        }
        assert_eq!(
            self.events(false)[0].kind,
            soe_event_kind::SOE_EVENT_CONNECTED
        );
        let accepted = self.events(true)[0];
        assert_eq!(accepted.kind, soe_event_kind::SOE_EVENT_ACCEPTED);
        (session, accepted.session)
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        soe_endpoint_free(self.client);
        soe_endpoint_free(self.server);
    }
}

fn pair_with(set: &[(soe_option, i64)]) -> Pair {
    let mut s = Config::new(SOE_ROLE_SERVER);
    let mut c = Config::new(SOE_ROLE_CLIENT);
    for &(o, v) in set {
        s = s.set(o, v);
        c = c.set(o, v);
    }
    Pair::new(&s, &c)
}

#[test]
fn the_user_pointer_rides_every_event_of_its_session_the_closed_one_included() {
    let mut pair = pair_with(&[]);
    let (c, s) = pair.connect();
    let mut player = 7u32;
    let user = (&mut player as *mut u32).cast::<std::ffi::c_void>();
    assert_eq!(
        soe_session_set_user(pair.server, s, user),
        soe_status::SOE_OK
    );
    let mut got = ptr::null_mut();
    assert_eq!(
        soe_session_user(pair.server, s, &mut got),
        soe_status::SOE_OK
    );
    assert_eq!(got, user);
    assert_eq!(
        soe_send(pair.client, c, 0, b"hi".as_ptr(), 2),
        soe_status::SOE_OK
    );
    pair.step(1_000);
    let events = pair.events(true);
    assert_eq!(events[0].kind, soe_event_kind::SOE_EVENT_MESSAGE);
    assert_eq!(events[0].user, user);
    // The client's session has no pointer: NULL.
    assert_eq!(
        soe_close(pair.client, pair.now, c, SOE_REASON_APPLICATION),
        soe_status::SOE_OK
    );
    for _ in 0..20 {
        pair.step(10_000);
    }
    let closed = pair.events(true);
    assert_eq!(
        closed.last().unwrap().kind,
        soe_event_kind::SOE_EVENT_CLOSED
    );
    assert_eq!(closed.last().unwrap().user, user);
    assert!(pair.events(false).iter().all(|e| e.user.is_null()));
    assert_eq!(
        soe_session_user(pair.server, s, &mut got),
        soe_status::SOE_ERR_STALE_SESSION
    );
}

/// Three sessions with unacknowledged data (the peer is gone): `soe_close_all` lingers for
/// `SOE_OPT_CLOSE_TIMEOUT_MS`, then sends its Disconnects; immediately, it does not linger.
#[test]
fn close_all_lingers_for_the_close_timeout_and_immediately_skips_it() {
    for immediately in [0u8, 1] {
        let mut pair = pair_with(&[
            (SOE_OPT_CLOSE_TIMEOUT_MS, 2_000),
            (SOE_OPT_DISCONNECT_REPEATS, 3),
            (SOE_OPT_DISCONNECT_INTERVAL_MS, 50),
        ]);
        let (c, _) = pair.connect();
        assert_eq!(
            soe_send(pair.client, c, 0, b"lost".as_ptr(), 4),
            soe_status::SOE_OK
        );
        assert_eq!(
            soe_close_all(pair.client, pair.now, SOE_REASON_APPLICATION, immediately),
            soe_status::SOE_OK
        );
        // The server is gone: nothing the client sends is answered.
        let mut buf = vec![0u8; 65_536];
        let (mut len, mut dest) = (0, addr(0, 0));
        let mut disconnects_at = Vec::new();
        let mut closed = Vec::new();
        let start = pair.now;
        while pair.count(false) > 0 && pair.now - start < 10_000_000 {
            closed.extend(pair.events(false));
            pair.now += 1_000;
            soe_endpoint_handle_timeout(pair.client, pair.now);
            while soe_endpoint_poll_transmit(
                pair.client,
                pair.now,
                buf.as_mut_ptr(),
                buf.len(),
                &mut len,
                &mut dest,
            ) == soe_status::SOE_OK
            {
                // A Disconnect is opcode 0x0005.
                if buf[..2] == [0, 5] {
                    disconnects_at.push((pair.now - start) / 1_000);
                }
            }
        }
        assert_eq!(
            closed.last().unwrap().kind,
            soe_event_kind::SOE_EVENT_CLOSED
        );
        assert_eq!(disconnects_at.len(), 3, "{disconnects_at:?}");
        let first = disconnects_at[0];
        if immediately == 1 {
            assert!(first <= 1, "immediately: first Disconnect at {first} ms");
        } else {
            assert!((2_000..=2_002).contains(&first), "graceful: at {first} ms");
        }
        assert_eq!(disconnects_at[2] - first, 100, "{disconnects_at:?}");
        // Counted until the last Disconnect's interval has passed.
        let gone = (pair.now - start) / 1_000;
        assert!(
            gone >= disconnects_at[2] && gone <= disconnects_at[2] + 51,
            "{gone} {disconnects_at:?}"
        );
    }
}

#[test]
fn never_turns_the_idle_timeout_off() {
    let mut pair = pair_with(&[
        (SOE_OPT_IDLE_TIMEOUT_MS, SOE_NEVER),
        (SOE_OPT_HEARTBEAT_INTERVAL_MS, SOE_NEVER),
    ]);
    let (c, _) = pair.connect();
    let mut deadline = 0;
    // No timer at all: nothing to wait for, nothing ends the session.
    for _ in 0..3 {
        pair.step(3_600_000_000);
    }
    assert_eq!(
        soe_endpoint_next_timeout(pair.client, &mut deadline),
        soe_status::SOE_DONE
    );
    assert!(pair.events(false).is_empty());
    let mut stats = soe_stats::default();
    assert_eq!(
        soe_session_stats(pair.client, c, &mut stats),
        soe_status::SOE_OK
    );
}

#[test]
fn bundle_messages_off_sends_one_reliable_packet_per_message() {
    for (bundle, packets) in [(1, 1), (0, 3)] {
        let mut pair = pair_with(&[(SOE_OPT_BUNDLE_MESSAGES, bundle)]);
        let (c, _) = pair.connect();
        for m in [b"aa", b"bb", b"cc"] {
            assert_eq!(
                soe_send(pair.client, c, 0, m.as_ptr(), 2),
                soe_status::SOE_OK
            );
        }
        pair.step(1_000);
        let mut stats = soe_stats::default();
        assert_eq!(
            soe_session_stats(pair.client, c, &mut stats),
            soe_status::SOE_OK
        );
        assert_eq!(stats.reliable_packets_sent, packets, "bundle {bundle}");
    }
}

#[test]
fn refused_sends_say_what_happened() {
    let mut pair = pair_with(&[(SOE_OPT_MAX_QUEUED_MESSAGES, 1)]);
    let (c, _) = pair.connect();
    assert_eq!(
        soe_send_unreliable(pair.client, c, b"x".as_ptr(), 0),
        soe_status::SOE_ERR_MESSAGE_TOO_LARGE
    );
    let e = last_error();
    assert!(e.contains("empty") && e.contains("not queued"), "{e}");
    while soe_send(pair.client, c, 0, b"x".as_ptr(), 1) == soe_status::SOE_OK {}
    let e = last_error();
    assert!(
        e.contains("full") && e.contains("not queued") && !e.contains("returned"),
        "{e}"
    );
}

/// Issue 45 §2: `SOE_OPT_PRESET` writes a known peer's values into the options that hold them
/// (later options override them), and `SOE_OPT_MAX_OUTSTANDING_BYTES` is an option of its own.
#[test]
fn a_preset_writes_its_values_and_later_options_override_them() {
    let c = Config::new(SOE_ROLE_SERVER);
    assert_eq!(c.get(SOE_OPT_MAX_OUTSTANDING_BYTES), 200 * 1024);
    assert_eq!(c.get(SOE_OPT_PRESET), SOE_PRESET_NONE);
    let c = c.set(SOE_OPT_PRESET, SOE_PRESET_FREE_REALMS);
    assert_eq!(c.get(SOE_OPT_MAX_OUTSTANDING_BYTES), 64 * 1024);
    assert_eq!(c.get(SOE_OPT_UDP_LENGTH), 512);
    let c = c.set(SOE_OPT_MAX_OUTSTANDING_BYTES, 32 * 1024);
    assert_eq!(c.get(SOE_OPT_MAX_OUTSTANDING_BYTES), 32 * 1024);
    let ep = endpoint(&c, 0);
    soe_endpoint_free(ep);
    let h1 = Config::new(SOE_ROLE_CLIENT).set(SOE_OPT_PRESET, SOE_PRESET_H1Z1);
    assert_eq!(h1.get(SOE_OPT_RC4_AT_START), 0);
    soe_endpoint_free(endpoint(&h1, 0));
    assert_eq!(
        soe_config_set(h1.ptr(), SOE_OPT_PRESET, SOE_PRESET_PLANETSIDE2 + 1),
        soe_status::SOE_ERR_INVALID_CONFIG
    );
    assert_eq!(
        soe_config_set(h1.ptr(), SOE_OPT_MAX_OUTSTANDING_BYTES, 0),
        soe_status::SOE_ERR_INVALID_CONFIG
    );
}
