//! `compare`: runs every workload of soe-bench and prints one table; with `--out FILE` also
//! writes the markdown report there and the SVG chart beside it (same name, `.svg`).
//!
//! ```text
//! cargo run -p soe-bench --release --bin compare -- [--quick] [--out docs/performance.md]
//!     [--soe-bin target/release/soe] [--node-script crates/soe-node/bench/echo-server.mjs]
//!     [--only fixed|recorder] [--placement apart|shared|free] [--no-fixed]
//!     [--fixed-rounds N]
//!     [--extra-section FILE]...
//! ```
//!
//! `--only recorder` runs only the flight recorder's section (its cost on and off,
//! [`soe_bench::recorder`]): a few seconds with `--quick`.
//!
//! The fixed-load section runs each server in a process of its own: `soe serve` (`--soe-bin`),
//! the Node addon and its h1z1 facade (`--node-script`, run with `node`), and soe-protocol's
//! server and the bare UDP echoes (`bench-server`, found beside this binary). A server whose
//! program is not given or not found is left out of the section with a word saying so.
//!
//! `--extra-section FILE` appends FILE's markdown verbatim after our sections (repeatable): the
//! hook for other reports such as the network emulator grid.

#![warn(clippy::too_many_lines)] // the limit is in clippy.toml

use std::alloc::System;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use soe_bench::{
    PageInfo, Sizes, fixed, machine_description, markdown_page, recorder, run_all, svg_chart,
    text_table,
};
use soe_netem::{GridOptions, run_grid};
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Runs our stack, soe-protocol 2.3.0 and the machine's limits side by side, on identical
/// workloads, and prints one table of figures and ratios.
#[derive(Debug, Parser)]
#[command(name = "compare")]
struct Args {
    /// Small sizes and short runs: checks that everything runs (timings mean little).
    #[arg(long)]
    quick: bool,
    /// Also write the markdown report here, and the SVG chart beside it (same name, `.svg`).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Append this markdown file after our sections (repeatable).
    #[arg(long = "extra-section", value_name = "FILE")]
    extra_sections: Vec<PathBuf>,
    /// Leave out the loss-recovery grid (soe-netem: every stack in the virtual-time lossy
    /// network emulator), which otherwise runs after the other workloads and becomes a
    /// section of the report.
    #[arg(long)]
    no_loss_grid: bool,
    /// The `soe` tool, for `soe serve` in the fixed-load section.
    #[arg(long, value_name = "PATH")]
    soe_bin: Option<PathBuf>,
    /// The Node addon's echo server script, for the fixed-load section.
    #[arg(long, value_name = "PATH")]
    node_script: Option<PathBuf>,
    /// Leave out the fixed-load section.
    #[arg(long)]
    no_fixed: bool,
    /// Run only this section: `fixed` (the fixed-load section) or `recorder` (the flight
    /// recorder's cost); no other workload, no loss grid.
    #[arg(long, value_name = "SECTION", value_parser = ["fixed", "recorder"])]
    only: Option<String>,
    /// Where the fixed-load section's servers and its load generator run: `apart` (the
    /// generator on one CPU, each server on the others), `shared` (both on one CPU) or `free`
    /// (where the scheduler puts them). Linux with two CPUs or more; elsewhere, `free`.
    #[arg(long, default_value = "apart")]
    placement: fixed::Placement,
    /// Run the fixed-load section this many times, interleaved, and report each figure as
    /// the median round (1 to 20; default 1): on a shared machine one run decides little.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=20))]
    fixed_rounds: u16,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let quick = args.quick;
    let out = args.out;
    let mut extra = Vec::new();
    for path in &args.extra_sections {
        match std::fs::read_to_string(path) {
            Ok(text) => extra.push(text),
            Err(e) => {
                eprintln!("compare: cannot read {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        }
    }
    let sizes = if quick { Sizes::QUICK } else { Sizes::FULL };
    let only = args.only.as_deref();
    let mut rows = Vec::new();
    match only {
        None => rows = run_all(sizes, GLOBAL),
        Some("recorder") => recorder::rows(
            &mut rows,
            GLOBAL,
            &sizes.recorder_sessions,
            sizes.recorder_batches,
        ),
        Some(_) => {}
    }
    let mut fixed_section = None;
    if !args.no_fixed && matches!(only, None | Some("fixed")) {
        let servers = fixed::Servers {
            soe: args.soe_bin.clone(),
            bench_server: std::env::current_exe()
                .ok()
                .map(|exe| {
                    exe.with_file_name(format!("bench-server{}", std::env::consts::EXE_SUFFIX))
                })
                .filter(|p| p.exists()),
            node_script: args.node_script.clone(),
            placement: args.placement,
        };
        let (fixed_rows, section, curve) =
            fixed::run(&servers, quick, usize::from(args.fixed_rounds));
        rows.extend(fixed_rows);
        println!("{section}");
        fixed_section = Some((section, curve));
    }
    println!("{}", text_table(&rows));
    if !args.no_loss_grid && only.is_none() {
        let options = if quick {
            GridOptions::quick()
        } else {
            GridOptions::default()
        };
        let grid = run_grid(&options);
        let markdown = grid.to_markdown();
        // The grid's own heading becomes a section of the page.
        let section = markdown.replacen("# ", "## ", 1).replace("\n## ", "\n### ");
        if let Some(line) = markdown
            .lines()
            .find(|l| l.contains(" of ") && l.contains("met"))
        {
            println!("loss-recovery grid: {line}");
        }
        extra.insert(0, section);
    }
    let mut curve = None;
    if let Some((section, chart)) = fixed_section {
        extra.insert(0, section);
        curve = chart;
    }
    if let Some(md) = out {
        if let Some(dir) = md.parent().filter(|d| !d.as_os_str().is_empty())
            && let Err(e) = std::fs::create_dir_all(dir)
        {
            eprintln!("compare: cannot create {}: {e}", dir.display());
            return ExitCode::FAILURE;
        }
        let svg = md.with_extension("svg");
        let chart = svg
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let info = PageInfo {
            machine: machine_description(),
            how: format!(
                "`compare{}` ({} sizes): in memory {} messages per run (a quarter for the peer and \
                 for 4000 B), loopback echoes measured for {:?} each, {} sessions in the scale \
                 rows, primitives {:?} each, the flight recorder at {} and {} sessions ({} \
                 batches each way).",
                if quick { " --quick" } else { "" },
                if quick { "quick" } else { "full" },
                sizes.inmem_messages,
                sizes.echo_time,
                sizes.scale_sessions,
                sizes.primitive_time,
                sizes.recorder_sessions[0],
                sizes.recorder_sessions[1],
                sizes.recorder_batches
            ),
            chart,
            extra_sections: extra,
        };
        let written = std::fs::write(&md, markdown_page(&rows, &info))
            .and_then(|()| std::fs::write(&svg, svg_chart(&rows)))
            .and_then(|()| match &curve {
                // The fixed-load section links it by this name, beside the page.
                Some(chart) => std::fs::write(md.with_file_name(fixed::CURVE_CHART), chart),
                None => Ok(()),
            });
        if let Err(e) = written {
            eprintln!("compare: cannot write {}: {e}", md.display());
            return ExitCode::FAILURE;
        }
        eprintln!("compare: wrote {} and {}", md.display(), svg.display());
    }
    ExitCode::SUCCESS
}
