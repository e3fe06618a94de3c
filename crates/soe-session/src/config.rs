//! Session and endpoint configuration, with safe defaults.
//!
//! Fields are private so that a config is valid by construction: numeric setters clamp to the
//! documented range, and the two setters that can fail (RC4 key, reliable config) return a
//! [`ConfigError`].

use std::net::Ipv6Addr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use soe_reliable::ReliableConfig;
use soe_wire::CrcLength;

use crate::address::NAT64_LENGTHS;
use crate::recorder::RecordingConfig;
use crate::{ConfigError, ShardGroup, SourceLevel};

/// The default levels of the per-source limits: hosts (an IPv4 address, an IPv6 /64), IPv6
/// sites (a /56, what an ISP delegates to one subscriber) and networks (an IPv4 /24, the
/// smallest block routed on the Internet; an IPv6 /48, what a tunnel broker or 6to4 hands out
/// for free).
fn default_source_levels() -> Vec<SourceLevel> {
    vec![
        SourceLevel::new(Some(32), Some(64))
            .with_requests_per_minute(30)
            .with_session_percent(1),
        SourceLevel::new(None, Some(56))
            .with_requests_per_minute(120)
            .with_session_percent(2),
        SourceLevel::new(Some(24), Some(48))
            .with_requests_per_minute(600)
            .with_session_percent(5),
    ]
}

/// The smallest `udp_length` a session announces or accepts from a peer: below it a datagram
/// cannot carry a reliable fragment with its framing.
pub const MIN_UDP_LENGTH: u32 = 64;
/// The largest `udp_length` (the largest UDP payload over IPv4).
pub const MAX_UDP_LENGTH: u32 = 65_507;

/// How one session behaves (wrap it in an `Arc`; many sessions share one).
///
/// Client sessions use the handshake fields (connect timeout, retry interval) and adopt what the
/// server's SessionResponse announces for CRC length and compression. Server sessions announce
/// their own [`crc_length`](Self::crc_length) and [`compression`](Self::compression).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SessionConfig {
    application_protocol: Box<[u8]>,
    udp_length: u32,
    crc_length: CrcLength,
    compression: bool,
    encryption_key: Option<Bytes>,
    reliable: Arc<ReliableConfig>,
    connect_timeout: Duration,
    retry_interval: Duration,
    heartbeat_interval: Option<Duration>,
    server_heartbeats: bool,
    idle_timeout: Option<Duration>,
    net_status_interval: Option<Duration>,
    close_timeout: Duration,
    disconnect_repeats: u8,
    disconnect_interval: Duration,
    accept_crcless_quirks: Option<bool>,
    accept_libsoe_quirks: bool,
    max_queued_unreliable: usize,
    encryption_at_start: bool,
    any_application_protocol: bool,
    any_protocol_version: bool,
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            application_protocol: Box::default(),
            udp_length: 512,
            crc_length: CrcLength::TWO,
            compression: false,
            encryption_key: None,
            reliable: Arc::new(ReliableConfig::default()),
            connect_timeout: Duration::from_secs(10),
            retry_interval: Duration::from_secs(1),
            heartbeat_interval: Some(Duration::from_secs(10)),
            server_heartbeats: false,
            idle_timeout: Some(Duration::from_secs(30)),
            net_status_interval: None,
            close_timeout: Duration::from_secs(5),
            disconnect_repeats: 5,
            disconnect_interval: Duration::from_millis(100),
            accept_crcless_quirks: None,
            accept_libsoe_quirks: false,
            max_queued_unreliable: 256,
            encryption_at_start: true,
            any_application_protocol: false,
            any_protocol_version: false,
        }
    }
}

/// The longest duration a setter keeps (one year): deadlines are `now + duration`, which must not
/// overflow.
const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

fn clamp_duration(d: Duration, min: Duration) -> Duration {
    d.clamp(min, MAX_DURATION)
}

impl SessionConfig {
    /// A config with the defaults and the given application protocol name.
    pub fn new(application_protocol: impl AsRef<[u8]>) -> Self {
        Self::default().with_application_protocol(application_protocol)
    }

    /// The application protocol name (e.g. `LoginUdp_9`) sent in SessionRequest and checked by
    /// servers; both sides must use the same one. Default empty. Anything from a NUL byte on is
    /// cut off (the wire form is NUL-terminated).
    #[must_use]
    pub fn with_application_protocol(mut self, name: impl AsRef<[u8]>) -> Self {
        let name = name.as_ref();
        let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
        self.application_protocol = name.get(..end).unwrap_or_default().into();
        self
    }

