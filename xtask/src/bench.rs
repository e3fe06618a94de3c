//! `cargo xtask bench`: run the criterion benchmarks and summarise them in markdown.
//!
//! Criterion leaves, for every benchmark id, `target/criterion/<id>/new/benchmark.json` (the id
//! and declared throughput) and `.../new/estimates.json` (the statistics, in nanoseconds per
//! iteration). The report lists the benchmarks whose results this run wrote, in natural order.

use std::cmp::Ordering;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::cmd::{self, format_duration};
use crate::{Error, Result};

/// Criterion options for `--quick`: one second of warm-up, two of measurement per benchmark.
const QUICK_ARGS: [&str; 4] = ["--warm-up-time", "1", "--measurement-time", "2"];

/// The side-by-side report: `compare` (our stack, soe-protocol 2.3.0, the machine's limits, the
/// fixed-load section and the loss-recovery grid) built with `profile`, writing its page to
/// `page` and the chart beside it. The fixed-load section runs `soe serve` (`soe_bin`) and the
/// Node addon's echo server (with `addon` as its addon) in processes of their own.
fn compare_command(
    quick: bool,
    profile: &str,
    page: &Path,
    soe_bin: &Path,
    addon: Option<&Path>,
    fixed_rounds: u16,
) -> Command {
    let mut command = cmd::cargo();
    command.args([
        "run",
        "--profile",
        profile,
        "-p",
        "soe-bench",
        "--bin",
        "compare",
        "--",
    ]);
    if quick {
        command.arg("--quick");
    }
    command.arg("--out").arg(page);
    command.arg("--soe-bin").arg(soe_bin);
    if fixed_rounds > 1 {
        command.arg("--fixed-rounds").arg(fixed_rounds.to_string());
    }
    let script = cmd::workspace_root().join("crates/soe-node/bench/echo-server.mjs");
    command.arg("--node-script").arg(script);
    // The hand-written part of the page (the misses explained, the C ABI and Node sections).
    let notes = cmd::workspace_root().join("docs/performance-notes.md");
    command.arg("--extra-section").arg(notes);
    if let Some(addon) = addon {
        command.env("SOE_NODE_ADDON", addon);
    }
    command
}

