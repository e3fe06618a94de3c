//! `soe ping` and `soe load` against a server that talks on its own, as every game server does:
//! a 20 Hz tick of unreliable messages from the start and of reliable world updates once the
//! session's first message came, with RC4 switched on after that first message. The tools
//! match echoes by the id in their messages, count what the server sends on its own apart (by
//! kind), judge the RC4 key only from the key check's answers, report the connect time without
//! the key check's wait, and end quietly when their reader goes away.

mod common;

// The server's side of the key check, as `soe serve` runs it (a game server that wants to be
// checked by the tool answers the same way).
#[allow(dead_code, unreachable_pub)]
#[path = "../src/keycheck.rs"]
mod keycheck;

use std::collections::HashMap;
use std::io::Read;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use serde_json::Value;
use soe_tokio::bytes::Bytes;
use soe_tokio::{
    Config, Connection, ConnectionId, Delivery, Endpoint, EndpointConfig, EndpointEvent, EventMode,
    SessionConfig,
};

use common::*;
use keycheck::ServerCheck;

/// Another 16-byte key, base64.
const OTHER_KEY: &str = "AAECAwQFBgcICQoLDA0ODw==";

/// How the test server treats the tool's key-check hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hello {
    /// Answers it as `soe serve` does.
    Answered,
    /// Echoes it like every other message (a plain echo server).
    Echoed,
    /// Ignores it, and every unreliable message (a server that only listens to reliable data).
    Ignored,
}

/// One session of the test server.
struct Peer {
    conn: Connection,
    check: ServerCheck,
    /// Whether its first reliable message came (RC4 is on from then, and so are the reliable
    /// world updates).
    switched: bool,
}

/// A game server in this process on a free loopback port: it echoes every message the way it
/// came, turns RC4 on after each session's first reliable message (and sends a tick and a world
/// update at once, before its reply), and every 50 ms sends each session an unreliable tick
/// and, once RC4 is on, a reliable world update of 64 bytes that starts with its number,
/// big-endian, as the tools' own messages do.
async fn game_server(key: &str, hello: Hello) -> SocketAddr {
    let key = base64::engine::general_purpose::STANDARD
        .decode(key)
        .unwrap();
    let session = SessionConfig::new("SoeEcho")
        .with_encryption_key(Bytes::from(key))
        .unwrap()
        .with_encryption_at_start(false);
    let config = EndpointConfig::server(Arc::new(session));
    let endpoint = Endpoint::bind(
        "127.0.0.1:0".parse().unwrap(),
        Config::new(Arc::new(config)).with_event_mode(EventMode::Stream),
    )
    .unwrap();
    let addr = endpoint.local_addr();
    tokio::spawn(async move {
        let mut peers: HashMap<ConnectionId, Peer> = HashMap::new();
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        let mut n = 0u64;
        loop {
            tokio::select! {
                event = endpoint.next_event() => match event {
                    Some(event) => on_event(&mut peers, event, hello),
                    None => return,
                },
                _ = tick.tick() => {
                    n += 1;
                    for peer in peers.values() {
                        let _ = peer.conn.send_unreliable(Bytes::from(format!("\x01tick {n}")));
                        if peer.switched {
                            let _ = peer.conn.try_send(world_update(n));
                        }
                    }
                }
            }
        }
    });
    addr
}

/// World update `n`: 64 bytes, its number big-endian first.
fn world_update(n: u64) -> Bytes {
    let mut update = n.to_be_bytes().to_vec();
    update.resize(64, b'w');
    Bytes::from(update)
}