    /// Whether a server accepts a SessionRequest whatever application protocol name it carries,
    /// as h1z1-server does (its login server takes `LoginUdp_9` and `LoginUdp_11` clients on one
    /// port and tells them apart by the name). An accepted session then runs with a copy of this
    /// config that carries the client's name, so
    /// [`Session::config`](crate::Session::config)`().application_protocol()` says which one it
    /// asked for (the copy is made only when the names differ). The protocol version is still
    /// checked. Clients ignore it. Default `false`: the names must match.
    #[must_use]
    pub fn with_any_application_protocol(mut self, on: bool) -> Self {
        self.any_application_protocol = on;
        self
    }

    /// Whether a server accepts a SessionRequest whatever SOE protocol version it carries, as
    /// h1z1-server does (it never reads the field, and its echo benchmark client sends 0). The
    /// session then runs SOE v3 as usual, and the SessionResponse says 3. Clients ignore it (they
    /// always check the server's version). Default `false`: a version other than 3 is refused
    /// with [`ProtocolMismatch`](crate::DisconnectReason::ProtocolMismatch).
    #[must_use]
    pub fn with_any_protocol_version(mut self, on: bool) -> Self {
        self.any_protocol_version = on;
        self
    }

    /// The largest datagram this side accepts, announced in the handshake; also the cap on what
    /// it sends (a session sends at most `min(peer's udp_length, this)`). Default 512; clamped to
    /// [`MIN_UDP_LENGTH`]..=[`MAX_UDP_LENGTH`].
    #[must_use]
    pub fn with_udp_length(mut self, udp_length: u32) -> Self {
        self.udp_length = udp_length.clamp(MIN_UDP_LENGTH, MAX_UDP_LENGTH);
        self
    }

    /// The CRC trailer length a server announces (clients adopt the server's). Default 2 bytes.
    #[must_use]
    pub fn with_crc_length(mut self, crc_length: CrcLength) -> Self {
        self.crc_length = crc_length;
        self
    }

    /// Whether a server announces compression (clients adopt the server's). With it, contextual
    /// packets carry a flag byte and bodies of 24 bytes or more are deflated when that makes them
    /// smaller. Default off.
    #[must_use]
    pub fn with_compression(mut self, compression: bool) -> Self {
        self.compression = compression;
        self
    }

    /// The RC4 key for reliable application data, both directions (the application protocol
    /// chooses it; both sides must use the same). Default none. Fails on an empty key or one
    /// longer than 256 bytes.
    pub fn with_encryption_key(mut self, key: Bytes) -> Result<Self, ConfigError> {
        soe_crypto::Rc4::new(&key).map_err(soe_reliable::ReliableError::from)?;
        self.encryption_key = Some(key);
        Ok(self)
    }

    /// Removes the RC4 key.
    #[must_use]
    pub fn without_encryption(mut self) -> Self {
        self.encryption_key = None;
        self
    }

    /// Whether a session with an [encryption key](Self::with_encryption_key) encrypts from its
    /// start (the default, `true`), or starts in plaintext until the application switches it on
    /// with `Session::set_encryption` / `Endpoint::set_encryption` (`false`: the H1Z1 gateway's
    /// way, which turns RC4 on for one session after its login request).
    #[must_use]
    pub fn with_encryption_at_start(mut self, on: bool) -> Self {
        self.encryption_at_start = on;
        self
    }

    /// The limits and timings of the reliable channels. Fails when the config does not validate.
    pub fn with_reliable(mut self, reliable: Arc<ReliableConfig>) -> Result<Self, ConfigError> {
        reliable.validate()?;
        self.reliable = reliable;
        Ok(self)
    }

