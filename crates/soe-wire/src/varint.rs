//! The two length encodings.
//!
//! * MultiPacket sub-packet lengths ([`read_multi`], [`write_multi`]): writers use one byte;
//!   readers also accept `0xFF` + u16 and `0xFF 0xFF 0xFF` + u32, telling a one-byte `0xFF` from the
//!   marker by the next byte (a sub-packet starts with opcode high byte `0x00`).
//! * Group item lengths ([`read_group`], [`write_group`]): one byte below `0xFF`; else `0xFF` + u16
//!   below `0xFFFF`; else `0xFF 0xFF 0xFF` + u32.

use crate::WireError;

/// The marker byte both encodings use for a wider length.
const MARKER: u8 = 0xFF;

/// Reads a MultiPacket length; returns `(length, bytes consumed)`.
///
/// A first byte below `0xFF` is the length. A `0xFF` followed by `0x00` (the opcode high byte of
/// the sub-packet that follows), or by nothing, is the one-byte length 255. Otherwise `0xFF 0xFF
/// 0xFF` starts a u32 length and `0xFF` alone a u16 one. A length of zero is returned as is; the
/// MultiPacket iterator reports it as [`WireError::EmptyEntry`].
pub fn read_multi(bytes: &[u8]) -> Result<(usize, usize), WireError> {
    match bytes {
        [] => Err(truncated("MultiPacket length", 1, 0)),
        [first, ..] if *first != MARKER => Ok((usize::from(*first), 1)),
        [_] | [_, 0x00, ..] => Ok((0xFF, 1)),
        [_, MARKER, MARKER, rest @ ..] => read_u32_len(rest, "MultiPacket u32 length", bytes.len()),
        [_, rest @ ..] => read_u16_len(rest, "MultiPacket u16 length", bytes.len()),
    }
}

/// Appends the one-byte MultiPacket length; `len` must be 1 to 255.
///
/// Any other length is [`WireError::TooLarge`] (or [`WireError::EmptyEntry`] for zero) and
/// nothing is written.
pub fn write_multi(len: usize, out: &mut Vec<u8>) -> Result<usize, WireError> {
    match u8::try_from(len) {
        Ok(0) => Err(WireError::EmptyEntry {
            what: "MultiPacket",
        }),
        Ok(byte) => {
            out.push(byte);
            Ok(1)
        }
        Err(_) => Err(WireError::TooLarge {
            what: "MultiPacket sub-packet",
            len,
            limit: 0xFF,
        }),
    }
}

/// Reads a Group length; returns `(length, bytes consumed)`.
///
/// Only `0xFF` is a marker: a first byte below it is the length; `0xFF` then a u16 below `0xFFFF`
/// is the length; `0xFF 0xFF 0xFF` then a u32 is the length. Non-minimal forms (a small length
/// written wide) are accepted.
pub fn read_group(bytes: &[u8]) -> Result<(usize, usize), WireError> {
    match bytes {
        [] => Err(truncated("Group length", 1, 0)),
        [first, ..] if *first != MARKER => Ok((usize::from(*first), 1)),
        [_, MARKER, MARKER, rest @ ..] => read_u32_len(rest, "Group u32 length", bytes.len()),
        [_, rest @ ..] => read_u16_len(rest, "Group u16 length", bytes.len()),
    }
}

/// Appends a Group length and returns the bytes written (see [`group_len_size`]).
///
/// Lengths above `u32::MAX` cannot be represented; they are written as `u32::MAX` (no datagram
/// or reassembled payload comes near that size).
pub fn write_group(len: usize, out: &mut Vec<u8>) -> usize {
    debug_assert!(u32::try_from(len).is_ok(), "Group item of {len} bytes");
    if len < 0xFF {
        out.push(len as u8);
        1
    } else if len < 0xFFFF {
        out.push(MARKER);
        out.extend_from_slice(&(len as u16).to_be_bytes());
        3
    } else {
        let wide = u32::try_from(len).unwrap_or(u32::MAX);
        out.extend_from_slice(&[MARKER; 3]);
        out.extend_from_slice(&wide.to_be_bytes());
        7
    }
}

/// The bytes [`write_group`] writes for `len`: 1, 3 or 7.
pub const fn group_len_size(len: usize) -> usize {
    if len < 0xFF {
        1
    } else if len < 0xFFFF {
        3
    } else {
        7
    }
}

/// Reads the u16 after a one-byte marker; `total` is the input length the marker started.
fn read_u16_len(
    rest: &[u8],
    what: &'static str,
    total: usize,
) -> Result<(usize, usize), WireError> {
    match rest {
        [hi, lo, ..] => Ok((usize::from(u16::from_be_bytes([*hi, *lo])), 3)),
        _ => Err(truncated(what, 3, total)),
    }
}

