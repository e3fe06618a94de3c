//! Application messages as a pcapng capture Wireshark opens: one record per message, in
//! Wireshark's exported-PDU form (link type 252, `LINKTYPE_WIRESHARK_UPPER_PDU`).
//!
//! Each record starts with exported-PDU tags (type-length-value, big-endian): the name of the
//! dissector that reads the rest ([`DISSECTOR_NAME`], the Lua plugin shipped in
//! `crates/soe-dissect/wireshark/soe.lua`), the original datagram's IP addresses and UDP
//! ports; its timestamp is the datagram's. After the tags comes our own header, then the
//! message as delivered (reassembled, inflated, unescaped and decrypted):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 1 | header version ([`HEADER_VERSION`]) |
//! | 1 | 1 | direction: 0 unknown, 1 client to server, 2 server to client |
//! | 2 | 1 | channel (0 to 3) |
//! | 3 | 1 | kind: 0 reliable, 1 unreliable, 2 ordered; and two records that are no message: 3 the session's end (a flight recording's last record; the reason's wire value at offset 8, its name as the message), 4 the session's framing (a flight recording's first record; `key=value` text) |
//! | 4 | 4 | session number (as in `soe decode`) |
//! | 8 | 2 | reliable sequence (or ordered stamp) |
//! | 10 | 2 | flags: 0x01 sequence present, 0x02 fragmented, 0x04 compressed, 0x08 encrypted, 0x10 decrypted, 0x20 truncated |
//! | 12 | 1 | CRC verdict: 0 unknown, 1 ok, 2 bad, 3 none, 4 missing |
//! | 13 | 1 | key verdict: 0 unknown, 1 plaintext, 2 looks encrypted, 3 key not judged, 4 decrypted, 5 key does not fit |
//! | 14 | 1 | length N of the application protocol name |
//! | 15 | 1 | reserved, 0 |
//! | 16 | 4 | first frame: the capture frame of the first datagram that carried the message (the datagram's index when the input has no frame numbers) |
//! | 20 | 4 | last frame: the one that carried its end |
//! | 24 | 4 | message length (the whole message's, also when the record holds only its start) |
//! | 28 | N | application protocol name (from the SessionRequest; empty when not seen) |
//! | 28 + N | | the message |
//!
//! Wireshark refuses a record of this link type longer than [`MAX_RECORD`] (262,144 bytes: it
//! then calls the file damaged and reads nothing after it), while a message may be up to 4 MiB
//! (a Free Realms login carries one of 264 KB). A message that does not fit is **truncated**:
//! the record holds its first bytes, up to the limit, with the flag 0x20 set and the message
//! length above still the whole message's; the packet's original length (pcapng) is the whole
//! record's too, as for any capture cut by a snap length. The plugin shows the flag and checks
//! the length against the bytes the record holds. `soe decode --json` has the whole message.
//!
//! Everything is written as it comes and can be flushed per record, so the output works as a
//! live stream (`wireshark -k -i -`).

use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use crate::records::{
    CrcVerdict, DatagramRecord, Direction, Encryption, FlushRecord, MessageRecord,
};

/// `LINKTYPE_WIRESHARK_UPPER_PDU`: packets that start with exported-PDU tags.
pub const LINKTYPE_WIRESHARK_UPPER_PDU: u16 = 252;
/// The dissector the records name (the exported-PDU protocol-name tag): our Lua plugin.
pub const DISSECTOR_NAME: &str = "soe";
/// The version of our header, its first byte.
pub const HEADER_VERSION: u8 = 1;
/// The length of our header before the application protocol name.
pub const HEADER_LEN: usize = 28;
/// The longest record (tags, header and message) written: Wireshark's limit for link type
/// 252 (`WTAP_MAX_PACKET_SIZE_STANDARD`). A longer message is truncated (see the
/// [module](self)).
pub const MAX_RECORD: usize = 262_144;
/// The header flag of a message truncated to fit [`MAX_RECORD`].
pub const FLAG_TRUNCATED: u16 = 0x20;
/// The header flag saying the sequence field holds one.
pub const FLAG_SEQUENCE: u16 = 0x01;
/// The header flags of a fragmented, compressed, encrypted, decrypted message.
pub const FLAG_FRAGMENTED: u16 = 0x02;
/// See [`FLAG_FRAGMENTED`].
pub const FLAG_COMPRESSED: u16 = 0x04;
/// See [`FLAG_FRAGMENTED`].
pub const FLAG_ENCRYPTED: u16 = 0x08;
/// See [`FLAG_FRAGMENTED`].
pub const FLAG_DECRYPTED: u16 = 0x10;

