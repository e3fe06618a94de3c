//! The per-source limits, kept at several prefix lengths, and what the shards of one server
//! share.
//!
//! A [`ShardGroup`] holds the endpoint's secret and the state of its per-source limits: the
//! SessionRequest buckets and the sessions each source holds, at every [`SourceLevel`], and
//! the stateless-reply budget. Every endpoint has one; endpoints given the same one (shards
//! serving one port with `SO_REUSEPORT`) share it, so a host that reaches several shards (the
//! kernel picks one by the 4-tuple, so a host that varies its source port reaches them all)
//! still has one share. The state sits behind a `Mutex`, taken only on the paths that
//! strangers drive anyway (SessionRequest, RemapConnection, stateless replies) and when a
//! session opens or closes; never for a datagram of an established session.

use std::collections::{HashMap, VecDeque};
use std::hash::Hasher;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Instant;

use crate::address::{embedded_v4, prefix_mask};
use crate::{EndpointConfig, EndpointError, PeerAddress};

/// The most levels of per-source limits an endpoint keeps.
pub const MAX_SOURCE_LEVELS: usize = 4;

/// Buckets that remember sources forgotten by a full request table, per level (see
/// [`RequestTable`]).
const FORGOTTEN_SLOTS: usize = 1024;

/// One level of the per-source limits: which addresses count as one source (those equal in
/// their first `ipv4_prefix` or `ipv6_prefix` bits), how many SessionRequests one source may
/// send, and how many sessions it may hold. See
/// [`EndpointConfig::with_source_levels`](crate::EndpointConfig::with_source_levels).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceLevel {
    ipv4_prefix: Option<u8>,
    ipv6_prefix: Option<u8>,
    requests_per_minute: u32,
    session_percent: u8,
}

impl SourceLevel {
    /// A level whose sources are IPv4 prefixes of `ipv4_prefix` bits (at most 32) and IPv6
    /// prefixes of `ipv6_prefix` bits (at most 128); `None` leaves that family out of this
    /// level. 30 requests a minute and 1 % of `max_sessions` until set.
    pub fn new(ipv4_prefix: Option<u8>, ipv6_prefix: Option<u8>) -> Self {
        Self {
            ipv4_prefix: ipv4_prefix.map(|p| p.min(32)),
            ipv6_prefix: ipv6_prefix.map(|p| p.min(128)),
            requests_per_minute: 30,
            session_percent: 1,
        }
    }

    /// SessionRequests (and RemapConnections that move or rebuild a session) one source may
    /// send per minute: a token bucket of this size, refilled evenly. At least 1.
    #[must_use]
    pub fn with_requests_per_minute(mut self, n: u32) -> Self {
        self.requests_per_minute = n.max(1);
        self
    }

    /// The sessions, established and half-open, one source may hold, in percent of
    /// `max_sessions` (at least one session). Clamped to 1..=100.
    #[must_use]
    pub fn with_session_percent(mut self, percent: u8) -> Self {
        self.session_percent = percent.clamp(1, 100);
        self
    }

    /// See [`SourceLevel::new`].
    pub fn ipv4_prefix(&self) -> Option<u8> {
        self.ipv4_prefix
    }
    /// See [`SourceLevel::new`].
    pub fn ipv6_prefix(&self) -> Option<u8> {
        self.ipv6_prefix
    }
    /// See [`with_requests_per_minute`](Self::with_requests_per_minute).
    pub fn requests_per_minute(&self) -> u32 {
        self.requests_per_minute
    }
    /// See [`with_session_percent`](Self::with_session_percent).
    pub fn session_percent(&self) -> u8 {
        self.session_percent
    }
    /// The sessions one source may hold when the endpoint holds at most `max_sessions`.
    pub fn max_sessions(&self, max_sessions: usize) -> usize {
        (max_sessions.saturating_mul(usize::from(self.session_percent)) / 100).max(1)
    }
}

/// A token bucket: `capacity` tokens, refilled at `per_sec`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bucket {
    tokens: f32,
    last: Instant,
}

impl Bucket {
    fn full(now: Instant, capacity: f32) -> Self {
        Self {
            tokens: capacity,
            last: now,
        }
    }

