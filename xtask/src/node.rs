//! `cargo xtask node`: the Node addon (soe-node) built, tested with Node's own runner, packed
//! and installed the way a user installs it.
//!
//! 1. Builds `soe-node` (the addon) and `soe-cli` (the `soe` tool the tests drive), and copies
//!    the addon next to `crates/soe-node/index.js` as `soe_node.node` (the local build the
//!    loader falls back to).
//! 2. Installs the package's dev dependencies (`typescript`, `@types/node`, from the npm
//!    registry) for the types test; where that fails the types test skips, except under
//!    `CI=true`, where it fails.
//! 3. Runs `npm test` (`node --test`: every test has its own deadline) under a deadline of its
//!    own, killing the whole process group if it is reached, so that nothing hangs CI.
//! 4. Stages this machine's platform package from the debug build, then runs
//!    `scripts/pack-install-test.mjs` with a folder first on `PATH` whose `cargo`, `rustc` and
//!    `rustup` refuse to run: it packs the main and the
//!    platform package, installs the tarballs offline into an empty directory, and runs an echo
//!    from there.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::cmd;
use crate::{Error, Result};

/// The most `npm test` may take before it is killed (it takes about a minute).
const TEST_DEADLINE: Duration = Duration::from_secs(10 * 60);
/// The most the pack-and-install test may take.
const PACK_DEADLINE: Duration = Duration::from_secs(5 * 60);

/// Whether `node` and `npm` run here.
pub(crate) fn present() -> bool {
    ["node", "npm"].into_iter().all(cmd::program_runs)
}

/// Whether the run is CI's: the runner sets `CI=true`.
fn running_in_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| value == "true")
}

