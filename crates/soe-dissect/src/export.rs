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
//! | 3 | 1 | kind: 0 reliable, 1 unreliable, 2 ordered |
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
const SECTION_HEADER: u32 = 0x0A0D_0D0A;
const INTERFACE_DESCRIPTION: u32 = 1;
const ENHANCED_PACKET: u32 = 6;

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
        // Both buffers are the writer's, reused: no allocation per message once they grew.
        let body_len = message.hex.len() / 2;
        let packet = &mut self.packet;
        packet.clear();
        put_tags(packet, context);
        let head = packet.len() + HEADER_LEN + name_of(context).len();
        let kept = body_len.min(MAX_RECORD.saturating_sub(head));
        put_header(packet, context, message, body_len, kept < body_len);
        let start = packet.len();
        packet.resize(start + kept, 0);
        if message.hex.len() % 2 != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a message's hex has an odd length ({})", message.hex.len()),
            ));
        }
        let hex = message.hex.as_bytes().get(..kept * 2).unwrap_or_default();
        hex::decode_to_slice(hex, &mut packet[start..])
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let original = start + body_len;
        self.write_packet(context.time, original)
    }

    /// Writes the packet built in `self.packet` as one Enhanced Packet Block; `original`: the
    /// packet's length before any truncation.
    fn write_packet(&mut self, time: Duration, original: usize) -> io::Result<()> {
        let packet = &self.packet;
        let micros = u64::try_from(time.as_micros()).unwrap_or(u64::MAX);
        let len = u32::try_from(packet.len()).unwrap_or(u32::MAX);
        let original = u32::try_from(original).unwrap_or(u32::MAX);
        self.block.clear();
        put_block(&mut self.block, ENHANCED_PACKET, |b| {
            b.extend_from_slice(&0u32.to_le_bytes());
            b.extend_from_slice(&((micros >> 32) as u32).to_le_bytes());
            b.extend_from_slice(&(micros as u32).to_le_bytes());
            b.extend_from_slice(&len.to_le_bytes());
            b.extend_from_slice(&original.to_le_bytes());
            b.extend_from_slice(packet);
            pad4(b);
        });
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

/// Appends a pcapng block: type, total length, `body`, total length again.
fn put_block(out: &mut Vec<u8>, kind: u32, body: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    body(out);
    let total = u32::try_from(out.len() - start + 4).unwrap_or(u32::MAX);
    out.extend_from_slice(&total.to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&total.to_le_bytes());
}

/// Pads with zeros to a multiple of four bytes.
fn pad4(out: &mut Vec<u8>) {
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

/// Our header (see the [module](self)); `len`: the whole message's length, `truncated`:
/// whether the record holds only its start.
fn put_header(
    out: &mut Vec<u8>,
    context: &MessageContext<'_>,
    message: &MessageRecord,
    len: usize,
    truncated: bool,
) {
    let name = name_of(context);
    let flags = u16::from(message.sequence.is_some())
        | u16::from(message.fragmented) << 1
        | u16::from(message.compressed) << 2
        | u16::from(message.encrypted) << 3
        | u16::from(message.decrypted) << 4
        | if truncated { FLAG_TRUNCATED } else { 0 };
    let to_u32 = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    out.push(HEADER_VERSION);
    out.push(match context.direction {
        Direction::ClientToServer => 1,
        Direction::ServerToClient => 2,
        Direction::Unknown => 0,
    });
    out.push(message.channel);
    out.push(match message.kind {
        "unreliable" => 1,
        "ordered" => 2,
        _ => 0,
    });
    out.extend_from_slice(&to_u32(context.session as u64).to_be_bytes());
    out.extend_from_slice(&message.sequence.unwrap_or(0).to_be_bytes());
    out.extend_from_slice(&flags.to_be_bytes());
    out.push(crc_code(message.crc));
    out.push(verdict_code(message.verdict));
    out.push(name.len() as u8);
    out.push(0);
    out.extend_from_slice(&to_u32(message.first_frame).to_be_bytes());
    out.extend_from_slice(&to_u32(message.last_frame).to_be_bytes());
    out.extend_from_slice(&to_u32(len as u64).to_be_bytes());
    out.extend_from_slice(name);
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
