//! `cargo xtask csharp`: the C# binding (`bindings/csharp`) compiled with mono's `mcs` and run
//! with `mono` against the C library installed under `target/csharp/prefix`:
//!
//! * `tests/Checks.cs`: the binding's struct layouts (which must print exactly what
//!   `tests/layout.c` prints from the C compiler), its status names, its exceptions and its
//!   statuses for the normal outcomes;
//! * the C# echo server against `soe ping` (RC4, 20 KB messages in fragments, every echo
//!   verified by the tool, a clean close by the peer);
//! * the C# echo client against `soe serve` (RC4, 60 messages of 20 KB verified byte for byte,
//!   a clean close with reason Application, and the stale handle afterwards);
//! * the C# echo server's shutdown on SIGINT under mono (every session closed first);
//! * `Soe.dll` built with `mcs -doc` and warnings as errors (every public member documented),
//!   and packed by `bindings/csharp/pack.py` into a `.nupkg` whose entries are checked.
//!
//! Without mcs or mono the step cannot run: `cargo xtask ci` skips it with a loud word, and
//! fails under `CI=true` (`.ci/run` installs mono-mcs and mono-runtime).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::c_abi::{
    self, base64, expect_success, server_shuts_down_on_sigint, spawn_listening, wait_exit,
};
use crate::cmd;
use crate::install_c;
use crate::{Error, Result};

/// The RC4 key of the runs: plain text for the C# programs, base64 for the `soe` tool.
const KEY: &str = "soe-ffi csharp key";

/// Whether mono's compiler and runtime are installed.
pub(crate) fn present() -> bool {
    cmd::program_runs("mcs") && cmd::program_runs("mono")
}

/// Runs the whole check.
pub(crate) fn run() -> Result<()> {
    if !present() {
        return Err(Error::new(
            "mcs and mono are not installed (Debian: apt-get install mono-mcs mono-runtime; \
             .ci/run installs them)",
        ));
    }
    let started = Instant::now();
    let root = cmd::workspace_root();
    let source = root.join("bindings/csharp");
    let mut build = cmd::cargo();
    build.args(["build", "--quiet", "-p", "soe-cli"]);
    println!("==> csharp: {}", cmd::describe(&build));
    cmd::run_timed(&mut build)?;
    let target = install_c::target_dir();
    let out = target.join("csharp");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).map_err(|e| Error::new(format!("{}: {e}", out.display())))?;
    let installed = install_c::run(&out.join("prefix"), install_c::DEFAULT_PROFILE, true)?;
    let mut version = Command::new("mcs");
    version.arg("--version");
    println!("==> csharp: {}", cmd::output(&mut version)?.trim());

    compile(&source, &out, &installed)?;
    let libdir = installed.libdir();
    let mono = |exe: &str| -> Command {
        let mut c = Command::new("mono");
        c.env("LD_LIBRARY_PATH", &libdir).arg(out.join(exe));
        c
    };
    check_layouts(&out, mono("Checks.exe"))?;
    package(&source, &out, &installed)?;
    let soe = target.join("debug/soe");
    server_against_ping(mono("EchoServer.exe"), &soe)?;
    server_shuts_down_on_sigint(mono("EchoServer.exe"), &soe, "EchoServer")?;
    c_abi::echo_client_against_serve(mono("EchoClient.exe"), &soe, KEY, "C# EchoClient")?;
    println!(
        "==> csharp: the C# binding compiled with mcs; layouts, statuses and errors checked; \
         C# server and client verified against the Rust tools under mono in {}",
        cmd::format_duration(started.elapsed())
    );
    Ok(())
}

/// Compiles the binding, the examples and the checks into `out` (warnings are errors), and
/// `tests/layout.c` with the C compiler against the installed header.
fn compile(source: &Path, out: &Path, installed: &install_c::Installed) -> Result<()> {
    let soe_dll = out.join("Soe.dll");
    // `-doc` with warnings as errors: a public member without its XML comment (CS1591) fails.
    mcs(&[
        "-unsafe",
        "-target:library",
        &format!("-doc:{}", out.join("Soe.xml").display()),
        &out_arg(&soe_dll),
        &path(&source.join("Soe.cs")),
    ])?;
    let reference = format!("-r:{}", soe_dll.display());
    let loop_cs = path(&source.join("examples/Loop.cs"));
    for name in ["EchoServer", "EchoClient"] {
        mcs(&[
            &reference,
            &out_arg(&out.join(format!("{name}.exe"))),
            &path(&source.join(format!("examples/{name}.cs"))),
            &loop_cs,
        ])?;
    }
    mcs(&[
        "-unsafe",
        &reference,
        &out_arg(&out.join("Checks.exe")),
        &path(&source.join("tests/Checks.cs")),
    ])?;
    let mut layout_c = Command::new(c_abi::c_compiler());
    layout_c
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(installed.prefix.join("include"))
        .arg(source.join("tests/layout.c"))
        .arg("-o")
        .arg(out.join("layout"));
    println!("==> csharp: {}", cmd::describe(&layout_c));
    cmd::run_timed(&mut layout_c).map(|_| ())
}

