//! The flight recorder end to end: a recording written as pcapng opens in tshark with our Lua
//! plugin as it is, and `soe decode` reads the same messages back.
//!
//! * In virtual time: a session that dies of 100 % loss after 20 s of traffic leaves a
//!   recording; tshark shows its raw datagrams as UDP, the last messages before the loss, and
//!   the timeout as the reason; `soe decode` of the file gives the same messages.
//! * Over loopback: `soe serve --record DIR` writes a capture for each session of a `soe load`
//!   killed mid-load, and tshark with the plugin reads it.
//!
//! Skipped, with a word on stderr, where tshark is not installed; under `CI=true` its absence
//! fails (`.ci/run` installs it).

mod common;
#[path = "../../soe-dissect/tests/support/lossy_pair.rs"]
mod lossy_pair;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, UNIX_EPOCH};

use base64::Engine;
use bytes::Bytes;
use common::{KEY, PLUGIN, load_with_echoes_flowing, soe_bin, tshark_present, wait_for};
use serde_json::Value;
use soe_dissect::recording::{RecordingOptions, write_recording};
use soe_session::{DisconnectReason, Event, SessionConfig};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("soe-recorder-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A record of ours: its kind, direction, channel, length and body (hex).
type Ours = (u64, u64, u64, u64, String);

/// One frame as tshark shows it with the plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Frame {
    /// UDP ports, for a datagram.
    udp: Option<(u16, u16)>,
    /// A record of ours.
    soe: Option<Ours>,
    /// A disconnect's reason.
    reason: String,
}

/// Every frame of `capture` as tshark shows it with the plugin.
fn tshark(capture: &Path) -> Vec<Frame> {
    let fields = [
        "udp.srcport",
        "udp.dstport",
        "soe.kind",
        "soe.direction",
        "soe.channel",
        "soe.len",
        "soe.body",
        "soe.reason",
    ];
    let mut cmd = Command::new("tshark");
    cmd.args(["-r", capture.to_str().unwrap()])
        .args(["-X", &format!("lua_script:{PLUGIN}")])
        .args(["-T", "fields", "-E", "separator=/t", "-E", "occurrence=f"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("damaged"), "{stderr}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| {
            let f: Vec<&str> = line.split('\t').collect();
            assert_eq!(f.len(), fields.len(), "{line:?}");
            let num = |s: &str| {
                s.parse::<u64>()
                    .unwrap_or_else(|_| panic!("{s:?} in {line:?}"))
            };
            Frame {
                udp: (!f[0].is_empty()).then(|| (num(f[0]) as u16, num(f[1]) as u16)),
                soe: (!f[2].is_empty()).then(|| {
                    (
                        num(f[2]),
                        num(f[3]),
                        num(f[4]),
                        num(f[5]),
                        f[6].replace(':', ""),
                    )
                }),
                reason: f[7].to_owned(),
            }
        })
        .collect()
}

