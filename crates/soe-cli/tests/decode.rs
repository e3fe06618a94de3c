//! `soe decode`, run as a built binary: known-answer vectors, a capture of a real session pair,
//! and bad inputs.

use std::borrow::Cow;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use etherparse::PacketBuilder;
use pcap_file::DataLink;
use pcap_file::pcap::{PcapPacket, PcapWriter};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use serde_json::Value;
use soe_session::SessionConfig;

/// The shared vectors, then the in-repo copy.
const SHARED_VECTORS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/protocol/vectors/known-answers.json"
);
/// The in-repo copy of the vectors.
const REPO_VECTORS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/known-answers.json"
);
/// The key H1Z1 emulators use by default.
const KEY: &str = "F70IaxuU8C/w7FPXY1ibXw==";

/// What a run of `soe decode` gave.
struct Run {
    /// The exit code.
    code: Option<i32>,
    /// Standard output.
    stdout: String,
    /// Standard error.
    stderr: String,
}

impl Run {
    /// Whether it exited 0.
    fn ok(&self) -> bool {
        self.code == Some(0)
    }

    /// The JSON lines of stdout.
    fn json(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON {l:?}: {e}")))
            .collect()
    }

    /// The JSON lines whose `type` is `kind`.
    fn of_type(&self, kind: &str) -> Vec<Value> {
        self.json()
            .into_iter()
            .filter(|v| v["type"] == kind)
            .collect()
    }
}

/// Runs `soe decode` with `args` (and `stdin`), asserting it did not panic.
fn soe(args: &[&str], stdin: Option<&[u8]>) -> Run {
    let bin =
        std::env::var("SOE_TEST_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_soe").to_owned());
    let mut child = Command::new(bin)
        .arg("decode")
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run soe");
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input).unwrap();
    }
    let Output {
        status,
        stdout,
        stderr,
    } = child.wait_with_output().unwrap();
    let run = Run {
        code: status.code(),
        stdout: String::from_utf8(stdout).unwrap(),
        stderr: String::from_utf8(stderr).unwrap(),
    };
    assert!(
        !run.stderr.contains("panicked"),
        "soe decode {args:?} panicked: {}",
        run.stderr
    );
    run
}

/// Runs and expects a failure whose message contains `needle`.
fn fails(args: &[&str], stdin: Option<&[u8]>, needle: &str) -> Run {
    let run = soe(args, stdin);
    assert!(!run.ok(), "soe decode {args:?} succeeded: {}", run.stdout);
    assert!(
        run.stderr.contains(needle),
        "soe decode {args:?}: stderr lacks {needle:?}: {}",
        run.stderr
    );
    run
}

