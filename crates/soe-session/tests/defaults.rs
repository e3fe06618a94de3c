//! The documented defaults, pinned: every value the "Defaults" tables of this crate's README
//! (sessions and the endpoint) and of soe-reliable's README (the reliable channels) give is
//! checked against the code, and the tables' own wording is checked too, so that a change to
//! either side without the other fails here. A row that no test looks at fails as well.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use soe_reliable::{AckElicitor, MAX_DURATION, ReliableConfig};
use soe_session::{EndpointConfig, SessionConfig};
use soe_wire::CrcLength;

const MS: Duration = Duration::from_millis(1);
const S: Duration = Duration::from_secs(1);

/// The rows of a README's "## Defaults" table, and which of them a test has looked at.
struct Table {
    readme: &'static str,
    rows: Vec<&'static str>,
    seen: RefCell<BTreeSet<usize>>,
}

impl Table {
    fn new(readme: &'static str, text: &'static str) -> Self {
        let section = text
            .split("\n## Defaults\n")
            .nth(1)
            .and_then(|s| s.split("\n## ").next())
            .unwrap_or_else(|| panic!("{readme} has no Defaults section"));
        let rows: Vec<&str> = section
            .lines()
            .filter(|l| l.starts_with("| ") && !l.starts_with("| What |"))
            .collect();
        assert!(rows.len() >= 10, "{readme}: only {} rows", rows.len());
        Self {
            readme,
            rows,
            seen: RefCell::new(BTreeSet::new()),
        }
    }

    /// Asserts that the row whose first cell starts with `what` states `value`.
    fn documented(&self, what: &str, value: &str) {
        let prefix = format!("| {what}");
        let (index, row) = self
            .rows
            .iter()
            .enumerate()
            .find(|(_, l)| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("{} has no defaults row starting {what:?}", self.readme));
        assert!(
            row.contains(value),
            "{}: row {row:?} should state {value:?}",
            self.readme
        );
        self.seen.borrow_mut().insert(index);
    }

    /// Asserts that every row was checked, but those starting with one of `unchecked`.
    fn all_checked(&self, unchecked: &[&str]) {
        for (index, row) in self.rows.iter().enumerate() {
            let exempt = unchecked.iter().any(|u| row.starts_with(&format!("| {u}")));
            assert!(
                self.seen.borrow().contains(&index) || exempt,
                "{}: no test checks the defaults row {row:?}",
                self.readme
            );
        }
    }
}

fn session_readme() -> Table {
    Table::new("soe-session's README", include_str!("../README.md"))
}

fn reliable_readme() -> Table {
    Table::new(
        "soe-reliable's README",
        include_str!("../../soe-reliable/README.md"),
    )
}

#[test]
fn reliable_defaults_are_the_documented_ones() {
    let table = reliable_readme();
    let documented = |what: &str, value: &str| table.documented(what, value);
    let r = ReliableConfig::default();
    assert_eq!(r.receive_window, 256);
    documented("Reliable receive window", "256 packets");
    assert_eq!((r.max_send_window, r.initial_send_window), (196, 8));
    documented("Send window", "196 / 8 packets");
    assert_eq!(r.max_outstanding_bytes, 200 * 1024);
    assert!(usize::from(r.max_send_window) * 512 < r.max_outstanding_bytes);
    documented(
        "Bytes in flight",
        "200 KiB (never binds at 512-byte datagrams",
    );
    assert_eq!((r.ack_delay, r.ack_every), (2 * MS, 16));
    documented("Cumulative ack", "after 2 ms or every 16 packets");
    assert_eq!((r.initial_rto, r.min_rto, r.max_rto), (500 * MS, 4 * MS, S));
    documented("Probe timeout", "500 ms before a sample, 4 ms – 1 s");
    assert_eq!(r.max_ack_delay, 100 * MS);
    documented("Longest ack delay", "100 ms");
    assert!(r.pacing);
    documented("Pacing", "| on |");
    assert_eq!(r.ack_elicitor, AckElicitor::EmptyGroup);
    documented("Ack elicitor", "`AckElicitor::EmptyGroup`");
    assert!(r.reack_duplicates);
    documented("Re-acknowledge a duplicate", "| yes |");
    assert_eq!(r.unacknowledged_timeout, 30 * S);
    documented("Packet unacknowledged", "30 s");
    assert_eq!(MAX_DURATION, Duration::from_secs(365 * 24 * 3600));
    documented("Longest duration any timing setting", "1 year");
    assert_eq!(r.max_message_size, 4 * 1024 * 1024);
    documented("Largest reliable message", "4 MiB");
    assert_eq!(r.max_queued_messages, 4096);
    documented("Messages queued per reliable channel", "4,096");
    table.all_checked(&[]);
}

