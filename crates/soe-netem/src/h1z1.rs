//! A model of h1z1-server's SOE server (its `SoeServer`: input stream, output stream, sending
//! loop), written from a reading of that server's source, so that our client can be tested
//! against the way it really behaves rather than against our reading of the protocol.
//!
//! What it does, and what this model reproduces (one client, channel 0, no RC4, CRC length 2,
//! no compression, `udp_length` 512):
//!
//! * **Sending loop.** Every 24 ms, and at once whenever a cumulative ack arrives or the
//!   application writes, the server runs one pass: resends, then new data, then one cumulative
//!   ack, then a flush of its bundle queue. Small packets (under 255 bytes) are queued and sent
//!   as one MultiPacket per pass; a queue of one packet goes out on its own.
//! * **Acks.** The cumulative ack names the highest sequence received in order. It is sent only
//!   when that value changed since the last one sent: a duplicate of an acknowledged packet is
//!   dropped without any ack, so a lost cumulative ack is never repeated until a new in-order
//!   packet arrives.
//! * **OutOfOrder.** A packet ahead of the next expected sequence is stored and answered with an
//!   `OutOfOrder` (selective ack) for it, queued for the next pass. When it leaves alone it has
//!   no CRC (4 bytes on the wire); so do its Pings.
//! * **Delivery.** Stored packets are delivered from the last one processed. A packet that yields
//!   no message (an empty Group, `00 19`) ends the delivery pass: packets stored behind it wait
//!   for the next in-order arrival, even though they are already acknowledged.
//! * **Resends.** A packet unacknowledged for 250 ms plus the average ping is resent, at most 24
//!   times. An `OutOfOrder` from the client makes the next pass resend every cached packet from
//!   the last cumulative ack up to it, once.
//! * **Window.** At most 300 sequences past the last cumulative ack from the client.
//! * Its delayed-packet loop takes only about half of the packets waiting in each pass (it
//!   shifts the array it counts), so the rest wait for the next pass.
//!
//! Sequences are compared as plain numbers, as the server does; the runs here stay far from
//! the 16-bit wrap.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use bytes::Bytes;
use soe_wire::{
    Ack, Channel, CrcLength, FrameConfig, Framer, MultiPacketWriter, Packet, ReliableData,
    SessionResponse,
};

/// The sending loop's period (`_waitTimeMs`).
pub const WAIT_TIME: Duration = Duration::from_millis(24);
/// The resend timeout before the average ping is added (`_resendTimeout`).
const RESEND_TIMEOUT_MS: u64 = 250;
/// Resends per packet before the server stops resending it (`_maxResentTries`).
const MAX_RESENDS: u32 = 24;
/// Sequences the server sends past the client's last cumulative ack (`maxSequenceAvailable`).
const MAX_SEQUENCE_AVAILABLE: i32 = 300;
/// The datagram size the server announces and assumes of its clients.
const UDP_LENGTH: u32 = 512;
/// Its CRC length.
const CRC_LENGTH: usize = 2;
/// The MultiPacket budget (`udp_length - 4 - crc_length`).
const MAX_MULTI: usize = UDP_LENGTH as usize - 4 - CRC_LENGTH;
/// Pings averaged for the resend timeout.
const AVG_PING_LEN: usize = 6;

/// Opcodes of channel 0 as the server writes them.
const OP_DATA: u8 = 0x09;
const OP_FRAGMENT: u8 = 0x0D;
const OP_OUT_OF_ORDER: u8 = 0x11;
const OP_ACK: u8 = 0x15;

/// One cached outgoing reliable packet.
#[derive(Debug)]
struct Cached {
    data: Vec<u8>,
    fragment: bool,
    resends: u32,
}

/// A logical packet: `opcode | body`, with what the server derives from its opcode.
#[derive(Debug, Clone)]
struct Logical {
    bytes: Vec<u8>,
    sequence: Option<u16>,
}

impl Logical {
    fn opcode(&self) -> u8 {
        self.bytes.get(1).copied().unwrap_or(0)
    }

