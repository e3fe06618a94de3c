//! `soe serve`: an echo or sink server that logs sessions as they open and close.
//!
//! One task takes every event of the endpoint (stream mode): a message is echoed the way it
//! came (reliable on its channel, unreliable as unreliable, ordered as ordered) straight into
//! its session's queue. Only when a session's send queue is full does its echo go through a
//! task of its own that waits for room, so one slow client holds up no other.
//!
//! Besides echoing, the server answers the key check of `soe ping` and `soe load`
//! ([`crate::keycheck`]), and judges whether the first bytes each session receives still look
//! encrypted after its decryption ([`soe_dissect::Randomness`]: the first KiB of reliable data
//! received, decided at [`JUDGE_AT`] bytes, or at the close from [`RANDOMNESS_MIN_BYTES`]; a
//! session that received less is not judged). Both are logged and counted in the stats line
//! and the metrics.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use soe_dissect::{RANDOMNESS_MIN_BYTES, Randomness};
use soe_tokio::bytes::Bytes;
use soe_tokio::{
    Channel, CloseReason, Config, Connection, ConnectionId, Delivery, DisconnectReason, Endpoint,
    EndpointConfig, EndpointEvent, EventMode, SessionStats, TrySendError,
};
use tokio::sync::{mpsc, watch};

use crate::flags::{ServerFlags, SessionFlags};
use crate::keycheck::ServerCheck;
use crate::out::{self, say};
use crate::record::RecordTo;

/// What the server does with each message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Mode {
    /// Send every message back the way it came: reliable on its channel, unreliable as
    /// unreliable, ordered as ordered.
    Echo,
    /// Count every message and drop it.
    Sink,
}

/// How `soe serve` drives its endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Driver {
    /// The runtime's driver task (tokio, one thread).
    Async,
    /// A blocking event loop on the server's thread ([`soe_runtime::blocking::EventLoop`]).
    Blocking,
}

/// Arguments of `soe serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// The address to listen on (port 0: any free port; the chosen one is printed).
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:20042", value_parser = crate::net::parse_addr)]
    bind: SocketAddr,
    /// Echo every message back, or swallow it.
    #[arg(long, value_enum, default_value_t = Mode::Echo)]
    mode: Mode,
    /// Print a one-line summary every S seconds (sessions, messages/s, resends, CRC rejects,
    /// key checks).
    #[arg(long, value_name = "S", value_parser = parse_seconds)]
    stats_interval: Option<Duration>,
    /// Serve Prometheus metrics over HTTP on this address (`GET /metrics`).
    #[arg(long, value_name = "ADDR", value_parser = crate::net::parse_addr)]
    metrics: Option<SocketAddr>,
    /// The most sessions served at once; further SessionRequests are refused.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    max_sessions: usize,
    /// Stop after S seconds (closing every session cleanly); default: run until Ctrl-C.
    #[arg(long, value_name = "S", value_parser = parse_seconds)]
    duration: Option<Duration>,
    /// How the endpoint is driven: `blocking` (the default), the server's own thread blocked
    /// in the kernel between wake-ups (`poll`, then `recvmmsg`), echoing and sending from that
    /// thread, once per wake-up for every session; or `async`, the endpoint's driver as a task
    /// of a one-thread tokio runtime beside the server's task. The blocking driver made a
    /// third fewer system calls per echo and cost no more CPU at every measured load
    /// (docs/performance-notes.md).
    #[arg(long, value_enum, default_value_t = Driver::Blocking)]
    driver: Driver,
    /// A receive-coalescing window, in milliseconds (fractions allowed, at most 50): after a
    /// wake-up that read datagrams the driver leaves the socket unread this long, so that what
    /// arrives meanwhile costs one wake-up together. Fewer wake-ups at low rates (the largest
    /// saving on a small VM), for up to this much more round trip. Default 0: off.
    #[arg(long, value_name = "MS", value_parser = parse_coalesce_ms)]
    coalesce_ms: Option<Duration>,
    /// Record every session with the flight recorder (its last 64 KiB of datagrams and
    /// messages) and write each one that ends abnormally (a timeout, a client killed, a
    /// corrupt packet...) to DIR as a pcapng capture: the datagrams with their addresses, and
    /// the messages as the server saw them for the Wireshark plugin (`soe decode` reads it
    /// too).
    #[arg(long, value_name = "DIR")]
    record: Option<std::path::PathBuf>,
    /// Write the RC4 key into each recording (`--record`), so that its reader can decrypt
    /// what the session's key protects. Off: keys are never written.
    #[arg(long, requires = "record")]
    record_keys: bool,
    /// How long a silent client lasts before its session ends with `Timeout`, in seconds
    /// (default 30).
    #[arg(long, value_name = "S", value_parser = parse_seconds)]
    idle_timeout: Option<Duration>,
    #[command(flatten)]
    session: SessionFlags,
    #[command(flatten)]
    server: ServerFlags,
}

