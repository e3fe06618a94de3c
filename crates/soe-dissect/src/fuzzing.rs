//! The entry point of the dissector's fuzz target (feature `fuzzing`; not an API).
//!
//! [`stream`] feeds a [`Dissector`] a stream of datagrams decoded from the fuzzer's bytes,
//! after a real handshake, so the session's framing is learned and the bytes reach the
//! reassembly, decryption and round-trip code. Its CRC length is 0, so arbitrary bytes pass
//! framing; the first byte picks compression and an RC4 key. The limits are small, so the
//! fuzzer reaches them. After every datagram the harness checks what the crate promises:
//!
//! * nothing panics;
//! * bytes buffered stay within [`Limits::max_buffered`], sessions within
//!   [`Limits::max_sessions`], listed messages within [`Limits::max_listed`];
//! * the end of the capture ([`Dissector::flush`]) releases every byte buffered;
//! * every record and summary renders.
//!
//! A broken promise panics, which the fuzzer reports.

use std::net::SocketAddr;
use std::time::Duration;

use soe_wire::{Packet, SessionRequest, SessionResponse};

use crate::{DissectConfig, Dissector, Limits};

/// The session's client and server, and two strangers.
const ADDRS: [&str; 4] = [
    "10.0.0.1:40000",
    "10.0.0.2:20260",
    "10.0.0.3:40001",
    "[2001:db8::1]:20260",
];

/// The RC4 key when one is on (the one soe-session's fuzz harness uses, so its recorded
/// traffic decrypts).
pub const KEY: &[u8] = b"\x17\xbd\x08\x6b\x1b\x94\xf0\x2f\xf0\xec\x53\xd7\x63\x58\x9b\x5f";

/// The route of a datagram from the session's client to its server.
pub const CLIENT_TO_SERVER: u8 = 0b0100;
/// The route of a datagram from the session's server to its client.
pub const SERVER_TO_CLIENT: u8 = 0b0001;

/// Encodes a stream for [`stream`]: `flags`, then each `(route, datagram)`.
pub fn encode(flags: u8, datagrams: &[(u8, Vec<u8>)]) -> Vec<u8> {
    let mut out = vec![flags];
    for (route, datagram) in datagrams {
        let len = datagram.len().min(usize::from(u16::MAX));
        out.push(*route);
        out.extend_from_slice(&(len as u16).to_be_bytes());
        out.extend_from_slice(&datagram[..len]);
    }
    out
}

/// A small deterministic generator (xorshift64), for the tests that feed [`stream`] random
/// and mutated inputs on stable.
#[derive(Debug, Clone)]
pub struct XorShift(pub u64);

impl XorShift {
    /// The next value (the state must not start at 0).
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// The limits of the fuzzed dissector: small, so the fuzzer reaches them.
pub fn limits() -> Limits {
    Limits {
        max_sessions: 3,
        max_stored: 16,
        window: 64,
        max_message: 4096,
        max_buffered: 16 * 1024,
        max_pending_acks: 32,
        max_inflated: 8192,
        max_listed: 8,
        gap_window: 24,
        max_gaps_listed: 4,
    }
}

/// The handshake datagrams: a SessionRequest and a SessionResponse with CRC length 0.
fn handshake(compression: bool) -> [Vec<u8>; 2] {
    let mut request = Vec::new();
    Packet::SessionRequest(SessionRequest {
        protocol_version: 3,
        session_id: 0x0102_0304,
        udp_length: 512,
        application_protocol: b"Fuzz",
    })
    .encode(&mut request);
    let mut response = Vec::new();
    Packet::SessionResponse(SessionResponse {
        session_id: 0x0102_0304,
        crc_seed: 0x5eed,
        crc_length: 0,
        compression: u8::from(compression),
        encryption_method: 0,
        udp_length: 512,
        protocol_version: 3,
    })
    .encode(&mut response);
    [request, response]
}

/// Runs one fuzz input. Layout: a flags byte (bit 0 compression, bit 1 an RC4 key, bit 2 a
/// key for the server's port only), then datagrams, each `[route, len (2 bytes, big-endian),
/// bytes...]`: the route's low two bits pick the sender, the next two the receiver, the rest a
/// time step in milliseconds.
pub fn stream(data: &[u8]) {
    let Some((&flags, mut rest)) = data.split_first() else {
        return;
    };
    let limits = limits();
    let mut config = DissectConfig::new().with_limits(limits);
    if flags & 2 != 0 {
        let port = (flags & 4 != 0).then_some(20260);
        config = config.with_key(port, KEY);
    }
    let addrs: Vec<SocketAddr> = ADDRS.iter().filter_map(|a| a.parse().ok()).collect();
    let [client, server] = [addrs[0], addrs[1]];
    let mut dissector = Dissector::new(config);
    let mut time = Duration::from_secs(1_700_000_000);
    let [request, response] = handshake(flags & 1 != 0);
    check(
        &dissector.dissect(time, client, server, &request),
        &dissector,
        limits,
    );
    check(
        &dissector.dissect(time, server, client, &response),
        &dissector,
        limits,
    );
    while let [route, hi, lo, tail @ ..] = rest {
        let len = usize::from(u16::from_be_bytes([*hi, *lo])).min(tail.len());
        let (datagram, next) = tail.split_at(len);
        rest = next;
        let src = addrs[usize::from(route & 3)];
        let dst = addrs[usize::from((route >> 2) & 3)];
        time += Duration::from_millis(u64::from(route >> 4));
        let record = dissector.dissect(time, src, dst, datagram);
        check(&record, &dissector, limits);
    }
    // The end of the capture gives every gap up and releases every buffered byte.
    for record in dissector.flush() {
        assert!(record.messages.len() <= limits.max_listed);
        let _ = record.render();
    }
    assert_eq!(
        dissector.buffered_bytes(),
        0,
        "bytes still held after flush"
    );
    for summary in dissector.summaries() {
        let _ = summary.render();
    }
}

/// The promises checked after every datagram.
fn check(record: &crate::DatagramRecord, dissector: &Dissector, limits: Limits) {
    assert!(
        dissector.buffered_bytes() <= limits.max_buffered,
        "{} bytes buffered, over the limit of {}",
        dissector.buffered_bytes(),
        limits.max_buffered
    );
    assert!(dissector.session_count() <= limits.max_sessions);
    assert!(record.messages.len() <= limits.max_listed);
    let _ = record.render();
}
