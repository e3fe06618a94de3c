//! The flight recorder: a session's last datagrams each way, and its messages, kept within a
//! byte budget so that when a player drops there is something to look at afterwards.
//!
//! # What is kept
//!
//! For each recorded session of an [`Endpoint`](crate::Endpoint), in two directions:
//!
//! * in: every datagram from the peer **as it arrived** (before the CRC check, inflation and
//!   decryption; one whose CRC failed is marked so), and every message handed to the
//!   application (decrypted, as [`Event::Message`](crate::Event::Message) carried it);
//! * out: every datagram sent, as sent, and every message the application queued (before
//!   encryption).
//!
//! Each entry has its time: a datagram the `now` of the call that carried it, a message the
//! latest `now` the endpoint was given (`poll_event` and `send` take none).
//!
//! # The budget
//!
//! Entries live in chunks of [`CHUNK_SIZE`] bytes from one pool per endpoint, allocated on first
//! use and reused for ever after: recording allocates nothing per datagram. A session holds at
//! most [`RecordingConfig::session_budget`] bytes of chunks, half each way; past that it reuses
//! its own oldest chunk. The pool holds at most [`RecordingConfig::endpoint_budget`] bytes;
//! when it is used up, the oldest chunk of the whole endpoint (whichever session's, live or
//! ended) is taken over. Oldest entries go first, whole chunks at a time, and each recording
//! counts the entries it lost ([`Recording::dropped`]). An entry longer than a chunk (a large
//! message, a datagram over 4 KiB) keeps its first bytes and its real length, as a capture's
//! snap length would.
//!
//! # When a recording is taken
//!
//! The host takes a recording with [`Endpoint::take_recording`](crate::Endpoint::take_recording)
//! whenever it likes. When a recorded session ends for a reason that is not a clean close
//! ([`ends_abnormally`]), its recording stays in the pool, in the order the sessions ended,
//! until the host takes it ([`Endpoint::poll_recording`](crate::Endpoint::poll_recording)) or
//! the pool takes its chunks back for newer entries.
//!
//! # The recording's bytes
//!
//! [`Recording::as_bytes`] is a self-contained form of the recording that `soe-dissect` reads
//! and writes as a pcapng capture (`soe_dissect::recording`), little-endian:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `SOER` |
//! | 4 | 1 | version ([`RECORDING_VERSION`]) |
//! | 5 | 1 | side: 0 client, 1 server |
//! | 6 | 1 | CRC length (0 to 4) |
//! | 7 | 1 | flags: 0x01 compression, 0x02 ended, 0x04 ended by the peer, 0x08 the session has an RC4 key (never written here) |
//! | 8 | 4 | session id |
//! | 12 | 4 | CRC seed |
//! | 16 | 4 | the largest datagram sent (`min` of both udp_lengths) |
//! | 20 | 2 | the end's reason (its wire value; 0 while the session lives) |
//! | 22 | 2 | length N of the application protocol name |
//! | 24 | 8 | the end's time, µs since the recording's start |
//! | 32 | 8 | entries dropped by the budget |
//! | 40 | N | the application protocol name |
//!
//! Then the entries, oldest first, each a header of [`ENTRY_HEADER`] bytes and its data:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | time, µs since the recording's start |
//! | 8 | 4 | bytes kept, K |
//! | 12 | 4 | the datagram's or message's real length |
//! | 16 | 1 | kind: 0 datagram received, 1 datagram sent, 2 message delivered, 3 message queued |
//! | 17 | 1 | channel (messages) |
//! | 18 | 1 | delivery (messages): 0 reliable, 1 unreliable, 2 ordered |
//! | 19 | 1 | flags: 0x01 the CRC failed (a received datagram the session dropped), 0x02 encrypted on the wire (a reliable message while RC4 was on) |
//! | 20 | K | the bytes |

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use slab::Slab;
use soe_wire::{Channel, DisconnectReason};

use crate::{Delivery, Session, Side};

/// The size of one chunk of a recorder's pool.
pub const CHUNK_SIZE: usize = 4096;
/// The header of one entry of a recording.
pub const ENTRY_HEADER: usize = 20;
/// The version of [`Recording::as_bytes`]'s form.
pub const RECORDING_VERSION: u8 = 1;
/// The first bytes of [`Recording::as_bytes`].
pub const RECORDING_MAGIC: [u8; 4] = *b"SOER";
/// The fixed part of a recording's header.
const HEADER: usize = 40;
/// The most ended sessions whose recordings wait to be taken; past it the oldest goes.
const MAX_ENDED: usize = 4096;
/// A chunk in the free list.
const FREE: u32 = u32::MAX;

