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
/// `00 19`: a reliable payload starting with these bytes is a Group.
pub const GROUP_PREFIX: [u8; 2] = [0x00, 0x19];
/// `00 00`: a message starting with these bytes was escaped (one zero was put in front).
pub const ESCAPE_PREFIX: [u8; 2] = [0x00, 0x00];

/// A reliable payload after reassembly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReliablePayload<'a> {
    /// One message, already unescaped.
    Message(&'a [u8]),
    /// A Group of items; pass each through [`unescape`].
    Group(Group<'a>),
}

impl<'a> ReliablePayload<'a> {
    /// Reads a reassembled payload: `00 19 …` is a Group of the bytes after the prefix (its items
    /// are checked while iterating); anything else is one message, passed through [`unescape`].
    /// An empty payload is an empty message.
    pub fn decode(payload: &'a [u8]) -> Result<Self, WireError> {
        match payload.strip_prefix(&GROUP_PREFIX) {
            Some(body) => Ok(Self::Group(Group::new(body))),
            None => unescape(payload).map(Self::Message),
        }
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
    if needs_escape(message) {
        out.push(0);
    }
    out.extend_from_slice(message);
}

/// Unescapes one message or Group item: `00 00 …` loses one zero; `00 19 …` here is a nested
/// Group and an error; anything else is returned as it is (peers that do not escape plaintext
/// send `00 xx` messages unescaped).
pub fn unescape(item: &[u8]) -> Result<&[u8], WireError> {
    if item.starts_with(&GROUP_PREFIX) {
        Err(WireError::Nested {
            what: "Group",
            inside: "Group",
        })
    } else if item.starts_with(&ESCAPE_PREFIX) {
        Ok(item.get(1..).unwrap_or_default())
    } else {
        Ok(item)
    }
}

/// Splits a first fragment's data into `(total length, data)`.
///
/// The total length is the peer's claim: a receiver bounds it before reserving anything.
pub fn split_first_fragment(data: &[u8]) -> Result<(u32, &[u8]), WireError> {
    match data.split_first_chunk::<FIRST_FRAGMENT_EXTRA>() {
        Some((total, rest)) => Ok((u32::from_be_bytes(*total), rest)),
        None => Err(WireError::Truncated {
            what: "first fragment total length",
            needed: FIRST_FRAGMENT_EXTRA,
            got: data.len(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_kinds() {
        assert_eq!(
            ReliablePayload::decode(b"\x00\x19\x01a\x01b"),
            Ok(ReliablePayload::Group(Group::new(b"\x01a\x01b")))
        );
        assert_eq!(
            ReliablePayload::decode(b"\x00\x00\x19x"),
            Ok(ReliablePayload::Message(b"\x00\x19x"))
        );
        assert_eq!(
            ReliablePayload::decode(b"\x00\x05x"),
            Ok(ReliablePayload::Message(b"\x00\x05x"))
        );
        assert_eq!(
            ReliablePayload::decode(b"hello"),
            Ok(ReliablePayload::Message(b"hello"))
        );
        assert_eq!(
            ReliablePayload::decode(b""),
            Ok(ReliablePayload::Message(b""))
        );
    }

    #[test]
    fn escape_rules() {
        let mut out = Vec::new();
        escape_into(b"\x00\x19abc", &mut out);
        assert_eq!(out, b"\x00\x00\x19abc");
        assert_eq!(escaped_len(b"\x00\x19abc"), out.len());
        assert_eq!(unescape(&out), Ok(&b"\x00\x19abc"[..]));
        out.clear();
        escape_into(b"plain", &mut out);
        assert_eq!(out, b"plain");
        assert_eq!(
            unescape(b"\x00\x19"),
            Err(WireError::Nested {
                what: "Group",
                inside: "Group"
            })
        );
        assert_eq!(unescape(b"\x00"), Ok(&b"\x00"[..]));
        assert_eq!(unescape(b"\x00\x00"), Ok(&b"\x00"[..]));
    }

    #[test]
    fn first_fragment() {
        assert_eq!(
            split_first_fragment(&[0, 0, 5, 0x7f, 9, 9]),
            Ok((1407, &[9u8, 9][..]))
        );
        assert_eq!(split_first_fragment(&[0, 0, 0, 4]), Ok((4, &[][..])));
        assert_eq!(
            split_first_fragment(&[0, 0, 5]),
            Err(WireError::Truncated {
                what: "first fragment total length",
                needed: 4,
                got: 3
            })
        );
    }
}
