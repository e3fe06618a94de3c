//! `cargo xtask wine`: the Windows build (`cargo xtask cross --target win`, done first) run
//! under wine (Debian's wine 8), in a wine prefix of its own (`target/cross/wine`):
//!
//! 1. the test suites that touch the operating system, built for `x86_64-pc-windows-gnu` and
//!    run by cargo with wine as the runner: soe-runtime (the blocking driver and its event loop
//!    among them), soe-tokio, soe-async-std and soe-cli's end-to-end tests. Left out:
//!    soe-cli's Wireshark test (`tshark_shows_every_message_of_an_export_with_our_plugin`),
//!    which runs tshark, a Linux program that a Windows process under wine cannot start; what
//!    it checks is the same bytes on every platform;
//! 2. `soe.exe serve` under wine answering the Linux `soe ping` and `soe load` (RC4 on, 20 KB
//!    messages in fragments, every echo verified), and the Linux `soe serve` answering
//!    `soe.exe ping`;
//! 3. the C echo server (`examples/c/echo_server.c`), built by CMake with MinGW-w64 against the
//!    library installed for Windows (`install-c --target x86_64-pc-windows-gnu`: `soe::soe`,
//!    `soe.dll` through `soe.dll.a`), answering `soe ping` and `soe load`;
//! 4. `node.exe` 22 with the packed addon (`wine_node`).
//!
//! Before them, clippy checks every crate of the workspace for `x86_64-pc-windows-gnu` with
//! `-D warnings` (Debian's clippy, `rust-web-clippy`, which matches Debian's compiler), so the
//! code that only Windows compiles (`soe-winsock`, the Windows paths of `soe-runtime`) is
//! linted too. Left out: `soe-bench`, whose servers use Linux's `sendmmsg`, and `xtask`.
//!
//! Wine 8 lacks `bcryptprimitives.dll`, whose `ProcessPrng` Rust's standard library calls on
//! Windows: `xtask/wine/bcryptprimitives.c`, built with MinGW, stands in for it beside every
//! executable that runs.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::c_abi::{base64, expect_success, port_of, wait_exit};
use crate::cmd;
use crate::cross::{self, Target};
use crate::cross_tools::{self, Toolchain};
use crate::{Error, Result};

/// The RC4 key of the runs, for the `soe` tool (base64 of these bytes).
const KEY: &[u8] = b"soe cross-platform key";

/// What `cargo xtask wine` leaves out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Skip {
    /// The Rust test suites.
    pub(crate) tests: bool,
    /// `node.exe` with the addon.
    pub(crate) node: bool,
    /// clippy for the Windows target.
    pub(crate) clippy: bool,
}

/// Whether wine and MinGW are installed: its C compiler for the binaries and its C++ compiler
/// for the C examples (their CMake project builds the C++ game server too).
pub(crate) fn present() -> bool {
    cross_tools::on_path("wine")
        && cross_tools::on_path("x86_64-w64-mingw32-gcc")
        && cross_tools::on_path("x86_64-w64-mingw32-g++")
}

/// Whether everything the `windows` step of `cargo xtask ci` needs is installed: wine,
/// MinGW-w64, Debian's clippy and, unless rustup has the Windows standard library, Debian's
/// Rust with the standard library's sources.
pub(crate) fn tools_present() -> bool {
    present()
        && cross_tools::on_path("gendef")
        && cross_tools::can_build(Target::Win)
        && cross_tools::debian_clippy_present()
}

/// Builds what is missing and runs every check; each one runs, and the first failure is
/// reported at the end with the rest.
pub(crate) fn run(skip: Skip) -> Result<()> {
    let started = Instant::now();
    if !present() {
        cross_tools::apt_install(&[
            "wine",
            "wine64",
            "gcc-mingw-w64-x86-64",
            "g++-mingw-w64-x86-64",
            "mingw-w64-tools",
        ])?;
    }
    if !skip.clippy && !cross_tools::debian_clippy_present() {
        cross_tools::apt_install(&["rust-web-clippy"])?;
    }
    // The artifacts first, as `cargo xtask cross --target win` makes them (cargo rebuilds
    // only what changed).
    cross::run(&[cross::Pick::Win], false)?;
    let wine = Wine::new()?;
    let mut outcomes: Vec<(&str, Result<Duration>)> = Vec::new();
    let mut step = |name: &'static str, f: &mut dyn FnMut() -> Result<()>| {
        let at = Instant::now();
        println!("==> wine: {name}");
        let result = f().map(|()| at.elapsed());
        if let Err(e) = &result {
            println!("==> wine: {name}: FAILED: {e}");
        }
        outcomes.push((name, result));
    };
    if !skip.clippy {
        step("clippy --target x86_64-pc-windows-gnu", &mut clippy);
    }
    if !skip.tests {
        step("test suites", &mut || test_suites(&wine));
    }
    let soe = host_soe()?;
    step("soe.exe serve <- soe ping, soe load", &mut || {
        exe_serves_linux(&wine, &soe)
    });
    step("soe serve <- soe.exe ping", &mut || {
        linux_serves_exe(&wine, &soe)
    });
    step("C echo_server.exe <- soe ping, soe load", &mut || {
        c_echo(&wine, &soe)
    });
    if !skip.node {
        step("node.exe with the packed addon", &mut || {
            crate::wine_node::run(&wine, &soe)
        });
    }
    println!("\nwine summary:");
    let mut failed = Vec::new();
    for (name, outcome) in &outcomes {
        match outcome {
            Ok(took) => println!("  ok      {name} ({})", cmd::format_duration(*took)),
            Err(e) => {
                println!("  FAILED  {name}: {e}");
                failed.push(*name);
            }
        }
    }
    println!("  total {}", cmd::format_duration(started.elapsed()));
    drop(wine);
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Error::new(format!("wine: {} failed", failed.join("; "))))
    }
}

