//! `endpoint-cost`: the protocol endpoint's own work per echoed message, in virtual time, at a
//! fixed total message rate spread over any number of sessions.
//!
//! ```text
//! endpoint-cost [--sessions N] [--rate R] [--seconds S] [--warm-up S] [--idle] [--record]
//! ```
//!
//! `--record` turns the flight recorder on for every server session (its default budgets:
//! 64 KiB per session, 64 MiB per endpoint), so that its cost per message is the difference
//! between two runs; the report then adds the recorder's pool and entries.
//!
//! One sans-I/O server `soe_session::Endpoint` echoes for `N` client sessions (another sans-I/O
//! endpoint), each sending `R` reliable 100-byte messages a second (or, with `--idle`, nothing:
//! the sessions only keep alive), phases spread evenly. Every datagram crosses after 50 µs
//! and is handed over on its own (the light-load case: one datagram per wake-up), and the
//! server serves its deadlines whenever one is due. Nothing depends on the machine's load, so
//! the work per message can be counted exactly under `valgrind --tool=callgrind
//! --toggle-collect='*server_turn*'`: every call into the server endpoint inside the measured
//! window goes through [`server_turn`], and nothing else does. The program prints what it did
//! (messages echoed, datagrams each way, timer wake-ups), for dividing the count.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Parser;
use soe_session::{Channel, Endpoint, EndpointConfig, SessionConfig};

/// Counts the server endpoint's work per message in virtual time.
#[derive(Debug, Parser)]
#[command(name = "endpoint-cost")]
struct Args {
    /// Client sessions.
    #[arg(long, default_value_t = 500)]
    sessions: u32,
    /// Reliable messages per second per session.
    #[arg(long, default_value_t = 40.0)]
    rate: f64,
    /// Virtual seconds measured.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Virtual seconds before the measured window.
    #[arg(long, default_value_t = 1.0)]
    warm_up: f64,
    /// Send nothing: the sessions only keep alive.
    #[arg(long)]
    idle: bool,
    /// Record every server session with the flight recorder (default budgets).
    #[arg(long)]
    record: bool,
}

/// One-way delay of every datagram.
const DELAY: Duration = Duration::from_micros(50);
/// Time between two sessions' handshakes.
const CONNECT_GAP: Duration = Duration::from_micros(100);

/// What happens next in virtual time.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Item {
    /// Client session `i` starts its handshake.
    Connect(u32),
    /// Client session `i` sends its next message.
    Send(u32),
    /// A datagram reaches the server from client `i` (index into the in-flight queue).
    ToServer(u32),
    /// A datagram reaches client `i`.
    ToClient(u32),
}

/// Counters of one run.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    echoed: u64,
    to_server: u64,
    to_client: u64,
    server_timer_wakes: u64,
}

/// Both endpoints, the network between them and the schedule.
struct World {
    server: Endpoint<u32>,
    clients: Endpoint<u32>,
    handles: Vec<Option<soe_session::SessionHandle>>,
    period: Duration,
    agenda: BinaryHeap<Reverse<(Instant, Item)>>,
    /// Datagrams in flight, per direction, in order of arrival (one delay for all keeps order).
    up: VecDeque<(u32, Vec<u8>)>,
    down: VecDeque<(u32, Vec<u8>)>,
    now: Instant,
    /// The server's next deadline, as its last turn left it (what a driver arms its timer with).
    server_deadline: Option<Instant>,
    buf: Vec<u8>,
    /// What the server's last turn sent, in buffers reused from turn to turn.
    outbox: Outbox,
    counts: Counts,
    payload: Bytes,
}

fn main() {
    let args = Args::parse();
    let t0 = Instant::now();
    let n = args.sessions.max(1);
    let mut world = World::new(&args, t0);
    let start = t0 + CONNECT_GAP * n + Duration::from_millis(500);
    let window_start = start + Duration::from_secs_f64(args.warm_up);
    let end = window_start + Duration::from_secs_f64(args.seconds);
    let mut at_window = None;
    loop {
        let measured = world.now >= window_start;
        if measured && at_window.is_none() {
            at_window = Some(world.counts);
        }
        if !world.step(measured, end) {
            break;
        }
    }
    world.report(&args, at_window.unwrap_or_default());
}

