//! The [`Dissector`]: follows sessions by address pair and turns each datagram into a
//! [`DatagramRecord`].

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::time::Duration;

use soe_crypto::CrcLength;
use soe_wire::payload::is_ack_elicitor;
use soe_wire::{Channel, DisconnectReason, FrameConfig, Framer, OpCode, Packet, WireError};

use crate::channel::{ChannelRx, Sink, Stored, ascii_preview, expand, process, report_message};
use crate::config::DEFAULT_CRC_LENGTH;
use crate::config::{DissectConfig, Limits};
use crate::framing::{Framing, Unframed, is_contextless, raw_opcode, unframe};
use crate::records::{
    CrcVerdict, DatagramRecord, Direction, DirectionStats, DirectionSummary, DisconnectSummary,
    FieldValue, MessageRecord, PacketNode, Record, ReliableInfo, SessionSummary,
};
use crate::session::SessionState;

/// Dissects datagrams, following sessions: feed it datagrams in capture order with
/// [`dissect`](Self::dissect), read the sessions with [`summaries`](Self::summaries).
pub struct Dissector {
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

/// Seconds as a float.
fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// Milliseconds as a float.
fn millis(d: Duration) -> f64 {
    d.as_nanos() as f64 / 1e6
}

impl Dissector {
    /// A dissector with the given assumptions.
    pub fn new(config: DissectConfig) -> Self {
        let max_inflated = config.limits.max_inflated;
        let framer = |compression| {
            Framer::new(
                FrameConfig::new(0)
                    .with_crc_length(CrcLength::NONE)
                    .with_compression(compression)
                    .with_max_inflated(max_inflated),
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
    pub fn dissect(
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
        let Self {
            sessions,
            framers,
            buffered,
            config,
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

        let rc4_key = config.key_for(session.server(), session.addrs);
        let mut work = Work {
            session,
            side,
            src,
            dst,
            time,
            feed: unframed.feed,
            key: rc4_key,
            budget: buffered,
            limits: config.limits,
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
                "{omitted} more messages completed here are not listed (limit {})",
                self.config.limits.max_listed
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
            if self.by_cookie.len() < self.config.limits.max_sessions
                || self.by_cookie.contains_key(&cookie)
            {
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
                if self.sessions.len() < self.config.limits.max_sessions {
                    return Some(self.create(key, time));
                }
                notes.push(format!(
                    "the session table is full ({}): the previous session's summary is replaced",
                    self.config.limits.max_sessions
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
        if self.sessions.len() < self.config.limits.max_sessions {
            Some(self.create(key, time))
        } else {
            notes.push(format!(
                "the session table is full ({} sessions): dissected without session state",
                self.config.limits.max_sessions
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

    /// Bytes held for reassembly and out-of-order packets, across all sessions (at most
    /// [`Limits::max_buffered`]).
    pub fn buffered_bytes(&self) -> usize {
        self.buffered
    }

    /// Sessions followed so far, live and ended (at most [`Limits::max_sessions`]).
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// The records to end a stream with: a summary of every session, in the order they
    /// started. The dissector can go on after this.
    pub fn finish(&self) -> impl Iterator<Item = Record> + '_ {
        self.summaries().into_iter().map(Record::Session)
    }

    /// A summary of every session, in the order they started.
    pub fn summaries(&self) -> Vec<SessionSummary> {
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
    /// The limits.
    limits: Limits,
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
            self.limits.max_listed,
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
                    if !is_ack_elicitor(d.data) {
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
            ack_elicitor: !fragment && is_ack_elicitor(data),
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
        if full - rx.expected >= self.limits.window {
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
        rx.note_sent(full, time, self.limits.max_pending_acks);
        rx.highest = Some(rx.highest.map_or(full, |h| h.max(full)));
        if full > rx.expected {
            let limits = self.limits;
            if side.stored >= limits.max_stored
                || self.budget.saturating_add(data.len()) > limits.max_buffered
            {
                info.status = "dropped";
                side.stats.dropped += 1;
                self.notes.push(format!(
                    "channel {ch} sequence {sequence}: the out-of-order buffer is full ({} packets or {} MiB): dropped",
                    limits.max_stored,
                    limits.max_buffered >> 20
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
            limits: self.limits,
            judge: &mut side.judge,
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
