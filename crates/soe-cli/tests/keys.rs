//! The RC4 key, told honestly: `soe ping` and `soe load` check it against `soe serve` and fail
//! on a mismatch (an echo through the same wrong key would cancel out); `soe serve` logs and
//! counts what it could not read, echoes every other message the way it came, and can turn
//! RC4 on after the first message, as can the clients.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use serde_json::Value;
use soe_tokio::bytes::Bytes;
use soe_tokio::{
    Channel, Config, Delivery, Endpoint, EndpointConfig, EndpointEvent, EventMode, SessionConfig,
};

use common::*;

/// Another 16-byte key, base64.
const OTHER_KEY: &str = "AAECAwQFBgcICQoLDA0ODw==";

fn key_bytes(key: &str) -> Bytes {
    Bytes::from(
        base64::engine::general_purpose::STANDARD
            .decode(key)
            .unwrap(),
    )
}

/// A session config for a Rust peer of `soe serve`: its default protocol name, the key.
fn config(key: Option<&str>, at_start: bool) -> Arc<SessionConfig> {
    let mut config = SessionConfig::new("SoeEcho");
    if let Some(key) = key {
        config = config
            .with_encryption_key(key_bytes(key))
            .unwrap()
            .with_encryption_at_start(at_start);
    }
    Arc::new(config)
}

#[test]
fn a_wrong_or_missing_key_fails_ping_and_load() {
    let mut server = serve(&["--rc4-key", KEY]);
    let addr = server.addr.to_string();
    let out = soe_ok(&[
        "ping",
        &addr,
        "-c",
        "2",
        "--interval",
        "10",
        "--rc4-key",
        KEY,
    ]);
    let stdout = text(&out.stdout);
    assert!(stdout.contains("RC4 key checked"), "{stdout}");
    assert!(stdout.contains("2 sent, 2 received"), "{stdout}");

    for wrong in [&[][..], &["--rc4-key", OTHER_KEY]] {
        let mut args = vec!["ping", &addr, "-c", "2", "--interval", "10"];
        args.extend(wrong);
        let out = soe(&args);
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stdout}{stderr}");
        assert!(stderr.contains("RC4 key mismatch"), "{args:?}: {stderr}");
        assert!(!stdout.contains("bytes from"), "{args:?}: {stdout}");

        let mut args = vec!["load", &addr, "--sessions", "2", "--messages", "20"];
        args.extend(wrong);
        args.push("--json");
        let out = soe(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let summary: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!(summary["key_checks"]["mismatch"], 2, "{summary}");
        assert_eq!(summary["sessions_failed"], 2, "{summary}");
        assert_eq!(summary["messages_verified"], 0, "{summary}");
    }
    let line = wait_for(&server.stdout, "KEY MISMATCH", &mut server.seen);
    assert!(
        line.contains("this server decrypts with its --rc4-key"),
        "{line}"
    );

    // A server without a key, a client with one.
    let plain = serve(&[]);
    let out = soe(&["ping", &plain.addr.to_string(), "-c", "1", "--rc4-key", KEY]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("RC4 key mismatch"));
}

/// Connects a Rust client (stream mode, so each message says how it came) to `server`.
async fn rust_client(server: SocketAddr, key: Option<&str>) -> (Endpoint, soe_tokio::Connection) {
    let endpoint_config = EndpointConfig::client(config(key, true));
    let endpoint =
        Endpoint::client(Config::new(Arc::new(endpoint_config)).with_event_mode(EventMode::Stream))
            .unwrap();
    let conn = endpoint.connect(server).await.unwrap();
    (endpoint, conn)
}

