//! Fixed offered load: what a server's process spends per message at the loads game servers run,
//! not at saturation.
//!
//! Every server under test runs in a process of its own (`soe serve`, the Node addon, the
//! soe-protocol server, bare UDP echo servers). One load generator, the same for all, runs in
//! this process on its own threads: `sessions` clients, each from its own UDP port, each sending
//! on a fixed schedule whatever the server does (an open loop), every echo checked byte for byte.
//! After a warm-up the server's CPU time (every thread, user and system, from `/proc`) is read
//! at the start and the end of the measured window; the messages echoed in that window divide it.
//!
//! Every message carries its kind, its session, its number and its send time, so the echo
//! itself tells its round trip and whether it is the one expected.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// One offered load.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Load {
    /// Client sessions, each from its own UDP port.
    pub sessions: usize,
    /// What each session sends.
    pub mix: Mix,
}

/// What each session sends, on a fixed schedule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mix {
    /// `rate` reliable messages a second of `size` bytes, each echoed.
    Echo {
        /// Messages per second per session.
        rate: f64,
        /// Message size in bytes.
        size: usize,
    },
    /// A game tick: 10 unreliable position updates of 40 bytes a second and one reliable event
    /// of 200 bytes a second; the server sends each back the way it came, so each client also
    /// receives 10 unreliable updates and one reliable event a second.
    Tick,
    /// Idle players: nothing sent but what keeps the session alive (the client's default
    /// heartbeat, answered by the server). Against a bare UDP echo, one datagram per session
    /// per heartbeat interval, echoed: the limit, one `recv` and one `send` per keep-alive.
    Idle,
}

/// The default keep-alive interval of a client session (its heartbeat after that much silence).
pub fn keep_alive_interval() -> Duration {
    soe_session::SessionConfig::new("x")
        .heartbeat_interval()
        .unwrap_or(Duration::from_secs(10))
}

impl Load {
    /// A short name for tables: `500 × 20 msg/s` or `500 × game tick`.
    pub fn label(&self) -> String {
        match self.mix {
            Mix::Echo { rate, size } => {
                format!("{} × {rate} msg/s, {size} B", self.sessions)
            }
            Mix::Tick => format!(
                "{} × game tick (10 Hz 40 B unreliable + 1 Hz 200 B reliable)",
                self.sessions
            ),
            Mix::Idle => format!("{} × idle (keep-alive only)", self.sessions),
        }
    }

    /// The streams each session sends on `wire`: an idle session sends nothing itself over
    /// SOE (its heartbeats keep it alive), and one small datagram per keep-alive interval over
    /// bare UDP.
    fn streams_on(&self, wire: Wire) -> Vec<(Duration, usize, bool)> {
        match (self.mix, wire) {
            (Mix::Idle, Wire::Udp) => vec![(keep_alive_interval(), 17, false)],
            _ => self.streams(),
        }
    }

    /// The messages each session sends: (period, size, reliable), one entry per stream.
    fn streams(&self) -> Vec<(Duration, usize, bool)> {
        match self.mix {
            Mix::Echo { rate, size } => {
                vec![(Duration::from_secs_f64(1.0 / rate.max(1e-3)), size, true)]
            }
            Mix::Tick => vec![
                (Duration::from_millis(100), 40, false),
                (Duration::from_secs(1), 200, true),
            ],
            Mix::Idle => Vec::new(),
        }
    }

    /// Messages per second offered, all sessions together.
    pub fn offered_per_sec(&self) -> f64 {
        let per_session: f64 = self
            .streams()
            .iter()
            .map(|(period, _, _)| 1.0 / period.as_secs_f64())
            .sum();
        per_session * self.sessions as f64
    }
}

/// How a server under test speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// SOE sessions (the generator's clients are soe-tokio endpoints).
    Soe,
    /// Bare datagrams, echoed as they are.
    Udp,
}

/// A server under test: how to start it, and how to talk to it.
#[derive(Debug, Clone)]
pub struct Server {
    /// The name in tables.
    pub label: String,
    /// The program.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its working directory, if it matters.
    pub dir: Option<PathBuf>,
    /// SOE or bare UDP.
    pub wire: Wire,
    /// The application protocol name its sessions expect (SOE only).
    pub protocol: String,
    /// Left out of the idle load (a setting that only matters while messages flow).
    pub skip_idle: bool,
}

/// What one server did under one load.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Sessions that connected.
    pub connected: usize,
    /// Messages echoed back (and checked) within the measured window.
    pub messages: u64,
    /// The measured window.
    pub window: Duration,
    /// The server process's CPU time in the window (every thread, user and system).
    pub cpu: Duration,
    /// Round trips of the messages echoed in the window, µs: median.
    pub p50_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// Reliable messages sent and never echoed by the end of the run (must be 0).
    pub reliable_lost: u64,
    /// Unreliable messages sent and never echoed (UDP may lose them).
    pub unreliable_lost: u64,
    /// Echoes that were not what was sent (wrong content, duplicated, out of order): must be 0.
    pub bad: u64,
    /// Sessions that ended during the run.
    pub failed: usize,
    /// The load generator's own CPU time in the window (this process): near the window's
    /// length, the generator could not keep its schedule and the figures are suspect.
    pub generator_cpu: Duration,
    /// Datagrams the server received in the window (every client socket's sends counted).
    pub server_received: u64,
    /// Datagrams the server sent in the window (every client socket's receipts counted).
    pub server_sent: u64,
    /// The clients' own view, summed over their sessions (SOE only): resends, and smoothed
    /// round trips (median and largest), for telling where time goes.
    pub client_view: String,
    /// When this outcome is the median of several rounds ([`run`] with `rounds` > 1): the
    /// lowest and highest CPU per message of the sound rounds, µs, and how many were sound.
    pub spread: Option<(f64, f64, usize)>,
}

impl Outcome {
    /// Server CPU per echoed message, µs.
    pub fn cpu_us_per_message(&self) -> f64 {
        self.cpu.as_secs_f64() * 1e6 / self.messages.max(1) as f64
    }

    /// The server's datagrams per echoed message, received and sent: the kernel's share of
    /// the work (a bare echo moves one each way; an SOE echo also takes the client's ack).
    pub fn datagrams_per_message(&self) -> (f64, f64) {
        let n = self.messages.max(1) as f64;
        (self.server_received as f64 / n, self.server_sent as f64 / n)
    }

    /// Server CPU per session per second of play, µs (the cost of one player).
    pub fn cpu_us_per_session_second(&self) -> f64 {
        self.cpu.as_secs_f64() * 1e6
            / self.window.as_secs_f64().max(1e-9)
            / self.connected.max(1) as f64
    }

    /// The share of one core the server took, in percent.
    pub fn core_percent(&self) -> f64 {
        self.cpu.as_secs_f64() / self.window.as_secs_f64().max(1e-9) * 100.0
    }

    /// Whether the run is sound: every session connected and stayed, every reliable message
    /// came back once, in order, intact, and the server echoed what it was offered (see
    /// [`Outcome::problems`]).
    pub fn sound(&self, load: &Load) -> bool {
        self.problems(load).is_empty()
    }

