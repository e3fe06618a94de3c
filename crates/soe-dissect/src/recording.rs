//! A flight recording of `soe-session` ([`soe_session::recorder`], its `Recording::as_bytes`)
//! written as a pcapng capture that Wireshark opens with the Lua plugin as it is, and that
//! `soe decode` reads back.
//!
//! The capture has one section and two interfaces:
//!
//! * interface 0, raw IP (link type 101): every datagram recorded, received and sent, as
//!   IPv4 (or IPv6) and UDP with this endpoint's real addresses and ports, so Wireshark shows
//!   them as UDP. A datagram the session dropped because its CRC failed carries a packet
//!   comment saying so; one longer than the recorder kept is cut, with its real length, as a
//!   snap length would cut it;
//! * interface 1, exported PDUs (link type 252, [`export`](crate::export)'s records): first the
//!   session's framing (kind 4: side, session id, CRC seed and length, compression,
//!   udp_length, entries the budget dropped, and the RC4 key only when the host gives one),
//!   then each message the session delivered or the application queued, decrypted, at its
//!   time and with the session's own verdicts (CRC ok, decrypted when RC4 was on), then, when
//!   the session ended, its end (kind 3: the reason, and which side ended it).
//!
//! The section's comment says the same in words. [`soe_session`] is not a dependency: this
//! module reads the recording's documented bytes.
//!
//! [`soe_session::recorder`]: https://docs.rs/soe-session/latest/soe_session/recorder/
//! [`soe_session`]: https://docs.rs/soe-session

use std::fmt::Write as _;
use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use soe_wire::DisconnectReason;

use crate::Direction;
use crate::export::{
    self, INTERFACE_DESCRIPTION, LINKTYPE_WIRESHARK_UPPER_PDU, MessageContext, OPT_COMMENT,
    PduHeader, SECTION_HEADER, kind,
};

/// `LINKTYPE_RAW`: packets that start with an IPv4 or IPv6 header.
pub const LINKTYPE_RAW: u16 = 101;
/// The magic and version of the recording's bytes this module reads.
const MAGIC: [u8; 4] = *b"SOER";
const VERSION: u8 = 1;
/// The fixed part of the recording's header, and of an entry's.
const HEADER: usize = 40;
const ENTRY_HEADER: usize = 20;

/// Why a recording could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordingError {
    /// The bytes are no recording of a version this module reads.
    #[error("not a flight recording: {0}")]
    NotARecording(String),
    /// Writing failed.
    #[error("cannot write the recording: {0}")]
    Io(#[from] io::Error),
}

/// What an entry of a recording is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EntryKind {
    /// A datagram from the peer, as it arrived.
    Received,
    /// A datagram to the peer, as sent.
    Sent,
    /// A message the session delivered to the application.
    Delivered,
    /// A message the application queued.
    Queued,
}

/// One entry of a recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<'a> {
    /// Since the recording's start.
    pub at: Duration,
    /// What it is.
    pub kind: EntryKind,
    /// A message's channel.
    pub channel: u8,
    /// A message's delivery: 0 reliable, 1 unreliable, 2 ordered.
    pub delivery: u8,
    /// A received datagram the session dropped because its CRC failed.
    pub crc_failed: bool,
    /// A reliable message that travelled encrypted (these are its decrypted bytes).
    pub encrypted: bool,
    /// Its bytes (the first ones when the recorder cut it).
    pub data: &'a [u8],
    /// Its real length.
    pub len: usize,
}

/// A recording's bytes, read (see [`soe_session::recorder`]).
///
/// [`soe_session::recorder`]: https://docs.rs/soe-session/latest/soe_session/recorder/
#[derive(Debug, Clone, Copy)]
pub struct RecordingView<'a> {
    bytes: &'a [u8],
    name: &'a [u8],
    entries: &'a [u8],
}

