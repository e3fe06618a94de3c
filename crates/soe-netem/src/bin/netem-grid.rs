//! Runs the emulation grid and prints its Markdown report.

#![warn(clippy::too_many_lines)] // the limit is in clippy.toml

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use soe_netem::{GridOptions, StackKind, Workload, run_grid};

/// The SOE network emulation grid: every stack, workload, round trip and condition, in virtual
/// time; prints a Markdown report (goodput against the ideal, latency in RTTs, resends, deaths,
/// and the loss-recovery targets).
#[derive(Debug, Parser)]
#[command(name = "netem-grid")]
struct Args {
    /// Shorter runs and fewer seeds (a smoke run of the whole grid).
    #[arg(long)]
    quick: bool,
    /// Also write the report to this file.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Seeds per configuration (1..=N).
    #[arg(long, value_name = "N")]
    seeds: Option<u64>,
    /// Only these stacks (ours, ours-64k, ours-vs-slow-acker, ours-vs-h1z1, soe-protocol);
    /// repeatable.
    #[arg(long = "stack", value_name = "NAME")]
    stacks: Vec<String>,
    /// Only these workloads (echo, bulk, tick); repeatable.
    #[arg(long = "workload", value_name = "NAME")]
    workloads: Vec<String>,
    /// Only these round trips, in milliseconds; repeatable.
    #[arg(long = "rtt", value_name = "MS")]
    rtts: Vec<u64>,
    /// Only conditions whose name contains this text (e.g. "loss 1"); repeatable.
    #[arg(long = "condition", value_name = "TEXT")]
    conditions: Vec<String>,
    /// Leave out the 60-second robustness runs.
    #[arg(long)]
    no_robustness: bool,
    /// Bottleneck rate in bytes per second.
    #[arg(long, value_name = "BYTES_PER_S")]
    rate: Option<u64>,
    /// Bottleneck queue in datagrams.
    #[arg(long, value_name = "DATAGRAMS")]
    queue: Option<usize>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let mut opts = if args.quick {
        GridOptions::quick()
    } else {
        GridOptions::default()
    };
    if let Some(n) = args.seeds {
        opts.seeds = (1..=n.max(1)).collect();
    }
    let stacks: Vec<StackKind> = StackKind::ALL
        .into_iter()
        .filter(|k| args.stacks.iter().any(|s| s == k.name()))
        .collect();
    if !stacks.is_empty() {
        opts.stacks = stacks;
    } else if !args.stacks.is_empty() {
        eprintln!("no such stack among {:?}", args.stacks);
        return ExitCode::from(2);
    }
    let workloads: Vec<Workload> = Workload::ALL
        .into_iter()
        .filter(|w| args.workloads.iter().any(|s| s == w.name()))
        .collect();
    if !workloads.is_empty() {
        opts.workloads = workloads;
    } else if !args.workloads.is_empty() {
        eprintln!("no such workload among {:?}", args.workloads);
        return ExitCode::from(2);
    }
    if !args.rtts.is_empty() {
        opts.rtts = args
            .rtts
            .iter()
            .map(|&ms| Duration::from_millis(ms))
            .collect();
    }
    opts.conditions.extend(args.conditions);
    if args.no_robustness {
        opts.robustness = false;
    }
    if let Some(rate) = args.rate {
        opts.rate = rate;
    }
    if let Some(queue) = args.queue {
        opts.queue = queue;
    }
    let report = run_grid(&opts).to_markdown();
    print!("{report}");
    if let Some(path) = args.out
        && let Err(e) = std::fs::write(&path, &report)
    {
        eprintln!("cannot write {}: {e}", path.display());
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
