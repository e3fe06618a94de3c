//! The messages a reassembled reliable payload holds: the one rule every receiver and the
//! passive dissector apply.
//!
//! * An ack elicitor ([`EMPTY_GROUP`] `00 19`, or [`TRUNCATED_GROUP`] `00 19 01`, and nothing
//!   else) holds no message.
//! * `00 19 …` is a Group: each item is one message, passed through [`unescape`].
//! * Anything else is one message, passed through [`unescape`] (`00 00 …` loses one zero). An
//!   empty payload is one empty message.
//! * The plaintext fallback: on a channel without encryption, a payload that starts `00 19` but
//!   is no well-formed Group with at least one item is one message, delivered whole, rather than
//!   an error. Peers that do not escape plaintext (soe-protocol 2.3.0) send application
//!   messages that start `00 19`; failing on them would let any such message end the session.
//!   With RC4 every peer escapes the ciphertext, so there a malformed Group stays an error.
//!
//! [`PayloadMessages`] applies the rule without copying or allocating: it checks the whole
//! payload once when made, then yields each message as a slice of the payload (or, with
//! [`PayloadMessages::ranges`], as its position in it).
//!
//! ```
//! use soe_wire::payload::PayloadMessages;
//!
//! // A Group of two items, the second escaped (it starts with a zero).
//! let payload = b"\x00\x19\x02hi\x04\x00\x00\x01x";
//! let messages: Vec<&[u8]> = PayloadMessages::decode(payload, false)?.collect();
//! assert_eq!(messages, [&b"hi"[..], &b"\x00\x01x"[..]]);
//!
//! // No Group, yet starting `00 19`: on a plaintext channel, one message.
//! let odd = b"\x00\x19\x09short";
//! assert_eq!(PayloadMessages::decode(odd, true)?.collect::<Vec<_>>(), [&odd[..]]);
//! assert!(PayloadMessages::decode(odd, false).is_err());
//! # Ok::<(), soe_wire::WireError>(())
//! ```

use std::iter::FusedIterator;
use std::ops::Range;

use crate::reliable::{ReliablePayload, unescape};
use crate::{GroupIter, WireError};

/// `00 19`: an empty Group, the ack elicitor the original library's readers take as nothing.
pub const EMPTY_GROUP: &[u8] = &[0x00, 0x19];
/// `00 19 01`: a Group whose only item is cut short, the ack elicitor for soe-protocol 2.3.0.
pub const TRUNCATED_GROUP: &[u8] = &[0x00, 0x19, 0x01];

/// Whether a reassembled payload is an ack elicitor ([`EMPTY_GROUP`] or [`TRUNCATED_GROUP`]),
/// which holds no message.
pub fn is_ack_elicitor(payload: &[u8]) -> bool {
    payload == EMPTY_GROUP || payload == TRUNCATED_GROUP
}

/// Whether `payload` is one message exactly as it stands, by the rule: it does not start with a
/// zero byte, so it is no Group, no ack elicitor, and has nothing to unescape. For such a payload
/// [`PayloadMessages::decode`] yields the payload itself, whatever `plaintext` is; a receiver can
/// skip the decoding.
#[inline]
pub fn is_plain_message(payload: &[u8]) -> bool {
    payload.first().is_some_and(|&b| b != 0)
}

/// The messages of one reassembled reliable payload, in order, each a slice of the payload (see
/// the [module](self) for the rule).
///
/// Made by [`PayloadMessages::decode`], which has checked every item, so iterating cannot fail.
#[derive(Debug, Clone)]
pub struct PayloadMessages<'a> {
    payload: &'a [u8],
    state: State<'a>,
    /// Messages not yet yielded.
    remaining: usize,
}

