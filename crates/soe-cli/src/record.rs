//! `soe serve --record DIR`: every session is recorded by the flight recorder
//! ([`soe_session::recorder`]), and each one that ends abnormally (a client killed, a timeout,
//! a corrupt packet...) is written to DIR as a pcapng capture ([`soe_dissect::recording`]):
//! its last datagrams with their real addresses, beside its messages as the server saw them.

use std::net::SocketAddr;
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
        let mut options =
            RecordingOptions::new(self.local, remote).with_start_instant(recording.start());
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
