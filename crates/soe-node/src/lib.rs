//! SOE sessions for Node.js: the native half of the `soe-node` npm package (see its README and
//! `index.js`, which wraps this in `SoeServer`, `SoeClient` and `SoeSession` classes).
//!
//! Each endpoint runs on soe-tokio inside a tokio runtime of the addon's own, off the JS thread:
//! acks, resends and timeouts never wait for JavaScript. Events reach JS in batches (one N-API
//! call for up to 256 events), at most 64 batches in flight: when JS falls
//! behind, the pump waits and each session's messages wait in its receive queue, bounded by
//! `receiveQueueBytes` (default 8 MiB). Acks, resends and heartbeats go on meanwhile. A session
//! whose reader stays behind past that bound is closed with `reliableOverflow` (both sides are
//! told) rather than let a peer fill memory. Sends that meet a full queue are kept in order and
//! go out as room appears; `send` returns `false` then, and a `drain` event follows, as with
//! `stream.write`. While any wait, later sends and RC4 switches queue behind them, so that
//! nothing overtakes a message on its way and each message is encrypted (or not) as it was when
//! the application sent it.
//!
//! Errors thrown to JS carry a code in front of their message (`ERR_SOE_...: ...`), which
//! `index.js` moves to the `code` property.

#![warn(clippy::too_many_lines)] // the limit is in clippy.toml

mod recording;

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use napi::bindgen_prelude::{Buffer, Float64Array};
use napi::threadsafe_function::{
    ErrorStrategy, ThreadSafeCallContext, ThreadsafeFunction, ThreadsafeFunctionCallMode,
};
use napi::{Env, Error, JsFunction, Result, Status};
use napi_derive::napi;
use soe_tokio::bytes::Bytes;
use soe_tokio::soe_session::ReliableConfig;
use soe_tokio::{
    Channel, Config, Connection, Delivery, DisconnectReason, Endpoint, EndpointConfig,
    EndpointEvent, EventMode, SessionConfig, SocketConfig, TrySendError,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::{Notify, mpsc};

/// Events handed to JS in one call, at most.
const BATCH: usize = 256;
/// Batches handed to the JS thread and not yet taken, at most: the pump waits for JS to take
/// one before it gathers the next, so whatever arrives while JS is busy rides in one batch
/// instead of a call each (a call into JS costs far more than a message).
const JS_QUEUE: usize = 64;

/// The addon's tokio runtime: one thread of its own ("soe-node"), shared by every endpoint of
/// the process. The endpoints' drivers and their event pumps all run on it, so the only
/// hand-offs between threads are the ones Node needs: events to the JS thread in batches, and
/// the JS thread's sends to the runtime. (With several workers the drivers and pumps woke each
/// other across threads for every batch, and the workers woke each other to steal the work.)
fn runtime() -> &'static tokio::runtime::Handle {
    static HANDLE: OnceLock<tokio::runtime::Handle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("the soe-node runtime starts");
        let handle = runtime.handle().clone();
        std::thread::Builder::new()
            .name("soe-node".into())
            .spawn(move || runtime.block_on(std::future::pending::<()>()))
            .expect("the soe-node runtime thread starts");
        handle
    })
}

fn code_error(code: &str, message: impl std::fmt::Display) -> Error {
    Error::new(Status::GenericFailure, format!("{code}: {message}"))
}

/// Why an endpoint did not start: `ERR_SOE_RANDOM` when the OS random generator failed (no
/// endpoint is made without it), else `ERR_SOE_BIND`.
fn bind_error(addr: SocketAddr, e: &std::io::Error) -> Error {
    let random = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<soe_tokio::soe_session::EndpointError>());
    match random {
        Some(random) => code_error("ERR_SOE_RANDOM", random),
        None => code_error("ERR_SOE_BIND", format!("cannot bind {addr}: {e}")),
    }
}

