//! One side of one session: handshake, framing, timers, and the glue to the reliable channels.

use std::collections::VecDeque;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use soe_reliable::{ReceiveBacklog, ReliableChannel, ReliableError};
use soe_wire::{
    Channel, CrcLength, Disconnect, DisconnectReason, FrameConfig, Framer, MultiPacketWriter,
    NetStatusRequest, NetStatusResponse, Ordered, PROTOCOL_VERSION, Packet, RemapConnection,
    SessionRequest, SessionResponse, WireError,
};

use crate::config::MIN_UDP_LENGTH;
use crate::keepalive::{ANSWER_WINDOW, OwnHeartbeats};
use crate::timer::{Timer, TimerTable};
use crate::{Delivery, Event, RandomSource, SendError, SessionConfig, SessionStats};

/// The largest sub-packet a MultiPacket carries (one-byte lengths).
const MAX_SUB_PACKET: usize = 255;
/// The most framing any session adds: a compression flag and a 4-byte CRC.
const MAX_OVERHEAD: usize = 5;
/// The bit of `Session::probe` that says the peer answered the liveness probe.
const PROBE_HEARD: u32 = 1 << 31;
/// `00 1A | u16 sequence`: the bytes an Ordered packet adds to its message.
const ORDERED_HEADER: usize = 4;
/// Post-handshake NetStatus probes a client sends before giving up on an answer.
const MAX_PROBES: u8 = 5;
/// RemapConnection attempts (one per retry interval) before a client gives up on a server that
/// keeps answering UnknownSender. Ten: a NAT rebinding on a path losing 30 % of datagrams
/// loses three RemapConnections in a row 2.7 % of the time (soe-sim found sessions ended that
/// way), ten in a row 6e-6 of the time; a client whose server restarted still learns it in
/// about ten seconds, well within the idle timeout.
const MAX_REMAPS: u8 = 10;

/// Which side of the handshake a session is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// Sent the SessionRequest.
    Client,
    /// Answered it.
    Server,
}

/// Where a session is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum State {
    /// Client: SessionRequest sent, no answer yet. Server: SessionResponse sent, no valid packet
    /// from the client yet (half-open).
    Handshake,
    /// Established.
    Connected,
    /// Closing gracefully: queued reliable data is being flushed; no new messages are taken.
    Closing,
    /// Closed for the application ([`Event::Closed`] was queued); the Disconnect is being sent
    /// its configured number of times.
    Draining,
    /// Nothing more to do.
    Closed,
}

// Pending control packets (bit flags).
const P_REQUEST: u8 = 1;
const P_RESPONSE: u8 = 1 << 1;
const P_REMAP: u8 = 1 << 2;
const P_DISCONNECT: u8 = 1 << 3;
const P_HEARTBEAT: u8 = 1 << 4;
const P_NET_REQUEST: u8 = 1 << 5;
const P_NET_RESPONSE: u8 = 1 << 6;
/// A liveness probe (a Heartbeat) that must travel after the Heartbeat answering the peer's,
/// not merged with it: see [`Session::probe_liveness`].
const P_PROBE: u8 = 1 << 7;

/// Reusable buffers for assembling datagrams. An endpoint shares one among all its sessions; a
/// standalone session makes its own on first use.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    multi: MultiPacketWriter,
    packet: Vec<u8>,
}

/// An outgoing unreliable message.
#[derive(Debug)]
enum Outgoing {
    /// A bare datagram (first byte non-zero); travels alone.
    Bare(Bytes),
    /// An Ordered packet with its stamp.
    Ordered(u16, Bytes),
}

/// What only sessions that carry data need; allocated on the first message either way, so an
/// idle session costs only its [`Session`] struct.
#[derive(Debug, Default)]
struct DataPath {
    channels: [Option<Box<ReliableChannel>>; 4],
    unreliable_in: VecDeque<(Delivery, Bytes)>,
    unreliable_out: VecDeque<Outgoing>,
    ordered_tx: soe_reliable::OrderedSender,
    ordered_rx: soe_reliable::OrderedReceiver,
    /// A packet a channel produced that did not fit the last datagram; goes first in the next.
    carry: Vec<u8>,
    /// RC4 switched on or off by the application (`None`: as the config starts).
    encryption: Option<bool>,
}

impl DataPath {
    /// Whether `f` holds for an open channel: the four slots in turn, which costs less than a
    /// slice iterator's `any` in the checks a session answers after every call.
    #[inline(always)]
    fn any_channel(&self, f: impl Fn(&ReliableChannel) -> bool) -> bool {
        let [a, b, c, d] = &self.channels;
        a.as_deref().is_some_and(&f)
            || b.as_deref().is_some_and(&f)
            || c.as_deref().is_some_and(&f)
            || d.as_deref().is_some_and(&f)
    }
}

/// The counters the session keeps itself (the channels keep theirs).
#[derive(Debug, Default, Clone, Copy)]
struct Counters {
    datagrams_sent: u64,
    bytes_sent: u64,
    datagrams_received: u64,
    bytes_received: u64,
    crc_rejects: u64,
    crcless_accepted: u64,
    unreliable_sent: u64,
    unreliable_received: u64,
    unreliable_dropped: u64,
    heartbeats_sent: u64,
    heartbeats_received: u64,
}

/// A NetStatusRequest to answer: the requester's tick and packet counts.
#[derive(Debug, Clone, Copy)]
struct NetAnswer {
    tick: u16,
    sent: u64,
    received: u64,
}

/// One side of one session, driven without I/O (see the crate documentation for the polling
/// order).
#[derive(Debug)]
pub struct Session {
    config: Arc<SessionConfig>,
    side: Side,
    state: State,
    /// Pending `P_*` control packets.
    pending: u8,
    /// Whether the application has been told of this session (client: always; server: after
    /// Accepted).
    surfaced: bool,
    /// Connected/Accepted not yet polled.
    open_event: bool,
    /// Closed not yet polled.
    closed_event: bool,
    closed_by_peer: bool,
    /// Our Heartbeat (a keep-alive or a probe) is due or out, and nothing has been heard from
    /// the peer since: cleared by any authentic packet, not only a Heartbeat.
    heartbeat_outstanding: bool,
    /// The pending Heartbeat ([`P_HEARTBEAT`]) answers one of the peer's.
    heartbeat_answer_owed: bool,
    /// Our own Heartbeats (keep-alives and probes, not answers) that may still be answered.
    /// Each Heartbeat that arrives while some are is one's answer, however late, and is not
    /// answered: with a round trip longer than the retry interval, a resent Heartbeat's answer
    /// comes after the first one's, and answering it as a new Heartbeat would have both sides
    /// answer each other's answers for as long as the session lives. Bounded by those sent
    /// within the time an answer can take (see [`crate::keepalive`]).
    own_heartbeats: OwnHeartbeats,
    /// Client: whether the server has been heard since the handshake (it knows our session).
    server_confirmed: bool,
    probes_sent: u8,
    remap_attempts: u8,
    disconnects_left: u8,
    close_reason: DisconnectReason,
    session_id: u32,
    crc_seed: u32,
    /// The peer's udp_length capped by ours: the largest datagram we send.
    remote_udp_length: u32,
    net_tick: u16,
    net_answer: Option<NetAnswer>,
    /// Boxed: it is taken out and put back around every datagram handled, and a pointer moves
    /// cheaper than the framer.
    framer: Option<Box<Framer>>,
    /// The framing the framer adds (kept apart: the framer is taken out while a datagram is
    /// handled, and a channel created then must see the same packet size).
    framing_overhead: u8,
    /// The liveness probe sent before a replacement: 0 for none, else [`PROBE_HEARD`] once the
    /// peer was heard since, plus the whole seconds from `start` to the probe (rounded down) plus
    /// one. One `u32` so that an idle session stays as small as it was.
    probe: u32,
    timers: TimerTable,
    start: Instant,
    net_sent_at: Option<Instant>,
    /// The latest `now` this session was given (when it closed, for a finished one).
    last_now: Instant,
    remap_next: Option<Instant>,
    /// The smoothed and the smallest NetStatus round trip, in microseconds (4 bytes each
    /// instead of a `Duration`'s 16: an idle session costs less at 100k).
    /// (`NonZeroU32`, 0 µs read as 1: an `Option` of it takes 4 bytes, not 8.)
    net_rtt_us: Option<NonZeroU32>,
    net_min_rtt_us: Option<NonZeroU32>,
    counters: Counters,
    data: Option<Box<DataPath>>,
    scratch: Option<Box<Scratch>>,
}

