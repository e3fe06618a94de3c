//! The loop that ties a run together: it advances virtual time to the next thing due (a
//! client's deadline or arrival, the server's deadline, a fault, a stranger's datagram),
//! lets the [`Cluster`] act on it, moves what the endpoints send across the [`Network`], hands
//! the applications' events to the [`Auditor`] and the workload, and has the auditor check
//! the invariants after every step and at the end.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use bytes::Bytes;
use soe_netem::LinkConfig;
use soe_session::{Channel, Delivery, Event, SessionHandle, SplitMix64};

use crate::auditor::{Auditor, End};
use crate::cluster::{Cluster, SERVER};
use crate::faults::{Fault, FaultPlan};
use crate::message::{DOWN, UP};
use crate::network::{self, Network, Path, below, between, chance};
use crate::options::{Options, Plant};
use crate::outcome::Outcome;
use crate::plant::Planter;
use crate::workload::{self, Msg, Workload};

/// Consecutive loop iterations at one instant after which the run is declared stuck.
const STUCK_ITERATIONS: u32 = 100_000;

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
    w.cluster.clients[0].workload = Workload::Steady(period);
    let link = LinkConfig {
        delay: Duration::from_millis(40),
        loss,
        rate: 0,
        ..LinkConfig::default()
    };
    w.net.paths[0] = Path::with_links(link, seed ^ 0x11, seed ^ 0x22);
    w.run();
    w.finish()
}

/// Which clients have something due, and when each next does.
#[derive(Debug, Default)]
struct Scheduler {
    /// (when, client), possibly stale: a client is due only at its current `wake`.
    heap: BinaryHeap<Reverse<(Instant, usize)>>,
    wake: Vec<Option<Instant>>,
    /// Clients that may have something to send or a new deadline, in the order touched.
    touched: Vec<usize>,
    is_touched: Vec<bool>,
    due: Vec<usize>,
}

impl Scheduler {
    fn new(clients: usize) -> Self {
        Self {
            wake: vec![None; clients],
            is_touched: vec![false; clients],
            ..Self::default()
        }
    }

    fn next(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((t, _))| *t)
    }

    fn touch(&mut self, i: usize) {
        if !self.is_touched[i] {
            self.is_touched[i] = true;
            self.touched.push(i);
        }
    }

    /// Moves the clients due at `now` into `due`.
    fn take_due(&mut self, now: Instant) {
        while let Some(&Reverse((t, i))) = self.heap.peek() {
            if t > now {
                break;
            }
            self.heap.pop();
            if self.wake[i] == Some(t) {
                self.wake[i] = None;
                self.due.push(i);
            }
        }
    }

    /// Client `i`'s next deadline is `at`.
    fn wake_at(&mut self, i: usize, at: Option<Instant>) {
        self.is_touched[i] = false;
        if at != self.wake[i] {
            self.wake[i] = at;
            if let Some(t) = at {
                self.heap.push(Reverse((t, i)));
            }
        }
    }
}

/// Counts loop iterations at one instant.
#[derive(Debug)]
struct Stall {
    at: Instant,
    same: u32,
}

impl Stall {
    /// Whether the clock has stood at `now` for too many iterations.
    fn stuck(&mut self, now: Instant) -> bool {
        if now == self.at {
            self.same += 1;
            return self.same > STUCK_ITERATIONS;
        }
        self.same = 0;
        self.at = now;
        false
    }
}

/// The whole simulated system.
struct World {
    opts: Options,
    rng: SplitMix64,
    start: Instant,
    now: Instant,
    /// When new traffic and faults stop.
    active_end: Instant,
    end: Instant,
    cluster: Cluster,
    net: Network,
    faults: FaultPlan,
    audit: Auditor,
    planter: Planter,
    sched: Scheduler,
    buf: Vec<u8>,
    out: Outcome,
    /// The client whose events are traced to stderr (`SOE_SIM_TRACE`).
    trace: Option<usize>,
}

