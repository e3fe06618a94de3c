//! Shared set-up of the interop tests: both sides' configurations, the test messages, a logging
//! UDP relay that can drop and inject datagrams, and small waiting helpers.
#![allow(dead_code)] // every test binary uses a different part of this module

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use soe_protocol::{
    ApplicationParameters, ClientEvent, Rc4KeyState, SessionParameters, SocketConfig, SocketEvent,
    TokioSoeClient, TokioSoeServer,
};
use soe_tokio::{Endpoint, EndpointConfig, SessionConfig};
use tokio::net::UdpSocket;
use tokio::task::JoinHandle;

/// The application protocol name both sides use unless a test says otherwise.
pub(crate) const PROTO: &str = "InteropProto";
/// The peer's tick: its timer granularity (acks, resends, dispatch of queued data).
pub(crate) const PEER_TICK: Duration = Duration::from_millis(2);
/// The RC4 key H1Z1 login servers use, as the emulators publish it (base64).
pub(crate) const H1Z1_LOGIN_KEY_B64: &str = "F70IaxuU8C/w7FPXY1ibXw==";
/// How long any single expected event may take before a test fails.
pub(crate) const PATIENCE: Duration = Duration::from_secs(10);

/// The H1Z1 login key as raw bytes.
pub(crate) fn h1z1_key() -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(H1Z1_LOGIN_KEY_B64)
        .expect("the constant is valid base64")
}

/// Tests that measure timing or push much data take this lock so they do not share the two
/// cores with each other (an async lock: it is held across awaits).
pub(crate) async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

pub(crate) fn localhost() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

// ----- the peer (soe-protocol 2.3.0) -----

/// What a test chooses for the peer.
#[derive(Debug, Clone)]
pub(crate) struct Peer {
    pub(crate) proto: String,
    pub(crate) key: Option<Vec<u8>>,
    pub(crate) compression: bool,
    pub(crate) udp_length: u32,
    pub(crate) seed: u64,
    pub(crate) tick: Duration,
    pub(crate) inactivity_timeout: Duration,
}

impl Default for Peer {
    fn default() -> Self {
        Self {
            proto: PROTO.to_owned(),
            key: None,
            compression: false,
            udp_length: 512,
            seed: 1,
            tick: PEER_TICK,
            inactivity_timeout: Duration::from_secs(30),
        }
    }
}

impl Peer {
    pub(crate) fn with_key(mut self, key: &[u8]) -> Self {
        self.key = Some(key.to_vec());
        self
    }

    pub(crate) fn config(&self) -> SocketConfig {
        SocketConfig {
            default_session_params: SessionParameters {
                application_protocol: self.proto.clone(),
                udp_length: self.udp_length,
                is_compression_enabled: self.compression,
                inactivity_timeout: self.inactivity_timeout,
                ..SessionParameters::default()
            },
            app_params: ApplicationParameters {
                encryption_key_state: self.key.as_deref().map(Rc4KeyState::new),
            },
            base_rng_seed: self.seed,
            ..SocketConfig::default()
        }
    }

    /// Its server on an ephemeral loopback port.
    pub(crate) async fn server(&self) -> TokioSoeServer {
        TokioSoeServer::bind(localhost(), self.config(), self.tick)
            .await
            .expect("bind the peer's server")
    }

    /// Its client, connecting to `server` (the handshake starts at once).
    pub(crate) async fn client(&self, server: SocketAddr) -> TokioSoeClient {
        TokioSoeClient::connect(localhost(), server, self.config(), self.tick)
            .await
            .expect("start the peer's client")
    }
}

/// The peer server's next event.
pub(crate) async fn server_event(server: &mut TokioSoeServer) -> SocketEvent<SocketAddr> {
    within(
        PATIENCE,
        "the peer server's next event",
        server.recv_event(),
    )
    .await
    .expect("the peer server's driver stopped")
}

/// The peer client's next event.
pub(crate) async fn client_event(client: &mut TokioSoeClient) -> ClientEvent {
    within(
        PATIENCE,
        "the peer client's next event",
        client.recv_event(),
    )
    .await
    .expect("the peer client's driver stopped")
}

/// Waits for the peer client's `Connected`.
pub(crate) async fn peer_connected(client: &mut TokioSoeClient) {
    match client_event(client).await {
        ClientEvent::Connected => {}
        other => panic!("the peer client's first event is {other:?}, not Connected"),
    }
}

// ----- our side (soe-tokio) -----

