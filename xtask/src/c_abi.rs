//! `cargo xtask c-abi`: the C ABI (soe-ffi) from C and C++, as a C user takes it: installed
//! under a prefix (`cargo xtask install-c`), then built from there with the system compilers.
//!
//! Installs the library into `target/c-abi/installed` and moves the prefix to
//! `target/c-abi/prefix` (everything below is built from the moved one: the prefix must be
//! relocatable). Checks that `libsoe.a` defines no global symbol but the `soe_*` functions, that
//! neither library holds a path of the build machine, and that docs/c-api.md's size table is
//! what it measures (`c_abi_install`). Builds `examples/c` with `pkg-config --cflags --libs soe`
//! (linked to `libsoe.so.1`) and with CMake's `find_package(soe)` (`examples/c/CMakeLists.txt`,
//! the C examples and the C++17 `game_server`, linked to `libsoe.a` through `soe::soe_static`),
//! compiles the README's C server (the block under `<!-- c-abi: README server -->`, with
//! pkg-config's flags and `-Iexamples/c`, as the README says), the error-path and teardown
//! programs (`cc -Wall -Wextra -Werror`, the static one with `pkg-config --libs soe-static`),
//! the header check (`c++ -Wall -Wextra -Werror`) and a fully static C++17 program
//! (`c++ -static` with `pkg-config --static --libs soe`), then runs, each C program but the
//! README's server under valgrind memcheck (no leak, no invalid access) when valgrind is
//! installed:
//!
//! * the C echo server (pkg-config build) against `soe ping` (20 KB messages, fragments) and
//!   `soe load` (four sessions, 1 byte to 20 KB), RC4 on, every echo verified by the tools; the
//!   server exits once the five sessions have closed;
//! * the README's C server against `soe ping` (20 KB messages) and `soe load` (two sessions, 1
//!   byte to 20 KB), every echo verified by the tools; it serves forever, so it is killed, and
//!   runs bare (it never frees its endpoint);
//! * the C echo client (CMake build) against `soe serve` (RC4, 20 KB fragments, every echo
//!   verified by the client, a clean close, and the stale handle afterwards);
//! * the error paths: every misuse returns its documented status;
//! * the ABI during teardown, linked both ways: a whole session from a pthread-key destructor
//!   and from an `atexit` handler, after the thread's Rust thread-locals are gone; the handler
//!   registered before it must still run (its line is checked);
//! * the C++ header check, dynamic and fully static;
//! * the C++17 game server (CMake build, or the compiler's without CMake) with a 20 Hz
//!   unreliable tick, reliable world updates and RC4 switched on after each session's first
//!   message, against `soe ping` and `soe load` with the key and `--rc4-after-first-message`
//!   (the key checked, every echo verified, unsolicited messages of both kinds counted) and
//!   `soe ping` with another key (which must fail with `RC4 key mismatch`): `c_abi_game`;
//! * the C echo server and the C++17 game server, each with a `soe ping` session open, stopped
//!   by SIGINT: each must close the session and send its Disconnects before it exits.
//!
//! Without valgrind the programs run bare, with a loud warning; without pkg-config or CMake
//! that build is replaced by plain compiler flags, with a loud warning. Under `CI=true` each of
//! these fails instead (`.ci/run` installs them).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::cmd;
use crate::install_c::{self, Installed};
use crate::{Error, Result, c_abi_game, c_abi_install, c_abi_recording};

/// The RC4 key of the runs: plain text for the C programs, base64 for the `soe` tool.
const KEY: &str = "soe-ffi c-abi key";

/// The profile the step installs the library with: the one users get (link-time optimised).
/// It costs a release build of soe-ffi and its dependencies, and repays most of it under
/// valgrind, where the optimised library runs several times faster than a debug one.
const PROFILE: &str = install_c::DEFAULT_PROFILE;

/// The C compiler: `$CC`, else `cc`.
pub(crate) fn c_compiler() -> String {
    std::env::var("CC").unwrap_or_else(|_| "cc".into())
}

/// The C++ compiler: `$CXX`, else `c++`.
fn cxx_compiler() -> String {
    std::env::var("CXX").unwrap_or_else(|_| "c++".into())
}

/// Whether the C compiler exists (the step's precondition).
pub(crate) fn compiler_present() -> bool {
    cmd::program_runs(&c_compiler())
}

