//! Contextual framing: `opcode | [compression flag] | body | CRC`.

use zlib_rs::{Inflate, InflateFlush, Status};

use crate::deflate::Deflater;
use crate::{Ack, Channel, Crc32, CrcLength, OpCode, Packet, WireError};

/// What a session negotiated for its contextual packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct FrameConfig {
    /// The CRC seed from SessionResponse.
    pub crc_seed: u32,
    /// The CRC trailer length from SessionResponse.
    pub crc_length: CrcLength,
    /// Whether contextual packets carry a compression flag byte after the opcode.
    pub compression: bool,
    /// The largest body an inflate may produce; larger is [`WireError::InflateTooLarge`]
    /// (a zlib bomb is an error, not an allocation). Default 64 KiB.
    pub max_inflated: usize,
}

impl FrameConfig {
    /// A config with the given seed, a 2-byte CRC, compression off and the default inflate limit.
    pub fn new(crc_seed: u32) -> Self {
        Self {
            crc_seed,
            crc_length: CrcLength::TWO,
            compression: false,
            max_inflated: 64 * 1024,
        }
    }

    /// Sets the CRC trailer length.
    pub fn with_crc_length(mut self, crc_length: CrcLength) -> Self {
        self.crc_length = crc_length;
        self
    }

    /// Turns the compression flag on or off.
    pub fn with_compression(mut self, compression: bool) -> Self {
        self.compression = compression;
        self
    }

    /// Sets the inflate limit.
    pub fn with_max_inflated(mut self, max_inflated: usize) -> Self {
        self.max_inflated = max_inflated;
        self
    }
}

/// Bodies shorter than this are never compressed (peers do the same).
pub const MIN_COMPRESS_LEN: usize = 24;
/// The flag byte [`Framer::seal`] writes before a deflated body.
pub(crate) const FLAG_COMPRESSED: u8 = 0x01;
/// The flag byte [`Framer::seal`] writes before a body sent as is.
pub(crate) const FLAG_PLAIN: u8 = 0x00;

/// The first inflate buffer holds this many bytes per compressed byte (and grows by doubling).
const INFLATE_FIRST_RATIO: usize = 4;
/// The inflate buffer starts at no less than this (a datagram's worth).
const INFLATE_FIRST_MIN: usize = 1024;

/// Applies and removes a session's framing. Keeps the seeded CRC state and reusable
/// compression buffers, so framing allocates nothing per packet once warm.
///
/// The zlib state (about 47 KiB for the inflater, its 32 KiB window included, and 16 KiB for
/// the deflater) is not held per framer: each packet is an independent zlib stream, so one state
/// per thread, made on first use, serves every session on that thread. Deflating uses this
/// crate's own small encoder (see `deflate.rs`), which needs no clearing between streams;
/// inflating uses zlib-rs, reset (not rebuilt) for each stream. A framer holds only its seeded
/// CRC and an output buffer that grows, up to [`FrameConfig::max_inflated`], to the largest body
/// inflated so far.
pub struct Framer {
    config: FrameConfig,
    crc: Crc32,
    /// Holds `opcode | body` when [`Framer::open`] cannot borrow from the datagram. Its length
    /// only grows (to the largest output so far); `out_len` is the live part.
    out: Vec<u8>,
    out_len: usize,
}

/// zlib state shared by every [`Framer`] on a thread (each packet is its own zlib stream, so no
/// state carries from one packet to the next).
#[derive(Default)]
struct Zlib {
    inflater: Option<Inflate>,
    deflater: Deflater,
    /// Deflate output for [`Framer::seal`]; its length only grows.
    deflated: Vec<u8>,
}

/// A zlib (RFC 1950) inflater with a 32 KiB window, the largest a zlib header may ask for.
fn new_inflater() -> Inflate {
    Inflate::new(true, 15)
}

thread_local! {
    static ZLIB: std::cell::RefCell<Zlib> = std::cell::RefCell::default();
}

/// Runs `f` (once) with this thread's zlib state. While the thread's thread-locals are being
/// destroyed (a host calling in from a thread-local destructor, a pthread-key destructor or an
/// `atexit` handler, as a C program may through soe-ffi), the shared state may be gone: `f`
/// then gets a fresh one for this call alone. Slower, but never a panic.
fn with_zlib<R>(mut f: impl FnMut(&mut Zlib) -> R) -> R {
    match ZLIB.try_with(|cell| cell.try_borrow_mut().ok().map(|mut zlib| f(&mut zlib))) {
        Ok(Some(done)) => done,
        _ => f(&mut Zlib::default()),
    }
}

