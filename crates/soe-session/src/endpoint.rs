//! Many sessions behind one socket: routing by address, timers ordered by deadline, limits.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt::Debug;
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use slab::Slab;
use soe_wire::{Channel, DisconnectReason, Packet};
use tracing::{Level, debug, info, warn};

use crate::deadlines::{Deadlines, Records, TimerRecord};
use crate::limits::Keys;
use crate::recorder::Recorder;
use crate::session::{Scratch, check_request, encode_refusal};
use crate::{
    ConnectError, Delivery, EndpointConfig, EndpointError, Event, KeyedRandom, PeerAddress,
    RandomSource, ReceiveBacklog, SendError, Session, SessionStats, ShardGroup, Side, SplitMix64,
    State,
};

mod recording;

/// Seconds per CRC-seed cookie epoch; a cookie is honoured in its epoch and the next.
const COOKIE_EPOCH_SECS: u64 = 30;
/// How long a closed session's cookie stays valid, and its tombstone is kept: the cookie's epoch
/// and the next.
const TOMBSTONE_LIFETIME: Duration = Duration::from_secs(2 * COOKIE_EPOCH_SECS);
/// The udp_length assumed for a session recovered from a cookie (the client's own is unknown):
/// 512, what every known peer announces, capped by the server's.
const RECOVERED_UDP_LENGTH: u32 = 512;
/// The longest stateless reply (a refusal).
const MAX_REPLY: usize = 8;
/// At most one event of a rate-limited kind (CRC rejects of one session, flood limits, refusals)
/// per this interval; the occurrences in between are counted in the next event.
const LOG_INTERVAL: Duration = Duration::from_secs(1);
/// The unit of a session's last-remap time (16-bit, wrapping after about 68 minutes).
const REMAP_TICK: Duration = Duration::from_millis(62);
/// Reliable packets resent by one session between two of its timer wake-ups that are reported
/// as a resend burst.
const RESEND_BURST: u64 = 16;

/// The generator of an endpoint's client session ids.
#[derive(Debug)]
enum EndpointRng {
    /// Reproducible, for tests (`EndpointConfig::with_rng_seed`, feature `testing`).
    Seeded(SplitMix64),
    /// Unpredictable (the default).
    Keyed(KeyedRandom),
}

impl RandomSource for EndpointRng {
    fn next_u64(&mut self) -> u64 {
        match self {
            Self::Seeded(r) => r.next_u64(),
            Self::Keyed(r) => r.next_u64(),
        }
    }
}

/// A stable handle to a session of an [`Endpoint`]: its slab key and a generation, so a handle
/// to a reaped session never reaches a newer one that reused the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionHandle {
    key: u32,
    generation: u32,
}

impl SessionHandle {
    /// The slab key (unique among live sessions).
    pub fn index(self) -> usize {
        self.key as usize
    }
}

/// A datagram to send, written into the caller's buffer by [`Endpoint::poll_transmit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Transmit<A> {
    /// Where to send it.
    pub destination: A,
    /// Its length at the start of the buffer.
    pub len: usize,
}

/// Endpoint-wide counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EndpointStats {
    /// Datagrams handed to [`Endpoint::handle_datagram`].
    pub datagrams_received: u64,
    /// Datagrams returned by [`Endpoint::poll_transmit`].
    pub datagrams_sent: u64,
    /// SessionRequests that started a half-open session.
    pub requests_accepted: u64,
    /// SessionRequests dropped by the per-source limit.
    pub requests_rate_limited: u64,
    /// SessionRequests refused because a source of theirs (a host, a site, a network) held
    /// all the sessions its level allows (counted in `requests_refused` too).
    pub requests_source_full: u64,
    /// SessionRequests refused (mismatch, endpoint full).
    pub requests_refused: u64,
    /// Half-open sessions dropped to make room for newer ones.
    pub half_open_evicted: u64,
    /// Half-open sessions that expired.
    pub half_open_expired: u64,
    /// UnknownSender replies queued.
    pub unknown_sender_sent: u64,
    /// Stateless replies not sent because of the rate limit or a full queue.
    pub replies_dropped: u64,
    /// Live sessions moved to a new address by RemapConnection.
    pub remaps: u64,
    /// RemapConnections for a live session dropped by the per-session remap interval or the
    /// per-source limit.
    pub remaps_limited: u64,
    /// Established sessions replaced by a SessionRequest with a new session id from their
    /// address, after an unanswered liveness probe.
    pub replaced: u64,
    /// Such SessionRequests ignored because the old session answered, or has not yet had time
    /// to answer, its liveness probe.
    pub replacements_deferred: u64,
    /// Sessions rebuilt from a RemapConnection whose CRC seed matched our cookie after the
    /// half-open state was lost.
    pub recovered: u64,
    /// Sessions reaped.
    pub reaped: u64,
    /// Calls to [`Endpoint::handle_timeout`].
    pub timer_wakes: u64,
    /// Sessions whose `handle_timeout` ran because their deadline was due.
    pub sessions_woken: u64,
    /// Sessions asked for a datagram by [`Endpoint::poll_transmit`] (each ask counts).
    pub transmit_visits: u64,
}

/// Rate limit for one kind of log event: at most one event per [`LOG_INTERVAL`], each carrying
/// the number of occurrences since the previous one.
#[derive(Debug, Clone, Copy, Default)]
struct LogThrottle {
    /// When the next event may be emitted; `None` before the first.
    next: Option<Instant>,
    /// Occurrences not yet reported.
    count: u64,
}

impl LogThrottle {
    /// Counts one occurrence; returns the count to report when an event is due now.
    fn hit(&mut self, now: Instant) -> Option<u64> {
        self.count += 1;
        if self.next.is_some_and(|next| now < next) {
            return None;
        }
        self.next = Some(now + LOG_INTERVAL);
        Some(std::mem::take(&mut self.count))
    }
}

/// [`LogThrottle`] in 8 bytes, for the per-session CRC-reject events (every session carries one,
/// so it is kept small): times are whole seconds since the endpoint's first call.
#[derive(Debug, Clone, Copy, Default)]
struct SessionLogThrottle {
    /// The second from which the next event may be emitted (0: at once).
    next: u32,
    /// Occurrences not yet reported (saturating).
    count: u32,
}

