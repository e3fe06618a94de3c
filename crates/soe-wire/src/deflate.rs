//! A small zlib (RFC 1950) encoder for datagram-sized bodies: greedy LZ77 over a single-probe
//! hash of 3-byte prefixes, one final block with the fixed Huffman codes of RFC 1951 § 3.2.6,
//! and the Adler-32 trailer.
//!
//! Why not a general deflater: every SOE datagram is its own zlib stream, and a general
//! deflater must clear its whole match state (miniz_oxide: ~300 KiB; zlib: a 64–128 KiB hash
//! head) before each one, which costs several microseconds per datagram whatever its size. Here
//! the hash table is never cleared: it stores positions on a counter that keeps growing across
//! streams, so an entry left by an earlier stream is below the current stream's base and is
//! simply ignored. A stream costs only the work on its own bytes. For bodies of a few hundred
//! bytes, fixed codes lose little against dynamic ones (whose tree header alone is dozens of
//! bytes). Any inflater reads the output; the tests check it with miniz_oxide's.

/// Hash table size (entries): 4,096 positions, 16 KiB.
const HASH_BITS: u32 = 12;
/// Shortest and longest match deflate can express, and its farthest distance.
const MIN_MATCH: usize = 3;
const MAX_MATCH: usize = 258;
const MAX_DISTANCE: usize = 32_768;

/// zlib header: deflate with a 32 KiB window (0x78), no dictionary, "fastest" level, check bits
/// making the 16-bit value a multiple of 31.
const ZLIB_HEADER: [u8; 2] = [0x78, 0x01];

/// Lengths 3..=258: (code 257.. minus 257, base) for each code, and their extra bits.
const LENGTH_BASE: [u16; 29] = [
    3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131,
    163, 195, 227, 258,
];
const LENGTH_EXTRA: [u8; 29] = [
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
];
/// Distances 1..=32768: base and extra bits of each of the 30 distance codes.
const DIST_BASE: [u16; 30] = [
    1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537,
    2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577,
];
const DIST_EXTRA: [u8; 30] = [
    0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13,
    13,
];

/// The fixed literal/length code of each symbol 0..=287, bit-reversed for an LSB-first writer,
/// with its length.
const FIXED_LITLEN: [(u16, u8); 288] = fixed_litlen();

const fn fixed_litlen() -> [(u16, u8); 288] {
    let mut t = [(0u16, 0u8); 288];
    let mut s = 0;
    while s < 288 {
        let (code, len) = match s {
            0..=143 => (0x30 + s as u16, 8),
            144..=255 => (0x190 + (s as u16 - 144), 9),
            256..=279 => (s as u16 - 256, 7),
            _ => (0xC0 + (s as u16 - 280), 8),
        };
        t[s] = (reverse(code, len), len);
        s += 1;
    }
    t
}

const fn reverse(code: u16, len: u8) -> u16 {
    let mut out = 0u16;
    let mut i = 0;
    while i < len {
        out |= ((code >> i) & 1) << (len - 1 - i);
        i += 1;
    }
    out
}

/// Reusable encoder state: the hash table and the position counter (see the module docs).
pub(crate) struct Deflater {
    /// `head[h]` = position (on the running counter) of the last 3-byte prefix hashing to `h`.
    head: Box<[u32; 1 << HASH_BITS]>,
    /// Running position of the current stream's first byte.
    base: u32,
}

impl Default for Deflater {
    fn default() -> Self {
        Self {
            head: Box::new([0; 1 << HASH_BITS]),
            // Start above zero so the zeroed table holds no valid entry.
            base: 1,
        }
    }
}

/// LSB-first bit writer into a bounded slice.
struct Bits<'a> {
    out: &'a mut [u8],
    at: usize,
    acc: u64,
    n: u32,
}

impl Bits<'_> {
    /// Appends the low `len` bits of `v`; `false` once the output is full.
    #[inline]
    fn put(&mut self, v: u32, len: u32) -> bool {
        self.acc |= u64::from(v) << self.n;
        self.n += len;
        while self.n >= 8 {
            let Some(b) = self.out.get_mut(self.at) else {
                return false;
            };
            *b = self.acc as u8;
            self.at += 1;
            self.acc >>= 8;
            self.n -= 8;
        }
        true
    }

    fn byte(&mut self, b: u8) -> bool {
        self.put(u32::from(b), 8)
    }

    /// Pads to a byte boundary.
    fn align(&mut self) -> bool {
        let pad = (8 - self.n % 8) % 8;
        self.put(0, pad)
    }
}

