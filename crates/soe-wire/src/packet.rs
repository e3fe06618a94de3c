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

/// Disconnect: `u32 session_id | u16 reason`; old peers omit the reason, and h1z1-server's
/// client omits the whole body (`00 05`, [`Disconnect::bare`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Disconnect {
    /// The session being ended (0 in the bare form).
    pub session_id: u32,
    /// Why; [`DisconnectReason::None`] when the peer omitted it.
    pub reason: DisconnectReason,
    /// The bare form: no body at all, so no session id to check and no reason. Encoded as
    /// `00 05` alone.
    pub bare: bool,
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
        match value {
            0 => Self::None,
            1 => Self::IcmpError,
            2 => Self::Timeout,
            3 => Self::OtherSideTerminated,
            4 => Self::ManagerDeleted,
            5 => Self::ConnectFail,
            6 => Self::Application,
            7 => Self::UnreachableConnection,
            8 => Self::UnacknowledgedTimeout,
            9 => Self::NewConnectionAttempt,
            10 => Self::ConnectionRefused,
            11 => Self::ConnectError,
            12 => Self::ConnectingToSelf,
            13 => Self::ReliableOverflow,
            14 => Self::ApplicationReleased,
            15 => Self::CorruptPacket,
            16 => Self::ProtocolMismatch,
            other => Self::Other(other),
        }
    }

    /// The wire value. `Other(n)` gives `n` back, even when `n` is one of the named values (so
    /// `from_u16(r.to_u16())` names it).
    pub const fn to_u16(self) -> u16 {
        match self {
            Self::None => 0,
            Self::IcmpError => 1,
            Self::Timeout => 2,
            Self::OtherSideTerminated => 3,
            Self::ManagerDeleted => 4,
            Self::ConnectFail => 5,
            Self::Application => 6,
            Self::UnreachableConnection => 7,
            Self::UnacknowledgedTimeout => 8,
            Self::NewConnectionAttempt => 9,
            Self::ConnectionRefused => 10,
            Self::ConnectError => 11,
            Self::ConnectingToSelf => 12,
            Self::ReliableOverflow => 13,
            Self::ApplicationReleased => 14,
            Self::CorruptPacket => 15,
            Self::ProtocolMismatch => 16,
            Self::Other(value) => value,
        }
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

/// The body length of NetStatusRequest and NetStatusResponse as [`Packet::encode`] writes them.
pub const NET_STATUS_BODY_LEN: usize = 38;

/// SessionRequest's fixed fields before the name.
const SESSION_REQUEST_FIXED: usize = 12;
/// SessionResponse's body.
const SESSION_RESPONSE_BODY: usize = 19;

impl<'a> Packet<'a> {
    /// Decodes `opcode | body` (framing already removed). Short input, trailing bytes after a
    /// fixed-size packet, and unknown opcodes are errors; nothing panics.
    ///
    /// * A first byte other than zero is [`Packet::Unreliable`] holding all of `bytes`.
    /// * Opcodes `0x0000`, `0x0004` and above `0x001E` are [`WireError::UnknownOpcode`].
    /// * Fixed-size packets (SessionResponse, Heartbeat, Acknowledge, AcknowledgeAll,
    ///   UnknownSender, RemapConnection) must be exactly their size:
    ///   [`WireError::Truncated`] or [`WireError::TrailingBytes`] otherwise.
    /// * SessionRequest's name must end with a NUL ([`WireError::MissingNul`]) that ends the
    ///   packet.
    /// * Disconnect with only its session id (4 body bytes) has reason
    ///   [`DisconnectReason::None`]; one with no body at all is [`Disconnect::bare`] (session id
    ///   0, reason `None`).
    /// * NetStatus bodies are read leniently: absent fields are zero, extra bytes ignored.
    /// * A MultiPacket or Group is checked only when iterated. A MultiPacket found *inside* a
    ///   MultiPacket still decodes here; sessions reject that nesting ([`WireError::Nested`], see
    ///   [`MultiPacket::packets`]).
    ///
    /// For every packet in its canonical form, [`Packet::encode`] gives back exactly `bytes`. The
    /// non-canonical forms are the reason-less Disconnect and NetStatus bodies other than 38 bytes;
    /// their re-encoding decodes to the same value.
    pub fn decode(bytes: &'a [u8]) -> Result<Self, WireError> {
        // The packets of every echo first (data, cumulative ack, bundle), without the general
        // opcode table; the same values as below.
        match bytes {
            [0, lo @ 0x09..=0x0C, body @ ..] => {
                let channel = Channel::from_offset(lo - 0x09);
                return ReliableData::decode_body(channel, body, "ReliableData")
                    .map(Self::ReliableData);
            }
            [0, lo @ 0x15..=0x18, body @ ..] => {
                let channel = Channel::from_offset(lo - 0x15);
                return Ack::decode_body(channel, body, "AcknowledgeAll").map(Self::AcknowledgeAll);
            }
            [0, 0x03, body @ ..] => return Ok(Self::MultiPacket(MultiPacket::new(body))),
            _ => {}
        }
        Self::decode_by_table(bytes)
    }

    /// [`Packet::decode`] by the opcode table, for every packet.
    #[inline]
    fn decode_by_table(bytes: &'a [u8]) -> Result<Self, WireError> {
        let (op, body) = match bytes {
            [] => return Err(truncated("opcode", 2, 0)),
            [first, ..] if *first != 0 => return Ok(Self::Unreliable(bytes)),
            [_] => return Err(truncated("opcode", 2, 1)),
            [hi, lo, body @ ..] => (u16::from_be_bytes([*hi, *lo]), body),
        };
        let Some(opcode) = OpCode::from_u16(op) else {
            return Err(WireError::UnknownOpcode(op));
        };
        Ok(match opcode {
            OpCode::SessionRequest => Self::SessionRequest(SessionRequest::decode_body(body)?),
            OpCode::SessionResponse => {
                let b = exact::<SESSION_RESPONSE_BODY>(body, "SessionResponse")?;
                Self::SessionResponse(SessionResponse {
                    session_id: be32(&b, 0),
                    crc_seed: be32(&b, 4),
                    crc_length: b[8],
                    compression: b[9],
                    encryption_method: b[10],
                    udp_length: be32(&b, 11),
                    protocol_version: be32(&b, 15),
                })
            }
            OpCode::MultiPacket => Self::MultiPacket(MultiPacket::new(body)),
            OpCode::Disconnect => Self::Disconnect(Disconnect::decode_body(body)?),
            OpCode::Heartbeat => {
                exact::<0>(body, "Heartbeat")?;
                Self::Heartbeat
            }
            OpCode::NetStatusRequest => Self::NetStatusRequest(NetStatusRequest::decode_body(body)),
            OpCode::NetStatusResponse => {
                Self::NetStatusResponse(NetStatusResponse::decode_body(body))
            }
            OpCode::ReliableData(channel) => {
                Self::ReliableData(ReliableData::decode_body(channel, body, "ReliableData")?)
            }
            OpCode::ReliableDataFragment(channel) => Self::ReliableDataFragment(
                ReliableData::decode_body(channel, body, "ReliableDataFragment")?,
            ),
            OpCode::Acknowledge(channel) => {
                Self::Acknowledge(Ack::decode_body(channel, body, "Acknowledge")?)
            }
            OpCode::AcknowledgeAll(channel) => {
                Self::AcknowledgeAll(Ack::decode_body(channel, body, "AcknowledgeAll")?)
            }
            OpCode::Group => Self::Group(Group::new(body)),
            OpCode::Ordered => Self::Ordered(Ordered::decode_body(body, "Ordered")?),
            OpCode::Ordered2 => Self::Ordered2(Ordered::decode_body(body, "Ordered2")?),
            OpCode::PortAlive => Self::PortAlive(body),
            OpCode::UnknownSender => {
                exact::<0>(body, "UnknownSender")?;
                Self::UnknownSender
            }
            OpCode::RemapConnection => {
                let b = exact::<8>(body, "RemapConnection")?;
                Self::RemapConnection(RemapConnection {
                    session_id: be32(&b, 0),
                    crc_seed: be32(&b, 4),
                })
            }
        })
    }

    /// The opcode, or `None` for [`Packet::Unreliable`].
    pub fn opcode(&self) -> Option<OpCode> {
        Some(match self {
            Self::SessionRequest(_) => OpCode::SessionRequest,
            Self::SessionResponse(_) => OpCode::SessionResponse,
            Self::MultiPacket(_) => OpCode::MultiPacket,
            Self::Disconnect(_) => OpCode::Disconnect,
            Self::Heartbeat => OpCode::Heartbeat,
            Self::NetStatusRequest(_) => OpCode::NetStatusRequest,
            Self::NetStatusResponse(_) => OpCode::NetStatusResponse,
            Self::ReliableData(d) => OpCode::ReliableData(d.channel),
            Self::ReliableDataFragment(d) => OpCode::ReliableDataFragment(d.channel),
            Self::Acknowledge(a) => OpCode::Acknowledge(a.channel),
            Self::AcknowledgeAll(a) => OpCode::AcknowledgeAll(a.channel),
            Self::Group(_) => OpCode::Group,
            Self::Ordered(_) => OpCode::Ordered,
            Self::Ordered2(_) => OpCode::Ordered2,
            Self::PortAlive(_) => OpCode::PortAlive,
            Self::UnknownSender => OpCode::UnknownSender,
            Self::RemapConnection(_) => OpCode::RemapConnection,
            Self::Unreliable(_) => return None,
        })
    }

    /// The exact number of bytes [`Packet::encode`] writes.
    pub fn encoded_len(&self) -> usize {
        let body = match self {
            Self::Unreliable(bytes) => return bytes.len(),
            Self::SessionRequest(r) => SESSION_REQUEST_FIXED + r.application_protocol.len() + 1,
            Self::SessionResponse(_) => SESSION_RESPONSE_BODY,
            Self::MultiPacket(m) => m.body().len(),
            Self::Disconnect(d) => {
                if d.bare {
                    0
                } else {
                    6
                }
            }
            Self::Heartbeat | Self::UnknownSender => 0,
            Self::NetStatusRequest(_) | Self::NetStatusResponse(_) => NET_STATUS_BODY_LEN,
            Self::ReliableData(d) | Self::ReliableDataFragment(d) => 2 + d.data.len(),
            Self::Acknowledge(_) | Self::AcknowledgeAll(_) => 2,
            Self::Group(g) => g.body().len(),
            Self::Ordered(o) | Self::Ordered2(o) => 2 + o.data.len(),
            Self::PortAlive(body) => body.len(),
            Self::RemapConnection(_) => 8,
        };
        2 + body
    }

    /// Appends `opcode | body` to `out` (no framing) and returns the number of bytes written.
    ///
    /// [`Packet::Unreliable`] is written as it is; it round-trips only when its first byte is not
    /// zero, as decoding gives. A SessionRequest name holding a NUL does not round-trip either.
    pub fn encode(&self, out: &mut Vec<u8>) -> usize {
        let len = self.encoded_len();
        out.reserve(len);
        let before = out.len();
        if let Some(op) = self.opcode() {
            out.extend_from_slice(&op.to_u16().to_be_bytes());
        }
        match self {
            Self::Unreliable(bytes) => out.extend_from_slice(bytes),
            Self::SessionRequest(r) => {
                out.extend_from_slice(&r.protocol_version.to_be_bytes());
                out.extend_from_slice(&r.session_id.to_be_bytes());
                out.extend_from_slice(&r.udp_length.to_be_bytes());
                out.extend_from_slice(r.application_protocol);
                out.push(0);
            }
            Self::SessionResponse(r) => {
                out.extend_from_slice(&r.session_id.to_be_bytes());
                out.extend_from_slice(&r.crc_seed.to_be_bytes());
                out.extend_from_slice(&[r.crc_length, r.compression, r.encryption_method]);
                out.extend_from_slice(&r.udp_length.to_be_bytes());
                out.extend_from_slice(&r.protocol_version.to_be_bytes());
            }
            Self::MultiPacket(m) => out.extend_from_slice(m.body()),
            Self::Disconnect(d) if d.bare => {}
            Self::Disconnect(d) => {
                out.extend_from_slice(&d.session_id.to_be_bytes());
                out.extend_from_slice(&d.reason.to_u16().to_be_bytes());
            }
            Self::Heartbeat | Self::UnknownSender => {}
            Self::NetStatusRequest(r) => r.encode_body(out),
            Self::NetStatusResponse(r) => r.encode_body(out),
            Self::ReliableData(d) | Self::ReliableDataFragment(d) => {
                out.extend_from_slice(&d.sequence.to_be_bytes());
                out.extend_from_slice(d.data);
            }
            Self::Acknowledge(a) | Self::AcknowledgeAll(a) => {
                out.extend_from_slice(&a.sequence.to_be_bytes());
            }
            Self::Group(g) => out.extend_from_slice(g.body()),
            Self::Ordered(o) | Self::Ordered2(o) => {
                out.extend_from_slice(&o.sequence.to_be_bytes());
                out.extend_from_slice(o.data);
            }
            Self::PortAlive(body) => out.extend_from_slice(body),
            Self::RemapConnection(r) => {
                out.extend_from_slice(&r.session_id.to_be_bytes());
                out.extend_from_slice(&r.crc_seed.to_be_bytes());
            }
        }
        debug_assert_eq!(out.len() - before, len);
        out.len() - before
    }
}

impl<'a> SessionRequest<'a> {
    fn decode_body(body: &'a [u8]) -> Result<Self, WireError> {
        let Some((fixed, name)) = body.split_first_chunk::<SESSION_REQUEST_FIXED>() else {
            return Err(truncated(
                "SessionRequest",
                2 + SESSION_REQUEST_FIXED + 1,
                2 + body.len(),
            ));
        };
        let Some(nul) = name.iter().position(|&b| b == 0) else {
            return Err(WireError::MissingNul {
                what: "SessionRequest application_protocol",
            });
        };
        let extra = name.len() - nul - 1;
        if extra != 0 {
            return Err(WireError::TrailingBytes {
                what: "SessionRequest",
                extra,
            });
        }
        Ok(Self {
            protocol_version: be32(fixed, 0),
            session_id: be32(fixed, 4),
            udp_length: be32(fixed, 8),
            application_protocol: name.get(..nul).unwrap_or_default(),
        })
    }
}

impl Disconnect {
    fn decode_body(body: &[u8]) -> Result<Self, WireError> {
        match *body {
            [] => Ok(Self {
                session_id: 0,
                reason: DisconnectReason::None,
                bare: true,
            }),
            [a, b, c, d] => Ok(Self {
                session_id: u32::from_be_bytes([a, b, c, d]),
                reason: DisconnectReason::None,
                bare: false,
            }),
            [a, b, c, d, hi, lo] => Ok(Self {
                session_id: u32::from_be_bytes([a, b, c, d]),
                reason: DisconnectReason::from_u16(u16::from_be_bytes([hi, lo])),
                bare: false,
            }),
            _ if body.len() > 6 => Err(WireError::TrailingBytes {
                what: "Disconnect",
                extra: body.len() - 6,
            }),
            _ => Err(truncated(
                "Disconnect",
                if body.len() < 4 { 6 } else { 8 },
                2 + body.len(),
            )),
        }
    }
}

/// Reads big-endian fields from a body of uncertain length; an absent field reads as zero.
struct Lenient<'a>(&'a [u8]);

