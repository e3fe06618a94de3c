//! One simulated run: a server endpoint, its clients, their links, the faults and the checks.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use soe_netem::{GilbertElliott, Link, LinkConfig};
use soe_session::{
    Channel, CrcLength, DisconnectReason, Endpoint, EndpointConfig, Event, RandomSource, SendError,
    SessionConfig, SessionHandle, SplitMix64,
};
use soe_wire::{PROTOCOL_VERSION, Packet, SessionRequest};

use crate::message::{self, DOWN, Header, Kind, UP};

/// The server's address.
const SERVER: u32 = 0;
/// Stranger addresses start here (clients are below).
const STRANGERS: u32 = 0xF000_0000;
/// The application protocol every session speaks.
const PROTOCOL: &str = "SimProto_3";
/// Consecutive loop iterations at one instant after which the run is declared stuck.
const STUCK_ITERATIONS: u32 = 100_000;
/// Captured client datagrams kept for replays.
const CAPTURE: usize = 256;

/// A bug planted on purpose, to prove the checks catch it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Plant {
    /// The server application sees one reliable message with a byte changed.
    MutateMessage,
    /// The server application loses one reliable message silently.
    DropMessage,
    /// One server session is taken out of the endpoint's timer set.
    LoseDeadline,
    /// The server's sessions do not enforce their send-queue limit (they are built with one
    /// far above the configured `max_queued_messages`), and one server application queues
    /// more messages than the limit at once.
    UnboundedQueue,
}

impl Plant {
    /// Every plant.
    pub const ALL: [Self; 4] = [
        Self::MutateMessage,
        Self::DropMessage,
        Self::LoseDeadline,
        Self::UnboundedQueue,
    ];

    /// The name `--plant` takes.
    pub fn name(self) -> &'static str {
        match self {
            Self::MutateMessage => "mutate",
            Self::DropMessage => "drop",
            Self::LoseDeadline => "deadline",
            Self::UnboundedQueue => "queue",
        }
    }

    /// The plant named `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// What a sweep runs; a run is a pure function of these and its seed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Options {
    /// A run has between 1 and this many clients (drawn from the seed).
    pub max_clients: usize,
    /// How long workloads and faults run.
    pub active: Duration,
    /// How long the run continues after that with no new messages and no new faults (the
    /// links keep their loss), so everything sent can arrive and every timeout can fire.
    pub settle: Duration,
    /// Whether faults are scheduled (churn, rebinding, outages, floods, replays, restarts).
    pub faults: bool,
    /// A bug to plant.
    pub plant: Option<Plant>,
    /// Audit the endpoints' timer sets every this many steps (and at the end).
    pub audit_every: u64,
}

impl Default for Options {
    /// Up to 24 clients, 150 s of activity, 75 s to settle, faults on.
    fn default() -> Self {
        Self {
            max_clients: 24,
            active: Duration::from_secs(150),
            settle: Duration::from_secs(75),
            faults: true,
            plant: None,
            audit_every: 16,
        }
    }
}

impl Options {
    /// Sets [`Options::max_clients`].
    pub fn with_max_clients(mut self, n: usize) -> Self {
        self.max_clients = n.max(1);
        self
    }

    /// Sets [`Options::active`].
    pub fn with_active(mut self, d: Duration) -> Self {
        self.active = d;
        self
    }

    /// Sets [`Options::plant`].
    pub fn with_plant(mut self, plant: Option<Plant>) -> Self {
        self.plant = plant;
        self
    }

    /// Sets [`Options::faults`].
    pub fn with_faults(mut self, on: bool) -> Self {
        self.faults = on;
        self
    }

    /// The command that replays `seed` under these options.
    pub fn replay_command(&self, seed: u64) -> String {
        let mut cmd = format!("cargo xtask sim --from {seed} --seeds 1");
        let d = Self::default();
        if self.max_clients != d.max_clients {
            let _ = write!(cmd, " --clients {}", self.max_clients);
        }
        if self.active != d.active {
            let _ = write!(cmd, " --active {}", self.active.as_secs());
        }
        if !self.faults {
            cmd.push_str(" --no-faults");
        }
        if let Some(p) = self.plant {
            let _ = write!(cmd, " --plant {}", p.name());
        }
        cmd
    }
}

/// Faults injected in a run, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FaultCounts {
    /// Graceful closes by a client application.
    pub closes: u64,
    /// Clients that vanished without a Disconnect.
    pub vanishes: u64,
    /// Reconnects (a new session id from the same address).
    pub reconnects: u64,
    /// NAT rebindings (a new source port mid-session).
    pub rebinds: u64,
    /// Outages longer than the idle timeout.
    pub long_outages: u64,
    /// Outages shorter than it.
    pub short_outages: u64,
    /// Server restarts.
    pub restarts: u64,
    /// SessionRequests from strangers.
    pub flood_requests: u64,
    /// Garbage datagrams (from strangers and spoofed from clients).
    pub garbage: u64,
    /// Captured datagrams replayed.
    pub replays: u64,
    /// Datagrams with a bit flipped by a link.
    pub corrupted: u64,
}

impl FaultCounts {
    /// Adds `o`'s counts.
    pub fn add(&mut self, o: &Self) {
        self.closes += o.closes;
        self.vanishes += o.vanishes;
        self.reconnects += o.reconnects;
        self.rebinds += o.rebinds;
        self.long_outages += o.long_outages;
        self.short_outages += o.short_outages;
        self.restarts += o.restarts;
        self.flood_requests += o.flood_requests;
        self.garbage += o.garbage;
        self.replays += o.replays;
        self.corrupted += o.corrupted;
    }
}

/// What one run did and found.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Outcome {
    /// The seed.
    pub seed: u64,
    /// Clients.
    pub clients: usize,
    /// Sessions opened (client side).
    pub sessions: u64,
    /// Reliable messages delivered and verified (both directions).
    pub reliable_delivered: u64,
    /// Unreliable and ordered messages delivered and verified.
    pub unreliable_delivered: u64,
    /// Reliable data packets the clients sent (first transmissions, from the session stats of
    /// the sessions live at the end).
    pub reliable_packets_up: u64,
    /// Reliable data packets the server sent (likewise).
    pub reliable_packets_down: u64,
    /// Datagrams that crossed the emulated network.
    pub datagrams: u64,
    /// Faults injected.
    pub faults: FaultCounts,
    /// Loop iterations.
    pub steps: u64,
    /// Virtual time simulated.
    pub simulated: Duration,
    /// The first broken invariant, if any.
    pub violation: Option<String>,
}

impl Outcome {
    /// Whether every invariant held.
    pub fn is_ok(&self) -> bool {
        self.violation.is_none()
    }
}

/// How an instance (one session, seen from both sides) ended on one side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// The application was told.
    Told(DisconnectReason, bool),
    /// The client application vanished (it knows).
    Vanished,
    /// The server restarted (its application knows).
    Restarted,
}

/// One session from connect to its end on both sides.
#[derive(Debug)]
struct Instance {
    client: usize,
    session_id: u32,
    opened: Instant,
    client_handle: SessionHandle,
    server_handle: Option<SessionHandle>,
    connected: bool,
    sent: [[u64; 4]; 2],
    recv: [[u64; 4]; 2],
    unreliable_sent: [u64; 2],
    unreliable_recv: [u64; 2],
    ordered_last: [Option<u64>; 2],
    client_end: Option<End>,
    server_end: Option<End>,
    /// A fault that may legitimately end it struck (outage, restart, vanish, full server).
    disturbed: bool,
    app_closed: bool,
    ticks: u64,
}