impl<'a> RecordingView<'a> {
    /// Reads a recording's bytes.
    ///
    /// # Errors
    /// [`RecordingError::NotARecording`] when the magic, the version or the header is wrong.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, RecordingError> {
        let fail = |why: &str| RecordingError::NotARecording(why.to_owned());
        if bytes.get(..4) != Some(&MAGIC[..]) {
            return Err(fail("no SOER magic"));
        }
        match bytes.get(4) {
            Some(&VERSION) => {}
            Some(v) => return Err(RecordingError::NotARecording(format!("version {v}"))),
            None => return Err(fail("cut short")),
        }
        let head = bytes
            .get(..HEADER)
            .ok_or_else(|| fail("its header is cut short"))?;
        let name_len = usize::from(u16::from_le_bytes([head[22], head[23]]));
        let name = bytes
            .get(HEADER..HEADER + name_len)
            .ok_or_else(|| fail("its name is cut short"))?;
        Ok(Self {
            bytes,
            name,
            entries: &bytes[HEADER + name_len..],
        })
    }

    fn u32_at(&self, at: usize) -> u32 {
        self.bytes
            .get(at..at + 4)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u32::from_le_bytes)
    }

    fn u64_at(&self, at: usize) -> u64 {
        u64::from(self.u32_at(at)) | (u64::from(self.u32_at(at + 4)) << 32)
    }

    /// Whether this endpoint was the server.
    pub fn is_server(&self) -> bool {
        self.bytes[5] == 1
    }

    /// The CRC length.
    pub fn crc_length(&self) -> u8 {
        self.bytes[6]
    }

    /// Whether the session compressed.
    pub fn compression(&self) -> bool {
        self.bytes[7] & 0x01 != 0
    }

    /// Whether the session had an RC4 key (never in the recording).
    pub fn keyed(&self) -> bool {
        self.bytes[7] & 0x08 != 0
    }

    /// The session id.
    pub fn session_id(&self) -> u32 {
        self.u32_at(8)
    }

    /// The CRC seed.
    pub fn crc_seed(&self) -> u32 {
        self.u32_at(12)
    }

    /// The largest datagram the session sent.
    pub fn udp_length(&self) -> u32 {
        self.u32_at(16)
    }

    /// How the session ended: the reason, whether the peer ended it, and when (since the
    /// start).
    pub fn end(&self) -> Option<(DisconnectReason, bool, Duration)> {
        let flags = self.bytes[7];
        (flags & 0x02 != 0).then(|| {
            let code = u16::from_le_bytes([self.bytes[20], self.bytes[21]]);
            (
                DisconnectReason::from_u16(code),
                flags & 0x04 != 0,
                Duration::from_micros(self.u64_at(24)),
            )
        })
    }

    /// Entries the budget dropped before the oldest one kept.
    pub fn dropped(&self) -> u64 {
        self.u64_at(32)
    }

    /// The application protocol name.
    pub fn application_protocol(&self) -> &'a [u8] {
        self.name
    }

    /// The entries, oldest first (a cut-short last entry is left out).
    pub fn entries(&self) -> impl Iterator<Item = Entry<'a>> + 'a {
        let mut rest = self.entries;
        std::iter::from_fn(move || {
            let head = rest.get(..ENTRY_HEADER)?;
            let le32 = |at: usize| {
                u32::from_le_bytes([head[at], head[at + 1], head[at + 2], head[at + 3]])
            };
            let kept = le32(8) as usize;
            let data = rest.get(ENTRY_HEADER..ENTRY_HEADER + kept)?;
            rest = &rest[ENTRY_HEADER + kept..];
            Some(Entry {
                at: Duration::from_micros(u64::from(le32(0)) | (u64::from(le32(4)) << 32)),
                kind: match head[16] {
                    0 => EntryKind::Received,
                    1 => EntryKind::Sent,
                    2 => EntryKind::Delivered,
                    _ => EntryKind::Queued,
                },
                channel: head[17],
                delivery: head[18],
                crc_failed: head[19] & 0x01 != 0,
                encrypted: head[19] & 0x02 != 0,
                data,
                len: le32(12) as usize,
            })
        })
    }
}

/// Where and when a recording happened, and what else to write.
#[derive(Debug, Clone)]
pub struct RecordingOptions {
    local: SocketAddr,
    remote: SocketAddr,
    start: SystemTime,
    key: Option<Vec<u8>>,
}

impl RecordingOptions {
    /// A recording made on `local` (this endpoint's socket) with the peer at `remote`, whose
    /// start was at the UNIX epoch until [`with_start`](Self::with_start) says when. A socket
    /// bound to a wildcard address (`0.0.0.0`, `::`) is written as the loopback address when
    /// the peer is on loopback, the only address it can have reached; otherwise as bound.
    pub fn new(local: SocketAddr, remote: SocketAddr) -> Self {
        Self {
            local: reached(local, remote),
            remote,
            start: UNIX_EPOCH,
            key: None,
        }
    }