#[derive(Debug, Clone)]
enum State<'a> {
    /// Nothing (more) to yield.
    Done,
    /// One message.
    One(&'a [u8]),
    /// A checked Group's items, each still to unescape.
    Group(GroupIter<'a>),
}

impl<'a> PayloadMessages<'a> {
    /// Applies the rule to `payload`. `plaintext`: the channel has no encryption, so the
    /// plaintext fallback applies (a `00 19` payload that is no valid, non-empty Group is one
    /// message).
    ///
    /// # Errors
    /// With `plaintext` false, a payload starting `00 19` whose Group is malformed: an item's
    /// length runs past the end or is zero ([`WireError::Truncated`], [`WireError::EmptyEntry`]),
    /// or an item is itself a Group ([`WireError::Nested`]).
    pub fn decode(payload: &'a [u8], plaintext: bool) -> Result<Self, WireError> {
        if is_ack_elicitor(payload) {
            return Ok(Self::done(payload));
        }
        let group = match ReliablePayload::decode(payload)? {
            ReliablePayload::Message(message) => return Ok(Self::one(payload, message)),
            ReliablePayload::Group(group) => group,
        };
        match count_items(group.iter()) {
            Ok(0) if plaintext => Ok(Self::one(payload, payload)),
            Ok(count) => Ok(Self {
                payload,
                state: State::Group(group.iter()),
                remaining: count,
            }),
            Err(_) if plaintext => Ok(Self::one(payload, payload)),
            Err(e) => Err(e),
        }
    }

    fn done(payload: &'a [u8]) -> Self {
        Self {
            payload,
            state: State::Done,
            remaining: 0,
        }
    }

    fn one(payload: &'a [u8], message: &'a [u8]) -> Self {
        Self {
            payload,
            state: State::One(message),
            remaining: 1,
        }
    }

    /// The payload the messages are read from.
    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }

    /// Whether the payload is exactly one message, as it stands (nothing to unbundle or
    /// unescape). A receiver can then deliver the payload itself.
    pub fn is_whole(&self) -> bool {
        matches!(self.state, State::One(m) if m.len() == self.payload.len())
    }

    /// The messages as positions in the payload instead of slices of it (for a receiver that
    /// copies the payload once, decrypts each message in place, and slices the copy).
    pub fn ranges(self) -> MessageRanges<'a> {
        MessageRanges { messages: self }
    }
}

/// Counts a Group's items, each unescaped, or returns the first error.
fn count_items(items: GroupIter<'_>) -> Result<usize, WireError> {
    let mut count = 0;
    for item in items {
        unescape(item?)?;
        count += 1;
    }
    Ok(count)
}

impl<'a> Iterator for PayloadMessages<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let message = match &mut self.state {
            State::Done => None,
            State::One(message) => {
                let message = *message;
                self.state = State::Done;
                Some(message)
            }
            // `decode` checked every item, so an error here is impossible; stop quietly if it
            // ever happens rather than panic.
            State::Group(items) => match items.next().map(|item| item.and_then(unescape)) {
                Some(Ok(message)) => Some(message),
                Some(Err(_)) | None => {
                    debug_assert!(
                        self.remaining == 0,
                        "a checked Group failed on a second walk"
                    );
                    self.state = State::Done;
                    None
                }
            },
        };
        if message.is_some() {
            self.remaining = self.remaining.saturating_sub(1);
        } else {
            self.remaining = 0;
        }
        message
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for PayloadMessages<'_> {}
impl FusedIterator for PayloadMessages<'_> {}

/// The messages of a payload as byte ranges of it (see [`PayloadMessages::ranges`]). An empty
/// message is `0..0`.
#[derive(Debug, Clone)]
pub struct MessageRanges<'a> {
    messages: PayloadMessages<'a>,
}

impl Iterator for MessageRanges<'_> {
    type Item = Range<usize>;

    fn next(&mut self) -> Option<Range<usize>> {
        let message = self.messages.next()?;
        Some(range_in(self.messages.payload, message))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.messages.size_hint()
    }
}

impl ExactSizeIterator for MessageRanges<'_> {}
impl FusedIterator for MessageRanges<'_> {}

