//! Typed packets: decode borrows from the input, encode writes into a caller buffer.

use crate::{Channel, OpCode, WireError, bundle::Group, bundle::MultiPacket};

/// One decoded packet, borrowing from the bytes it was decoded from.
///
/// These are the bytes *after* contextual framing was removed (see [`crate::Framer::open`]), or a
/// sub-packet of a MultiPacket: `opcode | body`, no compression flag, no CRC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Packet<'a> {
    /// 0x01.
    SessionRequest(SessionRequest<'a>),
    /// 0x02.
    SessionResponse(SessionResponse),
    /// 0x03.
    MultiPacket(MultiPacket<'a>),
    /// 0x05.
    Disconnect(Disconnect),
    /// 0x06, empty body.
    Heartbeat,
    /// 0x07.
    NetStatusRequest(NetStatusRequest),
    /// 0x08.
    NetStatusResponse(NetStatusResponse),
    /// 0x09 to 0x0C.
    ReliableData(ReliableData<'a>),
    /// 0x0D to 0x10. `data` includes the u32 total length when this is a first fragment; only the
    /// receiver's state says whether it is (see [`crate::reliable::split_first_fragment`]).
    ReliableDataFragment(ReliableData<'a>),
    /// 0x11 to 0x14: one sequence that arrived ahead of the window.
    Acknowledge(Ack),
    /// 0x15 to 0x18: everything up to and including the sequence.
    AcknowledgeAll(Ack),
    /// 0x19, a data bundle sent as a packet of its own.
    Group(Group<'a>),
    /// 0x1A.
    Ordered(Ordered<'a>),
    /// 0x1B.
    Ordered2(Ordered<'a>),
    /// 0x1C; the body, if any, is kept as is.
    PortAlive(&'a [u8]),
    /// 0x1D, empty body.
    UnknownSender,
    /// 0x1E.
    RemapConnection(RemapConnection),
    /// A datagram whose first byte is not zero: an unsequenced application message, as the
    /// original library sends unreliable data. It carries the CRC trailer but no compression flag.
    Unreliable(&'a [u8]),
}

/// SessionRequest: `u32 protocol_version | u32 session_id | u32 udp_length | name NUL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionRequest<'a> {
    /// 3 in every capture (the original library calls it the CRC byte count).
    pub protocol_version: u32,
    /// Chosen at random by the client.
    pub session_id: u32,
    /// The largest datagram the client accepts.
    pub udp_length: u32,
    /// The application protocol name, without its NUL (e.g. `LoginUdp_9`).
    pub application_protocol: &'a [u8],
}

/// SessionResponse: 19 bytes after the opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionResponse {
    /// Echo of the client's session id.
    pub session_id: u32,
    /// The CRC seed the server chose.
    pub crc_seed: u32,
    /// CRC trailer length, 0 to 4 (a wider value is kept as sent; sessions reject it).
    pub crc_length: u8,
    /// Non-zero when contextual packets carry a compression flag.
    pub compression: u8,
    /// The second encryption-method byte, 0 in every capture.
    pub encryption_method: u8,
    /// The largest datagram the server accepts.
    pub udp_length: u32,
    /// 3.
    pub protocol_version: u32,
}

/// Disconnect: `u32 session_id | u16 reason`; old peers omit the reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Disconnect {
    /// The session being ended.
    pub session_id: u32,
    /// Why; [`DisconnectReason::None`] when the peer omitted it.
    pub reason: DisconnectReason,
}

/// Why a session ended: the wire values 0 to 16, and any other value kept as sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DisconnectReason {
    /// 0.
    None,
    /// 1.
    IcmpError,
    /// 2.
    Timeout,
    /// 3.
    OtherSideTerminated,
    /// 4.
    ManagerDeleted,
    /// 5.
    ConnectFail,
    /// 6.
    Application,
    /// 7.
    UnreachableConnection,
    /// 8.
    UnacknowledgedTimeout,
    /// 9.
    NewConnectionAttempt,
    /// 10.
    ConnectionRefused,
    /// 11.
    ConnectError,
    /// 12.
    ConnectingToSelf,
    /// 13.
    ReliableOverflow,
    /// 14.
    ApplicationReleased,
    /// 15.
    CorruptPacket,
    /// 16.
    ProtocolMismatch,
    /// A value outside 0 to 16.
    Other(u16),
}

impl DisconnectReason {
    /// The reason for a wire value.
    pub const fn from_u16(value: u16) -> Self {
        todo!()
    }

    /// The wire value.
    pub const fn to_u16(self) -> u16 {
        todo!()
    }
}

/// NetStatusRequest (ClockSync). The original library sends 38 body bytes; decoding is lenient:
/// missing fields read as zero and extra bytes are ignored, because peers disagree on the layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NetStatusRequest {
    /// The sender's clock, low 16 bits of milliseconds; echoed in the response.
    pub client_tick: u16,
    /// Last measured round trip, ms.
    pub last_update_ms: u32,
    /// Average round trip, ms.
    pub average_update_ms: u32,
    /// Shortest round trip, ms.
    pub shortest_update_ms: u32,
    /// Longest round trip, ms.
    pub longest_update_ms: u32,
    /// Last server round trip, ms.
    pub last_server_update_ms: u32,
    /// Packets sent by the requester.
    pub packets_sent: u64,
    /// Packets received by the requester.
    pub packets_received: u64,
}

/// NetStatusResponse (ClockReflect), 38 body bytes in the original library; decoded leniently
/// like [`NetStatusRequest`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NetStatusResponse {
    /// The `client_tick` of the request being answered.
    pub client_tick: u16,
    /// The responder's clock.
    pub server_tick: u32,
    /// Packets the requester sent (as the requester reported).
    pub client_packets_sent: u64,
    /// Packets the requester received (as the requester reported).
    pub client_packets_received: u64,
    /// Packets the responder sent.
    pub server_packets_sent: u64,
    /// Packets the responder received.
    pub server_packets_received: u64,
}

/// ReliableData and ReliableDataFragment: `u16 sequence | data`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReliableData<'a> {
    /// The channel, from the opcode.
    pub channel: Channel,
    /// The low 16 bits of the sequence.
    pub sequence: u16,
    /// The rest of the body.
    pub data: &'a [u8],
}

/// Acknowledge and AcknowledgeAll: `u16 sequence`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ack {
    /// The channel, from the opcode.
    pub channel: Channel,
    /// The low 16 bits of the sequence acknowledged.
    pub sequence: u16,
}

/// Ordered and Ordered2: `u16 sequence | data`; a receiver drops stale ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ordered<'a> {
    /// The low 16 bits of the ordered stamp.
    pub sequence: u16,
    /// The application message.
    pub data: &'a [u8],
}

/// RemapConnection: `u32 session_id | u32 crc_seed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemapConnection {
    /// The live session to move.
    pub session_id: u32,
    /// Its CRC seed, as proof.
    pub crc_seed: u32,
}

impl<'a> Packet<'a> {
    /// Decodes `opcode | body` (framing already removed). Short input, trailing bytes after a
    /// fixed-size packet, and unknown opcodes are errors; nothing panics.
    pub fn decode(bytes: &'a [u8]) -> Result<Self, WireError> {
        todo!()
    }

    /// The opcode, or `None` for [`Packet::Unreliable`].
    pub fn opcode(&self) -> Option<OpCode> {
        todo!()
    }

    /// The exact number of bytes [`Packet::encode`] writes.
    pub fn encoded_len(&self) -> usize {
        todo!()
    }

    /// Appends `opcode | body` to `out` (no framing) and returns the number of bytes written.
    pub fn encode(&self, out: &mut Vec<u8>) -> usize {
        todo!()
    }
}