    /// The wall-clock time of the recording's start.
    #[must_use]
    pub fn with_start(mut self, start: SystemTime) -> Self {
        self.start = start;
        self
    }

    /// The wall-clock time of the recording's start, from its `Instant`: now less the time
    /// since (for a recording taken in real time).
    #[must_use]
    pub fn with_start_instant(self, start: Instant) -> Self {
        let ago = start.elapsed();
        let wall = SystemTime::now().checked_sub(ago).unwrap_or(UNIX_EPOCH);
        self.with_start(wall)
    }

    /// Writes the session's RC4 key in its framing record. Never done unless asked: whoever
    /// holds the capture can then decrypt what the session's key protects.
    #[must_use]
    pub fn with_key(mut self, key: &[u8]) -> Self {
        self.key = Some(key.to_vec());
        self
    }
}

/// The address a peer at `remote` reached on a socket bound to `local` (see
/// [`RecordingOptions::new`]).
fn reached(local: SocketAddr, remote: SocketAddr) -> SocketAddr {
    if !local.ip().is_unspecified() || !remote.ip().is_loopback() {
        return local;
    }
    let ip = match remote.ip() {
        IpAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
    };
    SocketAddr::new(ip, local.port())
}

/// What [`write_recording`] wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecordingSummary {
    /// Datagrams (interface 0).
    pub datagrams: u64,
    /// Messages (interface 1, without the framing and end records).
    pub messages: u64,
    /// Whether the end was written.
    pub ended: bool,
}

/// Writes a recording (the bytes of `soe_session::Recording::as_bytes`) as a pcapng capture
/// (see the [module](self)).
///
/// # Errors
/// [`RecordingError::NotARecording`] when the bytes are not a recording;
/// [`RecordingError::Io`] when writing failed.
pub fn write_recording<W: Write>(
    mut out: W,
    recording: &[u8],
    options: &RecordingOptions,
) -> Result<RecordingSummary, RecordingError> {
    let view = RecordingView::parse(recording)?;
    let mut w = Blocks::new(&view, options);
    let mut buf = Vec::with_capacity(4096);
    put_section(&mut buf, &view, options);
    out.write_all(&buf)?;
    buf.clear();
    w.framing(&mut buf, &view);
    out.write_all(&buf)?;
    let mut summary = RecordingSummary::default();
    for entry in view.entries() {
        buf.clear();
        match entry.kind {
            EntryKind::Received | EntryKind::Sent => {
                w.datagram(&mut buf, &entry);
                summary.datagrams += 1;
            }
            EntryKind::Delivered | EntryKind::Queued => {
                w.message(&mut buf, &entry);
                summary.messages += 1;
            }
        }
        out.write_all(&buf)?;
    }
    if let Some(end) = view.end() {
        buf.clear();
        w.end(&mut buf, end);
        out.write_all(&buf)?;
        summary.ended = true;
    }
    out.flush()?;
    Ok(summary)
}