/// Whether this run is CI's (`CI=true`), where a missing tool fails the step.
pub(crate) fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// A tool the step wants: present, or absent with a loud word (an error under `CI=true`).
pub(crate) fn wanted(program: &str, what: &str) -> Result<bool> {
    if cmd::program_runs(program) {
        return Ok(true);
    }
    if in_ci() {
        return Err(Error::new(format!(
            "{program} is not installed, and CI=true requires it for {what} (.ci/run installs \
             it from the OS packages)"
        )));
    }
    println!(
        "==> c-abi: {program} is not installed: {what} is NOT checked (under CI=true this fails)"
    );
    Ok(false)
}

/// A tool the step needs is absent: a loud word, or an error under `CI=true`.
pub(crate) fn missing(program: &str, what: &str) -> Result<()> {
    wanted(program, what).map(|_| ())
}

/// Runs the whole check.
pub(crate) fn run() -> Result<()> {
    let root = cmd::workspace_root();
    let started = Instant::now();
    let tools = Tools {
        valgrind: wanted("valgrind", "memory checking of the C programs")?,
        pkg_config: wanted("pkg-config", "the pkg-config build")?,
        cmake: wanted("cmake", "the CMake find_package build")?,
    };
    let mut build = cmd::cargo();
    build.args(["build", "--quiet", "-p", "soe-cli"]);
    println!("==> c-abi: {}", cmd::describe(&build));
    cmd::run_timed(&mut build)?;
    let target = install_c::target_dir();
    let out = target.join("c-abi");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).map_err(|e| Error::new(format!("{}: {e}", out.display())))?;
    // Installed, then moved: every program below is built from the moved prefix.
    let installed =
        install_c::run(&out.join("installed"), PROFILE, true)?.moved_to(&out.join("prefix"))?;
    c_abi_install::static_symbols(&installed, &target.join(PROFILE).join("libsoe_ffi.a"))?;
    c_abi_install::no_build_paths(&installed)?;

    let echo_client = build_programs(&root, &out, &installed, tools)?;
    sizes(&installed, &echo_client, &out)?;
    let soe = target.join("debug/soe");
    let checked = |path: PathBuf| tools.checked(path);
    // The error paths, the ABI during teardown (shared and static), and the C++ header check.
    expect_success(checked(out.join("error_paths")), "error_paths")?;
    expect_success(Command::new(out.join("macros")), "macros")?;
    expect_success(Command::new(out.join("macros_cxx")), "macros (C++)")?;
    expect_lines(checked(out.join("teardown")), "teardown", &TEARDOWN_LINES)?;
    expect_lines(
        checked(out.join("teardown_static")),
        "teardown (static)",
        &TEARDOWN_LINES,
    )?;
    expect_success(Command::new(out.join("header_check")), "header_check")?;
    // The flight recorder: a session lost after 20 s, its capture read by tshark and decode.
    c_abi_recording::check(checked(out.join("recording")), &out, &soe)?;
    if tools.pkg_config {
        expect_success(
            Command::new(out.join("header_check_static")),
            "header_check (-static)",
        )?;
    }
    c_server_against_tools(checked(out.join("echo_server")), &soe)?;
    c_server_shuts_down_on_sigint(checked(out.join("echo_server")), &soe)?;
    readme_server_against_ping(&out.join("readme_server"), &soe)?;
    // The C echo client (CMake build), and the stale handle after its close.
    echo_client_against_serve(checked(echo_client.clone()), &soe, KEY, "C echo_client")?;
    // The C++17 game server (CMake, libsoe.a, the moved prefix): a 20 Hz tick and RC4 after
    // the first message against `soe ping` and `soe load`, another key told, then SIGINT.
    c_abi_game::against_tools(checked(echo_client.with_file_name("game_server")), &soe)?;
    println!(
        "==> c-abi: built from the installed prefix ({}, {}); C server and client, the C++ \
         game server (20 Hz tick, RC4 after the first message, another key told) and the \
         README's server verified against the Rust tools, error paths, teardown, the flight \
         recorder's capture and C++ header checked{} in {}",
        if tools.pkg_config {
            "pkg-config"
        } else {
            "NO pkg-config"
        },
        if tools.cmake {
            "CMake find_package"
        } else {
            "NO CMake"
        },
        if tools.valgrind {
            ", all but the README's server under valgrind memcheck"
        } else {
            " (memory NOT checked: no valgrind)"
        },
        cmd::format_duration(started.elapsed())
    );
    Ok(())
}