impl Framer {
    /// A framer for `config`.
    pub fn new(config: FrameConfig) -> Self {
        Self {
            config,
            crc: Crc32::new(config.crc_seed),
            out: Vec::new(),
            out_len: 0,
        }
    }

    /// The config this framer applies.
    #[inline]
    pub fn config(&self) -> &FrameConfig {
        &self.config
    }

    /// The seeded CRC this framer checks and writes.
    pub fn crc(&self) -> &Crc32 {
        &self.crc
    }

    /// The most bytes framing adds to a packet: the flag byte (when compression is on) plus the
    /// CRC trailer. A sender keeps `encoded_len + overhead <= udp_length`.
    pub fn overhead(&self) -> usize {
        usize::from(self.config.compression) + self.config.crc_length.get()
    }

    /// Removes framing from a received datagram and returns `opcode | body`, ready for
    /// [`crate::Packet::decode`]: borrowed from `datagram`, or from this framer's buffer when the
    /// body was compressed. Contextless packets pass through unchanged; a datagram whose first byte
    /// is not zero ([`crate::Packet::Unreliable`]) has its CRC stripped but no flag.
    ///
    /// With compression on, a contextual packet with a zero flag is copied (opcode and body, to
    /// make them contiguous) into the framer's reused buffer; a non-zero flag means a zlib body,
    /// inflated into that buffer and limited to [`FrameConfig::max_inflated`] bytes. Errors:
    /// [`WireError::Truncated`] for a datagram shorter than its framing,
    /// [`WireError::CrcMismatch`], [`WireError::InflateTooLarge`], [`WireError::InflateFailed`]
    /// (also for bytes after the end of the zlib stream). An unknown opcode is left for
    /// [`crate::Packet::decode`] to report.
    pub fn open<'a>(&'a mut self, datagram: &'a [u8]) -> Result<&'a [u8], WireError> {
        let zero_first = match datagram {
            [] => return Err(truncated("datagram", 1, 0)),
            [0] => return Err(truncated("opcode", 2, 1)),
            [0, lo, ..] => {
                if is_contextless(*lo) {
                    return Ok(datagram);
                }
                true
            }
            _ => false,
        };
        let crc_len = self.config.crc_length.get();
        let flag_len = usize::from(zero_first && self.config.compression);
        let head = if zero_first { 2 + flag_len } else { 1 };
        if datagram.len() < head + crc_len {
            return Err(truncated(
                if zero_first {
                    "framed packet"
                } else {
                    "framed unreliable packet"
                },
                head + crc_len,
                datagram.len(),
            ));
        }
        let (inner, trailer) = datagram.split_at(datagram.len() - crc_len);
        if crc_len != 0 {
            let received = self.config.crc_length.read(trailer);
            let computed = self.config.crc_length.truncate(self.crc.checksum(inner));
            if received != computed {
                return Err(WireError::CrcMismatch { received, computed });
            }
        }
        if flag_len == 0 {
            return Ok(inner);
        }
        let [op_hi, op_lo, flag, body @ ..] = inner else {
            // checked above: inner holds opcode and flag
            return Err(truncated("compression flag", 3, inner.len()));
        };
        let opcode = [*op_hi, *op_lo];
        if *flag == FLAG_PLAIN {
            self.out_len = 0;
            self.append_out(&opcode);
            self.append_out(body);
        } else {
            self.inflate(opcode, body)?;
        }
        Ok(self.out.get(..self.out_len).unwrap_or_default())
    }

    /// Copies `bytes` after the live part of the output buffer.
    fn append_out(&mut self, bytes: &[u8]) {
        let end = self.out_len + bytes.len();
        if self.out.len() < end {
            self.out.resize(end, 0);
        }
        if let Some(dst) = self.out.get_mut(self.out_len..end) {
            dst.copy_from_slice(bytes);
        }
        self.out_len = end;
    }

