//! SOE sessions for Node.js: the native half of the `soe-node` npm package (see its README and
//! `index.js`, which wraps this in `SoeServer`, `SoeClient` and `SoeSession` classes).
//!
//! Each endpoint runs on soe-runtime's blocking event loop, by default on a thread of its own
//! (the pump, `src/pump.rs`), off the JS thread (`eventThread: 'js'` drives it from the JS
//! thread's libuv loop instead: `src/js_thread.rs`): acks, resends and timeouts never wait for JavaScript. The
//! pump blocks in the kernel between wake-ups and hands events to JS in batches (one N-API call
//! for up to 256 events), at most 64 batches in flight: when JS falls behind, the pump stops
//! taking events and each session's messages wait in the endpoint's receive queue, bounded by
//! `receiveQueueBytes` (default 8 MiB), while acks, resends and heartbeats go on. A session
//! whose reader stays behind past that bound is closed with `reliableOverflow` (both sides are
//! told) rather than let a peer fill memory.
//!
//! JS sends at the end of each tick, every message of every session in one call
//! ([`NativeEndpoint::send_batch`]): reliable, unreliable and ordered ones, queued under one
//! lock, and their datagrams sent from the JS thread (one `sendmmsg` on Linux), with no
//! hand-off to the pump. Reliable messages that meet a full queue are kept in order
//! (`src/pending.rs`) and the pump passes them on as room appears; `send` returns `false` then,
//! and a `drain` event follows, as with `stream.write`. While any wait, later sends and RC4
//! switches queue behind them, so that nothing overtakes a message on its way and each message
//! is encrypted (or not) as it was when the application sent it.
//!
//! Errors thrown to JS carry a code in front of their message (`ERR_SOE_...: ...`), which
//! `index.js` moves to the `code` property.

#![warn(clippy::too_many_lines)] // the limit is in clippy.toml

mod guard;
mod js_thread;
mod pending;
mod pump;
mod recording;
mod uv;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use napi::bindgen_prelude::Buffer;
use napi::threadsafe_function::ThreadSafeCallContext;
use napi::{Env, Error, JsFunction, JsUnknown, Result, Status};
use napi_derive::napi;
use soe_runtime::blocking::{EventLoop, EventLoopHandle};
use soe_runtime::bytes::Bytes;
use soe_runtime::soe_session::ReliableConfig;
use soe_runtime::{
    Channel, Config, Connection, DisconnectReason, EndpointConfig, EventMode, SessionConfig,
    SocketConfig, TrySendError,
};

use crate::js_thread::JsThread;
use crate::pending::Pending;
use crate::pump::{EventsFn, Flow, lock};

fn code_error(code: &str, message: impl std::fmt::Display) -> Error {
    Error::new(Status::GenericFailure, format!("{code}: {message}"))
}

/// Why an endpoint did not start: `ERR_SOE_RANDOM` when the OS random generator failed (no
/// endpoint is made without it), else `ERR_SOE_BIND`.
fn bind_error(addr: SocketAddr, e: &std::io::Error) -> Error {
    let random = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<soe_runtime::soe_session::EndpointError>());
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
    /// Where the endpoint runs: `pump` (a thread of its own) or `js` (the JS thread's event
    /// loop; the pump when the host lacks what that needs). Default `pump`.
    pub event_thread: Option<String>,
}

/// The default of [`NativeOptions::event_batch_ms`]: 1 ms. A call into JS costs tens of
/// microseconds of the JS thread (a wake-up of its event loop, the call, the microtasks), far
/// more than a message; at a game server's load, with sessions sending independently, events
/// come one at a time and each would pay it. Held for at most a millisecond after the previous
/// call, they go in batches; the first event after a quiet millisecond goes at once.
const DEFAULT_EVENT_BATCH_MS: u32 = 1;

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
    /// Unreliable and ordered messages dropped because the session's datagram queue was full
    /// (256 not yet sent).
    pub unreliable_dropped: f64,
}

/// The kinds of message in `send_batch`'s `meta`, beside the reliable channels 0 to 3.
const SEND_UNRELIABLE: u32 = 4;
const SEND_ORDERED: u32 = 5;

/// One session, as the binding keeps it.
pub(crate) struct Session {
    conn: Connection,
    /// Its writes that wait for room.
    pending: Pending,
    /// Unreliable and ordered messages dropped because its datagram queue was full.
    dropped: u64,
}

impl Session {
    pub(crate) fn new(conn: Connection) -> Self {
        Self {
            conn,
            pending: Pending::default(),
            dropped: 0,
        }
    }
}