impl Lenient<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        match self.0.split_first_chunk::<N>() {
            Some((field, rest)) => {
                self.0 = rest;
                *field
            }
            None => {
                self.0 = &[];
                [0; N]
            }
        }
    }

    fn u16(&mut self) -> u16 {
        u16::from_be_bytes(self.take())
    }

    fn u32(&mut self) -> u32 {
        u32::from_be_bytes(self.take())
    }

    fn u64(&mut self) -> u64 {
        u64::from_be_bytes(self.take())
    }
}

impl NetStatusRequest {
    /// Lenient: a field cut short by the end of the body reads as zero; extra bytes are ignored.
    fn decode_body(body: &[u8]) -> Self {
        let mut r = Lenient(body);
        Self {
            client_tick: r.u16(),
            last_update_ms: r.u32(),
            average_update_ms: r.u32(),
            shortest_update_ms: r.u32(),
            longest_update_ms: r.u32(),
            last_server_update_ms: r.u32(),
            packets_sent: r.u64(),
            packets_received: r.u64(),
        }
    }

    fn encode_body(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.client_tick.to_be_bytes());
        for v in [
            self.last_update_ms,
            self.average_update_ms,
            self.shortest_update_ms,
            self.longest_update_ms,
            self.last_server_update_ms,
        ] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        out.extend_from_slice(&self.packets_sent.to_be_bytes());
        out.extend_from_slice(&self.packets_received.to_be_bytes());
    }
}

