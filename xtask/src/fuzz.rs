//! `cargo xtask fuzz`: run every cargo-fuzz target for a bounded time.
//!
//! Fuzzing needs the nightly toolchain (for the sanitizer flags) and `cargo-fuzz`. Where either is
//! missing this is not a failure: the normal test suite runs seeded random-input tests on stable
//! that hold the same promise (no input makes a decoder panic), only with less coverage guidance.

use std::process::Command;
use std::time::Instant;

use crate::cmd::{self, format_duration};
use crate::{Error, Result};

/// Seconds per target when `--seconds` is not given.
pub(crate) const DEFAULT_SECONDS: u64 = 30;

/// Runs each target listed by `cargo fuzz list` for `seconds` seconds.
pub(crate) fn run(seconds: u64) -> Result<()> {
    let fuzz_dir = cmd::workspace_root().join("fuzz");
    if !fuzz_dir.join("Cargo.toml").is_file() {
        println!(
            "fuzz: skipped: there is no fuzz/ crate yet. The seeded random-input tests in \
             `cargo test --workspace` cover the no-panic promise."
        );
        return Ok(());
    }
    let missing = if !cmd::succeeds_quietly(nightly().arg("--version")) {
        Some("the nightly toolchain is not installed (`rustup toolchain install nightly`)")
    } else if !cmd::succeeds_quietly(nightly().args(["fuzz", "--version"])) {
        Some("cargo-fuzz is not installed (`cargo install cargo-fuzz`)")
    } else {
        None
    };
    if let Some(missing) = missing {
        println!(
            "fuzz: skipped: {missing}. Fuzzing needs nightly and cargo-fuzz; without them the \
             seeded random-input tests in `cargo test --workspace` cover the no-panic promise."
        );
        return Ok(());
    }

    let listing = cmd::output(nightly().args(["fuzz", "list"]).current_dir(&fuzz_dir))?;
    let targets: Vec<&str> = listing
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if targets.is_empty() {
        println!("fuzz: `cargo fuzz list` reports no targets; nothing to run");
        return Ok(());
    }

    let started = Instant::now();
    for (index, target) in targets.iter().enumerate() {
        // libFuzzer writes new inputs into the first corpus directory: keep them under target/
        // so a run never litters the committed seed corpus in fuzz/corpus/.
        let scratch = cmd::workspace_root()
            .join("target")
            .join("fuzz-corpus")
            .join(target);
        std::fs::create_dir_all(&scratch)
            .map_err(|err| Error::new(format!("cannot create {}: {err}", scratch.display())))?;
        let seeds = fuzz_dir.join("corpus").join(target);
        let mut command = nightly();
        command.args(["fuzz", "run", target]).arg(&scratch);
        if seeds.is_dir() {
            command.arg(&seeds);
        }
        command
            .arg("--")
            .arg(format!("-max_total_time={seconds}"))
            .current_dir(&fuzz_dir);
        println!(
            "==> [{}/{}] {target}: {}",
            index + 1,
            targets.len(),
            cmd::describe(&command)
        );
        let took = cmd::run_timed(&mut command).map_err(|err| {
            Error::new(format!(
                "fuzz target `{target}` failed; the crashing input is under \
                 fuzz/artifacts/{target}/: {err}"
            ))
        })?;
        println!("==> {target}: no crash in {}", format_duration(took));
    }
    println!(
        "fuzz: {} target(s), {seconds} s each, no crash ({} in all)",
        targets.len(),
        format_duration(started.elapsed())
    );
    Ok(())
}

/// `cargo +nightly`, through the rustup proxy on the `PATH` (the `+toolchain` syntax needs it),
/// run from the workspace root.
fn nightly() -> Command {
    let mut command = Command::new("cargo");
    command
        .arg("+nightly")
        .current_dir(cmd::workspace_root())
        // Set by the rustup proxy that started xtask; `+nightly` overrides it, but a child
        // process that calls plain `cargo` or `rustc` must not be pinned to stable.
        .env_remove("RUSTUP_TOOLCHAIN");
    command
}
