//! One direction of an emulated path: a drop-tail bottleneck queue, then a lossy, reordering,
//! duplicating wire with a fixed one-way delay.
//!
//! Every datagram's fate is decided when it is sent, from the link's own seeded generator, so a
//! run is a pure function of its seeds. Nothing here has a clock: times come in as `now`.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::{Duration, Instant};

use soe_session::{RandomSource, SplitMix64};

/// The Gilbert–Elliott two-state burst-loss model.
///
/// The link changes state with the given probabilities per step; in the bad state a datagram is
/// lost with probability `loss_bad` (the good state adds no loss of its own: the independent
/// random loss of [`LinkConfig::loss`] applies in both states).
///
/// A step is one datagram (`step: None`, the classic form) or a span of time (`step:
/// Some(d)`). Per datagram, a burst lasts a number of datagrams whatever the time between
/// them, so on a direction that carries one ack a second a 12-datagram burst is a 12-second
/// outage; per time, a burst is a stretch of time, as interference or a congested hop is, and
/// every flow loses the same fraction of its datagrams.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GilbertElliott {
    /// Probability of moving from the good to the bad state, per step.
    pub p_good_to_bad: f64,
    /// Probability of moving from the bad to the good state, per step (the mean burst lasts
    /// `1 / p_bad_to_good` steps).
    pub p_bad_to_good: f64,
    /// Probability a datagram is lost while in the bad state.
    pub loss_bad: f64,
    /// A step: one datagram (`None`) or this much time.
    pub step: Option<Duration>,
}

impl GilbertElliott {
    /// Bursts of 4 datagrams on average, every datagram of a burst lost, 10 % loss overall.
    pub const TEN_PERCENT: Self = Self {
        p_good_to_bad: 1.0 / 36.0,
        p_bad_to_good: 0.25,
        loss_bad: 1.0,
        step: None,
    };

    /// The same chain stepped every 5 ms: the path is down 10 % of the time, in bursts of
    /// 20 ms on average (about 180 ms apart).
    pub const TEN_PERCENT_TIMED: Self = Self {
        step: Some(Duration::from_millis(5)),
        ..Self::TEN_PERCENT
    };

    /// The probability of being in the bad state `steps` steps after being in state `bad`
    /// (the chain's k-step transition, for a fractional k too).
    fn bad_after(&self, bad: bool, steps: f64) -> f64 {
        let total = self.p_good_to_bad + self.p_bad_to_good;
        if total <= 0.0 {
            return if bad { 1.0 } else { 0.0 };
        }
        let stationary = self.p_good_to_bad / total;
        let decay = (1.0 - total).max(0.0).powf(steps);
        if bad {
            stationary + (1.0 - stationary) * decay
        } else {
            stationary * (1.0 - decay)
        }
    }

    /// The long-run fraction of datagrams lost by the model.
    pub fn mean_loss(&self) -> f64 {
        let total = self.p_good_to_bad + self.p_bad_to_good;
        if total <= 0.0 {
            return 0.0;
        }
        self.p_good_to_bad / total * self.loss_bad
    }
}

/// What one direction of the path does to datagrams.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkConfig {
    /// One-way propagation delay (half the round trip).
    pub delay: Duration,
    /// Independent (Bernoulli) loss probability per datagram.
    pub loss: f64,
    /// Burst loss on top of `loss`, if any.
    pub burst: Option<GilbertElliott>,
    /// Probability a datagram is held back by `reorder_delay`, so later ones overtake it.
    pub reorder: f64,
    /// Extra delay of a held-back datagram.
    pub reorder_delay: Duration,
    /// Probability a datagram arrives twice.
    pub duplicate: f64,
    /// Bottleneck rate in bytes per second (datagram plus `overhead`); 0 means unlimited.
    pub rate: u64,
    /// Datagrams the bottleneck queue holds (the one being serialised included); more are
    /// dropped (drop-tail). Ignored when `rate` is 0.
    pub queue: usize,
    /// Bytes each datagram costs at the bottleneck beyond its payload (IPv4 + UDP headers).
    pub overhead: usize,
}