/// Builds what the report's fixed-load section runs beside `compare` (the `soe` tool, soe-bench's
/// servers, and the Node addon where Node is installed), then runs the report.
fn compare(
    quick: bool,
    profile: &str,
    page: &Path,
    fixed_rounds: u16,
) -> Result<std::time::Duration> {
    let node = crate::node::present();
    let mut build = cmd::cargo();
    build.args([
        "build",
        "--quiet",
        "--profile",
        profile,
        "-p",
        "soe-cli",
        "-p",
        "soe-bench",
        "--bins",
    ]);
    println!("==> {}", cmd::describe(&build));
    cmd::run_timed(&mut build)?;
    if node {
        // The addon is a library: `--bins` above would leave it out, and the page would then
        // measure whatever build the loader falls back to (a debug one, next to index.js).
        let mut addon = cmd::cargo();
        addon.args([
            "build",
            "--quiet",
            "--profile",
            profile,
            "-p",
            "soe-node",
            "--lib",
        ]);
        println!("==> {}", cmd::describe(&addon));
        cmd::run_timed(&mut addon)?;
    }
    let out = target_dir().join(if profile == "test" || profile == "dev" {
        "debug"
    } else {
        profile
    });
    let addon = out.join(format!(
        "{}soe_node{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    if !node {
        println!(
            "==> node is not installed: the report's fixed-load section leaves the Node addon out"
        );
    } else if !addon.is_file() {
        return Err(Error::new(format!(
            "the Node addon was built, but {} is missing: the report would measure another build",
            addon.display()
        )));
    }
    let mut command = compare_command(
        quick,
        profile,
        page,
        &out.join(format!("soe{}", std::env::consts::EXE_SUFFIX)),
        (node && addon.exists()).then_some(addon.as_path()),
        fixed_rounds,
    );
    println!("==> {}", cmd::describe(&command));
    cmd::run_timed(&mut command)
}

/// The loss-recovery grid alone (soe-netem's `netem-grid`), in release, written to `out`.
fn grid_command(quick: bool, out: &Path) -> Command {
    let mut command = cmd::cargo();
    command.args([
        "run",
        "--release",
        "-p",
        "soe-netem",
        "--bin",
        "netem-grid",
        "--",
    ]);
    if quick {
        command.arg("--quick");
    }
    command.arg("--out").arg(out);
    command
}

/// `cargo xtask bench`: the criterion benchmarks and the loss grid into
/// `target/bench-report.md`; with `compare`, the side-by-side report into `docs/`.
pub(crate) fn run(quick: bool, compare: bool, smoke: bool, fixed_rounds: u16) -> Result<()> {
    if compare {
        let (profile, page) = if smoke {
            (
                "test",
                target_dir().join("report-smoke").join("performance.md"),
            )
        } else {
            (
                "release",
                cmd::workspace_root().join("docs").join("performance.md"),
            )
        };
        let took = self::compare(quick, profile, &page, fixed_rounds)?;
        println!(
            "==> report ran in {}; written to {} (and .svg)",
            format_duration(took),
            page.display()
        );
        return Ok(());
    }
    criterion(quick)?;
    let target = target_dir();
    let grid = target.join("loss-grid.md");
    let mut command = grid_command(quick, &grid);
    println!("==> {}", cmd::describe(&command));
    let took = cmd::run_timed(&mut command)?;
    println!("==> loss grid ran in {}", format_duration(took));
    let text = fs::read_to_string(&grid)
        .map_err(|err| Error::new(format!("could not read {}: {err}", grid.display())))?;
    let report = target.join("bench-report.md");
    let mut all = fs::read_to_string(&report).unwrap_or_default();
    all.push('\n');
    all.push_str(&text);
    fs::write(&report, all)
        .map_err(|err| Error::new(format!("could not write {}: {err}", report.display())))?;
    println!("loss grid appended to {}", report.display());
    Ok(())
}

/// Runs `cargo bench` on every benchmark target, then writes and prints the report.
fn criterion(quick: bool) -> Result<()> {
    let started = SystemTime::now();
    let mut command = cmd::cargo();
    // `--bench '*'` selects the bench targets only. (`--benches` would also run library and
    // binary targets in bench mode, whose libtest harness rejects criterion's options.)
    command.args(["bench", "--workspace", "--bench", "*"]);
    if quick {
        command.arg("--").args(QUICK_ARGS);
    }
    println!("==> {}", cmd::describe(&command));
    let took = cmd::run_timed(&mut command)?;
    println!("==> benchmarks ran in {}", format_duration(took));

    let target = target_dir();
    let results = collect(&target.join("criterion"), started)?;
    let report = render(&results, quick);
    let path = target.join("bench-report.md");
    fs::write(&path, &report)
        .map_err(|err| Error::new(format!("could not write {}: {err}", path.display())))?;
    println!();
    print!("{report}");
    println!();
    println!("report written to {}", path.display());
    Ok(())
}

/// Cargo's target directory, as `cargo metadata` reports it (honouring `CARGO_TARGET_DIR` and
/// `build.target-dir`); `<root>/target` if that cannot be read.
fn target_dir() -> PathBuf {
    /// The one field of `cargo metadata` output that xtask needs.
    #[derive(Deserialize)]
    struct Metadata {
        target_directory: PathBuf,
    }

    let mut command = cmd::cargo();
    command.args(["metadata", "--format-version", "1", "--no-deps"]);
    cmd::output(&mut command)
        .ok()
        .and_then(|text| serde_json::from_str::<Metadata>(&text).ok())
        .map_or_else(
            || cmd::workspace_root().join("target"),
            |meta| meta.target_directory,
        )
}

/// Criterion's `new/benchmark.json`: what was measured.
#[derive(Debug, Deserialize)]
struct BenchmarkFile {
    /// `group/function/parameter`.
    full_id: String,
    /// `null` when the benchmark declared none.
    #[serde(default)]
    throughput: Option<Throughput>,
}

/// Criterion's `new/estimates.json`, the part the report uses.
#[derive(Debug, Deserialize)]
struct EstimatesFile {
    mean: Estimate,
}

/// One statistic of `estimates.json`, in nanoseconds per iteration.
#[derive(Debug, Deserialize)]
struct Estimate {
    point_estimate: f64,
    confidence_interval: Option<ConfidenceInterval>,
}

/// The confidence interval of an [`Estimate`].
#[derive(Debug, Deserialize)]
struct ConfidenceInterval {
    confidence_level: f64,
    lower_bound: f64,
    upper_bound: f64,
}

/// Throughput declared for a benchmark, per iteration, in criterion's serialisation
/// (`{"Bytes":512}`, `{"Elements":1}`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
enum Throughput {
    /// `Throughput::Bytes`: shown in binary units (MiB/s), as criterion prints it.
    Bytes(f64),
    /// `Throughput::BytesDecimal`: shown in decimal units (MB/s).
    BytesDecimal(f64),
    /// `Throughput::Elements`: shown as elements per second.
    Elements(f64),
    /// `Throughput::ElementsAndBytes` (criterion 0.6 and later).
    ElementsAndBytes { elements: f64, bytes: f64 },
}

impl Throughput {
    /// The rate at `ns_per_iter`, with its unit.
    fn rate(self, ns_per_iter: f64) -> String {
        let per_sec = |count: f64| count / (ns_per_iter * 1e-9);
        match self {
            Self::Bytes(n) => scaled(per_sec(n), 1024.0, &["B/s", "KiB/s", "MiB/s", "GiB/s"]),
            Self::BytesDecimal(n) => scaled(per_sec(n), 1000.0, &["B/s", "KB/s", "MB/s", "GB/s"]),
            Self::Elements(n) => elements(per_sec(n)),
            Self::ElementsAndBytes { elements: e, bytes } => format!(
                "{}, {}",
                elements(per_sec(e)),
                scaled(per_sec(bytes), 1024.0, &["B/s", "KiB/s", "MiB/s", "GiB/s"])
            ),
        }
    }
}

/// An element rate: `elem/s`, `Kelem/s`, `Melem/s`, `Gelem/s`.
fn elements(per_sec: f64) -> String {
    scaled(
        per_sec,
        1000.0,
        &["elem/s", "Kelem/s", "Melem/s", "Gelem/s"],
    )
}

/// `value` divided by `step` until it is below `step` or the units run out, with three
/// significant figures.
fn scaled(mut value: f64, step: f64, units: &[&str]) -> String {
    let mut unit = 0;
    while value >= step && unit + 1 < units.len() {
        value /= step;
        unit += 1;
    }
    format!("{} {}", three_figures(value), units[unit])
}

/// A number with three significant figures (no exponent): `1.23`, `12.3`, `123`, `1234`.
fn three_figures(value: f64) -> String {
    let abs = value.abs();
    if abs < 10.0 {
        format!("{value:.2}")
    } else if abs < 100.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.0}")
    }
}

