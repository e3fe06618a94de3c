//! `soe load`: many sessions, each checking the RC4 key, then keeping messages outstanding,
//! every echo verified byte for byte; a progress bar while it runs and a summary (or JSON) at
//! the end.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::{ArgGroup, Args};
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use soe_tokio::bytes::Bytes;
use soe_tokio::{Channel, Delivery, DisconnectReason, SessionConfig};
use tokio::sync::watch;

use crate::client::{
    ConnectFailure, ID_LEN, Incoming, Opened, Opening, Unsolicited, message, open, random_u64,
    seq_of,
};
use crate::flags::{NotForClients, SessionFlags, parse_size};
use crate::keycheck::{KeyCheck, is_noise};
use crate::net::{CONNECTED_SOCKETS, PROBE_PERIOD, Probe};
use crate::out::{self, say};
use crate::serve::parse_seconds;

/// Arguments of `soe load`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("bound").required(true).args(["messages", "duration"])))]
pub(crate) struct LoadArgs {
    /// The server's address, `HOST:PORT` or `IP:PORT` (an echo server: `soe serve --mode echo`).
    #[arg(value_parser = crate::net::parse_addr)]
    addr: SocketAddr,
    /// How many sessions to open, each from its own UDP port.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    sessions: u32,
    /// Messages per session.
    #[arg(long, value_name = "M")]
    messages: Option<u64>,
    /// Send for S seconds, then wait for the last echoes.
    #[arg(long, value_name = "S", value_parser = parse_seconds)]
    duration: Option<Duration>,
    /// Message size in bytes: `B`, or `MIN-MAX` for sizes drawn uniformly (seeded); 1 to the
    /// session's largest message (4 MiB).
    #[arg(long, value_name = "B|MIN-MAX", default_value = "64")]
    size: SizeRange,
    /// Messages each session keeps outstanding (sent, echo not yet back).
    #[arg(long, value_name = "D", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    depth: u32,
    /// The most messages per second, all sessions together (default: as fast as echoes return).
    #[arg(long, value_name = "R")]
    rate: Option<f64>,
    /// How long a session waits for an echo (and for each answer of the key check) before it
    /// gives up, in seconds.
    #[arg(long, value_name = "S", default_value = "10", value_parser = parse_seconds)]
    timeout: Duration,
    /// The seed for message sizes.
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,
    /// Print the summary as one JSON object (no progress bar).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    session: SessionFlags,
    #[command(flatten)]
    not_for_clients: NotForClients,
}

/// A message size or a range of sizes.
#[derive(Debug, Clone, Copy)]
struct SizeRange {
    min: usize,
    max: usize,
}

impl FromStr for SizeRange {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (min, max) = match s.split_once('-') {
            Some((a, b)) => (parse_size(a)?, parse_size(b)?),
            None => (parse_size(s)?, parse_size(s)?),
        };
        if min > max {
            return Err(format!("{s:?}: MIN is larger than MAX"));
        }
        Ok(Self { min, max })
    }
}

/// What one session did.
#[derive(Debug)]
struct SessionReport {
    error: Option<String>,
    /// Why the session never opened.
    connect_failure: Option<ConnectFailure>,
    /// Whether it opened.
    connected: bool,
    /// What its key check found.
    key: Option<KeyCheck>,
    sent: u64,
    verified: u64,
    mismatched: u64,
    /// What the server sent on its own.
    unsolicited: Unsolicited,
    /// Sent, and still waiting for their echo when Ctrl-C (or a closed port) stopped the run:
    /// never given the chance to come back, so not lost.
    in_flight: u64,
    bytes_sent: u64,
    bytes_received: u64,
    /// When the session had its last echo (or gave up), before its close.
    finished: Instant,
    rtt: Histogram<u64>,
    /// The exact shortest and longest round trips, in microseconds (the histogram's buckets
    /// would round them outwards).
    rtt_min: Option<u64>,
    rtt_max: Option<u64>,
    resends: u64,
    datagrams_sent: u64,
    datagrams_received: u64,
}

