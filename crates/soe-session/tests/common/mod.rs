//! A virtual-time pair of endpoints joined by a seeded network emulator.
//!
//! The clock jumps straight to the next deadline (an endpoint timer or a datagram arrival), so a
//! 30-second timeout costs a handful of steps. Every random choice comes from one seed, printed
//! when the pair is made (cargo shows it for a failing test); set `SOE_TEST_SEED` to replay one.
#![allow(dead_code, unreachable_pub)]

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use soe_session::{
    Endpoint, EndpointConfig, Event, RandomSource, SessionConfig, SessionHandle, SplitMix64,
};

/// Address of the server endpoint.
pub const SERVER: u32 = 1;
/// Address of the client endpoint.
pub const CLIENT: u32 = 2;

/// What the emulated network does to each datagram.
#[derive(Debug, Clone, Copy)]
pub struct NetConfig {
    /// Probability a datagram is lost.
    pub loss: f64,
    /// Probability a datagram is delivered twice.
    pub duplicate: f64,
    /// Probability a datagram is held back by `reorder_delay` (so later ones overtake it).
    pub reorder: f64,
    /// Extra delay of a reordered datagram.
    pub reorder_delay: Duration,
    /// Probability one bit of a datagram is flipped.
    pub corrupt: f64,
    /// One-way delay.
    pub delay: Duration,
    /// Uniform extra delay, 0 to this.
    pub jitter: Duration,
}

impl Default for NetConfig {
    fn default() -> Self {
        Self {
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::from_millis(30),
            corrupt: 0.0,
            delay: Duration::from_millis(20),
            jitter: Duration::ZERO,
        }
    }
}

impl NetConfig {
    /// Everything bad at once, moderately.
    pub fn hostile(loss: f64) -> Self {
        Self {
            loss,
            duplicate: 0.05,
            reorder: 0.1,
            reorder_delay: Duration::from_millis(30),
            corrupt: 0.02,
            delay: Duration::from_millis(20),
            jitter: Duration::from_millis(10),
        }
    }
}

/// A datagram in flight.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct InFlight {
    at: Instant,
    order: u64,
    from: u32,
    to: u32,
    data: Vec<u8>,
}

/// Counters of the emulator.
#[derive(Debug, Default, Clone, Copy)]
pub struct NetStats {
    pub sent: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub corrupted: u64,
    pub delivered: u64,
}

/// See [`Pair::drop_to_server`].
pub type DropFilter = Box<dyn FnMut(&[u8]) -> bool>;

/// See [`Pair::server_hook`].
pub type ServerHook = Box<dyn FnMut(Instant, &mut Endpoint<u32>, u32, &[u8])>;

/// Two endpoints, a clock and a network.
pub struct Pair {
    pub seed: u64,
    pub now: Instant,
    pub start: Instant,
    pub server: Endpoint<u32>,
    pub client: Endpoint<u32>,
    /// Network from client to server.
    pub up: NetConfig,
    /// Network from server to client.
    pub down: NetConfig,
    /// When false, nothing crosses the network (a silent peer).
    pub server_alive: bool,
    pub client_alive: bool,
    pub server_events: Vec<(SessionHandle, Event)>,
    pub client_events: Vec<(SessionHandle, Event)>,
    /// Every datagram that reached the server, before any processing (for inspection).
    pub to_server_log: Vec<Vec<u8>>,
    /// Every datagram the server sent.
    pub from_server_log: Vec<Vec<u8>>,
    pub log_datagrams: bool,
    /// The client's address as the server sees it (a NAT may change it mid-session).
    pub client_public: u32,
    /// When true, the client hears only datagrams sent to `client_public` (a NAT forgets the
    /// old port; replies to other addresses, spoofed ones say, go nowhere). When false (the
    /// default), it hears everything the server sends.
    pub nat: bool,
    pub net: NetStats,
    /// Called after each datagram the server handles, before anything is sent: `(now, server,
    /// source, datagram)`. Lets a test put a datagram in the same turn as one of the peer's.
    pub server_hook: Option<ServerHook>,
    /// Datagrams from the client for which this returns true are lost on the way up (a test
    /// loses one kind of packet on purpose).
    pub drop_to_server: Option<DropFilter>,
    /// Every datagram the client sent, when `log_datagrams` (lost ones too).
    pub from_client_log: Vec<Vec<u8>>,
    rng: SplitMix64,
    flight: BinaryHeap<Reverse<InFlight>>,
    order: u64,
    buf: Vec<u8>,
}