impl World {
    fn new(seed: u64, opts: Options) -> Self {
        let mut rng = SplitMix64::new(seed ^ 0x51D_5EED);
        let start = Instant::now();
        let n = 1 + below(&mut rng, opts.max_clients as u64) as usize;
        let trace = std::env::var("SOE_SIM_TRACE")
            .ok()
            .and_then(|v| v.parse().ok());
        let mut cluster = Cluster::new(&mut rng, &opts, seed, n);
        let mut net = Network::new(seed, start, trace);
        for _ in 0..n {
            cluster.add_client(Workload::draw(&mut rng));
            net.paths.push(Path::draw(&mut rng));
        }
        let faults = FaultPlan::draw(&mut rng, start, n, &opts);
        let active_end = start + opts.active;
        Self {
            rng,
            start,
            now: start,
            active_end,
            end: active_end + opts.settle,
            cluster,
            net,
            faults,
            audit: Auditor::new(start, n, trace),
            planter: Planter::new(opts.plant),
            sched: Scheduler::new(n),
            buf: Vec::new(),
            out: Outcome {
                seed,
                clients: n,
                ..Outcome::default()
            },
            trace,
            opts,
        }
    }

    fn fail(&mut self, what: String) {
        self.audit.fail(self.now, &self.cluster, what);
    }

    fn finish(mut self) -> Outcome {
        let a = &mut self.audit;
        self.out.reliable_delivered = a.reliable_delivered;
        self.out.unreliable_delivered = a.unreliable_delivered;
        self.out.reliable_packets_up = a.reliable_packets_up;
        self.out.reliable_packets_down = a.reliable_packets_down;
        self.out.simulated = self.now - self.start;
        self.out.violation = a.take_violation();
        self.out
    }

    // ----- the loop -----

    fn run(&mut self) {
        let mut stall = Stall {
            at: self.now,
            same: 0,
        };
        while self.audit.ok() {
            let Some(next) = self.next_event().filter(|&t| t <= self.end) else {
                break;
            };
            self.now = self.now.max(next);
            if stall.stuck(self.now) {
                let what = self.stuck_detail();
                self.fail(format!(
                    "stuck: the clock does not advance (a deadline that never moves): {what}"
                ));
                break;
            }
            self.out.steps += 1;
            self.step();
        }
        if self.audit.ok() {
            let (now, settle_from, end) = (self.now, self.active_end, self.end);
            self.audit.check_end(now, &self.cluster, settle_from, end);
        }
    }