    /// Why the run is not sound, in a few words (empty when it is).
    pub fn problems(&self, load: &Load) -> String {
        let mut out = Vec::new();
        if self.connected < load.sessions {
            out.push(format!(
                "{} of {} sessions connected",
                self.connected, load.sessions
            ));
        }
        if self.failed > 0 {
            out.push(format!("{} sessions ended during the run", self.failed));
        }
        if self.reliable_lost > 0 {
            out.push(format!(
                "{} reliable messages never echoed",
                self.reliable_lost
            ));
        }
        if self.bad > 0 {
            out.push(format!(
                "{} echoes wrong, duplicated or out of order",
                self.bad
            ));
        }
        // UDP may lose an unreliable message now and then, not most of them: a server that
        // echoes far less than it is offered is not doing the work being measured.
        let offered = load.offered_per_sec() * self.window.as_secs_f64();
        if (self.messages as f64) < 0.9 * offered {
            out.push(format!(
                "only {} of about {} offered messages echoed in the window",
                self.messages,
                offered.round()
            ));
        }
        out.join(", ")
    }
}

/// Warm-up before the window, and the window itself.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// After every session connected and started sending, before measuring.
    pub warm_up: Duration,
    /// The measured window.
    pub window: Duration,
}

/// A server process under test. Dropping it ends the process.
#[derive(Debug)]
struct Process {
    child: Child,
    addr: SocketAddr,
}

impl Process {
    /// Starts `server` and waits (up to 30 s) for the line that says where it listens: a word
    /// `IP:PORT`, or a bare port after the word `listening`. When it exits first or stays
    /// silent, the error says how it ended and the last lines of its stderr (which are passed
    /// on to this process's stderr as they come, too).
    fn start(server: &Server) -> Result<Self, String> {
        let mut command = Command::new(&server.program);
        command
            .args(&server.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(dir) = &server.dir {
            command.current_dir(dir);
        }
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", server.program.display()))?;
        let stderr = StderrTail::follow(&mut child, &server.label);
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if !sent && let Some(addr) = listening_address(&line) {
                    let _ = tx.send(addr);
                    sent = true;
                }
                // Keep reading so the server never blocks on a full pipe.
            }
        });
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(addr) => Ok(Self { child, addr }),
            Err(e) => {
                let ended = match e {
                    // Its stdout closed: it exited (or closed it) without the line.
                    std::sync::mpsc::RecvTimeoutError::Disconnected => wait_briefly(&mut child)
                        .map_or_else(
                            || "closed its stdout without saying where it listens".to_owned(),
                            |status| format!("exited ({status}) without saying where it listens"),
                        ),
                    std::sync::mpsc::RecvTimeoutError::Timeout => {
                        "did not say where it listens within 30 s".to_owned()
                    }
                };
                let _ = child.kill();
                let _ = child.wait();
                Err(format!(
                    "{} ({} {}) {ended}; {}",
                    server.label,
                    server.program.display(),
                    server.args.join(" "),
                    stderr.describe()
                ))
            }
        }
    }
}

/// The exit status of `child` if it ends within a second.
fn wait_briefly(child: &mut Child) -> Option<std::process::ExitStatus> {
    let until = std::time::Instant::now() + Duration::from_secs(1);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if std::time::Instant::now() >= until {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The last lines a server wrote to its stderr, kept for the error that says why it did not
/// start.
struct StderrTail {
    lines: std::sync::Arc<std::sync::Mutex<std::collections::VecDeque<String>>>,
    done: std::sync::mpsc::Receiver<()>,
}

impl StderrTail {
    /// Lines kept.
    const LINES: usize = 8;

    /// Reads `child`'s stderr on a thread of its own, passing each line on to this process's
    /// stderr (prefixed with `label`) and keeping the last ones.
    fn follow(child: &mut Child, label: &str) -> Self {
        let lines = std::sync::Arc::new(std::sync::Mutex::new(std::collections::VecDeque::new()));
        let (tx, done) = std::sync::mpsc::channel();
        if let Some(stderr) = child.stderr.take() {
            let kept = lines.clone();
            let label = label.to_owned();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    eprintln!("{label}: {line}");
                    let mut kept = kept
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    if kept.len() == Self::LINES {
                        kept.pop_front();
                    }
                    kept.push_back(line);
                }
                let _ = tx.send(());
            });
        }
        Self { lines, done }
    }

    /// `stderr: ...` with the kept lines (once the stream ended, or after a second).
    fn describe(&self) -> String {
        let _ = self.done.recv_timeout(Duration::from_secs(1));
        let lines = self
            .lines
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if lines.is_empty() {
            "nothing on stderr".to_owned()
        } else {
            let text: Vec<&str> = lines.iter().map(String::as_str).collect();
            format!("stderr ends: {}", text.join(" / "))
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The address in a server's "listening" line: `IP:PORT` anywhere in it, or a port after the word
/// `listening` (then on 127.0.0.1).
fn listening_address(line: &str) -> Option<SocketAddr> {
    if !line.contains("listening") {
        return None;
    }
    let words = line.split_whitespace().map(|w| {
        w.trim_matches(|c: char| {
            !(c.is_ascii_alphanumeric() || c == '.' || c == ':' || c == '[' || c == ']')
        })
    });
    let mut port_only = None;
    for word in words {
        if let Ok(addr) = word.parse::<SocketAddr>() {
            return Some(addr);
        }
        if let Ok(port) = word.parse::<u16>() {
            port_only.get_or_insert(port);
        }
    }
    port_only.map(|p| SocketAddr::from(([127, 0, 0, 1], p)))
}

/// The CPU time of every thread of process `pid`, user and system: the scheduler's run time
/// (`/proc/PID/task/*/schedstat`, nanoseconds), or `utime + stime` from `/proc/PID/stat` (clock
/// ticks) where schedstat is missing.
pub fn process_cpu(pid: u32) -> Duration {
    let mut total = 0u64;
    let mut any = false;
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            let path = task.path().join("schedstat");
            if let Some(ns) = std::fs::read_to_string(path)
                .ok()
                .and_then(|t| t.split_whitespace().next()?.parse::<u64>().ok())
            {
                total += ns;
                any = true;
            }
        }
    }
    if any {
        return Duration::from_nanos(total);
    }
    let ticks = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|t| {
            // Fields after the command name (which may hold spaces) start after its ')'.
            let rest = t.rsplit_once(')')?.1;
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let utime: u64 = fields.get(11)?.parse().ok()?;
            let stime: u64 = fields.get(12)?.parse().ok()?;
            Some(utime + stime)
        })
        .unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

mod generator;
mod pinning;
pub use pinning::Placement;

/// Runs `load` against `server` and measures it; `Err` when the server could not be started or
/// no session connected.
///
/// Where the machine has two CPUs or more (Linux), `placement` says where the server and the
/// generator run ([`Placement`]); this thread's own CPU set is restored afterwards.
pub fn measure(
    server: &Server,
    load: &Load,
    timing: Timing,
    placement: Placement,
) -> Result<Outcome, String> {
    let pinning = pinning::Pinning::new(placement);
    let started = match &pinning {
        Some(p) => p.start_server(|| Process::start(server)),
        None => Process::start(server),
    };
    let outcome = started.and_then(|process| measure_process(process, server, load, timing));
    if let Some(p) = &pinning {
        p.restore();
    }
    outcome
}

/// Where the server and the generator run, as the report says it: the server's CPUs and the
/// generator's, or `None` when nothing is pinned.
pub fn cpus(placement: Placement) -> Option<(String, String)> {
    pinning::Pinning::new(placement).map(|p| p.describe())
}

fn measure_process(
    process: Process,
    server: &Server,
    load: &Load,
    timing: Timing,
) -> Result<Outcome, String> {
    let target = Target {
        addr: process.addr,
        pid: Some(process.child.id()),
        wire: server.wire,
        protocol: server.protocol.clone(),
        label: server.label.clone(),
    };
    let outcome = measure_at(&target, load, timing);
    drop(process);
    outcome
}

