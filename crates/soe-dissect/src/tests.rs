//! The dissector's unit tests: framing, reassembly, limits, keys.

use std::net::SocketAddr;
use std::time::Duration;

use soe_crypto::{CrcLength, Rc4};
use soe_wire::{
    Ack, Channel, FrameConfig, Framer, Packet, ReliableData, SessionRequest, SessionResponse,
};

use crate::fuzzing::XorShift;
use crate::*;

const WINDOW: u64 = 4096;
const MAX_STORED: usize = 4096;
const MAX_MESSAGE: usize = 4 * 1024 * 1024;

const SEED: u32 = 0x1234_5678;

fn client() -> SocketAddr {
    "10.0.0.1:40000".parse().unwrap()
}

fn server() -> SocketAddr {
    "10.0.0.2:20042".parse().unwrap()
}

fn framer(compression: bool) -> Framer {
    Framer::new(
        FrameConfig::new(SEED)
            .with_crc_length(CrcLength::TWO)
            .with_compression(compression),
    )
}

fn sealed(framer: &mut Framer, packet: &Packet<'_>) -> Vec<u8> {
    let mut buf = Vec::new();
    packet.encode(&mut buf);
    framer.seal(&mut buf, 0);
    buf
}

fn request() -> Vec<u8> {
    let mut buf = Vec::new();
    Packet::SessionRequest(SessionRequest {
        protocol_version: 3,
        session_id: 77,
        udp_length: 512,
        application_protocol: b"Test_1",
    })
    .encode(&mut buf);
    buf
}

fn response(compression: bool) -> Vec<u8> {
    let mut buf = Vec::new();
    Packet::SessionResponse(SessionResponse {
        session_id: 77,
        crc_seed: SEED,
        crc_length: 2,
        compression: u8::from(compression),
        encryption_method: 0,
        udp_length: 512,
        protocol_version: 3,
    })
    .encode(&mut buf);
    buf
}

/// A dissector that has seen the handshake.
fn connected(key: Option<&[u8]>, compression: bool) -> Dissector {
    let mut config = DissectConfig::new();
    if let Some(key) = key {
        config = config.with_key(None, key);
    }
    connected_with(config, compression)
}

/// A dissector with `config` that has seen the handshake.
fn connected_with(config: DissectConfig, compression: bool) -> Dissector {
    let mut d = Dissector::new(config);
    let r = d.dissect(Duration::ZERO, client(), server(), &request());
    assert_eq!(r.crc.verdict, CrcVerdict::None);
    assert_eq!(r.direction, Direction::ClientToServer);
    let r = d.dissect(Duration::ZERO, server(), client(), &response(compression));
    assert_eq!(r.direction, Direction::ServerToClient);
    d
}

fn data(seq: u16, bytes: &[u8]) -> Vec<u8> {
    sealed(
        &mut framer(false),
        &Packet::ReliableData(ReliableData {
            channel: Channel::ZERO,
            sequence: seq,
            data: bytes,
        }),
    )
}

fn fragment(seq: u16, bytes: &[u8]) -> Vec<u8> {
    sealed(
        &mut framer(false),
        &Packet::ReliableDataFragment(ReliableData {
            channel: Channel::ZERO,
            sequence: seq,
            data: bytes,
        }),
    )
}

fn hexes(r: &DatagramRecord) -> Vec<String> {
    r.messages.iter().map(|m| m.hex.clone()).collect()
}