    fn refill(&mut self, now: Instant, capacity: f32, per_sec: f32) {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f32();
        self.last = self.last.max(now);
        self.tokens = (self.tokens + elapsed * per_sec).min(capacity);
    }
}

/// The keys of the sources an address is charged to, one per level (`None` where a level
/// leaves the address's family out).
pub(crate) type Keys = [Option<u64>; MAX_SOURCE_LEVELS];

/// The SessionRequest buckets of one level, in a bounded table.
///
/// A full table must never forget a source more cheaply than waiting would refill it, or a
/// flood of other sources would hand a spent source a fresh bucket. So a source forgotten to
/// make room leaves what it spent behind, in a fixed array of [`FORGOTTEN_SLOTS`] buckets
/// under its key (a keyed hash, so nobody can aim at a slot), where each slot keeps the lowest
/// level any forgotten source left there, refilling as a bucket does; a source that enters the
/// table starts from its slot, never from more. What a source leaves is its own spending only,
/// not what it inherited from its slot, so slots do not drain by passing debts on: a flood of
/// sources that each send a request or two leaves the slots nearly full, and a source new to
/// the endpoint starts with a full bucket unless it shares a slot with a forgotten spender
/// (one in 1,024 per such spender), and then it waits as the spender would.
#[derive(Debug, Default)]
struct RequestTable {
    buckets: HashMap<u64, Tracked>,
    order: VecDeque<u64>,
    forgotten: Vec<Forgotten>,
}

/// A slot of [`RequestTable::forgotten`]: the lowest bucket left there, and whose it was.
#[derive(Debug, Clone, Copy)]
struct Forgotten {
    bucket: Bucket,
    owner: u64,
}

/// A source's bucket in a [`RequestTable`], and the tokens it started with.
#[derive(Debug, Clone, Copy)]
struct Tracked {
    bucket: Bucket,
    /// Less than the capacity when the source inherited another source's debt from its slot
    /// (its own, left there when it was forgotten, counts as spent by itself).
    start: f32,
}

impl RequestTable {
    /// The bucket of `key`, refilled to `now`, entered (and the oldest forgotten) if needed.
    fn bucket(
        &mut self,
        now: Instant,
        key: u64,
        size: usize,
        capacity: f32,
    ) -> Option<&mut Bucket> {
        let per_sec = capacity / 60.0;
        if !self.buckets.contains_key(&key) {
            while self.buckets.len() >= size.max(1) {
                let Some(old) = self.order.pop_front() else {
                    break;
                };
                if let Some(t) = self.buckets.remove(&old) {
                    self.remember(now, old, t, capacity);
                }
            }
            let (bucket, start) = match self.slot(key) {
                Some(slot) => {
                    slot.bucket.refill(now, capacity, per_sec);
                    let start = if slot.owner == key {
                        capacity
                    } else {
                        slot.bucket.tokens
                    };
                    (slot.bucket, start)
                }
                None => (Bucket::full(now, capacity), capacity),
            };
            self.buckets.insert(key, Tracked { bucket, start });
            self.order.push_back(key);
        }
        let t = self.buckets.get_mut(&key)?;
        t.bucket.refill(now, capacity, per_sec);
        Some(&mut t.bucket)
    }

    /// Leaves what a forgotten source spent in its slot.
    fn remember(&mut self, now: Instant, key: u64, t: Tracked, capacity: f32) {
        let per_sec = capacity / 60.0;
        let mut own = t.bucket;
        own.refill(now, capacity, per_sec);
        // Its own spending: the bucket it would have had, had it started full.
        let own = (own.tokens + (capacity - t.start)).min(capacity);
        if own >= capacity {
            return; // It spent nothing that has not refilled: nothing worth remembering.
        }
        if self.forgotten.is_empty() {
            let empty = Forgotten {
                bucket: Bucket::full(now, capacity),
                owner: 0,
            };
            self.forgotten = vec![empty; FORGOTTEN_SLOTS];
        }
        if let Some(slot) = self.slot(key) {
            slot.bucket.refill(now, capacity, per_sec);
            if own <= slot.bucket.tokens {
                slot.bucket.tokens = own;
                slot.owner = key;
            }
        }
    }

    fn slot(&mut self, key: u64) -> Option<&mut Forgotten> {
        let len = self.forgotten.len() as u64;
        if len == 0 {
            return None;
        }
        self.forgotten.get_mut((key % len) as usize)
    }
}