/// Endpoint settings (see `index.d.ts` for the JS names and defaults).
#[napi(object)]
pub struct NativeOptions {
    /// Accept sessions (`true`) or only connect.
    pub server: bool,
    /// The address to bind, `host:port`.
    pub bind: String,
    /// The application protocol name.
    pub protocol: Option<String>,
    /// The largest datagram announced and sent.
    pub udp_length: Option<u32>,
    /// The CRC trailer a server announces: 0, 2 or 4.
    pub crc_length: Option<u32>,
    /// Whether a server announces compression.
    pub compression: Option<bool>,
    /// The RC4 key for reliable data.
    pub rc4_key: Option<Buffer>,
    /// With a key: encrypt from the start (`true`, default) or start in plaintext.
    pub rc4_at_start: Option<bool>,
    /// Idle timeout in ms; 0 never.
    pub idle_timeout_ms: Option<u32>,
    /// Connect timeout in ms.
    pub connect_timeout_ms: Option<u32>,
    /// The most sessions.
    pub max_sessions: Option<u32>,
    /// Reliable messages queued per channel inside the endpoint.
    pub max_queued_messages: Option<u32>,
    /// The longest reliable message.
    pub max_message_size: Option<u32>,
    /// Bytes of received messages one session may hold before JS takes them.
    pub receive_queue_bytes: Option<u32>,
    /// A server accepts any application protocol name (sessions report the client's).
    pub accept_any_protocol: Option<bool>,
    /// While events keep coming, they go to JS at most once per this many milliseconds (0:
    /// each as soon as it is ready). Default 1 ms.
    pub event_batch_ms: Option<u32>,
    /// A server accepts a SessionRequest of any SOE protocol version (h1z1-server's clients
    /// may send 0). Default false.
    pub accept_any_protocol_version: Option<bool>,
    /// Small reliable messages are packed into one packet as a Group. Default true.
    pub bundle_messages: Option<bool>,
    /// Share the port with other sockets that set it (`SO_REUSEPORT`). Default false.
    pub reuse_port: Option<bool>,
    /// Apply the per-IP limits (SessionRequests a minute, stateless replies a second) to
    /// loopback sources too. Default false: relays and tests on the same host are not limited.
    pub limit_loopback: Option<bool>,
    /// A known peer's settings (`free-realms`, `osfr-libsoe`, `h1z1`, `planetside2`), under the
    /// other options. Default none.
    pub preset: Option<String>,
    /// The most bytes in flight per reliable channel. Default 204800 (200 KiB).
    pub max_outstanding_bytes: Option<u32>,
    /// The flight recorder records every session. Default false.
    pub record_sessions: Option<bool>,
    /// The most bytes one session's recording holds. Default 65536.
    pub record_session_bytes: Option<u32>,
    /// The most bytes the endpoint's recordings hold together. Default 67108864.
    pub record_endpoint_bytes: Option<u32>,
    /// Recordings hold the RC4 key. Default false: keys are never written.
    pub record_keys: Option<bool>,
}

/// The default of [`NativeOptions::event_batch_ms`]: 1 ms. A call into JS costs tens of
/// microseconds of the JS thread (a wake-up of its event loop, the call, the microtasks), far
/// more than a message; at a game server's load, with sessions sending independently, events
/// come one at a time and each would pay it. Held for at most a millisecond after the previous
/// call, they go in batches; the first event after a quiet millisecond goes at once.
const DEFAULT_EVENT_BATCH_MS: u32 = 1;

/// One event, before it is packed into a batch.
struct Ev {
    kind: u8,
    id: u64,
    channel: u8,
    delivery: u8,
    data: Option<Bytes>,
    /// The disconnect reason, or the SOE session id of an accepted session.
    reason: u32,
    by_peer: bool,
    remote: Option<String>,
    protocol: Option<String>,
}

impl Ev {
    fn new(kind: u8, id: u64) -> Self {
        Self {
            kind,
            id,
            channel: 0,
            delivery: 0,
            data: None,
            reason: 0,
            by_peer: false,
            remote: None,
            protocol: None,
        }
    }
}

/// Event kinds in a batch's `meta`.
const ACCEPTED: u8 = 1;
const MESSAGE: u8 = 2;
const DISCONNECT: u8 = 3;
const DRAIN: u8 = 4;
const END: u8 = 5;
/// Numbers per event in `meta`: kind, id, channel, delivery, offset, length, reason (the SOE
/// session id for an accepted session), by_peer.
const META: usize = 8;

/// A batch of events for JS, packed so that one N-API call carries hundreds of them: `meta`
/// holds 8 numbers per event, `data` every message's bytes back to back (each message
/// is a view into it), `remotes` the address and `protocols` the application protocol name of
/// each accepted session, in order.
#[napi(object)]
pub struct NativeBatch {
    /// Kind, id, channel, delivery (0 reliable, 1 unreliable, 2 ordered), offset and length in
    /// `data`, reason code (or the session id of an accepted session), by_peer (0 or 1), for
    /// each event.
    pub meta: Float64Array,
    /// The messages' bytes.
    pub data: Buffer,
    /// Remote addresses of accepted sessions.
    pub remotes: Vec<String>,
    /// Application protocol names of accepted sessions.
    pub protocols: Vec<String>,
}

fn pack(events: Vec<Ev>) -> NativeBatch {
    let mut meta = Vec::with_capacity(events.len() * META);
    let bytes: usize = events
        .iter()
        .filter_map(|e| e.data.as_ref())
        .map(Bytes::len)
        .sum();
    let mut data = Vec::with_capacity(bytes);
    let mut remotes = Vec::new();
    let mut protocols = Vec::new();
    for e in events {
        let (offset, len) = match &e.data {
            Some(d) => {
                let at = data.len();
                data.extend_from_slice(d);
                (at, d.len())
            }
            None => (0, 0),
        };
        if let Some(r) = e.remote {
            remotes.push(r);
            protocols.push(e.protocol.unwrap_or_default());
        }
        meta.extend_from_slice(&[
            f64::from(e.kind),
            e.id as f64,
            f64::from(e.channel),
            f64::from(e.delivery),
            offset as f64,
            len as f64,
            f64::from(e.reason),
            f64::from(u8::from(e.by_peer)),
        ]);
    }
    NativeBatch {
        meta: Float64Array::new(meta),
        data: Buffer::from(data),
        remotes,
        protocols,
    }
}