fn on_event(peers: &mut HashMap<ConnectionId, Peer>, event: EndpointEvent, hello: Hello) {
    let (connection, channel, data, kind) = match event {
        EndpointEvent::Accepted(conn) => {
            let peer = Peer {
                conn,
                check: ServerCheck::default(),
                switched: false,
            };
            peers.insert(peer.conn.id(), peer);
            return;
        }
        EndpointEvent::Closed { connection, .. } => {
            peers.remove(&connection);
            return;
        }
        EndpointEvent::Message {
            connection,
            channel,
            data,
            kind,
        } => (connection, channel, data, kind),
        _ => return,
    };
    let Some(peer) = peers.get_mut(&connection) else {
        return;
    };
    match (kind, hello) {
        (Delivery::Reliable, _) => {
            let answer = if peer.switched {
                None
            } else {
                // RC4 on, then a tick and a world update go before the reply (the key check's
                // answer is therefore this server's second reliable message).
                peer.switched = true;
                peer.conn.set_encryption(true);
                let _ = peer.conn.send_unreliable(Bytes::from_static(b"\x01tick"));
                let _ = peer.conn.try_send(world_update(0));
                let answer = peer.check.on_first_reliable(&data, 1);
                answer.filter(|_| hello == Hello::Answered)
            };
            let _ = peer
                .conn
                .try_send_on(channel, answer.map_or(data, Bytes::from));
        }
        (_, Hello::Ignored) => {}
        (_, Hello::Answered) if keycheck::read_hello(&data).is_some() => {
            if let Some(reply) = peer.check.on_unreliable(&data) {
                let _ = peer.conn.send_unreliable(Bytes::from(reply.answer));
            }
        }
        (Delivery::Ordered, _) => {
            let _ = peer.conn.send_ordered(data);
        }
        _ => {
            let _ = peer.conn.send_unreliable(data);
        }
    }
}

/// Runs `soe` with `args` off the runtime's threads.
async fn run(args: &[&str]) -> std::process::Output {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || soe(&args.iter().map(String::as_str).collect::<Vec<_>>()))
        .await
        .unwrap()
}

/// The two counts of an `unsolicited: R reliable and U unreliable message(s)` line.
fn unsolicited(stdout: &str) -> (u64, u64) {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("unsolicited: "))
        .unwrap_or_else(|| panic!("no unsolicited line: {stdout}"));
    let numbers: Vec<u64> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    (numbers[0], numbers[1])
}

const SWITCH: &str = "--rc4-after-first-message";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ticking_server_passes_ping_and_load_with_its_key_and_fails_with_another() {
    let addr = game_server(KEY, Hello::Answered).await.to_string();
    let ping = [&addr, "-c", "5", "--interval", "100", SWITCH, "--rc4-key"];
    let out = run(&[&["ping"][..], &ping, &[KEY]].concat()).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("RC4 key checked"), "{stdout}");
    assert!(
        stdout.contains("5 sent, 5 received, 0 mismatched"),
        "{stdout}"
    );
    let (reliable, unreliable) = unsolicited(&stdout);
    assert!(reliable >= 3 && unreliable >= 3, "{stdout}");

    let load = [
        &addr,
        "--sessions",
        "4",
        "--messages",
        "40",
        "--rate",
        "160",
    ];
    let json = ["--size", "1-3000", "--json", SWITCH, "--rc4-key"];
    let out = run(&[&["load"][..], &load, &json, &[KEY]].concat()).await;
    let summary: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(out.status.success(), "{summary}");
    assert_eq!(summary["messages_verified"], 160, "{summary}");
    assert_eq!(summary["messages_mismatched"], 0, "{summary}");
    assert_eq!(summary["key_checks"]["checked"], 4, "{summary}");
    assert!(
        summary["unsolicited"]["reliable"].as_u64() >= Some(8),
        "{summary}"
    );
    assert!(
        summary["unsolicited"]["unreliable"].as_u64() >= Some(8),
        "{summary}"
    );

    // Another key: the probe reads (it travels in plaintext), but its answer does not.
    let out = run(&[&["ping"][..], &ping, &[OTHER_KEY]].concat()).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("RC4 key mismatch"),
        "{}",
        text(&out.stderr)
    );
    assert!(!text(&out.stdout).contains("bytes from"));
    let out = run(&[&["load"][..], &load, &json, &[OTHER_KEY]].concat()).await;
    assert_eq!(out.status.code(), Some(1));
    let summary: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(summary["key_checks"]["mismatch"], 4, "{summary}");
    assert_eq!(summary["messages_verified"], 0, "{summary}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ticking_plain_echo_server_passes_with_its_key_unchecked() {
    let addr = game_server(KEY, Hello::Echoed).await.to_string();
    let ping = [&addr, "--interval", "100", "--timeout", "1", SWITCH];
    let out = run(&[&["ping"][..], &ping, &["-c", "5", "--rc4-key", KEY]].concat()).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("RC4 key not checked"), "{stdout}");
    assert!(
        stdout.contains("5 sent, 5 received, 0 mismatched"),
        "{stdout}"
    );
    let (reliable, unreliable) = unsolicited(&stdout);
    assert!(reliable >= 3 && unreliable >= 3, "{stdout}");
    let load = [&addr, "--sessions", "3", "--messages", "30", "--rate", "90"];
    let out = run(&[&["load"][..], &load, &["--json", SWITCH, "--rc4-key", KEY]].concat()).await;
    let summary: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(out.status.success(), "{summary}");
    assert_eq!(summary["messages_verified"], 90, "{summary}");
    assert_eq!(summary["key_checks"]["unchecked"], 3, "{summary}");
    // Another key: nothing the server sends reads, so no echo comes, and ping says what came
    // instead (it cannot tell another key from a server that garbles its echoes).
    let out = run(&[&["ping"][..], &ping, &["-c", "2", "--rc4-key", OTHER_KEY]].concat()).await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("0 received"), "{stdout}");
    assert!(
        stdout.contains("of its length came that were not it"),
        "{stdout}"
    );
    let load = [
        &addr,
        "--sessions",
        "2",
        "--messages",
        "5",
        "--timeout",
        "1",
    ];
    let out = run(&[
        &["load"][..],
        &load,
        &["--json", SWITCH, "--rc4-key", OTHER_KEY],
    ]
    .concat())
    .await;
    assert_eq!(out.status.code(), Some(1));
    let summary: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(summary["sessions_failed"], 2, "{summary}");
    let failure = summary["failures"][0].as_str().unwrap();
    assert!(failure.contains("no echo within 1.0 s ("), "{summary}");
    assert!(failure.contains("carry no id of this session"), "{summary}");
}

