//! A packet-counting congestion window for game traffic.
//!
//! Slow start, then one packet more per window acknowledged (additive increase). A loss starts a
//! recovery episode that covers every packet sequenced before it was detected; an episode
//! reduces the window at most once (RFC 6582), and only when the path shows a standing queue
//! (the recent round trips all exceed the shortest one): random loss on an uncongested link is
//! repaired without slowing the sender. The reduction is to 7/10 of the window (the
//! multiplicative decrease of RFC 9438), never below the floor. Repeated probe timeouts with no
//! ack at all (persistent congestion) drop the window to the floor whatever the round trips say.
//! A reduction found spurious (the lost packet's original was acknowledged) is undone.

use std::time::Duration;

/// The window after a reduction, as a fraction of the window before it.
const BETA_NUM: u32 = 7;
const BETA_DEN: u32 = 10;

/// What a window spans: a round trip on the path, and the time the peer holds an ack back.
/// Packets in flight for that hold have arrived and sit in no queue, so a reduction leaves that
/// share of the window alone (zero `hold`: the plain 7/10 cut).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PathShare {
    /// The smoothed round trip.
    pub(crate) rtt: Duration,
    /// How long the peer holds its acks, beyond the round trip.
    pub(crate) hold: Duration,
}

#[derive(Debug, Clone)]
pub(crate) struct Congestion {
    window: u32,
    ssthresh: u32,
    /// Packets acknowledged toward the next additive step.
    credit: u32,
    floor: u32,
    cap: u32,
    /// The current recovery episode: losses of packets sequenced before this belong to it.
    recovery_end: Option<u64>,
    /// Whether the current episode reduced the window (growth waits until it ends).
    reduced: bool,
    /// Window and threshold before the episode's reduction, to undo a spurious one.
    undo: Option<(u32, u32)>,
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
            recovery_end: None,
            reduced: false,
            undo: None,
        }
    }

    /// Packets allowed in flight.
    pub(crate) fn window(&self) -> u32 {
        self.window
    }

    /// `acked` packets were newly acknowledged, the highest being `largest`. An ack of a packet
    /// sequenced after the episode began ends the episode.
    pub(crate) fn on_ack(&mut self, acked: u32, largest: u64) {
        if self.recovery_end.is_some_and(|end| largest >= end) {
            self.recovery_end = None;
            self.undo = None;
            if std::mem::take(&mut self.reduced) {
                // The packets of a reducing episode do not count toward growth.
                return;
            }
        }
        if self.reduced {
            return;
        }
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

    /// Packet `lost` was declared lost while `next` was the next sequence to assign. Starts an
    /// episode unless one covers `lost`; reduces the window when a new episode starts and the
    /// path is `queueing`. Returns whether it reduced.
    pub(crate) fn on_loss(
        &mut self,
        lost: u64,
        next: u64,
        queueing: bool,
        path: PathShare,
    ) -> bool {
        if self.recovery_end.is_some_and(|end| lost < end) {
            return false;
        }
        self.recovery_end = Some(next);
        self.reduced = false;
        self.undo = None;
        if !queueing {
            return false;
        }
        self.reduce(path);
        true
    }

    fn reduce(&mut self, path: PathShare) {
        self.undo = Some((self.window, self.ssthresh));
        // Only the share of the window that is on the path is cut; the share the peer holds
        // unacknowledged for its ack delay occupies no queue.
        let rtt = path.rtt.as_nanos().max(1);
        let held = path.hold.as_nanos();
        let window = u128::from(self.window);
        // Rounded up, so that with no hold the window is the plain 7/10 of itself, rounded down.
        let den = u128::from(BETA_DEN) * (rtt + held);
        let cut = (window * u128::from(BETA_DEN - BETA_NUM) * rtt).div_ceil(den);
        self.window = u32::try_from(window - cut)
            .unwrap_or(self.window)
            .max(self.floor);
        self.ssthresh = self.window;
        self.credit = 0;
        self.reduced = true;
    }

    /// Probe timeouts in a row without an ack: the window drops to the floor.
    pub(crate) fn on_persistent_congestion(&mut self, next: u64) {
        self.recovery_end = Some(next);
        self.undo = None;
        // Slow start brings it back to where a single reduction would have left it.
        self.ssthresh = (self.window * BETA_NUM / BETA_DEN).max(self.floor);
        self.window = self.floor;
        self.credit = 0;
        self.reduced = true;
    }

    /// Packet `sequence`, resent as lost, turned out not to be: undoes the current episode's
    /// reduction when the packet belongs to it. Returns whether it did.
    pub(crate) fn on_spurious(&mut self, sequence: u64) -> bool {
        if self.recovery_end.is_none_or(|end| sequence >= end) {
            return false;
        }
        let Some((window, ssthresh)) = self.undo.take() else {
            return false;
        };
        self.window = window;
        self.ssthresh = ssthresh;
        self.reduced = false;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NO_HOLD: PathShare = PathShare {
        rtt: Duration::from_millis(10),
        hold: Duration::ZERO,
    };

    #[test]
    fn slow_start_then_additive_increase() {
        let mut c = Congestion::new(8, 196);
        assert_eq!(c.window(), 8);
        c.on_ack(8, 7);
        assert_eq!(c.window(), 16, "slow start doubles per window");
        c.on_ack(16, 23);
        assert_eq!(c.window(), 32);
        assert!(c.on_loss(20, 40, true, NO_HOLD));
        assert_eq!(c.window(), 22, "7/10");
        // No growth until the episode ends with an ack of a packet sent after it began.
        c.on_ack(10, 39);
        assert_eq!(c.window(), 22);
        c.on_ack(21, 40);
        assert_eq!(
            c.window(),
            22,
            "the ack that ends a reducing episode does not grow it"
        );
        c.on_ack(21, 60);
        assert_eq!(c.window(), 22);
        c.on_ack(1, 61);
        assert_eq!(
            c.window(),
            23,
            "congestion avoidance: one per window acknowledged"
        );
    }

    #[test]
    fn one_reduction_per_episode_and_random_loss_keeps_the_window() {
        let mut c = Congestion::new(8, 196);
        c.on_ack(100, 99);
        let w = c.window();
        assert!(!c.on_loss(50, 120, false, NO_HOLD), "no queue: random loss");
        assert_eq!(c.window(), w);
        c.on_ack(4, 100);
        assert!(
            c.window() > w,
            "growth goes on through a non-reducing episode"
        );
        let w = c.window();
        assert!(
            !c.on_loss(110, 130, true, NO_HOLD),
            "same episode (110 < 120)"
        );
        assert_eq!(c.window(), w);
        assert!(c.on_loss(121, 140, true, NO_HOLD), "a new episode");
        assert_eq!(c.window(), w * 7 / 10);
        assert!(!c.on_loss(139, 150, true, NO_HOLD));
        for round in 0..20u64 {
            c.on_ack(1, 200 + round * 100);
            c.on_loss(201 + round * 100, 300 + round * 100, true, NO_HOLD);
        }
        assert_eq!(c.window(), 4, "floor: half the initial window");
    }

    #[test]
    fn spurious_reduction_is_undone_and_persistent_congestion_floors() {
        let mut c = Congestion::new(8, 196);
        c.on_ack(24, 23);
        assert_eq!(c.window(), 32);
        assert!(c.on_loss(10, 40, true, NO_HOLD));
        assert!(!c.on_spurious(45), "not in the episode");
        assert!(c.on_spurious(10));
        assert_eq!(c.window(), 32);
        assert!(!c.on_spurious(11), "undone once");
        c.on_persistent_congestion(50);
        assert_eq!(c.window(), 4);
        assert!(!c.on_spurious(20), "persistent congestion is not undone");
    }

    #[test]
    fn capped_by_max_send_window() {
        let mut c = Congestion::new(8, 20);
        for i in 0..100 {
            c.on_ack(50, i * 50);
        }
        assert_eq!(c.window(), 20);
        let c = Congestion::new(500, 20);
        assert_eq!(c.window(), 20, "initial above the cap");
        let mut c = Congestion::new(1, 1);
        c.on_loss(0, 1, true, NO_HOLD);
        assert_eq!(c.window(), 1);
    }

    #[test]
    fn a_reduction_spares_the_share_the_peer_holds() {
        let mut c = Congestion::new(8, 196);
        c.on_ack(92, 91);
        assert_eq!(c.window(), 100);
        // A 10 ms path and a peer that holds acks 30 ms: three quarters of the window sit
        // acknowledged-to-be at the peer, so only the quarter on the path is cut by 3/10.
        let held = PathShare {
            rtt: Duration::from_millis(10),
            hold: Duration::from_millis(30),
        };
        assert!(c.on_loss(95, 120, true, held));
        assert_eq!(
            c.window(),
            92,
            "100 - 100 x 1/4 x 3/10 (the cut rounded up)"
        );
        assert!(c.on_spurious(95));
        assert_eq!(c.window(), 100);
        assert!(c.on_loss(121, 140, true, NO_HOLD));
        assert_eq!(c.window(), 70, "no hold: the plain 7/10");
    }
}
