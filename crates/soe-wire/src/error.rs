//! The error type of the codec.

/// Why a byte string is not a valid packet. Messages name the field and the numbers involved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The input ended before `what` was complete.
    #[error("truncated {what}: needs {needed} bytes, got {got}")]
    Truncated {
        /// The field or packet being read.
        what: &'static str,
        /// Bytes needed.
        needed: usize,
        /// Bytes present.
        got: usize,
    },
    /// Bytes were left after a fixed-size packet.
    #[error("{extra} trailing bytes after {what}")]
    TrailingBytes {
        /// The packet that ended early.
        what: &'static str,
        /// How many bytes were left.
        extra: usize,
    },
    /// The opcode is not one of the protocol's.
    #[error("unknown opcode {0:#06x}")]
    UnknownOpcode(u16),
    /// The CRC trailer does not match the datagram.
    #[error("CRC mismatch: trailer says {received:#x}, bytes give {computed:#x}")]
    CrcMismatch {
        /// The (truncated) CRC on the wire.
        received: u32,
        /// The (truncated) CRC of the bytes.
        computed: u32,
    },
    /// The compressed body inflates to more than the configured limit.
    #[error("compressed body inflates past the {limit}-byte limit")]
    InflateTooLarge {
        /// The configured limit.
        limit: usize,
    },
    /// The compressed body is not valid zlib data.
    #[error("compressed body is not valid zlib data")]
    InflateFailed,
    /// A string field has no terminating NUL.
    #[error("{what} has no terminating NUL")]
    MissingNul {
        /// The field.
        what: &'static str,
    },
    /// A bundle (MultiPacket or Group) entry has length zero.
    #[error("zero-length entry in {what}")]
    EmptyEntry {
        /// The bundle kind.
        what: &'static str,
    },
    /// A bundle holds a bundle where the protocol does not allow it.
    #[error("{what} nested inside {inside}")]
    Nested {
        /// The inner packet.
        what: &'static str,
        /// The outer packet.
        inside: &'static str,
    },
    /// A packet does not fit the output buffer or a size field.
    #[error("{what} of {len} bytes exceeds the limit of {limit}")]
    TooLarge {
        /// What was too large.
        what: &'static str,
        /// Its length.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// A contextless packet was handed to the contextual framing, or the reverse.
    #[error("opcode {0:#06x} does not belong in this context")]
    WrongContext(u16),
}
