//! A flight recording of soe-session written as pcapng and read back by this crate's capture
//! reader: the raw datagrams with the endpoint's addresses, the messages as the session saw
//! them (decrypted), the framing first and the end last, and the key only when asked.

#[path = "support/lossy_pair.rs"]
mod lossy_pair;

use std::net::SocketAddr;
use std::time::{Duration, UNIX_EPOCH};

use bytes::Bytes;
use soe_dissect::Direction;
use soe_dissect::capture::{Captured, for_each_record};
use soe_dissect::export::kind;
use soe_dissect::recording::{RecordingOptions, RecordingView, write_recording};
use soe_session::recorder::Recorded;
use soe_session::{DisconnectReason, Event, SessionConfig};

const EPOCH: Duration = Duration::from_secs(1_700_000_000);
const KEY: &[u8] = b"0123456789abcdef";

#[test]
fn a_recording_reads_back_as_datagrams_and_messages() {
    let config = SessionConfig::new("Recorded_1")
        .with_encryption_key(Bytes::from_static(KEY))
        .unwrap();
    let run = lossy_pair::run(config, 20);
    let Event::Closed { reason, by_peer } = run.closed else {
        unreachable!()
    };
    println!(
        "ended: {reason:?}, {} bytes recorded",
        run.recording.as_bytes().len()
    );
    assert!(!by_peer);
    assert_eq!(run.recording.end(), Some((reason, false)));
    let server: SocketAddr = lossy_pair::SERVER.parse().unwrap();
    let client: SocketAddr = lossy_pair::CLIENT.parse().unwrap();
    let options = RecordingOptions::new(server, client).with_start(UNIX_EPOCH + EPOCH);
    let mut pcapng = Vec::new();
    let summary = write_recording(&mut pcapng, run.recording.as_bytes(), &options).unwrap();
    assert!(summary.ended);

    let mut datagrams = Vec::new();
    let mut pdus = Vec::new();
    let read = for_each_record(&pcapng[..], "recording".into(), None, |c| {
        match c {
            Captured::Datagram(d) => datagrams.push(d),
            Captured::Pdu(p) => pdus.push(p),
            _ => {}
        }
        true
    })
    .unwrap();
    assert!(read.stopped.is_none());
    assert_eq!(read.skipped(), 0);

    // The raw datagrams, each way, with the addresses and times recorded.
    let recorded: Vec<_> = run
        .recording
        .entries()
        .filter(|e| matches!(e.what, Recorded::Received { .. } | Recorded::Sent))
        .collect();
    assert_eq!(datagrams.len() as u64, summary.datagrams);
    assert_eq!(datagrams.len(), recorded.len());
    for (d, e) in datagrams.iter().zip(&recorded) {
        let inbound = matches!(e.what, Recorded::Received { .. });
        let (src, dst) = if inbound {
            (client, server)
        } else {
            (server, client)
        };
        assert_eq!((d.src, d.dst), (src, dst));
        assert_eq!(d.payload, e.data);
        assert_eq!(d.time, EPOCH + e.at);
    }

    // The framing first, the end last, the messages between.
    let (first, last) = (&pdus[0].pdu, &pdus[pdus.len() - 1].pdu);
    assert_eq!(first.header.kind, kind::SESSION);
    let framing = String::from_utf8(first.body.clone()).unwrap();
    assert!(framing.contains("side=server"), "{framing}");
    assert!(framing.contains("rc4_key=(not written)"), "{framing}");
    assert_eq!(last.header.kind, kind::DISCONNECT);
    assert_eq!(last.header.sequence, Some(reason.to_u16()));
    assert_eq!(last.body, format!("{reason:?}").as_bytes());
    assert_eq!(
        last.header.direction,
        Direction::ServerToClient,
        "this side ended it"
    );
    let messages: Vec<_> = pdus[1..pdus.len() - 1].iter().map(|p| &p.pdu).collect();
    assert_eq!(messages.len() as u64, summary.messages);
    let delivered: Vec<&[u8]> = messages
        .iter()
        .filter(|m| m.header.direction == Direction::ClientToServer)
        .map(|m| &m.body[..])
        .collect();
    let got: Vec<&[u8]> = run.got_by_server.iter().map(Vec::as_slice).collect();
    assert!(delivered.len() > 10);
    assert!(
        got.ends_with(&delivered),
        "the last messages the server got, decrypted"
    );
    assert!(
        messages
            .iter()
            .all(|m| m.header.flags & 0x18 == 0x18 && m.header.verdict == 4)
    );
    assert!(
        messages
            .iter()
            .all(|m| m.src.is_some() && m.protocol == "Recorded_1")
    );
    // Nothing of the key in the file.
    let hex_key = hex::encode(KEY);
    assert!(
        !pcapng
            .windows(hex_key.len())
            .any(|w| w == hex_key.as_bytes())
    );

    // Unless the host asks.
    let mut keyed = Vec::new();
    write_recording(&mut keyed, run.recording.as_bytes(), &options.with_key(KEY)).unwrap();
    assert!(
        keyed
            .windows(hex_key.len())
            .any(|w| w == hex_key.as_bytes())
    );
}

#[test]
fn bytes_that_are_no_recording_are_refused() {
    let options = RecordingOptions::new(
        "127.0.0.1:1".parse().unwrap(),
        "127.0.0.1:2".parse().unwrap(),
    );
    for bytes in [&b""[..], b"SOER", b"SOER\x02", b"XXXX\x01"] {
        assert!(write_recording(Vec::new(), bytes, &options).is_err());
    }
    assert!(RecordingView::parse(b"SOER\x01").is_err());
    let _ = DisconnectReason::Timeout;
}
