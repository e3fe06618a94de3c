//! The flags commands share: the session flags of `serve`, `ping` and `load` (and their
//! conversion to a [`SessionConfig`]), and the dissection flags of `decode` and `proxy`, with
//! the same spelling wherever a flag means the same thing.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use base64::Engine;
use clap::Args;
use soe_session::{MAX_UDP_LENGTH, MIN_UDP_LENGTH, Preset};
use soe_tokio::SessionConfig;
use soe_tokio::bytes::Bytes;
use soe_wire::CrcLength;

/// How a session is configured; the same flags on every command that opens sessions.
#[derive(Debug, Clone, Args)]
pub(crate) struct SessionFlags {
    /// The application protocol name sent in SessionRequest (both sides must agree). Default
    /// SoeEcho, or the preset's (h1z1: ExternalGatewayApi_3).
    #[arg(long, value_name = "NAME")]
    pub(crate) protocol: Option<String>,
    /// A known peer's settings, under the flags given here: free-realms (at most 64 KiB in
    /// flight), osfr-libsoe (a client takes LibSOE's bare Heartbeat and CRC-less Disconnect),
    /// h1z1 (its gateway's protocol name and 50 ms ack hold; RC4 after the first message still
    /// takes --rc4-key and --rc4-after-first-message), planetside2 (acks held up to 500 ms).
    /// docs/interop.md gives the source of each value.
    #[arg(long, value_name = "NAME")]
    pub(crate) preset: Option<Preset>,
    /// The RC4 key for reliable application data, base64 (both sides must agree).
    #[arg(long, value_name = "BASE64")]
    pub(crate) rc4_key: Option<String>,
    /// Start in plaintext and turn RC4 on right after the first reliable message, as the H1Z1
    /// gateway does after its login request: a client after sending it, a server after
    /// receiving it and before replying (both sides must agree). Needs --rc4-key.
    #[arg(long, requires = "rc4_key")]
    pub(crate) rc4_after_first_message: bool,
    /// The largest datagram this side accepts (announced in the handshake): 64 to 65507.
    #[arg(long, value_name = "N", default_value_t = 512, value_parser = parse_udp_length)]
    pub(crate) udp_length: u32,
    /// How long a client waits for the server's answer (a server: for a new client's first
    /// packet), in seconds.
    #[arg(long, value_name = "S", default_value = "5", value_parser = crate::serve::parse_seconds)]
    pub(crate) connect_timeout: Duration,
}

/// What only a server announces in its SessionResponse: the CRC length and compression.
#[derive(Debug, Clone, Args)]
pub(crate) struct ServerFlags {
    /// The CRC trailer length this server announces: 0, 2 or 4 (clients adopt it).
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = parse_crc_length)]
    pub(crate) crc_length: u8,
    /// Announce compression (clients adopt it).
    #[arg(long)]
    pub(crate) compress: bool,
}

/// The server's flags given to a client command, where they would mean nothing (a client
/// adopts what the server announces): hidden from the help, and refused with a word on why.
#[derive(Debug, Clone, Args)]
pub(crate) struct NotForClients {
    #[arg(long, hide = true, value_name = "N")]
    crc_length: Option<String>,
    #[arg(long, hide = true)]
    compress: bool,
}

impl NotForClients {
    /// Refuses the server's flags on a client command.
    pub(crate) fn refuse(&self, command: &str) -> Result<()> {
        let flag = match (&self.crc_length, self.compress) {
            (Some(_), _) => "--crc-length",
            (None, true) => "--compress",
            (None, false) => return Ok(()),
        };
        bail!(
            "{flag} is what a server announces (soe serve {flag}): a client adopts the \
             server's, so `soe {command}` does not take it"
        )
    }
}

/// Parses a udp_length: refused outside what a session accepts, never clamped.
fn parse_udp_length(s: &str) -> Result<u32, String> {
    let n: u32 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a datagram length in bytes"))?;
    if (MIN_UDP_LENGTH..=MAX_UDP_LENGTH).contains(&n) {
        Ok(n)
    } else {
        Err(format!(
            "{n} is out of range: a udp_length is {MIN_UDP_LENGTH} to {MAX_UDP_LENGTH} bytes"
        ))
    }
}

/// The largest message a session sends: the default `max_message_size` (4 MiB).
pub(crate) fn max_message_size() -> usize {
    soe_session::ReliableConfig::default().max_message_size
}

/// Parses a message size: 1 byte to the largest message a session sends (4 MiB), so that a
/// size a session would refuse is refused before anything is sent.
pub(crate) fn parse_size(s: &str) -> Result<usize, String> {
    let largest = max_message_size();
    let range = || format!("a message is 1 to {largest} bytes ({} MiB)", largest >> 20);
    let size: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a size in bytes: {}", range()))?;
    if size == 0 {
        return Err(format!("0 bytes: {}", range()));
    }
    if size > largest {
        return Err(format!(
            "{size} is over the largest message a session sends ({largest} bytes, {} MiB)",
            largest >> 20
        ));
    }
    Ok(size)
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
    /// The application protocol: `--protocol`, else the preset's, else SoeEcho.
    pub(crate) fn protocol_name(&self) -> String {
        match (&self.protocol, self.preset) {
            (Some(name), _) => name.clone(),
            (None, Some(p)) if !SessionConfig::preset(p).application_protocol().is_empty() => {
                String::from_utf8_lossy(SessionConfig::preset(p).application_protocol()).into()
            }
            (None, _) => "SoeEcho".into(),
        }
    }

    /// The decoded RC4 key, if one was given.
    pub(crate) fn key(&self) -> Result<Option<Vec<u8>>> {
        self.rc4_key.as_deref().map(decode_key).transpose()
    }

    /// The session configuration these flags describe (a client's, or with `server` a
    /// server's, which announces the CRC length and compression).
    pub(crate) fn session_config(
        &self,
        server: Option<&ServerFlags>,
    ) -> Result<Arc<SessionConfig>> {
        let base = self
            .preset
            .map_or_else(SessionConfig::default, SessionConfig::preset);
        let mut config = base
            .with_application_protocol(self.protocol_name())
            .with_udp_length(self.udp_length)
            .with_connect_timeout(self.connect_timeout);
        if let Some(server) = server {
            config = config
                .with_crc_length(server.crc())
                .with_compression(server.compress);
        }
        if let Some(key) = self.key()? {
            config = config
                .with_encryption_key(Bytes::from(key))
                .context("the RC4 key was refused")?
                .with_encryption_at_start(!self.rc4_after_first_message);
        }
        Ok(Arc::new(config))
    }
}