/// Which of the optional tools are installed.
#[derive(Debug, Clone, Copy)]
struct Tools {
    valgrind: bool,
    pkg_config: bool,
    cmake: bool,
}

impl Tools {
    /// A command that runs `path` under valgrind memcheck when it is installed (any error or
    /// definite or indirect leak fails it), else bare.
    fn checked(self, path: PathBuf) -> Command {
        if !self.valgrind {
            return Command::new(path);
        }
        let mut c = Command::new("valgrind");
        c.args([
            "-q",
            "--error-exitcode=99",
            "--leak-check=full",
            "--errors-for-leak-kinds=definite,indirect",
            "--show-leak-kinds=definite,indirect",
        ])
        .arg(path);
        c
    }
}

/// Compiles every C and C++ program into `out` from the installed prefix: `echo_server`
/// (pkg-config, shared), the README's server (the same flags), the error-path and teardown
/// programs, the C++ header check, and the echo client (CMake, static); returns the client's
/// path.
fn build_programs(root: &Path, out: &Path, installed: &Installed, tools: Tools) -> Result<PathBuf> {
    // The shared build, with pkg-config's flags (or the same flags by hand without it).
    let mut shared = if tools.pkg_config {
        pkg_config_flags(installed, "soe", false)?
    } else {
        vec![
            format!("-I{}", installed.prefix.join("include").display()),
            format!("-L{}", installed.libdir().display()),
            "-lsoe".into(),
        ]
    };
    shared.push(format!("-Wl,-rpath,{}", installed.libdir().display()));
    // The static library in an otherwise dynamic program: `soe-static.pc` as it is.
    let fully_static = if tools.pkg_config {
        pkg_config_flags(installed, "soe-static", false)?
    } else {
        let mut flags = vec![
            format!("-I{}", installed.prefix.join("include").display()),
            installed.static_lib.display().to_string(),
        ];
        flags.extend(["-lpthread", "-ldl", "-lm"].map(String::from));
        flags
    };
    let tests = root.join("crates/soe-ffi/tests/c");
    let c = |source: &Path, name: &str, flags: &[String]| {
        compile(&c_compiler(), "-std=c11", source, flags, &out.join(name))
    };
    c(
        &root.join("examples/c/echo_server.c"),
        "echo_server",
        &shared,
    )?;
    // The README's C server, as the README says to build it: beside examples/c/common.h.
    let readme_server = out.join("readme_server.c");
    let readme = std::fs::read_to_string(root.join("README.md"))
        .map_err(|e| Error::new(format!("README.md: {e}")))?;
    std::fs::write(&readme_server, readme_c_server(&readme)?)
        .map_err(|e| Error::new(format!("{}: {e}", readme_server.display())))?;
    let mut readme_flags = vec![format!("-I{}", root.join("examples/c").display())];
    readme_flags.extend(shared.iter().cloned());
    c(&readme_server, "readme_server", &readme_flags)?;
    c(&tests.join("error_paths.c"), "error_paths", &shared)?;
    // Every macro of the installed header used in an expression, as C11 and C++17.
    c(&tests.join("macros.c"), "macros", &shared)?;
    // (g++ compiles a `.c` file as C++.)
    compile(
        &cxx_compiler(),
        "-std=c++17",
        &tests.join("macros.c"),
        &shared,
        &out.join("macros_cxx"),
    )?;
    c(&tests.join("teardown.c"), "teardown", &shared)?;
    c(&tests.join("recording.c"), "recording", &shared)?;
    c(&tests.join("teardown.c"), "teardown_static", &fully_static)?;
    compile(
        &cxx_compiler(),
        "-std=c++17",
        &tests.join("header_check.cpp"),
        &fully_static,
        &out.join("header_check"),
    )?;
    if tools.pkg_config {
        // A fully static program (`-static`), C++17, with `pkg-config --static` as it is.
        let mut flags = vec!["-static".to_owned()];
        flags.extend(pkg_config_flags(installed, "soe", true)?);
        compile(
            &cxx_compiler(),
            "-std=c++17",
            &tests.join("header_check.cpp"),
            &flags,
            &out.join("header_check_static"),
        )?;
    }
    needs_soname(&out.join("echo_server"), &installed.version.soname())?;
    // The CMake build of the examples, linked statically.
    if tools.cmake {
        return cmake_build(installed, &root.join("examples/c"), &out.join("cmake"));
    }
    c(
        &root.join("examples/c/echo_client.c"),
        "echo_client",
        &fully_static,
    )?;
    compile(
        &cxx_compiler(),
        "-std=c++17",
        &root.join("examples/c/game_server.cpp"),
        &fully_static,
        &out.join("game_server"),
    )?;
    Ok(out.join("echo_client"))
}

