//! The protocol endpoint of a driver, and the shards of one port.
//!
//! Endpoints of this process bound with [`SocketConfig::reuse_port`](crate::SocketConfig) to
//! one address (shards, e.g. one per core, among which the kernel spreads the datagrams by a
//! hash of their addresses and ports) share one [`ShardGroup`]: one secret and one set of
//! per-source limits, so a host that varies its source port to reach every shard still has one
//! share. Endpoints in other processes, or made with
//! [`Endpoint::with_socket`](crate::Endpoint::with_socket) on a socket bound elsewhere, share
//! one only when their configs are given the same group
//! ([`EndpointConfig::with_shard_group`](soe_session::EndpointConfig::with_shard_group)).

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use soe_session::{EndpointError, ShardGroup, WeakShardGroup};

use crate::Config;

/// The groups of the `reuse_port` endpoints of this process, by bound address.
static GROUPS: Mutex<Option<HashMap<SocketAddr, WeakShardGroup>>> = Mutex::new(None);

/// The protocol endpoint for a driver whose socket is bound to `local_addr`: in the shard group
/// of that address when the config binds with `reuse_port` and names no group of its own.
/// Fails when the endpoint cannot be made (the OS random generator failed: see
/// [`soe_session::Endpoint::try_new`]).
pub(crate) fn protocol_endpoint(
    config: &Config,
    local_addr: SocketAddr,
) -> io::Result<soe_session::Endpoint> {
    let mut endpoint = config.endpoint.clone();
    if config.socket.reuse_port && endpoint.shard_group().is_none() {
        let group = group_for(local_addr).map_err(endpoint_error)?;
        endpoint = Arc::new((*endpoint).clone().with_shard_group(Some(group)));
    }
    soe_session::Endpoint::try_new(endpoint).map_err(endpoint_error)
}

/// The group of the `reuse_port` endpoints bound to `addr`, made if none is alive.
fn group_for(addr: SocketAddr) -> Result<ShardGroup, EndpointError> {
    let mut groups = GROUPS.lock().unwrap_or_else(PoisonError::into_inner);
    let groups = groups.get_or_insert_with(HashMap::new);
    groups.retain(|_, g| g.upgrade().is_some());
    if let Some(group) = groups.get(&addr).and_then(WeakShardGroup::upgrade) {
        return Ok(group);
    }
    let group = ShardGroup::new()?;
    groups.insert(addr, group.downgrade());
    Ok(group)
}

/// An [`EndpointError`] as the `io::Error` the constructors return (kind `Other`, the
/// `EndpointError` inside, for a binding to tell apart).
pub(crate) fn endpoint_error(e: EndpointError) -> io::Error {
    io::Error::other(e)
}