/// The section header (with its comment) and the two interfaces.
fn put_section(out: &mut Vec<u8>, view: &RecordingView<'_>, options: &RecordingOptions) {
    export::put_block(out, SECTION_HEADER, |b| {
        b.extend_from_slice(&0x1A2B_3C4Du32.to_le_bytes());
        b.extend_from_slice(&1u16.to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        b.extend_from_slice(&u64::MAX.to_le_bytes());
        export::put_option(b, OPT_COMMENT, describe(view, options).as_bytes());
        // shb_userappl
        export::put_option(b, 4, b"soe flight recorder");
        export::put_option(b, 0, &[]);
    });
    for link in [LINKTYPE_RAW, LINKTYPE_WIRESHARK_UPPER_PDU] {
        export::put_block(out, INTERFACE_DESCRIPTION, |b| {
            b.extend_from_slice(&link.to_le_bytes());
            b.extend_from_slice(&0u16.to_le_bytes());
            b.extend_from_slice(&0u32.to_le_bytes());
        });
    }
}

/// The section's comment: the recording in words.
fn describe(view: &RecordingView<'_>, options: &RecordingOptions) -> String {
    let side = if view.is_server() { "server" } else { "client" };
    let mut text = format!(
        "SOE flight recording of session {:#010x} ({}), this endpoint the {side} at {}, the peer at {}",
        view.session_id(),
        String::from_utf8_lossy(view.application_protocol()),
        options.local,
        options.remote,
    );
    match view.end() {
        Some((reason, by_peer, _)) => {
            let by = if by_peer { "the peer" } else { "this side" };
            let _ = write!(text, "; ended: {reason:?} ({}), by {by}", reason.to_u16());
        }
        None => text.push_str("; the session was live when the recording was taken"),
    }
    if view.dropped() > 0 {
        let _ = write!(
            text,
            "; {} older entries were dropped by the recorder's budget",
            view.dropped()
        );
    }
    text
}

/// The writer's state: addresses, directions, and the frame numbers messages refer to.
struct Blocks {
    local: SocketAddr,
    remote: SocketAddr,
    start: Duration,
    /// Which way the peer's datagrams go in the dissector's terms.
    inbound: Direction,
    crc_length: u8,
    key: Option<Vec<u8>>,
    name: String,
    /// Frames written so far; the last received datagram's frame.
    frames: u32,
    last_received: u32,
    packet: Vec<u8>,
}

impl Blocks {
    fn new(view: &RecordingView<'_>, options: &RecordingOptions) -> Self {
        let (local, remote) = same_family(options.local, options.remote);
        Self {
            local,
            remote,
            start: options.start.duration_since(UNIX_EPOCH).unwrap_or_default(),
            inbound: if view.is_server() {
                Direction::ClientToServer
            } else {
                Direction::ServerToClient
            },
            crc_length: view.crc_length(),
            key: options.key.clone(),
            name: String::from_utf8_lossy(view.application_protocol()).into_owned(),
            frames: 0,
            last_received: 0,
            packet: Vec::with_capacity(4096),
        }
    }

    /// The direction opposite the peer's.
    fn outbound(&self) -> Direction {
        match self.inbound {
            Direction::ClientToServer => Direction::ServerToClient,
            _ => Direction::ClientToServer,
        }
    }

    /// A message's context: `inbound` from the peer, else to it.
    fn context(&self, at: Duration, inbound: bool) -> MessageContext<'_> {
        let (src, dst, direction) = if inbound {
            (self.remote, self.local, self.inbound)
        } else {
            (self.local, self.remote, self.outbound())
        };
        MessageContext {
            time: self.start + at,
            src,
            dst,
            session: 1,
            direction,
            application_protocol: Some(&self.name),
        }
    }

    /// The framing record (kind 4).
    fn framing(&mut self, out: &mut Vec<u8>, view: &RecordingView<'_>) {
        let mut text = format!(
            "side={} session_id={:#010x} crc_seed={:#010x} crc_length={} compression={} udp_length={} dropped={}",
            if view.is_server() { "server" } else { "client" },
            view.session_id(),
            view.crc_seed(),
            view.crc_length(),
            u8::from(view.compression()),
            view.udp_length(),
            view.dropped(),
        );
        if let Some(key) = &self.key {
            let _ = write!(text, " rc4_key={}", hex::encode(key));
        } else if view.keyed() {
            text.push_str(" rc4_key=(not written)");
        }
        let header = self.header(kind::SESSION, self.outbound(), text.len());
        self.pdu(out, Duration::ZERO, false, &header, text.as_bytes());
    }

    /// The end record (kind 3).
    fn end(
        &mut self,
        out: &mut Vec<u8>,
        (reason, by_peer, at): (DisconnectReason, bool, Duration),
    ) {
        let name = format!("{reason:?}");
        let direction = if by_peer {
            self.inbound
        } else {
            self.outbound()
        };
        let mut header = self.header(kind::DISCONNECT, direction, name.len());
        header.sequence = Some(reason.to_u16());
        header.last_frame = self.last_received;
        self.pdu(out, at, by_peer, &header, name.as_bytes());
    }

    /// A message record.
    fn message(&mut self, out: &mut Vec<u8>, entry: &Entry<'_>) {
        let inbound = entry.kind == EntryKind::Delivered;
        let direction = if inbound {
            self.inbound
        } else {
            self.outbound()
        };
        let mut header = self.header(entry.delivery.min(2), direction, entry.len);
        header.channel = entry.channel;
        if entry.encrypted {
            header.flags |= export::FLAG_ENCRYPTED | export::FLAG_DECRYPTED;
            header.verdict = 4;
        }
        if inbound {
            (header.first_frame, header.last_frame) = (self.last_received, self.last_received);
        }
        self.pdu(out, entry.at, inbound, &header, entry.data);
    }

    /// Our header for a record of the session: CRC ok (or none without a CRC), plaintext.
    fn header(&self, kind: u8, direction: Direction, len: usize) -> PduHeader {
        PduHeader {
            direction,
            channel: 0,
            kind,
            session: 1,
            sequence: None,
            flags: 0,
            crc: if self.crc_length == 0 { 3 } else { 1 },
            verdict: 1,
            first_frame: 0,
            last_frame: 0,
            len: u32::try_from(len).unwrap_or(u32::MAX),
        }
    }

    /// Appends one exported PDU on interface 1.
    fn pdu(
        &mut self,
        out: &mut Vec<u8>,
        at: Duration,
        inbound: bool,
        header: &PduHeader,
        body: &[u8],
    ) {
        let mut packet = std::mem::take(&mut self.packet);
        let context = self.context(at, inbound);
        let kept = export::put_pdu(&mut packet, &context, header, body.len());
        let start = packet.len() - kept;
        packet[start..].copy_from_slice(&body[..kept]);
        let original = start + header.len as usize;
        export::put_packet_block(out, 1, context.time, &packet, original, None);
        self.packet = packet;
        self.frames += 1;
    }

    /// A datagram on interface 0.
    fn datagram(&mut self, out: &mut Vec<u8>, entry: &Entry<'_>) {
        let inbound = entry.kind == EntryKind::Received;
        let (src, dst) = if inbound {
            (self.remote, self.local)
        } else {
            (self.local, self.remote)
        };
        self.packet.clear();
        let original = put_udp(&mut self.packet, src, dst, entry.data, entry.len);
        let comment = entry
            .crc_failed
            .then_some("the session dropped this datagram: its CRC failed");
        export::put_packet_block(
            out,
            0,
            self.start + entry.at,
            &self.packet,
            original,
            comment,
        );
        self.frames += 1;
        if inbound {
            self.last_received = self.frames;
        }
    }
}

