//! `compare`: runs every workload of soe-bench and prints one table; with `--out FILE` also
//! writes the markdown report there and the SVG chart beside it (same name, `.svg`).
//!
//! ```text
//! cargo run -p soe-bench --release --bin compare -- [--quick] [--out docs/performance.md]
//!     [--extra-section FILE]...
//! ```
//!
//! `--extra-section FILE` appends FILE's markdown verbatim after our sections (repeatable): the
//! hook for other reports such as the network emulator grid.

use std::alloc::System;
use std::path::PathBuf;
use std::process::ExitCode;

use soe_bench::{
    PageInfo, Sizes, machine_description, markdown_page, run_all, svg_chart, text_table,
};
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn main() -> ExitCode {
    let mut quick = false;
    let mut out: Option<PathBuf> = None;
    let mut extra = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => quick = true,
            "--out" => out = args.next().map(PathBuf::from),
            "--extra-section" => match args.next().map(std::fs::read_to_string) {
                Some(Ok(text)) => extra.push(text),
                _ => {
                    eprintln!("compare: --extra-section needs a readable markdown file");
                    return ExitCode::FAILURE;
                }
            },
            "-h" | "--help" => {
                println!(
                    "compare [--quick] [--out FILE.md] [--extra-section FILE.md]...\n\
                     Runs our stack, soe-protocol 2.3.0 and the machine's limits side by side."
                );
                return ExitCode::SUCCESS;
            }
            // cargo bench passes --bench; ignore it and anything else unknown.
            other => eprintln!("compare: ignoring argument {other}"),
        }
    }
    let sizes = if quick { Sizes::QUICK } else { Sizes::FULL };
    let rows = run_all(sizes, GLOBAL);
    println!("{}", text_table(&rows));
    if let Some(md) = out {
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
                 rows, primitives {:?} each.",
                if quick { " --quick" } else { "" },
                if quick { "quick" } else { "full" },
                sizes.inmem_messages,
                sizes.echo_time,
                sizes.scale_sessions,
                sizes.primitive_time
            ),
            chart,
            extra_sections: extra,
        };
        let written = std::fs::write(&md, markdown_page(&rows, &info))
            .and_then(|()| std::fs::write(&svg, svg_chart(&rows)));
        if let Err(e) = written {
            eprintln!("compare: cannot write {}: {e}", md.display());
            return ExitCode::FAILURE;
        }
        eprintln!("compare: wrote {} and {}", md.display(), svg.display());
    }
    ExitCode::SUCCESS
}
