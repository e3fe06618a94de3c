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
//!
//! Cost per stream: the hash and match search on each literal, eight bytes compared at a time
//! in a match, only the last period of a repeating match indexed (the earlier positions would be
//! overwritten by it), bits written out four bytes at a time, and zlib-rs's SIMD Adler-32. The
//! bytes written are those of the plain algorithm; a test holds them to a plain implementation.

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

/// LSB-first bit writer into a bounded slice. Bits gather in a 64-bit accumulator and leave it
/// four bytes at a time; `full` records that the output ran out (the caller then gives up).
struct Bits<'a> {
    out: &'a mut [u8],
    at: usize,
    acc: u64,
    n: u32,
    full: bool,
}

impl Bits<'_> {
    /// Appends the low `len` bits of `v` (`len` <= 32; `v` has no bits above them).
    #[inline]
    fn put(&mut self, v: u32, len: u32) {
        debug_assert!(len <= 32 && u64::from(v) >> len == 0);
        self.acc |= u64::from(v) << self.n;
        self.n += len;
        if self.n >= 32 {
            match self.out.get_mut(self.at..self.at + 4) {
                Some(dst) => dst.copy_from_slice(&(self.acc as u32).to_le_bytes()),
                None => self.full = true,
            }
            self.at += 4;
            self.acc >>= 32;
            self.n -= 32;
        }
    }

    /// Pads to a byte boundary and writes out what is left; the length written, or `None` if
    /// the output ran out.
    fn finish(mut self) -> Option<usize> {
        let bytes = self.n.div_ceil(8) as usize;
        let tail = (self.acc as u32).to_le_bytes();
        match (
            self.out.get_mut(self.at..self.at + bytes),
            tail.get(..bytes),
        ) {
            (Some(dst), Some(src)) if !self.full => dst.copy_from_slice(src),
            _ => return None,
        }
        self.at += bytes;
        self.n = 0;
        Some(self.at)
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
            full: false,
        };
        w.put(u32::from(u16::from_le_bytes(ZLIB_HEADER)), 16);
        // BFINAL = 1, BTYPE = 01 (fixed codes).
        w.put(0b011, 3);
        // Positions before this one start a 3-byte prefix, so they are hashed.
        let hashed_end = input.len().saturating_sub(MIN_MATCH - 1);
        let mut i = 0usize;
        while i < input.len() && !w.full {
            let found = match prefix(input, i) {
                Some(p) => {
                    let h = hash(p);
                    let cand = self.head[h];
                    self.head[h] = base + i as u32;
                    if cand >= base && (base + i as u32 - cand) as usize <= MAX_DISTANCE {
                        let c = (cand - base) as usize;
                        let n = match_len(input, c, i);
                        (n >= MIN_MATCH).then_some((n, i - c))
                    } else {
                        None
                    }
                }
                None => None,
            };
            match found {
                Some((n, dist)) => {
                    put_match(&mut w, n, dist);
                    // Index the positions inside the match too (better matches later). In a
                    // match at distance `dist`, the prefix at `j` recurs at `j + dist` while that
                    // prefix still lies inside the match, and the later position overwrites the
                    // earlier one in `head`; so only the last `dist + 2` positions are indexed,
                    // which leaves `head` exactly as indexing every position would.
                    let first = (i + 1).max((i + n).saturating_sub(dist + MIN_MATCH - 1));
                    for j in first..(i + n).min(hashed_end) {
                        if let Some(p) = prefix(input, j) {
                            self.head[hash(p)] = base + j as u32;
                        }
                    }
                    i += n;
                }
                None => {
                    let (code, l) = FIXED_LITLEN[usize::from(input[i])];
                    w.put(u32::from(code), u32::from(l));
                    i += 1;
                }
            }
        }
        let (eob, l) = FIXED_LITLEN[256];
        w.put(u32::from(eob), u32::from(l));
        // The byte boundary, then the Adler-32 of the input, big endian.
        w.put(0, (8 - w.n % 8) % 8);
        let adler = zlib_rs::adler32::adler32(1, input);
        w.put(adler.swap_bytes(), 32);
        w.finish()
    }
}

/// The 3-byte prefix at `i`, if the input holds one there.
#[inline]
fn prefix(input: &[u8], i: usize) -> Option<&[u8; 3]> {
    input.get(i..i + MIN_MATCH)?.try_into().ok()
}

#[inline]
fn hash(p: &[u8; 3]) -> usize {
    let v = u32::from(p[0]) | u32::from(p[1]) << 8 | u32::from(p[2]) << 16;
    (v.wrapping_mul(0x9E37_79B1) >> (32 - HASH_BITS)) as usize
}

