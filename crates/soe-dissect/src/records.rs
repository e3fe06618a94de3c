//! The records a [`Dissector`](crate::Dissector) produces: one per datagram, one per session.
//!
//! Every record is plain data. With the `serde` feature they serialize (as the `soe decode
//! --json` lines do); without it the crate has no serde dependency.

use std::net::SocketAddr;
use std::time::Duration;

#[cfg(feature = "serde")]
use serde::ser::{SerializeMap, Serializer};

/// Which way a datagram travels within its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Direction {
    /// From the side that sent the SessionRequest.
    ClientToServer,
    /// Towards the side that sent the SessionRequest.
    ServerToClient,
    /// No handshake seen, or both addresses are the same (hex input).
    Unknown,
}

impl Direction {
    /// The short form used in the tree (`client->server`...).
    pub fn arrow(self) -> &'static str {
        match self {
            Self::ClientToServer => "client->server",
            Self::ServerToClient => "server->client",
            Self::Unknown => "direction unknown",
        }
    }
}

/// The outcome of a CRC check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum CrcVerdict {
    /// The trailer matches.
    Ok,
    /// The trailer does not match (or the datagram is shorter than its framing).
    Bad,
    /// No trailer: a CRC length of 0, or a contextless packet (SessionRequest, SessionResponse,
    /// UnknownSender, RemapConnection), or a refusal sent before the handshake.
    None,
    /// The seed is not known (no SessionResponse seen, no `--crc-seed`): not checked.
    Unknown,
    /// A Heartbeat or selective Acknowledge sent without its trailer (as h1z1-server does);
    /// accepted by our sessions.
    Missing,
}

/// The CRC check of a datagram.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct CrcCheck {
    /// The outcome.
    pub verdict: CrcVerdict,
    /// The trailer length applied.
    pub length: u8,
    /// The CRC computed over the datagram, hex, when the seed is known.
    pub expected: Option<String>,
    /// The trailer found, hex.
    pub found: Option<String>,
}

/// A field value of a packet.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldValue {
    /// A number.
    Num(u64),
    /// A 32-bit identifier (session id, CRC seed): a number, shown with its hex form too.
    Id(u32),
    /// Text.
    Text(String),
    /// A yes/no flag.
    Flag(bool),
    /// Milliseconds.
    Millis(f64),
}

#[cfg(feature = "serde")]
impl serde::Serialize for FieldValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Num(n) => s.serialize_u64(*n),
            Self::Id(n) => s.serialize_u32(*n),
            Self::Text(t) => s.serialize_str(t),
            Self::Flag(b) => s.serialize_bool(*b),
            Self::Millis(ms) => s.serialize_f64(*ms),
        }
    }
}

impl std::fmt::Display for FieldValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Num(n) => write!(f, "{n}"),
            Self::Id(n) => write!(f, "{n} (0x{n:08x})"),
            Self::Text(t) => write!(f, "{t:?}"),
            Self::Flag(b) => write!(f, "{}", if *b { "yes" } else { "no" }),
            Self::Millis(ms) => write!(f, "{ms:.3}ms"),
        }
    }
}

