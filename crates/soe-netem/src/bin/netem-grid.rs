//! Runs the emulation grid and prints its Markdown report.
//!
//! `netem-grid [--quick] [--out FILE] [--seeds N] [--stack NAME]... [--workload NAME]...
//! [--condition TEXT]... [--no-robustness] [--rate BYTES_PER_S] [--queue DATAGRAMS]`

use std::time::Duration;

use soe_netem::{GridOptions, StackKind, Workload, run_grid};

fn main() {
    let mut opts = GridOptions::default();
    let mut out = None;
    let mut stacks = Vec::new();
    let mut workloads = Vec::new();
    let mut rtts = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || {
            args.next().unwrap_or_else(|| {
                eprintln!("{a} needs a value");
                std::process::exit(2)
            })
        };
        match a.as_str() {
            "--quick" => opts.quick = true,
            "--out" => out = Some(value()),
            "--seeds" => {
                let n: u64 = value().parse().unwrap_or(1);
                opts.seeds = (1..=n.max(1)).collect();
            }
            "--stack" => {
                let v = value();
                stacks.extend(StackKind::ALL.into_iter().filter(|k| k.name() == v));
            }
            "--workload" => {
                let v = value();
                workloads.extend(Workload::ALL.into_iter().filter(|w| w.name() == v));
            }
            "--rtt" => rtts.push(Duration::from_millis(value().parse().unwrap_or(30))),
            "--condition" => opts.conditions.push(value()),
            "--no-robustness" => opts.robustness = false,
            "--rate" => opts.rate = value().parse().unwrap_or(opts.rate),
            "--queue" => opts.queue = value().parse().unwrap_or(opts.queue),
            _ => {
                eprintln!(
                    "usage: netem-grid [--quick] [--out FILE] [--seeds N] [--stack NAME] \
                     [--workload NAME] [--rtt MS] [--condition TEXT] [--no-robustness] \
                     [--rate BYTES_PER_S] [--queue DATAGRAMS]"
                );
                std::process::exit(2);
            }
        }
    }
    if !stacks.is_empty() {
        opts.stacks = stacks;
    }
    if !workloads.is_empty() {
        opts.workloads = workloads;
    }
    if !rtts.is_empty() {
        opts.rtts = rtts;
    }
    let report = run_grid(&opts).to_markdown();
    print!("{report}");
    if let Some(path) = out
        && let Err(e) = std::fs::write(&path, &report)
    {
        eprintln!("cannot write {path}: {e}");
        std::process::exit(1);
    }
}