/// How many bytes at `cand` equal those at `at` (`cand < at`), up to [`MAX_MATCH`]: eight at a
/// time, then one at a time.
#[inline]
fn match_len(input: &[u8], cand: usize, at: usize) -> usize {
    let limit = input.len().saturating_sub(at).min(MAX_MATCH);
    let (Some(a), Some(b)) = (input.get(cand..cand + limit), input.get(at..at + limit)) else {
        return 0;
    };
    let mut n = 0;
    for (x, y) in a.chunks_exact(8).zip(b.chunks_exact(8)) {
        let x = u64::from_le_bytes(x.try_into().unwrap_or_default());
        let y = u64::from_le_bytes(y.try_into().unwrap_or_default());
        let diff = x ^ y;
        if diff != 0 {
            return n + (diff.trailing_zeros() / 8) as usize;
        }
        n += 8;
    }
    let (a, b) = (
        a.get(n..).unwrap_or_default(),
        b.get(n..).unwrap_or_default(),
    );
    n + a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

fn put_match(w: &mut Bits<'_>, len: usize, dist: usize) {
    // Largest code whose base is <= len (258 has its own code, 285).
    let lc = LENGTH_BASE.partition_point(|&b| usize::from(b) <= len) - 1;
    let (code, l) = FIXED_LITLEN[257 + lc];
    let dc = DIST_BASE.partition_point(|&b| usize::from(b) <= dist) - 1;
    w.put(u32::from(code), u32::from(l));
    w.put(
        (len - usize::from(LENGTH_BASE[lc])) as u32,
        u32::from(LENGTH_EXTRA[lc]),
    );
    w.put(u32::from(reverse(dc as u16, 5)), 5);
    w.put(
        (dist - usize::from(DIST_BASE[dc])) as u32,
        u32::from(DIST_EXTRA[dc]),
    );
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
    }

    /// The encoder written as plainly as possible: every position inside a match indexed, one
    /// byte compared at a time, one bit written at a time, Adler-32 by its definition. The fast
    /// encoder must write exactly the same bytes.
    fn reference(input: &[u8]) -> Vec<u8> {
        let mut head = vec![usize::MAX; 1 << HASH_BITS];
        let hash_at = |i: usize| hash(&[input[i], input[i + 1], input[i + 2]]);
        let mut bits: Vec<bool> = Vec::new();
        let put = |bits: &mut Vec<bool>, v: u32, len: u32| {
            bits.extend((0..len).map(|k| (v >> k) & 1 == 1));
        };
        let mut i = 0;
        put(&mut bits, 0b011, 3);
        while i < input.len() {
            let mut found = None;
            if i + MIN_MATCH <= input.len() {
                let cand = head[hash_at(i)];
                head[hash_at(i)] = i;
                if cand != usize::MAX && i - cand <= MAX_DISTANCE {
                    let n = (0..MAX_MATCH.min(input.len() - i))
                        .take_while(|&k| input[cand + k] == input[i + k])
                        .count();
                    if n >= MIN_MATCH {
                        found = Some((n, i - cand));
                    }
                }
            }
            match found {
                Some((n, dist)) => {
                    let lc = LENGTH_BASE
                        .iter()
                        .rposition(|&b| usize::from(b) <= n)
                        .unwrap();
                    let dc = DIST_BASE
                        .iter()
                        .rposition(|&b| usize::from(b) <= dist)
                        .unwrap();
                    let (code, l) = FIXED_LITLEN[257 + lc];
                    put(&mut bits, u32::from(code), u32::from(l));
                    let extra = (n - usize::from(LENGTH_BASE[lc])) as u32;
                    put(&mut bits, extra, u32::from(LENGTH_EXTRA[lc]));
                    put(&mut bits, u32::from(reverse(dc as u16, 5)), 5);
                    let extra = (dist - usize::from(DIST_BASE[dc])) as u32;
                    put(&mut bits, extra, u32::from(DIST_EXTRA[dc]));
                    for j in i + 1..i + n {
                        if j + MIN_MATCH <= input.len() {
                            head[hash_at(j)] = j;
                        }
                    }
                    i += n;
                }
                None => {
                    let (code, l) = FIXED_LITLEN[usize::from(input[i])];
                    put(&mut bits, u32::from(code), u32::from(l));
                    i += 1;
                }
            }
        }
        let (eob, l) = FIXED_LITLEN[256];
        put(&mut bits, u32::from(eob), u32::from(l));
        let mut out = ZLIB_HEADER.to_vec();
        out.extend(bits.chunks(8).map(|byte| {
            byte.iter()
                .enumerate()
                .fold(0u8, |acc, (k, &b)| acc | (u8::from(b) << k))
        }));
        let (mut a, mut b) = (1u32, 0u32);
        for &x in input {
            a = (a + u32::from(x)) % 65_521;
            b = (b + a) % 65_521;
        }
        out.extend_from_slice(&((b << 16) | a).to_be_bytes());
        out
    }

    /// Inputs with matches at every distance and length: repeated units of 1 to 300 bytes from
    /// small and large alphabets, some with noise sprinkled in, noise, and runs.
    fn corpus() -> Vec<Vec<u8>> {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut all = Vec::new();
        for round in 0..600 {
            let len = (next() % 2000) as usize;
            let alphabet = 1 + next() % 255;
            let period = 1 + (next() % 300) as usize;
            let unit: Vec<u8> = (0..period).map(|_| (next() % alphabet) as u8).collect();
            let body: Vec<u8> = match round % 4 {
                0 => (0..len).map(|_| (next() % alphabet) as u8).collect(),
                1 => unit.iter().copied().cycle().take(len).collect(),
                2 => unit
                    .iter()
                    .copied()
                    .cycle()
                    .take(len)
                    .map(|b| if next() % 23 == 0 { next() as u8 } else { b })
                    .collect(),
                _ => vec![(next() % 3) as u8; len],
            };
            all.push(body);
        }
        all
    }

    #[test]
    fn writes_what_the_plain_encoder_writes() {
        let mut d = Deflater::default();
        let mut out = vec![0u8; 5000];
        for input in corpus() {
            let n = d.compress(&input, &mut out).expect("fits");
            assert_eq!(out[..n], reference(&input)[..], "input {:02x?}", &input);
        }
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