/// A session's counters.
#[napi(object)]
pub struct NativeStats {
    /// Smoothed round trip in ms (0 before a sample).
    pub rtt_ms: f64,
    /// Reliable packets sent for the first time.
    pub reliable_packets_sent: f64,
    /// Reliable packets sent again.
    pub resends: f64,
    /// Datagrams sent and received.
    pub datagrams_sent: f64,
    /// Datagrams received.
    pub datagrams_received: f64,
    /// Bytes sent and received.
    pub bytes_sent: f64,
    /// Bytes received.
    pub bytes_received: f64,
    /// Reliable messages sent and received.
    pub reliable_messages_sent: f64,
    /// Reliable messages received.
    pub reliable_messages_received: f64,
    /// Unreliable and ordered messages sent.
    pub unreliable_sent: f64,
    /// Unreliable and ordered messages received.
    pub unreliable_received: f64,
    /// Reliable packets that arrived ahead of the next expected one.
    pub out_of_order: f64,
    /// Reliable packets sent again because later ones were acknowledged (no timer waited).
    pub fast_resends: f64,
    /// Resends found unnecessary (the original's ack came back).
    pub spurious_resends: f64,
    /// Reliable packets lost: declared lost, resent, and not found spurious once acknowledged.
    pub lost: f64,
    /// Reliable packets received again.
    pub duplicates: f64,
    /// Acknowledge and AcknowledgeAll packets sent.
    pub acks_sent: f64,
    /// Acknowledge and AcknowledgeAll packets received.
    pub acks_received: f64,
    /// Messages waiting in this addon for room in the session's queue (the backpressure
    /// buffer), and their bytes.
    pub pending_messages: f64,
    /// Bytes of those.
    pub pending_bytes: f64,
}

/// What waits for room in a session's queue, in the order the application asked for it.
enum Item {
    /// A reliable message.
    Message(Channel, Bytes),
    /// An RC4 switch, which must fall between the messages sent before it and after it.
    Encryption(bool),
}

/// A session's writes that met a full queue, in order.
#[derive(Default)]
struct Pending {
    queue: VecDeque<Item>,
    /// Messages in `queue` (it also holds RC4 switches), and their bytes.
    messages: usize,
    bytes: usize,
    /// Whether a flushing task runs. While it does, it may hold a message it took from `queue`
    /// and has not yet handed to the session: everything else queues behind it, even when
    /// `queue` is empty.
    flushing: bool,
    /// Counts the flushing tasks started: a `drain` names the task that sent it, so that JS
    /// can tell a late `drain` of an earlier task from the one it waits for.
    epoch: u32,
}

impl Pending {
    fn push(&mut self, item: Item) {
        if let Item::Message(_, data) = &item {
            self.messages += 1;
            self.bytes += data.len();
        }
        self.queue.push_back(item);
    }

    fn pop(&mut self) -> Option<Item> {
        let item = self.queue.pop_front()?;
        if let Item::Message(_, data) = &item {
            self.messages -= 1;
            self.bytes -= data.len();
        }
        Some(item)
    }

    fn clear(&mut self) {
        self.queue.clear();
        self.messages = 0;
        self.bytes = 0;
        self.flushing = false;
    }
}

struct Session {
    conn: Connection,
    pending: Arc<Mutex<Pending>>,
}

struct Shared {
    endpoint: Endpoint,
    sessions: Mutex<HashMap<u64, Session>>,
    internal: mpsc::UnboundedSender<Ev>,
    /// The key written into recordings (`recordKeys`), if any.
    record_key: Option<Bytes>,
}

/// The function that takes the event batches, as the pump calls it from the runtime.
type EventsFn = ThreadsafeFunction<NativeBatch, ErrorStrategy::Fatal>;

/// An endpoint with its event pump.
#[napi]
pub struct NativeEndpoint {
    shared: Arc<Shared>,
    /// A second handle on the pump's function, for `ref` and `unref` (which act on the function
    /// itself, whichever handle calls them); given up by `release` once the endpoint has ended,
    /// so that it no longer keeps the process alive.
    events: Option<EventsFn>,
    /// Whether the application let the endpoint stop keeping the process alive (`unref`).
    unrefed: bool,
}

