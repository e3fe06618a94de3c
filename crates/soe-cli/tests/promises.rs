//! What the READMEs promise of the `soe` tool, checked end to end: the flags each command
//! takes (this crate's README lists them all, flag for flag with `--help`, and its transcripts
//! use only those; the workspace README names every command), one-line errors with exit 1,
//! load's summary on Ctrl-C, sizes and lengths refused before anything is sent, exact ping
//! figures, a closed or vanished server told from a silent one and from an overloaded one,
//! host names, and the metrics endpoint.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::thread;
use std::time::{Duration, Instant};

use common::*;

/// The flags of a session (`serve`, `ping`, `load`).
const SESSION_FLAGS: [&str; 5] = [
    "--protocol",
    "--rc4-key",
    "--rc4-after-first-message",
    "--udp-length",
    "--connect-timeout",
];
/// What a server announces (`serve` only; clients adopt the server's).
const SERVER_FLAGS: [&str; 2] = ["--crc-length", "--compress"];
/// The flags `decode` and `proxy` share: how to read a session the dissector did not see open,
/// its keys, and the Wireshark export.
const DISSECT_FLAGS: [&str; 6] = [
    "--crc-seed",
    "--crc-length",
    "--compress",
    "--rc4-key",
    "--rc4-after-first-message",
    "--export",
];

/// The long flags a text names: `--word` tokens, without what follows an `=`.
fn flags_in(text: &str) -> BTreeSet<String> {
    let mut flags = BTreeSet::new();
    for (i, _) in text.match_indices("--") {
        let before = text[..i].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '-') {
            continue;
        }
        let name: String = text[i + 2..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        if name.chars().next().is_some_and(|c| c.is_ascii_lowercase()) {
            flags.insert(format!("--{name}"));
        }
    }
    flags
}

fn help(command: &str) -> BTreeSet<String> {
    let out = soe(&[command, "--help"]);
    assert!(out.status.success(), "soe {command} --help failed");
    flags_in(&text(&out.stdout))
}

