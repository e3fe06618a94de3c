//! Round-trip estimation (RFC 6298 smoothing with Karn's rule), the peer's observed ack delay,
//! and the probe timeout derived from them.

use std::time::Duration;

/// The round-trip estimate of a channel, from acks of packets sent exactly once (Karn's rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RttEstimate {
    /// The smoothed round trip (SRTT).
    pub smoothed: Duration,
    /// The smoothed mean deviation (RTTVAR).
    pub variance: Duration,
    /// The shortest sample seen.
    pub min: Duration,
    /// The latest sample.
    pub latest: Duration,
    /// How long the peer holds an ack back, as observed: the wait of the oldest packet a
    /// cumulative ack covers, beyond the shortest round trip. A peer that acks at once shows a
    /// few milliseconds at most; one that acks on a 24 ms timer shows about 24 ms.
    pub ack_delay: Duration,
}

/// RFC 6298 estimator; the caller applies Karn's rule by sampling only packets that were
/// transmitted once.
///
/// Kept in whole nanoseconds (`u64`, about 584 years) rather than [`Duration`]s: the same
/// values (a `Duration`'s arithmetic is exact in nanoseconds and its division floors, as
/// integer division does), at a fraction of the instructions of `Duration`'s checked
/// multiplications and divisions on every ack.
#[derive(Debug, Clone)]
pub(crate) struct RttEstimator {
    estimate: Option<Nanos>,
    /// The shortest of the latest [`RECENT`] samples, and those samples (a ring).
    recent: [u64; RECENT],
    recent_next: usize,
    /// Ack waits seen ([`RttEstimator::on_ack_wait`]), up to [`HOLD_SAMPLES`].
    hold_samples: u32,
}

/// An [`RttEstimate`] in nanoseconds.
#[derive(Debug, Clone, Copy)]
struct Nanos {
    smoothed: u64,
    variance: u64,
    min: u64,
    latest: u64,
    ack_delay: u64,
}

/// Ack waits to see before the observed ack delay is trusted for the probe timeout; until then
/// the probe waits for the longest hold allowed (`max_ack_delay`). The first waits may all be
/// short by chance (packets sent just before a periodic acker's tick), and a probe sent inside
/// the hold makes the packet's ack useless as a sample, so a low first guess would never be
/// corrected.
const HOLD_SAMPLES: u32 = 8;

/// Per ack, the observed ack delay loses this fraction of itself (when no longer wait comes).
const HOLD_DECAY: u64 = 16;

/// The clock granularity term of RFC 6298: RTTVAR contributes at least this much.
pub(crate) const GRANULARITY: Duration = Duration::from_millis(1);

/// [`GRANULARITY`] in nanoseconds.
const GRANULARITY_NS: u64 = GRANULARITY.as_nanos() as u64;

/// Samples over which the recent minimum is taken (the queueing signal).
const RECENT: usize = 8;

/// A duration in whole nanoseconds, saturating past `u64::MAX` (584 years).
#[inline]
fn nanos(d: Duration) -> u64 {
    d.as_secs()
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::from(d.subsec_nanos()))
}

/// Nanoseconds as a duration.
#[inline]
fn duration(ns: u64) -> Duration {
    Duration::from_nanos(ns)
}

impl RttEstimator {
    pub(crate) fn new() -> Self {
        Self {
            estimate: None,
            recent: [u64::MAX; RECENT],
            recent_next: 0,
            hold_samples: 0,
        }
    }

    pub(crate) fn estimate(&self) -> Option<RttEstimate> {
        self.estimate.map(|e| RttEstimate {
            smoothed: duration(e.smoothed),
            variance: duration(e.variance),
            min: duration(e.min),
            latest: duration(e.latest),
            ack_delay: duration(e.ack_delay),
        })
    }

    /// Takes one sample (from a packet transmitted exactly once).
    #[inline]
    pub(crate) fn on_sample(&mut self, sample: Duration) {
        let sample = nanos(sample);
        if let Some(slot) = self.recent.get_mut(self.recent_next) {
            *slot = sample;
        }
        self.recent_next = (self.recent_next + 1) % RECENT;
        self.estimate = Some(match self.estimate {
            None => Nanos {
                smoothed: sample,
                variance: sample / 2,
                min: sample,
                latest: sample,
                ack_delay: 0,
            },
            Some(e) => {
                let deviation = e.smoothed.abs_diff(sample);
                Nanos {
                    variance: e.variance.saturating_mul(3).saturating_add(deviation) / 4,
                    smoothed: e.smoothed.saturating_mul(7).saturating_add(sample) / 8,
                    min: e.min.min(sample),
                    latest: sample,
                    ack_delay: e.ack_delay,
                }
            }
        });
    }