/// A packet's fields in wire order; serialized as a JSON object.
#[derive(Debug, Clone, Default)]
pub struct Fields(pub Vec<(&'static str, FieldValue)>);

impl Fields {
    /// Adds a number.
    pub(crate) fn num(&mut self, name: &'static str, value: impl Into<u64>) {
        self.0.push((name, FieldValue::Num(value.into())));
    }

    /// Adds an identifier.
    pub(crate) fn id(&mut self, name: &'static str, value: u32) {
        self.0.push((name, FieldValue::Id(value)));
    }

    /// Adds text.
    pub(crate) fn text(&mut self, name: &'static str, value: impl Into<String>) {
        self.0.push((name, FieldValue::Text(value.into())));
    }

    /// Adds a flag.
    pub(crate) fn flag(&mut self, name: &'static str, value: bool) {
        self.0.push((name, FieldValue::Flag(value)));
    }

    /// The value of a field, if present.
    pub fn get(&self, name: &str) -> Option<&FieldValue> {
        self.0.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for Fields {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (name, value) in &self.0 {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

/// What the receiver emulation made of one reliable data packet.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ReliableInfo {
    /// The channel, 0 to 3.
    pub channel: u8,
    /// The sequence as sent (16 bits).
    pub sequence: u16,
    /// Whether the packet is a ReliableDataFragment.
    pub fragment: bool,
    /// `whole`, `first` (a first fragment, with `total_len`), `continuation`, `unplaced` (a
    /// fragment after a gap lost to the capture, before any whole packet: whether it starts a
    /// message is unknown), or `unknown` (a fragment not processed in order here: stored,
    /// resent, or not fed).
    pub position: &'static str,
    /// A first fragment's total message length.
    pub total_len: Option<u32>,
    /// The data bytes after the sequence (and total length).
    pub data_len: usize,
    /// True when this (direction, channel, sequence) was already seen: a resend of a packet
    /// delivered before, or a duplicate of one buffered out of order.
    pub resend: bool,
    /// `delivered` (in order, processed now), `unplaced` (in order, but a fragment after a gap
    /// given up as lost to the capture, whose place in a message is unknown: not delivered),
    /// `stored` (ahead of a gap), `resend`, `duplicate`, `dropped` (a buffer limit),
    /// `before_start` (older than the stream start), `not_fed` (its datagram failed the CRC).
    pub status: &'static str,
    /// Whether the data is an ack elicitor (`00 19` or `00 19 01`): no message.
    pub ack_elicitor: bool,
}

/// One decoded packet, with its sub-packets.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct PacketNode {
    /// The packet name (`ReliableData`, `Unreliable`, `Unknown`, `Item`...).
    pub name: &'static str,
    /// The wire opcode, absent for unreliable data and Group items.
    pub opcode: Option<u16>,
    /// Bytes, opcode included (framing excluded).
    pub len: usize,
    /// The decoded fields.
    pub fields: Fields,
    /// Reliable data details (ReliableData and ReliableDataFragment only).
    pub reliable: Option<ReliableInfo>,
    /// Sub-packets of a MultiPacket, items of a Group.
    pub children: Vec<Self>,
    /// Why the packet did not decode.
    pub error: Option<String>,
    /// Remarks.
    pub notes: Vec<String>,
}

impl PacketNode {
    /// An empty node.
    pub(crate) fn new(name: &'static str, opcode: Option<u16>, len: usize) -> Self {
        Self {
            name,
            opcode,
            len,
            fields: Fields::default(),
            reliable: None,
            children: Vec::new(),
            error: None,
            notes: Vec::new(),
        }
    }
}

/// One application message, reported once, in order, by the datagram that completed it.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct MessageRecord {
    /// The reliable channel (0 for unreliable and ordered data).
    pub channel: u8,
    /// `reliable`, `unreliable` or `ordered`.
    pub kind: &'static str,
    /// The sequence of the packet that completed it (reliable), or its stamp (ordered).
    pub sequence: Option<u16>,
    /// Bytes.
    pub len: usize,
    /// Whether the RC4 key was applied to it. Whether the key fits is `verdict`'s to say.
    pub decrypted: bool,
    /// The direction's encryption verdict when the message was reported: with a key applied,
    /// [`Encryption::Decrypted`] once enough bytes showed that the key fits, and
    /// [`Encryption::KeyNotJudged`] while too few bytes were seen to tell (the decrypted bytes
    /// may then be garbage).
    pub verdict: Encryption,
    /// The whole message, hex.
    pub hex: String,
    /// The first bytes, printable ASCII with `.` for the rest.
    pub ascii: String,
    /// Whether it travelled in fragments (ReliableDataFragment packets), reassembled here.
    pub fragmented: bool,
    /// The frame of the first datagram that carried it: its number in the capture when the
    /// datagram was given one ([`Dissector::dissect_frame`](crate::Dissector::dissect_frame)),
    /// else its index as in [`DatagramRecord::index`].
    pub first_frame: u64,
    /// The frame of the datagram that carried its end (the first one unless fragmented).
    pub last_frame: u64,
    /// Whether a datagram that carried it was zlib-compressed.
    pub compressed: bool,
    /// Whether it was sent encrypted: a key was applied to it, its direction looks encrypted
    /// without a key, or the keystream's place was lost after a gap.
    pub encrypted: bool,
    /// The CRC verdict of the datagrams that carried it (`ok` only when each one checked out;
    /// a datagram whose CRC failed feeds no message).
    pub crc: CrcVerdict,
}

/// Everything the dissector says about one datagram.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct DatagramRecord {
    /// Always `datagram`.
    #[cfg_attr(feature = "serde", serde(rename = "type"))]
    pub kind: &'static str,
    /// 1 for the first datagram dissected.
    pub index: u64,
    /// The capture time, seconds since the UNIX epoch.
    pub time: f64,
    /// Seconds since the first datagram dissected.
    pub elapsed: f64,
    /// The sender.
    pub src: SocketAddr,
    /// The receiver.
    pub dst: SocketAddr,
    /// The session number (as in the summaries), when followed.
    pub session: Option<usize>,
    /// Which way it travels.
    pub direction: Direction,
    /// Bytes on the wire.
    pub len: usize,
    /// The CRC check.
    pub crc: CrcCheck,
    /// Whether the body was zlib-compressed.
    pub compressed: bool,
    /// The packet's length (opcode and body) after inflating, when compressed.
    pub inflated_len: Option<usize>,
    /// The decoded packet tree.
    pub packet: Option<PacketNode>,
    /// Why the datagram could not be unframed (too short, inflate failure).
    pub error: Option<String>,
    /// Reliable packets in this datagram whose sequence was already seen.
    pub resends: usize,
    /// Application messages completed by this datagram, in order.
    pub messages: Vec<MessageRecord>,
    /// Remarks (state, limits, ack elicitors, desynchronisation).
    pub notes: Vec<String>,
}

/// Round trips from data to its first ack, in milliseconds.
#[derive(Debug, Clone, Copy, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RoundTrips {
    /// Samples.
    pub count: u64,
    /// Shortest, ms.
    pub min_ms: Option<f64>,
    /// Mean, ms.
    pub avg_ms: Option<f64>,
    /// Longest, ms.
    pub max_ms: Option<f64>,
    /// Sum of samples, internal.
    #[cfg_attr(feature = "serde", serde(skip))]
    sum_ms: f64,
}

impl RoundTrips {
    /// Adds one sample.
    pub(crate) fn add(&mut self, sample: Duration) {
        let ms = sample.as_nanos() as f64 / 1e6;
        self.count += 1;
        self.sum_ms += ms;
        self.min_ms = Some(self.min_ms.map_or(ms, |m| m.min(ms)));
        self.max_ms = Some(self.max_ms.map_or(ms, |m| m.max(ms)));
        self.avg_ms = Some(self.sum_ms / self.count as f64);
    }
}

/// Counters of one direction of a session.
#[derive(Debug, Clone, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct DirectionStats {
    /// Datagrams sent this way.
    pub datagrams: u64,
    /// Their bytes.
    pub bytes: u64,
    /// ReliableData and ReliableDataFragment packets (CRC-valid datagrams).
    pub reliable_packets: u64,
    /// Of those, resends and duplicates of a sequence already seen.
    pub resends: u64,
    /// Selective acks (Acknowledge).
    pub acks: u64,
    /// Cumulative acks (AcknowledgeAll).
    pub ack_alls: u64,
    /// Application messages delivered.
    pub messages: u64,
    /// Their bytes.
    pub message_bytes: u64,
    /// Datagrams whose CRC failed.
    pub crc_failures: u64,
    /// Packets with an unknown opcode.
    pub unknown_opcodes: u64,
    /// Packets that did not decode, framing failures, malformed reliable payloads.
    pub malformed: u64,
    /// Reliable packets or messages dropped by a limit of the dissector.
    pub dropped: u64,
    /// Gaps in this direction's reliable sequences given up as lost to the capture: the
    /// receiver acknowledged them, or they lie a window behind the newest sequence, or the
    /// capture ended (see [`CaptureGap`]). What the peers lost and resent themselves is not
    /// here: a resend fills its gap (and counts in `resends`).
    pub capture_gaps: u64,
    /// Reliable packets in those gaps: sent, and never in the capture.
    pub capture_lost_packets: u64,
    /// Fragments after a gap that could not be placed: until a whole packet marks a message
    /// boundary, whether a fragment starts a message or continues one is unknown, so it is
    /// counted here and not delivered.
    pub unplaced_fragments: u64,
    /// Their data bytes.
    pub unplaced_bytes: u64,
    /// Fragmented messages that could not be reassembled: cut by a gap, or still incomplete
    /// when the capture ended.
    pub unassembled_messages: u64,
    /// The gaps, oldest first (at most [`Limits::max_gaps_listed`](crate::Limits); `capture_gaps`
    /// counts them all).
    pub gaps: Vec<CaptureGap>,
    /// Round trips of this direction's data to the other side's acks.
    pub round_trips: RoundTrips,
    /// Whether this direction's reliable data looks encrypted, and whether a key fits it.
    pub encryption: Encryption,
}