/// Checks a SessionRequest against a server config: the refusal reason, if any.
///
/// A protocol version other than 3 (unless the config
/// [accepts any version](SessionConfig::with_any_protocol_version)) or a wrong application
/// protocol name (unless it [accepts any name](SessionConfig::with_any_application_protocol)) is
/// [`DisconnectReason::ProtocolMismatch`]; a `udp_length` below [`MIN_UDP_LENGTH`] is
/// [`DisconnectReason::ConnectionRefused`].
pub fn check_request(
    config: &SessionConfig,
    request: &SessionRequest<'_>,
) -> Result<(), DisconnectReason> {
    if (request.protocol_version != PROTOCOL_VERSION && !config.any_protocol_version())
        || (request.application_protocol != config.application_protocol()
            && !config.any_application_protocol())
    {
        return Err(DisconnectReason::ProtocolMismatch);
    }
    if request.udp_length < MIN_UDP_LENGTH {
        return Err(DisconnectReason::ConnectionRefused);
    }
    Ok(())
}

/// Writes the refusal of a SessionRequest into `buf` (cleared first) and returns its length.
///
/// The requester has no CRC seed yet, so the refusal is a Disconnect framed with no compression
/// flag and a CRC trailer of length 0: exactly `00 05 | session_id | reason`, 8 bytes. Our client
/// accepts it during its handshake when the session id is its own; peers that expect a CRC drop
/// it and reach their connect timeout.
pub fn encode_refusal(session_id: u32, reason: DisconnectReason, buf: &mut Vec<u8>) -> usize {
    buf.clear();
    Packet::Disconnect(Disconnect {
        session_id,
        reason,
        bare: false,
    })
    .encode(buf)
}

impl Session {
    /// Starts a client session: the first [`Session::poll_transmit`] sends the SessionRequest.
    /// The session id is drawn from `rng`.
    pub fn client(now: Instant, config: Arc<SessionConfig>, rng: &mut dyn RandomSource) -> Self {
        let session_id = rng.next_u32();
        let mut s = Self::blank(now, config, Side::Client, session_id);
        s.surfaced = true;
        s.pending = P_REQUEST;
        s.timers
            .set(Timer::ConnectTimeout, now + s.config.connect_timeout());
        s
    }

    /// Starts a server session answering `request` with `crc_seed`: the first
    /// [`Session::poll_transmit`] sends the SessionResponse. The session is half-open until the
    /// client's first valid packet arrives ([`Event::Accepted`]); it is dropped silently if that
    /// does not happen within the connect timeout. Fails with the refusal reason when
    /// [`check_request`] does (send it with [`encode_refusal`]). A config that
    /// [accepts any name](SessionConfig::with_any_application_protocol) is copied with the
    /// client's name when it differs.
    pub fn server(
        now: Instant,
        config: Arc<SessionConfig>,
        request: &SessionRequest<'_>,
        crc_seed: u32,
    ) -> Result<Self, DisconnectReason> {
        check_request(&config, request)?;
        let config = if request.application_protocol == config.application_protocol() {
            config
        } else {
            Arc::new(
                (*config)
                    .clone()
                    .with_application_protocol(request.application_protocol),
            )
        };
        let mut s = Self::blank(now, config, Side::Server, request.session_id);
        s.crc_seed = crc_seed;
        s.remote_udp_length = request.udp_length.min(s.config.udp_length());
        let frame = FrameConfig::new(crc_seed)
            .with_crc_length(s.config.crc_length())
            .with_compression(s.config.compression())
            .with_max_inflated(s.max_inflated());
        s.set_framer(frame);
        s.pending = P_RESPONSE;
        // A client may stay silent after the handshake until its first heartbeat (soe-protocol
        // 2.3.0 sends nothing until it has data): keep the half-open session at least as long as
        // an idle established one. Floods are bounded by the half-open cap, not by this time.
        let connect = s.config.connect_timeout();
        let half_open = s
            .config
            .idle_timeout()
            .map_or(connect, |idle| idle.max(connect));
        s.timers.set(Timer::ConnectTimeout, now + half_open);
        Ok(s)
    }

    /// A server session for a client whose handshake state was lost (its half-open entry was
    /// evicted during a flood) but who proved it received our SessionResponse by sending
    /// RemapConnection with the session id and the CRC seed we derived for it. The client's
    /// udp_length is unknown, so `udp_length` (the caller's conservative guess) caps our sends.
    /// The session starts established.
    pub(crate) fn server_recovered(
        now: Instant,
        config: Arc<SessionConfig>,
        session_id: u32,
        crc_seed: u32,
        udp_length: u32,
    ) -> Self {
        let mut s = Self::blank(now, config, Side::Server, session_id);
        s.crc_seed = crc_seed;
        s.remote_udp_length = udp_length.min(s.config.udp_length());
        let frame = FrameConfig::new(crc_seed)
            .with_crc_length(s.config.crc_length())
            .with_compression(s.config.compression())
            .with_max_inflated(s.max_inflated());
        s.set_framer(frame);
        s.promote(now);
        s
    }

    fn blank(now: Instant, config: Arc<SessionConfig>, side: Side, session_id: u32) -> Self {
        let remote_udp_length = config.udp_length();
        Self {
            config,
            side,
            state: State::Handshake,
            pending: 0,
            surfaced: false,
            open_event: false,
            closed_event: false,
            closed_by_peer: false,
            heartbeat_outstanding: false,
            heartbeat_answer_owed: false,
            own_heartbeats: OwnHeartbeats::default(),
            server_confirmed: false,
            probes_sent: 0,
            remap_attempts: 0,
            disconnects_left: 0,
            close_reason: DisconnectReason::None,
            session_id,
            crc_seed: 0,
            remote_udp_length,
            net_tick: 0,
            net_answer: None,
            framer: None,
            framing_overhead: MAX_OVERHEAD as u8,
            probe: 0,
            timers: TimerTable::default(),
            start: now,
            net_sent_at: None,
            last_now: now,
            remap_next: None,
            net_rtt_us: None,
            net_min_rtt_us: None,
            counters: Counters::default(),
            data: None,
            scratch: None,
        }
    }

    fn max_inflated(&self) -> usize {
        (self.config.udp_length() as usize).saturating_mul(4)
    }

    // ----- accessors -----

    /// The session id (chosen by the client).
    pub fn session_id(&self) -> u32 {
        self.session_id
    }

    /// The CRC seed (chosen by the server; 0 on a client before the handshake completes).
    pub fn crc_seed(&self) -> u32 {
        self.crc_seed
    }

    /// Which side this is.
    pub fn side(&self) -> Side {
        self.side
    }

    /// Where the session is in its life.
    pub fn state(&self) -> State {
        self.state
    }

    /// Whether the session is over for the application ([`State::Draining`] or
    /// [`State::Closed`]): [`Event::Closed`] has been queued and no message is taken any more.
    pub fn is_closed(&self) -> bool {
        matches!(self.state, State::Draining | State::Closed)
    }

    /// Whether the session has nothing more to do at all (its Disconnects are sent).
    pub fn is_drained(&self) -> bool {
        self.state == State::Closed
    }

    /// The config.
    pub fn config(&self) -> &Arc<SessionConfig> {
        &self.config
    }

    /// The largest datagram this session sends: `min(peer's udp_length, ours)`.
    pub fn remote_udp_length(&self) -> u32 {
        self.remote_udp_length
    }

    /// The largest packet (`opcode | body`) that fits one datagram after framing.
    pub fn max_packet_len(&self) -> usize {
        (self.remote_udp_length as usize).saturating_sub(usize::from(self.framing_overhead))
    }

