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

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::c_abi::{
    self, base64, expect_success, server_shuts_down_on_sigint, spawn_listening, wait_exit,
};
use crate::cmd;
use crate::cross;
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

/// What the NuGet package holds besides the native libraries, as `dotnet pack` lays out
/// Soe.csproj.
const PACKAGE_ENTRIES: [&str; 5] = [
    "[Content_Types].xml",
    "_rels/.rels",
    "Soe.nuspec",
    "lib/netstandard2.1/Soe.dll",
    "lib/netstandard2.1/Soe.xml",
];

/// Every runtime the package is laid out for: its RID, the path of its library in the package
/// (where the .NET host finds `[DllImport("soe")]`), and the file that is packed there:
/// linux-x64 from the installed prefix, the others from `cargo xtask cross`'s folders.
fn runtimes(installed: &install_c::Installed) -> Vec<(&'static str, String, PathBuf)> {
    let mut all = vec![(
        "linux-x64",
        "runtimes/linux-x64/native/libsoe.so".to_owned(),
        installed.shared_lib(),
    )];
    for target in cross::Target::ALL {
        all.push((
            target.rid(),
            format!("runtimes/{}/native/{}", target.rid(), target.native_name()),
            target.dist().join(target.shared_lib(installed.version)),
        ));
    }
    all
}

/// Checks that Soe.csproj's version is the library's and that it packs every runtime at the
/// path `pack.py` uses (the layout test: `pack.py` packs stand-ins for all six runtimes, and the
/// entries must be exactly Soe.csproj's), then packs the real `.nupkg` with the libraries built
/// here (linux-x64 always; the others where `cargo xtask cross` has built them) and checks it.
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
    let all = runtimes(installed);
    let mut csproj_paths = csproj_native_paths(&project);
    csproj_paths.sort();
    let mut ours: Vec<String> = all.iter().map(|(_, p, _)| p.clone()).collect();
    ours.sort();
    if csproj_paths != ours {
        return Err(Error::new(format!(
            "Soe.csproj packs native libraries at {csproj_paths:?}, expected {ours:?}"
        )));
    }
    let layout = out.join("layout");
    std::fs::create_dir_all(&layout)
        .map_err(|e| Error::new(format!("{}: {e}", layout.display())))?;
    let stand_ins: Vec<(&str, String, PathBuf)> = all
        .iter()
        .map(|(rid, at, _)| (*rid, at.clone(), layout.join(format!("{rid}.native"))))
        .collect();
    for (_, _, file) in &stand_ins {
        std::fs::write(file, b"stand-in")
            .map_err(|e| Error::new(format!("{}: {e}", file.display())))?;
    }
    pack_and_check(source, out, &layout, &stand_ins)?;
    println!(
        "    layout test: pack.py lays out all {} runtimes at Soe.csproj's paths",
        all.len()
    );
    let (built, missing): (Vec<_>, Vec<_>) = all.into_iter().partition(|(_, _, f)| f.is_file());
    pack_and_check(source, out, out, &built)?;
    for (rid, _, file) in &missing {
        println!(
            "    {rid}: not in this package ({} not built: cargo xtask cross)",
            file.display()
        );
    }
    Ok(())
}

/// The `PackagePath`s of Soe.csproj's native libraries.
fn csproj_native_paths(project: &str) -> Vec<String> {
    project
        .split("PackagePath=\"")
        .skip(1)
        .filter_map(|rest| rest.split_once('"').map(|(p, _)| p.to_owned()))
        .filter(|p| p.starts_with("runtimes/"))
        .collect()
}

/// Packs `Soe.dll` (compiled into `build`) with `natives` into `out` and checks that the package holds exactly the
/// expected entries.
fn pack_and_check(
    source: &Path,
    build: &Path,
    out: &Path,
    natives: &[(&str, String, PathBuf)],
) -> Result<()> {
    let mut pack = Command::new("python3");
    pack.arg(source.join("pack.py"))
        .arg("--dll")
        .arg(build.join("Soe.dll"))
        .arg("--xml")
        .arg(build.join("Soe.xml"));
    for (rid, _, file) in natives {
        pack.arg("--native")
            .arg(format!("{rid}={}", file.display()));
    }
    pack.arg("--out").arg(out);
    println!("==> csharp: {}", cmd::describe(&pack));
    let nupkg = cmd::output(&mut pack)?.trim().to_owned();
    let mut list = Command::new("python3");
    list.args(["-m", "zipfile", "-l", &nupkg]);
    let listing = cmd::output(&mut list)?;
    let mut got: Vec<&str> = listing
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let mut want: Vec<&str> = PACKAGE_ENTRIES.to_vec();
    want.extend(natives.iter().map(|(_, at, _)| at.as_str()));
    want.sort_unstable();
    got.sort_unstable();
    if got != want {
        return Err(Error::new(format!(
            "{nupkg} holds {got:?}, expected {want:?}"
        )));
    }
    let rids: Vec<&str> = natives.iter().map(|(rid, _, _)| *rid).collect();
    println!(
        "    {nupkg}: {} entries, runtimes {}",
        got.len(),
        rids.join(", ")
    );
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn soe_csproj_packs_six_runtimes_where_the_host_looks() {
        let project =
            std::fs::read_to_string(cmd::workspace_root().join("bindings/csharp/Soe.csproj"))
                .unwrap();
        let mut paths = csproj_native_paths(&project);
        paths.sort();
        assert_eq!(
            paths,
            [
                "runtimes/linux-arm64/native/libsoe.so",
                "runtimes/linux-musl-x64/native/libsoe.so",
                "runtimes/linux-x64/native/libsoe.so",
                "runtimes/osx-arm64/native/libsoe.dylib",
                "runtimes/osx-x64/native/libsoe.dylib",
                "runtimes/win-x64/native/soe.dll",
            ]
        );
    }
}