    fn is_reliable(&self) -> bool {
        matches!(self.opcode(), OP_DATA | OP_FRAGMENT)
    }

    /// Whether the server appends a CRC when this packet leaves on its own.
    fn can_crc(&self) -> bool {
        matches!(
            self.opcode(),
            0x03 | OP_DATA | 0x0B | OP_ACK | 0x1B | OP_FRAGMENT
        )
    }

    fn can_be_buffered(&self) -> bool {
        match self.opcode() {
            0x03 => false,
            OP_DATA | OP_FRAGMENT | 0x1B => self.bytes.len() < 255,
            _ => true,
        }
    }
}

/// The fragment being reassembled (`cpf_*`).
#[derive(Debug)]
struct Reassembly {
    total: usize,
    data: Vec<u8>,
    processed: Vec<u16>,
}

/// h1z1-server's reliable layer for one client.
#[derive(Debug)]
pub struct H1z1Server {
    framer: Option<Framer>,
    crc_seed: u32,
    fragment_size: usize,
    // Input stream.
    next_sequence: i32,
    in_last_ack: i32,
    app_data: HashMap<u16, (Vec<u8>, bool)>,
    last_processed: i32,
    reassembly: Option<Reassembly>,
    // Output stream.
    reliable_sequence: i32,
    last_available: i32,
    out_last_ack: i32,
    cache: HashMap<u16, Cached>,
    out_of_order: Vec<u16>,
    /// `unAckData`: send time of each unacknowledged packet, in the map's insertion order.
    un_ack: Vec<(u16, Instant)>,
    last_ack_sent: i32,
    queue: Vec<Logical>,
    queue_len: usize,
    delayed: VecDeque<Logical>,
    pings: VecDeque<u64>,
    avg_ping: u64,
    next_pass: Option<Instant>,
    pass_due: bool,
    outbox: VecDeque<Vec<u8>>,
    delivered: Vec<Bytes>,
    /// Reliable packets sent for the first time, resent, and received again.
    pub counters: (u64, u64, u64),
    closed: bool,
}

impl H1z1Server {
    /// A server waiting for a SessionRequest; `crc_seed` is its seed.
    pub fn new(crc_seed: u32) -> Self {
        Self {
            framer: None,
            crc_seed,
            fragment_size: 0,
            next_sequence: 0,
            in_last_ack: -1,
            app_data: HashMap::new(),
            last_processed: -1,
            reassembly: None,
            reliable_sequence: -1,
            last_available: -1,
            out_last_ack: -1,
            cache: HashMap::new(),
            out_of_order: Vec::new(),
            un_ack: Vec::new(),
            last_ack_sent: -1,
            queue: Vec::new(),
            queue_len: 0,
            delayed: VecDeque::new(),
            pings: VecDeque::new(),
            avg_ping: 0,
            next_pass: None,
            pass_due: false,
            outbox: VecDeque::new(),
            delivered: Vec::new(),
            counters: (0, 0, 0),
            closed: false,
        }
    }

    /// Whether a session is open.
    pub fn is_open(&self) -> bool {
        self.framer.is_some() && !self.closed
    }

