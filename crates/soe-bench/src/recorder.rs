//! The flight recorder's cost, on and off, in one run: the same echo workload through two
//! server endpoints that differ only in [`RecordingConfig::with_every_session`], side by side
//! in one process.
//!
//! Each world is a sans-I/O server `Endpoint` and a client `Endpoint` holding `N` sessions,
//! connected in memory on a virtual clock. Every round the clock moves [`STEP`] (40 messages a
//! second per session, as `endpoint-cost` runs), every client session sends one reliable
//! 100-byte message, and the server takes every datagram, serves its due deadlines, echoes
//! every message the way it came and hands out every datagram ready. Only the server's part of
//! a round is timed (the recorder lives in the server; the clients do not record), in the
//! thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`; the wall clock where there is none), so that
//! time the machine gives to other processes is not counted.
//!
//! Both worlds first run [`FILL_ROUNDS`] rounds, enough for every recorded session to fill its
//! budget (64 KiB at the defaults, or its share of the endpoint's 64 MiB when that is less), so
//! what is measured is the steady state: chunks reused, oldest entries dropped. Then they run
//! short batches in turn, alternating which goes first, so that a change in the machine's load
//! (other processes' use of the shared caches) falls on both; the figure is the median of the
//! measured rounds. Memory is what each server endpoint frees when it is dropped at the end
//! (the client endpoint dropped first), counted by the process's counting allocator.

use std::alloc::System;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use soe_session::recorder::RecorderStats;
use soe_session::{
    Channel, Endpoint, EndpointConfig, Event, RecordingConfig, SessionConfig, SessionHandle,
};
use stats_alloc::StatsAlloc;

use crate::report::{Better, Row, Target, fmt_num};

/// Bytes in a MiB.
const MIB: f64 = (1 << 20) as f64;

/// Virtual time per round: each session sends 40 messages a second.
pub const STEP: Duration = Duration::from_millis(25);
/// Rounds run before anything is measured: every recorded session's budget is full by then
/// (a round records about 300 bytes each way per session, a direction holds 32 KiB).
pub const FILL_ROUNDS: u32 = 160;
/// Rounds per measured batch.
const BATCH_ROUNDS: u32 = 10;
/// Bytes of each message.
const MESSAGE: usize = 100;

/// The section of the report.
pub const SECTION: &str = "The flight recorder: cost on and off";

/// What one world (recorder on or off) measured.
#[derive(Debug, Clone, Copy, Default)]
pub struct Figures {
    /// Median over the measured rounds of the server's CPU time per echoed message, in ns.
    pub ns_per_echo: f64,
    /// Heap bytes the server endpoint held per session at the end (freed when dropped).
    pub heap_per_session: f64,
    /// Messages echoed by the server in the measured batches.
    pub echoes: u64,
    /// The recorder's counters at the end.
    pub recorder: RecorderStats,
}

/// The recorder's cost at one number of sessions.
#[derive(Debug, Clone, Copy)]
pub struct Cost {
    /// Sessions in each world.
    pub sessions: u32,
    /// The recorder off (the default).
    pub off: Figures,
    /// Every session recorded at the default budgets.
    pub on: Figures,
}

/// One server endpoint, the clients it serves and the datagrams between them.
struct World {
    server: Endpoint<u32>,
    clients: Endpoint<u32>,
    handles: Vec<SessionHandle>,
    now: Instant,
    buf: Vec<u8>,
    /// Datagrams to the server this round: the client's remote (the server sees it as the
    /// source) and the bytes' range in `up_bytes`.
    up: Vec<(u32, Range<usize>)>,
    up_bytes: Vec<u8>,
    /// Datagrams from the server this round.
    down: Vec<(u32, Range<usize>)>,
    down_bytes: Vec<u8>,
    payload: Bytes,
    /// Messages the server echoed.
    echoes: u64,
    /// Echoes the clients received.
    returned: u64,
}

