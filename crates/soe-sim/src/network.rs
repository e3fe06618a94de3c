//! The network and what it does wrong: each client's path to the server (a seeded
//! [`soe_netem::Link`] each way, bit corruption, a NAT whose port may change, outages), the
//! strangers' link that carries floods and replays, and the captured datagrams replays use.
//!
//! A datagram towards the server carries its source address in its first 4 bytes (a spoofer
//! writes any address there); the server's replies are routed by destination address, and a NAT
//! drops those sent to a port it has forgotten.

use std::time::{Duration, Instant};

use soe_netem::{GilbertElliott, Link, LinkConfig};
use soe_session::{RandomSource, SplitMix64};
use soe_wire::{PROTOCOL_VERSION, Packet, SessionRequest};

use crate::cluster::{PROTOCOL, SERVER};

/// Stranger addresses start here (clients are below).
const STRANGERS: u32 = 0xF000_0000;
/// Captured client datagrams kept for replays.
const CAPTURE: usize = 256;

/// Whether `p` strikes (a draw from `rng`).
pub(crate) fn chance(rng: &mut SplitMix64, p: f64) -> bool {
    p > 0.0 && (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
}

/// A draw below `n` (0 when `n` is 0).
pub(crate) fn below(rng: &mut SplitMix64, n: u64) -> u64 {
    if n == 0 { 0 } else { rng.next_u64() % n }
}

/// A duration drawn between `lo` and `hi`, in microseconds.
pub(crate) fn between(rng: &mut SplitMix64, lo: Duration, hi: Duration) -> Duration {
    let span = hi.saturating_sub(lo).as_micros() as u64;
    lo + Duration::from_micros(below(rng, span + 1))
}

/// Whether a datagram is a contextless packet (SessionRequest, SessionResponse, UnknownSender,
/// RemapConnection). SOE v3 gives these no CRC, so a flipped bit in one cannot be detected by
/// any implementation (a SessionResponse with its compression byte flipped makes the two sides
/// frame differently, and every later datagram passes its CRC yet decodes wrong): the links
/// corrupt only datagrams the protocol protects. (A real path's UDP checksum stands guard.)
fn contextless(d: &[u8]) -> bool {
    matches!(d, [] | [0, 0x01 | 0x02 | 0x1D | 0x1E, ..])
}

/// With chance `p`, flips one bit of `d` past its first `skip` bytes, unless what follows them
/// is contextless; returns whether it did.
fn maybe_flip_bit(rng: &mut SplitMix64, p: f64, d: &mut [u8], skip: usize) -> bool {
    if !(chance(rng, p) && d.len() > skip && !contextless(&d[skip..])) {
        return false;
    }
    let bit = skip as u64 * 8 + below(rng, (d.len() - skip) as u64 * 8);
    d[(bit / 8) as usize] ^= 1 << (bit % 8);
    true
}

/// A stranger's address, drawn.
fn stranger(rng: &mut SplitMix64) -> u32 {
    STRANGERS + below(rng, 100_000) as u32
}

/// The client an address belongs to (whatever its port), if any.
pub(crate) fn client_of(addr: u32) -> Option<usize> {
    if addr >= STRANGERS || addr == SERVER {
        return None;
    }
    Some(((addr >> 12) as usize).wrapping_sub(1))
}

/// Splits a datagram towards the server into its source address and its bytes.
pub(crate) fn source(d: &[u8]) -> Option<(u32, &[u8])> {
    let (addr, body) = d.split_first_chunk::<4>()?;
    Some((u32::from_be_bytes(*addr), body))
}

/// One client's path to the server and back.
#[derive(Debug)]
pub(crate) struct Path {
    /// The NAT's current port for the client.
    port: u32,
    pub(crate) up: Link,
    pub(crate) down: Link,
    /// Probability a protected datagram gets a bit flipped.
    corrupt: f64,
    dark_up_until: Option<Instant>,
    dark_down_until: Option<Instant>,
    /// NAT rebindings so far.
    pub(crate) rebinds: u32,
}

impl Path {
    /// Draws a path: at most 30 % random loss, or 10 % in bursts, with reordering,
    /// duplication, a bottleneck and corruption drawn too.
    pub(crate) fn draw(r: &mut SplitMix64) -> Self {
        let delay = between(r, Duration::from_millis(2), Duration::from_millis(150));
        // Bursts are stretches of time (20 ms on average), not of datagrams: per datagram, a
        // burst on an idle session's heartbeats would be an outage of minutes.
        let (loss, burst) = match below(r, 4) {
            0 => ([0.0, 0.01, 0.05, 0.1][below(r, 4) as usize], None),
            1 => ([0.2, 0.3][below(r, 2) as usize], None),
            2 => (0.01, Some(GilbertElliott::TEN_PERCENT_TIMED)),
            _ => (0.0, Some(GilbertElliott::TEN_PERCENT_TIMED)),
        };
        let link = LinkConfig {
            delay,
            loss,
            burst,
            reorder: [0.0, 0.05, 0.2][below(r, 3) as usize],
            reorder_delay: between(r, Duration::from_millis(1), Duration::from_millis(40)),
            duplicate: [0.0, 0.02, 0.1][below(r, 3) as usize],
            rate: [0, 1_000_000, 250_000][below(r, 3) as usize],
            queue: 64,
            overhead: 28,
        };
        let corrupt = [0.0, 0.0, 0.01, 0.05][below(r, 4) as usize];
        let mut path = Self::with_link(link, r.next_u64());
        path.corrupt = corrupt;
        path
    }

    /// A path with `link` each way (seeded from `seed`) and no corruption.
    pub(crate) fn with_link(link: LinkConfig, seed: u64) -> Self {
        Self::with_links(link, seed, seed ^ 0xD0D0)
    }

    /// A path with `link` each way, each direction seeded on its own.
    pub(crate) fn with_links(link: LinkConfig, up_seed: u64, down_seed: u64) -> Self {
        let mut up = Link::new(link, up_seed);
        let mut down = Link::new(link, down_seed);
        up.set_impaired(true);
        down.set_impaired(true);
        Self {
            port: 1,
            up,
            down,
            corrupt: 0.0,
            dark_up_until: None,
            dark_down_until: None,
            rebinds: 0,
        }
    }

    /// Client `index`'s address as the server sees it now.
    pub(crate) fn addr(&self, index: usize) -> u32 {
        ((index as u32 + 1) << 12) | (self.port & 0xFFF)
    }

    /// The next arrival either way.
    pub(crate) fn next_arrivals(&self) -> [Option<Instant>; 2] {
        [self.up.next_arrival(), self.down.next_arrival()]
    }

    fn dark_down(&self, now: Instant) -> bool {
        self.dark_down_until.is_some_and(|u| now < u)
    }
}

/// Every path, and the strangers.
#[derive(Debug)]
pub(crate) struct Network {
    pub(crate) paths: Vec<Path>,
    strangers: Link,
    /// Client datagrams captured for replays: (sender, datagram with its source address).
    capture: Vec<(usize, Vec<u8>)>,
    start: Instant,
    /// The client whose datagrams are traced to stderr.
    trace: Option<usize>,
}

impl Network {
    /// A network with no paths yet.
    pub(crate) fn new(seed: u64, start: Instant, trace: Option<usize>) -> Self {
        Self {
            paths: Vec::new(),
            strangers: Link::new(
                LinkConfig {
                    delay: Duration::from_millis(5),
                    rate: 0,
                    ..LinkConfig::default()
                },
                seed ^ 0x57,
            ),
            capture: Vec::new(),
            start,
            trace,
        }
    }

    /// When the strangers' next datagram arrives.
    pub(crate) fn next_stranger_arrival(&self) -> Option<Instant> {
        self.strangers.next_arrival()
    }

    /// A stranger's datagram due now (with its source address), if any.
    pub(crate) fn pop_stranger(&mut self, now: Instant) -> Option<Vec<u8>> {
        self.strangers.pop_due(now)
    }

    fn traced(&self, i: usize) -> bool {
        self.trace == Some(i)
    }

    fn since(&self, now: Instant) -> f64 {
        (now - self.start).as_secs_f64()
    }

    /// With `--trace` on client `i`: the datagram `d` taken off its path going `dir`, its
    /// length and its first `head` bytes.
    fn trace_datagram(&self, now: Instant, i: usize, dir: &str, d: &[u8], head: usize) {
        if self.traced(i) {
            eprintln!(
                "{:>10.3} {dir} {:>4} {:02x?}",
                self.since(now),
                d.len(),
                &d[..d.len().min(head)]
            );
        }
    }

    /// A datagram due now for client `i` from the server, perhaps corrupted (then `true`).
    pub(crate) fn pop_down(
        &mut self,
        now: Instant,
        i: usize,
        rng: &mut SplitMix64,
    ) -> Option<(Vec<u8>, bool)> {
        let p = &mut self.paths[i];
        let mut d = p.down.pop_due(now)?;
        let corrupted = maybe_flip_bit(rng, p.corrupt, &mut d, 0);
        self.trace_datagram(now, i, "down", &d, 10);
        Some((d, corrupted))
    }

    /// A datagram due now at the server from client `i` (with its source address), perhaps
    /// corrupted (then `true`; the address is left alone).
    pub(crate) fn pop_up(
        &mut self,
        now: Instant,
        i: usize,
        rng: &mut SplitMix64,
    ) -> Option<(Vec<u8>, bool)> {
        let p = &mut self.paths[i];
        let mut d = p.up.pop_due(now)?;
        // The first 4 bytes are the source address, which the network does not corrupt.
        let corrupted = maybe_flip_bit(rng, p.corrupt, &mut d, 4);
        self.trace_datagram(now, i, "up  ", &d, 14);
        Some((d, corrupted))
    }

    /// The server sends `d` to `dst`, a client's address: it goes down that client's path
    /// unless the NAT forgot that port or the path is dark. Returns the client it went to.
    pub(crate) fn send_down(&mut self, now: Instant, dst: u32, d: &[u8]) -> Option<usize> {
        let i = client_of(dst)?;
        let p = self.paths.get_mut(i)?;
        // A NAT forgets an old port: datagrams to it are dropped.
        if p.addr(i) != dst || p.dark_down(now) {
            if self.trace == Some(i) {
                let p = &self.paths[i];
                eprintln!(
                    "{:>10.3} down dropped (to an old port: {}; dark: {})",
                    self.since(now),
                    p.addr(i) != dst,
                    p.dark_down(now)
                );
            }
            return None;
        }
        p.down.send(now, d.to_vec());
        Some(i)
    }

    /// Client `i` sends `d` to the server: up its path from its current address (unless the
    /// path is dark), captured for replays now and then.
    pub(crate) fn send_up(&mut self, now: Instant, i: usize, d: &[u8], rng: &mut SplitMix64) {
        let p = &mut self.paths[i];
        if p.dark_up_until.is_some_and(|u| now < u) {
            return;
        }
        let mut datagram = Vec::with_capacity(d.len() + 4);
        datagram.extend_from_slice(&p.addr(i).to_be_bytes());
        datagram.extend_from_slice(d);
        if self.capture.len() < CAPTURE {
            self.capture.push((i, datagram.clone()));
        } else if below(rng, 8) == 0 {
            let slot = below(rng, CAPTURE as u64) as usize;
            self.capture[slot] = (i, datagram.clone());
        }
        p.up.send(now, datagram);
    }

    /// Client `i`'s NAT gives it a new port.
    pub(crate) fn rebind(&mut self, now: Instant, i: usize) {
        if self.traced(i) {
            eprintln!("{:>10.3} REBIND", self.since(now));
        }
        let p = &mut self.paths[i];
        p.port += 1;
        p.rebinds += 1;
    }

    /// Client `i`'s path goes dark (up, down or both) until `until`.
    pub(crate) fn go_dark(&mut self, i: usize, up: bool, down: bool, until: Instant) {
        let p = &mut self.paths[i];
        if up {
            p.dark_up_until = Some(until);
        }
        if down {
            p.dark_down_until = Some(until);
        }
    }

    /// One wave of a flood: 40 SessionRequests from strangers, then 20 garbage datagrams
    /// (some spoofed from clients' addresses). Returns (requests, garbage) sent.
    pub(crate) fn flood(&mut self, now: Instant, rng: &mut SplitMix64) -> (u64, u64) {
        for _ in 0..40 {
            let mut d = stranger(rng).to_be_bytes().to_vec();
            Packet::SessionRequest(SessionRequest {
                protocol_version: PROTOCOL_VERSION,
                session_id: rng.next_u32(),
                udp_length: 512,
                application_protocol: PROTOCOL.as_bytes(),
            })
            .encode(&mut d);
            self.strangers.send(now, d);
        }
        for _ in 0..20 {
            let n = self.paths.len();
            let from = if chance(rng, 0.3) {
                let i = below(rng, n as u64) as usize;
                self.paths[i].addr(i)
            } else {
                stranger(rng)
            };
            let len = 1 + below(rng, 80) as usize;
            let mut d = from.to_be_bytes().to_vec();
            for k in 0..len {
                let b = rng.next_u32() as u8;
                // Half of it looks like protocol packets.
                d.push(if k == 0 && chance(rng, 0.5) { 0 } else { b });
            }
            self.strangers.send(now, d);
        }
        (40, 20)
    }

    /// One wave of replays: up to 10 captured datagrams sent again, from strangers or spoofed
    /// from other clients. Returns how many.
    pub(crate) fn replay(&mut self, now: Instant, rng: &mut SplitMix64) -> u64 {
        let mut sent = 0;
        for _ in 0..10 {
            if self.capture.is_empty() {
                break;
            }
            let k = below(rng, self.capture.len() as u64) as usize;
            let (owner, d) = &self.capture[k];
            let owner = *owner;
            let mut d = d.clone();
            let n = self.paths.len();
            let i = below(rng, n as u64) as usize;
            // From a stranger, or spoofed from another client. Contextless packets carry no
            // CRC: a SessionRequest from a client's address legitimately replaces its session,
            // and a RemapConnection legitimately moves a session to the sender (SOE v3
            // authenticates it by session id and CRC seed only, which an eavesdropper has).
            // Those come from strangers only: the session they move there times out, and its
            // client remaps it back.
            let from = if i != owner && !contextless(&d[4..]) {
                self.paths[i].addr(i)
            } else {
                stranger(rng)
            };
            d[..4].copy_from_slice(&from.to_be_bytes());
            self.strangers.send(now, d);
            sent += 1;
        }
        sent
    }
}