/// Reads the u32 after a three-byte marker; `total` is the input length the marker started.
fn read_u32_len(
    rest: &[u8],
    what: &'static str,
    total: usize,
) -> Result<(usize, usize), WireError> {
    match rest {
        [a, b, c, d, ..] => {
            let len = u32::from_be_bytes([*a, *b, *c, *d]);
            let len = usize::try_from(len).map_err(|_| WireError::TooLarge {
                what,
                len: usize::MAX,
                limit: usize::MAX,
            })?;
            Ok((len, 7))
        }
        _ => Err(truncated(what, 7, total)),
    }
}

fn truncated(what: &'static str, needed: usize, got: usize) -> WireError {
    WireError::Truncated { what, needed, got }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_boundaries() {
        for (len, size) in [
            (0, 1),
            (1, 1),
            (0xFE, 1),
            (0xFF, 3),
            (0x100, 3),
            (0xFFFE, 3),
            (0xFFFF, 7),
            (0x1_0000, 7),
        ] {
            let mut out = Vec::new();
            assert_eq!(write_group(len, &mut out), size, "len {len}");
            assert_eq!(out.len(), size);
            assert_eq!(group_len_size(len), size);
            assert_eq!(read_group(&out), Ok((len, size)), "len {len}");
        }
        let mut out = Vec::new();
        write_group(0xFFFF, &mut out);
        assert_eq!(out, [0xFF, 0xFF, 0xFF, 0x00, 0x00, 0xFF, 0xFF]);
        out.clear();
        write_group(0x1234, &mut out);
        assert_eq!(out, [0xFF, 0x12, 0x34]);
    }

    #[test]
    fn group_truncated_markers() {
        assert!(matches!(read_group(&[]), Err(WireError::Truncated { .. })));
        assert!(matches!(
            read_group(&[0xFF]),
            Err(WireError::Truncated { .. })
        ));
        assert!(matches!(
            read_group(&[0xFF, 0x01]),
            Err(WireError::Truncated { .. })
        ));
        assert!(matches!(
            read_group(&[0xFF, 0xFF, 0xFF, 0, 0, 1]),
            Err(WireError::Truncated {
                needed: 7,
                got: 6,
                ..
            })
        ));
        // a non-minimal u16 form of a small length is accepted
        assert_eq!(read_group(&[0xFF, 0x00, 0x05]), Ok((5, 3)));
    }

    #[test]
    fn multi_one_byte_and_wide_forms() {
        let mut out = Vec::new();
        assert_eq!(write_multi(1, &mut out), Ok(1));
        assert_eq!(write_multi(255, &mut out), Ok(1));
        assert_eq!(out, [1, 255]);
        assert_eq!(
            write_multi(0, &mut out),
            Err(WireError::EmptyEntry {
                what: "MultiPacket"
            })
        );
        assert!(matches!(
            write_multi(256, &mut out),
            Err(WireError::TooLarge { len: 256, .. })
        ));
        assert_eq!(out.len(), 2);

        // a one-byte 255 is followed by the sub-packet's opcode high byte, zero
        assert_eq!(read_multi(&[0xFF, 0x00, 0x09]), Ok((255, 1)));
        assert_eq!(read_multi(&[0xFF]), Ok((255, 1)));
        assert_eq!(read_multi(&[0x04, 0x00]), Ok((4, 1)));
        // 0xFF then u16
        assert_eq!(read_multi(&[0xFF, 0x01, 0x00, 0x00]), Ok((256, 3)));
        assert_eq!(read_multi(&[0xFF, 0xFF, 0xFE, 0x00]), Ok((0xFFFE, 3)));
        // 0xFF 0xFF 0xFF then u32
        assert_eq!(
            read_multi(&[0xFF, 0xFF, 0xFF, 0x00, 0x00, 0xFF, 0xFF, 0x00]),
            Ok((0xFFFF, 7))
        );
        assert_eq!(
            read_multi(&[0xFF, 0xFF, 0xFF, 0x00, 0x01, 0x00, 0x00]),
            Ok((0x1_0000, 7))
        );
        assert!(matches!(
            read_multi(&[0xFF, 0x01]),
            Err(WireError::Truncated { .. })
        ));
        assert!(matches!(
            read_multi(&[0xFF, 0xFF, 0xFF, 0x00]),
            Err(WireError::Truncated { .. })
        ));
        assert!(matches!(read_multi(&[]), Err(WireError::Truncated { .. })));
    }
}