impl NetStatusResponse {
    /// Lenient like [`NetStatusRequest::decode_body`].
    fn decode_body(body: &[u8]) -> Self {
        let mut r = Lenient(body);
        Self {
            client_tick: r.u16(),
            server_tick: r.u32(),
            client_packets_sent: r.u64(),
            client_packets_received: r.u64(),
            server_packets_sent: r.u64(),
            server_packets_received: r.u64(),
        }
    }

    fn encode_body(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.client_tick.to_be_bytes());
        out.extend_from_slice(&self.server_tick.to_be_bytes());
        for v in [
            self.client_packets_sent,
            self.client_packets_received,
            self.server_packets_sent,
            self.server_packets_received,
        ] {
            out.extend_from_slice(&v.to_be_bytes());
        }
    }
}

impl<'a> ReliableData<'a> {
    fn decode_body(
        channel: Channel,
        body: &'a [u8],
        what: &'static str,
    ) -> Result<Self, WireError> {
        let Some((seq, data)) = body.split_first_chunk::<2>() else {
            return Err(truncated(what, 4, 2 + body.len()));
        };
        Ok(Self {
            channel,
            sequence: u16::from_be_bytes(*seq),
            data,
        })
    }
}

impl Ack {
    #[inline]
    fn decode_body(channel: Channel, body: &[u8], what: &'static str) -> Result<Self, WireError> {
        let b = exact::<2>(body, what)?;
        Ok(Self {
            channel,
            sequence: u16::from_be_bytes(b),
        })
    }
}

