//! `soe-sim`: runs a sweep of the whole-server simulation; `cargo xtask sim` calls it.
//!
//! `soe-sim [--seeds N] [--from S] [--clients N] [--active SECS] [--no-faults]
//! [--plant mutate|drop|deadline|queue] [--jobs N]`. Seeds run on `--jobs` threads (default: one per
//! core). Exits 1 when a seed fails, after printing each failure
//! with the command that replays it.

#![warn(clippy::too_many_lines)] // the limit is in clippy.toml

use std::process::ExitCode;
use std::time::{Duration, Instant};

use soe_sim::{Options, Plant, sweep_parallel};

fn main() -> ExitCode {
    let mut seeds = 100u64;
    let mut from = 0u64;
    let mut jobs = std::thread::available_parallelism().map_or(1, usize::from);
    let mut opts = Options::default();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().unwrap_or_default();
        match a.as_str() {
            "--seeds" => seeds = value().parse().unwrap_or(seeds),
            "--from" => from = value().parse().unwrap_or(from),
            "--clients" => {
                let n = value().parse().unwrap_or(opts.max_clients);
                opts = opts.with_max_clients(n);
            }
            "--active" => {
                let s = value().parse().unwrap_or(opts.active.as_secs());
                opts = opts.with_active(Duration::from_secs(s));
            }
            "--jobs" => jobs = value().parse().unwrap_or(jobs).max(1),
            "--no-faults" => opts = opts.with_faults(false),
            "--plant" => {
                let name = value();
                let Some(p) = Plant::from_name(&name) else {
                    let names = Plant::ALL.map(Plant::name).join(", ");
                    eprintln!("soe-sim: unknown plant `{name}` ({names})");
                    return ExitCode::from(2);
                };
                opts = opts.with_plant(Some(p));
            }
            _ => {
                let names = Plant::ALL.map(Plant::name).join("|");
                eprintln!(
                    "usage: soe-sim [--seeds N] [--from S] [--clients N] [--active SECS] \
                     [--no-faults] [--plant {names}] [--jobs N]"
                );
                return ExitCode::from(2);
            }
        }
    }
    let started = Instant::now();
    let mut done = 0u64;
    let report = sweep_parallel(from, seeds, &opts, jobs, |o| {
        done += 1;
        if let Some(v) = &o.violation {
            println!(
                "seed {} FAILED: {v}\n  replay: {}",
                o.seed,
                opts.replay_command(o.seed)
            );
        } else if seeds <= 20 || done.is_multiple_of(100) {
            println!(
                "seed {}: ok ({} clients, {} sessions, {} steps) [{done}/{seeds}, {:.0} s]",
                o.seed,
                o.clients,
                o.sessions,
                o.steps,
                started.elapsed().as_secs_f64()
            );
        }
    });
    println!("{}", report.summary());
    println!("wall time {:.1} s", started.elapsed().as_secs_f64());
    if report.failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        for (_, _, replay) in &report.failures {
            println!("replay: {replay}");
        }
        ExitCode::FAILURE
    }
}
