//! The stacks under test, behind one small trait so that one driver runs them all.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use soe_reliable::ReliableConfig;

use crate::h1z1::H1z1Server;
use soe_session::{
    Channel, Endpoint, EndpointConfig, Event, SendError, SessionConfig, SessionHandle,
};

/// The application protocol name both sides use.
pub const APP_PROTOCOL: &str = "NetemProto_1";
/// The datagram size both sides announce.
pub const UDP_LENGTH: u32 = 512;

const SERVER_ADDR: u32 = 1;
const CLIENT_ADDR: u32 = 2;

/// One end of the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The side that connects.
    Client,
    /// The side that accepts.
    Server,
}

impl Side {
    /// The other side.
    pub fn peer(self) -> Self {
        match self {
            Self::Client => Self::Server,
            Self::Server => Self::Client,
        }
    }
}

/// Reliable-packet counters of both sides together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StackCounters {
    /// Reliable data packets sent for the first time.
    pub packets_sent: u64,
    /// Reliable data packets sent again.
    pub packets_resent: u64,
    /// Reliable data packets that arrived again after the first copy: resends of packets the
    /// peer already held (or copies the link duplicated). Zero for soe-protocol, whose sessions
    /// do not count them.
    pub duplicates_received: u64,
}

/// A client and a server session of one implementation, driven by the harness.
///
/// The driver calls, at each virtual instant: [`handle_datagram`](Self::handle_datagram) for
/// each arrival, [`handle_timeout`](Self::handle_timeout) when [`poll_timeout`](Self::poll_timeout)
/// is due, then takes deliveries ([`poll_delivered`](Self::poll_delivered)), lets the workload
/// [`send`](Self::send), and drains [`poll_transmit`](Self::poll_transmit).
pub trait Stack {
    /// Starts the handshake (the client's first request).
    fn start(&mut self, now: Instant);
    /// Whether both sides can exchange data.
    fn is_established(&self) -> bool;
    /// A datagram arrives at `to`.
    fn handle_datagram(&mut self, now: Instant, to: Side, datagram: &[u8]);
    /// The next instant the stack wants [`handle_timeout`](Self::handle_timeout).
    fn poll_timeout(&self) -> Option<Instant>;
    /// Runs what is due by `now` (an early call is harmless).
    fn handle_timeout(&mut self, now: Instant);
    /// Appends every datagram either side wants to send, with the side sending it.
    fn poll_transmit(&mut self, now: Instant, out: &mut Vec<(Side, Vec<u8>)>);
    /// Queues a reliable message from `from`. False when the stack refuses it for now
    /// (backpressure, or a closed session); the caller tries again later.
    fn send(&mut self, from: Side, message: Bytes) -> bool;
    /// Appends the messages delivered to the application at `at`, in delivery order.
    fn poll_delivered(&mut self, at: Side, out: &mut Vec<Bytes>);
    /// Why a session ended, if one did.
    fn death(&self) -> Option<String>;
    /// Reliable-packet counters, both sides summed.
    fn counters(&self) -> StackCounters;
}

/// Which implementation runs on each side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StackKind {
    /// Our `soe_session::Endpoint` on both sides, same default config.
    Ours,
    /// Our client against our server configured like h1z1-server's acking: cumulative acks
    /// every 24 ms, `ack_every` 1000, and no re-ack of duplicates.
    OursVsSlowAcker,
    /// soe-protocol 2.3.0's `SoeSession` on both sides, ticked every millisecond.
    SoeProtocol,
    /// Our client against a model of h1z1-server's reliable layer ([`crate::h1z1`]): acks
    /// from a 24 ms loop, never a re-ack of a duplicate, CRC-less OutOfOrder, and delivery that
    /// stops behind a packet yielding no message.
    OursVsH1z1,
    /// Our `Endpoint` on both sides with the Free Realms preset's cap of 64 KiB in flight per
    /// reliable channel (`ReliableConfig::max_outstanding_bytes`); otherwise as [`Self::Ours`].
    OursCap64k,
}