/// Entry kinds, as written.
const KIND_RECEIVED: u8 = 0;
const KIND_SENT: u8 = 1;
const KIND_DELIVERED: u8 = 2;
const KIND_QUEUED: u8 = 3;
/// Entry flags.
const FLAG_CRC_FAILED: u8 = 0x01;
const FLAG_ENCRYPTED: u8 = 0x02;
/// Header flags.
const HEAD_COMPRESSION: u8 = 0x01;
const HEAD_ENDED: u8 = 0x02;
const HEAD_BY_PEER: u8 = 0x04;
const HEAD_KEYED: u8 = 0x08;

/// Whether a session that ended with `reason` ended abnormally, so that its recording is kept:
/// anything but a clean close. Clean are [`DisconnectReason::None`],
/// [`DisconnectReason::Application`], [`DisconnectReason::ApplicationReleased`],
/// [`DisconnectReason::OtherSideTerminated`] and [`DisconnectReason::ManagerDeleted`] (a host
/// shutting down), whichever side sent them. Abnormal are the timeouts, unacknowledged data,
/// a corrupt packet, a refusal, and any other reason an application closes with (its own
/// error).
pub fn ends_abnormally(reason: DisconnectReason) -> bool {
    !matches!(
        reason,
        DisconnectReason::None
            | DisconnectReason::Application
            | DisconnectReason::ApplicationReleased
            | DisconnectReason::OtherSideTerminated
            | DisconnectReason::ManagerDeleted
    )
}

/// The flight recorder's settings (see the [module](self)): off by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecordingConfig {
    every_session: bool,
    session_budget: usize,
    endpoint_budget: usize,
}

impl Default for RecordingConfig {
    fn default() -> Self {
        Self {
            every_session: false,
            session_budget: 64 * 1024,
            endpoint_budget: 64 * 1024 * 1024,
        }
    }
}

impl RecordingConfig {
    /// The defaults: no session recorded unless the host asks
    /// ([`Endpoint::set_recording`](crate::Endpoint::set_recording)), 64 KiB per session,
    /// 64 MiB per endpoint.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records every session from its start (a server's from its first valid packet: a
    /// half-open session records nothing, so a flood of SessionRequests spends no budget).
    #[must_use]
    pub fn with_every_session(mut self, on: bool) -> Self {
        self.every_session = on;
        self
    }

    /// The most bytes one session's recording holds, half each way, in whole chunks of
    /// [`CHUNK_SIZE`]: at least one chunk each way (8 KiB).
    #[must_use]
    pub fn with_session_budget(mut self, bytes: usize) -> Self {
        self.session_budget = bytes;
        self
    }

    /// The most bytes the recordings of one endpoint hold together, in whole chunks. Below two
    /// chunks nothing is recorded.
    #[must_use]
    pub fn with_endpoint_budget(mut self, bytes: usize) -> Self {
        self.endpoint_budget = bytes;
        self
    }

    /// Whether every session is recorded.
    pub fn every_session(&self) -> bool {
        self.every_session
    }

    /// The per-session budget, bytes.
    pub fn session_budget(&self) -> usize {
        self.session_budget
    }

    /// The endpoint's budget, bytes.
    pub fn endpoint_budget(&self) -> usize {
        self.endpoint_budget
    }

    /// Chunks one direction of one session may hold.
    fn chunks_per_direction(&self) -> usize {
        (self.session_budget / 2 / CHUNK_SIZE).max(1)
    }

    /// Chunks the pool may hold.
    fn max_chunks(&self) -> usize {
        let chunks = self.endpoint_budget / CHUNK_SIZE;
        if chunks < 2 { 0 } else { chunks }
    }
}

/// The flight recorder's counters, endpoint-wide.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecorderStats {
    /// Sessions being recorded now.
    pub recording: usize,
    /// Recordings of sessions that ended abnormally, waiting to be taken.
    pub ended: usize,
    /// Bytes of chunks the pool has allocated (it never gives them back).
    pub pool_bytes: usize,
    /// Entries recorded.
    pub entries: u64,
    /// Entries dropped to make room (the oldest first), or because the pool had no chunk.
    pub dropped: u64,
    /// Recordings taken by the host.
    pub taken: u64,
}

/// What one entry of a recording is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Recorded {
    /// A datagram from the peer, as it arrived.
    Received {
        /// Whether the session dropped it because its CRC failed.
        crc_failed: bool,
    },
    /// A datagram to the peer, as sent.
    Sent,
    /// A message handed to the application.
    Delivered {
        /// Its channel ([`Channel::ZERO`] for unreliable and ordered ones).
        channel: Channel,
        /// How it travelled.
        kind: Delivery,
        /// Whether it travelled encrypted (RC4 was on for reliable data).
        encrypted: bool,
    },
    /// A message the application queued.
    Queued {
        /// Its channel.
        channel: Channel,
        /// How it travels.
        kind: Delivery,
        /// Whether it travels encrypted.
        encrypted: bool,
    },
}

