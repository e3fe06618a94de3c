//! The endpoint's deadlines: every session filed under its next deadline, the earliest on top.
//!
//! A min-heap of filings checked lazily. A session whose deadline changes is filed again under
//! the new one with a fresh stamp; its old filing stays in the heap, stale, and is dropped when it
//! reaches the top (or in a rebuild once stale filings outnumber the live ones). Moving a
//! deadline therefore costs one push, where an ordered set pays a removal and an insertion, and
//! the top is always a live filing, so [`Deadlines::next`] reads it directly.
//!
//! Deadlines are kept as nanoseconds from the first one filed, so a filing is 16 bytes.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

/// One filing: a session (slab key) under a deadline, with the stamp it was filed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Filing {
    /// The deadline, in nanoseconds from the origin, earlier ones negative (ordered first).
    at: i64,
    key: u32,
    stamp: u32,
}

/// The heap of filings; see the module documentation.
#[derive(Debug, Default)]
pub(crate) struct Deadlines {
    heap: BinaryHeap<Reverse<Filing>>,
    /// The instant deadlines are counted from (the first one filed).
    origin: Option<Instant>,
    /// The stamp of the next filing; stamps tell a session's current filing from its old ones
    /// (and from a removed session's whose slab key was reused).
    next_stamp: u32,
}

/// What a session keeps of its filing: the deadline and the stamp it was filed with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Filed {
    pub(crate) at: Option<Instant>,
    pub(crate) stamp: u32,
}

impl Deadlines {
    /// Files `key` under `at` (or under nothing), replacing its filing `filed`; returns what the
    /// session keeps. `is_current` answers, for a key and a stamp, whether that filing is the
    /// key's current one: it keeps the top of the heap live.
    pub(crate) fn file(
        &mut self,
        key: usize,
        at: Option<Instant>,
        is_current: impl Fn(usize, u32) -> bool,
        live: usize,
    ) -> Filed {
        let stamp = self.next_stamp;
        self.next_stamp = self.next_stamp.wrapping_add(1);
        if let (Some(at), Ok(key)) = (at, u32::try_from(key)) {
            let origin = *self.origin.get_or_insert(at);
            self.heap.push(Reverse(Filing {
                at: nanos_from(origin, at),
                key,
                stamp,
            }));
        }
        // The new filing is the key's current one from here on (the caller stores it when this
        // returns), and its old filings are stale already.
        let current = |k: usize, s: u32| {
            if k == key {
                s == stamp && at.is_some()
            } else {
                is_current(k, s)
            }
        };
        self.settle(current, live);
        Filed { at, stamp }
    }

    /// Drops stale filings from the top, and rebuilds the heap when stale ones outnumber the
    /// `live` sessions (so it stays within a small multiple of them).
    pub(crate) fn settle(&mut self, is_current: impl Fn(usize, u32) -> bool, live: usize) {
        let current = |f: &Filing| is_current(f.key as usize, f.stamp);
        while let Some(Reverse(top)) = self.heap.peek() {
            if current(top) {
                break;
            }
            self.heap.pop();
        }
        if self.heap.len() > 2 * live + 64 {
            self.heap.retain(|Reverse(f)| current(f));
        }
    }

    /// The earliest deadline (the top is always a current filing).
    pub(crate) fn next(&self) -> Option<Instant> {
        let Reverse(top) = self.heap.peek()?;
        self.instant(top.at)
    }

    /// Takes the earliest filing if it is due at `now`: its key and stamp (maybe stale: check).
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<(usize, u32)> {
        let Reverse(top) = self.heap.peek()?;
        if self.instant(top.at).is_some_and(|at| at > now) {
            return None;
        }
        let Reverse(f) = self.heap.pop()?;
        Some((f.key as usize, f.stamp))
    }

    /// Removes every filing of `key` (a planted fault for the simulator, and audits).
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

    fn instant(&self, nanos: i64) -> Option<Instant> {
        let origin = self.origin?;
        let magnitude = Duration::from_nanos(nanos.unsigned_abs());
        if nanos < 0 {
            origin.checked_sub(magnitude)
        } else {
            origin.checked_add(magnitude)
        }
    }
}

/// `at` as signed nanoseconds from `origin` (saturating at about 292 years either way).
fn nanos_from(origin: Instant, at: Instant) -> i64 {
    let later = at.saturating_duration_since(origin).as_nanos();
    let earlier = origin.saturating_duration_since(at).as_nanos();
    if later > 0 {
        i64::try_from(later).unwrap_or(i64::MAX)
    } else {
        i64::try_from(earlier).map_or(i64::MIN, |n| -n)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// A model of the endpoint's side: each key's current filing.
    #[derive(Default)]
    struct Model {
        filed: HashMap<usize, Filed>,
    }

    impl Model {
        fn file(&mut self, d: &mut Deadlines, key: usize, at: Option<Instant>) {
            let filed = &self.filed;
            let f = d.file(
                key,
                at,
                |k, s| {
                    filed
                        .get(&k)
                        .is_some_and(|f| f.stamp == s && f.at.is_some())
                },
                filed.len(),
            );
            self.filed.insert(key, f);
        }

        fn earliest(&self) -> Option<Instant> {
            self.filed.values().filter_map(|f| f.at).min()
        }
    }

    #[test]
    fn the_top_is_always_the_earliest_current_deadline() {
        let t0 = Instant::now();
        let ms = |n: u64| Some(t0 + Duration::from_millis(n));
        let mut d = Deadlines::default();
        let mut m = Model::default();
        // A seeded walk of filings: deadlines moved later, earlier, cleared, keys reused.
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = (x % 50) as usize;
            let at = if x % 7 == 0 { None } else { ms(x % 1000) };
            m.file(&mut d, key, at);
            assert_eq!(d.next(), m.earliest());
            assert!(d.heap.len() <= 2 * m.filed.len() + 64 + 1);
        }
    }

    #[test]
    fn due_filings_come_out_in_order_and_stale_ones_are_told_apart() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let mut d = Deadlines::default();
        let mut m = Model::default();
        m.file(&mut d, 1, Some(ms(30)));
        m.file(&mut d, 2, Some(ms(10)));
        m.file(&mut d, 3, Some(ms(20)));
        // Key 3 moves later: its filing at 20 ms goes stale.
        m.file(&mut d, 3, Some(ms(40)));
        let mut due = Vec::new();
        while let Some((key, stamp)) = d.pop_due(ms(35)) {
            if m.filed.get(&key).is_some_and(|f| f.stamp == stamp) {
                due.push(key);
            }
        }
        assert_eq!(due, vec![2, 1]);
        assert_eq!(d.pop_due(ms(35)), None);
        assert_eq!(d.next(), Some(ms(40)));
    }
}