/// clippy on every crate but `soe-bench` and `xtask`, all targets, for Windows, with
/// `-D warnings`. One lint is allowed: `missing_const_for_thread_local`, which Debian's clippy
/// 1.96 raises on this target for a `thread_local!` whose initializer is already `const { .. }`
/// (`soe_wire::fuzzing`'s scratch buffer); rustup's clippy on Linux keeps checking it.
fn clippy() -> Result<()> {
    let mut clippy = cross_tools::debian_clippy(Target::Win);
    // soe-node's build script links the addon against node.exe's import library.
    clippy
        .env("LIBNODE_PATH", cross_tools::libnode_dir()?)
        .args([
            "--workspace",
            "--exclude",
            "soe-bench",
            "--exclude",
            "xtask",
            "--all-targets",
            "--",
            "-D",
            "warnings",
            "-A",
            "clippy::missing_const_for_thread_local",
        ]);
    cmd::run_timed(&mut clippy).map(drop)
}

/// A wine prefix of our own, with the stand-in DLL built.
pub(crate) struct Wine {
    prefix: PathBuf,
    /// `bcryptprimitives.dll`, to copy beside each executable.
    pub(crate) stand_in: PathBuf,
}

impl Wine {
    /// Creates the prefix (Windows 10, as node.exe wants) and builds the stand-in DLL.
    pub(crate) fn new() -> Result<Self> {
        let prefix = cross::root().join("wine/prefix");
        std::fs::create_dir_all(&prefix)
            .map_err(|e| Error::new(format!("{}: {e}", prefix.display())))?;
        let stand_in = cross::root().join("wine/bcryptprimitives.dll");
        let source = cmd::workspace_root().join("xtask/wine/bcryptprimitives.c");
        let mut gcc = Command::new("x86_64-w64-mingw32-gcc");
        gcc.args(["-shared", "-O2", "-Wall", "-Wextra", "-Werror", "-o"])
            .arg(&stand_in)
            .arg(&source)
            .arg("-ladvapi32");
        cmd::run_timed(&mut gcc)?;
        let wine = Self { prefix, stand_in };
        // One wineserver for the whole run, ended when this `Wine` is dropped. Left to itself, a
        // wineserver exits a few seconds after its last process; a test binary that starts
        // just then loses its connection ("wine client error:0: recvmsg: Connection reset by
        // peer") and fails without running a test. It detaches at once; its standard streams,
        // and those of the `reg` call that starts wine's services, go nowhere, because a
        // process that outlives the call would keep a pipe of ours open until the end.
        let mut server = wine.command("wineserver");
        server.arg("-p");
        if !cmd::succeeds_quietly(&mut server) {
            return Err(Error::new("`wineserver -p` failed"));
        }
        let mut version = wine.command("wine");
        version.args([
            "reg",
            "add",
            r"HKCU\Software\Wine",
            "/v",
            "Version",
            "/d",
            "win10",
            "/f",
        ]);
        if !cmd::succeeds_quietly(&mut version) {
            return Err(Error::new(format!("`{}` failed", cmd::describe(&version))));
        }
        // Where Windows 10 has the real one: node.exe loads the addon with the addon's folder
        // searched instead of its own, so a copy beside node.exe would not be found.
        let system32 = wine.prefix.join("drive_c/windows/system32");
        wine.beside(&system32)?;
        Ok(wine)
    }