impl World {
    /// The endpoints, the handshakes spread out (100 µs apart, as a real server sees them
    /// arrive) and, unless idle, every session's sends with their phases spread evenly.
    fn new(args: &Args, t0: Instant) -> Self {
        let session = Arc::new(SessionConfig::new("SoeBench").with_udp_length(512));
        let recording = soe_session::RecordingConfig::new().with_every_session(args.record);
        let server = Endpoint::new(Arc::new(
            EndpointConfig::server(session.clone())
                .with_max_sessions(1_000_000)
                .with_recording(recording),
        ));
        let clients = Endpoint::new(Arc::new(
            EndpointConfig::client(session).with_max_sessions(1_000_000),
        ));
        let n = args.sessions.max(1);
        let period = Duration::from_secs_f64(1.0 / args.rate.max(1e-3));
        let mut agenda = BinaryHeap::new();
        for i in 0..n {
            agenda.push(Reverse((t0 + CONNECT_GAP * i, Item::Connect(i))));
        }
        let start = t0 + CONNECT_GAP * n + Duration::from_millis(500);
        if !args.idle {
            for i in 0..n {
                let phase = period.mul_f64(f64::from((i * 7919) % n) / f64::from(n));
                agenda.push(Reverse((start + phase, Item::Send(i))));
            }
        }
        Self {
            server,
            clients,
            handles: vec![None; n as usize],
            period,
            agenda,
            up: VecDeque::new(),
            down: VecDeque::new(),
            now: t0,
            server_deadline: None,
            buf: Vec::with_capacity(2048),
            outbox: Outbox::default(),
            counts: Counts::default(),
            payload: Bytes::from(vec![0x5Au8; 100]),
        }
    }

    /// Does the next thing that happens (an agenda item, or a deadline of either side);
    /// `false` once nothing is left before `end`.
    fn step(&mut self, measured: bool, end: Instant) -> bool {
        // Flush the clients' datagrams into flight.
        while let Some(t) = self.clients.poll_transmit(self.now, &mut self.buf) {
            self.up
                .push_back((t.destination, self.buf[..t.len].to_vec()));
            let at = self.now + DELAY;
            self.agenda
                .push(Reverse((at, Item::ToServer(t.destination))));
        }
        let next_item = self.agenda.peek().map(|Reverse((t, _))| *t);
        let server_deadline = self.server_deadline;
        let client_deadline = self.clients.poll_timeout();
        let next = [next_item, server_deadline, client_deadline]
            .into_iter()
            .flatten()
            .min();
        let Some(next) = next.filter(|&t| t < end) else {
            return false;
        };
        self.now = self.now.max(next);
        if client_deadline.is_some_and(|d| d <= self.now) {
            self.clients.handle_timeout(self.now);
        }
        if server_deadline.is_some_and(|d| d <= self.now) {
            self.serve(measured, None);
            return true;
        }
        if let Some(Reverse((_, item))) = self.agenda.pop() {
            self.happen(measured, item);
        }
        true
    }

    fn happen(&mut self, measured: bool, item: Item) {
        match item {
            Item::Connect(i) => self.handles[i as usize] = self.clients.connect(self.now, i).ok(),
            Item::Send(i) => {
                self.agenda
                    .push(Reverse((self.now + self.period, Item::Send(i))));
                if let Some(h) = self.handles[i as usize] {
                    let _ = self.clients.send(h, Channel::ZERO, self.payload.clone());
                }
            }
            Item::ToServer(_) => {
                if let Some(datagram) = self.up.pop_front() {
                    self.counts.to_server += 1;
                    self.serve(measured, Some(datagram));
                }
            }
            Item::ToClient(_) => {
                if let Some((to, datagram)) = self.down.pop_front() {
                    self.counts.to_client += 1;
                    self.clients.handle_datagram(self.now, to, &datagram);
                    while self.clients.poll_event().is_some() {}
                }
            }
        }
    }

    /// One wake-up of the server (counted inside the window), its datagrams put in flight.
    fn serve(&mut self, measured: bool, datagram: Option<(u32, Vec<u8>)>) {
        let out = &mut self.outbox;
        let input = datagram.as_ref().map(|(from, d)| (*from, d.as_slice()));
        let (server, now, counts) = (&mut self.server, self.now, &mut self.counts);
        let timer_due = self.server_deadline.is_some_and(|d| d <= now);
        let turn = Turn {
            now,
            datagram: input,
            timer_due,
        };
        self.server_deadline = if measured {
            server_turn(server, turn, counts, out)
        } else {
            warm_turn(server, turn, counts, out)
        };
        deliver_down(&mut self.down, &mut self.agenda, self.now, out);
    }