/// The kinds of record in our header.
pub mod kind {
    /// A reliable message.
    pub const RELIABLE: u8 = 0;
    /// An unreliable message.
    pub const UNRELIABLE: u8 = 1;
    /// An ordered message.
    pub const ORDERED: u8 = 2;
    /// The end of a session (a flight recording): the reason's wire value in the sequence
    /// field, its name as the body.
    pub const DISCONNECT: u8 = 3;
    /// A session's framing (a flight recording): `key=value` text as the body.
    pub const SESSION: u8 = 4;
}

/// Our header of one record, as written ahead of its body (see the [module](self)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PduHeader {
    /// Which way the message went.
    pub direction: Direction,
    /// Its channel.
    pub channel: u8,
    /// Its kind ([`kind`]).
    pub kind: u8,
    /// The session number.
    pub session: u32,
    /// Its sequence (or ordered stamp). A [`kind::DISCONNECT`] record holds the reason's
    /// wire value there, without the sequence flag.
    pub sequence: Option<u16>,
    /// The flags ([`FLAG_FRAGMENTED`]...); the sequence and truncation bits are set on writing
    /// from `sequence` and the record's room.
    pub flags: u16,
    /// The CRC verdict's code: 0 unknown, 1 ok, 2 bad, 3 none, 4 missing.
    pub crc: u8,
    /// The key verdict's code (see the [module](self)).
    pub verdict: u8,
    /// The first capture frame that carried it.
    pub first_frame: u32,
    /// The last one.
    pub last_frame: u32,
    /// The whole message's length.
    pub len: u32,
}

impl PduHeader {
    /// The header of a message the dissector reported in a session's `direction`.
    pub fn of_message(session: usize, direction: Direction, message: &MessageRecord) -> Self {
        let to_u32 = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        let flags = if message.fragmented {
            FLAG_FRAGMENTED
        } else {
            0
        } | if message.compressed {
            FLAG_COMPRESSED
        } else {
            0
        } | if message.encrypted { FLAG_ENCRYPTED } else { 0 }
            | if message.decrypted { FLAG_DECRYPTED } else { 0 };
        Self {
            direction,
            channel: message.channel,
            kind: match message.kind {
                "unreliable" => kind::UNRELIABLE,
                "ordered" => kind::ORDERED,
                _ => kind::RELIABLE,
            },
            session: to_u32(session as u64),
            sequence: message.sequence,
            flags,
            crc: crc_code(message.crc),
            verdict: verdict_code(message.verdict),
            first_frame: to_u32(message.first_frame),
            last_frame: to_u32(message.last_frame),
            len: to_u32(message.hex.len() as u64 / 2),
        }
    }
}

/// Exported-PDU tag numbers (Wireshark's `exported_pdu_tlvs.h`).
mod tag {
    pub(super) const END_OF_OPT: u16 = 0;
    pub(super) const DISSECTOR_NAME: u16 = 12;
    pub(super) const IPV4_SRC: u16 = 20;
    pub(super) const IPV4_DST: u16 = 21;
    pub(super) const IPV6_SRC: u16 = 22;
    pub(super) const IPV6_DST: u16 = 23;
    pub(super) const PORT_TYPE: u16 = 24;
    pub(super) const SRC_PORT: u16 = 25;
    pub(super) const DST_PORT: u16 = 26;
    /// The port type value for UDP.
    pub(super) const PORT_TYPE_UDP: u32 = 3;
}

/// pcapng block types.
pub(crate) const SECTION_HEADER: u32 = 0x0A0D_0D0A;
pub(crate) const INTERFACE_DESCRIPTION: u32 = 1;
const ENHANCED_PACKET: u32 = 6;
/// The pcapng option code of a comment.
pub(crate) const OPT_COMMENT: u16 = 1;

/// Where a message was seen: its session, direction, addresses and time.
#[derive(Debug, Clone, Copy)]
pub struct MessageContext<'a> {
    /// The capture time of the datagram that completed it, since the UNIX epoch.
    pub time: Duration,
    /// The sender.
    pub src: SocketAddr,
    /// The receiver.
    pub dst: SocketAddr,
    /// The session number (0 when the datagram was dissected without session state).
    pub session: usize,
    /// Which way it went.
    pub direction: Direction,
    /// The session's application protocol name, when its SessionRequest was seen.
    pub application_protocol: Option<&'a str>,
}