/// The milliseconds at the end of the line that contains `needle` (`... 12.345 ms` or
/// `... (12.345 ms)`).
fn millis_of(stdout: &str, needle: &str) -> f64 {
    let line = stdout
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no {needle:?} line: {stdout}"));
    line.trim_end_matches(')')
        .strip_suffix(" ms")
        .and_then(|l| l.rsplit([' ', '(']).next())
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no figure at the end of {line:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connect_time_leaves_out_the_key_checks_wait() {
    // A server that never answers the hello: the key check waits its second, the connect
    // does not.
    let addr = game_server(KEY, Hello::Ignored).await.to_string();
    let out = run(&["ping", &addr, "-c", "1", SWITCH, "--rc4-key", KEY]).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    let connect = millis_of(&stdout, "connected in");
    let check = millis_of(&stdout, "RC4 key not checked");
    assert!(check >= 1000.0, "{stdout}");
    // The handshake alone: one round trip on loopback, far below the check's second.
    assert!(connect < 500.0, "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ping_ends_quietly_when_its_reader_goes_away() {
    let addr = game_server(KEY, Hello::Answered).await.to_string();
    let status = tokio::task::spawn_blocking(move || {
        let mut child = Command::new(soe_bin())
            .args(["ping", &addr, "-c", "100", "--interval", "20", SWITCH])
            .args(["--rc4-key", KEY])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Read three lines, as `head -3` does, then close the pipe.
        let mut stdout = child.stdout.take().unwrap();
        let mut seen = Vec::new();
        let mut byte = [0u8; 1];
        while seen.iter().filter(|&&b| b == b'\n').count() < 3 {
            assert_eq!(stdout.read(&mut byte).unwrap(), 1, "{seen:?}");
            seen.push(byte[0]);
        }
        drop(stdout);
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        (child.wait().unwrap(), stderr)
    })
    .await
    .unwrap();
    let (status, stderr) = status;
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(stderr, "", "quietly");
    assert_eq!(status.code(), Some(141), "{stderr}");
}