/// A run of reliable sequences the capture lost, given up so the stream goes on.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct CaptureGap {
    /// The channel, 0 to 3.
    pub channel: u8,
    /// The first missing sequence, as sent (16 bits).
    pub first: u16,
    /// The last missing sequence, as sent.
    pub last: u16,
    /// Packets missing.
    pub packets: u64,
    /// Why it was given up: `acknowledged` (the receiver acknowledged past it, so it will not
    /// be sent again), `window` (it lies [`Limits::gap_window`](crate::Limits) or more behind the
    /// newest sequence, further than a sender may keep unacknowledged), or `capture_end`.
    pub why: &'static str,
    /// When the gap cut a fragmented message: the length its first fragment announced.
    pub cut_message_len: Option<usize>,
    /// And the bytes of it seen before the gap. The message lost at most the difference (some
    /// of it may be in the fragments after the gap, which cannot be placed).
    pub cut_message_seen: Option<usize>,
}

/// Messages and remarks the end of a capture released: the packets buffered behind a gap
/// that was never filled, delivered by [`Dissector::flush`](crate::Dissector::flush).
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct FlushRecord {
    /// Always `flush`.
    #[cfg_attr(feature = "serde", serde(rename = "type"))]
    pub kind: &'static str,
    /// The session number.
    pub session: usize,
    /// Which way the messages went.
    pub direction: Direction,
    /// Their sender.
    pub src: SocketAddr,
    /// Their receiver.
    pub dst: SocketAddr,
    /// The messages, in order.
    pub messages: Vec<MessageRecord>,
    /// Remarks (the gaps given up, messages that could not be reassembled).
    pub notes: Vec<String>,
}