impl SessionReport {
    fn new() -> Self {
        Self {
            error: None,
            connect_failure: None,
            connected: false,
            key: None,
            sent: 0,
            verified: 0,
            mismatched: 0,
            unsolicited: Unsolicited::default(),
            in_flight: 0,
            bytes_sent: 0,
            bytes_received: 0,
            finished: Instant::now(),
            rtt: histogram(),
            rtt_min: None,
            rtt_max: None,
            resends: 0,
            datagrams_sent: 0,
            datagrams_received: 0,
        }
    }
}

/// Round-trip percentiles, in microseconds; min and max are exact, and the percentiles never
/// lie outside them.
#[derive(Debug, Serialize)]
struct Percentiles {
    min: u64,
    mean: f64,
    p50: u64,
    p99: u64,
    p999: u64,
    max: u64,
}

/// What the sessions' key checks found.
#[derive(Debug, Default, Serialize)]
struct KeyChecks {
    /// The server read each probe and this side its answer: the keys agree.
    checked: u64,
    /// The server does not take part (a plain echo server) or did not answer.
    unchecked: u64,
    /// The keys differ: those sessions failed.
    mismatch: u64,
    /// Why the first unchecked session was not checked.
    unchecked_why: Option<String>,
}

/// The summary `--json` prints.
#[derive(Debug, Serialize)]
struct Summary {
    server: SocketAddr,
    /// Stopped by Ctrl-C: the figures are what was measured until then.
    interrupted: bool,
    sessions: u32,
    sessions_failed: u32,
    failures: Vec<String>,
    key_checks: KeyChecks,
    messages_sent: u64,
    messages_verified: u64,
    messages_mismatched: u64,
    messages_lost: u64,
    /// Still in flight when the run was stopped (Ctrl-C): not lost, never given the chance.
    messages_in_flight: u64,
    /// Messages the server sent on its own (not echoes), counted and never judged.
    unsolicited: Unsolicited,
    bytes_sent: u64,
    bytes_received: u64,
    elapsed_s: f64,
    messages_per_s: f64,
    megabytes_per_s_each_way: f64,
    rtt_us: Option<Percentiles>,
    resends: u64,
    datagrams_sent: u64,
    datagrams_received: u64,
}

/// The longest a session's histogram goes: one hour, in microseconds.
const MAX_RTT_US: u64 = 3_600_000_000;

fn histogram() -> Histogram<u64> {
    #[allow(clippy::expect_used)]
    Histogram::new_with_bounds(1, MAX_RTT_US, 3).expect("constant bounds are valid")
}

/// Runs the command.
pub(crate) fn run(args: LoadArgs) -> Result<ExitCode> {
    crate::block_on(true, load(args))?
}

/// When each session stops sending.
#[derive(Debug, Clone, Copy)]
enum Bound {
    Messages(u64),
    Until(Instant),
}

/// What stops every session: Ctrl-C or a closed port.
struct Stops {
    stop: watch::Receiver<bool>,
    interrupted: Arc<AtomicBool>,
    not_listening: Arc<AtomicBool>,
    /// Sessions connected so far.
    connected: Arc<AtomicU64>,
}