#[test]
fn every_command_takes_the_flags_the_readme_gives_it() {
    for command in ["serve", "ping", "load"] {
        let flags = help(command);
        for flag in SESSION_FLAGS {
            assert!(
                flags.contains(flag),
                "soe {command} lacks {flag}: {flags:?}"
            );
        }
        assert!(!flags.contains("--key"), "soe {command} still takes --key");
        for flag in SERVER_FLAGS {
            assert_eq!(
                flags.contains(flag),
                command == "serve",
                "soe {command} and {flag}: {flags:?}"
            );
        }
    }
    for command in ["decode", "proxy"] {
        let flags = help(command);
        for flag in DISSECT_FLAGS {
            assert!(
                flags.contains(flag),
                "soe {command} lacks {flag}: {flags:?}"
            );
        }
        assert!(!flags.contains("--key"), "soe {command} still takes --key");
    }

    // Every flag of every command line in the READMEs is one the command takes.
    let readmes = [
        include_str!("../../../README.md"),
        include_str!("../README.md"),
    ];
    let mut checked = 0;
    for readme in readmes {
        let mut logical = String::new();
        for line in readme.lines() {
            // Transcript lines (`$ soe ...`, continued with `\`) and table rows (`| `soe ...`).
            let line = line.trim();
            let continued = !logical.is_empty();
            if !continued && !line.starts_with("$ soe ") && !line.starts_with("| `soe ") {
                continue;
            }
            logical.push_str(line.trim_end_matches('\\'));
            logical.push(' ');
            if line.ends_with('\\') {
                continue;
            }
            let command_line = std::mem::take(&mut logical);
            let command = command_line
                .split_whitespace()
                .map(|w| w.trim_matches('`'))
                .find(|w| ["serve", "ping", "load", "decode", "proxy"].contains(w))
                .unwrap_or_else(|| panic!("no command in {command_line:?}"));
            let takes = help(command);
            for flag in flags_in(&command_line) {
                assert!(
                    takes.contains(&flag) || flag == "--help",
                    "a README gives soe {command} {flag}, which it does not take: \
                     {command_line}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 30, "only {checked} flags found in the READMEs");
}

/// The options `soe COMMAND --help` defines (its option lines, not the flags its descriptions
/// mention).
fn options(command: &str) -> BTreeSet<String> {
    let out = soe(&[command, "--help"]);
    assert!(out.status.success(), "soe {command} --help failed");
    text(&out.stdout)
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with('-'))
        .flat_map(|l| flags_in(l.split("  ").next().unwrap_or_default()))
        .collect()
}

/// The commands `soe --help` lists (but `help`).
fn commands() -> BTreeSet<String> {
    let out = soe(&["--help"]);
    assert!(out.status.success(), "soe --help failed");
    text(&out.stdout)
        .split("Commands:")
        .nth(1)
        .and_then(|s| s.split("\n\n").next())
        .expect("a Commands section in soe --help")
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(String::from)
        .collect()
}

/// The Flags table of this crate's README names every command, and every flag of every command,
/// flag for flag with its `--help` (the global `--log` is said once, below the table); the
/// workspace README names every command and sends the reader here.
#[test]
fn the_readme_flags_table_is_each_commands_help() {
    let readme = include_str!("../README.md");
    let section = readme
        .split("\n## Flags\n")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("a Flags section in crates/soe-cli/README.md");
    assert!(section.contains("`--log FILTER`"));
    let rows: Vec<&str> = section
        .lines()
        .filter(|l| l.starts_with("| `soe "))
        .collect();
    let commands = commands();
    assert_eq!(
        commands,
        ["decode", "load", "ping", "proxy", "serve"]
            .map(String::from)
            .into(),
        "soe --help lists other commands: add or remove their rows and tests"
    );
    assert_eq!(rows.len(), commands.len(), "one row per command: {rows:?}");
    let workspace = include_str!("../../../README.md");
    assert!(workspace.contains("(crates/soe-cli/README.md)"));
    for command in &commands {
        assert!(
            workspace.contains(&format!("`soe {command}")),
            "the workspace README does not name soe {command}"
        );
        let row = rows
            .iter()
            .find(|l| l.starts_with(&format!("| `soe {command}")))
            .unwrap_or_else(|| panic!("no Flags row for soe {command}"));
        let mut takes = options(command);
        for global in ["--help", "--version", "--log"] {
            takes.remove(global);
        }
        assert_eq!(
            flags_in(row),
            takes,
            "soe {command}: the Flags row of crates/soe-cli/README.md vs --help"
        );
    }
}

#[test]
fn bad_arguments_get_one_line_and_exit_1() {
    let cases: [&[&str]; 6] = [
        &["ping", "--bogus"],
        &["ping"],
        &[
            "load",
            "127.0.0.1:9",
            "--sessions",
            "zero",
            "--messages",
            "1",
        ],
        &["decode", "--crc-length", "7", "0006"],
        &["serve", "--udp-length", "0"],
        &["frobnicate"],
    ];
    for args in cases {
        let out = soe(args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "soe {args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "soe {args:?}: {stderr}");
        assert!(stderr.starts_with("soe: error: "), "soe {args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "soe {args:?} printed to stdout");
    }
    // Help and version are no errors.
    for args in [&["--help"][..], &["--version"], &["ping", "--help"]] {
        let out = soe(args);
        assert_eq!(out.status.code(), Some(0), "soe {args:?}");
        assert!(!out.stdout.is_empty());
    }
}

#[test]
fn lengths_and_sizes_out_of_range_are_refused_before_connecting() {
    for length in ["0", "1", "63", "65508", "100000"] {
        for command in [
            &["serve"][..],
            &["ping", "127.0.0.1:9"],
            &["load", "127.0.0.1:9"],
        ] {
            let mut args = command.to_vec();
            args.extend(["--udp-length", length]);
            let out = soe(&args);
            let stderr = text(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
            assert!(stderr.contains("out of range"), "{args:?}: {stderr}");
            assert!(stderr.contains("64 to 65507"), "{args:?}: {stderr}");
        }
    }
    // A message larger than a session may send is refused at once: no connection is tried
    // (127.0.0.1:9 would otherwise be reported as closed).
    for args in [
        &["ping", "127.0.0.1:9", "--size", "5000000"][..],
        &[
            "load",
            "127.0.0.1:9",
            "--messages",
            "1",
            "--size",
            "5000000",
        ],
        &[
            "load",
            "127.0.0.1:9",
            "--messages",
            "1",
            "--size",
            "1-5000000",
        ],
    ] {
        let out = soe(args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains("over the largest message a session sends"),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("listens"), "{args:?}: {stderr}");
    }
}

/// The milliseconds of a `time=12.345 ms` line.
fn time_of(line: &str) -> Option<f64> {
    line.split_once("time=")?
        .1
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[test]
fn ping_figures_are_the_round_trips_it_printed_and_host_names_work() {
    let server = serve(&[]);
    let addr = format!("localhost:{}", server.addr.port());
    let out = soe_ok(&[
        "ping",
        &addr,
        "-c",
        "6",
        "--interval",
        "10",
        "--size",
        "700",
    ]);
    let stdout = text(&out.stdout);
    let times: Vec<f64> = stdout.lines().filter_map(time_of).collect();
    assert_eq!(times.len(), 6, "{stdout}");
    let figures: Vec<f64> = stdout
        .lines()
        .find_map(|l| l.strip_prefix("rtt min/avg/max/p99 = "))
        .unwrap_or_else(|| panic!("no rtt line: {stdout}"))
        .trim_end_matches(" ms")
        .split('/')
        .map(|f| f.parse().unwrap())
        .collect();
    let (min, avg, max, p99) = (figures[0], figures[1], figures[2], figures[3]);
    let lowest = times.iter().copied().fold(f64::MAX, f64::min);
    let highest = times.iter().copied().fold(0.0, f64::max);
    // min and max are the extremes of the lines, to the printed digit.
    assert!(
        (min - lowest).abs() < 1e-9,
        "min {min} vs {lowest}: {stdout}"
    );
    assert!(
        (max - highest).abs() < 1e-9,
        "max {max} vs {highest}: {stdout}"
    );
    let mean = times.iter().sum::<f64>() / times.len() as f64;
    assert!(
        (avg - mean).abs() <= 0.0015,
        "avg {avg} vs {mean}: {stdout}"
    );
    assert!(min <= p99 && p99 <= max, "p99 {p99} outside [{min}, {max}]");
    assert!(stdout.contains("6 sent, 6 received"), "{stdout}");
}

#[test]
#[cfg_attr(
    windows,
    ignore = "wine 8 never reports a closed port on a connected socket's receive (only through SO_ERROR, never cleared); Windows does"
)]
fn a_closed_port_and_a_vanished_server_are_said_so() {
    // Nothing on the port: said within a probe period or two, not after the connect timeout.
    let closed = {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket.local_addr().unwrap().to_string()
    };
    let started = Instant::now();
    let out = soe(&["ping", &closed, "-c", "1", "--connect-timeout", "30"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("nothing listens on {closed}")),
        "{stderr}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "the probe was not used"
    );

    // The server goes away in the middle of a ping: the ping says so and fails.
    let mut server = serve(&[]);
    let server_addr = server.addr.to_string();
    let (mut ping, stdout) = spawn(&["ping", &server_addr, "-c", "0", "--interval", "50"]);
    let mut seen = Vec::new();
    wait_for(&stdout, "seq=2 time=", &mut seen);
    let _ = server.process.child.kill();
    let _ = server.process.child.wait();
    let line = wait_for(&stdout, "no echo", &mut seen);
    assert!(
        line.contains(&format!("{} stopped listening", server.addr)),
        "{line}"
    );
    let status = ping.wait(Duration::from_secs(30));
    assert_eq!(status.code(), Some(1));

    // The same for load: every session says so, long before its 10 s echo timeout.
    let (mut server, mut load, stdout) = load_with_echoes_flowing(&[]);
    let server_addr = server.addr.to_string();
    let _ = server.process.child.kill();
    let _ = server.process.child.wait();
    let killed = Instant::now();
    let status = load.wait(Duration::from_secs(30));
    let mut lines = Vec::new();
    rest(&stdout, &mut lines);
    let summary = lines.join("\n");
    assert_eq!(status.code(), Some(1), "{summary}");
    assert!(
        killed.elapsed() < Duration::from_secs(8),
        "load took {:?} to notice",
        killed.elapsed()
    );
    assert!(summary.contains("sessions:   2 (2 failed)"), "{summary}");
    let stopped = format!("{server_addr} stopped listening (ICMP port unreachable)");
    assert_eq!(summary.matches(&stopped).count(), 2, "{summary}");
}

#[cfg_attr(
    windows,
    ignore = "stops the child with Ctrl-C (`kill -INT`); Windows has no way to send a console Ctrl-C to one child without unsafe code (GenerateConsoleCtrlEvent)"
)]
#[test]
fn load_prints_its_summary_when_interrupted() {
    let (_server, mut load, stdout) = load_with_echoes_flowing(&[]);
    load.interrupt();
    let status = load.wait(Duration::from_secs(30));
    let mut lines = Vec::new();
    rest(&stdout, &mut lines);
    let summary = lines.join("\n");
    assert_eq!(status.code(), Some(130), "{summary}");
    assert!(
        summary.contains("(interrupted: figures so far)"),
        "{summary}"
    );
    let verified: u64 = summary
        .lines()
        .find_map(|l| l.strip_prefix("messages:"))
        .and_then(|l| l.split(" sent, ").nth(1))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no messages line: {summary}"));
    assert!(verified > 0, "nothing measured before Ctrl-C: {summary}");
    assert!(summary.contains("sessions:   2 (0 failed)"), "{summary}");
}

fn http(addr: &str, request: &str) -> String {
    let mut response = String::new();
    for _ in 0..50 {
        response.clear();
        if let Ok(mut conn) = TcpStream::connect(addr) {
            let _ = conn.write_all(request.as_bytes());
            let _ = conn.read_to_string(&mut response);
            if !response.is_empty() {
                break;
            }
        }
        thread::sleep(Duration::from_millis(100));
    }
    response
}

#[test]
fn the_metrics_endpoint_speaks_http() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let metrics = format!("127.0.0.1:{port}");
    let server = serve(&["--metrics", &metrics]);
    soe_ok(&["ping", &server.addr.to_string(), "-c", "1"]);
    let ok = http(&metrics, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
    assert!(
        ok.contains("Content-Type: text/plain; version=0.0.4"),
        "{ok}"
    );
    for metric in [
        "soe_sessions",
        "soe_sessions_opened_total",
        "soe_messages_received_total",
        "soe_messages_sent_total",
        "soe_bytes_received_total",
        "soe_resends_total",
        "soe_crc_rejects_total",
    ] {
        assert!(ok.contains(&format!("# HELP {metric} ")), "{metric}: {ok}");
        assert!(ok.contains(&format!("\n{metric} ")), "{metric}: {ok}");
    }
    let head = http(&metrics, "HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(head.ends_with("\r\n\r\n"), "HEAD carries no body: {head}");
    assert!(!head.contains("Content-Length: 0\r\n"), "{head}");
    let missing = http(&metrics, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(missing.starts_with("HTTP/1.1 404 "), "{missing}");
    let post = http(&metrics, "POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(post.starts_with("HTTP/1.1 405 "), "{post}");
    let huge = format!("GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(20_000));
    let huge = http(&metrics, &huge);
    assert!(huge.starts_with("HTTP/1.1 431 "), "{huge}");
}

/// A relay on a free loopback port in front of `upstream` that carries the datagrams of the
/// first `admit` client addresses both ways and drops every datagram of any other: a server
/// that answers some sessions and never the rest, as one overloaded past its limits does.
fn choosy_relay(upstream: SocketAddr, admit: usize) -> SocketAddr {
    let front = UdpSocket::bind("127.0.0.1:0").expect("bind the relay");
    let addr = front.local_addr().expect("relay address");
    thread::spawn(move || {
        let mut admitted: HashMap<SocketAddr, UdpSocket> = HashMap::new();
        let mut buf = vec![0u8; 65_536];
        loop {
            let Ok((n, from)) = front.recv_from(&mut buf) else {
                return;
            };
            if !admitted.contains_key(&from) {
                if admitted.len() == admit {
                    continue;
                }
                let back = UdpSocket::bind("127.0.0.1:0").expect("bind an upstream socket");
                back.connect(upstream).expect("connect upstream");
                let (reply, to) = (
                    back.try_clone().expect("clone"),
                    front.try_clone().expect("clone"),
                );
                thread::spawn(move || {
                    let mut buf = vec![0u8; 65_536];
                    while let Ok(n) = reply.recv(&mut buf) {
                        if to.send_to(&buf[..n], from).is_err() {
                            return;
                        }
                    }
                });
                admitted.insert(from, back);
            }
            let _ = admitted[&from].send(&buf[..n]);
        }
    });
    addr
}

#[test]
fn an_overloaded_server_is_told_from_an_absent_one() {
    let server = serve(&[]);
    let relay = choosy_relay(server.addr, 3).to_string();
    let out = soe(&[
        "load",
        &relay,
        "--sessions",
        "6",
        "--messages",
        "20",
        "--connect-timeout",
        "1",
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("sessions:   6 (3 failed)"), "{stdout}");
    let failures: Vec<&str> = stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("session "))
        .collect();
    assert_eq!(failures.len(), 3, "{stdout}");
    for line in failures {
        assert!(
            line.contains(&format!("{relay} did not answer within 1.0 s")),
            "{line}"
        );
        assert!(line.contains("answered 3 other session(s)"), "{line}");
        assert!(line.contains("overloaded"), "{line}");
        assert!(!line.contains("is an SOE server listening"), "{line}");
    }
    // The three it answered were measured in full.
    assert!(stdout.contains("60 sent, 60 verified"), "{stdout}");
}

#[test]
fn a_missing_argument_is_named() {
    for (args, named) in [
        (
            &["load", "127.0.0.1:20042", "--sessions", "2"][..],
            "--messages <M>|--duration <S>",
        ),
        (&["proxy", "--listen", "127.0.0.1:0"], "--upstream <ADDR>"),
    ] {
        let out = soe(args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        let message = stderr.split(" (usage: ").next().unwrap_or_default();
        assert!(message.contains(named), "{args:?}: {stderr}");
    }
}

#[test]
fn an_error_says_its_cause_once() {
    let dir = std::env::temp_dir();
    let dir = dir.to_str().unwrap();
    let out = soe(&["decode", "--pcap", dir]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.matches("os error").count(), 1, "{stderr}");
    let missing = format!("{dir}/no-such-dir-{}/x.pcap", std::process::id());
    let out = soe(&[
        "proxy",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        "127.0.0.1:9",
        "--write",
        &missing,
        "--duration",
        "1",
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.matches("os error").count(), 1, "{stderr}");
}

#[test]
fn a_bad_log_filter_is_refused() {
    for filter in ["soe=verbose", "debgu"] {
        let out = soe(&["--log", filter, "decode", "0006"]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{filter}: {stderr}");
        assert!(stderr.contains(filter), "{stderr}");
        assert!(out.stdout.is_empty());
    }
    soe_ok(&["--log", "soe_session=debug,warn", "decode", "0006"]);
}

#[test]
fn flags_that_would_be_ignored_are_refused() {
    for flag in [&["--crc-length", "4"][..], &["--compress"]] {
        for command in ["ping", "load"] {
            let mut args = vec![command, "127.0.0.1:9", "--messages", "1"];
            if command == "ping" {
                args.truncate(2);
            }
            args.extend(flag);
            let out = soe(&args);
            let stderr = text(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
            assert!(stderr.contains("what a server announces"), "{stderr}");
            assert!(
                !stderr.contains("listens"),
                "{args:?} tried to connect: {stderr}"
            );
        }
    }
    let out = soe(&["decode", "--port", "20042", "0006"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--port"), "{stderr}");
    for size in [
        &["ping", "127.0.0.1:9", "--size", "0"][..],
        &["load", "127.0.0.1:9", "--messages", "1", "--size", "0"],
    ] {
        let out = soe(size);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("1 to 4194304 bytes (4 MiB)"), "{stderr}");
        assert!(!stderr.contains("4294967295"), "{stderr}");
    }
}

#[test]
fn metrics_agree_with_the_sessions_at_every_scrape() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let metrics = format!("127.0.0.1:{port}");
    let mut server = serve(&["--metrics", &metrics]);
    let addr = server.addr.to_string();
    for round in 1..=3u64 {
        soe_ok(&["ping", &addr, "-c", "3", "--interval", "1"]);
        // Scrape as soon as the server has closed the session: its messages are counted.
        wait_for(&server.stdout, "close ", &mut server.seen);
        let body = http(&metrics, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        let closed = format!("soe_sessions_closed_total{{reason=\"Application\"}} {round}");
        assert!(body.contains(&closed), "{closed}: {body}");
        let received = format!("soe_messages_received_total {}", 3 * round);
        assert!(body.contains(&received), "{received}: {body}");
        let sent = format!("soe_messages_sent_total {}", 3 * round);
        assert!(body.contains(&sent), "{sent}: {body}");
    }
}

#[test]
fn a_proxy_that_would_relay_to_itself_is_refused() {
    let port = {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.local_addr().unwrap().port()
    };
    let own = format!("127.0.0.1:{port}");
    let any = format!("0.0.0.0:{port}");
    for (listen, upstream) in [(&own, &own), (&any, &own), (&own, &any)] {
        let out = soe(&[
            "proxy",
            "--listen",
            listen,
            "--upstream",
            upstream,
            "--duration",
            "1",
        ]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{listen} {upstream}: {stderr}");
        assert!(
            stderr.contains("relay every datagram to itself"),
            "{stderr}"
        );
    }
}

#[cfg_attr(
    windows,
    ignore = "stops the child with Ctrl-C (`kill -INT`); Windows has no way to send a console Ctrl-C to one child without unsafe code (GenerateConsoleCtrlEvent)"
)]
#[test]
fn messages_in_flight_at_ctrl_c_are_not_lost() {
    // A sink never echoes: each session's whole depth is in flight when Ctrl-C comes.
    let mut server = serve(&["--mode", "sink", "--stats-interval", "0.2"]);
    let addr = server.addr.to_string();
    let (mut load, stdout) = spawn(&[
        "load",
        &addr,
        "--sessions",
        "2",
        "--depth",
        "8",
        "--duration",
        "120",
        "--json",
    ]);
    // Both sessions opened; each sends its 8 right after its key check, within milliseconds.
    wait_for(&server.stdout, "(2 opened", &mut server.seen);
    thread::sleep(Duration::from_secs(1));
    load.interrupt();
    let status = load.wait(Duration::from_secs(30));
    let mut lines = Vec::new();
    rest(&stdout, &mut lines);
    let summary: serde_json::Value = serde_json::from_str(&lines.join("\n")).expect("JSON");
    assert_eq!(status.code(), Some(130), "{summary}");
    assert_eq!(summary["messages_sent"], 16, "{summary}");
    assert_eq!(summary["messages_in_flight"], 16, "{summary}");
    assert_eq!(summary["messages_lost"], 0, "{summary}");
}