    /// `program` (`wine`, `wineserver`) in this prefix, quiet.
    pub(crate) fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("WINEPREFIX", &self.prefix)
            .env("WINEDEBUG", "-all")
            .env("WINEDLLOVERRIDES", "mscoree,mshtml=");
        c
    }

    /// `wine EXE`, after putting the stand-in DLL beside `exe`.
    pub(crate) fn exe(&self, exe: &Path) -> Result<Command> {
        self.beside(exe.parent().unwrap_or(Path::new(".")))?;
        let mut c = self.command("wine");
        c.arg(exe);
        Ok(c)
    }

    /// Copies the stand-in DLL into `dir`.
    pub(crate) fn beside(&self, dir: &Path) -> Result<()> {
        let to = dir.join("bcryptprimitives.dll");
        std::fs::copy(&self.stand_in, &to)
            .map(|_| ())
            .map_err(|e| Error::new(format!("copy to {}: {e}", to.display())))
    }
}

impl Drop for Wine {
    /// Ends every process of the prefix and its wineserver (`wineserver -k`).
    fn drop(&mut self) {
        let mut kill = self.command("wineserver");
        kill.arg("-k");
        let _ = cmd::succeeds_quietly(&mut kill);
    }
}

/// The Linux `soe` tool: a debug build with the host's toolchain.
pub(crate) fn host_soe() -> Result<PathBuf> {
    let mut build = cmd::cargo();
    build.args(["build", "--quiet", "-p", "soe-cli", "--bin", "soe"]);
    println!("==> wine: {}", cmd::describe(&build));
    cmd::run_timed(&mut build)?;
    Ok(crate::install_c::target_dir().join("debug/soe"))
}

/// The OS-touching suites, built for Windows (`--release`: the artifacts' build shares its
/// dependencies) and run by cargo through wine.
fn test_suites(wine: &Wine) -> Result<()> {
    let toolchain = Toolchain::BuildStd;
    let out = toolchain.out(Target::Win, "release");
    let packages = [
        "soe-winsock",
        "soe-runtime",
        "soe-tokio",
        "soe-async-std",
        "soe-cli",
    ];
    let suite = |extra: &[&str]| {
        let mut c = toolchain.cargo(Target::Win, "test");
        // The doctests are left out: cargo runs them for the host only (they are the same
        // examples on every platform, run on Linux by the `test` step).
        c.args(["--release", "--no-fail-fast", "--tests"]);
        for p in packages {
            c.args(["-p", p]);
        }
        c.args(extra);
        c.env("WINEPREFIX", &wine.prefix)
            .env("WINEDEBUG", "-all")
            .env("CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER", "wine");
        c
    };
    let mut build = suite(&["--no-run"]);
    println!("==> wine: {}", cmd::describe(&build));
    cmd::run_timed(&mut build)?;
    // Test executables run from deps/; soe-cli's tests start soe.exe from release/.
    wine.beside(&out)?;
    wine.beside(&out.join("deps"))?;
    let mut test = suite(&[
        "--",
        "--skip",
        "tshark_shows_every_message_of_an_export_with_our_plugin",
    ]);
    println!("==> wine: {}", cmd::describe(&test));
    cmd::run_timed(&mut test).map(|_| ())
}