async fn load(args: LoadArgs) -> Result<ExitCode> {
    args.not_for_clients.refuse("load")?;
    let session = args.session.session_config(None)?;
    let started = Instant::now();
    let stops = watch_stops(&args, &session);
    let bound = match (args.messages, args.duration) {
        (Some(m), _) => Bound::Messages(m),
        (None, Some(d)) => Bound::Until(started + d),
        (None, None) => anyhow::bail!("give --messages or --duration"),
    };
    let progress = progress_bar(&args, bound);
    let reports = run_sessions(&args, &session, bound, &progress, &stops).await?;
    let finished = reports.iter().map(|r| r.finished).max().unwrap_or(started);
    let elapsed = finished.saturating_duration_since(started);
    progress.finish_and_clear();
    let interrupted = stops.interrupted.load(Ordering::Relaxed);
    if !reports.iter().any(|r| r.connected)
        && !interrupted
        && nothing_listens(&args, &reports, &stops).await
    {
        // No session opened: a closed port is an error of its own, not a load figure.
        anyhow::bail!(ConnectFailure::NotListening.describe(args.addr, None));
    }
    let summary = summarize(&args, &reports, elapsed, interrupted)?;
    if args.json {
        say!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print_summary(&summary);
    }
    if out::gone() {
        return Ok(ExitCode::from(out::GONE_EXIT));
    }
    if interrupted {
        return Ok(ExitCode::from(130));
    }
    let ok = summary.sessions_failed == 0
        && summary.messages_mismatched == 0
        && summary.messages_lost == 0;
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Ctrl-C, or a closed port, stops every session; each reports what it measured.
fn watch_stops(args: &LoadArgs, session: &SessionConfig) -> Stops {
    let (stop_tx, stop) = watch::channel(false);
    let stop_tx = Arc::new(stop_tx);
    let stops = Stops {
        stop,
        interrupted: Arc::new(AtomicBool::new(false)),
        not_listening: Arc::new(AtomicBool::new(false)),
        connected: Arc::new(AtomicU64::new(0)),
    };
    {
        let (stop_tx, interrupted) = (stop_tx.clone(), stops.interrupted.clone());
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                interrupted.store(true, Ordering::Relaxed);
                let _ = stop_tx.send(true);
            }
        });
    }
    if !CONNECTED_SOCKETS {
        // Where the sessions' sockets cannot hear of a closed port themselves: while no session
        // has connected, a probe period of silence sets one probe off for all; a closed port
        // stops the run. Once one session connects, the port is open.
        let (not_listening, connected) = (stops.not_listening.clone(), stops.connected.clone());
        let (server, timeout) = (args.addr, session.connect_timeout());
        tokio::spawn(async move {
            let Some(probe) = Probe::new(server).await else {
                return;
            };
            let give_up = tokio::time::Instant::now() + timeout;
            tokio::time::sleep(PROBE_PERIOD).await;
            while connected.load(Ordering::Relaxed) == 0 && tokio::time::Instant::now() < give_up {
                if probe.refused(PROBE_PERIOD).await {
                    not_listening.store(true, Ordering::Relaxed);
                    let _ = stop_tx.send(true);
                    return;
                }
            }
        });
    }
    stops
}

