//! The pump: one thread per endpoint that drives the endpoint's blocking event loop and hands
//! its events to JS in batches.
//!
//! The thread blocks in the kernel (`poll(2)`) until a datagram, the endpoint's next deadline,
//! or a wake-up from the JS thread (a send, a close, room for more batches). After each wake-up
//! it passes on the writes that waited for room ([`Pending`](crate::pending::Pending)), then,
//! if JS has room for a batch, takes every event that is ready (at most [`BATCH`]) and calls
//! JS once through the threadsafe function. Acks, resends and keep-alives never wait for JS:
//! while JS is behind, the loop keeps turning and the events wait in the endpoint's queue,
//! bounded by `receiveQueueBytes`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use napi::Status;
use napi::threadsafe_function::{ErrorStrategy, ThreadsafeFunction, ThreadsafeFunctionCallMode};
use soe_runtime::blocking::{EventLoop, EventLoopHandle};
use soe_runtime::bytes::Bytes;
use soe_runtime::{Delivery, DisconnectReason, EndpointEvent, RecvTimeoutError};

use crate::Shared;
use crate::pending::Flushed;

/// Events handed to JS in one call, at most.
pub(crate) const BATCH: usize = 256;
/// Batches handed to the JS thread and not yet taken, at most: the pump stops taking events
/// until JS takes one, so whatever arrives while JS is busy rides in one batch instead of a
/// call each (a call into JS costs far more than a message).
pub(crate) const JS_QUEUE: usize = 64;

/// Rounds of [`flush_pending`] per wake-up, at most: one wake-up's worth of datagrams.
const FLUSH_ROUNDS: usize = 64;

/// Event kinds in a batch's `meta`.
pub(crate) const ACCEPTED: u8 = 1;
pub(crate) const MESSAGE: u8 = 2;
pub(crate) const DISCONNECT: u8 = 3;
pub(crate) const DRAIN: u8 = 4;
pub(crate) const END: u8 = 5;
pub(crate) const CONNECTED: u8 = 6;
pub(crate) const CONNECT_FAILED: u8 = 7;
/// Numbers per event in `meta`: kind, id, channel, delivery, offset, length, reason, by_peer.
const META: usize = 8;

/// A batch of events for JS, packed so that one N-API call carries hundreds of them and the JS
/// thread makes three values of it (a copy into one `Buffer`, a count, and the strings when
/// there are some), rather than an object, a typed array and a buffer with finalizers.
///
/// `bytes` holds 8 little-endian `f64`s per event, then every message's bytes back to back
/// (each message is a view into them). The numbers of an event: kind, id, channel, delivery
/// (0 reliable, 1 unreliable, 2 ordered), offset and length in the data after the numbers (for
/// a session that opened: the longest unreliable message it takes, in `length`), reason code
/// (for a session that opened: its SOE session id), by_peer (0 or 1). `texts` holds, for each
/// accepted session, its remote address and application protocol name, and for each failed
/// connect its error message, in order.
pub(crate) struct Packed {
    pub(crate) bytes: Vec<u8>,
    pub(crate) events: u32,
    pub(crate) texts: Vec<String>,
}

/// One event, before it is packed into a batch.
pub(crate) struct Ev {
    kind: u8,
    id: u64,
    channel: u8,
    delivery: u8,
    data: Option<Bytes>,
    /// The length slot of an event without data (the longest unreliable message).
    length: usize,
    /// The disconnect reason, the `drain` epoch, or the SOE session id.
    reason: u32,
    by_peer: bool,
    texts: [Option<String>; 2],
}

impl Ev {
    pub(crate) fn new(kind: u8, id: u64) -> Self {
        Self {
            kind,
            id,
            channel: 0,
            delivery: 0,
            data: None,
            length: 0,
            reason: 0,
            by_peer: false,
            texts: [None, None],
        }
    }

    /// A `drain` of the epoch that ended.
    pub(crate) fn drain(id: u64, epoch: u32) -> Self {
        let mut ev = Self::new(DRAIN, id);
        ev.reason = epoch;
        ev
    }
}

