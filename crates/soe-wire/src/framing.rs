//! Contextual framing: `opcode | [compression flag] | body | CRC`.

use crate::{CrcLength, WireError};

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

/// Applies and removes a session's framing. Keeps the seeded CRC state and reusable
/// compression buffers, so framing allocates nothing per packet once warm.
pub struct Framer {
    // fields are the implementer's choice
}

impl Framer {
    /// A framer for `config`.
    pub fn new(config: FrameConfig) -> Self {
        todo!()
    }

    /// The config this framer applies.
    pub fn config(&self) -> &FrameConfig {
        todo!()
    }

    /// The most bytes framing adds to a packet: the flag byte (when compression is on) plus the
    /// CRC trailer. A sender keeps `encoded_len + overhead <= udp_length`.
    pub fn overhead(&self) -> usize {
        todo!()
    }

    /// Removes framing from a received datagram and returns `opcode | body`, ready for
    /// [`crate::Packet::decode`]: borrowed from `datagram`, or from this framer's buffer when the
    /// body was compressed. Contextless packets pass through unchanged; a datagram whose first byte
    /// is not zero ([`crate::Packet::Unreliable`]) has its CRC stripped but no flag.
    pub fn open<'a>(&'a mut self, datagram: &'a [u8]) -> Result<&'a [u8], WireError> {
        todo!()
    }

    /// Like [`Framer::open`] for a datagram whose CRC failed: accepts only the two shapes real
    /// peers send without a CRC trailer (h1z1-server's Heartbeat `00 06` and selective
    /// Acknowledge `00 11..=14 | u16`, with a zero compression flag when compression is on) and
    /// returns `None` for anything else.
    pub fn open_crcless<'a>(&self, datagram: &'a [u8]) -> Option<&'a [u8]> {
        todo!()
    }

    /// Frames a packet in place. `buf[start..]` holds `opcode | body` as [`crate::Packet::encode`]
    /// wrote it; afterwards it holds the datagram: compression flag inserted when negotiated, the
    /// body deflated when it is 24 bytes or more and deflating makes it smaller, and the CRC
    /// trailer appended. Contextless packets are left unchanged; unreliable ones get only the CRC.
    pub fn seal(&mut self, buf: &mut Vec<u8>, start: usize) {
        todo!()
    }
}

impl std::fmt::Debug for Framer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Framer")
            .field("config", self.config())
            .finish()
    }
}