/// One entry of a [`Recording`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordedEntry<'a> {
    /// Since the recording's start ([`Recording::start`]).
    pub at: Duration,
    /// What it is.
    pub what: Recorded,
    /// Its bytes: all of them, or the first ones when it was longer than a chunk.
    pub data: &'a [u8],
    /// Its real length.
    pub len: usize,
}

/// One session's recording, taken from an [`Endpoint`](crate::Endpoint) (see the
/// [module](self)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recording<A = SocketAddr> {
    remote: A,
    start: Instant,
    bytes: Vec<u8>,
}

impl<A: Copy> Recording<A> {
    /// The peer's address.
    pub fn remote(&self) -> A {
        self.remote
    }

    /// The instant the entries' times count from.
    pub fn start(&self) -> Instant {
        self.start
    }

    /// The self-contained form `soe_dissect::recording` reads (see the [module](self)).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The same, owned.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// Which side this endpoint was.
    pub fn side(&self) -> Side {
        if byte(&self.bytes, 5) == 1 {
            Side::Server
        } else {
            Side::Client
        }
    }

    /// The session id.
    pub fn session_id(&self) -> u32 {
        u32_at(&self.bytes, 8)
    }

    /// How the session ended (the reason, and whether the peer ended it), when it had when the
    /// recording was taken.
    pub fn end(&self) -> Option<(DisconnectReason, bool)> {
        let flags = byte(&self.bytes, 7);
        (flags & HEAD_ENDED != 0).then(|| {
            let code = u16::from_le_bytes([byte(&self.bytes, 20), byte(&self.bytes, 21)]);
            (DisconnectReason::from_u16(code), flags & HEAD_BY_PEER != 0)
        })
    }

    /// Entries the budget dropped before the oldest one kept.
    pub fn dropped(&self) -> u64 {
        u64::from(u32_at(&self.bytes, 32)) | (u64::from(u32_at(&self.bytes, 36)) << 32)
    }

    /// The entries, oldest first.
    pub fn entries(&self) -> impl Iterator<Item = RecordedEntry<'_>> + '_ {
        let name = usize::from(u16::from_le_bytes([
            byte(&self.bytes, 22),
            byte(&self.bytes, 23),
        ]));
        let mut rest = self.bytes.get(HEADER + name..).unwrap_or_default();
        std::iter::from_fn(move || {
            let (entry, next) = parse_entry(rest)?;
            rest = next;
            Some(entry)
        })
    }
}

/// One byte of `b`, 0 past its end.
fn byte(b: &[u8], at: usize) -> u8 {
    b.get(at).copied().unwrap_or(0)
}

/// The little-endian u32 at `at`, 0 past the end.
fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u32::from_le_bytes)
}

/// The little-endian u64 at `at`, 0 past the end.
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from(u32_at(b, at)) | (u64::from(u32_at(b, at + 4)) << 32)
}

/// The entry at the start of `b`, and what follows it.
fn parse_entry(b: &[u8]) -> Option<(RecordedEntry<'_>, &[u8])> {
    let head = b.get(..ENTRY_HEADER)?;
    let kept = u32_at(head, 8) as usize;
    let data = b.get(ENTRY_HEADER..ENTRY_HEADER + kept)?;
    let channel = Channel::new(head[17]).unwrap_or(Channel::ZERO);
    let kind = match head[18] {
        1 => Delivery::Unreliable,
        2 => Delivery::Ordered,
        _ => Delivery::Reliable,
    };
    let encrypted = head[19] & FLAG_ENCRYPTED != 0;
    let what = match head[16] {
        KIND_RECEIVED => Recorded::Received {
            crc_failed: head[19] & FLAG_CRC_FAILED != 0,
        },
        KIND_SENT => Recorded::Sent,
        KIND_DELIVERED => Recorded::Delivered {
            channel,
            kind,
            encrypted,
        },
        _ => Recorded::Queued {
            channel,
            kind,
            encrypted,
        },
    };
    let entry = RecordedEntry {
        at: Duration::from_micros(u64_at(head, 0)),
        what,
        data,
        len: u32_at(head, 12) as usize,
    };
    Some((entry, b.get(ENTRY_HEADER + kept..).unwrap_or_default()))
}

/// What a recording says of its session, beside the entries.
#[derive(Debug, Clone)]
pub(crate) struct Meta {
    side: Side,
    session_id: u32,
    crc_seed: u32,
    crc_length: u8,
    compression: bool,
    udp_length: u32,
    keyed: bool,
    name: Box<[u8]>,
}

impl Meta {
    /// What `session` says of itself now.
    pub(crate) fn of(session: &Session) -> Self {
        let framing = session.framing();
        Self {
            side: session.side(),
            session_id: session.session_id(),
            crc_seed: session.crc_seed(),
            crc_length: framing.map_or(0, |f| f.crc_length.get() as u8),
            compression: framing.is_some_and(|f| f.compression),
            udp_length: session.remote_udp_length(),
            keyed: session.config().encryption_key().is_some(),
            name: session.config().application_protocol().into(),
        }
    }
}