/// A time per iteration given in nanoseconds: `812 ps`, `12.3 ns`, `4.56 µs`, `7.89 ms`, `1.23 s`.
fn time(ns: f64) -> String {
    let (value, unit) = if ns < 1.0 {
        (ns * 1e3, "ps")
    } else if ns < 1e3 {
        (ns, "ns")
    } else if ns < 1e6 {
        (ns / 1e3, "µs")
    } else if ns < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    format!("{} {unit}", three_figures(value))
}

/// One benchmark's results.
#[derive(Debug, Clone, PartialEq)]
struct Measurement {
    /// Criterion's full id: `group/function/parameter`.
    id: String,
    /// Mean time per iteration, nanoseconds.
    mean_ns: f64,
    /// Confidence interval of the mean, nanoseconds, and its level (0.95 by default).
    interval: Option<(f64, f64, f64)>,
    /// Declared throughput per iteration.
    throughput: Option<Throughput>,
}

/// Finds every `new/` result directory under `criterion_dir` written at or after `since`.
fn collect(criterion_dir: &Path, since: SystemTime) -> Result<Vec<Measurement>> {
    let mut dirs = Vec::new();
    if criterion_dir.is_dir() {
        find_result_dirs(criterion_dir, &mut dirs)?;
    }
    let mut results = Vec::new();
    for dir in dirs {
        let estimates = dir.join("estimates.json");
        let fresh = fs::metadata(&estimates)
            .and_then(|meta| meta.modified())
            .is_ok_and(|modified| modified >= since);
        if fresh {
            results.push(read_result(&dir)?);
        }
    }
    results.sort_by(|a, b| natural_cmp(&a.id, &b.id));
    Ok(results)
}