    /// The framing in use (CRC seed and length, compression) once the handshake gave one.
    pub fn framing(&self) -> Option<FrameConfig> {
        self.framer.as_ref().map(|f| *f.config())
    }

    fn set_framer(&mut self, frame: FrameConfig) {
        let framer = Framer::new(frame);
        self.framing_overhead = u8::try_from(framer.overhead()).unwrap_or(u8::MAX);
        self.framer = Some(Box::new(framer));
    }

    /// Sends the peer a Heartbeat, which a live peer answers: the check the endpoint makes
    /// before a new SessionRequest from this session's address may replace it. A probe already
    /// unanswered is sent again (it may have been lost) but keeps its start.
    ///
    /// When the peer's own Heartbeat is still to be answered, the probe is a second Heartbeat
    /// after the answer: a single one would answer the peer's, and the peer would not answer
    /// it, leaving a live peer silent until a new SessionRequest from its address (spoofed,
    /// say) replaced its session.
    pub(crate) fn probe_liveness(&mut self, now: Instant) {
        if self.state == State::Connected {
            let answer_owed = self.pending & P_HEARTBEAT != 0 && self.heartbeat_answer_owed;
            self.pending |= if answer_owed { P_PROBE } else { P_HEARTBEAT };
            self.heartbeat_outstanding = true;
            if self.unanswered_probe(now).is_none() {
                let secs = now.saturating_duration_since(self.start).as_secs();
                self.probe = u32::try_from(secs)
                    .unwrap_or(PROBE_HEARD - 2)
                    .min(PROBE_HEARD - 2)
                    + 1;
            }
        }
    }

    /// How long the probe of [`Session::probe_liveness`] has gone unanswered, with nothing
    /// heard from the peer since it was sent, understated by less than a second. `None` without
    /// an unanswered probe.
    pub(crate) fn unanswered_probe(&self, now: Instant) -> Option<Duration> {
        if self.probe == 0 || self.probe & PROBE_HEARD != 0 {
            return None;
        }
        // Sent at `probe - 1` whole seconds or later: understated by less than a second.
        Some(
            now.saturating_duration_since(self.start)
                .saturating_sub(Duration::from_secs(u64::from(self.probe))),
        )
    }

    /// When the session last ran (for a closed one: about when it closed).
    pub(crate) fn closed_at(&self) -> Instant {
        self.last_now
    }

    /// Whether no event is left: neither Connected/Accepted nor Closed is waiting (messages
    /// always come before Closed, so a closed session whose Closed was polled has none).
    pub(crate) fn events_done(&self) -> bool {
        !self.open_event && !self.closed_event
    }

    /// Ends the session at once because the peer replaced it (a SessionRequest with another
    /// session id from the same address).
    pub(crate) fn replace(&mut self) {
        self.finish(DisconnectReason::NewConnectionAttempt, true);
    }

    /// Refuses a half-open server session (the endpoint is full): the client hears a
    /// Disconnect with `reason` (it has the CRC seed), the application hears nothing.
    pub(crate) fn refuse(&mut self, reason: DisconnectReason) {
        if self.is_half_open() {
            self.state = State::Connected;
            self.start_draining(reason, false);
        }
    }

    /// Whether this is a server session still waiting for the client's first packet.
    pub(crate) fn is_half_open(&self) -> bool {
        self.side == Side::Server && self.state == State::Handshake
    }

    /// Whether the application knows this session (it was, or will be, told by an event).
    pub(crate) fn is_surfaced(&self) -> bool {
        self.surfaced
    }

    /// Whether [`Session::poll_event`] may have an event (exact, and cheap).
    #[inline]
    pub(crate) fn has_events(&self) -> bool {
        self.open_event
            || self.closed_event
            || self.data.as_deref().is_some_and(|d| {
                !d.unreliable_in.is_empty() || d.any_channel(ReliableChannel::has_message)
            })
    }

    /// Messages the reliable `channel` takes now.
    pub fn send_capacity(&self, channel: Channel) -> usize {
        if !self.accepts_sends() {
            return 0;
        }
        match self.channel(channel) {
            Some(c) => c.capacity(),
            None => self.config.reliable().max_queued_messages,
        }
    }

    /// Messages queued on the reliable `channel` and not yet fully sequenced (at most the
    /// reliable config's `max_queued_messages`; 0 for a channel not used yet).
    pub fn queued(&self, channel: Channel) -> usize {
        self.channel(channel).map_or(0, ReliableChannel::queued)
    }

    /// What the reliable `channel` holds on the receiving side: early packets, a partial
    /// message, undelivered messages (nothing for a channel not used yet).
    pub fn receive_backlog(&self, channel: Channel) -> ReceiveBacklog {
        self.channel(channel)
            .map_or_else(ReceiveBacklog::default, ReliableChannel::receive_backlog)
    }

    fn accepts_sends(&self) -> bool {
        matches!(self.state, State::Handshake | State::Connected)
    }

    fn channel(&self, channel: Channel) -> Option<&ReliableChannel> {
        self.data
            .as_ref()?
            .channels
            .get(channel.index())?
            .as_deref()
    }

    /// Datagrams dropped for a CRC mismatch so far (the `crc_rejects` of [`Self::stats`],
    /// without building the rest).
    pub(crate) fn crc_rejects(&self) -> u64 {
        self.counters.crc_rejects
    }

    /// Reliable packets resent so far, summed over the channels (the `resends` of
    /// [`Self::stats`], without building the rest).
    pub(crate) fn resends(&self) -> u64 {
        self.data
            .iter()
            .flat_map(|d| d.channels.iter().flatten())
            .map(|ch| ch.stats().packets_resent)
            .sum()
    }

    /// Counters, with the reliable figures summed over the channels.
    pub fn stats(&self) -> SessionStats {
        let c = &self.counters;
        let mut s = SessionStats {
            rtt: self.net_rtt_us.map(|us| micros(us.get())),
            min_rtt: self.net_min_rtt_us.map(|us| micros(us.get())),
            datagrams_sent: c.datagrams_sent,
            bytes_sent: c.bytes_sent,
            datagrams_received: c.datagrams_received,
            bytes_received: c.bytes_received,
            crc_rejects: c.crc_rejects,
            crcless_accepted: c.crcless_accepted,
            unreliable_sent: c.unreliable_sent,
            unreliable_received: c.unreliable_received,
            unreliable_dropped: c.unreliable_dropped,
            heartbeats_sent: c.heartbeats_sent,
            heartbeats_received: c.heartbeats_received,
            ..SessionStats::default()
        };
        let mut channel_rtt = None;
        for ch in self.data.iter().flat_map(|d| d.channels.iter().flatten()) {
            let cs = ch.stats();
            s.reliable_packets_sent += cs.packets_sent;
            s.resends += cs.packets_resent;
            s.fast_resends += cs.fast_resends;
            s.spurious_resends += cs.spurious_resends;
            s.packets_lost += cs.packets_lost;
            s.ack_elicitors += cs.ack_elicitors;
            s.duplicates += cs.duplicates;
            s.out_of_order += cs.out_of_order;
            s.acks_sent += cs.acks_sent;
            s.acks_received += cs.acks_received;
            s.reliable_messages_sent += cs.messages_sent;
            s.reliable_messages_received += cs.messages_delivered;
            if let Some(e) = ch.rtt() {
                channel_rtt.get_or_insert(e.smoothed);
                s.min_rtt = Some(s.min_rtt.map_or(e.min, |m| m.min(e.min)));
            }
        }
        if channel_rtt.is_some() {
            s.rtt = channel_rtt;
        }
        s
    }

    // ----- application calls -----

    /// Queues a reliable message on `channel`. Taken while connecting (sent once connected) and
    /// while connected; refused once closing. A full queue gives the message back.
    pub fn send(&mut self, channel: Channel, data: Bytes) -> Result<(), SendError> {
        if !self.accepts_sends() {
            return Err(SendError::Closed);
        }
        self.channel_mut(channel)?
            .send(data)
            .map_err(SendError::from)
    }

