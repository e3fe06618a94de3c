//! The SOE dissector: turns datagrams into readable, serializable records.
//!
//! A [`Dissector`] follows sessions by address pair. It learns each session's framing from its
//! SessionResponse (falling back on [`DissectConfig`]), checks CRCs, inflates, decodes every
//! packet (MultiPackets and Groups recursively), and emulates an in-order receiver per
//! direction and channel: out-of-order packets are buffered, fragments reassembled, payloads
//! unbundled, unescaped and RC4-decrypted exactly as `soe-reliable`'s receiver does, so each
//! application message is reported once, in order, in the record of the datagram that
//! completed it. Memory is bounded whatever the input (see the limits below); no input panics.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use soe_crypto::{Crc32, CrcLength, Rc4};
use soe_wire::reliable::{ReliablePayload, split_first_fragment, unescape};
use soe_wire::{Channel, DisconnectReason, FrameConfig, Framer, OpCode, Packet, WireError};

/// The most sessions followed (live and ended); datagrams of further pairs are dissected without
/// session state.
const MAX_SESSIONS: usize = 65_536;
/// The most out-of-order packets buffered per direction (all channels).
const MAX_STORED: usize = 4096;
/// Packets further than this ahead of the next expected sequence are not buffered.
const WINDOW: u64 = 4096;
/// The largest reassembled message (one more byte for an escape, as the receiver allows).
const MAX_MESSAGE: usize = 4 * 1024 * 1024;
/// The most bytes buffered (out-of-order packets and partial reassemblies) across all sessions.
const MAX_BUFFERED: usize = 64 * 1024 * 1024;
/// The most data sequences per direction and channel waiting for an ack (for round trips).
const MAX_PENDING_ACKS: usize = 4096;
/// The largest body an inflate may produce.
const MAX_INFLATED: usize = 256 * 1024;
/// The most messages listed in one record (the rest are counted).
const MAX_LISTED: usize = 10_000;
/// The ASCII preview of a message covers this many bytes.
const ASCII_PREVIEW: usize = 256;
/// The tree shows this many bytes of a message in hex.
const TREE_HEX: usize = 48;
/// The CRC length assumed when neither a handshake nor an option gives one.
const DEFAULT_CRC_LENGTH: u8 = 2;

/// What to assume about sessions whose handshake is not in the input.
#[derive(Debug, Clone, Default)]
pub(crate) struct DissectConfig {
    /// The CRC seed; without it (and without a handshake) CRCs are not checked ("unknown").
    pub(crate) crc_seed: Option<u32>,
    /// The CRC trailer length, 0 to 4; default 2.
    pub(crate) crc_length: Option<u8>,
    /// Whether contextual packets carry a compression flag; default no.
    pub(crate) compression: Option<bool>,
    /// The RC4 key of reliable application data (every session, both directions).
    pub(crate) rc4_key: Option<Vec<u8>>,
}

/// Which way a datagram travels within its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Direction {
    /// From the side that sent the SessionRequest.
    ClientToServer,
    /// Towards the side that sent the SessionRequest.
    ServerToClient,
    /// No handshake seen, or both addresses are the same (hex input).
    Unknown,
}

impl Direction {
    /// The short form used in the tree.
    fn arrow(self) -> &'static str {
        match self {
            Self::ClientToServer => "client->server",
            Self::ServerToClient => "server->client",
            Self::Unknown => "direction unknown",
        }
    }
}

/// The outcome of a CRC check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum CrcVerdict {
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
#[derive(Debug, Clone, Serialize)]
pub(crate) struct CrcCheck {
    /// The outcome.
    pub(crate) verdict: CrcVerdict,
    /// The trailer length applied.
    pub(crate) length: u8,
    /// The CRC computed over the datagram, hex, when the seed is known.
    pub(crate) expected: Option<String>,
    /// The trailer found, hex.
    pub(crate) found: Option<String>,
}

/// A field value of a packet.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FieldValue {
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

impl Serialize for FieldValue {
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
pub(crate) struct Fields(pub(crate) Vec<(&'static str, FieldValue)>);

impl Fields {
    /// Adds a number.
    fn num(&mut self, name: &'static str, value: impl Into<u64>) {
        self.0.push((name, FieldValue::Num(value.into())));
    }

    /// Adds an identifier.
    fn id(&mut self, name: &'static str, value: u32) {
        self.0.push((name, FieldValue::Id(value)));
    }

    /// Adds text.
    fn text(&mut self, name: &'static str, value: impl Into<String>) {
        self.0.push((name, FieldValue::Text(value.into())));
    }

    /// Adds a flag.
    fn flag(&mut self, name: &'static str, value: bool) {
        self.0.push((name, FieldValue::Flag(value)));
    }

    /// The value of a field, if present.
    #[cfg(test)]
    pub(crate) fn get(&self, name: &str) -> Option<&FieldValue> {
        self.0.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }
}

impl Serialize for Fields {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (name, value) in &self.0 {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

/// What the receiver emulation made of one reliable data packet.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ReliableInfo {
    /// The channel, 0 to 3.
    pub(crate) channel: u8,
    /// The sequence as sent (16 bits).
    pub(crate) sequence: u16,
    /// Whether the packet is a ReliableDataFragment.
    pub(crate) fragment: bool,
    /// `whole`, `first` (a first fragment, with `total_len`), `continuation`, or `unknown` (a
    /// fragment not processed in order here: stored, resent, or not fed).
    pub(crate) position: &'static str,
    /// A first fragment's total message length.
    pub(crate) total_len: Option<u32>,
    /// The data bytes after the sequence (and total length).
    pub(crate) data_len: usize,
    /// True when this (direction, channel, sequence) was already seen: a resend of a packet
    /// delivered before, or a duplicate of one buffered out of order.
    pub(crate) resend: bool,
    /// `delivered` (in order, processed now), `stored` (ahead of a gap), `resend`, `duplicate`,
    /// `dropped` (a buffer limit), `before_start` (older than the stream start), `not_fed` (its
    /// datagram failed the CRC).
    pub(crate) status: &'static str,
    /// Whether the data is an ack elicitor (`00 19` or `00 19 01`): no message.
    pub(crate) ack_elicitor: bool,
}

/// One decoded packet, with its sub-packets.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PacketNode {
    /// The packet name (`ReliableData`, `Unreliable`, `Unknown`, `Item`...).
    pub(crate) name: &'static str,
    /// The wire opcode, absent for unreliable data and Group items.
    pub(crate) opcode: Option<u16>,
    /// Bytes, opcode included (framing excluded).
    pub(crate) len: usize,
    /// The decoded fields.
    pub(crate) fields: Fields,
    /// Reliable data details (ReliableData and ReliableDataFragment only).
    pub(crate) reliable: Option<ReliableInfo>,
    /// Sub-packets of a MultiPacket, items of a Group.
    pub(crate) children: Vec<Self>,
    /// Why the packet did not decode.
    pub(crate) error: Option<String>,
    /// Remarks.
    pub(crate) notes: Vec<String>,
}

impl PacketNode {
    /// An empty node.
    fn new(name: &'static str, opcode: Option<u16>, len: usize) -> Self {
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
#[derive(Debug, Clone, Serialize)]
pub(crate) struct MessageRecord {
    /// The reliable channel (0 for unreliable and ordered data).
    pub(crate) channel: u8,
    /// `reliable`, `unreliable` or `ordered`.
    pub(crate) kind: &'static str,
    /// The sequence of the packet that completed it (reliable), or its stamp (ordered).
    pub(crate) sequence: Option<u16>,
    /// Bytes.
    pub(crate) len: usize,
    /// Whether it was RC4-decrypted.
    pub(crate) decrypted: bool,
    /// The whole message, hex.
    pub(crate) hex: String,
    /// The first bytes, printable ASCII with `.` for the rest.
    pub(crate) ascii: String,
}

/// Everything the dissector says about one datagram.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct DatagramRecord {
    /// Always `datagram`.
    #[serde(rename = "type")]
    pub(crate) kind: &'static str,
    /// 1 for the first datagram dissected.
    pub(crate) index: u64,
    /// The capture time, seconds since the UNIX epoch.
    pub(crate) time: f64,
    /// Seconds since the first datagram dissected.
    pub(crate) elapsed: f64,
    /// The sender.
    pub(crate) src: SocketAddr,
    /// The receiver.
    pub(crate) dst: SocketAddr,
    /// The session number (as in the summaries), when followed.
    pub(crate) session: Option<usize>,
    /// Which way it travels.
    pub(crate) direction: Direction,
    /// Bytes on the wire.
    pub(crate) len: usize,
    /// The CRC check.
    pub(crate) crc: CrcCheck,
    /// Whether the body was zlib-compressed.
    pub(crate) compressed: bool,
    /// The packet's length (opcode and body) after inflating, when compressed.
    pub(crate) inflated_len: Option<usize>,
    /// The decoded packet tree.
    pub(crate) packet: Option<PacketNode>,
    /// Why the datagram could not be unframed (too short, inflate failure).
    pub(crate) error: Option<String>,
    /// Reliable packets in this datagram whose sequence was already seen.
    pub(crate) resends: usize,
    /// Application messages completed by this datagram, in order.
    pub(crate) messages: Vec<MessageRecord>,
    /// Remarks (state, limits, ack elicitors, desynchronisation).
    pub(crate) notes: Vec<String>,
}

/// Round trips from data to its first ack, in milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub(crate) struct RoundTrips {
    /// Samples.
    pub(crate) count: u64,
    /// Shortest, ms.
    pub(crate) min_ms: Option<f64>,
    /// Mean, ms.
    pub(crate) avg_ms: Option<f64>,
    /// Longest, ms.
    pub(crate) max_ms: Option<f64>,
    /// Sum of samples, internal.
    #[serde(skip)]
    sum_ms: f64,
}

impl RoundTrips {
    /// Adds one sample.
    fn add(&mut self, sample: Duration) {
        let ms = millis(sample);
        self.count += 1;
        self.sum_ms += ms;
        self.min_ms = Some(self.min_ms.map_or(ms, |m| m.min(ms)));
        self.max_ms = Some(self.max_ms.map_or(ms, |m| m.max(ms)));
        self.avg_ms = Some(self.sum_ms / self.count as f64);
    }
}

/// Counters of one direction of a session.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct DirectionStats {
    /// Datagrams sent this way.
    pub(crate) datagrams: u64,
    /// Their bytes.
    pub(crate) bytes: u64,
    /// ReliableData and ReliableDataFragment packets (CRC-valid datagrams).
    pub(crate) reliable_packets: u64,
    /// Of those, resends and duplicates of a sequence already seen.
    pub(crate) resends: u64,
    /// Selective acks (Acknowledge).
    pub(crate) acks: u64,
    /// Cumulative acks (AcknowledgeAll).
    pub(crate) ack_alls: u64,
    /// Application messages delivered.
    pub(crate) messages: u64,
    /// Their bytes.
    pub(crate) message_bytes: u64,
    /// Datagrams whose CRC failed.
    pub(crate) crc_failures: u64,
    /// Packets with an unknown opcode.
    pub(crate) unknown_opcodes: u64,
    /// Packets that did not decode, framing failures, malformed reliable payloads.
    pub(crate) malformed: u64,
    /// Reliable packets or messages dropped by a limit of the dissector.
    pub(crate) dropped: u64,
    /// Round trips of this direction's data to the other side's acks.
    pub(crate) round_trips: RoundTrips,
}

/// One direction of a session summary.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct DirectionSummary {
    /// Which way.
    pub(crate) direction: Direction,
    /// The sender.
    pub(crate) from: SocketAddr,
    /// The receiver.
    pub(crate) to: SocketAddr,
    /// The counters.
    #[serde(flatten)]
    pub(crate) stats: DirectionStats,
}

/// How a session ended.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct DisconnectSummary {
    /// The reason's name.
    pub(crate) reason: String,
    /// The reason's wire value.
    pub(crate) code: u16,
    /// Who sent the Disconnect.
    pub(crate) direction: Direction,
}