/// The layouts, names and error handling: `Checks.exe` must print exactly what the C
/// compiler's `layout` prints.
fn check_layouts(out: &Path, mut checks: Command) -> Result<()> {
    let c_layout = cmd::output(&mut Command::new(out.join("layout")))?;
    println!("==> csharp: {}", cmd::describe(&checks));
    let cs_layout = cmd::output(&mut checks)?;
    if c_layout != cs_layout {
        return Err(Error::new(format!(
            "the C# structs are not laid out as soe.h's:\n--- C (tests/layout.c)\n{c_layout}\
             --- C# (tests/Checks.cs)\n{cs_layout}"
        )));
    }
    println!(
        "    struct layouts match the C compiler's ({} fields and sizes)",
        c_layout.lines().count()
    );
    Ok(())
}

/// The C# server against `soe ping` (RC4, 20 KB messages); the server exits after the session.
fn server_against_ping(mut server: Command, soe: &Path) -> Result<()> {
    server.args(["--port", "0", "--key", KEY, "--sessions", "1"]);
    let (mut child, port) = spawn_listening(server, "C# EchoServer")?;
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
    .args(["--timeout", "10", "--rc4-key", &base64(KEY.as_bytes())])
    .arg(format!("127.0.0.1:{port}"));
    if let Err(e) = expect_success(ping, "soe ping -> C# EchoServer") {
        let _ = child.kill();
        let _ = child.wait();
        return Err(e);
    }
    wait_exit(&mut child, "C# EchoServer", Duration::from_secs(30))
}

/// What the NuGet package must hold, as `dotnet pack` lays out Soe.csproj.
const PACKAGE_ENTRIES: [&str; 6] = [
    "[Content_Types].xml",
    "_rels/.rels",
    "Soe.nuspec",
    "lib/netstandard2.1/Soe.dll",
    "lib/netstandard2.1/Soe.xml",
    "runtimes/linux-x64/native/libsoe.so",
];

/// Packs the `.nupkg` with `pack.py` and checks its entries and that Soe.csproj's version is
/// the library's.
fn package(source: &Path, out: &Path, installed: &install_c::Installed) -> Result<()> {
    if !cmd::program_runs("python3") {
        return c_abi::missing("python3", "the NuGet package (bindings/csharp/pack.py)");
    }
    let project = std::fs::read_to_string(source.join("Soe.csproj"))
        .map_err(|e| Error::new(format!("Soe.csproj: {e}")))?;
    let version = installed.version.string();
    if !project.contains(&format!("<Version>{version}</Version>")) {
        return Err(Error::new(format!(
            "bindings/csharp/Soe.csproj's <Version> is not the library's {version}"
        )));
    }
    let mut pack = Command::new("python3");
    pack.arg(source.join("pack.py"))
        .arg("--dll")
        .arg(out.join("Soe.dll"))
        .arg("--xml")
        .arg(out.join("Soe.xml"))
        .arg("--native")
        .arg(installed.shared_lib())
        .arg("--out")
        .arg(out);
    println!("==> csharp: {}", cmd::describe(&pack));
    let nupkg = cmd::output(&mut pack)?.trim().to_owned();
    let mut list = Command::new("python3");
    list.args(["-m", "zipfile", "-l", &nupkg]);
    let listing = cmd::output(&mut list)?;
    let entries: Vec<&str> = listing
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let mut want = PACKAGE_ENTRIES.to_vec();
    want.sort_unstable();
    let mut got = entries.clone();
    got.sort_unstable();
    if got != want {
        return Err(Error::new(format!(
            "{nupkg} holds {got:?}, expected {want:?}"
        )));
    }
    println!("    {nupkg}: {} entries, the NuGet layout", entries.len());
    Ok(())
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

fn out_arg(p: &Path) -> String {
    format!("-out:{}", p.display())
}

/// `mcs -warnaserror ARGS`.
fn mcs(args: &[&str]) -> Result<()> {
    let mut c = Command::new("mcs");
    c.arg("-warnaserror").args(args);
    println!("==> csharp: {}", cmd::describe(&c));
    cmd::run_timed(&mut c).map(|_| ())
}