    /// How long a client tries to connect before giving up with
    /// [`DisconnectReason::ConnectFail`](soe_wire::DisconnectReason::ConnectFail); on a server,
    /// how long an answered SessionRequest waits for the client's first packet (a half-open
    /// session), though never less than the idle timeout, since some clients stay silent until
    /// their first heartbeat. Default 10 s; at least 1 ms.
    #[must_use]
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = clamp_duration(timeout, Duration::from_millis(1));
        self
    }

    /// The spacing of retries: SessionRequest resends, the client's post-handshake NetStatus
    /// probe until the server answers, unanswered heartbeats, and RemapConnection attempts.
    /// Default 1 s; at least 1 ms.
    #[must_use]
    pub fn with_retry_interval(mut self, interval: Duration) -> Self {
        self.retry_interval = clamp_duration(interval, Duration::from_millis(1));
        self
    }

    /// Silence from the peer after which a heartbeat is sent (then retried every
    /// `retry_interval` while unanswered). Client sessions only, unless
    /// [`with_server_heartbeats`](Self::with_server_heartbeats). Default 10 s; `None` disables;
    /// at least 1 ms.
    ///
    /// Keep it well below the idle timeout: the heartbeats between the two are all an idle
    /// session has to prove it is alive. With the defaults (10 s, then one a second, and a 30 s
    /// idle timeout) an idle session gets 20 tries, and at 30 % loss each way (a try fails half
    /// the time) it dies once in about a million idle stretches; with 25 s it would get 5, and
    /// die once in 30.
    #[must_use]
    pub fn with_heartbeat_interval(mut self, interval: Option<Duration>) -> Self {
        self.heartbeat_interval = interval.map(|d| clamp_duration(d, Duration::from_millis(1)));
        self
    }

    /// Whether server sessions also send heartbeats after `heartbeat_interval` of silence.
    /// Default false (servers answer heartbeats but do not start them, as known servers do).
    #[must_use]
    pub fn with_server_heartbeats(mut self, on: bool) -> Self {
        self.server_heartbeats = on;
        self
    }

    /// Silence from the peer after which the session ends with
    /// [`DisconnectReason::Timeout`](soe_wire::DisconnectReason::Timeout). Default 30 s; `None`
    /// disables; at least 1 ms.
    #[must_use]
    pub fn with_idle_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.idle_timeout = timeout.map(|d| clamp_duration(d, Duration::from_millis(1)));
        self
    }

    /// How often a client sends a NetStatusRequest once connected (each matching response is a
    /// round-trip sample). Default `None`: only the probe right after the handshake. At least
    /// 1 ms.
    #[must_use]
    pub fn with_net_status_interval(mut self, interval: Option<Duration>) -> Self {
        self.net_status_interval = interval.map(|d| clamp_duration(d, Duration::from_millis(1)));
        self
    }

    /// How long a graceful close waits for queued reliable data to be acknowledged before it
    /// sends the Disconnect anyway. Default 5 s. Every duration setter caps its value at one
    /// year.
    #[must_use]
    pub fn with_close_timeout(mut self, timeout: Duration) -> Self {
        self.close_timeout = clamp_duration(timeout, Duration::ZERO);
        self
    }

    /// How many times a Disconnect is sent, so that one lost datagram does not leave the peer
    /// waiting for its timeout. Default 5 (at 30% independent loss the peer misses all five with
    /// probability 0.24%); clamped to 1..=16.
    #[must_use]
    pub fn with_disconnect_repeats(mut self, repeats: u8) -> Self {
        self.disconnect_repeats = repeats.clamp(1, 16);
        self
    }

    /// The spacing of repeated Disconnects. Default 100 ms; at least 1 ms.
    #[must_use]
    pub fn with_disconnect_interval(mut self, interval: Duration) -> Self {
        self.disconnect_interval = clamp_duration(interval, Duration::from_millis(1));
        self
    }

    /// Whether a Heartbeat or a selective Acknowledge that fails its CRC is accepted when it has
    /// exactly the CRC-less shape some servers (h1z1-server) send. By default client sessions
    /// accept them and server sessions do not: no known client sends them, and a packet with
    /// no CRC is one anybody who knows the address can forge. Either way a selective ack is only
    /// a hint to the sender, never a proof of delivery: data it names stays queued until a
    /// cumulative ack (which always carries the CRC) covers it.
    #[must_use]
    pub fn with_accept_crcless_quirks(mut self, on: bool) -> Self {
        self.accept_crcless_quirks = Some(on);
        self
    }

    /// Whether a client session accepts, from its server's address, the two CRC-less shapes
    /// that the Free Realms emulator's own server (OSFR's LibSOE, C#) sends: its answer to a
    /// Heartbeat, a bare `00 06` even when compression was negotiated, and its Disconnect,
    /// without a CRC (with the compression flag when negotiated), which must carry this
    /// session's id. Without it an idle session to that server dies of its idle timeout, and
    /// the server's close is never heard. What it costs: neither shape proves where it came
    /// from, so anyone who can send from the server's address can keep a dead session alive
    /// with bare Heartbeats, and anyone who also knows the session id (it crosses the wire in
    /// clear in the handshake) can end it. Datagrams from any other address never reach a
    /// session. Server sessions ignore it. Default `false`.
    #[must_use]
    pub fn with_accept_libsoe_quirks(mut self, on: bool) -> Self {
        self.accept_libsoe_quirks = on;
        self
    }

    /// Unreliable and ordered messages queued for sending, and received but not yet polled,
    /// each; more received ones are dropped (they are unreliable). Default 256; at least 1.
    #[must_use]
    pub fn with_max_queued_unreliable(mut self, max: usize) -> Self {
        self.max_queued_unreliable = max.max(1);
        self
    }

    /// See [`with_application_protocol`](Self::with_application_protocol).
    pub fn application_protocol(&self) -> &[u8] {
        &self.application_protocol
    }
    /// See [`with_udp_length`](Self::with_udp_length).
    pub fn udp_length(&self) -> u32 {
        self.udp_length
    }
    /// See [`with_crc_length`](Self::with_crc_length).
    pub fn crc_length(&self) -> CrcLength {
        self.crc_length
    }
    /// See [`with_compression`](Self::with_compression).
    pub fn compression(&self) -> bool {
        self.compression
    }
    /// See [`with_encryption_key`](Self::with_encryption_key).
    pub fn encryption_key(&self) -> Option<&Bytes> {
        self.encryption_key.as_ref()
    }
    /// See [`with_encryption_at_start`](Self::with_encryption_at_start).
    pub fn encryption_at_start(&self) -> bool {
        self.encryption_at_start
    }
    /// See [`with_any_application_protocol`](Self::with_any_application_protocol).
    pub fn any_application_protocol(&self) -> bool {
        self.any_application_protocol
    }
    /// See [`with_any_protocol_version`](Self::with_any_protocol_version).
    pub fn any_protocol_version(&self) -> bool {
        self.any_protocol_version
    }
    /// See [`with_reliable`](Self::with_reliable).
    pub fn reliable(&self) -> &Arc<ReliableConfig> {
        &self.reliable
    }
    /// See [`with_connect_timeout`](Self::with_connect_timeout).
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }
    /// See [`with_retry_interval`](Self::with_retry_interval).
    pub fn retry_interval(&self) -> Duration {
        self.retry_interval
    }
    /// See [`with_heartbeat_interval`](Self::with_heartbeat_interval).
    pub fn heartbeat_interval(&self) -> Option<Duration> {
        self.heartbeat_interval
    }
    /// See [`with_server_heartbeats`](Self::with_server_heartbeats).
    pub fn server_heartbeats(&self) -> bool {
        self.server_heartbeats
    }
    /// See [`with_idle_timeout`](Self::with_idle_timeout).
    pub fn idle_timeout(&self) -> Option<Duration> {
        self.idle_timeout
    }
    /// See [`with_net_status_interval`](Self::with_net_status_interval).
    pub fn net_status_interval(&self) -> Option<Duration> {
        self.net_status_interval
    }
    /// See [`with_close_timeout`](Self::with_close_timeout).
    pub fn close_timeout(&self) -> Duration {
        self.close_timeout
    }
    /// See [`with_disconnect_repeats`](Self::with_disconnect_repeats).
    pub fn disconnect_repeats(&self) -> u8 {
        self.disconnect_repeats
    }
    /// See [`with_disconnect_interval`](Self::with_disconnect_interval).
    pub fn disconnect_interval(&self) -> Duration {
        self.disconnect_interval
    }
    /// See [`with_accept_crcless_quirks`](Self::with_accept_crcless_quirks): `None` when it was
    /// not set, meaning client sessions accept the quirks and server sessions do not.
    pub fn accept_crcless_quirks(&self) -> Option<bool> {
        self.accept_crcless_quirks
    }
    /// See [`with_accept_libsoe_quirks`](Self::with_accept_libsoe_quirks).
    pub fn accept_libsoe_quirks(&self) -> bool {
        self.accept_libsoe_quirks
    }
    /// See [`with_max_queued_unreliable`](Self::with_max_queued_unreliable).
    pub fn max_queued_unreliable(&self) -> usize {
        self.max_queued_unreliable
    }
}