/// The traffic of a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Workload {
    Echo,
    Bulk,
    Tick,
    /// Long-lived runs: one reliable message each way every period.
    Steady(Duration),
}

impl Workload {
    fn period(self) -> Duration {
        match self {
            Self::Echo => Duration::from_millis(20),
            Self::Bulk => Duration::from_millis(10),
            Self::Tick => Duration::from_millis(50),
            Self::Steady(p) => p,
        }
    }
}

#[derive(Debug)]
struct Client {
    ep: Endpoint<u32>,
    ep_count: u64,
    port: u32,
    up: Link,
    down: Link,
    corrupt: f64,
    workload: Workload,
    handle: Option<SessionHandle>,
    instance: Option<usize>,
    live: bool,
    retired: bool,
    reconnect_at: Option<Instant>,
    next_tick: Option<Instant>,
    dark_up_until: Option<Instant>,
    dark_down_until: Option<Instant>,
    wake: Option<Instant>,
    touched: bool,
    /// NAT rebindings so far.
    rebinds: u32,
    /// Datagrams taken from / handed to the current endpoint.
    tx: u64,
    rx: u64,
}

impl Client {
    fn addr(&self, index: usize) -> u32 {
        ((index as u32 + 1) << 12) | (self.port & 0xFFF)
    }
}

#[derive(Debug, Clone, Copy)]
enum Fault {
    Start(usize),
    Close(usize),
    Vanish(usize),
    Rebind(usize),
    Dark {
        client: usize,
        up: bool,
        down: bool,
        length: Duration,
    },
    Restart,
    Flood {
        left: u32,
    },
    Replay {
        left: u32,
    },
}

/// Configs shared by a run.
#[derive(Debug)]
struct Setup {
    session: Arc<SessionConfig>,
    server: Arc<EndpointConfig>,
    max_sessions: usize,
    max_half_open: usize,
    tight: bool,
}

/// The whole simulated system.
struct World {
    opts: Options,
    seed: u64,
    rng: SplitMix64,
    start: Instant,
    now: Instant,
    active_end: Instant,
    end: Instant,
    setup: Setup,
    server: Endpoint<u32>,
    server_count: u64,
    server_tx: u64,
    server_rx: u64,
    server_map: HashMap<SessionHandle, usize>,
    clients: Vec<Client>,
    instances: Vec<Instance>,
    by_client: Vec<Vec<usize>>,
    strangers: Link,
    heap: BinaryHeap<Reverse<(Instant, usize)>>,
    faults: BTreeMap<(Instant, u64), Fault>,
    fault_order: u64,
    capture: Vec<(usize, Vec<u8>)>,
    touched: Vec<usize>,
    buf: Vec<u8>,
    out: Outcome,
    planted: bool,
    violation: Option<String>,
    /// Long outages under way: (client, until).
    dark_marks: Vec<(usize, Instant)>,
    /// The client whose datagrams, events and faults are traced to stderr (`SOE_SIM_TRACE`).
    trace: Option<usize>,
}

/// Runs one seed.
pub fn run(seed: u64, opts: &Options) -> Outcome {
    let mut w = World::new(seed, opts.clone());
    w.run();
    w.finish()
}

/// Runs one long-lived session: one client on a link with `loss` random loss each way,
/// `per_second` reliable messages of 400 bytes each way, for `duration`. No other fault.
pub fn run_long_lived(seed: u64, duration: Duration, loss: f64, per_second: u32) -> Outcome {
    let opts = Options {
        max_clients: 1,
        active: duration,
        settle: Duration::from_secs(60),
        faults: false,
        plant: None,
        audit_every: 1 << 16,
    };
    let mut w = World::new(seed, opts);
    let period = Duration::from_secs(1) / per_second.max(1);
    let c = &mut w.clients[0];
    c.workload = Workload::Steady(period);
    let link = LinkConfig {
        delay: Duration::from_millis(40),
        loss,
        rate: 0,
        ..LinkConfig::default()
    };
    c.up = Link::new(link, seed ^ 0x11);
    c.down = Link::new(link, seed ^ 0x22);
    c.up.set_impaired(true);
    c.down.set_impaired(true);
    c.corrupt = 0.0;
    w.run();
    w.finish()
}

/// Whether a datagram is a contextless packet (SessionRequest, SessionResponse, UnknownSender,
/// RemapConnection). SOE v3 gives these no CRC, so a flipped bit in one cannot be detected by
/// any implementation (a SessionResponse with its compression byte flipped makes the two sides
/// frame differently, and every later datagram passes its CRC yet decodes wrong): the links
/// corrupt only datagrams the protocol protects. (A real path's UDP checksum stands guard.)
fn contextless(d: &[u8]) -> bool {
    matches!(d, [] | [0, 0x01 | 0x02 | 0x1D | 0x1E, ..])
}