impl<'a> Ordered<'a> {
    fn decode_body(body: &'a [u8], what: &'static str) -> Result<Self, WireError> {
        let Some((seq, data)) = body.split_first_chunk::<2>() else {
            return Err(truncated(what, 4, 2 + body.len()));
        };
        Ok(Self {
            sequence: u16::from_be_bytes(*seq),
            data,
        })
    }
}

/// The body of a fixed-size packet, which must be exactly `N` bytes. Lengths in the error count
/// the opcode.
fn exact<const N: usize>(body: &[u8], what: &'static str) -> Result<[u8; N], WireError> {
    match <[u8; N]>::try_from(body) {
        Ok(b) => Ok(b),
        Err(_) if body.len() > N => Err(WireError::TrailingBytes {
            what,
            extra: body.len() - N,
        }),
        Err(_) => Err(truncated(what, 2 + N, 2 + body.len())),
    }
}

/// The big-endian u32 at `at`; callers pass fixed arrays long enough, so the zero fallback is
/// never taken.
fn be32(b: &[u8], at: usize) -> u32 {
    match b.get(at..).and_then(|rest| rest.first_chunk::<4>()) {
        Some(field) => u32::from_be_bytes(*field),
        None => {
            debug_assert!(false, "be32 at {at} of {} bytes", b.len());
            0
        }
    }
}