/// How an [`Endpoint`](crate::Endpoint) accepts sessions and what it spends on strangers.
///
/// Every limit bounds memory or work that unauthenticated datagrams can cause; the defaults suit
/// an Internet-facing game server. See the crate documentation for the flood defence.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct EndpointConfig {
    server: Option<Arc<SessionConfig>>,
    client: Arc<SessionConfig>,
    max_sessions: usize,
    max_half_open: usize,
    source_levels: Vec<SourceLevel>,
    nat64_prefixes: Vec<(Ipv6Addr, u8)>,
    source_table_size: usize,
    stateless_reply_rate: u32,
    stateless_replies_per_source: u32,
    stateless_reply_slots: usize,
    max_queued_replies: usize,
    replace_after_silence: Duration,
    remap_interval: Duration,
    max_tombstones: usize,
    limit_loopback: bool,
    shard_group: Option<ShardGroup>,
    rng_seed: Option<u64>,
    secret: Option<FixedSecret>,
    recording: RecordingConfig,
}

/// A secret fixed by `EndpointConfig::with_secret`; kept out of `Debug` output.
#[derive(Clone, Copy)]
#[cfg_attr(not(feature = "testing"), allow(dead_code))]
struct FixedSecret(u128);

impl std::fmt::Debug for FixedSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FixedSecret(..)")
    }
}

impl Default for EndpointConfig {
    fn default() -> Self {
        Self {
            server: None,
            client: Arc::new(SessionConfig::default()),
            max_sessions: 10_000,
            max_half_open: 1024,
            source_levels: default_source_levels(),
            nat64_prefixes: vec![(Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0), 96)],
            source_table_size: 4096,
            stateless_reply_rate: 200,
            stateless_replies_per_source: 4,
            stateless_reply_slots: 1024,
            max_queued_replies: 256,
            replace_after_silence: Duration::from_secs(2),
            remap_interval: Duration::from_secs(1),
            max_tombstones: 4096,
            limit_loopback: false,
            shard_group: None,
            rng_seed: None,
            secret: None,
            recording: RecordingConfig::default(),
        }
    }
}