/// Both addresses in one family: IPv6 (an IPv4 one mapped) unless both are IPv4.
fn same_family(a: SocketAddr, b: SocketAddr) -> (SocketAddr, SocketAddr) {
    let v6 = |s: SocketAddr| match s.ip() {
        IpAddr::V4(ip) => SocketAddr::new(IpAddr::V6(ip.to_ipv6_mapped()), s.port()),
        IpAddr::V6(_) => s,
    };
    match (a, b) {
        (SocketAddr::V4(_), SocketAddr::V4(_)) | (SocketAddr::V6(_), SocketAddr::V6(_)) => (a, b),
        _ => (v6(a), v6(b)),
    }
}

/// Appends an IP packet carrying a UDP datagram from `src` to `dst` whose payload is `len`
/// bytes, of which `payload` are kept; returns the packet's whole length.
fn put_udp(
    out: &mut Vec<u8>,
    src: SocketAddr,
    dst: SocketAddr,
    payload: &[u8],
    len: usize,
) -> usize {
    let udp_len = u16::try_from(8 + len).unwrap_or(u16::MAX);
    // The UDP checksum's pseudo-header (the addresses, the protocol and the UDP length).
    let mut pseudo = Vec::with_capacity(40);
    let header = match (src.ip(), dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let total = u16::try_from(28 + len).unwrap_or(u16::MAX);
            let mut ip = [0u8; 20];
            ip[0] = 0x45;
            ip[2..4].copy_from_slice(&total.to_be_bytes());
            ip[6] = 0x40; // don't fragment
            ip[8] = 64;
            ip[9] = 17;
            ip[12..16].copy_from_slice(&s.octets());
            ip[16..20].copy_from_slice(&d.octets());
            let sum = checksum(0, &ip);
            ip[10..12].copy_from_slice(&sum.to_be_bytes());
            out.extend_from_slice(&ip);
            pseudo.extend_from_slice(&s.octets());
            pseudo.extend_from_slice(&d.octets());
            pseudo.extend_from_slice(&[0, 17]);
            pseudo.extend_from_slice(&udp_len.to_be_bytes());
            20
        }
        (s, d) => {
            let (s, d) = (v6_of(s), v6_of(d));
            let mut ip = [0u8; 40];
            ip[0] = 0x60;
            ip[4..6].copy_from_slice(&udp_len.to_be_bytes());
            ip[6] = 17;
            ip[7] = 64;
            ip[8..24].copy_from_slice(&s.octets());
            ip[24..40].copy_from_slice(&d.octets());
            out.extend_from_slice(&ip);
            pseudo.extend_from_slice(&s.octets());
            pseudo.extend_from_slice(&d.octets());
            pseudo.extend_from_slice(&u32::from(udp_len).to_be_bytes());
            pseudo.extend_from_slice(&[0, 0, 0, 17]);
            40
        }
    };
    // A datagram cut short has no checksum (0: allowed over IPv4; Wireshark does not check
    // it by default over IPv6 either).
    let whole = payload.len() == len;
    put_udp_header(
        out,
        src.port(),
        dst.port(),
        udp_len,
        payload,
        whole.then_some(&pseudo[..]),
    );
    header + 8 + len
}