/// Our session config for the interop tests: the shared protocol name, short handshake
/// retries (loopback), and otherwise the defaults.
pub(crate) fn our_session() -> SessionConfig {
    SessionConfig::new(PROTO)
        .with_retry_interval(Duration::from_millis(200))
        .with_connect_timeout(Duration::from_secs(5))
}

pub(crate) fn with_key(session: SessionConfig, key: &[u8]) -> SessionConfig {
    session
        .with_encryption_key(Bytes::copy_from_slice(key))
        .expect("a valid RC4 key")
}

/// Our server endpoint on an ephemeral loopback port.
pub(crate) fn our_server(session: SessionConfig) -> Endpoint {
    Endpoint::bind(localhost(), EndpointConfig::server(Arc::new(session))).expect("bind our server")
}

/// Our client endpoint on an ephemeral loopback port.
pub(crate) fn our_client(session: SessionConfig) -> Endpoint {
    Endpoint::bind(localhost(), EndpointConfig::client(Arc::new(session))).expect("bind our client")
}

// ----- messages -----

/// The length of test message `i`: from 1 to 4,000 bytes, the two ends included early.
pub(crate) fn message_len(i: usize) -> usize {
    match i {
        0 => 1,
        1 => 4000,
        _ => 1 + (i.wrapping_mul(7919) + i / 3) % 4000,
    }
}

/// Test message `i` of a stream tagged `salt`: its bytes depend on both, and none is zero (so
/// plaintext messages never start with `0x00`, which the peer reads differently).
pub(crate) fn message(i: usize, salt: u8) -> Bytes {
    let len = message_len(i);
    (0..len)
        .map(|j| ((i.wrapping_mul(31) + j.wrapping_mul(7) + usize::from(salt)) % 255 + 1) as u8)
        .collect::<Vec<u8>>()
        .into()
}

/// Checks that `got` is message `i` of stream `salt`, with a short report if not.
pub(crate) fn check_message(got: &[u8], i: usize, salt: u8) {
    let want = message(i, salt);
    assert!(
        got == &want[..],
        "message {i} of stream {salt}: got {} bytes starting {:02x?}, want {} bytes starting {:02x?}",
        got.len(),
        &got[..got.len().min(8)],
        want.len(),
        &want[..want.len().min(8)],
    );
}

// ----- waiting -----

/// Awaits `f`, failing the test with `what` if it takes longer than `limit`.
pub(crate) async fn within<F: Future>(limit: Duration, what: &str, f: F) -> F::Output {
    match tokio::time::timeout(limit, f).await {
        Ok(v) => v,
        Err(_) => panic!("timed out after {limit:?} waiting for {what}"),
    }
}

// ----- the relay -----

/// Which way a datagram went through the relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dir {
    /// From the client to the server.
    ToServer,
    /// From the server to the client.
    ToClient,
}

/// One datagram seen by the relay.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    /// Time since the relay started.
    pub(crate) at: Duration,
    pub(crate) dir: Dir,
    pub(crate) bytes: Vec<u8>,
    /// Dropped by the relay's filter (not forwarded).
    pub(crate) dropped: bool,
}

impl Record {
    /// The opcode (the first two bytes, big endian), or `None` for a datagram shorter than that.
    pub(crate) fn op(&self) -> Option<u16> {
        op(&self.bytes)
    }
}

/// A copy of the first record with opcode `op`; panics naming `what` if there is none.
pub(crate) fn first_with_op(records: &[Record], op: u16, what: &str) -> Record {
    records
        .iter()
        .find(|r| r.op() == Some(op))
        .cloned()
        .unwrap_or_else(|| panic!("no {what} (opcode {op:#06x}) among the relayed datagrams"))
}

/// The opcode of a datagram.
pub(crate) fn op(bytes: &[u8]) -> Option<u16> {
    match bytes {
        [a, b, ..] => Some(u16::from_be_bytes([*a, *b])),
        _ => None,
    }
}

/// Decides per datagram whether the relay drops it.
pub(crate) type Filter = Box<dyn FnMut(Dir, &[u8]) -> bool + Send>;

struct RelayState {
    log: Vec<Record>,
    client: Option<SocketAddr>,
    filter: Filter,
}

/// A UDP relay between one client and one server that logs every datagram and can drop or
/// inject some. The client is pointed at [`Relay::addr`]; the server sees the relay as its
/// client.
pub(crate) struct Relay {
    pub(crate) addr: SocketAddr,
    server: SocketAddr,
    socket: Arc<UdpSocket>,
    state: Arc<Mutex<RelayState>>,
    start: Instant,
    task: JoinHandle<()>,
}

