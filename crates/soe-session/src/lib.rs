//! Sans-I/O sessions and endpoint of the SOE protocol (version 3), in the style of quinn-proto.
//!
//! Nothing here owns a socket, reads a clock or sleeps: every call that depends on time takes
//! `now`, datagrams go in through `handle_datagram` and come out of `poll_transmit` into the
//! caller's buffer, and the caller sleeps until `poll_timeout`.
//!
//! * [`Session`]: one side of one session: the handshake, framing (CRC, compression), the four
//!   reliable channels of [`soe_reliable`], unreliable and ordered data, heartbeats, NetStatus,
//!   graceful close.
//! * [`Endpoint`]: many sessions behind one socket: routing by remote address, a timer set
//!   ordered by deadline, a queue of sessions with something to send, and the limits that keep
//!   strangers from spending its memory.
//!
//! # Driving order
//!
//! For an [`Endpoint`] (a [`Session`] is driven the same way, without the addresses):
//!
//! 1. For each datagram received: [`Endpoint::handle_datagram`]`(now, from, bytes)`.
//! 2. If the deadline passed: [`Endpoint::handle_timeout`]`(now)` (an early call is a no-op).
//! 3. Application calls as needed: [`Endpoint::send`], [`Endpoint::connect`],
//!    [`Endpoint::close`].
//! 4. [`Endpoint::poll_transmit`]`(now, &mut buf)` until `None`, sending each datagram.
//! 5. [`Endpoint::poll_event`] until `None`. Take messages promptly: a channel holds at most
//!    `max_queued_messages` undelivered messages and stops acknowledging beyond that.
//! 6. Sleep until [`Endpoint::poll_timeout`] or the next datagram, then start again.
//!
//! Every call that touches a session marks it; the `None` that ends step 4 asks each marked
//! session for its deadline once, and files it in the timer set only when that deadline moved
//! earlier (a later one waits lazily, as in s2n-quic's timer list). `handle_timeout` visits only
//! sessions that are due and `poll_transmit` only sessions that may have something to send, so
//! the cost of a wake-up does not grow with the number of idle sessions. `poll_timeout` is exact
//! at step 6; asked before step 4 ends it also asks the marked sessions, so it is never late.
//!
//! A client and a server [`Session`] talking directly (an [`Endpoint`] adds the routing):
//!
//! ```
//! use std::{sync::Arc, time::Instant};
//! use bytes::Bytes;
//! use soe_session::{Channel, Event, Session, SessionConfig, SplitMix64};
//! use soe_wire::Packet;
//!
//! let config = Arc::new(SessionConfig::new("MyGame_1"));
//! let now = Instant::now();
//! let mut client = Session::client(now, config.clone(), &mut SplitMix64::new(1));
//! client.send(Channel::ZERO, Bytes::from_static(b"hello")).unwrap(); // sent once connected
//!
//! // The first datagram is the SessionRequest; a server endpoint would route it by address.
//! let mut buf = Vec::new();
//! let len = client.poll_transmit(now, &mut buf).unwrap();
//! let Ok(Packet::SessionRequest(request)) = Packet::decode(&buf[..len]) else { panic!() };
//! let mut server = Session::server(now, config, &request, 0x1234_5678).unwrap();
//!
//! for _ in 0..3 {
//!     while let Some(n) = server.poll_transmit(now, &mut buf) {
//!         client.handle_datagram(now, &buf[..n]);
//!     }
//!     while let Some(n) = client.poll_transmit(now, &mut buf) {
//!         server.handle_datagram(now, &buf[..n]);
//!     }
//! }
//! assert_eq!(client.poll_event(), Some(Event::Connected));
//! assert_eq!(server.poll_event(), Some(Event::Accepted));
//! assert!(matches!(server.poll_event(), Some(Event::Message { data, .. }) if data == "hello"));
//! assert_eq!(client.crc_seed(), 0x1234_5678);
//! ```
//!
//! # Handshake and refusal on the wire
//!
//! The client sends SessionRequest (protocol version 3, a random session id, its udp_length and
//! the application protocol name) every `retry_interval` (1 s) until answered or until its
//! `connect_timeout` (10 s) ends with [`Event::Closed`] `{ reason: ConnectFail }`. The server
//! answers with SessionResponse: the session id, a CRC seed, its CRC length, compression and
//! udp_length. Each side then sends at most `min(peer's udp_length, own udp_length)` bytes per
//! datagram. The client follows up at once with a NetStatusRequest (repeated until the server is
//! heard), which completes the server's side ([`Event::Accepted`]).
//!
//! A mismatched protocol version or application protocol name is refused with Disconnect
//! `ProtocolMismatch` (a full endpoint with `ConnectionRefused`). Disconnect is a contextual
//! packet but the client has no CRC seed yet, so the refusal is sent **without compression flag
//! and with a CRC trailer of length 0**: exactly `00 05 | session_id | reason` (8 bytes, never
//! more than the request it answers). Our client, while it waits for its SessionResponse,
//! accepts a Disconnect in that form when it carries its own session id, and ends with
//! [`Event::Closed`] `{ reason, by_peer: true }`. Other clients drop it as a CRC failure and
//! reach their connect timeout, which is what they would do without it.
//!
//! # Flood defence (server)
//!
//! A SessionRequest costs the server a *half-open* session until the client's first valid
//! packet arrives. Spoofed requests never complete, so:
//!
//! * Half-open sessions are capped (`max_half_open`, 1024) and expire after the longer of
//!   `connect_timeout` and `idle_timeout` (30 s);
//!   when the cap is reached the oldest is dropped for the new one. They surface no event.
//! * Established sessions are capped (`max_sessions`, 10,000); past it requests are refused,
//!   and a half-open session is refused (not promoted) whatever datagram would complete it.
//! * Per-source limits hold at several prefix lengths at once ([`SourceLevel`]): a *host*
//!   (every port of one IPv4 address, every address of one IPv6 /64), an IPv6 *site* (/56) and
//!   a *network* (an IPv4 /24, an IPv6 /48), never an address ([`PeerAddress`]); an
//!   IPv4-mapped IPv6 address, or one inside a NAT64 translator prefix
//!   ([`EndpointConfig::with_nat64_prefixes`], `64:ff9b::/96` by default), counts as its IPv4.
//!   At each level a source has its own SessionRequest rate (30, 120 and 600 a minute) and
//!   its own cap on the sessions, established and half-open, it holds (1 %, 2 % and 5 % of
//!   `max_sessions`): a host that sends from 50,000 ports has one share, and one network,
//!   over however many hosts, holds at most 5 % of the endpoint, so a /48 (free from a tunnel
//!   broker, or 6to4's `2002:V4::/48`) cannot lock everyone else out. The request buckets sit
//!   in a bounded table (4,096 sources a level) that remembers what a forgotten source spent,
//!   so forgetting never gives more than waiting.
//! * Replies sent without a session (UnknownSender, refusals) share one budget (200 per
//!   second) and one bounded queue, and each host has a share of its own (4 per second, in a
//!   fixed table of 1,024 buckets under a keyed hash), so a flood from a few sources cannot
//!   use up everyone's replies, nor aim at another source's share.
//! * Loopback sources (`127.0.0.0/8`, `::1`, `::ffff:127.0.0.0/104`: this machine) are exempt
//!   from the per-source limits unless [`EndpointConfig::with_limit_loopback`]; the exemption
//!   trusts the kernel to drop forged loopback sources, which Linux does unless
//!   `route_localnet` is on.
//! * Shards of one server (endpoints on one port with `SO_REUSEPORT`) given one
//!   [`ShardGroup`] share the secret and every per-source limit; a cookie is honoured only by
//!   the shard that issued it.
//! * CRC seeds are **cookies**: a keyed hash (SipHash under a 128-bit secret drawn once from
//!   the OS generator, and from nothing else: without it [`Endpoint::try_new`] fails) of a
//!   30-second epoch, the shard, the client's address and its session id. A real
//!   client whose half-open state was evicted by a fast flood is not lost: its first packet
//!   draws an UnknownSender, it answers with RemapConnection (session id, CRC seed), and the
//!   server, finding no live session, recognises its own cookie (this epoch or the last) and
//!   rebuilds the session without having kept any state for it. Its udp_length is then assumed
//!   to be 512 (what every known peer announces), capped by the server's.
//!
//! So memory stays bounded by `max_sessions + max_half_open` sessions plus the fixed tables,
//! whatever the request rate, and a real client still gets in during the flood.
//!
//! # Other behaviour
//!
//! * Heartbeat: a client sends one after `heartbeat_interval` (10 s) of silence from the peer
//!   and retries every `retry_interval` while nothing is heard from the peer (any authentic
//!   packet counts, not only the answer). A heartbeat that does not answer ours is answered;
//!   ours are counted, so that with a round trip longer than `retry_interval` the late
//!   answers of the resent ones are taken as answers too, and two sides never answer each
//!   other's answers. The count holds only what can still be answered: Heartbeats sent within
//!   the last 8 s (the answer window: paths up to 6 s round trip), so a probe whose answer was
//!   lost never swallows the peer's later keep-alive. `idle_timeout` (30 s) of silence ends
//!   the session with `Timeout`.
//! * A datagram whose CRC fails is dropped and counted, never fatal; with
//!   `accept_crcless_quirks` (by default on client sessions only) a Heartbeat or selective
//!   Acknowledge with no CRC at all is accepted, as h1z1-server sends them; that exact shape
//!   is read as the quirk even when its last bytes happen to pass as a CRC. A selective ack is
//!   only a hint: the data it names stays queued until a cumulative ack covers it. A packet
//!   whose CRC holds but which does not parse ends the session with `CorruptPacket` (and a
//!   Disconnect saying so).
//! * Graceful close flushes queued reliable data (bounded by `close_timeout`, 5 s), then sends
//!   the Disconnect `disconnect_repeats` (5) times `disconnect_interval` (100 ms) apart, and
//!   repeats it to any packet the peer still sends meanwhile.
//! * Packets of 255 bytes or less are packed into MultiPackets up to the datagram size; a lone
//!   packet goes unwrapped. Unreliable messages (first byte non-zero) travel as bare datagrams.
//! * RemapConnection moves a live session to a new address only when both the session id and
//!   the CRC seed match, at most once per `remap_interval` (1 s) per session, and within the
//!   per-source request limit of the new address. A client told UnknownSender by its server
//!   sends RemapConnection (once per `retry_interval`, ten times at most, then
//!   `UnreachableConnection`). A client whose Heartbeat has gone unanswered for twice the
//!   round trip it knows of (at least a `retry_interval`, at most the 8 s answer window)
//!   sends one too, unprompted, with each retry of the Heartbeat: its NAT may have rebound and
//!   the UnknownSender been lost, or withheld by the server's reply budget during a flood. A RemapConnection from the address the server already knows for the
//!   session changes nothing there.
//! * A second SessionRequest from the address of a live session with the same session id is
//!   answered again. One with another session id (a client restarted on the same address, or
//!   anyone spoofing that address) does not end an established session at once: the server
//!   sends the old session a Heartbeat and ignores the request; a later request replaces the
//!   old session (`NewConnectionAttempt`, `by_peer: true`) only once that Heartbeat has gone
//!   unanswered, with nothing heard from the peer, for `replace_after_silence` (2 s). A live
//!   client is never replaced by a spoofer; a restarted one gets in about 2 to 3 s later. A
//!   closed or half-open session is replaced at once.
//! * Closed server sessions are remembered for the cookie lifetime (60 s) so that their cookie
//!   cannot rebuild them; past `max_tombstones` (4,096) closed within that time, no session is
//!   rebuilt from a cookie until the dropped entries would have expired.
//!
//! # Logging
//!
//! An [`Endpoint`] reports what an operator needs through [`tracing`] (target
//! `soe_session::endpoint`), with the remote address, the session id and the reason as fields:
//!
//! * INFO: a session accepted, connected or closed (with its reason and `by_peer`), as
//!   [`Endpoint::poll_event`] hands the event over; a session remapped to a new address,
//!   recovered from its cookie, or replaced by a new SessionRequest (each at most once a second,
//!   with a count); a SessionRequest refused for a protocol mismatch.
//! * WARN: a request refused because the endpoint is at `max_sessions`; CRC rejects of a
//!   session; a resend burst (16 or more reliable packets resent by one session between two of
//!   its timer wake-ups); the flood limits (per-source request limit, stateless replies dropped,
//!   half-open sessions evicted, RemapConnections dropped by the remap limits).
//! * DEBUG: a half-open session that expired.
//!
//! Everything a peer or a stranger can trigger at will (refusals, CRC rejects, flood limits) is
//! logged at most once a second per kind (per session for CRC rejects), the event counting the
//! occurrences since the previous one. Without a subscriber, or with the level filtered out,
//! an event costs a cached check and formats nothing. A bare [`Session`] logs nothing.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(not(test), warn(clippy::unwrap_used))]
#![warn(clippy::too_many_lines)] // the limit is in clippy.toml

// The README's examples run as doc tests, so the published front page stays true to the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod address;
mod config;
mod deadlines;
mod endpoint;
mod error;
mod event;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod keepalive;
mod limits;
mod preset;
pub mod recorder;
mod rng;
mod session;
mod stats;
mod timer;

pub use address::PeerAddress;
pub use config::{EndpointConfig, MAX_UDP_LENGTH, MIN_UDP_LENGTH, SessionConfig};
pub use endpoint::{Endpoint, EndpointStats, SessionHandle, Transmit};
pub use error::{ConfigError, ConnectError, EndpointError, SendError};
pub use event::{Delivery, Event};
pub use limits::{MAX_SOURCE_LEVELS, ShardGroup, SourceLevel, WeakShardGroup};
pub use preset::{Preset, UnknownPreset};
pub use recorder::{Recording, RecordingConfig};
#[cfg(any(test, feature = "testing"))]
pub use rng::fail_os_random;
pub use rng::{KeyedRandom, RandomSource, SplitMix64, os_key};
pub use session::{Session, Side, State, check_request, encode_refusal};
pub use stats::SessionStats;

pub use soe_reliable::{ReceiveBacklog, ReliableConfig};
pub use soe_wire::{Channel, CrcLength, DisconnectReason};