impl Default for LinkConfig {
    /// 15 ms one way, no impairment, 1 MB/s with a 64-datagram queue.
    fn default() -> Self {
        Self {
            delay: Duration::from_millis(15),
            loss: 0.0,
            burst: None,
            reorder: 0.0,
            reorder_delay: Duration::from_millis(10),
            duplicate: 0.0,
            rate: 1_000_000,
            queue: 64,
            overhead: 28,
        }
    }
}

impl LinkConfig {
    /// The expected fraction of datagrams lost by the impairments (queue drops excluded).
    pub fn mean_loss(&self) -> f64 {
        let burst = self.burst.map_or(0.0, |b| b.mean_loss());
        1.0 - (1.0 - self.loss) * (1.0 - burst)
    }
}

/// Counters of one link.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Datagrams handed to the link.
    pub offered: u64,
    /// Dropped because the bottleneck queue was full.
    pub queue_drops: u64,
    /// Lost to the random or burst loss.
    pub lost: u64,
    /// Delivered twice.
    pub duplicated: u64,
    /// Held back by the reordering delay.
    pub reordered: u64,
    /// Arrivals (duplicates count twice).
    pub delivered: u64,
}

/// A datagram on its way.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct InFlight {
    at: Instant,
    order: u64,
    data: Vec<u8>,
}

/// One direction of the path.
#[derive(Debug)]
pub struct Link {
    config: LinkConfig,
    impaired: bool,
    rng: SplitMix64,
    bad: bool,
    /// When the burst state was last drawn (time-stepped chains).
    burst_at: Option<Instant>,
    busy_until: Option<Instant>,
    /// Departure times of the datagrams in the bottleneck queue, oldest first.
    queued: VecDeque<Instant>,
    flight: BinaryHeap<Reverse<InFlight>>,
    order: u64,
    stats: LinkStats,
}

impl Link {
    /// A link with its own generator. It starts unimpaired (delay and rate only); see
    /// [`Link::set_impaired`].
    pub fn new(config: LinkConfig, seed: u64) -> Self {
        Self {
            config,
            impaired: false,
            rng: SplitMix64::new(seed),
            bad: false,
            burst_at: None,
            busy_until: None,
            queued: VecDeque::new(),
            flight: BinaryHeap::new(),
            order: 0,
            stats: LinkStats::default(),
        }
    }

    /// Turns loss, bursts, reordering and duplication on or off (delay and rate always apply).
    pub fn set_impaired(&mut self, on: bool) {
        self.impaired = on;
    }

    /// The link's configuration.
    pub fn config(&self) -> &LinkConfig {
        &self.config
    }