/// The marker above the README's C server block.
const README_MARKER: &str = "<!-- c-abi: README server -->";

/// The C server of the README: the ```` ```c ```` block under [`README_MARKER`].
fn readme_c_server(readme: &str) -> Result<String> {
    let missing = || Error::new(format!("README.md has no ```c block under {README_MARKER}"));
    let (_, after) = readme.split_once(README_MARKER).ok_or_else(missing)?;
    let block = after
        .trim_start()
        .strip_prefix("```c\n")
        .and_then(|b| b.split_once("\n```"))
        .ok_or_else(missing)?
        .0;
    Ok(format!("{block}\n"))
}

/// The C echo server against `soe ping` (20 KB messages, fragments) and `soe load` (four
/// sessions, 1 byte to 20 KB), RC4 on; it exits once the five sessions have closed.
fn c_server_against_tools(mut server: Command, soe: &Path) -> Result<()> {
    let key64 = base64(KEY.as_bytes());
    server.args(["--port", "0", "--key", KEY, "--sessions", "5"]);
    let (mut child, port) = spawn_listening(server, "echo_server")?;
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
    .args(["--timeout", "10", "--rc4-key", &key64, &addr]);
    let mut load = Command::new(soe);
    load.args([
        "load",
        "--sessions",
        "4",
        "--messages",
        "40",
        "--size",
        "1-20000",
    ])
    .args(["--timeout", "30", "--rc4-key", &key64, &addr]);
    let clients = expect_success(ping, "soe ping -> C echo_server")
        .and_then(|()| expect_success(load, "soe load -> C echo_server"));
    if let Err(e) = clients {
        let _ = child.kill();
        let _ = child.wait();
        return Err(e);
    }
    wait_exit(&mut child, "echo_server", Duration::from_secs(60))
}

/// The C echo server, serving one `soe ping` session, gets SIGINT: it must close the session,
/// send its Disconnects and free the endpoint (under valgrind: without a leak), printing
/// `shutdown: 1 sessions closed, 0 left`, and exit 0.
fn c_server_shuts_down_on_sigint(server: Command, soe: &Path) -> Result<()> {
    server_shuts_down_on_sigint(server, soe, "echo_server")
}

/// A server (`what`: the C `echo_server` or the C# `EchoServer`), serving one `soe ping`
/// session, gets SIGINT: it must close the session, send its Disconnects, print
/// `WHAT: shutdown: 1 sessions closed, 0 left` and exit 0.
pub(crate) fn server_shuts_down_on_sigint(
    mut server: Command,
    soe: &Path,
    what: &str,
) -> Result<()> {
    server.args(["--port", "0"]);
    let (mut child, port, lines) = spawn_listening_lines(server, &format!("{what} (SIGINT)"))?;
    sigint_with_a_session(&mut child, port, &lines, soe, &[], what)
}