impl StackKind {
    /// All stacks, in report order.
    pub const ALL: [Self; 5] = [
        Self::Ours,
        Self::OursCap64k,
        Self::OursVsSlowAcker,
        Self::OursVsH1z1,
        Self::SoeProtocol,
    ];

    /// A short name for tables and filters.
    pub fn name(self) -> &'static str {
        match self {
            Self::Ours => "ours",
            Self::OursVsSlowAcker => "ours-vs-slow-acker",
            Self::SoeProtocol => "soe-protocol",
            Self::OursVsH1z1 => "ours-vs-h1z1",
            Self::OursCap64k => "ours-64k",
        }
    }

    /// How long the receiving peer may sit on an in-order packet before acknowledging it.
    pub fn peer_ack_delay(self) -> Duration {
        match self {
            Self::OursVsSlowAcker | Self::OursVsH1z1 => SLOW_ACK_DELAY,
            Self::Ours | Self::OursCap64k | Self::SoeProtocol => Duration::from_millis(2),
        }
    }

    /// Builds the pair, seeded.
    pub fn build(self, now: Instant, seed: u64) -> Box<dyn Stack> {
        match self {
            Self::Ours => Box::new(OursPair::new(seed, ours_config(), ours_config())),
            Self::OursVsSlowAcker => {
                Box::new(OursPair::new(seed, slow_acker_config(), ours_config()))
            }
            Self::SoeProtocol => {
                Box::new(SoeProtocolPair::new(now, seed, Duration::from_millis(1)))
            }
            Self::OursVsH1z1 => Box::new(OursPair::against_h1z1(seed, ours_config())),
            Self::OursCap64k => Box::new(OursPair::new(seed, cap_64k_config(), cap_64k_config())),
        }
    }
}

/// The slow acker's cumulative-ack delay (h1z1-server acks about every 24 ms).
pub const SLOW_ACK_DELAY: Duration = Duration::from_millis(24);

/// The session config of our stack in every run (defaults, the harness's protocol name).
pub fn ours_config() -> SessionConfig {
    SessionConfig::new(APP_PROTOCOL).with_udp_length(UDP_LENGTH)
}

/// Our session config with at most 64 KiB in flight per reliable channel (the Free Realms
/// preset's cap).
pub fn cap_64k_config() -> SessionConfig {
    let reliable = ReliableConfig::default().with_max_outstanding_bytes(64 * 1024);
    match ours_config().with_reliable(Arc::new(reliable)) {
        Ok(c) => c,
        Err(e) => panic!("64 KiB reliable config rejected: {e}"),
    }
}

/// Our server config imitating h1z1-server's acknowledgements.
pub fn slow_acker_config() -> SessionConfig {
    let reliable = ReliableConfig::default()
        .with_ack_delay(SLOW_ACK_DELAY)
        .with_ack_every(1000)
        .with_reack_duplicates(false);
    match ours_config().with_reliable(Arc::new(reliable)) {
        Ok(c) => c,
        Err(e) => panic!("slow-acker reliable config rejected: {e}"),
    }
}

/// The server side of an [`OursPair`].
enum ServerSide {
    Ours(Box<Endpoint<u32>>),
    H1z1(Box<H1z1Server>),
}

/// Our client endpoint against our server endpoint or a model of h1z1-server.
pub struct OursPair {
    client: Endpoint<u32>,
    server: ServerSide,
    client_handle: Option<SessionHandle>,
    server_handle: Option<SessionHandle>,
    connected: bool,
    accepted: bool,
    delivered: [VecDeque<Bytes>; 2],
    death: Option<String>,
    buf: Vec<u8>,
}