    /// The link's counters.
    pub fn stats(&self) -> LinkStats {
        self.stats
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    /// Puts a datagram on the link at `now`.
    pub fn send(&mut self, now: Instant, data: Vec<u8>) {
        self.stats.offered += 1;
        let c = self.config;
        let mut depart = now;
        let bytes = (data.len() + c.overhead) as u64;
        if let Some(nanos) = bytes.saturating_mul(1_000_000_000).checked_div(c.rate) {
            while self.queued.front().is_some_and(|&t| t <= now) {
                self.queued.pop_front();
            }
            if self.queued.len() >= c.queue.max(1) {
                self.stats.queue_drops += 1;
                return;
            }
            let serialise = Duration::from_nanos(nanos);
            let start = self.busy_until.map_or(now, |b| b.max(now));
            depart = start + serialise;
            self.busy_until = Some(depart);
            self.queued.push_back(depart);
        }
        if !self.impaired {
            self.push(depart + c.delay, data);
            return;
        }
        let mut lost = self.chance(c.loss);
        if let Some(ge) = c.burst {
            let steps = match ge.step {
                None => 1.0,
                Some(step) => {
                    let since = self.burst_at.map_or(Duration::ZERO, |t| now - t);
                    self.burst_at = Some(now);
                    since.as_secs_f64() / step.as_secs_f64().max(f64::MIN_POSITIVE)
                }
            };
            let p_bad = ge.bad_after(self.bad, steps);
            self.bad = self.chance(p_bad);
            if self.bad && self.chance(ge.loss_bad) {
                lost = true;
            }
        }
        if lost {
            self.stats.lost += 1;
            return;
        }
        let mut at = depart + c.delay;
        if self.chance(c.reorder) {
            self.stats.reordered += 1;
            at += c.reorder_delay;
        }
        if self.chance(c.duplicate) {
            self.stats.duplicated += 1;
            self.push(at, data.clone());
        }
        self.push(at, data);
    }

    fn push(&mut self, at: Instant, data: Vec<u8>) {
        self.order += 1;
        self.flight.push(Reverse(InFlight {
            at,
            order: self.order,
            data,
        }));
    }

    /// When the next datagram arrives, if one is on its way.
    pub fn next_arrival(&self) -> Option<Instant> {
        self.flight.peek().map(|Reverse(f)| f.at)
    }

    /// The next datagram due by `now`, in arrival order.
    pub fn pop_due(&mut self, now: Instant) -> Option<Vec<u8>> {
        if self.next_arrival()? > now {
            return None;
        }
        let Reverse(f) = self.flight.pop()?;
        self.stats.delivered += 1;
        Some(f.data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_model_mean_is_ten_percent() {
        assert!((GilbertElliott::TEN_PERCENT.mean_loss() - 0.1).abs() < 1e-9);
        let mut link = Link::new(
            LinkConfig {
                burst: Some(GilbertElliott::TEN_PERCENT),
                rate: 0,
                ..LinkConfig::default()
            },
            7,
        );
        link.set_impaired(true);
        let now = Instant::now();
        for _ in 0..100_000 {
            link.send(now, vec![1]);
        }
        let lost = link.stats().lost as f64 / 100_000.0;
        assert!((0.08..0.12).contains(&lost), "{lost}");
    }

    #[test]
    fn timed_bursts_hit_sparse_and_dense_flows_alike() {
        let ge = GilbertElliott::TEN_PERCENT_TIMED;
        assert!((ge.mean_loss() - 0.1).abs() < 1e-9);
        for gap in [Duration::from_micros(500), Duration::from_millis(200)] {
            let mut link = Link::new(
                LinkConfig {
                    burst: Some(ge),
                    rate: 0,
                    ..LinkConfig::default()
                },
                11,
            );
            link.set_impaired(true);
            let mut now = Instant::now();
            for _ in 0..50_000 {
                link.send(now, vec![1]);
                now += gap;
            }
            let lost = link.stats().lost as f64 / 50_000.0;
            assert!((0.08..0.12).contains(&lost), "gap {gap:?}: {lost}");
        }
        // One step later the chain has barely moved; a minute later it has forgotten.
        assert!((ge.bad_after(true, 0.0) - 1.0).abs() < 1e-12);
        assert!((ge.bad_after(true, 12_000.0) - 0.1).abs() < 1e-9);
        assert!((ge.bad_after(false, 12_000.0) - 0.1).abs() < 1e-9);
    }

    #[test]
    fn bottleneck_paces_and_drops_tail() {
        let mut link = Link::new(
            LinkConfig {
                delay: Duration::from_millis(10),
                rate: 1_000_000,
                queue: 4,
                overhead: 0,
                ..LinkConfig::default()
            },
            1,
        );
        let now = Instant::now();
        for _ in 0..6 {
            link.send(now, vec![0; 1000]);
        }
        assert_eq!(link.stats().queue_drops, 2);
        // 1000 bytes at 1 MB/s is 1 ms each: arrivals at 11, 12, 13, 14 ms.
        let first = link.next_arrival().unwrap();
        assert_eq!(first - now, Duration::from_millis(11));
        let late = now + Duration::from_millis(14);
        let mut n = 0;
        while link.pop_due(late).is_some() {
            n += 1;
        }
        assert_eq!(n, 4);
    }
}
