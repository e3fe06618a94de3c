//! The configuration of an endpoint driver: the protocol's endpoint configuration plus what the
//! driver itself decides (socket options, how events reach the application, queue bounds).

use std::sync::Arc;

use soe_session::EndpointConfig;

use crate::socket::SocketConfig;

/// The default bound on the bytes of received messages one connection may hold unread: 8 MiB.
pub const DEFAULT_RECEIVE_QUEUE_BYTES: usize = 8 * 1024 * 1024;

/// What each received message costs against [`Config::receive_queue_bytes`] beyond its own
/// length: 64 bytes. A queued message takes a queue entry (40 bytes in per-connection mode, 48 in
/// stream mode: the channel, the `Bytes` handle and, in stream mode, the connection id) plus its
/// share of the buffer it points into, so counting only the data would let empty or one-byte
/// messages queue by the million (8 MiB of 1-byte messages is about 8 million entries, some
/// 330 MiB). With the overhead, the default 8 MiB bound holds at most 131,072 messages.
pub const MESSAGE_OVERHEAD: usize = 64;

/// How an endpoint hands sessions and messages to the application.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum EventMode {
    /// New sessions come out of `Endpoint::accept`, and each connection has its own receive queue
    /// read with `Connection::recv`. Suits a task per connection.
    #[default]
    PerConnection,
    /// Everything (new sessions, messages, closes) comes out of one stream,
    /// `Endpoint::next_event` / `Endpoint::events`, in the order the driver saw it. Suits an
    /// actor-style server where one task routes every session. `accept` then returns `None`
    /// and `Connection::recv` only waits for the close.
    Stream,
}

/// Everything an endpoint driver needs: the protocol endpoint's configuration and the driver's.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Config {
    /// The protocol endpoint's configuration (sessions, server side, limits).
    pub endpoint: Arc<EndpointConfig>,
    /// Options for the UDP socket `bind` creates.
    pub socket: SocketConfig,
    /// How sessions and messages reach the application. Default [`EventMode::PerConnection`].
    pub event_mode: EventMode,
    /// The most bytes of received messages one connection may hold before the application reads
    /// them, each message counted as its length plus [`MESSAGE_OVERHEAD`] (64 bytes, so an empty
    /// message counts too). A connection that goes past it is closed with `ReliableOverflow`: the peer keeps
    /// sending, the reliable layer acknowledges what it delivered, so without this bound an
    /// application that stops reading would let a peer fill memory. Default
    /// [`DEFAULT_RECEIVE_QUEUE_BYTES`] (8 MiB); at least one message is always accepted.
    pub receive_queue_bytes: usize,
    /// The receive buffer size per datagram: the longest datagram read whole (a longer one is
    /// cut, then fails its CRC). Default `None`: the largest `udp_length` this endpoint announces,
    /// but at least 9,000 bytes, because some peers send up to their own `udp_length` whatever
    /// this side announces (docs/interop.md). `Some(n)` reads at most `n` bytes (at least 512).
    /// With GRO (Linux, async driver) a slot holds up to 64 coalesced datagrams of the announced
    /// size, and one datagram of up to that whole slot.
    pub max_datagram_size: Option<usize>,
}

impl Config {
    /// A configuration around `endpoint` with the driver's defaults.
    pub fn new(endpoint: Arc<EndpointConfig>) -> Self {
        Self {
            endpoint,
            socket: SocketConfig::default(),
            event_mode: EventMode::default(),
            receive_queue_bytes: DEFAULT_RECEIVE_QUEUE_BYTES,
            max_datagram_size: None,
        }
    }

    /// Sets the socket options.
    pub fn with_socket(mut self, socket: SocketConfig) -> Self {
        self.socket = socket;
        self
    }

    /// Sets how sessions and messages reach the application.
    pub fn with_event_mode(mut self, mode: EventMode) -> Self {
        self.event_mode = mode;
        self
    }

    /// Sets the per-connection bound on unread received bytes.
    pub fn with_receive_queue_bytes(mut self, bytes: usize) -> Self {
        self.receive_queue_bytes = bytes;
        self
    }

    /// Sets the receive buffer size per datagram (`None`: the announced `udp_length`, at least
    /// 9,000 bytes; `Some(n)`: `n`, at least 512 bytes).
    pub fn with_max_datagram_size(mut self, bytes: Option<usize>) -> Self {
        self.max_datagram_size = bytes;
        self
    }
}

impl Default for Config {
    fn default() -> Self {
        Self::new(Arc::new(EndpointConfig::default()))
    }
}

impl From<Arc<EndpointConfig>> for Config {
    fn from(endpoint: Arc<EndpointConfig>) -> Self {
        Self::new(endpoint)
    }
}

impl From<EndpointConfig> for Config {
    fn from(endpoint: EndpointConfig) -> Self {
        Self::new(Arc::new(endpoint))
    }
}
