//! `soe serve --record DIR`: every session is recorded by the flight recorder
//! ([`soe_session::recorder`]), and each one that ends abnormally (a client killed, a timeout,
//! a corrupt packet...) is written to DIR as a pcapng capture ([`soe_dissect::recording`]):
//! its last datagrams with their real addresses, beside its messages as the server saw them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use soe_dissect::recording::{RecordingOptions, RecordingSummary, write_recording};
use soe_tokio::{ConnectionId, Recording};

/// Where `--record` writes, and what.
#[derive(Debug)]
pub(crate) struct RecordTo {
    dir: PathBuf,
    /// The server's socket address.
    local: SocketAddr,
    /// The RC4 key, written into each recording with `--record-keys`.
    key: Option<Vec<u8>>,
}

impl RecordTo {
    /// Records into `dir` (made if missing) for a server bound to `local`.
    pub(crate) fn new(dir: &Path, local: SocketAddr, key: Option<Vec<u8>>) -> Result<Self> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot make the --record directory {}", dir.display()))?;
        Ok(Self {
            dir: dir.to_path_buf(),
            local,
            key,
        })
    }

    /// Writes connection `id`'s recording; returns the file and what it holds.
    pub(crate) fn write(
        &self,
        id: ConnectionId,
        recording: &Recording,
    ) -> Result<(PathBuf, RecordingSummary)> {
        let remote = recording.remote();
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let host = remote.ip().to_string().replace([':', '.'], "-");
        let path = self.dir.join(format!(
            "{secs}-session-{}-{host}-{}.pcapng",
            id.value(),
            remote.port()
        ));
        let mut options = RecordingOptions::new(local_for(self.local, remote), remote)
            .with_start_instant(recording.start());
        if let Some(key) = &self.key {
            options = options.with_key(key);
        }
        let file = std::fs::File::create(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        let summary = write_recording(
            std::io::BufWriter::new(file),
            recording.as_bytes(),
            &options,
        )
        .with_context(|| format!("cannot write {}", path.display()))?;
        Ok((path, summary))
    }
}

/// The server's address as a peer saw it: a wildcard bind is shown as the loopback address
/// when the peer is on loopback (the one address it can have reached), else as bound.
fn local_for(local: SocketAddr, remote: SocketAddr) -> SocketAddr {
    if !local.ip().is_unspecified() || !remote.ip().is_loopback() {
        return local;
    }
    let ip = match remote.ip() {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
    };
    SocketAddr::new(ip, local.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wildcard_bind_is_shown_as_the_address_the_peer_reached() {
        let any: SocketAddr = "0.0.0.0:20042".parse().unwrap();
        let lo: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let far: SocketAddr = "10.1.2.3:5000".parse().unwrap();
        assert_eq!(local_for(any, lo), "127.0.0.1:20042".parse().unwrap());
        assert_eq!(local_for(any, far), any);
        let bound: SocketAddr = "10.0.0.1:20042".parse().unwrap();
        assert_eq!(local_for(bound, lo), bound);
    }
}