/// How a kept recording's session ended.
#[derive(Debug)]
struct Ended<A> {
    meta: Meta,
    remote: A,
    reason: DisconnectReason,
    by_peer: bool,
    at: Instant,
}

/// One chunk of the pool.
#[derive(Debug)]
struct Chunk {
    data: Box<[u8]>,
    /// The track holding it, or [`FREE`].
    track: u32,
    /// Its direction: 0 in, 1 out.
    dir: u8,
    used: u32,
    entries: u32,
    /// When it was last handed out: its place in the pool's age order.
    stamp: u64,
}

/// One session's recording in the pool.
#[derive(Debug)]
struct Track<A> {
    key: u32,
    generation: u32,
    start: Instant,
    /// Its chunks each way, oldest first.
    lists: [VecDeque<u32>; 2],
    dropped: u64,
    /// Set once its session ended abnormally and the recording waits to be taken.
    ended: Option<Box<Ended<A>>>,
}

/// The pool of chunks and the recordings in it (see the [module](self)). One per endpoint.
#[derive(Debug)]
pub(crate) struct Recorder<A> {
    config: RecordingConfig,
    per_dir: usize,
    max_chunks: usize,
    chunks: Vec<Chunk>,
    free: Vec<u32>,
    /// Chunks in the order they were handed out, with their stamp then (an entry whose stamp
    /// no longer matches is stale and skipped).
    order: VecDeque<(u32, u64)>,
    stamp: u64,
    tracks: Slab<Track<A>>,
    /// Per session slab key: its generation and its track plus one (0: not recorded).
    by_key: Vec<(u32, u32)>,
    /// Tracks of ended sessions, oldest first.
    ended: VecDeque<u32>,
    /// The latest `now` seen.
    clock: Option<Instant>,
    stats: RecorderStats,
}

impl<A: Copy> Recorder<A> {
    /// A recorder with nothing recorded and no chunk allocated.
    pub(crate) fn new(config: RecordingConfig) -> Self {
        Self {
            config,
            per_dir: config.chunks_per_direction(),
            max_chunks: config.max_chunks(),
            chunks: Vec::new(),
            free: Vec::new(),
            order: VecDeque::new(),
            stamp: 0,
            tracks: Slab::new(),
            by_key: Vec::new(),
            ended: VecDeque::new(),
            clock: None,
            stats: RecorderStats::default(),
        }
    }

    /// The counters.
    pub(crate) fn stats(&self) -> RecorderStats {
        RecorderStats {
            recording: self.tracks.len() - self.ended.len(),
            ended: self.ended.len(),
            pool_bytes: self.chunks.len() * CHUNK_SIZE,
            ..self.stats
        }
    }

    /// The latest `now` seen.
    pub(crate) fn clock(&self) -> Option<Instant> {
        self.clock
    }

    /// Notes the time of an endpoint call (the time of the entries that come without one).
    #[inline]
    pub(crate) fn tick(&mut self, now: Instant) {
        self.clock = Some(self.clock.map_or(now, |c| c.max(now)));
    }

    /// The track recording session `key` of `generation`.
    #[inline]
    fn track_of(&self, key: usize, generation: u32) -> Option<u32> {
        match self.by_key.get(key) {
            Some(&(g, t)) if g == generation && t != 0 => Some(t - 1),
            _ => None,
        }
    }

    /// Whether session `key` of `generation` is recorded.
    pub(crate) fn is_recording(&self, key: usize, generation: u32) -> bool {
        self.track_of(key, generation).is_some()
    }

    /// Starts recording a session (nothing when it is already); `false` when the endpoint's
    /// budget is under two chunks.
    pub(crate) fn start(&mut self, key: usize, generation: u32, now: Instant) -> bool {
        if self.max_chunks == 0 {
            return false;
        }
        if self.is_recording(key, generation) {
            return true;
        }
        self.tick(now);
        let (Ok(k), Ok(t)) = (
            u32::try_from(key),
            u32::try_from(self.tracks.vacant_key() + 1),
        ) else {
            return false;
        };
        self.tracks.insert(Track {
            key: k,
            generation,
            start: now,
            lists: [VecDeque::new(), VecDeque::new()],
            dropped: 0,
            ended: None,
        });
        if self.by_key.len() <= key {
            self.by_key.resize(key + 1, (0, 0));
        }
        self.by_key[key] = (generation, t);
        true
    }

    /// Starts recording a session when every session is recorded (at the latest `now` seen).
    pub(crate) fn start_every(&mut self, key: usize, generation: u32) {
        if let (true, Some(now)) = (self.config.every_session, self.clock) {
            self.start(key, generation, now);
        }
    }

    /// Stops recording a session and forgets what it recorded.
    pub(crate) fn stop(&mut self, key: usize, generation: u32) {
        if let Some(t) = self.track_of(key, generation) {
            self.by_key[key] = (0, 0);
            self.drop_track(t);
        }
    }