/// What the dissector saw of one session.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SessionSummary {
    /// Always `session`.
    #[serde(rename = "type")]
    pub(crate) kind: &'static str,
    /// The session number, as in datagram records.
    pub(crate) session: usize,
    /// The two addresses.
    pub(crate) addresses: [SocketAddr; 2],
    /// The side that sent SessionRequest.
    pub(crate) client: Option<SocketAddr>,
    /// The other side, when the client is known.
    pub(crate) server: Option<SocketAddr>,
    /// The session id.
    pub(crate) session_id: Option<u32>,
    /// The application protocol name from SessionRequest.
    pub(crate) application_protocol: Option<String>,
    /// Whether a SessionRequest was seen.
    pub(crate) request_seen: bool,
    /// Whether a SessionResponse was seen.
    pub(crate) response_seen: bool,
    /// The CRC seed in use (from the handshake or the options).
    pub(crate) crc_seed: Option<u32>,
    /// The CRC length in use.
    pub(crate) crc_length: u8,
    /// Whether compression is on.
    pub(crate) compression: bool,
    /// `handshake`, `options` (the command-line values), or `assumed` (defaults).
    pub(crate) framing_from: &'static str,
    /// The client's udp_length.
    pub(crate) client_udp_length: Option<u32>,
    /// The server's udp_length.
    pub(crate) server_udp_length: Option<u32>,
    /// First datagram, seconds since the first datagram dissected.
    pub(crate) first_seen: f64,
    /// Last datagram, likewise.
    pub(crate) last_seen: f64,
    /// The Disconnect, if one was seen.
    pub(crate) disconnect: Option<DisconnectSummary>,
    /// Per direction (client to server first when known).
    pub(crate) directions: Vec<DirectionSummary>,
}

/// Dissects datagrams, following sessions.
pub(crate) struct Dissector {
    /// The assumptions for sessions without a handshake.
    config: DissectConfig,
    /// Every session followed, by number minus one.
    sessions: Vec<SessionState>,
    /// The current session of each address pair (lower address first).
    by_pair: HashMap<(SocketAddr, SocketAddr), usize>,
    /// (session id, CRC seed) to session, for RemapConnection.
    by_cookie: HashMap<(u32, u32), usize>,
    /// Bytes buffered across all sessions.
    buffered: usize,
    /// Datagrams dissected.
    count: u64,
    /// The first datagram's time.
    first_time: Option<Duration>,
    /// Framers without CRC, for stripping the flag and inflating: compression off, on.
    framers: [Framer; 2],
}

/// The framing a session's contextual packets use, as learned or assumed.
#[derive(Debug, Clone, Copy)]
struct Framing {
    /// The CRC seed, when known.
    seed: Option<u32>,
    /// The CRC trailer length.
    crc_length: u8,
    /// Whether contextual packets carry a compression flag.
    compression: bool,
}

/// One session's state.
struct SessionState {
    /// The session number, 1 for the first (0 for a stateless one).
    number: usize,
    /// The address pair, lower first.
    addrs: (SocketAddr, SocketAddr),
    /// The side that sent SessionRequest.
    client: Option<SocketAddr>,
    /// The session id.
    session_id: Option<u32>,
    /// The application protocol name.
    protocol: Option<String>,
    /// The client's udp_length.
    client_udp_length: Option<u32>,
    /// The server's udp_length.
    server_udp_length: Option<u32>,
    /// Whether a SessionRequest was seen.
    request_seen: bool,
    /// From SessionResponse.
    learned: Option<Framing>,
    /// The Disconnect seen, if any.
    disconnect: Option<DisconnectSummary>,
    /// The first datagram's time.
    first: Duration,
    /// The last datagram's time.
    last: Duration,
    /// Per sender: 0 is the client (or the lower address while the client is unknown).
    sides: [Side; 2],
}

/// What one side sends, and the receiver state for it.
#[derive(Default)]
struct Side {
    /// The counters of what this side sends.
    stats: DirectionStats,
    /// The receiver emulation per channel, made on first use.
    channels: [Option<Box<ChannelRx>>; 4],
    /// Out-of-order packets buffered, all channels.
    stored: usize,
    /// The newest Ordered stamp delivered.
    ordered_newest: Option<u16>,
}

/// A packet buffered ahead of a gap.
struct Stored {
    /// Whether it is a ReliableDataFragment.
    fragment: bool,
    /// Its data after the sequence.
    data: Vec<u8>,
}

/// A fragmented message in progress.
enum Reassembly {
    /// Collecting its bytes.
    Collecting {
        /// The message length the first fragment announced.
        total: usize,
        /// The bytes so far.
        buf: Vec<u8>,
    },
    /// Counting its bytes only (over a limit), to stay in step with the fragments.
    Skipping {
        /// The message length the first fragment announced.
        total: usize,
        /// The bytes seen so far.
        seen: usize,
    },
}

/// The receiver emulation of one direction and channel.
struct ChannelRx {
    /// The channel number.
    channel: u8,
    /// Whether the stream start is set.
    synced: bool,
    /// The first sequence of the stream (0 after a handshake).
    start: u64,
    /// The next sequence to process.
    expected: u64,
    /// The highest sequence seen.
    highest: Option<u64>,
    /// Packets buffered ahead of `expected`, by full sequence.
    slots: BTreeMap<u64, Stored>,
    /// A fragmented message in progress.
    reassembly: Option<Reassembly>,
    /// The RC4 state of this direction and channel.
    cipher: Option<Rc4>,
    /// First appearance of each sequence not yet acknowledged.
    pending: BTreeMap<u64, Duration>,
    /// Everything up to this was acknowledged cumulatively.
    acked_through: Option<u64>,
}

/// Where a packet sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Parent {
    /// Directly in the datagram.
    Top,
    /// A MultiPacket sub-packet.
    Multi,
    /// A Group item.
    Group,
}

/// The full-width sequence congruent to `wire` nearest to `reference`.
fn expand(reference: u64, wire: u16) -> Option<u64> {
    let delta = wire.wrapping_sub(reference as u16) as i16;
    reference.checked_add_signed(i64::from(delta))
}

/// Whether a reassembled payload is an ack elicitor.
fn is_elicitor(payload: &[u8]) -> bool {
    matches!(payload, [0x00, 0x19] | [0x00, 0x19, 0x01])
}

/// The messages of a reassembled payload, as `soe-reliable`'s receiver finds them: a Group's
/// items unescaped, or the payload unescaped; on a channel without encryption a payload that
/// starts `00 19` but is no well-formed, non-empty Group is one message.
fn payload_messages(payload: &[u8], plaintext: bool) -> Result<Vec<&[u8]>, WireError> {
    if is_elicitor(payload) {
        return Ok(Vec::new());
    }
    match ReliablePayload::decode(payload)? {
        ReliablePayload::Message(message) => Ok(vec![message]),
        ReliablePayload::Group(group) => {
            let mut items = Vec::new();
            let walked = group.iter().try_for_each(|item| {
                items.push(unescape(item?)?);
                Ok::<(), WireError>(())
            });
            match walked {
                Ok(()) if !items.is_empty() => Ok(items),
                _ if plaintext => Ok(vec![payload]),
                Ok(()) => Ok(items),
                Err(e) => Err(e),
            }
        }
    }
}

/// The name of an opcode.
fn opcode_name(op: OpCode) -> &'static str {
    match op {
        OpCode::SessionRequest => "SessionRequest",
        OpCode::SessionResponse => "SessionResponse",
        OpCode::MultiPacket => "MultiPacket",
        OpCode::Disconnect => "Disconnect",
        OpCode::Heartbeat => "Heartbeat",
        OpCode::NetStatusRequest => "NetStatusRequest",
        OpCode::NetStatusResponse => "NetStatusResponse",
        OpCode::ReliableData(_) => "ReliableData",
        OpCode::ReliableDataFragment(_) => "ReliableDataFragment",
        OpCode::Acknowledge(_) => "Acknowledge",
        OpCode::AcknowledgeAll(_) => "AcknowledgeAll",
        OpCode::Group => "Group",
        OpCode::Ordered => "Ordered",
        OpCode::Ordered2 => "Ordered2",
        OpCode::PortAlive => "PortAlive",
        OpCode::UnknownSender => "UnknownSender",
        OpCode::RemapConnection => "RemapConnection",
        _ => "Unknown",
    }
}

/// The name of a disconnect reason.
fn reason_name(reason: DisconnectReason) -> String {
    match reason {
        DisconnectReason::Other(n) => format!("Other({n})"),
        other => format!("{other:?}"),
    }
}

/// The opcode of a packet's first two bytes, when it starts with zero.
fn raw_opcode(bytes: &[u8]) -> Option<u16> {
    match bytes {
        [0, lo, ..] => Some(u16::from(*lo)),
        _ => None,
    }
}

/// Whether a datagram is a contextless packet (no flag, no CRC).
fn is_contextless(datagram: &[u8]) -> bool {
    matches!(datagram, [0, lo, ..]
        if OpCode::from_u16(u16::from(*lo)).is_some_and(OpCode::is_contextless))
}

/// Printable ASCII of the first bytes, `.` for the rest.
fn ascii_preview(bytes: &[u8]) -> String {
    bytes
        .iter()
        .take(ASCII_PREVIEW)
        .map(|&b| {
            if (0x20..0x7F).contains(&b) {
                char::from(b)
            } else {
                '.'
            }
        })
        .collect()
}