/// Writes application messages as a pcapng capture of exported PDUs (see the
/// [module](self)).
///
/// ```
/// use soe_dissect::export::PduWriter;
/// use soe_dissect::{DissectConfig, Dissector};
///
/// let mut writer = PduWriter::new(Vec::new())?;
/// let mut dissector = Dissector::new(DissectConfig::new());
/// // ... for each datagram: let record = dissector.dissect(...);
/// // writer.write_datagram(time, &record, dissector.application_protocol(n))?;
/// let capture = writer.into_inner();
/// assert_eq!(&capture[..4], &[0x0A, 0x0D, 0x0D, 0x0A]);
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct PduWriter<W: Write> {
    /// The output.
    out: W,
    /// One record, built before it is written whole.
    block: Vec<u8>,
    /// Its packet (tags, header, message), built first.
    packet: Vec<u8>,
    /// Records written.
    written: u64,
}

impl<W: Write> PduWriter<W> {
    /// Starts a capture on `out`: writes its section header and its one interface (link type
    /// 252), and flushes them.
    ///
    /// # Errors
    /// Writing to `out` failed.
    pub fn new(mut out: W) -> io::Result<Self> {
        let mut head = Vec::with_capacity(48);
        // Section header: byte-order magic, version 1.0, section length unknown.
        put_block(&mut head, SECTION_HEADER, |b| {
            b.extend_from_slice(&0x1A2B_3C4Du32.to_le_bytes());
            b.extend_from_slice(&1u16.to_le_bytes());
            b.extend_from_slice(&0u16.to_le_bytes());
            b.extend_from_slice(&u64::MAX.to_le_bytes());
        });
        // Interface: link type, reserved, no snap length; microsecond timestamps (the default).
        put_block(&mut head, INTERFACE_DESCRIPTION, |b| {
            b.extend_from_slice(&LINKTYPE_WIRESHARK_UPPER_PDU.to_le_bytes());
            b.extend_from_slice(&0u16.to_le_bytes());
            b.extend_from_slice(&0u32.to_le_bytes());
        });
        out.write_all(&head)?;
        out.flush()?;
        Ok(Self {
            out,
            block: Vec::with_capacity(2048),
            packet: Vec::with_capacity(2048),
            written: 0,
        })
    }

    /// Records written so far.
    pub fn records(&self) -> u64 {
        self.written
    }

    /// Writes one record per message of a datagram record (`time`: the datagram's capture
    /// time); returns how many.
    ///
    /// # Errors
    /// Writing failed.
    pub fn write_datagram(
        &mut self,
        time: Duration,
        record: &DatagramRecord,
        application_protocol: Option<&str>,
    ) -> io::Result<usize> {
        let context = MessageContext {
            time,
            src: record.src,
            dst: record.dst,
            session: record.session.unwrap_or(0),
            direction: record.direction,
            application_protocol,
        };
        self.write_messages(&context, &record.messages)
    }

    /// Writes the messages the end of a capture released (`time`: the last datagram's time);
    /// returns how many.
    ///
    /// # Errors
    /// Writing failed.
    pub fn write_flush(
        &mut self,
        time: Duration,
        record: &FlushRecord,
        application_protocol: Option<&str>,
    ) -> io::Result<usize> {
        let context = MessageContext {
            time,
            src: record.src,
            dst: record.dst,
            session: record.session,
            direction: record.direction,
            application_protocol,
        };
        self.write_messages(&context, &record.messages)
    }

    /// Writes `messages` under one context; returns how many.
    fn write_messages(
        &mut self,
        context: &MessageContext<'_>,
        messages: &[MessageRecord],
    ) -> io::Result<usize> {
        for message in messages {
            self.write_message(context, message)?;
        }
        Ok(messages.len())
    }