impl ServerFlags {
    /// The CRC length as the wire type.
    pub(crate) fn crc(&self) -> CrcLength {
        CrcLength::new(self.crc_length).unwrap_or(CrcLength::TWO)
    }
}

/// How `decode` and `proxy` read sessions whose handshake they did not see, and their keys.
#[derive(Debug, Clone, Args)]
pub(crate) struct DissectFlags {
    /// The CRC seed of sessions whose handshake is not seen (decimal or 0x-hex).
    #[arg(long, value_name = "N", value_parser = parse_seed)]
    pub(crate) crc_seed: Option<u32>,
    /// The CRC length of sessions whose handshake is not seen: 0 to 4 (default 2).
    #[arg(long, value_name = "N", value_parser = parse_any_crc_length)]
    pub(crate) crc_length: Option<u8>,
    /// Sessions whose handshake is not seen use compression.
    #[arg(long)]
    pub(crate) compress: bool,
    /// The RC4 key of reliable application data, base64; `PORT=BASE64` for the sessions of the
    /// server on that port only. Repeat for several servers; without a key, data that looks
    /// encrypted is reported as such.
    #[arg(long, value_name = "[PORT=]BASE64")]
    pub(crate) rc4_key: Vec<String>,
    /// The sessions start in plaintext and turn RC4 on right after their first reliable
    /// message, as the H1Z1 gateway does after its login request (`soe serve
    /// --rc4-after-first-message`): that message is shown as sent and the key is judged on the
    /// rest. Needs --rc4-key.
    #[arg(long, requires = "rc4_key")]
    pub(crate) rc4_after_first_message: bool,
}

impl DissectFlags {
    /// The dissector configuration these flags describe.
    pub(crate) fn config(&self) -> Result<soe_dissect::DissectConfig> {
        let mut config = soe_dissect::DissectConfig::new();
        config.crc_seed = self.crc_seed;
        config.crc_length = self.crc_length;
        config.compression = self.compress.then_some(true);
        config.rc4_after_first_message = self.rc4_after_first_message;
        let mut ports = std::collections::HashSet::new();
        for rule in &self.rc4_key {
            let (port, key) = parse_port_key(rule)?;
            if !ports.insert(port) {
                match port {
                    Some(p) => bail!("--rc4-key gives port {p} two keys"),
                    None => bail!("--rc4-key gives two keys without a port: give each a PORT="),
                }
            }
            config = config.with_key(port, key);
        }
        Ok(config)
    }
}

/// Parses `PORT=BASE64` or `BASE64` (base64 never holds `=` before its padding at the end, and
/// a port is digits, so `123=...` is a port rule).
fn parse_port_key(rule: &str) -> Result<(Option<u16>, Vec<u8>)> {
    match rule.split_once('=') {
        Some((port, key)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => {
            let port: u16 = port.parse().ok().filter(|&p| p != 0).with_context(|| {
                format!("--rc4-key {rule:?}: {port} is not a port (1 to 65535)")
            })?;
            Ok((Some(port), decode_key(key)?))
        }
        _ => Ok((None, decode_key(rule)?)),
    }
}

/// Parses a CRC seed: decimal, or hex with a `0x` prefix.
pub(crate) fn parse_seed(s: &str) -> Result<u32, String> {
    let t = s.trim();
    let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => t.parse::<u32>(),
    };
    parsed.map_err(|e| format!("{s:?} is not a 32-bit CRC seed (decimal or 0x-hex): {e}"))
}

/// Parses a CRC length a dissector accepts: 0 to 4.
fn parse_any_crc_length(s: &str) -> Result<u8, String> {
    match s.trim().parse::<u8>() {
        Ok(n @ 0..=4) => Ok(n),
        Ok(n) => Err(format!("{n} is not a CRC length: use 0 to 4")),
        Err(e) => Err(format!("{s:?} is not a CRC length: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_keys() {
        let key = "F70IaxuU8C/w7FPXY1ibXw==";
        let (port, bytes) = parse_port_key(&format!("20260={key}")).unwrap();
        assert_eq!(port, Some(20260));
        assert_eq!(bytes.len(), 16);
        assert_eq!(parse_port_key(key).unwrap().0, None);
        let e = parse_port_key(&format!("70000={key}"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a port"), "{e}");
        assert!(parse_port_key("20260=").is_err());
    }

    #[test]
    fn seeds_and_lengths() {
        assert_eq!(parse_seed("0x6EC14BF6"), Ok(0x6EC1_4BF6));
        assert_eq!(parse_seed("1858192374"), Ok(1_858_192_374));
        assert!(parse_seed("-1").is_err());
        assert!(parse_seed("0x1_0000_0000").is_err());
        assert_eq!(parse_any_crc_length("4"), Ok(4));
        assert!(parse_any_crc_length("5").is_err());
    }
}