/// A CRC value as hex of its trailer width.
fn crc_hex(value: u32, len: u8) -> String {
    format!("{value:0width$x}", width = usize::from(len) * 2)
}

/// Seconds as a float.
fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// Milliseconds as a float.
fn millis(d: Duration) -> f64 {
    d.as_nanos() as f64 / 1e6
}

/// A Heartbeat or selective Acknowledge sent without any CRC (h1z1-server), re-encoded as
/// `opcode | body`.
fn crcless(framer: &Framer, datagram: &[u8]) -> Option<Vec<u8>> {
    framer.open_crcless_packet(datagram).map(|p| {
        let mut bytes = Vec::new();
        p.encode(&mut bytes);
        bytes
    })
}

impl ChannelRx {
    /// A receiver for `channel`, decrypting with `key` when given.
    fn new(channel: u8, key: Option<&[u8]>) -> Self {
        Self {
            channel,
            synced: false,
            start: 0,
            expected: 0,
            highest: None,
            slots: BTreeMap::new(),
            reassembly: None,
            cipher: key.and_then(|k| Rc4::new(k).ok()),
            pending: BTreeMap::new(),
            acked_through: None,
        }
    }

    /// Bytes this receiver holds (counted against the global budget).
    fn held(&self) -> usize {
        let slots: usize = self.slots.values().map(|s| s.data.len()).sum();
        let partial = match &self.reassembly {
            Some(Reassembly::Collecting { buf, .. }) => buf.len(),
            _ => 0,
        };
        slots + partial
    }

    /// Records the first appearance of `sequence` for round trips.
    fn note_sent(&mut self, sequence: u64, time: Duration) {
        if self.acked_through.is_some_and(|a| sequence <= a) {
            return;
        }
        if self.pending.len() >= MAX_PENDING_ACKS && !self.pending.contains_key(&sequence) {
            self.pending.pop_first();
        }
        self.pending.entry(sequence).or_insert(time);
    }
}

impl SessionState {
    /// A fresh session for an address pair.
    fn new(number: usize, addrs: (SocketAddr, SocketAddr), time: Duration) -> Self {
        Self {
            number,
            addrs,
            client: None,
            session_id: None,
            protocol: None,
            client_udp_length: None,
            server_udp_length: None,
            request_seen: false,
            learned: None,
            disconnect: None,
            first: time,
            last: time,
            sides: [Side::default(), Side::default()],
        }
    }

    /// Bytes held by every receiver of this session.
    fn held(&self) -> usize {
        self.sides
            .iter()
            .flat_map(|s| s.channels.iter().flatten())
            .map(|c| c.held())
            .sum()
    }

    /// Frees the receivers' buffers, returning their bytes to the budget.
    fn release(&mut self, budget: &mut usize) {
        *budget = budget.saturating_sub(self.held());
        for side in &mut self.sides {
            for ch in side.channels.iter_mut().flatten() {
                ch.slots.clear();
                ch.reassembly = None;
                ch.pending.clear();
            }
            side.stored = 0;
        }
    }

    /// The side index of a sender.
    fn side_of(&self, src: SocketAddr) -> usize {
        match self.client {
            Some(client) => usize::from(src != client),
            None => usize::from(src != self.addrs.0),
        }
    }

    /// Sets the client, keeping side 0 the client's.
    fn set_client(&mut self, client: SocketAddr) {
        if self.client.is_none() && client != self.addrs.0 {
            self.sides.swap(0, 1);
        }
        self.client = Some(client);
    }

    /// The direction of a datagram from `src` to `dst`.
    fn direction(&self, src: SocketAddr, dst: SocketAddr) -> Direction {
        match self.client {
            _ if src == dst => Direction::Unknown,
            Some(c) if c == src => Direction::ClientToServer,
            Some(_) => Direction::ServerToClient,
            None => Direction::Unknown,
        }
    }

    /// Whether the handshake was seen (the streams then start at sequence 0).
    fn handshake(&self) -> bool {
        self.request_seen || self.learned.is_some()
    }
}

impl Dissector {
    /// A dissector with the given assumptions.
    pub(crate) fn new(config: DissectConfig) -> Self {
        let framer = |compression| {
            Framer::new(
                FrameConfig::new(0)
                    .with_crc_length(CrcLength::NONE)
                    .with_compression(compression)
                    .with_max_inflated(MAX_INFLATED),
            )
        };
        Self {
            config,
            sessions: Vec::new(),
            by_pair: HashMap::new(),
            by_cookie: HashMap::new(),
            buffered: 0,
            count: 0,
            first_time: None,
            framers: [framer(false), framer(true)],
        }
    }

    /// The framing assumed for sessions without a handshake.
    fn assumed_framing(&self) -> Framing {
        Framing {
            seed: self.config.crc_seed,
            crc_length: self.config.crc_length.unwrap_or(DEFAULT_CRC_LENGTH),
            compression: self.config.compression.unwrap_or(false),
        }
    }

    /// Dissects one datagram. `time`: its capture timestamp; `src`/`dst`: its addresses.
    pub(crate) fn dissect(
        &mut self,
        time: Duration,
        src: SocketAddr,
        dst: SocketAddr,
        datagram: &[u8],
    ) -> DatagramRecord {
        self.count += 1;
        let first = *self.first_time.get_or_insert(time);
        let mut notes = Vec::new();
        let key = if src <= dst { (src, dst) } else { (dst, src) };
        let contextless = if is_contextless(datagram) {
            Packet::decode(datagram).ok()
        } else {
            None
        };
        let slot = self.session_for(key, src, time, contextless.as_ref(), &mut notes);

        let assumed = self.assumed_framing();
        let key_bytes = self.config.rc4_key.clone();
        let Self {
            sessions,
            framers,
            buffered,
            ..
        } = self;
        let mut temp;
        let session = match slot.and_then(|i| sessions.get_mut(i)) {
            Some(s) => s,
            None => {
                temp = SessionState::new(0, key, time);
                &mut temp
            }
        };
        session.last = session.last.max(time);
        let direction_before = session.direction(src, dst);
        let side = session.side_of(src);
        if let Some(s) = session.sides.get_mut(side) {
            s.stats.datagrams += 1;
            s.stats.bytes += datagram.len() as u64;
        }

        // Framing: CRC, flag, inflate.
        let framing = session.learned.unwrap_or(assumed);
        let refusal = session.request_seen
            && session.learned.is_none()
            && session.client.is_some_and(|c| c != src)
            && matches!(datagram, [0, 0x05, _, _, _, _, _, _]);
        let unframed = if refusal {
            notes.push(
                "a refusal: a Disconnect sent before any SessionResponse carries no flag and no CRC"
                    .to_owned(),
            );
            Unframed::plain(datagram, CrcVerdict::None)
        } else if contextless.is_some() || is_contextless(datagram) {
            Unframed::plain(datagram, CrcVerdict::None)
        } else {
            unframe(framers, framing, datagram, &mut notes)
        };
        if unframed.crc.verdict == CrcVerdict::Bad {
            if let Some(s) = session.sides.get_mut(side) {
                s.stats.crc_failures += 1;
            }
            notes.push("bad CRC: decoded best-effort, not fed to reassembly or decryption".into());
        }
        if unframed.error.is_some() && unframed.crc.verdict != CrcVerdict::Bad {
            // A framing failure behind a good (or unknown) CRC: corrupt, not noise.
            if let Some(s) = session.sides.get_mut(side) {
                s.stats.malformed += 1;
            }
        }

        let mut work = Work {
            session,
            side,
            src,
            dst,
            time,
            feed: unframed.feed,
            key: key_bytes.as_deref(),
            budget: buffered,
            messages: Vec::new(),
            omitted: 0,
            notes,
            resends: 0,
            learned: None,
        };
        let packet = match unframed.bytes.as_deref() {
            Some(bytes) => Some(work.node(bytes, Parent::Top)),
            // Not unframed: name the opcode at least.
            None => raw_opcode(datagram).map(|op| {
                let name = OpCode::from_u16(op).map_or("Unknown", opcode_name);
                PacketNode::new(name, Some(op), datagram.len())
            }),
        };
        let Work {
            messages,
            omitted,
            mut notes,
            resends,
            learned,
            ..
        } = work;
        if omitted > 0 {
            notes.push(format!(
                "{omitted} more messages completed here are not listed (limit {MAX_LISTED})"
            ));
        }
        let direction = match session.direction(src, dst) {
            Direction::Unknown => direction_before,
            d => d,
        };
        let number = (session.number > 0).then_some(session.number);
        if slot.is_none() {
            session.release(buffered);
        }
        if let (Some(cookie), Some(i)) = (learned, slot) {
            if self.by_cookie.len() < MAX_SESSIONS || self.by_cookie.contains_key(&cookie) {
                self.by_cookie.insert(cookie, i);
            }
        }
        DatagramRecord {
            kind: "datagram",
            index: self.count,
            time: secs(time),
            elapsed: secs(time.saturating_sub(first)),
            src,
            dst,
            session: number,
            direction,
            len: datagram.len(),
            crc: unframed.crc,
            compressed: unframed.compressed,
            inflated_len: unframed.inflated_len,
            packet,
            error: unframed.error,
            resends,
            messages,
            notes,
        }
    }

    /// Finds, creates, resets or moves the session of an address pair; `None` when the table
    /// is full (the datagram is dissected without state).
    fn session_for(
        &mut self,
        key: (SocketAddr, SocketAddr),
        src: SocketAddr,
        time: Duration,
        contextless: Option<&Packet<'_>>,
        notes: &mut Vec<String>,
    ) -> Option<usize> {
        let existing = self.by_pair.get(&key).copied();
        match (contextless, existing) {
            // A SessionRequest with a new session id starts a new session on the pair.
            (Some(Packet::SessionRequest(r)), Some(i)) => {
                let same = self
                    .sessions
                    .get(i)
                    .is_some_and(|s| s.session_id == Some(r.session_id) && s.client == Some(src));
                if same {
                    return Some(i);
                }
                if let Some(old) = self.sessions.get_mut(i) {
                    old.release(&mut self.buffered);
                }
                notes.push("a new SessionRequest on this address pair: a new session".into());
                if self.sessions.len() < MAX_SESSIONS {
                    return Some(self.create(key, time));
                }
                notes.push(format!(
                    "the session table is full ({MAX_SESSIONS}): the previous session's summary is replaced"
                ));
                let number = self.sessions.get(i).map_or(0, |s| s.number);
                if let Some(s) = self.sessions.get_mut(i) {
                    *s = SessionState::new(number, key, time);
                }
                Some(i)
            }
            (_, Some(i)) => Some(i),
            // RemapConnection from a new address: the session it names moves here.
            (Some(Packet::RemapConnection(r)), None) => {
                match self.by_cookie.get(&(r.session_id, r.crc_seed)).copied() {
                    Some(i) => {
                        if let Some(s) = self.sessions.get_mut(i) {
                            let old = s.addrs;
                            notes.push(format!(
                                "RemapConnection: session {} moves from {} <-> {} to this pair",
                                s.number, old.0, old.1
                            ));
                            self.by_pair.remove(&old);
                            s.addrs = key;
                            s.client = Some(src);
                        }
                        self.by_pair.insert(key, i);
                        Some(i)
                    }
                    None => self.create_or_full(key, time, notes),
                }
            }
            (_, None) => self.create_or_full(key, time, notes),
        }
    }