/// A server already listening on `port` (`child`, whose lines after the first come in
/// `lines`) gets SIGINT while a `soe ping` session (with `ping_args` besides the address)
/// is open: it must close the session, send its Disconnects, print
/// `WHAT: shutdown: 1 sessions closed, 0 left` and exit 0. Every session before that one must
/// have ended.
pub(crate) fn sigint_with_a_session(
    child: &mut Child,
    port: u16,
    lines: &Lines,
    soe: &Path,
    ping_args: &[&str],
    what: &str,
) -> Result<()> {
    let mut ping = Command::new(soe);
    ping.args(["ping", "--count", "1000", "--interval", "20"])
        .args(ping_args)
        .arg(format!("127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut ping = ping
        .spawn()
        .map_err(|e| Error::new(format!("soe ping: {e}")))?;
    let echoing = Instant::now();
    // Wait until the session is up (the server echoes), then interrupt the server.
    std::thread::sleep(Duration::from_millis(1500));
    let mut kill = Command::new("kill");
    kill.args(["-INT", &child.id().to_string()]);
    let signalled = cmd::run_timed(&mut kill).map(|_| ());
    let exited = signalled.and_then(|()| wait_exit(child, what, Duration::from_secs(30)));
    let _ = ping.kill();
    let _ = ping.wait();
    exited?;
    // The reader thread may still hold the last line.
    std::thread::sleep(Duration::from_millis(200));
    let said = lines.lock().map(|l| l.clone()).unwrap_or_default();
    let wanted = format!("{what}: shutdown: 1 sessions closed, 0 left");
    if said.contains(&wanted) {
        println!(
            "==> {what} closed its session on SIGINT ({} after the start)",
            cmd::format_duration(echoing.elapsed())
        );
        Ok(())
    } else {
        Err(Error::new(format!(
            "{what} did not print {wanted:?} on SIGINT: {said:?}"
        )))
    }
}

/// Measures the installed libraries and two programs linked statically, and checks (or, with
/// `SOE_BLESS=1`, writes) docs/c-api.md's size table.
fn sizes(installed: &Installed, echo_client: &Path, out: &Path) -> Result<()> {
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let shared = format!("`{}`", installed.version.real_name());
    let mut files = vec![
        ("`libsoe.a`", size(&installed.static_lib)),
        (shared.as_str(), size(&installed.shared_lib())),
        (
            "`echo_client` (libsoe.a, CMake `RelWithDebInfo`)",
            size(echo_client),
        ),
    ];
    let static_check = out.join("header_check_static");
    if static_check.exists() {
        files.push(("`header_check` (C++17, `-static`)", size(&static_check)));
    }
    let rustc = c_abi_install::rustc_version();
    c_abi_install::check_size_table(&c_abi_install::size_table(&rustc, &files), &rustc)
}

/// The README's C server, on a free port, against `soe ping` (20 KB messages, fragments) and
/// `soe load` (two sessions, 1 byte to 20 KB); it must still be serving afterwards. It runs
/// forever and never frees its endpoint, so it runs without valgrind and is killed at the end.
fn readme_server_against_ping(program: &Path, soe: &Path) -> Result<()> {
    let port = free_udp_port()?;
    let mut server = Command::new(program);
    server.arg(port.to_string());
    println!("==> README server: {}", cmd::describe(&server));
    let mut child = server
        .spawn()
        .map_err(|e| Error::new(format!("README server: {e}")))?;
    let addr = format!("127.0.0.1:{port}");
    let mut ping = Command::new(soe);
    ping.args([
        "ping",
        "--count",
        "5",
        "--size",
        "20000",
        "--interval",
        "20",
    ])
    .args(["--timeout", "10", &addr]);
    let mut load = Command::new(soe);
    load.args([
        "load",
        "--sessions",
        "2",
        "--messages",
        "20",
        "--size",
        "1-20000",
    ])
    .args(["--timeout", "30", &addr]);
    let result = wait_bound(&mut child, port)
        .and_then(|()| expect_success(ping, "soe ping -> the README's C server"))
        .and_then(|()| expect_success(load, "soe load -> the README's C server"))
        .and_then(|()| match child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(Error::new(format!("the README's C server ended: {status}"))),
            Err(e) => Err(Error::new(format!("the README's C server: {e}"))),
        });
    let _ = child.kill();
    let _ = child.wait();
    result
}

/// A UDP port nothing listens on at the moment.
fn free_udp_port() -> Result<u16> {
    std::net::UdpSocket::bind("0.0.0.0:0")
        .and_then(|s| s.local_addr())
        .map(|a| a.port())
        .map_err(|e| Error::new(format!("no free UDP port: {e}")))
}

/// Waits until `child` has bound UDP `port` (binding it here then fails), for up to 10 s.
fn wait_bound(child: &mut Child, port: u16) -> Result<()> {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(10) {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(Error::new(format!(
                "the README's C server exited before serving: {status}"
            )));
        }
        if std::net::UdpSocket::bind(("0.0.0.0", port)).is_err() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(Error::new(format!(
        "the README's C server did not bind port {port} within 10 s"
    )))
}

/// An echo client (the C one, or the C# one: both take the same arguments) against
/// `soe serve` with `key`: RC4, 60 messages of 20 KB, every echo verified by the client, a
/// clean close. `what` names the client in errors.
pub(crate) fn echo_client_against_serve(
    mut client: Command,
    soe: &Path,
    key: &str,
    what: &str,
) -> Result<()> {
    let mut serve = Command::new(soe);
    serve
        .args(["serve", "--bind", "127.0.0.1:0", "--duration", "120"])
        .args(["--rc4-key", &base64(key.as_bytes())]);
    let (mut server, port) = spawn_listening(serve, "soe serve")?;
    client
        .args(["127.0.0.1", &port.to_string(), "--key", key])
        .args(["--count", "60", "--size", "20000"]);
    let result = expect_success(client, &format!("{what} -> soe serve"));
    let _ = server.kill();
    let _ = server.wait();
    result
}

/// `pkg-config --cflags --libs PACKAGE` (with `--static`: the static library's needs too) for
/// the installed prefix, as words.
fn pkg_config_flags(
    installed: &Installed,
    package: &str,
    static_libs: bool,
) -> Result<Vec<String>> {
    let mut c = Command::new("pkg-config");
    c.env("PKG_CONFIG_PATH", installed.pkgconfig_dir());
    if static_libs {
        c.arg("--static");
    }
    c.args(["--cflags", "--libs", package]);
    println!("==> c-abi: {}", cmd::describe(&c));
    let flags = cmd::output(&mut c)?;
    println!("    {}", flags.trim());
    Ok(flags.split_whitespace().map(String::from).collect())
}

/// Configures and builds `examples/c` with CMake against the installed prefix, static; the
/// path of the echo client built.
fn cmake_build(installed: &Installed, source: &Path, build: &Path) -> Result<PathBuf> {
    let mut configure = Command::new("cmake");
    configure
        .arg("-S")
        .arg(source)
        .arg("-B")
        .arg(build)
        .arg(format!(
            "-DCMAKE_PREFIX_PATH={}",
            installed.prefix.display()
        ))
        .args(["-DSOE_STATIC=ON", "-DCMAKE_BUILD_TYPE=RelWithDebInfo"]);
    if let Ok(cc) = std::env::var("CC") {
        configure.arg(format!("-DCMAKE_C_COMPILER={cc}"));
    }
    if let Ok(cxx) = std::env::var("CXX") {
        configure.arg(format!("-DCMAKE_CXX_COMPILER={cxx}"));
    }
    println!("==> c-abi: {}", cmd::describe(&configure));
    cmd::run_timed(&mut configure)?;
    let mut make = Command::new("cmake");
    make.arg("--build").arg(build);
    println!("==> c-abi: {}", cmd::describe(&make));
    cmd::run_timed(&mut make)?;
    Ok(build.join("echo_client"))
}

/// Checks that `program` records `soname` as a needed library (the SONAME at work), when
/// readelf is there to tell.
fn needs_soname(program: &Path, soname: &str) -> Result<()> {
    if !cmd::program_runs("readelf") {
        println!("==> c-abi: readelf is not installed: the SONAME link is not checked");
        return Ok(());
    }
    let mut c = Command::new("readelf");
    c.arg("-d").arg(program);
    let dynamic = cmd::output(&mut c)?;
    if dynamic.contains(&format!("Shared library: [{soname}]")) {
        println!("==> c-abi: {} needs {soname}", program.display());
        Ok(())
    } else {
        Err(Error::new(format!(
            "{} does not record {soname} as needed: the shared library's SONAME is wrong",
            program.display()
        )))
    }
}

fn compile(
    compiler: &str,
    std: &str,
    source: &Path,
    flags: &[String],
    output: &Path,
) -> Result<()> {
    let mut c = Command::new(compiler);
    c.arg(std)
        .args(["-Wall", "-Wextra", "-Woverflow", "-Werror", "-O1", "-g"])
        .arg(source)
        .args(flags)
        .arg("-o")
        .arg(output);
    println!("==> c-abi: {}", cmd::describe(&c));
    cmd::run_timed(&mut c).map(|_| ())
}

/// What `tests/c/teardown.c` prints when every call it makes during teardown (from a pthread-key
/// destructor, and from an `atexit` handler after the main thread's thread-locals are gone)
/// worked, and the handler registered before them still ran, in this order.
const TEARDOWN_LINES: [&str; 5] = [
    "teardown: thread: ok",
    "teardown: thread-key destructor: ok",
    "teardown: main: ok",
    "teardown: atexit handler: ok",
    "teardown: the atexit handler registered first ran",
];

/// Runs `c`, which must exit successfully and print exactly `lines` on stdout.
fn expect_lines(mut c: Command, what: &str, lines: &[&str]) -> Result<()> {
    println!("==> {what}: {}", cmd::describe(&c));
    let out = c
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| Error::new(format!("{what}: {e}")))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    for line in stdout.lines() {
        println!("    {what}: {line}");
    }
    if !out.status.success() {
        return Err(Error::new(format!("{what} failed: {}", out.status)));
    }
    let got: Vec<&str> = stdout.lines().collect();
    if got != lines {
        return Err(Error::new(format!(
            "{what} printed {got:?}, expected {lines:?}"
        )));
    }
    Ok(())
}