/// Appends a UDP header and its payload; the checksum over `pseudo` (the IP pseudo-header)
/// when given, else 0.
fn put_udp_header(
    out: &mut Vec<u8>,
    sport: u16,
    dport: u16,
    len: u16,
    payload: &[u8],
    pseudo: Option<&[u8]>,
) {
    let mut udp = [0u8; 8];
    udp[0..2].copy_from_slice(&sport.to_be_bytes());
    udp[2..4].copy_from_slice(&dport.to_be_bytes());
    udp[4..6].copy_from_slice(&len.to_be_bytes());
    if let Some(pseudo) = pseudo {
        let sum = checksum(checksum_add(checksum_add(0, pseudo), &udp), payload);
        let sum = if sum == 0 { 0xFFFF } else { sum };
        udp[6..8].copy_from_slice(&sum.to_be_bytes());
    }
    out.extend_from_slice(&udp);
    out.extend_from_slice(payload);
}

/// The Internet checksum of `bytes` added to the running sum `sum`, folded and inverted.
fn checksum(sum: u32, bytes: &[u8]) -> u16 {
    let mut sum = checksum_add(sum, bytes);
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

/// Adds `bytes` (big-endian 16-bit words, the last padded) to a running one's-complement sum.
fn checksum_add(mut sum: u32, bytes: &[u8]) -> u32 {
    let mut chunks = bytes.chunks_exact(2);
    for word in &mut chunks {
        sum = sum.wrapping_add(u32::from(u16::from_be_bytes([word[0], word[1]])));
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    if let [last] = chunks.remainder() {
        sum = sum.wrapping_add(u32::from(*last) << 8);
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    sum
}

/// An address as IPv6 (IPv4 mapped).
fn v6_of(ip: IpAddr) -> std::net::Ipv6Addr {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wildcard_bind_is_written_as_the_address_the_peer_reached() {
        let any: SocketAddr = "0.0.0.0:20042".parse().unwrap();
        let lo: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let far: SocketAddr = "10.1.2.3:5000".parse().unwrap();
        assert_eq!(reached(any, lo), "127.0.0.1:20042".parse().unwrap());
        assert_eq!(reached(any, far), any);
        let bound: SocketAddr = "10.0.0.1:20042".parse().unwrap();
        assert_eq!(reached(bound, lo), bound);
        let any6: SocketAddr = "[::]:20042".parse().unwrap();
        let lo6: SocketAddr = "[::1]:5000".parse().unwrap();
        assert_eq!(reached(any6, lo6), "[::1]:20042".parse().unwrap());
    }

    #[test]
    fn udp_checksums_hold() {
        let (s, d): (SocketAddr, SocketAddr) = (
            "10.0.0.1:40000".parse().unwrap(),
            "10.0.0.2:20260".parse().unwrap(),
        );
        let mut p = Vec::new();
        assert_eq!(put_udp(&mut p, s, d, b"hello", 5), 33);
        assert_eq!(p.len(), 33);
        assert_eq!(checksum(0, &p[..20]), 0, "the IPv4 header sums to zero");
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&p[12..20]);
        pseudo.extend_from_slice(&[0, 17, 0, 13]);
        assert_eq!(
            checksum(checksum_add(0, &pseudo), &p[20..]),
            0,
            "the UDP checksum"
        );
        let (s6, d6): (SocketAddr, SocketAddr) = (
            "[2001:db8::1]:1".parse().unwrap(),
            "[2001:db8::2]:2".parse().unwrap(),
        );
        let mut p = Vec::new();
        assert_eq!(put_udp(&mut p, s6, d6, b"abc", 3), 51);
        let mut pseudo = p[8..40].to_vec();
        pseudo.extend_from_slice(&[0, 0, 0, 11, 0, 0, 0, 17]);
        assert_eq!(checksum(checksum_add(0, &pseudo), &p[40..]), 0);
    }
}