    /// Prints what happened in the window (`before`: the counts when it opened).
    fn report(&self, args: &Args, before: Counts) {
        let counts = self.counts;
        let server = &self.server;
        let n = args.sessions.max(1);
        let c = Counts {
            echoed: counts.echoed - before.echoed,
            to_server: counts.to_server - before.to_server,
            to_client: counts.to_client - before.to_client,
            server_timer_wakes: counts.server_timer_wakes - before.server_timer_wakes,
        };
        let stats = server.endpoint_stats();
        println!(
            "sessions {n} rate {} window {} s: echoed {} ({:.0}/s), server datagrams in {} out {}, \
         server timer wakes {} (endpoint: {} wakes, {} sessions woken, {} transmit visits in all), \
         live sessions {}",
            args.rate,
            args.seconds,
            c.echoed,
            c.echoed as f64 / args.seconds,
            c.to_server,
            c.to_client,
            c.server_timer_wakes,
            stats.timer_wakes,
            stats.sessions_woken,
            stats.transmit_visits,
            server.len(),
        );
        if args.record {
            let r = server.recorder_stats();
            println!(
                "recorder: {} sessions recorded, pool {} bytes ({:.0} per session), {} entries, {} dropped",
                r.recording,
                r.pool_bytes,
                r.pool_bytes as f64 / f64::from(n),
                r.entries,
                r.dropped
            );
        }
        if std::env::var_os("ENDPOINT_COST_STATS").is_some() {
            println!("{stats:?}");
        }
    }
}

/// The datagrams one turn of the server sent, kept as a driver keeps a send batch: the bytes
/// one after the other in one buffer, and each datagram's destination and length. Its buffers
/// are reused from turn to turn, so a turn allocates nothing.
#[derive(Debug, Default)]
struct Outbox {
    /// The buffer `poll_transmit` writes into.
    buf: Vec<u8>,
    bytes: Vec<u8>,
    sent: Vec<(u32, usize)>,
}

/// Puts the server's datagrams in flight to the clients.
fn deliver_down(
    down: &mut VecDeque<(u32, Vec<u8>)>,
    agenda: &mut BinaryHeap<Reverse<(Instant, Item)>>,
    now: Instant,
    out: &Outbox,
) {
    let mut at = 0;
    for &(to, len) in &out.sent {
        agenda.push(Reverse((now + DELAY, Item::ToClient(to))));
        down.push_back((to, out.bytes[at..at + len].to_vec()));
        at += len;
    }
}

/// What one wake-up of the server is given.
#[derive(Debug, Clone, Copy)]
struct Turn<'a> {
    now: Instant,
    /// The datagram that woke it, if any.
    datagram: Option<(u32, &'a [u8])>,
    /// Whether the deadline its last turn left has come (a driver's timer fired).
    timer_due: bool,
}

/// One wake-up of the server inside the measured window (the only function callgrind counts);
/// returns the server's next deadline.
#[inline(never)]
fn server_turn(
    server: &mut Endpoint<u32>,
    turn_: Turn<'_>,
    counts: &mut Counts,
    out: &mut Outbox,
) -> Option<Instant> {
    let next = turn(server, turn_, counts, out);
    // Keeps the two functions apart (identical ones may be folded into one symbol).
    black_box(1);
    next
}

/// The same before the window (not counted).
#[inline(never)]
fn warm_turn(
    server: &mut Endpoint<u32>,
    turn_: Turn<'_>,
    counts: &mut Counts,
    out: &mut Outbox,
) -> Option<Instant> {
    let next = turn(server, turn_, counts, out);
    black_box(2);
    next
}

/// What a driver does on one wake-up (soe-runtime's `Driver`): the datagram, the due deadlines
/// (when the timer armed at the end of the last turn has fired), the events (each message
/// echoed the way it came), every datagram ready, then the next deadline to arm the timer
/// with.
#[inline(always)]
fn turn(
    server: &mut Endpoint<u32>,
    turn: Turn<'_>,
    counts: &mut Counts,
    out: &mut Outbox,
) -> Option<Instant> {
    let now = turn.now;
    if let Some((from, bytes)) = turn.datagram {
        server.handle_datagram(now, from, bytes);
    }
    if turn.timer_due {
        counts.server_timer_wakes += 1;
        server.handle_timeout(now);
    }
    counts.echoed += soe_bench::echo_events(server);
    out.bytes.clear();
    out.sent.clear();
    while let Some(t) = server.poll_transmit(now, &mut out.buf) {
        out.bytes.extend_from_slice(black_box(&out.buf[..t.len]));
        out.sent.push((t.destination, t.len));
    }
    server.poll_timeout()
}
