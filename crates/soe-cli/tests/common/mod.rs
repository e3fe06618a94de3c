//! Helpers shared by the end-to-end tests of the `soe` binary: running it, reading its
//! output line by line, and a server or proxy on a free loopback port.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::process::{Child, ChildStderr, ChildStdout, Command, Output, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

/// The `soe` binary under test: this package's, or the one `SOE_TEST_BIN` names (to run the
/// same tests against another build, such as the one before a fix).
pub(crate) fn soe_bin() -> String {
    std::env::var("SOE_TEST_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_soe").to_owned())
}
/// A base64 RC4 key (16 bytes).
pub(crate) const KEY: &str = "F70IaxuU8C/w7FPXY1ibXw==";

/// A child process that is killed when the test ends, whatever happens.
pub(crate) struct Running {
    pub(crate) child: Child,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Running {
    /// Asks the process to stop as on Ctrl-C, so it prints its summary and exits.
    pub(crate) fn interrupt(&mut self) {
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
    }

    pub(crate) fn wait(&mut self, timeout: Duration) -> std::process::ExitStatus {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the process did not exit within {timeout:?}"
            );
            thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Collects a pipe's lines on a thread.
pub(crate) fn lines<R: Read + Send + 'static>(pipe: R) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// Waits for a line containing `needle` and returns it.
pub(crate) fn wait_for(
    rx: &mpsc::Receiver<String>,
    needle: &str,
    seen: &mut Vec<String>,
) -> String {
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("no line with {needle:?}; saw {seen:#?}"));
        seen.push(line.clone());
        if line.contains(needle) {
            return line;
        }
    }
}

/// Drains what is left of a pipe (the process has exited).
pub(crate) fn rest(rx: &mpsc::Receiver<String>, seen: &mut Vec<String>) {
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(5)) {
        seen.push(line);
    }
}