impl SessionLogThrottle {
    /// Counts one occurrence at `second` (since the endpoint's origin); returns the count to
    /// report when an event is due.
    fn hit(&mut self, second: u32) -> Option<u32> {
        self.count = self.count.saturating_add(1);
        if second < self.next {
            return None;
        }
        // LOG_INTERVAL is one second.
        self.next = second.saturating_add(1);
        Some(std::mem::take(&mut self.count))
    }
}

/// The rate limits of the endpoint-wide log events, which strangers can trigger at will.
#[derive(Debug, Default)]
struct LogThrottles {
    refused: LogThrottle,
    source_full: LogThrottle,
    rate_limited: LogThrottle,
    replies_dropped: LogThrottle,
    half_open_evicted: LogThrottle,
    remapped: LogThrottle,
    remaps_limited: LogThrottle,
    recovered: LogThrottle,
    replaced: LogThrottle,
}

impl<A> Records for Slab<Entry<A>> {
    fn record(&mut self, key: usize) -> Option<&mut TimerRecord> {
        self.get_mut(key).map(|e| &mut e.timer)
    }

    fn live(&self) -> usize {
        self.len()
    }
}

/// One slab entry.
#[derive(Debug)]
struct Entry<A> {
    session: Session,
    remote: A,
    generation: u32,
    /// Its filing in the timer set, its deadline when last asked, and whether a call touched
    /// it since.
    timer: TimerRecord,
    in_tx: bool,
    in_ev: bool,
    half_open: bool,
    /// Filed in the (session id, CRC seed) index used by RemapConnection.
    in_by_id: bool,
    /// Counted in the sessions its remote's sources hold (a server session not yet closed).
    charged: bool,
    /// Rate limit of this session's CRC-reject events.
    crc_log: SessionLogThrottle,
    /// When the session was last moved by RemapConnection, in [`REMAP_TICK`]s since the
    /// endpoint's origin, wrapping, never 0 (0: never). 2 bytes, so that an idle session stays
    /// as small as it was.
    remapped_at: u16,
    /// The session's resend count (low 16 bits) at its previous timer wake-up (resend-burst
    /// events; far fewer than 65,536 packets are resent between two wake-ups).
    resends_seen: u16,
}

/// Many sessions over one socket, driven without I/O like [`Session`].
///
/// See the crate documentation for the polling order and the limits. `A` is the address type
/// (a `SocketAddr` by default; tests use small integers).
#[derive(Debug)]
pub struct Endpoint<A: PeerAddress = SocketAddr> {
    config: Arc<EndpointConfig>,
    rng: EndpointRng,
    /// The secret and the per-source limits, shared with the other shards of the group.
    group: ShardGroup,
    /// This endpoint's number in its group, which its cookies carry.
    shard: u32,
    origin: Option<Instant>,
    sessions: Slab<Entry<A>>,
    /// Every datagram's route: keyed foldhash ([`ShardGroup::address_hasher`]).
    by_addr: HashMap<A, usize, foldhash::fast::SeedableRandomState>,
    by_id: HashMap<(u32, u32), usize>,
    timers: Deadlines,
    /// Sessions touched since they were last asked for their deadline (key, generation): each
    /// is asked once, at the end of the turn ([`Endpoint::poll_transmit`] returning `None`) or
    /// when the timers run.
    dirty: Vec<(usize, u32)>,
    tx_queue: VecDeque<(usize, u32)>,
    ev_queue: VecDeque<(usize, u32)>,
    half_open: VecDeque<(usize, u32)>,
    half_open_count: usize,
    /// (session id, CRC seed) of server sessions closed within the cookie lifetime.
    tombstones: HashSet<(u32, u32)>,
    tombstone_order: VecDeque<((u32, u32), Instant)>,
    /// Until when no session is rebuilt from a cookie, because a tombstone was dropped before
    /// its time (the table was full).
    tombstones_lost_until: Option<Instant>,
    replies: VecDeque<(A, [u8; MAX_REPLY], u8)>,
    scratch: Scratch,
    due: Vec<usize>,
    generation: u32,
    stats: EndpointStats,
    log: LogThrottles,
    /// The flight recorder ([`crate::recorder`]).
    recorder: Recorder<A>,
}

impl<A: PeerAddress> Endpoint<A> {
    /// An endpoint with no sessions, or the reason it cannot be made: the operating system's
    /// random generator failed ([`EndpointError::RandomUnavailable`]). The endpoint's secret
    /// and its session ids come from it and from nothing weaker, so it fails closed.
    ///
    /// The secret and the per-source limits are those of the config's
    /// [shard group](EndpointConfig::with_shard_group), or of a group drawn for this endpoint.
    pub fn try_new(config: Arc<EndpointConfig>) -> Result<Self, EndpointError> {
        let rng = match config.rng_seed() {
            Some(seed) => EndpointRng::Seeded(SplitMix64::new(seed)),
            None => EndpointRng::Keyed(KeyedRandom::from_os()?),
        };
        // Straight from the OS, apart from every generator whose output goes on the wire.
        let group = match (config.shard_group(), config.secret()) {
            (Some(group), _) => group.clone(),
            (None, Some(secret)) => ShardGroup::with_key(secret),
            (None, None) => ShardGroup::new()?,
        };
        let shard = group.join();
        let by_addr = HashMap::with_hasher(group.address_hasher());
        Ok(Self {
            recorder: Recorder::new(*config.recording()),
            config,
            rng,
            group,
            shard,
            origin: None,
            sessions: Slab::new(),
            by_addr,
            by_id: HashMap::new(),
            timers: Deadlines::default(),
            dirty: Vec::new(),
            tx_queue: VecDeque::new(),
            ev_queue: VecDeque::new(),
            half_open: VecDeque::new(),
            half_open_count: 0,
            tombstones: HashSet::new(),
            tombstone_order: VecDeque::new(),
            tombstones_lost_until: None,
            replies: VecDeque::new(),
            scratch: Scratch::default(),
            due: Vec::new(),
            generation: 0,
            stats: EndpointStats::default(),
            log: LogThrottles::default(),
        })
    }