    /// The oldest packet a cumulative ack newly covered (sent once) waited `waited` for it. The
    /// excess over the shortest round trip is the peer's ack delay; the estimate follows a rise
    /// at once and decays by 1/16 per ack, capped at `cap`.
    #[inline]
    pub(crate) fn on_ack_wait(&mut self, waited: Duration, cap: Duration) {
        if let Some(e) = self.estimate.as_mut() {
            let delay = nanos(waited).saturating_sub(e.min).min(nanos(cap));
            e.ack_delay = delay.max(e.ack_delay - e.ack_delay / HOLD_DECAY);
            self.hold_samples = (self.hold_samples + 1).min(HOLD_SAMPLES);
        }
    }

    /// How long the peer is allowed to hold an ack (zero before any sample): the observed ack
    /// delay, or `prior` (at least) while fewer than [`HOLD_SAMPLES`] waits have been seen.
    pub(crate) fn hold_allowance(&self, prior: Duration) -> Duration {
        self.estimate
            .map_or(Duration::ZERO, |e| duration(self.hold(&e, prior)))
    }

    #[inline]
    fn hold(&self, e: &Nanos, prior: Duration) -> u64 {
        if self.hold_samples < HOLD_SAMPLES {
            nanos(prior).max(e.ack_delay)
        } else {
            e.ack_delay
        }
    }

    /// Whether the recent round trips show a standing queue on the path: even the shortest of
    /// the latest samples exceeds the shortest ever by an eighth of it (and by 2 ms). Random loss
    /// without such a queue is not taken as congestion.
    pub(crate) fn queueing(&self) -> bool {
        let Some(e) = self.estimate else {
            return false;
        };
        let recent_min = self.recent.iter().copied().min().unwrap_or(u64::MAX);
        recent_min != u64::MAX
            && recent_min > e.min.saturating_add((e.min / 8).max(2 * GRANULARITY_NS))
    }

    /// The time after which an unacknowledged packet sent before one that was acknowledged is
    /// taken as lost: 9/8 of the larger of SRTT and the latest sample (RFC 9002), plus
    /// `reorder` (grown when such a decision proved spurious), at least the granularity.
    pub(crate) fn loss_delay(&self, reorder: Duration) -> Option<Duration> {
        let e = self.estimate?;
        let rtt = e.smoothed.max(e.latest);
        Some(duration(
            rtt.saturating_add(rtt / 8)
                .saturating_add(nanos(reorder))
                .max(GRANULARITY_NS),
        ))
    }

    /// The peer's observed ack delay (zero before any sample): how much longer than a round
    /// trip a packet that arrived in order may wait for its cumulative ack.
    pub(crate) fn ack_delay(&self) -> Duration {
        self.estimate
            .map_or(Duration::ZERO, |e| duration(e.ack_delay))
    }

    /// The probe timeout: max(2 SRTT, SRTT + max(4 RTTVAR, 1 ms)) plus the hold allowed to the
    /// peer (its observed ack delay; `prior_hold` until enough acks have shown it), or `initial`
    /// before any sample; clamped to `[min, max]`.
    #[inline]
    pub(crate) fn pto(
        &self,
        initial: Duration,
        min: Duration,
        max: Duration,
        prior_hold: Duration,
    ) -> Duration {
        let base = match self.estimate {
            None => initial,
            Some(e) => duration(
                e.smoothed
                    .saturating_mul(2)
                    .max(
                        e.smoothed
                            .saturating_add(e.variance.saturating_mul(4).max(GRANULARITY_NS)),
                    )
                    .saturating_add(self.hold(&e, prior_hold)),
            ),
        };
        base.clamp(min, max)
    }

    /// The smoothed round trip, if measured.
    #[inline]
    pub(crate) fn smoothed(&self) -> Option<Duration> {
        self.estimate.map(|e| duration(e.smoothed))
    }

    /// The smoothed round trip in nanoseconds, if measured.
    #[inline]
    pub(crate) fn smoothed_nanos(&self) -> Option<u64> {
        self.estimate.map(|e| e.smoothed)
    }