/// What the dissector makes of a direction's reliable messages: a judgement of how random
/// their bytes are (a chi-square test over the first few KiB), before and after decryption.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Encryption {
    /// Too few message bytes to judge, or the bytes look random both before and after
    /// decryption (compressed or encrypted data under another key).
    #[default]
    Unknown,
    /// No key applies, and the data reads as plaintext.
    Plaintext,
    /// No key applies, but the data looks encrypted (its bytes are uniformly random): give its
    /// RC4 key.
    LooksEncrypted,
    /// A key applies, but fewer message bytes than needed to judge it (256) were seen so far:
    /// whether it fits is not known, and the bytes it decrypted may be garbage.
    KeyNotJudged,
    /// A key applies, and the data it decrypts is less random than what was sent: it fits.
    Decrypted,
    /// A key applies, but the data was already plain and decrypting it yields random bytes:
    /// the key does not fit this session, so its messages are shown as sent from then on.
    KeyDoesNotFit,
}

impl Encryption {
    /// The name used in rendered output and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Self::Unknown => "unknown",
            Self::Plaintext => "plaintext",
            Self::LooksEncrypted => "looks_encrypted",
            Self::KeyNotJudged => "key_not_judged",
            Self::Decrypted => "decrypted",
            Self::KeyDoesNotFit => "key_does_not_fit",
        }
    }
}

/// A record of the dissector's output stream: a datagram, or a session summary.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(untagged))]
pub enum Record {
    /// One datagram (its `type` field is `datagram`).
    Datagram(DatagramRecord),
    /// One session's summary (its `type` field is `session`).
    Session(SessionSummary),
    /// What the end of the capture released in one direction (its `type` field is `flush`).
    Flush(FlushRecord),
}

/// One direction of a session summary.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct DirectionSummary {
    /// Which way.
    pub direction: Direction,
    /// The sender.
    pub from: SocketAddr,
    /// The receiver.
    pub to: SocketAddr,
    /// The counters.
    #[cfg_attr(feature = "serde", serde(flatten))]
    pub stats: DirectionStats,
}

/// How a session ended.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct DisconnectSummary {
    /// The reason's name.
    pub reason: String,
    /// The reason's wire value.
    pub code: u16,
    /// Who sent the Disconnect.
    pub direction: Direction,
}

/// What the dissector saw of one session.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct SessionSummary {
    /// Always `session`.
    #[cfg_attr(feature = "serde", serde(rename = "type"))]
    pub kind: &'static str,
    /// The session number, as in datagram records.
    pub session: usize,
    /// The two addresses.
    pub addresses: [SocketAddr; 2],
    /// The side that sent SessionRequest.
    pub client: Option<SocketAddr>,
    /// The other side, when the client is known.
    pub server: Option<SocketAddr>,
    /// The session id.
    pub session_id: Option<u32>,
    /// The application protocol name from SessionRequest.
    pub application_protocol: Option<String>,
    /// Whether a SessionRequest was seen.
    pub request_seen: bool,
    /// Whether a SessionResponse was seen.
    pub response_seen: bool,
    /// The CRC seed in use (from the handshake or the options).
    pub crc_seed: Option<u32>,
    /// The CRC length in use.
    pub crc_length: u8,
    /// Whether compression is on.
    pub compression: bool,
    /// `handshake`, `options` (the command-line values), or `assumed` (defaults).
    pub framing_from: &'static str,
    /// The client's udp_length.
    pub client_udp_length: Option<u32>,
    /// The server's udp_length.
    pub server_udp_length: Option<u32>,
    /// First datagram, seconds since the first datagram dissected.
    pub first_seen: f64,
    /// Last datagram, likewise.
    pub last_seen: f64,
    /// The Disconnect, if one was seen.
    pub disconnect: Option<DisconnectSummary>,
    /// Per direction (client to server first when known).
    pub directions: Vec<DirectionSummary>,
}
