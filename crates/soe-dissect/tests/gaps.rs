//! A capture that lost packets does not stop the stream: a recorded session pair (soe-session
//! on both sides, in virtual time) with datagrams cut out of the capture after the fact (the
//! peers themselves received them). For each cut (a few packets, more than a window, the
//! middle of a fragmented message) the messages after the gap are delivered, the gap is
//! reported, and nothing is invented: every delivered message is byte-identical to one that
//! was sent, in the order it was sent.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use soe_dissect::{DatagramRecord, DirectionStats, DissectConfig, Dissector, PacketNode};
use soe_session::SessionConfig;

#[path = "support/session_pair.rs"]
mod session_pair;
use session_pair::Recorded;

/// The recorded session: every datagram each side sent, and the messages each side sent.
struct Recording {
    datagrams: Vec<Recorded>,
    to_server: Vec<Vec<u8>>,
    to_client: Vec<Vec<u8>>,
}

const EPOCH: Duration = Duration::from_secs(1_700_000_000);

fn client() -> SocketAddr {
    "10.0.0.1:40000".parse().unwrap()
}

fn server() -> SocketAddr {
    "10.0.0.2:20042".parse().unwrap()
}

/// Game-like bytes: a counter and a repeating text, `len` bytes.
fn message(i: usize, len: usize) -> Vec<u8> {
    let mut m = format!("message {i}: ").into_bytes();
    m.extend(b"position=12.5,0.0,-3.25; ".iter().cycle().take(len));
    m.truncate(len.max(1));
    m
}

/// What the server sends: mostly messages of a packet each, some small enough to bundle, and
/// every 40th a 3000-byte message that travels as several fragments.
fn server_messages() -> Vec<Vec<u8>> {
    (0..700)
        .map(|i| match i % 40 {
            7 => message(i, 3000),
            13..=15 => message(i, 40),
            _ => message(i, 300),
        })
        .collect()
}

/// A client and a server session, compression on, joined by a 5 ms link that loses nothing;
/// every datagram either side sent is recorded.
fn record() -> Recording {
    let config = Arc::new(
        SessionConfig::new("GapTest_1")
            .with_udp_length(512)
            .with_compression(true),
    );
    let to_server: Vec<Vec<u8>> = (0..20).map(|i| message(i, 100)).collect();
    let to_client = server_messages();
    let pair = session_pair::run(&config, &to_server, &to_client, |_| false, 1_000_000);
    assert_eq!(
        pair.got_by_server, to_server,
        "the server received what the client sent"
    );
    assert_eq!(
        pair.got_by_client, to_client,
        "the client received what the server sent"
    );
    Recording {
        datagrams: pair.datagrams,
        to_server,
        to_client,
    }
}