impl OursPair {
    /// A client endpoint with `client` and a server endpoint with `server`.
    pub fn new(seed: u64, server: SessionConfig, client: SessionConfig) -> Self {
        let server_ep = EndpointConfig::server(Arc::new(server))
            .with_rng_seed(seed ^ 0x5E5E)
            .with_secret(u128::from(seed ^ 0x5EC2));
        let client_ep = EndpointConfig::client(Arc::new(client)).with_rng_seed(seed ^ 0xC1C1);
        Self {
            client: Endpoint::new(Arc::new(client_ep)),
            server: ServerSide::Ours(Box::new(Endpoint::new(Arc::new(server_ep)))),
            client_handle: None,
            server_handle: None,
            connected: false,
            accepted: false,
            delivered: [VecDeque::new(), VecDeque::new()],
            death: None,
            buf: Vec::new(),
        }
    }

    /// Our client endpoint with `client` against the h1z1-server model.
    pub fn against_h1z1(seed: u64, client: SessionConfig) -> Self {
        let mut pair = Self::new(seed, ours_config(), client);
        pair.server = ServerSide::H1z1(Box::new(H1z1Server::new((seed as u32) ^ 0x0048_315A)));
        pair
    }

    fn pump_events(&mut self) {
        while let Some((h, e)) = self.client.poll_event() {
            self.on_event(Side::Client, h, e);
        }
        match &mut self.server {
            ServerSide::Ours(_) => {
                while let Some((h, e)) = match &mut self.server {
                    ServerSide::Ours(server) => server.poll_event(),
                    ServerSide::H1z1(_) => None,
                } {
                    self.on_event(Side::Server, h, e);
                }
            }
            ServerSide::H1z1(model) => {
                if model.is_open() && !self.accepted {
                    self.accepted = true;
                }
                if model.is_closed() {
                    self.death
                        .get_or_insert_with(|| "Server closed: Disconnect from the client".into());
                }
                let mut got = Vec::new();
                model.poll_delivered(&mut got);
                self.delivered[Side::Server as usize].extend(got);
            }
        }
    }

    fn on_event(&mut self, side: Side, h: SessionHandle, e: Event) {
        match e {
            Event::Connected => self.connected = true,
            Event::Accepted => {
                self.accepted = true;
                self.server_handle = Some(h);
            }
            Event::Message { data, .. } => self.delivered[side as usize].push_back(data),
            Event::Closed { reason, by_peer } => {
                self.death.get_or_insert_with(|| {
                    format!("{side:?} closed: {reason:?} (by peer: {by_peer})")
                });
            }
            _ => {}
        }
    }
}

impl Stack for OursPair {
    fn start(&mut self, now: Instant) {
        match self.client.connect(now, SERVER_ADDR) {
            Ok(h) => self.client_handle = Some(h),
            Err(e) => self.death = Some(format!("connect refused: {e}")),
        }
    }

    fn is_established(&self) -> bool {
        self.connected && self.accepted
    }

    fn handle_datagram(&mut self, now: Instant, to: Side, datagram: &[u8]) {
        match to {
            Side::Client => self.client.handle_datagram(now, SERVER_ADDR, datagram),
            Side::Server => match &mut self.server {
                ServerSide::Ours(server) => server.handle_datagram(now, CLIENT_ADDR, datagram),
                ServerSide::H1z1(model) => model.handle_datagram(now, datagram),
            },
        }
        self.pump_events();
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let server = match &self.server {
            ServerSide::Ours(server) => server.poll_timeout(),
            ServerSide::H1z1(model) => model.poll_timeout(),
        };
        [self.client.poll_timeout(), server]
            .into_iter()
            .flatten()
            .min()
    }

    fn handle_timeout(&mut self, now: Instant) {
        if self.client.poll_timeout().is_some_and(|t| t <= now) {
            self.client.handle_timeout(now);
        }
        match &mut self.server {
            ServerSide::Ours(server) => {
                if server.poll_timeout().is_some_and(|t| t <= now) {
                    server.handle_timeout(now);
                }
            }
            ServerSide::H1z1(model) => model.handle_timeout(now),
        }
        self.pump_events();
    }

