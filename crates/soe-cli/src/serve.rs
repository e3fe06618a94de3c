//! `soe serve`: an echo or sink server that logs sessions as they open and close.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use soe_tokio::{
    Config, Connection, ConnectionId, DisconnectReason, Endpoint, EndpointConfig, SessionStats,
};

use crate::flags::SessionFlags;

/// What the server does with each message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Mode {
    /// Send every message back on the channel it came on.
    Echo,
    /// Count every message and drop it.
    Sink,
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
    /// Print a one-line summary every S seconds (sessions, messages/s, resends, CRC rejects).
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
    #[command(flatten)]
    session: SessionFlags,
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

/// Counters shared by the connection tasks, the stats line and the metrics.
#[derive(Debug, Default)]
struct Totals {
    opened: AtomicU64,
    closed: AtomicU64,
    messages_in: AtomicU64,
    messages_out: AtomicU64,
    bytes_in: AtomicU64,
    /// Resends and CRC rejects of sessions that have ended (live ones are read from their stats).
    closed_resends: AtomicU64,
    closed_crc_rejects: AtomicU64,
}

/// The live connections, for the stats line.
type Live = Arc<Mutex<HashMap<ConnectionId, Connection>>>;

/// Runs the command.
pub(crate) fn run(args: ServeArgs) -> Result<ExitCode> {
    crate::block_on(true, serve(args))?
}