/// A server already running: where it listens, and its process (for its CPU time).
#[derive(Debug, Clone)]
pub struct Target {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its process, whose CPU time is read; `None`: CPU is not measured (reads as zero).
    pub pid: Option<u32>,
    /// SOE or bare UDP.
    pub wire: Wire,
    /// The application protocol name (SOE).
    pub protocol: String,
    /// Its name in messages.
    pub label: String,
}

/// Runs `load` against a server already running, with this module's load generator.
pub fn measure_at(target: &Target, load: &Load, timing: Timing) -> Result<Outcome, String> {
    generator::run(target, load, timing)
}

// ----- the report section -----

/// Where the servers under test are. Any left `None` is left out of the section, with a word.
#[derive(Debug, Clone, Default)]
pub struct Servers {
    /// The `soe` tool (`soe serve`).
    pub soe: Option<PathBuf>,
    /// This crate's `bench-server` (soe-protocol's server and the bare UDP echoes).
    pub bench_server: Option<PathBuf>,
    /// The Node addon's echo server script (`crates/soe-node/bench/echo-server.mjs`), run with
    /// `node` (it takes any application protocol name; `SOE_NODE_ADDON` in the environment names
    /// the addon to load).
    pub node_script: Option<PathBuf>,
    /// Where each server and the generator run.
    pub placement: Placement,
}

/// The application protocol every SOE server of the section is started with.
const PROTOCOL: &str = "SoeBench";

/// The receive-coalescing window of the section's coalescing servers, in milliseconds: as
/// long as the Node addon's own event batching holds events (`eventBatchMs`), well under a game
/// tick.
const COALESCE_MS: &str = "1";

/// The labels of the servers, as the rows and the table name them.
pub mod label {
    /// `soe serve --driver async`: the endpoint's driver a task on a one-thread tokio runtime.
    pub const SOE_SERVE: &str = "soe serve --driver async";
    /// `soe serve --driver blocking` (its default): the endpoint on a blocking event loop.
    pub const SOE_BLOCKING: &str = "soe serve --driver blocking";
    /// The async driver with a 1 ms receive-coalescing window.
    pub const SOE_SERVE_COALESCED: &str = "soe serve --driver async --coalesce-ms 1";
    /// The blocking driver with a 1 ms receive-coalescing window.
    pub const SOE_BLOCKING_COALESCED: &str = "soe serve --driver blocking --coalesce-ms 1";
    /// The Node addon's own API, echoing in JavaScript.
    pub const NODE: &str = "Node addon";
    /// The h1z1-server facade of the Node addon.
    pub const FACADE: &str = "Node h1z1 facade";
    /// soe-protocol 2.3.0's server.
    pub const PEER: &str = "soe-protocol 2.3.0";
    /// Bare tokio UDP echo.
    pub const UDP_TOKIO: &str = "bare UDP echo (tokio)";
    /// Bare blocking std UDP echo.
    pub const UDP_STD: &str = "bare UDP echo (std loop)";
}