fn endpoint_config(o: &NativeOptions) -> Result<Config> {
    let invalid = |what: String| code_error("ERR_INVALID_ARG_VALUE", what);
    let base = match &o.preset {
        Some(name) => SessionConfig::preset(name.parse().map_err(|e| invalid(format!("{e}")))?),
        None => SessionConfig::default(),
    };
    let mut reliable: ReliableConfig = (**base.reliable()).clone();
    if let Some(n) = o.max_outstanding_bytes {
        reliable = reliable.with_max_outstanding_bytes(n.max(1) as usize);
    }
    if let Some(n) = o.max_queued_messages {
        reliable = reliable.with_max_queued_messages(n.max(1) as usize);
    }
    if let Some(n) = o.max_message_size {
        reliable = reliable.with_max_message_size(n.max(1) as usize);
    }
    if let Some(on) = o.bundle_messages {
        reliable = reliable.with_bundle_messages(on);
    }
    let protocol = match &o.protocol {
        Some(name) => name.as_bytes().to_vec(),
        None if !base.application_protocol().is_empty() => base.application_protocol().to_vec(),
        None => b"SoeEcho".to_vec(),
    };
    let mut s = base
        .with_application_protocol(protocol)
        .with_reliable(Arc::new(reliable))
        .map_err(|e| invalid(e.to_string()))?;
    if let Some(n) = o.udp_length {
        if !(soe_tokio::soe_session::MIN_UDP_LENGTH..=soe_tokio::soe_session::MAX_UDP_LENGTH)
            .contains(&n)
        {
            return Err(invalid(format!("udpLength {n} is not 64 to 65507")));
        }
        s = s.with_udp_length(n);
    }
    if let Some(n) = o.crc_length {
        let crc = match n {
            0 | 2 | 4 => soe_tokio::soe_session::CrcLength::new(n as u8),
            _ => None,
        }
        .ok_or_else(|| invalid(format!("crcLength {n} is not 0, 2 or 4")))?;
        s = s.with_crc_length(crc);
    }
    if let Some(c) = o.compression {
        s = s.with_compression(c);
    }
    if let Some(key) = &o.rc4_key {
        s = s
            .with_encryption_key(Bytes::copy_from_slice(key))
            .map_err(|e| invalid(format!("rc4Key: {e}")))?;
    }
    if let Some(on) = o.rc4_at_start {
        s = s.with_encryption_at_start(on);
    }
    if let Some(on) = o.accept_any_protocol {
        s = s.with_any_application_protocol(on);
    }
    if let Some(on) = o.accept_any_protocol_version {
        s = s.with_any_protocol_version(on);
    }
    if let Some(ms) = o.idle_timeout_ms {
        s = s.with_idle_timeout((ms > 0).then(|| Duration::from_millis(u64::from(ms))));
    }
    if let Some(ms) = o.connect_timeout_ms {
        s = s.with_connect_timeout(Duration::from_millis(u64::from(ms.max(1))));
    }
    let s = Arc::new(s);
    let mut e = if o.server {
        EndpointConfig::server(s.clone()).with_client(s)
    } else {
        EndpointConfig::client(s)
    };
    if let Some(n) = o.max_sessions {
        e = e.with_max_sessions(n.max(1) as usize);
    }
    if let Some(on) = o.limit_loopback {
        e = e.with_limit_loopback(on);
    }
    let mut config = Config::from(recording::configure(e, o)).with_event_mode(EventMode::Stream);
    if o.reuse_port == Some(true) {
        config = config.with_socket(SocketConfig::default().with_reuse_port(true));
    }
    if let Some(n) = o.receive_queue_bytes {
        config = config.with_receive_queue_bytes(n.max(1) as usize);
    }
    Ok(config)
}

fn reason_event(id: u64, reason: DisconnectReason, by_peer: bool) -> Ev {
    let mut ev = Ev::new(DISCONNECT, id);
    ev.reason = u32::from(reason.to_u16());
    ev.by_peer = by_peer;
    ev
}

/// Forwards the endpoint's events to JS in batches until the endpoint ends.
async fn pump(
    shared: Arc<Shared>,
    mut internal: mpsc::UnboundedReceiver<Ev>,
    js: ThreadsafeFunction<NativeBatch, ErrorStrategy::Fatal>,
    flow: Arc<(AtomicUsize, Notify)>,
    moderation: Duration,
) {
    let mut ended = false;
    let mut last_call: Option<std::time::Instant> = None;
    // Whether the last batch was full: then events come faster than batches carry them, and
    // holding the next batch would only cap the rate (at BATCH per timer tick), not save calls.
    let mut last_full = false;
    while !ended {
        // Wait until JS has taken the batch before (backpressure: the pump never drops, and no
        // runtime thread blocks on JS); what arrives meanwhile waits in the endpoint's queue and
        // goes in the next batch.
        loop {
            let room = flow.1.notified();
            if flow.0.load(Ordering::Acquire) < JS_QUEUE {
                break;
            }
            room.await;
        }
        // Events keep coming: hold them until `moderation` after the last call, so they go in
        // one (see DEFAULT_EVENT_BATCH_MS).
        if let Some(until) = last_call.map(|last| last + moderation) {
            if !moderation.is_zero() && !last_full && std::time::Instant::now() < until {
                hold_until(until).await;
            }
        }
        let mut batch = Vec::new();
        tokio::select! {
            biased;
            Some(ev) = internal.recv() => batch.push(ev),
            ev = shared.endpoint.next_event() => match ev {
                Some(ev) => batch.extend(convert(&shared, ev)),
                None => ended = true,
            },
        }
        // Whatever else is ready now rides in the same call.
        while batch.len() < BATCH && !ended {
            if let Ok(ev) = internal.try_recv() {
                batch.push(ev);
                continue;
            }
            match futures_now(shared.endpoint.next_event()) {
                Some(Some(ev)) => batch.extend(convert(&shared, ev)),
                Some(None) => ended = true,
                None => break,
            }
        }
        last_full = batch.len() >= BATCH;
        if ended {
            batch.push(Ev::new(END, 0));
        }
        let batch = pack(batch);
        flow.0.fetch_add(1, Ordering::AcqRel);
        last_call = Some(std::time::Instant::now());
        let status = js.call(batch, ThreadsafeFunctionCallMode::NonBlocking);
        if status != Status::Ok {
            break;
        }
    }
}