    /// Whether the client ended the session.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// The next 24 ms pass.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_pass.filter(|_| !self.closed)
    }

    /// Runs the sending loop if its interval is due.
    pub fn handle_timeout(&mut self, now: Instant) {
        let Some(at) = self.next_pass else { return };
        if at <= now && !self.closed {
            while self.next_pass.is_some_and(|t| t <= now) {
                self.next_pass = self.next_pass.map(|t| t + WAIT_TIME);
            }
            self.sending_process(now);
        }
    }

    /// Takes the messages delivered to the application.
    pub fn poll_delivered(&mut self, out: &mut Vec<Bytes>) {
        out.append(&mut self.delivered);
    }

    /// The application writes a reliable message (`sendAppData`); the pass it triggers runs at
    /// the next [`poll_transmit`](Self::poll_transmit), as the server's microtask does.
    pub fn send(&mut self, message: &[u8]) -> bool {
        if !self.is_open() {
            return false;
        }
        if message.len() <= self.fragment_size {
            self.reliable_sequence = wrap(self.reliable_sequence + 1);
            self.add_to_cache(self.reliable_sequence, message.to_vec(), false);
        } else {
            let mut data = (message.len() as u32).to_be_bytes().to_vec();
            data.extend_from_slice(message);
            for chunk in data.chunks(self.fragment_size.max(1)) {
                self.reliable_sequence = wrap(self.reliable_sequence + 1);
                self.add_to_cache(self.reliable_sequence, chunk.to_vec(), true);
            }
        }
        if self.reliable_available() {
            self.pass_due = true;
        }
        true
    }

    /// Takes the datagrams the server sends, running a pass the application asked for.
    pub fn poll_transmit(&mut self, now: Instant, out: &mut Vec<Vec<u8>>) {
        if self.pass_due {
            self.pass_due = false;
            self.sending_process(now);
        }
        out.extend(self.outbox.drain(..));
    }

    /// A datagram from the client.
    pub fn handle_datagram(&mut self, now: Instant, datagram: &[u8]) {
        if self.closed {
            return;
        }
        let Some(mut framer) = self.framer.take() else {
            self.handshake(now, datagram);
            return;
        };
        let packet = framer.open(datagram).ok().map(<[u8]>::to_vec);
        self.framer = Some(framer);
        if let Some(bytes) = packet {
            self.handle_packet(now, &bytes);
        }
    }

    fn handshake(&mut self, now: Instant, datagram: &[u8]) {
        let Ok(Packet::SessionRequest(request)) = Packet::decode(datagram) else {
            return;
        };
        self.fragment_size = (request.udp_length as usize).saturating_sub(4 + CRC_LENGTH);
        let reply = Packet::SessionResponse(SessionResponse {
            session_id: request.session_id,
            crc_seed: self.crc_seed,
            crc_length: CRC_LENGTH as u8,
            compression: 0,
            encryption_method: 0,
            udp_length: UDP_LENGTH,
            protocol_version: 3,
        });
        let mut out = Vec::new();
        reply.encode(&mut out);
        self.outbox.push_back(out);
        self.framer = Some(Framer::new(
            FrameConfig::new(self.crc_seed).with_crc_length(CrcLength::TWO),
        ));
        self.next_pass = Some(now + WAIT_TIME);
    }

    fn handle_packet(&mut self, now: Instant, bytes: &[u8]) {
        let Ok(packet) = Packet::decode(bytes) else {
            return;
        };
        match packet {
            Packet::MultiPacket(multi) => {
                let subs: Vec<Vec<u8>> = multi
                    .iter()
                    .map_while(Result::ok)
                    .map(<[u8]>::to_vec)
                    .collect();
                for sub in subs {
                    self.handle_packet(now, &sub);
                }
            }
            Packet::Disconnect(_) => self.closed = true,
            Packet::Heartbeat => self.outbox.push_back(vec![0, 0x06]),
            Packet::ReliableData(d) if d.channel == Channel::ZERO => {
                self.input_write(d.data.to_vec(), d.sequence, false);
            }
            Packet::ReliableDataFragment(d) if d.channel == Channel::ZERO => {
                self.input_write(d.data.to_vec(), d.sequence, true);
            }
            Packet::Acknowledge(a)
                if a.channel == Channel::ZERO && !self.out_of_order.contains(&a.sequence) =>
            {
                self.out_of_order.push(a.sequence);
            }
            Packet::AcknowledgeAll(a) if a.channel == Channel::ZERO => {
                self.on_ack(now, a.sequence);
                self.sending_process(now);
            }
            _ => {}
        }
    }

    // ---- input stream ----

    fn input_write(&mut self, data: Vec<u8>, sequence: u16, fragment: bool) {
        if i32::from(sequence) < self.next_sequence {
            // A duplicate: dropped, and not acknowledged again.
            self.counters.2 += 1;
            return;
        }
        self.app_data.insert(sequence, (data, fragment));
        if i32::from(sequence) > self.next_sequence {
            self.send_logical(Logical {
                bytes: seq_packet(OP_OUT_OF_ORDER, sequence),
                sequence: None,
            });
            return;
        }
        let mut ack = i32::from(sequence);
        for i in 1..i32::from(u16::MAX) {
            let index = ((self.in_last_ack + i) & 0xFFFF) as u16;
            if self.app_data.contains_key(&index) {
                ack = i32::from(index);
            } else {
                break;
            }
        }
        self.in_last_ack = ack;
        self.next_sequence = wrap(self.in_last_ack + 1);
        self.process_data();
    }

    fn process_data(&mut self) {
        loop {
            let next = ((self.last_processed + 1) & 0xFFFF) as u16;
            let Some((_, fragment)) = self.app_data.get(&next) else {
                return;
            };
            let messages = if *fragment {
                self.process_fragment(next)
            } else {
                let Some((payload, _)) = self.app_data.remove(&next) else {
                    return;
                };
                self.last_processed = i32::from(next);
                parse_channel_data(&payload)
            };
            if messages.is_empty() {
                // The server recurses only when the packet yielded messages.
                return;
            }
            self.delivered.extend(messages.into_iter().map(Bytes::from));
        }
    }

    fn process_fragment(&mut self, first: u16) -> Vec<Vec<u8>> {
        if self.reassembly.is_none() {
            let Some((payload, _)) = self.app_data.get(&first) else {
                return Vec::new();
            };
            let Some(total) = payload.get(..4) else {
                return Vec::new();
            };
            let total = u32::from_be_bytes([total[0], total[1], total[2], total[3]]) as usize;
            self.reassembly = Some(Reassembly {
                total,
                data: Vec::with_capacity(total.min(1 << 20)),
                processed: Vec::new(),
            });
        }
        let Some(mut r) = self.reassembly.take() else {
            return Vec::new();
        };
        let mut i = r.processed.len();
        while i < self.app_data.len() {
            let sequence = ((u32::from(first) + i as u32) % 0xFFFF) as u16;
            let Some((payload, _)) = self.app_data.get(&sequence) else {
                self.reassembly = Some(r);
                return Vec::new();
            };
            r.processed.push(sequence);
            let skip = if sequence == first { 4 } else { 0 };
            r.data
                .extend_from_slice(payload.get(skip..).unwrap_or_default());
            if r.data.len() >= r.total {
                for s in &r.processed {
                    self.app_data.remove(s);
                }
                self.last_processed = i32::from(sequence);
                r.data.truncate(r.total);
                return parse_channel_data(&r.data);
            }
            i += 1;
        }
        self.reassembly = Some(r);
        Vec::new()
    }

    // ---- output stream ----

    fn add_to_cache(&mut self, sequence: i32, data: Vec<u8>, fragment: bool) {
        self.cache.insert(
            sequence as u16,
            Cached {
                data,
                fragment,
                resends: 0,
            },
        );
    }

    fn flooded(&self) -> bool {
        self.last_available - self.out_last_ack >= MAX_SEQUENCE_AVAILABLE
    }

    fn reliable_available(&self) -> bool {
        self.out_last_ack != self.reliable_sequence && !self.flooded()
    }

    fn on_ack(&mut self, now: Instant, sequence: u16) {
        let sent = self
            .un_ack
            .iter()
            .find(|(s, _)| *s == sequence)
            .map(|e| e.1);
        if let (Some(sent), Some(c)) = (sent, self.cache.get(&sequence)) {
            {
                let ping = now.saturating_duration_since(sent).as_millis() as u64
                    + RESEND_TIMEOUT_MS * u64::from(c.resends);
                if ping > 0 {
                    self.pings.push_back(ping);
                }
                if self.pings.len() > AVG_PING_LEN {
                    self.pings.pop_front();
                }
                if !self.pings.is_empty() {
                    self.avg_ping = self.pings.iter().sum::<u64>() / self.pings.len() as u64;
                }
            }
        }
        let sequence = i32::from(sequence);
        let last = self.out_last_ack;
        let ahead = sequence > last || (sequence < last && last - sequence > 0xFFFF / 2);
        if ahead {
            while self.out_last_ack != sequence {
                self.forget(self.out_last_ack);
                self.out_last_ack = wrap(self.out_last_ack + 1);
                if self.out_last_ack == sequence {
                    self.forget(sequence);
                }
            }
        } else if self.un_ack.iter().any(|(s, _)| i32::from(*s) == sequence) {
            self.forget(sequence);
        }
    }

    fn forget(&mut self, sequence: i32) {
        if sequence < 0 {
            return;
        }
        let sequence = sequence as u16;
        self.cache.remove(&sequence);
        self.un_ack.retain(|(s, _)| *s != sequence);
    }

    fn data_packet(&self, sequence: u16) -> Option<Logical> {
        let c = self.cache.get(&sequence)?;
        let mut bytes = seq_packet(if c.fragment { OP_FRAGMENT } else { OP_DATA }, sequence);
        bytes.extend_from_slice(&c.data);
        Some(Logical {
            bytes,
            sequence: Some(sequence),
        })
    }

    fn resends(&mut self, now: Instant) -> Vec<Logical> {
        let mut resends = Vec::new();
        let mut resent: Vec<u16> = Vec::new();
        let timeout = Duration::from_millis(RESEND_TIMEOUT_MS + self.avg_ping);
        let due: Vec<u16> = self
            .un_ack
            .iter()
            .filter(|(_, t)| *t + timeout < now)
            .map(|(s, _)| *s)
            .collect();
        for sequence in due {
            let Some(c) = self.cache.get_mut(&sequence) else {
                continue;
            };
            if c.resends >= MAX_RESENDS {
                continue;
            }
            c.resends += 1;
            if let Some(p) = self.data_packet(sequence) {
                resent.push(sequence);
                resends.push(p);
            }
        }
        let out_of_order = std::mem::take(&mut self.out_of_order);
        for &sequence in &out_of_order {
            if i32::from(sequence) < self.out_last_ack {
                continue;
            }
            for index in self.out_last_ack.max(0)..i32::from(sequence) {
                let index = index as u16;
                if out_of_order.contains(&index) || resent.contains(&index) {
                    continue;
                }
                if let Some(p) = self.data_packet(index) {
                    resent.push(index);
                    resends.push(p);
                }
            }
        }
        self.counters.1 += resends.len() as u64;
        resends
    }

    fn fits(&self, p: &Logical) -> bool {
        p.can_be_buffered() && self.queue_len + p.bytes.len() < MAX_MULTI
    }

    fn enqueue(&mut self, p: Logical) {
        self.queue_len += p.bytes.len() + 1;
        self.queue.push(p);
    }

    /// Queues `p`, flushing the queue first when it does not fit; too big to queue at all, it
    /// leaves on its own.
    fn queue_or_send(&mut self, now: Instant, p: Logical) {
        if self.fits(&p) {
            self.enqueue(p);
            return;
        }
        self.flush(now);
        if self.fits(&p) {
            self.enqueue(p);
        } else {
            self.send_physical(now, &p);
        }
    }

    fn sending_process(&mut self, now: Instant) {
        if self.closed || self.framer.is_none() {
            return;
        }
        for resend in self.resends(now) {
            let sequence = resend.sequence;
            self.queue_or_send(now, resend);
            if let Some(s) = sequence {
                self.un_ack.retain(|(q, _)| *q != s);
            }
        }
        if self.reliable_available() {
            let first = self.last_available;
            let target = wrap(first + MAX_SEQUENCE_AVAILABLE);
            let mut at = first;
            while at != target {
                let sequence = wrap(at + 1);
                let Some(p) = self.data_packet(sequence as u16) else {
                    break;
                };
                self.counters.0 += 1;
                self.delayed.push_back(p);
                self.last_available = sequence;
                at = sequence;
            }
        }
        // `for (i = 0; i < delayed.length; i++) delayed.shift()`: about half of them per pass.
        let mut index = 0;
        while index < self.delayed.len() {
            let Some(p) = self.delayed.pop_front() else {
                break;
            };
            self.queue_or_send(now, p);
            index += 1;
        }
        if self.last_ack_sent != self.in_last_ack {
            self.last_ack_sent = self.in_last_ack;
            let ack = Logical {
                bytes: seq_packet(OP_ACK, self.in_last_ack as u16),
                sequence: None,
            };
            if !self.fits(&ack) {
                self.flush(now);
            }
            self.enqueue(ack);
        }
        self.flush(now);
    }

    /// `_sendLogicalPacket`: an OutOfOrder is queued for the next pass (flushed early only when
    /// the queue is nearly full).
    fn send_logical(&mut self, p: Logical) {
        if self.fits(&p) {
            self.enqueue(p);
            if self.queue.len() > 1 && self.queue_len * 10 >= MAX_MULTI * 9 {
                self.pass_due = true;
            }
        } else {
            self.delayed.push_back(p);
            self.pass_due = true;
        }
    }

    fn flush(&mut self, now: Instant) {
        let queue = std::mem::take(&mut self.queue);
        self.queue_len = 0;
        match queue.len() {
            0 => {}
            1 => self.send_physical(now, &queue[0]),
            _ => {
                let mut writer = MultiPacketWriter::new(MAX_MULTI + 4);
                for p in &queue {
                    if let Some(s) = p.sequence.filter(|_| p.is_reliable()) {
                        self.mark_sent(now, s);
                    }
                    writer.push(&p.bytes);
                }
                let mut out = Vec::new();
                writer.finish(&mut out);
                self.seal_and_send(out, true);
            }
        }
    }

    fn send_physical(&mut self, now: Instant, p: &Logical) {
        if let Some(s) = p.sequence.filter(|_| p.is_reliable()) {
            self.mark_sent(now, s);
        }
        self.seal_and_send(p.bytes.clone(), p.can_crc());
    }

    fn mark_sent(&mut self, now: Instant, sequence: u16) {
        match self.un_ack.iter_mut().find(|(s, _)| *s == sequence) {
            Some(entry) => entry.1 = now,
            None => self.un_ack.push((sequence, now)),
        }
    }

    fn seal_and_send(&mut self, mut bytes: Vec<u8>, crc: bool) {
        if let Some(framer) = self.framer.as_mut().filter(|_| crc) {
            framer.seal(&mut bytes, 0);
        }
        self.outbox.push_back(bytes);
    }
}

