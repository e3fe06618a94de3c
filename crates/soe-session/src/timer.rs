//! The fixed table of named deadlines a session keeps (one slot per [`Timer`]).

use std::time::Instant;

/// The session's own timers; the reliable channels keep theirs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timer {
    /// Client: resend the SessionRequest.
    HandshakeResend = 0,
    /// Client: give up connecting. Server: drop the half-open session.
    ConnectTimeout = 1,
    /// Send a heartbeat (after silence, then retries while unanswered).
    Heartbeat = 2,
    /// End the session after silence.
    Idle = 3,
    /// Stop waiting for queued reliable data to drain during a graceful close.
    Close = 4,
    /// Send the Disconnect again, or finish draining.
    DisconnectRepeat = 5,
    /// Send a NetStatusRequest (the post-handshake probe, or the periodic one).
    NetStatus = 6,
}

impl Timer {
    const COUNT: usize = 7;
    pub(crate) const ALL: [Self; Self::COUNT] = [
        Self::HandshakeResend,
        Self::ConnectTimeout,
        Self::Heartbeat,
        Self::Idle,
        Self::Close,
        Self::DisconnectRepeat,
        Self::NetStatus,
    ];
}

/// One optional deadline per [`Timer`].
#[derive(Debug, Clone, Default)]
pub(crate) struct TimerTable {
    data: [Option<Instant>; Timer::COUNT],
    /// Bit `t` set when timer `t` is (so that the minimum looks at those only: a session
    /// usually runs one or two).
    set: u8,
}

impl TimerTable {
    pub(crate) fn set(&mut self, timer: Timer, at: Instant) {
        self.data[timer as usize] = Some(at);
        self.set |= 1 << timer as u8;
    }

    #[cfg(test)]
    pub(crate) fn get(&self, timer: Timer) -> Option<Instant> {
        self.data[timer as usize]
    }

    pub(crate) fn stop(&mut self, timer: Timer) {
        self.data[timer as usize] = None;
        self.set &= !(1 << timer as u8);
    }

    pub(crate) fn stop_all(&mut self) {
        self.data = Default::default();
        self.set = 0;
    }

    /// The earliest deadline.
    #[inline]
    pub(crate) fn next(&self) -> Option<Instant> {
        let mut set = self.set;
        let mut min: Option<Instant> = None;
        while set != 0 {
            let t = set.trailing_zeros() as usize;
            set &= set - 1;
            if let Some(&Some(at)) = self.data.get(t) {
                min = Some(min.map_or(at, |m| m.min(at)));
            }
        }
        min
    }

    /// Clears and returns whether `timer` is due at `now`.
    pub(crate) fn expire(&mut self, timer: Timer, now: Instant) -> bool {
        match self.data[timer as usize] {
            Some(at) if at <= now => {
                self.stop(timer);
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn next_is_the_minimum_and_expire_clears() {
        let t0 = Instant::now();
        let mut t = TimerTable::default();
        assert_eq!(t.next(), None);
        t.set(Timer::Idle, t0 + Duration::from_secs(30));
        t.set(Timer::Heartbeat, t0 + Duration::from_secs(25));
        assert_eq!(t.next(), Some(t0 + Duration::from_secs(25)));
        assert!(!t.expire(Timer::Heartbeat, t0 + Duration::from_secs(24)));
        assert!(t.expire(Timer::Heartbeat, t0 + Duration::from_secs(25)));
        assert_eq!(t.get(Timer::Heartbeat), None);
        assert_eq!(t.next(), Some(t0 + Duration::from_secs(30)));
        t.stop(Timer::Idle);
        assert_eq!(t.next(), None);
        t.set(Timer::NetStatus, t0);
        t.stop_all();
        assert_eq!(t.next(), None);
        assert_eq!(Timer::ALL.len(), 7);
    }
}
