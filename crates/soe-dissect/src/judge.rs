//! Judging whether bytes look encrypted: a chi-square test of how evenly their byte values
//! spread. [`Randomness`] is the public measure (the `soe serve` echo uses it on what it
//! decrypts); `Judge` applies it to one direction of a session, before and after decryption.

use crate::records::Encryption;

/// The fewest bytes [`Randomness`] gives a verdict on. Below it the test says nothing: a few
/// dozen bytes of any data can look random, or not, by chance.
pub const RANDOMNESS_MIN_BYTES: usize = 256;
/// The most bytes [`Randomness`] counts; the verdict is final then (4 KiB is plenty to tell
/// RC4 output from text or game structures, and bounds the work per session).
pub const RANDOMNESS_MAX_BYTES: usize = 4096;

/// A count of byte values over the first [`RANDOMNESS_MAX_BYTES`] bytes added, which tells
/// whether they look uniformly random (encrypted or compressed) or structured (plaintext).
///
/// No allocation: 1 KiB of counters, filled by [`add`](Self::add). The test is a two-sided
/// chi-square against the uniform distribution (255 degrees of freedom), within six standard
/// deviations of 255 (about 120 to 390): RC4 output scores about 255, text and game
/// structures in the thousands, and a pattern cycling through every byte value (a counter)
/// near 0, too even to be random.
///
/// ```
/// use soe_dissect::Randomness;
///
/// let mut text = Randomness::new();
/// text.add(&b"PlayerUpdate position=12.5,0.0,-3.25 ".repeat(10));
/// assert_eq!(text.looks_random(), Some(false));
///
/// let mut few = Randomness::new();
/// few.add(b"too short to tell");
/// assert_eq!(few.looks_random(), None);
/// ```
#[derive(Clone)]
pub struct Randomness {
    /// Occurrences of each byte value.
    counts: [u32; 256],
    /// Bytes counted.
    total: usize,
}

impl Default for Randomness {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Randomness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Randomness")
            .field("bytes", &self.total)
            .field("looks_random", &self.looks_random())
            .finish()
    }
}

impl Randomness {
    /// Nothing counted yet.
    pub fn new() -> Self {
        Self {
            counts: [0; 256],
            total: 0,
        }
    }

    /// Counts the bytes of `data`, up to [`RANDOMNESS_MAX_BYTES`] in all; the rest is ignored.
    pub fn add(&mut self, data: &[u8]) {
        let room = RANDOMNESS_MAX_BYTES.saturating_sub(self.total);
        for &b in data.iter().take(room) {
            self.counts[usize::from(b)] += 1;
        }
        self.total += data.len().min(room);
    }

    /// Bytes counted so far (at most [`RANDOMNESS_MAX_BYTES`]).
    pub fn len(&self) -> usize {
        self.total
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Whether the counter is full: more bytes change nothing.
    pub fn is_full(&self) -> bool {
        self.total >= RANDOMNESS_MAX_BYTES
    }

    /// Whether the bytes look uniformly random; `None` under [`RANDOMNESS_MIN_BYTES`].
    pub fn looks_random(&self) -> Option<bool> {
        (self.total >= RANDOMNESS_MIN_BYTES).then(|| self.chi_square_uniform())
    }

    /// The chi-square test itself, on however many bytes were counted.
    fn chi_square_uniform(&self) -> bool {
        if self.total == 0 {
            return false;
        }
        let expected = self.total as f64 / 256.0;
        let chi2: f64 = self
            .counts
            .iter()
            .map(|&c| {
                let d = f64::from(c) - expected;
                d * d / expected
            })
            .sum();
        let sigma = (2.0f64 * 255.0).sqrt();
        (chi2 - 255.0).abs() < 6.0 * sigma
    }
}

/// Judges whether one direction's reliable data is encrypted, and whether a key fits it, from
/// the randomness of the bytes sent and of the bytes decrypted.
///
/// Its counters (2 KiB) are allocated on the first message: a session that carries no data
/// costs a few bytes here.
#[derive(Default)]
pub(crate) struct Judge {
    /// The bytes as sent, and after decryption (when a key applies); made on first use.
    counts: Option<Box<[Randomness; 2]>>,
    /// The verdict so far.
    verdict: Encryption,
    /// Whether the verdict is final.
    done: bool,
    /// The key was judged not to fit: this direction's channels stop decrypting.
    pub(crate) key_rejected: bool,
}

impl Judge {
    /// The verdict so far.
    pub(crate) fn verdict(&self) -> Encryption {
        self.verdict
    }