/// Where `inner`, a slice the decoder took from `outer`, lies in it.
fn range_in(outer: &[u8], inner: &[u8]) -> Range<usize> {
    if inner.is_empty() {
        return 0..0;
    }
    let start = (inner.as_ptr() as usize).wrapping_sub(outer.as_ptr() as usize);
    let end = start.wrapping_add(inner.len());
    debug_assert!(
        start <= end && end <= outer.len(),
        "a message outside its payload"
    );
    if start <= end && end <= outer.len() {
        start..end
    } else {
        0..0
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::GroupWriter;
    use crate::reliable::escape_into;

    fn messages(payload: &[u8], plaintext: bool) -> Result<Vec<&[u8]>, WireError> {
        PayloadMessages::decode(payload, plaintext).map(Iterator::collect)
    }

    fn ranges(payload: &[u8], plaintext: bool) -> Vec<(usize, usize)> {
        PayloadMessages::decode(payload, plaintext)
            .map(|m| m.ranges().map(|r| (r.start, r.end)).collect())
            .unwrap_or_default()
    }

    fn group_of(items: &[&[u8]]) -> Vec<u8> {
        let mut writer = GroupWriter::new(usize::MAX);
        let mut escaped = Vec::new();
        for item in items {
            escaped.clear();
            escape_into(item, &mut escaped);
            assert!(writer.push(&escaped));
        }
        let mut out = Vec::new();
        writer.finish(&mut out);
        out
    }

    #[test]
    fn ack_elicitors_hold_no_message() {
        for plaintext in [false, true] {
            for elicitor in [EMPTY_GROUP, TRUNCATED_GROUP] {
                let m = PayloadMessages::decode(elicitor, plaintext).unwrap();
                assert_eq!(m.len(), 0);
                assert!(!m.is_whole());
                assert_eq!(m.count(), 0);
            }
        }
        assert!(is_ack_elicitor(b"\x00\x19"));
        assert!(is_ack_elicitor(b"\x00\x19\x01"));
        assert!(!is_ack_elicitor(b"\x00\x19\x01a"));
        assert!(!is_ack_elicitor(b"\x00\x19\x02"));
        assert!(!is_ack_elicitor(b"\x00"));
    }

    #[test]
    fn a_single_message_is_the_payload_unescaped() {
        assert_eq!(messages(b"hello", false).unwrap(), [&b"hello"[..]]);
        assert!(PayloadMessages::decode(b"hello", false).unwrap().is_whole());
        assert_eq!(ranges(b"hello", false), [(0, 5)]);
        // an escaped message loses its escape zero
        assert_eq!(
            messages(b"\x00\x00\x19x", false).unwrap(),
            [&b"\x00\x19x"[..]]
        );
        assert_eq!(ranges(b"\x00\x00\x19x", true), [(1, 4)]);
        assert!(
            !PayloadMessages::decode(b"\x00\x00\x19x", true)
                .unwrap()
                .is_whole()
        );
        // a message from a peer that does not escape (`00 xx`, xx not 00 or 19) stays whole
        assert_eq!(messages(b"\x00\x05x", true).unwrap(), [&b"\x00\x05x"[..]]);
    }

    #[test]
    fn a_group_yields_each_item_unescaped() {
        let payload = group_of(&[b"one", b"\x00two", b"\x00\x00three", b"x"]);
        let expected: [&[u8]; 4] = [b"one", b"\x00two", b"\x00\x00three", b"x"];
        for plaintext in [false, true] {
            let m = PayloadMessages::decode(&payload, plaintext).unwrap();
            assert_eq!(m.len(), 4);
            assert!(!m.is_whole());
            assert_eq!(m.collect::<Vec<_>>(), expected);
            let r = ranges(&payload, plaintext);
            let sliced: Vec<&[u8]> = r.iter().map(|&(a, b)| &payload[a..b]).collect();
            assert_eq!(sliced, expected);
        }
        // a 300-byte item takes the 3-byte length
        let big = vec![7u8; 300];
        let payload = group_of(&[&big, b"tail"]);
        assert_eq!(messages(&payload, false).unwrap(), [&big[..], &b"tail"[..]]);
    }

    #[test]
    fn a_00_19_payload_that_is_no_group_is_delivered_whole_in_plaintext() {
        let not_groups: [&[u8]; 5] = [
            b"\x00\x19\x09short",     // an item runs past the end
            b"\x00\x19\x00abc",       // a zero-length item
            b"\x00\x19\x03\x00\x19a", // an item that is itself a Group
            b"\x00\x19\x02ab\x05c",   // good, then cut short
            b"\x00\x19\xff\x01",      // a 3-byte length cut short
        ];
        for payload in not_groups {
            assert_eq!(
                messages(payload, true).unwrap(),
                [payload],
                "{payload:02x?}"
            );
            assert!(PayloadMessages::decode(payload, true).unwrap().is_whole());
            assert_eq!(ranges(payload, true), [(0, payload.len())]);
            assert!(messages(payload, false).is_err(), "{payload:02x?}");
        }
        assert_eq!(
            PayloadMessages::decode(b"\x00\x19\x09short", false).unwrap_err(),
            WireError::Truncated {
                what: "Group item",
                needed: 9,
                got: 5
            }
        );
    }

    #[test]
    fn empty_and_truncated_inputs() {
        // an empty payload is one empty message
        assert_eq!(messages(b"", false).unwrap(), [&b""[..]]);
        assert_eq!(ranges(b"", false), [(0, 0)]);
        // a lone zero and a lone escape are one message each
        assert_eq!(messages(b"\x00", false).unwrap(), [&b"\x00"[..]]);
        assert_eq!(messages(b"\x00\x00", false).unwrap(), [&b"\x00"[..]]);
        // a Group cut in its length: whole in plaintext, an error with encryption
        assert_eq!(
            messages(b"\x00\x19\xff", true).unwrap(),
            [&b"\x00\x19\xff"[..]]
        );
        assert!(messages(b"\x00\x19\xff", false).is_err());
        assert!(messages(b"\x00\x19\x01\x00\x00", false).is_err());
    }

    proptest! {
        // Any input: no panic; every message lies inside the payload; the count is exact.
        #[test]
        fn any_input_is_safe(payload in proptest::collection::vec(any::<u8>(), 0..64),
                             group in any::<bool>(), plaintext in any::<bool>()) {
            let mut payload = payload;
            if group {
                payload.splice(0..0, [0x00, 0x19]);
            }
            if is_plain_message(&payload) {
                let m = PayloadMessages::decode(&payload, plaintext).unwrap();
                prop_assert!(m.is_whole());
                prop_assert_eq!(m.ranges().collect::<Vec<_>>(), vec![0..payload.len()]);
            }
            if let Ok(m) = PayloadMessages::decode(&payload, plaintext) {
                let len = m.len();
                let list: Vec<&[u8]> = m.clone().collect();
                prop_assert_eq!(list.len(), len);
                let r: Vec<Range<usize>> = m.ranges().collect();
                prop_assert_eq!(r.len(), len);
                for (range, message) in r.iter().zip(&list) {
                    prop_assert!(range.end <= payload.len());
                    prop_assert_eq!(&payload[range.clone()], *message);
                }
            } else {
                prop_assert!(!plaintext);
            }
        }

        // Messages bundled by the writer come back as they were.
        #[test]
        fn group_round_trip(items in proptest::collection::vec(
            proptest::collection::vec(any::<u8>(), 1..40), 1..8)) {
            let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
            let payload = group_of(&refs);
            prop_assert_eq!(messages(&payload, false).unwrap(), refs.clone());
            prop_assert_eq!(messages(&payload, true).unwrap(), refs);
        }
    }
}