    /// Queues an unreliable message, sent as a bare datagram. Its first byte must be non-zero
    /// (that is how the receiver tells it from a protocol packet) and it must fit one datagram
    /// ([`Session::max_packet_len`]).
    pub fn send_unreliable(&mut self, data: Bytes) -> Result<(), SendError> {
        match data.first() {
            None => return Err(SendError::EmptyUnreliable),
            Some(0) => return Err(SendError::ZeroFirstByte),
            Some(_) => {}
        }
        let max = self.max_packet_len();
        if data.len() > max {
            return Err(SendError::TooLarge {
                len: data.len(),
                max,
            });
        }
        self.queue_unreliable(data, false)
    }

    /// Turns RC4 on or off for this session's reliable data, both directions, from now on, as
    /// h1z1-server's gateway does after a login request (see
    /// [`SessionConfig::with_encryption_at_start`]). Each direction's keystream starts at the
    /// key and runs only while encryption is on, so the first message encrypted after a switch
    /// from a plaintext start takes the keystream's first bytes; switching off and on again
    /// continues it. Messages already queued or already received keep the state they had, so
    /// switch at a quiet point of the application protocol (after the login request, before
    /// its reply), as both peers must switch at the same message. Returns `false` (and changes
    /// nothing) when the session has no encryption key.
    pub fn set_encryption(&mut self, on: bool) -> bool {
        if self.config.encryption_key().is_none() {
            return false;
        }
        let d = self.data.get_or_insert_with(Box::default);
        d.encryption = Some(on);
        for ch in d.channels.iter_mut().flatten() {
            ch.set_encryption(on);
        }
        true
    }

    /// Whether this session's reliable data is encrypted now.
    pub fn is_encrypting(&self) -> bool {
        self.config.encryption_key().is_some()
            && self
                .data
                .as_ref()
                .and_then(|d| d.encryption)
                .unwrap_or(self.config.encryption_at_start())
    }

    /// Queues an ordered unreliable message (an Ordered 0x1A packet): the receiver drops it if
    /// a newer one arrived first. It must fit one datagram with its 4-byte header.
    pub fn send_ordered(&mut self, data: Bytes) -> Result<(), SendError> {
        let max = self.max_packet_len().saturating_sub(ORDERED_HEADER);
        if data.len() > max {
            return Err(SendError::TooLarge {
                len: data.len(),
                max,
            });
        }
        self.queue_unreliable(data, true)
    }

    fn queue_unreliable(&mut self, data: Bytes, ordered: bool) -> Result<(), SendError> {
        if !self.accepts_sends() {
            return Err(SendError::Closed);
        }
        let max = self.config.max_queued_unreliable();
        let d = self.data.get_or_insert_with(Box::default);
        if d.unreliable_out.len() >= max {
            return Err(SendError::QueueFull(data));
        }
        let out = if ordered {
            Outgoing::Ordered(d.ordered_tx.next_sequence(), data)
        } else {
            Outgoing::Bare(data)
        };
        d.unreliable_out.push_back(out);
        Ok(())
    }

    /// Starts closing with `reason`. Connected: queued reliable data is flushed first (bounded by
    /// the close timeout), then the Disconnect is sent several times and [`Event::Closed`]
    /// (`by_peer: false`) is queued. Connecting: ends at once without a Disconnect (the server
    /// drops its half-open state on its own). A second call does nothing.
    pub fn close(&mut self, now: Instant, reason: DisconnectReason) {
        match self.state {
            State::Handshake => self.finish(reason, false),
            State::Connected => {
                self.state = State::Closing;
                self.close_reason = reason;
                if let Some(d) = &mut self.data {
                    for ch in d.channels.iter_mut().flatten() {
                        ch.close();
                    }
                }
                self.timers
                    .set(Timer::Close, now + self.config.close_timeout());
                self.timers.stop(Timer::Heartbeat);
                self.timers.stop(Timer::NetStatus);
                self.check_flushed();
            }
            State::Closing | State::Draining | State::Closed => {}
        }
    }

    /// Closes at once with `reason`, without the linger of [`close`](Self::close): queued and
    /// unacknowledged data is dropped, [`Event::Closed`] (`by_peer: false`) is queued, and the
    /// Disconnect is sent `disconnect_repeats` times, `disconnect_interval` apart. Connecting:
    /// ends at once, as `close` does. A session already closing skips the rest of its flush; a
    /// draining or closed one is left as it is.
    pub fn close_immediately(&mut self, now: Instant, reason: DisconnectReason) {
        self.abort(now, reason);
    }

    /// The next event, if any (see [`Event`] for the order).
    pub fn poll_event(&mut self) -> Option<Event> {
        if self.open_event {
            self.open_event = false;
            return Some(match self.side {
                Side::Client => Event::Connected,
                Side::Server => Event::Accepted,
            });
        }
        if let Some(d) = &mut self.data {
            for ch in d.channels.iter_mut().filter_map(Option::as_deref_mut) {
                if let Some(data) = ch.poll_message() {
                    return Some(Event::Message {
                        channel: ch.channel(),
                        data,
                        kind: Delivery::Reliable,
                    });
                }
            }
            if let Some((kind, data)) = d.unreliable_in.pop_front() {
                return Some(Event::Message {
                    channel: Channel::ZERO,
                    data,
                    kind,
                });
            }
        }
        if self.closed_event {
            self.closed_event = false;
            return Some(Event::Closed {
                reason: self.close_reason,
                by_peer: self.closed_by_peer,
            });
        }
        None
    }

    // ----- timers -----