#[test]
fn handshake_learns_the_framing() {
    let mut d = connected(None, true);
    let ack = sealed(
        &mut framer(true),
        &Packet::AcknowledgeAll(Ack {
            channel: Channel::ZERO,
            sequence: 3,
        }),
    );
    let r = d.dissect(Duration::ZERO, client(), server(), &ack);
    assert_eq!(r.crc.verdict, CrcVerdict::Ok);
    assert_eq!(r.packet.as_ref().unwrap().name, "AcknowledgeAll");
    let mut bad = ack.clone();
    *bad.last_mut().unwrap() ^= 1;
    let r = d.dissect(Duration::ZERO, client(), server(), &bad);
    assert_eq!(r.crc.verdict, CrcVerdict::Bad);
    assert_eq!(r.packet.as_ref().unwrap().name, "AcknowledgeAll");
    assert!(r.render().contains("crc=BAD (expected"));
    let s = &d.summaries()[0];
    assert_eq!(s.crc_seed, Some(SEED));
    assert_eq!(s.application_protocol.as_deref(), Some("Test_1"));
    assert_eq!(s.directions[0].stats.crc_failures, 1);
    assert_eq!(s.directions[0].stats.ack_alls, 1);
}

#[test]
fn resends_are_flagged_and_out_of_order_is_reordered() {
    let mut d = connected(None, false);
    let r = d.dissect(Duration::ZERO, server(), client(), &data(1, b"second"));
    assert!(r.messages.is_empty());
    assert_eq!(r.packet.unwrap().reliable.unwrap().status, "stored");
    let r = d.dissect(Duration::ZERO, server(), client(), &data(1, b"second"));
    let info = r.packet.as_ref().unwrap().reliable.clone().unwrap();
    assert!(info.resend);
    assert_eq!(info.status, "duplicate");
    assert_eq!(r.resends, 1);
    let r = d.dissect(Duration::ZERO, server(), client(), &data(0, b"first"));
    assert_eq!(hexes(&r), [hex::encode("first"), hex::encode("second")]);
    let r = d.dissect(Duration::ZERO, server(), client(), &data(0, b"first"));
    assert!(r.packet.as_ref().unwrap().reliable.as_ref().unwrap().resend);
    assert!(r.messages.is_empty());
    let s = &d.summaries()[0].directions[1];
    assert_eq!(s.direction, Direction::ServerToClient);
    assert_eq!(s.stats.resends, 2);
    assert_eq!(s.stats.messages, 2);
}

#[test]
fn fragments_reassemble_and_bad_crc_is_not_fed() {
    let mut d = connected(None, false);
    let message: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8 + 1).collect();
    let mut first = (message.len() as u32).to_be_bytes().to_vec();
    first.extend_from_slice(&message[..400]);
    let r = d.dissect(Duration::ZERO, client(), server(), &fragment(0, &first));
    let info = r.packet.unwrap().reliable.unwrap();
    assert_eq!((info.position, info.total_len), ("first", Some(1000)));
    // a corrupted copy of the next fragment changes nothing
    let mut bad = fragment(1, &message[400..800]);
    bad[5] ^= 0xFF;
    let r = d.dissect(Duration::ZERO, client(), server(), &bad);
    assert_eq!(r.crc.verdict, CrcVerdict::Bad);
    assert_eq!(r.packet.unwrap().reliable.unwrap().status, "not_fed");
    d.dissect(
        Duration::ZERO,
        client(),
        server(),
        &fragment(1, &message[400..800]),
    );
    let r = d.dissect(
        Duration::ZERO,
        client(),
        server(),
        &fragment(2, &message[800..]),
    );
    assert_eq!(hexes(&r), [hex::encode(&message)]);
    assert_eq!(r.packet.unwrap().reliable.unwrap().position, "continuation");
}