/// `opcode | u16 sequence` for channel 0.
fn seq_packet(opcode: u8, sequence: u16) -> Vec<u8> {
    let packet = match opcode {
        OP_OUT_OF_ORDER => Packet::Acknowledge(Ack {
            channel: Channel::ZERO,
            sequence,
        }),
        OP_ACK => Packet::AcknowledgeAll(Ack {
            channel: Channel::ZERO,
            sequence,
        }),
        OP_FRAGMENT => Packet::ReliableDataFragment(ReliableData {
            channel: Channel::ZERO,
            sequence,
            data: &[],
        }),
        _ => Packet::ReliableData(ReliableData {
            channel: Channel::ZERO,
            sequence,
            data: &[],
        }),
    };
    let mut out = Vec::new();
    packet.encode(&mut out);
    out
}

/// `parseChannelPacketData`: a payload starting `00 19` is a Group of length-prefixed items (an
/// empty Group yields nothing; `00 19 01` yields one empty message); any other payload is one
/// message, as is.
fn parse_channel_data(data: &[u8]) -> Vec<Vec<u8>> {
    let Some(mut rest) = data.strip_prefix(&[0x00, 0x19]) else {
        return vec![data.to_vec()];
    };
    let mut messages = Vec::new();
    while !rest.is_empty() {
        let (len, size) = match rest {
            [0xFF, 0xFF, 0xFF, a, b, c, d, ..] => {
                (u32::from_be_bytes([*a, *b, *c, *d]) as usize, 7)
            }
            [0xFF, a, b, ..] => (usize::from(u16::from_be_bytes([*a, *b])), 3),
            [n, ..] => (usize::from(*n), 1),
            [] => break,
        };
        rest = rest.get(size..).unwrap_or_default();
        let take = len.min(rest.len());
        messages.push(rest[..take].to_vec());
        rest = &rest[take..];
    }
    messages
}