    /// The earliest deadline: the session's own timers and its channels'.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let own = self.timers.next();
        if !matches!(self.state, State::Connected | State::Closing) {
            return own;
        }
        let Some(d) = self.data.as_deref() else {
            return own;
        };
        // A plain fold over the slots: `flatten` costs more in this hot call.
        d.channels.iter().fold(own, |min, c| {
            match (min, c.as_deref().and_then(ReliableChannel::poll_timeout)) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        })
    }

    /// Runs the timers due at `now`. A call before any deadline does nothing.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.last_now = self.last_now.max(now);
        for timer in Timer::ALL {
            if self.state == State::Closed {
                return;
            }
            if self.timers.expire(timer, now) {
                self.on_timer(now, timer);
            }
        }
        if matches!(self.state, State::Connected | State::Closing) {
            let mut failed = None;
            if let Some(d) = &mut self.data {
                for ch in d.channels.iter_mut().flatten() {
                    if ch.poll_timeout().is_some_and(|t| t <= now) {
                        if let Err(e) = ch.handle_timeout(now) {
                            failed = Some(reason_for(&e));
                            break;
                        }
                    }
                }
            }
            if let Some(reason) = failed {
                self.abort(now, reason);
            } else {
                self.check_flushed();
            }
        }
    }

    fn on_timer(&mut self, now: Instant, timer: Timer) {
        let retry = self.config.retry_interval();
        match timer {
            Timer::HandshakeResend => {
                if self.side == Side::Client && self.state == State::Handshake {
                    self.pending |= P_REQUEST;
                }
            }
            Timer::ConnectTimeout => {
                if self.state == State::Handshake {
                    // A client gives up; a half-open server session goes away unseen.
                    self.finish(DisconnectReason::ConnectFail, false);
                }
            }
            Timer::Heartbeat => {
                if self.state == State::Connected {
                    let ms = self.millis(now);
                    if !self.heartbeat_outstanding {
                        // A new round, a heartbeat interval after the peer was last heard.
                        self.own_heartbeats.start_round(ms);
                    } else if self.side == Side::Client
                        && self.own_heartbeats.round_age(ms) >= self.remap_patience()
                    {
                        self.remap_unprompted(now);
                    }
                    self.pending |= P_HEARTBEAT;
                    self.heartbeat_outstanding = true;
                    self.timers.set(Timer::Heartbeat, now + retry);
                }
            }
            Timer::Idle => {
                if matches!(self.state, State::Connected | State::Closing) {
                    self.abort(now, DisconnectReason::Timeout);
                }
            }
            Timer::Close => {
                if self.state == State::Closing {
                    self.start_draining(self.close_reason, false);
                }
            }
            Timer::DisconnectRepeat => {
                if self.state == State::Draining {
                    if self.disconnects_left > 0 {
                        self.pending |= P_DISCONNECT;
                    } else {
                        self.state = State::Closed;
                        self.release();
                    }
                }
            }
            Timer::NetStatus => {
                if self.state != State::Connected {
                    return;
                }
                if self.side == Side::Client
                    && !self.server_confirmed
                    && self.probes_sent < MAX_PROBES
                {
                    self.pending |= P_NET_REQUEST;
                    self.timers.set(Timer::NetStatus, now + retry);
                } else if let Some(every) = self.config.net_status_interval() {
                    self.pending |= P_NET_REQUEST;
                    self.timers.set(Timer::NetStatus, now + every);
                }
            }
        }
    }

    // ----- closing -----

    /// Graceful close done (or the close timer ran out): send the Disconnect.
    #[inline]
    fn check_flushed(&mut self) {
        if self.state == State::Closing {
            self.drain_if_flushed();
        }
    }

    /// [`Session::check_flushed`] for a closing session.
    fn drain_if_flushed(&mut self) {
        let flushed = self.data.as_ref().is_none_or(|d| {
            d.channels.iter().flatten().all(|c| c.is_flushed()) && d.unreliable_out.is_empty()
        });
        if flushed {
            self.start_draining(self.close_reason, false);
        }
    }

    /// Ends the session from this side at once (no flush) because of `reason`.
    fn abort(&mut self, _now: Instant, reason: DisconnectReason) {
        match self.state {
            State::Handshake => self.finish(reason, false),
            State::Connected | State::Closing => self.start_draining(reason, false),
            State::Draining | State::Closed => {}
        }
    }

    /// Queues Closed and starts sending the Disconnect.
    fn start_draining(&mut self, reason: DisconnectReason, by_peer: bool) {
        self.state = State::Draining;
        self.close_reason = reason;
        self.closed_by_peer = by_peer;
        self.closed_event = self.surfaced;
        self.timers.stop_all();
        self.pending = P_DISCONNECT;
        self.disconnects_left = self.config.disconnect_repeats();
        // The repeat timer starts when the first Disconnect goes out.
        if let Some(d) = &mut self.data {
            d.unreliable_out.clear();
            d.carry = Vec::new();
        }
    }

    /// Ends the session with nothing more to send.
    fn finish(&mut self, reason: DisconnectReason, by_peer: bool) {
        if self.state == State::Closed {
            return;
        }
        if self.state != State::Draining {
            self.close_reason = reason;
            self.closed_by_peer = by_peer;
            self.closed_event = self.surfaced;
        }
        self.state = State::Closed;
        self.release();
    }

    /// Frees what a finished session no longer needs (messages not yet polled stay).
    fn release(&mut self) {
        self.timers.stop_all();
        self.pending = 0;
        self.scratch = None;
        if let Some(d) = &mut self.data {
            d.unreliable_out = VecDeque::new();
            d.carry = Vec::new();
        }
    }

    // ----- receiving -----

    /// Handles one datagram from the peer. Datagrams with a bad CRC are dropped and counted;
    /// a malformed packet with a valid CRC ends the session with
    /// [`DisconnectReason::CorruptPacket`].
    pub fn handle_datagram(&mut self, now: Instant, datagram: &[u8]) {
        self.last_now = self.last_now.max(now);
        if self.state == State::Closed {
            return;
        }
        match datagram {
            [0, lo, ..] if is_contextless(*lo) => self.handle_contextless(now, datagram),
            [] | [_] => self.counters.crc_rejects += 1,
            _ => self.handle_contextual(now, datagram),
        }
        // The last ack of a graceful close arrives here.
        self.check_flushed();
    }

    fn handle_contextless(&mut self, now: Instant, datagram: &[u8]) {
        // Contextless packets carry no CRC: malformed ones are ignored, never fatal.
        let Ok(packet) = Packet::decode(datagram) else {
            return;
        };
        match packet {
            // Our SessionResponse was lost: answer again.
            Packet::SessionRequest(r)
                if self.side == Side::Server
                    && r.session_id == self.session_id
                    && matches!(self.state, State::Handshake | State::Connected) =>
            {
                self.pending |= P_RESPONSE;
            }
            Packet::SessionResponse(r)
                if self.side == Side::Client
                    && self.state == State::Handshake
                    && r.session_id == self.session_id =>
            {
                self.counters.datagrams_received += 1;
                self.counters.bytes_received += datagram.len() as u64;
                self.on_session_response(now, &r);
            }
            Packet::UnknownSender
                if self.side == Side::Client
                    && matches!(self.state, State::Connected | State::Closing) =>
            {
                self.on_unknown_sender(now);
            }
            _ => {}
        }
    }

    fn on_session_response(&mut self, now: Instant, r: &SessionResponse) {
        if r.protocol_version != PROTOCOL_VERSION {
            self.finish(DisconnectReason::ProtocolMismatch, true);
            return;
        }
        let Some(crc_length) = CrcLength::new(r.crc_length) else {
            self.finish(DisconnectReason::ConnectError, false);
            return;
        };
        if r.udp_length < MIN_UDP_LENGTH {
            self.finish(DisconnectReason::ConnectError, false);
            return;
        }
        self.crc_seed = r.crc_seed;
        self.remote_udp_length = r.udp_length.min(self.config.udp_length());
        let frame = FrameConfig::new(r.crc_seed)
            .with_crc_length(crc_length)
            .with_compression(r.compression != 0)
            .with_max_inflated(self.max_inflated());
        self.set_framer(frame);
        let max = self.max_packet_len();
        if let Some(d) = &mut self.data {
            for ch in d.channels.iter_mut().flatten() {
                ch.set_max_packet_len(max);
            }
        }
        self.pending &= !P_REQUEST;
        self.timers.stop(Timer::HandshakeResend);
        self.timers.stop(Timer::ConnectTimeout);
        self.state = State::Connected;
        self.open_event = true;
        self.on_peer_heard(now);
        // The probe tells the server we have its seed (ending its half-open state) and gives a
        // first round-trip sample; it is repeated until the server is heard.
        self.pending |= P_NET_REQUEST;
        self.timers
            .set(Timer::NetStatus, now + self.config.retry_interval());
    }

    /// A client whose Heartbeat went unanswered for its [`Session::remap_patience`] sends
    /// RemapConnection as if told UnknownSender: its NAT may have given it a new address, and the server's
    /// UnknownSender been lost, or withheld by its reply budget during a flood. (A server of
    /// this crate ignores a RemapConnection from the address it knows for the session.) Not
    /// counted against the remaps before `UnreachableConnection`, and within their pace.
    fn remap_unprompted(&mut self, now: Instant) {
        if self.remap_next.is_none_or(|t| now >= t) {
            self.pending |= P_REMAP;
        }
    }

    /// How long a client's keep-alives go unanswered before it remaps unprompted: twice the
    /// round trip it knows of (NetStatus, the reliable channels, the last round of
    /// keep-alives), at least a retry interval and at most [`ANSWER_WINDOW`]. Sooner, on a path
    /// whose round trip is longer than the retry interval, every round of keep-alives would
    /// send one.
    fn remap_patience(&self) -> Duration {
        let channels = self
            .data
            .iter()
            .flat_map(|d| d.channels.iter().flatten())
            .filter_map(|c| c.rtt().map(|e| e.smoothed));
        let rtt = channels
            .chain(self.net_rtt_us.map(|us| micros(us.get())))
            .chain([self.own_heartbeats.last_round()])
            .max()
            .unwrap_or_default();
        rtt.saturating_mul(2)
            .min(ANSWER_WINDOW)
            .max(self.config.retry_interval())
    }

    fn on_unknown_sender(&mut self, now: Instant) {
        if self.remap_next.is_some_and(|t| now < t) {
            return;
        }
        if self.remap_attempts >= MAX_REMAPS {
            self.abort(now, DisconnectReason::UnreachableConnection);
            return;
        }
        self.remap_attempts += 1;
        self.remap_next = Some(now + self.config.retry_interval());
        self.pending |= P_REMAP;
    }

    fn handle_contextual(&mut self, now: Instant, datagram: &[u8]) {
        let Some(mut framer) = self.framer.take() else {
            // A client without a seed yet: only a refusal (crc_length 0) is meaningful.
            if self.side == Side::Client && self.state == State::Handshake {
                if let Ok(Packet::Disconnect(d)) = Packet::decode(datagram) {
                    if !d.bare && d.session_id == self.session_id {
                        self.finish(d.reason, true);
                    }
                }
            }
            return;
        };
        let cfg = *framer.config();
        let zero_first = datagram.first() == Some(&0);
        let head = if zero_first {
            2 + usize::from(cfg.compression)
        } else {
            1
        };
        let long_enough = datagram.len() >= head + cfg.crc_length.get();
        // The exact CRC-less shape of a Heartbeat or selective Acknowledge. With a CRC length of
        // 1 or more no well-formed packet has that shape, so it is read as the quirk even when
        // its last bytes happen to pass as the CRC of the rest (1 time in 65,536 with two CRC
        // bytes; that truncated Acknowledge used to end the session as corrupt).
        let quirks = self
            .config
            .accept_crcless_quirks()
            .unwrap_or(self.side == Side::Client);
        let crcless = if quirks && self.state != State::Handshake {
            framer.open_crcless_packet(datagram)
        } else {
            None
        };
        let opened = if long_enough {
            framer.open(datagram)
        } else {
            Err(WireError::CrcMismatch {
                received: 0,
                computed: 0,
            })
        };
        match opened {
            Ok(bytes) => {
                self.counters.datagrams_received += 1;
                self.counters.bytes_received += datagram.len() as u64;
                if self.state == State::Handshake {
                    // A half-open server session: the client has our seed.
                    self.promote(now);
                }
                self.on_authentic(now);
                let result = crcless
                    .map_or_else(|| Packet::decode(bytes), Ok)
                    .map_err(|_| DisconnectReason::CorruptPacket)
                    .and_then(|p| self.handle_packet(now, p, false));
                if let Err(reason) = result {
                    self.abort(now, reason);
                }
            }
            Err(WireError::CrcMismatch { .. }) => {
                let accepted = match crcless {
                    Some(p @ (Packet::Heartbeat | Packet::Acknowledge(_))) => Some(p),
                    _ => self.libsoe_quirk(datagram, cfg.compression),
                };
                match accepted {
                    Some(p) => {
                        self.counters.crcless_accepted += 1;
                        self.counters.datagrams_received += 1;
                        self.counters.bytes_received += datagram.len() as u64;
                        self.on_peer_heard(now);
                        if let Err(reason) = self.handle_packet(now, p, false) {
                            self.abort(now, reason);
                        }
                    }
                    None => self.counters.crc_rejects += 1,
                }
            }
            Err(_) => {
                // The CRC held but the body would not inflate: corrupt, not noise.
                self.abort(now, DisconnectReason::CorruptPacket);
            }
        }
        self.framer = Some(framer);
    }

    /// The two CRC-less shapes OSFR's LibSOE server sends, when the config accepts them on this
    /// (client) session: a bare `00 06` Heartbeat, and a Disconnect for this session (`00 05`,
    /// the compression flag when negotiated, session id, reason).
    fn libsoe_quirk(&self, datagram: &[u8], compression: bool) -> Option<Packet<'static>> {
        if !self.config.accept_libsoe_quirks()
            || self.side != Side::Client
            || self.state == State::Handshake
        {
            return None;
        }
        let body = match (compression, datagram) {
            (_, [0x00, 0x06]) => return Some(Packet::Heartbeat),
            (true, [0x00, 0x05, 0x00, body @ ..]) | (false, [0x00, 0x05, body @ ..]) => body,
            _ => return None,
        };
        let &[a, b, c, d, hi, lo] = body else {
            return None;
        };
        let session_id = u32::from_be_bytes([a, b, c, d]);
        (session_id == self.session_id).then(|| {
            Packet::Disconnect(Disconnect {
                session_id,
                reason: DisconnectReason::from_u16(u16::from_be_bytes([hi, lo])),
                bare: false,
            })
        })
    }

    /// A half-open server session becomes established.
    fn promote(&mut self, now: Instant) {
        self.state = State::Connected;
        self.surfaced = true;
        self.open_event = true;
        self.pending &= !P_RESPONSE;
        self.timers.stop(Timer::ConnectTimeout);
        self.on_peer_heard(now);
    }

    /// A datagram with a valid CRC arrived.
    fn on_authentic(&mut self, now: Instant) {
        match self.state {
            State::Connected | State::Closing => {
                self.on_peer_heard(now);
                self.server_confirmed = true;
                self.remap_attempts = 0;
                self.remap_next = None;
            }
            // The peer did not hear our Disconnect: say it again.
            State::Draining => self.pending |= P_DISCONNECT,
            State::Handshake | State::Closed => {}
        }
    }

    /// Liveness: resets the idle and heartbeat timers, and clears an outstanding keep-alive
    /// (any authentic packet shows the peer alive, not only a Heartbeat's answer).
    #[inline]
    fn on_peer_heard(&mut self, now: Instant) {
        if self.probe != 0 {
            self.probe |= PROBE_HEARD;
        }
        if self.heartbeat_outstanding && self.side == Side::Client {
            self.own_heartbeats.round_heard(self.millis(now));
        }
        self.heartbeat_outstanding = false;
        if !matches!(self.state, State::Connected | State::Closing) {
            return;
        }
        if let Some(t) = self.config.idle_timeout() {
            self.timers.set(Timer::Idle, now + t);
        }
        let sends_heartbeats = self.side == Side::Client || self.config.server_heartbeats();
        match self.config.heartbeat_interval() {
            Some(every) if sends_heartbeats && self.state == State::Connected => {
                self.timers.set(Timer::Heartbeat, now + every);
            }
            _ => self.timers.stop(Timer::Heartbeat),
        }
    }

    fn handle_packet(
        &mut self,
        now: Instant,
        packet: Packet<'_>,
        nested: bool,
    ) -> Result<(), DisconnectReason> {
        if !matches!(
            self.state,
            State::Connected | State::Closing | State::Draining
        ) {
            return Ok(());
        }
        if self.state == State::Draining && !matches!(packet, Packet::Disconnect(_)) {
            return Ok(());
        }
        match packet {
            Packet::MultiPacket(m) => {
                if nested {
                    return Err(DisconnectReason::CorruptPacket);
                }
                for sub in m.iter() {
                    let sub = sub.map_err(|_| DisconnectReason::CorruptPacket)?;
                    let p = Packet::decode(sub).map_err(|_| DisconnectReason::CorruptPacket)?;
                    self.handle_packet(now, p, true)?;
                    if !matches!(self.state, State::Connected | State::Closing) {
                        break;
                    }
                }
            }
            Packet::Group(g) => {
                if nested {
                    return Err(DisconnectReason::CorruptPacket);
                }
                for item in g.iter() {
                    let item = item.map_err(|_| DisconnectReason::CorruptPacket)?;
                    if item.first() == Some(&0) {
                        let p =
                            Packet::decode(item).map_err(|_| DisconnectReason::CorruptPacket)?;
                        self.handle_packet(now, p, true)?;
                    } else {
                        self.deliver_unreliable(Delivery::Unreliable, item);
                    }
                    if !matches!(self.state, State::Connected | State::Closing) {
                        break;
                    }
                }
            }
            // The bare form (`00 05`, h1z1-server's client) names no session; it passed this
            // session's framing (its CRC, when there is one), so it comes from its peer.
            Packet::Disconnect(d) if d.bare || d.session_id == self.session_id => {
                self.finish(d.reason, true);
            }
            Packet::Heartbeat => {
                self.counters.heartbeats_received += 1;
                // An answer to one of ours needs no answer; anything else gets one (so two sides
                // never ping-pong). Ours are counted as they go out: a probe not sent yet has no
                // answer.
                if !self.own_heartbeats.answer(self.millis(now)) {
                    self.pending |= P_HEARTBEAT;
                    self.heartbeat_answer_owed = true;
                }
            }
            Packet::NetStatusRequest(r) => {
                self.net_answer = Some(NetAnswer {
                    tick: r.client_tick,
                    sent: r.packets_sent,
                    received: r.packets_received,
                });
                self.pending |= P_NET_RESPONSE;
            }
            Packet::NetStatusResponse(r) => {
                if let Some(sent_at) = self.net_sent_at {
                    if r.client_tick == self.net_tick {
                        self.net_sent_at = None;
                        self.on_rtt_sample(now.saturating_duration_since(sent_at));
                    }
                }
            }
            Packet::ReliableData(d) => {
                let ch = self
                    .channel_mut(d.channel)
                    .map_err(|_| DisconnectReason::ConnectError)?;
                ch.handle_data(now, d.sequence, d.data)
                    .map_err(|e| reason_for(&e))?;
            }
            Packet::ReliableDataFragment(d) => {
                let ch = self
                    .channel_mut(d.channel)
                    .map_err(|_| DisconnectReason::ConnectError)?;
                ch.handle_fragment(now, d.sequence, d.data)
                    .map_err(|e| reason_for(&e))?;
            }
            Packet::Acknowledge(a) => {
                if let Some(ch) = self.existing_channel_mut(a.channel) {
                    ch.handle_ack(now, a.sequence);
                }
            }
            Packet::AcknowledgeAll(a) => {
                if let Some(ch) = self.existing_channel_mut(a.channel) {
                    ch.handle_ack_all(now, a.sequence);
                }
            }
            Packet::Ordered(o) | Packet::Ordered2(o) => {
                let d = self.data.get_or_insert_with(Box::default);
                if d.ordered_rx.accept(o.sequence) {
                    self.deliver_unreliable(Delivery::Ordered, o.data);
                } else {
                    self.counters.unreliable_dropped += 1;
                }
            }
            Packet::Unreliable(data) => self.deliver_unreliable(Delivery::Unreliable, data),
            // PortAlive keeps NAT mappings open and needs nothing; contextless packets inside a
            // MultiPacket are meaningless and ignored.
            _ => {}
        }
        Ok(())
    }

    fn on_rtt_sample(&mut self, sample: Duration) {
        let sample = u32::try_from(sample.as_micros()).unwrap_or(u32::MAX);
        let smoothed = match self.net_rtt_us {
            None => sample,
            // At most u32::MAX: the weighted mean of two u32 values.
            Some(s) => ((u64::from(s.get()) * 7 + u64::from(sample)) / 8) as u32,
        };
        let min = self.net_min_rtt_us.map_or(sample, |m| m.get().min(sample));
        self.net_rtt_us = NonZeroU32::new(smoothed.max(1));
        self.net_min_rtt_us = NonZeroU32::new(min.max(1));
    }

    fn deliver_unreliable(&mut self, kind: Delivery, data: &[u8]) {
        let max = self.config.max_queued_unreliable();
        let d = self.data.get_or_insert_with(Box::default);
        if d.unreliable_in.len() >= max || !matches!(self.state, State::Connected | State::Closing)
        {
            self.counters.unreliable_dropped += 1;
            return;
        }
        d.unreliable_in
            .push_back((kind, Bytes::copy_from_slice(data)));
        self.counters.unreliable_received += 1;
    }

    fn existing_channel_mut(&mut self, channel: Channel) -> Option<&mut ReliableChannel> {
        self.data
            .as_mut()?
            .channels
            .get_mut(channel.index())?
            .as_deref_mut()
    }

    #[inline]
    fn channel_mut(&mut self, channel: Channel) -> Result<&mut ReliableChannel, SendError> {
        let max = self.max_packet_len();
        let config = self.config.clone();
        let d = self.data.get_or_insert_with(Box::default);
        let slot = d
            .channels
            .get_mut(channel.index())
            .ok_or(SendError::Closed)?;
        if slot.is_none() {
            let mut ch = ReliableChannel::new(
                channel,
                config.reliable().clone(),
                max,
                config.encryption_key().map(|k| &k[..]),
            )
            .map_err(|_| SendError::Closed)?;
            // A channel created now starts as the session's other channels are.
            ch.set_encryption(d.encryption.unwrap_or(config.encryption_at_start()));
            *slot = Some(Box::new(ch));
        }
        slot.as_deref_mut().ok_or(SendError::Closed)
    }

    // ----- sending -----

    /// Writes the next datagram into `buf` (cleared first) and returns its length, or `None`
    /// when nothing is to be sent now. Call until `None` after every other call.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<usize> {
        let mut scratch = self.scratch.take().unwrap_or_default();
        let n = self.poll_transmit_with(now, buf, &mut scratch);
        if self.state != State::Closed {
            self.scratch = Some(scratch);
        }
        n
    }

    /// [`Session::poll_transmit`] with the caller's reusable buffers.
    ///
    /// One datagram per call, in this order of precedence: a contextless handshake packet
    /// (alone, unframed); while draining, the Disconnect; otherwise a MultiPacket filled with,
    /// in turn, the packet left over from the last datagram, the control packets, the ordered
    /// unreliable messages and the reliable channels' packets. A bare unreliable datagram, or a
    /// packet too large to share a MultiPacket, goes alone.
    pub(crate) fn poll_transmit_with(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
        scratch: &mut Scratch,
    ) -> Option<usize> {
        buf.clear();
        // A close waiting only for unreliable messages to go out may be done.
        self.check_flushed();
        if self.state == State::Closed {
            return None;
        }
        if let Some(n) = self.transmit_contextless(now, buf) {
            return Some(n);
        }
        if self.framer.is_none() || self.state == State::Handshake {
            return None;
        }
        if self.state == State::Draining {
            return self.transmit_disconnect(now, buf);
        }
        let Scratch { multi, packet } = scratch;
        debug_assert!(multi.is_empty());
        multi.set_budget(self.max_packet_len());
        // Each step adds to the MultiPacket, or sends one datagram alone and ends the call.
        if let Some(n) = self.take_carry_or_bare(buf, multi) {
            return Some(n);
        }
        self.push_control(now, multi);
        if let Some(n) = self.push_ordered(buf, multi) {
            return Some(n);
        }
        if let Some(n) = self.push_reliable(now, buf, multi, packet) {
            return Some(n);
        }
        if multi.is_empty() {
            return None;
        }
        multi.finish(buf);
        Some(self.seal_and_count(buf))
    }

    /// A pending SessionRequest, SessionResponse or RemapConnection: these go alone and
    /// unframed.
    fn transmit_contextless(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<usize> {
        if self.take(P_REQUEST) {
            Packet::SessionRequest(SessionRequest {
                protocol_version: PROTOCOL_VERSION,
                session_id: self.session_id,
                udp_length: self.config.udp_length(),
                application_protocol: self.config.application_protocol(),
            })
            .encode(buf);
            self.timers
                .set(Timer::HandshakeResend, now + self.config.retry_interval());
        } else if self.take(P_RESPONSE) {
            Packet::SessionResponse(SessionResponse {
                session_id: self.session_id,
                crc_seed: self.crc_seed,
                crc_length: self.config.crc_length().get() as u8,
                compression: u8::from(self.config.compression()),
                encryption_method: 0,
                udp_length: self.config.udp_length(),
                protocol_version: PROTOCOL_VERSION,
            })
            .encode(buf);
        } else if self.take(P_REMAP) {
            Packet::RemapConnection(RemapConnection {
                session_id: self.session_id,
                crc_seed: self.crc_seed,
            })
            .encode(buf);
        } else {
            return None;
        }
        Some(self.sent(buf))
    }

    /// While draining: the next of the configured Disconnects, if one is due.
    fn transmit_disconnect(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<usize> {
        if !self.take(P_DISCONNECT) {
            return None;
        }
        Packet::Disconnect(Disconnect {
            session_id: self.session_id,
            reason: self.close_reason,
            bare: false,
        })
        .encode(buf);
        self.disconnects_left = self.disconnects_left.saturating_sub(1);
        self.timers.set(
            Timer::DisconnectRepeat,
            now + self.config.disconnect_interval(),
        );
        Some(self.seal_and_count(buf))
    }

    /// The packet left over from the last datagram goes first: into the MultiPacket, or alone
    /// when it cannot share one. Then a bare unreliable datagram at the head of the queue goes
    /// alone, if nothing else is in the MultiPacket.
    fn take_carry_or_bare(
        &mut self,
        buf: &mut Vec<u8>,
        multi: &mut MultiPacketWriter,
    ) -> Option<usize> {
        let d = self.data.as_deref_mut()?;
        if !d.carry.is_empty() {
            if d.carry.len() <= MAX_SUB_PACKET && multi.fits(d.carry.len()) {
                multi.push(&d.carry);
                d.carry.clear();
            } else {
                buf.extend_from_slice(&d.carry);
                d.carry.clear();
                return Some(self.seal_and_count(buf));
            }
        }
        if multi.is_empty() && matches!(d.unreliable_out.front(), Some(Outgoing::Bare(_))) {
            if let Some(Outgoing::Bare(data)) = d.unreliable_out.pop_front() {
                buf.extend_from_slice(&data);
                self.counters.unreliable_sent += 1;
                return Some(self.seal_and_count(buf));
            }
        }
        None
    }

    /// The pending Heartbeat (and a probe after it), NetStatusResponse and NetStatusRequest,
    /// each if it fits.
    fn push_control(&mut self, now: Instant, multi: &mut MultiPacketWriter) {
        if self.pending & P_HEARTBEAT != 0 && multi.push_packet(&Packet::Heartbeat) {
            self.pending &= !P_HEARTBEAT;
            self.counters.heartbeats_sent += 1;
            // One Heartbeat that is both an answer and our own keep-alive is an answer: the
            // peer will not answer it.
            if !std::mem::take(&mut self.heartbeat_answer_owed) {
                self.own_heartbeats.sent(self.millis(now));
            }
        }
        // A probe after the answer it must not merge with (same MultiPacket or the next).
        if self.pending & (P_PROBE | P_HEARTBEAT) == P_PROBE
            && multi.push_packet(&Packet::Heartbeat)
        {
            self.pending &= !P_PROBE;
            self.counters.heartbeats_sent += 1;
            self.own_heartbeats.sent(self.millis(now));
        }
        if self.pending & P_NET_RESPONSE != 0 && multi.push_packet(&self.net_response(now)) {
            self.pending &= !P_NET_RESPONSE;
            self.net_answer = None;
        }
        if self.pending & P_NET_REQUEST != 0 {
            let tick = self.millis(now) as u16;
            if multi.push_packet(&self.net_request(tick)) {
                self.pending &= !P_NET_REQUEST;
                self.net_tick = tick;
                self.net_sent_at = Some(now);
                if self.side == Side::Client && !self.server_confirmed {
                    self.probes_sent = self.probes_sent.saturating_add(1);
                }
            }
        }
    }

    /// The NetStatusResponse to the last request heard.
    fn net_response(&self, now: Instant) -> Packet<'static> {
        let answer = self.net_answer.unwrap_or(NetAnswer {
            tick: 0,
            sent: 0,
            received: 0,
        });
        Packet::NetStatusResponse(NetStatusResponse {
            client_tick: answer.tick,
            server_tick: self.millis(now),
            client_packets_sent: answer.sent,
            client_packets_received: answer.received,
            server_packets_sent: self.counters.datagrams_sent,
            server_packets_received: self.counters.datagrams_received,
        })
    }

    /// A NetStatusRequest stamped `tick`, carrying the round-trip times measured so far.
    fn net_request(&self, tick: u16) -> Packet<'static> {
        let rtt_ms = |us: Option<NonZeroU32>| us.map_or(0, |us| us.get() / 1000);
        Packet::NetStatusRequest(NetStatusRequest {
            client_tick: tick,
            last_update_ms: rtt_ms(self.net_rtt_us),
            average_update_ms: rtt_ms(self.net_rtt_us),
            shortest_update_ms: rtt_ms(self.net_min_rtt_us),
            longest_update_ms: rtt_ms(self.net_rtt_us),
            last_server_update_ms: 0,
            packets_sent: self.counters.datagrams_sent,
            packets_received: self.counters.datagrams_received,
        })
    }

    /// Ordered unreliable messages, as many as fit; one too large to share a MultiPacket goes
    /// alone if the MultiPacket is still empty.
    fn push_ordered(&mut self, buf: &mut Vec<u8>, multi: &mut MultiPacketWriter) -> Option<usize> {
        let d = self.data.as_deref_mut()?;
        while let Some(Outgoing::Ordered(seq, data)) = d.unreliable_out.front() {
            let packet = Packet::Ordered(Ordered {
                sequence: *seq,
                data,
            });
            let len = packet.encoded_len();
            let alone = if len <= MAX_SUB_PACKET && multi.fits(len) {
                multi.push_packet(&packet);
                false
            } else if multi.is_empty() {
                packet.encode(buf);
                true
            } else {
                break;
            };
            d.unreliable_out.pop_front();
            self.counters.unreliable_sent += 1;
            if alone {
                return Some(self.seal_and_count(buf));
            }
        }
        None
    }

    /// The reliable channels' packets (acks, resends, new data) as long as they fit; the first
    /// that does not is carried to the next datagram, or goes alone if the MultiPacket is
    /// still empty.
    fn push_reliable(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
        multi: &mut MultiPacketWriter,
        packet: &mut Vec<u8>,
    ) -> Option<usize> {
        let d = self.data.as_deref_mut()?;
        for ch in d.channels.iter_mut().filter_map(Option::as_deref_mut) {
            loop {
                packet.clear();
                let Some(len) = ch.poll_transmit(now, packet) else {
                    break;
                };
                if len <= MAX_SUB_PACKET && multi.fits(len) {
                    multi.push(packet);
                } else if multi.is_empty() {
                    buf.extend_from_slice(packet);
                    return Some(self.seal_and_count(buf));
                } else {
                    std::mem::swap(&mut d.carry, packet);
                    return None;
                }
            }
        }
        None
    }

    fn take(&mut self, flag: u8) -> bool {
        let had = self.pending & flag != 0;
        self.pending &= !flag;
        had
    }

    fn millis(&self, now: Instant) -> u32 {
        now.saturating_duration_since(self.start).as_millis() as u32
    }

    fn seal_and_count(&mut self, buf: &mut Vec<u8>) -> usize {
        if let Some(f) = &mut self.framer {
            f.seal(buf, 0);
        }
        self.sent(buf)
    }

    fn sent(&mut self, buf: &[u8]) -> usize {
        self.counters.datagrams_sent += 1;
        self.counters.bytes_sent += buf.len() as u64;
        buf.len()
    }

    /// Whether [`Session::poll_transmit`] may have something: a control packet pending, or a
    /// packet, a message or an ack waiting on the data path (a cheap over-estimate: an ack not
    /// yet due, a full window). A closing session always may: polling is what finds a close
    /// waiting only for unreliable messages done.
    #[inline]
    pub(crate) fn may_transmit(&self) -> bool {
        if self.pending != 0 {
            return true;
        }
        let Some(d) = self.data.as_deref() else {
            return false;
        };
        match self.state {
            State::Closing => true,
            State::Connected => {
                !d.carry.is_empty()
                    || !d.unreliable_out.is_empty()
                    || d.any_channel(ReliableChannel::has_pending)
            }
            _ => false,
        }
    }
}

/// Opcodes of packets that travel without framing.
fn is_contextless(lo: u8) -> bool {
    matches!(lo, 0x01 | 0x02 | 0x1D | 0x1E)
}

/// The Disconnect reason for a channel failure.
fn reason_for(e: &ReliableError) -> DisconnectReason {
    match e {
        ReliableError::UnacknowledgedTimeout { .. } => DisconnectReason::UnacknowledgedTimeout,
        ReliableError::MessageTooLarge { .. } => DisconnectReason::ReliableOverflow,
        _ => DisconnectReason::CorruptPacket,
    }
}

/// A duration of `us` microseconds.
fn micros(us: u32) -> Duration {
    Duration::from_micros(u64::from(us))
}
