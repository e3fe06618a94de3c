//! The reliable data header and the zero-escape rule.
//!
//! A reassembled reliable payload is read like a packet: `00 19` starts a Group of items, `00 00`
//! an escaped message (one leading zero dropped), anything else is one application message. So a
//! sender escapes every message whose first byte is `0x00` by putting one more `0x00` in front.

use crate::{Group, WireError};

/// `opcode | u16 sequence`: the bytes before the data of a ReliableData packet.
pub const DATA_HEADER_LEN: usize = 4;
/// The u32 total length a first fragment carries after the sequence.
pub const FIRST_FRAGMENT_EXTRA: usize = 4;

/// A reliable payload after reassembly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReliablePayload<'a> {
    /// One message, already unescaped.
    Message(&'a [u8]),
    /// A Group of items; pass each through [`unescape`].
    Group(Group<'a>),
}

impl<'a> ReliablePayload<'a> {
    /// Reads a reassembled payload.
    pub fn decode(payload: &'a [u8]) -> Result<Self, WireError> {
        todo!()
    }
}

/// Whether `message` needs the escape byte (its first byte is zero).
pub fn needs_escape(message: &[u8]) -> bool {
    message.first() == Some(&0)
}

/// The length of `message` once escaped.
pub fn escaped_len(message: &[u8]) -> usize {
    message.len() + usize::from(needs_escape(message))
}

/// Appends `message`, escaped when needed, to `out`.
pub fn escape_into(message: &[u8], out: &mut Vec<u8>) {
    todo!()
}

/// Unescapes one message or Group item: `00 00 …` loses one zero; `00 19 …` here is a nested
/// Group and an error; anything else is returned as it is (peers that do not escape plaintext
/// send `00 xx` messages unescaped).
pub fn unescape(item: &[u8]) -> Result<&[u8], WireError> {
    todo!()
}

/// Splits a first fragment's data into `(total length, data)`.
pub fn split_first_fragment(data: &[u8]) -> Result<(u32, &[u8]), WireError> {
    todo!()
}
