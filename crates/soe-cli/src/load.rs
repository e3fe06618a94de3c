//! `soe load`: many sessions, each keeping messages outstanding, every echo verified byte for
//! byte; a progress bar while it runs and a summary (or JSON) at the end.

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
use soe_tokio::{DisconnectReason, SessionConfig};
use tokio::sync::watch;

use crate::client::{ConnectFailure, connect, message};
use crate::flags::{SessionFlags, check_size};
use crate::net::{CONNECTED_SOCKETS, PROBE_PERIOD, Probe};
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
    /// Message size in bytes: `B`, or `MIN-MAX` for sizes drawn uniformly (seeded).
    #[arg(long, value_name = "B|MIN-MAX", default_value = "64")]
    size: SizeRange,
    /// Messages each session keeps outstanding (sent, echo not yet back).
    #[arg(long, value_name = "D", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    depth: u32,
    /// The most messages per second, all sessions together (default: as fast as echoes return).
    #[arg(long, value_name = "R")]
    rate: Option<f64>,
    /// How long a session waits for an echo before it gives up, in seconds.
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
        let parse = |v: &str| {
            v.trim()
                .parse::<usize>()
                .map_err(|_| format!("{v:?} is not a size in bytes"))
        };
        let (min, max) = match s.split_once('-') {
            Some((a, b)) => (parse(a)?, parse(b)?),
            None => (parse(s)?, parse(s)?),
        };
        if min == 0 || min > max {
            return Err(format!(
                "{s:?}: sizes must be at least 1, and MIN no larger than MAX"
            ));
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
    sent: u64,
    verified: u64,
    mismatched: u64,
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

/// The summary `--json` prints.
#[derive(Debug, Serialize)]
struct Summary {
    server: SocketAddr,
    /// Stopped by Ctrl-C: the figures are what was measured until then.
    interrupted: bool,
    sessions: u32,
    sessions_failed: u32,
    failures: Vec<String>,
    messages_sent: u64,
    messages_verified: u64,
    messages_mismatched: u64,
    messages_lost: u64,
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

async fn load(args: LoadArgs) -> Result<ExitCode> {
    let session = args.session.session_config()?;
    check_size(args.size.max, &session)?;
    let started = Instant::now();
    // Ctrl-C, or a closed port, stops every session; each reports what it measured.
    let (stop_tx, stop) = watch::channel(false);
    let stop_tx = Arc::new(stop_tx);
    let interrupted = Arc::new(AtomicBool::new(false));
    let not_listening = Arc::new(AtomicBool::new(false));
    let connected = Arc::new(AtomicU64::new(0));
    {
        let (stop_tx, interrupted) = (stop_tx.clone(), interrupted.clone());
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
        let (stop_tx, not_listening) = (stop_tx.clone(), not_listening.clone());
        let (server, connected, timeout) =
            (args.addr, connected.clone(), session.connect_timeout());
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
    let bound = match (args.messages, args.duration) {
        (Some(m), _) => Bound::Messages(m),
        (None, Some(d)) => Bound::Until(started + d),
        (None, None) => anyhow::bail!("give --messages or --duration"),
    };
    let progress = if args.json {
        ProgressBar::hidden()
    } else {
        match bound {
            Bound::Messages(m) => {
                let bar = ProgressBar::with_draw_target(
                    Some(m.saturating_mul(u64::from(args.sessions))),
                    ProgressDrawTarget::stderr(),
                );
                bar.set_style(
                    ProgressStyle::with_template(
                        "{elapsed_precise} [{bar:40}] {human_pos}/{human_len} echoes ({per_sec}) {msg}",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
                );
                bar
            }
            Bound::Until(_) => {
                let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
                bar.set_style(
                    ProgressStyle::with_template(
                        "{elapsed_precise} {spinner} {human_pos} echoes ({per_sec}) {msg}",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                );
                bar
            }
        }
    };
    progress.enable_steady_tick(Duration::from_millis(200));

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
            index,
            bound,
            size: args.size,
            depth: args.depth as usize,
            gap,
            timeout: args.timeout,
            seed: args.seed,
            progress: progress.clone(),
            stop: stop.clone(),
            connected: connected.clone(),
        };
        tasks.push(tokio::spawn(job.run()));
    }
    let mut reports = Vec::with_capacity(tasks.len());
    for task in tasks {
        reports.push(task.await.context("a session task failed")?);
    }
    let finished = reports.iter().map(|r| r.finished).max().unwrap_or(started);
    let elapsed = finished.saturating_duration_since(started);
    progress.finish_and_clear();
    let interrupted = interrupted.load(Ordering::Relaxed);
    if !reports.iter().any(|r| r.connected) && !interrupted {
        // No session opened: a closed port is an error of its own, not a load figure. (A
        // connect timeout shorter than a probe period left a probe no time to ask.)
        let closed = not_listening.load(Ordering::Relaxed)
            || reports
                .iter()
                .any(|r| matches!(r.connect_failure, Some(ConnectFailure::NotListening)))
            || (!CONNECTED_SOCKETS
                && match Probe::new(args.addr).await {
                    Some(probe) => probe.refused(PROBE_PERIOD).await,
                    None => false,
                });
        if closed {
            anyhow::bail!(ConnectFailure::NotListening.describe(args.addr, None));
        }
    }

    let summary = summarize(&args, &reports, elapsed, interrupted)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print_summary(&summary);
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
    let verified = sum(|r| r.verified);
    let sent = sum(|r| r.sent);
    let mismatched = sum(|r| r.mismatched);
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
        messages_sent: sent,
        messages_verified: verified,
        messages_mismatched: mismatched,
        messages_lost: sent.saturating_sub(verified + mismatched),
        bytes_sent: sum(|r| r.bytes_sent),
        bytes_received: sum(|r| r.bytes_received),
        elapsed_s: elapsed.as_secs_f64(),
        messages_per_s: verified as f64 / secs,
        megabytes_per_s_each_way: sum(|r| r.bytes_received) as f64 / secs / 1e6,
        rtt_us: match (
            reports.iter().filter_map(|r| r.rtt_min).min(),
            reports.iter().filter_map(|r| r.rtt_max).max(),
        ) {
            (Some(min), Some(max)) => {
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
            _ => None,
        },
        resends: sum(|r| r.resends),
        datagrams_sent: sum(|r| r.datagrams_sent),
        datagrams_received: sum(|r| r.datagrams_received),
    })
}

fn print_summary(s: &Summary) {
    println!(
        "--- soe load {}{} ---",
        s.server,
        if s.interrupted {
            " (interrupted: figures so far)"
        } else {
            ""
        }
    );
    println!("sessions:   {} ({} failed)", s.sessions, s.sessions_failed);
    for f in &s.failures {
        println!("  {f}");
    }
    println!(
        "messages:   {} sent, {} verified byte for byte, {} mismatched, {} lost",
        s.messages_sent, s.messages_verified, s.messages_mismatched, s.messages_lost
    );
    println!(
        "throughput: {:.0} echoes/s, {:.2} MB/s each way, in {:.2} s",
        s.messages_per_s, s.megabytes_per_s_each_way, s.elapsed_s
    );
    if let Some(r) = &s.rtt_us {
        let ms = |us: u64| us as f64 / 1e3;
        println!(
            "round trip: p50 {:.3} ms, p99 {:.3} ms, p999 {:.3} ms, max {:.3} ms (min {:.3}, mean {:.3})",
            ms(r.p50),
            ms(r.p99),
            ms(r.p999),
            ms(r.max),
            ms(r.min),
            r.mean / 1e3
        );
    }
    println!(
        "transport:  {} resend(s), {} datagram(s) sent, {} received",
        s.resends, s.datagrams_sent, s.datagrams_received
    );
}

/// One session's share of the load.
struct Job {
    server: SocketAddr,
    session: Arc<SessionConfig>,
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

impl Job {
    async fn run(mut self) -> SessionReport {
        let mut report = SessionReport {
            error: None,
            connect_failure: None,
            connected: false,
            sent: 0,
            verified: 0,
            mismatched: 0,
            bytes_sent: 0,
            bytes_received: 0,
            finished: Instant::now(),
            rtt: histogram(),
            rtt_min: None,
            rtt_max: None,
            resends: 0,
            datagrams_sent: 0,
            datagrams_received: 0,
        };
        let connecting = connect(self.server, self.session.clone(), false);
        let (endpoint, conn, watch) = tokio::select! {
            result = connecting => match result {
                Ok(pair) => pair,
                Err(e) => {
                    report.connect_failure = Some(e);
                    report.finished = Instant::now();
                    return report;
                }
            },
            () = stopped(&mut self.stop) => {
                report.error = Some("stopped before it connected".to_owned());
                report.finished = Instant::now();
                return report;
            }
        };
        report.connected = true;
        self.connected.fetch_add(1, Ordering::Relaxed);
        let mut rng = SmallRng::seed_from_u64(
            self.seed ^ u64::from(self.index).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        );
        let mut outstanding: VecDeque<(Instant, Bytes)> = VecDeque::with_capacity(self.depth);
        let mut next_send = Instant::now();
        let mut seq = 0u64;
        let id_base = u64::from(self.index) << 40;
        loop {
            if *self.stop.borrow() {
                break;
            }
            let more = match self.bound {
                Bound::Messages(m) => seq < m,
                Bound::Until(end) => Instant::now() < end,
            };
            // Fill the pipeline.
            if more && outstanding.len() < self.depth && Instant::now() >= next_send {
                let size = rng.random_range(self.size.min..=self.size.max);
                let msg = message(id_base | seq, size);
                let now = Instant::now();
                if let Err(e) = conn.send(msg.clone()).await {
                    report.error = Some(e.to_string());
                    break;
                }
                report.sent += 1;
                report.bytes_sent += msg.len() as u64;
                outstanding.push_back((now, msg));
                seq += 1;
                if let Some(gap) = self.gap {
                    next_send = next_send.max(now.checked_sub(gap).unwrap_or(now)) + gap;
                }
                continue;
            }
            if outstanding.is_empty() {
                if !more {
                    break;
                }
                // Rate-limited with nothing in flight: wait for the next slot.
                tokio::select! {
                    () = tokio::time::sleep_until(tokio::time::Instant::from_std(next_send)) => {}
                    () = stopped(&mut self.stop) => break,
                }
                continue;
            }
            let wait_until = if more && outstanding.len() < self.depth {
                // Waiting for the rate: wake for the next slot or an echo, whichever is first.
                next_send
            } else {
                outstanding
                    .front()
                    .map_or_else(Instant::now, |(t, _)| *t + self.timeout)
            };
            let reply = tokio::select! {
                reply = tokio::time::timeout_at(
                    tokio::time::Instant::from_std(wait_until),
                    conn.recv(),
                ) => reply,
                () = stopped(&mut self.stop) => break,
                () = watch.closed() => {
                    report.error = Some(format!(
                        "{} stopped listening (ICMP port unreachable)",
                        self.server
                    ));
                    break;
                }
            };
            match reply {
                Err(_) => {
                    if let Some((sent_at, _)) = outstanding.front() {
                        if sent_at.elapsed() >= self.timeout {
                            report.error = Some(format!(
                                "no echo within {:.1} s",
                                self.timeout.as_secs_f64()
                            ));
                            break;
                        }
                    }
                }
                Ok(None) => {
                    report.error = Some(format!(
                        "the session ended: {}",
                        conn.close_reason()
                            .map_or_else(|| "closed".to_owned(), |r| r.to_string())
                    ));
                    break;
                }
                Ok(Some(echo)) => {
                    let Some((sent_at, expected)) = outstanding.pop_front() else {
                        report.mismatched += 1;
                        continue;
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
        }
        report.finished = Instant::now();
        if let Some(stats) = conn.stats() {
            report.resends = stats.resends;
            report.datagrams_sent = stats.datagrams_sent;
            report.datagrams_received = stats.datagrams_received;
        }
        conn.close(DisconnectReason::Application);
        let _ = tokio::time::timeout(Duration::from_secs(1), endpoint.wait_idle()).await;
        report
    }
}

/// Resolves once `stop` is true; never if its sender is gone.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    if stop.wait_for(|&s| s).await.is_err() {
        std::future::pending::<()>().await;
    }
}