/// Parses a non-negative number of seconds (fractions allowed).
pub(crate) fn parse_seconds(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(0.0..=365.0 * 86_400.0).contains(&secs) {
        return Err(format!("{s} seconds is out of range (0 to one year)"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parses `--coalesce-ms`: a number of milliseconds from 0 to the driver's bound (50).
pub(crate) fn parse_coalesce_ms(s: &str) -> Result<Duration, String> {
    let ms: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of milliseconds"))?;
    let max = soe_runtime::MAX_RECEIVE_COALESCE;
    if !(0.0..=max.as_secs_f64() * 1000.0).contains(&ms) {
        return Err(format!(
            "{s} ms is out of range (0 to {} ms)",
            max.as_millis()
        ));
    }
    Ok(Duration::from_secs_f64(ms / 1000.0))
}

/// The received bytes at which a session's randomness is judged (the first KiB): enough for
/// the chi-square test to tell RC4 output from any structured data with a wide margin.
pub(crate) const JUDGE_AT: usize = 1024;

/// Counters shared by the event loop, the stats line and the metrics; each is updated as its
/// event happens, so that one scrape reads them all at one point.
#[derive(Debug, Default)]
struct Totals {
    opened: AtomicU64,
    closed: AtomicU64,
    messages_in: AtomicU64,
    messages_out: AtomicU64,
    bytes_in: AtomicU64,
    /// Unreliable and ordered echoes the session's queue had no room for.
    echoes_dropped: AtomicU64,
    /// Resends and CRC rejects of sessions that have ended (live ones are read from their stats).
    closed_resends: AtomicU64,
    closed_crc_rejects: AtomicU64,
    /// Key probes read right, and not.
    keys_agreed: AtomicU64,
    keys_mismatched: AtomicU64,
    /// Sessions whose received data looks encrypted after this server's decryption.
    looking_encrypted: AtomicU64,
}

/// What the event loop, the stats line and the metrics share.
#[derive(Debug, Default)]
struct Shared {
    totals: Totals,
    /// The live connections, for their resend and CRC counters.
    live: Mutex<HashMap<ConnectionId, Connection>>,
}

impl Shared {
    fn live(&self) -> std::sync::MutexGuard<'_, HashMap<ConnectionId, Connection>> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Resends and CRC rejects, ended sessions and live ones, and the live count.
    fn transport(&self) -> (u64, u64, usize) {
        let live_stats: Vec<SessionStats> =
            self.live().values().filter_map(Connection::stats).collect();
        let t = &self.totals;
        let resends = t.closed_resends.load(Ordering::Relaxed)
            + live_stats.iter().map(|s| s.resends).sum::<u64>();
        let crc_rejects = t.closed_crc_rejects.load(Ordering::Relaxed)
            + live_stats.iter().map(|s| s.crc_rejects).sum::<u64>();
        (resends, crc_rejects, live_stats.len())
    }

    /// Sets every metric from the counters: called at each scrape, so a scrape sees the
    /// messages of every session it sees closed.
    fn publish_metrics(&self) {
        let t = &self.totals;
        let (resends, crc_rejects, live) = self.transport();
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        metrics::gauge!("soe_sessions").set(live as f64);
        metrics::counter!("soe_sessions_opened_total").absolute(get(&t.opened));
        metrics::counter!("soe_messages_received_total").absolute(get(&t.messages_in));
        metrics::counter!("soe_messages_sent_total").absolute(get(&t.messages_out));
        metrics::counter!("soe_bytes_received_total").absolute(get(&t.bytes_in));
        metrics::counter!("soe_echoes_dropped_total").absolute(get(&t.echoes_dropped));
        metrics::counter!("soe_resends_total").absolute(resends);
        metrics::counter!("soe_crc_rejects_total").absolute(crc_rejects);
        metrics::counter!("soe_key_checks_total", "result" => "agreed")
            .absolute(get(&t.keys_agreed));
        metrics::counter!("soe_key_checks_total", "result" => "mismatch")
            .absolute(get(&t.keys_mismatched));
        metrics::counter!("soe_sessions_looking_encrypted_total")
            .absolute(get(&t.looking_encrypted));
    }
}

/// Runs the command.
pub(crate) fn run(args: ServeArgs) -> Result<ExitCode> {
    match args.driver {
        Driver::Async => crate::block_on(false, serve_in_a_task(args))?,
        Driver::Blocking => serve_blocking(&args),
    }
}

/// The endpoint's configuration, and whether the server has an RC4 key.
fn config_of(args: &ServeArgs) -> Result<(Config, bool)> {
    let mut session = args.session.session_config(Some(&args.server))?;
    if let Some(idle) = args.idle_timeout {
        session = Arc::new((*session).clone().with_idle_timeout(Some(idle)));
    }
    let key = args.session.rc4_key.is_some();
    let mut endpoint_config = EndpointConfig::server(session).with_max_sessions(args.max_sessions);
    if args.record.is_some() {
        endpoint_config = endpoint_config
            .with_recording(soe_tokio::RecordingConfig::new().with_every_session(true));
    }
    let config = Config::new(Arc::new(endpoint_config))
        .with_event_mode(EventMode::Stream)
        .with_receive_coalesce(args.coalesce_ms.unwrap_or_default());
    Ok((config, key))
}

/// The line that says where the server listens and how.
fn print_listening(addr: SocketAddr, args: &ServeArgs, key: bool) {
    say!(
        "soe serve: listening on {} (protocol {:?}, {:?} mode, CRC {} bytes, compression {}, RC4 {})",
        addr,
        args.session.protocol_name(),
        args.mode,
        args.server.crc_length,
        on_off(args.server.compress),
        match (key, args.session.rc4_after_first_message) {
            (false, _) => "off",
            (true, false) => "on",
            (true, true) => "on after the first message",
        },
    );
    if let Some(window) = args.coalesce_ms.filter(|w| !w.is_zero()) {
        say!(
            "soe serve: receive coalescing: the socket is read at most once every {} ms",
            window.as_secs_f64() * 1000.0
        );
    }
}

/// [`serve`] as a task of its own rather than as the runtime's main future. The driver's task
/// wakes the server at nearly every one of its own wake-ups; a woken main future makes tokio's
/// one-thread scheduler look at its I/O driver once more (an `epoll_wait` that finds nothing)
/// before polling it, while a woken task is only queued behind the driver's.
async fn serve_in_a_task(args: ServeArgs) -> Result<ExitCode> {
    match tokio::spawn(serve(args)).await {
        Ok(result) => result,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(anyhow::anyhow!("the server's task ended early: {e}")),
    }
}

async fn serve(args: ServeArgs) -> Result<ExitCode> {
    let (config, key) = config_of(&args)?;
    let backlog_limit = config.receive_queue_bytes;
    let endpoint = Endpoint::bind(args.bind, config)
        .with_context(|| format!("cannot listen on {}", args.bind))?;
    print_listening(endpoint.local_addr(), &args, key);
    let shared = Arc::new(Shared::default());
    if let Some(addr) = args.metrics {
        let publish = shared.clone();
        let bound = crate::metrics_http::serve(addr, move || publish.publish_metrics()).await?;
        say!("soe serve: Prometheus metrics on http://{bound}/metrics");
    }
    let started = Instant::now();
    let stats_task = args
        .stats_interval
        .filter(|d| !d.is_zero())
        .map(|every| tokio::spawn(print_stats(shared.clone(), every)));
    let mut server = Server::new(&args, key, backlog_limit, shared.clone());
    server.record = record_to(&args, endpoint.local_addr())?;
    // The signal waits in a task of its own, which tells this one: polled here at every
    // wake-up, the Ctrl-C future would cost more than the channel.
    let (stopped, mut stop) = tokio::sync::oneshot::channel();
    let duration = args.duration;
    let stopper = tokio::spawn(async move {
        stop_signal(duration).await;
        let _ = stopped.send(());
    });
    loop {
        // The echoes go out from this task once it has handled what is ready, not from the
        // driver's task woken for each.
        tokio::select! {
            more = endpoint.handle_events(|event| server.on_event(event)) => if !more {
                break;
            },
            _ = &mut stop => break,
        }
        if out::gone() {
            // Its reader went away (`soe serve | head`): stop as cleanly as on Ctrl-C.
            break;
        }
    }
    say!(
        "soe serve: shutting down, closing {} session(s)",
        endpoint.session_count()
    );
    endpoint.close(DisconnectReason::Application);
    // The sessions' closes come as events: take them, so each prints its close line.
    let drain = async {
        while let Some(event) = endpoint.next_event().await {
            server.on_event(event);
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(5), drain).await;
    stopper.abort();
    if let Some(task) = stats_task {
        task.abort();
    }
    print_done(&shared, started);
    Ok(exit_code())
}

/// `soe serve --driver blocking`: the event loop runs on this thread, blocked in the kernel
/// between wake-ups; a one-thread tokio runtime beside it serves the metrics, the stats line,
/// the stop signal and the echoes that wait for room.
fn serve_blocking(args: &ServeArgs) -> Result<ExitCode> {
    let (config, key) = config_of(args)?;
    let backlog_limit = config.receive_queue_bytes;
    let mut events = soe_runtime::blocking::EventLoop::bind(args.bind, config)
        .with_context(|| format!("cannot listen on {}", args.bind))?;
    print_listening(events.local_addr(), args, key);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    // Echoes that wait for room are tasks of this runtime.
    let _runtime = runtime.enter();
    let shared = Arc::new(Shared::default());
    if let Some(addr) = args.metrics {
        let publish = shared.clone();
        let bound = runtime.block_on(crate::metrics_http::serve(addr, move || {
            publish.publish_metrics()
        }))?;
        say!("soe serve: Prometheus metrics on http://{bound}/metrics");
    }
    let started = Instant::now();
    let stats_task = args
        .stats_interval
        .filter(|d| !d.is_zero())
        .map(|every| runtime.spawn(print_stats(shared.clone(), every)));
    let handle = events.handle();
    let duration = args.duration;
    runtime.spawn(async move {
        stop_signal(duration).await;
        say!(
            "soe serve: shutting down, closing {} session(s)",
            handle.session_count()
        );
        handle.close(DisconnectReason::Application);
    });
    let closer = events.handle();
    let mut closing = false;
    let mut server = Server::new(args, key, backlog_limit, shared.clone());
    server.record = record_to(args, events.local_addr())?;
    // Until closed and every session gone (each close comes as an event, and prints its line).
    while let Some(event) = events.next_event() {
        server.on_event(event);
        if out::gone() && !std::mem::replace(&mut closing, true) {
            // Its reader went away (`soe serve | head`): stop as cleanly as on Ctrl-C.
            closer.close(DisconnectReason::Application);
        }
    }
    if let Some(task) = stats_task {
        task.abort();
    }
    print_done(&shared, started);
    Ok(exit_code())
}

/// The last line: how long, how many sessions and messages.
fn print_done(shared: &Shared, started: Instant) {
    let t = &shared.totals;
    say!(
        "soe serve: done after {:.1} s: {} session(s), {} message(s) in, {} out",
        started.elapsed().as_secs_f64(),
        t.opened.load(Ordering::Relaxed),
        t.messages_in.load(Ordering::Relaxed),
        t.messages_out.load(Ordering::Relaxed),
    );
}

/// Success, or [`out::GONE_EXIT`] when stdout's reader went away.
fn exit_code() -> ExitCode {
    if out::gone() {
        ExitCode::from(out::GONE_EXIT)
    } else {
        ExitCode::SUCCESS
    }
}

/// Completes on Ctrl-C (SIGINT), or after `duration` when one is given.
pub(crate) async fn stop_signal(duration: Option<Duration>) {
    let timer = async {
        match duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        () = timer => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// A flag that becomes true on Ctrl-C (SIGINT); call within a runtime.
pub(crate) fn interrupted() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            let _ = tx.send(true);
        }
    });
    rx
}

fn on_off(on: bool) -> &'static str {
    if on { "on" } else { "off" }
}

/// What the server knows of one session.
struct Peer {
    conn: Connection,
    addr: SocketAddr,
    opened: Instant,
    messages_in: u64,
    messages_out: u64,
    /// Whether a reliable message came yet (the first is the key probe, and the point where
    /// `--rc4-after-first-message` switches).
    first_reliable_seen: bool,
    check: ServerCheck,
    /// The randomness of the reliable data received, until judged.
    judge: Option<Box<Randomness>>,
    /// What the judge found: `Some(true)` looks encrypted.
    looks_encrypted: Option<bool>,
    /// Echoes waiting for room in the session's send queue, when it filled.
    backlog: Option<Backlog>,
}

/// Reliable echoes that wait for room, sent in order by a task of their own.
struct Backlog {
    tx: mpsc::UnboundedSender<(Channel, Bytes)>,
    /// Messages waiting (while any does, later ones queue behind it, to keep the order).
    messages: Arc<AtomicUsize>,
    /// Their bytes.
    bytes: Arc<AtomicUsize>,
}

/// The event loop's state.
struct Server {
    mode: Mode,
    rc4_after_first: bool,
    key: bool,
    /// The most echo bytes a session may have waiting for room before it is closed
    /// (`ReliableOverflow`), as the runtime bounds what a reader leaves unread.
    backlog_limit: usize,
    shared: Arc<Shared>,
    /// The sessions, by the ids the runtime hands out (counters no peer chooses, so a fast
    /// fixed-seed hash is safe here: each message looks its session up once).
    peers: HashMap<ConnectionId, Peer, foldhash::fast::FixedState>,
    /// `--record`: where recordings go.
    record: Option<RecordTo>,
}

impl Server {
    /// A server with no session yet, as `args` ask.
    fn new(args: &ServeArgs, key: bool, backlog_limit: usize, shared: Arc<Shared>) -> Self {
        Self {
            mode: args.mode,
            rc4_after_first: args.session.rc4_after_first_message,
            key,
            backlog_limit,
            shared,
            peers: HashMap::default(),
            record: None,
        }
    }

    fn on_event(&mut self, event: EndpointEvent) {
        match event {
            EndpointEvent::Accepted(conn) => self.open(conn),
            EndpointEvent::Message {
                connection,
                channel,
                data,
                kind,
            } => self.message(connection, channel, data, kind),
            EndpointEvent::Closed { connection, reason } => self.close(connection, reason),
            _ => {}
        }
    }

    fn open(&mut self, conn: Connection) {
        let (id, addr) = (conn.id(), conn.remote_addr());
        self.shared.totals.opened.fetch_add(1, Ordering::Relaxed);
        self.shared.live().insert(id, conn.clone());
        say!("open  {id} {addr}");
        self.peers.insert(
            id,
            Peer {
                conn,
                addr,
                opened: Instant::now(),
                messages_in: 0,
                messages_out: 0,
                first_reliable_seen: false,
                check: ServerCheck::default(),
                judge: Some(Box::new(Randomness::new())),
                looks_encrypted: None,
                backlog: None,
            },
        );
    }

    /// Answers the key check, or counts a message and echoes it the way it came. (The key
    /// check's hello and probe are not counted as messages: they are the tool's, not the
    /// user's.)
    fn message(&mut self, id: ConnectionId, channel: Channel, data: Bytes, kind: Delivery) {
        let mode = self.mode;
        let Some(peer) = self.peers.get_mut(&id) else {
            return;
        };
        let totals = &self.shared.totals;
        let reply = match kind {
            Delivery::Unreliable => peer.check.on_unreliable(&data),
            _ => None,
        };
        if let Some(reply) = reply {
            if reply.mismatch {
                note_mismatch(peer, totals, self.key);
            }
            let _ = peer.conn.send_unreliable(Bytes::from(reply.answer));
            return;
        }
        match kind {
            Delivery::Unreliable | Delivery::Ordered => {
                count_in(peer, totals, data.len());
                if mode == Mode::Echo {
                    let sent = if kind == Delivery::Ordered {
                        peer.conn.send_ordered(data)
                    } else {
                        peer.conn.send_unreliable(data)
                    };
                    match sent {
                        Ok(()) => count_out(peer, totals),
                        Err(_) => {
                            totals.echoes_dropped.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }
            _ => {
                let how = Echoing {
                    mode,
                    rc4_after_first: self.rc4_after_first,
                    key: self.key,
                    backlog_limit: self.backlog_limit,
                };
                reliable(peer, totals, how, channel, data);
            }
        }
    }

    fn close(&mut self, id: ConnectionId, reason: CloseReason) {
        self.shared.live().remove(&id);
        let Some(mut peer) = self.peers.remove(&id) else {
            return;
        };
        let totals = &self.shared.totals;
        let stats = peer.conn.stats().unwrap_or_default();
        totals
            .closed_resends
            .fetch_add(stats.resends, Ordering::Relaxed);
        totals
            .closed_crc_rejects
            .fetch_add(stats.crc_rejects, Ordering::Relaxed);
        totals.closed.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("soe_sessions_closed_total", "reason" => format!("{:?}", reason.reason))
            .increment(1);
        let verdict = final_verdict(&mut peer, totals, self.key);
        self.write_recording(&peer);
        say!(
            "close {id} {}: {:?} by {} after {:.1} s; {} message(s) in, {} out, {} resend(s), {} CRC reject(s); {}",
            peer.addr,
            reason.reason,
            if reason.by_peer {
                "the peer"
            } else {
                "this side"
            },
            peer.opened.elapsed().as_secs_f64(),
            peer.messages_in,
            peer.messages_out,
            stats.resends,
            stats.crc_rejects,
            verdict,
        );
    }
}

impl Server {
    /// `--record`: writes a session's recording, when it ended abnormally (the endpoint keeps
    /// only those).
    fn write_recording(&self, peer: &Peer) {
        let (Some(to), Some(recording)) = (&self.record, peer.conn.take_recording()) else {
            return;
        };
        match to.write(peer.conn.id(), &recording) {
            Ok((path, summary)) => say!(
                "record {} {}: {} ({} datagrams, {} messages)",
                peer.conn.id(),
                peer.addr,
                path.display(),
                summary.datagrams,
                summary.messages
            ),
            Err(e) => say!("record {} {}: {e:#}", peer.conn.id(), peer.addr),
        }
    }
}

/// A reliable message of `peer`. The session's first is where RC4 switches on with
/// `--rc4-after-first-message`, and may be the key probe, answered instead of echoed;
/// the first KiB is judged; every other message is echoed on its channel.
fn reliable(peer: &mut Peer, totals: &Totals, how: Echoing, channel: Channel, data: Bytes) {
    let Echoing {
        mode,
        rc4_after_first,
        key,
        backlog_limit,
    } = how;
    if !peer.first_reliable_seen {
        peer.first_reliable_seen = true;
        // Nothing reliable went to this session before its first reliable message: the
        // answer is the session's first reliable message on channel 0.
        let answer = peer.check.on_first_reliable(&data, 0);
        if rc4_after_first {
            peer.conn.set_encryption(true);
        }
        if let Some(answer) = answer {
            totals.keys_agreed.fetch_add(1, Ordering::Relaxed);
            let answer = Outgoing {
                channel: Channel::ZERO,
                data: Bytes::from(answer),
                echo: false,
            };
            send_reliable(peer, totals, answer, backlog_limit);
            return;
        }
    }
    count_in(peer, totals, data.len());
    judge(peer, totals, &data, key);
    if mode == Mode::Echo {
        let echo = Outgoing {
            channel,
            data,
            echo: true,
        };
        send_reliable(peer, totals, echo, backlog_limit);
    }
}

/// What the server does with a reliable message besides its session's own state.
#[derive(Clone, Copy)]
struct Echoing {
    mode: Mode,
    rc4_after_first: bool,
    key: bool,
    backlog_limit: usize,
}

/// `--record DIR` for a server on `local`.
fn record_to(args: &ServeArgs, local: SocketAddr) -> Result<Option<RecordTo>> {
    let Some(dir) = &args.record else {
        return Ok(None);
    };
    let key = if args.record_keys {
        args.session.key()?
    } else {
        None
    };
    RecordTo::new(dir, local, key).map(Some)
}

/// Counts a message received.
fn count_in(peer: &mut Peer, totals: &Totals, len: usize) {
    peer.messages_in += 1;
    totals.messages_in.fetch_add(1, Ordering::Relaxed);
    totals.bytes_in.fetch_add(len as u64, Ordering::Relaxed);
}

/// Counts an echo handed to the session.
fn count_out(peer: &mut Peer, totals: &Totals) {
    peer.messages_out += 1;
    totals.messages_out.fetch_add(1, Ordering::Relaxed);
}

/// Queues a reliable message (an echo, counted; or the key probe's answer, not): straight
/// into the session when it has room (and nothing waits before it), else behind the others in
/// the session's backlog.
fn send_reliable(peer: &mut Peer, totals: &Totals, out: Outgoing, limit: usize) {
    let Outgoing {
        channel,
        data,
        echo,
    } = out;
    let count = |peer: &mut Peer| {
        if echo {
            count_out(peer, totals);
        }
    };
    let waiting = peer
        .backlog
        .as_ref()
        .is_some_and(|b| b.messages.load(Ordering::Acquire) > 0);
    let data = if waiting {
        data
    } else {
        match peer.conn.try_send_on(channel, data) {
            Ok(()) => return count(peer),
            Err(TrySendError::Full(data)) => data,
            Err(_) => return,
        }
    };
    let backlog = peer
        .backlog
        .get_or_insert_with(|| start_backlog(peer.conn.clone()));
    let waiting = backlog.bytes.fetch_add(data.len(), Ordering::AcqRel) + data.len();
    if waiting > limit {
        say!(
            "{} {}: {waiting} bytes of echoes wait for room (limit {limit}): closing the session",
            peer.conn.id(),
            peer.addr
        );
        peer.conn.close(DisconnectReason::ReliableOverflow);
        return;
    }
    backlog.messages.fetch_add(1, Ordering::AcqRel);
    if backlog.tx.send((channel, data)).is_ok() {
        count(peer);
    }
}

/// A reliable message to send.
struct Outgoing {
    channel: Channel,
    data: Bytes,
    /// An echo (counted as a message out), or the key probe's answer.
    echo: bool,
}

/// The task that sends a session's waiting echoes as its queue makes room.
fn start_backlog(conn: Connection) -> Backlog {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Channel, Bytes)>();
    let messages = Arc::new(AtomicUsize::new(0));
    let bytes = Arc::new(AtomicUsize::new(0));
    let (messages_left, bytes_left) = (messages.clone(), bytes.clone());
    tokio::spawn(async move {
        while let Some((channel, data)) = rx.recv().await {
            let len = data.len();
            if conn.send_on(channel, data).await.is_err() {
                return;
            }
            bytes_left.fetch_sub(len, Ordering::AcqRel);
            messages_left.fetch_sub(1, Ordering::AcqRel);
        }
    });
    Backlog {
        tx,
        messages,
        bytes,
    }
}

/// Logs and counts a key probe that did not read (the client's hello says its first reliable
/// message was the probe).
fn note_mismatch(peer: &Peer, totals: &Totals, key: bool) {
    totals.keys_mismatched.fetch_add(1, Ordering::Relaxed);
    say!(
        "key   {} {}: KEY MISMATCH: the client's key probe does not read here ({}): its RC4 key \
         differs from this server's, or only one side turns RC4 on after the first message",
        peer.conn.id(),
        peer.addr,
        if key {
            "this server decrypts with its --rc4-key"
        } else {
            "this server has no --rc4-key"
        }
    );
}

/// Adds received data to the session's randomness judge until it decides at [`JUDGE_AT`]
/// bytes; at most [`JUDGE_AT`] bytes per session are looked at, and nothing is allocated.
fn judge(peer: &mut Peer, totals: &Totals, data: &[u8], key: bool) {
    let Some(judge) = peer.judge.as_deref_mut() else {
        return;
    };
    let room = JUDGE_AT.saturating_sub(judge.len());
    judge.add(data.get(..room).unwrap_or(data));
    if judge.len() >= JUDGE_AT {
        decide(peer, totals, key);
    }
}

/// The judge's verdict, logged (and counted) when the data looks encrypted.
fn decide(peer: &mut Peer, totals: &Totals, key: bool) {
    let Some(judge) = peer.judge.take() else {
        return;
    };
    peer.looks_encrypted = judge.looks_random();
    if peer.looks_encrypted == Some(true) {
        totals.looking_encrypted.fetch_add(1, Ordering::Relaxed);
        say!(
            "key   {} {}: what this session receives looks encrypted {} ({} bytes judged): {}",
            peer.conn.id(),
            peer.addr,
            if key {
                "after this server's decryption"
            } else {
                "(uniformly random bytes)"
            },
            judge.len(),
            if key {
                "the client's RC4 key differs from this server's, or it sends none (or random data)"
            } else {
                "the client may use an RC4 key this server lacks (or it sends random data)"
            }
        );
    }
}

/// What the close line says of the session's key: the probe's verdict, else the judge's.
fn final_verdict(peer: &mut Peer, totals: &Totals, key: bool) -> String {
    match peer.check {
        ServerCheck::Read(_) => return "key probe read".into(),
        ServerCheck::Mismatch => return "KEY MISMATCH (probe unreadable)".into(),
        _ => {}
    }
    let judged = peer.judge.as_ref().map_or(usize::MAX, |j| j.len());
    if judged < RANDOMNESS_MIN_BYTES {
        return format!("data not judged (under {RANDOMNESS_MIN_BYTES} bytes)");
    }
    decide(peer, totals, key);
    match peer.looks_encrypted {
        Some(true) => "data received LOOKS ENCRYPTED".into(),
        Some(false) => "data received reads as plaintext".into(),
        None => format!("data not judged (under {RANDOMNESS_MIN_BYTES} bytes)"),
    }
}

/// Prints the stats line every `every`.
async fn print_stats(shared: Arc<Shared>, every: Duration) {
    let mut ticker = tokio::time::interval(every);
    ticker.tick().await;
    let mut last_print = Instant::now();
    let mut last_messages = 0u64;
    loop {
        ticker.tick().await;
        let t = &shared.totals;
        let (resends, crc_rejects, live) = shared.transport();
        let messages = t.messages_in.load(Ordering::Relaxed);
        let elapsed = last_print.elapsed();
        let rate = (messages - last_messages) as f64 / elapsed.as_secs_f64().max(1e-9);
        say!(
            "stats: {live} session(s) ({} opened, {} closed), {rate:.0} message(s)/s in, {resends} resend(s), {crc_rejects} CRC reject(s), {} key mismatch(es)",
            t.opened.load(Ordering::Relaxed),
            t.closed.load(Ordering::Relaxed),
            t.keys_mismatched.load(Ordering::Relaxed),
        );
        last_print = Instant::now();
        last_messages = messages;
    }
}