    /// A session's slab entry was freed: whatever it still recorded goes.
    pub(crate) fn reaped(&mut self, key: usize) {
        if let Some(&(generation, _)) = self.by_key.get(key) {
            self.stop(key, generation);
        }
    }

    /// Records a datagram from the peer; `crc_failed`: the session dropped it.
    #[inline]
    pub(crate) fn received(
        &mut self,
        key: usize,
        generation: u32,
        now: Instant,
        datagram: &[u8],
        crc_failed: bool,
    ) {
        if let Some(t) = self.track_of(key, generation) {
            let flags = if crc_failed { FLAG_CRC_FAILED } else { 0 };
            self.push(t, 0, now, [KIND_RECEIVED, 0, 0, flags], datagram);
        }
    }

    /// Records a datagram sent to the peer.
    pub(crate) fn sent(&mut self, key: usize, generation: u32, now: Instant, datagram: &[u8]) {
        if let Some(t) = self.track_of(key, generation) {
            self.push(t, 1, now, [KIND_SENT, 0, 0, 0], datagram);
        }
    }

    /// Records a message: `what` is [`Recorded::Delivered`] or [`Recorded::Queued`].
    pub(crate) fn message(&mut self, key: usize, generation: u32, what: Recorded, data: &[u8]) {
        let (Some(t), Some(now)) = (self.track_of(key, generation), self.clock) else {
            return;
        };
        let (outbound, channel, kind, encrypted) = match what {
            Recorded::Delivered {
                channel,
                kind,
                encrypted,
            } => (false, channel, kind, encrypted),
            Recorded::Queued {
                channel,
                kind,
                encrypted,
            } => (true, channel, kind, encrypted),
            Recorded::Received { .. } | Recorded::Sent => return,
        };
        let delivery = match kind {
            Delivery::Reliable => 0,
            Delivery::Unreliable => 1,
            Delivery::Ordered => 2,
        };
        let encrypted = encrypted && kind == Delivery::Reliable;
        let head = [
            if outbound {
                KIND_QUEUED
            } else {
                KIND_DELIVERED
            },
            channel.index() as u8,
            delivery,
            if encrypted { FLAG_ENCRYPTED } else { 0 },
        ];
        self.push(t, usize::from(outbound), now, head, data);
    }

    /// A recorded session ended: its recording is kept for the host when the end was abnormal
    /// ([`ends_abnormally`]), dropped otherwise.
    pub(crate) fn closed(
        &mut self,
        key: usize,
        generation: u32,
        session: &Session,
        remote: A,
        reason: DisconnectReason,
        by_peer: bool,
    ) {
        let Some(t) = self.track_of(key, generation) else {
            return;
        };
        self.by_key[key] = (0, 0);
        if !ends_abnormally(reason) {
            self.drop_track(t);
            return;
        }
        let at = self.clock.unwrap_or(self.tracks[t as usize].start);
        self.tracks[t as usize].ended = Some(Box::new(Ended {
            meta: Meta::of(session),
            remote,
            reason,
            by_peer,
            at,
        }));
        self.ended.push_back(t);
        if self.ended.len() > MAX_ENDED {
            if let Some(old) = self.ended.pop_front() {
                self.drop_track(old);
            }
        }
    }

    /// Takes the recording of live session `key` (it goes on recording, from empty), or the
    /// kept one of an ended session.
    pub(crate) fn take(
        &mut self,
        key: usize,
        generation: u32,
        live: Option<(&Session, A)>,
    ) -> Option<Recording<A>> {
        if let (Some(t), Some((session, remote))) = (self.track_of(key, generation), live) {
            let recording = self.encode(t, &Meta::of(session), remote, None);
            let track = &mut self.tracks[t as usize];
            let chunks: Vec<u32> = track.lists.iter_mut().flat_map(|l| l.drain(..)).collect();
            track.dropped = 0;
            track.start = self.clock.unwrap_or(track.start);
            for id in chunks {
                self.free_chunk(id);
            }
            self.stats.taken += 1;
            return Some(recording);
        }
        let at = self.ended.iter().position(|&t| {
            let track = &self.tracks[t as usize];
            track.key as usize == key && track.generation == generation
        })?;
        let t = self.ended.remove(at)?;
        self.take_ended(t)
    }

    /// Takes the oldest kept recording of an ended session, with its session's key and
    /// generation.
    pub(crate) fn poll_ended(&mut self) -> Option<(usize, u32, Recording<A>)> {
        loop {
            let t = self.ended.pop_front()?;
            let (key, generation) = {
                let track = self.tracks.get(t as usize)?;
                (track.key as usize, track.generation)
            };
            if let Some(recording) = self.take_ended(t) {
                return Some((key, generation, recording));
            }
        }
    }