#[test]
fn rc4_runs_on_across_messages_and_skips_elicitors() {
    let key = b"secret key";
    let mut d = connected(Some(key), false);
    let mut cipher = Rc4::new(key).unwrap();
    let plain: [&[u8]; 3] = [b"one", b"\x00two", b"three"];
    let mut enc: Vec<Vec<u8>> = plain
        .iter()
        .map(|m| {
            let mut v = m.to_vec();
            cipher.apply(&mut v);
            v
        })
        .collect();
    // Group of the first two (escaped), then an elicitor, then the third alone.
    let mut group = vec![0x00, 0x19];
    for m in &enc[..2] {
        let mut item = Vec::new();
        soe_wire::reliable::escape_into(m, &mut item);
        group.push(item.len() as u8);
        group.extend_from_slice(&item);
    }
    let r = d.dissect(Duration::ZERO, server(), client(), &data(0, &group));
    assert_eq!(hexes(&r), [hex::encode(plain[0]), hex::encode(plain[1])]);
    let r = d.dissect(Duration::ZERO, server(), client(), &data(1, &[0x00, 0x19]));
    assert!(r.messages.is_empty());
    assert!(r.packet.unwrap().reliable.unwrap().ack_elicitor);
    let third = enc.pop().unwrap();
    let mut escaped = Vec::new();
    soe_wire::reliable::escape_into(&third, &mut escaped);
    let r = d.dissect(Duration::ZERO, server(), client(), &data(2, &escaped));
    assert_eq!(hexes(&r), [hex::encode(plain[2])]);
    assert!(r.messages[0].decrypted);
}

#[test]
fn round_trips_from_data_to_ack() {
    let mut d = connected(None, false);
    for seq in 0..3 {
        d.dissect(
            Duration::from_millis(u64::from(seq)),
            client(),
            server(),
            &data(seq, b"x"),
        );
    }
    let ack = sealed(
        &mut framer(false),
        &Packet::AcknowledgeAll(Ack {
            channel: Channel::ZERO,
            sequence: 2,
        }),
    );
    let r = d.dissect(Duration::from_millis(10), server(), client(), &ack);
    assert_eq!(
        r.packet.unwrap().fields.get("newly_acked"),
        Some(&FieldValue::Num(3))
    );
    let rt = d.summaries()[0].directions[0].stats.round_trips;
    assert_eq!(rt.count, 3);
    assert_eq!(rt.max_ms, Some(10.0));
    assert_eq!(rt.min_ms, Some(8.0));
}

#[test]
fn buffers_are_bounded() {
    // A gap window as wide as the buffer's, so that the buffer limits are what is reached.
    let limits = Limits {
        gap_window: WINDOW,
        ..Limits::default()
    };
    let mut d = connected_with(DissectConfig::new().with_limits(limits), false);
    let payload = [7u8; 16];
    let on = |channel: u8, seq: u16| {
        sealed(
            &mut framer(false),
            &Packet::ReliableData(ReliableData {
                channel: Channel::new(channel).unwrap(),
                sequence: seq,
                data: &payload,
            }),
        )
    };
    // the window: 4096 ahead of the next expected is not buffered
    let r = d.dissect(Duration::ZERO, client(), server(), &on(0, WINDOW as u16));
    assert_eq!(r.packet.unwrap().reliable.unwrap().status, "dropped");
    for seq in 1..WINDOW as u16 {
        let r = d.dissect(Duration::ZERO, client(), server(), &on(0, seq));
        assert_eq!(r.packet.unwrap().reliable.unwrap().status, "stored");
    }
    // the per-direction limit is shared by the channels
    let r = d.dissect(Duration::ZERO, client(), server(), &on(1, 1));
    assert_eq!(r.packet.unwrap().reliable.unwrap().status, "stored");
    let r = d.dissect(Duration::ZERO, client(), server(), &on(1, 2));
    assert_eq!(r.packet.unwrap().reliable.unwrap().status, "dropped");
    assert_eq!(d.buffered_bytes(), MAX_STORED * payload.len());
    // the gap fills: everything stored comes out at once, in order
    let r = d.dissect(Duration::ZERO, client(), server(), &on(0, 0));
    assert_eq!(r.messages.len(), WINDOW as usize);
    assert_eq!(d.buffered_bytes(), payload.len());

    // a first fragment claiming more than the limit is refused, nothing is held for it
    let mut first = ((MAX_MESSAGE as u32) * 2).to_be_bytes().to_vec();
    first.extend_from_slice(&payload);
    let r = d.dissect(
        Duration::ZERO,
        client(),
        server(),
        &fragment(WINDOW as u16, &first),
    );
    assert!(
        r.notes.iter().any(|n| n.contains("over the 4 MiB limit")),
        "{:?}",
        r.notes
    );
    assert_eq!(d.buffered_bytes(), payload.len());
    let s = &d.summaries()[0].directions[0].stats;
    assert_eq!(s.dropped, 3);
}

