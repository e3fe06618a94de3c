//! `soe decode --export` read back by the real tool: recorded sessions (plaintext, compressed
//! with RC4 from the first message, RC4 switched on after the first message; each with
//! fragmented messages) are exported, and tshark with our Lua plugin
//! (`crates/soe-dissect/wireshark/soe.lua`) must show every message with the channel, sequence,
//! length and bytes `soe decode --json` gives, from a file and from a live stream
//! (`soe decode --pcap - --export -`), and hand each message to the game dissector registered
//! for its application protocol. The first session carries a message of 264,040 bytes (as a
//! real Free Realms login does), over the 262,144 bytes Wireshark takes in one record: it is
//! exported truncated, with its whole length, and every record after it still reads.
//!
//! Skipped, with a word on stderr, where tshark is not installed; under `CI=true` its absence
//! fails (`.ci/run` installs it).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use etherparse::PacketBuilder;
use pcap_file::pcap::{PcapPacket, PcapWriter};
use serde_json::Value;
use soe_session::SessionConfig;

mod common;
#[path = "../../soe-dissect/tests/support/session_pair.rs"]
mod session_pair;

use common::{PLUGIN, soe_bin, tshark_present};

/// The key of the encrypted sessions.
const KEY: &str = "F70IaxuU8C/w7FPXY1ibXw==";
/// The capture time of the first session's start.
const EPOCH: Duration = Duration::from_secs(1_700_000_000);
/// The large message of the first session: as long as the one of a real Free Realms login.
const BIG: usize = 264_040;

/// The fields tshark prints, in order.
const FIELDS: [&str; 14] = [
    "soe.session",
    "soe.direction",
    "soe.channel",
    "soe.seq",
    "soe.len",
    "soe.fragmented",
    "soe.compressed",
    "soe.encrypted",
    "soe.decrypted",
    "soe.protocol",
    "soe.body",
    "soe.first_frame",
    "soe.last_frame",
    "soe.truncated",
];

/// One message as decode's JSON or tshark's fields show it: session, direction (1 client to
/// server, 2 server to client), channel, sequence, length, hex, its flags (fragmented,
/// compressed, encrypted, decrypted), and the first and last capture frames that carried it.
type Shown = (
    u64,
    u64,
    u64,
    Option<u64>,
    usize,
    String,
    [bool; 4],
    [u64; 2],
);

/// Game-like bytes, `len` of them.
fn text(i: usize, len: usize) -> Vec<u8> {
    let mut m = format!("message {i}: ").into_bytes();
    m.extend(b"position=12.5,0.0,-3.25; ".iter().cycle().take(len));
    m.truncate(len);
    m
}

/// Records one session; `key`: RC4 from the first message, or after it with `switch`; `big`:
/// the server's third message is [`BIG`] bytes long.
fn record(
    protocol: &str,
    compression: bool,
    key: bool,
    switch: bool,
    big: bool,
) -> Vec<(bool, Vec<u8>, Duration)> {
    let mut config = SessionConfig::new(protocol)
        .with_udp_length(512)
        .with_compression(compression);
    if key {
        let key = base64::engine::general_purpose::STANDARD
            .decode(KEY)
            .unwrap();
        config = config
            .with_encryption_key(Bytes::from(key))
            .unwrap()
            .with_encryption_at_start(!switch);
    }
    let to_server: Vec<Vec<u8>> = (0..12)
        .map(|i| text(i, if i == 5 { 2500 } else { 60 }))
        .collect();
    let mut to_client: Vec<Vec<u8>> = (0..12)
        .map(|i| text(i, if i % 4 == 1 { 1800 } else { 90 }))
        .collect();
    if big {
        to_client.insert(2, text(99, BIG));
    }
    let pair = session_pair::run_switching(
        &Arc::new(config),
        &to_server,
        &to_client,
        |_| false,
        400_000,
        switch,
    );
    assert!(
        pair.got_by_server == to_server,
        "the server got what was sent"
    );
    assert!(
        pair.got_by_client == to_client,
        "the client got what was sent"
    );
    pair.datagrams
        .into_iter()
        .map(|r| (r.from_client, r.bytes, r.at))
        .collect()
}