/// Builds the addon and runs the package's tests, then the pack-and-install test.
pub(crate) fn run() -> Result<()> {
    if !present() {
        return Err(Error::new(
            "node and npm are not installed: the Node addon cannot be tested (.ci/run installs \
             them from the OS packages)",
        ));
    }
    let root = cmd::workspace_root();
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let mut build = cmd::cargo();
    build.args(["build", "--quiet", "-p", "soe-node", "-p", "soe-cli"]);
    println!("==> node: {}", cmd::describe(&build));
    cmd::run_timed(&mut build)?;
    let package = root.join("crates/soe-node");
    let mut install = Command::new("node");
    install
        .arg("scripts/install-addon.js")
        .arg("debug")
        .current_dir(&package);
    println!("==> node: {}", cmd::describe(&install));
    cmd::run_timed(&mut install)?;

    let mut dev = Command::new("npm");
    dev.args(["install", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(&package);
    println!("==> node: {}", cmd::describe(&dev));
    if let Err(e) = cmd::run_timed(&mut dev) {
        if running_in_ci() {
            return Err(Error::new(format!(
                "{e}: the dev dependencies (typescript, @types/node) are needed for the types \
                 test, and CI=true requires it"
            )));
        }
        println!("==> node: {e}; the types test will be SKIPPED (under CI=true this fails)");
    }

    let mut test = Command::new("npm");
    test.args(["test", "--silent"])
        .current_dir(&package)
        .env("SOE_BIN", target.join("debug").join(exe("soe")));
    println!("==> node: {}", cmd::describe(&test));
    let took = run_with_deadline(&mut test, TEST_DEADLINE)?;
    println!(
        "==> node: the addon's tests passed in {}",
        cmd::format_duration(took)
    );

    let mut stage = Command::new("node");
    stage
        .args(["scripts/stage-platform.js", "debug"])
        .current_dir(&package)
        .env("CARGO_TARGET_DIR", &target);
    println!("==> node: {}", cmd::describe(&stage));
    cmd::run_timed(&mut stage)?;
    let path = path_without_rust()?;
    let mut pack = Command::new("node");
    pack.arg("scripts/pack-install-test.mjs")
        .current_dir(&package)
        .env("PATH", &path);
    println!(
        "==> node: node scripts/pack-install-test.mjs (PATH: {}; its first folder's cargo, \
         rustc and rustup refuse to run)",
        path.to_string_lossy()
    );
    let took = run_with_deadline(&mut pack, PACK_DEADLINE)?;
    println!(
        "==> node: packed, installed without a Rust toolchain and echoed in {}",
        cmd::format_duration(took)
    );
    Ok(())
}

/// `name` with the platform's executable suffix.
fn exe(name: &str) -> String {
    format!("{name}{}", std::env::consts::EXE_SUFFIX)
}

/// This process's `PATH` with a folder first whose `cargo`, `rustc` and `rustup` refuse to run
/// (they print why and exit 127), so that nothing the pack-and-install test starts can reach a
/// Rust toolchain. Dropping the folders that hold them instead would drop `/usr/bin` with
/// Debian's Rust installed, and `sh` and `npm` with it.
fn path_without_rust() -> Result<std::ffi::OsString> {
    let current = std::env::var_os("PATH").unwrap_or_default();
    let dir = std::env::temp_dir().join(format!("soe-node-no-rust-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::new(format!("cannot create {}: {e}", dir.display())))?;
    for tool in ["cargo", "rustc", "rustup"] {
        refusing_tool(&dir.join(tool), tool)?;
    }
    std::env::join_paths(std::iter::once(dir).chain(std::env::split_paths(&current)))
        .map_err(|e| Error::new(format!("PATH: {e}")))
}

/// An executable at `file` that refuses to be `tool`.
#[cfg(unix)]
fn refusing_tool(file: &Path, tool: &str) -> Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let script = format!(
        "#!/bin/sh\necho \"{tool}: hidden by cargo xtask node: the pack-and-install test runs \
         without a Rust toolchain\" >&2\nexit 127\n"
    );
    std::fs::write(file, script)
        .and_then(|()| std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o755)))
        .map_err(|e| Error::new(format!("cannot write {}: {e}", file.display())))
}

#[cfg(not(unix))]
fn refusing_tool(file: &Path, tool: &str) -> Result<()> {
    let file = file.with_extension("cmd");
    let script = format!("@echo {tool}: hidden by cargo xtask node 1>&2\r\n@exit /b 127\r\n");
    std::fs::write(&file, script)
        .map_err(|e| Error::new(format!("cannot write {}: {e}", file.display())))
}

/// Runs `cmd` like [`cmd::run_timed`], but kills it once `deadline` has passed: a test that
/// hangs fails the step instead of holding CI until its time limit. Under `CI=true` on Unix the
/// command gets a process group of its own, and the whole group is killed (the test runner's
/// children too); elsewhere it stays in the terminal's group, so that Ctrl-C reaches it.
fn run_with_deadline(cmd: &mut Command, deadline: Duration) -> Result<Duration> {
    #[cfg(unix)]
    if running_in_ci() {
        std::os::unix::process::CommandExt::process_group(cmd, 0);
    }
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|err| Error::new(format!("could not start `{}`: {err}", cmd::describe(cmd))))?;
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(started.elapsed()),
            Ok(Some(status)) => {
                return Err(Error::new(format!(
                    "`{}` failed ({status}) after {}",
                    cmd::describe(cmd),
                    cmd::format_duration(started.elapsed())
                )));
            }
            Ok(None) if started.elapsed() > deadline => {
                kill_group(&mut child);
                return Err(Error::new(format!(
                    "`{}` was still running after {}: killed",
                    cmd::describe(cmd),
                    cmd::format_duration(deadline)
                )));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => {
                return Err(Error::new(format!(
                    "waiting for `{}`: {e}",
                    cmd::describe(cmd)
                )));
            }
        }
    }
}

/// Kills `child` and, under `CI=true` on Unix, every process of its group (the test runner's
/// children).
fn kill_group(child: &mut std::process::Child) {
    #[cfg(unix)]
    if running_in_ci() {
        let group = format!("-{}", child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
    }
    let _ = child.kill();
    let _ = child.wait();
}