/// Starts `server`, which prints `... 127.0.0.1:PORT` first; its stdout goes to a file (wine
/// programs' output through a pipe is unreliable), read until the port shows.
pub(crate) fn spawn_server(server: Command, log: &Path, what: &str) -> Result<(Child, u16)> {
    println!("==> {what}: {} > {}", cmd::describe(&server), log.display());
    let mut child = spawn_logged(server, log)?;
    let started = Instant::now();
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(port) = text.lines().find_map(port_of) {
            println!("    {what}: {}", text.lines().next().unwrap_or_default());
            return Ok((child, port));
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(Error::new(format!(
                "{what} exited ({status}) before it listened:\n{text}"
            )));
        }
        if started.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Error::new(format!(
                "{what} did not listen within 120 s:\n{text}"
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Starts `command` with no input and its output (both streams) in the file `log`.
fn spawn_logged(mut command: Command, log: &Path) -> Result<Child> {
    let file =
        std::fs::File::create(log).map_err(|e| Error::new(format!("{}: {e}", log.display())))?;
    let err = file.try_clone().map_err(|e| Error::new(e.to_string()))?;
    command
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err)
        .spawn()
        .map_err(|e| Error::new(format!("{}: {e}", cmd::describe(&command))))
}

/// Runs `command` to its end with its output in the file `log` (node.exe under wine writes
/// nothing through a pipe), for at most `limit`; fails, with what it printed, unless it exits
/// successfully.
pub(crate) fn run_logged(command: Command, log: &Path, limit: Duration) -> Result<()> {
    println!("==> wine: {} > {}", cmd::describe(&command), log.display());
    let what = cmd::describe(&command);
    let mut child = spawn_logged(command, log)?;
    let started = Instant::now();
    let status = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break status;
        }
        if started.elapsed() > limit {
            stop(&mut child);
            let text = std::fs::read_to_string(log).unwrap_or_default();
            return Err(Error::new(format!(
                "still running after {limit:?}: killed\n{text}"
            )));
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    if status.success() {
        Ok(())
    } else {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        Err(Error::new(format!("{what} failed ({status}):\n{text}")))
    }
}

/// `soe ping` (20 KB messages in fragments) and `soe load` (four sessions of 1 byte to 20 KB),
/// every echo verified by the tool, against `port`.
pub(crate) fn ping_and_load(soe: &Path, port: u16, extra: &[&str], what: &str) -> Result<()> {
    let addr = format!("127.0.0.1:{port}");
    let mut ping = Command::new(soe);
    ping.args([
        "ping",
        "--count",
        "10",
        "--size",
        "20000",
        "--interval",
        "20",
    ])
    .args(["--timeout", "20"])
    .args(extra)
    .arg(&addr);
    expect_success(ping, &format!("soe ping -> {what}"))?;
    let mut load = Command::new(soe);
    load.args([
        "load",
        "--sessions",
        "4",
        "--messages",
        "100",
        "--size",
        "1-20000",
    ])
    .args(["--timeout", "60"])
    .args(extra)
    .arg(&addr);
    expect_success(load, &format!("soe load -> {what}"))
}

fn stop(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// `soe.exe serve` under wine, RC4 on, against the Linux `soe ping` and `soe load`.
fn exe_serves_linux(wine: &Wine, soe: &Path) -> Result<()> {
    let exe = Target::Win.dist().join("soe.exe");
    let key = base64(KEY);
    let mut serve = wine.exe(&exe)?;
    serve.args(["serve", "--bind", "127.0.0.1:0", "--rc4-key", &key]);
    let log = cross::root().join("wine/soe-serve.log");
    let (mut child, port) = spawn_server(serve, &log, "soe.exe serve")?;
    let result = ping_and_load(soe, port, &["--rc4-key", &key], "soe.exe serve (wine)");
    stop(&mut child);
    result
}

/// The Linux `soe serve` against `soe.exe ping` under wine.
fn linux_serves_exe(wine: &Wine, soe: &Path) -> Result<()> {
    let key = base64(KEY);
    let mut serve = Command::new(soe);
    serve.args(["serve", "--bind", "127.0.0.1:0", "--rc4-key", &key]);
    let log = cross::root().join("wine/linux-serve.log");
    let (mut child, port) = spawn_server(serve, &log, "soe serve")?;
    let result = wine
        .exe(&Target::Win.dist().join("soe.exe"))
        .and_then(|mut ping| {
            ping.args([
                "ping",
                "--count",
                "10",
                "--size",
                "20000",
                "--interval",
                "20",
            ])
            .args(["--timeout", "20", "--rc4-key", &key])
            .arg(format!("127.0.0.1:{port}"));
            expect_success(ping, "soe.exe ping (wine) -> soe serve")
        });
    stop(&mut child);
    result
}

/// The C echo server as a Windows C user builds it: the library installed for Windows
/// (`install-c --target x86_64-pc-windows-gnu`), `examples/c` built by CMake with MinGW-w64
/// against `find_package(soe)`'s `soe::soe` (`soe.dll` through `soe.dll.a`, `-Werror`), then run
/// under wine with `soe.dll` beside it, against `soe ping` and `soe load` with RC4.
fn c_echo(wine: &Wine, soe: &Path) -> Result<()> {
    let dir = cross::root().join("wine/c");
    let _ = std::fs::remove_dir_all(&dir);
    let prefix = dir.join("prefix");
    crate::install_c_windows::run(&prefix)?;
    let built = crate::install_c_windows::cmake_examples(&prefix, &dir.join("build"))?;
    std::fs::copy(prefix.join("bin/soe.dll"), built.join("soe.dll"))
        .map_err(|e| Error::new(format!("copy soe.dll: {e}")))?;
    let key = "soe c echo key";
    let mut server = wine.exe(&built.join("echo_server.exe"))?;
    server.args(["--port", "0", "--key", key, "--sessions", "5"]);
    let (mut child, port) = spawn_server(server, &dir.join("echo_server.log"), "echo_server.exe")?;
    let result = ping_and_load(
        soe,
        port,
        &["--rc4-key", &base64(key.as_bytes())],
        "echo_server.exe (wine)",
    );
    if result.is_err() {
        stop(&mut child);
        return result;
    }
    wait_exit(&mut child, "echo_server.exe", Duration::from_secs(60))
}
