//! Entry points for the state-machine fuzz targets (feature `fuzzing`; not an API).
//!
//! Each drives a real endpoint with a script decoded from the fuzzer's bytes: datagrams from a
//! few addresses, steps of time, and application calls (send, unreliable, ordered, close).
//! Sessions use a CRC length of 0, so arbitrary bytes pass framing and reach the decoders and
//! the state machines; the first byte picks compression and RC4 on or off. After every step
//! the harness checks what the crate promises:
//!
//! * nothing panics;
//! * `poll_transmit` and `poll_event` run dry within a bound (they always end);
//! * every datagram fits the udp_length of the endpoint's sessions;
//! * the session count stays within `max_sessions + max_half_open`.
//!
//! A broken promise panics, which the fuzzer reports.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use soe_wire::{Channel, CrcLength, DisconnectReason};

use crate::{Endpoint, EndpointConfig, SessionConfig, SessionHandle};

/// The fuzzed endpoint's peer (the client of the server target, the server of the client one).
pub const PEER: u8 = 1;
/// The endpoint's own address, as its peer knows it.
pub const HOME: u8 = 0;
/// Datagrams or events one drain may produce before the harness declares it endless.
const DRAIN_BOUND: usize = 100_000;
/// Sessions the fuzzed server holds at most, and half-open ones.
const MAX_SESSIONS: usize = 8;
const MAX_HALF_OPEN: usize = 4;
/// The udp_length every fuzzed session announces.
const UDP_LENGTH: u32 = 512;
/// The RC4 key when encryption is on.
const KEY: &[u8] = b"\x17\xbd\x08\x6b\x1b\x94\xf0\x2f\xf0\xec\x53\xd7\x63\x58\x9b\x5f";

/// One step of a script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A datagram from address `from` (0 to 3; [`PEER`] is the session's peer).
    Datagram {
        /// The sender.
        from: u8,
        /// The bytes.
        data: Vec<u8>,
    },
    /// Time passes (milliseconds), then the timers run.
    Wait(u32),
    /// The application sends a reliable message of `len` bytes on `channel`.
    Send {
        /// 0 to 3.
        channel: u8,
        /// The message length.
        len: u16,
    },
    /// The application sends an unreliable message of `len` bytes.
    Unreliable(u16),
    /// The application sends an ordered message of `len` bytes.
    Ordered(u16),
    /// The application closes the session.
    Close,
}

/// Decodes a script: the first byte is the settings, then steps until the bytes run out.
pub fn decode(data: &[u8]) -> (u8, Vec<Step>) {
    let Some((&settings, mut rest)) = data.split_first() else {
        return (0, Vec::new());
    };
    let mut steps = Vec::new();
    let take = |n: usize, rest: &mut &[u8]| -> Vec<u8> {
        let k = n.min(rest.len());
        let (a, b) = rest.split_at(k);
        *rest = b;
        a.to_vec()
    };
    while let Some((&op, tail)) = rest.split_first() {
        rest = tail;
        let arg = take(2, &mut rest);
        let a = arg.first().copied().unwrap_or(0);
        let b = arg.get(1).copied().unwrap_or(0);
        let len = u16::from_be_bytes([a, b]);
        steps.push(match op % 8 {
            // Argument bits: `from` (or the channel) in the top two, a length in the rest.
            0..=2 => {
                let data = take(usize::from(len % 1024), &mut rest);
                Step::Datagram { from: a >> 6, data }
            }
            3 => Step::Wait(u32::from(len) * 4),
            4 => Step::Send {
                channel: a >> 6,
                len: len % 8192,
            },
            5 => Step::Unreliable(len % 600),
            6 => Step::Ordered(len % 600),
            _ => Step::Close,
        });
    }
    (settings, steps)
}