pub(crate) fn expect_success(mut c: Command, what: &str) -> Result<()> {
    println!("==> {what}: {}", cmd::describe(&c));
    cmd::run_timed(&mut c)
        .map(|_| ())
        .map_err(|e| Error::new(format!("{what}: {e}")))
}

/// The port of a line ending in `127.0.0.1:PORT` (and perhaps more words).
pub(crate) fn port_of(line: &str) -> Option<u16> {
    let (_, rest) = line.rsplit_once("127.0.0.1:")?;
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// Starts a server whose first line on stdout ends with `127.0.0.1:PORT`, and returns it with
/// the port.
pub(crate) fn spawn_listening(c: Command, what: &str) -> Result<(Child, u16)> {
    spawn_listening_lines(c, what).map(|(child, port, _)| (child, port))
}

/// The lines a server printed after its first, as they come.
pub(crate) type Lines = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

/// [`spawn_listening`], and the lines the server prints after its first.
pub(crate) fn spawn_listening_lines(mut c: Command, what: &str) -> Result<(Child, u16, Lines)> {
    println!("==> {what}: {}", cmd::describe(&c));
    let mut child = c
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| Error::new(format!("{what}: {e}")))?;
    let stdout = child.stdout.take().ok_or_else(|| Error::new("no stdout"))?;
    let mut lines = BufReader::new(stdout).lines();
    let port = loop {
        let Some(Ok(line)) = lines.next() else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Error::new(format!("{what} exited before it listened")));
        };
        println!("    {what}: {line}");
        if let Some(port) = port_of(&line) {
            break port;
        }
    };
    // Echo the rest of its output as it comes.
    let name = what.to_owned();
    let kept = Lines::default();
    let keep = kept.clone();
    std::thread::spawn(move || {
        for line in lines.map_while(std::result::Result::ok) {
            println!("    {name}: {line}");
            if let Ok(mut k) = keep.lock() {
                k.push(line);
            }
        }
    });
    Ok((child, port, kept))
}

