//! A pacer: spreads a window's packets over the round trip instead of sending them in one burst
//! that a shallow bottleneck queue would drop.
//!
//! Packets go at 5/4 of the window per smoothed round trip. Unused time accrues as credit, up to
//! the larger of [`MIN_BURST`] packets and 2 ms, so on a short path (where a window goes out
//! within 2 ms anyway) pacing costs nothing, and on a long one a window goes out as a stream.
//! Before a round-trip sample there is no pacing.

use std::time::{Duration, Instant};

/// The smallest burst the pacer allows, in packets.
const MIN_BURST: u64 = 10;

/// The credit the pacer keeps at most, as time: a burst of this much sending.
const MAX_CREDIT: u64 = 2_000_000;

#[derive(Debug, Clone)]
pub(crate) struct Pacer {
    /// Sending time saved up, in nanoseconds.
    credit: u64,
    /// Nanoseconds per packet at the last check (what a packet sent now costs).
    interval: u64,
    last: Option<Instant>,
}

impl Pacer {
    pub(crate) fn new() -> Self {
        Self {
            credit: 0,
            interval: 0,
            last: None,
        }
    }

    /// Nanoseconds per packet at `window` packets per `rtt` (in nanoseconds), sent 5/4 as fast;
    /// `None` when the round trip is unknown.
    #[inline]
    fn interval(window: u32, rtt: Option<u64>) -> Option<u64> {
        Some(rtt?.saturating_mul(4) / (u64::from(window.max(1)) * 5))
    }

    /// When a packet may go: `None` if now, else the instant it may. `rtt` is the smoothed round
    /// trip in nanoseconds.
    #[inline]
    pub(crate) fn delay(&mut self, now: Instant, window: u32, rtt: Option<u64>) -> Option<Instant> {
        let Some(interval) = Self::interval(window, rtt) else {
            self.interval = 0;
            return None;
        };
        self.interval = interval;
        let cap = MAX_CREDIT.max(MIN_BURST.saturating_mul(interval));
        self.credit = match self.last {
            None => cap,
            Some(last) => {
                // The credit fills up when at least `short` has passed since `last`: the usual
                // case of a sender pausing between packets, found by adding to an instant and
                // comparing, which costs a fraction of subtracting two instants.
                let short = cap.saturating_sub(self.credit);
                let full = short == 0
                    || last
                        .checked_add(Duration::from_nanos(short))
                        .is_some_and(|full| now >= full);
                if full {
                    cap
                } else {
                    let elapsed = u64::try_from(now.saturating_duration_since(last).as_nanos())
                        .unwrap_or(u64::MAX);
                    self.credit.saturating_add(elapsed).min(cap)
                }
            }
        };
        self.last = Some(now);
        if self.credit >= interval {
            None
        } else {
            Some(now + Duration::from_nanos(interval - self.credit))
        }
    }

    /// A packet went out (after [`Pacer::delay`] allowed it).
    pub(crate) fn on_sent(&mut self) {
        self.credit = self.credit.saturating_sub(self.interval);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// A round trip in nanoseconds, as the sender passes it.
    fn ns(rtt: Duration) -> Option<u64> {
        Some(rtt.as_nanos() as u64)
    }

    #[test]
    fn a_long_path_gets_a_stream_not_a_burst() {
        let t0 = Instant::now();
        let mut p = Pacer::new();
        let rtt = ns(150 * MS);
        let mut sent = 0;
        while p.delay(t0, 200, rtt).is_none() {
            p.on_sent();
            sent += 1;
        }
        assert_eq!(sent, 10, "a burst of MIN_BURST");
        // 200 packets per 150 ms, 5/4 as fast: one every 600 µs.
        let next = p.delay(t0, 200, rtt).unwrap();
        assert_eq!(next - t0, Duration::from_micros(600));
        assert_eq!(p.delay(next, 200, rtt), None);
        p.on_sent();
        // Over one round trip, 5/4 of the window goes out.
        let mut now = next;
        let mut count = 0;
        while now < next + 150 * MS {
            match p.delay(now, 200, rtt) {
                None => {
                    p.on_sent();
                    count += 1;
                }
                Some(at) => {
                    assert!(at > now, "deadlines move forward");
                    now = at;
                }
            }
        }
        assert!((249..=250).contains(&count), "{count}");
        // A slow sender on a long path: one packet per 30 ms, waits are exact.
        let mut p = Pacer::new();
        let mut now = t0;
        let mut count = 0;
        while now < t0 + 300 * MS {
            match p.delay(now, 4, rtt) {
                None => {
                    p.on_sent();
                    count += 1;
                }
                Some(at) => now = at,
            }
        }
        assert_eq!(count, 10 + 9, "ten at once, then one every 30 ms");
    }

    #[test]
    fn short_paths_and_unknown_rtt_are_not_paced() {
        let t0 = Instant::now();
        let mut p = Pacer::new();
        for _ in 0..1000 {
            assert_eq!(p.delay(t0, 200, None), None);
            p.on_sent();
        }
        let mut p = Pacer::new();
        let mut sent = 0;
        while p.delay(t0, 196, ns(MS)).is_none() && sent < 1000 {
            p.on_sent();
            sent += 1;
        }
        assert!(sent >= 196, "a whole window at once on a 1 ms path: {sent}");
    }
}