impl EndpointConfig {
    /// An endpoint that accepts sessions with `server` (and connects with the default client
    /// config).
    pub fn server(server: Arc<SessionConfig>) -> Self {
        Self::default().with_server(Some(server))
    }

    /// An endpoint that only connects, with `client`.
    pub fn client(client: Arc<SessionConfig>) -> Self {
        Self::default().with_client(client)
    }

    /// The config of accepted sessions; `None` (the default) refuses nothing and answers no
    /// SessionRequest.
    #[must_use]
    pub fn with_server(mut self, server: Option<Arc<SessionConfig>>) -> Self {
        self.server = server;
        self
    }

    /// The config of sessions started with [`Endpoint::connect`](crate::Endpoint::connect).
    #[must_use]
    pub fn with_client(mut self, client: Arc<SessionConfig>) -> Self {
        self.client = client;
        self
    }

    /// The most sessions (established, closing, and client sessions; half-open ones are counted
    /// apart). A SessionRequest beyond it is refused with
    /// [`ConnectionRefused`](soe_wire::DisconnectReason::ConnectionRefused), and so is a
    /// half-open session whose handshake any datagram would complete while the cap is reached. Default 10,000
    /// (about 10 MB of idle sessions, more when they carry traffic); at least 1.
    #[must_use]
    pub fn with_max_sessions(mut self, max: usize) -> Self {
        self.max_sessions = max.max(1);
        self
    }

    /// The most half-open server sessions (answered SessionRequest, no valid packet from the
    /// client yet). When full, the oldest is dropped for the new one. Default 1024; at least 1.
    #[must_use]
    pub fn with_max_half_open(mut self, max: usize) -> Self {
        self.max_half_open = max.max(1);
        self
    }

    /// SessionRequests answered per host per minute: the rate of the first of the
    /// [source levels](Self::with_source_levels) (a token bucket of this size, refilled
    /// evenly). A host is a source, not an address: every port of one IPv4 address counts as
    /// one, and every address of one IPv6 /64, so a host gets no more sessions for using more
    /// ports. RemapConnections that move or rebuild a session count here too, against the new
    /// address's host. Default 30 (a client resends once a second while unanswered); at least 1.
    #[must_use]
    pub fn with_requests_per_source_per_minute(mut self, n: u32) -> Self {
        if let Some(host) = self.source_levels.first_mut() {
            *host = host.with_requests_per_minute(n);
        }
        self
    }

    /// The levels of the per-source limits: the prefix lengths at which addresses count as
    /// one source, each with its own SessionRequest rate and its own cap on the sessions
    /// (established and half-open) one source may hold, as a share of
    /// [`max_sessions`](Self::with_max_sessions). A SessionRequest must be within every
    /// level's rate and cap, so a network cannot take more by spreading over many hosts; past
    /// a cap it is refused with `ConnectionRefused`.
    ///
    /// Default, three levels: hosts (an IPv4 address, an IPv6 /64) 30 requests a minute and
    /// 1 % of `max_sessions` (100 of 10,000); IPv6 sites (a /56) 120 a minute and 2 %; networks
    /// (an IPv4 /24, an IPv6 /48) 600 a minute and 5 % (500 of 10,000). So one network holds at
    /// most 5 % of `max_sessions`, and twenty networks are needed to fill the endpoint. Raise
    /// them for a server whose players come through few addresses (a relay that is not on
    /// loopback, a campus, a carrier-grade NAT). At most 4 levels (more are ignored); none
    /// turns the limits off.
    #[must_use]
    pub fn with_source_levels(mut self, levels: impl IntoIterator<Item = SourceLevel>) -> Self {
        self.source_levels = levels.into_iter().take(crate::MAX_SOURCE_LEVELS).collect();
        self
    }

    /// The NAT64 translator prefixes (RFC 6052): an IPv6 source inside one is charged as the
    /// IPv4 address it embeds, so that the IPv4 clients of a translator are sources of their
    /// own instead of one IPv6 /64. Each is a prefix and its length, one of 32, 40, 48, 56, 64
    /// or 96 bits (anything else is refused). Default: the well-known prefix `64:ff9b::/96`;
    /// add a network-specific prefix, or the local-use `64:ff9b:1::/48` (RFC 8215), when the
    /// clients' translator uses one. The list replaces the previous one.
    pub fn with_nat64_prefixes(
        mut self,
        prefixes: impl IntoIterator<Item = (Ipv6Addr, u8)>,
    ) -> Result<Self, ConfigError> {
        let prefixes: Vec<(Ipv6Addr, u8)> = prefixes.into_iter().collect();
        if let Some(&(_, len)) = prefixes
            .iter()
            .find(|(_, len)| !NAT64_LENGTHS.contains(len))
        {
            return Err(ConfigError::OutOfRange {
                field: "nat64 prefix length",
                value: u64::from(len),
                range: "32, 40, 48, 56, 64 or 96",
            });
        }
        self.nat64_prefixes = prefixes;
        Ok(self)
    }