    /// Inflates a zlib `body` into the output buffer after `opcode`, within the limit.
    fn inflate(&mut self, opcode: [u8; 2], body: &[u8]) -> Result<(), WireError> {
        let limit = self.config.max_inflated;
        // One byte past the limit tells "exactly the limit" from "more than the limit".
        let cap = limit.saturating_add(3);
        // A power of two, so bodies of similar size do not regrow the buffer a byte at a time.
        let first = body
            .len()
            .saturating_mul(INFLATE_FIRST_RATIO)
            .max(INFLATE_FIRST_MIN)
            .checked_next_power_of_two()
            .unwrap_or(usize::MAX)
            .min(cap);
        if self.out.len() < first {
            self.out.resize(first, 0);
        }
        self.out_len = 0;
        self.append_out(&opcode);

        with_zlib(|zlib| self.inflate_with(zlib, body, cap, limit))
    }

    /// The inflate loop of [`Framer::inflate`], with the thread's zlib state.
    ///
    /// The inflater is reset, not rebuilt, for each stream; zlib-rs decodes fixed-Huffman blocks
    /// (what a small body deflates to) from built-in tables, so a stream costs only its own bytes.
    fn inflate_with(
        &mut self,
        zlib: &mut Zlib,
        body: &[u8],
        cap: usize,
        limit: usize,
    ) -> Result<(), WireError> {
        let inflater = zlib.inflater.get_or_insert_with(new_inflater);
        inflater.reset(true);
        let mut input = body;
        let mut pos = 2;
        loop {
            let window = self.out.len().min(cap);
            let out = self.out.get_mut(pos..window).unwrap_or_default();
            let room = out.len();
            let (before_in, before_out) = (inflater.total_in(), inflater.total_out());
            let status = inflater
                .decompress(input, out, InflateFlush::Finish)
                .map_err(|_| WireError::InflateFailed)?;
            let read = usize::try_from(inflater.total_in() - before_in).unwrap_or(usize::MAX);
            let written = usize::try_from(inflater.total_out() - before_out).unwrap_or(usize::MAX);
            input = input.get(read..).unwrap_or_default();
            pos += written;
            match status {
                Status::StreamEnd => break,
                // Stopped with room left: the input ended inside the stream.
                _ if written < room => return Err(WireError::InflateFailed),
                _ if window < cap => {
                    let grown = window.saturating_mul(2).min(cap);
                    self.out.resize(grown, 0);
                }
                _ => return Err(WireError::InflateTooLarge { limit }),
            }
        }
        if pos - 2 > limit {
            return Err(WireError::InflateTooLarge { limit });
        }
        if !input.is_empty() {
            // bytes after the end of the zlib stream
            return Err(WireError::InflateFailed);
        }
        self.out_len = pos;
        Ok(())
    }