fn truncated(what: &'static str, needed: usize, got: usize) -> WireError {
    WireError::Truncated { what, needed, got }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fast_path_decodes_as_the_table_does() {
        for op in 0..=0x20u8 {
            for len in 0..6usize {
                let mut bytes = vec![0, op];
                bytes.extend((0..len).map(|i| (i as u8).wrapping_mul(37)));
                assert_eq!(
                    Packet::decode(&bytes),
                    Packet::decode_by_table(&bytes),
                    "{bytes:02x?}"
                );
            }
        }
    }

    fn round_trip(bytes: &[u8]) -> Packet<'_> {
        let packet = Packet::decode(bytes).unwrap();
        let mut out = vec![0xAA];
        assert_eq!(packet.encode(&mut out), bytes.len());
        assert_eq!(packet.encoded_len(), bytes.len());
        assert_eq!(&out[1..], bytes);
        packet
    }

    #[test]
    fn opcode_errors() {
        assert_eq!(
            Packet::decode(&[]),
            Err(WireError::Truncated {
                what: "opcode",
                needed: 2,
                got: 0
            })
        );
        assert!(matches!(
            Packet::decode(&[0]),
            Err(WireError::Truncated { got: 1, .. })
        ));
        for op in [0x00u8, 0x04, 0x1F, 0xFF] {
            assert_eq!(
                Packet::decode(&[0, op, 1, 2]),
                Err(WireError::UnknownOpcode(u16::from(op)))
            );
        }
    }

    #[test]
    fn non_zero_first_byte_is_unreliable() {
        assert_eq!(Packet::decode(&[7]), Ok(Packet::Unreliable(&[7])));
        let p = round_trip(&[0x01, 0x00, 0x09]);
        assert_eq!(p, Packet::Unreliable(&[0x01, 0x00, 0x09]));
        assert_eq!(p.opcode(), None);
    }

    #[test]
    fn session_request_needs_nul_and_nothing_after() {
        let p = round_trip(b"\x00\x01\x00\x00\x00\x03\x00\x00\x00\x07\x00\x00\x02\x00Ab\x00");
        assert_eq!(
            p,
            Packet::SessionRequest(SessionRequest {
                protocol_version: 3,
                session_id: 7,
                udp_length: 512,
                application_protocol: b"Ab",
            })
        );
        assert_eq!(
            Packet::decode(b"\x00\x01\x00\x00\x00\x03\x00\x00\x00\x07\x00\x00\x02\x00Ab"),
            Err(WireError::MissingNul {
                what: "SessionRequest application_protocol"
            })
        );
        assert_eq!(
            Packet::decode(b"\x00\x01\x00\x00\x00\x03\x00\x00\x00\x07\x00\x00\x02\x00Ab\x00x"),
            Err(WireError::TrailingBytes {
                what: "SessionRequest",
                extra: 1
            })
        );
        assert!(matches!(
            Packet::decode(b"\x00\x01\x00\x00\x00\x03\x00\x00\x00\x07\x00\x00\x02"),
            Err(WireError::Truncated { got: 13, .. })
        ));
        // an empty name is just the NUL
        round_trip(b"\x00\x01\x00\x00\x00\x03\x00\x00\x00\x07\x00\x00\x02\x00\x00");
    }

    #[test]
    fn fixed_sizes_are_exact() {
        let cases: [(&[u8], usize); 6] = [
            (&[0, 0x02], 19),
            (&[0, 0x06], 0),
            (&[0, 0x11], 2),
            (&[0, 0x17], 2),
            (&[0, 0x1D], 0),
            (&[0, 0x1E], 8),
        ];
        for (op, size) in cases {
            let mut bytes = op.to_vec();
            bytes.extend((0..size).map(|i| i as u8 + 1));
            round_trip(&bytes);
            bytes.push(0);
            assert!(
                matches!(
                    Packet::decode(&bytes),
                    Err(WireError::TrailingBytes { extra: 1, .. })
                ),
                "{op:?}"
            );
            if size > 0 {
                bytes.truncate(bytes.len() - 2);
                assert_eq!(
                    Packet::decode(&bytes),
                    Err(WireError::Truncated {
                        what: match op[1] {
                            0x02 => "SessionResponse",
                            0x11 => "Acknowledge",
                            0x17 => "AcknowledgeAll",
                            _ => "RemapConnection",
                        },
                        needed: size + 2,
                        got: size + 1
                    })
                );
            }
        }
    }

    #[test]
    fn channels_come_from_the_opcode() {
        assert_eq!(
            round_trip(&[0, 0x0C, 0x12, 0x34, 9]),
            Packet::ReliableData(ReliableData {
                channel: Channel::new(3).unwrap(),
                sequence: 0x1234,
                data: &[9],
            })
        );
        assert_eq!(
            round_trip(&[0, 0x0E, 0, 1]),
            Packet::ReliableDataFragment(ReliableData {
                channel: Channel::new(1).unwrap(),
                sequence: 1,
                data: &[],
            })
        );
        assert_eq!(
            round_trip(&[0, 0x13, 0xFF, 0xFE]),
            Packet::Acknowledge(Ack {
                channel: Channel::new(2).unwrap(),
                sequence: 0xFFFE,
            })
        );
        assert!(matches!(
            Packet::decode(&[0, 0x09, 1]),
            Err(WireError::Truncated {
                what: "ReliableData",
                ..
            })
        ));
    }

    #[test]
    fn disconnect_reason_is_optional() {
        assert_eq!(
            Packet::decode(&[0, 5, 0, 0, 0, 9]),
            Ok(Packet::Disconnect(Disconnect {
                session_id: 9,
                reason: DisconnectReason::None,
                bare: false,
            }))
        );
        assert_eq!(
            round_trip(&[0, 5, 0, 0, 0, 9, 0, 15]),
            Packet::Disconnect(Disconnect {
                session_id: 9,
                reason: DisconnectReason::CorruptPacket,
                bare: false,
            })
        );
        assert_eq!(
            round_trip(&[0, 5, 0, 0, 0, 9, 0x01, 0x00]),
            Packet::Disconnect(Disconnect {
                session_id: 9,
                reason: DisconnectReason::Other(256),
                bare: false,
            })
        );
        assert!(matches!(
            Packet::decode(&[0, 5, 0, 0, 0, 9, 0]),
            Err(WireError::Truncated { .. })
        ));
        assert!(matches!(
            Packet::decode(&[0, 5, 0, 0, 9]),
            Err(WireError::Truncated { .. })
        ));
        assert!(matches!(
            Packet::decode(&[0, 5, 0]),
            Err(WireError::Truncated { .. })
        ));
        assert!(matches!(
            Packet::decode(&[0, 5, 0, 0, 0, 9, 0, 1, 2]),
            Err(WireError::TrailingBytes { extra: 1, .. })
        ));
    }

    #[test]
    fn a_bare_disconnect_has_no_body_and_reason_none() {
        // h1z1-server's client sends `00 05` alone.
        assert_eq!(
            round_trip(&[0, 5]),
            Packet::Disconnect(Disconnect {
                session_id: 0,
                reason: DisconnectReason::None,
                bare: true,
            })
        );
    }

    #[test]
    fn disconnect_reasons_map_both_ways() {
        for v in 0..=40u16 {
            let r = DisconnectReason::from_u16(v);
            assert_eq!(r.to_u16(), v);
            assert_eq!(matches!(r, DisconnectReason::Other(_)), v > 16);
        }
        assert_eq!(
            DisconnectReason::from_u16(16),
            DisconnectReason::ProtocolMismatch
        );
    }

    #[test]
    fn net_status_is_lenient() {
        // empty body: all zero; re-encoded as the full 38 bytes
        let p = Packet::decode(&[0, 7]).unwrap();
        assert_eq!(p, Packet::NetStatusRequest(NetStatusRequest::default()));
        assert_eq!(p.encoded_len(), 2 + NET_STATUS_BODY_LEN);
        // a field cut short reads as zero; the ones before it are kept
        let p = Packet::decode(&[0, 8, 0x12, 0x34, 0, 0, 0, 5, 0xFF]).unwrap();
        assert_eq!(
            p,
            Packet::NetStatusResponse(NetStatusResponse {
                client_tick: 0x1234,
                server_tick: 5,
                ..NetStatusResponse::default()
            })
        );
        // 40 bytes (the original library's length with padding) decode, the extra ignored
        let mut bytes = vec![0, 7];
        bytes.extend(1..=40u8);
        let Packet::NetStatusRequest(r) = Packet::decode(&bytes).unwrap() else {
            panic!("not a NetStatusRequest");
        };
        assert_eq!(r.client_tick, 0x0102);
        assert_eq!(
            r.packets_received,
            u64::from_be_bytes([31, 32, 33, 34, 35, 36, 37, 38])
        );
        bytes.truncate(2 + NET_STATUS_BODY_LEN);
        round_trip(&bytes);
    }

    #[test]
    fn bodies_kept_as_sent() {
        round_trip(&[0, 0x1C]);
        round_trip(&[0, 0x1C, 1, 2, 3]);
        round_trip(&[0, 0x1A, 0, 1, 0xAB]);
        round_trip(&[0, 0x1B, 0, 1]);
        round_trip(&[0, 0x19, 2, 0xAB, 0xCD]);
        // a MultiPacket's entries are checked only when iterated
        let p = round_trip(&[0, 3, 0, 9]);
        let Packet::MultiPacket(m) = p else {
            panic!("not a MultiPacket");
        };
        assert!(m.iter().next().unwrap().is_err());
    }
}