    /// Sources tracked per level by the per-source request limit; when full, the least
    /// recently added one is forgotten, and what it had spent is remembered in a fixed table
    /// of 1,024 buckets under a keyed hash, so that forgetting a source never gives it more
    /// than waiting would. Default 4096; at least 1.
    #[must_use]
    pub fn with_source_table_size(mut self, n: usize) -> Self {
        self.source_table_size = n.max(1);
        self
    }

    /// Makes endpoints built with this config share one secret and one set of per-source
    /// limits with every other endpoint given the same group: the shards of one server on one
    /// port (see [`ShardGroup`]). Default: none (each endpoint draws a group of its own).
    #[must_use]
    pub fn with_shard_group(mut self, group: Option<ShardGroup>) -> Self {
        self.shard_group = group;
        self
    }

    /// Whether the per-source limits (the request rates, the sessions held and the share of
    /// stateless replies) apply to loopback sources: `127.0.0.0/8`, `::1`, and
    /// `::ffff:127.0.0.0/104` (IPv4 loopback on a dual-stack socket); nothing else, not the
    /// NAT64 spelling `64:ff9b::127.0.0.1`, which is global unicast. Off by default: a loopback
    /// source is this machine, which needs no defending against, and either local tools (a
    /// benchmark opening a hundred sessions at once) or a relay on this machine that forwards
    /// every player (all of whom would then be one source). The endpoint-wide limits still
    /// apply.
    ///
    /// The exemption trusts the kernel to drop datagrams from outside with a loopback source,
    /// which Linux does unless `net.ipv4.conf.*.route_localnet` is on (kube-proxy turns it on
    /// for NodePort services on localhost): on such a host, turn this on.
    #[must_use]
    pub fn with_limit_loopback(mut self, on: bool) -> Self {
        self.limit_loopback = on;
        self
    }

    /// Replies per second the endpoint sends without a session (UnknownSender, and refusals of
    /// SessionRequests), for all sources together; a token bucket of one second's worth.
    /// Each source also has a share of its own
    /// ([`with_stateless_replies_per_source`](Self::with_stateless_replies_per_source)).
    /// Default 200; 0 sends none.
    #[must_use]
    pub fn with_stateless_reply_rate(mut self, per_second: u32) -> Self {
        self.stateless_reply_rate = per_second;
        self
    }

    /// Stateless replies per second for one source (a token bucket of one second's worth),
    /// within the endpoint-wide rate: a flood from a few sources uses up their own shares, and
    /// the rest of the endpoint's budget still answers everyone else (a client whose NAT
    /// rebinding needs one UnknownSender, say). A source is a host (every port of one IPv4
    /// address, every address of one IPv6 /64; see [`PeerAddress`](crate::PeerAddress)), so
    /// a host that sends from many ports still has one share. Sources are filed in a fixed
    /// table of [`with_stateless_reply_slots`](Self::with_stateless_reply_slots) buckets under
    /// a keyed hash of their host (SipHash, keyed with the endpoint's secret), so a flooder
    /// can neither grow the table nor aim at another source's bucket: it must flood from
    /// hosts spread over every bucket to starve one, and a flood spoofed from addresses
    /// spread over all of them leaves each source a share of the endpoint's budget in
    /// proportion to its part of the traffic. (A client of this crate whose NAT rebinds also
    /// recovers without the reply: it sends RemapConnection unprompted once its Heartbeat goes
    /// unanswered; see the crate documentation.)
    /// Default 4 (a client needs one UnknownSender per RemapConnection, at most one a
    /// second, and one refusal per SessionRequest); 0 sends none.
    #[must_use]
    pub fn with_stateless_replies_per_source(mut self, per_second: u32) -> Self {
        self.stateless_replies_per_source = per_second;
        self
    }

    /// The buckets of the per-source stateless-reply limit (see
    /// [`with_stateless_replies_per_source`](Self::with_stateless_replies_per_source)): sources
    /// sharing a bucket share its rate. About 24 bytes each, allocated on the first stateless
    /// reply. Default 1,024; at least 1, at most 1,048,576.
    #[must_use]
    pub fn with_stateless_reply_slots(mut self, n: usize) -> Self {
        self.stateless_reply_slots = n.clamp(1, 1 << 20);
        self
    }