/// Waits until `deadline` on the addon's hold timer (see [`Hold`]).
async fn hold_until(deadline: std::time::Instant) {
    std::future::poll_fn(|cx| hold_timer().poll(deadline, cx)).await;
}

/// The hold timer: one thread of its own ("soe-node-hold") that wakes the pumps that hold
/// events back (`eventBatchMs`) when their window ends. Tokio's timer counts whole
/// milliseconds and rounds a sleep up, to its next tick and then the poller's timeout again,
/// so a 1 ms hold lasted 1 to 3 ms (2.2 ms at the median); a condition variable's timed wait
/// ends within the OS's timer slack (about 50 µs on Linux).
struct Hold {
    waiting: Mutex<Vec<(std::time::Instant, std::task::Waker)>>,
    changed: std::sync::Condvar,
}

fn hold_timer() -> &'static Hold {
    static HOLD: OnceLock<&'static Hold> = OnceLock::new();
    HOLD.get_or_init(|| {
        let hold: &'static Hold = Box::leak(Box::new(Hold {
            waiting: Mutex::new(Vec::new()),
            changed: std::sync::Condvar::new(),
        }));
        std::thread::Builder::new()
            .name("soe-node-hold".into())
            .spawn(move || hold.run())
            .expect("the soe-node hold timer thread starts");
        hold
    })
}

impl Hold {
    /// Ready once `deadline` has passed; until then the waker is filed for the timer thread.
    fn poll(
        &self,
        deadline: std::time::Instant,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if std::time::Instant::now() >= deadline {
            return std::task::Poll::Ready(());
        }
        if let Ok(mut waiting) = self.waiting.lock() {
            waiting.push((deadline, cx.waker().clone()));
            self.changed.notify_one();
        }
        std::task::Poll::Pending
    }

    /// The timer thread: wakes each filed waker at its deadline.
    fn run(&self) {
        let Ok(mut waiting) = self.waiting.lock() else {
            return;
        };
        loop {
            let now = std::time::Instant::now();
            waiting.retain(|(deadline, waker)| {
                let due = *deadline <= now;
                if due {
                    waker.wake_by_ref();
                }
                !due
            });
            let next = waiting.iter().map(|(deadline, _)| *deadline).min();
            let resumed = match next {
                Some(deadline) => self
                    .changed
                    .wait_timeout(waiting, deadline.saturating_duration_since(now))
                    .map(|(guard, _)| guard)
                    .map_err(|_| ()),
                None => self.changed.wait(waiting).map_err(|_| ()),
            };
            let Ok(guard) = resumed else {
                return;
            };
            waiting = guard;
        }
    }
}

/// Polls a future once: its output if it is ready now.
fn futures_now<F: Future>(f: F) -> Option<F::Output> {
    let mut f = std::pin::pin!(f);
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => Some(v),
        std::task::Poll::Pending => None,
    }
}

fn convert(shared: &Shared, ev: EndpointEvent) -> Option<Ev> {
    match ev {
        EndpointEvent::Accepted(conn) => {
            let id = conn.id().value();
            let mut out = Ev::new(ACCEPTED, id);
            out.remote = Some(conn.remote_addr().to_string());
            out.reason = conn.session_id().unwrap_or_default();
            out.protocol = conn
                .application_protocol()
                .map(|p| String::from_utf8_lossy(&p).into_owned());
            shared.sessions.lock().ok()?.insert(
                id,
                Session {
                    conn,
                    pending: Arc::default(),
                },
            );
            Some(out)
        }
        EndpointEvent::Message {
            connection,
            channel,
            data,
            kind,
        } => {
            let mut out = Ev::new(MESSAGE, connection.value());
            out.channel = channel.index() as u8;
            out.delivery = match kind {
                Delivery::Reliable => 0,
                Delivery::Ordered => 2,
                _ => 1,
            };
            out.data = Some(data);
            Some(out)
        }
        EndpointEvent::Closed { connection, reason } => {
            let id = connection.value();
            let session = shared.sessions.lock().ok().and_then(|mut s| s.remove(&id));
            let mut out = reason_event(id, reason.reason, reason.by_peer);
            // A session that ended abnormally, recorded: its capture rides with the event.
            out.data = session.and_then(|s| {
                let local = shared.endpoint.local_addr();
                recording::capture(&s.conn, local, shared.record_key.as_ref())
            });
            Some(out)
        }
        _ => None,
    }
}

fn bad_session(id: f64) -> Error {
    code_error(
        "ERR_SOE_SESSION_CLOSED",
        format!("session {id} is closed (or was never opened)"),
    )
}

impl NativeEndpoint {
    fn with_session<T>(&self, id: f64, f: impl FnOnce(&Session) -> Result<T>) -> Result<T> {
        let sessions = self
            .shared
            .sessions
            .lock()
            .map_err(|_| code_error("ERR_SOE_INTERNAL", "lock poisoned"))?;
        let session = sessions.get(&(id as u64)).ok_or_else(|| bad_session(id))?;
        f(session)
    }
}