    fn poll_transmit(&mut self, now: Instant, out: &mut Vec<(Side, Vec<u8>)>) {
        while let Some(t) = self.client.poll_transmit(now, &mut self.buf) {
            out.push((Side::Client, self.buf[..t.len].to_vec()));
        }
        match &mut self.server {
            ServerSide::Ours(server) => {
                while let Some(t) = server.poll_transmit(now, &mut self.buf) {
                    out.push((Side::Server, self.buf[..t.len].to_vec()));
                }
            }
            ServerSide::H1z1(model) => {
                let mut sent = Vec::new();
                model.poll_transmit(now, &mut sent);
                out.extend(sent.into_iter().map(|d| (Side::Server, d)));
            }
        }
        self.pump_events();
    }

    fn send(&mut self, from: Side, message: Bytes) -> bool {
        let (ep, h) = match (from, &mut self.server) {
            (Side::Client, _) => (&mut self.client, self.client_handle),
            (Side::Server, ServerSide::Ours(server)) => (&mut **server, self.server_handle),
            (Side::Server, ServerSide::H1z1(model)) => return model.send(&message),
        };
        let Some(h) = h else { return false };
        match ep.send(h, Channel::ZERO, message) {
            Ok(()) => true,
            Err(SendError::QueueFull(_)) => false,
            Err(_) => false,
        }
    }

    fn poll_delivered(&mut self, at: Side, out: &mut Vec<Bytes>) {
        self.pump_events();
        out.extend(self.delivered[at as usize].drain(..));
    }

    fn death(&self) -> Option<String> {
        self.death.clone()
    }

    fn counters(&self) -> StackCounters {
        let mut c = StackCounters::default();
        let server = match &self.server {
            ServerSide::Ours(server) => self.server_handle.and_then(|h| server.stats(h)),
            ServerSide::H1z1(model) => {
                let (sent, resent, duplicates) = model.counters;
                c.packets_sent += sent;
                c.packets_resent += resent;
                c.duplicates_received += duplicates;
                None
            }
        };
        for s in [
            self.client_handle.and_then(|h| self.client.stats(h)),
            server,
        ]
        .into_iter()
        .flatten()
        {
            c.packets_sent += s.reliable_packets_sent;
            c.packets_resent += s.resends;
            c.duplicates_received += s.duplicates;
        }
        c
    }
}

/// soe-protocol 2.3.0 on both sides, with its reliable sequences counted on the wire (its
/// sessions do not expose their channel statistics).
pub struct SoeProtocolPair {
    client: soe_protocol::SoeSession,
    server: soe_protocol::SoeSession,
    tick: Duration,
    next_tick: Instant,
    wire: [WireCounter; 2],
    delivered: [VecDeque<Bytes>; 2],
    death: Option<String>,
}

impl SoeProtocolPair {
    /// Two sessions (client and server) with the harness's protocol name and udp_length, no
    /// compression, no encryption, ticked every `tick` (and after every datagram, as its own
    /// adapters do).
    pub fn new(now: Instant, seed: u64, tick: Duration) -> Self {
        use soe_protocol::{ApplicationParameters, SessionMode, SessionParameters, SoeSession};
        let params = SessionParameters {
            application_protocol: APP_PROTOCOL.to_owned(),
            udp_length: UDP_LENGTH,
            is_compression_enabled: false,
            ..SessionParameters::default()
        };
        let make = |mode, seed| {
            SoeSession::new(
                mode,
                params.clone(),
                ApplicationParameters::default(),
                seed,
                now,
            )
        };
        Self {
            client: make(SessionMode::Client, seed ^ 0xC1C1),
            server: make(SessionMode::Server, seed ^ 0x5E5E),
            tick: tick.max(Duration::from_micros(1)),
            next_tick: now + tick,
            wire: [WireCounter::default(), WireCounter::default()],
            delivered: [VecDeque::new(), VecDeque::new()],
            death: None,
        }
    }

    fn session(&mut self, side: Side) -> &mut soe_protocol::SoeSession {
        match side {
            Side::Client => &mut self.client,
            Side::Server => &mut self.server,
        }
    }

