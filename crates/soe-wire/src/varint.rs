//! The two length encodings.
//!
//! * MultiPacket sub-packet lengths ([`read_multi`], [`write_multi`]): writers use one byte;
//!   readers also accept `0xFF` + u16 and `0xFF 0xFF 0xFF` + u32, telling a one-byte `0xFF` from the
//!   marker by the next byte (a sub-packet starts with opcode high byte `0x00`).
//! * Group item lengths ([`read_group`], [`write_group`]): one byte below `0xFF`; else `0xFF` + u16
//!   below `0xFFFF`; else `0xFF 0xFF 0xFF` + u32.

use crate::WireError;

/// Reads a MultiPacket length; returns `(length, bytes consumed)`.
pub fn read_multi(bytes: &[u8]) -> Result<(usize, usize), WireError> {
    todo!()
}

/// Appends the one-byte MultiPacket length; `len` must be 1 to 255.
pub fn write_multi(len: usize, out: &mut Vec<u8>) -> Result<usize, WireError> {
    todo!()
}

/// Reads a Group length; returns `(length, bytes consumed)`.
pub fn read_group(bytes: &[u8]) -> Result<(usize, usize), WireError> {
    todo!()
}

/// Appends a Group length and returns the bytes written.
pub fn write_group(len: usize, out: &mut Vec<u8>) -> usize {
    todo!()
}

/// The bytes [`write_group`] writes for `len`.
pub const fn group_len_size(len: usize) -> usize {
    if len < 0xFF {
        1
    } else if len < 0xFFFF {
        3
    } else {
        7
    }
}