    /// A new session for the pair, or `None` (with a note) when the table is full.
    fn create_or_full(
        &mut self,
        key: (SocketAddr, SocketAddr),
        time: Duration,
        notes: &mut Vec<String>,
    ) -> Option<usize> {
        if self.sessions.len() < MAX_SESSIONS {
            Some(self.create(key, time))
        } else {
            notes.push(format!(
                "the session table is full ({MAX_SESSIONS} sessions): dissected without session state"
            ));
            None
        }
    }

    /// Appends a new session for the pair.
    fn create(&mut self, key: (SocketAddr, SocketAddr), time: Duration) -> usize {
        let index = self.sessions.len();
        self.sessions.push(SessionState::new(index + 1, key, time));
        self.by_pair.insert(key, index);
        index
    }

    /// A summary of every session, in the order they started.
    pub(crate) fn summaries(&self) -> Vec<SessionSummary> {
        let first = self.first_time.unwrap_or_default();
        let assumed = self.assumed_framing();
        self.sessions
            .iter()
            .map(|s| {
                let framing = s.learned.unwrap_or(assumed);
                let framing_from = if s.learned.is_some() {
                    "handshake"
                } else if self.config.crc_seed.is_some()
                    || self.config.crc_length.is_some()
                    || self.config.compression.is_some()
                {
                    "options"
                } else {
                    "assumed"
                };
                let server = s
                    .client
                    .map(|c| if c == s.addrs.0 { s.addrs.1 } else { s.addrs.0 });
                let (from0, to0) = match (s.client, server) {
                    (Some(c), Some(sv)) => (c, sv),
                    _ => s.addrs,
                };
                let same = s.addrs.0 == s.addrs.1;
                let mut directions = Vec::new();
                for (i, side) in s.sides.iter().enumerate() {
                    if same && i == 1 {
                        break;
                    }
                    let (from, to) = if i == 0 { (from0, to0) } else { (to0, from0) };
                    let direction = match (s.client, same, i) {
                        (Some(_), false, 0) => Direction::ClientToServer,
                        (Some(_), false, _) => Direction::ServerToClient,
                        _ => Direction::Unknown,
                    };
                    directions.push(DirectionSummary {
                        direction,
                        from,
                        to,
                        stats: side.stats.clone(),
                    });
                }
                SessionSummary {
                    kind: "session",
                    session: s.number,
                    addresses: [s.addrs.0, s.addrs.1],
                    client: s.client,
                    server,
                    session_id: s.session_id,
                    application_protocol: s.protocol.clone(),
                    request_seen: s.request_seen,
                    response_seen: s.learned.is_some(),
                    crc_seed: framing.seed,
                    crc_length: framing.crc_length,
                    compression: framing.compression,
                    framing_from,
                    client_udp_length: s.client_udp_length,
                    server_udp_length: s.server_udp_length,
                    first_seen: secs(s.first.saturating_sub(first)),
                    last_seen: secs(s.last.saturating_sub(first)),
                    disconnect: s.disconnect.clone(),
                    directions,
                }
            })
            .collect()
    }
}

/// A datagram with its framing removed.
struct Unframed {
    /// The CRC check.
    crc: CrcCheck,
    /// Whether the body was zlib-compressed.
    compressed: bool,
    /// The inflated length, when compressed.
    inflated_len: Option<usize>,
    /// `opcode | body`, when it could be unframed.
    bytes: Option<Vec<u8>>,
    /// Why unframing failed.
    error: Option<String>,
    /// Whether its packets update the session state.
    feed: bool,
}

impl Unframed {
    /// A datagram without framing.
    fn plain(datagram: &[u8], verdict: CrcVerdict) -> Self {
        Self {
            crc: CrcCheck {
                verdict,
                length: 0,
                expected: None,
                found: None,
            },
            compressed: false,
            inflated_len: None,
            bytes: Some(datagram.to_vec()),
            error: None,
            feed: true,
        }
    }
}

/// Checks the CRC of a contextual datagram and strips its framing.
fn unframe(
    framers: &mut [Framer; 2],
    framing: Framing,
    datagram: &[u8],
    notes: &mut Vec<String>,
) -> Unframed {
    let crc_length = CrcLength::new(framing.crc_length).unwrap_or_else(|| {
        notes.push(format!(
            "CRC length {} is invalid (0 to 4): 2 assumed",
            framing.crc_length
        ));
        CrcLength::TWO
    });
    let crc_len = crc_length.get();
    let length = crc_len as u8;
    let zero_first = datagram.first() == Some(&0);
    let head = if zero_first {
        2 + usize::from(framing.compression)
    } else {
        1
    };
    let framer = &mut framers[usize::from(framing.compression)];
    let mut out = Unframed {
        crc: CrcCheck {
            verdict: CrcVerdict::Unknown,
            length,
            expected: None,
            found: None,
        },
        compressed: false,
        inflated_len: None,
        bytes: None,
        error: None,
        feed: false,
    };
    let short = datagram.len() < head + crc_len;
    let inner = if short {
        out.error = Some(format!(
            "a datagram of {} bytes is shorter than its framing ({} bytes: opcode{}, {crc_len}-byte CRC)",
            datagram.len(),
            head + crc_len,
            if framing.compression && zero_first {
                ", compression flag"
            } else {
                ""
            }
        ));
        out.crc.verdict = if framing.seed.is_some() {
            CrcVerdict::Bad
        } else {
            CrcVerdict::Unknown
        };
        None
    } else {
        let (inner, trailer) = datagram.split_at(datagram.len() - crc_len);
        if crc_len == 0 {
            out.crc.verdict = CrcVerdict::None;
        } else {
            let found = crc_length.read(trailer);
            out.crc.found = Some(crc_hex(found, length));
            if let Some(seed) = framing.seed {
                let expected = crc_length.truncate(Crc32::new(seed).checksum(inner));
                out.crc.expected = Some(crc_hex(expected, length));
                out.crc.verdict = if expected == found {
                    CrcVerdict::Ok
                } else {
                    CrcVerdict::Bad
                };
            }
        }
        Some(inner)
    };

    if matches!(out.crc.verdict, CrcVerdict::Bad) || (short && framing.seed.is_none()) {
        if let Some(bytes) = crcless(framer, datagram) {
            out.crc = CrcCheck {
                verdict: CrcVerdict::Missing,
                length: 0,
                expected: None,
                found: None,
            };
            out.error = None;
            out.bytes = Some(bytes);
            out.feed = true;
            notes.push(
                "no CRC trailer: a Heartbeat or Acknowledge sent without CRC (as h1z1-server does), accepted by our sessions"
                    .into(),
            );
            return out;
        }
    }
    let Some(inner) = inner else {
        return out;
    };
    match framer.open(inner) {
        Ok(bytes) => {
            out.compressed = zero_first && framing.compression && inner.get(2) != Some(&0);
            if out.compressed {
                out.inflated_len = Some(bytes.len());
            }
            out.bytes = Some(bytes.to_vec());
            out.feed = out.crc.verdict != CrcVerdict::Bad;
        }
        Err(e) => {
            out.error = Some(format!("cannot unframe: {e}"));
        }
    }
    // With the seed unknown, a packet that does not decode may still be a CRC-less quirk.
    if out.crc.verdict == CrcVerdict::Unknown
        && out
            .bytes
            .as_deref()
            .is_none_or(|b| Packet::decode(b).is_err())
    {
        if let Some(bytes) = crcless(framer, datagram) {
            out.crc.verdict = CrcVerdict::Missing;
            out.crc.length = 0;
            out.crc.found = None;
            out.error = None;
            out.bytes = Some(bytes);
            out.feed = true;
            notes.push(
                "read as a Heartbeat or Acknowledge sent without CRC (as h1z1-server does)".into(),
            );
        }
    }
    out
}

/// The state one datagram's packets are dissected against.
struct Work<'a> {
    /// The session the datagram belongs to.
    session: &'a mut SessionState,
    /// The sender's side index.
    side: usize,
    /// The sender.
    src: SocketAddr,
    /// The receiver.
    dst: SocketAddr,
    /// The capture time.
    time: Duration,
    /// Whether packets update state (false after a bad CRC).
    feed: bool,
    /// The RC4 key.
    key: Option<&'a [u8]>,
    /// Bytes buffered across all sessions.
    budget: &'a mut usize,
    /// Messages completed so far.
    messages: Vec<MessageRecord>,
    /// Messages completed but not listed (over the limit).
    omitted: u64,
    /// Remarks.
    notes: Vec<String>,
    /// Reliable packets flagged as resends.
    resends: usize,
    /// A (session id, CRC seed) learned from a SessionResponse.
    learned: Option<(u32, u32)>,
}