/// The progress bar on stderr (hidden with `--json`).
fn progress_bar(args: &LoadArgs, bound: Bound) -> ProgressBar {
    if args.json {
        return ProgressBar::hidden();
    }
    let (length, template) = match bound {
        Bound::Messages(m) => (
            Some(m.saturating_mul(u64::from(args.sessions))),
            "{elapsed_precise} [{bar:40}] {human_pos}/{human_len} echoes ({per_sec}) {msg}",
        ),
        Bound::Until(_) => (
            None,
            "{elapsed_precise} {spinner} {human_pos} echoes ({per_sec}) {msg}",
        ),
    };
    let bar = ProgressBar::with_draw_target(length, ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// Runs every session's job and collects their reports.
async fn run_sessions(
    args: &LoadArgs,
    session: &Arc<SessionConfig>,
    bound: Bound,
    progress: &ProgressBar,
    stops: &Stops,
) -> Result<Vec<SessionReport>> {
    // Each session gets an equal share of the rate.
    let gap = args
        .rate
        .filter(|r| r.is_finite() && *r > 0.0)
        .map(|r| Duration::from_secs_f64((f64::from(args.sessions) / r).min(3600.0)));
    let mut tasks = Vec::with_capacity(args.sessions as usize);
    for index in 0..args.sessions {
        let job = Job {
            server: args.addr,
            session: session.clone(),
            opening: Opening {
                port_probe: false,
                rc4_after_first: args.session.rc4_after_first_message,
                key: args.session.rc4_key.is_some(),
                timeout: args.timeout,
                random: random_u64(),
            },
            index,
            bound,
            size: args.size,
            depth: args.depth as usize,
            gap,
            timeout: args.timeout,
            seed: args.seed,
            progress: progress.clone(),
            stop: stops.stop.clone(),
            connected: stops.connected.clone(),
        };
        tasks.push(tokio::spawn(job.run()));
    }
    let mut reports = Vec::with_capacity(tasks.len());
    for task in tasks {
        reports.push(task.await.context("a session task failed")?);
    }
    Ok(reports)
}

/// Whether no session opened because nothing listens on the server's port. (A connect timeout
/// shorter than a probe period left a probe no time to ask: it asks once more.)
async fn nothing_listens(args: &LoadArgs, reports: &[SessionReport], stops: &Stops) -> bool {
    stops.not_listening.load(Ordering::Relaxed)
        || reports
            .iter()
            .any(|r| matches!(r.connect_failure, Some(ConnectFailure::NotListening)))
        || (!CONNECTED_SOCKETS
            && match Probe::new(args.addr).await {
                Some(probe) => probe.refused(PROBE_PERIOD).await,
                None => false,
            })
}

fn summarize(
    args: &LoadArgs,
    reports: &[SessionReport],
    elapsed: Duration,
    interrupted: bool,
) -> Result<Summary> {
    let mut rtt = histogram();
    for r in reports {
        rtt.add(&r.rtt).context("merging histograms")?;
    }
    let sum = |f: fn(&SessionReport) -> u64| reports.iter().map(f).sum::<u64>();
    let secs = elapsed.as_secs_f64().max(1e-9);
    let (verified, sent) = (sum(|r| r.verified), sum(|r| r.sent));
    let (mismatched, in_flight) = (sum(|r| r.mismatched), sum(|r| r.in_flight));
    let connected = reports.iter().filter(|r| r.connected).count() as u64;
    let failures: Vec<String> = reports
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let error = match &r.connect_failure {
                Some(f) => Some(f.describe(args.addr, Some(connected))),
                None => r.error.clone(),
            };
            error.map(|e| format!("session {i}: {e}"))
        })
        .collect();
    Ok(Summary {
        server: args.addr,
        interrupted,
        sessions: args.sessions,
        sessions_failed: u32::try_from(failures.len()).unwrap_or(u32::MAX),
        failures: failures.into_iter().take(20).collect(),
        key_checks: key_checks(reports),
        messages_sent: sent,
        messages_verified: verified,
        messages_mismatched: mismatched,
        messages_lost: sent.saturating_sub(verified + mismatched + in_flight),
        messages_in_flight: in_flight,
        unsolicited: reports.iter().fold(Unsolicited::default(), |mut all, r| {
            all.add(r.unsolicited);
            all
        }),
        bytes_sent: sum(|r| r.bytes_sent),
        bytes_received: sum(|r| r.bytes_received),
        elapsed_s: elapsed.as_secs_f64(),
        messages_per_s: verified as f64 / secs,
        megabytes_per_s_each_way: sum(|r| r.bytes_received) as f64 / secs / 1e6,
        rtt_us: percentiles(reports, &rtt),
        resends: sum(|r| r.resends),
        datagrams_sent: sum(|r| r.datagrams_sent),
        datagrams_received: sum(|r| r.datagrams_received),
    })
}

/// The sessions' key checks, counted.
fn key_checks(reports: &[SessionReport]) -> KeyChecks {
    let mut checks = KeyChecks::default();
    for key in reports.iter().filter_map(|r| r.key.as_ref()) {
        match key {
            KeyCheck::Agreed => checks.checked += 1,
            KeyCheck::Unchecked(why) => {
                checks.unchecked += 1;
                checks.unchecked_why.get_or_insert_with(|| why.clone());
            }
            KeyCheck::Differ(_) => checks.mismatch += 1,
        }
    }
    checks
}

/// The round-trip figures of every session together.
fn percentiles(reports: &[SessionReport], rtt: &Histogram<u64>) -> Option<Percentiles> {
    let min = reports.iter().filter_map(|r| r.rtt_min).min()?;
    let max = reports.iter().filter_map(|r| r.rtt_max).max()?;
    let at = |q: f64| rtt.value_at_quantile(q).clamp(min, max);
    Some(Percentiles {
        min,
        mean: rtt.mean().clamp(min as f64, max as f64),
        p50: at(0.5),
        p99: at(0.99),
        p999: at(0.999),
        max,
    })
}