/// The budget of stateless replies: the endpoint's bucket, and a fixed table of per-source
/// buckets, a source's chosen by a keyed hash of its host (see
/// [`EndpointConfig::with_stateless_replies_per_source`]).
#[derive(Debug, Default)]
struct ReplyBudget {
    endpoint: Option<Bucket>,
    /// Allocated on the first reply, `stateless_reply_slots` long.
    sources: Vec<Bucket>,
}

impl ReplyBudget {
    /// Takes a token from both the endpoint's bucket and the bucket of source `key`, or from
    /// neither: a source past its share takes nothing from everyone else's. A source exempt
    /// from the per-source limits (`key` `None`) takes from the endpoint's bucket only.
    fn take(&mut self, now: Instant, key: Option<u64>, config: &EndpointConfig) -> bool {
        let rate = config.stateless_reply_rate() as f32;
        let per_source = config.stateless_replies_per_source() as f32;
        let slots = config.stateless_reply_slots().max(1);
        if self.sources.len() != slots {
            self.sources = vec![Bucket::full(now, per_source); slots];
        }
        let endpoint = self.endpoint.get_or_insert_with(|| Bucket::full(now, rate));
        endpoint.refill(now, rate, rate);
        let Some(key) = key else {
            if endpoint.tokens < 1.0 {
                return false;
            }
            endpoint.tokens -= 1.0;
            return true;
        };
        let Some(source) = self.sources.get_mut((key % slots as u64) as usize) else {
            return false;
        };
        source.refill(now, per_source, per_source);
        if source.tokens < 1.0 || endpoint.tokens < 1.0 {
            return false;
        }
        source.tokens -= 1.0;
        endpoint.tokens -= 1.0;
        true
    }
}

/// What a [`ShardGroup`] keeps behind its lock.
#[derive(Debug, Default)]
struct LimitState {
    requests: [RequestTable; MAX_SOURCE_LEVELS],
    /// Sessions held, by source key (entries only while some are).
    sessions: HashMap<u64, u32>,
    replies: ReplyBudget,
}

/// One secret and one set of per-source limits, shared by the endpoints (shards) that serve
/// one port.
///
/// An [`Endpoint`](crate::Endpoint) made from a config without a group draws a group of its
/// own. Shards of one server (endpoints whose sockets share a port with `SO_REUSEPORT`, which
/// the kernel hands each datagram to by a hash of its addresses and ports) should be given one
/// group, with
/// [`EndpointConfig::with_shard_group`](crate::EndpointConfig::with_shard_group); `soe-runtime`
/// does it for the endpoints of one process bound to one address with `reuse_port`. Without
/// it, each shard has its own limits, and a host that varies its source ports reaches every
/// shard and gets a share from each.
///
/// Shared: the secret (the CRC-seed cookies and the reply-budget buckets are keyed with it),
/// the SessionRequest buckets and the count of sessions each source holds at every level, and
/// the stateless-reply budget. Not shared: the sessions themselves. A CRC-seed cookie carries
/// the shard that issued it, and only that shard honours it: a RemapConnection that the kernel
/// hands another shard (after the client's NAT gave it a new port) finds no session there,
/// since the session and its reliable state live on the first shard.
///
/// Cloning is cheap (an `Arc`).
#[derive(Clone)]
pub struct ShardGroup {
    inner: Arc<GroupInner>,
}

struct GroupInner {
    secret: [u64; 2],
    shards: AtomicU32,
    state: Mutex<LimitState>,
}

impl std::fmt::Debug for ShardGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The secret stays out of logs.
        f.debug_struct("ShardGroup")
            .field("shards", &self.shards())
            .finish_non_exhaustive()
    }
}

impl ShardGroup {
    /// A group with a secret drawn from the operating system's random generator. Fails,
    /// rather than fall back to anything weaker, when the generator does.
    pub fn new() -> Result<Self, EndpointError> {
        Ok(Self::with_key(crate::rng::os_key()?))
    }

    /// A group with a fixed secret, for reproducible tests and simulators only (feature
    /// `testing`): anyone who knows it can compute every CRC seed its endpoints hand out.
    #[cfg(feature = "testing")]
    pub fn with_secret(secret: u128) -> Self {
        Self::with_key(secret)
    }