    /// Encodes ended track `t` (out of `ended` already) and drops it.
    fn take_ended(&mut self, t: u32) -> Option<Recording<A>> {
        let ended = self.tracks.get_mut(t as usize)?.ended.take();
        let recording =
            ended.map(|e| self.encode(t, &e.meta, e.remote, Some((e.reason, e.by_peer, e.at))));
        self.drop_track(t);
        if recording.is_some() {
            self.stats.taken += 1;
        }
        recording
    }

    /// Frees track `t` and its chunks (its `ended` entry, if any, must be gone already or
    /// is removed here).
    fn drop_track(&mut self, t: u32) {
        if !self.tracks.contains(t as usize) {
            return;
        }
        let track = self.tracks.remove(t as usize);
        if track.ended.is_some() {
            self.ended.retain(|&e| e != t);
        }
        for id in track.lists.into_iter().flatten() {
            self.free_chunk(id);
        }
    }

    /// Puts chunk `id` back in the free list.
    fn free_chunk(&mut self, id: u32) {
        if let Some(c) = self.chunks.get_mut(id as usize) {
            c.track = FREE;
            self.free.push(id);
        }
    }

    /// Appends one entry to direction `dir` of track `t`.
    fn push(&mut self, t: u32, dir: usize, at: Instant, head: [u8; 4], data: &[u8]) {
        let kept = data.len().min(CHUNK_SIZE - ENTRY_HEADER);
        let need = ENTRY_HEADER + kept;
        let current = self.tracks[t as usize].lists[dir]
            .back()
            .copied()
            .filter(|&id| self.chunks[id as usize].used as usize + need <= CHUNK_SIZE);
        let Some(id) = current.or_else(|| self.chunk_for(t, dir)) else {
            self.stats.dropped += 1;
            return;
        };
        let start = self.tracks[t as usize].start;
        let micros = u64::try_from(at.saturating_duration_since(start).as_micros()).unwrap_or(0);
        let chunk = &mut self.chunks[id as usize];
        let from = chunk.used as usize;
        let Some(slot) = chunk.data.get_mut(from..from + need) else {
            return;
        };
        slot[..8].copy_from_slice(&micros.to_le_bytes());
        slot[8..12].copy_from_slice(&(kept as u32).to_le_bytes());
        slot[12..16].copy_from_slice(&u32::try_from(data.len()).unwrap_or(u32::MAX).to_le_bytes());
        slot[16..20].copy_from_slice(&head);
        slot[ENTRY_HEADER..].copy_from_slice(&data[..kept]);
        chunk.used += need as u32;
        chunk.entries += 1;
        self.stats.entries += 1;
    }

    /// A chunk for a new entry of direction `dir` of track `t`: its own oldest when it holds
    /// its share, else a free one, a new one while the pool may grow, or the pool's oldest.
    fn chunk_for(&mut self, t: u32, dir: usize) -> Option<u32> {
        let id = if self.tracks[t as usize].lists[dir].len() >= self.per_dir {
            let id = self.tracks[t as usize].lists[dir].pop_front()?;
            self.count_dropped(t, id);
            id
        } else if let Some(id) = self.free.pop() {
            id
        } else if self.chunks.len() < self.max_chunks {
            self.chunks.push(Chunk {
                data: vec![0; CHUNK_SIZE].into_boxed_slice(),
                track: FREE,
                dir: 0,
                used: 0,
                entries: 0,
                stamp: 0,
            });
            u32::try_from(self.chunks.len() - 1).ok()?
        } else {
            self.steal()?
        };
        self.stamp += 1;
        let chunk = &mut self.chunks[id as usize];
        chunk.track = t;
        chunk.dir = dir as u8;
        chunk.used = 0;
        chunk.entries = 0;
        chunk.stamp = self.stamp;
        self.order.push_back((id, self.stamp));
        self.tracks[t as usize].lists[dir].push_back(id);
        if self.order.len() > 2 * self.chunks.len() + 16 {
            let chunks = &self.chunks;
            self.order.retain(|&(id, stamp)| {
                chunks[id as usize].stamp == stamp && chunks[id as usize].track != FREE
            });
        }
        Some(id)
    }

    /// Counts the entries of chunk `id`, leaving track `t`, as dropped.
    fn count_dropped(&mut self, t: u32, id: u32) {
        let entries = u64::from(self.chunks[id as usize].entries);
        self.tracks[t as usize].dropped += entries;
        self.stats.dropped += entries;
    }

    /// Takes the pool's oldest chunk from whichever track holds it; an ended recording left
    /// with nothing goes.
    fn steal(&mut self) -> Option<u32> {
        while let Some((id, stamp)) = self.order.pop_front() {
            let chunk = &self.chunks[id as usize];
            if chunk.stamp != stamp || chunk.track == FREE {
                continue;
            }
            let (t, dir) = (chunk.track, usize::from(chunk.dir));
            self.count_dropped(t, id);
            let track = &mut self.tracks[t as usize];
            if let Some(at) = track.lists[dir].iter().position(|&c| c == id) {
                track.lists[dir].remove(at);
            }
            if track.ended.is_some() && track.lists.iter().all(VecDeque::is_empty) {
                self.ended.retain(|&e| e != t);
                self.tracks.remove(t as usize);
            }
            self.chunks[id as usize].track = FREE;
            return Some(id);
        }
        None
    }