/// What the JS thread and the pump share.
pub(crate) struct Shared {
    /// The endpoint's event loop, driven by the pump.
    events: EventLoopHandle,
    local_addr: SocketAddr,
    /// The open sessions by id. Lock order: this, then the endpoint's own lock (taken by its
    /// calls); nothing takes this while holding that.
    sessions: Mutex<HashMap<u64, Session>>,
    /// Sessions with writes waiting for room, for the pump to flush.
    flushing: Mutex<Vec<u64>>,
    /// The key written into recordings (`recordKeys`), if any.
    record_key: Option<Bytes>,
}

/// An endpoint with its pump.
#[napi]
pub struct NativeEndpoint {
    shared: Arc<Shared>,
    /// A second handle on the pump's function, for `ref` and `unref` (which act on the function
    /// itself, whichever handle calls them); given up by `release` once the endpoint has ended,
    /// so that it no longer keeps the process alive.
    events: Option<EventsFn>,
    /// The endpoint on the JS thread's loop (`eventThread: 'js'`), instead of a pump.
    local: Option<Rc<JsThread>>,
}

/// The arguments of a call into JS with a batch: its bytes (in an `ArrayBuffer` of their own,
/// which costs V8 less to make than a `Buffer`: no prototype to set), its count, and its
/// strings (or `undefined`).
pub(crate) fn batch_args(env: &Env, batch: &pump::Packed) -> Result<Vec<JsUnknown>> {
    let texts = if batch.texts.is_empty() {
        env.get_undefined()?.into_unknown()
    } else {
        let mut array = env.create_array_with_length(batch.texts.len())?;
        for (i, text) in batch.texts.iter().enumerate() {
            array.set_element(
                u32::try_from(i).unwrap_or(u32::MAX),
                env.create_string(text)?,
            )?;
        }
        array.into_unknown()
    };
    let mut bytes = env.create_arraybuffer(batch.bytes.len())?;
    // Empty only when the batch is (then so is the new buffer, and nothing is copied).
    if let Some(to) = bytes.as_mut().get_mut(..batch.bytes.len()) {
        to.copy_from_slice(&batch.bytes);
    }
    Ok(vec![
        bytes.into_unknown(),
        env.create_uint32(batch.events)?.into_unknown(),
        texts,
    ])
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
        if !(soe_runtime::soe_session::MIN_UDP_LENGTH..=soe_runtime::soe_session::MAX_UDP_LENGTH)
            .contains(&n)
        {
            return Err(invalid(format!("udpLength {n} is not 64 to 65507")));
        }
        s = s.with_udp_length(n);
    }
    if let Some(n) = o.crc_length {
        let crc = match n {
            0 | 2 | 4 => soe_runtime::soe_session::CrcLength::new(n as u8),
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

fn bad_session(id: f64) -> Error {
    code_error(
        "ERR_SOE_SESSION_CLOSED",
        format!("session {id} is closed (or was never opened)"),
    )
}

impl NativeEndpoint {
    fn with_session<T>(&self, id: f64, f: impl FnOnce(&mut Session) -> Result<T>) -> Result<T> {
        let mut sessions = lock(&self.shared.sessions);
        let session = sessions
            .get_mut(&(id as u64))
            .ok_or_else(|| bad_session(id))?;
        let out = f(session);
        drop(sessions);
        self.kick();
        out
    }

    /// On the JS thread's loop: after a call that may have given the endpoint work (a send, a
    /// close, a connect), moves its timer to the next turn (no wake-up is needed otherwise).
    fn kick(&self) {
        if let Some(local) = &self.local {
            local.kick();
        }
    }
}

fn channel_of(channel: u32) -> Result<Channel> {
    u8::try_from(channel)
        .ok()
        .and_then(Channel::new)
        .ok_or_else(|| code_error("ERR_INVALID_ARG_VALUE", "channel must be 0 to 3"))
}

/// The refusal of the addon's address family check, or `None` when `addr` can be reached from
/// a socket bound to `local`.
fn family_error(addr: SocketAddr, local: SocketAddr) -> Option<Error> {
    if addr.is_ipv4() == local.is_ipv4() {
        return None;
    }
    let family = |a: &SocketAddr| if a.is_ipv4() { "IPv4" } else { "IPv6" };
    Some(code_error(
        "ERR_SOE_ADDRESS_FAMILY",
        format!(
            "cannot reach {addr} ({}) from a client bound to {local} ({}): bind the client to an \
             {} address (options.bind, e.g. {:?})",
            family(&addr),
            family(&local),
            family(&addr),
            if addr.is_ipv4() {
                "0.0.0.0:0"
            } else {
                "[::]:0"
            },
        ),
    ))
}

#[napi]
impl NativeEndpoint {
    /// Binds an endpoint and starts driving it (see `eventThread`); `on_events` receives the
    /// event batches.
    #[napi(constructor)]
    pub fn new(env: Env, options: NativeOptions, on_events: JsFunction) -> Result<Self> {
        let config = endpoint_config(&options)?;
        let on_js = match options.event_thread.as_deref() {
            Some("pump") => false,
            None | Some("js") => true,
            Some(other) => {
                return Err(code_error(
                    "ERR_INVALID_ARG_VALUE",
                    format!("eventThread {other:?} is not 'pump' or 'js'"),
                ));
            }
        };
        let addr: SocketAddr = options.bind.parse().map_err(|_| {
            code_error(
                "ERR_INVALID_ARG_VALUE",
                format!("{:?} is not an IP address and port", options.bind),
            )
        })?;
        let events = EventLoop::bind(addr, config).map_err(|e| bind_error(addr, &e))?;
        let shared = Arc::new(Shared {
            events: events.handle(),
            local_addr: events.local_addr(),
            sessions: Mutex::new(HashMap::new()),
            flushing: Mutex::new(Vec::new()),
            record_key: recording::key(&options),
        });
        let moderation = Duration::from_millis(u64::from(
            options.event_batch_ms.unwrap_or(DEFAULT_EVENT_BATCH_MS),
        ));
        let events = if on_js {
            match js_thread::start(&env, events, shared.clone(), &on_events, moderation) {
                Ok(local) => {
                    return Ok(Self {
                        shared,
                        events: None,
                        local: Some(local),
                    });
                }
                // Something the JS thread's loop needs is missing: the pump drives it.
                Err(events) => *events,
            }
        } else {
            events
        };
        let flow = Arc::new(Flow::new(events.handle()));
        let taken = flow.clone();
        let js: EventsFn = on_events.create_threadsafe_function(
            0,
            move |ctx: ThreadSafeCallContext<pump::Packed>| {
                taken.taken();
                batch_args(&ctx.env, &ctx.value)
            },
        )?;
        pump::start(events, shared.clone(), js.clone(), flow, moderation)
            .map_err(|e| code_error("ERR_SOE_INTERNAL", format!("cannot start a thread: {e}")))?;
        Ok(Self {
            shared,
            events: Some(js),
            local: None,
        })
    }

    /// Where the endpoint runs: `pump` or `js` (see `eventThread`).
    #[napi]
    pub fn event_thread(&self) -> String {
        if self.local.is_some() { "js" } else { "pump" }.to_owned()
    }

    /// Lets the process exit while this endpoint is open (Node's `unref`), sessions and
    /// connects in progress included.
    #[napi]
    pub fn unref(&mut self, env: Env) -> Result<()> {
        if let Some(local) = &self.local {
            local.set_ref(false);
        }
        match self.events.as_mut() {
            Some(events) => events.unref(&env),
            None => Ok(()),
        }
    }

    /// Undoes `unref`: the open endpoint keeps the process alive again.
    #[napi(js_name = "ref")]
    pub fn refer(&mut self, env: Env) -> Result<()> {
        if let Some(local) = &self.local {
            local.set_ref(true);
        }
        match self.events.as_mut() {
            Some(events) => events.refer(&env),
            None => Ok(()),
        }
    }

    /// Gives up the second handle on the event function once the endpoint has ended.
    #[napi]
    pub fn release(&mut self) {
        self.events = None;
        self.local = None;
    }

    /// The bound address, `host:port`.
    #[napi]
    pub fn local_address(&self) -> String {
        self.shared.local_addr.to_string()
    }

    /// Opens a session to `address` and returns its id at once; a `connected` (with its session
    /// id) or a `connectFailed` event (with the error) follows in a batch. An address of the
    /// other family than the bound socket's is refused at once: the socket cannot send to it.
    #[napi]
    pub fn connect(&self, address: String) -> Result<f64> {
        let addr: SocketAddr = address.parse().map_err(|_| {
            code_error(
                "ERR_INVALID_ARG_VALUE",
                format!("{address:?} is not an IP address and port"),
            )
        })?;
        if let Some(e) = family_error(addr, self.shared.local_addr) {
            return Err(e);
        }
        // Held across the connect, so that the pump finds the session filed when its
        // `connected` comes.
        let mut sessions = lock(&self.shared.sessions);
        let conn = self
            .shared
            .events
            .connect(addr)
            .map_err(|e| code_error("ERR_SOE_CONNECT", e))?;
        let id = conn.id().value();
        sessions.insert(id, Session::new(conn));
        drop(sessions);
        self.kick();
        Ok(id as f64)
    }

    /// Queues many messages in one call: the first `numbers` of `meta` hold (id, kind, length)
    /// for each, the kind a reliable channel (0 to 3), 4 for unreliable or 5 for ordered; the
    /// first `bytes` of `data` hold their bytes back to back. Both are read before this returns
    /// (JS reuses them), and the messages are sent from this thread, at once. Messages of
    /// sessions that have closed are dropped (their `disconnect` is on its way), and so are
    /// unreliable ones that find the session's datagram queue full (counted in its stats).
    /// Returns (id, epoch) pairs for the sessions whose reliable queue is full now (the `drain`
    /// of each carries that epoch), or `null` when there are none.
    ///
    /// The arrays come as slices, which napi-rs borrows for the call only: a `Float64Array` or
    /// `Buffer` argument would cost an N-API reference and its finalizer on every call.
    #[napi]
    pub fn send_batch(
        &self,
        meta: &[f64],
        numbers: u32,
        data: &[u8],
        bytes: u32,
    ) -> Result<Option<Vec<f64>>> {
        let (Some(meta), Some(data)) = (meta.get(..numbers as usize), data.get(..bytes as usize))
        else {
            return Err(code_error(
                "ERR_INVALID_ARG_VALUE",
                "sendBatch: a count is past the end of its array",
            ));
        };
        let all = Bytes::copy_from_slice(data);
        let mut sessions = lock(&self.shared.sessions);
        let mut full: Vec<f64> = Vec::new();
        let mut started = Vec::new();
        let mut offset = 0usize;
        self.shared.events.send_batch(|batch| -> Result<()> {
            for item in meta.chunks_exact(3) {
                let (id, kind, len) = (item[0] as u64, item[1] as u32, item[2] as usize);
                let end = offset.saturating_add(len).min(all.len());
                let message = all.slice(offset..end);
                offset = end;
                let Some(s) = sessions.get_mut(&id) else {
                    continue;
                };
                let sent = match kind {
                    SEND_UNRELIABLE => batch.send_unreliable(&s.conn, message),
                    SEND_ORDERED => batch.send_ordered(&s.conn, message),
                    channel => {
                        let channel = channel_of(channel)?;
                        let refused = if s.pending.in_use() {
                            Some(message)
                        } else {
                            match batch.try_send_on(&s.conn, channel, message) {
                                Err(TrySendError::Full(message)) => Some(message),
                                // Sent, or the session is closing: its disconnect follows.
                                _ => None,
                            }
                        };
                        let Some(message) = refused else { continue };
                        if s.pending.push_message(channel, message) {
                            started.push(id);
                        }
                        let epoch = f64::from(s.pending.epoch());
                        match full.len() {
                            n if n >= 2 && full[n - 2] == id as f64 => full[n - 1] = epoch,
                            _ => full.extend([id as f64, epoch]),
                        }
                        continue;
                    }
                };
                // Closed: its disconnect follows. Refused for its size: JS checked that first,
                // against the session's own limit, so only a full queue is left in practice.
                if let Err(TrySendError::Full(_) | TrySendError::Session(_)) = sent {
                    s.dropped += 1;
                }
            }
            Ok(())
        })?;
        drop(sessions);
        if !started.is_empty() {
            lock(&self.shared.flushing).extend(started);
            self.shared.events.wake();
        }
        self.kick();
        Ok((!full.is_empty()).then_some(full))
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
            if s.pending.in_use() {
                s.pending.push_encryption(on);
                return Ok(true);
            }
            Ok(s.conn.set_encryption(on))
        })
    }

    /// A session's counters.
    #[napi]
    pub fn stats(&self, id: f64) -> Result<NativeStats> {
        self.with_session(id, |s| {
            let st = s.conn.stats().ok_or_else(|| bad_session(id))?;
            let (pending_messages, pending_bytes) = s.pending.counts();
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
                pending_messages: pending_messages as f64,
                pending_bytes: pending_bytes as f64,
                unreliable_dropped: s.dropped as f64,
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
        let local = self.shared.local_addr;
        let key = self.shared.record_key.as_ref();
        self.with_session(id, |s| {
            Ok(recording::capture(&s.conn, local, key).map(|b| Buffer::from(b.to_vec())))
        })
    }

    /// Sessions open on the endpoint.
    #[napi]
    pub fn session_count(&self) -> u32 {
        u32::try_from(self.shared.events.session_count()).unwrap_or(u32::MAX)
    }

    /// Datagrams the endpoint sent and received: `[sent, received]`.
    #[napi]
    pub fn datagrams(&self) -> Vec<f64> {
        let s = self.shared.events.stats();
        vec![s.datagrams_sent as f64, s.datagrams_received as f64]
    }

    /// Closes every session and the endpoint; an `end` event follows.
    #[napi]
    pub fn close(&self, reason: u32) {
        let reason = DisconnectReason::from_u16(u16::try_from(reason).unwrap_or(4));
        self.shared.events.close(reason);
        self.kick();
    }
}