pub(crate) fn pack(events: &mut Vec<Ev>) -> Packed {
    let numbers = events.len() * META * 8;
    let data: usize = events
        .iter()
        .filter_map(|e| e.data.as_ref())
        .map(Bytes::len)
        .sum();
    let mut bytes = vec![0; numbers];
    bytes.reserve_exact(data);
    let mut texts = Vec::new();
    let count = events.len();
    for (i, e) in events.drain(..).enumerate() {
        let (offset, len) = match &e.data {
            Some(d) => {
                let at = bytes.len() - numbers;
                bytes.extend_from_slice(d);
                (at, d.len())
            }
            None => (0, e.length),
        };
        texts.extend(e.texts.into_iter().flatten());
        let meta = [
            f64::from(e.kind),
            e.id as f64,
            f64::from(e.channel),
            f64::from(e.delivery),
            offset as f64,
            len as f64,
            f64::from(e.reason),
            f64::from(u8::from(e.by_peer)),
        ];
        let at = i * META * 8;
        for (slot, n) in bytes[at..at + META * 8].chunks_exact_mut(8).zip(meta) {
            slot.copy_from_slice(&n.to_le_bytes());
        }
    }
    Packed {
        bytes,
        events: u32::try_from(count).unwrap_or(u32::MAX),
        texts,
    }
}

/// The function that takes the event batches, as the pump calls it.
pub(crate) type EventsFn = ThreadsafeFunction<Packed, ErrorStrategy::Fatal>;

/// The hand-over of batches between the pump and the JS thread.
pub(crate) struct Flow {
    /// Batches handed to JS and not yet taken.
    in_flight: AtomicUsize,
    /// Wakes the pump's event loop.
    events: EventLoopHandle,
    /// The pump's thread, for when its loop has ended (and cannot be woken through it).
    thread: OnceLock<std::thread::Thread>,
}

impl Flow {
    pub(crate) fn new(events: EventLoopHandle) -> Self {
        Self {
            in_flight: AtomicUsize::new(0),
            events,
            thread: OnceLock::new(),
        }
    }

    /// JS took a batch (called on the JS thread): wakes the pump if it waited for room.
    pub(crate) fn taken(&self) {
        if self.in_flight.fetch_sub(1, Ordering::AcqRel) >= JS_QUEUE {
            self.events.wake();
            if let Some(thread) = self.thread.get() {
                thread.unpark();
            }
        }
    }

    fn has_room(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) < JS_QUEUE
    }
}

/// Starts the pump thread of an endpoint.
pub(crate) fn start(
    events: EventLoop,
    shared: Arc<Shared>,
    js: EventsFn,
    flow: Arc<Flow>,
    moderation: Duration,
) -> std::io::Result<()> {
    let name = format!("soe-node {}", shared.local_addr);
    std::thread::Builder::new().name(name).spawn(move || {
        Pump {
            events,
            shared,
            js,
            flow,
            moderation,
        }
        .run();
    })?;
    Ok(())
}

struct Pump {
    events: EventLoop,
    shared: Arc<Shared>,
    js: EventsFn,
    flow: Arc<Flow>,
    /// `eventBatchMs`: while events keep coming, a call into JS at most once per this long.
    moderation: Duration,
}

impl Pump {
    /// Drives the loop and hands out events until the endpoint has ended and JS heard it.
    fn run(mut self) {
        let _ = self.flow.thread.set(std::thread::current());
        let mut batch: Vec<Ev> = Vec::with_capacity(BATCH);
        let mut last_call: Option<Instant> = None;
        // Whether the last batch was full: then events come faster than batches carry them, and
        // holding the next one would only cap the rate (at BATCH per window), not save calls.
        let mut last_full = false;
        let mut ended = false;
        let mut running = true;
        loop {
            flush_pending(&self.shared, &mut batch);
            let room = self.flow.has_room();
            if room {
                while batch.len() < BATCH && !ended {
                    match self.events.try_next_event() {
                        Ok(event) => batch.extend(convert(&self.shared, event)),
                        Err(RecvTimeoutError::Closed) => ended = true,
                        Err(_) => break,
                    }
                }
            }
            let now = Instant::now();
            // Events keep coming: hold them until `moderation` after the last call, so that
            // they go in one (see DEFAULT_EVENT_BATCH_MS).
            let hold = last_call
                .map(|last| last + self.moderation)
                .filter(|until| !self.moderation.is_zero() && !last_full && now < *until);
            let full = batch.len() >= BATCH;
            if room && (ended || (!batch.is_empty() && (hold.is_none() || full))) {
                last_full = full;
                if ended {
                    batch.push(Ev::new(END, 0));
                }
                let packed = pack(&mut batch);
                self.flow.in_flight.fetch_add(1, Ordering::AcqRel);
                last_call = Some(now);
                let status = self
                    .js
                    .call(packed, ThreadsafeFunctionCallMode::NonBlocking);
                if ended || status != Status::Ok {
                    return;
                }
                continue;
            }
            let wait = match hold {
                Some(until) if room && !batch.is_empty() => until - now,
                // Until a datagram, a deadline or a wake-up: a wake-up reaches this loop even
                // on a port shared with `reusePort` (soe-runtime wakes through a socket pair).
                _ => Duration::MAX,
            };
            if running {
                running = self.events.drive(wait);
            } else {
                // The loop has stopped and cannot be woken: JS's `taken` unparks this thread.
                std::thread::park_timeout(wait.min(Duration::from_millis(100)));
            }
        }
    }
}