    /// Stateless replies queued and not yet taken by `poll_transmit`; more are dropped. Default
    /// 256; at least 1.
    #[must_use]
    pub fn with_max_queued_replies(mut self, n: usize) -> Self {
        self.max_queued_replies = n.max(1);
        self
    }

    /// How a SessionRequest with a new session id, from the address of an established session,
    /// is treated. Such a request is how a client that restarted on the same address starts
    /// over, but its address is all it proves, so anyone who can spoof that address could send
    /// it. The endpoint therefore does not end the old session on the first such request: it
    /// sends the old session a Heartbeat and ignores the request; any authentic datagram from
    /// the peer afterwards (the Heartbeat's answer, which this crate's clients send, or its
    /// ordinary traffic) counts as an answer. A
    /// later request (clients resend theirs every second) replaces the old session (which ends
    /// with `NewConnectionAttempt`) only once that Heartbeat has gone unanswered, with nothing
    /// else heard from the peer either, for at least this long. A live client is therefore never
    /// replaced by a spoofer unless its traffic is also cut off for this long; a restarted
    /// client gets in this much later (plus up to one resend interval). A closed or half-open
    /// session is replaced at once. Default 2 s; at most one year.
    #[must_use]
    pub fn with_replace_after_silence(mut self, silence: Duration) -> Self {
        self.replace_after_silence = silence.min(MAX_DURATION);
        self
    }

    /// The shortest time between two moves of one live session to a new address by
    /// RemapConnection; remaps also count against the per-source SessionRequest limit of the new
    /// address. A client resends RemapConnection once per `retry_interval`, so a real move is
    /// delayed at most by that. Measured in steps of 62 ms. Default 1 s; at most one hour.
    #[must_use]
    pub fn with_remap_interval(mut self, interval: Duration) -> Self {
        self.remap_interval = interval.min(Duration::from_secs(3600));
        self
    }

    /// Closed server sessions whose (session id, CRC seed) the endpoint remembers, so that a
    /// RemapConnection carrying their cookie cannot rebuild them within the cookie's lifetime
    /// (60 s). When more sessions close within a lifetime than this, the oldest entry is dropped
    /// and, until that entry would have expired, no session is rebuilt from a cookie at all (a
    /// client that needed it reconnects): the promise holds, at the cost of recovery during a
    /// mass close. Each entry costs about 40 bytes. Default 4,096; at least 1.
    #[must_use]
    pub fn with_max_tombstones(mut self, n: usize) -> Self {
        self.max_tombstones = n.max(1);
        self
    }

    /// Seeds the endpoint's generator of session ids (a [`SplitMix64`](crate::SplitMix64)), for
    /// reproducible tests and simulators only (feature `testing`, so a production build cannot
    /// set it): its outputs, which go on the wire, give the seed away, and with it every later
    /// session id. It does not touch the endpoint's secret (see
    /// [`with_secret`](Self::with_secret)). Default: a CSPRNG keyed from the OS
    /// ([`KeyedRandom`](crate::KeyedRandom)).
    #[cfg(feature = "testing")]
    #[must_use]
    pub fn with_rng_seed(mut self, seed: u64) -> Self {
        self.rng_seed = Some(seed);
        self
    }

    /// Fixes the endpoint's 128-bit secret, which keys its CRC-seed cookies and the buckets of
    /// its per-source limits, for reproducible tests and simulators only (feature `testing`):
    /// anyone who knows it can compute every CRC seed the endpoint hands out. Ignored when a
    /// [shard group](Self::with_shard_group) is given (the group has its secret). Default:
    /// drawn from the OS generator when the endpoint is made, and from nothing else.
    #[cfg(feature = "testing")]
    #[must_use]
    pub fn with_secret(mut self, secret: u128) -> Self {
        self.secret = Some(FixedSecret(secret));
        self
    }

    /// The flight recorder's settings (see [`recorder`](crate::recorder)): off by default (no
    /// session recorded unless the host asks for one), 64 KiB per session, 64 MiB per endpoint.
    #[must_use]
    pub fn with_recording(mut self, recording: RecordingConfig) -> Self {
        self.recording = recording;
        self
    }

    /// See [`with_recording`](Self::with_recording).
    pub fn recording(&self) -> &RecordingConfig {
        &self.recording
    }