    /// [`Endpoint::try_new`] for tests, simulators and programs that cannot go on without
    /// one.
    ///
    /// # Panics
    ///
    /// When the operating system's random generator fails (see [`Endpoint::try_new`]), which
    /// no supported platform's does; bindings and servers use `try_new` and report it.
    pub fn new(config: Arc<EndpointConfig>) -> Self {
        match Self::try_new(config) {
            Ok(endpoint) => endpoint,
            Err(e) => panic!("cannot make an SOE endpoint: {e}"),
        }
    }

    /// The shard group this endpoint shares its secret and per-source limits with.
    pub fn shard_group(&self) -> &ShardGroup {
        &self.group
    }

    /// The config.
    pub fn config(&self) -> &Arc<EndpointConfig> {
        &self.config
    }

    /// Sessions held: established, closing, client, and half-open ones.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Whether no session is held.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Half-open server sessions held.
    pub fn half_open(&self) -> usize {
        self.half_open_count
    }

    /// Endpoint-wide counters.
    pub fn endpoint_stats(&self) -> &EndpointStats {
        &self.stats
    }

    /// A session's counters.
    pub fn stats(&self, h: SessionHandle) -> Option<SessionStats> {
        self.entry(h).map(|e| e.session.stats())
    }

    /// Messages queued on a session's reliable `channel` (see [`Session::queued`]); `None` for
    /// an unknown handle.
    pub fn queued(&self, h: SessionHandle, channel: Channel) -> Option<usize> {
        self.entry(h).map(|e| e.session.queued(channel))
    }

    /// What a session's reliable `channel` holds on the receiving side (see
    /// [`Session::receive_backlog`]); `None` for an unknown handle.
    pub fn receive_backlog(&self, h: SessionHandle, channel: Channel) -> Option<ReceiveBacklog> {
        self.entry(h).map(|e| e.session.receive_backlog(channel))
    }

    /// A session's remote address.
    pub fn remote(&self, h: SessionHandle) -> Option<A> {
        self.entry(h).map(|e| e.remote)
    }

    /// A session's state.
    pub fn state(&self, h: SessionHandle) -> Option<State> {
        self.entry(h).map(|e| e.session.state())
    }

    /// A session.
    pub fn session(&self, h: SessionHandle) -> Option<&Session> {
        self.entry(h).map(|e| &e.session)
    }

    /// The handle of the session with `remote`, if any.
    pub fn handle_of(&self, remote: A) -> Option<SessionHandle> {
        let key = *self.by_addr.get(&remote)?;
        self.sessions.get(key).map(|e| handle(key, e.generation))
    }

    fn entry(&self, h: SessionHandle) -> Option<&Entry<A>> {
        self.sessions
            .get(h.index())
            .filter(|e| e.generation == h.generation)
    }

    fn key_of(&self, h: SessionHandle) -> Option<usize> {
        self.entry(h).map(|_| h.index())
    }

    // ----- application calls -----

    /// Starts a client session with `remote`.
    pub fn connect(&mut self, now: Instant, remote: A) -> Result<SessionHandle, ConnectError> {
        self.origin.get_or_insert(now);
        self.recorder.tick(now);
        if let Some(&key) = self.by_addr.get(&remote) {
            if self
                .sessions
                .get(key)
                .is_some_and(|e| !e.session.is_closed())
            {
                return Err(ConnectError::AddressInUse);
            }
            self.by_addr.remove(&remote);
        }
        let max = self.config.max_sessions();
        if self.established() >= max {
            return Err(ConnectError::TooManySessions { max });
        }
        let session = Session::client(now, self.config.client_config().clone(), &mut self.rng);
        let key = self.insert(remote, session, false);
        Ok(handle(key, self.sessions[key].generation))
    }

    /// Queues a reliable message. One `Bytes` can be sent to many sessions without a copy
    /// (unless the session encrypts).
    pub fn send(
        &mut self,
        h: SessionHandle,
        channel: Channel,
        data: Bytes,
    ) -> Result<(), SendError> {
        let key = self.key_of(h).ok_or(SendError::UnknownSession)?;
        let copy = self.recorded_copy(key, &data);
        let r = self.sessions[key].session.send(channel, data);
        self.record_queued(key, copy, &r, channel, Delivery::Reliable);
        self.touched(key);
        r
    }

    /// Queues an unreliable message (see [`Session::send_unreliable`]).
    pub fn send_unreliable(&mut self, h: SessionHandle, data: Bytes) -> Result<(), SendError> {
        let key = self.key_of(h).ok_or(SendError::UnknownSession)?;
        let copy = self.recorded_copy(key, &data);
        let r = self.sessions[key].session.send_unreliable(data);
        self.record_queued(key, copy, &r, Channel::ZERO, Delivery::Unreliable);
        self.touched(key);
        r
    }

    /// Turns RC4 on or off for one session ([`Session::set_encryption`]). Returns `false` when
    /// the handle names no session or the session has no encryption key.
    pub fn set_encryption(&mut self, h: SessionHandle, on: bool) -> bool {
        self.key_of(h)
            .is_some_and(|key| self.sessions[key].session.set_encryption(on))
    }

    /// Queues an ordered unreliable message (see [`Session::send_ordered`]).
    pub fn send_ordered(&mut self, h: SessionHandle, data: Bytes) -> Result<(), SendError> {
        let key = self.key_of(h).ok_or(SendError::UnknownSession)?;
        let copy = self.recorded_copy(key, &data);
        let r = self.sessions[key].session.send_ordered(data);
        self.record_queued(key, copy, &r, Channel::ZERO, Delivery::Ordered);
        self.touched(key);
        r
    }

    /// Messages `channel` of a session takes now (0 for an unknown handle).
    pub fn send_capacity(&self, h: SessionHandle, channel: Channel) -> usize {
        self.entry(h)
            .map_or(0, |e| e.session.send_capacity(channel))
    }

    /// Closes a session gracefully (see [`Session::close`]).
    pub fn close(&mut self, now: Instant, h: SessionHandle, reason: DisconnectReason) {
        if let Some(key) = self.key_of(h) {
            self.sessions[key].session.close(now, reason);
            self.touched(key);
        }
    }

    /// Closes every session gracefully (shutdown). Keep driving the endpoint until
    /// [`Endpoint::is_empty`] so the Disconnects go out.
    pub fn close_all(&mut self, now: Instant, reason: DisconnectReason) {
        let keys: Vec<usize> = self.sessions.iter().map(|(k, _)| k).collect();
        for key in keys {
            self.sessions[key].session.close(now, reason);
            self.touched(key);
        }
    }