pub(crate) fn addr_in(line: &str) -> SocketAddr {
    line.split(|c: char| c.is_whitespace() || c == ',')
        .find_map(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
}

/// `soe serve` on a free loopback port.
pub(crate) struct Server {
    pub(crate) process: Running,
    pub(crate) addr: SocketAddr,
    pub(crate) stdout: mpsc::Receiver<String>,
    pub(crate) seen: Vec<String>,
}

pub(crate) fn serve(extra: &[&str]) -> Server {
    let mut command = Command::new(soe_bin());
    command
        .args(["serve", "--bind", "127.0.0.1:0", "--duration", "120"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = started(|| command.spawn()).expect("spawn soe serve");
    let stdout = lines(child.stdout.take().expect("stdout"));
    let process = Running { child };
    let mut seen = Vec::new();
    let line = wait_for(&stdout, "listening on", &mut seen);
    Server {
        process,
        addr: addr_in(&line),
        stdout,
        seen,
    }
}

/// `soe proxy` on a free loopback port, in front of `upstream`.
pub(crate) struct Proxy {
    pub(crate) process: Running,
    pub(crate) addr: SocketAddr,
    pub(crate) stdout: mpsc::Receiver<String>,
    pub(crate) stderr: mpsc::Receiver<String>,
}

pub(crate) fn proxy(upstream: SocketAddr, extra: &[&str]) -> Proxy {
    let mut command = Command::new(soe_bin());
    command
        .args(["proxy", "--listen", "127.0.0.1:0", "--upstream"])
        .arg(upstream.to_string())
        .args(["--duration", "120"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = started(|| command.spawn()).expect("spawn soe proxy");
    let stdout: ChildStdout = child.stdout.take().expect("stdout");
    let stderr: ChildStderr = child.stderr.take().expect("stderr");
    let (stdout, stderr) = (lines(stdout), lines(stderr));
    let process = Running { child };
    let line = wait_for(&stderr, "listening on", &mut Vec::new());
    Proxy {
        process,
        addr: addr_in(&line),
        stdout,
        stderr,
    }
}

pub(crate) fn soe(args: &[&str]) -> Output {
    let mut command = Command::new(soe_bin());
    command.args(args).stdin(Stdio::null());
    started(|| command.output()).expect("run soe")
}

/// Starts a process (`start`: a command's `spawn` or `output`), again after Windows'
/// `ERROR_INTERNAL_ERROR` (1359), at most three times more. Under wine 8, process creation
/// fails so now and then while many processes start at once (seen in CI: `soe --help` failed
/// with it before it ran); nothing was started, so starting again is safe. Any other error is
/// returned at once.
pub(crate) fn started<T>(mut start: impl FnMut() -> std::io::Result<T>) -> std::io::Result<T> {
    const ERROR_INTERNAL_ERROR: i32 = 1359;
    let mut again = 3;
    loop {
        match start() {
            Err(e)
                if cfg!(windows) && e.raw_os_error() == Some(ERROR_INTERNAL_ERROR) && again > 0 =>
            {
                again -= 1;
                thread::sleep(Duration::from_millis(200));
            }
            outcome => return outcome,
        }
    }
}

/// Runs `soe` and asserts that it succeeded (showing its output when not).
pub(crate) fn soe_ok(args: &[&str]) -> Output {
    let out = soe(args);
    assert!(
        out.status.success(),
        "soe {args:?} failed: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    out
}

pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The bytes `soe ping` and `soe load` send as message `seq` of `size` bytes in a session whose
/// tag is `tag` (the format is part of the tool's documented behaviour: the sequence number,
/// big-endian, the session's random tag, then a text).
pub(crate) fn message(seq: u64, tag: u64, size: usize) -> Vec<u8> {
    const FILL: &[u8] = b" soe message payload;";
    let id = seq.to_be_bytes().into_iter().chain(tag.to_be_bytes());
    let mut out: Vec<u8> = id.take(size).collect();
    let mut i = 0;
    while out.len() < size {
        out.push(FILL[i % FILL.len()]);
        i += 1;
    }
    out
}

/// Starts `soe` with `args`, its stdout read line by line and its stderr discarded; the process
/// is killed when the returned handle drops.
pub(crate) fn spawn(args: &[&str]) -> (Running, mpsc::Receiver<String>) {
    let mut command = Command::new(soe_bin());
    command
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = started(|| command.spawn()).expect("spawn soe");
    let stdout = lines(child.stdout.take().expect("stdout"));
    (Running { child }, stdout)
}

/// The Lua plugin of the Wireshark export.
pub(crate) const PLUGIN: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../soe-dissect/wireshark/soe.lua"
);

/// Whether tshark runs here; `false` (with a word) skips the test, except under `CI=true`,
/// where its absence fails (`.ci/run` installs it).
pub(crate) fn tshark_present() -> bool {
    let found = Command::new("tshark")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "tshark is not installed, and CI=true requires it (.ci/run installs it from the OS \
             packages)"
        );
        eprintln!("SKIPPED: tshark is not installed: the Wireshark captures are NOT checked");
    }
    found
}

/// `soe serve` with `serve_extra`, and a 2-session `soe load` against it that would run for
/// two minutes, once the server has seen both sessions' echoes flow (its stats line every
/// 0.2 s says so; not after a fixed sleep, which a loaded machine could outlast before
/// anything happened).
pub(crate) fn load_with_echoes_flowing(
    serve_extra: &[&str],
) -> (Server, Running, mpsc::Receiver<String>) {
    let mut extra = vec!["--stats-interval", "0.2"];
    extra.extend_from_slice(serve_extra);
    let mut server = serve(&extra);
    let addr = server.addr.to_string();
    let (load, stdout) = spawn(&[
        "load",
        &addr,
        "--sessions",
        "2",
        "--duration",
        "120",
        "--rate",
        "200",
    ]);
    loop {
        let stats = wait_for(&server.stdout, "stats:", &mut server.seen);
        if stats.contains("2 session(s)") && !stats.contains(" 0 message(s)/s") {
            return (server, load, stdout);
        }
    }
}