/// The reliable data packets of a record: (sequence, position).
fn data_packets(record: &DatagramRecord) -> Vec<(u16, &'static str)> {
    fn walk(node: &PacketNode, out: &mut Vec<(u16, &'static str)>) {
        if let Some(r) = &node.reliable {
            out.push((r.sequence, r.position));
        }
        for child in &node.children {
            walk(child, out);
        }
    }
    let mut out = Vec::new();
    if let Some(p) = &record.packet {
        walk(p, &mut out);
    }
    out
}

/// What decoding a capture gave, per direction (0: client to server, 1: server to client).
struct Decoded {
    /// The messages delivered, in order.
    messages: [Vec<Vec<u8>>; 2],
    /// The data packets of each datagram, by datagram index (kept ones only).
    packets: BTreeMap<usize, Vec<(u16, &'static str)>>,
    /// The summary counters.
    stats: [DirectionStats; 2],
}

/// Decodes the recorded datagrams that `keep` keeps, then ends the capture.
fn decode(rec: &Recording, keep: impl Fn(usize, &Recorded) -> bool) -> Decoded {
    let mut d = Dissector::new(DissectConfig::new());
    let mut out = Decoded {
        messages: [Vec::new(), Vec::new()],
        packets: BTreeMap::new(),
        stats: Default::default(),
    };
    for (i, r) in rec.datagrams.iter().enumerate() {
        if !keep(i, r) {
            continue;
        }
        let (src, dst) = if r.from_client {
            (client(), server())
        } else {
            (server(), client())
        };
        let record = d.dissect(EPOCH + r.at, src, dst, &r.bytes);
        assert_eq!(record.session, Some(1));
        let side = usize::from(!r.from_client);
        out.messages[side].extend(record.messages.iter().map(|m| hex::decode(&m.hex).unwrap()));
        out.packets.insert(i, data_packets(&record));
    }
    for flush in d.flush() {
        let side = usize::from(flush.src == server());
        out.messages[side].extend(flush.messages.iter().map(|m| hex::decode(&m.hex).unwrap()));
    }
    let summary = &d.summaries()[0];
    for (i, dir) in summary.directions.iter().enumerate() {
        out.stats[i] = dir.stats.clone();
        assert_eq!(dir.stats.messages as usize, out.messages[i].len());
    }
    out
}

/// Nothing invented: `delivered` is `sent` with some messages left out, in order, each
/// byte-identical. Returns the indexes in `sent` of the delivered messages.
fn subsequence(delivered: &[Vec<u8>], sent: &[Vec<u8>]) -> Vec<usize> {
    let mut at = 0;
    let mut indexes = Vec::new();
    for (k, m) in delivered.iter().enumerate() {
        let found = sent[at..].iter().position(|s| s == m).unwrap_or_else(|| {
            panic!(
                "delivered message {k} ({} bytes: {:?}) is no message sent after the last one \
                 matched",
                m.len(),
                String::from_utf8_lossy(&m[..m.len().min(40)])
            )
        });
        indexes.push(at + found);
        at += found + 1;
    }
    indexes
}

/// The server's data sequences in the datagrams `cut`, less those a kept datagram also holds
/// (a resend): what the capture lost of them.
fn lost_sequences(full: &Decoded, cut: &BTreeSet<usize>) -> BTreeSet<u16> {
    let mut lost = BTreeSet::new();
    let mut kept = BTreeSet::new();
    for (i, packets) in &full.packets {
        let seqs = packets.iter().map(|(s, _)| *s);
        if cut.contains(i) {
            lost.extend(seqs);
        } else {
            kept.extend(seqs);
        }
    }
    lost.retain(|s| !kept.contains(s));
    lost
}

/// The server's datagrams whose data packets include a sequence in `range`.
fn server_datagrams_with(
    rec: &Recording,
    full: &Decoded,
    range: std::ops::RangeInclusive<u16>,
) -> BTreeSet<usize> {
    full.packets
        .iter()
        .filter(|(i, packets)| {
            !rec.datagrams[**i].from_client && packets.iter().any(|(s, _)| range.contains(s))
        })
        .map(|(i, _)| *i)
        .collect()
}

/// The checks every cut shares: nothing invented, the gaps are the sequences cut, and every
/// message sent after the first whole packet past the last gap is delivered.
fn check_cut(rec: &Recording, full: &Decoded, cut: &BTreeSet<usize>) -> Decoded {
    let lost = lost_sequences(full, cut);
    assert!(!lost.is_empty());
    let got = decode(rec, |i, _| !cut.contains(&i));
    let stats = &got.stats[1];

    // nothing invented, nothing reordered
    let delivered = subsequence(&got.messages[1], &rec.to_client);
    // the client's messages were not touched
    assert_eq!(got.messages[0], rec.to_server);

    // the gaps are exactly the sequences the capture lost
    assert_eq!(stats.capture_lost_packets, lost.len() as u64);
    let in_gaps: BTreeSet<u16> = stats
        .gaps
        .iter()
        .flat_map(|g| (g.first..=g.last).collect::<Vec<_>>())
        .collect();
    assert_eq!(in_gaps, lost);
    assert_eq!(stats.capture_gaps, stats.gaps.len() as u64);
    for g in &stats.gaps {
        assert!(
            ["acknowledged", "window", "capture_end"].contains(&g.why),
            "{g:?}"
        );
    }
    // what the peers resent themselves is not counted as lost to the capture
    assert_eq!(full.stats[1].capture_lost_packets, 0);

    // The last 100 messages sent come after every gap cut here: all delivered.
    let n = rec.to_client.len();
    for k in n - 100..n {
        assert!(
            delivered.contains(&k),
            "message {k} after the gap is missing"
        );
    }
    got
}

#[test]
fn a_few_packets_lost_to_the_capture() {
    let rec = record();
    let full = decode(&rec, |_, _| true);
    // The whole capture decodes to what was sent, with no gap.
    assert_eq!(full.messages[1], rec.to_client);
    assert_eq!(full.stats[1].capture_gaps, 0);

    let cut = server_datagrams_with(&rec, &full, 100..=103);
    let got = check_cut(&rec, &full, &cut);
    let stats = &got.stats[1];
    assert_eq!(stats.capture_gaps, 1, "{:?}", stats.gaps);
    // a few messages are missing: those of the cut packets, and of fragments not placed
    let missing = rec.to_client.len() - got.messages[1].len();
    assert!((1..=12).contains(&missing), "{missing} messages missing");
}

#[test]
fn more_than_a_window_lost_to_the_capture_both_ways() {
    let rec = record();
    let full = decode(&rec, |_, _| true);
    // A capture outage: every datagram, both ways, while the server sent 200 to 520.
    let server_cut = server_datagrams_with(&rec, &full, 200..=520);
    let (first, last) = (
        *server_cut.iter().min().unwrap(),
        *server_cut.iter().max().unwrap(),
    );
    let cut: BTreeSet<usize> = (first..=last).collect();
    assert!(cut.iter().any(|&i| rec.datagrams[i].from_client));
    let got = check_cut(&rec, &full, &cut);
    let stats = &got.stats[1];
    assert!(stats.capture_lost_packets > 256, "{stats:?}");
    // one outage, one gap, however many datagrams gave it up
    assert_eq!(stats.capture_gaps, 1, "{:?}", stats.gaps);
    assert!(got.messages[1].len() > 250);
}

#[test]
fn the_middle_of_a_fragmented_message_lost_to_the_capture() {
    let rec = record();
    let full = decode(&rec, |_, _| true);
    // The server's datagram holding the second fragment of its first large message.
    let mut packets = full
        .packets
        .iter()
        .filter(|(i, _)| !rec.datagrams[**i].from_client)
        .flat_map(|(i, p)| p.iter().map(move |(s, pos)| (*s, *pos, *i)))
        .collect::<Vec<_>>();
    packets.sort();
    let first = packets
        .iter()
        .position(|(_, pos, _)| *pos == "first")
        .unwrap();
    let (second_seq, position, datagram) = packets[first + 1];
    assert_eq!(position, "continuation");
    let cut = BTreeSet::from([datagram]);
    let got = check_cut(&rec, &full, &cut);
    let stats = &got.stats[1];
    assert_eq!(stats.unassembled_messages, 1, "{stats:?}");
    let gap = &stats.gaps[0];
    assert_eq!((gap.first, gap.last), (second_seq, second_seq));
    assert_eq!(gap.cut_message_len, Some(3000));
    assert!(gap.cut_message_seen.is_some_and(|s| s > 0 && s < 3000));
    // the fragments after the gap, until the next whole packet, could not be placed
    assert!(stats.unplaced_fragments >= 1, "{stats:?}");
    // the large message is the only one missing
    let large = rec.to_client.iter().position(|m| m.len() == 3000).unwrap();
    let mut expected = rec.to_client.clone();
    expected.remove(large);
    assert_eq!(got.messages[1], expected);
}

#[test]
fn the_tail_lost_at_the_end_of_the_capture_is_released_by_flush() {
    let rec = record();
    let full = decode(&rec, |_, _| true);
    // Cut one of the server's last data datagrams and everything the client sent after it,
    // so no ack covers the gap: only the end of the capture gives it up.
    let last_data = *full
        .packets
        .iter()
        .filter(|(i, p)| !rec.datagrams[**i].from_client && !p.is_empty())
        .map(|(i, _)| i)
        .max()
        .unwrap();
    let earlier = *full
        .packets
        .iter()
        .filter(|(i, p)| !rec.datagrams[**i].from_client && !p.is_empty() && **i + 20 < last_data)
        .map(|(i, _)| i)
        .max()
        .unwrap();
    let cut: BTreeSet<usize> = std::iter::once(earlier)
        .chain((earlier..rec.datagrams.len()).filter(|&i| rec.datagrams[i].from_client))
        .collect();
    let mut d = Dissector::new(DissectConfig::new());
    for (i, r) in rec.datagrams.iter().enumerate() {
        if cut.contains(&i) {
            continue;
        }
        let (src, dst) = if r.from_client {
            (client(), server())
        } else {
            (server(), client())
        };
        d.dissect(EPOCH + r.at, src, dst, &r.bytes);
    }
    let before = d.summaries()[0].directions[1].stats.messages;
    let flushed = d.flush();
    let released: usize = flushed.iter().map(|f| f.messages.len()).sum();
    assert!(released > 0, "nothing released at the end");
    let after = &d.summaries()[0].directions[1].stats;
    assert_eq!(after.messages, before + released as u64);
    assert!(
        after.gaps.iter().any(|g| g.why == "capture_end"),
        "{:?}",
        after.gaps
    );
    assert!(flushed[0].render().contains("lost to the capture"));
    // a second flush has nothing more to say
    assert!(d.flush().is_empty());
}
