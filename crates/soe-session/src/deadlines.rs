//! The endpoint's deadlines: sessions filed under their deadlines, the earliest on top.
//!
//! Min-heaps of filings, checked lazily (s2n-quic's timer list, and quinn's way of asking a
//! connection for its deadline once per turn). The endpoint asks a session for its deadline once
//! per turn, not after every call that touched it, and keeps the answer on record
//! ([`TimerRecord`]). The session is filed again only when that deadline is *earlier* than its
//! filings: a deadline that moved later leaves them where they are, lower bounds, until one
//! reaches the top; there it is dropped if the session's other filing still bounds the deadline
//! on record, and otherwise filed again under it. A filing superseded by an earlier one is stale,
//! told apart by its stamp, and dropped when it reaches the top (or in a rebuild once stale
//! filings outnumber the live sessions). After [`Deadlines::settle`] the top is exact: the
//! earliest deadline of the sessions asked since they were last touched.
//!
//! Two heaps, and a session may have a filing in each: deadlines within about [`NEAR_SPAN`] of the
//! endpoint's latest `now` (the ack and probe timers that each message starts and its ack ends)
//! in a small heap, the others (idle and keep-alive timers, one per session) in a large one. A
//! message files the session in the small heap and leaves its filing in the large one; when the
//! small one comes up, the large one still bounds the session's deadline and the small one is
//! just dropped. So a message costs a push and a pop in the small heap, and a session enters the
//! large heap about once per idle timeout, not twice per message.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

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

/// How far ahead of the latest `now` a deadline counts as near.
const NEAR_SPAN: Duration = Duration::from_secs(1);

/// Which heap a filing is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Heap {
    Near = 0,
    Far = 1,
}

impl Heap {
    fn other(self) -> Self {
        match self {
            Self::Near => Self::Far,
            Self::Far => Self::Near,
        }
    }
}

/// The two heaps of filings; see the module documentation.
#[derive(Debug, Default)]
pub(crate) struct Deadlines {
    /// Indexed by [`Heap`]: the near deadlines, and the far ones.
    heaps: [BinaryHeap<Reverse<Filing>>; 2],
    /// A filing before this instant goes to the near heap ([`NEAR_SPAN`] after a recent
    /// `now`).
    near_until: Option<Instant>,
    /// When the near horizon moves next ([`Deadlines::set_now`]).
    horizon_moves: Option<Instant>,
    /// The stamp of the next filing; stamps tell a session's current filings from its old ones
    /// (and from a removed session's whose slab key was reused).
    next_stamp: u32,
}

/// What a session keeps of one of its current filings: the deadline it is filed under and the
/// stamp it was filed with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Filed {
    pub(crate) at: Option<Instant>,
    pub(crate) stamp: u32,
}

/// What the endpoint keeps of one session for its timers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TimerRecord {
    /// The session's current filings, one per heap at most (indexed by [`Heap`]): the earlier
    /// is never later than `deadline` (they wait lazily when the deadline moved later).
    filed: [Filed; 2],
    /// The session's deadline when it was last asked: exact unless `dirty`.
    pub(crate) deadline: Option<Instant>,
    /// A call touched the session since it was last asked (it is on the endpoint's list of
    /// sessions to ask).
    pub(crate) dirty: bool,
}