    /// The shortest round trip seen, if measured.
    #[inline]
    pub(crate) fn min(&self) -> Option<Duration> {
        self.estimate.map(|e| duration(e.min))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn pto(r: &RttEstimator) -> Duration {
        r.pto(500 * MS, 5 * MS, 3000 * MS, Duration::ZERO)
    }

    #[test]
    fn initial_then_first_sample() {
        let mut r = RttEstimator::new();
        assert_eq!(r.estimate(), None);
        assert_eq!(pto(&r), 500 * MS);
        assert_eq!(r.loss_delay(Duration::ZERO), None);
        r.on_sample(200 * MS);
        let e = r.estimate().unwrap();
        assert_eq!(
            (e.smoothed, e.variance, e.min),
            (200 * MS, 100 * MS, 200 * MS)
        );
        assert_eq!(pto(&r), 600 * MS);
        assert_eq!(r.loss_delay(Duration::ZERO), Some(225 * MS));
    }

    #[test]
    fn smooths_like_rfc6298() {
        let mut r = RttEstimator::new();
        r.on_sample(100 * MS);
        r.on_sample(180 * MS);
        let e = r.estimate().unwrap();
        // RTTVAR = 3/4 * 50 + 1/4 * 80 = 57.5; SRTT = 7/8 * 100 + 1/8 * 180 = 110.
        assert_eq!(e.smoothed, 110 * MS);
        assert_eq!(e.variance, Duration::from_micros(57_500));
        assert_eq!(e.min, 100 * MS);
        assert_eq!(e.latest, 180 * MS);
        assert_eq!(pto(&r), 340 * MS);
        // The larger of SRTT and the latest sample, times 9/8.
        assert_eq!(r.loss_delay(Duration::ZERO), Some(202_500 * MS / 1000));
    }

    #[test]
    fn stable_path_probes_at_twice_the_round_trip_with_a_small_floor() {
        let mut r = RttEstimator::new();
        for _ in 0..50 {
            r.on_sample(40 * MS);
        }
        assert_eq!(pto(&r), 80 * MS, "2 SRTT once RTTVAR has settled");
        let mut r = RttEstimator::new();
        for _ in 0..50 {
            r.on_sample(MS / 10);
        }
        assert_eq!(pto(&r), 5 * MS, "floor");
        let mut r = RttEstimator::new();
        r.on_sample(5000 * MS);
        assert_eq!(pto(&r), 3000 * MS, "ceiling");
    }

    #[test]
    fn ack_delay_rises_at_once_and_decays_slowly() {
        let mut r = RttEstimator::new();
        r.on_ack_wait(30 * MS, 1000 * MS);
        assert_eq!(r.estimate(), None, "nothing to measure against yet");
        for _ in 0..20 {
            r.on_sample(10 * MS);
        }
        let before = pto(&r);
        r.on_ack_wait(34 * MS, 1000 * MS);
        assert_eq!(r.estimate().unwrap().ack_delay, 24 * MS);
        assert_eq!(
            pto(&r),
            before + 24 * MS,
            "the probe waits for a slow acker"
        );
        r.on_ack_wait(10 * MS, 1000 * MS);
        assert_eq!(r.estimate().unwrap().ack_delay, 24 * MS - 24 * MS / 16);
        r.on_ack_wait(10_000 * MS, 100 * MS);
        assert_eq!(r.estimate().unwrap().ack_delay, 100 * MS, "capped");
    }

    #[test]
    fn the_hold_is_taken_as_the_prior_until_enough_waits_were_seen_then_with_a_margin() {
        let prior = 100 * MS;
        let mut r = RttEstimator::new();
        for _ in 0..20 {
            r.on_sample(MS);
        }
        let pto = |r: &RttEstimator| r.pto(500 * MS, 4 * MS, 3000 * MS, prior);
        // A periodic acker's first waits may all be short: the probe waits for the prior.
        for _ in 0..HOLD_SAMPLES - 1 {
            r.on_ack_wait(MS + 2 * MS, 1000 * MS);
            assert_eq!(pto(&r), 2 * MS + prior);
        }
        r.on_ack_wait(MS + 48 * MS, 1000 * MS);
        assert_eq!(r.estimate().unwrap().ack_delay, 48 * MS);
        assert_eq!(
            pto(&r),
            2 * MS + 48 * MS,
            "the observed hold from the 8th wait on"
        );
    }

    #[test]
    fn queueing_needs_every_recent_sample_above_the_minimum() {
        let mut r = RttEstimator::new();
        for _ in 0..8 {
            r.on_sample(30 * MS);
        }
        assert!(!r.queueing());
        // Random delays: one short sample among the recent ones says there is no standing queue.
        for i in 0..8 {
            r.on_sample(if i == 5 { 31 * MS } else { 60 * MS });
        }
        assert!(!r.queueing());
        for _ in 0..8 {
            r.on_sample(45 * MS);
        }
        assert!(r.queueing(), "a standing 15 ms queue");
    }
}
