//! MultiPacket (0x03) and Group (0x19) bundles.

use crate::{Packet, WireError};

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
        todo!()
    }
}

/// Packs sub-packets into one MultiPacket within a byte budget, writing one-byte lengths (the
/// form every peer reads). Keeps its buffer across uses.
#[derive(Debug, Clone, Default)]
pub struct MultiPacketWriter {
    // fields are the implementer's choice
}

impl MultiPacketWriter {
    /// A writer whose output (opcode included, framing excluded) stays within `budget` bytes.
    pub fn new(budget: usize) -> Self {
        todo!()
    }

    /// Changes the budget; takes effect for the next push.
    pub fn set_budget(&mut self, budget: usize) {
        todo!()
    }

    /// Whether a sub-packet of `len` bytes would fit now (it must be 1 to 255 bytes).
    pub fn fits(&self, len: usize) -> bool {
        todo!()
    }

    /// Adds one encoded sub-packet (`opcode | body`); `false` (and nothing added) when it does not fit.
    pub fn push(&mut self, sub_packet: &[u8]) -> bool {
        todo!()
    }

    /// Encodes and adds a packet; `false` when it does not fit.
    pub fn push_packet(&mut self, packet: &Packet<'_>) -> bool {
        todo!()
    }

    /// Sub-packets held.
    pub fn count(&self) -> usize {
        todo!()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        todo!()
    }

    /// Appends the MultiPacket to `out` (a lone sub-packet goes out unwrapped, as peers expect),
    /// empties the writer, and returns the bytes written (0 when empty).
    pub fn finish(&mut self, out: &mut Vec<u8>) -> usize {
        todo!()
    }
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

/// Iterator over a Group's items.
#[derive(Debug, Clone)]
pub struct GroupIter<'a> {
    rest: &'a [u8],
    failed: bool,
}

impl<'a> Iterator for GroupIter<'a> {
    type Item = Result<&'a [u8], WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        todo!()
    }
}

/// Packs items (already escaped messages) into a Group within a byte budget.
#[derive(Debug, Clone, Default)]
pub struct GroupWriter {
    // fields are the implementer's choice
}

impl GroupWriter {
    /// A writer whose output (the `00 19` prefix included) stays within `budget` bytes.
    pub fn new(budget: usize) -> Self {
        todo!()
    }

    /// Whether an item of `len` bytes would fit now.
    pub fn fits(&self, len: usize) -> bool {
        todo!()
    }

    /// Adds one item; `false` (and nothing added) when it does not fit.
    pub fn push(&mut self, item: &[u8]) -> bool {
        todo!()
    }

    /// Items held.
    pub fn count(&self) -> usize {
        todo!()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        todo!()
    }

    /// Appends the payload to `out`: `00 19` and the items, or a lone item as it is (a bundle of
    /// one is sent as plain data). Empties the writer and returns the bytes written.
    pub fn finish(&mut self, out: &mut Vec<u8>) -> usize {
        todo!()
    }
}