impl TimerRecord {
    /// The earlier of the session's filings: a lower bound of its deadline.
    #[inline]
    pub(crate) fn filed_at(&self) -> Option<Instant> {
        match (self.filed[0].at, self.filed[1].at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The session's current filings.
    #[cfg(feature = "testing")]
    pub(crate) fn filings(&self) -> impl Iterator<Item = Filed> + '_ {
        self.filed.iter().copied().filter(|f| f.at.is_some())
    }
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
    /// it is earlier than the session's filings (a later one waits lazily).
    #[inline]
    pub(crate) fn update(&mut self, key: usize, rec: &mut TimerRecord, deadline: Option<Instant>) {
        rec.deadline = deadline;
        rec.dirty = false;
        if let Some(at) = deadline {
            if rec.filed_at().is_none_or(|filed| at < filed) {
                let heap = self.heap_for(at);
                rec.filed[heap as usize] = self.file(heap, key, at);
            }
        }
    }

    /// Makes the top exact: drops stale filings and lazy ones the session's other filing
    /// covers, files a session whose filing waited lazily under the deadline on record, and
    /// takes out the filings of a session touched since it was asked (it is filed again when
    /// asked). Rebuilds a heap once stale filings outnumber the live sessions, so that it stays
    /// within a small multiple of them.
    pub(crate) fn settle(&mut self, records: &mut impl Records) {
        while let Some((at, key, stamp, heap)) = self.peek() {
            let Some(rec) = current(records, key, stamp, heap) else {
                self.pop(heap);
                continue;
            };
            match rec.deadline {
                Some(deadline) if !rec.dirty && deadline == at => break,
                Some(deadline) if !rec.dirty => self.put_right(heap, key, rec, deadline),
                _ => {
                    self.pop(heap);
                    rec.filed[heap as usize] = Filed::default();
                }
            }
        }
        let bound = 2 * records.live() + 64;
        for (i, heap) in self.heaps.iter_mut().enumerate() {
            if heap.len() > bound {
                let which = if i == 0 { Heap::Near } else { Heap::Far };
                heap.retain(|Reverse(f)| {
                    current(records, f.key as usize, f.stamp, which).is_some()
                });
            }
        }
    }

    /// The next session due at `now` (its filings taken out), among those asked since they
    /// were last touched; filings that waited lazily are put right as [`Deadlines::settle`]
    /// does, stale ones dropped.
    pub(crate) fn pop_due(&mut self, now: Instant, records: &mut impl Records) -> Option<usize> {
        while let Some((at, key, stamp, heap)) = self.peek() {
            if at > now {
                return None;
            }
            let Some(rec) = current(records, key, stamp, heap) else {
                self.pop(heap);
                continue;
            };
            if self.take_if_due(heap, key, rec, now) {
                return Some(key);
            }
        }
        None
    }

    /// [`Deadlines::pop_due`] for the current top filing (of `heap`) of session `key`: whether
    /// the session is due (it is then unfiled); if not, the filing is put right.
    fn take_if_due(&mut self, heap: Heap, key: usize, rec: &mut TimerRecord, now: Instant) -> bool {
        match rec.deadline {
            Some(deadline) if !rec.dirty && deadline > now => {
                self.put_right(heap, key, rec, deadline);
                false
            }
            Some(_) if !rec.dirty => {
                self.pop(heap);
                // Due: both filings go (the other would bring it up again).
                rec.filed = Default::default();
                true
            }
            _ => {
                self.pop(heap);
                rec.filed[heap as usize] = Filed::default();
                false
            }
        }
    }

    /// The top filing (of `heap`) of session `key` is earlier than its `deadline`: dropped if
    /// the session's other filing still bounds the deadline, else filed again under it (in
    /// place when it stays in the same heap: one sift down, where a pop and a push pay two).
    #[inline]
    fn put_right(&mut self, heap: Heap, key: usize, rec: &mut TimerRecord, deadline: Instant) {
        let other = heap.other();
        if rec.filed[other as usize]
            .at
            .is_some_and(|at| at <= deadline)
        {
            self.pop(heap);
            rec.filed[heap as usize] = Filed::default();
            return;
        }
        let target = self.heap_for(deadline);
        if target == heap {
            let stamp = self.fresh_stamp();
            if let Some(mut top) = self.heaps[heap as usize].peek_mut() {
                top.0.at = deadline;
                top.0.stamp = stamp;
            }
            rec.filed[heap as usize] = Filed {
                at: Some(deadline),
                stamp,
            };
        } else {
            self.pop(heap);
            rec.filed[heap as usize] = Filed::default();
            rec.filed[target as usize] = self.file(target, key, deadline);
        }
    }

    /// Moves the near horizon: deadlines within [`NEAR_SPAN`] of `now` go to the near heap.
    /// It moves in steps of a quarter of the span (one `Instant` addition a step, not one a
    /// turn), so the horizon is between three quarters of the span and the span ahead.
    #[inline]
    pub(crate) fn set_now(&mut self, now: Instant) {
        if self.horizon_moves.is_some_and(|at| now < at) {
            return;
        }
        self.near_until = now.checked_add(NEAR_SPAN);
        self.horizon_moves = now.checked_add(NEAR_SPAN / 4);
    }

    /// Files `key` under `at` in `heap` with a fresh stamp; returns what the session keeps (its
    /// earlier filing in that heap is stale from here on). A key past `u32::MAX` is not filed.
    #[inline]
    fn file(&mut self, heap: Heap, key: usize, at: Instant) -> Filed {
        let stamp = self.fresh_stamp();
        let Ok(key) = u32::try_from(key) else {
            return Filed::default();
        };
        self.heaps[heap as usize].push(Reverse(Filing { at, key, stamp }));
        Filed {
            at: Some(at),
            stamp,
        }
    }

    fn fresh_stamp(&mut self) -> u32 {
        let stamp = self.next_stamp;
        self.next_stamp = self.next_stamp.wrapping_add(1);
        stamp
    }

    #[inline]
    fn heap_for(&self, at: Instant) -> Heap {
        if self.near_until.is_some_and(|until| at < until) {
            Heap::Near
        } else {
            Heap::Far
        }
    }

    /// The earliest filing of both heaps: its deadline, key, stamp and heap (maybe stale, or
    /// lazy: check).
    fn peek(&self) -> Option<(Instant, usize, u32, Heap)> {
        let [near, far] = &self.heaps;
        let (top, heap) = match (near.peek(), far.peek()) {
            (Some(Reverse(n)), Some(Reverse(f))) if f.at < n.at => (f, Heap::Far),
            (Some(Reverse(n)), _) => (n, Heap::Near),
            (None, Some(Reverse(f))) => (f, Heap::Far),
            (None, None) => return None,
        };
        Some((top.at, top.key as usize, top.stamp, heap))
    }

    fn pop(&mut self, heap: Heap) {
        self.heaps[heap as usize].pop();
    }

    /// The earliest filing's deadline: the earliest deadline of the sessions asked since they
    /// were last touched, once [`Deadlines::settle`] has run.
    #[inline]
    pub(crate) fn next(&self) -> Option<Instant> {
        self.peek().map(|(at, ..)| at)
    }

    /// Removes every filing of `key` (a planted fault for the simulator).
    #[cfg(feature = "testing")]
    pub(crate) fn forget(&mut self, key: usize) {
        for heap in &mut self.heaps {
            heap.retain(|Reverse(f)| f.key as usize != key);
        }
    }

    /// Whether a filing of `key` with `stamp` is in a heap (audits).
    #[cfg(feature = "testing")]
    pub(crate) fn contains(&self, key: usize, stamp: u32) -> bool {
        self.heaps
            .iter()
            .flat_map(|h| h.iter())
            .any(|Reverse(f)| f.key as usize == key && f.stamp == stamp)
    }
}

/// The record of `key` if `stamp` is its current filing in `heap`.
fn current(
    records: &mut impl Records,
    key: usize,
    stamp: u32,
    heap: Heap,
) -> Option<&mut TimerRecord> {
    records.record(key).filter(|r| {
        let f = r.filed[heap as usize];
        f.at.is_some() && f.stamp == stamp
    })
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
                // Most deadlines near (acks, probes), some far (idle timers), a few in between.
                2..=3 => m.touch(key, Some(now + Duration::from_micros(x % 3_000_000))),
                _ => m.touch(key, Some(now + Duration::from_micros(x % 5_000))),
            }
            if step % 3 == 0 {
                m.flush(&mut d);
                assert_eq!(d.next(), m.earliest(), "step {step}");
                let bound = 2 * m.recs.len() + 64 + 1;
                assert!(d.heaps.iter().all(|h| h.len() <= bound));
            }
            if step % 7 == 0 {
                m.flush(&mut d);
                now += Duration::from_micros(x % 700);
                d.set_now(now);
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
    fn a_near_filing_that_comes_up_lazily_is_dropped_while_the_far_one_bounds_the_deadline() {
        let t0 = Instant::now();
        let ms = |n: u64| Some(t0 + Duration::from_millis(n));
        let mut d = Deadlines::default();
        let mut m = Model::default();
        d.set_now(t0);
        // An idle timer 30 s out (far), then a probe timeout 4 ms out (near), then the ack:
        // the idle timer again, a little later.
        m.touch(1, ms(30_000));
        m.flush(&mut d);
        m.touch(1, ms(4));
        m.flush(&mut d);
        assert_eq!(d.next(), ms(4));
        assert_eq!((d.heaps[0].len(), d.heaps[1].len()), (1, 1));
        m.touch(1, ms(30_001));
        m.flush(&mut d);
        // The near filing came up, the far one still bounds the deadline: dropped, nothing
        // filed; the far filing is then put right under the deadline on record.
        assert_eq!((d.heaps[0].len(), d.heaps[1].len()), (0, 1));
        assert_eq!(d.next(), ms(30_001));
    }

    #[test]
    fn a_later_deadline_files_nothing_and_an_earlier_one_does() {
        let t0 = Instant::now();
        let ms = |n: u64| Some(t0 + Duration::from_millis(n));
        let mut d = Deadlines::default();
        let mut rec = TimerRecord::default();
        d.update(1, &mut rec, ms(20));
        let first = rec.filed;
        assert_eq!(rec.filed_at(), ms(20));
        // Later: on record, the filing waits lazily.
        d.update(1, &mut rec, ms(40));
        assert_eq!(
            (rec.filed, rec.deadline, d.heaps[1].len()),
            (first, ms(40), 1)
        );
        // Earlier: filed again.
        d.update(1, &mut rec, ms(10));
        assert_eq!((rec.filed_at(), d.heaps[1].len()), (ms(10), 2));
        assert_ne!(rec.filed, first);
    }
}
