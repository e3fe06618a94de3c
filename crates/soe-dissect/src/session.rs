//! The state of one followed session: its addresses, handshake, and per-side receivers.

use std::net::SocketAddr;
use std::time::Duration;

use crate::channel::{Carrier, ChannelRx, Sink, flush};
use crate::config::Limits;
use crate::framing::{Framing, Unframed};
use crate::judge::Judge;
use crate::records::{CrcVerdict, Direction, DirectionStats, DisconnectSummary, FlushRecord};

/// One session's state.
pub(crate) struct SessionState {
    /// The session number, 1 for the first (0 for a stateless one).
    pub(crate) number: usize,
    /// The address pair, lower first.
    pub(crate) addrs: (SocketAddr, SocketAddr),
    /// The side that sent SessionRequest.
    pub(crate) client: Option<SocketAddr>,
    /// The session id.
    pub(crate) session_id: Option<u32>,
    /// The application protocol name (boxed, as are the rare parts below: a session that
    /// carried no data costs under 1 KiB).
    pub(crate) protocol: Option<Box<str>>,
    /// The client's udp_length.
    pub(crate) client_udp_length: Option<u32>,
    /// The server's udp_length.
    pub(crate) server_udp_length: Option<u32>,
    /// Whether a SessionRequest was seen.
    pub(crate) request_seen: bool,
    /// From SessionResponse.
    pub(crate) learned: Option<Framing>,
    /// The Disconnect seen, if any.
    pub(crate) disconnect: Option<Box<DisconnectSummary>>,
    /// The first datagram's time.
    pub(crate) first: Duration,
    /// The last datagram's time.
    pub(crate) last: Duration,
    /// Per sender: 0 is the client (or the lower address while the client is unknown).
    pub(crate) sides: [Side; 2],
    /// RC4 switches on after the session's first reliable message, which is still to come
    /// ([`DissectConfig::rc4_after_first_message`](crate::DissectConfig)).
    pub(crate) plain_first: bool,
}

/// What one side sends, and the receiver state for it.
#[derive(Default)]
pub(crate) struct Side {
    /// The counters of what this side sends.
    pub(crate) stats: DirectionStats,
    /// The receiver emulation per channel, made on first use.
    pub(crate) channels: [Option<Box<ChannelRx>>; 4],
    /// Out-of-order packets buffered, all channels.
    pub(crate) stored: usize,
    /// The newest Ordered stamp delivered.
    pub(crate) ordered_newest: Option<u16>,
    /// Judges whether this side's reliable data is encrypted.
    pub(crate) judge: Judge,
}

