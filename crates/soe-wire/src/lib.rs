//! Zero-copy codec for the SOE protocol, version 3.
//!
//! * [`Packet`]: a typed value for every opcode, decoded from a byte slice without copying
//!   ([`Packet::decode`]) and encoded into a caller buffer ([`Packet::encode`]).
//! * [`Framer`]: the contextual framing a session negotiates: CRC trailer check and strip,
//!   compression flag, bounded zlib inflate; and on send the reverse ([`Framer::seal`]).
//! * [`MultiPacket`] / [`MultiPacketWriter`] and [`Group`] / [`GroupWriter`]: the two bundle
//!   formats, with their length varints in [`varint`].
//! * [`ReliablePayload`] and the helpers in [`reliable`]: the reliable data header, first-fragment
//!   total length and the zero-escape rule.
//! * [`PayloadMessages`] (module [`payload`]): which messages a reassembled reliable payload
//!   holds (ack elicitor, Group items, the plaintext fallback), the one rule every receiver uses.
//!
//! Nothing here allocates per packet except [`Framer`]'s reusable buffers, and no input makes it
//! panic: every malformed byte string is a [`WireError`].
//!
//! ```
//! use soe_wire::{Ack, Channel, CrcLength, FrameConfig, Framer, Packet};
//!
//! // What a SessionResponse negotiated: CRC seed, 2-byte trailer, compression flag on.
//! let mut framer = Framer::new(
//!     FrameConfig::new(0x6EC1_4BF6)
//!         .with_crc_length(CrcLength::TWO)
//!         .with_compression(true),
//! );
//!
//! // Send: encode into a buffer, then frame it in place.
//! let ack = Packet::AcknowledgeAll(Ack { channel: Channel::ZERO, sequence: 7 });
//! let mut datagram = Vec::new();
//! ack.encode(&mut datagram);
//! framer.seal(&mut datagram, 0);
//! assert_eq!(datagram.len(), 4 + framer.overhead()); // opcode, flag, sequence, CRC
//!
//! // Receive: check and strip the framing, then decode without copying.
//! let unframed = framer.open(&datagram)?;
//! assert_eq!(Packet::decode(unframed)?, ack);
//!
//! // A flipped bit fails the CRC.
//! datagram[3] ^= 0x40;
//! assert!(framer.open(&datagram).is_err());
//! # Ok::<(), soe_wire::WireError>(())
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(not(test), warn(clippy::unwrap_used))]
#![warn(clippy::too_many_lines)] // the limit is in clippy.toml

// The README's examples run as doc tests, so the published front page stays true to the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod bundle;
mod deflate;
mod error;
mod framing;
mod opcode;
mod packet;
pub mod payload;
pub mod reliable;
pub mod varint;

#[cfg(feature = "fuzzing")]
pub mod fuzzing;

pub use bundle::{
    Group, GroupIter, GroupWriter, MultiPacket, MultiPacketWriter, Packets, SubPackets,
};
pub use error::WireError;
pub use framing::{FrameConfig, Framer, MIN_COMPRESS_LEN};
pub use opcode::{Channel, OpCode};
pub use packet::{
    Ack, Disconnect, DisconnectReason, NET_STATUS_BODY_LEN, NetStatusRequest, NetStatusResponse,
    Ordered, Packet, ReliableData, RemapConnection, SessionRequest, SessionResponse,
};
pub use payload::PayloadMessages;
pub use reliable::ReliablePayload;
pub use soe_crypto::{Crc32, CrcLength};

/// The protocol version every known v3 peer puts in SessionRequest and SessionResponse.
pub const PROTOCOL_VERSION: u32 = 3;