fn print_summary(s: &Summary) {
    say!(
        "--- soe load {}{} ---",
        s.server,
        if s.interrupted {
            " (interrupted: figures so far)"
        } else {
            ""
        }
    );
    say!("sessions:   {} ({} failed)", s.sessions, s.sessions_failed);
    for f in &s.failures {
        say!("  {f}");
    }
    let k = &s.key_checks;
    let why = k
        .unchecked_why
        .as_ref()
        .map_or_else(String::new, |why| format!(" ({why})"));
    say!(
        "RC4 keys:   {} checked, {} mismatched, {} not checked{why}",
        k.checked,
        k.mismatch,
        k.unchecked
    );
    let in_flight = match s.messages_in_flight {
        0 => String::new(),
        n => format!(", {n} in flight when stopped"),
    };
    say!(
        "messages:   {} sent, {} verified byte for byte, {} mismatched, {} lost{in_flight}",
        s.messages_sent,
        s.messages_verified,
        s.messages_mismatched,
        s.messages_lost
    );
    if let Some(line) = s.unsolicited.describe() {
        say!("{line}");
    }
    say!(
        "throughput: {:.0} echoes/s, {:.2} MB/s each way, in {:.2} s",
        s.messages_per_s,
        s.megabytes_per_s_each_way,
        s.elapsed_s
    );
    if let Some(r) = &s.rtt_us {
        let ms = |us: u64| us as f64 / 1e3;
        say!(
            "round trip: p50 {:.3} ms, p99 {:.3} ms, p999 {:.3} ms, max {:.3} ms (min {:.3}, mean {:.3})",
            ms(r.p50),
            ms(r.p99),
            ms(r.p999),
            ms(r.max),
            ms(r.min),
            r.mean / 1e3
        );
    }
    say!(
        "transport:  {} resend(s), {} datagram(s) sent, {} received",
        s.resends,
        s.datagrams_sent,
        s.datagrams_received
    );
}

/// One session's share of the load.
struct Job {
    server: SocketAddr,
    session: Arc<SessionConfig>,
    opening: Opening,
    index: u32,
    bound: Bound,
    size: SizeRange,
    depth: usize,
    gap: Option<Duration>,
    timeout: Duration,
    seed: u64,
    progress: ProgressBar,
    /// Becomes true when every session must stop (Ctrl-C, a closed port).
    stop: watch::Receiver<bool>,
    /// Sessions connected so far, across jobs.
    connected: Arc<AtomicU64>,
}

/// Whether a session's pumping goes on.
enum Flow {
    /// Go on.
    More,
    /// It ended: everything sent and echoed, an error (in the report), or a stop (Ctrl-C, a
    /// closed port: what is outstanding is counted in flight, not lost).
    Ended,
}

/// A session's pipeline: the messages outstanding, and when the next may go.
struct Pipeline {
    outstanding: VecDeque<(Instant, Bytes)>,
    next_send: Instant,
    seq: u64,
    rng: SmallRng,
    /// The random tag in every message's id ([`message`]).
    tag: u64,
    /// RC4 switches on after the first message, whose echo must come back before more go.
    switch_after_first: bool,
}

impl Job {
    /// Connects, checks the key, then keeps the pipeline full until the bound, and reports.
    async fn run(mut self) -> SessionReport {
        let mut report = SessionReport::new();
        let Some(opened) = self.open(&mut report).await else {
            report.finished = Instant::now();
            return report;
        };
        if !matches!(report.key, Some(KeyCheck::Differ(_))) {
            self.pump(&opened, &mut report).await;
        }
        report.finished = Instant::now();
        if let Some(stats) = opened.conn.stats() {
            report.resends = stats.resends;
            report.datagrams_sent = stats.datagrams_sent;
            report.datagrams_received = stats.datagrams_received;
        }
        opened.conn.close(DisconnectReason::Application);
        let _ = tokio::time::timeout(Duration::from_secs(1), opened.endpoint.wait_idle()).await;
        report
    }

