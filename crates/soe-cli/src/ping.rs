//! `soe ping`: connect, send messages one at a time, print each round trip, then a summary.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use hdrhistogram::Histogram;
use soe_tokio::DisconnectReason;

use crate::client::{connect, message};
use crate::flags::{SessionFlags, check_size};
use crate::serve::parse_seconds;

/// Arguments of `soe ping`.
#[derive(Debug, Args)]
pub(crate) struct PingArgs {
    /// The server's address: `HOST:PORT` or `IP:PORT`.
    #[arg(value_parser = crate::net::parse_addr)]
    addr: SocketAddr,
    /// How many messages to send (0: until Ctrl-C).
    #[arg(short = 'c', long, value_name = "N", default_value_t = 10)]
    count: u64,
    /// The size of each message in bytes: 1 to the session's largest message (4 MiB); large
    /// ones travel as fragments.
    #[arg(long, value_name = "B", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    size: u32,
    /// Milliseconds between the start of one round trip and the next.
    #[arg(long, value_name = "MS", default_value_t = 200)]
    interval: u64,
    /// How long to wait for each echo before counting it lost, in seconds.
    #[arg(long, value_name = "S", default_value = "3", value_parser = parse_seconds)]
    timeout: Duration,
    #[command(flatten)]
    session: SessionFlags,
}

/// Runs the command.
pub(crate) fn run(args: PingArgs) -> Result<ExitCode> {
    crate::block_on(false, ping(args))?
}

async fn ping(args: PingArgs) -> Result<ExitCode> {
    let session = args.session.session_config()?;
    check_size(args.size as usize, &session)?;
    let started = Instant::now();
    let (endpoint, conn, watch) = connect(args.addr, session, true)
        .await
        .map_err(|e| anyhow::anyhow!(e.describe(args.addr, None)))?;
    println!(
        "PING {} ({} bytes per message): connected in {:.3} ms",
        args.addr,
        args.size,
        started.elapsed().as_secs_f64() * 1e3
    );

    let mut histogram =
        Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).context("histogram bounds")?;
    let (mut sent, mut received, mut mismatched) = (0u64, 0u64, 0u64);
    let mut exact = Exact::default();
    let mut ended: Option<String> = None;
    let interval = Duration::from_millis(args.interval);
    let size = args.size as usize;
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);

    let mut seq = 0u64;
    'outer: while args.count == 0 || seq < args.count {
        let round_start = Instant::now();
        let expected = message(seq, size);
        if let Err(e) = conn.send(expected.clone()).await {
            ended = Some(e.to_string());
            break;
        }
        sent += 1;
        let deadline = tokio::time::Instant::from_std(round_start + args.timeout);
        // Wait for this message's echo; echoes of earlier (timed-out) messages are skipped.
        // A closed port ends the ping: the system reports it to the session's socket as soon
        // as a datagram meets it (or, where it cannot, a probe asks after a probe period).
        let port_closed = watch.closed();
        tokio::pin!(port_closed);
        loop {
            let reply = tokio::select! {
                reply = tokio::time::timeout_at(deadline, conn.recv()) => reply,
                () = &mut port_closed => {
                    let reason = format!(
                        "{} stopped listening (ICMP port unreachable)",
                        args.addr
                    );
                    println!("seq={seq}: no echo: {reason}");
                    ended = Some(reason);
                    break 'outer;
                }
                _ = &mut ctrl_c => break 'outer,
            };
            match reply {
                Err(_) => {
                    println!(
                        "seq={seq}: no echo within {:.1} s",
                        args.timeout.as_secs_f64()
                    );
                    break;
                }
                Ok(None) => {
                    let reason = conn
                        .close_reason()
                        .map_or_else(|| "closed".to_owned(), |r| r.to_string());
                    println!("seq={seq}: no echo: the session ended ({reason})");
                    ended = Some(reason);
                    break 'outer;
                }
                Ok(Some(echo)) => {
                    let echo_seq = echo
                        .get(..8.min(size))
                        .map(|b| b.iter().fold(0u64, |acc, &x| (acc << 8) | u64::from(x)));
                    if echo == expected {
                        let rtt = round_start.elapsed();
                        received += 1;
                        let _ = histogram.record((rtt.as_micros() as u64).max(1));
                        exact.add(rtt);
                        println!(
                            "{} bytes from {}: seq={seq} time={:.3} ms",
                            echo.len(),
                            args.addr,
                            rtt.as_secs_f64() * 1e3
                        );
                        break;
                    } else if let Some(late) =
                        echo_seq.filter(|&s| s < seq && echo == message(s, size))
                    {
                        println!("seq={late}: late echo");
                    } else {
                        mismatched += 1;
                        println!(
                            "seq={seq}: echo differs from what was sent ({} bytes)",
                            echo.len()
                        );
                        break;
                    }
                }
            }
        }
        seq += 1;
        if args.count == 0 || seq < args.count {
            tokio::select! {
                () = tokio::time::sleep_until(tokio::time::Instant::from_std(round_start + interval)) => {}
                _ = &mut ctrl_c => break,
            }
        }
    }

    let stats = conn.stats().unwrap_or_default();
    conn.close(DisconnectReason::Application);
    let _ = tokio::time::timeout(Duration::from_secs(1), endpoint.wait_idle()).await;

    let lost = sent.saturating_sub(received + mismatched);
    println!();
    println!("--- {} soe ping statistics ---", args.addr);
    println!(
        "{sent} sent, {received} received, {mismatched} mismatched, {:.1}% loss, {} resend(s), {} datagram(s) out, {} in",
        if sent == 0 {
            0.0
        } else {
            lost as f64 * 100.0 / sent as f64
        },
        stats.resends,
        stats.datagrams_sent,
        stats.datagrams_received,
    );
    if let (Some(min), Some(max)) = (exact.min, exact.max) {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        // min, avg and max are exact; p99 comes from the histogram (within 0.1 %), and is
        // never shown outside [min, max].
        let p99 = Duration::from_micros(histogram.value_at_quantile(0.99)).clamp(min, max);
        println!(
            "rtt min/avg/max/p99 = {:.3}/{:.3}/{:.3}/{:.3} ms",
            ms(min),
            ms(exact.sum) / received as f64,
            ms(max),
            ms(p99),
        );
    }
    if let Some(reason) = &ended {
        println!("the session ended: {reason}");
    }
    Ok(if received == sent && mismatched == 0 && ended.is_none() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Exact round-trip extremes and sum (the histogram's buckets would round them).
#[derive(Debug, Default)]
struct Exact {
    min: Option<Duration>,
    max: Option<Duration>,
    sum: Duration,
}

impl Exact {
    fn add(&mut self, rtt: Duration) {
        self.min = Some(self.min.map_or(rtt, |m| m.min(rtt)));
        self.max = Some(self.max.map_or(rtt, |m| m.max(rtt)));
        self.sum += rtt;
    }
}
