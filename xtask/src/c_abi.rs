//! `cargo xtask c-abi`: the C ABI (soe-ffi) from C and C++, with the system compilers.
//!
//! Builds soe-ffi's static library and the `soe` tool, compiles `examples/c/echo_server.c`,
//! `examples/c/echo_client.c` and the error-path program with `cc -Wall -Wextra -Werror`, and
//! the header check with `c++ -Wall -Wextra -Werror`, then runs, each C program under valgrind
//! memcheck (no leak, no invalid access) when valgrind is installed:
//!
//! * the C echo server against `soe ping` (20 KB messages, fragments) and `soe load` (four
//!   sessions, 1 byte to 20 KB), RC4 on, every echo verified by the tools; the server exits once
//!   the five sessions have closed;
//! * the C echo client against `soe serve` (RC4, 20 KB fragments, every echo verified by the
//!   client, a clean close, and the stale handle afterwards);
//! * the error paths: every misuse returns its documented status;
//! * the ABI during teardown: a whole session from a pthread-key destructor and from an
//!   `atexit` handler, after the thread's Rust thread-locals are gone; the handler registered
//!   before it must still run (its line is checked);
//! * the C++ header check.
//!
//! Without valgrind the programs run bare, with a loud warning; under `CI=true` that fails.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::cmd;
use crate::{Error, Result};

/// The RC4 key of the runs: plain text for the C programs, base64 for the `soe` tool.
const KEY: &str = "soe-ffi c-abi key";

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

/// Runs the whole check.
pub(crate) fn run() -> Result<()> {
    let root = cmd::workspace_root();
    let started = Instant::now();
    let valgrind = cmd::program_runs("valgrind");
    if !valgrind {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            return Err(Error::new(
                "valgrind is not installed, and CI=true requires it (.ci/run installs it from \
                 the OS packages)",
            ));
        }
        println!(
            "==> c-abi: valgrind is not installed: the C programs run WITHOUT memory checks \
             (install valgrind; under CI=true this fails)"
        );
    }
    let mut build = cmd::cargo();
    build.args(["build", "--quiet", "-p", "soe-ffi", "-p", "soe-cli"]);
    println!("==> c-abi: {}", cmd::describe(&build));
    cmd::run_timed(&mut build)?;
    let target = root.join("target/debug");
    let out = root.join("target/c-abi");
    std::fs::create_dir_all(&out).map_err(|e| Error::new(format!("{}: {e}", out.display())))?;
    let lib = target.join("libsoe_ffi.a");
    let include = root.join("crates/soe-ffi/include");
    let programs = [
        ("echo_server", root.join("examples/c/echo_server.c")),
        ("echo_client", root.join("examples/c/echo_client.c")),
        (
            "error_paths",
            root.join("crates/soe-ffi/tests/c/error_paths.c"),
        ),
        ("teardown", root.join("crates/soe-ffi/tests/c/teardown.c")),
    ];
    for (name, source) in &programs {
        compile(
            &c_compiler(),
            &["-std=c11"],
            source,
            &include,
            &lib,
            &out.join(name),
        )?;
    }
    compile(
        &cxx_compiler(),
        &["-std=c++17"],
        &root.join("crates/soe-ffi/tests/c/header_check.cpp"),
        &include,
        &lib,
        &out.join("header_check"),
    )?;

    let checked = |program: &str| -> Command {
        let path = out.join(program);
        if valgrind {
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
        } else {
            Command::new(path)
        }
    };
    let soe = target.join("soe");
    let key64 = base64(KEY.as_bytes());

    // The error paths, the ABI during teardown, and the C++ header check.
    expect_success(checked("error_paths"), "error_paths")?;
    expect_lines(checked("teardown"), "teardown", &TEARDOWN_LINES)?;
    expect_success(Command::new(out.join("header_check")), "header_check")?;

    // The C server against the Rust tools.
    let mut server = checked("echo_server");
    server.args(["--port", "0", "--key", KEY, "--sessions", "5"]);
    let (mut child, port) = spawn_listening(server, "echo_server")?;
    let addr = format!("127.0.0.1:{port}");
    let mut ping = Command::new(&soe);
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
    let mut load = Command::new(&soe);
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
    wait_exit(&mut child, "echo_server", Duration::from_secs(60))?;

    // The C client against the Rust server.
    let mut serve = Command::new(&soe);
    serve
        .args(["serve", "--bind", "127.0.0.1:0", "--duration", "120"])
        .args(["--rc4-key", &key64]);
    let (mut server, port) = spawn_listening(serve, "soe serve")?;
    let mut client = checked("echo_client");
    client
        .args(["127.0.0.1", &port.to_string(), "--key", KEY])
        .args(["--count", "60", "--size", "20000"]);
    let result = expect_success(client, "C echo_client -> soe serve");
    let _ = server.kill();
    let _ = server.wait();
    result?;
    println!(
        "==> c-abi: C server and client verified against the Rust tools, error paths and C++ \
         header checked{} in {}",
        if valgrind {
            ", all under valgrind memcheck"
        } else {
            " (memory NOT checked: no valgrind)"
        },
        cmd::format_duration(started.elapsed())
    );
    Ok(())
}

fn compile(
    compiler: &str,
    std: &[&str],
    source: &Path,
    include: &Path,
    lib: &Path,
    output: &Path,
) -> Result<()> {
    let mut c = Command::new(compiler);
    c.args(std)
        .args(["-Wall", "-Wextra", "-Werror", "-O1", "-g"])
        .arg("-I")
        .arg(include)
        .arg(source)
        .arg(lib)
        .args(["-lpthread", "-ldl", "-lm", "-o"])
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
    println!("==> c-abi: {what}: {}", cmd::describe(&c));
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

fn expect_success(mut c: Command, what: &str) -> Result<()> {
    println!("==> c-abi: {what}: {}", cmd::describe(&c));
    cmd::run_timed(&mut c)
        .map(|_| ())
        .map_err(|e| Error::new(format!("{what}: {e}")))
}

/// Starts a server whose first line on stdout ends with `127.0.0.1:PORT`, and returns it with
/// the port.
fn spawn_listening(mut c: Command, what: &str) -> Result<(Child, u16)> {
    println!("==> c-abi: {what}: {}", cmd::describe(&c));
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
        if let Some(port) = line.rsplit_once("127.0.0.1:").and_then(|(_, rest)| {
            rest.split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|p| p.parse::<u16>().ok())
        }) {
            break port;
        }
    };
    // Echo the rest of its output as it comes.
    let name = what.to_owned();
    std::thread::spawn(move || {
        for line in lines.map_while(std::result::Result::ok) {
            println!("    {name}: {line}");
        }
    });
    Ok((child, port))
}

fn wait_exit(child: &mut Child, what: &str, limit: Duration) -> Result<()> {
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
fn base64(data: &[u8]) -> String {
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
    fn base64_matches_the_standard_alphabet_and_padding() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }
}