/// The known-answer vectors.
fn vectors() -> Value {
    let path = [SHARED_VECTORS, REPO_VECTORS]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("known-answers.json: neither the shared nor the in-repo copy exists");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// When both copies of the vectors exist, they are the same file.
#[test]
fn vector_copies_agree() {
    if let (Ok(a), Ok(b)) = (std::fs::read(SHARED_VECTORS), std::fs::read(REPO_VECTORS)) {
        assert_eq!(a, b, "the shared and in-repo known-answers.json differ");
    }
}

/// Our JSON field name for a vector's field name.
fn our_field(name: &str) -> &str {
    match name {
        // SessionRequest's first u32: we call it what soe-wire calls it.
        "protocol_version_or_crc_bytes" => "protocol_version",
        other => other,
    }
}

/// Each `packets` vector decodes to its fields.
#[test]
fn packet_vectors_decode_to_their_fields() {
    let v = vectors();
    let packets = v["packets"].as_array().unwrap();
    assert!(!packets.is_empty());
    for vector in packets {
        let run = soe(&["--json", vector["hex"].as_str().unwrap()], None);
        assert!(run.ok(), "{}", run.stderr);
        let records = run.of_type("datagram");
        assert_eq!(records.len(), 1);
        let packet = &records[0]["packet"];
        assert_eq!(packet["name"], vector["name"]);
        assert_eq!(records[0]["crc"]["verdict"], "none", "contextless: no CRC");
        for (name, expected) in vector["fields"].as_object().unwrap() {
            assert_eq!(
                &packet["fields"][our_field(name)],
                expected,
                "{} field {name}",
                vector["name"]
            );
        }
        // the tree names the packet too
        let tree = soe(&[vector["hex"].as_str().unwrap()], None);
        assert!(tree.ok());
        assert!(tree.stdout.contains(vector["name"].as_str().unwrap()));
    }
}

/// The datagram of a CRC vector and the trailer length it was made for, when it has one.
fn crc_datagram(vector: &Value) -> Option<(String, &'static str)> {
    let data = vector["data"].as_str().unwrap();
    if let Some(crc16) = vector["crc16"].as_str() {
        return Some((format!("{data}{crc16}"), "2"));
    }
    let note = vector["note"].as_str().unwrap_or_default();
    let crc = vector["crc"].as_str().unwrap();
    if note.contains("low 2 bytes") {
        return Some((format!("{data}{}", &crc[4..]), "2"));
    }
    Some((format!("{data}{crc}"), "4"))
}

/// `hex` with one bit of byte `at` flipped.
fn flip(hex: &str, at: usize) -> String {
    let mut bytes = hex::decode(hex).unwrap();
    bytes[at] ^= 0x01;
    hex::encode(bytes)
}

/// Each CRC vector checks ok with its seed and length, and bad once a byte is flipped.
#[test]
fn crc_vectors_check_ok_and_flipped_bad() {
    let v = vectors();
    for vector in v["crc32"].as_array().unwrap() {
        let (datagram, length) = crc_datagram(vector).unwrap();
        let seed = vector["seed"].as_u64().unwrap().to_string();
        let data = hex::decode(vector["data"].as_str().unwrap()).unwrap();
        // Vectors from compressed sessions carry the (zero) compression flag after the
        // opcode: `00 0d 00 ...` and `00 15 00 ...` (a bare ack is 4 bytes, a MultiPacket's
        // third byte is a length).
        let compress = data.len() > 4 && data[2] == 0x00;
        let mut args = vec!["--json", "--crc-seed", &seed, "--crc-length", length];
        if compress {
            args.push("--compress");
        }
        args.push(&datagram);
        let run = soe(&args, None);
        assert!(run.ok(), "{}", run.stderr);
        let record = &run.of_type("datagram")[0];
        assert_eq!(record["crc"]["verdict"], "ok", "{vector}");
        let packet = &record["packet"];
        assert_eq!(packet["opcode"], u64::from(data[1]), "{vector}");
        match data[1] {
            0x03 => {
                let names: Vec<&str> = packet["children"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|c| c["name"].as_str().unwrap())
                    .collect();
                assert_eq!(names, ["AcknowledgeAll", "ReliableData"]);
                let data = &packet["children"][1];
                assert_eq!(data["fields"]["group_items"], 3);
                assert_eq!(data["reliable"]["status"], "delivered");
            }
            0x0D => {
                let r = &packet["reliable"];
                assert_eq!(r["position"], "first");
                assert_eq!(r["total_len"], 1407);
                assert_eq!(packet["error"], Value::Null);
            }
            0x11 | 0x15 => {
                assert_eq!(packet["error"], Value::Null, "{vector}");
                assert!(packet["fields"]["sequence"].is_u64());
            }
            op => panic!("no expectation for opcode {op:#x}"),
        }
        if data[1] == 0x11 {
            assert_eq!(packet["name"], "Acknowledge");
            assert_eq!(packet["fields"]["sequence"], 1);
        }

        // one flipped byte: bad CRC, still decoded, exit 0
        let bad = flip(&datagram, data.len() - 1);
        let last = args.len() - 1;
        args[last] = &bad;
        let run = soe(&args, None);
        assert!(run.ok(), "{}", run.stderr);
        let record = &run.of_type("datagram")[0];
        assert_eq!(record["crc"]["verdict"], "bad", "{vector}");
        assert_ne!(record["crc"]["expected"], record["crc"]["found"]);
        assert_eq!(record["packet"]["opcode"], u64::from(data[1]));
        let tree = soe(
            &args[..last]
                .iter()
                .copied()
                .filter(|a| *a != "--json")
                .chain([bad.as_str()])
                .collect::<Vec<_>>(),
            None,
        );
        assert!(tree.ok());
        assert!(tree.stdout.contains("crc=BAD"), "{}", tree.stdout);
    }
}

/// Each RC4 vector, sent as reliable data, decrypts to its plaintext.
#[test]
fn rc4_vectors_decrypt_through_reliable_data() {
    let v = vectors();
    for vector in v["rc4"].as_array().unwrap() {
        let key = match (vector["key_base64"].as_str(), vector["key_ascii"].as_str()) {
            (Some(b64), _) => b64.to_owned(),
            (None, Some(ascii)) => base64::engine::general_purpose::STANDARD.encode(ascii),
            _ => panic!("no key in {vector}"),
        };
        let plaintext = match (
            vector["plaintext"].as_str(),
            vector["plaintext_ascii"].as_str(),
        ) {
            (Some(hex), _) => hex.to_owned(),
            (None, Some(ascii)) => hex::encode(ascii),
            _ => panic!("no plaintext in {vector}"),
        };
        let ciphertext = vector["ciphertext"].as_str().unwrap();
        // ReliableData, sequence 0, the ciphertext escaped when it starts with a zero byte
        let escape = if ciphertext.starts_with("00") {
            "00"
        } else {
            ""
        };
        let datagram = format!("00090000{escape}{ciphertext}");
        let run = soe(
            &["--json", "--crc-length", "0", "--rc4-key", &key, &datagram],
            None,
        );
        assert!(run.ok(), "{}", run.stderr);
        let record = &run.of_type("datagram")[0];
        assert_eq!(record["crc"]["verdict"], "none");
        let messages = record["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 1, "{vector}");
        assert_eq!(messages[0]["hex"], plaintext.as_str(), "{vector}");
        assert_eq!(messages[0]["decrypted"], true);
    }
}

/// An unknown opcode is shown, not fatal; `-` reads datagrams from stdin.
#[test]
fn unknown_opcode_and_stdin() {
    let run = soe(&["00ff0102"], None);
    assert!(run.ok(), "{}", run.stderr);
    assert!(run.stdout.contains("Unknown (0xff)"), "{}", run.stdout);
    assert!(run.stdout.contains("crc=unknown"), "{}", run.stdout);
    let run = soe(&["--json", "00ff0102"], None);
    let record = &run.of_type("datagram")[0];
    assert_eq!(record["packet"]["name"], "Unknown");
    assert_eq!(record["packet"]["opcode"], 255);
    assert!(record["packet"]["error"].is_string());
    let session = &run.of_type("session")[0];
    assert_eq!(session["directions"][0]["unknown_opcodes"], 1);

    // `-`: one datagram per line, blank lines and comments skipped
    let input = b"# a heartbeat and an ack\n00 06 00 00\n\n00:15:00:01:8e:64\n";
    let run = soe(&["--json", "--crc-seed", "0", "-"], Some(input));
    assert!(run.ok(), "{}", run.stderr);
    let records = run.of_type("datagram");
    assert_eq!(records.len(), 2);
    assert_eq!(records[0]["packet"]["name"], "Heartbeat");
    assert_eq!(records[1]["packet"]["name"], "AcknowledgeAll");
    assert_eq!(records[1]["crc"]["verdict"], "ok");
}

/// Every bad input fails with a message naming the problem, never a panic.
#[test]
fn bad_inputs_fail_clearly() {
    fails(&["001"], None, "odd number of hex digits");
    fails(&["0006", "00zz"], None, "argument 2");
    fails(&["00zz"], None, "not a hex digit");
    fails(&[], None, "nothing to decode");
    fails(&["-"], Some(b""), "stdin held no hex datagrams");
    fails(&["-"], Some(b"0006\nxyz\n"), "stdin line 2");
    fails(
        &["--rc4-key", "!!!not base64", "0006"],
        None,
        "not valid base64",
    );
    fails(&["--rc4-key", "", "0006"], None, "1 to 256 bytes");
    fails(&["--crc-length", "7", "0006"], None, "CRC length");
    fails(&["--crc-seed", "zz", "0006"], None, "CRC seed");
    let dir = temp_dir("bad");
    fails(
        &["--pcap", dir.join("missing.pcap").to_str().unwrap()],
        None,
        "cannot open",
    );
    let text = dir.join("notes.txt");
    std::fs::write(&text, "these are not packets\n").unwrap();
    fails(
        &["--pcap", text.to_str().unwrap()],
        None,
        "is not a pcap or pcapng capture",
    );
    let png = dir.join("image.png");
    std::fs::write(&png, b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR").unwrap();
    fails(
        &["--pcap", png.to_str().unwrap()],
        None,
        "is not a pcap or pcapng capture",
    );
    let empty = dir.join("empty.pcap");
    std::fs::write(&empty, b"").unwrap();
    fails(&["--pcap", empty.to_str().unwrap()], None, "empty");
    // A capture cut short in its second record: the first datagram is shown, and the error
    // says what is wrong in our words, not the pcap library's.
    let cut = dir.join("cut.pcap");
    {
        let a: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:20042".parse().unwrap();
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        for payload in [
            &b"\x00\x15\x00\x00\x00\x01"[..],
            b"\x00\x15\x00\x00\x00\x02",
        ] {
            let f = frame(a, b, payload);
            w.write_packet(&PcapPacket::new(EPOCH, f.len() as u32, &f))
                .unwrap();
        }
        let mut bytes = w.into_writer();
        bytes.truncate(bytes.len() - 10);
        std::fs::write(&cut, bytes).unwrap();
    }
    let run = fails(
        &["--pcap", cut.to_str().unwrap()],
        None,
        "is truncated: record #2",
    );
    assert!(!run.stderr.contains("Need more"), "{}", run.stderr);
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    assert!(run.stdout.contains("AcknowledgeAll"), "{}", run.stdout);
    // hex and a capture at once
    let run = soe(&["--pcap", text.to_str().unwrap(), "0006"], None);
    assert!(!run.ok());
    assert!(run.stderr.contains("cannot be used with"), "{}", run.stderr);
    let _ = std::fs::remove_dir_all(dir);
}

/// A fresh directory for one test.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("soe-decode-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[path = "../../soe-dissect/tests/support/session_pair.rs"]
mod session_pair;
use session_pair::Recorded;

/// A client and a server session with RC4 and compression, joined by a 5 ms link that loses
/// a few of the server's datagrams; every datagram sent is recorded (as a capture point at the
/// senders would see them). Returns the records and what each side sent.
fn record_session() -> (Vec<Recorded>, Vec<Vec<u8>>, Vec<Vec<u8>>) {
    record(true)
}

/// [`record_session`], with RC4 or in plaintext.
fn record(encrypted: bool) -> (Vec<Recorded>, Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let key = base64::engine::general_purpose::STANDARD
        .decode(KEY)
        .unwrap();
    let mut config = SessionConfig::new("DecodeTest_1")
        .with_udp_length(512)
        .with_compression(true);
    if encrypted {
        config = config.with_encryption_key(Bytes::from(key)).unwrap();
    }
    let config = Arc::new(config);
    let pattern = |len: usize, salt: u8| -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt))
            .collect()
    };
    let text = |len: usize| -> Vec<u8> {
        b"the quick brown fox "
            .iter()
            .copied()
            .cycle()
            .take(len)
            .collect()
    };
    let mut to_server: Vec<Vec<u8>> = vec![
        b"hello".to_vec(),
        vec![0x00, 0x19, 0x01, 0x02],
        vec![0x00],
        text(40),
        pattern(300, 1),
        pattern(3000, 2),
        text(1200),
        pattern(5000, 3),
    ];
    to_server.extend((0..12).map(|i| format!("small {i}").into_bytes()));
    let mut to_client: Vec<Vec<u8>> = vec![
        b"welcome".to_vec(),
        pattern(3000, 4),
        vec![0x00, 0x00, 0x05],
        text(600),
    ];
    to_client.extend((0..10).map(|i| format!("tick {i}").into_bytes()));
    to_client.push(pattern(4000, 5));

    // The link loses the server's 3rd and 4th datagrams (data, resent later).
    let pair = session_pair::run(
        &config,
        &to_server,
        &to_client,
        |n| n == 3 || n == 4,
        200_000,
    );
    assert_eq!(
        pair.got_by_server, to_server,
        "the server received what the client sent"
    );
    assert_eq!(
        pair.got_by_client, to_client,
        "the client received what the server sent"
    );
    (pair.datagrams, to_server, to_client)
}