#[test]
fn unknown_seed_and_unknown_opcodes() {
    let mut d = Dissector::new(DissectConfig::default());
    let a: SocketAddr = "0.0.0.0:0".parse().unwrap();
    let r = d.dissect(Duration::ZERO, a, a, &[0x00, 0xFF, 0x01, 0x02]);
    assert_eq!(r.crc.verdict, CrcVerdict::Unknown);
    assert_eq!(r.direction, Direction::Unknown);
    let p = r.packet.unwrap();
    assert_eq!((p.name, p.opcode), ("Unknown", Some(0xFF)));
    assert!(p.error.is_some());
    // a CRC-less selective ack (h1z1-server)
    let r = d.dissect(Duration::ZERO, a, a, &[0x00, 0x11, 0x00, 0x01]);
    assert_eq!(r.crc.verdict, CrcVerdict::Missing);
    assert_eq!(r.packet.unwrap().name, "Acknowledge");
    assert_eq!(d.summaries()[0].directions.len(), 1);
    assert_eq!(d.summaries()[0].directions[0].stats.unknown_opcodes, 1);
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    for compression in [false, true] {
        let mut d = connected(Some(b"k"), compression);
        let mut f = framer(compression);
        let mut plain = Dissector::new(DissectConfig {
            crc_seed: Some(SEED),
            crc_length: Some((rng.next_u64() % 5) as u8),
            compression: Some(compression),
            ..DissectConfig::default()
        });
        for i in 0..10_000 {
            let len = (rng.next_u64() % 80) as usize;
            let mut bytes: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            match i % 4 {
                // plausible opcodes, valid CRC: reaches the state machine
                0 | 1 if len >= 2 => {
                    bytes[0] = 0;
                    bytes[1] = (rng.next_u64() % 0x20) as u8;
                    if bytes[1] == 0x0D || bytes[1] == 0x09 {
                        // small sequence numbers, so reassembly is exercised
                        if let Some(b) = bytes.get_mut(2) {
                            *b = 0;
                        }
                    }
                    f.seal(&mut bytes, 0);
                }
                2 => bytes.insert(0, 0),
                _ => {}
            }
            let t = Duration::from_micros(rng.next_u64() % 1_000_000);
            let (src, dst) = if i % 2 == 0 {
                (client(), server())
            } else {
                (server(), client())
            };
            let r = d.dissect(t, src, dst, &bytes);
            let _ = r.render();
            serde_json::to_string(&r).unwrap();
            let r = plain.dissect(t, src, dst, &bytes);
            let _ = r.render();
        }
        for s in d.summaries() {
            let _ = s.render();
            serde_json::to_string(&s).unwrap();
        }
    }
}