impl Work<'_> {
    /// The sending side's counters.
    fn stats(&mut self) -> &mut DirectionStats {
        let side = self.side.min(1);
        &mut self.session.sides[side].stats
    }

    /// Reports one application message.
    fn message(
        &mut self,
        channel: u8,
        kind: &'static str,
        sequence: Option<u16>,
        bytes: Vec<u8>,
        decrypted: bool,
    ) {
        report_message(
            &mut self.session.sides[self.side.min(1)].stats,
            &mut self.messages,
            &mut self.omitted,
            MessageRecord {
                channel,
                kind,
                sequence,
                len: bytes.len(),
                decrypted,
                hex: hex::encode(&bytes),
                ascii: ascii_preview(&bytes),
            },
        );
    }

    /// Decodes one packet (`opcode | body`) into a node, updating state when fed.
    fn node(&mut self, bytes: &[u8], parent: Parent) -> PacketNode {
        let packet = match Packet::decode(bytes) {
            Ok(p) => p,
            Err(e) => return self.undecodable(bytes, &e),
        };
        let opcode = packet.opcode().map(OpCode::to_u16);
        let name = match packet {
            Packet::Unreliable(_) => "Unreliable",
            _ => packet.opcode().map_or("Unknown", opcode_name),
        };
        let mut node = PacketNode::new(name, opcode, bytes.len());
        if parent != Parent::Top && packet.opcode().is_some_and(OpCode::is_contextless) {
            node.notes
                .push("a contextless packet inside a bundle: ignored by sessions".into());
        }
        match packet {
            Packet::SessionRequest(r) => {
                node.fields.num("protocol_version", r.protocol_version);
                node.fields.id("session_id", r.session_id);
                node.fields.num("udp_length", r.udp_length);
                node.fields.text(
                    "application_protocol",
                    String::from_utf8_lossy(r.application_protocol),
                );
                if parent == Parent::Top && self.feed {
                    let s = &mut *self.session;
                    s.set_client(self.src);
                    if s.session_id.is_some_and(|id| id == r.session_id) && s.request_seen {
                        node.notes
                            .push("a repeated SessionRequest (same session id)".into());
                    }
                    s.request_seen = true;
                    s.session_id = Some(r.session_id);
                    s.protocol = Some(String::from_utf8_lossy(r.application_protocol).into());
                    s.client_udp_length = Some(r.udp_length);
                }
            }
            Packet::SessionResponse(r) => {
                node.fields.id("session_id", r.session_id);
                node.fields.id("crc_seed", r.crc_seed);
                node.fields.num("crc_length", r.crc_length);
                node.fields.num("compression", r.compression);
                node.fields.num("encryption_method", r.encryption_method);
                node.fields.num("udp_length", r.udp_length);
                node.fields.num("protocol_version", r.protocol_version);
                if r.crc_length > 4 {
                    node.notes.push(format!(
                        "CRC length {} is invalid (0 to 4): sessions refuse it",
                        r.crc_length
                    ));
                }
                if parent == Parent::Top && self.feed {
                    self.learn(&r, &mut node);
                }
            }
            Packet::MultiPacket(m) => {
                if parent != Parent::Top {
                    return self.nested(node, "MultiPacket", parent);
                }
                for sub in m.iter() {
                    match sub {
                        Ok(sub) => {
                            let child = self.node(sub, Parent::Multi);
                            node.children.push(child);
                        }
                        Err(e) => {
                            node.children.push(self.bad_entry("sub-packet", &e));
                        }
                    }
                }
                node.fields.num("sub_packets", node.children.len() as u64);
            }
            Packet::Disconnect(d) => {
                node.fields.id("session_id", d.session_id);
                node.fields.text("reason", reason_name(d.reason));
                node.fields.num("reason_code", d.reason.to_u16());
                if self.feed {
                    let direction = self.session.direction(self.src, self.dst);
                    self.session.disconnect = Some(DisconnectSummary {
                        reason: reason_name(d.reason),
                        code: d.reason.to_u16(),
                        direction,
                    });
                }
            }
            Packet::Heartbeat | Packet::UnknownSender => {}
            Packet::NetStatusRequest(r) => {
                node.fields.num("client_tick", r.client_tick);
                node.fields.num("last_update_ms", r.last_update_ms);
                node.fields.num("average_update_ms", r.average_update_ms);
                node.fields.num("shortest_update_ms", r.shortest_update_ms);
                node.fields.num("longest_update_ms", r.longest_update_ms);
                node.fields
                    .num("last_server_update_ms", r.last_server_update_ms);
                node.fields.num("packets_sent", r.packets_sent);
                node.fields.num("packets_received", r.packets_received);
            }
            Packet::NetStatusResponse(r) => {
                node.fields.num("client_tick", r.client_tick);
                node.fields.num("server_tick", r.server_tick);
                node.fields
                    .num("client_packets_sent", r.client_packets_sent);
                node.fields
                    .num("client_packets_received", r.client_packets_received);
                node.fields
                    .num("server_packets_sent", r.server_packets_sent);
                node.fields
                    .num("server_packets_received", r.server_packets_received);
            }
            Packet::ReliableData(d) => {
                if let Some(body) = d.data.strip_prefix(&[0x00, 0x19][..]) {
                    if !is_elicitor(d.data) {
                        let items = soe_wire::Group::new(body).iter().count();
                        node.fields.num("group_items", items as u64);
                    }
                }
                node.reliable = Some(self.reliable(d.channel, d.sequence, d.data, false));
            }
            Packet::ReliableDataFragment(d) => {
                node.reliable = Some(self.reliable(d.channel, d.sequence, d.data, true));
            }
            Packet::Acknowledge(a) => {
                node.fields.num("channel", a.channel.index() as u64);
                node.fields.num("sequence", a.sequence);
                if self.feed {
                    self.stats().acks += 1;
                    self.ack(a.channel, a.sequence, false, &mut node);
                }
            }
            Packet::AcknowledgeAll(a) => {
                node.fields.num("channel", a.channel.index() as u64);
                node.fields.num("sequence", a.sequence);
                if self.feed {
                    self.stats().ack_alls += 1;
                    self.ack(a.channel, a.sequence, true, &mut node);
                }
            }
            Packet::Group(g) => {
                if parent != Parent::Top {
                    return self.nested(node, "Group", parent);
                }
                for item in g.iter() {
                    match item {
                        Ok(item) if item.first() == Some(&0) => {
                            let child = self.node(item, Parent::Group);
                            node.children.push(child);
                        }
                        Ok(item) => {
                            let mut child = PacketNode::new("Item", None, item.len());
                            child.notes.push("unreliable message".into());
                            node.children.push(child);
                            if self.feed {
                                self.message(0, "unreliable", None, item.to_vec(), false);
                            }
                        }
                        Err(e) => {
                            node.children.push(self.bad_entry("item", &e));
                        }
                    }
                }
                node.fields.num("items", node.children.len() as u64);
            }
            Packet::Ordered(o) | Packet::Ordered2(o) => {
                node.fields.num("sequence", o.sequence);
                node.fields.num("data_len", o.data.len() as u64);
                if self.feed {
                    let side = &mut self.session.sides[self.side.min(1)];
                    let newer = side.ordered_newest.is_none_or(|newest| {
                        let ahead = o.sequence.wrapping_sub(newest);
                        ahead != 0 && ahead < 0x8000
                    });
                    if newer {
                        side.ordered_newest = Some(o.sequence);
                        self.message(0, "ordered", Some(o.sequence), o.data.to_vec(), false);
                    } else {
                        node.fields.flag("stale", true);
                        node.notes
                            .push("stale: not newer than one delivered, so dropped".into());
                    }
                }
            }
            Packet::PortAlive(body) => {
                node.fields.num("body_len", body.len() as u64);
            }
            Packet::RemapConnection(r) => {
                node.fields.id("session_id", r.session_id);
                node.fields.id("crc_seed", r.crc_seed);
            }
            Packet::Unreliable(data) if self.feed => {
                self.message(0, "unreliable", None, data.to_vec(), false);
            }
            _ => {}
        }
        node
    }

    /// A node for bytes that did not decode.
    fn undecodable(&mut self, bytes: &[u8], error: &WireError) -> PacketNode {
        let opcode = raw_opcode(bytes);
        let name = match error {
            WireError::UnknownOpcode(_) => "Unknown",
            _ => opcode
                .and_then(OpCode::from_u16)
                .map_or("Malformed", opcode_name),
        };
        let mut node = PacketNode::new(name, opcode, bytes.len());
        node.error = Some(error.to_string());
        if self.feed {
            match error {
                WireError::UnknownOpcode(_) => self.stats().unknown_opcodes += 1,
                _ => self.stats().malformed += 1,
            }
        }
        node
    }

    /// A node for a malformed bundle entry.
    fn bad_entry(&mut self, what: &str, error: &WireError) -> PacketNode {
        if self.feed {
            self.stats().malformed += 1;
        }
        let mut node = PacketNode::new("Malformed", None, 0);
        node.error = Some(format!("malformed {what}: {error}"));
        node
    }

    /// A bundle inside a bundle: shown, not entered (sessions end with CorruptPacket).
    fn nested(&mut self, mut node: PacketNode, what: &str, parent: Parent) -> PacketNode {
        if self.feed {
            self.stats().malformed += 1;
        }
        let inside = if parent == Parent::Multi {
            "MultiPacket"
        } else {
            "Group"
        };
        node.error = Some(format!(
            "a {what} inside a {inside}: not allowed (sessions end with CorruptPacket)"
        ));
        node
    }

    /// Learns a session's framing from its SessionResponse.
    fn learn(&mut self, r: &soe_wire::SessionResponse, node: &mut PacketNode) {
        let s = &mut *self.session;
        if s.client.is_none() {
            s.set_client(self.dst);
        }
        if s.session_id.is_some_and(|id| id != r.session_id) {
            node.notes.push(format!(
                "the session id differs from the SessionRequest's ({:#010x})",
                s.session_id.unwrap_or_default()
            ));
        }
        s.session_id = s.session_id.or(Some(r.session_id));
        s.server_udp_length = Some(r.udp_length);
        s.learned = Some(Framing {
            seed: Some(r.crc_seed),
            crc_length: r.crc_length,
            compression: r.compression != 0,
        });
        self.learned = Some((r.session_id, r.crc_seed));
    }

    /// Runs a reliable data packet through the receiver emulation of its direction and channel.
    fn reliable(
        &mut self,
        channel: Channel,
        sequence: u16,
        data: &[u8],
        fragment: bool,
    ) -> ReliableInfo {
        let ch = channel.index().min(3);
        let mut info = ReliableInfo {
            channel: ch as u8,
            sequence,
            fragment,
            position: if fragment { "unknown" } else { "whole" },
            total_len: None,
            data_len: data.len(),
            resend: false,
            status: "not_fed",
            ack_elicitor: !fragment && is_elicitor(data),
        };
        if !self.feed {
            return info;
        }
        let handshake = self.session.handshake();
        let key = self.key;
        let time = self.time;
        let side = &mut self.session.sides[self.side.min(1)];
        side.stats.reliable_packets += 1;
        let rx = side.channels[ch].get_or_insert_with(|| Box::new(ChannelRx::new(ch as u8, key)));
        if !rx.synced {
            rx.synced = true;
            if !handshake {
                rx.start = u64::from(sequence);
                rx.expected = rx.start;
                self.notes.push(format!(
                    "no handshake seen: channel {ch} of this direction is taken to start at sequence {sequence}{}",
                    if rx.cipher.is_some() {
                        " (RC4 decryption is only right if that is the start of the stream)"
                    } else {
                        ""
                    }
                ));
            }
        }
        let Some(full) = expand(rx.expected, sequence).filter(|&f| f >= rx.start) else {
            info.status = "before_start";
            self.notes.push(format!(
                "channel {ch} sequence {sequence} is older than the start of the stream: ignored"
            ));
            return info;
        };
        if full < rx.expected {
            info.resend = true;
            info.status = "resend";
            side.stats.resends += 1;
            self.resends += 1;
            return info;
        }
        if full - rx.expected >= WINDOW {
            info.status = "dropped";
            side.stats.dropped += 1;
            self.notes.push(format!(
                "channel {ch} sequence {sequence} is {} ahead of the next expected ({}): not buffered",
                full - rx.expected,
                rx.expected as u16
            ));
            return info;
        }
        if rx.slots.contains_key(&full) {
            info.resend = true;
            info.status = "duplicate";
            side.stats.resends += 1;
            self.resends += 1;
            return info;
        }
        rx.note_sent(full, time);
        rx.highest = Some(rx.highest.map_or(full, |h| h.max(full)));
        if full > rx.expected {
            if side.stored >= MAX_STORED || self.budget.saturating_add(data.len()) > MAX_BUFFERED {
                info.status = "dropped";
                side.stats.dropped += 1;
                self.notes.push(format!(
                    "channel {ch} sequence {sequence}: the out-of-order buffer is full ({MAX_STORED} packets or {} MiB): dropped",
                    MAX_BUFFERED >> 20
                ));
                return info;
            }
            side.stored += 1;
            *self.budget += data.len();
            rx.slots.insert(
                full,
                Stored {
                    fragment,
                    data: data.to_vec(),
                },
            );
            info.status = "stored";
            self.notes.push(format!(
                "channel {ch} sequence {sequence} arrived ahead of {}: buffered",
                rx.expected as u16
            ));
            return info;
        }
        info.status = "delivered";
        let mut sink = Sink {
            stats: &mut side.stats,
            messages: &mut self.messages,
            omitted: &mut self.omitted,
            notes: &mut self.notes,
            budget: &mut *self.budget,
        };
        rx.expected += 1;
        let (position, total) = process(rx, fragment, sequence, data, &mut sink);
        info.position = position;
        info.total_len = total;
        while let Some(entry) = rx.slots.first_entry() {
            if *entry.key() != rx.expected {
                break;
            }
            let stored = entry.remove();
            side.stored = side.stored.saturating_sub(1);
            *sink.budget = sink.budget.saturating_sub(stored.data.len());
            let seq = rx.expected as u16;
            rx.expected += 1;
            process(rx, stored.fragment, seq, &stored.data, &mut sink);
        }
        info
    }

    /// Handles an ack for the other direction's data: round trips from first appearance.
    fn ack(&mut self, channel: Channel, sequence: u16, cumulative: bool, node: &mut PacketNode) {
        if self.src == self.dst {
            return;
        }
        let time = self.time;
        let other = &mut self.session.sides[1 - self.side.min(1)];
        let Some(rx) = other.channels[channel.index().min(3)].as_deref_mut() else {
            return;
        };
        let reference = rx.highest.unwrap_or(rx.expected);
        let Some(full) = expand(reference, sequence) else {
            return;
        };
        let mut newest = None;
        let mut acked = 0u64;
        if cumulative {
            let later = match full.checked_add(1) {
                Some(next) => rx.pending.split_off(&next),
                None => BTreeMap::new(),
            };
            let covered = std::mem::replace(&mut rx.pending, later);
            for (_, sent) in covered {
                other.stats.round_trips.add(time.saturating_sub(sent));
                newest = Some(sent);
                acked += 1;
            }
            rx.acked_through = Some(rx.acked_through.map_or(full, |a| a.max(full)));
        } else if let Some(sent) = rx.pending.remove(&full) {
            other.stats.round_trips.add(time.saturating_sub(sent));
            newest = Some(sent);
            acked = 1;
        }
        if acked > 0 {
            node.fields.num("newly_acked", acked);
        }
        if let Some(sent) = newest {
            node.fields.0.push((
                "round_trip_ms",
                FieldValue::Millis(millis(time.saturating_sub(sent))),
            ));
        }
    }
}