/// `wrappedUint16.wrap` for values that grow by one from -1.
fn wrap(value: i32) -> i32 {
    if value > 0xFFFF {
        value - 0x10000
    } else {
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_group_yields_no_message_and_00_19_01_one_empty_message() {
        assert!(parse_channel_data(&[0, 0x19]).is_empty());
        assert_eq!(parse_channel_data(&[0, 0x19, 1]), vec![Vec::<u8>::new()]);
        assert_eq!(
            parse_channel_data(&[0, 0x19, 2, 7, 8, 1, 9]),
            vec![vec![7, 8], vec![9]]
        );
        assert_eq!(parse_channel_data(&[0xA5, 1]), vec![vec![0xA5, 1]]);
    }

    fn open(server: &mut H1z1Server, now: Instant) {
        let mut req = Vec::new();
        Packet::SessionRequest(soe_wire::SessionRequest {
            protocol_version: 3,
            session_id: 9,
            udp_length: 512,
            application_protocol: b"x",
        })
        .encode(&mut req);
        server.handle_datagram(now, &req);
        let mut out = Vec::new();
        server.poll_transmit(now, &mut out);
        assert_eq!(out.len(), 1, "a SessionReply");
    }

    fn data(server: &mut H1z1Server, now: Instant, sequence: u16, payload: &[u8]) {
        let mut bytes = seq_packet(OP_DATA, sequence);
        bytes.extend_from_slice(payload);
        server.handle_packet(now, &bytes);
    }

    #[test]
    fn delivery_stalls_behind_a_packet_that_yields_nothing() {
        let now = Instant::now();
        let mut server = H1z1Server::new(1);
        open(&mut server, now);
        data(&mut server, now, 0, b"\xA5a");
        // 1 (the empty Group) is lost; 2 and 3 arrive and wait.
        data(&mut server, now, 2, b"\xA5c");
        data(&mut server, now, 3, b"\xA5d");
        let mut got = Vec::new();
        server.poll_delivered(&mut got);
        assert_eq!(got.len(), 1);
        data(&mut server, now, 1, &[0, 0x19]);
        assert_eq!(server.in_last_ack, 3, "everything is acknowledged");
        server.poll_delivered(&mut got);
        assert_eq!(got.len(), 1, "2 and 3 wait behind the empty Group");
        data(&mut server, now, 4, b"\xA5e");
        server.poll_delivered(&mut got);
        assert_eq!(got.len(), 4, "the next in-order packet releases them");
    }

    #[test]
    fn a_duplicate_is_never_acknowledged_again() {
        let now = Instant::now();
        let mut server = H1z1Server::new(1);
        open(&mut server, now);
        data(&mut server, now, 0, b"\xA5a");
        let mut out = Vec::new();
        server.handle_timeout(now + WAIT_TIME);
        server.poll_transmit(now + WAIT_TIME, &mut out);
        assert_eq!(out.len(), 1, "one ack");
        data(&mut server, now, 0, b"\xA5a");
        out.clear();
        server.handle_timeout(now + WAIT_TIME * 2);
        server.poll_transmit(now + WAIT_TIME * 2, &mut out);
        assert!(out.is_empty(), "no ack for the duplicate: {out:?}");
        assert_eq!(server.counters.2, 1);
    }
}
