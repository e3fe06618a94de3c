//! One run: a stack, a path, a workload, a seed; a clock that jumps to the next event.

use std::time::{Duration, Instant};

use crate::emulator::{GilbertElliott, Link, LinkConfig, LinkStats};
use crate::stack::{Side, Stack, StackCounters, StackKind};
use crate::workload::{Traffic, Verdict, Workload};

/// The impairments of a run, applied alike in both directions.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    /// A short name for tables and filters.
    pub name: String,
    /// Independent loss probability per datagram.
    pub loss: f64,
    /// Burst loss, if any.
    pub burst: Option<GilbertElliott>,
    /// Probability a datagram is held back by `reorder_delay`.
    pub reorder: f64,
    /// Extra delay of a held-back datagram.
    pub reorder_delay: Duration,
    /// Probability a datagram arrives twice.
    pub duplicate: f64,
}

impl Condition {
    /// Independent loss only.
    pub fn loss(loss: f64) -> Self {
        Self {
            name: format!("loss {}%", loss * 100.0),
            loss,
            burst: None,
            reorder: 0.0,
            reorder_delay: Duration::ZERO,
            duplicate: 0.0,
        }
    }

    /// Gilbert–Elliott bursts averaging 10 % loss, stepped in time
    /// ([`GilbertElliott::TEN_PERCENT_TIMED`]: the path is down 10 % of the time, 20 ms at a time).
    pub fn burst() -> Self {
        Self {
            name: "burst 10%".into(),
            burst: Some(GilbertElliott::TEN_PERCENT_TIMED),
            ..Self::loss(0.0)
        }
    }

    /// 5 % of datagrams held back 10 ms.
    pub fn reorder() -> Self {
        Self {
            name: "reorder 5%/10ms".into(),
            reorder: 0.05,
            reorder_delay: Duration::from_millis(10),
            ..Self::loss(0.0)
        }
    }

    /// 5 % of datagrams duplicated.
    pub fn duplicate() -> Self {
        Self {
            name: "dup 5%".into(),
            duplicate: 0.05,
            ..Self::loss(0.0)
        }
    }

    /// The expected fraction of datagrams lost.
    pub fn mean_loss(&self) -> f64 {
        let burst = self.burst.map_or(0.0, |b| b.mean_loss());
        1.0 - (1.0 - self.loss) * (1.0 - burst)
    }

    /// The link of one direction under this condition, with the given round trip and
    /// bottleneck.
    pub fn link(&self, rtt: Duration, rate: u64, queue: usize) -> LinkConfig {
        LinkConfig {
            delay: rtt / 2,
            loss: self.loss,
            burst: self.burst,
            reorder: self.reorder,
            reorder_delay: self.reorder_delay,
            duplicate: self.duplicate,
            rate,
            queue,
            ..LinkConfig::default()
        }
    }
}

/// A session that delivers nothing for this long while messages are outstanding is stalled.
pub const STALL: Duration = Duration::from_secs(10);

/// Everything one run depends on.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The stack under test.
    pub stack: StackKind,
    /// The traffic.
    pub workload: Workload,
    /// The round trip (each direction delays by half).
    pub rtt: Duration,
    /// The impairments.
    pub condition: Condition,
    /// Bottleneck rate per direction, bytes per second (0: unlimited).
    pub rate: u64,
    /// Bottleneck queue per direction, datagrams.
    pub queue: usize,
    /// How long the workload sends (simulated).
    pub duration: Duration,
    /// After the workload stops, how long the run waits for the last messages (simulated).
    /// Longer than the 30 s unacknowledged timeout, so a stalled session shows as a death.
    pub drain: Duration,
    /// The seed of every random choice (links, session ids).
    pub seed: u64,
}

impl RunConfig {
    /// A run with the default bottleneck (1 MB/s, 64 datagrams), 20 s of traffic and 40 s of
    /// drain.
    pub fn new(
        stack: StackKind,
        workload: Workload,
        rtt: Duration,
        condition: Condition,
        seed: u64,
    ) -> Self {
        Self {
            stack,
            workload,
            rtt,
            condition,
            rate: 1_000_000,
            queue: 64,
            duration: Duration::from_secs(20),
            drain: Duration::from_secs(40),
            seed,
        }
    }

    /// Sets [`RunConfig::duration`].
    #[must_use]
    pub fn with_duration(mut self, duration: Duration) -> Self {
        self.duration = duration;
        self
    }
}

/// What one run measured.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// The seed it ran with.
    pub seed: u64,
    /// Application bytes delivered per simulated second while the workload sent.
    pub goodput: f64,
    /// Latency samples of the workload's measured stream (see [`Workload`]).
    pub latencies: Vec<Duration>,
    /// Reliable-packet counters.
    pub counters: StackCounters,
    /// Why a session ended before the run did, if one did.
    pub death: Option<String>,
    /// Whether the handshake completed (it crosses an unimpaired path).
    pub connected: bool,
    /// Message accounting, losses counted after the drain.
    pub verdict: Verdict,
    /// Client-to-server link counters.
    pub up: LinkStats,
    /// Server-to-client link counters.
    pub down: LinkStats,
    /// Simulated time the run took, handshake and drain included.
    pub simulated: Duration,
    /// The longest time messages were outstanding while none was delivered
    /// ([`crate::workload::Traffic::longest_stall`]).
    pub longest_stall: Duration,
}

