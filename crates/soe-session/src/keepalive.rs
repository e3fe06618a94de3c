//! Which of a session's own Heartbeats may still be answered.
//!
//! A Heartbeat carries nothing that says whether it answers one of ours or is the peer's own,
//! so a session counts its own (keep-alives and liveness probes; not its answers), and takes a
//! Heartbeat that arrives while one of them may still be answered as that answer, and answers
//! it otherwise. Counting too few makes two sides answer each other's answers forever;
//! counting too many swallows the peer's keep-alives (a client then remaps, or, if it
//! happens often enough, idles out).
//!
//! So the count is bounded by what can really still be answered: a Heartbeat's answer comes
//! within [`ANSWER_WINDOW`] of it or not at all. The count never exceeds the Heartbeats sent
//! within the last 1.5 windows (three slots of half a window each), and drops to nothing once
//! a whole window has passed since the last one went out. It used to be forgotten only when a
//! new round of keep-alives began, which a server that sends none never does: every probe
//! whose answer was lost stayed counted for the life of the session, up to 255.

use std::time::Duration;

/// How long after one of our Heartbeats its answer may still come: paths of up to 6 s round
/// trip, with 2 s to spare for jitter and queueing. Shorter than the default heartbeat
/// interval (10 s), so that the keep-alive a peer sends after hearing our last Heartbeat is
/// never taken for that Heartbeat's answer.
pub(crate) const ANSWER_WINDOW: Duration = Duration::from_secs(8);

const WINDOW_MS: u32 = ANSWER_WINDOW.as_millis() as u32;
/// The length of one slot of [`OwnHeartbeats::sent`]: half a window.
const SLOT_MS: u32 = WINDOW_MS / 2;

/// Our own Heartbeats that may still be answered (16 bytes). Times are milliseconds since the
/// session started, wrapping (about 49 days; only differences within a window matter).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct OwnHeartbeats {
    /// Sent and not yet answered, as far as can be told.
    unanswered: u8,
    /// Sent in the slot of `last` (index 0) and the two before it.
    sent: [u8; 3],
    /// How long the last round of keep-alives took to hear from the peer, in milliseconds
    /// (saturating): a round trip, or more when Heartbeats were lost.
    last_round: u16,
    /// When the last one went out.
    last: u32,
    /// When the current round of keep-alives began (its first Heartbeat).
    round: u32,
}

impl OwnHeartbeats {
    /// A round of keep-alives begins at `now_ms` (the first one after silence is due).
    pub(crate) fn start_round(&mut self, now_ms: u32) {
        self.round = now_ms;
    }

    /// One of ours goes out at `now_ms`.
    pub(crate) fn sent(&mut self, now_ms: u32) {
        self.expire(now_ms);
        let slot = now_ms / SLOT_MS;
        let last_slot = self.last / SLOT_MS;
        let shift = slot.wrapping_sub(last_slot);
        if self.sent == [0; 3] || shift >= 3 {
            self.sent = [0; 3];
        } else {
            for _ in 0..shift {
                self.sent = [0, self.sent[0], self.sent[1]];
            }
        }
        self.sent[0] = self.sent[0].saturating_add(1);
        self.last = now_ms;
        self.unanswered = self.unanswered.saturating_add(1).min(self.bound(now_ms));
    }

    /// A Heartbeat arrived at `now_ms`: whether it is taken as the answer to one of ours
    /// (and is then not answered).
    pub(crate) fn answer(&mut self, now_ms: u32) -> bool {
        self.expire(now_ms);
        self.unanswered = self.unanswered.min(self.bound(now_ms));
        if self.unanswered == 0 {
            return false;
        }
        self.unanswered -= 1;
        true
    }

    /// How long the current round of keep-alives has gone on.
    pub(crate) fn round_age(&self, now_ms: u32) -> Duration {
        Duration::from_millis(u64::from(now_ms.wrapping_sub(self.round)))
    }

    /// The peer was heard at `now_ms`, ending a round of keep-alives that was going on.
    pub(crate) fn round_heard(&mut self, now_ms: u32) {
        let took = now_ms.wrapping_sub(self.round);
        self.last_round = u16::try_from(took).unwrap_or(u16::MAX);
    }

    /// How long the last round of keep-alives took (see [`OwnHeartbeats::round_heard`]).
    pub(crate) fn last_round(&self) -> Duration {
        Duration::from_millis(u64::from(self.last_round))
    }

    /// Forgets everything once a whole window has passed since the last one went out.
    fn expire(&mut self, now_ms: u32) {
        if now_ms.wrapping_sub(self.last) > WINDOW_MS {
            self.unanswered = 0;
            self.sent = [0; 3];
        }
    }

    /// The most of ours that can still be answered at `now_ms`: those sent in the slots that
    /// overlap the last window.
    fn bound(&self, now_ms: u32) -> u8 {
        let age = (now_ms / SLOT_MS).wrapping_sub(self.last / SLOT_MS);
        match age {
            0 => self.sent[0]
                .saturating_add(self.sent[1])
                .saturating_add(self.sent[2]),
            1 => self.sent[0].saturating_add(self.sent[1]),
            2 => self.sent[0],
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_within_the_window_is_taken_and_a_late_heartbeat_is_not() {
        let mut h = OwnHeartbeats::default();
        h.sent(1_000);
        assert!(h.answer(1_000 + WINDOW_MS));
        h.sent(20_000);
        // Lost: a Heartbeat past the window is the peer's own.
        assert!(!h.answer(20_001 + WINDOW_MS));
    }

    #[test]
    fn the_count_never_exceeds_what_was_sent_in_the_last_window_and_a_half() {
        let mut h = OwnHeartbeats::default();
        // One a second for ten minutes, never answered.
        for s in 0..600u32 {
            h.sent(s * 1000);
        }
        assert!(h.unanswered <= 12, "{}", h.unanswered);
        // Every one sent in the last window is still counted (none may be forgotten early).
        assert!(h.unanswered >= 8, "{}", h.unanswered);
        let answered = (0..20).filter(|_| h.answer(599_500)).count();
        assert!((8..=12).contains(&answered), "{answered}");
    }

    #[test]
    fn a_round_lasts_until_the_peer_is_heard() {
        let mut h = OwnHeartbeats::default();
        h.start_round(5_000);
        h.sent(5_000);
        h.sent(6_000);
        assert_eq!(h.round_age(7_500), Duration::from_millis(2_500));
        assert!(h.answer(7_600));
        h.round_heard(7_700);
        assert_eq!(h.last_round(), Duration::from_millis(2_700));
        assert!(h.answer(7_700));
        assert!(!h.answer(7_800));
    }
}