    pub(crate) fn with_key(secret: u128) -> Self {
        Self {
            inner: Arc::new(GroupInner {
                secret: [secret as u64, (secret >> 64) as u64],
                shards: AtomicU32::new(0),
                state: Mutex::new(LimitState::default()),
            }),
        }
    }

    /// The endpoints made with this group so far.
    pub fn shards(&self) -> usize {
        self.inner.shards.load(Ordering::Relaxed) as usize
    }

    /// A handle that does not keep the group alive (for a registry of groups).
    pub fn downgrade(&self) -> WeakShardGroup {
        WeakShardGroup(Arc::downgrade(&self.inner))
    }

    /// Whether `other` is the same group.
    pub fn same_as(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Registers one more endpoint: its shard number, which its cookies carry.
    pub(crate) fn join(&self) -> u32 {
        self.inner.shards.fetch_add(1, Ordering::Relaxed)
    }

    /// A SipHash-1-3 hasher keyed with the secret.
    pub(crate) fn hasher(&self) -> siphasher::sip::SipHasher13 {
        let [k0, k1] = self.inner.secret;
        siphasher::sip::SipHasher13::new_with_keys(k0, k1)
    }

    /// The keyed hash of the endpoint's map from address to session, which every datagram
    /// goes through: foldhash (hashbrown's own default) under keys derived from the secret,
    /// so, like the secret, drawn from the operating system's generator. Its seed shared by
    /// all maps is derived from the first group's secret that asks for it, and each map
    /// starts from a seed of its own group's. A datagram's sender never sees a hash
    /// value, and an address enters the map only as a session the per-source limits allowed,
    /// so a flood cannot pile its addresses into a few buckets without first learning keys it
    /// has no view of. (The standard map's SipHash-1-3 was about 70 instructions a datagram.)
    pub(crate) fn address_hasher(&self) -> foldhash::fast::SeedableRandomState {
        static SHARED: OnceLock<foldhash::SharedSeed> = OnceLock::new();
        let derive = |domain: &[u8]| {
            let mut h = self.hasher();
            // Domain separation from the cookies and the source keys.
            h.write(domain);
            h.finish()
        };
        let shared = SHARED.get_or_init(|| foldhash::SharedSeed::from_u64(derive(b"address map")));
        foldhash::fast::SeedableRandomState::with_seed(derive(b"address map seed"), shared)
    }

    fn lock(&self) -> MutexGuard<'_, LimitState> {
        // Nothing is left half-done by a panic under this lock that would matter more than
        // stopping every shard.
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The source keys `remote` is charged to at each level of `config`.
    pub(crate) fn keys<A: PeerAddress>(&self, remote: A, config: &EndpointConfig) -> Keys {
        let mut keys = [None; MAX_SOURCE_LEVELS];
        let ip = remote.ip().map(|ip| match ip {
            IpAddr::V6(v6) => embedded_v4(v6, config.nat64_prefixes()).map_or(ip, IpAddr::V4),
            v4 => v4,
        });
        for (i, (level, key)) in config.source_levels().iter().zip(&mut keys).enumerate() {
            let prefix = match ip {
                None => Some((0u8, 0u8, remote.host())),
                Some(IpAddr::V4(v4)) => level.ipv4_prefix.map(|len| (4, len, v4_prefix(v4, len))),
                Some(IpAddr::V6(v6)) => level
                    .ipv6_prefix
                    .map(|len| (6, len, u128::from(v6) & prefix_mask(len))),
            };
            *key = prefix.map(|(family, len, bits)| {
                let mut h = self.hasher();
                // Domain separation from the cookies, which hash under the same secret.
                h.write(b"source");
                h.write_usize(i);
                h.write_u8(family);
                h.write_u8(len);
                h.write_u128(bits);
                h.finish()
            });
        }
        keys
    }

    /// Whether a SessionRequest (or a RemapConnection that moves or rebuilds a session) from
    /// the sources `keys` is within every level's rate; counts it at every level if so.
    pub(crate) fn allow_request(&self, now: Instant, keys: &Keys, config: &EndpointConfig) -> bool {
        let size = config.source_table_size();
        let mut state = self.lock();
        let levels = config.source_levels().iter().zip(keys);
        let ok = levels
            .clone()
            .zip(&mut state.requests)
            .all(|((level, key), table)| {
                key.is_none_or(|key| {
                    let capacity = level.requests_per_minute as f32;
                    table
                        .bucket(now, key, size, capacity)
                        .is_some_and(|b| b.tokens >= 1.0)
                })
            });
        if ok {
            for ((_, key), table) in levels.zip(&mut state.requests) {
                if let Some(t) = key.and_then(|key| table.buckets.get_mut(&key)) {
                    t.bucket.tokens -= 1.0;
                }
            }
        }
        ok
    }

    /// Charges one session to the sources `keys`, if each holds fewer than its level allows
    /// (or, `force`, whatever they hold: a live session moving to a new address).
    pub(crate) fn charge(&self, keys: &Keys, config: &EndpointConfig, force: bool) -> bool {
        let mut state = self.lock();
        let max = config.max_sessions();
        let within = config.source_levels().iter().zip(keys).all(|(level, key)| {
            key.is_none_or(|key| {
                state.sessions.get(&key).map_or(0, |&n| n as usize) < level.max_sessions(max)
            })
        });
        if !within && !force {
            return false;
        }
        for key in keys.iter().flatten() {
            *state.sessions.entry(*key).or_insert(0) += 1;
        }
        true
    }

    /// Gives back a session charged to `keys`.
    pub(crate) fn uncharge(&self, keys: &Keys) {
        let mut state = self.lock();
        for key in keys.iter().flatten() {
            if let Some(n) = state.sessions.get_mut(key) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    state.sessions.remove(key);
                }
            }
        }
    }

    /// Takes a stateless reply from the budget (see [`ReplyBudget::take`]); `keys` `None` for
    /// an exempt source.
    pub(crate) fn take_reply(
        &self,
        now: Instant,
        keys: Option<&Keys>,
        config: &EndpointConfig,
    ) -> bool {
        // The host: the finest level that applies.
        let key = keys.map(|k| k.iter().flatten().next().copied().unwrap_or(0));
        self.lock().replies.take(now, key, config)
    }

    /// The sessions charged to the source of level `level` that `keys` names (tests).
    #[cfg(test)]
    fn held(&self, keys: &Keys, level: usize) -> u32 {
        keys.get(level)
            .copied()
            .flatten()
            .and_then(|k| self.lock().sessions.get(&k).copied())
            .unwrap_or(0)
    }
}