    fn pump(&mut self, side: Side) {
        let s = self.session(side);
        let received = s.take_received();
        let events = s.take_events();
        for r in received {
            self.delivered[side as usize].push_back(r.data);
        }
        for e in events {
            if let soe_protocol::SessionEvent::Closed(reason) = e {
                self.death
                    .get_or_insert_with(|| format!("{side:?} closed: {reason:?}"));
            }
        }
    }
}

impl Stack for SoeProtocolPair {
    fn start(&mut self, _now: Instant) {
        self.client.send_session_request();
    }

    fn is_established(&self) -> bool {
        use soe_protocol::SessionState::Running;
        self.client.state() == Running && self.server.state() == Running
    }

    fn handle_datagram(&mut self, now: Instant, to: Side, datagram: &[u8]) {
        let s = self.session(to);
        s.process_incoming(Bytes::copy_from_slice(datagram), now);
        s.run_tick(now);
        self.pump(to);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        Some(self.next_tick)
    }

    fn handle_timeout(&mut self, now: Instant) {
        if now < self.next_tick {
            return;
        }
        self.client.run_tick(now);
        self.server.run_tick(now);
        self.pump(Side::Client);
        self.pump(Side::Server);
        while self.next_tick <= now {
            self.next_tick += self.tick;
        }
    }

    fn poll_transmit(&mut self, _now: Instant, out: &mut Vec<(Side, Vec<u8>)>) {
        for side in [Side::Client, Side::Server] {
            for d in self.session(side).take_outgoing() {
                self.wire[side as usize].observe(&d, 2);
                out.push((side, d.to_vec()));
            }
        }
    }

    fn send(&mut self, from: Side, message: Bytes) -> bool {
        self.session(from).enqueue_data(&message)
    }

    fn poll_delivered(&mut self, at: Side, out: &mut Vec<Bytes>) {
        self.pump(at);
        out.extend(self.delivered[at as usize].drain(..));
    }

    fn death(&self) -> Option<String> {
        self.death.clone()
    }

    fn counters(&self) -> StackCounters {
        StackCounters {
            packets_sent: self.wire[0].sent + self.wire[1].sent,
            packets_resent: self.wire[0].resent + self.wire[1].resent,
            duplicates_received: 0,
        }
    }
}

/// Counts reliable data sequences one side puts on the wire: a sequence at or below the highest
/// already seen on its channel is a resend.
#[derive(Debug, Default, Clone)]
pub struct WireCounter {
    highest: [Option<i64>; 4],
    /// Sequences sent for the first time.
    pub sent: u64,
    /// Sequences sent again.
    pub resent: u64,
}

impl WireCounter {
    /// Looks at one uncompressed datagram with a `crc_length`-byte trailer.
    pub fn observe(&mut self, datagram: &[u8], crc_length: usize) {
        let [hi, lo, ..] = *datagram else {
            return;
        };
        let op = u16::from_be_bytes([hi, lo]);
        if op == 0x03 {
            let end = datagram.len().saturating_sub(crc_length);
            let body = datagram.get(2..end).unwrap_or_default();
            for sub in soe_wire::MultiPacket::new(body).iter().flatten() {
                self.packet(sub);
            }
        } else {
            self.packet(datagram);
        }
    }

    fn packet(&mut self, packet: &[u8]) {
        let [0, op @ 0x09..=0x10, a, b, ..] = *packet else {
            return;
        };
        let channel = usize::from((op - 0x09) % 4);
        let seq = u16::from_be_bytes([a, b]);
        let slot = &mut self.highest[channel];
        let full = match *slot {
            None => i64::from(seq),
            Some(h) => h + i64::from(seq.wrapping_sub(h as u16) as i16),
        };
        match *slot {
            Some(h) if full <= h => self.resent += 1,
            _ => {
                self.sent += 1;
                *slot = Some(full);
            }
        }
    }
}