/// An Ethernet frame carrying a UDP datagram.
fn frame(src: SocketAddr, dst: SocketAddr, payload: &[u8]) -> Vec<u8> {
    let builder = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    let mut out = Vec::new();
    match (src, dst) {
        (SocketAddr::V4(s), SocketAddr::V4(d)) => builder
            .ipv4(s.ip().octets(), d.ip().octets(), 64)
            .udp(s.port(), d.port())
            .write(&mut out, payload)
            .unwrap(),
        (SocketAddr::V6(s), SocketAddr::V6(d)) => builder
            .ipv6(s.ip().octets(), d.ip().octets(), 64)
            .udp(s.port(), d.port())
            .write(&mut out, payload)
            .unwrap(),
        _ => panic!("mixed families"),
    }
    out
}

/// The capture time of the session start.
const EPOCH: Duration = Duration::from_secs(1_700_000_000);

/// Writes the records as a classic pcap (big-endian header, the pcap-file default), with an
/// unrelated UDP datagram (another port) mixed in first.
fn write_pcap(path: &Path, records: &[Recorded], client: SocketAddr, server: SocketAddr) {
    let file = std::fs::File::create(path).unwrap();
    let mut w = PcapWriter::new(file).unwrap();
    let other: SocketAddr = "192.0.2.9:53".parse().unwrap();
    let noise = frame(other, other, b"not ours");
    w.write_packet(&PcapPacket::new(EPOCH, noise.len() as u32, &noise))
        .unwrap();
    write_records(&mut w, records, client, server, Duration::ZERO);
}