    /// Opens the session and checks its key; `None` when it never opened (or was stopped
    /// first). A key mismatch is the session's error.
    async fn open(&mut self, report: &mut SessionReport) -> Option<Opened> {
        let connecting = open(self.server, self.session.clone(), self.opening);
        let opened = tokio::select! {
            result = connecting => match result {
                Ok(opened) => opened,
                Err(e) => {
                    report.connect_failure = Some(e);
                    return None;
                }
            },
            () = stopped(&mut self.stop) => {
                report.error = Some("stopped before it connected".to_owned());
                return None;
            }
        };
        report.connected = true;
        self.connected.fetch_add(1, Ordering::Relaxed);
        if let KeyCheck::Differ(why) = &opened.key {
            report.error = Some(format!("RC4 key mismatch: {why}"));
        }
        report.key = Some(opened.key.clone());
        report.unsolicited = opened.unsolicited;
        Some(opened)
    }

    /// Keeps the pipeline full and takes the echoes, until the bound, an error, or a stop.
    async fn pump(&mut self, opened: &Opened, report: &mut SessionReport) {
        let mut p = Pipeline {
            outstanding: VecDeque::with_capacity(self.depth),
            next_send: Instant::now(),
            seq: 0,
            rng: SmallRng::seed_from_u64(
                self.seed ^ u64::from(self.index).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            ),
            tag: random_u64(),
            switch_after_first: opened.switch_after_first,
        };
        loop {
            if *self.stop.borrow() {
                report.in_flight = p.outstanding.len() as u64;
                return;
            }
            let more = match self.bound {
                Bound::Messages(m) => p.seq < m,
                Bound::Until(end) => Instant::now() < end,
            };
            // The first message goes alone when RC4 switches after it.
            let depth = if p.switch_after_first { 1 } else { self.depth };
            if more && p.outstanding.len() < depth && Instant::now() >= p.next_send {
                if let Err(e) = self.send_next(opened, &mut p, report).await {
                    report.error = Some(e);
                    return;
                }
                continue;
            }
            if p.outstanding.is_empty() {
                if !more {
                    return;
                }
                // Rate-limited with nothing in flight: wait for the next slot.
                tokio::select! {
                    () = tokio::time::sleep_until(tokio::time::Instant::from_std(p.next_send)) => {}
                    () = stopped(&mut self.stop) => {}
                }
                continue;
            }
            let wait_for_slot = more && p.outstanding.len() < depth;
            if let Flow::Ended = self.take_reply(opened, &mut p, report, wait_for_slot).await {
                return;
            }
        }
    }

    /// Sends the next message of the pipeline.
    async fn send_next(
        &self,
        opened: &Opened,
        p: &mut Pipeline,
        report: &mut SessionReport,
    ) -> Result<(), String> {
        let size = p.rng.random_range(self.size.min..=self.size.max);
        let msg = message((u64::from(self.index) << 40) | p.seq, p.tag, size);
        let now = Instant::now();
        opened
            .conn
            .send(msg.clone())
            .await
            .map_err(|e| e.to_string())?;
        if p.seq == 0 && p.switch_after_first {
            opened.conn.set_encryption(true);
        }
        report.sent += 1;
        report.bytes_sent += msg.len() as u64;
        p.outstanding.push_back((now, msg));
        p.seq += 1;
        if let Some(gap) = self.gap {
            p.next_send = p.next_send.max(now.checked_sub(gap).unwrap_or(now)) + gap;
        }
        Ok(())
    }