fn send_error(e: TrySendError) -> Error {
    match e {
        TrySendError::Session(e @ soe_tokio::soe_session::SendError::TooLarge { .. }) => {
            code_error("ERR_SOE_MESSAGE_TOO_LARGE", e)
        }
        TrySendError::Session(
            e @ (soe_tokio::soe_session::SendError::EmptyUnreliable
            | soe_tokio::soe_session::SendError::ZeroFirstByte),
        ) => code_error("ERR_INVALID_ARG_VALUE", e),
        TrySendError::Session(soe_tokio::soe_session::SendError::Closed) => {
            code_error("ERR_SOE_SESSION_CLOSED", "the session is closing")
        }
        TrySendError::Closed(_) => code_error("ERR_SOE_SESSION_CLOSED", "the session is closed"),
        other => code_error("ERR_SOE_SEND", other),
    }
}

fn channel_of(channel: u32) -> Result<Channel> {
    u8::try_from(channel)
        .ok()
        .and_then(Channel::new)
        .ok_or_else(|| code_error("ERR_INVALID_ARG_VALUE", "channel must be 0 to 3"))
}

/// Queues a reliable message of session `s`: into the session through `try_send` when nothing
/// waits before it, else behind the others in its pending queue, sent by a flushing task as room
/// appears; returns the flushing task's epoch when the queue is in use (its `drain` reports
/// it).
fn submit_with(
    shared: &Shared,
    s: &Session,
    id: u64,
    channel: Channel,
    data: Bytes,
    try_send: impl FnOnce(Bytes) -> std::result::Result<(), TrySendError>,
) -> Result<Option<u32>> {
    let mut pending = s
        .pending
        .lock()
        .map_err(|_| code_error("ERR_SOE_INTERNAL", "lock poisoned"))?;
    // Straight to the session only when nothing waits and no flushing task holds a message.
    if pending.queue.is_empty() && !pending.flushing {
        match try_send(data) {
            Ok(()) => return Ok(None),
            Err(TrySendError::Full(data)) => pending.push(Item::Message(channel, data)),
            Err(e) => return Err(send_error(e)),
        }
    } else {
        pending.push(Item::Message(channel, data));
    }
    if !pending.flushing {
        pending.flushing = true;
        pending.epoch = pending.epoch.wrapping_add(1);
        spawn_flush(shared, s, id, pending.epoch);
    }
    Ok(Some(pending.epoch))
}

/// Sends what waits in a session's queue, in order, as room appears; reports `drain` when it is
/// empty. Started with `flushing` set; clears it when it finds the queue empty (under the lock,
/// so a send either sees it set or finds the queue empty and the task gone).
fn spawn_flush(shared: &Shared, s: &Session, id: u64, epoch: u32) {
    let conn = s.conn.clone();
    let pending = s.pending.clone();
    let internal = shared.internal.clone();
    runtime().spawn(async move {
        loop {
            let next = pending.lock().ok().and_then(|mut p| {
                let item = p.pop();
                if item.is_none() {
                    p.flushing = false;
                }
                item
            });
            let sent = match next {
                None => {
                    let mut drain = Ev::new(DRAIN, id);
                    drain.reason = epoch;
                    let _ = internal.send(drain);
                    return;
                }
                Some(Item::Encryption(on)) => {
                    conn.set_encryption(on);
                    Ok(())
                }
                Some(Item::Message(channel, data)) => conn.send_on(channel, data).await,
            };
            if sent.is_err() {
                if let Ok(mut p) = pending.lock() {
                    p.clear();
                }
                return;
            }
        }
    });
}