#[test]
fn a_message_over_the_reassembly_budget_is_skipped_and_its_bytes_released() {
    let limits = Limits {
        max_buffered: 1000,
        ..Limits::default()
    };
    let mut d = connected_with(DissectConfig::new().with_limits(limits), false);
    let (c, s) = (client(), server());
    let mut first = 3000u32.to_be_bytes().to_vec();
    first.extend([1u8; 400]);
    let r = d.dissect(Duration::ZERO, c, s, &fragment(0, &first));
    assert!(r.messages.is_empty());
    d.dissect(Duration::ZERO, c, s, &fragment(1, &[2; 400]));
    assert_eq!(d.buffered_bytes(), 800);
    // 1,200 bytes would pass the 1,000-byte budget: the message is skipped, its bytes freed.
    let r = d.dissect(Duration::ZERO, c, s, &fragment(2, &[3; 400]));
    assert!(
        r.render().contains("the reassembly budget"),
        "{}",
        r.render()
    );
    assert_eq!(d.buffered_bytes(), 0);
    // Its remaining 1,800 bytes are counted, not kept, up to its end.
    for seq in 3..7 {
        d.dissect(Duration::ZERO, c, s, &fragment(seq, &[4; 400]));
        assert_eq!(d.buffered_bytes(), 0);
    }
    let r = d.dissect(Duration::ZERO, c, s, &fragment(7, &[5; 200]));
    assert!(
        r.render()
            .contains("the end of a skipped message of 3000 bytes"),
        "{}",
        r.render()
    );
    // The stream goes on with the next message.
    let r = d.dissect(Duration::ZERO, c, s, &data(8, b"after"));
    assert_eq!(hexes(&r), vec![hex::encode(b"after")]);
    let stats = &d.summaries()[0].directions[0].stats;
    assert_eq!((stats.dropped, stats.messages), (1, 1));
}

/// An AcknowledgeAll from the client (the receiver of the server's data).
fn ack_all(seq: u16) -> Vec<u8> {
    sealed(
        &mut framer(false),
        &Packet::AcknowledgeAll(Ack {
            channel: Channel::ZERO,
            sequence: seq,
        }),
    )
}

/// A first fragment of a `total`-byte message carrying `bytes`.
fn first_fragment(seq: u16, total: u32, bytes: &[u8]) -> Vec<u8> {
    let mut data = total.to_be_bytes().to_vec();
    data.extend_from_slice(bytes);
    fragment(seq, &data)
}

#[test]
fn a_gap_the_receiver_acknowledged_is_given_up_and_the_stream_goes_on() {
    let mut d = connected(None, false);
    let (c, s) = (client(), server());
    d.dissect(Duration::ZERO, s, c, &data(0, b"zero"));
    // 1 and 2 never reach the capture; 3 and 4 wait behind them
    let r = d.dissect(Duration::ZERO, s, c, &data(3, b"three"));
    assert_eq!(r.packet.unwrap().reliable.unwrap().status, "stored");
    d.dissect(Duration::ZERO, s, c, &data(4, b"four"));
    // the client has everything through 4: 1 and 2 will not be sent again
    d.dissect(Duration::ZERO, c, s, &ack_all(4));
    let r = d.dissect(Duration::ZERO, s, c, &data(5, b"five"));
    assert_eq!(
        hexes(&r),
        [
            hex::encode("three"),
            hex::encode("four"),
            hex::encode("five")
        ]
    );
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("sequence 1 to 2 (2 packets) lost to the capture")),
        "{:?}",
        r.notes
    );
    let stats = &d.summaries()[0].directions[1].stats;
    assert_eq!((stats.capture_gaps, stats.capture_lost_packets), (1, 2));
    assert_eq!(stats.gaps[0].why, "acknowledged");
    assert_eq!(stats.messages, 4);
    let text = d.summaries()[0].render();
    assert!(
        text.contains("lost to the capture: 2 reliable packets in 1 gaps"),
        "{text}"
    );
}

#[test]
fn a_gap_a_window_behind_is_given_up_without_any_ack() {
    let limits = Limits {
        gap_window: 16,
        ..Limits::default()
    };
    let mut d = connected_with(DissectConfig::new().with_limits(limits), false);
    let (c, s) = (client(), server());
    d.dissect(Duration::ZERO, s, c, &data(0, b"m0"));
    let mut delivered = Vec::new();
    for seq in 3..=17u16 {
        let r = d.dissect(
            Duration::ZERO,
            s,
            c,
            &data(seq, format!("m{seq}").as_bytes()),
        );
        delivered.extend(hexes(&r));
        // held while the gap may still be filled
        assert!(delivered.is_empty(), "delivered at {seq}");
    }
    // 18 is 16 past 2: 1 and 2 can no longer come
    let r = d.dissect(Duration::ZERO, s, c, &data(18, b"m18"));
    delivered.extend(hexes(&r));
    let expected: Vec<String> = (3..=18).map(|i| hex::encode(format!("m{i}"))).collect();
    assert_eq!(delivered, expected);
    let stats = &d.summaries()[0].directions[1].stats;
    assert_eq!(stats.gaps[0].why, "window");
    assert_eq!((stats.gaps[0].first, stats.gaps[0].last), (1, 2));
}

