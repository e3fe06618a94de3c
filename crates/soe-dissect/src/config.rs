//! What a [`Dissector`](crate::Dissector) assumes about sessions whose handshake it did not
//! see, which keys it decrypts with, and the limits that bound its memory.

use std::net::SocketAddr;

/// The CRC length assumed when neither a handshake nor the configuration gives one.
pub(crate) const DEFAULT_CRC_LENGTH: u8 = 2;
/// The ASCII preview of a message covers this many bytes.
pub(crate) const ASCII_PREVIEW: usize = 256;
/// The rendered tree shows this many bytes of a message in hex.
pub(crate) const TREE_HEX: usize = 48;

/// The limits that bound a dissector's memory whatever its input. The defaults suit a capture
/// of a busy server; each can be raised or lowered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// The most sessions followed (live and ended); datagrams of further address pairs are
    /// dissected without session state. Default 65,536.
    pub max_sessions: usize,
    /// The most out-of-order packets buffered per direction (all channels). Default 4,096.
    pub max_stored: usize,
    /// Packets further than this ahead of the next expected sequence are not buffered.
    /// Default 4,096.
    pub window: u64,
    /// The largest reassembled message, in bytes (one more byte is allowed for an escape, as
    /// the receiver allows). Default 4 MiB.
    pub max_message: usize,
    /// The most bytes buffered (out-of-order packets and partial reassemblies) across all
    /// sessions. Default 64 MiB.
    pub max_buffered: usize,
    /// The most data sequences per direction and channel waiting for an ack (round trips).
    /// Default 4,096.
    pub max_pending_acks: usize,
    /// The largest body one inflate may produce, in bytes. Default 256 KiB.
    pub max_inflated: usize,
    /// The most messages listed in one datagram record (the rest are counted). Default 10,000.
    pub max_listed: usize,
    /// A missing reliable sequence this far behind the newest one seen is given up as lost to
    /// the capture, and the stream goes on past it. A sender keeps at most its send window
    /// unacknowledged (196 packets in known peers, within the receiver's 256-packet window), so
    /// it has stopped resending a sequence this far behind. Default 256.
    pub gap_window: u64,
    /// The most gaps listed per direction in a session summary (the rest are counted).
    /// Default 1,000.
    pub max_gaps_listed: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_sessions: 65_536,
            max_stored: 4096,
            window: 4096,
            max_message: 4 * 1024 * 1024,
            max_buffered: 64 * 1024 * 1024,
            max_pending_acks: 4096,
            max_inflated: 256 * 1024,
            max_listed: 10_000,
            gap_window: 256,
            max_gaps_listed: 1000,
        }
    }
}

/// An RC4 key and the sessions it applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRule {
    /// The server port the key is for; `None`: every session that no port rule matches.
    pub port: Option<u16>,
    /// The key (1 to 256 bytes; an empty or longer key decrypts nothing).
    pub key: Vec<u8>,
}

/// What to assume about sessions whose handshake is not in the input, and how to decrypt.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct DissectConfig {
    /// The CRC seed; without it (and without a handshake) CRCs are not checked ("unknown").
    pub crc_seed: Option<u32>,
    /// The CRC trailer length, 0 to 4; default 2.
    pub crc_length: Option<u8>,
    /// Whether contextual packets carry a compression flag; default no.
    pub compression: Option<bool>,
    /// The RC4 keys of reliable application data. A session takes the key of the rule naming
    /// its server's port (either port while the server is unknown), else the rule without a
    /// port; with no matching rule it is read as plaintext.
    pub keys: Vec<KeyRule>,
    /// RC4 switches on right after each session's first reliable message (as the H1Z1
    /// gateway does after its login request): that message is read as plaintext and left out
    /// of the key's judgement, and each direction's keystream starts at the message after it.
    /// Default off: RC4 from the first message.
    pub rc4_after_first_message: bool,
    /// The memory limits.
    pub limits: Limits,
}

impl DissectConfig {
    /// A configuration with nothing assumed, no keys, and the default limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the CRC seed assumed for sessions without a handshake.
    #[must_use]
    pub fn with_crc_seed(mut self, seed: u32) -> Self {
        self.crc_seed = Some(seed);
        self
    }

    /// Sets the CRC length (0 to 4) assumed for sessions without a handshake.
    #[must_use]
    pub fn with_crc_length(mut self, length: u8) -> Self {
        self.crc_length = Some(length);
        self
    }

    /// Sets whether sessions without a handshake use compression.
    #[must_use]
    pub fn with_compression(mut self, compression: bool) -> Self {
        self.compression = Some(compression);
        self
    }

    /// Adds an RC4 key for the sessions whose server port is `port`, or for every other
    /// session when `port` is `None`.
    #[must_use]
    pub fn with_key(mut self, port: Option<u16>, key: impl Into<Vec<u8>>) -> Self {
        self.keys.push(KeyRule {
            port,
            key: key.into(),
        });
        self
    }

    /// Sets whether RC4 switches on only after each session's first reliable message.
    #[must_use]
    pub fn with_rc4_after_first_message(mut self, after: bool) -> Self {
        self.rc4_after_first_message = after;
        self
    }

    /// Sets the memory limits.
    #[must_use]
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The key for a session between `addrs` whose server is `server` (when known).
    pub(crate) fn key_for(
        &self,
        server: Option<SocketAddr>,
        addrs: (SocketAddr, SocketAddr),
    ) -> Option<&[u8]> {
        let by_port = self.keys.iter().find(|rule| {
            rule.port.is_some_and(|port| match server {
                Some(server) => server.port() == port,
                None => addrs.0.port() == port || addrs.1.port() == port,
            })
        });
        by_port
            .or_else(|| self.keys.iter().find(|rule| rule.port.is_none()))
            .map(|rule| rule.key.as_slice())
    }
}