    /// Like [`Framer::open`] for a datagram whose CRC failed: accepts only the two shapes real
    /// peers send without a CRC trailer (h1z1-server's Heartbeat `00 06` and selective
    /// Acknowledge `00 11..=14 | u16`, with a zero compression flag when compression is on) and
    /// returns `None` for anything else.
    ///
    /// The result borrows from `datagram`, so with compression on a selective ack
    /// (`00 11 00 | u16`, the flag between opcode and body) cannot be returned and gives `None`;
    /// [`Framer::open_crcless_packet`] handles every case.
    pub fn open_crcless<'a>(&self, datagram: &'a [u8]) -> Option<&'a [u8]> {
        match (self.config.compression, datagram) {
            (false, [0x00, 0x06]) | (false, [0x00, 0x11..=0x14, _, _]) => Some(datagram),
            (true, [0x00, 0x06, FLAG_PLAIN]) => datagram.get(..2),
            _ => None,
        }
    }

    /// Like [`Framer::open_crcless`], returning the decoded packet: [`Packet::Heartbeat`] or
    /// [`Packet::Acknowledge`], in every compression setting.
    pub fn open_crcless_packet(&self, datagram: &[u8]) -> Option<Packet<'static>> {
        let ack = |op: u8, hi: u8, lo: u8| {
            Some(Packet::Acknowledge(Ack {
                channel: Channel::new(op - 0x11)?,
                sequence: u16::from_be_bytes([hi, lo]),
            }))
        };
        match (self.config.compression, datagram) {
            (false, [0x00, 0x06]) | (true, [0x00, 0x06, FLAG_PLAIN]) => Some(Packet::Heartbeat),
            (false, &[0x00, op @ 0x11..=0x14, hi, lo])
            | (true, &[0x00, op @ 0x11..=0x14, FLAG_PLAIN, hi, lo]) => ack(op, hi, lo),
            _ => None,
        }
    }

    /// Frames a packet in place. `buf[start..]` holds `opcode | body` as [`crate::Packet::encode`]
    /// wrote it; afterwards it holds the datagram: compression flag inserted when negotiated, the
    /// body deflated when it is 24 bytes or more and deflating makes it smaller, and the CRC
    /// trailer appended. Contextless packets are left unchanged; unreliable ones get only the CRC.
    ///
    /// Nothing is allocated once the buffers are warm, provided `buf` has room for the flag and
    /// trailer ([`Framer::overhead`] bytes).
    pub fn seal(&mut self, buf: &mut Vec<u8>, start: usize) {
        debug_assert!(start < buf.len(), "seal of an empty packet");
        let (zero_first, contextless) = match buf.get(start..) {
            None | Some([]) => return,
            Some([0, lo, ..]) => (true, is_contextless(*lo)),
            Some(_) => (false, false),
        };
        if contextless {
            return;
        }
        if zero_first && self.config.compression {
            let body_at = start + 2;
            if !self.deflate_tail(buf, body_at) {
                buf.insert(body_at, FLAG_PLAIN);
            }
        }
        let crc_length = self.config.crc_length;
        if crc_length.get() != 0 {
            let crc = self.crc.checksum(buf.get(start..).unwrap_or_default());
            let mut trailer = [0u8; 4];
            let n = crc_length.write(crc, &mut trailer);
            // All four bytes, then the ones past the trailer cut: a fixed-size copy, where a
            // copy of `n` bytes would call `memcpy`.
            let end = buf.len() + n;
            buf.extend_from_slice(&trailer);
            buf.truncate(end);
        }
    }

    /// Replaces `buf[body_at..]` with [`FLAG_COMPRESSED`] and its zlib form when the body is long
    /// enough and deflating shrinks it; returns whether it did.
    fn deflate_tail(&mut self, buf: &mut Vec<u8>, body_at: usize) -> bool {
        let body_len = buf.len().saturating_sub(body_at);
        if body_len < MIN_COMPRESS_LEN {
            return false;
        }
        // Output must be smaller than the body, so a buffer of body_len - 1 bytes suffices;
        // a stream that does not finish within it is not worth sending.
        let room = body_len - 1;
        with_zlib(|zlib| {
            if zlib.deflated.len() < room {
                zlib.deflated.resize(room, 0);
            }
            let body = buf.get(body_at..).unwrap_or_default();
            let out = zlib.deflated.get_mut(..room).unwrap_or_default();
            let Some(written) = zlib.deflater.compress(body, out) else {
                return false;
            };
            if written >= body_len {
                return false;
            }
            buf.truncate(body_at);
            buf.push(FLAG_COMPRESSED);
            buf.extend_from_slice(zlib.deflated.get(..written).unwrap_or_default());
            true
        })
    }
}

/// Whether the opcode with high byte zero and low byte `lo` travels without framing.
fn is_contextless(lo: u8) -> bool {
    OpCode::from_u16(u16::from(lo)).is_some_and(OpCode::is_contextless)
}

fn truncated(what: &'static str, needed: usize, got: usize) -> WireError {
    WireError::Truncated { what, needed, got }
}