/// Writes sessions (one server port each, from 20261 on) to a classic pcap, one after the other.
fn write_capture(path: &Path, sessions: &[Vec<(bool, Vec<u8>, Duration)>]) {
    let mut w = PcapWriter::new(std::fs::File::create(path).unwrap()).unwrap();
    for (i, datagrams) in sessions.iter().enumerate() {
        let client: SocketAddr = format!("10.0.0.1:{}", 40_001 + i).parse().unwrap();
        let server: SocketAddr = format!("10.0.0.2:{}", 20_261 + i).parse().unwrap();
        for (from_client, bytes, at) in datagrams {
            let (src, dst) = if *from_client {
                (client, server)
            } else {
                (server, client)
            };
            let (SocketAddr::V4(s), SocketAddr::V4(d)) = (src, dst) else {
                unreachable!()
            };
            let mut frame = Vec::new();
            PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
                .ipv4(s.ip().octets(), d.ip().octets(), 64)
                .udp(s.port(), d.port())
                .write(&mut frame, bytes)
                .unwrap();
            let time = EPOCH + Duration::from_secs(10 * i as u64) + *at;
            w.write_packet(&PcapPacket::new(time, frame.len() as u32, &frame))
                .unwrap();
        }
    }
}

/// The messages of `soe decode --json`, in order (datagrams, then what the end released).
fn decoded(capture: &Path, extra: &[&str]) -> Vec<Shown> {
    let out = Command::new(soe_bin())
        .args(["decode", "--json", "--pcap", capture.to_str().unwrap()])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut shown = Vec::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        if v["type"] == "session" {
            continue;
        }
        let direction = match v["direction"].as_str() {
            Some("client_to_server") => 1,
            Some("server_to_client") => 2,
            _ => 0,
        };
        for m in v["messages"].as_array().unwrap() {
            let flag = |name: &str| m[name].as_bool().unwrap();
            shown.push((
                v["session"].as_u64().unwrap(),
                direction,
                m["channel"].as_u64().unwrap(),
                m["sequence"].as_u64(),
                m["len"].as_u64().unwrap() as usize,
                m["hex"].as_str().unwrap().to_owned(),
                [
                    flag("fragmented"),
                    flag("compressed"),
                    flag("encrypted"),
                    flag("decrypted"),
                ],
                [
                    m["first_frame"].as_u64().unwrap(),
                    m["last_frame"].as_u64().unwrap(),
                ],
            ));
        }
    }
    shown
}

/// tshark's `-T fields` lines for an export read from `input` (a file, or `-` for stdin).
fn tshark_fields(input: &str, stdin: Option<Stdio>) -> Command {
    let mut cmd = Command::new("tshark");
    cmd.args([
        "-r",
        input,
        "-X",
        &format!("lua_script:{PLUGIN}"),
        "-T",
        "fields",
    ]);
    for field in FIELDS {
        cmd.args(["-e", field]);
    }
    cmd.args(["-E", "separator=/t", "-E", "occurrence=f"]);
    cmd.stdin(stdin.unwrap_or_else(Stdio::null));
    cmd
}

/// What tshark showed: the messages, the application protocol of each session, and whether
/// each message's record was truncated (flag 0x20).
type Fields = (Vec<Shown>, BTreeMap<u64, String>, Vec<bool>);

/// Parses tshark's lines into messages, and the application protocol of each session.
fn parse_fields(stdout: &[u8]) -> Fields {
    let text = String::from_utf8_lossy(stdout);
    let mut shown = Vec::new();
    let mut protocols = BTreeMap::new();
    let mut truncated = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f.len(), FIELDS.len(), "a line of every field: {line:?}");
        let num = |s: &str| {
            s.parse::<u64>()
                .unwrap_or_else(|_| panic!("{s:?} in {line:?}"))
        };
        let flag = |s: &str| matches!(s, "1" | "True" | "true");
        protocols.insert(num(f[0]), f[9].to_owned());
        shown.push((
            num(f[0]),
            num(f[1]),
            num(f[2]),
            (!f[3].is_empty()).then(|| num(f[3])),
            num(f[4]) as usize,
            f[10].replace(':', ""),
            [flag(f[5]), flag(f[6]), flag(f[7]), flag(f[8])],
            [num(f[11]), num(f[12])],
        ));
        truncated.push(flag(f[13]));
    }
    (shown, protocols, truncated)
}