impl World {
    /// `n` sessions connected, the recorder `on` or off for every server session.
    ///
    /// # Panics
    ///
    /// If a session does not connect within 10 virtual seconds.
    fn new(n: u32, on: bool) -> Self {
        let session = Arc::new(
            SessionConfig::new("SoeBench")
                .with_udp_length(512)
                .with_idle_timeout(None),
        );
        let server = Endpoint::new(Arc::new(
            EndpointConfig::server(session.clone())
                .with_rng_seed(1)
                .with_max_sessions(n as usize + 1)
                .with_max_half_open(n as usize + 1)
                .with_recording(RecordingConfig::new().with_every_session(on)),
        ));
        let mut clients = Endpoint::new(Arc::new(
            EndpointConfig::client(session)
                .with_rng_seed(2)
                .with_max_sessions(n as usize + 1),
        ));
        let now = Instant::now();
        let handles = (0..n)
            .map(|i| clients.connect(now, i).expect("a client session"))
            .collect();
        let mut w = Self {
            server,
            clients,
            handles,
            now,
            buf: Vec::with_capacity(2048),
            up: Vec::new(),
            up_bytes: Vec::new(),
            down: Vec::new(),
            down_bytes: Vec::new(),
            payload: Bytes::from(vec![0x5a; MESSAGE]),
            echoes: 0,
            returned: 0,
        };
        let mut connected = 0;
        let deadline = now + Duration::from_secs(10);
        while connected < n {
            assert!(w.now < deadline, "{connected} of {n} sessions connected");
            w.round(Duration::from_millis(1), false);
            connected += w.connected_events();
        }
        w
    }

    /// Client events since the last call: `Connected` counted, echoes added to `returned`.
    fn connected_events(&mut self) -> u32 {
        let mut connected = 0;
        while let Some((_, ev)) = self.clients.poll_event() {
            match ev {
                Event::Connected => connected += 1,
                Event::Message { .. } => self.returned += 1,
                _ => {}
            }
        }
        connected
    }

    /// One round `step` later (every session sends one message when `send`); returns the CPU
    /// time of the server's part ([`thread_cpu_time`]).
    fn round(&mut self, step: Duration, send: bool) -> Duration {
        self.now += step;
        let now = self.now;
        if self.clients.poll_timeout().is_some_and(|d| d <= now) {
            self.clients.handle_timeout(now);
        }
        if send {
            for &h in &self.handles {
                let _ = self.clients.send(h, Channel::ZERO, self.payload.clone());
            }
        }
        self.up.clear();
        self.up_bytes.clear();
        while let Some(t) = self.clients.poll_transmit(now, &mut self.buf) {
            let at = self.up_bytes.len();
            self.up_bytes.extend_from_slice(&self.buf[..t.len]);
            self.up.push((t.destination, at..self.up_bytes.len()));
        }
        let start = thread_cpu_time();
        self.serve();
        let spent = thread_cpu_time().saturating_sub(start);
        for (to, r) in &self.down {
            self.clients
                .handle_datagram(now, *to, &self.down_bytes[r.clone()]);
        }
        spent
    }

    /// The server's part of a round, as a driver's wake-up does it: the datagrams, the due
    /// deadlines, the events (each message echoed the way it came), then every datagram ready.
    fn serve(&mut self) {
        let (server, now) = (&mut self.server, self.now);
        for (from, r) in &self.up {
            server.handle_datagram(now, *from, &self.up_bytes[r.clone()]);
        }
        if server.poll_timeout().is_some_and(|d| d <= now) {
            server.handle_timeout(now);
        }
        self.echoes += crate::echo_events(server);
        self.down.clear();
        self.down_bytes.clear();
        while let Some(t) = server.poll_transmit(now, &mut self.buf) {
            let at = self.down_bytes.len();
            self.down_bytes.extend_from_slice(&self.buf[..t.len]);
            self.down.push((t.destination, at..self.down_bytes.len()));
        }
    }

    /// `rounds` rounds with a message from every session; pushes to `times` the server's CPU
    /// time per message it echoed, in ns, of each round.
    fn batch(&mut self, rounds: u32, times: &mut Vec<f64>) {
        for _ in 0..rounds {
            let before = self.echoes;
            let spent = self.round(STEP, true);
            self.connected_events();
            times.push(spent.as_nanos() as f64 / (self.echoes - before).max(1) as f64);
        }
    }

    /// Drops the clients, then the server, and returns the heap bytes the server held.
    fn server_heap(self, alloc: &'static StatsAlloc<System>) -> usize {
        let Self {
            server, clients, ..
        } = self;
        drop(clients);
        let live = |alloc: &StatsAlloc<System>| {
            let s = alloc.stats();
            s.bytes_allocated.wrapping_sub(s.bytes_deallocated)
        };
        let before = live(alloc);
        drop(server);
        before.wrapping_sub(live(alloc))
    }
}

/// The CPU time the calling thread has used (on Unix; elsewhere the time since the first call,
/// the wall clock).
fn thread_cpu_time() -> Duration {
    #[cfg(unix)]
    {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
        Duration::new(
            u64::try_from(t.tv_sec).unwrap_or(0),
            u32::try_from(t.tv_nsec).unwrap_or(0),
        )
    }
    #[cfg(not(unix))]
    {
        static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        START.get_or_init(Instant::now).elapsed()
    }
}