/// Passes on the writes that waited for room, for every session that has some; a session whose
/// queue emptied gets its `drain`. Each round ends with the batch's datagrams sent (from this
/// thread), which makes room for more (a queue of `maxQueuedMessages: 1` takes one message a
/// round): rounds go on while they move anything, at most [`FLUSH_ROUNDS`] per wake-up.
pub(crate) fn flush_pending(shared: &Shared, out: &mut Vec<Ev>) {
    let mut ids = std::mem::take(&mut *lock(&shared.flushing));
    let mut rounds = 0;
    while !ids.is_empty() {
        let mut moved = false;
        let mut still = Vec::new();
        {
            let mut sessions = lock(&shared.sessions);
            shared.events.send_batch(|batch| {
                for id in ids {
                    let Some(s) = sessions.get_mut(&id) else {
                        continue;
                    };
                    match s.pending.flush(batch, &s.conn) {
                        Flushed::Empty => out.push(Ev::drain(id, s.pending.epoch())),
                        Flushed::Waiting { moved: some } => {
                            moved |= some;
                            still.push(id);
                        }
                        Flushed::Failed => {}
                    }
                }
            });
        }
        ids = still;
        rounds += 1;
        if !moved || rounds >= FLUSH_ROUNDS {
            break;
        }
    }
    if !ids.is_empty() {
        lock(&shared.flushing).extend(ids);
    }
}

/// Locks `m`; a panic while it was held leaves nothing half-done here, so poisoning is ignored.
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The event for JS, filing and forgetting sessions on the way.
pub(crate) fn convert(shared: &Shared, event: EndpointEvent) -> Option<Ev> {
    match event {
        EndpointEvent::Accepted(conn) => {
            let id = conn.id().value();
            let mut out = opened(ACCEPTED, &conn);
            out.texts = [
                Some(conn.remote_addr().to_string()),
                Some(
                    conn.application_protocol()
                        .map(|p| String::from_utf8_lossy(&p).into_owned())
                        .unwrap_or_default(),
                ),
            ];
            lock(&shared.sessions).insert(id, crate::Session::new(conn));
            Some(out)
        }
        EndpointEvent::Connected(connection) => {
            let id = connection.value();
            let sessions = lock(&shared.sessions);
            let conn = &sessions.get(&id)?.conn;
            Some(opened(CONNECTED, conn))
        }
        EndpointEvent::ConnectFailed { connection, error } => {
            let id = connection.value();
            lock(&shared.sessions).remove(&id);
            let mut out = Ev::new(CONNECT_FAILED, id);
            out.texts[0] = Some(format!("ERR_SOE_CONNECT: {error}"));
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
            let session = lock(&shared.sessions).remove(&id);
            let mut out = reason_event(id, reason.reason, reason.by_peer);
            // A session that ended abnormally, recorded: its capture rides with the event.
            out.data = session.and_then(|s| {
                crate::recording::capture(&s.conn, shared.local_addr, shared.record_key.as_ref())
            });
            Some(out)
        }
        _ => None,
    }
}

/// The event of a session that opened: its SOE session id and the longest unreliable message
/// it takes.
fn opened(kind: u8, conn: &soe_runtime::Connection) -> Ev {
    let mut out = Ev::new(kind, conn.id().value());
    out.reason = conn.session_id().unwrap_or_default();
    out.length = conn.max_unreliable_len().unwrap_or_default();
    out
}

fn reason_event(id: u64, reason: DisconnectReason, by_peer: bool) -> Ev {
    let mut ev = Ev::new(DISCONNECT, id);
    ev.reason = u32::from(reason.to_u16());
    ev.by_peer = by_peer;
    ev
}