    /// Closes a session at once, without waiting for its queued data to be acknowledged (see
    /// [`Session::close_immediately`]).
    pub fn close_immediately(&mut self, now: Instant, h: SessionHandle, reason: DisconnectReason) {
        if let Some(key) = self.key_of(h) {
            self.sessions[key].session.close_immediately(now, reason);
            self.touched(key);
        }
    }

    /// Closes every session at once (see [`Session::close_immediately`]): a shutdown that does
    /// not wait for queued data. Keep driving the endpoint until [`Endpoint::is_empty`] so the
    /// Disconnects go out.
    pub fn close_all_immediately(&mut self, now: Instant, reason: DisconnectReason) {
        let keys: Vec<usize> = self.sessions.iter().map(|(k, _)| k).collect();
        for key in keys {
            self.sessions[key].session.close_immediately(now, reason);
            self.touched(key);
        }
    }

    // ----- driving -----

    /// Handles one datagram from `remote`.
    pub fn handle_datagram(&mut self, now: Instant, remote: A, datagram: &[u8]) {
        self.origin.get_or_insert(now);
        self.recorder.tick(now);
        self.stats.datagrams_received += 1;
        if let Some(&key) = self.by_addr.get(&remote) {
            self.route(now, key, remote, datagram);
            return;
        }
        match datagram {
            [0, 0x01, ..] => {
                if let Ok(Packet::SessionRequest(r)) = Packet::decode(datagram) {
                    self.on_request(now, remote, &r);
                }
            }
            [0, 0x1E, ..] => {
                if let Ok(Packet::RemapConnection(r)) = Packet::decode(datagram) {
                    self.on_remap(now, remote, r.session_id, r.crc_seed);
                }
            }
            // Never answered: replies to our own stateless packets, and Disconnect.
            [0, 0x02 | 0x05 | 0x1D, ..] => {}
            [0, 0x03..=0x1C, ..] => self.on_unknown_contextual(now, remote, datagram.len()),
            _ => {}
        }
    }

    fn route(&mut self, now: Instant, key: usize, remote: A, datagram: &[u8]) {
        let Some(entry) = self.sessions.get(key) else {
            debug_assert!(false, "address map points at a free slot");
            return;
        };
        let session = &entry.session;
        if let [0, 0x01, ..] = datagram {
            if session.side() != Side::Server {
                return;
            }
            let Ok(Packet::SessionRequest(r)) = Packet::decode(datagram) else {
                return;
            };
            if r.session_id != session.session_id() || session.is_closed() {
                // The client at this address started over, or someone spoofs its address.
                let closed = session.is_closed();
                let established = !closed && !session.is_half_open();
                if !self.allow_request(now, remote) {
                    return;
                }
                // A request we would refuse anyway (a stray or spoofed datagram, say) is refused
                // without ending the live session.
                let acceptable = self
                    .config
                    .server_config()
                    .is_some_and(|c| check_request(c, &r).is_ok());
                if !acceptable && !closed {
                    self.on_request_allowed(now, remote, &r);
                    return;
                }
                if established && !self.may_replace(now, key) {
                    return;
                }
                if let Some(e) = self.sessions.get_mut(key) {
                    e.session.replace();
                }
                self.by_addr.remove(&remote);
                self.touched(key);
                self.on_request_allowed(now, remote, &r);
                return;
            }
            // The same session again: our SessionResponse was lost; answer within the limit.
            if !self.allow_request(now, remote) {
                return;
            }
        } else if entry.half_open && self.established() >= self.config.max_sessions() {
            // Any datagram may complete the handshake (an unreliable one too), so none may when
            // the endpoint is full: the half-open session is refused instead.
            if let Some(e) = self.sessions.get_mut(key) {
                e.session.refuse(DisconnectReason::ConnectionRefused);
                if let Some(refused) = self.log.refused.hit(now) {
                    warn!(
                        ?remote,
                        session_id = e.session.session_id(),
                        reason = ?DisconnectReason::ConnectionRefused,
                        refused,
                        "session refused: the endpoint is at its session limit"
                    );
                }
            }
            self.touched(key);
            return;
        }
        let mut rejected = false;
        if let Some(e) = self.sessions.get_mut(key) {
            let rejects = e.session.crc_rejects();
            e.session.handle_datagram(now, datagram);
            rejected = e.session.crc_rejects() != rejects;
            if rejected {
                let origin = self.origin.unwrap_or(now);
                let second = u32::try_from(now.saturating_duration_since(origin).as_secs())
                    .unwrap_or(u32::MAX);
                if let Some(rejected) = e.crc_log.hit(second) {
                    warn!(
                        ?remote,
                        session_id = e.session.session_id(),
                        rejected,
                        total = e.session.crc_rejects(),
                        "datagrams dropped: CRC mismatch"
                    );
                }
            }
        }
        self.touched(key);
        self.record_received(key, now, datagram, rejected);
    }

    /// Whether a SessionRequest with a new session id may replace the established session
    /// `key` (see [`EndpointConfig::with_replace_after_silence`]): only once a liveness probe has
    /// gone unanswered for that long. Otherwise sends the probe (again).
    fn may_replace(&mut self, now: Instant, key: usize) -> bool {
        let wait = self.config.replace_after_silence();
        let Some(e) = self.sessions.get_mut(key) else {
            return false;
        };
        match e.session.unanswered_probe(now) {
            Some(silent) if silent >= wait => {
                self.stats.replaced += 1;
                if let Some(replaced) = self.log.replaced.hit(now) {
                    info!(
                        remote = ?e.remote,
                        session_id = e.session.session_id(),
                        silent_ms = silent.as_millis() as u64,
                        replaced,
                        "session replaced by a new SessionRequest from its address"
                    );
                }
                true
            }
            _ => {
                // Probe (again: the last one may have been lost) and wait.
                e.session.probe_liveness(now);
                self.stats.replacements_deferred += 1;
                self.touched(key);
                false
            }
        }
    }

    fn on_request(&mut self, now: Instant, remote: A, r: &soe_wire::SessionRequest<'_>) {
        if self.config.server_config().is_none() {
            return;
        }
        if !self.allow_request(now, remote) {
            return;
        }
        self.on_request_allowed(now, remote, r);
    }

