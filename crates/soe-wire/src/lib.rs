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
//!
//! Nothing here allocates per packet except [`Framer`]'s reusable buffers, and no input makes it
//! panic: every malformed byte string is a [`WireError`].
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(not(test), warn(clippy::unwrap_used))]

mod bundle;
mod error;
mod framing;
mod opcode;
mod packet;
pub mod reliable;
pub mod varint;

#[cfg(feature = "fuzzing")]
pub mod fuzzing;

pub use bundle::{Group, GroupIter, GroupWriter, MultiPacket, MultiPacketWriter, SubPackets};
pub use error::WireError;
pub use framing::{FrameConfig, Framer};
pub use opcode::{Channel, OpCode};
pub use packet::{
    Ack, Disconnect, DisconnectReason, NetStatusRequest, NetStatusResponse, Ordered, Packet,
    ReliableData, RemapConnection, SessionRequest, SessionResponse,
};
pub use reliable::ReliablePayload;
pub use soe_crypto::{Crc32, CrcLength};

/// The protocol version every known v3 peer puts in SessionRequest and SessionResponse.
pub const PROTOCOL_VERSION: u32 = 3;