/// Checks tshark's messages against decode's: equal, except that a truncated record holds
/// only the start of its message (with the whole message's length).
fn same_messages(shown: &[Shown], truncated: &[bool], expected: &[Shown]) {
    assert_eq!(shown.len(), expected.len(), "every message in tshark");
    for (i, ((s, e), cut)) in shown.iter().zip(expected).zip(truncated).enumerate() {
        if *cut {
            let mut whole = s.clone();
            whole.5.clone_from(&e.5);
            assert_eq!(
                &whole, e,
                "message {i}: tshark (left) and decode (right) differ"
            );
            assert!(
                e.5.starts_with(&s.5) && s.5.len() < e.5.len() && e.4 > 262_144,
                "message {i}: only a message over the limit is truncated, to its start"
            );
        } else {
            assert_eq!(s, e, "message {i}: tshark (left) and decode (right) differ");
        }
    }
}

fn temp_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("soe-wireshark-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Exports `capture` to a file, reads it with tshark, and checks it against decode's JSON;
/// returns what tshark showed.
fn check_export(dir: &Path, name: &str, capture: &Path, extra: &[&str]) -> Vec<Shown> {
    let expected = decoded(capture, extra);
    let export = dir.join(format!("{name}.pcapng"));
    let out = Command::new(soe_bin())
        .args(["decode", "--pcap", capture.to_str().unwrap()])
        .args(["--export", export.to_str().unwrap()])
        .args(extra)
        .stdout(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = tshark_fields(export.to_str().unwrap(), None)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (shown, protocols, truncated) = parse_fields(&out.stdout);
    same_messages(&shown, &truncated, &expected);
    let cut: Vec<usize> = (0..shown.len()).filter(|&i| truncated[i]).collect();
    assert!(
        cut.len() <= 1
            && cut
                .iter()
                .all(|&i| shown[i].4 == BIG && i + 1 < shown.len()),
        "at most the one large message is truncated, and records after it read: {cut:?}"
    );
    assert!(
        protocols.values().all(|p| p.starts_with("WiresharkTest_")),
        "{protocols:?}"
    );
    shown
}

/// A game's dissector that registers in the `soe.protocol` table for `WiresharkTest_1` is handed
/// that session's messages, and no other session's.
fn a_game_dissector_registers_by_application_protocol(dir: &Path, export: &Path) {
    let game = dir.join("game.lua");
    std::fs::write(
        &game,
        r#"local game = Proto("wstest", "Test game")
local text = ProtoField.string("wstest.text", "Text")
game.fields = { text }
function game.dissector(tvb, pinfo, tree)
    tree:add(game, tvb()):add(text, tvb(0, math.min(tvb:len(), 8)))
    return tvb:len()
end
DissectorTable.get("soe.protocol"):add("WiresharkTest_1", game)
"#,
    )
    .unwrap();
    let out = Command::new("tshark")
        .args(["-r", export.to_str().unwrap()])
        .args(["-X", &format!("lua_script:{PLUGIN}")])
        .args(["-X", &format!("lua_script:{}", game.display())])
        .args(["-T", "fields", "-e", "soe.session", "-e", "wstest.text"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<(&str, &str)> = text.lines().filter_map(|l| l.split_once('\t')).collect();
    assert!(!lines.is_empty());
    for (session, game_text) in lines {
        assert_eq!(
            game_text.starts_with("message "),
            session == "1",
            "{session} {game_text:?}"
        );
    }
}

/// The frames of `export` that tshark with the plugin shows under `filter`.
fn frames_matching(export: &Path, filter: &str) -> usize {
    let out = Command::new("tshark")
        .args(["-r", export.to_str().unwrap()])
        .args(["-X", &format!("lua_script:{PLUGIN}")])
        .args(["-Y", filter, "-T", "fields", "-e", "frame.number"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).lines().count()
}

/// The plugin checks the header's message length against the bytes a record holds: the one
/// truncated record is noted as such, no other is flagged, and a record whose length field was
/// changed is flagged as malformed.
fn the_plugin_checks_the_length(dir: &Path, export: &Path) {
    assert_eq!(frames_matching(export, "soe.truncated.expert"), 1);
    assert_eq!(frames_matching(export, "soe.bad_length"), 0);
    // The first Enhanced Packet Block: past the section header and the interface blocks.
    let mut bytes = std::fs::read(export).unwrap();
    let u32_at = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    let mut at = 0;
    while u32_at(&bytes, at) != 6 {
        at += u32_at(&bytes, at + 4) as usize;
    }
    // The packet starts 28 bytes in; its tags end with tag 0.
    let mut p = at + 28;
    loop {
        let (tag, len) = (
            u16::from_be_bytes([bytes[p], bytes[p + 1]]),
            usize::from(u16::from_be_bytes([bytes[p + 2], bytes[p + 3]])),
        );
        p += 4 + len;
        if tag == 0 {
            break;
        }
    }
    bytes[p + 27] ^= 1;
    let tampered = dir.join("tampered.pcapng");
    std::fs::write(&tampered, bytes).unwrap();
    assert_eq!(frames_matching(&tampered, "soe.bad_length"), 1);
}

#[cfg_attr(
    windows,
    ignore = "tshark is a Linux program here: a Windows test cannot run it (under wine)"
)]
#[test]
fn tshark_shows_every_message_of_an_export_with_our_plugin() {
    if !tshark_present() {
        return;
    }
    let dir = temp_dir();
    // Plaintext; compressed with RC4 from the first message; both with fragments.
    let first = dir.join("sessions.pcap");
    write_capture(
        &first,
        &[
            record("WiresharkTest_1", false, false, false, true),
            record("WiresharkTest_2", true, true, false, false),
        ],
    );
    let keys = ["--rc4-key", &format!("20262={KEY}")];
    let shown = check_export(&dir, "sessions", &first, &keys);
    let of = |session: u64| shown.iter().filter(move |m| m.0 == session);
    assert_eq!(of(1).count(), 25);
    assert_eq!(of(2).count(), 24);
    assert!(
        of(1).any(|m| m.4 == BIG && m.6[0]),
        "the large message, fragmented, with its whole length"
    );
    assert!(
        of(1).all(|m| !m.6[1] && !m.6[2] && !m.6[3]),
        "session 1 is plain"
    );
    assert!(
        of(2).all(|m| m.6[2] && m.6[3]),
        "session 2 is decrypted throughout"
    );
    assert!(of(2).any(|m| m.6[1]), "session 2 is compressed");
    for session in [1, 2] {
        assert_eq!(
            of(session).filter(|m| m.6[0]).count(),
            if session == 1 { 5 } else { 4 },
            "fragmented messages"
        );
        let spans = |m: &&Shown| m.7[0] < m.7[1];
        assert!(
            of(session).all(|m| spans(&m) == m.6[0]),
            "frames of each message"
        );
    }

    a_game_dissector_registers_by_application_protocol(&dir, &dir.join("sessions.pcapng"));
    the_plugin_checks_the_length(&dir, &dir.join("sessions.pcapng"));

    // RC4 switched on after the first message, read from a live stream: a capture on stdin,
    // the export on stdout, straight into tshark.
    let switched = dir.join("switched.pcap");
    write_capture(
        &switched,
        &[record("WiresharkTest_3", true, true, true, true)],
    );
    let extra = ["--rc4-key", KEY, "--rc4-after-first-message"];
    let expected = decoded(&switched, &extra);
    let mut soe = Command::new(soe_bin())
        .args(["decode", "--pcap", "-", "--export", "-"])
        .args(extra)
        .stdin(std::fs::File::open(&switched).unwrap())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pipe = soe.stdout.take().unwrap();
    let out = tshark_fields("-", Some(Stdio::from(pipe)))
        .output()
        .unwrap();
    assert!(soe.wait().unwrap().success());
    assert!(
        out.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (live, _, truncated) = parse_fields(&out.stdout);
    // The live stream goes on past the large message too.
    same_messages(&live, &truncated, &expected);
    assert_eq!(live.len(), 25);
    assert_eq!(truncated.iter().filter(|t| **t).count(), 1);
    assert!(!truncated[24]);
    assert!(
        !live[0].6[3] && live[1..].iter().all(|m| m.6[3]),
        "decrypted after the first"
    );
    // SOE_KEEP=1 keeps the captures and exports (in the temporary directory) to open by hand.
    if std::env::var_os("SOE_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(dir);
    }
}