    /// See [`with_server`](Self::with_server).
    pub fn server_config(&self) -> Option<&Arc<SessionConfig>> {
        self.server.as_ref()
    }
    /// See [`with_client`](Self::with_client).
    pub fn client_config(&self) -> &Arc<SessionConfig> {
        &self.client
    }
    /// See [`with_max_sessions`](Self::with_max_sessions).
    pub fn max_sessions(&self) -> usize {
        self.max_sessions
    }
    /// See [`with_max_half_open`](Self::with_max_half_open).
    pub fn max_half_open(&self) -> usize {
        self.max_half_open
    }
    /// See [`with_requests_per_source_per_minute`](Self::with_requests_per_source_per_minute).
    pub fn requests_per_source_per_minute(&self) -> u32 {
        self.source_levels
            .first()
            .map_or(0, SourceLevel::requests_per_minute)
    }
    /// See [`with_source_levels`](Self::with_source_levels).
    pub fn source_levels(&self) -> &[SourceLevel] {
        &self.source_levels
    }
    /// See [`with_nat64_prefixes`](Self::with_nat64_prefixes).
    pub fn nat64_prefixes(&self) -> &[(Ipv6Addr, u8)] {
        &self.nat64_prefixes
    }
    /// See [`with_shard_group`](Self::with_shard_group).
    pub fn shard_group(&self) -> Option<&ShardGroup> {
        self.shard_group.as_ref()
    }
    /// See [`with_source_table_size`](Self::with_source_table_size).
    pub fn source_table_size(&self) -> usize {
        self.source_table_size
    }
    /// See [`with_stateless_reply_rate`](Self::with_stateless_reply_rate).
    pub fn stateless_reply_rate(&self) -> u32 {
        self.stateless_reply_rate
    }
    /// See [`with_stateless_replies_per_source`](Self::with_stateless_replies_per_source).
    pub fn stateless_replies_per_source(&self) -> u32 {
        self.stateless_replies_per_source
    }
    /// See [`with_stateless_reply_slots`](Self::with_stateless_reply_slots).
    pub fn stateless_reply_slots(&self) -> usize {
        self.stateless_reply_slots
    }
    /// See [`with_max_queued_replies`](Self::with_max_queued_replies).
    pub fn max_queued_replies(&self) -> usize {
        self.max_queued_replies
    }
    /// See [`with_replace_after_silence`](Self::with_replace_after_silence).
    pub fn replace_after_silence(&self) -> Duration {
        self.replace_after_silence
    }
    /// See [`with_remap_interval`](Self::with_remap_interval).
    pub fn remap_interval(&self) -> Duration {
        self.remap_interval
    }
    /// See [`with_max_tombstones`](Self::with_max_tombstones).
    pub fn max_tombstones(&self) -> usize {
        self.max_tombstones
    }
    /// See [`with_limit_loopback`](Self::with_limit_loopback).
    pub fn limit_loopback(&self) -> bool {
        self.limit_loopback
    }
    /// The seed of the session-id generator, set by `with_rng_seed` (feature `testing`); `None`
    /// in any other build.
    pub fn rng_seed(&self) -> Option<u64> {
        self.rng_seed
    }
    /// The fixed secret, set by `with_secret` (feature `testing`); `None` in any other build.
    pub fn secret(&self) -> Option<u128> {
        self.secret.map(|s| s.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setters_clamp_and_cut() {
        let c = SessionConfig::new(b"Login\0junk")
            .with_udp_length(10)
            .with_disconnect_repeats(0)
            .with_retry_interval(Duration::ZERO);
        assert_eq!(c.application_protocol(), b"Login");
        assert_eq!(c.udp_length(), MIN_UDP_LENGTH);
        assert_eq!(c.disconnect_repeats(), 1);
        assert_eq!(c.retry_interval(), Duration::from_millis(1));
        let long = SessionConfig::default()
            .with_idle_timeout(Some(Duration::MAX))
            .with_close_timeout(Duration::MAX);
        assert_eq!(long.idle_timeout(), Some(MAX_DURATION));
        assert_eq!(long.close_timeout(), MAX_DURATION);
        assert_eq!(
            SessionConfig::default()
                .with_udp_length(1 << 20)
                .udp_length(),
            MAX_UDP_LENGTH
        );
    }

    #[test]
    fn fallible_setters_reject_bad_values() {
        assert!(
            SessionConfig::default()
                .with_encryption_key(Bytes::new())
                .is_err()
        );
        assert!(
            SessionConfig::default()
                .with_encryption_key(Bytes::from(vec![1u8; 257]))
                .is_err()
        );
        assert!(
            SessionConfig::default()
                .with_encryption_key(Bytes::from_static(b"key"))
                .is_ok()
        );
        let bad = Arc::new(ReliableConfig::default().with_receive_window(0));
        let err = SessionConfig::default().with_reliable(bad).unwrap_err();
        assert!(err.to_string().contains("receive_window"), "{err}");
    }

    #[test]
    fn nat64_prefixes_take_rfc_6052_lengths_only() {
        let p: Ipv6Addr = "2001:db8:64::".parse().unwrap();
        assert!(
            EndpointConfig::default()
                .with_nat64_prefixes([(p, 48)])
                .is_ok()
        );
        let err = EndpointConfig::default()
            .with_nat64_prefixes([(p, 50)])
            .unwrap_err();
        assert!(err.to_string().contains("50"), "{err}");
        assert_eq!(EndpointConfig::default().nat64_prefixes().len(), 1);
    }
}
