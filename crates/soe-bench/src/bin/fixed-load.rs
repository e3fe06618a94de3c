//! `fixed-load`: the fixed-load generator of the report, against a server already running.
//!
//! ```text
//! fixed-load ADDR [--sessions N] [--rate R | --tick | --idle] [--size B] [--udp] [--protocol NAME]
//!            [--pid PID] [--warm-up S] [--window S]
//! ```
//!
//! `ADDR` is an SOE echo server (or a bare UDP echo server with `--udp`). Each of `N` sessions
//! sends `R` reliable messages of `B` bytes a second (or the game-tick mix with `--tick`), every
//! echo checked; with `--pid`, that process's CPU time per message is reported too.

#![warn(clippy::too_many_lines)] // the limit is in clippy.toml

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use soe_bench::fixed::{Load, Mix, Target, Timing, Wire, measure_at};

/// Runs the fixed-load generator against a running server.
#[derive(Debug, Parser)]
#[command(name = "fixed-load")]
struct Args {
    /// The server's address.
    addr: SocketAddr,
    /// Client sessions, each from its own UDP port.
    #[arg(long, default_value_t = 500)]
    sessions: usize,
    /// Reliable messages per second per session.
    #[arg(long, default_value_t = 20.0)]
    rate: f64,
    /// The game-tick mix instead (10 Hz 40 B unreliable + 1 Hz 200 B reliable).
    #[arg(long)]
    tick: bool,
    /// Idle sessions instead: nothing sent but keep-alives (one datagram per session per
    /// keep-alive interval with `--udp`).
    #[arg(long, conflicts_with = "tick")]
    idle: bool,
    /// Message size in bytes.
    #[arg(long, default_value_t = 100)]
    size: usize,
    /// Bare UDP datagrams instead of SOE sessions.
    #[arg(long)]
    udp: bool,
    /// The application protocol name.
    #[arg(long, default_value = "SoeBench")]
    protocol: String,
    /// The server's process id, to read its CPU time.
    #[arg(long)]
    pid: Option<u32>,
    /// Seconds of warm-up.
    #[arg(long, default_value_t = 2.0)]
    warm_up: f64,
    /// Seconds measured.
    #[arg(long, default_value_t = 5.0)]
    window: f64,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let load = Load {
        sessions: args.sessions,
        mix: if args.tick {
            Mix::Tick
        } else if args.idle {
            Mix::Idle
        } else {
            Mix::Echo {
                rate: args.rate,
                size: args.size,
            }
        },
    };
    let target = Target {
        addr: args.addr,
        pid: args.pid,
        wire: if args.udp { Wire::Udp } else { Wire::Soe },
        protocol: args.protocol,
        label: args.addr.to_string(),
    };
    let timing = Timing {
        warm_up: Duration::from_secs_f64(args.warm_up.max(0.0)),
        window: Duration::from_secs_f64(args.window.max(0.1)),
    };
    match measure_at(&target, &load, timing) {
        Ok(o) => {
            println!(
                "{}: {} connected, {:.0} echoes/s, server CPU {:.2} µs per message ({:.1} % of a core), \
                 server datagrams per message {:.2} in + {:.2} out, \
                 round trip p50 {:.3} ms p99 {:.3} ms, generator {:.1} % of a core, \
                 server CPU {:.3} µs per session-second{}",
                load.label(),
                o.connected,
                o.messages as f64 / o.window.as_secs_f64(),
                o.cpu_us_per_message(),
                o.core_percent(),
                o.datagrams_per_message().0,
                o.datagrams_per_message().1,
                o.p50_us / 1000.0,
                o.p99_us / 1000.0,
                o.generator_cpu.as_secs_f64() / o.window.as_secs_f64() * 100.0,
                o.cpu_us_per_session_second(),
                match o.problems(&load) {
                    p if p.is_empty() => String::new(),
                    p => format!("; {p}"),
                }
            );
            if !o.client_view.is_empty() {
                println!("  {}", o.client_view);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("fixed-load: {e}");
            ExitCode::FAILURE
        }
    }
}