#[napi]
impl NativeEndpoint {
    /// Binds an endpoint; `on_events` receives arrays of events.
    #[napi(constructor)]
    pub fn new(options: NativeOptions, on_events: JsFunction) -> Result<Self> {
        let config = endpoint_config(&options)?;
        let addr: SocketAddr = options.bind.parse().map_err(|_| {
            code_error(
                "ERR_INVALID_ARG_VALUE",
                format!("{:?} is not an IP address and port", options.bind),
            )
        })?;
        // Batches handed to JS and not yet taken by it (see `pump`).
        let flow = Arc::new((AtomicUsize::new(0), Notify::new()));
        let taken = flow.clone();
        let js: EventsFn = on_events.create_threadsafe_function(
            0,
            move |ctx: ThreadSafeCallContext<NativeBatch>| {
                taken.0.fetch_sub(1, Ordering::AcqRel);
                taken.1.notify_one();
                Ok(vec![ctx.value])
            },
        )?;
        let endpoint = {
            let _guard = runtime().enter();
            Endpoint::bind(addr, config).map_err(|e| bind_error(addr, &e))?
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            endpoint,
            sessions: Mutex::new(HashMap::new()),
            internal: tx,
            record_key: recording::key(&options),
        });
        let events = Some(js.clone());
        let moderation = Duration::from_millis(u64::from(
            options.event_batch_ms.unwrap_or(DEFAULT_EVENT_BATCH_MS),
        ));
        runtime().spawn(pump(shared.clone(), rx, js, flow, moderation));
        Ok(Self {
            shared,
            events,
            unrefed: false,
        })
    }

    /// Lets the process exit while this endpoint is open (Node's `unref`); connects started
    /// afterwards do not keep it alive either.
    #[napi]
    pub fn unref(&mut self, env: Env) -> Result<()> {
        self.unrefed = true;
        match self.events.as_mut() {
            Some(events) => events.unref(&env),
            None => Ok(()),
        }
    }

    /// Undoes `unref`: the open endpoint keeps the process alive again.
    #[napi(js_name = "ref")]
    pub fn refer(&mut self, env: Env) -> Result<()> {
        self.unrefed = false;
        match self.events.as_mut() {
            Some(events) => events.refer(&env),
            None => Ok(()),
        }
    }

    /// Gives up the second handle on the event function once the endpoint has ended.
    #[napi]
    pub fn release(&mut self) {
        self.events = None;
    }

    /// The bound address, `host:port`.
    #[napi]
    pub fn local_address(&self) -> String {
        self.shared.endpoint.local_addr().to_string()
    }

    /// Opens a session to `address`; `callback(error, id)` follows. An address of the other
    /// family than the bound socket's is refused at once: the socket cannot send to it.
    #[napi]
    pub fn connect(&self, env: Env, address: String, callback: JsFunction) -> Result<()> {
        let addr: SocketAddr = address.parse().map_err(|_| {
            code_error(
                "ERR_INVALID_ARG_VALUE",
                format!("{address:?} is not an IP address and port"),
            )
        })?;
        let local = self.shared.endpoint.local_addr();
        if addr.is_ipv4() != local.is_ipv4() {
            let family = |a: &SocketAddr| if a.is_ipv4() { "IPv4" } else { "IPv6" };
            return Err(code_error(
                "ERR_SOE_ADDRESS_FAMILY",
                format!(
                    "cannot reach {addr} ({}) from a client bound to {local} ({}): bind the \
                     client to an {} address (options.bind, e.g. {:?})",
                    family(&addr),
                    family(&local),
                    family(&addr),
                    if addr.is_ipv4() {
                        "0.0.0.0:0"
                    } else {
                        "[::]:0"
                    },
                ),
            ));
        }
        type Connected = std::result::Result<(f64, f64), String>;
        let mut done: ThreadsafeFunction<Connected, ErrorStrategy::Fatal> = callback
            .create_threadsafe_function(0, |ctx: ThreadSafeCallContext<Connected>| {
                let env = ctx.env;
                Ok(match ctx.value {
                    Ok((id, session_id)) => vec![
                        env.get_null()?.into_unknown(),
                        env.create_double(id)?.into_unknown(),
                        env.create_double(session_id)?.into_unknown(),
                    ],
                    Err(m) => vec![env.create_string(&m)?.into_unknown()],
                })
            })?;
        if self.unrefed {
            done.unref(&env)?;
        }
        let shared = self.shared.clone();
        runtime().spawn(async move {
            let result = match shared.endpoint.connect(addr).await {
                Ok(conn) => {
                    let id = conn.id().value();
                    let session_id = f64::from(conn.session_id().unwrap_or_default());
                    if let Ok(mut s) = shared.sessions.lock() {
                        s.insert(
                            id,
                            Session {
                                conn,
                                pending: Arc::default(),
                            },
                        );
                    }
                    Ok((id as f64, session_id))
                }
                Err(e) => Err(format!("ERR_SOE_CONNECT: {e}")),
            };
            done.call(result, ThreadsafeFunctionCallMode::NonBlocking);
        });
        Ok(())
    }

    /// Queues many reliable messages in one call: `meta` holds (id, channel, length) for each,
    /// `data` their bytes back to back. Messages of sessions that have closed are dropped.
    /// Returns (id, epoch) pairs for the sessions whose queue is full now: the flushing task
    /// `epoch` of each reports a `drain` carrying that epoch.
    #[napi]
    pub fn send_batch(&self, meta: Float64Array, data: Buffer) -> Result<Vec<f64>> {
        let all = Bytes::copy_from_slice(&data);
        let sessions = self
            .shared
            .sessions
            .lock()
            .map_err(|_| code_error("ERR_SOE_INTERNAL", "lock poisoned"))?;
        let mut full = Vec::new();
        let mut offset = 0usize;
        // One lock for the whole batch, and its datagrams sent from this (the JS) thread, in as
        // few system calls as the socket allows, rather than a wake-up of the runtime's thread.
        self.shared.endpoint.send_batch(|batch| {
            for item in meta.chunks_exact(3) {
                let (id, channel, len) = (item[0], item[1], item[2] as usize);
                let end = offset.saturating_add(len).min(all.len());
                let message = all.slice(offset..end);
                offset = end;
                let Some(s) = sessions.get(&(id as u64)) else {
                    continue;
                };
                let channel = channel_of(channel as u32)?;
                let submitted = submit_with(&self.shared, s, id as u64, channel, message, |data| {
                    batch.try_send_on(&s.conn, channel, data)
                });
                match submitted {
                    Ok(None) => {}
                    Ok(Some(epoch)) => {
                        let epoch = f64::from(epoch);
                        if full.len() >= 2 && full[full.len() - 2] == id {
                            let at = full.len() - 1;
                            full[at] = epoch;
                        } else {
                            full.push(id);
                            full.push(epoch);
                        }
                    }
                    // A session that is closing takes nothing more; its disconnect event follows.
                    Err(_) => {}
                }
            }
            Ok(full)
        })
    }

    /// Sends an unreliable message (one datagram; first byte not 0).
    #[napi]
    pub fn send_unreliable(&self, id: f64, data: Buffer) -> Result<()> {
        self.with_session(id, |s| {
            s.conn
                .send_unreliable(Bytes::copy_from_slice(&data))
                .map_err(send_error)
        })
    }

    /// Sends an ordered message (one datagram; first byte not 0; stale ones dropped on arrival).
    #[napi]
    pub fn send_ordered(&self, id: f64, data: Buffer) -> Result<()> {
        self.with_session(id, |s| {
            s.conn
                .send_ordered(Bytes::copy_from_slice(&data))
                .map_err(send_error)
        })
    }

    /// Closes a session with a reason code.
    #[napi]
    pub fn close_session(&self, id: f64, reason: u32) -> Result<()> {
        let reason = DisconnectReason::from_u16(u16::try_from(reason).unwrap_or(6));
        self.with_session(id, |s| {
            s.conn.close(reason);
            Ok(())
        })
    }

    /// Turns RC4 on or off for one session, after the messages sent before (some may still
    /// wait for room); `false` when it has no key (JS checks that first when messages wait).
    #[napi]
    pub fn set_encryption(&self, id: f64, on: bool) -> Result<bool> {
        self.with_session(id, |s| {
            let mut pending = s
                .pending
                .lock()
                .map_err(|_| code_error("ERR_SOE_INTERNAL", "lock poisoned"))?;
            if pending.queue.is_empty() && !pending.flushing {
                return Ok(s.conn.set_encryption(on));
            }
            pending.push(Item::Encryption(on));
            Ok(true)
        })
    }

    /// A session's counters.
    #[napi]
    pub fn stats(&self, id: f64) -> Result<NativeStats> {
        self.with_session(id, |s| {
            let st = s.conn.stats().ok_or_else(|| bad_session(id))?;
            let (pending_messages, pending_bytes) = s
                .pending
                .lock()
                .map(|p| (p.messages as f64, p.bytes as f64))
                .unwrap_or_default();
            Ok(NativeStats {
                rtt_ms: st.rtt.map_or(0.0, |d| d.as_secs_f64() * 1000.0),
                reliable_packets_sent: st.reliable_packets_sent as f64,
                resends: st.resends as f64,
                datagrams_sent: st.datagrams_sent as f64,
                datagrams_received: st.datagrams_received as f64,
                bytes_sent: st.bytes_sent as f64,
                bytes_received: st.bytes_received as f64,
                reliable_messages_sent: st.reliable_messages_sent as f64,
                reliable_messages_received: st.reliable_messages_received as f64,
                unreliable_sent: st.unreliable_sent as f64,
                unreliable_received: st.unreliable_received as f64,
                out_of_order: st.out_of_order as f64,
                fast_resends: st.fast_resends as f64,
                spurious_resends: st.spurious_resends as f64,
                lost: st.packets_lost as f64,
                duplicates: st.duplicates as f64,
                acks_sent: st.acks_sent as f64,
                acks_received: st.acks_received as f64,
                pending_messages,
                pending_bytes,
            })
        })
    }

    /// Starts or stops recording one session with the flight recorder; `false` once it ended.
    #[napi]
    pub fn set_recording(&self, id: f64, on: bool) -> Result<bool> {
        self.with_session(id, |s| Ok(s.conn.set_recording(on)))
    }

    /// A live session's recording so far as a pcapng capture (it goes on recording, from
    /// empty), or `null` when it is not recorded.
    #[napi]
    pub fn take_recording(&self, id: f64) -> Result<Option<Buffer>> {
        let local = self.shared.endpoint.local_addr();
        let key = self.shared.record_key.as_ref();
        self.with_session(id, |s| {
            Ok(recording::capture(&s.conn, local, key).map(|b| Buffer::from(b.to_vec())))
        })
    }

    /// Sessions open on the endpoint.
    #[napi]
    pub fn session_count(&self) -> u32 {
        u32::try_from(self.shared.endpoint.session_count()).unwrap_or(u32::MAX)
    }

    /// Datagrams the endpoint sent and received: `[sent, received]`.
    #[napi]
    pub fn datagrams(&self) -> Vec<f64> {
        let s = self.shared.endpoint.stats();
        vec![s.datagrams_sent as f64, s.datagrams_received as f64]
    }

    /// Closes every session and the endpoint; an `end` event follows.
    #[napi]
    pub fn close(&self, reason: u32) {
        let reason = DisconnectReason::from_u16(u16::try_from(reason).unwrap_or(4));
        self.shared.endpoint.close(reason);
    }
}