/// Pushes every directory named `new` that holds a `benchmark.json`, searching depth first.
fn find_result_dirs(dir: &Path, found: &mut Vec<PathBuf>) -> Result<()> {
    let entries = fs::read_dir(dir)
        .map_err(|err| Error::new(format!("could not list {}: {err}", dir.display())))?;
    for entry in entries {
        let entry = entry.map_err(|err| Error::new(format!("{}: {err}", dir.display())))?;
        let path = entry.path();
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        if entry.file_name() == "new" {
            if path.join("benchmark.json").is_file() {
                found.push(path);
            }
        } else if entry.file_name() != "report" {
            find_result_dirs(&path, found)?;
        }
    }
    Ok(())
}

/// Reads `benchmark.json` and `estimates.json` from one `new/` directory.
fn read_result(dir: &Path) -> Result<Measurement> {
    let benchmark: BenchmarkFile = read_json(&dir.join("benchmark.json"))?;
    let estimates: EstimatesFile = read_json(&dir.join("estimates.json"))?;
    Ok(Measurement {
        id: benchmark.full_id,
        mean_ns: estimates.mean.point_estimate,
        interval: estimates
            .mean
            .confidence_interval
            .map(|ci| (ci.lower_bound, ci.upper_bound, ci.confidence_level)),
        throughput: benchmark.throughput,
    })
}

/// Reads and deserialises one JSON file; errors name the file.
fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T> {
    let text = fs::read_to_string(path)
        .map_err(|err| Error::new(format!("could not read {}: {err}", path.display())))?;
    serde_json::from_str(&text).map_err(|err| Error::new(format!("{}: {err}", path.display())))
}

/// Orders ids segment by segment, comparing all-digit segments as numbers, so `crc/32` comes
/// before `crc/512`.
fn natural_cmp(a: &str, b: &str) -> Ordering {
    let mut left = a.split('/');
    let mut right = b.split('/');
    loop {
        match (left.next(), right.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) => {
                let order = match (x.parse::<u64>(), y.parse::<u64>()) {
                    (Ok(m), Ok(n)) => m.cmp(&n),
                    _ => x.cmp(y),
                };
                if order != Ordering::Equal {
                    return order;
                }
            }
        }
    }
}