    /// Writes one message as one record.
    ///
    /// # Errors
    /// Writing failed; a message record whose hex does not decode is `InvalidData`.
    pub fn write_message(
        &mut self,
        context: &MessageContext<'_>,
        message: &MessageRecord,
    ) -> io::Result<()> {
        if message.hex.len() % 2 != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a message's hex has an odd length ({})", message.hex.len()),
            ));
        }
        // Both buffers are the writer's, reused: no allocation per message once they grew.
        let header = PduHeader::of_message(context.session, context.direction, message);
        let kept = put_pdu(&mut self.packet, context, &header, header.len as usize);
        let start = self.packet.len() - kept;
        let hex = message.hex.as_bytes().get(..kept * 2).unwrap_or_default();
        hex::decode_to_slice(hex, &mut self.packet[start..])
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let original = start + header.len as usize;
        self.write_packet(context.time, original)
    }

    /// Writes the packet built in `self.packet` as one Enhanced Packet Block; `original`: the
    /// packet's length before any truncation.
    fn write_packet(&mut self, time: Duration, original: usize) -> io::Result<()> {
        self.block.clear();
        put_packet_block(&mut self.block, 0, time, &self.packet, original, None);
        self.out.write_all(&self.block)?;
        self.written += 1;
        Ok(())
    }

    /// Flushes the output (once per datagram for a live stream).
    ///
    /// # Errors
    /// Flushing failed.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// The output, once done.
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// One exported-PDU record of ours read back (see [`read_pdu`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportedPdu {
    /// The sender, from the tags (when they name both an address and a port).
    pub src: Option<SocketAddr>,
    /// The receiver.
    pub dst: Option<SocketAddr>,
    /// Our header.
    pub header: PduHeader,
    /// The application protocol name.
    pub protocol: String,
    /// The message: all of it, or its start when `truncated`.
    pub body: Vec<u8>,
    /// Whether the record holds only the start of the message (flag 0x20).
    pub truncated: bool,
}

/// Why a packet of link type 252 is not a record of ours.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PduError {
    /// The exported-PDU tags name another dissector (or none).
    #[error("the record is for another dissector ({0:?})")]
    OtherDissector(String),
    /// The tags, or our header, do not parse.
    #[error("malformed exported PDU: {0}")]
    Malformed(String),
}

/// Reads a packet of link type 252 (exported PDU) that names our dissector: its tags, our
/// header, the name and the body. The header's length is checked against the body as the
/// plugin checks it: equal, or (flagged truncated) longer.
///
/// # Errors
/// [`PduError::OtherDissector`] for another dissector's record, [`PduError::Malformed`] when
/// something does not parse.
pub fn read_pdu(packet: &[u8]) -> Result<ExportedPdu, PduError> {
    let bad = |what: &str| PduError::Malformed(what.to_owned());
    let mut rest = packet;
    let (mut dissector, mut ips, mut ports) = (None, [None, None], [None, None]);
    loop {
        let head = rest.get(..4).ok_or_else(|| bad("the tags end early"))?;
        let tag = u16::from_be_bytes([head[0], head[1]]);
        let len = usize::from(u16::from_be_bytes([head[2], head[3]]));
        let value = rest
            .get(4..4 + len)
            .ok_or_else(|| bad("a tag ends early"))?;
        rest = &rest[4 + len..];
        let u32_of = |v: &[u8]| {
            v.get(..4)
                .and_then(|b| b.try_into().ok())
                .map(u32::from_be_bytes)
        };
        match tag {
            tag::END_OF_OPT => break,
            tag::DISSECTOR_NAME => {
                let end = value.iter().position(|&b| b == 0).unwrap_or(value.len());
                dissector = Some(String::from_utf8_lossy(&value[..end]).into_owned());
            }
            tag::IPV4_SRC | tag::IPV4_DST => {
                let b: [u8; 4] = value
                    .get(..4)
                    .and_then(|b| b.try_into().ok())
                    .ok_or_else(|| bad("an IPv4 tag"))?;
                ips[usize::from(tag == tag::IPV4_DST)] = Some(IpAddr::from(b));
            }
            tag::IPV6_SRC | tag::IPV6_DST => {
                let b: [u8; 16] = value
                    .get(..16)
                    .and_then(|b| b.try_into().ok())
                    .ok_or_else(|| bad("an IPv6 tag"))?;
                ips[usize::from(tag == tag::IPV6_DST)] = Some(IpAddr::from(b));
            }
            tag::SRC_PORT | tag::DST_PORT => {
                let port = u32_of(value)
                    .and_then(|p| u16::try_from(p).ok())
                    .ok_or_else(|| bad("a port tag"))?;
                ports[usize::from(tag == tag::DST_PORT)] = Some(port);
            }
            _ => {}
        }
    }
    if dissector.as_deref() != Some(DISSECTOR_NAME) {
        return Err(PduError::OtherDissector(dissector.unwrap_or_default()));
    }
    let h = rest
        .get(..HEADER_LEN)
        .ok_or_else(|| bad("our header is cut short"))?;
    if h[0] != HEADER_VERSION {
        return Err(PduError::Malformed(format!("header version {}", h[0])));
    }
    let be32 = |at: usize| u32::from_be_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]);
    let flags = u16::from_be_bytes([h[10], h[11]]);
    let name_len = usize::from(h[14]);
    let name = rest
        .get(HEADER_LEN..HEADER_LEN + name_len)
        .ok_or_else(|| bad("the name is cut short"))?;
    let body = &rest[HEADER_LEN + name_len..];
    let header = PduHeader {
        direction: match h[1] {
            1 => Direction::ClientToServer,
            2 => Direction::ServerToClient,
            _ => Direction::Unknown,
        },
        channel: h[2],
        kind: h[3],
        session: be32(4),
        sequence: (flags & FLAG_SEQUENCE != 0 || h[3] == kind::DISCONNECT)
            .then_some(u16::from_be_bytes([h[8], h[9]])),
        flags,
        crc: h[12],
        verdict: h[13],
        first_frame: be32(16),
        last_frame: be32(20),
        len: be32(24),
    };
    let truncated = flags & FLAG_TRUNCATED != 0;
    let fits = if truncated {
        body.len() < header.len as usize
    } else {
        body.len() == header.len as usize
    };
    if !fits {
        return Err(PduError::Malformed(format!(
            "the header says {} bytes, the record holds {}",
            header.len,
            body.len()
        )));
    }
    let address = |i: usize| Some(SocketAddr::new(ips[i]?, ports[i]?));
    Ok(ExportedPdu {
        src: address(0),
        dst: address(1),
        header,
        protocol: String::from_utf8_lossy(name).into_owned(),
        body: body.to_vec(),
        truncated,
    })
}

