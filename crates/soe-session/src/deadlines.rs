//! The endpoint's deadlines: sessions filed under their deadlines, the earliest on top.
//!
//! A min-heap of filings, checked lazily (s2n-quic's timer list, and quinn's way of asking a
//! connection for its deadline once per turn). The endpoint asks a session for its deadline once
//! per turn, not after every call that touched it, and keeps the answer on record
//! ([`TimerRecord`]). The session is filed again only when that deadline is *earlier* than its
//! filing: a deadline that moved later leaves the filing where it is, a lower bound, until it
//! reaches the top, where it is filed again under the deadline on record. A filing superseded
//! by an earlier one is stale, told apart by its stamp, and dropped when it reaches the top (or
//! in a rebuild once stale filings outnumber the live sessions). After [`Deadlines::settle`]
//! the top is exact: the earliest deadline of the sessions asked since they were last touched.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

/// One filing: a session (slab key) under a deadline, with the stamp it was filed with.
/// Filings are ordered by their deadline alone (the order of equal ones does not matter).
#[derive(Debug, Clone, Copy)]
struct Filing {
    at: Instant,
    key: u32,
    stamp: u32,
}

impl PartialEq for Filing {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at
    }
}

impl Eq for Filing {}

impl PartialOrd for Filing {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Filing {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.at.cmp(&other.at)
    }
}

/// The heap of filings; see the module documentation.
#[derive(Debug, Default)]
pub(crate) struct Deadlines {
    heap: BinaryHeap<Reverse<Filing>>,
    /// The stamp of the next filing; stamps tell a session's current filing from its old ones
    /// (and from a removed session's whose slab key was reused).
    next_stamp: u32,
}

/// What a session keeps of its current filing: the deadline it is filed under (never later
/// than the session's own) and the stamp it was filed with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Filed {
    pub(crate) at: Option<Instant>,
    pub(crate) stamp: u32,
}

/// What the endpoint keeps of one session for its timers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TimerRecord {
    /// The session's current filing: never later than `deadline` (it waits lazily when the
    /// deadline moved later).
    pub(crate) filed: Filed,
    /// The session's deadline when it was last asked: exact unless `dirty`.
    pub(crate) deadline: Option<Instant>,
    /// A call touched the session since it was last asked (it is on the endpoint's list of
    /// sessions to ask).
    pub(crate) dirty: bool,
}

/// The sessions' [`TimerRecord`]s by slab key (the endpoint's slab; a model in tests).
pub(crate) trait Records {
    /// The record of the session at `key`, if there is one.
    fn record(&mut self, key: usize) -> Option<&mut TimerRecord>;
    /// Sessions held.
    fn live(&self) -> usize;
}

impl Deadlines {
    /// Takes `deadline`, just asked of the session at `key`: on record, and filed only when
    /// it is earlier than the session's filing (a later one waits lazily).
    pub(crate) fn update(&mut self, key: usize, rec: &mut TimerRecord, deadline: Option<Instant>) {
        rec.deadline = deadline;
        rec.dirty = false;
        if let Some(at) = deadline {
            if rec.filed.at.is_none_or(|filed| at < filed) {
                rec.filed = self.file(key, at);
            }
        }
    }

    /// Makes the top exact: drops stale filings, files a session whose filing waited lazily
    /// under the deadline on record, and takes out the filing of a session touched since it
    /// was asked (it is filed again when asked). Rebuilds the heap once stale filings
    /// outnumber the live sessions, so that it stays within a small multiple of them.
    pub(crate) fn settle(&mut self, records: &mut impl Records) {
        while let Some((at, key, stamp)) = self.peek() {
            let Some(rec) = current(records, key, stamp) else {
                self.pop();
                continue;
            };
            if !rec.dirty && rec.deadline == Some(at) {
                break;
            }
            rec.filed = match (rec.dirty, rec.deadline) {
                (false, Some(deadline)) => self.refile_top(deadline),
                _ => {
                    self.pop();
                    Filed::default()
                }
            };
        }
        if self.heap.len() > 2 * records.live() + 64 {
            self.heap
                .retain(|Reverse(f)| current(records, f.key as usize, f.stamp).is_some());
        }
    }

    /// The next session due at `now` (its filing taken out), among those asked since they
    /// were last touched; a filing that waited lazily is filed again under the deadline on
    /// record, stale ones are dropped.
    pub(crate) fn pop_due(&mut self, now: Instant, records: &mut impl Records) -> Option<usize> {
        while let Some((at, key, stamp)) = self.peek() {
            if at > now {
                return None;
            }
            let Some(rec) = current(records, key, stamp) else {
                self.pop();
                continue;
            };
            rec.filed = match rec.deadline {
                Some(deadline) if !rec.dirty && deadline > now => self.refile_top(deadline),
                deadline => {
                    self.pop();
                    rec.filed = Filed::default();
                    if !rec.dirty && deadline.is_some() {
                        return Some(key);
                    }
                    Filed::default()
                }
            };
        }
        None
    }

    /// Files the session of the top filing again under `at` (later than the top's deadline),
    /// in place: one sift down, where a pop and a push pay two.
    fn refile_top(&mut self, at: Instant) -> Filed {
        let stamp = self.next_stamp;
        self.next_stamp = self.next_stamp.wrapping_add(1);
        match self.heap.peek_mut() {
            Some(mut top) => {
                top.0.at = at;
                top.0.stamp = stamp;
                Filed {
                    at: Some(at),
                    stamp,
                }
            }
            None => Filed::default(),
        }
    }

