//! Verifiable application messages.
//!
//! Every message is `C5 | kind | direction | channel | u32 instance | u64 sequence | pattern`,
//! where the pattern bytes are a function of the header. The receiver regenerates them and
//! compares byte for byte (the pattern depends on the length too), so a message that is lost, duplicated, reordered, truncated,
//! corrupted or delivered to the wrong session is always seen.

use bytes::{BufMut, Bytes, BytesMut};

/// The first byte (non-zero, so an unreliable message may travel as a bare datagram).
const MAGIC: u8 = 0xC5;
/// Header length.
pub(crate) const HEADER: usize = 16;

/// How a message travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Reliable = 0,
    Unreliable = 1,
    Ordered = 2,
}

/// Client to server (0) or server to client (1).
pub(crate) const UP: u8 = 0;
/// Server to client.
pub(crate) const DOWN: u8 = 1;

/// A parsed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) kind: u8,
    pub(crate) direction: u8,
    pub(crate) channel: u8,
    pub(crate) instance: u32,
    pub(crate) seq: u64,
}

/// Builds a message of `len` bytes (at least the header).
pub(crate) fn build(h: Header, len: usize) -> Bytes {
    let len = len.max(HEADER);
    let mut b = BytesMut::with_capacity(len);
    b.put_u8(MAGIC);
    b.put_u8(h.kind);
    b.put_u8(h.direction);
    b.put_u8(h.channel);
    b.put_u32(h.instance);
    b.put_u64(h.seq);
    let salt = salt(&h, len);
    for k in HEADER..len {
        b.put_u8(pattern(salt, k));
    }
    b.freeze()
}

fn salt(h: &Header, len: usize) -> u64 {
    (h.seq ^ ((len as u64) << 48) ^ (u64::from(h.instance) << 40) ^ (u64::from(h.channel) << 36))
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ u64::from(h.direction)
}

fn pattern(salt: u64, k: usize) -> u8 {
    (salt.rotate_left((k % 63) as u32) as u8) ^ (k as u8).wrapping_mul(29)
}

/// The header of a well-formed message whose pattern bytes are intact.
pub(crate) fn parse(data: &[u8]) -> Option<Header> {
    let head = data.get(..HEADER)?;
    if head[0] != MAGIC {
        return None;
    }
    let h = Header {
        kind: head[1],
        direction: head[2],
        channel: head[3],
        instance: u32::from_be_bytes(head[4..8].try_into().ok()?),
        seq: u64::from_be_bytes(head[8..16].try_into().ok()?),
    };
    let salt = salt(&h, data.len());
    data.iter()
        .enumerate()
        .skip(HEADER)
        .all(|(k, &b)| b == pattern(salt, k))
        .then_some(h)
}

/// A message length between `lo` and `hi` bytes, drawn from the sequence (so both sides agree
/// without storing it).
pub(crate) fn size(seq: u64, salt: u64, lo: usize, hi: usize) -> usize {
    let span = hi.saturating_sub(lo) as u64 + 1;
    lo + ((seq.wrapping_add(salt).wrapping_mul(0xD6E8_FEB8_6659_FD93) >> 32) % span) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_every_byte_matters() {
        let h = Header {
            kind: 0,
            direction: DOWN,
            channel: 1,
            instance: 7,
            seq: 99,
        };
        let m = build(h, 64);
        assert_eq!(parse(&m), Some(h));
        for i in 0..m.len() {
            let mut bad = m.to_vec();
            bad[i] ^= 0x10;
            assert_ne!(parse(&bad), Some(h), "byte {i}");
        }
        // The pattern depends on the length, so a truncated message does not pass.
        assert_eq!(parse(&m[..40]), None);
        assert_eq!(parse(&m[..HEADER + 1]), None);
    }
}