    /// Waits for an echo (or, `wait_for_slot`, the next send slot) and takes it.
    async fn take_reply(
        &mut self,
        opened: &Opened,
        p: &mut Pipeline,
        report: &mut SessionReport,
        wait_for_slot: bool,
    ) -> Flow {
        let wait_until = if wait_for_slot {
            // Waiting for the rate: wake for the next slot or an echo, whichever is first.
            p.next_send
        } else {
            p.outstanding
                .front()
                .map_or_else(Instant::now, |(t, _)| *t + self.timeout)
        };
        let reply = tokio::select! {
            reply = tokio::time::timeout_at(
                tokio::time::Instant::from_std(wait_until),
                opened.inbox.next(),
            ) => reply,
            () = stopped(&mut self.stop) => {
                report.in_flight = p.outstanding.len() as u64;
                return Flow::Ended;
            }
            () = opened.watch.closed() => {
                report.error = Some(format!(
                    "{} stopped listening (ICMP port unreachable)",
                    self.server
                ));
                return Flow::Ended;
            }
        };
        let incoming = match reply {
            Err(_) => {
                let timed_out = p
                    .outstanding
                    .front()
                    .is_some_and(|(sent_at, _)| sent_at.elapsed() >= self.timeout);
                if timed_out {
                    let secs = self.timeout.as_secs_f64();
                    let hint = match report.unsolicited.reliable {
                        0 => String::new(),
                        n => format!(
                            " ({n} reliable message(s) came that carry no id of this session: \
                             the server's own, or echoes that differ throughout, as through \
                             another RC4 key)"
                        ),
                    };
                    report.error = Some(format!("no echo within {secs:.1} s{hint}"));
                    return Flow::Ended;
                }
                return Flow::More;
            }
            Ok(None) => {
                report.error = Some(format!(
                    "the session ended: {}",
                    opened
                        .conn
                        .close_reason()
                        .map_or_else(|| "closed".to_owned(), |r| r.to_string())
                ));
                return Flow::Ended;
            }
            Ok(Some(incoming)) => incoming,
        };
        self.take(p, report, &incoming);
        Flow::More
    }

    /// Takes a message from the server: an echo is a reliable message on channel 0 that
    /// carries the id of a message outstanding ([`message`]), and is checked against it byte
    /// for byte; what the server sends on its own is counted apart, and the key check's
    /// late answers are skipped.
    fn take(&self, p: &mut Pipeline, report: &mut SessionReport, incoming: &Incoming) {
        let data = &incoming.data[..];
        if is_noise(data) {
            return;
        }
        if incoming.kind != Delivery::Reliable || incoming.channel != Channel::ZERO {
            report.unsolicited.count(incoming.kind);
            return;
        }
        let same_id = |sent: &Bytes| {
            if sent.len() < ID_LEN || data.len() < ID_LEN {
                sent[..] == *data
            } else {
                sent[..ID_LEN] == data[..ID_LEN]
            }
        };
        // Echoes come back in order: the oldest outstanding is almost always the one.
        match p.outstanding.iter().position(|(_, sent)| same_id(sent)) {
            Some(at) => self.verify(p, report, at, data),
            // One of ours, but nothing outstanding has its id: a duplicate, or garbled.
            None if seq_of(data, p.tag).is_some() => {
                report.mismatched += 1;
                self.progress.inc(1);
            }
            None => report.unsolicited.count(incoming.kind),
        }
    }

    /// Checks an echo against the outstanding message `at` whose id it carries.
    fn verify(&self, p: &mut Pipeline, report: &mut SessionReport, at: usize, echo: &[u8]) {
        p.switch_after_first = false;
        let Some((sent_at, expected)) = p.outstanding.remove(at) else {
            return;
        };
        report.bytes_received += echo.len() as u64;
        if echo == expected {
            report.verified += 1;
            let us = (sent_at.elapsed().as_micros() as u64).clamp(1, MAX_RTT_US);
            let _ = report.rtt.record(us);
            report.rtt_min = Some(report.rtt_min.map_or(us, |m| m.min(us)));
            report.rtt_max = Some(report.rtt_max.map_or(us, |m| m.max(us)));
        } else {
            report.mismatched += 1;
        }
        self.progress.inc(1);
    }
}

/// Resolves once `stop` is true; never if its sender is gone.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    if stop.wait_for(|&s| s).await.is_err() {
        std::future::pending::<()>().await;
    }
}