    fn on_request_allowed(&mut self, now: Instant, remote: A, r: &soe_wire::SessionRequest<'_>) {
        let Some(config) = self.config.server_config().cloned() else {
            return;
        };
        if let Err(reason) = check_request(&config, r) {
            self.stats.requests_refused += 1;
            if let Some(refused) = self.log.refused.hit(now) {
                info!(
                    ?remote,
                    session_id = r.session_id,
                    ?reason,
                    protocol_version = r.protocol_version,
                    application_protocol = %String::from_utf8_lossy(r.application_protocol),
                    udp_length = r.udp_length,
                    refused,
                    "session refused: its request does not match our protocol"
                );
            }
            self.refuse(now, remote, r.session_id, reason);
            return;
        }
        if self.established() >= self.config.max_sessions() {
            self.stats.requests_refused += 1;
            if let Some(refused) = self.log.refused.hit(now) {
                warn!(
                    ?remote,
                    session_id = r.session_id,
                    reason = ?DisconnectReason::ConnectionRefused,
                    max_sessions = self.config.max_sessions(),
                    refused,
                    "session refused: the endpoint is at its session limit"
                );
            }
            self.refuse(
                now,
                remote,
                r.session_id,
                DisconnectReason::ConnectionRefused,
            );
            return;
        }
        let seed = self.cookie(self.epoch(now), &remote, r.session_id);
        let Ok(session) = Session::server(now, config, r, seed) else {
            return;
        };
        if !self.charge(remote, false) {
            self.refuse_source_full(now, remote, r.session_id);
            return;
        }
        while self.half_open_count >= self.config.max_half_open() {
            if !self.evict_oldest_half_open(now) {
                break;
            }
        }
        self.stats.requests_accepted += 1;
        let key = self.insert(remote, session, true);
        self.sessions[key].charged = true;
        let generation = self.sessions[key].generation;
        self.half_open.push_back((key, generation));
        self.half_open_count += 1;
        // Keep the FIFO from growing with entries promoted long ago.
        if self.half_open.len() > 2 * self.config.max_half_open() + 16 {
            let sessions = &self.sessions;
            self.half_open.retain(|&(k, g)| {
                sessions
                    .get(k)
                    .is_some_and(|e| e.generation == g && e.half_open)
            });
        }
    }

    /// Refuses a request from a source that holds all the sessions its level allows.
    fn refuse_source_full(&mut self, now: Instant, remote: A, session_id: u32) {
        self.stats.requests_refused += 1;
        self.stats.requests_source_full += 1;
        if let Some(refused) = self.log.source_full.hit(now) {
            warn!(
                ?remote,
                session_id,
                refused,
                "flood limit: session refused: its source holds all the sessions it may"
            );
        }
        self.refuse(now, remote, session_id, DisconnectReason::ConnectionRefused);
    }

    fn evict_oldest_half_open(&mut self, now: Instant) -> bool {
        while let Some((key, generation)) = self.half_open.pop_front() {
            let live = self
                .sessions
                .get(key)
                .is_some_and(|e| e.generation == generation && e.half_open);
            if live {
                self.stats.half_open_evicted += 1;
                if let Some(evicted) = self.log.half_open_evicted.hit(now) {
                    warn!(
                        max_half_open = self.config.max_half_open(),
                        evicted,
                        "flood limit: half-open sessions evicted to make room for new requests"
                    );
                }
                self.reap(key);
                return true;
            }
        }
        false
    }

    fn on_remap(&mut self, now: Instant, remote: A, session_id: u32, crc_seed: u32) {
        let Some(config) = self.config.server_config().cloned() else {
            return;
        };
        if let Some(&key) = self.by_id.get(&(session_id, crc_seed)) {
            let Some(e) = self.sessions.get_mut(key) else {
                return;
            };
            if e.session.is_closed() {
                return;
            }
            // Wrapping ticks: exact while the last remap is under 68 minutes old (an older one
            // may at worst delay this move by one interval).
            let tick = self.remap_tick(now).max(1);
            let interval = self.config.remap_interval().as_millis();
            let too_soon = self.sessions.get(key).is_some_and(|e| {
                let elapsed = u128::from(tick.wrapping_sub(e.remapped_at)) * REMAP_TICK.as_millis();
                e.remapped_at != 0 && elapsed < interval
            });
            if too_soon || !self.allow_request(now, remote) {
                self.stats.remaps_limited += 1;
                if let Some(limited) = self.log.remaps_limited.hit(now) {
                    warn!(
                        ?remote,
                        session_id,
                        limited,
                        "flood limit: RemapConnections dropped by the remap limits"
                    );
                }
                return;
            }
            let Some(e) = self.sessions.get_mut(key) else {
                return;
            };
            e.remapped_at = tick;
            let charged = e.charged;
            let old = std::mem::replace(&mut e.remote, remote);
            if charged {
                self.uncharge(old);
                self.charge(remote, true);
            }
            if self.by_addr.get(&old) == Some(&key) {
                self.by_addr.remove(&old);
            }
            self.by_addr.insert(remote, key);
            self.stats.remaps += 1;
            if let Some(remapped) = self.log.remapped.hit(now) {
                info!(
                    ?remote,
                    old_remote = ?old,
                    session_id,
                    remapped,
                    "session remapped to a new address"
                );
            }
            self.touched(key);
            return;
        }
        // No live session: was this seed ours for this client and address? (Its half-open
        // state may have been evicted during a flood.)
        self.prune_tombstones(now);
        if self.tombstones.contains(&(session_id, crc_seed))
            || self.tombstones_lost_until.is_some_and(|until| now < until)
        {
            // That session was closed here (or may have been: a tombstone was dropped early);
            // a cookie does not bring it back.
            return;
        }
        let epoch = self.epoch(now);
        let ours = [epoch, epoch.saturating_sub(1)]
            .iter()
            .any(|&e| self.cookie(e, &remote, session_id) == crc_seed);
        if !ours
            || self.established() >= self.config.max_sessions()
            || !self.allow_request(now, remote)
            || !self.charge(remote, false)
        {
            return;
        }
        let session =
            Session::server_recovered(now, config, session_id, crc_seed, RECOVERED_UDP_LENGTH);
        self.stats.recovered += 1;
        if let Some(recovered) = self.log.recovered.hit(now) {
            info!(
                ?remote,
                session_id,
                recovered,
                "session recovered from its CRC-seed cookie after its half-open state was lost"
            );
        }
        let key = self.insert(remote, session, false);
        if let Some(e) = self.sessions.get_mut(key) {
            e.charged = true;
        }
    }