/// The `exported` records of `soe decode --json` of `capture`, as tshark's, and decode's
/// datagram records.
fn decoded(capture: &Path) -> (Vec<Ours>, Vec<Value>) {
    let out = Command::new(soe_bin())
        .args(["decode", "--json", "--pcap", capture.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut exported = Vec::new();
    let mut datagrams = Vec::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        match v["type"].as_str() {
            Some("exported") => {
                let kind = match v["kind"].as_str().unwrap() {
                    "reliable" => 0,
                    "unreliable" => 1,
                    "ordered" => 2,
                    "disconnect" => 3,
                    _ => 4,
                };
                let direction = match v["direction"].as_str() {
                    Some("client_to_server") => 1,
                    Some("server_to_client") => 2,
                    _ => 0,
                };
                exported.push((
                    kind,
                    direction,
                    v["channel"].as_u64().unwrap(),
                    v["len"].as_u64().unwrap(),
                    v["hex"].as_str().unwrap().to_owned(),
                ));
            }
            Some("datagram") => datagrams.push(v),
            _ => {}
        }
    }
    (exported, datagrams)
}

#[cfg_attr(
    windows,
    ignore = "tshark is a Linux program here: a Windows test cannot run it (under wine)"
)]
#[test]
fn a_session_lost_after_20_s_leaves_a_recording_that_tshark_and_decode_read() {
    if !tshark_present() {
        return;
    }
    let key = base64::engine::general_purpose::STANDARD
        .decode(KEY)
        .unwrap();
    let config = SessionConfig::new("Recorded_1")
        .with_encryption_key(Bytes::from(key))
        .unwrap();
    let run = lossy_pair::run(config, 20);
    let Event::Closed { reason, .. } = run.closed else {
        unreachable!()
    };
    assert_eq!(reason, DisconnectReason::Timeout);
    let server: SocketAddr = lossy_pair::SERVER.parse().unwrap();
    let client: SocketAddr = lossy_pair::CLIENT.parse().unwrap();
    let dir = temp_dir("lossy");
    let capture = dir.join("lost.pcapng");
    let options = RecordingOptions::new(server, client)
        .with_start(UNIX_EPOCH + Duration::from_secs(1_700_000_000));
    let file = std::fs::File::create(&capture).unwrap();
    let summary = write_recording(file, run.recording.as_bytes(), &options).unwrap();

    let frames = tshark(&capture);
    // The raw datagrams, as UDP between the endpoints' ports.
    let udp: Vec<(u16, u16)> = frames.iter().filter_map(|f| f.udp).collect();
    assert_eq!(udp.len() as u64, summary.datagrams);
    assert!(
        udp.iter()
            .all(|&p| p == (40000, 20260) || p == (20260, 40000))
    );
    assert!(udp.contains(&(40000, 20260)) && udp.contains(&(20260, 40000)));
    // Our records: the framing, the messages, the end with the timeout as the reason.
    let ours: Vec<&Frame> = frames.iter().filter(|f| f.soe.is_some()).collect();
    assert_eq!(ours[0].soe.as_ref().unwrap().0, 4, "the framing first");
    let end = ours[ours.len() - 1];
    assert_eq!(end.soe.as_ref().unwrap().0, 3);
    assert_eq!(end.reason, "Timeout");
    // The last messages before the loss: what the server got last, decrypted.
    let got: Vec<String> = ours
        .iter()
        .filter_map(|f| f.soe.as_ref())
        .filter(|s| s.0 == 0 && s.1 == 1)
        .map(|s| s.4.clone())
        .collect();
    let expected: Vec<String> = run.got_by_server.iter().map(hex::encode).collect();
    assert!(got.len() >= 20, "{} messages", got.len());
    assert!(
        expected.ends_with(&got),
        "tshark shows the server's last messages"
    );
    assert_eq!(got.last(), expected.last(), "the last one before the loss");

    // soe decode of the file gives the same records.
    let (exported, datagrams) = decoded(&capture);
    let shown: Vec<Ours> = ours.iter().filter_map(|f| f.soe.clone()).collect();
    assert_eq!(exported, shown, "decode (left) and tshark (right)");
    assert_eq!(datagrams.len() as u64, summary.datagrams);
    // The framing record gave decode the CRC seed: the datagrams' CRCs check out.
    let ok = datagrams
        .iter()
        .filter(|d| d["crc"]["verdict"] == "ok")
        .count();
    assert!(
        ok * 10 >= datagrams.len() * 9,
        "{ok} of {} CRCs ok",
        datagrams.len()
    );
    if std::env::var_os("SOE_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[cfg_attr(
    windows,
    ignore = "tshark is a Linux program here: a Windows test cannot run it (under wine)"
)]
#[test]
fn serve_record_writes_a_capture_for_a_client_killed_mid_load() {
    if !tshark_present() {
        return;
    }
    let dir = temp_dir("serve");
    // Mid-load: both sessions open and echoes flowing.
    let (mut server, mut load, _out) =
        load_with_echoes_flowing(&["--record", dir.to_str().unwrap(), "--idle-timeout", "2"]);
    load.child.kill().unwrap();
    load.child.wait().unwrap();
    // Each session times out at the server and is written.
    let mut written = Vec::new();
    while written.len() < 2 {
        let line = wait_for(&server.stdout, "record ", &mut server.seen);
        let path = line
            .split_whitespace()
            .find(|w| w.ends_with(".pcapng"))
            .unwrap_or_else(|| panic!("no file in {line:?}"));
        written.push(PathBuf::from(path));
    }
    let close = server
        .seen
        .iter()
        .filter(|l| l.starts_with("close "))
        .cloned()
        .collect::<Vec<_>>();
    assert!(
        close.iter().all(|l| l.contains("Timeout by this side")),
        "{close:?}"
    );
    for path in &written {
        assert!(path.starts_with(&dir), "{path:?}");
        let frames = tshark(path);
        let datagrams = frames.iter().filter(|f| f.udp.is_some()).count();
        let messages = frames
            .iter()
            .filter(|f| f.soe.as_ref().is_some_and(|s| s.0 <= 2))
            .count();
        assert!(
            datagrams > 10 && messages > 10,
            "{datagrams} datagrams, {messages} messages"
        );
        let end = frames.iter().rev().find(|f| f.soe.is_some()).unwrap();
        assert_eq!(end.reason, "Timeout");
        // Loopback addresses: the server's port, as bound.
        assert!(
            frames
                .iter()
                .filter_map(|f| f.udp)
                .all(|(s, d)| s == server.addr.port() || d == server.addr.port())
        );
    }
    if std::env::var_os("SOE_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(dir);
    }
}
