//! The session flags every command shares, and their conversion to a [`SessionConfig`].

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use base64::Engine;
use clap::Args;
use soe_tokio::SessionConfig;
use soe_tokio::bytes::Bytes;
use soe_wire::CrcLength;

/// How a session is configured; the same flags on every command.
#[derive(Debug, Clone, Args)]
pub(crate) struct SessionFlags {
    /// The application protocol name sent in SessionRequest (both sides must agree).
    #[arg(long, value_name = "NAME", default_value = "SoeEcho")]
    pub(crate) protocol: String,
    /// The CRC trailer length a server announces: 0, 2 or 4 (clients adopt the server's).
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = parse_crc_length)]
    pub(crate) crc_length: u8,
    /// Announce compression (server) / expect it (decode without a handshake in the capture).
    #[arg(long)]
    pub(crate) compress: bool,
    /// The RC4 key for reliable application data, base64 (both sides must agree).
    #[arg(long, value_name = "BASE64", alias = "key")]
    pub(crate) rc4_key: Option<String>,
    /// The largest datagram this side accepts (announced in the handshake).
    #[arg(long, value_name = "N", default_value_t = 512)]
    pub(crate) udp_length: u32,
    /// How long a client waits for the server's answer (a server: for a new client's first
    /// packet), in seconds.
    #[arg(long, value_name = "S", default_value = "5", value_parser = crate::serve::parse_seconds)]
    pub(crate) connect_timeout: Duration,
}

fn parse_crc_length(s: &str) -> Result<u8, String> {
    match s.parse::<u8>() {
        Ok(n @ (0 | 2 | 4)) => Ok(n),
        Ok(n) => Err(format!("{n} is not a CRC length: use 0, 2 or 4")),
        Err(e) => Err(e.to_string()),
    }
}

/// Decodes a base64 RC4 key with a clear message on bad input.
pub(crate) fn decode_key(key: &str) -> Result<Vec<u8>> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(key.trim())
        .with_context(|| format!("the RC4 key {key:?} is not valid base64"))?;
    if bytes.is_empty() || bytes.len() > 256 {
        bail!(
            "the RC4 key must be 1 to 256 bytes, {key:?} decodes to {} bytes",
            bytes.len()
        );
    }
    Ok(bytes)
}

impl SessionFlags {
    /// The CRC length as the wire type.
    pub(crate) fn crc(&self) -> CrcLength {
        CrcLength::new(self.crc_length).unwrap_or(CrcLength::TWO)
    }

    /// The decoded RC4 key, if one was given.
    pub(crate) fn key(&self) -> Result<Option<Vec<u8>>> {
        self.rc4_key.as_deref().map(decode_key).transpose()
    }

    /// The session configuration these flags describe.
    pub(crate) fn session_config(&self) -> Result<Arc<SessionConfig>> {
        let mut config = SessionConfig::new(&self.protocol)
            .with_udp_length(self.udp_length)
            .with_crc_length(self.crc())
            .with_compression(self.compress)
            .with_connect_timeout(self.connect_timeout);
        if let Some(key) = self.key()? {
            config = config
                .with_encryption_key(Bytes::from(key))
                .context("the RC4 key was refused")?;
        }
        Ok(Arc::new(config))
    }
}
