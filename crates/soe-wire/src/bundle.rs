//! MultiPacket (0x03) and Group (0x19) bundles.

use crate::{
    Packet, WireError,
    varint::{group_len_size, read_group, read_multi, write_group},
};

/// `00 03`, the MultiPacket opcode on the wire.
const MULTI_HEADER: [u8; 2] = [0x00, 0x03];
/// `00 19`, the Group opcode on the wire, which also starts a Group reliable payload.
const GROUP_HEADER: [u8; 2] = [0x00, 0x19];
/// The largest sub-packet a one-byte MultiPacket length can describe.
const MAX_SUB_PACKET: usize = 0xFF;

/// A MultiPacket body: `(varint length, sub-packet)*`, each sub-packet `opcode | body`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MultiPacket<'a> {
    body: &'a [u8],
}

impl<'a> MultiPacket<'a> {
    /// Wraps a MultiPacket body (the bytes after the opcode). Entries are checked while iterating.
    pub fn new(body: &'a [u8]) -> Self {
        Self { body }
    }

    /// The raw body.
    pub fn body(&self) -> &'a [u8] {
        self.body
    }

    /// The sub-packets, each `opcode | body`. Reads both length encodings (see
    /// [`crate::varint::read_multi`]). Yields one error and then stops on a malformed entry.
    pub fn iter(&self) -> SubPackets<'a> {
        SubPackets {
            rest: self.body,
            failed: false,
        }
    }

    /// The sub-packets decoded with [`Packet::decode`]. A MultiPacket inside this one is
    /// [`WireError::Nested`]: [`Packet::decode`] accepts it, but no peer nests them and a session
    /// must not recurse on peer input. Stops after the first error.
    pub fn packets(&self) -> Packets<'a> {
        Packets { inner: self.iter() }
    }
}

impl<'a> IntoIterator for &MultiPacket<'a> {
    type Item = Result<&'a [u8], WireError>;
    type IntoIter = SubPackets<'a>;

    fn into_iter(self) -> SubPackets<'a> {
        self.iter()
    }
}

/// Iterator over a MultiPacket's sub-packets, decoded (see [`MultiPacket::packets`]).
#[derive(Debug, Clone)]
pub struct Packets<'a> {
    inner: SubPackets<'a>,
}

impl<'a> Iterator for Packets<'a> {
    type Item = Result<Packet<'a>, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        let decoded = match self.inner.next()? {
            Ok(sub) => Packet::decode(sub).and_then(|p| match p {
                Packet::MultiPacket(_) => Err(WireError::Nested {
                    what: "MultiPacket",
                    inside: "MultiPacket",
                }),
                p => Ok(p),
            }),
            Err(e) => Err(e),
        };
        if decoded.is_err() {
            self.inner.failed = true;
        }
        Some(decoded)
    }
}

/// Iterator over a MultiPacket's sub-packets.
#[derive(Debug, Clone)]
pub struct SubPackets<'a> {
    rest: &'a [u8],
    failed: bool,
}

impl<'a> Iterator for SubPackets<'a> {
    type Item = Result<&'a [u8], WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.rest.is_empty() {
            return None;
        }
        let entry = next_entry(
            &mut self.rest,
            read_multi,
            "MultiPacket",
            "MultiPacket sub-packet",
        );
        if entry.is_err() {
            self.failed = true;
        }
        Some(entry)
    }
}

impl std::iter::FusedIterator for SubPackets<'_> {}

/// A length reader from [`crate::varint`]: `(length, bytes consumed)`.
type ReadLen = fn(&[u8]) -> Result<(usize, usize), WireError>;

/// Takes one `(length, entry)` off the front of `rest`.
fn next_entry<'a>(
    rest: &mut &'a [u8],
    read_len: ReadLen,
    what: &'static str,
    entry_what: &'static str,
) -> Result<&'a [u8], WireError> {
    let (len, used) = read_len(rest)?;
    if len == 0 {
        return Err(WireError::EmptyEntry { what });
    }
    let after = rest.get(used..).unwrap_or_default();
    match after.split_at_checked(len) {
        Some((entry, tail)) => {
            *rest = tail;
            Ok(entry)
        }
        None => Err(WireError::Truncated {
            what: entry_what,
            needed: len,
            got: after.len(),
        }),
    }
}