/// Where processing a reliable packet reports to.
struct Sink<'a> {
    /// The sending side's counters.
    stats: &'a mut DirectionStats,
    /// Messages completed.
    messages: &'a mut Vec<MessageRecord>,
    /// Messages not listed.
    omitted: &'a mut u64,
    /// Remarks.
    notes: &'a mut Vec<String>,
    /// Bytes buffered across all sessions.
    budget: &'a mut usize,
}

/// Counts a message and lists it, within the per-record limit.
fn report_message(
    stats: &mut DirectionStats,
    messages: &mut Vec<MessageRecord>,
    omitted: &mut u64,
    message: MessageRecord,
) {
    stats.messages += 1;
    stats.message_bytes += message.len as u64;
    if messages.len() < MAX_LISTED {
        messages.push(message);
    } else {
        *omitted += 1;
    }
}

/// Processes the in-order packet `sequence`, as `soe-reliable`'s receiver does; returns the
/// packet's position (whole, first, continuation) and a first fragment's total.
fn process(
    rx: &mut ChannelRx,
    fragment: bool,
    sequence: u16,
    data: &[u8],
    sink: &mut Sink<'_>,
) -> (&'static str, Option<u32>) {
    let ch = rx.channel;
    match (fragment, rx.reassembly.take()) {
        (false, None) => {
            deliver(rx, sequence, data, sink);
            ("whole", None)
        }
        (false, Some(partial)) => {
            let (got, total) = match &partial {
                Reassembly::Collecting { total, buf } => (buf.len(), *total),
                Reassembly::Skipping { total, seen } => (*seen, *total),
            };
            if let Reassembly::Collecting { buf, .. } = &partial {
                *sink.budget = sink.budget.saturating_sub(buf.len());
            }
            sink.stats.malformed += 1;
            sink.notes.push(format!(
                "channel {ch} sequence {sequence}: a whole packet interrupts a fragmented message \
                 ({got} of {total} bytes), which is dropped (our receiver ends the session)"
            ));
            deliver(rx, sequence, data, sink);
            ("whole", None)
        }
        (true, Some(Reassembly::Collecting { total, mut buf })) => {
            let received = buf.len().saturating_add(data.len());
            if received > total {
                *sink.budget = sink.budget.saturating_sub(buf.len());
                sink.stats.malformed += 1;
                sink.notes.push(format!(
                    "channel {ch} sequence {sequence}: fragments overflow their message \
                     ({received} of {total} bytes): dropped (our receiver ends the session)"
                ));
                return ("continuation", None);
            }
            if sink.budget.saturating_add(data.len()) > MAX_BUFFERED {
                *sink.budget = sink.budget.saturating_sub(buf.len());
                sink.stats.dropped += 1;
                sink.notes.push(format!(
                    "channel {ch} sequence {sequence}: the reassembly budget ({} MiB) is spent: \
                     this message is skipped",
                    MAX_BUFFERED >> 20
                ));
                rx.reassembly = Some(Reassembly::Skipping {
                    total,
                    seen: received,
                });
                return ("continuation", None);
            }
            buf.extend_from_slice(data);
            *sink.budget += data.len();
            if received == total {
                *sink.budget = sink.budget.saturating_sub(buf.len());
                deliver(rx, sequence, &buf, sink);
            } else {
                rx.reassembly = Some(Reassembly::Collecting { total, buf });
            }
            ("continuation", None)
        }
        (true, Some(Reassembly::Skipping { total, seen })) => {
            let seen = seen.saturating_add(data.len());
            if seen > total {
                sink.notes.push(format!(
                    "channel {ch} sequence {sequence}: fragments overflow a skipped message"
                ));
            } else if seen == total {
                sink.notes.push(format!(
                    "channel {ch} sequence {sequence}: the end of a skipped message of {total} bytes"
                ));
            } else {
                rx.reassembly = Some(Reassembly::Skipping { total, seen });
            }
            ("continuation", None)
        }
        (true, None) => {
            let (claimed, rest) = match split_first_fragment(data) {
                Ok(split) => split,
                Err(e) => {
                    sink.stats.malformed += 1;
                    sink.notes.push(format!(
                        "channel {ch} sequence {sequence}: {e} (our receiver ends the session)"
                    ));
                    return ("first", None);
                }
            };
            let total = usize::try_from(claimed).unwrap_or(usize::MAX);
            if total > MAX_MESSAGE + 1 {
                sink.stats.dropped += 1;
                sink.notes.push(format!(
                    "channel {ch} sequence {sequence}: a first fragment claims {total} bytes, over \
                     the {} MiB limit: the message is skipped (our receiver ends the session)",
                    MAX_MESSAGE >> 20
                ));
                rx.reassembly = Some(Reassembly::Skipping {
                    total,
                    seen: rest.len(),
                });
                return ("first", Some(claimed));
            }
            if rest.len() > total {
                sink.stats.malformed += 1;
                sink.notes.push(format!(
                    "channel {ch} sequence {sequence}: a first fragment holds {} bytes of a \
                     {total}-byte message (our receiver ends the session)",
                    rest.len()
                ));
                return ("first", Some(claimed));
            }
            if rest.len() == total {
                deliver(rx, sequence, rest, sink);
                return ("first", Some(claimed));
            }
            if sink.budget.saturating_add(rest.len()) > MAX_BUFFERED {
                sink.stats.dropped += 1;
                sink.notes.push(format!(
                    "channel {ch} sequence {sequence}: the reassembly budget ({} MiB) is spent: \
                     this message is skipped",
                    MAX_BUFFERED >> 20
                ));
                rx.reassembly = Some(Reassembly::Skipping {
                    total,
                    seen: rest.len(),
                });
                return ("first", Some(claimed));
            }
            *sink.budget += rest.len();
            rx.reassembly = Some(Reassembly::Collecting {
                total,
                buf: rest.to_vec(),
            });
            ("first", Some(claimed))
        }
    }
}

/// Unbundles, unescapes and decrypts a complete payload, reporting its messages in order. The
/// cipher runs on across messages and payloads; ack elicitors and malformed payloads leave it
/// untouched, as in `soe-reliable`.
fn deliver(rx: &mut ChannelRx, sequence: u16, payload: &[u8], sink: &mut Sink<'_>) {
    let ch = rx.channel;
    if is_elicitor(payload) {
        sink.notes.push(format!(
            "channel {ch} sequence {sequence}: an ack elicitor ({}), no message",
            hex::encode(payload)
        ));
        return;
    }
    let plaintext = rx.cipher.is_none();
    match payload_messages(payload, plaintext) {
        Ok(list) => {
            for message in list {
                let mut bytes = message.to_vec();
                if let Some(cipher) = rx.cipher.as_mut() {
                    cipher.apply(&mut bytes);
                }
                report_message(
                    sink.stats,
                    sink.messages,
                    sink.omitted,
                    MessageRecord {
                        channel: ch,
                        kind: "reliable",
                        sequence: Some(sequence),
                        len: bytes.len(),
                        decrypted: !plaintext,
                        hex: hex::encode(&bytes),
                        ascii: ascii_preview(&bytes),
                    },
                );
            }
        }
        Err(e) => {
            sink.stats.malformed += 1;
            sink.notes.push(format!(
                "channel {ch} sequence {sequence}: a malformed reliable payload: {e} \
                 (our receiver ends the session with CorruptPacket)"
            ));
        }
    }
}