/// Appends the records of one session to a classic pcap, `offset` after [`EPOCH`].
fn write_records<W: Write>(
    w: &mut PcapWriter<W>,
    records: &[Recorded],
    client: SocketAddr,
    server: SocketAddr,
    offset: Duration,
) {
    for r in records {
        let (src, dst) = if r.from_client {
            (client, server)
        } else {
            (server, client)
        };
        let f = frame(src, dst, &r.bytes);
        w.write_packet(&PcapPacket::new(EPOCH + offset + r.at, f.len() as u32, &f))
            .unwrap();
    }
}

/// Writes the records as pcapng with nanosecond timestamps.
fn write_pcapng(path: &Path, records: &[Recorded], client: SocketAddr, server: SocketAddr) {
    let file = std::fs::File::create(path).unwrap();
    let mut w = PcapNgWriter::new(file).unwrap();
    w.write_pcapng_block(InterfaceDescriptionBlock {
        linktype: DataLink::ETHERNET,
        snaplen: 0,
        options: vec![InterfaceDescriptionOption::IfTsResol(9)],
    })
    .unwrap();
    for r in records {
        let (src, dst) = if r.from_client {
            (client, server)
        } else {
            (server, client)
        };
        let f = frame(src, dst, &r.bytes);
        w.write_pcapng_block(EnhancedPacketBlock {
            interface_id: 0,
            timestamp: EPOCH + r.at,
            original_len: f.len() as u32,
            data: Cow::Owned(f),
            options: vec![],
        })
        .unwrap();
    }
}

/// The reliable messages of the records going one way, in order, as hex.
fn messages(records: &[Value], direction: &str) -> Vec<String> {
    records
        .iter()
        .filter(|r| r["direction"] == direction)
        .flat_map(|r| r["messages"].as_array().unwrap().clone())
        .map(|m| {
            assert_eq!(m["kind"], "reliable");
            assert_eq!(m["decrypted"], true);
            m["hex"].as_str().unwrap().to_owned()
        })
        .collect()
}