    /// The bytes of track `t` (see the [module](self)).
    fn encode(
        &self,
        t: u32,
        meta: &Meta,
        remote: A,
        end: Option<(DisconnectReason, bool, Instant)>,
    ) -> Recording<A> {
        let track = &self.tracks[t as usize];
        let name = &meta.name[..meta.name.len().min(usize::from(u16::MAX))];
        let used: usize = track
            .lists
            .iter()
            .flatten()
            .map(|&id| self.chunks[id as usize].used as usize)
            .sum();
        let mut b = Vec::with_capacity(HEADER + name.len() + used);
        b.extend_from_slice(&RECORDING_MAGIC);
        b.push(RECORDING_VERSION);
        b.push(u8::from(meta.side == Side::Server));
        b.push(meta.crc_length);
        let mut flags = if meta.compression {
            HEAD_COMPRESSION
        } else {
            0
        };
        if meta.keyed {
            flags |= HEAD_KEYED;
        }
        if let Some((_, by_peer, _)) = end {
            flags |= HEAD_ENDED | if by_peer { HEAD_BY_PEER } else { 0 };
        }
        b.push(flags);
        b.extend_from_slice(&meta.session_id.to_le_bytes());
        b.extend_from_slice(&meta.crc_seed.to_le_bytes());
        b.extend_from_slice(&meta.udp_length.to_le_bytes());
        let (code, end_at) = end.map_or((0, Duration::ZERO), |(reason, _, at)| {
            (reason.to_u16(), at.saturating_duration_since(track.start))
        });
        b.extend_from_slice(&code.to_le_bytes());
        b.extend_from_slice(&(name.len() as u16).to_le_bytes());
        b.extend_from_slice(&u64::try_from(end_at.as_micros()).unwrap_or(0).to_le_bytes());
        b.extend_from_slice(&track.dropped.to_le_bytes());
        b.extend_from_slice(name);
        // The two directions, merged by time (in first when equal).
        let mut ins = self.entries_of(&track.lists[0]).peekable();
        let mut outs = self.entries_of(&track.lists[1]).peekable();
        loop {
            let next = match (ins.peek(), outs.peek()) {
                (Some(i), Some(o)) if u64_at(o, 0) < u64_at(i, 0) => outs.next(),
                (Some(_), _) => ins.next(),
                (None, _) => outs.next(),
            };
            match next {
                Some(entry) => b.extend_from_slice(entry),
                None => break,
            }
        }
        Recording {
            remote,
            start: track.start,
            bytes: b,
        }
    }