    fn on_unknown_contextual(&mut self, now: Instant, remote: A, len: usize) {
        // UnknownSender is 2 bytes, never more than what it answers.
        if len < 2 {
            return;
        }
        if self.queue_reply(now, remote, &[0x00, 0x1D]) {
            self.stats.unknown_sender_sent += 1;
        }
    }

    fn refuse(&mut self, now: Instant, remote: A, session_id: u32, reason: DisconnectReason) {
        let mut buf = Vec::with_capacity(MAX_REPLY);
        let n = encode_refusal(session_id, reason, &mut buf);
        self.queue_reply(now, remote, buf.get(..n).unwrap_or_default());
    }

    fn queue_reply(&mut self, now: Instant, remote: A, bytes: &[u8]) -> bool {
        if self.replies.len() >= self.config.max_queued_replies()
            || bytes.len() > MAX_REPLY
            || !self
                .group
                .take_reply(now, self.keys(remote).as_ref(), &self.config)
        {
            self.stats.replies_dropped += 1;
            if let Some(dropped) = self.log.replies_dropped.hit(now) {
                warn!(
                    ?remote,
                    dropped,
                    rate_per_sec = self.config.stateless_reply_rate(),
                    per_source_per_sec = self.config.stateless_replies_per_source(),
                    "flood limit: stateless replies dropped"
                );
            }
            return false;
        }
        let mut data = [0u8; MAX_REPLY];
        if let Some(dst) = data.get_mut(..bytes.len()) {
            dst.copy_from_slice(bytes);
        }
        self.replies.push_back((remote, data, bytes.len() as u8));
        true
    }

    /// Whether a SessionRequest (or a RemapConnection that would move or rebuild a session)
    /// from `remote` is within its host's limit; counts it if so.
    fn allow_request(&mut self, now: Instant, remote: A) -> bool {
        let Some(keys) = self.keys(remote) else {
            return true;
        };
        let ok = self.group.allow_request(now, &keys, &self.config);
        if !ok {
            self.stats.requests_rate_limited += 1;
            if let Some(dropped) = self.log.rate_limited.hit(now) {
                warn!(
                    ?remote,
                    dropped,
                    per_minute = self.config.requests_per_source_per_minute(),
                    "flood limit: SessionRequests dropped by the per-source rate limit"
                );
            }
        }
        ok
    }

    /// Writes the next datagram into `buf` (cleared first). Only sessions touched since their
    /// last empty poll are visited, round-robin, one datagram at a time. The `None` that ends
    /// the turn also asks every session touched during it for its deadline (once each).
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit<A>> {
        buf.clear();
        self.recorder.tick(now);
        if let Some((destination, data, len)) = self.replies.pop_front() {
            buf.extend_from_slice(data.get(..usize::from(len)).unwrap_or_default());
            self.stats.datagrams_sent += 1;
            return Some(Transmit {
                destination,
                len: buf.len(),
            });
        }
        while let Some(&(key, generation)) = self.tx_queue.front() {
            let Some(e) = self
                .sessions
                .get_mut(key)
                .filter(|e| e.generation == generation)
            else {
                self.tx_queue.pop_front();
                continue;
            };
            self.stats.transmit_visits += 1;
            match e.session.poll_transmit_with(now, buf, &mut self.scratch) {
                Some(len) => {
                    let destination = e.remote;
                    let sent = buf.get(..len).unwrap_or_default();
                    self.recorder.sent(key, generation, now, sent);
                    // Round-robin: this session goes to the back, if it may have more.
                    self.tx_queue.pop_front();
                    if e.session.may_transmit() {
                        self.tx_queue.push_back((key, generation));
                    } else {
                        e.in_tx = false;
                    }
                    self.mark(key);
                    self.stats.datagrams_sent += 1;
                    return Some(Transmit { destination, len });
                }
                None => {
                    e.in_tx = false;
                    self.tx_queue.pop_front();
                    // Even an empty poll may move a deadline (a close finished, the pacer).
                    self.mark(key);
                }
            }
        }
        self.timers.set_now(now);
        self.ask_touched();
        None
    }