async fn serve(args: ServeArgs) -> Result<ExitCode> {
    let session = args.session.session_config()?;
    let endpoint_config =
        EndpointConfig::server(session.clone()).with_max_sessions(args.max_sessions);
    let endpoint = Endpoint::bind(args.bind, Config::new(Arc::new(endpoint_config)))
        .with_context(|| format!("cannot listen on {}", args.bind))?;
    let local = endpoint.local_addr();
    println!(
        "soe serve: listening on {local} (protocol {:?}, {:?} mode, CRC {} bytes, compression {}, RC4 {})",
        args.session.protocol,
        args.mode,
        args.session.crc_length,
        on_off(args.session.compress),
        on_off(args.session.rc4_key.is_some()),
    );
    if let Some(addr) = args.metrics {
        let bound = crate::metrics_http::serve(addr).await?;
        println!("soe serve: Prometheus metrics on http://{bound}/metrics");
    }

    let totals = Arc::new(Totals::default());
    let live: Live = Arc::default();
    let started = Instant::now();

    let stats_task = {
        let (totals, live) = (totals.clone(), live.clone());
        let print_every = args.stats_interval.filter(|d| !d.is_zero());
        let metrics_on = args.metrics.is_some();
        tokio::spawn(async move { report(totals, live, print_every, metrics_on).await })
    };

    let accept_loop = {
        let (endpoint, totals, live) = (endpoint.clone(), totals.clone(), live.clone());
        let mode = args.mode;
        async move {
            while let Some(conn) = endpoint.accept().await {
                tokio::spawn(handle(conn, mode, totals.clone(), live.clone()));
            }
        }
    };
    let stop = stop_signal(args.duration);
    tokio::select! {
        () = accept_loop => {}
        () = stop => {}
    }

    println!(
        "soe serve: shutting down, closing {} session(s)",
        endpoint.session_count()
    );
    endpoint.close(DisconnectReason::Application);
    let _ = tokio::time::timeout(Duration::from_secs(5), endpoint.wait_idle()).await;
    // Let the connection tasks print their close lines.
    for _ in 0..50 {
        if live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stats_task.abort();
    println!(
        "soe serve: done after {:.1} s: {} session(s), {} message(s) in, {} out",
        started.elapsed().as_secs_f64(),
        totals.opened.load(Ordering::Relaxed),
        totals.messages_in.load(Ordering::Relaxed),
        totals.messages_out.load(Ordering::Relaxed),
    );
    Ok(ExitCode::SUCCESS)
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

fn on_off(on: bool) -> &'static str {
    if on { "on" } else { "off" }
}

/// Serves one connection until it ends, then logs why.
async fn handle(conn: Connection, mode: Mode, totals: Arc<Totals>, live: Live) {
    let id = conn.id();
    let peer = conn.remote_addr();
    let opened = Instant::now();
    totals.opened.fetch_add(1, Ordering::Relaxed);
    metrics::counter!("soe_sessions_opened_total").increment(1);
    live.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(id, conn.clone());
    println!("open  {id} {peer}");
    let (mut messages_in, mut messages_out) = (0u64, 0u64);
    while let Some((channel, data)) = conn.recv_with_channel().await {
        messages_in += 1;
        totals.messages_in.fetch_add(1, Ordering::Relaxed);
        totals
            .bytes_in
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        if mode == Mode::Echo {
            if conn.send_on(channel, data).await.is_err() {
                break;
            }
            messages_out += 1;
            totals.messages_out.fetch_add(1, Ordering::Relaxed);
        }
    }
    let reason = conn.closed().await;
    let stats = conn.stats().unwrap_or_default();
    totals
        .closed_resends
        .fetch_add(stats.resends, Ordering::Relaxed);
    totals
        .closed_crc_rejects
        .fetch_add(stats.crc_rejects, Ordering::Relaxed);
    totals.closed.fetch_add(1, Ordering::Relaxed);
    metrics::counter!("soe_sessions_closed_total", "reason" => format!("{:?}", reason.reason))
        .increment(1);
    live.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(&id);
    println!(
        "close {id} {peer}: {:?} by {} after {:.1} s; {messages_in} message(s) in, {messages_out} out, {} resend(s), {} CRC reject(s)",
        reason.reason,
        if reason.by_peer {
            "the peer"
        } else {
            "this side"
        },
        opened.elapsed().as_secs_f64(),
        stats.resends,
        stats.crc_rejects,
    );
}

/// Prints the stats line every `print_every` and keeps the metrics current.
async fn report(totals: Arc<Totals>, live: Live, print_every: Option<Duration>, metrics_on: bool) {
    if print_every.is_none() && !metrics_on {
        return;
    }
    let period = print_every.unwrap_or(Duration::from_secs(1));
    let period = if metrics_on {
        period.min(Duration::from_secs(1))
    } else {
        period
    };
    let mut ticker = tokio::time::interval(period);
    ticker.tick().await;
    let mut last_print = Instant::now();
    let mut last_messages = 0u64;
    loop {
        ticker.tick().await;
        let conns: Vec<Connection> = live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        let live_stats: Vec<SessionStats> = conns.iter().filter_map(Connection::stats).collect();
        let resends = totals.closed_resends.load(Ordering::Relaxed)
            + live_stats.iter().map(|s| s.resends).sum::<u64>();
        let crc_rejects = totals.closed_crc_rejects.load(Ordering::Relaxed)
            + live_stats.iter().map(|s| s.crc_rejects).sum::<u64>();
        let messages = totals.messages_in.load(Ordering::Relaxed);
        if metrics_on {
            metrics::gauge!("soe_sessions").set(conns.len() as f64);
            metrics::counter!("soe_messages_received_total").absolute(messages);
            metrics::counter!("soe_messages_sent_total")
                .absolute(totals.messages_out.load(Ordering::Relaxed));
            metrics::counter!("soe_bytes_received_total")
                .absolute(totals.bytes_in.load(Ordering::Relaxed));
            metrics::counter!("soe_resends_total").absolute(resends);
            metrics::counter!("soe_crc_rejects_total").absolute(crc_rejects);
        }
        if let Some(every) = print_every {
            let elapsed = last_print.elapsed();
            if elapsed + Duration::from_millis(5) >= every {
                let rate = (messages - last_messages) as f64 / elapsed.as_secs_f64().max(1e-9);
                println!(
                    "stats: {} session(s) ({} opened, {} closed), {rate:.0} message(s)/s in, {resends} resend(s), {crc_rejects} CRC reject(s)",
                    conns.len(),
                    totals.opened.load(Ordering::Relaxed),
                    totals.closed.load(Ordering::Relaxed),
                );
                last_print = Instant::now();
                last_messages = messages;
            }
        }
    }
}