fn chance(rng: &mut SplitMix64, p: f64) -> bool {
    p > 0.0 && (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
}

fn below(rng: &mut SplitMix64, n: u64) -> u64 {
    if n == 0 { 0 } else { rng.next_u64() % n }
}

fn between(rng: &mut SplitMix64, lo: Duration, hi: Duration) -> Duration {
    let span = hi.saturating_sub(lo).as_micros() as u64;
    lo + Duration::from_micros(below(rng, span + 1))
}

/// The server endpoint's config. Under [`Plant::UnboundedQueue`] its sessions are built with a
/// send-queue limit far above the configured one (the checks still hold them to the configured
/// one): the planted bug is a limit the code does not enforce.
fn server_config(
    session: &Arc<SessionConfig>,
    plant: Option<Plant>,
    max_sessions: usize,
    max_half_open: usize,
    seed: u64,
) -> Arc<EndpointConfig> {
    let mut session = session.clone();
    if plant == Some(Plant::UnboundedQueue) {
        let loose = (**session.reliable())
            .clone()
            .with_max_queued_messages(session.reliable().max_queued_messages * 64);
        if let Ok(c) = (*session).clone().with_reliable(Arc::new(loose)) {
            session = Arc::new(c);
        }
    }
    Arc::new(
        EndpointConfig::server(session)
            .with_max_sessions(max_sessions)
            .with_max_half_open(max_half_open)
            .with_rng_seed(seed),
    )
}

impl World {
    fn new(seed: u64, opts: Options) -> Self {
        let mut rng = SplitMix64::new(seed ^ 0x51D_5EED);
        let start = Instant::now();
        let n = 1 + below(&mut rng, opts.max_clients as u64) as usize;
        let compression = chance(&mut rng, 0.5);
        let encrypted = chance(&mut rng, 0.25);
        // CRC-32 (4 bytes): the simulation forges datagrams by the thousand (replays into other
        // sessions, spoofed garbage); with a 16-bit CRC one in 65,536 passes, which is a
        // property of the CRC length and not of the state machines under test.
        //
        // Heartbeats and timeouts are the defaults. (The heartbeat's default was 25 s, until
        // this simulation showed that it left an idle session five one-second tries before the
        // 30 s idle timeout: at 30 % loss each way, 3.5 % of idle stretches ended the session,
        // which the invariant "no session dies while its link delivers" rightly rejected. The
        // default is now 10 s: twenty tries.)
        let mut session = SessionConfig::new(PROTOCOL)
            .with_crc_length(CrcLength::FOUR)
            .with_compression(compression);
        if encrypted {
            let key = bytes::Bytes::from_static(
                b"\x17\xbd\x08\x6b\x1b\x94\xf0\x2f\xf0\xec\x53\xd7\x63\x58\x9b\x5f",
            );
            session = session.clone().with_encryption_key(key).unwrap_or(session);
        }
        let session = Arc::new(session);
        let tight = opts.faults && chance(&mut rng, 0.1);
        let max_sessions = if tight { (n * 3 / 4).max(1) } else { n + 16 };
        let max_half_open = if opts.faults && chance(&mut rng, 0.3) {
            4
        } else {
            64
        };
        let server = server_config(
            &session,
            opts.plant,
            max_sessions,
            max_half_open,
            seed ^ 0x5E5E,
        );
        let setup = Setup {
            session,
            server,
            max_sessions,
            max_half_open,
            tight,
        };
        let active_end = start + opts.active;
        let end = active_end + opts.settle;
        let mut w = Self {
            seed,
            start,
            now: start,
            active_end,
            end,
            server: Endpoint::new(setup.server.clone()),
            server_count: 0,
            server_tx: 0,
            server_rx: 0,
            server_map: HashMap::new(),
            clients: Vec::with_capacity(n),
            instances: Vec::new(),
            by_client: vec![Vec::new(); n],
            strangers: Link::new(
                LinkConfig {
                    delay: Duration::from_millis(5),
                    rate: 0,
                    ..LinkConfig::default()
                },
                seed ^ 0x57,
            ),
            heap: BinaryHeap::new(),
            faults: BTreeMap::new(),
            fault_order: 0,
            capture: Vec::new(),
            touched: Vec::new(),
            buf: Vec::new(),
            out: Outcome {
                seed,
                clients: n,
                ..Outcome::default()
            },
            planted: false,
            violation: None,
            dark_marks: Vec::new(),
            trace: std::env::var("SOE_SIM_TRACE")
                .ok()
                .and_then(|v| v.parse().ok()),
            setup,
            opts,
            rng,
        };
        for i in 0..n {
            let c = w.new_client(i);
            w.clients.push(c);
        }
        w.schedule_faults();
        w
    }

    fn client_endpoint(&self, i: usize, count: u64) -> Endpoint<u32> {
        let cfg = EndpointConfig::client(self.setup.session.clone())
            .with_rng_seed(self.seed ^ ((i as u64) << 20) ^ (count << 44) ^ 0xC1C1);
        Endpoint::new(Arc::new(cfg))
    }

    fn new_client(&mut self, i: usize) -> Client {
        let r = &mut self.rng;
        let workload = match below(r, 3) {
            0 => Workload::Echo,
            1 => Workload::Bulk,
            _ => Workload::Tick,
        };
        let delay = between(r, Duration::from_millis(2), Duration::from_millis(150));
        // At most 30 % random loss, or 10 % in bursts (with a little random loss). Bursts are
        // stretches of time (20 ms on average), not of datagrams: per datagram, a burst on an
        // idle session's heartbeats would be an outage of minutes.
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
        let seed = r.next_u64();
        let mut up = Link::new(link, seed);
        let mut down = Link::new(link, seed ^ 0xD0D0);
        up.set_impaired(true);
        down.set_impaired(true);
        Client {
            ep: self.client_endpoint(i, 0),
            ep_count: 0,
            port: 1,
            up,
            down,
            corrupt,
            workload,
            handle: None,
            instance: None,
            live: false,
            retired: false,
            reconnect_at: None,
            next_tick: None,
            dark_up_until: None,
            dark_down_until: None,
            wake: None,
            touched: false,
            rebinds: 0,
            tx: 0,
            rx: 0,
        }
    }

    fn schedule(&mut self, at: Instant, f: Fault) {
        self.fault_order += 1;
        self.faults.insert((at, self.fault_order), f);
    }

    fn schedule_faults(&mut self) {
        let n = self.clients.len();
        let active = self.opts.active;
        let s = self.start;
        for i in 0..n {
            let at = s + between(&mut self.rng, Duration::ZERO, Duration::from_secs(3));
            self.schedule(at, Fault::Start(i));
        }
        if !self.opts.faults || active < Duration::from_secs(60) {
            return;
        }
        let late = active - Duration::from_secs(20);
        let r = &mut self.rng;
        let mut plan = Vec::new();
        for i in 0..n {
            if chance(r, 0.3) {
                let at = between(r, Duration::from_secs(5), late);
                plan.push((
                    at,
                    if chance(r, 0.5) {
                        Fault::Close(i)
                    } else {
                        Fault::Vanish(i)
                    },
                ));
            }
            if chance(r, 0.25) {
                plan.push((between(r, Duration::from_secs(5), late), Fault::Rebind(i)));
            }
            if chance(r, 0.2) {
                let long = chance(r, 0.5);
                let length = if long {
                    between(r, Duration::from_secs(35), Duration::from_secs(45))
                } else {
                    between(r, Duration::from_millis(500), Duration::from_secs(4))
                };
                let (up, down) = match below(r, 3) {
                    0 => (true, true),
                    1 => (true, false),
                    _ => (false, true),
                };
                let latest = active.saturating_sub(length + Duration::from_secs(5));
                let at = between(
                    r,
                    Duration::from_secs(5),
                    latest.max(Duration::from_secs(5)),
                );
                plan.push((
                    at,
                    Fault::Dark {
                        client: i,
                        up,
                        down,
                        length,
                    },
                ));
            }
        }
        if chance(r, 0.15) {
            plan.push((between(r, Duration::from_secs(10), late), Fault::Restart));
        }
        if chance(r, 0.3) {
            let at = between(r, Duration::from_secs(1), late);
            plan.push((at, Fault::Flood { left: 20 }));
        }
        if chance(r, 0.3) {
            let at = between(r, Duration::from_secs(5), late);
            plan.push((at, Fault::Replay { left: 20 }));
        }
        for (at, f) in plan {
            self.schedule(s + at, f);
        }
    }

    fn fail(&mut self, what: String) {
        if let Some(i) = self.trace {
            let c = &self.clients[i];
            if let Some(h) = c.handle {
                eprintln!(
                    "traced client {i} at the failure: state {:?}, {:?}",
                    c.ep.state(h),
                    c.ep.stats(h)
                );
            }
        }
        if self.violation.is_none() {
            let t = self.now - self.start;
            let s = &self.setup.session;
            let e = self.server.endpoint_stats();
            self.violation = Some(format!(
                "t={:.3}s: {what} [compression {}, rc4 {}; server limits {} sessions, {} \
                 half-open; {} half-open evicted, {} recovered, {} remaps, {} requests \
                 rate-limited, {} replies dropped]",
                t.as_secs_f64(),
                s.compression(),
                s.encryption_key().is_some(),
                self.setup.max_sessions,
                self.setup.max_half_open,
                e.half_open_evicted,
                e.recovered,
                e.remaps,
                e.requests_rate_limited,
                e.replies_dropped,
            ));
        }
    }

    // ----- the loop -----

    fn run(&mut self) {
        let mut same = 0u32;
        let mut last = self.now;
        let mut due = Vec::new();
        while self.violation.is_none() {
            let next = [
                self.heap.peek().map(|Reverse((t, _))| *t),
                self.server.poll_timeout(),
                self.faults.keys().next().map(|k| k.0),
                self.strangers.next_arrival(),
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(next) = next else { break };
            if next > self.end {
                break;
            }
            self.now = self.now.max(next);
            if self.now == last {
                same += 1;
                if same > STUCK_ITERATIONS {
                    let what = self.stuck_detail();
                    self.fail(format!(
                        "stuck: the clock does not advance (a deadline that never moves): {what}"
                    ));
                    break;
                }
            } else {
                same = 0;
                last = self.now;
            }
            self.out.steps += 1;
            let now = self.now;
            while let Some((&key, _)) = self.faults.first_key_value() {
                if key.0 > now {
                    break;
                }
                if let Some((_, f)) = self.faults.pop_first() {
                    self.apply(f);
                }
            }
            while let Some(&Reverse((t, i))) = self.heap.peek() {
                if t > now {
                    break;
                }
                self.heap.pop();
                if self.clients[i].wake == Some(t) {
                    self.clients[i].wake = None;
                    due.push(i);
                }
            }
            for i in due.drain(..) {
                self.service(i);
            }
            while let Some(d) = self.strangers.pop_due(now) {
                self.deliver_to_server(&d);
            }
            if self.server.poll_timeout().is_some_and(|t| t <= now) {
                self.server.handle_timeout(now);
            }
            self.flush();
            self.check_step();
        }
        if self.violation.is_none() {
            self.check_end();
        }
    }

    /// What is due at the current instant (for the stuck report).
    fn stuck_detail(&self) -> String {
        let now = self.now;
        let mut out = String::new();
        if self.server.poll_timeout().is_some_and(|t| t <= now) {
            out.push_str("the server's deadline; ");
            for (&h, &idx) in &self.server_map {
                if let Some(sess) = self
                    .server
                    .session(h)
                    .filter(|sess| sess.poll_timeout().is_some_and(|t| t <= now))
                {
                    let _ = write!(
                        out,
                        "server session of #{idx} ({:?}, remote {:#x}); ",
                        sess.state(),
                        self.server.remote(h).unwrap_or(0)
                    );
                }
            }
        }
        for (i, c) in self.clients.iter().enumerate() {
            let due = |t: Option<Instant>| t.is_some_and(|t| t <= now);
            if due(c.ep.poll_timeout()) {
                let st = c.handle.and_then(|h| c.ep.state(h));
                let _ = write!(out, "client {i}'s deadline (state {st:?}); ");
            }
            if due(c.up.next_arrival()) || due(c.down.next_arrival()) {
                let _ = write!(out, "client {i}'s link; ");
            }
            if due(c.next_tick) || due(c.reconnect_at) {
                let _ = write!(out, "client {i}'s application; ");
            }
        }
        out
    }

    fn touch(&mut self, i: usize) {
        if !self.clients[i].touched {
            self.clients[i].touched = true;
            self.touched.push(i);
        }
    }

    /// Everything client `i` has due now: arrivals both ways, its timers, its application.
    fn service(&mut self, i: usize) {
        let now = self.now;
        self.touch(i);
        while let Some(mut d) = self.clients[i].down.pop_due(now) {
            let c = &mut self.clients[i];
            if chance(&mut self.rng, c.corrupt) && !contextless(&d) {
                let bit = below(&mut self.rng, d.len() as u64 * 8);
                d[(bit / 8) as usize] ^= 1 << (bit % 8);
                self.out.faults.corrupted += 1;
            }
            c.rx += 1;
            if self.trace == Some(i) {
                eprintln!(
                    "{:>10.3} down {:>4} {:02x?}",
                    (now - self.start).as_secs_f64(),
                    d.len(),
                    &d[..d.len().min(10)]
                );
            }
            c.ep.handle_datagram(now, SERVER, &d);
            self.out.datagrams += 1;
        }
        while let Some(mut d) = self.clients[i].up.pop_due(now) {
            let c = &self.clients[i];
            if chance(&mut self.rng, c.corrupt) && d.len() > 4 && !contextless(&d[4..]) {
                let bit = 32 + below(&mut self.rng, (d.len() as u64 - 4) * 8);
                d[(bit / 8) as usize] ^= 1 << (bit % 8);
                self.out.faults.corrupted += 1;
            }
            self.out.datagrams += 1;
            if self.trace == Some(i) {
                eprintln!(
                    "{:>10.3} up   {:>4} {:02x?}",
                    (now - self.start).as_secs_f64(),
                    d.len(),
                    &d[..d.len().min(14)]
                );
            }
            self.deliver_to_server(&d);
        }
        if self.clients[i].ep.poll_timeout().is_some_and(|t| t <= now) {
            self.clients[i].ep.handle_timeout(now);
        }
        if self.clients[i].reconnect_at.is_some_and(|t| t <= now) {
            self.clients[i].reconnect_at = None;
            self.connect(i);
        }
        if self.clients[i].next_tick.is_some_and(|t| t <= now) {
            let period = self.clients[i].workload.period();
            self.clients[i].next_tick = (now + period < self.active_end).then_some(now + period);
            self.pump(i);
        }
    }

    /// A datagram prefixed with its source address reaches the server.
    fn deliver_to_server(&mut self, d: &[u8]) {
        let Some((addr, body)) = d.split_first_chunk::<4>() else {
            return;
        };
        self.server_rx += 1;
        self.server
            .handle_datagram(self.now, u32::from_be_bytes(*addr), body);
    }

    fn flush(&mut self) {
        let now = self.now;
        loop {
            let mut any = false;
            while let Some(t) = self.server.poll_transmit(now, &mut self.buf) {
                any = true;
                self.server_tx += 1;
                let Some(len) = self.check_len(t.len, "server") else {
                    continue;
                };
                let dst = t.destination;
                if dst >= STRANGERS || dst == SERVER {
                    continue;
                }
                let i = ((dst >> 12) as usize).wrapping_sub(1);
                let Some(c) = self.clients.get_mut(i) else {
                    continue;
                };
                // A NAT forgets an old port: datagrams to it are dropped.
                if c.addr(i) != dst || c.dark_down_until.is_some_and(|u| now < u) {
                    if self.trace == Some(i) {
                        eprintln!(
                            "{:>10.3} down dropped (to an old port: {}; dark: {})",
                            (now - self.start).as_secs_f64(),
                            c.addr(i) != dst,
                            c.dark_down_until.is_some_and(|u| now < u)
                        );
                    }
                    continue;
                }
                c.down.send(now, self.buf[..len].to_vec());
                self.touch(i);
            }
            while let Some((h, e)) = self.server.poll_event() {
                any = true;
                self.server_event(h, e);
            }
            let mut k = 0;
            while k < self.touched.len() {
                let i = self.touched[k];
                k += 1;
                while let Some(t) = self.clients[i].ep.poll_transmit(now, &mut self.buf) {
                    any = true;
                    self.clients[i].tx += 1;
                    let Some(len) = self.check_len(t.len, "client") else {
                        continue;
                    };
                    let c = &mut self.clients[i];
                    if c.dark_up_until.is_some_and(|u| now < u) {
                        continue;
                    }
                    let mut d = Vec::with_capacity(len + 4);
                    d.extend_from_slice(&c.addr(i).to_be_bytes());
                    d.extend_from_slice(&self.buf[..len]);
                    if self.capture.len() < CAPTURE {
                        self.capture.push((i, d.clone()));
                    } else if below(&mut self.rng, 8) == 0 {
                        let slot = below(&mut self.rng, CAPTURE as u64) as usize;
                        self.capture[slot] = (i, d.clone());
                    }
                    c.up.send(now, d);
                }
                while let Some((h, e)) = self.clients[i].ep.poll_event() {
                    any = true;
                    self.client_event(i, h, e);
                }
            }
            if !any {
                break;
            }
        }
        for i in std::mem::take(&mut self.touched) {
            let c = &mut self.clients[i];
            c.touched = false;
            let w = [
                c.ep.poll_timeout(),
                c.up.next_arrival(),
                c.down.next_arrival(),
                c.next_tick,
                c.reconnect_at,
            ]
            .into_iter()
            .flatten()
            .min();
            if w != c.wake {
                c.wake = w;
                if let Some(t) = w {
                    self.heap.push(Reverse((t, i)));
                }
            }
        }
    }

    fn check_len(&mut self, len: usize, who: &str) -> Option<usize> {
        let max = self.setup.session.udp_length() as usize;
        if len > max || len > self.buf.len() {
            self.fail(format!(
                "{who} sent a {len}-byte datagram; udp_length is {max}"
            ));
            return None;
        }
        Some(len)
    }

    // ----- the applications -----

    fn connect(&mut self, i: usize) {
        let now = self.now;
        let c = &mut self.clients[i];
        if c.retired || c.handle.is_some() {
            return;
        }
        match c.ep.connect(now, SERVER) {
            Ok(h) => {
                let session_id = c.ep.session(h).map_or(0, |s| s.session_id());
                c.handle = Some(h);
                let idx = self.instances.len();
                c.instance = Some(idx);
                if !self.by_client[i].is_empty() {
                    self.out.faults.reconnects += 1;
                }
                self.by_client[i].push(idx);
                self.instances.push(Instance {
                    client: i,
                    session_id,
                    opened: now,
                    client_handle: h,
                    server_handle: None,
                    connected: false,
                    sent: [[0; 4]; 2],
                    recv: [[0; 4]; 2],
                    unreliable_sent: [0; 2],
                    unreliable_recv: [0; 2],
                    ordered_last: [None; 2],
                    client_end: None,
                    server_end: None,
                    disturbed: false,
                    app_closed: false,
                    ticks: 0,
                });
                self.out.sessions += 1;
            }
            Err(e) => self.fail(format!("client {i}: connect refused locally: {e}")),
        }
        self.touch(i);
    }

    fn client_event(&mut self, i: usize, h: SessionHandle, e: Event) {
        if self.trace == Some(i) && !matches!(e, Event::Message { .. }) {
            eprintln!(
                "{:>10.3} event {e:?}",
                (self.now - self.start).as_secs_f64()
            );
        }
        let Some(idx) = self.clients[i]
            .instance
            .filter(|&x| self.instances[x].client_handle == h)
        else {
            self.fail(format!(
                "client {i}: event {e:?} for a session it does not know"
            ));
            return;
        };
        match e {
            Event::Connected => {
                self.instances[idx].connected = true;
                let c = &mut self.clients[i];
                c.live = true;
                if self.now < self.active_end {
                    c.next_tick = Some(self.now);
                }
            }
            Event::Message {
                channel,
                data,
                kind,
            } => {
                self.deliver(idx, DOWN, channel, kind, &data);
            }
            Event::Closed { reason, by_peer } => {
                self.instances[idx].client_end = Some(End::Told(reason, by_peer));
                self.judge_end(idx, false, reason, by_peer);
                let c = &mut self.clients[i];
                c.handle = None;
                c.instance = None;
                c.live = false;
                c.next_tick = None;
                if !c.retired {
                    let back = between(
                        &mut self.rng,
                        Duration::from_millis(200),
                        Duration::from_secs(3),
                    );
                    c.reconnect_at = Some(self.now + back);
                }
            }
            _ => self.fail(format!("client {i}: unexpected event {e:?}")),
        }
    }

    fn server_event(&mut self, h: SessionHandle, e: Event) {
        if let Event::Accepted = e {
            let remote = self.server.remote(h).unwrap_or(SERVER);
            let sid = self.server.session(h).map_or(0, |s| s.session_id());
            let i = ((remote >> 12) as usize).wrapping_sub(1);
            let found = self
                .by_client
                .get(i)
                .and_then(|v| {
                    v.iter()
                        .rev()
                        .find(|&&x| self.instances[x].session_id == sid)
                })
                .copied();
            match found {
                Some(idx) if self.instances[idx].server_handle.is_none() => {
                    self.instances[idx].server_handle = Some(h);
                    self.server_map.insert(h, idx);
                }
                _ => self.fail(format!(
                    "server accepted session {sid:#x} from {remote:#x}, which no client opened \
                     (or it was accepted twice)"
                )),
            }
            return;
        }
        let Some(&idx) = self.server_map.get(&h) else {
            self.fail(format!("server: event {e:?} for an unknown session"));
            return;
        };
        match e {
            Event::Message {
                channel,
                data,
                kind,
            } => {
                let mut data = data;
                if kind == soe_session::Delivery::Reliable
                    && !self.planted
                    && self.now - self.start > Duration::from_secs(5)
                {
                    match self.opts.plant {
                        Some(Plant::MutateMessage) => {
                            self.planted = true;
                            let mut v = data.to_vec();
                            let k = v.len() - 1;
                            v[k] ^= 0x40;
                            data = v.into();
                        }
                        Some(Plant::DropMessage) => {
                            self.planted = true;
                            return;
                        }
                        _ => {}
                    }
                }
                self.deliver(idx, UP, channel, kind, &data);
                if self.clients[self.instances[idx].client].workload == Workload::Echo
                    && kind == soe_session::Delivery::Reliable
                    && self.now < self.active_end
                {
                    self.send(idx, DOWN, Kind::Reliable, 0, 16, 400);
                }
            }
            Event::Closed { reason, by_peer } => {
                self.instances[idx].server_end = Some(End::Told(reason, by_peer));
                self.server_map.remove(&h);
                self.judge_end(idx, true, reason, by_peer);
            }
            _ => self.fail(format!("server: unexpected event {e:?}")),
        }
    }

    /// Checks a delivered message: for this session, this direction, intact, and (reliable)
    /// exactly the next one of its channel.
    fn deliver(
        &mut self,
        idx: usize,
        dir: u8,
        channel: Channel,
        kind: soe_session::Delivery,
        data: &[u8],
    ) {
        let side = if dir == UP { "server" } else { "client" };
        let Some(h) = message::parse(data) else {
            self.fail(format!(
                "{side} of session #{idx} received a corrupted {}-byte message ({kind:?})",
                data.len()
            ));
            return;
        };
        if h.instance != idx as u32 || h.direction != dir {
            self.fail(format!(
                "{side} of session #{idx} received a message of session #{} direction {}",
                h.instance, h.direction
            ));
            return;
        }
        let inst = &mut self.instances[idx];
        let d = dir as usize;
        let problem = match kind {
            soe_session::Delivery::Reliable => {
                let ch = channel.index();
                let expected = inst.recv[d][ch];
                if h.kind != Kind::Reliable as u8 || usize::from(h.channel) != ch {
                    Some(format!(
                        "{side} of session #{idx}: a reliable delivery on channel {ch} carries \
                         kind {} channel {}",
                        h.kind, h.channel
                    ))
                } else if h.seq != expected {
                    Some(format!(
                        "{side} of session #{idx} channel {ch}: received message {} where {} was \
                         next ({})",
                        h.seq,
                        expected,
                        if h.seq < expected {
                            "duplicate"
                        } else {
                            "gap: a message was lost"
                        }
                    ))
                } else {
                    inst.recv[d][ch] += 1;
                    self.out.reliable_delivered += 1;
                    None
                }
            }
            soe_session::Delivery::Ordered => {
                let last = inst.ordered_last[d];
                inst.ordered_last[d] = Some(h.seq);
                inst.unreliable_recv[d] += 1;
                self.out.unreliable_delivered += 1;
                last.filter(|&l| h.seq <= l).map(|l| {
                    format!(
                        "{side} of session #{idx}: ordered message {} after {l}",
                        h.seq
                    )
                })
            }
            _ => {
                inst.unreliable_recv[d] += 1;
                self.out.unreliable_delivered += 1;
                None
            }
        };
        if let Some(p) = problem {
            self.fail(p);
        }
    }

    /// Judges why one side of an instance ended (`server`: the server side).
    fn judge_end(&mut self, idx: usize, server: bool, reason: DisconnectReason, by_peer: bool) {
        let inst = &self.instances[idx];
        if !inst.connected || inst.disturbed {
            return;
        }
        use DisconnectReason as R;
        let ok = match (server, reason, by_peer) {
            // A full server refuses, and does not rebuild from its cookie a session whose
            // half-open state a flood evicted (the client then gives up remapping).
            (_, R::ConnectionRefused | R::UnreachableConnection, _) if self.setup.tight => true,
            (false, R::Application, false) => inst.app_closed,
            (true, R::Application, true) => inst.app_closed,
            // The client's Disconnects all lost, or sent from a port the server does not know
            // (a NAT rebinding just before the close); or it came back with a new session id.
            (true, R::Timeout | R::UnacknowledgedTimeout | R::NewConnectionAttempt, _) => {
                inst.app_closed
            }
            _ => false,
        };
        if !ok {
            let side = if server { "server" } else { "client" };
            let c = &self.clients[inst.client];
            let link = c.up.config();
            self.fail(format!(
                "{side} side of session #{idx} (client {}, {:?}, opened at {:.1}s) ended with \
                 {reason:?} (by_peer {by_peer}) while its link delivered (loss {}, bursts {}, \
                 delay {:?}, {} NAT rebinds) and no fault explained it",
                inst.client,
                c.workload,
                (inst.opened - self.start).as_secs_f64(),
                link.loss,
                link.burst.is_some(),
                link.delay,
                c.rebinds,
            ));
        }
    }

    /// Queues one message of `idx` in direction `dir`; returns whether it was taken.
    fn send(&mut self, idx: usize, dir: u8, kind: Kind, ch: u8, lo: usize, hi: usize) -> bool {
        let inst = &self.instances[idx];
        let d = dir as usize;
        let seq = match kind {
            Kind::Reliable => inst.sent[d][usize::from(ch)],
            _ => inst.unreliable_sent[d],
        };
        let len = message::size(seq, u64::from(ch) << 8 | u64::from(dir), lo, hi);
        let data = message::build(
            Header {
                kind: kind as u8,
                direction: dir,
                channel: ch,
                instance: idx as u32,
                seq,
            },
            len,
        );
        let channel = Channel::new(ch).unwrap_or(Channel::ZERO);
        let r = if dir == UP {
            let c = &mut self.clients[inst.client];
            let Some(h) = c.handle else { return false };
            match kind {
                Kind::Reliable => c.ep.send(h, channel, data),
                Kind::Unreliable => c.ep.send_unreliable(h, data),
                Kind::Ordered => c.ep.send_ordered(h, data),
            }
        } else {
            let Some(h) = inst.server_handle.filter(|_| inst.server_end.is_none()) else {
                return false;
            };
            match kind {
                Kind::Reliable => self.server.send(h, channel, data),
                Kind::Unreliable => self.server.send_unreliable(h, data),
                Kind::Ordered => self.server.send_ordered(h, data),
            }
        };
        match r {
            Ok(()) => {
                let inst = &mut self.instances[idx];
                match kind {
                    Kind::Reliable => inst.sent[d][usize::from(ch)] += 1,
                    _ => inst.unreliable_sent[d] += 1,
                }
                true
            }
            Err(SendError::QueueFull(_) | SendError::Closed | SendError::UnknownSession) => false,
            Err(e) => {
                self.fail(format!("session #{idx}: send refused: {e}"));
                false
            }
        }
    }

    fn pump(&mut self, i: usize) {
        let Some(idx) = self.clients[i].instance else {
            return;
        };
        if !self.clients[i].live {
            return;
        }
        self.touch(i);
        self.instances[idx].ticks += 1;
        let tick = self.instances[idx].ticks;
        let sum = |a: &[u64; 4]| a.iter().sum::<u64>();
        match self.clients[i].workload {
            Workload::Echo => {
                for _ in 0..4 {
                    let inst = &self.instances[idx];
                    if inst.sent[0][0] >= inst.recv[1][0] + 4 {
                        break;
                    }
                    if !self.send(idx, UP, Kind::Reliable, 0, 16, 400) {
                        break;
                    }
                }
            }
            Workload::Bulk => {
                for dir in [UP, DOWN] {
                    let d = dir as usize;
                    for _ in 0..8 {
                        let inst = &self.instances[idx];
                        if sum(&inst.sent[d]) >= sum(&inst.recv[d]) + 24 {
                            break;
                        }
                        let ch = (sum(&inst.sent[d]) % 2) as u8;
                        if !self.send(idx, dir, Kind::Reliable, ch, 300, 6000) {
                            break;
                        }
                    }
                }
            }
            Workload::Tick => {
                self.send(idx, UP, Kind::Unreliable, 0, 32, 32);
                self.send(idx, DOWN, Kind::Ordered, 0, 120, 200);
                if tick.is_multiple_of(5) {
                    self.send(idx, UP, Kind::Reliable, 0, 48, 48);
                }
                if tick.is_multiple_of(10) {
                    self.send(idx, DOWN, Kind::Reliable, 1, 100, 100);
                }
            }
            Workload::Steady(_) => {
                self.send(idx, UP, Kind::Reliable, 0, 400, 400);
                self.send(idx, DOWN, Kind::Reliable, 0, 400, 400);
            }
        }
    }

    // ----- faults -----

    fn apply(&mut self, f: Fault) {
        let now = self.now;
        match f {
            Fault::Start(i) => self.connect(i),
            Fault::Close(i) => {
                self.out.faults.closes += 1;
                let c = &mut self.clients[i];
                c.retired = chance(&mut self.rng, 0.3);
                if let (Some(h), Some(idx)) = (c.handle, c.instance) {
                    c.ep.close(now, h, DisconnectReason::Application);
                    c.next_tick = None;
                    c.live = false;
                    self.instances[idx].app_closed = true;
                }
                self.touch(i);
            }
            Fault::Vanish(i) => {
                self.out.faults.vanishes += 1;
                // The endpoint's own counters must agree with what it handed over.
                self.check_client_counters(i);
                let count = self.clients[i].ep_count + 1;
                let ep = self.client_endpoint(i, count);
                let retired = chance(&mut self.rng, 0.3);
                let back = between(
                    &mut self.rng,
                    Duration::from_secs(1),
                    Duration::from_secs(8),
                );
                let c = &mut self.clients[i];
                c.ep = ep;
                c.ep_count = count;
                c.tx = 0;
                c.rx = 0;
                c.live = false;
                c.next_tick = None;
                c.handle = None;
                c.retired = retired;
                c.reconnect_at = (!retired).then_some(now + back);
                if let Some(idx) = c.instance.take() {
                    let inst = &mut self.instances[idx];
                    inst.client_end = Some(End::Vanished);
                    inst.disturbed = true;
                }
                self.touch(i);
            }
            Fault::Rebind(i) => {
                if self.trace == Some(i) {
                    eprintln!("{:>10.3} REBIND", (self.now - self.start).as_secs_f64());
                }
                self.out.faults.rebinds += 1;
                self.clients[i].port += 1;
                self.clients[i].rebinds += 1;
            }
            Fault::Dark {
                client,
                up,
                down,
                length,
            } => {
                let idle = self.setup.session.idle_timeout().unwrap_or(Duration::MAX);
                let long = length + Duration::from_secs(2) >= idle;
                if long {
                    self.out.faults.long_outages += 1;
                    if let Some(idx) = self.clients[client].instance {
                        self.instances[idx].disturbed = true;
                    }
                } else {
                    self.out.faults.short_outages += 1;
                }
                let c = &mut self.clients[client];
                if up {
                    c.dark_up_until = Some(now + length);
                }
                if down {
                    c.dark_down_until = Some(now + length);
                }
                if long {
                    // Sessions opened during the outage are disturbed too.
                    self.dark_marks.push((client, now + length));
                }
            }
            Fault::Restart => {
                self.out.faults.restarts += 1;
                self.check_server_counters();
                self.server_count += 1;
                let cfg = server_config(
                    &self.setup.session,
                    self.opts.plant,
                    self.setup.max_sessions,
                    self.setup.max_half_open,
                    self.seed ^ 0x5E5E ^ (self.server_count << 32),
                );
                self.server = Endpoint::new(cfg);
                self.server_tx = 0;
                self.server_rx = 0;
                self.server_map.clear();
                for inst in &mut self.instances {
                    if inst.server_end.is_none() {
                        inst.disturbed = true;
                        if inst.server_handle.is_some() {
                            inst.server_end = Some(End::Restarted);
                        }
                    }
                }
            }
            Fault::Flood { left } => {
                for _ in 0..40 {
                    let from = STRANGERS + below(&mut self.rng, 100_000) as u32;
                    let mut d = from.to_be_bytes().to_vec();
                    Packet::SessionRequest(SessionRequest {
                        protocol_version: PROTOCOL_VERSION,
                        session_id: self.rng.next_u32(),
                        udp_length: 512,
                        application_protocol: PROTOCOL.as_bytes(),
                    })
                    .encode(&mut d);
                    self.strangers.send(now, d);
                    self.out.faults.flood_requests += 1;
                }
                for _ in 0..20 {
                    // Garbage from strangers, and some spoofed from live clients.
                    let n = self.clients.len();
                    let from = if chance(&mut self.rng, 0.3) {
                        let i = below(&mut self.rng, n as u64) as usize;
                        self.clients[i].addr(i)
                    } else {
                        STRANGERS + below(&mut self.rng, 100_000) as u32
                    };
                    let len = 1 + below(&mut self.rng, 80) as usize;
                    let mut d = from.to_be_bytes().to_vec();
                    for k in 0..len {
                        let b = self.rng.next_u32() as u8;
                        // Half of it looks like protocol packets.
                        d.push(if k == 0 && chance(&mut self.rng, 0.5) {
                            0
                        } else {
                            b
                        });
                    }
                    self.strangers.send(now, d);
                    self.out.faults.garbage += 1;
                }
                if left > 1 && now < self.active_end {
                    self.schedule(
                        now + Duration::from_millis(500),
                        Fault::Flood { left: left - 1 },
                    );
                }
            }
            Fault::Replay { left } => {
                for _ in 0..10 {
                    if self.capture.is_empty() {
                        break;
                    }
                    let k = below(&mut self.rng, self.capture.len() as u64) as usize;
                    let (owner, d) = &self.capture[k];
                    let owner = *owner;
                    let mut d = d.clone();
                    let n = self.clients.len();
                    let i = below(&mut self.rng, n as u64) as usize;
                    // From a stranger, or spoofed from another client. Contextless packets
                    // carry no CRC: a SessionRequest from a client's address legitimately
                    // replaces its session, and a RemapConnection legitimately moves a session
                    // to the sender (SOE v3 authenticates it by session id and CRC seed only,
                    // which an eavesdropper has). Those come from strangers only: the session
                    // they move there times out, and its client remaps it back.
                    let from = if i != owner && !contextless(&d[4..]) {
                        self.clients[i].addr(i)
                    } else {
                        STRANGERS + below(&mut self.rng, 100_000) as u32
                    };
                    d[..4].copy_from_slice(&from.to_be_bytes());
                    self.strangers.send(now, d);
                    self.out.faults.replays += 1;
                }
                if left > 1 && now < self.active_end {
                    self.schedule(
                        now + Duration::from_secs(1),
                        Fault::Replay { left: left - 1 },
                    );
                }
            }
        }
    }

    // ----- checks -----

    fn check_step(&mut self) {
        let (len, half) = (self.server.len(), self.server.half_open());
        let s = &self.setup;
        if half > s.max_half_open || len > s.max_sessions + s.max_half_open {
            self.fail(format!(
                "server holds {len} sessions ({half} half-open); limits {} + {}",
                s.max_sessions, s.max_half_open
            ));
        }
        if self.opts.plant == Some(Plant::LoseDeadline)
            && !self.planted
            && self.now - self.start > Duration::from_secs(5)
        {
            // The server session of the lowest live instance loses its place in the timer set.
            let victim = self.server_map.iter().min_by_key(|&(_, &idx)| idx);
            if let Some((&h, _)) = victim {
                self.planted = true;
                self.server.plant_lost_deadline(h);
            }
        }
        if self.opts.plant == Some(Plant::UnboundedQueue)
            && !self.planted
            && self.now - self.start > Duration::from_secs(5)
        {
            // The server application of the lowest live instance queues one message more than
            // the configured limit, all at once; only the planted bug lets them in.
            let victim = self.server_map.values().copied().min();
            if let Some(idx) = victim {
                self.planted = true;
                let limit = self.setup.session.reliable().max_queued_messages;
                for _ in 0..=limit {
                    if !self.send(idx, DOWN, Kind::Reliable, 0, 16, 16) {
                        break;
                    }
                }
            }
        }
        if self.out.steps.is_multiple_of(self.opts.audit_every.max(1)) || self.planted {
            self.audit();
            self.check_queues();
        }
        // Sessions that opened during a long outage are disturbed too.
        let now = self.now;
        self.dark_marks.retain(|&(_, until)| until > now);
        for k in 0..self.dark_marks.len() {
            let (client, _) = self.dark_marks[k];
            if let Some(idx) = self.clients[client].instance {
                self.instances[idx].disturbed = true;
            }
        }
    }

    fn audit(&mut self) {
        if let Err(e) = self.server.audit_timers() {
            self.fail(format!("server timer set: {e}"));
        }
        for i in 0..self.clients.len() {
            if let Err(e) = self.clients[i].ep.audit_timers() {
                self.fail(format!("client {i} timer set: {e}"));
            }
        }
    }

    /// Every live session's reliable channels, on both sides, hold no more than the reliable
    /// config allows: messages queued to send, packets received early, a partial message,
    /// messages received and not yet taken (the applications take them as they come).
    fn check_queues(&mut self) {
        let r = self.setup.session.reliable();
        let window = usize::from(r.receive_window);
        let (max_queued, max_message) = (r.max_queued_messages, r.max_message_size);
        let over = |side: String, ep: &Endpoint<u32>, h: SessionHandle| -> Option<String> {
            (0..4u8).find_map(|ch| {
                let channel = Channel::new(ch)?;
                let queued = ep.queued(h, channel)?;
                let b = ep.receive_backlog(h, channel)?;
                (queued > max_queued
                    || b.early_packets > window
                    || b.reassembly_bytes > max_message + 1
                    || b.messages > max_queued
                    || b.bytes > max_message)
                    .then(|| {
                        format!(
                            "{side} channel {ch} holds more than its limits: {queued} messages \
                             queued to send (limit {max_queued}), {b:?} (limits: {window} \
                             early packets, {max_queued} messages, {max_message} bytes)"
                        )
                    })
            })
        };
        let mut found = None;
        for (&h, &idx) in &self.server_map {
            found = over(format!("server session #{idx}"), &self.server, h);
            if found.is_some() {
                break;
            }
        }
        if found.is_none() {
            for (i, c) in self.clients.iter().enumerate() {
                let Some(h) = c.handle else { continue };
                found = over(format!("client {i}"), &c.ep, h);
                if found.is_some() {
                    break;
                }
            }
        }
        if let Some(msg) = found {
            self.fail(msg);
        }
    }

    fn check_client_counters(&mut self, i: usize) {
        let c = &self.clients[i];
        let s = c.ep.endpoint_stats();
        if s.datagrams_sent != c.tx || s.datagrams_received != c.rx {
            let msg = format!(
                "client {i}: endpoint counts {} sent / {} received; the network saw {} / {}",
                s.datagrams_sent, s.datagrams_received, c.tx, c.rx
            );
            self.fail(msg);
        }
    }

    fn check_server_counters(&mut self) {
        let s = self.server.endpoint_stats();
        if s.datagrams_sent != self.server_tx || s.datagrams_received != self.server_rx {
            let msg = format!(
                "server: endpoint counts {} sent / {} received; the network saw {} / {}",
                s.datagrams_sent, s.datagrams_received, self.server_tx, self.server_rx
            );
            self.fail(msg);
        }
    }

    fn check_end(&mut self) {
        self.audit();
        self.check_server_counters();
        for i in 0..self.clients.len() {
            self.check_client_counters(i);
        }
        let settle_from = self.active_end;
        for idx in 0..self.instances.len() {
            if self.violation.is_some() {
                return;
            }
            let inst = &self.instances[idx];
            let i = inst.client;
            match (inst.client_end, inst.server_end) {
                (None, None) => {
                    if !inst.connected || inst.server_handle.is_none() {
                        if inst.opened + Duration::from_secs(30) < self.end {
                            self.fail(format!(
                                "session #{idx} (client {i}) opened at {:.1}s never completed \
                                 its handshake",
                                (inst.opened - self.start).as_secs_f64()
                            ));
                        }
                        continue;
                    }
                    for d in 0..2 {
                        for ch in 0..4 {
                            if inst.sent[d][ch] != inst.recv[d][ch] {
                                let msg = format!(
                                    "session #{idx} (client {i}) is live but {} of {} messages \
                                     {} on channel {ch} arrived ({:.0} s after sending stopped)",
                                    inst.recv[d][ch],
                                    inst.sent[d][ch],
                                    if d == 0 { "up" } else { "down" },
                                    (self.end - settle_from).as_secs_f64()
                                );
                                self.fail(msg);
                                return;
                            }
                        }
                    }
                    self.check_session_stats(idx);
                }
                (Some(_), None) | (None, Some(_)) => {
                    // One side still holds the session: fine only if it is still being closed.
                    let server_state = inst
                        .server_handle
                        .and_then(|h| Some((self.server.state(h)?, self.server.remote(h)?)));
                    let msg = format!(
                        "session #{idx} (client {i}): only one side was told it ended \
                         (client {:?}, server {:?}, server session {server_state:?}; \
                         disturbed {})",
                        inst.client_end, inst.server_end, inst.disturbed
                    );
                    // A server session refused or dropped while half-open never reached the
                    // server application: there was nobody to tell.
                    if inst.connected && inst.server_handle.is_some() {
                        self.fail(msg);
                    }
                }
                (Some(_), Some(_)) => {}
            }
        }
        // Every client that still wants a session has one (a client whose server restarted
        // learned so and reconnected).
        for i in 0..self.clients.len() {
            let c = &self.clients[i];
            if !c.retired && !c.live && self.violation.is_none() {
                let last = self.by_client[i].last().map(|&x| self.instances[x].opened);
                if last.is_some_and(|t| t + Duration::from_secs(40) < self.end) {
                    self.fail(format!(
                        "client {i} wants a session but has none at the end"
                    ));
                }
            }
        }
    }

    fn check_session_stats(&mut self, idx: usize) {
        let inst = &self.instances[idx];
        let c = &self.clients[inst.client];
        let (Some(cs), Some(ss)) = (
            c.ep.stats(inst.client_handle),
            inst.server_handle.and_then(|h| self.server.stats(h)),
        ) else {
            self.fail(format!(
                "session #{idx}: live on both sides but a side has no stats"
            ));
            return;
        };
        let up: u64 = inst.sent[0].iter().sum();
        let down: u64 = inst.sent[1].iter().sum();
        let checks = [
            (
                "client reliable_messages_sent",
                cs.reliable_messages_sent,
                up,
            ),
            (
                "server reliable_messages_received",
                ss.reliable_messages_received,
                up,
            ),
            (
                "server reliable_messages_sent",
                ss.reliable_messages_sent,
                down,
            ),
            (
                "client reliable_messages_received",
                cs.reliable_messages_received,
                down,
            ),
            (
                "client unreliable_sent",
                cs.unreliable_sent,
                inst.unreliable_sent[0],
            ),
            (
                "server unreliable_sent",
                ss.unreliable_sent,
                inst.unreliable_sent[1],
            ),
            (
                "server unreliable_received",
                ss.unreliable_received,
                inst.unreliable_recv[0],
            ),
            (
                "client unreliable_received",
                cs.unreliable_received,
                inst.unreliable_recv[1],
            ),
        ];
        for (what, counted, seen) in checks {
            if counted != seen {
                self.fail(format!(
                    "session #{idx}: {what} is {counted}; the applications saw {seen}"
                ));
                return;
            }
        }
        if cs.datagrams_sent > c.tx || cs.datagrams_received > c.rx {
            self.fail(format!(
                "session #{idx}: the client session counts more datagrams than its endpoint moved"
            ));
        }
        self.out.reliable_packets_up += cs.reliable_packets_sent;
        self.out.reliable_packets_down += ss.reliable_packets_sent;
    }

    fn finish(mut self) -> Outcome {
        self.out.simulated = self.now - self.start;
        self.out.violation = self.violation.take();
        self.out
    }
}