/// Encodes a script (the inverse of [`decode`] for the steps it produces), for seed corpora.
pub fn encode(settings: u8, steps: &[Step]) -> Vec<u8> {
    let mut out = vec![settings];
    for s in steps {
        match s {
            Step::Datagram { from, data } => {
                let len = data.len().min(1023);
                out.push(0);
                out.extend_from_slice(&[(from & 3) << 6 | (len >> 8) as u8, len as u8]);
                out.extend_from_slice(&data[..len]);
            }
            Step::Wait(ms) => {
                out.push(3);
                out.extend_from_slice(&((ms / 4).min(0xFFFF) as u16).to_be_bytes());
            }
            Step::Send { channel, len } => {
                out.push(4);
                let l = len % 8192;
                out.extend_from_slice(&[(channel & 3) << 6 | (l >> 8) as u8, l as u8]);
            }
            Step::Unreliable(len) => {
                out.push(5);
                out.extend_from_slice(&len.to_be_bytes());
            }
            Step::Ordered(len) => {
                out.push(6);
                out.extend_from_slice(&len.to_be_bytes());
            }
            Step::Close => out.extend_from_slice(&[7, 0, 0]),
        }
    }
    out
}

/// The session config of both sides: CRC length 0, compression and RC4 as `settings` says.
pub fn session_config(settings: u8) -> Arc<SessionConfig> {
    let mut c = SessionConfig::new("FuzzProto_1")
        .with_crc_length(CrcLength::NONE)
        .with_compression(settings & 1 != 0)
        .with_udp_length(UDP_LENGTH);
    if settings & 2 != 0 {
        if let Ok(e) = c.clone().with_encryption_key(Bytes::from_static(KEY)) {
            c = e;
        }
    }
    Arc::new(c)
}

fn server_endpoint(settings: u8) -> Endpoint<u8> {
    let cfg = EndpointConfig::server(session_config(settings))
        .with_max_sessions(MAX_SESSIONS)
        .with_max_half_open(MAX_HALF_OPEN)
        .with_rng_seed(7);
    Endpoint::new(Arc::new(cfg))
}

fn client_endpoint(settings: u8) -> Endpoint<u8> {
    let cfg = EndpointConfig::client(session_config(settings)).with_rng_seed(9);
    Endpoint::new(Arc::new(cfg))
}

/// The fuzzed endpoint, its peer for the handshake, and the checks.
struct Harness {
    ep: Endpoint<u8>,
    now: Instant,
    buf: Vec<u8>,
    handle: Option<SessionHandle>,
    /// Datagrams the fuzzed endpoint sent to its peer (what a recorder would capture).
    sent: Vec<Vec<u8>>,
}

impl Harness {
    /// Drains transmits and events, checking their bounds.
    fn drain(&mut self) {
        let max = UDP_LENGTH as usize;
        for _ in 0..DRAIN_BOUND {
            let Some(t) = self.ep.poll_transmit(self.now, &mut self.buf) else {
                return self.drain_events();
            };
            assert!(
                t.len <= max && t.len <= self.buf.len(),
                "a {}-byte datagram; udp_length is {max}",
                t.len
            );
            if t.destination == PEER && self.sent.len() < 64 {
                self.sent.push(self.buf[..t.len].to_vec());
            }
        }
        panic!("poll_transmit did not run dry within {DRAIN_BOUND} datagrams");
    }

    fn drain_events(&mut self) {
        for _ in 0..DRAIN_BOUND {
            if self.ep.poll_event().is_none() {
                assert!(
                    self.ep.len() <= MAX_SESSIONS + MAX_HALF_OPEN
                        && self.ep.half_open() <= MAX_HALF_OPEN,
                    "{} sessions, {} half-open",
                    self.ep.len(),
                    self.ep.half_open()
                );
                return;
            }
        }
        panic!("poll_event did not run dry within {DRAIN_BOUND} events");
    }

