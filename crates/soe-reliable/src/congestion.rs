//! A packet-counting congestion window: slow start, then additive increase; halved on loss, at
//! most once per round trip.

use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub(crate) struct Congestion {
    window: u32,
    ssthresh: u32,
    /// Packets acknowledged toward the next additive step.
    credit: u32,
    floor: u32,
    cap: u32,
    last_reduction: Option<Instant>,
}

impl Congestion {
    pub(crate) fn new(initial: u16, cap: u16) -> Self {
        let cap = u32::from(cap.max(1));
        let window = u32::from(initial).clamp(1, cap);
        Self {
            window,
            ssthresh: cap,
            credit: 0,
            floor: (window / 2).max(2).min(window),
            cap,
            last_reduction: None,
        }
    }

    /// Packets allowed in flight.
    pub(crate) fn window(&self) -> u32 {
        self.window
    }

    /// `acked` packets were newly acknowledged.
    pub(crate) fn on_ack(&mut self, acked: u32) {
        if self.window < self.ssthresh {
            self.window = self.window.saturating_add(acked).min(self.cap);
        } else {
            self.credit = self.credit.saturating_add(acked);
            while self.credit >= self.window && self.window < self.cap {
                self.credit -= self.window;
                self.window += 1;
            }
            if self.window >= self.cap {
                self.credit = 0;
            }
        }
    }

    /// A loss was detected. Halves the window unless it was already halved within `rtt`.
    /// Returns whether it did.
    pub(crate) fn on_loss(&mut self, now: Instant, rtt: Duration) -> bool {
        if let Some(last) = self.last_reduction {
            if now.saturating_duration_since(last) < rtt {
                return false;
            }
        }
        self.window = (self.window / 2).max(self.floor);
        self.ssthresh = self.window;
        self.credit = 0;
        self.last_reduction = Some(now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_start_then_additive_then_halving() {
        let t0 = Instant::now();
        let rtt = Duration::from_millis(50);
        let mut c = Congestion::new(8, 196);
        assert_eq!(c.window(), 8);
        c.on_ack(8);
        assert_eq!(c.window(), 16, "slow start doubles per window");
        c.on_ack(16);
        assert_eq!(c.window(), 32);
        assert!(c.on_loss(t0, rtt));
        assert_eq!(c.window(), 16);
        assert!(!c.on_loss(t0 + rtt / 2, rtt), "once per round trip");
        assert_eq!(c.window(), 16);
        // Congestion avoidance: one packet per window of acks.
        c.on_ack(15);
        assert_eq!(c.window(), 16);
        c.on_ack(1);
        assert_eq!(c.window(), 17);
        c.on_ack(17);
        assert_eq!(c.window(), 18);
        assert!(c.on_loss(t0 + rtt, rtt));
        assert_eq!(c.window(), 9);
        for i in 1..10 {
            assert!(c.on_loss(t0 + rtt * (1 + i), rtt));
        }
        assert_eq!(c.window(), 4, "floor: half the initial window");
        let mut c = Congestion::new(2, 196);
        c.on_loss(t0, rtt);
        assert_eq!(c.window(), 2, "floor: at least 2");
    }

    #[test]
    fn capped_by_max_send_window() {
        let mut c = Congestion::new(8, 20);
        for _ in 0..100 {
            c.on_ack(50);
        }
        assert_eq!(c.window(), 20);
        let c = Congestion::new(500, 20);
        assert_eq!(c.window(), 20, "initial above the cap");
        let mut c = Congestion::new(1, 1);
        c.on_loss(Instant::now(), Duration::ZERO);
        assert_eq!(c.window(), 1);
    }
}