/// The markdown report.
fn render(results: &[Measurement], quick: bool) -> String {
    let mut out = String::from("# Benchmark report\n\n");
    out.push_str(
        "Criterion results written by the last `cargo xtask bench` \
         (from `target/criterion/**/new/`). Times are the mean per iteration; \
         throughput is computed from it.\n",
    );
    if quick {
        out.push_str(
            "\nQuick run (`--quick`: 1 s warm-up, 2 s measurement per benchmark): \
             figures are indicative only.\n",
        );
    }
    out.push('\n');
    if results.is_empty() {
        out.push_str("No benchmark results were written by this run.\n");
        return out;
    }
    out.push_str("| Benchmark | Mean | Confidence interval | Throughput |\n");
    out.push_str("|---|---:|---:|---:|\n");
    for r in results {
        let interval = r.interval.map_or_else(
            || "–".to_owned(),
            |(low, high, level)| format!("{} – {} ({:.0} %)", time(low), time(high), level * 100.0),
        );
        let throughput = r
            .throughput
            .map_or_else(|| "–".to_owned(), |t| t.rate(r.mean_ns));
        // Writing to a String cannot fail.
        let _ = writeln!(
            out,
            "| `{}` | {} | {interval} | {throughput} |",
            r.id,
            time(r.mean_ns)
        );
    }
    out.push_str(
        "\nByte rates declared with `Throughput::Bytes` are in binary units \
         (1 MiB/s = 2^20 bytes/s), as criterion prints them; `Throughput::BytesDecimal` \
         rates are in MB/s (10^6 bytes/s).\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_rates_have_three_figures() {
        assert_eq!(time(0.5), "500 ps");
        assert_eq!(time(12.34), "12.3 ns");
        assert_eq!(time(4_560.0), "4.56 µs");
        assert_eq!(time(7_890_000.0), "7.89 ms");
        assert_eq!(time(1.5e9), "1.50 s");
        // 1 MiB in 1 ms.
        assert_eq!(Throughput::Bytes(1_048_576.0).rate(1e6), "1000 MiB/s");
        assert_eq!(Throughput::BytesDecimal(1_000_000.0).rate(1e6), "1.00 GB/s");
        assert_eq!(Throughput::Elements(1.0).rate(250.0), "4.00 Melem/s");
    }

    #[test]
    fn throughput_reads_criterion_json() {
        let parse = |text: &str| serde_json::from_str::<Option<Throughput>>(text).unwrap();
        assert_eq!(parse(r#"{"Bytes":512}"#), Some(Throughput::Bytes(512.0)));
        assert_eq!(parse(r#"{"Elements":3}"#), Some(Throughput::Elements(3.0)));
        assert_eq!(
            parse(r#"{"ElementsAndBytes":{"elements":2,"bytes":64}}"#),
            Some(Throughput::ElementsAndBytes {
                elements: 2.0,
                bytes: 64.0
            })
        );
        assert_eq!(parse("null"), None);
    }

    #[test]
    fn ids_sort_naturally() {
        let mut ids = ["crc/soe/16384", "crc/soe/32", "crc/byte/512", "crc/soe/512"];
        ids.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(
            ids,
            ["crc/byte/512", "crc/soe/32", "crc/soe/512", "crc/soe/16384"]
        );
    }

    #[test]
    fn collects_fresh_results_from_a_criterion_tree() {
        let root = std::env::temp_dir().join(format!("xtask-bench-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let new = root.join("rc4").join("apply").join("64").join("new");
        fs::create_dir_all(&new).unwrap();
        fs::create_dir_all(root.join("rc4").join("report")).unwrap();
        fs::write(
            new.join("benchmark.json"),
            r#"{"group_id":"rc4","function_id":"apply","value_str":"64",
                "throughput":{"Bytes":64},"full_id":"rc4/apply/64"}"#,
        )
        .unwrap();
        fs::write(
            new.join("estimates.json"),
            r#"{"mean":{"confidence_interval":{"confidence_level":0.95,
                "lower_bound":60.0,"upper_bound":70.0},"point_estimate":64.0,
                "standard_error":1.0}}"#,
        )
        .unwrap();

        let results = collect(&root, SystemTime::UNIX_EPOCH).unwrap();
        assert_eq!(
            results,
            [Measurement {
                id: "rc4/apply/64".into(),
                mean_ns: 64.0,
                interval: Some((60.0, 70.0, 0.95)),
                throughput: Some(Throughput::Bytes(64.0)),
            }]
        );
        let report = render(&results, true);
        assert!(report.contains("| `rc4/apply/64` | 64.0 ns | 60.0 ns – 70.0 ns (95 %) |"));
        assert!(report.contains("954 MiB/s"));

        // Results older than the run are left out.
        let later = SystemTime::now() + std::time::Duration::from_secs(3600);
        assert!(collect(&root, later).unwrap().is_empty());
        fs::remove_dir_all(&root).unwrap();
    }
}