impl SessionState {
    /// A fresh session for an address pair; `plain_first`: its first reliable message is sent
    /// before RC4 switches on.
    pub(crate) fn new(
        number: usize,
        addrs: (SocketAddr, SocketAddr),
        time: Duration,
        plain_first: bool,
    ) -> Self {
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
            plain_first,
        }
    }

    /// Bytes held by every receiver of this session.
    pub(crate) fn held(&self) -> usize {
        self.sides
            .iter()
            .flat_map(|s| s.channels.iter().flatten())
            .map(|c| c.held())
            .sum()
    }

    /// Frees the receivers' buffers, returning their bytes to the budget.
    pub(crate) fn release(&mut self, budget: &mut usize) {
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
    pub(crate) fn side_of(&self, src: SocketAddr) -> usize {
        match self.client {
            Some(client) => usize::from(src != client),
            None => usize::from(src != self.addrs.0),
        }
    }

    /// Sets the client, keeping side 0 the client's.
    pub(crate) fn set_client(&mut self, client: SocketAddr) {
        if self.client.is_none() && client != self.addrs.0 {
            self.sides.swap(0, 1);
        }
        self.client = Some(client);
    }

    /// The server's address, when the client is known.
    pub(crate) fn server(&self) -> Option<SocketAddr> {
        self.client.map(|c| {
            if c == self.addrs.0 {
                self.addrs.1
            } else {
                self.addrs.0
            }
        })
    }

    /// The direction of a datagram from `src` to `dst`.
    pub(crate) fn direction(&self, src: SocketAddr, dst: SocketAddr) -> Direction {
        match self.client {
            _ if src == dst => Direction::Unknown,
            Some(c) if c == src => Direction::ClientToServer,
            Some(_) => Direction::ServerToClient,
            None => Direction::Unknown,
        }
    }

    /// Counts a datagram from side `side` at `time`.
    pub(crate) fn count_datagram(&mut self, side: usize, time: Duration, len: usize) {
        self.last = self.last.max(time);
        if let Some(s) = self.sides.get_mut(side) {
            s.stats.datagrams += 1;
            s.stats.bytes += len as u64;
        }
    }

    /// Counts what unframing a datagram of `len` bytes from side `side` found wrong.
    pub(crate) fn count_unframing(
        &mut self,
        side: usize,
        unframed: &Unframed,
        len: usize,
        notes: &mut Vec<String>,
    ) {
        let bad_crc = unframed.crc.verdict == CrcVerdict::Bad;
        let largest = self.client_udp_length.max(self.server_udp_length);
        let Some(s) = self.sides.get_mut(side) else {
            return;
        };
        if bad_crc {
            s.stats.crc_failures += 1;
            notes.push("bad CRC: decoded best-effort, not fed to reassembly or decryption".into());
            if let Some(largest) = largest.filter(|&l| len as u64 > u64::from(l)) {
                notes.push(format!(
                    "{len} bytes, over the largest datagram either side accepts ({largest}): \
                     likely a run of datagrams sent with UDP segmentation offload (GSO) and \
                     captured on the sending host before it was split; capture elsewhere"
                ));
            }
        } else if unframed.error.is_some() {
            // A framing failure behind a good (or unknown) CRC: corrupt, not noise.
            s.stats.malformed += 1;
        }
    }

    /// Whether the handshake was seen (the streams then start at sequence 0).
    pub(crate) fn handshake(&self) -> bool {
        self.request_seen || self.learned.is_some()
    }

    /// How many sides are told apart: one when both addresses are the same (hex input).
    pub(crate) fn side_count(&self) -> usize {
        if self.addrs.0 == self.addrs.1 { 1 } else { 2 }
    }

    /// Side `i`'s direction, sender and receiver (client to server first when known).
    pub(crate) fn side_view(&self, i: usize) -> (Direction, SocketAddr, SocketAddr) {
        let (from0, to0) = match (self.client, self.server()) {
            (Some(c), Some(s)) => (c, s),
            _ => self.addrs,
        };
        let (from, to) = if i == 0 { (from0, to0) } else { (to0, from0) };
        let direction = match (self.client, self.side_count(), i) {
            (Some(_), 2, 0) => Direction::ClientToServer,
            (Some(_), 2, _) => Direction::ServerToClient,
            _ => Direction::Unknown,
        };
        (direction, from, to)
    }

    /// The capture ended: every gap of side `i` is given up and what waited behind it
    /// delivered; `None` when nothing changed.
    pub(crate) fn flush_side(
        &mut self,
        i: usize,
        budget: &mut usize,
        limits: Limits,
    ) -> Option<FlushRecord> {
        let (direction, src, dst) = self.side_view(i);
        let (mut messages, mut notes, mut omitted) = (Vec::new(), Vec::new(), 0u64);
        let Side {
            stats,
            channels,
            stored,
            judge,
            ..
        } = self.sides.get_mut(i)?;
        let plain_first = &mut self.plain_first;
        for rx in channels.iter_mut().flatten() {
            let mut sink = Sink {
                stats: &mut *stats,
                messages: &mut messages,
                omitted: &mut omitted,
                notes: &mut notes,
                budget: &mut *budget,
                stored: &mut *stored,
                limits,
                judge: &mut *judge,
                carrier: Carrier::default(),
                plain_first: &mut *plain_first,
            };
            flush(rx, &mut sink);
        }
        if omitted > 0 {
            notes.push(format!(
                "{omitted} more messages released here are not listed (limit {})",
                limits.max_listed
            ));
        }
        (!messages.is_empty() || !notes.is_empty()).then_some(FlushRecord {
            kind: "flush",
            session: self.number,
            direction,
            src,
            dst,
            messages,
            notes,
        })
    }
}