/// Checks a decode of the recorded session against what was sent.
fn check_decoded(run: &Run, recorded: &[Recorded], to_server: &[Vec<u8>], to_client: &[Vec<u8>]) {
    assert!(run.ok(), "{}", run.stderr);
    let records = run.of_type("datagram");
    assert_eq!(records.len(), recorded.len(), "every datagram dissected");
    for (r, rec) in records.iter().zip(recorded) {
        let expected = if rec.from_client {
            "client_to_server"
        } else {
            "server_to_client"
        };
        assert_eq!(r["direction"], expected);
        assert_eq!(r["len"], rec.bytes.len());
        let verdict = &r["crc"]["verdict"];
        match r["packet"]["opcode"].as_u64() {
            Some(1 | 2) => assert_eq!(verdict, "none"),
            _ => assert_eq!(verdict, "ok", "{r}"),
        }
        assert_eq!(r["error"], Value::Null, "{r}");
        assert_eq!(r["session"], 1);
    }
    let hexes = |list: &[Vec<u8>]| list.iter().map(hex::encode).collect::<Vec<_>>();
    assert_eq!(messages(&records, "client_to_server"), hexes(to_server));
    assert_eq!(messages(&records, "server_to_client"), hexes(to_client));
    // the server's lost datagrams were resent: flagged as resends
    let resends: u64 = records.iter().map(|r| r["resends"].as_u64().unwrap()).sum();
    assert!(resends >= 1, "no resend flagged");

    let sessions = run.of_type("session");
    assert_eq!(sessions.len(), 1);
    let s = &sessions[0];
    assert_eq!(s["application_protocol"], "DecodeTest_1");
    assert_eq!(s["crc_seed"], 0x6EC1_4BF6u32);
    assert_eq!(s["compression"], true);
    assert_eq!(s["framing_from"], "handshake");
    assert_eq!(s["disconnect"]["reason"], "Application");
    assert_eq!(s["disconnect"]["direction"], "client_to_server");
    let dirs = s["directions"].as_array().unwrap();
    assert_eq!(dirs.len(), 2);
    let count = |from_client: bool| {
        recorded
            .iter()
            .filter(|r| r.from_client == from_client)
            .count()
    };
    let bytes = |from_client: bool| -> usize {
        recorded
            .iter()
            .filter(|r| r.from_client == from_client)
            .map(|r| r.bytes.len())
            .sum()
    };
    for (d, from_client, sent) in [(&dirs[0], true, to_server), (&dirs[1], false, to_client)] {
        assert_eq!(
            d["direction"],
            if from_client {
                "client_to_server"
            } else {
                "server_to_client"
            }
        );
        assert_eq!(d["datagrams"], count(from_client));
        assert_eq!(d["bytes"], bytes(from_client));
        assert_eq!(d["messages"], sent.len());
        assert_eq!(d["message_bytes"], sent.iter().map(Vec::len).sum::<usize>());
        assert_eq!(d["crc_failures"], 0);
        assert_eq!(d["unknown_opcodes"], 0);
        assert_eq!(d["malformed"], 0);
        assert_eq!(d["dropped"], 0);
        assert!(d["reliable_packets"].as_u64().unwrap() >= sent.len() as u64 / 2);
        // every data packet was acknowledged by the other side, at least the 5 ms link delay later
        let rt = &d["round_trips"];
        assert!(rt["count"].as_u64().unwrap() > 0, "{d}");
        assert!(rt["min_ms"].as_f64().unwrap() >= 5.0 - 1e-9, "{d}");
    }
    assert!(dirs[1]["resends"].as_u64().unwrap() >= 1);
    assert!(
        dirs[0]["ack_alls"].as_u64().unwrap() + dirs[0]["acks"].as_u64().unwrap() > 0,
        "the client acknowledged"
    );
}

