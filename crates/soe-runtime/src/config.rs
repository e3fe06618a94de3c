//! The configuration of an endpoint driver: the protocol's endpoint configuration plus what the
//! driver itself decides (socket options, how events reach the application, queue bounds).

use std::sync::Arc;
use std::time::Duration;

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

/// The longest [`Config::receive_coalesce`] window taken: 50 ms. A longer one is cut to it, so
/// that a setting meant in microseconds and given in milliseconds cannot hold every reply of a
/// server for seconds (the protocol's acknowledgements and resends run on the same clock).
pub const MAX_RECEIVE_COALESCE: Duration = Duration::from_millis(50);

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
    /// The receive-coalescing window: after a wake-up that read datagrams, the driver reads the
    /// socket again only once this long has passed (or at its next wake-up for another reason
    /// after that), so that what arrives meanwhile is read together, in one wake-up, instead of
    /// one wake-up per datagram. Timers, sends and closes are not held; only reading is. A
    /// wake-up that read a full batch starts no window (more is waiting).
    ///
    /// It trades latency for wake-ups: a datagram that arrives in the window waits for its end,
    /// so a message's round trip grows by up to the window (half of it on average under a steady
    /// load), and a server that wakes per datagram wakes about once per window instead. On a
    /// small VM, where each wake-up costs more than the protocol's work on the datagram, it is
    /// the largest saving at low rates (docs/performance-notes.md has the figures).
    ///
    /// Default zero: off, every datagram is read when it arrives. At most
    /// [`MAX_RECEIVE_COALESCE`] (50 ms); a longer window is cut to it. Honoured by the async
    /// driver and by [`EventLoop`](crate::blocking::EventLoop)'s own waits (`next_event`,
    /// `drive`); a host that waits for the socket on its own loop and turns the loop with
    /// `turn_ready` should leave it zero, since the socket stays readable through the window.
    pub receive_coalesce: Duration,
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
            receive_coalesce: Duration::ZERO,
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

    /// Sets the receive-coalescing window (zero: off; at most [`MAX_RECEIVE_COALESCE`]). See
    /// [`Config::receive_coalesce`].
    pub fn with_receive_coalesce(mut self, window: Duration) -> Self {
        self.receive_coalesce = window;
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