/// Packs sub-packets into one MultiPacket within a byte budget, writing one-byte lengths (the
/// form every peer reads). Keeps its buffer across uses.
///
/// The budget is checked against the wrapped form (`00 03`, then a length byte and the bytes of
/// each sub-packet), even for the first sub-packet, which [`MultiPacketWriter::finish`] sends
/// unwrapped when it stays alone. The default writer has a budget of zero and holds nothing.
#[derive(Debug, Clone, Default)]
pub struct MultiPacketWriter {
    budget: usize,
    /// `00 03 (len sub-packet)*` once something was pushed, empty otherwise.
    buf: Vec<u8>,
    count: usize,
}

impl MultiPacketWriter {
    /// A writer whose output (opcode included, framing excluded) stays within `budget` bytes.
    pub fn new(budget: usize) -> Self {
        Self {
            budget,
            buf: Vec::with_capacity(budget.min(1 << 16)),
            count: 0,
        }
    }

    /// Changes the budget; takes effect for the next push.
    #[inline]
    pub fn set_budget(&mut self, budget: usize) {
        self.budget = budget;
    }

    /// The budget in bytes.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// The bytes the wrapped MultiPacket holds now (0 when empty).
    #[inline]
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether a sub-packet of `len` bytes would fit now (it must be 1 to 255 bytes).
    #[inline]
    pub fn fits(&self, len: usize) -> bool {
        let used = if self.buf.is_empty() {
            MULTI_HEADER.len()
        } else {
            self.buf.len()
        };
        (1..=MAX_SUB_PACKET).contains(&len) && used + 1 + len <= self.budget
    }

    /// Adds one encoded sub-packet (`opcode | body`); `false` (and nothing added) when it does not fit.
    ///
    /// A 255-byte sub-packet must start with `0x00` (every opcode does): readers tell a one-byte
    /// length of 255 from the wide-length marker by that byte, so a 255-byte unreliable message
    /// is refused.
    #[inline]
    pub fn push(&mut self, sub_packet: &[u8]) -> bool {
        let len = sub_packet.len();
        if !self.fits(len) || (len == MAX_SUB_PACKET && !unambiguous(sub_packet.first().copied())) {
            return false;
        }
        self.start_entry(sub_packet.len());
        self.buf.extend_from_slice(sub_packet);
        true
    }

    /// Encodes and adds a packet; `false` when it does not fit.
    pub fn push_packet(&mut self, packet: &Packet<'_>) -> bool {
        let len = packet.encoded_len();
        let first = match packet {
            Packet::Unreliable(bytes) => bytes.first().copied(),
            _ => Some(0),
        };
        if !self.fits(len) || (len == MAX_SUB_PACKET && !unambiguous(first)) {
            return false;
        }
        self.start_entry(len);
        let written = packet.encode(&mut self.buf);
        debug_assert_eq!(written, len);
        true
    }

    /// Writes the header if needed and the length byte of an entry known to fit.
    #[inline]
    fn start_entry(&mut self, len: usize) {
        debug_assert!((1..=MAX_SUB_PACKET).contains(&len));
        if self.buf.is_empty() {
            // The header and the length byte in one append.
            let [hi, lo] = MULTI_HEADER;
            self.buf.extend_from_slice(&[hi, lo, len as u8]);
        } else {
            self.buf.push(len as u8);
        }
        self.count += 1;
    }

    /// Sub-packets held.
    #[inline]
    pub fn count(&self) -> usize {
        self.count
    }

    /// Whether nothing is held.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Appends the MultiPacket to `out` (a lone sub-packet goes out unwrapped, as peers expect),
    /// empties the writer, and returns the bytes written (0 when empty).
    pub fn finish(&mut self, out: &mut Vec<u8>) -> usize {
        let bytes = match self.count {
            0 => &[][..],
            // header, then one length byte
            1 => self.buf.get(MULTI_HEADER.len() + 1..).unwrap_or_default(),
            _ => &self.buf[..],
        };
        out.extend_from_slice(bytes);
        let written = bytes.len();
        self.buf.clear();
        self.count = 0;
        written
    }
}