#[test]
fn session_and_endpoint_defaults_are_the_documented_ones() {
    let table = session_readme();
    session_defaults(&table);
    endpoint_defaults(&table);
    // The inflate limit (4 × the session's own udp_length) is private to the session, so
    // that row alone is not checked here.
    table.all_checked(&["Inflated size of one received datagram"]);
}

fn session_defaults(table: &Table) {
    let documented = |what: &str, value: &str| table.documented(what, value);
    let s = SessionConfig::new("Test_1");
    assert_eq!(s.udp_length(), 512);
    documented("`udp_length`", "512 bytes");
    assert_eq!(s.crc_length(), CrcLength::TWO);
    documented("CRC trailer length", "2 bytes");
    assert!(!s.compression());
    documented("Compression", "| off |");
    assert!(s.encryption_key().is_none());
    documented("RC4 on reliable data", "| off |");
    assert!(s.encryption_at_start());
    documented("RC4 from the session's start", "| on;");
    assert_eq!((s.connect_timeout(), s.retry_interval()), (10 * S, S));
    documented("Connect timeout", "10 s / 1 s");
    assert_eq!(s.heartbeat_interval(), Some(10 * S));
    assert!(!s.server_heartbeats());
    documented("Heartbeat after silence", "10 s");
    assert_eq!(s.idle_timeout(), Some(30 * S));
    documented("Idle timeout", "30 s");
    assert_eq!(
        (
            s.close_timeout(),
            s.disconnect_repeats(),
            s.disconnect_interval()
        ),
        (5 * S, 5, 100 * MS)
    );
    documented("Graceful close", "up to 5 s, then 5 × 100 ms apart");
    assert_eq!(s.max_queued_unreliable(), 256);
    documented("Unreliable/ordered messages queued", "256");
    assert_eq!(s.accept_crcless_quirks(), None, "by role: clients only");
}

fn endpoint_defaults(table: &Table) {
    let documented = |what: &str, value: &str| table.documented(what, value);
    let e = EndpointConfig::server(Arc::new(SessionConfig::new("Test_1")));
    assert_eq!(e.max_sessions(), 10_000);
    documented("Sessions per endpoint", "10,000");
    assert_eq!(e.max_half_open(), 1024);
    documented("Half-open sessions", "1,024");
    assert_eq!(
        (e.requests_per_source_per_minute(), e.source_table_size()),
        (30, 4096)
    );
    let levels: Vec<_> = e
        .source_levels()
        .iter()
        .map(|l| {
            (
                l.ipv4_prefix(),
                l.ipv6_prefix(),
                l.requests_per_minute(),
                l.session_percent(),
                l.max_sessions(e.max_sessions()),
            )
        })
        .collect();
    assert_eq!(
        levels,
        [
            (Some(32), Some(64), 30, 1, 100),
            (None, Some(56), 120, 2, 200),
            (Some(24), Some(48), 600, 5, 500),
        ]
    );
    documented(
        "SessionRequests per source, at each level: a host (every port of one IPv4 address, \
         every address of one IPv6 /64), an IPv6 site (/56), a network (an IPv4 /24, an IPv6 /48)",
        "30 per minute per host, 120 per /56, 600 per network; 4,096 sources tracked per level",
    );
    documented(
        "Sessions (established and half-open) one source may hold",
        "1 % of `max_sessions` per host (100), 2 % per IPv6 /56 (200), 5 % per network (500): \
         one network holds at most 5 % of the endpoint",
    );
    assert_eq!(
        e.nat64_prefixes(),
        [("64:ff9b::".parse::<std::net::Ipv6Addr>().unwrap(), 96)]
    );
    documented("NAT64 translator prefixes", "| `64:ff9b::/96`;");
    assert!(e.shard_group().is_none());
    documented("Shards", "| each endpoint its own group;");
    assert_eq!(e.replace_after_silence(), 2 * S);
    documented("A SessionRequest with a new session id", "| 2 s |");
    assert_eq!(e.remap_interval(), S);
    documented("Moves of one live session", "at most one per second");
    assert_eq!(e.max_tombstones(), 4096);
    documented("Closed sessions remembered", "4,096");
    assert_eq!(
        (e.stateless_reply_rate(), e.max_queued_replies()),
        (200, 256)
    );
    documented(
        "Replies sent without a session",
        "200 per second, 256 queued",
    );
    assert_eq!(
        (e.stateless_replies_per_source(), e.stateless_reply_slots()),
        (4, 1024)
    );
    documented(
        "Each source host's share of those replies",
        "4 per second per host, 1,024 slots",
    );
    assert!(!e.limit_loopback());
    documented("Per-source limits on loopback sources", "| off (");
    let r = e.recording();
    assert!(!r.every_session());
    documented("Flight recorder", "| off (");
    assert_eq!(
        (r.session_budget(), r.endpoint_budget()),
        (64 * 1024, 64 * 1024 * 1024)
    );
    documented(
        "A recording's bytes",
        "64 KiB per session, 64 MiB per endpoint",
    );
}