/// A [`ShardGroup`] that lives only as long as something else holds it (see
/// [`ShardGroup::downgrade`]).
#[derive(Clone, Default)]
pub struct WeakShardGroup(std::sync::Weak<GroupInner>);

impl WeakShardGroup {
    /// The group, if something still holds it.
    pub fn upgrade(&self) -> Option<ShardGroup> {
        self.0.upgrade().map(|inner| ShardGroup { inner })
    }
}

impl std::fmt::Debug for WeakShardGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WeakShardGroup(..)")
    }
}

/// The first `len` bits of an IPv4 address, as a number.
fn v4_prefix(ip: Ipv4Addr, len: u8) -> u128 {
    let mask = match len {
        0 => 0,
        len if len >= 32 => u32::MAX,
        len => !(u32::MAX >> len),
    };
    u128::from(u32::from(ip) & mask)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;
    use std::time::Duration;

    fn a(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn sources_at_each_level() {
        let g = ShardGroup::with_key(7);
        let c = EndpointConfig::default();
        let k = |s: &str| g.keys(a(s), &c);
        // A host: every port of an IPv4 address, every address of an IPv6 /64.
        assert_eq!(k("192.0.2.7:1")[0], k("192.0.2.7:65535")[0]);
        assert_ne!(k("192.0.2.7:1")[0], k("192.0.2.8:1")[0]);
        assert_eq!(
            k("[2001:db8:1:2::1]:5")[0],
            k("[2001:db8:1:2:ffff::3]:6")[0]
        );
        assert_ne!(k("[2001:db8:1:2::1]:5")[0], k("[2001:db8:1:3::1]:5")[0]);
        // A /56 site for IPv6 only; networks: an IPv4 /24, an IPv6 /48.
        assert_eq!(k("[2001:db8:1:2::1]:5")[1], k("[2001:db8:1:ff::1]:5")[1]);
        assert_ne!(k("[2001:db8:1:2::1]:5")[1], k("[2001:db8:1:100::1]:5")[1]);
        assert_eq!(k("192.0.2.7:1")[1], None);
        assert_eq!(k("192.0.2.7:1")[2], k("192.0.2.200:9")[2]);
        assert_ne!(k("192.0.2.7:1")[2], k("192.0.3.7:1")[2]);
        assert_eq!(k("[2001:db8:1:2::1]:5")[2], k("[2001:db8:1:ffff::1]:5")[2]);
        assert_ne!(k("[2001:db8:1:2::1]:5")[2], k("[2001:db8:2:2::1]:5")[2]);
        // IPv4 seen as IPv6 is that IPv4 address at every level.
        assert_eq!(k("[::ffff:192.0.2.7]:2"), k("192.0.2.7:1"));
        assert_eq!(k("[64:ff9b::192.0.2.7]:3"), k("192.0.2.7:1"));
        assert_ne!(k("[64:ff9b:1::c000:207]:3"), k("192.0.2.7:1"));
        let local = c
            .clone()
            .with_nat64_prefixes([
                ("64:ff9b::".parse().unwrap(), 96),
                ("64:ff9b:1::".parse().unwrap(), 48),
            ])
            .unwrap();
        assert_eq!(
            g.keys(a("[64:ff9b:1:c000:2:700::]:3"), &local),
            k("192.0.2.7:1")
        );
        // Another group's keys say nothing about these.
        assert_ne!(
            ShardGroup::with_key(8).keys(a("192.0.2.7:1"), &c),
            k("192.0.2.7:1")
        );
    }

    #[test]
    fn sessions_are_capped_at_each_level_and_given_back() {
        let g = ShardGroup::with_key(1);
        let c = EndpointConfig::default().with_max_sessions(1000);
        let host = g.keys(a("[2001:db8:1:2::1]:5"), &c);
        // 1 % of 1,000 per host.
        for _ in 0..10 {
            assert!(g.charge(&host, &c, false));
        }
        assert!(!g.charge(&host, &c, false));
        assert_eq!(g.held(&host, 0), 10);
        g.uncharge(&host);
        assert!(g.charge(&host, &c, false));
        // 5 % per /48, whatever the /64s.
        let mut n = 10;
        for i in 0..100u16 {
            let k = g.keys(a(&format!("[2001:db8:1:{i:x}00::1]:5")), &c);
            n += usize::from(g.charge(&k, &c, false));
        }
        assert_eq!(n, 50);
        assert_eq!(g.held(&host, 2), 50);
    }

    #[test]
    fn a_full_request_table_never_forgets_a_spender() {
        let g = ShardGroup::with_key(3);
        let c = EndpointConfig::default().with_source_table_size(64);
        let t0 = Instant::now();
        let spender = g.keys(a("198.51.100.7:1"), &c);
        let spent = (0..40)
            .filter(|_| g.allow_request(t0, &spender, &c))
            .count();
        assert_eq!(spent, 30);
        for i in 0..1000u32 {
            let other = g.keys(a(&format!("10.{}.{}.1:1", i >> 8, i & 255)), &c);
            g.allow_request(t0 + Duration::from_millis(1), &other, &c);
        }
        // Ten seconds later the spender has what waiting gives: 5 requests.
        let t = t0 + Duration::from_secs(10);
        let again = (0..40).filter(|_| g.allow_request(t, &spender, &c)).count();
        assert_eq!(again, 5);
        // Forgotten again, it comes back with what it refilled since, not with what it had.
        for i in 0..1000u32 {
            let other = g.keys(a(&format!("10.{}.{}.2:1", i >> 8, i & 255)), &c);
            g.allow_request(t + Duration::from_millis(1), &other, &c);
        }
        let t = t + Duration::from_secs(4);
        let third = (0..40).filter(|_| g.allow_request(t, &spender, &c)).count();
        assert_eq!(third, 2);
        // The flood's sources, one request each, left the slots nearly full: a new source
        // starts with (almost) its whole bucket.
        let new = g.keys(a("203.0.113.50:1"), &c);
        let fresh = (0..40).filter(|_| g.allow_request(t, &new, &c)).count();
        assert!(fresh >= 28, "{fresh}");
    }
}