/// The median of `xs` (which it sorts).
fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    match xs.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => xs[n / 2],
        n => (xs[n / 2 - 1] + xs[n / 2]) / 2.0,
    }
}

/// Measures the recorder off and on at `n` sessions: both worlds filled, then `batches`
/// measured batches each, taken in turn. `alloc` must be the process's global allocator, and
/// no other thread may allocate meanwhile (the memory figures count every allocation).
///
/// # Panics
///
/// If a session does not connect, or an echo is lost (every message sent must come back).
pub fn measure(alloc: &'static StatsAlloc<System>, n: u32, batches: usize) -> Cost {
    let n = n.max(1);
    let mut worlds = [World::new(n, false), World::new(n, true)];
    for w in &mut worlds {
        for _ in 0..FILL_ROUNDS {
            w.round(STEP, true);
            w.connected_events();
        }
    }
    let mut times = [Vec::new(), Vec::new()];
    let measured_from = worlds.each_ref().map(|w| w.echoes);
    for b in 0..batches {
        // Off first, then on first, and so on.
        for k in [b % 2, 1 - b % 2] {
            worlds[k].batch(BATCH_ROUNDS, &mut times[k]);
        }
    }
    let sent = u64::from(n) * u64::from(FILL_ROUNDS + BATCH_ROUNDS * batches as u32);
    let sides = worlds.map(|mut w| {
        // The last round's echoes are in the clients' hands after one more exchange.
        w.round(STEP, false);
        w.connected_events();
        assert_eq!(w.echoes, sent, "the server echoed every message");
        assert_eq!(w.returned, sent, "every echo came back");
        (w.echoes, w.server.recorder_stats(), w)
    });
    let mut out = [Figures::default(); 2];
    for (k, (echoes, recorder, w)) in sides.into_iter().enumerate() {
        out[k] = Figures {
            ns_per_echo: median(&mut times[k]),
            heap_per_session: w.server_heap(alloc) as f64 / f64::from(n),
            echoes: echoes - measured_from[k],
            recorder,
        };
    }
    let [off, on] = out;
    Cost {
        sessions: n,
        off,
        on,
    }
}

/// The section's rows at each number of sessions: the server's CPU per echo and heap per
/// session, on against off, and what recording adds to the heap against the pool's chunks
/// (held to at most 1.1×: the recorder keeps little beside its budget).
pub fn rows(
    rows: &mut Vec<Row>,
    alloc: &'static StatsAlloc<System>,
    sessions: &[u32],
    batches: usize,
) {
    for &n in sessions {
        eprintln!("soe-bench: flight recorder, {n} sessions");
        let c = measure(alloc, n, batches);
        rows.push(
            Row::new(
                SECTION,
                &format!("{n} sessions: server CPU per echo, on vs off"),
                c.on.ns_per_echo,
                "ns",
                Better::Lower,
            )
            .vs_limit(c.off.ns_per_echo)
            .with_note(format!(
                "{} ns more per echo; the server's CPU time; limit: the same workload with the \
                 recorder off (the default), in turn with it; median of {} rounds each, in \
                 {batches} batches each way",
                fmt_num(c.on.ns_per_echo - c.off.ns_per_echo),
                BATCH_ROUNDS as usize * batches
            )),
        );
        rows.push(
            Row::new(
                SECTION,
                &format!("{n} sessions: server heap per session, on vs off"),
                c.on.heap_per_session,
                "B/session",
                Better::Lower,
            )
            .vs_limit(c.off.heap_per_session)
            .with_note(format!(
                "limit: the recorder off; freed when each server endpoint is dropped, after {} s \
                 of traffic",
                fmt_num((STEP * (FILL_ROUNDS + BATCH_ROUNDS * batches as u32)).as_secs_f64())
            )),
        );
        let r = c.on.recorder;
        let budgets = RecordingConfig::new();
        rows.push(
            Row::new(
                SECTION,
                &format!("{n} sessions: the recorder's heap per session vs its pool"),
                c.on.heap_per_session - c.off.heap_per_session,
                "B/session",
                Better::Lower,
            )
            .vs_limit(r.pool_bytes as f64 / f64::from(n))
            .with_target(Target::RatioAtMost(1.1))
            .with_note(format!(
                "heap on − off; limit: the pool's chunks ({} MiB; budgets {} KiB a session, {} \
                 MiB the endpoint); {} of {n} sessions recorded, {} entries, {} dropped for room",
                fmt_num(r.pool_bytes as f64 / MIB),
                budgets.session_budget() / 1024,
                budgets.endpoint_budget() >> 20,
                r.recording,
                fmt_num(r.entries as f64),
                fmt_num(r.dropped as f64)
            )),
        );
    }
}