impl std::fmt::Debug for Framer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Framer")
            .field("config", self.config())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framer(crc: u8, compression: bool) -> Framer {
        Framer::new(
            FrameConfig::new(0x1234_5678)
                .with_crc_length(CrcLength::new(crc).unwrap())
                .with_compression(compression),
        )
    }

    fn sealed(framer: &mut Framer, packet: &[u8]) -> Vec<u8> {
        let mut buf = vec![0xEE, 0xEE];
        buf.extend_from_slice(packet);
        framer.seal(&mut buf, 2);
        assert_eq!(&buf[..2], &[0xEE, 0xEE]);
        buf.split_off(2)
    }

    #[test]
    fn plain_flag_and_crc() {
        let mut f = framer(2, true);
        assert_eq!(f.overhead(), 3);
        let d = sealed(&mut f, &[0, 0x15, 0, 7]);
        assert_eq!(d.len(), 4 + 3);
        assert_eq!(&d[..5], &[0, 0x15, 0, 0, 7]);
        let crc = f.crc().checksum(&d[..5]) & 0xFFFF;
        assert_eq!(&d[5..], &(crc as u16).to_be_bytes());
        assert_eq!(f.open(&d), Ok(&[0, 0x15, 0, 7][..]));
    }

    #[test]
    fn framing_works_while_the_threads_thread_locals_are_destroyed() {
        use std::sync::atomic::{AtomicU8, Ordering};
        /// 0: the destructor did not run; 1: it compressed and decompressed; 2: it failed.
        static OUTCOME: AtomicU8 = AtomicU8::new(0);
        struct LateUser;
        impl Drop for LateUser {
            fn drop(&mut self) {
                let ok = std::panic::catch_unwind(|| {
                    let mut f = framer(2, true);
                    let mut body = vec![0, 9];
                    body.extend((0..400).map(|i| (i % 7) as u8));
                    let d = sealed(&mut f, &body);
                    d.len() < body.len() && f.open(&d) == Ok(&body[..])
                });
                OUTCOME.store(if matches!(ok, Ok(true)) { 1 } else { 2 }, Ordering::SeqCst);
            }
        }
        thread_local! {
            static LATE: std::cell::Cell<Option<LateUser>> = const { std::cell::Cell::new(None) };
        }
        std::thread::spawn(|| {
            // Registered before the zlib state exists, so destroyed after it (last in, first
            // out), as a C host's thread-exit or atexit code runs after Rust's.
            LATE.set(Some(LateUser));
            let mut f = framer(2, true);
            let body: Vec<u8> = [0, 9].into_iter().chain([7; 300]).collect();
            let d = sealed(&mut f, &body);
            assert_eq!(f.open(&d), Ok(&body[..]));
        })
        .join()
        .unwrap();
        assert_eq!(OUTCOME.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn compresses_only_long_bodies_that_shrink() {
        let mut f = framer(0, true);
        // 23 bytes of zeros: too short to try
        let mut short = vec![0, 9];
        short.extend([0; 23]);
        let d = sealed(&mut f, &short);
        assert_eq!(d[2], FLAG_PLAIN);
        // 24 bytes of zeros: deflated
        let mut long = vec![0, 9];
        long.extend([0; 24]);
        let d = sealed(&mut f, &long);
        assert_eq!(d[2], FLAG_COMPRESSED);
        assert!(d.len() < long.len() + 1);
        assert_eq!(d[3] & 0x0F, 8, "zlib header");
        assert_eq!(f.open(&d), Ok(&long[..]));
        // incompressible bytes stay plain
        let mut noise = vec![0, 9];
        let mut x = 0x9E37_79B9u32;
        noise.extend((0..300).map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        }));
        let d = sealed(&mut f, &noise);
        assert_eq!(d[2], FLAG_PLAIN);
        assert_eq!(d.len(), noise.len() + 1);
        assert_eq!(f.open(&d), Ok(&noise[..]));
    }

    #[test]
    fn contextless_and_unreliable() {
        let mut f = framer(4, true);
        let request = b"\x00\x01\x00\x00\x00\x03\x00\x00\x00\x07\x00\x00\x02\x00A\x00";
        assert_eq!(sealed(&mut f, request), request);
        assert_eq!(f.open(request), Ok(&request[..]));
        let d = sealed(&mut f, &[0x42; 40]);
        assert_eq!(d.len(), 44);
        assert_eq!(&d[..40], &[0x42; 40]);
        assert_eq!(f.open(&d), Ok(&[0x42; 40][..]));
    }

    #[test]
    fn bad_crc_and_short_datagrams() {
        let mut f = framer(2, false);
        let mut d = sealed(&mut f, &[0, 0x11, 0, 1]);
        let last = d.len() - 1;
        d[last] ^= 1;
        assert!(matches!(f.open(&d), Err(WireError::CrcMismatch { .. })));
        assert!(matches!(
            f.open(&[0, 0x11, 1]),
            Err(WireError::Truncated {
                needed: 4,
                got: 3,
                ..
            })
        ));
        assert!(matches!(f.open(&[]), Err(WireError::Truncated { .. })));
        assert!(matches!(f.open(&[0]), Err(WireError::Truncated { .. })));
        assert!(matches!(f.open(&[5, 1]), Err(WireError::Truncated { .. })));
        let mut g = framer(0, true);
        assert!(matches!(
            g.open(&[0, 0x09]),
            Err(WireError::Truncated { needed: 3, .. })
        ));
    }

    #[test]
    fn inflate_errors() {
        let mut f = framer(0, true);
        // flag set on bytes that are not zlib
        assert_eq!(
            f.open(&[0, 9, 1, 0, 1, 2, 3]),
            Err(WireError::InflateFailed)
        );
        // a valid stream with a byte after it
        let mut long = vec![0, 9];
        long.extend([7; 100]);
        let mut d = sealed(&mut f, &long);
        assert_eq!(d[2], FLAG_COMPRESSED);
        d.push(0);
        assert_eq!(f.open(&d), Err(WireError::InflateFailed));
        // a truncated stream
        d.truncate(d.len() - 3);
        assert_eq!(f.open(&d), Err(WireError::InflateFailed));
        // a body (opcode not counted) exactly at the limit is fine, one byte over is not
        let mut at = Framer::new(f.config().with_max_inflated(100));
        let d = sealed(&mut at, &[&[0u8, 9][..], &[7; 100]].concat());
        assert_eq!(at.open(&d).map(<[u8]>::len), Ok(102));
        let d = sealed(&mut at, &[&[0u8, 9][..], &[7; 101]].concat());
        assert_eq!(at.open(&d), Err(WireError::InflateTooLarge { limit: 100 }));
    }

    #[test]
    fn a_bomb_never_grows_the_buffer_past_the_limit() {
        let zlib = miniz_oxide::deflate::compress_to_vec_zlib(&vec![0u8; 1 << 20], 9);
        let datagram = [&[0u8, 9, FLAG_COMPRESSED][..], &zlib].concat();
        for limit in [0, 1, 1000, 4096, 64 * 1024] {
            let mut f = Framer::new(
                FrameConfig::new(0)
                    .with_crc_length(CrcLength::NONE)
                    .with_compression(true)
                    .with_max_inflated(limit),
            );
            assert_eq!(f.open(&datagram), Err(WireError::InflateTooLarge { limit }));
            // opcode, the limit, and the one byte that proves the limit was passed
            assert!(
                f.out.len() <= limit + 3,
                "limit {limit}: buffer {}",
                f.out.len()
            );
        }
    }

    #[test]
    fn crcless_shapes() {
        let plain = framer(2, false);
        assert_eq!(plain.open_crcless(&[0, 6]), Some(&[0, 6][..]));
        assert_eq!(
            plain.open_crcless(&[0, 0x12, 0, 5]),
            Some(&[0, 0x12, 0, 5][..])
        );
        assert_eq!(plain.open_crcless(&[0, 0x15, 0, 5]), None);
        assert_eq!(plain.open_crcless(&[0, 6, 0]), None);
        assert_eq!(
            plain.open_crcless_packet(&[0, 0x12, 0, 5]),
            Some(Packet::Acknowledge(Ack {
                channel: Channel::new(1).unwrap(),
                sequence: 5
            }))
        );
        let comp = framer(2, true);
        assert_eq!(comp.open_crcless(&[0, 6, 0]), Some(&[0, 6][..]));
        assert_eq!(comp.open_crcless(&[0, 6]), None);
        assert_eq!(comp.open_crcless(&[0, 0x11, 0, 0, 5]), None);
        assert_eq!(
            comp.open_crcless_packet(&[0, 0x11, 0, 0, 5]),
            Some(Packet::Acknowledge(Ack {
                channel: Channel::ZERO,
                sequence: 5
            }))
        );
        assert_eq!(comp.open_crcless_packet(&[0, 0x11, 1, 0, 5]), None);
        assert_eq!(
            comp.open_crcless_packet(&[0, 6, 0]),
            Some(Packet::Heartbeat)
        );
    }

    #[test]
    fn buffers_are_reused() {
        let mut f = framer(2, true);
        let mut body = vec![0, 9];
        body.extend((0..400).map(|i| (i % 7) as u8));
        let d = sealed(&mut f, &body);
        f.open(&d).unwrap();
        let (out_ptr, out_cap) = (f.out.as_ptr(), f.out.capacity());
        let deflated_ptr = ZLIB.with_borrow(|z| z.deflated.as_ptr());
        for _ in 0..10 {
            let d = sealed(&mut f, &body);
            assert_eq!(f.open(&d), Ok(&body[..]));
        }
        assert_eq!((f.out.as_ptr(), f.out.capacity()), (out_ptr, out_cap));
        assert_eq!(ZLIB.with_borrow(|z| z.deflated.as_ptr()), deflated_ptr);
    }
}