#[test]
fn after_a_gap_a_fragment_is_placed_only_after_a_whole_packet() {
    let mut d = connected(None, false);
    let (c, s) = (client(), server());
    let big: Vec<u8> = (0..1000u32).map(|i| (i % 200) as u8 + 1).collect();
    // a fragmented message: 0 first, 1 lost, 2 continuation
    d.dissect(Duration::ZERO, s, c, &first_fragment(0, 1000, &big[..400]));
    d.dissect(Duration::ZERO, s, c, &fragment(2, &big[800..]));
    // then a 2-fragment message whose first fragment is also lost (3), its end at 4
    d.dissect(Duration::ZERO, s, c, &fragment(4, &[9; 100]));
    // a whole packet, then a message in two fragments
    d.dissect(Duration::ZERO, s, c, &data(5, b"whole"));
    d.dissect(Duration::ZERO, s, c, &first_fragment(6, 6, b"abc"));
    d.dissect(Duration::ZERO, s, c, &fragment(7, b"def"));
    d.dissect(Duration::ZERO, c, s, &ack_all(7));
    // the next packet from the server settles the gaps
    let r = d.dissect(Duration::ZERO, s, c, &data(8, b"after"));
    assert_eq!(
        hexes(&r),
        [
            hex::encode("whole"),
            hex::encode("abcdef"),
            hex::encode("after")
        ]
    );
    let stats = &d.summaries()[0].directions[1].stats;
    assert_eq!(stats.capture_lost_packets, 2);
    assert_eq!(stats.capture_gaps, 2);
    // the message cut at 1 is not reassembled; 2 and 4 cannot be placed
    assert_eq!(stats.unassembled_messages, 1);
    assert_eq!((stats.unplaced_fragments, stats.unplaced_bytes), (2, 300));
    assert_eq!(
        (
            stats.gaps[0].cut_message_len,
            stats.gaps[0].cut_message_seen
        ),
        (Some(1000), Some(400))
    );
    assert!(r.render().contains("not placed"), "{}", r.render());
}

#[test]
fn after_a_gap_an_encrypted_stream_is_shown_as_sent() {
    let key = b"secret key";
    let mut d = connected(Some(key), false);
    let (c, s) = (client(), server());
    let mut cipher = Rc4::new(key).unwrap();
    let sent: Vec<Vec<u8>> = (0..4)
        .map(|i| {
            let mut m = format!("message number {i}").into_bytes();
            cipher.apply(&mut m);
            m
        })
        .collect();
    let r = d.dissect(Duration::ZERO, s, c, &data(0, &sent[0]));
    assert_eq!(hexes(&r), [hex::encode("message number 0")]);
    assert!(r.messages[0].decrypted);
    // 1 lost to the capture, acknowledged by the client
    d.dissect(Duration::ZERO, s, c, &data(2, &sent[2]));
    d.dissect(Duration::ZERO, c, s, &ack_all(2));
    let r = d.dissect(Duration::ZERO, s, c, &data(3, &sent[3]));
    // the keystream's position is unknown after the gap: shown as sent, not decrypted
    assert_eq!(hexes(&r), [hex::encode(&sent[2]), hex::encode(&sent[3])]);
    assert!(r.messages.iter().all(|m| !m.decrypted));
    assert!(
        r.notes.iter().any(|n| n.contains("keystream")),
        "{:?}",
        r.notes
    );
}