impl Servers {
    /// The servers to run, and a word for each one left out.
    pub fn list(&self) -> (Vec<Server>, Vec<String>) {
        let mut servers = Vec::new();
        let mut missing = Vec::new();
        let soe_server = |label: &str, program: &PathBuf, args: &[&str], wire| Server {
            label: label.to_owned(),
            program: program.clone(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            dir: None,
            wire,
            protocol: PROTOCOL.to_owned(),
            skip_idle: false,
        };
        let serve = [
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--mode",
            "echo",
            "--protocol",
            PROTOCOL,
            "--max-sessions",
            "100000",
            "--driver",
        ];
        match &self.soe {
            Some(soe) => {
                for (label, driver) in [
                    (label::SOE_SERVE, "async"),
                    (label::SOE_BLOCKING, "blocking"),
                ] {
                    let mut args = serve.to_vec();
                    args.push(driver);
                    servers.push(soe_server(label, soe, &args, Wire::Soe));
                }
                // Each driver again with a receive-coalescing window (issue 44 §2): its saving
                // beside its round trip. Idle sessions send nothing to coalesce.
                for (label, driver) in [
                    (label::SOE_SERVE_COALESCED, "async"),
                    (label::SOE_BLOCKING_COALESCED, "blocking"),
                ] {
                    let mut args = serve.to_vec();
                    args.extend([driver, "--coalesce-ms", COALESCE_MS]);
                    let mut server = soe_server(label, soe, &args, Wire::Soe);
                    server.skip_idle = true;
                    servers.push(server);
                }
            }
            None => missing.push(format!(
                "{}: the soe binary was not given",
                label::SOE_SERVE
            )),
        }
        match &self.node_script {
            Some(script) if node_runs() => {
                for (label, api) in [(label::NODE, "addon"), (label::FACADE, "h1z1")] {
                    servers.push(node_server(label, api, script));
                }
            }
            Some(_) => missing.push("Node addon and facade: node is not installed".to_owned()),
            None => {
                missing.push("Node addon and facade: the server script was not given".to_owned())
            }
        }
        match &self.bench_server {
            Some(bench) => {
                servers.push(soe_server(label::PEER, bench, &["peer"], Wire::Soe));
                servers.push(soe_server(
                    label::UDP_TOKIO,
                    bench,
                    &["udp-tokio"],
                    Wire::Udp,
                ));
                servers.push(soe_server(label::UDP_STD, bench, &["udp-std"], Wire::Udp));
            }
            None => missing.push(
                "soe-protocol and bare UDP: the bench-server binary was not found".to_owned(),
            ),
        }
        (servers, missing)
    }
}

/// The Node echo server `script` with `api` (addon or h1z1). It runs in the script's folder,
/// so a relative path given by the caller is made absolute against this process's working
/// directory first (else node, started in that folder, would look for it there).
fn node_server(label: &str, api: &str, script: &std::path::Path) -> Server {
    let script = std::path::absolute(script).unwrap_or_else(|_| script.to_path_buf());
    Server {
        label: label.to_owned(),
        program: PathBuf::from("node"),
        args: vec![
            script.display().to_string(),
            "--port".into(),
            "0".into(),
            "--api".into(),
            api.into(),
        ],
        dir: script.parent().map(PathBuf::from),
        wire: Wire::Soe,
        protocol: PROTOCOL.to_owned(),
        skip_idle: false,
    }
}

/// Whether `node` runs here.
fn node_runs() -> bool {
    Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The loads of the section: full, or small for `--quick`.
pub fn loads(quick: bool) -> Vec<Load> {
    let echo = |sessions, rate| Load {
        sessions,
        mix: Mix::Echo { rate, size: 100 },
    };
    let tick = |sessions| Load {
        sessions,
        mix: Mix::Tick,
    };
    let idle = |sessions| Load {
        sessions,
        mix: Mix::Idle,
    };
    if quick {
        vec![echo(50, 20.0), tick(50), idle(50)]
    } else {
        // 500 × 40, 2,000 × 10 and 10,000 × 2 are one total rate (20,000 messages a second)
        // spread over more and more sessions: the per-session cost curve.
        vec![
            echo(500, 20.0),
            echo(500, 40.0),
            echo(2000, 10.0),
            echo(10_000, 2.0),
            tick(500),
            idle(10_000),
        ]
    }
}

/// The loads of the per-session cost curve: 20,000 messages a second over more and more
/// sessions.
pub const CURVE: [(usize, f64); 3] = [(500, 40.0), (2000, 10.0), (10_000, 2.0)];

/// Every server under every load: the rows (with the targets), the section's table, and the
/// per-session cost curve as an SVG chart (`None` without the curve's loads, as in `--quick`).
/// The section links the chart as [`CURVE_CHART`], to be written beside the page.
///
/// With `rounds` > 1 the whole section runs that many times, interleaved (each round measures
/// every server at every load in turn, so a slow spell of a shared machine falls on all of
/// them rather than on one server), and each figure is the median round of that server at that
/// load ([`median_round`]).
pub fn run(
    servers: &Servers,
    quick: bool,
    rounds: usize,
) -> (Vec<crate::Row>, String, Option<String>) {
    let timing = if quick {
        Timing {
            warm_up: Duration::from_millis(300),
            window: Duration::from_millis(700),
        }
    } else {
        Timing {
            warm_up: Duration::from_secs(2),
            window: Duration::from_secs(5),
        }
    };
    let (list, missing) = servers.list();
    let rounds = rounds.max(1);
    let mut all: Vec<Rounds> = Vec::new();
    for round in 1..=rounds {
        for load in loads(quick) {
            // Idle sessions heartbeat once per keep-alive interval: a window of one whole
            // interval sees each of them once, whatever their phases.
            let timing = match load.mix {
                Mix::Idle if !quick => Timing {
                    window: keep_alive_interval().max(timing.window),
                    ..timing
                },
                _ => timing,
            };
            for server in &list {
                if server.skip_idle && matches!(load.mix, Mix::Idle) {
                    continue;
                }
                eprintln!(
                    "soe-bench: fixed load {} (round {round} of {rounds}): {}",
                    load.label(),
                    server.label
                );
                let outcome = measure(server, &load, timing, servers.placement);
                if let Err(e) = &outcome {
                    eprintln!("soe-bench: {}: {e}", server.label);
                }
                match all
                    .iter_mut()
                    .find(|(l, s, _)| *l == load && *s == server.label)
                {
                    Some((_, _, runs)) => runs.push(outcome),
                    None => all.push((load, server.label.clone(), vec![outcome])),
                }
            }
        }
    }
    let results: Vec<Result3> = all
        .into_iter()
        .map(|(load, label, runs)| {
            let outcome = if rounds > 1 {
                median_round(&load, runs)
            } else {
                runs.into_iter()
                    .next()
                    .unwrap_or_else(|| Err("not run".to_owned()))
            };
            (load, label, outcome)
        })
        .collect();
    let mut rows = rows(&results);
    rows.extend(new_rows(&results));
    (
        rows,
        section(&results, &missing, timing, servers.placement, rounds),
        curve_svg(&results),
    )
}

/// The median of one server's rounds at one load: of the sound rounds (every session
/// connected and stayed, nothing lost or wrong, the offered load echoed), the one whose CPU per
/// message is the median (the lower of the middle two for an even count), with the spread of
/// the sound rounds in [`Outcome::spread`]. Without a sound round, the first round as it was
/// (its problems or its error then show in the report).
pub fn median_round(load: &Load, runs: Vec<Result<Outcome, String>>) -> Result<Outcome, String> {
    let mut sound: Vec<Outcome> = runs
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .filter(|o| o.sound(load) && o.window > Duration::ZERO)
        .cloned()
        .collect();
    if sound.is_empty() {
        return runs
            .into_iter()
            .next()
            .unwrap_or_else(|| Err("not run".to_owned()));
    }
    sound.sort_by(|a, b| a.cpu_us_per_message().total_cmp(&b.cpu_us_per_message()));
    let low = sound[0].cpu_us_per_message();
    let high = sound[sound.len() - 1].cpu_us_per_message();
    let n = sound.len();
    let mut median = sound.swap_remove((n - 1) / 2);
    median.spread = Some((low, high, n));
    Ok(median)
}

/// Every round of one server under one load: the load, the server's label, what it did.
type Rounds = (Load, String, Vec<Result<Outcome, String>>);

/// One measurement: the load, the server's label, and what it did.
type Result3 = (Load, String, Result<Outcome, String>);

/// The figure of `label` under `load`, when its run was sound.
fn figure(results: &[Result3], load: &Load, label: &str) -> Option<Outcome> {
    results
        .iter()
        .find(|(l, s, _)| l == load && s == label)
        .and_then(|(_, _, o)| o.as_ref().ok())
        .filter(|o| o.sound(load) && o.messages > 0)
        .cloned()
}

/// The rows: per load, `soe serve` against the peer and against the bare UDP echo (the cheaper
/// of the two), the Node addon against `soe serve`, the facade against the addon. The targets
/// are set at 500 × 20 msg/s, the load the issue measured.
fn rows(results: &[Result3]) -> Vec<crate::Row> {
    use crate::{Better, Row, Target};
    const F: &str = "Fixed load: server CPU per message";
    let mut rows = Vec::new();
    let mut loads: Vec<Load> = Vec::new();
    for (load, _, _) in results {
        if !loads.contains(load) {
            loads.push(*load);
        }
    }
    for load in &loads {
        let name = load.label();
        let at_target = matches!(load.mix, Mix::Echo { rate, .. } if rate == 20.0);
        let per = |label| figure(results, load, label).map(|o| o.cpu_us_per_message());
        let ours = per(label::SOE_SERVE);
        let bare = [per(label::UDP_TOKIO), per(label::UDP_STD)]
            .into_iter()
            .flatten()
            .reduce(f64::min);
        if let Some(ours) = ours {
            let mut row = Row::new(
                F,
                &format!("{name}: {} vs soe-protocol", label::SOE_SERVE),
                ours,
                "µs",
                Better::Lower,
            )
            .vs_peer(per(label::PEER));
            if per(label::PEER).is_none() {
                row = row.with_note("peer: not measured or its run was not sound");
            }
            rows.push(row);
            if let Some(bare) = bare {
                let mut row = Row::new(
                    F,
                    &format!("{name}: {} vs bare UDP echo", label::SOE_SERVE),
                    ours,
                    "µs",
                    Better::Lower,
                )
                .vs_limit(bare)
                .with_note("limit: the cheaper of the bare tokio and std UDP echo servers, same load, same run");
                if at_target {
                    row = row.with_target(Target::RatioAtMost(1.5));
                }
                rows.push(row);
            }
            if at_target {
                rows.push(
                    Row::new(
                        F,
                        &format!("{name}: {} per echo", label::SOE_SERVE),
                        ours,
                        "µs",
                        Better::Lower,
                    )
                    .with_target(Target::AtMost(5.0)),
                );
            }
        }
        // The Node rows' targets: at 500 × 20 (issue 29) and in the game tick (issue 44).
        let node_target = at_target || matches!(load.mix, Mix::Tick);
        if let Some(node) = per(label::NODE) {
            let mut row = Row::new(
                F,
                &format!("{name}: Node addon vs {}", label::SOE_SERVE),
                node,
                "µs",
                Better::Lower,
            )
            .with_note("limit: soe serve --driver async, same load, same run");
            if let Some(ours) = ours {
                row = row.vs_limit(ours);
            }
            if node_target {
                row = row.with_target(Target::RatioAtMost(1.5));
            }
            rows.push(row);
            if let Some(facade) = per(label::FACADE) {
                let mut row = Row::new(
                    F,
                    &format!("{name}: h1z1 facade vs Node addon"),
                    facade,
                    "µs",
                    Better::Lower,
                )
                .vs_limit(node)
                .with_note("limit: the addon's own API, same load, same run");
                if node_target {
                    row = row.with_target(Target::RatioAtMost(1.1));
                }
                rows.push(row);
            }
        }
    }
    rows
}

/// What an outcome of `label` under `load` says, when its run was sound (idle loads echo
/// nothing over SOE, so no message count is asked of them).
fn idle_figure(results: &[Result3], load: &Load, label: &str) -> Option<Outcome> {
    results
        .iter()
        .find(|(l, s, _)| l == load && s == label)
        .and_then(|(_, _, o)| o.as_ref().ok())
        .filter(|o| o.sound(load) && o.window > Duration::ZERO)
        .cloned()
}

/// The rows of issue 38: each driver of `soe serve` beside its bare limit at every echo load
/// (the async one beside the bare tokio echo, the blocking one beside the bare std loop), the
/// flatness of CPU per echo as sessions grow (against 500 × 20 msg/s), and idle sessions
/// beside the bare keep-alive limit.
fn new_rows(results: &[Result3]) -> Vec<crate::Row> {
    use crate::{Better, Row, Target};
    const F: &str = "Fixed load: server CPU per message";
    let mut rows = Vec::new();
    let mut loads: Vec<Load> = Vec::new();
    for (load, _, _) in results {
        if !loads.contains(load) {
            loads.push(*load);
        }
    }
    let base = Load {
        sessions: 500,
        mix: Mix::Echo {
            rate: 20.0,
            size: 100,
        },
    };
    for load in &loads {
        let name = load.label();
        let per = |label| figure(results, load, label).map(|o| o.cpu_us_per_message());
        let pairs = [
            (label::SOE_SERVE, label::UDP_TOKIO, 1.2),
            (label::SOE_BLOCKING, label::UDP_STD, 2.0),
        ];
        if matches!(load.mix, Mix::Idle) {
            let per_second =
                |label| idle_figure(results, load, label).map(|o| o.cpu_us_per_session_second());
            for (ours, _, _) in pairs {
                if let (Some(x), Some(limit)) = (per_second(ours), per_second(label::UDP_STD)) {
                    rows.push(
                        Row::new(
                            "Fixed load: server CPU per idle session-second",
                            &format!("{name}: {ours} vs bare keep-alive"),
                            x,
                            "µs",
                            Better::Lower,
                        )
                        .vs_limit(limit)
                        .with_target(Target::RatioAtMost(2.0))
                        .with_note("limit: the bare std loop echoing one datagram per session per keep-alive interval, same run"),
                    );
                }
            }
            continue;
        }
        for (ours, bare, target) in pairs {
            if let (Some(x), Some(limit)) = (per(ours), per(bare)) {
                rows.push(
                    Row::new(
                        F,
                        &format!("{name}: {ours} vs {bare}"),
                        x,
                        "µs",
                        Better::Lower,
                    )
                    .vs_limit(limit)
                    .with_target(Target::RatioAtMost(target))
                    .with_note("limit: same load, same run"),
                );
            }
        }
        rows.extend(coalesced_rows(results, load));
        let flat_load = matches!(load.mix, Mix::Echo { .. }) && load.sessions > base.sessions;
        for ours in [label::SOE_SERVE, label::SOE_BLOCKING] {
            let at_base = figure(results, &base, ours).map(|o| o.cpu_us_per_message());
            if let (true, Some(x), Some(limit)) = (flat_load, per(ours), at_base) {
                rows.push(
                    Row::new(
                        F,
                        &format!("{name}: {ours}, flatness vs 500 × 20 msg/s"),
                        x,
                        "µs",
                        Better::Lower,
                    )
                    .vs_limit(limit)
                    .with_target(Target::RatioAtMost(1.2))
                    .with_note("limit: the same server at 500 × 20 msg/s, same run"),
                );
            }
        }
    }
    rows
}

/// The rows of the coalescing servers at `load`: each driver with its receive-coalescing
/// window beside its bare limit, with the same target as without the window, and the price
/// beside (the round trip with the window and without it).
fn coalesced_rows(results: &[Result3], load: &Load) -> Vec<crate::Row> {
    use crate::{Better, Row, Target};
    const F: &str = "Fixed load: server CPU per message";
    let name = load.label();
    let per = |label| figure(results, load, label).map(|o| o.cpu_us_per_message());
    let mut rows = Vec::new();
    // The same targets with a receive-coalescing window, its price beside: the round trip
    // with the window and without it.
    let coalesced = [
        (
            label::SOE_SERVE_COALESCED,
            label::SOE_SERVE,
            label::UDP_TOKIO,
            1.2,
        ),
        (
            label::SOE_BLOCKING_COALESCED,
            label::SOE_BLOCKING,
            label::UDP_STD,
            2.0,
        ),
    ];
    for (ours, plain, bare, target) in coalesced {
        let (Some(o), Some(limit)) = (figure(results, load, ours), per(bare)) else {
            continue;
        };
        let rtt = |o: &Outcome| {
            format!(
                "{} / {} ms",
                crate::report::fmt_num(o.p50_us / 1000.0),
                crate::report::fmt_num(o.p99_us / 1000.0)
            )
        };
        let without =
            figure(results, load, plain).map_or_else(|| "not measured".to_owned(), |p| rtt(&p));
        rows.push(
            Row::new(
                F,
                &format!("{name}: {ours} vs {bare}"),
                o.cpu_us_per_message(),
                "µs",
                Better::Lower,
            )
            .vs_limit(limit)
            .with_target(Target::RatioAtMost(target))
            .with_note(format!(
                "limit: same load, same run; the price: round trip p50 / p99 {} with the window, {without} without",
                rtt(&o)
            )),
        );
    }
    rows
}

/// One server's line of the curve: its label, its colour, and (sessions, µs per echo) points.
type CurveLine<'a> = (&'a str, &'a str, Vec<(usize, f64)>);

/// The file name of the per-session cost curve, written beside the report page.
pub const CURVE_CHART: &str = "performance-fixed.svg";

/// The per-session cost curve: CPU per echo of each server at [`CURVE`]'s loads (one total
/// rate over more and more sessions), one line per server, as a standalone SVG document;
/// `None` when no server has a sound figure at two of those loads.
fn curve_svg(results: &[Result3]) -> Option<String> {
    use svg::Document;
    use svg::node::element::{Line, Polyline, Rectangle, Text};
    let servers = [
        (label::SOE_SERVE, "#3b6fb6"),
        (label::SOE_BLOCKING, "#2a9d5c"),
        (label::UDP_TOKIO, "#e08a2c"),
        (label::UDP_STD, "#b03030"),
        (label::NODE, "#7a4fb0"),
    ];
    let load = |(sessions, rate): (usize, f64)| Load {
        sessions,
        mix: Mix::Echo { rate, size: 100 },
    };
    let lines: Vec<CurveLine<'_>> = servers
        .iter()
        .map(|&(label, colour)| {
            let points = CURVE
                .iter()
                .filter_map(|&c| {
                    let o = figure(results, &load(c), label)?;
                    Some((c.0, o.cpu_us_per_message()))
                })
                .collect::<Vec<_>>();
            (label, colour, points)
        })
        .filter(|(_, _, p)| p.len() >= 2)
        .collect();
    if lines.is_empty() {
        return None;
    }
    let top = lines
        .iter()
        .flat_map(|(_, _, p)| p.iter().map(|&(_, y)| y))
        .fold(1.0f64, f64::max)
        * 1.15;
    let (left, width, plot_h, head) = (60.0, 420.0, 220.0, 40.0);
    let x_of = |i: usize| left + 40.0 + i as f64 * (width - 80.0) / (CURVE.len() - 1) as f64;
    let y_of = |v: f64| head + plot_h - v / top * plot_h;
    let mut doc = Document::new()
        .set("width", left + width + 230.0)
        .set("height", head + plot_h + 50.0)
        .set("font-family", "sans-serif")
        .set("font-size", 12)
        .add(
            Rectangle::new()
                .set("width", "100%")
                .set("height", "100%")
                .set("fill", "white"),
        )
        .add(
            Text::new("Server CPU per echo (µs) at 20,000 messages a second, by sessions")
                .set("x", 10)
                .set("y", 20)
                .set("font-size", 14),
        );
    for step in 0..=4 {
        let v = top * f64::from(step) / 4.0;
        doc = doc
            .add(
                Line::new()
                    .set("x1", left)
                    .set("x2", left + width)
                    .set("y1", y_of(v))
                    .set("y2", y_of(v))
                    .set("stroke", "#ddd"),
            )
            .add(
                Text::new(crate::report::fmt_num(v))
                    .set("x", left - 6.0)
                    .set("y", y_of(v) + 4.0)
                    .set("text-anchor", "end"),
            );
    }
    for (i, (sessions, rate)) in CURVE.iter().enumerate() {
        doc = doc.add(
            Text::new(format!("{sessions} × {rate}"))
                .set("x", x_of(i))
                .set("y", head + plot_h + 20.0)
                .set("text-anchor", "middle"),
        );
    }
    for (n, (label, colour, points)) in lines.iter().enumerate() {
        let coords: Vec<String> = points
            .iter()
            .filter_map(|&(sessions, y)| {
                let i = CURVE.iter().position(|c| c.0 == sessions)?;
                Some(format!("{:.1},{:.1}", x_of(i), y_of(y)))
            })
            .collect();
        let legend_y = head + 14.0 + 18.0 * n as f64;
        doc = doc
            .add(
                Polyline::new()
                    .set("points", coords.join(" "))
                    .set("fill", "none")
                    .set("stroke", *colour)
                    .set("stroke-width", 2),
            )
            .add(
                Line::new()
                    .set("x1", left + width + 10.0)
                    .set("x2", left + width + 30.0)
                    .set("y1", legend_y - 4.0)
                    .set("y2", legend_y - 4.0)
                    .set("stroke", *colour)
                    .set("stroke-width", 2),
            )
            .add(
                Text::new(*label)
                    .set("x", left + width + 36.0)
                    .set("y", legend_y),
            );
    }
    let mut out = doc.to_string();
    out.push('\n');
    Some(out)
}

/// The section: one table of every server under every load.
fn section(
    results: &[Result3],
    missing: &[String],
    timing: Timing,
    placement: Placement,
    rounds: usize,
) -> String {
    use std::fmt::Write as _;
    let fmt = crate::report::fmt_num;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## Fixed load: what a server spends per player\n\n\
         Each server runs in a process of its own; one load generator (this process, one thread: one readiness poll over every client socket and one sans-I/O soe-session endpoint holding every client session, its deadlines served in one pass) opens every session from its own UDP port and sends on a fixed schedule \
         whatever the server does, phases spread evenly, every echo checked byte for byte. \
         {placement} The server's CPU time (every thread, user and system, from `/proc/PID/task/*/schedstat`) is \
         read over a {} window after {} of warm-up; it is divided by the messages echoed in the \
         window (CPU per message) and by sessions × seconds (CPU per player-second). The bare UDP \
         servers do one `recv` and one `send` per datagram: the limit. The datagrams column is \
         counted at the clients' sockets: what the server received and sent per echoed message \
         (a bare echo moves one each way; an SOE echo also receives the client's ack of the \
         reply when the client has nothing to send with it). In the game-tick mix the \
         server sends each message back the way it came, so each client also receives 10 \
         unreliable updates and one reliable event a second. `soe serve` runs with each of its \
         drivers: async (a tokio task beside the server's task, on one thread) and blocking (the \
         server's own thread blocked in `poll`, receiving with `recvmmsg` and sending once per \
         wake-up), and each again with `--coalesce-ms {COALESCE_MS}`: after a wake-up that read \
         datagrams the driver leaves its socket unread for {COALESCE_MS} ms, so that what arrives \
         meanwhile is read in one wake-up (fewer wake-ups, for up to that much more round trip; \
         not run idle). In the idle rows the sessions send nothing but their default heartbeat \
         (once per {} of silence, answered by the server), measured over one whole interval; \
         the bare limit then echoes one datagram per session per interval.\n",
        fmt_duration(timing.window),
        fmt_duration(timing.warm_up),
        fmt_duration(keep_alive_interval()),
        placement = match (placement, cpus(placement)) {
            (_, None) => "Server and generator run where the scheduler puts them (`--placement \
                          free`, fewer than two CPUs, or not Linux)."
                .to_owned(),
            (Placement::Shared, Some((cpu, _))) => format!(
                "Server and generator share CPU {cpu} (`--placement shared`): no wake-up crosses \
                 CPUs, so user-space work weighs most."
            ),
            (_, Some((server, generator))) => format!(
                "The generator runs on CPU {generator} and the server on CPU {server} \
                 (`--placement apart`, the default): a server does not share its CPU with its \
                 players, and left to the scheduler the two share one in some runs and not in \
                 others, which on a VM changes a server's CPU per message several times over (a \
                 wake-up from another CPU is charged to the woken process as system time)."
            ),
        },
    );
    if rounds > 1 {
        let _ = writeln!(
            out,
            "Every figure below is the median of {rounds} rounds (`--fixed-rounds {rounds}`). The \
             rounds are interleaved: each measures every server at every load in turn, so that a \
             slow spell of the machine falls on all of them and not on one. For each server and \
             load the report takes the round whose CPU per message is the median of its sound \
             rounds (the lower middle one for an even count), and shows that round's figures; \
             the CPU per message column adds the lowest and highest sound round and their \
             number. A ratio is one median over another.\n"
        );
    }
    if curve_svg(results).is_some() {
        let _ = writeln!(
            out,
            "The per-session cost curve (500 × 40, 2,000 × 10 and 10,000 × 2 msg/s: one total rate \
             over more and more sessions):\n\n![server CPU per echo by sessions]({CURVE_CHART})\n"
        );
    }
    for word in missing {
        let _ = writeln!(out, "- not measured: {word}");
    }
    if !missing.is_empty() {
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "| load | server | echoes/s | CPU per message | CPU per player-second | share of a core | server datagrams per message (in + out) | p50 / p99 round trip | lost (unreliable) | generator's share of a core | problems |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    for (load, label, outcome) in results {
        match outcome {
            Ok(o) => {
                let spread = match o.spread {
                    Some((low, high, n)) => format!(" ({}–{}, {n} rounds)", fmt(low), fmt(high)),
                    None => String::new(),
                };
                let _ = writeln!(
                    out,
                    "| {} | {label} | {} | {} µs{spread} | {} µs | {} % | {:.2} + {:.2} | {} / {} ms | {} | {} % | {} |",
                    load.label(),
                    fmt(o.messages as f64 / o.window.as_secs_f64().max(1e-9)),
                    fmt(o.cpu_us_per_message()),
                    fmt(o.cpu_us_per_session_second()),
                    fmt(o.core_percent()),
                    o.datagrams_per_message().0,
                    o.datagrams_per_message().1,
                    fmt(o.p50_us / 1000.0),
                    fmt(o.p99_us / 1000.0),
                    o.unreliable_lost,
                    fmt(o.generator_cpu.as_secs_f64() / o.window.as_secs_f64().max(1e-9) * 100.0),
                    o.problems(load),
                );
            }
            Err(e) => {
                let _ = writeln!(
                    out,
                    "| {} | {label} | – | – | – | – | – | – | – | – | {e} |",
                    load.label()
                );
            }
        }
    }
    out
}

/// `2 s`, `300 ms`.
fn fmt_duration(d: Duration) -> String {
    if d.as_millis().is_multiple_of(1000) {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listening_lines_of_every_server_are_read() {
        assert_eq!(
            listening_address(
                "soe serve: listening on 127.0.0.1:4321 (protocol \"SoeEcho\", Echo mode, CRC 2 bytes)"
            ),
            Some("127.0.0.1:4321".parse().unwrap())
        );
        assert_eq!(
            listening_address("listening 127.0.0.1:99"),
            Some("127.0.0.1:99".parse().unwrap())
        );
        assert_eq!(
            listening_address("listening 5555"),
            Some("127.0.0.1:5555".parse().unwrap())
        );
        assert_eq!(listening_address("open #1 127.0.0.1:5"), None);
    }

    #[test]
    fn a_relative_node_script_is_found_from_the_callers_folder() {
        let server = node_server(
            label::NODE,
            "addon",
            std::path::Path::new("crates/soe-node/bench/echo-server.mjs"),
        );
        let script = PathBuf::from(&server.args[0]);
        assert!(script.is_absolute(), "{}", script.display());
        assert_eq!(
            script,
            std::env::current_dir()
                .unwrap()
                .join("crates/soe-node/bench/echo-server.mjs")
        );
        assert_eq!(server.dir.as_deref(), script.parent());
    }

    #[cfg(unix)]
    #[test]
    fn a_server_that_does_not_start_says_how_it_ended_and_what_it_wrote() {
        let server = Server {
            label: "broken".into(),
            program: PathBuf::from("sh"),
            args: vec![
                "-c".into(),
                "echo 'cannot find module x' >&2; echo 'one more line' >&2; exit 3".into(),
            ],
            dir: None,
            wire: Wire::Soe,
            protocol: PROTOCOL.to_owned(),
            skip_idle: false,
        };
        let e = Process::start(&server).unwrap_err();
        assert!(e.contains("broken"), "{e}");
        assert!(e.contains("exit status: 3"), "{e}");
        assert!(e.contains("cannot find module x / one more line"), "{e}");
        // And a program that is not there at all.
        let missing = Server {
            program: PathBuf::from("/nonexistent/server"),
            ..server
        };
        let e = Process::start(&missing).unwrap_err();
        assert!(e.contains("cannot start /nonexistent/server"), "{e}");
    }

    #[test]
    fn offered_load_counts_every_stream() {
        let tick = Load {
            sessions: 500,
            mix: Mix::Tick,
        };
        assert!((tick.offered_per_sec() - 5500.0).abs() < 1e-6);
        let echo = Load {
            sessions: 2000,
            mix: Mix::Echo {
                rate: 10.0,
                size: 100,
            },
        };
        assert!((echo.offered_per_sec() - 20_000.0).abs() < 1e-6);
    }

    #[test]
    fn a_bare_echo_moves_one_datagram_each_way_per_message() {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = socket.local_addr().unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let echo = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 2048];
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    if let Ok((n, from)) = socket.recv_from(&mut buf) {
                        let _ = socket.send_to(&buf[..n], from);
                    }
                }
            })
        };
        let target = Target {
            addr,
            pid: None,
            wire: Wire::Udp,
            protocol: String::new(),
            label: "bare".into(),
        };
        let load = Load {
            sessions: 8,
            mix: Mix::Echo {
                rate: 100.0,
                size: 100,
            },
        };
        let timing = Timing {
            warm_up: Duration::from_millis(100),
            window: Duration::from_millis(500),
        };
        let outcome = measure_at(&target, &load, timing).unwrap();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        echo.join().unwrap();
        assert!(outcome.messages > 100, "{} echoes", outcome.messages);
        let (received, sent) = outcome.datagrams_per_message();
        // Sends and receipts straddling the window's edges blur the ratio a little.
        assert!((0.9..1.1).contains(&received), "{received} in per message");
        assert!((0.9..1.1).contains(&sent), "{sent} out per message");
    }

    #[test]
    fn idle_sessions_send_nothing_over_soe_and_one_keep_alive_over_udp() {
        let idle = Load {
            sessions: 10_000,
            mix: Mix::Idle,
        };
        assert!(idle.streams_on(Wire::Soe).is_empty());
        assert_eq!(
            idle.streams_on(Wire::Udp),
            vec![(keep_alive_interval(), 17, false)]
        );
        assert_eq!(idle.offered_per_sec(), 0.0);
        assert!(idle.label().contains("idle"));
    }

    /// A sound outcome of `load` costing `us` per message (and per idle session-second).
    fn sound(load: &Load, us: f64) -> Outcome {
        let window = Duration::from_secs(10);
        let messages = (load.offered_per_sec() * 10.0) as u64;
        Outcome {
            connected: load.sessions,
            messages,
            window,
            cpu: Duration::from_secs_f64(us * 1e-6 * messages.max(1) as f64),
            ..Outcome::default()
        }
    }

    #[test]
    fn each_driver_is_set_beside_its_limit_flatness_and_idle_are_rows_and_the_curve_is_drawn() {
        let echo = |sessions, rate| Load {
            sessions,
            mix: Mix::Echo { rate, size: 100 },
        };
        let mut loads = vec![echo(500, 20.0)];
        loads.extend(CURVE.iter().map(|&(n, r)| echo(n, r)));
        let idle = Load {
            sessions: 10_000,
            mix: Mix::Idle,
        };
        loads.push(idle);
        let mut results = Vec::new();
        for load in &loads {
            for (label, us) in [
                (label::SOE_SERVE, 14.0),
                (label::SOE_BLOCKING, 9.0),
                (label::UDP_TOKIO, 11.0),
                (label::UDP_STD, 5.0),
            ] {
                results.push((*load, label.to_owned(), Ok(sound(load, us))));
            }
        }
        let rows = new_rows(&results);
        let find = |name: &str| {
            rows.iter()
                .find(|r| r.name.contains(name))
                .unwrap_or_else(|| {
                    panic!(
                        "no row {name:?} in {:?}",
                        rows.iter().map(|r| &r.name).collect::<Vec<_>>()
                    )
                })
        };
        let blocking =
            find("2000 × 10 msg/s, 100 B: soe serve --driver blocking vs bare UDP echo (std loop)");
        assert!((blocking.ratio().unwrap() - 1.8).abs() < 1e-9);
        assert_eq!(blocking.met(), Some(true));
        let tokio =
            find("500 × 20 msg/s, 100 B: soe serve --driver async vs bare UDP echo (tokio)");
        assert_eq!(tokio.met(), Some(false));
        let flat =
            find("10000 × 2 msg/s, 100 B: soe serve --driver async, flatness vs 500 × 20 msg/s");
        assert!((flat.ratio().unwrap() - 1.0).abs() < 1e-9);
        assert!(
            find("10000 × idle (keep-alive only): soe serve --driver async vs bare keep-alive")
                .ratio()
                .is_some()
        );
        // No flatness row for the base load itself, nor for the game tick.
        assert!(
            !rows
                .iter()
                .any(|r| r.name.starts_with("500 × 20") && r.name.contains("flatness"))
        );
        let chart = curve_svg(&results).expect("a curve");
        assert!(
            chart.starts_with("<svg") && chart.matches("<polyline").count() == 4,
            "{chart}"
        );
        // Without the curve's loads (as in --quick), no chart.
        assert!(curve_svg(&results[..4]).is_none());
    }

    #[test]
    fn a_coalescing_driver_is_set_beside_its_limit_with_its_round_trip_and_never_run_idle() {
        let load = Load {
            sessions: 500,
            mix: Mix::Echo {
                rate: 20.0,
                size: 100,
            },
        };
        let with_rtt = |us, p50, p99| Outcome {
            p50_us: p50,
            p99_us: p99,
            ..sound(&load, us)
        };
        let results = vec![
            (
                load,
                label::SOE_SERVE.to_owned(),
                Ok(with_rtt(22.0, 180.0, 400.0)),
            ),
            (
                load,
                label::SOE_SERVE_COALESCED.to_owned(),
                Ok(with_rtt(17.0, 1500.0, 3100.0)),
            ),
            (
                load,
                label::SOE_BLOCKING_COALESCED.to_owned(),
                Ok(with_rtt(14.0, 1150.0, 1450.0)),
            ),
            (load, label::UDP_TOKIO.to_owned(), Ok(sound(&load, 10.0))),
            (load, label::UDP_STD.to_owned(), Ok(sound(&load, 8.0))),
        ];
        let rows = new_rows(&results);
        let row = |name: &str| rows.iter().find(|r| r.name.ends_with(name));
        let blocking =
            row("soe serve --driver blocking --coalesce-ms 1 vs bare UDP echo (std loop)")
                .expect("the blocking row");
        assert!((blocking.ratio().unwrap() - 1.75).abs() < 1e-9);
        assert_eq!(blocking.met(), Some(true));
        // Its plain driver was not measured: the note says so.
        assert!(
            blocking
                .note
                .contains("1.15 / 1.45 ms with the window, not measured without"),
            "{}",
            blocking.note
        );
        let not_met = row("soe serve --driver async --coalesce-ms 1 vs bare UDP echo (tokio)")
            .expect("the async row");
        assert_eq!(not_met.met(), Some(false));
        assert!(
            not_met
                .note
                .contains("1.50 / 3.10 ms with the window, 0.180 / 0.400 ms without"),
            "{}",
            not_met.note
        );
        // The coalescing servers run every load but the idle one.
        let servers = Servers {
            soe: Some(PathBuf::from("soe")),
            ..Servers::default()
        };
        let (list, _) = servers.list();
        let skipped: Vec<_> = list
            .iter()
            .filter(|s| s.skip_idle)
            .map(|s| &s.label)
            .collect();
        assert_eq!(
            skipped,
            [label::SOE_SERVE_COALESCED, label::SOE_BLOCKING_COALESCED]
        );
        let coalescing = list
            .iter()
            .find(|s| s.label == label::SOE_BLOCKING_COALESCED)
            .unwrap();
        assert!(coalescing.args.ends_with(&[
            "blocking".into(),
            "--coalesce-ms".into(),
            "1".into()
        ]));
    }

    #[test]
    fn the_node_rows_have_their_targets_at_500_x_20_and_in_the_game_tick_only() {
        let loads = [
            Load {
                sessions: 500,
                mix: Mix::Echo {
                    rate: 20.0,
                    size: 100,
                },
            },
            Load {
                sessions: 2000,
                mix: Mix::Echo {
                    rate: 10.0,
                    size: 100,
                },
            },
            Load {
                sessions: 500,
                mix: Mix::Tick,
            },
        ];
        let mut results = Vec::new();
        for load in &loads {
            for (label, us) in [
                (label::SOE_SERVE, 10.0),
                (label::NODE, 16.0),
                (label::FACADE, 17.0),
            ] {
                results.push((*load, label.to_owned(), Ok(sound(load, us))));
            }
        }
        let rows = rows(&results);
        let met = |name: &str| {
            rows.iter()
                .find(|r| r.name.starts_with(name))
                .unwrap_or_else(|| panic!("no row {name:?}"))
                .met()
        };
        // 1.6x the server: over the addon's 1.5x; the facade 1.06x the addon: within 1.1x.
        assert_eq!(met("500 × 20 msg/s, 100 B: Node addon vs"), Some(false));
        assert_eq!(
            met("500 × game tick (10 Hz 40 B unreliable + 1 Hz 200 B reliable): Node addon vs"),
            Some(false)
        );
        assert_eq!(
            met("500 × game tick (10 Hz 40 B unreliable + 1 Hz 200 B reliable): h1z1 facade"),
            Some(true)
        );
        assert_eq!(met("2000 × 10 msg/s, 100 B: Node addon vs"), None);
        assert_eq!(met("2000 × 10 msg/s, 100 B: h1z1 facade"), None);
    }

    #[test]
    fn several_rounds_give_the_median_sound_round_and_the_spread() {
        let load = Load {
            sessions: 500,
            mix: Mix::Tick,
        };
        let mut lost = sound(&load, 1.0);
        lost.reliable_lost = 3;
        let runs = vec![
            Ok(sound(&load, 30.0)),
            Err("did not start".to_owned()),
            Ok(lost),
            Ok(sound(&load, 10.0)),
            Ok(sound(&load, 20.0)),
            Ok(sound(&load, 25.0)),
        ];
        // Sound: 30, 10, 20, 25; the lower middle one is 20 (the unsound 1.0 is left out).
        let median = median_round(&load, runs).unwrap();
        assert!((median.cpu_us_per_message() - 20.0).abs() < 1e-6);
        let (low, high, n) = median.spread.unwrap();
        assert!((low - 10.0).abs() < 1e-6 && (high - 30.0).abs() < 1e-6);
        assert_eq!(n, 4);
        // An odd count: the middle one.
        let runs = vec![
            Ok(sound(&load, 7.0)),
            Ok(sound(&load, 3.0)),
            Ok(sound(&load, 5.0)),
        ];
        assert!((median_round(&load, runs).unwrap().cpu_us_per_message() - 5.0).abs() < 1e-6);
        // No sound round: the first, as it was.
        let mut short = sound(&load, 4.0);
        short.connected = 10;
        let first = median_round(&load, vec![Err("x".to_owned()), Ok(short)]);
        assert_eq!(first.unwrap_err(), "x");
        let kept = median_round(
            &load,
            vec![Ok(sound(&load, 4.0)).map(|mut o: Outcome| {
                o.failed = 2;
                o
            })],
        )
        .unwrap();
        assert_eq!(kept.failed, 2);
        assert!(kept.spread.is_none());
        // The section says how the figures were made and shows the spread.
        let results = vec![(load, label::SOE_SERVE.to_owned(), Ok(median))];
        let text = section(
            &results,
            &[],
            Timing {
                warm_up: Duration::from_secs(2),
                window: Duration::from_secs(5),
            },
            Placement::Free,
            6,
        );
        assert!(text.contains("median of 6 rounds"), "{text}");
        assert!(text.contains("20.0 µs (10.0–30.0, 4 rounds)"), "{text}");
    }

    #[test]
    fn a_server_that_echoes_too_little_is_a_problem() {
        let load = Load {
            sessions: 500,
            mix: Mix::Tick,
        };
        let mut outcome = Outcome {
            connected: 500,
            messages: 5500 * 5,
            window: Duration::from_secs(5),
            cpu: Duration::from_millis(100),
            p50_us: 100.0,
            p99_us: 200.0,
            reliable_lost: 0,
            unreliable_lost: 30,
            bad: 0,
            failed: 0,
            generator_cpu: Duration::from_millis(100),
            server_received: 5500 * 5,
            server_sent: 5500 * 5,
            client_view: String::new(),
            spread: None,
        };
        assert_eq!(outcome.problems(&load), "");
        assert!(outcome.sound(&load));
        // Only the reliable events echoed: the unreliable updates were dropped.
        outcome.messages = 500 * 5;
        assert!(
            outcome.problems(&load).contains("2500 of about 27500"),
            "{}",
            outcome.problems(&load)
        );
        assert!(!outcome.sound(&load));
    }

    #[test]
    fn this_process_cpu_time_is_read() {
        let pid = std::process::id();
        let before = process_cpu(pid);
        // Work until the kernel's account of this process moves (it may lag a scheduler tick).
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while process_cpu(pid) <= before && start.elapsed() < Duration::from_secs(20) {
            for i in 0..100_000u64 {
                x = std::hint::black_box(x.wrapping_add(i));
            }
        }
        assert!(
            process_cpu(pid) > before,
            "no CPU time read for this process"
        );
    }
}