    /// Adds a message; returns the verdict when it changes. With a key applied, the verdict is
    /// [`Encryption::KeyNotJudged`] until [`RANDOMNESS_MIN_BYTES`] were seen.
    pub(crate) fn observe(&mut self, sent: &[u8], decrypted: Option<&[u8]>) -> Option<Encryption> {
        if self.done {
            return None;
        }
        let [sent_counts, decrypted_counts] = &mut **self
            .counts
            .get_or_insert_with(|| Box::new([Randomness::new(), Randomness::new()]));
        sent_counts.add(sent);
        if let Some(d) = decrypted {
            decrypted_counts.add(d);
        }
        let sent_random = sent_counts.looks_random();
        let sent_full = sent_counts.is_full();
        let verdict = match (decrypted, sent_random, decrypted_counts.looks_random()) {
            (None, None, _) => Encryption::Unknown,
            (Some(_), None, _) => Encryption::KeyNotJudged,
            (None, Some(true), _) => Encryption::LooksEncrypted,
            (None, Some(false), _) => Encryption::Plaintext,
            (Some(_), Some(true), Some(false)) => Encryption::Decrypted,
            (Some(_), Some(false), Some(true)) => Encryption::KeyDoesNotFit,
            (Some(_), Some(_), _) => Encryption::Unknown,
        };
        if verdict == Encryption::KeyDoesNotFit {
            self.key_rejected = true;
            self.done = true;
        }
        if sent_full {
            self.done = true;
        }
        if self.done {
            // The verdict is final: the counters are of no more use.
            self.counts = None;
        }
        (verdict != self.verdict).then(|| {
            self.verdict = verdict;
            verdict
        })
    }
}

/// The note a datagram carries when a direction's verdict becomes `verdict`.
pub(crate) fn verdict_note(verdict: Encryption) -> Option<&'static str> {
    match verdict {
        Encryption::LooksEncrypted => Some(
            "this direction's reliable data looks encrypted (its bytes are uniformly random): \
             give its RC4 key to decrypt it",
        ),
        Encryption::KeyDoesNotFit => Some(
            "the RC4 key does not fit this direction: the bytes sent are not random, the \
             decrypted ones are, so the data is plaintext; its messages are shown as sent from \
             here on",
        ),
        Encryption::KeyNotJudged => Some(
            "the RC4 key is applied to this direction, but whether it fits cannot be told until \
             256 message bytes were seen: until then the decrypted messages may be garbage",
        ),
        Encryption::Decrypted => Some(
            "the RC4 key fits this direction: the bytes sent are random, the decrypted ones \
             are not",
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_structured_and_a_keystream_is_random() {
        let mut text = Randomness::new();
        text.add(&b"the quick brown fox ".repeat(30));
        assert_eq!(text.looks_random(), Some(false));
        let mut stream = Randomness::new();
        let mut bytes = vec![0u8; 2048];
        soe_crypto::Rc4::new(b"key").unwrap().apply(&mut bytes);
        stream.add(&bytes);
        assert_eq!(stream.looks_random(), Some(true));
        // bounded: past the maximum nothing is counted
        stream.add(&[0; 10_000]);
        assert_eq!(stream.len(), RANDOMNESS_MAX_BYTES);
        assert!(stream.is_full());
        // a pattern through every byte value, evenly: too even for random bytes
        let mut cycle = Randomness::new();
        cycle.add(&(0..2048u32).map(|j| (j * 7) as u8).collect::<Vec<_>>());
        assert_eq!(cycle.looks_random(), Some(false));
        let mut few = Randomness::new();
        few.add(&bytes[..RANDOMNESS_MIN_BYTES - 1]);
        assert_eq!(few.looks_random(), None);
        few.add(&bytes[..1]);
        assert!(few.looks_random().is_some());
    }

    #[test]
    fn a_key_is_not_judged_before_256_bytes() {
        let mut judge = Judge::default();
        let plain = b"PlayerUpdate position=12.5,0.0,-3.25 ";
        let mut cipher = soe_crypto::Rc4::new(b"key").unwrap();
        let mut sent = plain.to_vec();
        cipher.apply(&mut sent);
        assert_eq!(
            judge.observe(&sent, Some(plain)),
            Some(Encryption::KeyNotJudged)
        );
        assert_eq!(judge.verdict(), Encryption::KeyNotJudged);
        let mut verdict = None;
        for _ in 0..10 {
            let mut sent = plain.to_vec();
            cipher.apply(&mut sent);
            verdict = judge.observe(&sent, Some(plain)).or(verdict);
        }
        assert_eq!(verdict, Some(Encryption::Decrypted));
    }
}
