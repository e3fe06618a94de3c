//! The protocol endpoint's instructions per echo stay within a bound (issue 44).
//!
//! Counted, not timed, so that a shared or slow machine does not move it: `endpoint-cost`
//! (release build) runs under `valgrind --tool=callgrind --toggle-collect='*server_turn*'`,
//! which counts every instruction the server endpoint runs in the measured window, and the
//! count is divided by the messages echoed there. Same work as the figure of record in
//! docs/performance-notes.md (reliable 100-byte echoes with acks and CRC, one datagram per
//! wake-up, 20,000 echoes a second), over a shorter window: 2,000 sessions, a quarter of a
//! second warm-up and half a second measured (10,000 echoes), which reads within 1 % of the full
//! run's figure and takes about 15 s under valgrind, plus the release build of `endpoint-cost`
//! when it is not already there.
//!
//! Without valgrind the test says so and passes, except under `CI=true`, where it fails
//! (`.ci/run` installs valgrind).

use std::path::PathBuf;
use std::process::Command;

/// The most instructions per echo the endpoint may spend: it spent 5,382 in this window (5,357
/// in the full run) when this bound was set, 5,390 (5,372) with the small-chunk arenas, against
/// 10,597 before issue 44's work; the rest, about 2 %, is room for compilers and dependencies to
/// move it, and keeps the count within issue 44's target of 5,500. Lower the bound as the count
/// falls.
const BOUND: f64 = 5_490.0;

/// The load: sessions, messages per second per session, warm-up and measured seconds.
const ARGS: [&str; 8] = [
    "--sessions",
    "2000",
    "--rate",
    "10",
    "--warm-up",
    "0.25",
    "--seconds",
    "0.5",
];

#[test]
fn the_endpoint_spends_at_most_the_bound_in_instructions_per_echo() {
    if !valgrind_present() {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(
            !ci,
            "valgrind is not installed: the instruction bound cannot be checked (CI=true)"
        );
        eprintln!("SKIPPED: valgrind is not installed, so instructions per echo are not counted");
        return;
    }
    let program = endpoint_cost();
    let out_file = std::env::temp_dir().join(format!("endpoint-cost-{}.cg", std::process::id()));
    let output = Command::new("valgrind")
        .args(["--tool=callgrind", "--toggle-collect=*server_turn*"])
        .arg(format!("--callgrind-out-file={}", out_file.display()))
        .arg(&program)
        .args(ARGS)
        .output()
        .expect("valgrind runs");
    let _ = std::fs::remove_file(&out_file);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "endpoint-cost under valgrind failed: {stdout}\n{stderr}"
    );
    let collected = number_after(&stderr, "Collected : ")
        .unwrap_or_else(|| panic!("no instruction count in valgrind's output:\n{stderr}"));
    let echoed = number_after(&stdout, "echoed ")
        .unwrap_or_else(|| panic!("no echo count in endpoint-cost's output:\n{stdout}"));
    assert!(echoed >= 9_000, "too few echoes measured: {stdout}");
    let per_echo = collected as f64 / echoed as f64;
    println!(
        "endpoint-cost {}: {collected} instructions for {echoed} echoes, {per_echo:.0} per echo \
         (bound {BOUND:.0})",
        ARGS.join(" ")
    );
    assert!(
        per_echo <= BOUND,
        "the endpoint spends {per_echo:.0} instructions per echo, past the bound of {BOUND:.0} \
         (endpoint-cost {}; docs/performance-notes.md tells how to profile it)",
        ARGS.join(" ")
    );
}

fn valgrind_present() -> bool {
    Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Builds `endpoint-cost` in release (a no-op when it is up to date) in this test's target
/// directory, and returns its path.
fn endpoint_cost() -> PathBuf {
    // This test runs as <target>/<profile>/deps/instructions-<hash>.
    let exe = std::env::current_exe().expect("the test's own path");
    let target = exe
        .ancestors()
        .nth(3)
        .expect("the target directory")
        .to_path_buf();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--release", "--quiet", "-p", "soe-bench"])
        .args(["--bin", "endpoint-cost", "--target-dir"])
        .arg(&target)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building endpoint-cost failed");
    target
        .join("release")
        .join(format!("endpoint-cost{}", std::env::consts::EXE_SUFFIX))
}

/// The number (digits and commas) right after `label` in `text`.
fn number_after(text: &str, label: &str) -> Option<u64> {
    let start = text.find(label)? + label.len();
    let digits: String = text
        .get(start..)?
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}