/// One line of the tree and the lines under it.
struct Line {
    /// The text.
    text: String,
    /// The lines below it.
    children: Vec<Self>,
}

impl Line {
    /// A line without children.
    fn leaf(text: String) -> Self {
        Self {
            text,
            children: Vec::new(),
        }
    }
}

/// Writes lines under `prefix` with box-drawing branches.
fn draw(out: &mut String, lines: &[Line], prefix: &str) {
    for (i, line) in lines.iter().enumerate() {
        let last = i + 1 == lines.len();
        out.push('\n');
        out.push_str(prefix);
        out.push_str(if last { "└─ " } else { "├─ " });
        out.push_str(&line.text);
        if !line.children.is_empty() {
            let deeper = format!("{prefix}{}", if last { "   " } else { "│  " });
            draw(out, &line.children, &deeper);
        }
    }
}

impl PacketNode {
    /// This node as a tree line.
    fn line(&self) -> Line {
        let mut text = String::from(self.name);
        if let Some(op) = self.opcode {
            let _ = write!(text, " (0x{op:02x})");
        }
        let _ = write!(text, " {} bytes", self.len);
        if let Some(r) = &self.reliable {
            let _ = write!(text, " ch={} seq={} {}", r.channel, r.sequence, r.position);
            if let Some(total) = r.total_len {
                let _ = write!(text, " total={total}");
            }
            let _ = write!(text, " data={}", r.data_len);
            if r.ack_elicitor {
                text.push_str(" ack-elicitor");
            }
            let _ = write!(text, " [{}]", r.status);
            if r.resend {
                text.push_str(" RESEND");
            }
        }
        for (name, value) in &self.fields.0 {
            let _ = write!(text, " {name}={value}");
        }
        if let Some(e) = &self.error {
            let _ = write!(text, " ERROR: {e}");
        }
        let mut children: Vec<Line> = self.children.iter().map(Self::line).collect();
        children.extend(self.notes.iter().map(|n| Line::leaf(format!("note: {n}"))));
        Line { text, children }
    }
}

impl MessageRecord {
    /// This message as a tree line.
    fn line(&self) -> String {
        let mut text = format!("message {} ch={}", self.kind, self.channel);
        if let Some(seq) = self.sequence {
            let _ = write!(text, " seq={seq}");
        }
        let _ = write!(text, " {} bytes", self.len);
        if self.decrypted {
            text.push_str(" (decrypted)");
        }
        let shown = self.hex.len().min(TREE_HEX * 2);
        let _ = write!(text, ": {}", self.hex.get(..shown).unwrap_or_default());
        if shown < self.hex.len() {
            text.push('…');
        }
        let preview: String = self.ascii.chars().take(TREE_HEX).collect();
        let _ = write!(text, " \"{preview}\"");
        text
    }
}

impl DatagramRecord {
    /// The record as a tree: a header line, then the packets, messages and notes.
    pub(crate) fn render(&self) -> String {
        let mut out = format!(
            "#{} +{:.6}s {} -> {} ({}) {} bytes crc={}",
            self.index,
            self.elapsed,
            self.src,
            self.dst,
            self.direction.arrow(),
            self.len,
            match self.crc.verdict {
                CrcVerdict::Ok => "ok",
                CrcVerdict::Bad => "BAD",
                CrcVerdict::None => "none",
                CrcVerdict::Unknown => "unknown",
                CrcVerdict::Missing => "missing",
            }
        );
        if self.crc.verdict == CrcVerdict::Bad {
            if let (Some(e), Some(f)) = (&self.crc.expected, &self.crc.found) {
                let _ = write!(out, " (expected {e}, found {f})");
            }
        }
        if self.compressed {
            let _ = write!(out, " zlib->{}", self.inflated_len.unwrap_or_default());
        }
        if let Some(n) = self.session {
            let _ = write!(out, " session={n}");
        }
        let mut lines = Vec::new();
        if let Some(p) = &self.packet {
            lines.push(p.line());
        }
        if let Some(e) = &self.error {
            lines.push(Line::leaf(format!("ERROR: {e}")));
        }
        lines.extend(self.messages.iter().map(|m| Line::leaf(m.line())));
        lines.extend(self.notes.iter().map(|n| Line::leaf(format!("note: {n}"))));
        draw(&mut out, &lines, "");
        out
    }
}