    /// Files `key` under `at` with a fresh stamp; returns what the session keeps (its earlier
    /// filings are stale from here on). A key past `u32::MAX` is not filed.
    fn file(&mut self, key: usize, at: Instant) -> Filed {
        let stamp = self.next_stamp;
        self.next_stamp = self.next_stamp.wrapping_add(1);
        let Ok(key) = u32::try_from(key) else {
            return Filed::default();
        };
        self.heap.push(Reverse(Filing { at, key, stamp }));
        Filed {
            at: Some(at),
            stamp,
        }
    }

    /// The earliest filing: its deadline, key and stamp (maybe stale, or lazy: check).
    fn peek(&self) -> Option<(Instant, usize, u32)> {
        let Reverse(top) = self.heap.peek()?;
        Some((top.at, top.key as usize, top.stamp))
    }

    fn pop(&mut self) {
        self.heap.pop();
    }

    /// The earliest filing's deadline: the earliest deadline of the sessions asked since they
    /// were last touched, once [`Deadlines::settle`] has run.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.peek().map(|(at, _, _)| at)
    }

    /// Removes every filing of `key` (a planted fault for the simulator).
    #[cfg(feature = "testing")]
    pub(crate) fn forget(&mut self, key: usize) {
        self.heap.retain(|Reverse(f)| f.key as usize != key);
    }

    /// Whether a filing of `key` with `stamp` is in the heap (audits).
    #[cfg(feature = "testing")]
    pub(crate) fn contains(&self, key: usize, stamp: u32) -> bool {
        self.heap
            .iter()
            .any(|Reverse(f)| f.key as usize == key && f.stamp == stamp)
    }
}

/// The record of `key` if `stamp` is its current filing.
fn current(records: &mut impl Records, key: usize, stamp: u32) -> Option<&mut TimerRecord> {
    records
        .record(key)
        .filter(|r| r.filed.at.is_some() && r.filed.stamp == stamp)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::time::Duration;

    use super::*;

    /// A model of the endpoint's side: each key's record, its true deadline, and the keys
    /// touched since they were asked.
    #[derive(Default)]
    struct Model {
        recs: HashMap<usize, TimerRecord>,
        truth: HashMap<usize, Option<Instant>>,
        dirty: Vec<usize>,
    }

    impl Records for Model {
        fn record(&mut self, key: usize) -> Option<&mut TimerRecord> {
            self.recs.get_mut(&key)
        }
        fn live(&self) -> usize {
            self.recs.len()
        }
    }

    impl Model {
        /// A call changed `key`'s deadline (or made it a new session).
        fn touch(&mut self, key: usize, at: Option<Instant>) {
            self.truth.insert(key, at);
            let rec = self.recs.entry(key).or_default();
            if !rec.dirty {
                rec.dirty = true;
                self.dirty.push(key);
            }
        }

        fn remove(&mut self, d: &mut Deadlines, key: usize) {
            self.recs.remove(&key);
            self.truth.remove(&key);
            self.dirty.retain(|&k| k != key);
            d.settle(self);
        }

        /// The end of a turn: every touched session asked once.
        fn flush(&mut self, d: &mut Deadlines) {
            for key in std::mem::take(&mut self.dirty) {
                let at = self.truth[&key];
                if let Some(rec) = self.recs.get_mut(&key) {
                    d.update(key, rec, at);
                }
            }
            d.settle(self);
        }

        fn earliest(&self) -> Option<Instant> {
            self.truth.values().flatten().min().copied()
        }
    }

    #[test]
    fn after_each_turn_the_top_is_the_earliest_deadline_and_due_ones_come_out() {
        let t0 = Instant::now();
        let mut now = t0;
        let mut d = Deadlines::default();
        let mut m = Model::default();
        // A seeded walk: deadlines moved later, earlier, cleared, sessions removed and keys
        // reused, time moving on and the due sessions served.
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for step in 0..40_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = (x % 50) as usize;
            match x % 11 {
                0 => m.remove(&mut d, key),
                1 => m.touch(key, None),
                _ => m.touch(key, Some(now + Duration::from_micros(x % 5_000))),
            }
            if step % 3 == 0 {
                m.flush(&mut d);
                assert_eq!(d.next(), m.earliest(), "step {step}");
                assert!(d.heap.len() <= 2 * m.recs.len() + 64 + 1);
            }
            if step % 7 == 0 {
                m.flush(&mut d);
                now += Duration::from_micros(x % 700);
                let mut due = Vec::new();
                while let Some(key) = d.pop_due(now, &mut m) {
                    due.push(key);
                }
                due.sort_unstable();
                let mut expected: Vec<usize> = (m.truth.iter())
                    .filter(|(_, at)| at.is_some_and(|at| at <= now))
                    .map(|(&k, _)| k)
                    .collect();
                expected.sort_unstable();
                assert_eq!(due, expected, "step {step}");
                // Served: each due session moves on (as a session's timer does).
                for key in due {
                    m.touch(key, Some(now + Duration::from_millis(3)));
                }
            }
        }
    }

    #[test]
    fn a_later_deadline_files_nothing_and_an_earlier_one_does() {
        let t0 = Instant::now();
        let ms = |n: u64| Some(t0 + Duration::from_millis(n));
        let mut d = Deadlines::default();
        let mut rec = TimerRecord::default();
        d.update(1, &mut rec, ms(20));
        let first = rec.filed;
        assert_eq!(first.at, ms(20));
        // Later: on record, the filing waits lazily.
        d.update(1, &mut rec, ms(40));
        assert_eq!((rec.filed, rec.deadline, d.heap.len()), (first, ms(40), 1));
        // Earlier: filed again.
        d.update(1, &mut rec, ms(10));
        assert_eq!((rec.filed.at, d.heap.len()), (ms(10), 2));
        assert_ne!(rec.filed.stamp, first.stamp);
    }
}
