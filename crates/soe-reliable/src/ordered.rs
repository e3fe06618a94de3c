//! Stamps for unreliable ordered data (Ordered, 0x1A): the receiver drops stale packets.

/// Stamps outgoing unreliable ordered packets with a wrapping 16-bit sequence.
#[derive(Debug, Clone, Default)]
pub struct OrderedSender {
    next: u16,
}

impl OrderedSender {
    /// A sender whose first stamp is 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// The stamp for the next packet; wraps after 65535.
    pub fn next_sequence(&mut self) -> u16 {
        let sequence = self.next;
        self.next = self.next.wrapping_add(1);
        sequence
    }
}

/// Accepts unreliable ordered packets newer than any seen so far and drops the rest.
///
/// "Newer" is judged on the 16-bit circle: a stamp up to 32767 ahead of the newest seen is newer,
/// anything else (older, equal, or exactly half the circle away) is stale.
#[derive(Debug, Clone, Default)]
pub struct OrderedReceiver {
    newest: Option<u16>,
}

impl OrderedReceiver {
    /// A receiver that accepts any first stamp.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a packet stamped `sequence` should be delivered; records it as the newest if so.
    pub fn accept(&mut self, sequence: u16) -> bool {
        let newer = match self.newest {
            None => true,
            Some(newest) => {
                let ahead = sequence.wrapping_sub(newest);
                ahead != 0 && ahead < 0x8000
            }
        };
        if newer {
            self.newest = Some(sequence);
        }
        newer
    }

    /// The newest stamp accepted so far.
    pub fn newest(&self) -> Option<u16> {
        self.newest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sender_wraps() {
        let mut s = OrderedSender { next: 0xFFFE };
        assert_eq!(s.next_sequence(), 0xFFFE);
        assert_eq!(s.next_sequence(), 0xFFFF);
        assert_eq!(s.next_sequence(), 0);
        assert_eq!(s.next_sequence(), 1);
    }

    #[test]
    fn receiver_drops_stale_across_wrap() {
        let mut r = OrderedReceiver::new();
        assert!(r.accept(0xFFF0));
        assert!(!r.accept(0xFFF0), "duplicate");
        assert!(!r.accept(0xFFEF), "older");
        assert!(r.accept(0xFFFF));
        assert!(r.accept(0x0003), "newer across the wrap");
        assert!(!r.accept(0xFFFE), "older across the wrap");
        assert!(!r.accept(0x0002));
        assert!(r.accept(0x0004));
        // Half the circle away is ambiguous and dropped; just under half is newer.
        assert!(!r.accept(0x8004));
        assert!(r.accept(0x8003));
        assert_eq!(r.newest(), Some(0x8003));
        // And now 0x0004 is behind.
        assert!(!r.accept(0x0004));
    }

    #[test]
    fn a_long_in_order_run_is_all_accepted() {
        let mut s = OrderedSender::new();
        let mut r = OrderedReceiver::new();
        for _ in 0..200_000 {
            assert!(r.accept(s.next_sequence()));
        }
    }
}
