//! The dissection of one datagram: its packet tree, and what each packet changes in its
//! session (handshake, receiver emulation, round trips).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use soe_wire::payload::is_ack_elicitor;
use soe_wire::{
    Ack, Channel, DisconnectReason, Group, MultiPacket, NetStatusRequest, NetStatusResponse,
    OpCode, Ordered, Packet, SessionRequest, SessionResponse, WireError,
};

use crate::channel::{
    Carrier, ChannelRx, Sink, Stored, ascii_preview, drain, expand, process, report_message, settle,
};
use crate::config::Limits;
use crate::framing::{Framing, raw_opcode};
use crate::records::{
    DirectionStats, DisconnectSummary, FieldValue, MessageRecord, PacketNode, ReliableInfo,
};
use crate::session::{SessionState, Side};

/// Where a packet sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Parent {
    /// Directly in the datagram.
    Top,
    /// A MultiPacket sub-packet.
    Multi,
    /// A Group item.
    Group,
}

/// The name of an opcode.
pub(crate) fn opcode_name(op: OpCode) -> &'static str {
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
pub(crate) fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// Milliseconds as a float.
fn millis(d: Duration) -> f64 {
    d.as_nanos() as f64 / 1e6
}

/// What a datagram is, beyond its bytes.
pub(crate) struct Datagram<'k> {
    /// The sender.
    pub(crate) src: SocketAddr,
    /// The receiver.
    pub(crate) dst: SocketAddr,
    /// The capture time.
    pub(crate) time: Duration,
    /// Whether its packets update state (false after a bad CRC).
    pub(crate) feed: bool,
    /// The RC4 key of its session.
    pub(crate) key: Option<&'k [u8]>,
    /// Its index, compression and CRC verdict, as its messages report them.
    pub(crate) carrier: Carrier,
}

/// What a datagram's dissection leaves for its record.
pub(crate) struct Done {
    /// Messages completed, in order.
    pub(crate) messages: Vec<MessageRecord>,
    /// Remarks.
    pub(crate) notes: Vec<String>,
    /// Reliable packets flagged as resends.
    pub(crate) resends: usize,
    /// A (session id, CRC seed) learned from a SessionResponse.
    pub(crate) learned: Option<(u32, u32)>,
}

/// The dissection of one datagram in progress.
pub(crate) struct Work<'a> {
    /// The session the datagram belongs to.
    session: &'a mut SessionState,
    /// The sender's side index.
    side: usize,
    /// The datagram.
    datagram: Datagram<'a>,
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

impl<'a> Work<'a> {
    /// Starts dissecting a datagram of `session` sent by side `side`.
    pub(crate) fn new(
        session: &'a mut SessionState,
        side: usize,
        datagram: Datagram<'a>,
        budget: &'a mut usize,
        limits: Limits,
        notes: Vec<String>,
    ) -> Self {
        Self {
            session,
            side: side.min(1),
            datagram,
            budget,
            limits,
            messages: Vec::new(),
            omitted: 0,
            notes,
            resends: 0,
            learned: None,
        }
    }

    /// The packet tree of the unframed datagram, or, when it could not be unframed, a node
    /// naming its opcode at least.
    pub(crate) fn packet_tree(
        &mut self,
        unframed: Option<&[u8]>,
        raw: &[u8],
    ) -> Option<PacketNode> {
        match unframed {
            Some(bytes) => Some(self.node(bytes, Parent::Top)),
            None => raw_opcode(raw).map(|op| {
                let name = OpCode::from_u16(op).map_or("Unknown", opcode_name);
                PacketNode::new(name, Some(op), raw.len())
            }),
        }
    }

    /// Ends the dissection: what the record needs.
    pub(crate) fn finish(mut self) -> Done {
        if self.omitted > 0 {
            self.notes.push(format!(
                "{} more messages completed here are not listed (limit {})",
                self.omitted, self.limits.max_listed
            ));
        }
        Done {
            messages: self.messages,
            notes: self.notes,
            resends: self.resends,
            learned: self.learned,
        }
    }

    /// The sending side.
    fn side(&mut self) -> &mut Side {
        &mut self.session.sides[self.side]
    }

    /// The sending side's counters.
    fn stats(&mut self) -> &mut DirectionStats {
        &mut self.side().stats
    }