impl RunResult {
    /// Resends per reliable packet sent for the first time.
    pub fn resend_ratio(&self) -> f64 {
        if self.counters.packets_sent == 0 {
            0.0
        } else {
            self.counters.packets_resent as f64 / self.counters.packets_sent as f64
        }
    }

    /// Whether the run was clean: connected, no death, every message exactly once in order.
    /// A stall is judged apart ([`RunResult::stalled`]).
    pub fn is_clean(&self) -> bool {
        self.connected && self.death.is_none() && self.verdict.is_clean()
    }

    /// Whether messages were outstanding for [`STALL`] or longer with none delivered.
    pub fn stalled(&self) -> bool {
        self.longest_stall >= STALL
    }
}

/// The virtual-time driver: one stack, two links, one workload.
struct Driver {
    now: Instant,
    stack: Box<dyn Stack>,
    up: Link,
    down: Link,
    traffic: Option<Traffic>,
    out: Vec<(Side, Vec<u8>)>,
}

impl Driver {
    fn pump(&mut self) {
        if let Some(t) = self.traffic.as_mut() {
            t.pump(self.now, self.stack.as_mut());
        }
        self.stack.poll_transmit(self.now, &mut self.out);
        for (from, d) in self.out.drain(..) {
            match from {
                Side::Client => self.up.send(self.now, d),
                Side::Server => self.down.send(self.now, d),
            }
        }
    }

    fn next_event(&self) -> Option<Instant> {
        [
            self.stack.poll_timeout(),
            self.up.next_arrival(),
            self.down.next_arrival(),
            self.traffic.as_ref().and_then(Traffic::poll_timeout),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Jumps to the next event (not past `limit`) and handles it. False when nothing is left
    /// before `limit` (the clock is then at `limit`).
    fn step(&mut self, limit: Instant) -> bool {
        self.pump();
        let Some(next) = self.next_event().filter(|&t| t <= limit) else {
            self.now = self.now.max(limit);
            return false;
        };
        self.now = self.now.max(next);
        while let Some(d) = self.up.pop_due(self.now) {
            self.stack.handle_datagram(self.now, Side::Server, &d);
        }
        while let Some(d) = self.down.pop_due(self.now) {
            self.stack.handle_datagram(self.now, Side::Client, &d);
        }
        if self.stack.poll_timeout().is_some_and(|t| t <= self.now) {
            self.stack.handle_timeout(self.now);
        }
        self.pump();
        true
    }
}

/// Runs one configuration.
pub fn run(config: &RunConfig) -> RunResult {
    let start = Instant::now();
    let link = config.condition.link(config.rtt, config.rate, config.queue);
    let mut d = Driver {
        now: start,
        stack: config.stack.build(start, config.seed),
        up: Link::new(link, config.seed ^ 0x0055_5500_AAAA_0001),
        down: Link::new(link, config.seed ^ 0x00AA_AA00_5555_0002),
        traffic: None,
        out: Vec::new(),
    };
    d.stack.start(start);
    let limit = start + Duration::from_secs(10);
    while !d.stack.is_established() && d.stack.death().is_none() && d.step(limit) {}
    let connected = d.stack.is_established();
    let mut goodput = 0.0;
    if connected {
        d.up.set_impaired(true);
        d.down.set_impaired(true);
        let t0 = d.now;
        d.traffic = Some(Traffic::new(config.workload, t0));
        let end = t0 + config.duration;
        while d.stack.death().is_none() && d.step(end) {}
        if let Some(t) = d.traffic.as_mut() {
            t.stop();
        }
        let elapsed = (d.now - t0).max(Duration::from_millis(1));
        goodput =
            d.traffic.as_ref().map_or(0, Traffic::measured_bytes) as f64 / elapsed.as_secs_f64();
        let drain_end = d.now + config.drain;
        while d.stack.death().is_none()
            && !d.traffic.as_ref().is_some_and(Traffic::is_drained)
            && d.step(drain_end)
        {}
    }
    let now = d.now;
    if let Some(t) = d.traffic.as_mut() {
        t.observe(now);
    }
    let traffic = d.traffic.as_ref();
    RunResult {
        seed: config.seed,
        goodput,
        latencies: traffic.map(|t| t.latencies().to_vec()).unwrap_or_default(),
        counters: d.stack.counters(),
        death: d.stack.death(),
        connected,
        verdict: traffic.map(Traffic::verdict).unwrap_or_default(),
        up: d.up.stats(),
        down: d.down.stats(),
        simulated: d.now - start,
        longest_stall: traffic.map_or(Duration::ZERO, Traffic::longest_stall),
    }
}