/// Whether a sub-packet starting with `first` can follow a one-byte length of 255 (see
/// [`MultiPacketWriter::push`]); shorter sub-packets are never ambiguous.
fn unambiguous(first: Option<u8>) -> bool {
    first == Some(0)
}

/// A Group (data bundle) body: `(varint length, item)*` with the Group varint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Group<'a> {
    body: &'a [u8],
}

impl<'a> Group<'a> {
    /// Wraps a Group body (the bytes after `00 19`).
    pub fn new(body: &'a [u8]) -> Self {
        Self { body }
    }

    /// The raw body.
    pub fn body(&self) -> &'a [u8] {
        self.body
    }

    /// The items. Yields one error and then stops on a malformed entry.
    pub fn iter(&self) -> GroupIter<'a> {
        GroupIter {
            rest: self.body,
            failed: false,
        }
    }
}

impl<'a> IntoIterator for &Group<'a> {
    type Item = Result<&'a [u8], WireError>;
    type IntoIter = GroupIter<'a>;

    fn into_iter(self) -> GroupIter<'a> {
        self.iter()
    }
}

/// Iterator over a Group's items.
#[derive(Debug, Clone)]
pub struct GroupIter<'a> {
    rest: &'a [u8],
    failed: bool,
}

impl<'a> Iterator for GroupIter<'a> {
    type Item = Result<&'a [u8], WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.rest.is_empty() {
            return None;
        }
        let entry = next_entry(&mut self.rest, read_group, "Group", "Group item");
        if entry.is_err() {
            self.failed = true;
        }
        Some(entry)
    }
}

impl std::iter::FusedIterator for GroupIter<'_> {}

/// Packs items (already escaped messages) into a Group within a byte budget.
///
/// Like [`MultiPacketWriter`], the budget is checked against the wrapped form even for a first
/// item that [`GroupWriter::finish`] may send alone. Empty items never fit. Keeps its buffer
/// across uses; the default writer has a budget of zero.
#[derive(Debug, Clone, Default)]
pub struct GroupWriter {
    budget: usize,
    /// `00 19 (varint item)*` once something was pushed, empty otherwise.
    buf: Vec<u8>,
    count: usize,
    /// Where the first item's bytes start in `buf`.
    first_item: usize,
}

impl GroupWriter {
    /// A writer whose output (the `00 19` prefix included) stays within `budget` bytes.
    pub fn new(budget: usize) -> Self {
        Self {
            budget,
            buf: Vec::with_capacity(budget.min(1 << 16)),
            count: 0,
            first_item: 0,
        }
    }

    /// Changes the budget; takes effect for the next push.
    pub fn set_budget(&mut self, budget: usize) {
        self.budget = budget;
    }

    /// The budget in bytes.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// The bytes the wrapped Group holds now (0 when empty).
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether an item of `len` bytes would fit now.
    pub fn fits(&self, len: usize) -> bool {
        let used = if self.buf.is_empty() {
            GROUP_HEADER.len()
        } else {
            self.buf.len()
        };
        len != 0
            && used
                .checked_add(group_len_size(len))
                .and_then(|n| n.checked_add(len))
                .is_some_and(|n| n <= self.budget)
    }

    /// Adds one item; `false` (and nothing added) when it does not fit.
    pub fn push(&mut self, item: &[u8]) -> bool {
        if !self.fits(item.len()) {
            return false;
        }
        if self.buf.is_empty() {
            self.buf.extend_from_slice(&GROUP_HEADER);
        }
        write_group(item.len(), &mut self.buf);
        if self.count == 0 {
            self.first_item = self.buf.len();
        }
        self.buf.extend_from_slice(item);
        self.count += 1;
        true
    }

    /// Items held.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Appends the payload to `out`: `00 19` and the items, or a lone item as it is (a bundle of
    /// one is sent as plain data). Empties the writer and returns the bytes written.
    pub fn finish(&mut self, out: &mut Vec<u8>) -> usize {
        let bytes = match self.count {
            0 => &[][..],
            1 => self.buf.get(self.first_item..).unwrap_or_default(),
            _ => &self.buf[..],
        };
        out.extend_from_slice(bytes);
        let written = bytes.len();
        self.buf.clear();
        self.count = 0;
        self.first_item = 0;
        written
    }
}