#[test]
fn the_end_of_the_capture_gives_up_the_last_gaps() {
    let mut d = connected(None, false);
    let (c, s) = (client(), server());
    d.dissect(Duration::ZERO, s, c, &data(0, b"zero"));
    d.dissect(Duration::ZERO, s, c, &data(2, b"two"));
    d.dissect(Duration::ZERO, s, c, &first_fragment(3, 10, b"abcde"));
    let flushed = d.flush();
    assert_eq!(flushed.len(), 1);
    let f = &flushed[0];
    assert_eq!(f.direction, Direction::ServerToClient);
    assert_eq!(
        f.messages.iter().map(|m| m.hex.clone()).collect::<Vec<_>>(),
        [hex::encode("two")]
    );
    assert!(f.render().contains("the capture ended"), "{}", f.render());
    let stats = &d.summaries()[0].directions[1].stats;
    assert_eq!(stats.gaps[0].why, "capture_end");
    // the message whose end the capture did not hold is counted, not shown
    assert_eq!(stats.unassembled_messages, 1);
    assert_eq!(d.buffered_bytes(), 0);
    let json = serde_json::to_value(Record::Flush(f.clone())).unwrap();
    assert_eq!(json["type"], "flush");
}

#[test]
fn a_key_not_yet_judged_is_not_called_decrypted() {
    let key = b"secret key";
    let mut d = connected(Some(key), false);
    let mut wrong = Rc4::new(b"another key").unwrap();
    let mut m = b"hello there".to_vec();
    wrong.apply(&mut m);
    let r = d.dissect(Duration::ZERO, server(), client(), &data(0, &m));
    let text = r.render();
    assert!(!text.contains("(decrypted)"), "{text}");
    assert!(text.contains("too few bytes yet"), "{text}");
    assert_eq!(r.messages[0].verdict, Encryption::KeyNotJudged);
    let summary = d.summaries()[0].render();
    assert!(
        summary.contains("whether it fits could not be told"),
        "{summary}"
    );
}

#[test]
fn a_cumulative_ack_far_ahead_gives_up_only_up_to_the_highest_sequence_seen() {
    let mut d = connected(None, false);
    let (c, s) = (client(), server());
    let mut delivered = Vec::new();
    for seq in 0..9u16 {
        let r = d.dissect(
            Duration::ZERO,
            s,
            c,
            &data(seq, format!("m{seq}").as_bytes()),
        );
        delivered.extend(hexes(&r));
    }
    // the receiver acknowledges sequences it never received (LibSOE's server does)
    d.dissect(Duration::ZERO, c, s, &ack_all(1000));
    for seq in 9..20u16 {
        let r = d.dissect(
            Duration::ZERO,
            s,
            c,
            &data(seq, format!("m{seq}").as_bytes()),
        );
        assert_eq!(r.resends, 0, "sequence {seq} is no resend");
        delivered.extend(hexes(&r));
    }
    let expected: Vec<String> = (0..20).map(|i| hex::encode(format!("m{i}"))).collect();
    assert_eq!(delivered, expected);
    let stats = &d.summaries()[0].directions[1].stats;
    assert_eq!((stats.capture_gaps, stats.capture_lost_packets), (0, 0));
}

