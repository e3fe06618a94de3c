//! The [`Dissector`]: follows sessions by address pair and turns each datagram into a
//! [`DatagramRecord`].

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use soe_crypto::CrcLength;
use soe_wire::{FrameConfig, Framer, Packet};

use crate::channel::Carrier;
use crate::config::DEFAULT_CRC_LENGTH;
use crate::config::DissectConfig;
use crate::framing::{Framing, Unframed, is_contextless, unframe};
use crate::records::{
    CrcVerdict, DatagramRecord, Direction, DirectionSummary, FlushRecord, Record, SessionSummary,
};
use crate::session::SessionState;
use crate::work::{Datagram, Work, secs};

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

    /// Dissects one datagram. `time`: its capture timestamp; `src`/`dst`: its addresses. Its
    /// messages name it by its index ([`DatagramRecord::index`]).
    pub fn dissect(
        &mut self,
        time: Duration,
        src: SocketAddr,
        dst: SocketAddr,
        datagram: &[u8],
    ) -> DatagramRecord {
        let frame = self.count + 1;
        self.dissect_frame(frame, time, src, dst, datagram)
    }

    /// [`dissect`](Self::dissect) for the datagram of capture frame `frame`
    /// ([`CapturedDatagram::frame`](crate::capture::CapturedDatagram)): its messages name the
    /// frames that carried them by that number
    /// ([`MessageRecord::first_frame`](crate::MessageRecord::first_frame)).
    pub fn dissect_frame(
        &mut self,
        frame: u64,
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
        let mut temp = None;
        let session = match slot.and_then(|i| self.sessions.get_mut(i)) {
            Some(s) => s,
            None => temp.insert(SessionState::new(0, key, time, false)),
        };
        let direction_before = session.direction(src, dst);
        let side = session.side_of(src);
        session.count_datagram(side, time, datagram.len());
        let unframed = unframe_datagram(
            &mut self.framers,
            session,
            assumed,
            (src, datagram),
            contextless.is_some(),
            &mut notes,
        );
        session.count_unframing(side, &unframed, datagram.len(), &mut notes);
        let datagram_info = Datagram {
            src,
            dst,
            time,
            feed: unframed.feed,
            key: self.config.key_for(session.server(), session.addrs),
            carrier: Carrier {
                frame,
                compressed: unframed.compressed,
                crc: unframed.crc.verdict,
            },
        };
        let mut work = Work::new(
            session,
            side,
            datagram_info,
            &mut self.buffered,
            self.config.limits,
            notes,
        );
        let packet = work.packet_tree(unframed.bytes.as_deref(), datagram);
        let done = work.finish();
        let direction = match session.direction(src, dst) {
            Direction::Unknown => direction_before,
            d => d,
        };
        let number = (session.number > 0).then_some(session.number);
        if slot.is_none() {
            session.release(&mut self.buffered);
        }
        self.remember_cookie(done.learned, slot);
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
            resends: done.resends,
            messages: done.messages,
            notes: done.notes,
        }
    }

    /// Files a session under the (session id, CRC seed) its SessionResponse gave, for
    /// RemapConnection.
    fn remember_cookie(&mut self, learned: Option<(u32, u32)>, slot: Option<usize>) {
        if let (Some(cookie), Some(i)) = (learned, slot) {
            if self.by_cookie.len() < self.config.limits.max_sessions
                || self.by_cookie.contains_key(&cookie)
            {
                self.by_cookie.insert(cookie, i);
            }
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
                    *s = SessionState::new(number, key, time, self.config.rc4_after_first_message);
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
        self.sessions.push(SessionState::new(
            index + 1,
            key,
            time,
            self.config.rc4_after_first_message,
        ));
        self.by_pair.insert(key, index);
        index
    }

    /// Bytes held for reassembly and out-of-order packets, across all sessions (at most
    /// [`Limits::max_buffered`](crate::Limits::max_buffered)).
    pub fn buffered_bytes(&self) -> usize {
        self.buffered
    }

    /// The application protocol name of session `number` (as in the records), when its
    /// SessionRequest was seen.
    pub fn application_protocol(&self, number: usize) -> Option<&str> {
        let index = number.checked_sub(1)?;
        self.sessions.get(index)?.protocol.as_deref()
    }

    /// Sessions followed so far, live and ended (at most [`Limits::max_sessions`](crate::Limits::max_sessions)).
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// Ends the capture: every reliable gap still open in any session is given up as lost to
    /// the capture, and what waited behind it is delivered; a fragmented message still
    /// incomplete is counted as not reassembled. Returns one record per session direction that
    /// released messages or has something to say. Call it once the input is exhausted, before
    /// reading the summaries; the dissector can go on after it.
    pub fn flush(&mut self) -> Vec<FlushRecord> {
        let limits = self.config.limits;
        let mut out = Vec::new();
        for session in &mut self.sessions {
            for side in 0..session.side_count() {
                out.extend(session.flush_side(side, &mut self.buffered, limits));
            }
        }
        out
    }

    /// The records to end a stream with: what [`flush`](Self::flush) released, then a summary
    /// of every session, in the order they started. The dissector can go on after this.
    pub fn finish(&mut self) -> Vec<Record> {
        let mut records: Vec<Record> = self.flush().into_iter().map(Record::Flush).collect();
        records.extend(self.summaries().into_iter().map(Record::Session));
        records
    }

    /// A summary of every session, in the order they started.
    pub fn summaries(&self) -> Vec<SessionSummary> {
        self.sessions.iter().map(|s| self.summary(s)).collect()
    }

    /// The summary of one session.
    fn summary(&self, s: &SessionState) -> SessionSummary {
        let first = self.first_time.unwrap_or_default();
        let framing = s.learned.unwrap_or_else(|| self.assumed_framing());
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
        let directions = (0..s.side_count())
            .map(|i| {
                let (direction, from, to) = s.side_view(i);
                DirectionSummary {
                    direction,
                    from,
                    to,
                    stats: s.sides[i].stats.clone(),
                }
            })
            .collect();
        SessionSummary {
            kind: "session",
            session: s.number,
            addresses: [s.addrs.0, s.addrs.1],
            client: s.client,
            server: s.server(),
            session_id: s.session_id,
            application_protocol: s.protocol.as_deref().map(str::to_owned),
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
            disconnect: s.disconnect.as_deref().cloned(),
            directions,
        }
    }
}

/// Checks the CRC of a datagram and strips its framing: plain for contextless packets and for
/// a refusal sent before the handshake, by the session's framing otherwise.
fn unframe_datagram(
    framers: &mut [Framer; 2],
    session: &SessionState,
    assumed: Framing,
    (src, datagram): (SocketAddr, &[u8]),
    contextless: bool,
    notes: &mut Vec<String>,
) -> Unframed {
    let refusal = session.request_seen
        && session.learned.is_none()
        && session.client.is_some_and(|c| c != src)
        && matches!(datagram, [0, 0x05, _, _, _, _, _, _]);
    if refusal {
        notes.push(
            "a refusal: a Disconnect sent before any SessionResponse carries no flag and no CRC"
                .to_owned(),
        );
        Unframed::plain(datagram, CrcVerdict::None)
    } else if contextless || is_contextless(datagram) {
        Unframed::plain(datagram, CrcVerdict::None)
    } else {
        unframe(framers, session.learned.unwrap_or(assumed), datagram, notes)
    }
}