/// A session pair with RC4, compression, fragments, bundles and losses, captured as pcap and
/// pcapng, decodes to exactly what each side sent.
#[test]
fn a_recorded_session_decodes_to_what_was_sent() {
    let (recorded, to_server, to_client) = record_session();
    let dir = temp_dir("session");
    let client: SocketAddr = "127.0.0.1:40000".parse().unwrap();
    let server: SocketAddr = "127.0.0.1:20042".parse().unwrap();

    let pcap = dir.join("session.pcap");
    write_pcap(&pcap, &recorded, client, server);
    let run = soe(
        &[
            "--pcap",
            pcap.to_str().unwrap(),
            "--rc4-key",
            KEY,
            "--json",
            "--port",
            "20042",
        ],
        None,
    );
    check_decoded(&run, &recorded, &to_server, &to_client);
    let first = &run.of_type("datagram")[0];
    assert!((first["time"].as_f64().unwrap() - EPOCH.as_secs_f64()).abs() < 1e-3);

    // the same as pcapng over IPv6, with nanosecond timestamps
    let v6c: SocketAddr = "[::1]:40000".parse().unwrap();
    let v6s: SocketAddr = "[::1]:20042".parse().unwrap();
    let pcapng = dir.join("session.pcapng");
    write_pcapng(&pcapng, &recorded, v6c, v6s);
    let run = soe(
        &[
            "--pcap",
            pcapng.to_str().unwrap(),
            "--rc4-key",
            KEY,
            "--json",
        ],
        None,
    );
    check_decoded(&run, &recorded, &to_server, &to_client);
    let last = run.of_type("datagram").pop().unwrap();
    let expected = (EPOCH + recorded.last().unwrap().at).as_secs_f64();
    assert!(
        (last["time"].as_f64().unwrap() - expected).abs() < 1e-6,
        "{last}"
    );

    // the capture reordered: two of the server's fragments swapped, the decode is the same
    let mut swapped = recorded.clone();
    let k = swapped
        .iter()
        .position(|r| !r.from_client && r.bytes.len() > 400)
        .unwrap();
    assert!(!swapped[k + 1].from_client);
    swapped.swap(k, k + 1);
    let reordered = dir.join("reordered.pcap");
    write_pcap(&reordered, &swapped, client, server);
    let run = soe(
        &[
            "--pcap",
            reordered.to_str().unwrap(),
            "--rc4-key",
            KEY,
            "--json",
            "--port",
            "20042",
        ],
        None,
    );
    check_decoded(&run, &swapped, &to_server, &to_client);
    let stored = run.of_type("datagram")[k]["packet"]["reliable"]["status"].clone();
    assert_eq!(stored, "stored");

    // the tree form says the same, readably
    let run = soe(
        &[
            "--pcap",
            pcap.to_str().unwrap(),
            "--rc4-key",
            KEY,
            "--port",
            "40000",
        ],
        None,
    );
    assert!(run.ok(), "{}", run.stderr);
    assert!(
        run.stdout.contains("skipped 0 not UDP, 1 on other ports"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("(client->server)"));
    assert!(run.stdout.contains("SessionResponse (0x02)"));
    assert!(run.stdout.contains("RESEND"));
    assert!(run.stdout.contains("message reliable ch=0 seq="));
    assert!(
        run.stdout.contains("68656c6c6f \"hello\""),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("session 1: client 127.0.0.1:40000 <-> server 127.0.0.1:20042")
    );

    // without the key: the same structure, ciphertext messages
    let run = soe(
        &[
            "--pcap",
            pcap.to_str().unwrap(),
            "--json",
            "--port",
            "20042",
        ],
        None,
    );
    assert!(run.ok());
    let records = run.of_type("datagram");
    let count: usize = records
        .iter()
        .map(|r| r["messages"].as_array().unwrap().len())
        .sum();
    assert_eq!(count, to_server.len() + to_client.len());

    // cut mid-record: what was read is printed, then a clear failure
    let bytes = std::fs::read(&pcap).unwrap();
    let cut = dir.join("cut.pcap");
    std::fs::write(&cut, &bytes[..bytes.len() - 7]).unwrap();
    let run = fails(
        &[
            "--pcap",
            cut.to_str().unwrap(),
            "--rc4-key",
            KEY,
            "--json",
            "--port",
            "20042",
        ],
        None,
        "truncated",
    );
    assert!(
        run.stderr.contains("datagrams were read before it"),
        "{}",
        run.stderr
    );
    assert_eq!(run.of_type("datagram").len(), recorded.len() - 1);
    assert_eq!(run.of_type("session").len(), 1);
    let _ = std::fs::remove_dir_all(dir);
}

/// Two sessions in one capture, one with RC4 (server port 20042) and one in plaintext (server
/// port 20043): `--rc4-key 20042=KEY` decrypts the first and leaves the second alone; without
/// a key the first is said to look encrypted; a key for every port does not fit the second.
#[test]
fn a_key_per_server_port() {
    let (secret, secret_to_server, secret_to_client) = record(true);
    let (plain, plain_to_server, plain_to_client) = record(false);
    let dir = temp_dir("ports");
    let path = dir.join("two.pcap");
    {
        let file = std::fs::File::create(&path).unwrap();
        let mut w = PcapWriter::new(file).unwrap();
        let sessions = [
            (
                &secret,
                "127.0.0.1:40000",
                "127.0.0.1:20042",
                Duration::ZERO,
            ),
            (
                &plain,
                "127.0.0.1:40001",
                "127.0.0.1:20043",
                Duration::from_secs(60),
            ),
        ];
        for (records, client, server, offset) in sessions {
            let (client, server) = (client.parse().unwrap(), server.parse().unwrap());
            write_records(&mut w, records, client, server, offset);
        }
    }
    let pcap = path.to_str().unwrap();
    let hexes = |list: &[Vec<u8>]| list.iter().map(hex::encode).collect::<Vec<_>>();
    // The messages one way in one session, and the encryption verdict of each direction.
    let of_session = |run: &Run, session: u64, direction: &str| -> (Vec<String>, Vec<bool>) {
        run.of_type("datagram")
            .iter()
            .filter(|r| r["session"] == session && r["direction"] == direction)
            .flat_map(|r| r["messages"].as_array().unwrap().clone())
            .map(|m| {
                (
                    m["hex"].as_str().unwrap().to_owned(),
                    m["decrypted"] == true,
                )
            })
            .unzip()
    };
    let verdicts = |run: &Run, session: u64| -> Vec<String> {
        let summary = run
            .of_type("session")
            .into_iter()
            .find(|s| s["session"] == session)
            .unwrap_or_else(|| panic!("no summary of session {session}: {}", run.stdout));
        summary["directions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["encryption"].as_str().unwrap().to_owned())
            .collect()
    };

    let key_rule = format!("20042={KEY}");
    let run = soe(&["--pcap", pcap, "--rc4-key", &key_rule, "--json"], None);
    assert!(run.ok(), "{}", run.stderr);
    let (got, decrypted) = of_session(&run, 1, "client_to_server");
    assert_eq!(got, hexes(&secret_to_server));
    assert!(decrypted.iter().all(|&d| d));
    assert_eq!(
        of_session(&run, 1, "server_to_client").0,
        hexes(&secret_to_client)
    );
    let (got, decrypted) = of_session(&run, 2, "client_to_server");
    assert_eq!(got, hexes(&plain_to_server));
    assert!(
        decrypted.iter().all(|&d| !d),
        "no key applies to port 20043"
    );
    assert_eq!(
        of_session(&run, 2, "server_to_client").0,
        hexes(&plain_to_client)
    );
    assert_eq!(verdicts(&run, 1), ["decrypted", "decrypted"]);
    assert!(
        !verdicts(&run, 2).iter().any(|v| v.contains("encrypted")),
        "{:?}",
        verdicts(&run, 2)
    );

    // No key: the RC4 session looks encrypted, and the text summary says what to do.
    let run = soe(&["--pcap", pcap, "--json"], None);
    assert!(run.ok(), "{}", run.stderr);
    assert_eq!(verdicts(&run, 1), ["looks_encrypted", "looks_encrypted"]);
    let run = soe(&["--pcap", pcap], None);
    assert!(run.ok(), "{}", run.stderr);
    assert!(run.stdout.contains("looks encrypted"), "{}", run.stdout);

    // One key for every port: it decrypts the RC4 session and does not fit the plaintext one,
    // whose messages are then shown as sent.
    let run = soe(&["--pcap", pcap, "--rc4-key", KEY, "--json"], None);
    assert!(run.ok(), "{}", run.stderr);
    assert_eq!(
        of_session(&run, 1, "client_to_server").0,
        hexes(&secret_to_server)
    );
    assert!(
        verdicts(&run, 2).iter().any(|v| v == "key_does_not_fit"),
        "{:?}",
        verdicts(&run, 2)
    );

    // A port rule is checked when parsed.
    fails(&["--pcap", pcap, "--rc4-key", "70000=AAAA"], None, "port");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The sequences of the reliable data packets in a datagram record.
fn data_sequences(record: &Value) -> Vec<u64> {
    fn walk(node: &Value, out: &mut Vec<u64>) {
        if let Some(seq) = node["reliable"]["sequence"].as_u64() {
            out.push(seq);
        }
        for child in node["children"].as_array().into_iter().flatten() {
            walk(child, out);
        }
    }
    let mut out = Vec::new();
    walk(&record["packet"], &mut out);
    out
}

/// A capture that lost two of the server's data datagrams (the client received them): the
/// stream goes on past the gap, every message shown is one that was sent, and the summary
/// (text and JSON) says what the capture lost.
#[test]
fn a_capture_that_lost_packets_goes_on_past_the_gap() {
    let (recorded, _to_server, to_client) = record(false);
    let dir = temp_dir("gaps");
    let client: SocketAddr = "127.0.0.1:40000".parse().unwrap();
    let server: SocketAddr = "127.0.0.1:20042".parse().unwrap();
    let whole = dir.join("whole.pcap");
    write_pcap(&whole, &recorded, client, server);
    let port = ["--port", "20042"];
    let run = soe(
        &[
            "--pcap",
            whole.to_str().unwrap(),
            "--json",
            port[0],
            port[1],
        ],
        None,
    );
    assert!(run.ok(), "{}", run.stderr);
    let records = run.of_type("datagram");
    assert_eq!(records.len(), recorded.len());
    // Two of the server's datagrams with data, each sequence seen only there.
    let seen = |seq: u64| {
        records
            .iter()
            .filter(|r| r["direction"] == "server_to_client" && data_sequences(r).contains(&seq))
            .count()
    };
    let cut: Vec<usize> = (0..records.len())
        .filter(|&i| {
            let seqs = data_sequences(&records[i]);
            records[i]["direction"] == "server_to_client"
                && !seqs.is_empty()
                && seqs.iter().all(|&s| seen(s) == 1)
        })
        .skip(3)
        .take(2)
        .collect();
    assert_eq!(cut.len(), 2);
    let lost: usize = cut.iter().map(|&i| data_sequences(&records[i]).len()).sum();
    let kept: Vec<Recorded> = recorded
        .iter()
        .enumerate()
        .filter(|(i, _)| !cut.contains(i))
        .map(|(_, r)| r.clone())
        .collect();
    let path = dir.join("lossy.pcap");
    write_pcap(&path, &kept, client, server);
    let run = soe(
        &["--pcap", path.to_str().unwrap(), "--json", port[0], port[1]],
        None,
    );
    assert!(run.ok(), "{}", run.stderr);
    let mut shown: Vec<Vec<u8>> = Vec::new();
    for r in run
        .json()
        .iter()
        .filter(|r| r["type"] == "datagram" || r["type"] == "flush")
    {
        if r["direction"] == "server_to_client" {
            for m in r["messages"].as_array().unwrap() {
                shown.push(hex::decode(m["hex"].as_str().unwrap()).unwrap());
            }
        }
    }
    // nothing invented: what is shown is what was sent, in order, some left out
    let mut at = 0;
    for m in &shown {
        let found = to_client[at..]
            .iter()
            .position(|s| s == m)
            .unwrap_or_else(|| panic!("{} is no message sent", hex::encode(m)));
        at += found + 1;
    }
    assert!(shown.len() < to_client.len());
    assert_eq!(
        shown.last(),
        to_client.last(),
        "the stream went on to the end"
    );
    let session = &run.of_type("session")[0];
    let down = &session["directions"][1];
    assert_eq!(down["capture_lost_packets"], lost as u64, "{down}");
    assert!(down["capture_gaps"].as_u64().unwrap() >= 1, "{down}");
    assert!(down["gaps"][0]["first"].is_u64(), "{down}");
    assert!(down["unassembled_messages"].is_u64(), "{down}");
    assert!(down["unplaced_fragments"].is_u64(), "{down}");
    // the peers' own losses are told apart: resends, not capture losses
    assert!(down["resends"].as_u64().unwrap() >= 1, "{down}");
    let run = soe(&["--pcap", path.to_str().unwrap()], None);
    assert!(run.ok(), "{}", run.stderr);
    assert!(
        run.stdout
            .contains(&format!("lost to the capture: {lost} reliable packets")),
        "{}",
        run.stdout
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// A key applied to fewer than 256 bytes cannot be judged: the message is not called
/// decrypted, and the summary says the verdict could not be reached.
#[test]
fn a_key_on_too_few_bytes_is_not_called_decrypted() {
    // "hello there", encrypted with another key than the one given.
    let other = base64::engine::general_purpose::STANDARD.encode(b"another key");
    let mut cipher = soe_crypto::Rc4::new(b"some key").unwrap();
    let mut data = b"hello there".to_vec();
    cipher.apply(&mut data);
    let datagram = format!("00090000{}", hex::encode(&data));
    let run = soe(&["--crc-length", "0", "--rc4-key", &other, &datagram], None);
    assert!(run.ok(), "{}", run.stderr);
    assert!(!run.stdout.contains("(decrypted)"), "{}", run.stdout);
    assert!(run.stdout.contains("too few bytes yet"), "{}", run.stdout);
    assert!(
        run.stdout.contains("whether it fits could not be told"),
        "{}",
        run.stdout
    );
    let run = soe(
        &[
            "--json",
            "--crc-length",
            "0",
            "--rc4-key",
            &other,
            &datagram,
        ],
        None,
    );
    let record = &run.of_type("datagram")[0];
    assert_eq!(record["messages"][0]["verdict"], "key_not_judged");
    let session = &run.of_type("session")[0];
    assert_eq!(session["directions"][0]["encryption"], "key_not_judged");
}

/// A session that turns RC4 on after its first message (as the H1Z1 gateway does after its
/// login request) decodes whole with `--rc4-after-first-message`: the first message as sent,
/// every later one decrypted, and the key judged to fit on the encrypted part.
#[test]
fn rc4_switched_on_after_the_first_message() {
    let key = base64::engine::general_purpose::STANDARD
        .decode(KEY)
        .unwrap();
    let config = SessionConfig::new("SwitchTest_1")
        .with_udp_length(512)
        .with_encryption_key(Bytes::from(key))
        .unwrap()
        .with_encryption_at_start(false);
    let line = |i: usize| format!("PlayerUpdate {i} position=12.5,0.0,-3.25;").into_bytes();
    let to_server: Vec<Vec<u8>> = (0..20).map(line).collect();
    let to_client: Vec<Vec<u8>> = (100..120).map(line).collect();
    let pair = session_pair::run_switching(
        &Arc::new(config),
        &to_server,
        &to_client,
        |_| false,
        200_000,
        true,
    );
    assert!(pair.got_by_server == to_server && pair.got_by_client == to_client);
    let dir = temp_dir("switch");
    let pcap = dir.join("switch.pcap");
    let (client, server): (SocketAddr, SocketAddr) = (
        "10.0.0.1:40000".parse().unwrap(),
        "10.0.0.2:20260".parse().unwrap(),
    );
    write_pcap(&pcap, &pair.datagrams, client, server);
    let path = pcap.to_str().unwrap();
    let run = soe(
        &[
            "--json",
            "--pcap",
            path,
            "--rc4-key",
            KEY,
            "--rc4-after-first-message",
        ],
        None,
    );
    assert!(run.ok(), "{}", run.stderr);
    let records = run.of_type("datagram");
    let hexes = |direction: &str| -> Vec<String> {
        records
            .iter()
            .filter(|r| r["direction"] == direction)
            .flat_map(|r| r["messages"].as_array().unwrap().clone())
            .map(|m| m["hex"].as_str().unwrap().to_owned())
            .collect()
    };
    let sent = |messages: &[Vec<u8>]| messages.iter().map(hex::encode).collect::<Vec<_>>();
    assert_eq!(hexes("client_to_server"), sent(&to_server));
    assert_eq!(hexes("server_to_client"), sent(&to_client));
    let ours = |run: &Run| {
        run.of_type("session")
            .into_iter()
            .find(|s| s["application_protocol"] == "SwitchTest_1")
            .unwrap()
    };
    let session = ours(&run);
    for direction in session["directions"].as_array().unwrap() {
        assert_eq!(direction["encryption"], "decrypted", "{direction}");
    }
    // Without the switch, the key is applied from the first message: garbage, then rejected.
    let run = soe(&["--json", "--pcap", path, "--rc4-key", KEY], None);
    let session = ours(&run);
    assert_ne!(session["directions"][0]["encryption"], "decrypted");
    let _ = std::fs::remove_dir_all(dir);
}