pub(crate) fn wait_exit(child: &mut Child, what: &str, limit: Duration) -> Result<()> {
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => {
                return Err(Error::new(format!("{what} failed: {status}")));
            }
            Ok(None) if started.elapsed() < limit => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(Error::new(format!(
                    "{what} did not exit within {limit:?} of its clients' end"
                )));
            }
        }
    }
}

/// Standard base64 with padding (the `soe` tool's key format).
pub(crate) fn base64(data: &[u8]) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(TABLE[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_port_is_read_from_a_listening_line() {
        assert_eq!(port_of("listening on 127.0.0.1:4242"), Some(4242));
        assert_eq!(
            port_of("soe serve: echo on 127.0.0.1:20042 (blocking)"),
            Some(20042)
        );
        assert_eq!(port_of("nothing here"), None);
    }

    #[test]
    fn the_readme_has_a_c_server_block() {
        let readme = std::fs::read_to_string(cmd::workspace_root().join("README.md")).unwrap();
        let server = readme_c_server(&readme).unwrap();
        assert!(server.contains("int main("), "{server}");
        assert!(server.contains("soe_endpoint_new"), "{server}");
        assert!(!server.contains("```"), "{server}");
        assert!(readme_c_server("no marker here").is_err());
        assert!(readme_c_server(&format!("{README_MARKER}\n```sh\nls\n```\n")).is_err());
    }

    #[test]
    fn base64_matches_the_standard_alphabet_and_padding() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }
}