/// The next message event of a stream-mode endpoint.
async fn next_message(endpoint: &Endpoint) -> (Channel, Bytes, Delivery) {
    loop {
        let event = tokio::time::timeout(Duration::from_secs(10), endpoint.next_event())
            .await
            .expect("a message within 10 s")
            .expect("the endpoint is open");
        if let EndpointEvent::Message {
            channel,
            data,
            kind,
            ..
        } = event
        {
            return (channel, data, kind);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_message_is_echoed_the_way_it_came_and_ordinary_clients_are_unaffected() {
    let server = tokio::task::spawn_blocking(|| serve(&["--rc4-key", KEY]))
        .await
        .unwrap();
    let (endpoint, conn) = rust_client(server.addr, Some(KEY)).await;
    // A first message of the probe's length, from a client that sent no hello: an echo.
    let first = Bytes::from_static(b"0123456789abcdef");
    conn.send(first.clone()).await.unwrap();
    assert_eq!(
        next_message(&endpoint).await,
        (Channel::ZERO, first, Delivery::Reliable)
    );
    let on_one = Bytes::from_static(b"on channel one");
    conn.send_on(Channel::new(1).unwrap(), on_one.clone())
        .await
        .unwrap();
    assert_eq!(
        next_message(&endpoint).await,
        (Channel::new(1).unwrap(), on_one, Delivery::Reliable)
    );
    let unreliable = Bytes::from_static(b"\x01unreliable");
    conn.send_unreliable(unreliable.clone()).unwrap();
    assert_eq!(
        next_message(&endpoint).await,
        (Channel::ZERO, unreliable, Delivery::Unreliable)
    );
    let ordered = Bytes::from_static(b"\x02ordered");
    conn.send_ordered(ordered.clone()).unwrap();
    assert_eq!(
        next_message(&endpoint).await,
        (Channel::ZERO, ordered, Delivery::Ordered)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_says_when_what_it_decrypts_looks_encrypted() {
    let metrics = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let args = [
        "--rc4-key",
        KEY,
        "--metrics",
        &metrics,
        "--stats-interval",
        "0.2",
    ];
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let mut server = tokio::task::spawn_blocking(move || {
        serve(&args.iter().map(String::as_str).collect::<Vec<_>>())
    })
    .await
    .unwrap();
    // A client with another key and no key check: 2 KiB of text, which the server decrypts
    // into random bytes; its echoes come back fine, so only the server can tell.
    let (endpoint, conn) = rust_client(server.addr, Some(OTHER_KEY)).await;
    for i in 0..16 {
        let m = format!("PlayerUpdate {i:03} position=12.5,0.0,-3.25 heading=90 speed=4.5; ");
        let m = Bytes::from(m.repeat(2));
        conn.send(m.clone()).await.unwrap();
        assert_eq!(next_message(&endpoint).await.1, m, "the echo cancels out");
    }
    let (line, _server) = tokio::task::spawn_blocking(move || {
        let line = wait_for(&server.stdout, "looks encrypted", &mut server.seen);
        (line, server)
    })
    .await
    .unwrap();
    assert!(line.contains("after this server's decryption"), "{line}");
    let body = http_get(&metrics);
    assert!(
        body.contains("soe_sessions_looking_encrypted_total 1"),
        "{body}"
    );
}

/// The body of `GET /metrics` at `addr`.
fn http_get(addr: &str) -> String {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut body = String::new();
    conn.read_to_string(&mut body).unwrap();
    body
}

#[test]
fn rc4_can_start_after_the_first_message() {
    let server = serve(&["--rc4-key", KEY, "--rc4-after-first-message"]);
    let addr = server.addr.to_string();
    let switch = ["--rc4-key", KEY, "--rc4-after-first-message"];
    let mut args = vec![
        "ping",
        &addr,
        "-c",
        "3",
        "--interval",
        "10",
        "--size",
        "3000",
    ];
    args.extend(switch);
    let out = soe_ok(&args);
    let stdout = text(&out.stdout);
    assert!(stdout.contains("RC4 key checked"), "{stdout}");
    assert!(
        stdout.contains("3 sent, 3 received, 0 mismatched"),
        "{stdout}"
    );
    let mut args = vec!["load", &addr, "--sessions", "2", "--messages", "50"];
    args.extend(["--size", "1-3000", "--depth", "8", "--json"]);
    args.extend(switch);
    let out = soe_ok(&args);
    let summary: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(summary["messages_verified"], 100, "{summary}");
    assert_eq!(summary["key_checks"]["checked"], 2, "{summary}");
    // A client that does not switch fails, and so does one that switches against a server
    // that does not.
    let out = soe(&["ping", &addr, "-c", "1", "--rc4-key", KEY]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("RC4 key mismatch"));
    let at_start = serve(&["--rc4-key", KEY]);
    let at_start_addr = at_start.addr.to_string();
    let mut args = vec!["ping", &at_start_addr, "-c", "1"];
    args.extend(switch);
    let out = soe(&args);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("RC4 key mismatch"));
}

/// A plain echo server in this process (no key check): RC4 from its first reliable message on.
async fn plain_echo_server(key: &str) -> SocketAddr {
    let endpoint_config = EndpointConfig::server(config(Some(key), false));
    let endpoint = Endpoint::bind(
        "127.0.0.1:0".parse().unwrap(),
        Config::new(Arc::new(endpoint_config)).with_event_mode(EventMode::Stream),
    )
    .unwrap();
    let addr = endpoint.local_addr();
    tokio::spawn(async move {
        let mut conns = std::collections::HashMap::new();
        let mut switched = std::collections::HashSet::new();
        while let Some(event) = endpoint.next_event().await {
            match event {
                EndpointEvent::Accepted(conn) => {
                    conns.insert(conn.id(), conn);
                }
                EndpointEvent::Message {
                    connection,
                    channel,
                    data,
                    kind,
                } => {
                    let Some(conn) = conns.get(&connection) else {
                        continue;
                    };
                    if kind != Delivery::Reliable {
                        let _ = conn.send_unreliable(data);
                        continue;
                    }
                    if switched.insert(connection) {
                        conn.set_encryption(true);
                    }
                    let _ = conn.try_send_on(channel, data);
                }
                _ => {}
            }
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_echo_server_is_not_key_checked_and_the_switch_still_works() {
    let addr = plain_echo_server(KEY).await.to_string();
    let run = |args: Vec<String>| {
        tokio::task::spawn_blocking(move || {
            soe(&args.iter().map(String::as_str).collect::<Vec<_>>())
        })
    };
    let ping = |extra: &[&str]| {
        let mut args: Vec<String> = ["ping", &addr, "-c", "3", "--interval", "10"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        run(args)
    };
    let out = ping(&["--rc4-key", KEY, "--rc4-after-first-message"])
        .await
        .unwrap();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("RC4 key not checked"), "{stdout}");
    assert!(stdout.contains("plain echo server"), "{stdout}");
    assert!(
        stdout.contains("3 sent, 3 received, 0 mismatched"),
        "{stdout}"
    );
    // Without the switch the first echo comes back encrypted: it carries no id of this
    // side's, so it is no echo, and ping says a message of its length came instead.
    let out = ping(&["--rc4-key", KEY, "--timeout", "0.5"]).await.unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(
        text(&out.stdout).contains("of its length came that were not it"),
        "{}",
        text(&out.stdout)
    );
}

/// A relay on a free loopback port in front of `upstream` that drops every datagram from the
/// server that carries the key check's answer (unreliable data travels in plaintext), as a
/// lossy path may.
fn relay_losing_key_check_answers(upstream: SocketAddr) -> SocketAddr {
    use std::net::UdpSocket;
    let front = UdpSocket::bind("127.0.0.1:0").unwrap();
    let back = UdpSocket::bind("127.0.0.1:0").unwrap();
    back.connect(upstream).unwrap();
    let addr = front.local_addr().unwrap();
    let client = Arc::new(std::sync::Mutex::new(None::<SocketAddr>));
    let (front2, back2, client2) = (
        front.try_clone().unwrap(),
        back.try_clone().unwrap(),
        client.clone(),
    );
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 65_536];
        while let Ok((n, from)) = front2.recv_from(&mut buf) {
            *client2.lock().unwrap() = Some(from);
            let _ = back2.send(&buf[..n]);
        }
    });
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 65_536];
        while let Ok(n) = back.recv(&mut buf) {
            let answer = buf[..n].windows(14).any(|w| w == b"soe key check!");
            let to = *client.lock().unwrap();
            if let (false, Some(to)) = (answer, to) {
                let _ = front.send_to(&buf[..n], to);
            }
        }
    });
    addr
}

/// Issue 35 §3.3: when the answers to the hello are lost, the client sends no probe and starts
/// its workload; its first message, 16 bytes like a probe, is echoed, not judged, and neither
/// side calls the keys different.
#[test]
fn lost_key_check_answers_are_no_verdict() {
    let mut server = serve(&["--rc4-key", KEY]);
    let relay = relay_losing_key_check_answers(server.addr).to_string();
    let out = soe(&[
        "ping",
        &relay,
        "-c",
        "3",
        "--interval",
        "10",
        "--size",
        "16",
        "--rc4-key",
        KEY,
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("RC4 key not checked: no answer to the key-check hello"),
        "{stdout}"
    );
    assert!(
        stdout.contains("3 sent, 3 received, 0 mismatched"),
        "{stdout}"
    );
    let close = wait_for(&server.stdout, "close", &mut server.seen);
    assert!(!close.contains("MISMATCH"), "{close}");
    assert!(close.contains("3 message(s) in, 3 out"), "{close}");
    assert!(
        !server.seen.iter().any(|l| l.contains("KEY MISMATCH")),
        "{:#?}",
        server.seen
    );
}