impl Relay {
    /// A relay to `server` that forwards everything.
    pub(crate) async fn new(server: SocketAddr) -> Self {
        Self::with_filter(server, Box::new(|_, _| false)).await
    }

    /// A relay to `server` that drops the datagrams `filter` picks.
    pub(crate) async fn with_filter(server: SocketAddr, filter: Filter) -> Self {
        let socket = Arc::new(relay_socket().expect("bind the relay"));
        let addr = socket.local_addr().expect("relay address");
        let state = Arc::new(Mutex::new(RelayState {
            log: Vec::new(),
            client: None,
            filter,
        }));
        let start = Instant::now();
        let task = tokio::spawn({
            let socket = socket.clone();
            let state = state.clone();
            async move {
                let mut buf = vec![0u8; 65536];
                loop {
                    let Ok((n, from)) = socket.recv_from(&mut buf).await else {
                        continue;
                    };
                    let bytes = buf[..n].to_vec();
                    let to = {
                        let mut s = state.lock().unwrap();
                        let (dir, to) = if from == server {
                            (Dir::ToClient, s.client)
                        } else {
                            s.client = Some(from);
                            (Dir::ToServer, Some(server))
                        };
                        let dropped = (s.filter)(dir, &bytes);
                        s.log.push(Record {
                            at: start.elapsed(),
                            dir,
                            bytes: bytes.clone(),
                            dropped,
                        });
                        to.filter(|_| !dropped)
                    };
                    if let Some(to) = to {
                        let _ = socket.send_to(&bytes, to).await;
                    }
                }
            }
        });
        Self {
            addr,
            server,
            socket,
            state,
            start,
            task,
        }
    }

    /// Every datagram seen so far.
    pub(crate) fn log(&self) -> Vec<Record> {
        self.state.lock().unwrap().log.clone()
    }

    /// The datagrams seen so far going `dir` (dropped ones included).
    pub(crate) fn sent(&self, dir: Dir) -> Vec<Record> {
        self.log().into_iter().filter(|r| r.dir == dir).collect()
    }

    /// Time since the relay started (the clock of [`Record::at`]).
    pub(crate) fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// Replaces the filter.
    pub(crate) fn set_filter(&self, filter: Filter) {
        self.state.lock().unwrap().filter = filter;
    }

    /// Sends `bytes` from the relay as if it came through it going `dir` (logged as such).
    pub(crate) async fn inject(&self, dir: Dir, bytes: &[u8]) {
        let to = match dir {
            Dir::ToServer => self.server,
            Dir::ToClient => self
                .state
                .lock()
                .unwrap()
                .client
                .expect("no client seen yet"),
        };
        self.state.lock().unwrap().log.push(Record {
            at: self.start.elapsed(),
            dir,
            bytes: bytes.to_vec(),
            dropped: false,
        });
        self.socket
            .send_to(bytes, to)
            .await
            .expect("relay injection");
    }
}

/// The relay's socket, with 4 MiB kernel buffers so that the relay is never where datagrams
/// are lost (the peer sends bursts of up to 196 datagrams).
fn relay_socket() -> std::io::Result<UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    socket.set_recv_buffer_size(4 << 20)?;
    socket.set_send_buffer_size(4 << 20)?;
    socket.bind(&localhost().into())?;
    socket.set_nonblocking(true)?;
    UdpSocket::from_std(socket.into())
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

// ----- opcodes -----

pub(crate) const OP_REQUEST: u16 = 0x01;
pub(crate) const OP_RESPONSE: u16 = 0x02;
pub(crate) const OP_MULTI: u16 = 0x03;
pub(crate) const OP_DISCONNECT: u16 = 0x05;
pub(crate) const OP_HEARTBEAT: u16 = 0x06;
pub(crate) const OP_NET_REQUEST: u16 = 0x07;
pub(crate) const OP_DATA: u16 = 0x09;
pub(crate) const OP_FRAGMENT: u16 = 0x0D;
pub(crate) const OP_ACK: u16 = 0x11;
pub(crate) const OP_ACK_ALL: u16 = 0x15;
pub(crate) const OP_UNKNOWN_SENDER: u16 = 0x1D;

/// Whether `op` carries reliable data (whole or fragment) on channel 0.
pub(crate) fn is_data(op: Option<u16>) -> bool {
    matches!(op, Some(OP_DATA | OP_FRAGMENT))
}
