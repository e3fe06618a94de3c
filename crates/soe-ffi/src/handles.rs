//! The session numbers the C ABI hands out (`soe_session`), both ways, without hashing on the
//! hot path: a number names one session forever (numbers are never reused), and the session
//! behind it is found in one lookup of a small integer map.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use ::soe_session::SessionHandle;

/// One live session's number and the host's pointer for it.
#[derive(Debug, Clone, Copy)]
struct Slot {
    handle: SessionHandle,
    number: u64,
    /// `soe_session_set_user`'s pointer, as an address (the library never follows it).
    user: usize,
}

/// Session numbers issued by one endpoint.
#[derive(Debug, Default)]
pub(crate) struct Handles {
    /// By the session's slab key (`SessionHandle::index`, unique among live sessions): the
    /// handle that holds it and its number. A direct index, no hashing: `number` runs for every
    /// event.
    by_key: Vec<Option<Slot>>,
    /// By number. The numbers are this library's own (a counter), not chosen by a peer, so a
    /// multiplicative hash is enough; SipHash's flood resistance would buy nothing here.
    by_number: HashMap<u64, SessionHandle, BuildHasherDefault<NumberHasher>>,
    /// The last number issued; 0 is never one.
    last: u64,
}

impl Handles {
    /// The number of the session behind `h`, issued on first sight.
    #[inline]
    pub(crate) fn number(&mut self, h: SessionHandle) -> u64 {
        if let Some(Some(slot)) = self.by_key.get(h.index()) {
            if slot.handle == h {
                return slot.number;
            }
        }
        self.issue(h)
    }

    /// A new number for `h` (once per session).
    #[cold]
    #[inline(never)]
    fn issue(&mut self, h: SessionHandle) -> u64 {
        let key = h.index();
        self.last += 1;
        let number = self.last;
        if self.by_key.len() <= key {
            self.by_key.resize(key + 1, None);
        }
        // A session that left without its Closed event being taken held this key before.
        let slot = Slot {
            handle: h,
            number,
            user: 0,
        };
        if let Some(old) = self.by_key[key].replace(slot) {
            self.by_number.remove(&old.number);
        }
        self.by_number.insert(number, h);
        number
    }

    /// The session a number names, if it is live.
    #[inline]
    pub(crate) fn session(&self, number: u64) -> Option<SessionHandle> {
        self.by_number.get(&number).copied()
    }

    /// The host's pointer for a live session (0 when none was set).
    #[inline]
    pub(crate) fn user(&self, h: SessionHandle) -> usize {
        match self.by_key.get(h.index()) {
            Some(Some(slot)) if slot.handle == h => slot.user,
            _ => 0,
        }
    }

    /// Sets the host's pointer for a session (issuing its number if need be).
    pub(crate) fn set_user(&mut self, h: SessionHandle, user: usize) {
        self.number(h);
        if let Some(Some(slot)) = self.by_key.get_mut(h.index()) {
            slot.user = user;
        }
    }

    /// Forgets a session (its Closed event was taken): its number names nothing from now on.
    pub(crate) fn forget(&mut self, h: SessionHandle) {
        if let Some(entry) = self.by_key.get_mut(h.index()) {
            if entry.is_some_and(|slot| slot.handle == h) {
                if let Some(slot) = entry.take() {
                    self.by_number.remove(&slot.number);
                }
            }
        }
    }
}

/// Hashes a `u64` session number by one multiplication (Fibonacci hashing): consecutive numbers
/// spread over the table's buckets and control bytes.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct NumberHasher(u64);

impl Hasher for NumberHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used (the keys are u64); fold anything else in, byte by byte.
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::soe_session::{Endpoint, EndpointConfig, SessionConfig};
    use std::net::SocketAddr;
    use std::sync::Arc;
    use std::time::Instant;

    /// Real handles: sessions of a client endpoint, one per server address.
    fn handles(n: u16) -> (Endpoint<SocketAddr>, Vec<SessionHandle>) {
        let cfg = Arc::new(SessionConfig::new("T"));
        let mut ep = Endpoint::new(Arc::new(EndpointConfig::client(cfg)));
        let now = Instant::now();
        let hs = (0..n)
            .map(|i| {
                ep.connect(now, SocketAddr::from(([127, 0, 0, 1], 1000 + i)))
                    .unwrap()
            })
            .collect();
        (ep, hs)
    }

    #[test]
    fn numbers_are_stable_unique_and_never_reused() {
        let (_ep, hs) = handles(50);
        let mut t = Handles::default();
        let numbers: Vec<u64> = hs.iter().map(|&h| t.number(h)).collect();
        assert_eq!(numbers, (1..=50).collect::<Vec<_>>());
        for (&h, &n) in hs.iter().zip(&numbers) {
            assert_eq!(t.number(h), n);
            assert_eq!(t.session(n), Some(h));
        }
        t.forget(hs[7]);
        assert_eq!(t.session(8), None);
        // Forgetting twice, or a handle never seen, is harmless.
        t.forget(hs[7]);
        assert_eq!(t.session(9), Some(hs[8]));
        // Seen again (it cannot be in practice), it gets a new number, never its old one.
        assert_eq!(t.number(hs[7]), 51);
        assert_eq!(t.session(0), None);
    }

    #[test]
    fn a_key_taken_over_by_a_new_session_drops_the_old_number() {
        let (mut ep, hs) = handles(1);
        let mut t = Handles::default();
        assert_eq!(t.number(hs[0]), 1);
        // The session goes away without its Closed event taken; the key is reused.
        ep.close(
            Instant::now(),
            hs[0],
            ::soe_session::DisconnectReason::Application,
        );
        let mut buf = Vec::new();
        let later = Instant::now() + std::time::Duration::from_secs(60);
        for _ in 0..100 {
            ep.handle_timeout(later);
            while ep.poll_transmit(later, &mut buf).is_some() {}
            while ep.poll_event().is_some() {}
        }
        let again = ep
            .connect(later, SocketAddr::from(([127, 0, 0, 1], 2000)))
            .unwrap();
        assert_eq!(again.index(), hs[0].index(), "the slab reuses the key");
        assert_ne!(again, hs[0]);
        assert_eq!(t.number(again), 2);
        assert_eq!(t.session(1), None);
        assert_eq!(t.session(2), Some(again));
    }
}