/// The seed for a test: `SOE_TEST_SEED` if set, else `default`. Printed either way.
pub fn seed(default: u64) -> u64 {
    let seed = std::env::var("SOE_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    println!("seed = {seed} (replay with SOE_TEST_SEED={seed})");
    seed
}

/// A SessionRequest for the tests' application protocol with `session_id`: as a client, a
/// restarted client, or a spoofer sends it.
pub fn session_request(session_id: u32) -> Vec<u8> {
    let mut wire = Vec::new();
    soe_wire::Packet::SessionRequest(soe_wire::SessionRequest {
        protocol_version: 3,
        session_id,
        udp_length: 512,
        application_protocol: b"TestProto_1",
    })
    .encode(&mut wire);
    wire
}

/// A server config with the application protocol the tests use.
pub fn server_config() -> SessionConfig {
    SessionConfig::new("TestProto_1")
}

/// A client config with the application protocol the tests use.
pub fn client_config() -> SessionConfig {
    SessionConfig::new("TestProto_1")
}

impl Pair {
    /// A pair with default endpoint limits.
    pub fn new(seed: u64, server: SessionConfig, client: SessionConfig, net: NetConfig) -> Self {
        let server_ep = EndpointConfig::server(Arc::new(server))
            .with_rng_seed(seed ^ 0x5E5E)
            .with_secret(u128::from(seed ^ 0x5EC2))
            .with_max_sessions(64);
        let client_ep = EndpointConfig::client(Arc::new(client)).with_rng_seed(seed ^ 0xC1C1);
        Self::with_endpoints(seed, server_ep, client_ep, net)
    }

    /// A pair with the given endpoint configs.
    pub fn with_endpoints(
        seed: u64,
        server: EndpointConfig,
        client: EndpointConfig,
        net: NetConfig,
    ) -> Self {
        let now = Instant::now();
        Self {
            seed,
            now,
            start: now,
            server: Endpoint::new(Arc::new(server)),
            client: Endpoint::new(Arc::new(client)),
            up: net,
            down: net,
            server_alive: true,
            client_alive: true,
            server_events: Vec::new(),
            client_events: Vec::new(),
            to_server_log: Vec::new(),
            from_server_log: Vec::new(),
            log_datagrams: false,
            client_public: CLIENT,
            nat: false,
            net: NetStats::default(),
            server_hook: None,
            drop_to_server: None,
            from_client_log: Vec::new(),
            rng: SplitMix64::new(seed),
            flight: BinaryHeap::new(),
            order: 0,
            buf: Vec::new(),
        }
    }

    /// Virtual time since the pair was made.
    pub fn elapsed(&self) -> Duration {
        self.now - self.start
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.rng.next_u64() % n }
    }

    /// Puts one datagram on the wire from `from` to `to`, through the emulator.
    pub fn transmit(&mut self, from: u32, to: u32, data: Vec<u8>) {
        self.net.sent += 1;
        let alive = if from == SERVER {
            self.server_alive
        } else {
            self.client_alive
        };
        if !alive {
            self.net.lost += 1;
            return;
        }
        let net = if to == SERVER { self.up } else { self.down };
        if self.chance(net.loss) {
            self.net.lost += 1;
            return;
        }
        let copies = if self.chance(net.duplicate) {
            self.net.duplicated += 1;
            2
        } else {
            1
        };
        for _ in 0..copies {
            let mut data = data.clone();
            if self.chance(net.corrupt) && !data.is_empty() {
                let byte = self.below(data.len() as u64) as usize;
                let bit = self.below(8);
                data[byte] ^= 1 << bit;
                self.net.corrupted += 1;
            }
            let mut at = self.now + net.delay;
            let jitter = net.jitter.as_micros() as u64;
            at += Duration::from_micros(self.below(jitter + 1));
            if self.chance(net.reorder) {
                at += net.reorder_delay;
            }
            self.order += 1;
            self.flight.push(Reverse(InFlight {
                at,
                order: self.order,
                from,
                to,
                data,
            }));
        }
    }

    /// Drains both endpoints' transmits and events.
    pub fn flush(&mut self) {
        loop {
            let mut any = false;
            while let Some(t) = self.server.poll_transmit(self.now, &mut self.buf) {
                let data = self.buf[..t.len].to_vec();
                if self.log_datagrams {
                    self.from_server_log.push(data.clone());
                }
                self.transmit(SERVER, t.destination, data);
                any = true;
            }
            while let Some(t) = self.client.poll_transmit(self.now, &mut self.buf) {
                let data = self.buf[..t.len].to_vec();
                if self.log_datagrams {
                    self.from_client_log.push(data.clone());
                }
                if self.drop_to_server.as_mut().is_some_and(|f| f(&data)) {
                    self.net.sent += 1;
                    self.net.lost += 1;
                    any = true;
                    continue;
                }
                self.transmit(self.client_public, t.destination, data);
                any = true;
            }
            while let Some(e) = self.server.poll_event() {
                self.server_events.push(e);
                any = true;
            }
            while let Some(e) = self.client.poll_event() {
                self.client_events.push(e);
                any = true;
            }
            if !any {
                break;
            }
        }
    }

    /// The next moment something happens, if anything will.
    pub fn next_deadline(&self) -> Option<Instant> {
        [
            self.server.poll_timeout(),
            self.client.poll_timeout(),
            self.flight.peek().map(|Reverse(f)| f.at),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Flushes, jumps to the next deadline (not past `limit`), and handles what is due.
    /// Returns false when nothing is left to happen before `limit`.
    pub fn step(&mut self, limit: Instant) -> bool {
        self.flush();
        let Some(next) = self.next_deadline() else {
            return false;
        };
        if next > limit {
            self.now = limit;
            return false;
        }
        self.now = self.now.max(next);
        while let Some(Reverse(f)) = self.flight.peek() {
            if f.at > self.now {
                break;
            }
            let Some(Reverse(f)) = self.flight.pop() else {
                break;
            };
            self.net.delivered += 1;
            if f.to == SERVER {
                if self.log_datagrams {
                    self.to_server_log.push(f.data.clone());
                }
                self.server.handle_datagram(self.now, f.from, &f.data);
                if let Some(hook) = &mut self.server_hook {
                    hook(self.now, &mut self.server, f.from, &f.data);
                }
            } else if !self.nat || f.to == self.client_public {
                self.client.handle_datagram(self.now, f.from, &f.data);
            }
        }
        if self.server.poll_timeout().is_some_and(|t| t <= self.now) {
            self.server.handle_timeout(self.now);
        }
        if self.client.poll_timeout().is_some_and(|t| t <= self.now) {
            self.client.handle_timeout(self.now);
        }
        self.flush();
        true
    }

    /// Steps until `done` holds (true) or `max` of virtual time passes (false).
    pub fn run_until(&mut self, max: Duration, mut done: impl FnMut(&mut Self) -> bool) -> bool {
        let limit = self.now + max;
        loop {
            if done(self) {
                return true;
            }
            if !self.step(limit) && (self.now >= limit || self.next_deadline().is_none()) {
                return done(self);
            }
        }
    }

    /// Steps for `d` of virtual time.
    pub fn run_for(&mut self, d: Duration) {
        let limit = self.now + d;
        while self.step(limit) {}
        self.now = self.now.max(limit);
        self.flush();
    }

    /// Connects the client to the server and runs until both sides report the session.
    /// Returns (client handle, server handle).
    pub fn connect(&mut self) -> (SessionHandle, SessionHandle) {
        let h = self.client.connect(self.now, SERVER).expect("connect");
        let ok = self.run_until(Duration::from_secs(60), |p| {
            p.client_events
                .iter()
                .any(|(ch, e)| *ch == h && *e == Event::Connected)
                && p.server_events.iter().any(|(_, e)| *e == Event::Accepted)
        });
        assert!(ok, "handshake did not complete (seed {})", self.seed);
        let sh = self
            .server_events
            .iter()
            .find(|(_, e)| *e == Event::Accepted)
            .map(|(h, _)| *h)
            .expect("accepted");
        (h, sh)
    }

    /// The Closed event of `h` among `events`, if any.
    pub fn closed(events: &[(SessionHandle, Event)], h: SessionHandle) -> Option<Event> {
        events
            .iter()
            .find(|(eh, e)| *eh == h && matches!(e, Event::Closed { .. }))
            .map(|(_, e)| e.clone())
    }

    /// Takes the messages delivered to `h` so far.
    pub fn take_messages(
        events: &mut Vec<(SessionHandle, Event)>,
        h: SessionHandle,
    ) -> Vec<(soe_session::Channel, bytes::Bytes, soe_session::Delivery)> {
        let mut out = Vec::new();
        events.retain(|(eh, e)| match e {
            Event::Message {
                channel,
                data,
                kind,
            } if *eh == h => {
                out.push((*channel, data.clone(), *kind));
                false
            }
            _ => true,
        });
        out
    }
}