#[test]
fn an_unlisted_gap_that_grows_leaves_the_listed_ones_alone() {
    let limits = Limits {
        max_gaps_listed: 1,
        ..Limits::default()
    };
    let mut d = connected_with(DissectConfig::new().with_limits(limits), false);
    let (c, s) = (client(), server());
    d.dissect(Duration::ZERO, s, c, &data(0, b"m0"));
    // gap 1..=2, acknowledged (given up when the next packet comes): listed
    d.dissect(Duration::ZERO, s, c, &data(3, b"m3"));
    d.dissect(Duration::ZERO, c, s, &ack_all(3));
    d.dissect(Duration::ZERO, s, c, &data(4, b"m4"));
    // gap 5..=6, acknowledged: over the listing limit, counted only
    d.dissect(Duration::ZERO, s, c, &data(10, b"m10"));
    d.dissect(Duration::ZERO, c, s, &ack_all(6));
    d.dissect(Duration::ZERO, s, c, &data(11, b"m11"));
    // 7..=8 acknowledged next, with no packet delivered between: the unlisted gap grows
    d.dissect(Duration::ZERO, c, s, &ack_all(8));
    d.dissect(Duration::ZERO, s, c, &data(12, b"m12"));
    let stats = &d.summaries()[0].directions[1].stats;
    assert_eq!(stats.capture_gaps, 2);
    assert_eq!(stats.capture_lost_packets, 6);
    assert_eq!(stats.gaps.len(), 1);
    let listed = &stats.gaps[0];
    assert_eq!((listed.first, listed.last, listed.packets), (1, 2, 2));
}

/// A ciphertext as an encrypting peer sends it: a leading zero escaped with another.
fn escaped(mut m: Vec<u8>) -> Vec<u8> {
    if m.first() == Some(&0) {
        m.insert(0, 0);
    }
    m
}

#[test]
fn rc4_switched_on_after_the_first_message_decrypts_and_the_key_fits() {
    let key = b"gateway key";
    let config = DissectConfig::new()
        .with_key(None, key)
        .with_rc4_after_first_message(true);
    let mut d = connected_with(config, false);
    let (c, s) = (client(), server());
    let (mut to_server, mut to_client) = (Rc4::new(key).unwrap(), Rc4::new(key).unwrap());
    let login = b"LoginRequest character=Hunter server=12".to_vec();
    let r = d.dissect(Duration::ZERO, c, s, &data(0, &login));
    assert_eq!(hexes(&r), [hex::encode(&login)]);
    assert!(!r.messages[0].decrypted && !r.messages[0].encrypted);
    let plain = |i: u16| format!("PlayerUpdate {i} position=12.5,0.0,-3.25;").into_bytes();
    for seq in 1..=12u16 {
        let mut m = plain(seq);
        to_server.apply(&mut m);
        let r = d.dissect(Duration::ZERO, c, s, &data(seq, &escaped(m)));
        assert_eq!(
            hexes(&r),
            [hex::encode(plain(seq))],
            "client sequence {seq}"
        );
        assert!(r.messages[0].decrypted && r.messages[0].encrypted);
        let mut m = plain(100 + seq);
        to_client.apply(&mut m);
        let r = d.dissect(Duration::ZERO, s, c, &data(seq - 1, &escaped(m)));
        assert_eq!(hexes(&r), [hex::encode(plain(100 + seq))], "server {seq}");
    }
    for direction in &d.summaries()[0].directions {
        assert_eq!(
            direction.stats.encryption,
            Encryption::Decrypted,
            "{:?}",
            direction.direction
        );
    }
}

#[test]
fn an_oversized_datagram_with_a_bad_crc_is_called_a_gso_run() {
    let mut d = connected(None, false);
    // two 600-byte datagrams of a sender's GSO run, captured as one before segmentation
    let mut run = data(0, &[7; 597]);
    run.extend(data(1, &[8; 597]));
    let r = d.dissect(Duration::ZERO, server(), client(), &run);
    assert_eq!(r.crc.verdict, CrcVerdict::Bad);
    assert!(
        r.notes.iter().any(|n| n.contains("segmentation offload")),
        "{:?}",
        r.notes
    );
    // a datagram within the announced size whose CRC fails is only that
    let mut bad = data(1, b"short");
    let last = bad.len() - 1;
    bad[last] ^= 1;
    let r = d.dissect(Duration::ZERO, server(), client(), &bad);
    assert!(
        !r.notes.iter().any(|n| n.contains("segmentation")),
        "{:?}",
        r.notes
    );
}
