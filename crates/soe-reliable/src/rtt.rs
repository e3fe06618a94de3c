//! Round-trip estimation and the retransmission timeout (RFC 6298 with Karn's rule).

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
}

/// RFC 6298 estimator with exponential backoff; the caller applies Karn's rule by sampling only
/// packets that were transmitted once.
#[derive(Debug, Clone)]
pub(crate) struct RttEstimator {
    estimate: Option<RttEstimate>,
    /// Doublings since the last fresh sample.
    backoff: u32,
}

/// The clock granularity term of RFC 6298: RTTVAR contributes at least this much.
const GRANULARITY: Duration = Duration::from_millis(1);

impl RttEstimator {
    pub(crate) fn new() -> Self {
        Self {
            estimate: None,
            backoff: 0,
        }
    }

    pub(crate) fn estimate(&self) -> Option<RttEstimate> {
        self.estimate
    }

    /// Takes one sample (from a packet transmitted exactly once) and ends any backoff.
    pub(crate) fn on_sample(&mut self, sample: Duration) {
        self.backoff = 0;
        self.estimate = Some(match self.estimate {
            None => RttEstimate {
                smoothed: sample,
                variance: sample / 2,
                min: sample,
                latest: sample,
            },
            Some(e) => {
                let deviation = e.smoothed.abs_diff(sample);
                RttEstimate {
                    variance: (e.variance * 3 + deviation) / 4,
                    smoothed: (e.smoothed * 7 + sample) / 8,
                    min: e.min.min(sample),
                    latest: sample,
                }
            }
        });
    }

    /// Ends the backoff without a sample: an ack of new data (even of a retransmitted packet,
    /// which gives no sample under Karn's rule) shows the path works again. Without this a lossy
    /// path where most acked packets were resent keeps the timeout at its ceiling.
    pub(crate) fn on_progress(&mut self) {
        self.backoff = 0;
    }

    /// Doubles the timeout after a retransmission timer expiry (until the next fresh sample).
    pub(crate) fn on_timeout(&mut self) {
        self.backoff = self.backoff.saturating_add(1).min(16);
    }

    /// The retransmission timeout: SRTT + max(4 RTTVAR, 1 ms), or `initial` before any sample,
    /// clamped to `[min, max]`, then doubled per backoff step and clamped to `max` again.
    pub(crate) fn rto(&self, initial: Duration, min: Duration, max: Duration) -> Duration {
        let base = match self.estimate {
            None => initial,
            Some(e) => e.smoothed + (e.variance * 4).max(GRANULARITY),
        };
        let base = base.clamp(min, max);
        base.checked_mul(1u32 << self.backoff.min(16))
            .unwrap_or(max)
            .min(max)
    }

    /// The smoothed round trip, if measured.
    pub(crate) fn smoothed(&self) -> Option<Duration> {
        self.estimate.map(|e| e.smoothed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn rto(r: &RttEstimator) -> Duration {
        r.rto(500 * MS, 100 * MS, 3000 * MS)
    }

    #[test]
    fn initial_then_first_sample() {
        let mut r = RttEstimator::new();
        assert_eq!(r.estimate(), None);
        assert_eq!(rto(&r), 500 * MS);
        r.on_sample(200 * MS);
        let e = r.estimate().unwrap();
        assert_eq!(
            (e.smoothed, e.variance, e.min),
            (200 * MS, 100 * MS, 200 * MS)
        );
        assert_eq!(rto(&r), 600 * MS);
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
        assert_eq!(rto(&r), 340 * MS);
    }

    #[test]
    fn clamps_to_min_and_max() {
        let mut r = RttEstimator::new();
        r.on_sample(2 * MS);
        for _ in 0..50 {
            r.on_sample(2 * MS);
        }
        assert_eq!(rto(&r), 100 * MS, "floor");
        let mut r = RttEstimator::new();
        r.on_sample(5000 * MS);
        assert_eq!(rto(&r), 3000 * MS, "ceiling");
    }

    #[test]
    fn backoff_doubles_until_a_fresh_sample() {
        let mut r = RttEstimator::new();
        r.on_sample(200 * MS); // RTO 600
        r.on_timeout();
        assert_eq!(rto(&r), 1200 * MS);
        r.on_timeout();
        assert_eq!(rto(&r), 2400 * MS);
        r.on_timeout();
        assert_eq!(rto(&r), 3000 * MS, "capped");
        for _ in 0..100 {
            r.on_timeout();
        }
        assert_eq!(rto(&r), 3000 * MS, "no overflow");
        r.on_sample(200 * MS);
        let base = rto(&r);
        assert_eq!(base, 500 * MS, "a fresh sample ends the backoff");
        r.on_timeout();
        r.on_timeout();
        assert_eq!(rto(&r), 2000 * MS);
        r.on_progress();
        assert_eq!(rto(&r), base, "progress ends it too");
        assert_eq!(r.estimate().unwrap().latest, 200 * MS);
    }
}