impl SessionSummary {
    /// The summary as indented lines.
    pub(crate) fn render(&self) -> String {
        let mut out = format!("session {}:", self.session);
        match (self.client, self.server) {
            (Some(c), Some(s)) if c != s => {
                let _ = write!(out, " client {c} <-> server {s}");
            }
            _ => {
                let _ = write!(out, " {} <-> {}", self.addresses[0], self.addresses[1]);
            }
        }
        if let Some(p) = &self.application_protocol {
            let _ = write!(out, " protocol {p:?}");
        }
        if let Some(id) = self.session_id {
            let _ = write!(out, " session_id={id:#010x}");
        }
        let _ = write!(
            out,
            "\n  framing ({}): crc_seed={} crc_length={} compression={}",
            self.framing_from,
            self.crc_seed
                .map_or_else(|| "unknown".to_owned(), |s| format!("{s:#010x}")),
            self.crc_length,
            if self.compression { "on" } else { "off" }
        );
        if let Some(n) = self.client_udp_length {
            let _ = write!(out, " client_udp_length={n}");
        }
        if let Some(n) = self.server_udp_length {
            let _ = write!(out, " server_udp_length={n}");
        }
        let _ = write!(
            out,
            "\n  seen from +{:.6}s to +{:.6}s",
            self.first_seen, self.last_seen
        );
        for d in &self.directions {
            let s = &d.stats;
            let _ = write!(
                out,
                "\n  {} {} -> {}: {} datagrams, {} bytes; {} reliable packets ({} resent or \
                 duplicate); acks {} selective, {} cumulative; {} messages ({} bytes); \
                 {} CRC failures, {} unknown opcodes, {} malformed, {} dropped",
                d.direction.arrow(),
                d.from,
                d.to,
                s.datagrams,
                s.bytes,
                s.reliable_packets,
                s.resends,
                s.acks,
                s.ack_alls,
                s.messages,
                s.message_bytes,
                s.crc_failures,
                s.unknown_opcodes,
                s.malformed,
                s.dropped
            );
            let rt = &s.round_trips;
            if let (Some(min), Some(avg), Some(max)) = (rt.min_ms, rt.avg_ms, rt.max_ms) {
                let _ = write!(
                    out,
                    "\n    data->ack round trips: {} samples, min {min:.3} ms, avg {avg:.3} ms, max {max:.3} ms",
                    rt.count
                );
            }
        }
        if let Some(d) = &self.disconnect {
            let _ = write!(
                out,
                "\n  disconnect: {} ({}) sent {}",
                d.reason,
                d.code,
                d.direction.arrow()
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use soe_wire::{Ack, ReliableData, SessionRequest, SessionResponse};

    const SEED: u32 = 0x1234_5678;

    fn client() -> SocketAddr {
        "10.0.0.1:40000".parse().unwrap()
    }

    fn server() -> SocketAddr {
        "10.0.0.2:20042".parse().unwrap()
    }

    fn framer(compression: bool) -> Framer {
        Framer::new(
            FrameConfig::new(SEED)
                .with_crc_length(CrcLength::TWO)
                .with_compression(compression),
        )
    }

    fn sealed(framer: &mut Framer, packet: &Packet<'_>) -> Vec<u8> {
        let mut buf = Vec::new();
        packet.encode(&mut buf);
        framer.seal(&mut buf, 0);
        buf
    }

    fn request() -> Vec<u8> {
        let mut buf = Vec::new();
        Packet::SessionRequest(SessionRequest {
            protocol_version: 3,
            session_id: 77,
            udp_length: 512,
            application_protocol: b"Test_1",
        })
        .encode(&mut buf);
        buf
    }

    fn response(compression: bool) -> Vec<u8> {
        let mut buf = Vec::new();
        Packet::SessionResponse(SessionResponse {
            session_id: 77,
            crc_seed: SEED,
            crc_length: 2,
            compression: u8::from(compression),
            encryption_method: 0,
            udp_length: 512,
            protocol_version: 3,
        })
        .encode(&mut buf);
        buf
    }

    /// A dissector that has seen the handshake.
    fn connected(key: Option<&[u8]>, compression: bool) -> Dissector {
        let mut d = Dissector::new(DissectConfig {
            rc4_key: key.map(<[u8]>::to_vec),
            ..DissectConfig::default()
        });
        let r = d.dissect(Duration::ZERO, client(), server(), &request());
        assert_eq!(r.crc.verdict, CrcVerdict::None);
        assert_eq!(r.direction, Direction::ClientToServer);
        let r = d.dissect(Duration::ZERO, server(), client(), &response(compression));
        assert_eq!(r.direction, Direction::ServerToClient);
        d
    }

    fn data(seq: u16, bytes: &[u8]) -> Vec<u8> {
        sealed(
            &mut framer(false),
            &Packet::ReliableData(ReliableData {
                channel: Channel::ZERO,
                sequence: seq,
                data: bytes,
            }),
        )
    }

    fn fragment(seq: u16, bytes: &[u8]) -> Vec<u8> {
        sealed(
            &mut framer(false),
            &Packet::ReliableDataFragment(ReliableData {
                channel: Channel::ZERO,
                sequence: seq,
                data: bytes,
            }),
        )
    }

    fn hexes(r: &DatagramRecord) -> Vec<String> {
        r.messages.iter().map(|m| m.hex.clone()).collect()
    }

    #[test]
    fn handshake_learns_the_framing() {
        let mut d = connected(None, true);
        let ack = sealed(
            &mut framer(true),
            &Packet::AcknowledgeAll(Ack {
                channel: Channel::ZERO,
                sequence: 3,
            }),
        );
        let r = d.dissect(Duration::ZERO, client(), server(), &ack);
        assert_eq!(r.crc.verdict, CrcVerdict::Ok);
        assert_eq!(r.packet.as_ref().unwrap().name, "AcknowledgeAll");
        let mut bad = ack.clone();
        *bad.last_mut().unwrap() ^= 1;
        let r = d.dissect(Duration::ZERO, client(), server(), &bad);
        assert_eq!(r.crc.verdict, CrcVerdict::Bad);
        assert_eq!(r.packet.as_ref().unwrap().name, "AcknowledgeAll");
        assert!(r.render().contains("crc=BAD (expected"));
        let s = &d.summaries()[0];
        assert_eq!(s.crc_seed, Some(SEED));
        assert_eq!(s.application_protocol.as_deref(), Some("Test_1"));
        assert_eq!(s.directions[0].stats.crc_failures, 1);
        assert_eq!(s.directions[0].stats.ack_alls, 1);
    }

    #[test]
    fn resends_are_flagged_and_out_of_order_is_reordered() {
        let mut d = connected(None, false);
        let r = d.dissect(Duration::ZERO, server(), client(), &data(1, b"second"));
        assert!(r.messages.is_empty());
        assert_eq!(r.packet.unwrap().reliable.unwrap().status, "stored");
        let r = d.dissect(Duration::ZERO, server(), client(), &data(1, b"second"));
        let info = r.packet.as_ref().unwrap().reliable.clone().unwrap();
        assert!(info.resend);
        assert_eq!(info.status, "duplicate");
        assert_eq!(r.resends, 1);
        let r = d.dissect(Duration::ZERO, server(), client(), &data(0, b"first"));
        assert_eq!(hexes(&r), [hex::encode("first"), hex::encode("second")]);
        let r = d.dissect(Duration::ZERO, server(), client(), &data(0, b"first"));
        assert!(r.packet.as_ref().unwrap().reliable.as_ref().unwrap().resend);
        assert!(r.messages.is_empty());
        let s = &d.summaries()[0].directions[1];
        assert_eq!(s.direction, Direction::ServerToClient);
        assert_eq!(s.stats.resends, 2);
        assert_eq!(s.stats.messages, 2);
    }

    #[test]
    fn fragments_reassemble_and_bad_crc_is_not_fed() {
        let mut d = connected(None, false);
        let message: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8 + 1).collect();
        let mut first = (message.len() as u32).to_be_bytes().to_vec();
        first.extend_from_slice(&message[..400]);
        let r = d.dissect(Duration::ZERO, client(), server(), &fragment(0, &first));
        let info = r.packet.unwrap().reliable.unwrap();
        assert_eq!((info.position, info.total_len), ("first", Some(1000)));
        // a corrupted copy of the next fragment changes nothing
        let mut bad = fragment(1, &message[400..800]);
        bad[5] ^= 0xFF;
        let r = d.dissect(Duration::ZERO, client(), server(), &bad);
        assert_eq!(r.crc.verdict, CrcVerdict::Bad);
        assert_eq!(r.packet.unwrap().reliable.unwrap().status, "not_fed");
        d.dissect(
            Duration::ZERO,
            client(),
            server(),
            &fragment(1, &message[400..800]),
        );
        let r = d.dissect(
            Duration::ZERO,
            client(),
            server(),
            &fragment(2, &message[800..]),
        );
        assert_eq!(hexes(&r), [hex::encode(&message)]);
        assert_eq!(r.packet.unwrap().reliable.unwrap().position, "continuation");
    }

    #[test]
    fn rc4_runs_on_across_messages_and_skips_elicitors() {
        let key = b"secret key";
        let mut d = connected(Some(key), false);
        let mut cipher = Rc4::new(key).unwrap();
        let plain: [&[u8]; 3] = [b"one", b"\x00two", b"three"];
        let mut enc: Vec<Vec<u8>> = plain
            .iter()
            .map(|m| {
                let mut v = m.to_vec();
                cipher.apply(&mut v);
                v
            })
            .collect();
        // Group of the first two (escaped), then an elicitor, then the third alone.
        let mut group = vec![0x00, 0x19];
        for m in &enc[..2] {
            let mut item = Vec::new();
            soe_wire::reliable::escape_into(m, &mut item);
            group.push(item.len() as u8);
            group.extend_from_slice(&item);
        }
        let r = d.dissect(Duration::ZERO, server(), client(), &data(0, &group));
        assert_eq!(hexes(&r), [hex::encode(plain[0]), hex::encode(plain[1])]);
        let r = d.dissect(Duration::ZERO, server(), client(), &data(1, &[0x00, 0x19]));
        assert!(r.messages.is_empty());
        assert!(r.packet.unwrap().reliable.unwrap().ack_elicitor);
        let third = enc.pop().unwrap();
        let mut escaped = Vec::new();
        soe_wire::reliable::escape_into(&third, &mut escaped);
        let r = d.dissect(Duration::ZERO, server(), client(), &data(2, &escaped));
        assert_eq!(hexes(&r), [hex::encode(plain[2])]);
        assert!(r.messages[0].decrypted);
    }

    #[test]
    fn round_trips_from_data_to_ack() {
        let mut d = connected(None, false);
        for seq in 0..3 {
            d.dissect(
                Duration::from_millis(u64::from(seq)),
                client(),
                server(),
                &data(seq, b"x"),
            );
        }
        let ack = sealed(
            &mut framer(false),
            &Packet::AcknowledgeAll(Ack {
                channel: Channel::ZERO,
                sequence: 2,
            }),
        );
        let r = d.dissect(Duration::from_millis(10), server(), client(), &ack);
        assert_eq!(
            r.packet.unwrap().fields.get("newly_acked"),
            Some(&FieldValue::Num(3))
        );
        let rt = d.summaries()[0].directions[0].stats.round_trips;
        assert_eq!(rt.count, 3);
        assert_eq!(rt.max_ms, Some(10.0));
        assert_eq!(rt.min_ms, Some(8.0));
    }

    #[test]
    fn buffers_are_bounded() {
        let mut d = connected(None, false);
        let payload = [7u8; 16];
        let on = |channel: u8, seq: u16| {
            sealed(
                &mut framer(false),
                &Packet::ReliableData(ReliableData {
                    channel: Channel::new(channel).unwrap(),
                    sequence: seq,
                    data: &payload,
                }),
            )
        };
        // the window: 4096 ahead of the next expected is not buffered
        let r = d.dissect(Duration::ZERO, client(), server(), &on(0, WINDOW as u16));
        assert_eq!(r.packet.unwrap().reliable.unwrap().status, "dropped");
        for seq in 1..WINDOW as u16 {
            let r = d.dissect(Duration::ZERO, client(), server(), &on(0, seq));
            assert_eq!(r.packet.unwrap().reliable.unwrap().status, "stored");
        }
        // the per-direction limit is shared by the channels
        let r = d.dissect(Duration::ZERO, client(), server(), &on(1, 1));
        assert_eq!(r.packet.unwrap().reliable.unwrap().status, "stored");
        let r = d.dissect(Duration::ZERO, client(), server(), &on(1, 2));
        assert_eq!(r.packet.unwrap().reliable.unwrap().status, "dropped");
        assert_eq!(d.buffered, MAX_STORED * payload.len());
        // the gap fills: everything stored comes out at once, in order
        let r = d.dissect(Duration::ZERO, client(), server(), &on(0, 0));
        assert_eq!(r.messages.len(), WINDOW as usize);
        assert_eq!(d.buffered, payload.len());

        // a first fragment claiming more than the limit is refused, nothing is held for it
        let mut first = ((MAX_MESSAGE as u32) * 2).to_be_bytes().to_vec();
        first.extend_from_slice(&payload);
        let r = d.dissect(
            Duration::ZERO,
            client(),
            server(),
            &fragment(WINDOW as u16, &first),
        );
        assert!(
            r.notes.iter().any(|n| n.contains("over the 4 MiB limit")),
            "{:?}",
            r.notes
        );
        assert_eq!(d.buffered, payload.len());
        let s = &d.summaries()[0].directions[0].stats;
        assert_eq!(s.dropped, 3);
    }

    #[test]
    fn unknown_seed_and_unknown_opcodes() {
        let mut d = Dissector::new(DissectConfig::default());
        let a: SocketAddr = "0.0.0.0:0".parse().unwrap();
        let r = d.dissect(Duration::ZERO, a, a, &[0x00, 0xFF, 0x01, 0x02]);
        assert_eq!(r.crc.verdict, CrcVerdict::Unknown);
        assert_eq!(r.direction, Direction::Unknown);
        let p = r.packet.unwrap();
        assert_eq!((p.name, p.opcode), ("Unknown", Some(0xFF)));
        assert!(p.error.is_some());
        // a CRC-less selective ack (h1z1-server)
        let r = d.dissect(Duration::ZERO, a, a, &[0x00, 0x11, 0x00, 0x01]);
        assert_eq!(r.crc.verdict, CrcVerdict::Missing);
        assert_eq!(r.packet.unwrap().name, "Acknowledge");
        assert_eq!(d.summaries()[0].directions.len(), 1);
        assert_eq!(d.summaries()[0].directions[0].stats.unknown_opcodes, 1);
    }

    /// A small deterministic generator.
    struct XorShift(u64);

    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
        for compression in [false, true] {
            let mut d = connected(Some(b"k"), compression);
            let mut f = framer(compression);
            let mut plain = Dissector::new(DissectConfig {
                crc_seed: Some(SEED),
                crc_length: Some((rng.next() % 5) as u8),
                compression: Some(compression),
                rc4_key: None,
            });
            for i in 0..10_000 {
                let len = (rng.next() % 80) as usize;
                let mut bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                match i % 4 {
                    // plausible opcodes, valid CRC: reaches the state machine
                    0 | 1 if len >= 2 => {
                        bytes[0] = 0;
                        bytes[1] = (rng.next() % 0x20) as u8;
                        if bytes[1] == 0x0D || bytes[1] == 0x09 {
                            // small sequence numbers, so reassembly is exercised
                            if let Some(b) = bytes.get_mut(2) {
                                *b = 0;
                            }
                        }
                        f.seal(&mut bytes, 0);
                    }
                    2 => bytes.insert(0, 0),
                    _ => {}
                }
                let t = Duration::from_micros(rng.next() % 1_000_000);
                let (src, dst) = if i % 2 == 0 {
                    (client(), server())
                } else {
                    (server(), client())
                };
                let r = d.dissect(t, src, dst, &bytes);
                let _ = r.render();
                serde_json::to_string(&r).unwrap();
                let r = plain.dissect(t, src, dst, &bytes);
                let _ = r.render();
            }
            for s in d.summaries() {
                let _ = s.render();
                serde_json::to_string(&s).unwrap();
            }
        }
    }
}