    /// The earliest deadline of any session: exact once [`Endpoint::poll_transmit`] has
    /// returned `None` (it is then the top of the timer set). Called before, it also asks the
    /// sessions touched since, so it is never later than a deadline that is due; it may be
    /// earlier (a touched session's old filing counts until the session is asked), and the
    /// [`Endpoint::handle_timeout`] it prompts then runs nothing.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let filed = self.timers.next();
        if self.dirty.is_empty() {
            // The usual case: asked after the transmit pass, which asked every session.
            return filed;
        }
        self.dirty
            .iter()
            .filter_map(|&(key, generation)| {
                let e = self.sessions.get(key)?;
                (e.generation == generation && e.timer.dirty).then_some(e)?;
                e.session.poll_timeout()
            })
            .chain(filed)
            .min()
    }

    /// Runs the timers of the sessions due at `now`, and only those (the sessions touched since
    /// they were last asked are asked first).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.stats.timer_wakes += 1;
        self.recorder.tick(now);
        self.timers.set_now(now);
        self.ask_touched();
        let mut due = std::mem::take(&mut self.due);
        while let Some(key) = self.timers.pop_due(now, &mut self.sessions) {
            due.push(key);
        }
        self.timers.settle(&mut self.sessions);
        // Summing the channels' counters is only worth it when the event would be recorded.
        let watch_resends = tracing::enabled!(Level::WARN);
        for &key in &due {
            self.stats.sessions_woken += 1;
            if let Some(e) = self.sessions.get_mut(key) {
                let was_half_open = e.half_open;
                e.session.handle_timeout(now);
                if was_half_open && e.session.is_drained() {
                    self.stats.half_open_expired += 1;
                    debug!(
                        remote = ?e.remote,
                        session_id = e.session.session_id(),
                        "half-open session expired without completing its handshake"
                    );
                }
                if watch_resends {
                    let resends = e.session.resends();
                    // Low 16 bits: the difference is right across a wrap.
                    let burst = u64::from((resends as u16).wrapping_sub(e.resends_seen));
                    e.resends_seen = resends as u16;
                    if burst >= RESEND_BURST {
                        warn!(
                            remote = ?e.remote,
                            session_id = e.session.session_id(),
                            resent = burst,
                            total = resends,
                            "resend burst: reliable packets resent since the session's last timer"
                        );
                    }
                }
            }
            self.touched(key);
        }
        due.clear();
        self.due = due;
    }

    /// The next event of any session, with its handle. Events of one session come in order.
    /// Closed sessions are reaped after their Closed event is taken and their Disconnects sent.
    pub fn poll_event(&mut self) -> Option<(SessionHandle, Event)> {
        while let Some(&(key, generation)) = self.ev_queue.front() {
            let Some(e) = self
                .sessions
                .get_mut(key)
                .filter(|e| e.generation == generation)
            else {
                self.ev_queue.pop_front();
                continue;
            };
            if let Some(event) = e.session.poll_event() {
                log_event(&e.remote, e.session.session_id(), &event);
                // Off the queue at once when that was its last event (a finished session stays
                // until the next call, which reaps it after the application saw its Closed).
                if !e.session.has_events() && !e.session.is_drained() {
                    e.in_ev = false;
                    self.ev_queue.pop_front();
                }
                self.record_event(key, generation, &event);
                return Some((handle(key, generation), event));
            }
            e.in_ev = false;
            self.ev_queue.pop_front();
            if e.session.is_drained() && e.session.events_done() {
                self.reap(key);
            }
        }
        None
    }

    // ----- bookkeeping -----

    fn established(&self) -> usize {
        self.sessions.len() - self.half_open_count
    }

    fn insert(&mut self, remote: A, session: Session, half_open: bool) -> usize {
        self.generation = self.generation.wrapping_add(1);
        let key = self.sessions.insert(Entry {
            session,
            remote,
            generation: self.generation,
            timer: TimerRecord::default(),
            in_tx: false,
            in_ev: false,
            half_open,
            in_by_id: false,
            charged: false,
            crc_log: SessionLogThrottle::default(),
            remapped_at: 0,
            resends_seen: 0,
        });
        self.by_addr.insert(remote, key);
        self.record_from_start(key, !half_open);
        self.touched(key);
        key
    }

    /// After any call that touched a session: keep the indexes and the queues in step with it,
    /// mark it to be asked for its deadline, and reap it when it is finished.
    fn touched(&mut self, key: usize) {
        let Some(e) = self.sessions.get_mut(key) else {
            return;
        };
        if e.half_open && !e.session.is_half_open() {
            e.half_open = false;
            self.half_open_count -= 1;
            self.recorder.start_every(key, e.generation);
        }
        let e = if e.charged && e.session.is_closed() {
            e.charged = false;
            let remote = e.remote;
            self.uncharge(remote);
            // Rare (once per session): look the entry up again after borrowing `self`.
            let Some(e) = self.sessions.get_mut(key) else {
                return;
            };
            e
        } else {
            e
        };
        if e.session.is_drained() && e.session.events_done() {
            self.reap(key);
            return;
        }
        if !e.in_by_id
            && e.session.side() == Side::Server
            // Half-open ones too: a client whose NAT moved it before the server heard its
            // first packet remaps a half-open session.
            && matches!(
                e.session.state(),
                State::Handshake | State::Connected | State::Closing
            )
        {
            e.in_by_id = true;
            self.by_id
                .insert((e.session.session_id(), e.session.crc_seed()), key);
        }
        let mut grew = false;
        if !e.in_tx && e.session.may_transmit() {
            e.in_tx = true;
            self.tx_queue.push_back((key, e.generation));
            grew = true;
        }
        if !e.in_ev && e.session.is_surfaced() && e.session.has_events() {
            e.in_ev = true;
            self.ev_queue.push_back((key, e.generation));
            grew = true;
        }
        // To be asked for its deadline at the end of the turn.
        if !e.timer.dirty {
            e.timer.dirty = true;
            self.dirty.push((key, e.generation));
            grew = true;
        }
        if grew {
            self.bound_queues();
        }
    }

    /// Reaped sessions leave stale queue entries behind; if the application polls rarely during
    /// a flood of short-lived half-open sessions, this drops them so that the queues stay within
    /// a small multiple of the live sessions.
    fn bound_queues(&mut self) {
        let bound = 2 * self.sessions.len() + 64;
        let sessions = &self.sessions;
        let live = |&(k, g): &(usize, u32)| sessions.get(k).is_some_and(|e| e.generation == g);
        if self.tx_queue.len() > bound {
            self.tx_queue.retain(live);
        }
        if self.ev_queue.len() > bound {
            self.ev_queue.retain(live);
        }
        if self.dirty.len() > bound {
            self.dirty.retain(live);
        }
    }

    /// Marks a session to be asked for its deadline at the end of the turn.
    fn mark(&mut self, key: usize) {
        if let Some(e) = self.sessions.get_mut(key) {
            if !e.timer.dirty {
                e.timer.dirty = true;
                self.dirty.push((key, e.generation));
            }
        }
    }

    /// Asks every session touched since it was last asked for its deadline, once; files the
    /// ones that moved earlier (see [`Deadlines`]).
    fn ask_touched(&mut self) {
        if self.dirty.is_empty() {
            return;
        }
        for (key, generation) in self.dirty.drain(..) {
            let Some(e) = self.sessions.get_mut(key) else {
                continue;
            };
            if e.generation == generation && e.timer.dirty {
                let deadline = e.session.poll_timeout();
                self.timers.update(key, &mut e.timer, deadline);
            }
        }
        self.timers.settle(&mut self.sessions);
    }

    fn reap(&mut self, key: usize) {
        if !self.sessions.contains(key) {
            return;
        }
        let e = self.sessions.remove(key);
        self.recorder.reaped(key);
        if e.charged {
            self.uncharge(e.remote);
        }
        self.timers.settle(&mut self.sessions);
        if self.by_addr.get(&e.remote) == Some(&key) {
            self.by_addr.remove(&e.remote);
        }
        if e.in_by_id {
            let id = (e.session.session_id(), e.session.crc_seed());
            if self.by_id.get(&id) == Some(&key) {
                self.by_id.remove(&id);
            }
            // A half-open session that expired or was evicted may still come back through its
            // cookie; a closed established one may not.
            if !e.half_open {
                if self.tombstones.len() >= self.config.max_tombstones() {
                    if let Some((old, at)) = self.tombstone_order.pop_front() {
                        self.tombstones.remove(&old);
                        // Until it would have expired, no cookie is trusted.
                        let until = at + TOMBSTONE_LIFETIME;
                        self.tombstones_lost_until =
                            Some(self.tombstones_lost_until.map_or(until, |u| u.max(until)));
                    }
                }
                if self.tombstones.insert(id) {
                    self.tombstone_order.push_back((id, e.session.closed_at()));
                }
            }
        }
        if e.half_open {
            self.half_open_count -= 1;
        }
        self.stats.reaped += 1;
    }

    /// Audits the timer set (feature `testing`, for the simulator): every session touched since
    /// it was last asked is marked to be asked; every other one has its current deadline on
    /// record and is filed no later than it; a session that is not finished has a deadline;
    /// [`Endpoint::poll_timeout`] is the earliest deadline of all. Returns what is wrong.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn audit_timers(&self) -> Result<(), String> {
        for (key, e) in &self.sessions {
            let id = e.session.session_id();
            let next = e.session.poll_timeout();
            if next.is_none() && !e.session.is_drained() {
                return Err(format!(
                    "session {key} (id {id:#x}, {:?}) is not finished but has no deadline",
                    e.session.state()
                ));
            }
            if e.timer.dirty {
                if !self.dirty.contains(&(key, e.generation)) {
                    return Err(format!(
                        "session {key} (id {id:#x}) was touched but will not be asked"
                    ));
                }
                continue;
            }
            if e.timer.deadline != next {
                return Err(format!(
                    "session {key} (id {id:#x}) has {:?} on record but its deadline is {next:?}",
                    e.timer.deadline
                ));
            }
            let Some(deadline) = next else {
                continue;
            };
            if e.timer.filed_at().is_none_or(|at| at > deadline) {
                return Err(format!(
                    "session {key} (id {id:#x}) is filed under {:?}, after its deadline \
                     {deadline:?}",
                    e.timer.filed_at()
                ));
            }
            for filed in e.timer.filings() {
                if !self.timers.contains(key, filed.stamp) {
                    return Err(format!("session {key} is missing from the timer set"));
                }
            }
        }
        let earliest = self
            .sessions
            .iter()
            .filter_map(|(_, e)| e.session.poll_timeout())
            .min();
        if self.poll_timeout() != earliest {
            return Err(format!(
                "the endpoint's earliest deadline is {:?}, the sessions' {earliest:?}",
                self.poll_timeout()
            ));
        }
        Ok(())
    }

    /// Takes a session out of the timer set while leaving it marked as filed (feature
    /// `testing`): a planted fault the simulator must catch.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn plant_lost_deadline(&mut self, h: SessionHandle) {
        if let Some(key) = self.key_of(h) {
            self.timers.forget(key);
            self.timers.settle(&mut self.sessions);
        }
    }

    fn prune_tombstones(&mut self, now: Instant) {
        while let Some(&(id, at)) = self.tombstone_order.front() {
            if now.saturating_duration_since(at) <= TOMBSTONE_LIFETIME {
                break;
            }
            self.tombstone_order.pop_front();
            self.tombstones.remove(&id);
        }
    }

    /// [`REMAP_TICK`]s since the endpoint's first call, wrapping.
    fn remap_tick(&self, now: Instant) -> u16 {
        let origin = self.origin.unwrap_or(now);
        (now.saturating_duration_since(origin).as_millis() / REMAP_TICK.as_millis()) as u16
    }

    fn epoch(&self, now: Instant) -> u64 {
        let origin = self.origin.unwrap_or(now);
        now.saturating_duration_since(origin).as_secs() / COOKIE_EPOCH_SECS
    }

    /// Whether `remote` is exempt from the per-source limits (a loopback source, unless
    /// [`EndpointConfig::with_limit_loopback`]).
    fn exempt(&self, remote: A) -> bool {
        !self.config.limit_loopback() && remote.is_loopback()
    }

    /// The sources `remote` is charged to, one per level; `None` when exempt.
    fn keys(&self, remote: A) -> Option<Keys> {
        (!self.exempt(remote)).then(|| self.group.keys(remote, &self.config))
    }

    /// Counts a new server session with `remote` in what its sources hold, if each holds less
    /// than its level allows (`force`: whatever they hold, for a live session that moved).
    fn charge(&self, remote: A, force: bool) -> bool {
        match self.keys(remote) {
            Some(keys) => self.group.charge(&keys, &self.config, force),
            None => true,
        }
    }

    /// Gives back a session charged to `remote`'s sources.
    fn uncharge(&self, remote: A) {
        if let Some(keys) = self.keys(remote) {
            self.group.uncharge(&keys);
        }
    }

    /// The CRC seed for a client: a keyed hash of the epoch, this shard's number, its address
    /// and its session id under the group's 128-bit secret (SipHash-1-3 keyed with it).
    fn cookie(&self, epoch: u64, remote: &A, session_id: u32) -> u32 {
        let mut h = self.group.hasher();
        h.write_u64(epoch);
        // Only the shard that holds the session may rebuild it.
        h.write_u32(self.shard);
        remote.hash(&mut h);
        h.write_u32(session_id);
        let x = h.finish();
        (x ^ (x >> 32)) as u32
    }
}

/// Records a session's opening and closing, as the application learns of them.
fn log_event<A: Debug>(remote: &A, session_id: u32, event: &Event) {
    match event {
        Event::Connected => info!(remote = ?remote, session_id, "session connected"),
        Event::Accepted => info!(remote = ?remote, session_id, "session accepted"),
        Event::Closed { reason, by_peer } => {
            info!(remote = ?remote, session_id, ?reason, by_peer, "session closed");
        }
        _ => {}
    }
}

fn handle(key: usize, generation: u32) -> SessionHandle {
    SessionHandle {
        key: key as u32,
        generation,
    }
}