    /// Reports one unreliable or ordered message.
    fn message(&mut self, kind: &'static str, sequence: Option<u16>, bytes: &[u8]) {
        let verdict = self.side().judge.verdict();
        let carrier = self.datagram.carrier;
        report_message(
            &mut self.session.sides[self.side].stats,
            &mut self.messages,
            &mut self.omitted,
            MessageRecord {
                channel: 0,
                kind,
                sequence,
                len: bytes.len(),
                decrypted: false,
                verdict,
                hex: hex::encode(bytes),
                ascii: ascii_preview(bytes),
                fragmented: false,
                first_frame: carrier.frame,
                last_frame: carrier.frame,
                compressed: carrier.compressed,
                encrypted: false,
                crc: carrier.crc,
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
        let feed = self.datagram.feed;
        match packet {
            Packet::SessionRequest(r) => self.session_request(&r, parent, &mut node),
            Packet::SessionResponse(r) => self.session_response(&r, parent, &mut node),
            Packet::MultiPacket(m) if parent == Parent::Top => self.multi_packet(m, &mut node),
            Packet::Group(g) if parent == Parent::Top => self.group(g, &mut node),
            Packet::MultiPacket(_) => return self.nested(node, "MultiPacket", parent),
            Packet::Group(_) => return self.nested(node, "Group", parent),
            Packet::Disconnect(d) => self.disconnect(d.session_id, d.reason, &mut node),
            Packet::NetStatusRequest(r) => net_status_request(&r, &mut node),
            Packet::NetStatusResponse(r) => net_status_response(&r, &mut node),
            Packet::ReliableData(d) => {
                if let Some(body) = d.data.strip_prefix(&[0x00, 0x19][..]) {
                    if !is_ack_elicitor(d.data) {
                        let items = Group::new(body).iter().count();
                        node.fields.num("group_items", items as u64);
                    }
                }
                node.reliable = Some(self.reliable(d.channel, d.sequence, d.data, false));
            }
            Packet::ReliableDataFragment(d) => {
                node.reliable = Some(self.reliable(d.channel, d.sequence, d.data, true));
            }
            Packet::Acknowledge(a) => self.acknowledge(a, false, &mut node),
            Packet::AcknowledgeAll(a) => self.acknowledge(a, true, &mut node),
            Packet::Ordered(o) | Packet::Ordered2(o) => self.ordered(o, &mut node),
            Packet::PortAlive(body) => node.fields.num("body_len", body.len() as u64),
            Packet::RemapConnection(r) => {
                node.fields.id("session_id", r.session_id);
                node.fields.id("crc_seed", r.crc_seed);
            }
            Packet::Unreliable(data) if feed => self.message("unreliable", None, data),
            _ => {}
        }
        node
    }

    /// A SessionRequest: its fields, and (at the top, fed) the session's client and protocol.
    fn session_request(&mut self, r: &SessionRequest<'_>, parent: Parent, node: &mut PacketNode) {
        node.fields.num("protocol_version", r.protocol_version);
        node.fields.id("session_id", r.session_id);
        node.fields.num("udp_length", r.udp_length);
        node.fields.text(
            "application_protocol",
            String::from_utf8_lossy(r.application_protocol),
        );
        if parent != Parent::Top || !self.datagram.feed {
            return;
        }
        let s = &mut *self.session;
        s.set_client(self.datagram.src);
        if s.session_id.is_some_and(|id| id == r.session_id) && s.request_seen {
            node.notes
                .push("a repeated SessionRequest (same session id)".into());
        }
        s.request_seen = true;
        s.session_id = Some(r.session_id);
        s.protocol = Some(String::from_utf8_lossy(r.application_protocol).into());
        s.client_udp_length = Some(r.udp_length);
    }

    /// A SessionResponse: its fields, and (at the top, fed) the session's framing.
    fn session_response(&mut self, r: &SessionResponse, parent: Parent, node: &mut PacketNode) {
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
        if parent == Parent::Top && self.datagram.feed {
            self.learn(r, node);
        }
    }

    /// A MultiPacket's sub-packets, each a child node.
    fn multi_packet(&mut self, m: MultiPacket<'_>, node: &mut PacketNode) {
        for sub in m.iter() {
            let child = match sub {
                Ok(sub) => self.node(sub, Parent::Multi),
                Err(e) => self.bad_entry("sub-packet", &e),
            };
            node.children.push(child);
        }
        node.fields.num("sub_packets", node.children.len() as u64);
    }

    /// A Group packet's items: a packet when it starts with zero, else an unreliable message.
    fn group(&mut self, g: Group<'_>, node: &mut PacketNode) {
        for item in g.iter() {
            let child = match item {
                Ok(item) if item.first() == Some(&0) => self.node(item, Parent::Group),
                Ok(item) => {
                    let mut child = PacketNode::new("Item", None, item.len());
                    child.notes.push("unreliable message".into());
                    if self.datagram.feed {
                        self.message("unreliable", None, item);
                    }
                    child
                }
                Err(e) => self.bad_entry("item", &e),
            };
            node.children.push(child);
        }
        node.fields.num("items", node.children.len() as u64);
    }

    /// A Disconnect: its fields, and (fed) how the session ended.
    fn disconnect(&mut self, session_id: u32, reason: DisconnectReason, node: &mut PacketNode) {
        node.fields.id("session_id", session_id);
        node.fields.text("reason", reason_name(reason));
        node.fields.num("reason_code", reason.to_u16());
        if self.datagram.feed {
            let direction = self.session.direction(self.datagram.src, self.datagram.dst);
            self.session.disconnect = Some(Box::new(DisconnectSummary {
                reason: reason_name(reason),
                code: reason.to_u16(),
                direction,
            }));
        }
    }

    /// An Acknowledge or AcknowledgeAll: its fields, and (fed) round trips.
    fn acknowledge(&mut self, a: Ack, cumulative: bool, node: &mut PacketNode) {
        node.fields.num("channel", a.channel.index() as u64);
        node.fields.num("sequence", a.sequence);
        if !self.datagram.feed {
            return;
        }
        if cumulative {
            self.stats().ack_alls += 1;
        } else {
            self.stats().acks += 1;
        }
        self.ack(a.channel, a.sequence, cumulative, node);
    }

    /// An Ordered packet: delivered when newer than the newest delivered, else stale.
    fn ordered(&mut self, o: Ordered<'_>, node: &mut PacketNode) {
        node.fields.num("sequence", o.sequence);
        node.fields.num("data_len", o.data.len() as u64);
        if !self.datagram.feed {
            return;
        }
        let side = self.side();
        let newer = side.ordered_newest.is_none_or(|newest| {
            let ahead = o.sequence.wrapping_sub(newest);
            ahead != 0 && ahead < 0x8000
        });
        if newer {
            side.ordered_newest = Some(o.sequence);
            self.message("ordered", Some(o.sequence), o.data);
        } else {
            node.fields.flag("stale", true);
            node.notes
                .push("stale: not newer than one delivered, so dropped".into());
        }
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
        if self.datagram.feed {
            match error {
                WireError::UnknownOpcode(_) => self.stats().unknown_opcodes += 1,
                _ => self.stats().malformed += 1,
            }
        }
        node
    }

    /// A node for a malformed bundle entry.
    fn bad_entry(&mut self, what: &str, error: &WireError) -> PacketNode {
        if self.datagram.feed {
            self.stats().malformed += 1;
        }
        let mut node = PacketNode::new("Malformed", None, 0);
        node.error = Some(format!("malformed {what}: {error}"));
        node
    }

    /// A bundle inside a bundle: shown, not entered (sessions end with CorruptPacket).
    fn nested(&mut self, mut node: PacketNode, what: &str, parent: Parent) -> PacketNode {
        if self.datagram.feed {
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
    fn learn(&mut self, r: &SessionResponse, node: &mut PacketNode) {
        let s = &mut *self.session;
        if s.client.is_none() {
            s.set_client(self.datagram.dst);
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

    /// Runs a reliable data packet through the receiver emulation of its direction and
    /// channel: where it falls (old, ahead, in order), what it completes, and the gaps that
    /// can no longer be filled.
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
        if !self.datagram.feed {
            return info;
        }
        self.stats().reliable_packets += 1;
        self.open_channel(ch, sequence);
        match self.arrival(ch, sequence, data.len()) {
            Arrival::Refused(status) => info.status = status,
            Arrival::Ahead(full) => info.status = self.store(ch, full, fragment, data),
            Arrival::InOrder => {
                let placed = self
                    .with_channel(ch, |rx, sink| {
                        rx.expected += 1;
                        let placed = process(rx, fragment, sequence, data, sink);
                        drain(rx, sink);
                        placed
                    })
                    .unwrap_or(("unknown", None));
                (info.position, info.total_len) = placed;
                info.status = if placed.0 == "unplaced" {
                    "unplaced"
                } else {
                    "delivered"
                };
            }
        }
        info.resend = matches!(info.status, "resend" | "duplicate");
        if info.resend {
            self.stats().resends += 1;
            self.resends += 1;
        }
        self.with_channel(ch, settle);
        info
    }

    /// The receiver of channel `ch`, made on its first packet; without a handshake its stream
    /// is taken to start at this packet's sequence.
    fn open_channel(&mut self, ch: usize, sequence: u16) {
        let handshake = self.session.handshake();
        let key = self.datagram.key;
        let rx = self.session.sides[self.side].channels[ch]
            .get_or_insert_with(|| Box::new(ChannelRx::new(ch as u8, key)));
        if rx.synced {
            return;
        }
        rx.synced = true;
        if handshake {
            return;
        }
        rx.start = u64::from(sequence);
        rx.expected = rx.start;
        let caveat = if rx.cipher.is_some() {
            " (RC4 decryption is only right if that is the start of the stream)"
        } else {
            ""
        };
        self.notes.push(format!(
            "no handshake seen: channel {ch} of this direction is taken to start at sequence \
             {sequence}{caveat}"
        ));
    }

    /// Where a packet falls in its channel's stream: refused (before the start, a resend of a
    /// delivered sequence, a duplicate, too far ahead), ahead of a gap, or in order.
    fn arrival(&mut self, ch: usize, sequence: u16, len: usize) -> Arrival {
        let (time, limits) = (self.datagram.time, self.limits);
        let Some(rx) = self.session.sides[self.side].channels[ch].as_deref_mut() else {
            return Arrival::Refused("not_fed");
        };
        let Some(full) = expand(rx.expected, sequence).filter(|&f| f >= rx.start) else {
            self.notes.push(format!(
                "channel {ch} sequence {sequence} is older than the start of the stream: ignored"
            ));
            return Arrival::Refused("before_start");
        };
        if full < rx.expected {
            return Arrival::Refused("resend");
        }
        let ahead = full - rx.expected;
        if ahead >= limits.window {
            let expected = rx.expected as u16;
            self.session.sides[self.side].stats.dropped += 1;
            self.notes.push(format!(
                "channel {ch} sequence {sequence} is {ahead} ahead of the next expected \
                 ({expected}): not buffered ({len} bytes)"
            ));
            return Arrival::Refused("dropped");
        }
        if rx.slots.contains_key(&full) {
            return Arrival::Refused("duplicate");
        }
        rx.note_sent(full, time, limits.max_pending_acks);
        rx.highest = Some(rx.highest.map_or(full, |h| h.max(full)));
        if full > rx.expected {
            Arrival::Ahead(full)
        } else {
            Arrival::InOrder
        }
    }

    /// Buffers a packet that arrived ahead of a gap, within the limits.
    fn store(&mut self, ch: usize, full: u64, fragment: bool, data: &[u8]) -> &'static str {
        let limits = self.limits;
        let side = &mut self.session.sides[self.side];
        let sequence = full as u16;
        if side.stored >= limits.max_stored
            || self.budget.saturating_add(data.len()) > limits.max_buffered
        {
            side.stats.dropped += 1;
            self.notes.push(format!(
                "channel {ch} sequence {sequence}: the out-of-order buffer is full ({} packets \
                 or {} MiB): dropped",
                limits.max_stored,
                limits.max_buffered >> 20
            ));
            return "dropped";
        }
        let Some(rx) = side.channels[ch].as_deref_mut() else {
            return "not_fed";
        };
        side.stored += 1;
        *self.budget += data.len();
        rx.slots.insert(
            full,
            Stored {
                fragment,
                data: data.to_vec(),
                carrier: self.datagram.carrier,
            },
        );
        self.notes.push(format!(
            "channel {ch} sequence {sequence} arrived ahead of {}: buffered",
            rx.expected as u16
        ));
        "stored"
    }

    /// Runs `f` on the receiver of channel `ch` of the sending side, with a sink reporting
    /// into this datagram's record; `None` when the channel has no receiver.
    fn with_channel<R>(
        &mut self,
        ch: usize,
        f: impl FnOnce(&mut ChannelRx, &mut Sink<'_>) -> R,
    ) -> Option<R> {
        let SessionState {
            sides, plain_first, ..
        } = &mut *self.session;
        let Side {
            stats,
            channels,
            stored,
            judge,
            ..
        } = sides.get_mut(self.side)?;
        let rx = channels.get_mut(ch)?.as_deref_mut()?;
        let mut sink = Sink {
            stats,
            messages: &mut self.messages,
            omitted: &mut self.omitted,
            notes: &mut self.notes,
            budget: &mut *self.budget,
            stored,
            limits: self.limits,
            judge,
            carrier: self.datagram.carrier,
            plain_first,
        };
        Some(f(rx, &mut sink))
    }

    /// Handles an ack for the other direction's data: round trips from first appearance, and
    /// how far the receiver has everything (a gap behind that will not be resent).
    fn ack(&mut self, channel: Channel, sequence: u16, cumulative: bool, node: &mut PacketNode) {
        let Datagram { src, dst, time, .. } = self.datagram;
        if src == dst {
            return;
        }
        let other = &mut self.session.sides[1 - self.side];
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

/// Where a reliable packet falls in its channel's stream.
enum Arrival {
    /// Not taken, with its status.
    Refused(&'static str),
    /// Ahead of a gap, at this full sequence.
    Ahead(u64),
    /// The next expected packet.
    InOrder,
}

/// A NetStatusRequest's fields.
fn net_status_request(r: &NetStatusRequest, node: &mut PacketNode) {
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

/// A NetStatusResponse's fields.
fn net_status_response(r: &NetStatusResponse, node: &mut PacketNode) {
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