/// Builds in `packet` (cleared first) an exported PDU: the tags of `context`, our header and
/// name, and room for the body, zeroed: the first `available` bytes of the message (of
/// `header.len`), or fewer when the record would pass [`MAX_RECORD`]; a record that holds
/// fewer than `header.len` is flagged truncated. Returns how many bytes of room end the packet.
pub(crate) fn put_pdu(
    packet: &mut Vec<u8>,
    context: &MessageContext<'_>,
    header: &PduHeader,
    available: usize,
) -> usize {
    packet.clear();
    put_tags(packet, context);
    let name = name_of(context);
    let head = packet.len() + HEADER_LEN + name.len();
    let kept = available.min(MAX_RECORD.saturating_sub(head));
    put_header(packet, name, header, kept < header.len as usize);
    packet.resize(packet.len() + kept, 0);
    kept
}

/// Appends an Enhanced Packet Block on interface `interface`: `packet`, whose length before
/// any truncation was `original`, at `time` (since the UNIX epoch, in microseconds as the
/// interfaces declare), with a comment option when given.
pub(crate) fn put_packet_block(
    out: &mut Vec<u8>,
    interface: u32,
    time: Duration,
    packet: &[u8],
    original: usize,
    comment: Option<&str>,
) {
    let micros = u64::try_from(time.as_micros()).unwrap_or(u64::MAX);
    let len = u32::try_from(packet.len()).unwrap_or(u32::MAX);
    let original = u32::try_from(original).unwrap_or(u32::MAX);
    put_block(out, ENHANCED_PACKET, |b| {
        b.extend_from_slice(&interface.to_le_bytes());
        b.extend_from_slice(&((micros >> 32) as u32).to_le_bytes());
        b.extend_from_slice(&(micros as u32).to_le_bytes());
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(&original.to_le_bytes());
        b.extend_from_slice(packet);
        pad4(b);
        if let Some(comment) = comment {
            put_option(b, OPT_COMMENT, comment.as_bytes());
            put_option(b, 0, &[]);
        }
    });
}

/// Appends a pcapng option (code, length, value padded to four bytes).
pub(crate) fn put_option(out: &mut Vec<u8>, code: u16, value: &[u8]) {
    let value = &value[..value.len().min(usize::from(u16::MAX) - 3)];
    out.extend_from_slice(&code.to_le_bytes());
    out.extend_from_slice(&(value.len() as u16).to_le_bytes());
    out.extend_from_slice(value);
    pad4(out);
}

/// Appends a pcapng block: type, total length, `body`, total length again.
pub(crate) fn put_block(out: &mut Vec<u8>, kind: u32, body: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    body(out);
    let total = u32::try_from(out.len() - start + 4).unwrap_or(u32::MAX);
    out.extend_from_slice(&total.to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&total.to_le_bytes());
}