    fn step(&mut self, step: &Step) {
        match step {
            Step::Datagram { from, data } => self.ep.handle_datagram(self.now, *from, data),
            Step::Wait(ms) => {
                self.now += Duration::from_millis(u64::from(*ms));
                if self.ep.poll_timeout().is_some_and(|t| t <= self.now) {
                    self.ep.handle_timeout(self.now);
                }
            }
            Step::Send { channel, len } => {
                if let Some(h) = self.handle {
                    let ch = Channel::new(channel % 4).unwrap_or(Channel::ZERO);
                    let _ = self.ep.send(h, ch, message(*len, 0x00));
                }
            }
            Step::Unreliable(len) => {
                if let Some(h) = self.handle {
                    let _ = self.ep.send_unreliable(h, message(*len, 0xA5));
                }
            }
            Step::Ordered(len) => {
                if let Some(h) = self.handle {
                    let _ = self.ep.send_ordered(h, message(*len, 0x00));
                }
            }
            Step::Close => {
                if let Some(h) = self.handle {
                    self.ep.close(self.now, h, DisconnectReason::Application);
                }
            }
        }
        self.drain();
        // Time never stalls: after the timers ran, the next deadline is later.
        if self.ep.poll_timeout().is_some_and(|t| t <= self.now) {
            self.ep.handle_timeout(self.now);
            self.drain();
            assert!(
                self.ep.poll_timeout().is_none_or(|t| t > self.now),
                "a deadline stays due after handle_timeout"
            );
        }
    }
}

/// A message of `len` bytes starting with `first` (non-zero for unreliable ones).
fn message(len: u16, first: u8) -> Bytes {
    let mut v: Vec<u8> = (0..usize::from(len)).map(|i| (i * 7) as u8).collect();
    if let Some(b) = v.first_mut() {
        *b = first;
    }
    Bytes::from(v)
}

/// Runs a handshake between `a` (the fuzzed endpoint) and `b` in lockstep at `now`, each
/// addressing the other as [`PEER`] / [`HOME`]; returns when both are quiet.
fn handshake(a: &mut Endpoint<u8>, b: &mut Endpoint<u8>, now: Instant) {
    let mut buf = Vec::new();
    for _ in 0..16 {
        let mut any = false;
        while let Some(t) = a.poll_transmit(now, &mut buf) {
            any = true;
            b.handle_datagram(now, HOME, &buf[..t.len]);
        }
        while let Some(t) = b.poll_transmit(now, &mut buf) {
            any = true;
            a.handle_datagram(now, PEER, &buf[..t.len]);
        }
        while a.poll_event().is_some() {}
        while b.poll_event().is_some() {}
        if !any {
            break;
        }
    }
}

/// A server endpoint whose session with [`PEER`] has been opened, driven by `data`.
pub fn server(data: &[u8]) {
    let (settings, steps) = decode(data);
    let _ = run_server(settings, &steps);
}

/// [`server`] on a decoded script; returns what the server sent its peer.
pub fn run_server(settings: u8, steps: &[Step]) -> Vec<Vec<u8>> {
    let now = Instant::now();
    let mut ep = server_endpoint(settings);
    let mut peer = client_endpoint(settings);
    let _ = peer.connect(now, HOME);
    handshake(&mut ep, &mut peer, now);
    let handle = ep.handle_of(PEER);
    let mut h = Harness {
        ep,
        now,
        buf: Vec::new(),
        handle,
        sent: Vec::new(),
    };
    for s in steps {
        h.step(s);
    }
    h.sent
}

/// A client endpoint whose handshake with its server at [`PEER`] is done, driven by `data`.
pub fn client(data: &[u8]) {
    let (settings, steps) = decode(data);
    let _ = run_client(settings, &steps);
}

/// [`client`] on a decoded script; returns what the client sent its server.
pub fn run_client(settings: u8, steps: &[Step]) -> Vec<Vec<u8>> {
    let now = Instant::now();
    let mut ep = client_endpoint(settings);
    let mut server = server_endpoint(settings);
    let handle = ep.connect(now, PEER).ok();
    handshake(&mut ep, &mut server, now);
    let mut h = Harness {
        ep,
        now,
        buf: Vec::new(),
        handle,
        sent: Vec::new(),
    };
    for s in steps {
        h.step(s);
    }
    h.sent
}
