//! What the client commands (`ping`, `load`) share: connecting, and the messages they send.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Result, anyhow};
use soe_tokio::bytes::Bytes;
use soe_tokio::{Config, ConnectError, Connection, Endpoint, EndpointConfig, SessionConfig};

/// Opens a client endpoint on an ephemeral port and connects it to `server`.
///
/// The session config's connect timeout bounds the wait; the error says plainly when nobody
/// answered.
pub(crate) async fn connect(
    server: SocketAddr,
    session: Arc<SessionConfig>,
) -> Result<(Endpoint, Connection)> {
    let timeout = session.connect_timeout();
    let endpoint = Endpoint::client(Config::new(Arc::new(EndpointConfig::client(session))))
        .map_err(|e| anyhow!("cannot open a client socket: {e}"))?;
    match endpoint.connect(server).await {
        Ok(conn) => Ok((endpoint, conn)),
        Err(ConnectError::TimedOut { .. }) => Err(anyhow!(
            "{server} did not answer within {:.1} s (is an SOE server listening there, with the same --protocol?)",
            timeout.as_secs_f64()
        )),
        Err(ConnectError::Refused { reason }) => {
            Err(anyhow!("{server} refused the session: {reason:?}"))
        }
        Err(e) => Err(anyhow!("cannot connect to {server}: {e}")),
    }
}

/// The message number `seq` of `size` bytes: the sequence number (big-endian, as many of its 8
/// bytes as fit) then a repeating text, so every message is distinct, checkable byte for byte,
/// and compressible like real game traffic.
pub(crate) fn message(seq: u64, size: usize) -> Bytes {
    const FILL: &[u8] = b" soe message payload;";
    let mut out = Vec::with_capacity(size);
    out.extend(seq.to_be_bytes().iter().take(size));
    let mut i = 0usize;
    while out.len() < size {
        out.push(FILL[i % FILL.len()]);
        i += 1;
    }
    Bytes::from(out)
}