/// Pads with zeros to a multiple of four bytes.
pub(crate) fn pad4(out: &mut Vec<u8>) {
    while out.len() % 4 != 0 {
        out.push(0);
    }
}

/// Appends one exported-PDU tag; its value is padded to four bytes, the padding counted in its
/// length (as Wireshark writes them).
fn put_tag(out: &mut Vec<u8>, tag: u16, value: &[u8]) {
    let padded = value.len().div_ceil(4) * 4;
    out.extend_from_slice(&tag.to_be_bytes());
    out.extend_from_slice(&u16::try_from(padded).unwrap_or(0).to_be_bytes());
    out.extend_from_slice(value);
    out.resize(out.len() + padded - value.len(), 0);
}

/// The exported-PDU tags: the dissector, the addresses and the UDP ports.
fn put_tags(out: &mut Vec<u8>, context: &MessageContext<'_>) {
    put_tag(out, tag::DISSECTOR_NAME, DISSECTOR_NAME.as_bytes());
    match (context.src.ip(), context.dst.ip()) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => {
            put_tag(out, tag::IPV4_SRC, &src.octets());
            put_tag(out, tag::IPV4_DST, &dst.octets());
        }
        (src, dst) => {
            put_tag(out, tag::IPV6_SRC, &v6(src).octets());
            put_tag(out, tag::IPV6_DST, &v6(dst).octets());
        }
    }
    put_tag(out, tag::PORT_TYPE, &tag::PORT_TYPE_UDP.to_be_bytes());
    put_tag(
        out,
        tag::SRC_PORT,
        &u32::from(context.src.port()).to_be_bytes(),
    );
    put_tag(
        out,
        tag::DST_PORT,
        &u32::from(context.dst.port()).to_be_bytes(),
    );
    put_tag(out, tag::END_OF_OPT, &[]);
}

/// An address as IPv6 (IPv4-mapped when it is IPv4).
fn v6(ip: IpAddr) -> std::net::Ipv6Addr {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    }
}

/// The application protocol name as written: at most 255 bytes.
fn name_of<'a>(context: &MessageContext<'a>) -> &'a [u8] {
    let name = context.application_protocol.unwrap_or_default().as_bytes();
    &name[..name.len().min(255)]
}

/// Our header (see the [module](self)) and the name after it; `truncated`: whether the
/// record holds only the start of the message.
fn put_header(out: &mut Vec<u8>, name: &[u8], header: &PduHeader, truncated: bool) {
    // A disconnect record's reason sits in the sequence field without the flag.
    let sequence = header.sequence.is_some() && header.kind != kind::DISCONNECT;
    let flags = (header.flags & !(FLAG_SEQUENCE | FLAG_TRUNCATED))
        | if sequence { FLAG_SEQUENCE } else { 0 }
        | if truncated { FLAG_TRUNCATED } else { 0 };
    out.push(HEADER_VERSION);
    out.push(direction_code(header.direction));
    out.push(header.channel);
    out.push(header.kind);
    out.extend_from_slice(&header.session.to_be_bytes());
    out.extend_from_slice(&header.sequence.unwrap_or(0).to_be_bytes());
    out.extend_from_slice(&flags.to_be_bytes());
    out.push(header.crc);
    out.push(header.verdict);
    out.push(name.len() as u8);
    out.push(0);
    out.extend_from_slice(&header.first_frame.to_be_bytes());
    out.extend_from_slice(&header.last_frame.to_be_bytes());
    out.extend_from_slice(&header.len.to_be_bytes());
    out.extend_from_slice(name);
}

/// A direction's code in our header.
fn direction_code(direction: Direction) -> u8 {
    match direction {
        Direction::ClientToServer => 1,
        Direction::ServerToClient => 2,
        Direction::Unknown => 0,
    }
}

/// A CRC verdict's code in our header.
fn crc_code(verdict: CrcVerdict) -> u8 {
    match verdict {
        CrcVerdict::Unknown => 0,
        CrcVerdict::Ok => 1,
        CrcVerdict::Bad => 2,
        CrcVerdict::None => 3,
        CrcVerdict::Missing => 4,
    }
}