    /// The entries (header and data) in `list`'s chunks, oldest first.
    fn entries_of<'a>(&'a self, list: &'a VecDeque<u32>) -> impl Iterator<Item = &'a [u8]> + 'a {
        list.iter().flat_map(move |&id| {
            let chunk = &self.chunks[id as usize];
            let mut rest = chunk.data.get(..chunk.used as usize).unwrap_or_default();
            std::iter::from_fn(move || {
                let kept = u32_at(rest, 8) as usize;
                let entry = rest.get(..ENTRY_HEADER + kept)?;
                rest = &rest[entry.len()..];
                Some(entry)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::{SessionConfig, SplitMix64};

    /// A recorder of one chunk each way per session, `chunks` in all.
    fn recorder(chunks: usize) -> Recorder<u32> {
        Recorder::new(
            RecordingConfig::new()
                .with_session_budget(2 * CHUNK_SIZE)
                .with_endpoint_budget(chunks * CHUNK_SIZE),
        )
    }

    /// A client session, for the metadata of a recording.
    fn session(now: Instant) -> Session {
        Session::client(
            now,
            Arc::new(SessionConfig::new("Test_1")),
            &mut SplitMix64::new(1),
        )
    }

    /// A datagram of `len` bytes, all `tag`.
    fn datagram(tag: u8, len: usize) -> Vec<u8> {
        vec![tag; len]
    }

    /// The tags of the datagrams received in a recording.
    fn tags(r: &Recording<u32>) -> Vec<u8> {
        r.entries().map(|e| e.data[0]).collect()
    }

    #[test]
    fn the_pool_gives_the_oldest_chunk_of_any_session_to_a_new_entry() {
        let t0 = Instant::now();
        let s = session(t0);
        let mut r = recorder(3);
        for key in 0..3 {
            assert!(r.start(key, 7, t0));
        }
        // Each session fills one chunk (two entries of 2 KiB each).
        for (i, key) in [0usize, 1, 2].into_iter().enumerate() {
            let at = t0 + Duration::from_millis(i as u64);
            for _ in 0..2 {
                r.received(key, 7, at, &datagram(key as u8, 2000), false);
            }
        }
        assert_eq!(r.stats().pool_bytes, 3 * CHUNK_SIZE);
        // Session 2 now sends: the pool is full, and the oldest chunk is session 0's.
        r.sent(2, 7, t0 + Duration::from_millis(9), &datagram(9, 100));
        assert_eq!(
            r.stats().pool_bytes,
            3 * CHUNK_SIZE,
            "the pool does not grow"
        );
        assert_eq!(r.stats().dropped, 2);
        let zero = r.take(0, 7, Some((&s, 10))).unwrap();
        assert_eq!(zero.entries().count(), 0);
        assert_eq!(zero.dropped(), 2);
        let two = r.take(2, 7, Some((&s, 12))).unwrap();
        assert_eq!(tags(&two), [2, 2, 9]);
        assert_eq!(two.remote(), 12);
        // Session 1 kept everything.
        let one = r.take(1, 7, Some((&s, 11))).unwrap();
        assert_eq!((tags(&one), one.dropped()), (vec![1, 1], 0));
        // A handle of another generation names nothing.
        assert!(r.take(1, 8, Some((&s, 11))).is_none());
    }

    #[test]
    fn an_ended_recording_waits_until_the_pool_needs_its_chunks() {
        let t0 = Instant::now();
        let s = session(t0);
        let mut r = recorder(2);
        r.start(0, 1, t0);
        r.start(1, 1, t0);
        r.received(0, 1, t0, &datagram(0, 3000), false);
        r.closed(0, 1, &s, 5, DisconnectReason::Timeout, false);
        r.received(1, 1, t0, &datagram(1, 3000), false);
        assert_eq!(r.stats().ended, 1);
        assert_eq!(r.stats().recording, 1);
        // A clean end keeps nothing.
        r.start(2, 1, t0);
        r.closed(2, 1, &s, 6, DisconnectReason::Application, true);
        assert_eq!(r.stats().ended, 1);
        // Session 1 needs a chunk: the ended recording's, the oldest, goes with it.
        r.sent(1, 1, t0, &datagram(2, 3000));
        assert_eq!(r.stats().ended, 0);
        assert!(r.poll_ended().is_none());

        // Taken in time, it is whole, with its end.
        r.start(3, 4, t0);
        r.received(3, 4, t0 + Duration::from_secs(1), &datagram(3, 10), true);
        r.tick(t0 + Duration::from_secs(2));
        r.closed(3, 4, &s, 9, DisconnectReason::CorruptPacket, false);
        let (key, generation, rec) = r.poll_ended().unwrap();
        assert_eq!((key, generation, rec.remote()), (3, 4, 9));
        assert_eq!(rec.end(), Some((DisconnectReason::CorruptPacket, false)));
        let entry = rec.entries().next().unwrap();
        assert_eq!(entry.what, Recorded::Received { crc_failed: true });
        assert_eq!(entry.at, Duration::from_secs(1));
        assert_eq!(u64_at(rec.as_bytes(), 24), 2_000_000, "the end's time");
    }

    #[test]
    fn an_entry_longer_than_a_chunk_keeps_its_start_and_its_length() {
        let t0 = Instant::now();
        let s = session(t0);
        let mut r = recorder(4);
        r.start(0, 0, t0);
        r.tick(t0);
        let big: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        let what = Recorded::Delivered {
            channel: Channel::ZERO,
            kind: Delivery::Reliable,
            encrypted: true,
        };
        r.message(0, 0, what, &big);
        let rec = r.take(0, 0, Some((&s, 1))).unwrap();
        let entry = rec.entries().next().unwrap();
        assert_eq!(entry.len, 10_000);
        assert_eq!(entry.data, &big[..CHUNK_SIZE - ENTRY_HEADER]);
        assert_eq!(
            entry.what,
            Recorded::Delivered {
                channel: Channel::ZERO,
                kind: Delivery::Reliable,
                encrypted: true
            }
        );
    }

    #[test]
    fn a_budget_under_two_chunks_records_nothing() {
        let t0 = Instant::now();
        let mut r = recorder(1);
        assert!(!r.start(0, 0, t0));
        r.received(0, 0, t0, &[1, 2, 3], false);
        assert_eq!(r.stats().entries, 0);
    }

    #[test]
    fn clean_and_abnormal_ends() {
        assert!(ends_abnormally(DisconnectReason::Timeout));
        assert!(ends_abnormally(DisconnectReason::UnacknowledgedTimeout));
        assert!(ends_abnormally(DisconnectReason::CorruptPacket));
        assert!(ends_abnormally(DisconnectReason::Other(99)));
        assert!(!ends_abnormally(DisconnectReason::Application));
        assert!(!ends_abnormally(DisconnectReason::None));
    }
}