    /// The next moment something is due.
    fn next_event(&self) -> Option<Instant> {
        [
            self.sched.next(),
            self.cluster.server.ep.poll_timeout(),
            self.faults.next_at(),
            self.net.next_stranger_arrival(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Everything due now, then what it sent, then the checks.
    fn step(&mut self) {
        let now = self.now;
        while let Some(f) = self.faults.pop_due(now) {
            self.apply(f);
        }
        self.sched.take_due(now);
        let mut due = std::mem::take(&mut self.sched.due);
        for &i in &due {
            self.service(i);
        }
        due.clear();
        self.sched.due = due;
        while let Some(d) = self.net.pop_stranger(now) {
            self.deliver_to_server(&d);
        }
        if self
            .cluster
            .server
            .ep
            .poll_timeout()
            .is_some_and(|t| t <= now)
        {
            self.cluster.server.ep.handle_timeout(now);
        }
        self.flush();
        self.check_step();
    }

    /// What is due at the current instant (for the stuck report).
    fn stuck_detail(&self) -> String {
        let now = self.now;
        let due = |t: Option<Instant>| t.is_some_and(|t| t <= now);
        let server = &self.cluster.server;
        let mut out = String::new();
        if due(server.ep.poll_timeout()) {
            out.push_str("the server's deadline; ");
            for (&h, &idx) in &server.sessions {
                if let Some(sess) = server.ep.session(h).filter(|s| due(s.poll_timeout())) {
                    let _ = write!(
                        out,
                        "server session of #{idx} ({:?}, remote {:#x}); ",
                        sess.state(),
                        server.ep.remote(h).unwrap_or(0)
                    );
                }
            }
        }
        for (i, (c, p)) in self.cluster.clients.iter().zip(&self.net.paths).enumerate() {
            if due(c.ep.poll_timeout()) {
                let st = c.handle.and_then(|h| c.ep.state(h));
                let _ = write!(out, "client {i}'s deadline (state {st:?}); ");
            }
            if p.next_arrivals().into_iter().any(due) {
                let _ = write!(out, "client {i}'s link; ");
            }
            if due(c.next_tick) || due(c.reconnect_at) {
                let _ = write!(out, "client {i}'s application; ");
            }
        }
        out
    }

    fn touch(&mut self, i: usize) {
        self.sched.touch(i);
    }

    /// Everything client `i` has due now: arrivals both ways, its timers, its application.
    fn service(&mut self, i: usize) {
        let now = self.now;
        self.touch(i);
        while let Some((d, corrupted)) = self.net.pop_down(now, i, &mut self.rng) {
            self.out.faults.corrupted += u64::from(corrupted);
            let c = &mut self.cluster.clients[i];
            c.rx += 1;
            c.ep.handle_datagram(now, SERVER, &d);
            self.out.datagrams += 1;
        }
        while let Some((d, corrupted)) = self.net.pop_up(now, i, &mut self.rng) {
            self.out.faults.corrupted += u64::from(corrupted);
            self.out.datagrams += 1;
            self.deliver_to_server(&d);
        }
        let c = &mut self.cluster.clients[i];
        if c.ep.poll_timeout().is_some_and(|t| t <= now) {
            c.ep.handle_timeout(now);
        }
        if c.reconnect_at.is_some_and(|t| t <= now) {
            c.reconnect_at = None;
            self.connect(i);
        }
        let c = &mut self.cluster.clients[i];
        if c.next_tick.is_some_and(|t| t <= now) {
            let next = now + c.workload.period();
            c.next_tick = (next < self.active_end).then_some(next);
            workload::tick(&mut self.cluster, &mut self.audit, now, i);
        }
    }

    /// A datagram prefixed with its source address reaches the server.
    fn deliver_to_server(&mut self, d: &[u8]) {
        if let Some((from, body)) = network::source(d) {
            self.cluster.server.receive(self.now, from, body);
        }
    }

    /// Moves what the endpoints send onto the network and hands their events on, until
    /// nothing is left; then files each client touched under its next deadline.
    fn flush(&mut self) {
        loop {
            let mut any = self.flush_server();
            let mut k = 0;
            while let Some(&i) = self.sched.touched.get(k) {
                k += 1;
                any |= self.flush_client(i);
            }
            if !any {
                break;
            }
        }
        for i in std::mem::take(&mut self.sched.touched) {
            let deadlines = self.cluster.clients[i].deadlines();
            let arrivals = self.net.paths[i].next_arrivals();
            let at = deadlines.into_iter().chain(arrivals).flatten().min();
            self.sched.wake_at(i, at);
        }
    }

    /// The server's datagrams and events; whether there were any.
    fn flush_server(&mut self) -> bool {
        let now = self.now;
        let mut any = false;
        while let Some(t) = self.cluster.server.ep.poll_transmit(now, &mut self.buf) {
            any = true;
            self.cluster.server.tx += 1;
            let Some(len) = self.check_len(t.len, "server") else {
                continue;
            };
            if let Some(i) = self.net.send_down(now, t.destination, &self.buf[..len]) {
                self.touch(i);
            }
        }
        while let Some((h, e)) = self.cluster.server.ep.poll_event() {
            any = true;
            self.server_event(h, e);
        }
        any
    }

    /// Client `i`'s datagrams and events; whether there were any.
    fn flush_client(&mut self, i: usize) -> bool {
        let now = self.now;
        let mut any = false;
        while let Some(t) = self.cluster.clients[i].ep.poll_transmit(now, &mut self.buf) {
            any = true;
            self.cluster.clients[i].tx += 1;
            let Some(len) = self.check_len(t.len, "client") else {
                continue;
            };
            self.net.send_up(now, i, &self.buf[..len], &mut self.rng);
        }
        while let Some((h, e)) = self.cluster.clients[i].ep.poll_event() {
            any = true;
            self.client_event(i, h, e);
        }
        any
    }

    /// Every datagram fits udp_length.
    fn check_len(&mut self, len: usize, who: &str) -> Option<usize> {
        let max = self.cluster.setup.session.udp_length() as usize;
        if len > max || len > self.buf.len() {
            self.fail(format!(
                "{who} sent a {len}-byte datagram; udp_length is {max}"
            ));
            return None;
        }
        Some(len)
    }

    // ----- the applications -----

    /// Client `i` opens a session (unless it has one or wants none).
    fn connect(&mut self, i: usize) {
        let now = self.now;
        let c = &mut self.cluster.clients[i];
        if c.retired || c.handle.is_some() {
            return;
        }
        match c.ep.connect(now, SERVER) {
            Ok(h) => {
                let session_id = c.ep.session(h).map_or(0, |s| s.session_id());
                c.handle = Some(h);
                let (idx, reconnect) = self.audit.ledger.open(now, i, session_id, h);
                c.instance = Some(idx);
                self.out.faults.reconnects += u64::from(reconnect);
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
        let ledger = &self.audit.ledger;
        let Some(idx) = self.cluster.clients[i]
            .instance
            .filter(|&x| ledger.instances[x].client_handle == h)
        else {
            self.fail(format!(
                "client {i}: event {e:?} for a session it does not know"
            ));
            return;
        };
        let now = self.now;
        match e {
            Event::Connected => {
                self.audit.ledger.instances[idx].connected = true;
                let c = &mut self.cluster.clients[i];
                c.live = true;
                if now < self.active_end {
                    c.next_tick = Some(now);
                }
            }
            Event::Message {
                channel,
                data,
                kind,
            } => {
                self.audit
                    .delivered(now, &self.cluster, idx, DOWN, channel, kind, &data);
            }
            Event::Closed { reason, by_peer } => {
                self.audit.ledger.instances[idx].client_end = Some(End::Told(reason, by_peer));
                let (cluster, net) = (&self.cluster, &self.net);
                self.audit
                    .judge_end(now, cluster, net, idx, false, reason, by_peer);
                let back = (!self.cluster.clients[i].retired).then(|| {
                    between(
                        &mut self.rng,
                        Duration::from_millis(200),
                        Duration::from_secs(3),
                    )
                });
                self.cluster.ended(now, i, back);
            }
            _ => self.fail(format!("client {i}: unexpected event {e:?}")),
        }
    }

    fn server_event(&mut self, h: SessionHandle, e: Event) {
        if let Event::Accepted = e {
            self.accepted(h);
            return;
        }
        let Some(&idx) = self.cluster.server.sessions.get(&h) else {
            self.fail(format!("server: event {e:?} for an unknown session"));
            return;
        };
        match e {
            Event::Message {
                channel,
                data,
                kind,
            } => self.server_received(idx, channel, kind, data),
            Event::Closed { reason, by_peer } => {
                self.audit.ledger.instances[idx].server_end = Some(End::Told(reason, by_peer));
                self.cluster.server.sessions.remove(&h);
                let (cluster, net) = (&self.cluster, &self.net);
                self.audit
                    .judge_end(self.now, cluster, net, idx, true, reason, by_peer);
            }
            _ => self.fail(format!("server: unexpected event {e:?}")),
        }
    }

    /// The server application learns of session `h`: it must be the latest one its client
    /// opened with that session id, and not accepted before.
    fn accepted(&mut self, h: SessionHandle) {
        let server = &self.cluster.server.ep;
        let remote = server.remote(h).unwrap_or(SERVER);
        let sid = server.session(h).map_or(0, |s| s.session_id());
        let found = network::client_of(remote).and_then(|i| self.audit.ledger.find(i, sid));
        match found {
            Some(idx) if self.audit.ledger.instances[idx].server_handle.is_none() => {
                self.audit.ledger.instances[idx].server_handle = Some(h);
                self.cluster.server.sessions.insert(h, idx);
            }
            _ => self.fail(format!(
                "server accepted session {sid:#x} from {remote:#x}, which no client opened (or \
                 it was accepted twice)"
            )),
        }
    }

    /// The server application receives a message of instance `idx` (through a planted bug,
    /// if one is due), checks it, and echoes it if its client runs the echo workload.
    fn server_received(&mut self, idx: usize, channel: Channel, kind: Delivery, data: Bytes) {
        let now = self.now;
        let Some(data) = self.planter.tamper(now - self.start, kind, data) else {
            return;
        };
        self.audit
            .delivered(now, &self.cluster, idx, UP, channel, kind, &data);
        let client = self.audit.ledger.instances[idx].client;
        if self.cluster.clients[client].workload == Workload::Echo
            && kind == Delivery::Reliable
            && now < self.active_end
        {
            workload::send(
                &mut self.cluster,
                &mut self.audit,
                now,
                idx,
                DOWN,
                Msg::echo(),
            );
        }
    }

    // ----- faults -----

    fn apply(&mut self, f: Fault) {
        match f {
            Fault::Start(i) => self.connect(i),
            Fault::Close(i) => self.close(i),
            Fault::Vanish(i) => self.vanish(i),
            Fault::Rebind(i) => {
                self.out.faults.rebinds += 1;
                self.net.rebind(self.now, i);
            }
            Fault::Dark {
                client,
                up,
                down,
                length,
            } => self.go_dark(client, up, down, length),
            Fault::Restart => self.restart(),
            Fault::Flood { left } => self.flood(left),
            Fault::Replay { left } => self.replay(left),
        }
    }

    /// Client `i`'s application closes its session, and may retire.
    fn close(&mut self, i: usize) {
        self.out.faults.closes += 1;
        let retire = chance(&mut self.rng, 0.3);
        if let Some(idx) = self.cluster.close(self.now, i, retire) {
            self.audit.ledger.instances[idx].app_closed = true;
        }
        self.touch(i);
    }

    /// Client `i` vanishes, and may come back with a new endpoint.
    fn vanish(&mut self, i: usize) {
        self.out.faults.vanishes += 1;
        // The endpoint's own counters must agree with what it handed over.
        self.audit.check_client_counters(self.now, &self.cluster, i);
        let retire = chance(&mut self.rng, 0.3);
        let back = between(
            &mut self.rng,
            Duration::from_secs(1),
            Duration::from_secs(8),
        );
        if let Some(idx) = self.cluster.vanish(self.now, i, retire, back) {
            let inst = &mut self.audit.ledger.instances[idx];
            inst.client_end = Some(End::Vanished);
            inst.disturbed = true;
        }
        self.touch(i);
    }

    /// An outage of `client`'s path; one longer than the idle timeout may end its sessions.
    fn go_dark(&mut self, client: usize, up: bool, down: bool, length: Duration) {
        let idle = self.cluster.setup.session.idle_timeout();
        let long = length + Duration::from_secs(2) >= idle.unwrap_or(Duration::MAX);
        if long {
            self.out.faults.long_outages += 1;
            let idx = self.cluster.clients[client].instance;
            self.audit.ledger.disturb(idx);
        } else {
            self.out.faults.short_outages += 1;
        }
        let until = self.now + length;
        self.net.go_dark(client, up, down, until);
        if long {
            self.audit.mark_dark(client, until);
        }
    }

    /// The server restarts, losing every session.
    fn restart(&mut self) {
        self.out.faults.restarts += 1;
        self.audit.check_server_counters(self.now, &self.cluster);
        self.cluster.restart_server();
        self.audit.ledger.server_restarted();
    }

    fn flood(&mut self, left: u32) {
        let (requests, garbage) = self.net.flood(self.now, &mut self.rng);
        self.out.faults.flood_requests += requests;
        self.out.faults.garbage += garbage;
        if left > 1 && self.now < self.active_end {
            let at = self.now + Duration::from_millis(500);
            self.faults.schedule(at, Fault::Flood { left: left - 1 });
        }
    }

    fn replay(&mut self, left: u32) {
        self.out.faults.replays += self.net.replay(self.now, &mut self.rng);
        if left > 1 && self.now < self.active_end {
            let at = self.now + Duration::from_secs(1);
            self.faults.schedule(at, Fault::Replay { left: left - 1 });
        }
    }

    // ----- checks -----

    /// The checks after every step; a planted bug strikes here when due.
    fn check_step(&mut self) {
        let now = self.now;
        self.audit.check_limits(now, &self.cluster);
        self.plant_in_server();
        if self.out.steps.is_multiple_of(self.opts.audit_every.max(1)) || self.planter.planted() {
            self.audit.check_timers(now, &self.cluster);
            self.audit.check_queues(now, &self.cluster);
        }
        self.audit.disturb_dark(now, &self.cluster);
    }

    /// [`Plant::LoseDeadline`] and [`Plant::UnboundedQueue`] strike the server session of the
    /// lowest live instance.
    fn plant_in_server(&mut self) {
        let server = &mut self.cluster.server;
        match self.planter.due(self.now - self.start) {
            Some(Plant::LoseDeadline) => {
                // It loses its place in the timer set.
                let victim = server.sessions.iter().min_by_key(|&(_, &idx)| idx);
                if let Some((&h, _)) = victim {
                    self.planter.struck();
                    server.ep.plant_lost_deadline(h);
                }
            }
            Some(Plant::UnboundedQueue) => {
                // Its application queues one message more than the configured limit, all at
                // once; only the planted bug lets them in.
                let Some(idx) = server.sessions.values().copied().min() else {
                    return;
                };
                self.planter.struck();
                let limit = self.cluster.setup.session.reliable().max_queued_messages;
                for _ in 0..=limit {
                    let m = Msg::reliable(0, 16, 16);
                    if !workload::send(&mut self.cluster, &mut self.audit, self.now, idx, DOWN, m) {
                        break;
                    }
                }
            }
            _ => {}
        }
    }
}