/// A key verdict's code in our header.
fn verdict_code(verdict: Encryption) -> u8 {
    match verdict {
        Encryption::Unknown => 0,
        Encryption::Plaintext => 1,
        Encryption::LooksEncrypted => 2,
        Encryption::KeyNotJudged => 3,
        Encryption::Decrypted => 4,
        Encryption::KeyDoesNotFit => 5,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(hex: &str) -> MessageRecord {
        MessageRecord {
            channel: 2,
            kind: "reliable",
            sequence: Some(0x1234),
            len: hex.len() / 2,
            decrypted: true,
            verdict: Encryption::Decrypted,
            hex: hex.into(),
            ascii: String::new(),
            fragmented: true,
            first_frame: 5,
            last_frame: 9,
            compressed: true,
            encrypted: true,
            crc: CrcVerdict::Ok,
        }
    }

    fn u32_le(b: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
    }

    /// The pcapng blocks of a capture: (type, body).
    fn blocks(mut b: &[u8]) -> Vec<(u32, Vec<u8>)> {
        let mut out = Vec::new();
        while !b.is_empty() {
            let (kind, len) = (u32_le(b, 0), u32_le(b, 4) as usize);
            assert_eq!(len % 4, 0, "blocks are 32-bit aligned");
            assert_eq!(u32_le(b, len - 4), len as u32, "trailing length");
            out.push((kind, b[8..len - 4].to_vec()));
            b = &b[len..];
        }
        out
    }

    /// The exported-PDU tags of a packet, and what follows them.
    fn tags(mut p: &[u8]) -> (Vec<(u16, Vec<u8>)>, Vec<u8>) {
        let mut out = Vec::new();
        loop {
            let tag = u16::from_be_bytes([p[0], p[1]]);
            let len = usize::from(u16::from_be_bytes([p[2], p[3]]));
            assert_eq!(len % 4, 0);
            let value = p[4..4 + len].to_vec();
            p = &p[4 + len..];
            if tag == 0 {
                return (out, p.to_vec());
            }
            out.push((tag, value));
        }
    }

    #[test]
    fn a_message_becomes_an_exported_pdu_record() {
        let mut w = PduWriter::new(Vec::new()).unwrap();
        let context = MessageContext {
            time: Duration::new(1_700_000_000, 123_456_000),
            src: "10.0.0.2:20260".parse().unwrap(),
            dst: "10.0.0.1:40000".parse().unwrap(),
            session: 3,
            direction: Direction::ServerToClient,
            application_protocol: Some("ExternalGatewayApi_3"),
        };
        w.write_message(&context, &message("00010203ff")).unwrap();
        assert_eq!(w.records(), 1);
        let b = blocks(&w.into_inner());
        assert_eq!(b.len(), 3);
        assert_eq!(b[0].0, SECTION_HEADER);
        assert_eq!(u32_le(&b[0].1, 0), 0x1A2B_3C4D);
        assert_eq!(b[1].0, INTERFACE_DESCRIPTION);
        assert_eq!(u16::from_le_bytes([b[1].1[0], b[1].1[1]]), 252);
        let (kind, epb) = &b[2];
        assert_eq!(*kind, ENHANCED_PACKET);
        let micros = (u64::from(u32_le(epb, 4)) << 32) | u64::from(u32_le(epb, 8));
        assert_eq!(micros, 1_700_000_000_123_456);
        let caplen = u32_le(epb, 12) as usize;
        assert_eq!(u32_le(epb, 16) as usize, caplen);
        let (tags, rest) = tags(&epb[20..20 + caplen]);
        assert_eq!(tags[0], (12, b"soe\0".to_vec()));
        assert!(tags.contains(&(20, vec![10, 0, 0, 2])));
        assert!(tags.contains(&(21, vec![10, 0, 0, 1])));
        assert!(tags.contains(&(24, vec![0, 0, 0, 3])));
        assert!(tags.contains(&(25, 20260u32.to_be_bytes().to_vec())));
        assert!(tags.contains(&(26, 40000u32.to_be_bytes().to_vec())));
        let name = b"ExternalGatewayApi_3";
        assert_eq!(rest.len(), HEADER_LEN + name.len() + 5);
        assert_eq!(&rest[..4], &[HEADER_VERSION, 2, 2, 0]);
        assert_eq!(&rest[4..8], &3u32.to_be_bytes());
        assert_eq!(&rest[8..10], &0x1234u16.to_be_bytes());
        assert_eq!(&rest[10..12], &0x1fu16.to_be_bytes());
        assert_eq!(&rest[12..16], &[1, 4, name.len() as u8, 0]);
        assert_eq!(&rest[16..20], &5u32.to_be_bytes());
        assert_eq!(&rest[20..24], &9u32.to_be_bytes());
        assert_eq!(&rest[24..28], &5u32.to_be_bytes());
        assert_eq!(&rest[28..28 + name.len()], name);
        assert_eq!(&rest[28 + name.len()..], &[0, 1, 2, 3, 0xff]);
    }

    #[test]
    fn ipv6_and_unknown_sessions() {
        let mut w = PduWriter::new(Vec::new()).unwrap();
        let context = MessageContext {
            time: Duration::ZERO,
            src: "[::1]:20260".parse().unwrap(),
            dst: "127.0.0.1:40000".parse().unwrap(),
            session: 0,
            direction: Direction::Unknown,
            application_protocol: None,
        };
        let mut m = message("");
        m.sequence = None;
        m.kind = "unreliable";
        w.write_message(&context, &m).unwrap();
        let b = blocks(&w.into_inner());
        let epb = &b[2].1;
        let (tags, rest) = tags(&epb[20..20 + u32_le(epb, 12) as usize]);
        let mut loopback = [0u8; 16];
        loopback[15] = 1;
        assert!(tags.contains(&(22, loopback.to_vec())));
        let mapped = "::ffff:127.0.0.1".parse::<std::net::Ipv6Addr>().unwrap();
        assert!(tags.contains(&(23, mapped.octets().to_vec())));
        assert_eq!(rest.len(), HEADER_LEN);
        assert_eq!(&rest[..4], &[HEADER_VERSION, 0, 2, 1]);
        assert_eq!(rest[11] & 1, 0, "no sequence");
        m.hex = "zz".into();
        let mut w = PduWriter::new(Vec::new()).unwrap();
        let e = w.write_message(&context, &m).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn a_message_over_the_record_limit_is_truncated_with_its_real_length() {
        let context = MessageContext {
            time: Duration::ZERO,
            src: "10.0.0.2:20260".parse().unwrap(),
            dst: "10.0.0.1:40000".parse().unwrap(),
            session: 1,
            direction: Direction::ServerToClient,
            application_protocol: Some("Game_1"),
        };
        let big: Vec<u8> = (0..264_040u32).map(|i| (i % 251) as u8).collect();
        let mut w = PduWriter::new(Vec::new()).unwrap();
        w.write_message(&context, &message(&hex::encode(&big)))
            .unwrap();
        // One byte under the limit, one at it, one over: only the last is cut. The IPv4 tags
        // take 52 bytes (six of 8, the end of 4), the name 6.
        let fits = MAX_RECORD - 52 - HEADER_LEN - 6;
        for len in [fits - 1, fits, fits + 1] {
            w.write_message(&context, &message(&hex::encode(&big[..len])))
                .unwrap();
        }
        w.write_message(&context, &message("0102")).unwrap();
        let b = blocks(&w.into_inner());
        let records: Vec<(usize, usize, Vec<u8>)> = b[2..]
            .iter()
            .map(|(_, epb)| {
                let caplen = u32_le(epb, 12) as usize;
                let original = u32_le(epb, 16) as usize;
                (caplen, original, epb[20..20 + caplen].to_vec())
            })
            .collect();
        assert_eq!(records.len(), 5, "every record written, the ones after too");
        for (i, (caplen, original, packet)) in records.iter().enumerate() {
            assert!(*caplen <= MAX_RECORD, "record {i}: {caplen} bytes");
            let (_, rest) = tags(packet);
            let flags = u16::from_be_bytes([rest[10], rest[11]]);
            let len = u32::from_be_bytes(rest[24..28].try_into().unwrap()) as usize;
            let body = &rest[HEADER_LEN + 6..];
            let truncated = flags & FLAG_TRUNCATED != 0;
            assert_eq!(truncated, matches!(i, 0 | 3), "record {i}");
            assert_eq!(truncated, original > caplen, "record {i}");
            if i < 4 {
                assert_eq!(
                    &big[..body.len()],
                    body,
                    "record {i}: the start of the message"
                );
            }
            match i {
                0 => {
                    assert_eq!(len, big.len());
                    assert_eq!(*caplen, MAX_RECORD);
                    assert_eq!(*original, caplen + big.len() - body.len());
                }
                1 | 2 => assert_eq!(body.len(), len),
                3 => assert_eq!((len, body.len()), (fits + 1, fits)),
                _ => assert_eq!(body, [1, 2]),
            }
        }
    }
}