impl Deflater {
    /// Writes `input` as one zlib stream into `out`; returns the length written, or `None` if it
    /// does not fit.
    pub(crate) fn compress(&mut self, input: &[u8], out: &mut [u8]) -> Option<usize> {
        let len = u32::try_from(input.len()).ok()?;
        // Keep every running position below u32::MAX; on wrap-around start afresh.
        if self
            .base
            .checked_add(len)
            .is_none_or(|end| end > u32::MAX - 1)
        {
            self.head.fill(0);
            self.base = 1;
        }
        let base = self.base;
        self.base += len;

        let mut w = Bits {
            out,
            at: 0,
            acc: 0,
            n: 0,
        };
        let mut ok = w.byte(ZLIB_HEADER[0]) && w.byte(ZLIB_HEADER[1]);
        // BFINAL = 1, BTYPE = 01 (fixed codes).
        ok &= w.put(0b011, 3);
        let mut i = 0usize;
        while ok && i < input.len() {
            let found = if i + MIN_MATCH <= input.len() {
                let h = hash(input, i);
                let cand = self.head[h];
                self.head[h] = base + i as u32;
                if cand >= base && (base + i as u32 - cand) as usize <= MAX_DISTANCE {
                    let c = (cand - base) as usize;
                    let n = match_len(input, c, i);
                    (n >= MIN_MATCH).then_some((n, i - c))
                } else {
                    None
                }
            } else {
                None
            };
            match found {
                Some((n, dist)) => {
                    ok &= put_match(&mut w, n, dist);
                    // Index the positions inside the match too (better matches later).
                    for j in i + 1..(i + n).min(input.len().saturating_sub(MIN_MATCH - 1)) {
                        self.head[hash(input, j)] = base + j as u32;
                    }
                    i += n;
                }
                None => {
                    let (code, l) = FIXED_LITLEN[usize::from(input[i])];
                    ok &= w.put(u32::from(code), u32::from(l));
                    i += 1;
                }
            }
        }
        let (eob, l) = FIXED_LITLEN[256];
        ok = ok && w.put(u32::from(eob), u32::from(l)) && w.align();
        for b in adler32(input).to_be_bytes() {
            ok = ok && w.byte(b);
        }
        ok.then_some(w.at)
    }
}

#[inline]
fn hash(input: &[u8], i: usize) -> usize {
    let v = u32::from(input[i]) | u32::from(input[i + 1]) << 8 | u32::from(input[i + 2]) << 16;
    (v.wrapping_mul(0x9E37_79B1) >> (32 - HASH_BITS)) as usize
}

/// How many bytes at `cand` equal those at `at` (`cand < at`), up to [`MAX_MATCH`].
#[inline]
fn match_len(input: &[u8], cand: usize, at: usize) -> usize {
    let limit = (input.len() - at).min(MAX_MATCH);
    let (a, b) = (&input[cand..cand + limit], &input[at..at + limit]);
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

fn put_match(w: &mut Bits<'_>, len: usize, dist: usize) -> bool {
    // Largest code whose base is <= len (258 has its own code, 285).
    let lc = LENGTH_BASE.partition_point(|&b| usize::from(b) <= len) - 1;
    let (code, l) = FIXED_LITLEN[257 + lc];
    let dc = DIST_BASE.partition_point(|&b| usize::from(b) <= dist) - 1;
    w.put(u32::from(code), u32::from(l))
        && w.put(
            (len - usize::from(LENGTH_BASE[lc])) as u32,
            u32::from(LENGTH_EXTRA[lc]),
        )
        && w.put(u32::from(reverse(dc as u16, 5)), 5)
        && w.put(
            (dist - usize::from(DIST_BASE[dc])) as u32,
            u32::from(DIST_EXTRA[dc]),
        )
}

/// Adler-32 (RFC 1950 § 8.2).
fn adler32(data: &[u8]) -> u32 {
    const MOD: u32 = 65_521;
    // The largest run before the sums can overflow u32.
    const NMAX: usize = 5552;
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in data.chunks(NMAX) {
        for &x in chunk {
            a += u32::from(x);
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

#[cfg(test)]
mod tests {
    use super::*;
    use miniz_oxide::inflate::decompress_to_vec_zlib;

    fn round_trip(d: &mut Deflater, input: &[u8]) -> usize {
        let mut out = vec![0u8; input.len() * 2 + 64];
        let n = d.compress(input, &mut out).expect("fits");
        let back = decompress_to_vec_zlib(&out[..n]).expect("valid zlib");
        assert_eq!(back, input);
        n
    }

    #[test]
    fn miniz_inflates_what_it_writes() {
        let mut d = Deflater::default();
        let mut state = 0x1234_5678_9abc_def0u64;
        for len in [0usize, 1, 2, 3, 4, 24, 100, 400, 512, 4000, 70_000] {
            let text: Vec<u8> = b"the same words again and again, "
                .iter()
                .copied()
                .cycle()
                .take(len)
                .collect();
            let n = round_trip(&mut d, &text);
            if len >= 400 {
                assert!(n < len / 4, "text of {len} deflated to {n}");
            }
            let noise: Vec<u8> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    (state >> 32) as u8
                })
                .collect();
            round_trip(&mut d, &noise);
            // long runs: maximal matches, distance 1
            round_trip(&mut d, &vec![7u8; len]);
        }
        assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
    }

    #[test]
    fn too_small_an_output_is_none() {
        let mut d = Deflater::default();
        let mut out = [0u8; 8];
        assert_eq!(d.compress(&[1u8; 100], &mut out), None);
    }

    #[test]
    fn counter_wrap_starts_afresh() {
        let mut d = Deflater {
            base: u32::MAX - 100,
            ..Deflater::default()
        };
        round_trip(&mut d, &[5u8; 300]);
        round_trip(&mut d, &[6u8; 300]);
    }
}
