//! Property tests: every packet type, both varints, both bundle writers, the zero-escape and the
//! framing round-trip, and a corrupted CRC never opens.

use proptest::prelude::*;
use soe_wire::{
    Ack, Channel, CrcLength, Disconnect, DisconnectReason, FrameConfig, Framer, Group, GroupWriter,
    MultiPacket, MultiPacketWriter, NetStatusRequest, NetStatusResponse, Ordered, Packet,
    ReliableData, ReliablePayload, RemapConnection, SessionRequest, SessionResponse, WireError,
    reliable, varint,
};

/// The owned parts of a packet, so proptest can generate and shrink it.
#[derive(Debug, Clone)]
enum Spec {
    SessionRequest(u32, u32, u32, Vec<u8>),
    SessionResponse(u32, u32, u8, u8, u8, u32, u32),
    MultiPacket(Vec<u8>),
    Disconnect(u32, u16),
    Heartbeat,
    NetStatusRequest(u16, [u32; 5], u64, u64),
    NetStatusResponse(u16, u32, [u64; 4]),
    ReliableData(u8, u16, Vec<u8>),
    ReliableDataFragment(u8, u16, Vec<u8>),
    Acknowledge(u8, u16),
    AcknowledgeAll(u8, u16),
    Group(Vec<u8>),
    Ordered(u16, Vec<u8>),
    Ordered2(u16, Vec<u8>),
    PortAlive(Vec<u8>),
    UnknownSender,
    RemapConnection(u32, u32),
    Unreliable(u8, Vec<u8>),
}

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..max)
}

fn spec() -> impl Strategy<Value = Spec> {
    let name = prop::collection::vec(1..=255u8, 0..40);
    prop_oneof![
        (any::<u32>(), any::<u32>(), any::<u32>(), name)
            .prop_map(|(a, b, c, n)| Spec::SessionRequest(a, b, c, n)),
        (
            any::<u32>(),
            any::<u32>(),
            any::<u8>(),
            any::<u8>(),
            any::<u8>(),
            any::<u32>(),
            any::<u32>()
        )
            .prop_map(|(a, b, c, d, e, f, g)| Spec::SessionResponse(a, b, c, d, e, f, g)),
        bytes(600).prop_map(Spec::MultiPacket),
        (any::<u32>(), any::<u16>()).prop_map(|(a, b)| Spec::Disconnect(a, b)),
        Just(Spec::Heartbeat),
        (any::<u16>(), any::<[u32; 5]>(), any::<u64>(), any::<u64>())
            .prop_map(|(a, b, c, d)| Spec::NetStatusRequest(a, b, c, d)),
        (any::<u16>(), any::<u32>(), any::<[u64; 4]>())
            .prop_map(|(a, b, c)| Spec::NetStatusResponse(a, b, c)),
        (0..4u8, any::<u16>(), bytes(600)).prop_map(|(c, s, d)| Spec::ReliableData(c, s, d)),
        (0..4u8, any::<u16>(), bytes(600))
            .prop_map(|(c, s, d)| Spec::ReliableDataFragment(c, s, d)),
        (0..4u8, any::<u16>()).prop_map(|(c, s)| Spec::Acknowledge(c, s)),
        (0..4u8, any::<u16>()).prop_map(|(c, s)| Spec::AcknowledgeAll(c, s)),
        bytes(600).prop_map(Spec::Group),
        (any::<u16>(), bytes(300)).prop_map(|(s, d)| Spec::Ordered(s, d)),
        (any::<u16>(), bytes(300)).prop_map(|(s, d)| Spec::Ordered2(s, d)),
        bytes(50).prop_map(Spec::PortAlive),
        Just(Spec::UnknownSender),
        (any::<u32>(), any::<u32>()).prop_map(|(a, b)| Spec::RemapConnection(a, b)),
        (1..=255u8, bytes(300)).prop_map(|(f, d)| Spec::Unreliable(f, d)),
    ]
}

fn channel(c: u8) -> Channel {
    Channel::new(c).expect("channel 0..4")
}

/// Builds the packet; `scratch` holds the Unreliable bytes (first byte included).
fn packet<'a>(spec: &'a Spec, scratch: &'a mut Vec<u8>) -> Packet<'a> {
    match spec {
        Spec::SessionRequest(v, id, udp, name) => Packet::SessionRequest(SessionRequest {
            protocol_version: *v,
            session_id: *id,
            udp_length: *udp,
            application_protocol: name,
        }),
        Spec::SessionResponse(a, b, c, d, e, f, g) => Packet::SessionResponse(SessionResponse {
            session_id: *a,
            crc_seed: *b,
            crc_length: *c,
            compression: *d,
            encryption_method: *e,
            udp_length: *f,
            protocol_version: *g,
        }),
        Spec::MultiPacket(body) => Packet::MultiPacket(MultiPacket::new(body)),
        Spec::Disconnect(id, reason) => Packet::Disconnect(Disconnect {
            session_id: *id,
            reason: DisconnectReason::from_u16(*reason),
            bare: false,
        }),
        Spec::Heartbeat => Packet::Heartbeat,
        Spec::NetStatusRequest(tick, ms, sent, received) => {
            Packet::NetStatusRequest(NetStatusRequest {
                client_tick: *tick,
                last_update_ms: ms[0],
                average_update_ms: ms[1],
                shortest_update_ms: ms[2],
                longest_update_ms: ms[3],
                last_server_update_ms: ms[4],
                packets_sent: *sent,
                packets_received: *received,
            })
        }
        Spec::NetStatusResponse(tick, server, counts) => {
            Packet::NetStatusResponse(NetStatusResponse {
                client_tick: *tick,
                server_tick: *server,
                client_packets_sent: counts[0],
                client_packets_received: counts[1],
                server_packets_sent: counts[2],
                server_packets_received: counts[3],
            })
        }
        Spec::ReliableData(c, seq, data) => Packet::ReliableData(ReliableData {
            channel: channel(*c),
            sequence: *seq,
            data,
        }),
        Spec::ReliableDataFragment(c, seq, data) => Packet::ReliableDataFragment(ReliableData {
            channel: channel(*c),
            sequence: *seq,
            data,
        }),
        Spec::Acknowledge(c, seq) => Packet::Acknowledge(Ack {
            channel: channel(*c),
            sequence: *seq,
        }),
        Spec::AcknowledgeAll(c, seq) => Packet::AcknowledgeAll(Ack {
            channel: channel(*c),
            sequence: *seq,
        }),
        Spec::Group(body) => Packet::Group(Group::new(body)),
        Spec::Ordered(seq, data) => Packet::Ordered(Ordered {
            sequence: *seq,
            data,
        }),
        Spec::Ordered2(seq, data) => Packet::Ordered2(Ordered {
            sequence: *seq,
            data,
        }),
        Spec::PortAlive(body) => Packet::PortAlive(body),
        Spec::UnknownSender => Packet::UnknownSender,
        Spec::RemapConnection(id, seed) => Packet::RemapConnection(RemapConnection {
            session_id: *id,
            crc_seed: *seed,
        }),
        Spec::Unreliable(first, rest) => {
            scratch.clear();
            scratch.push(*first);
            scratch.extend_from_slice(rest);
            Packet::Unreliable(scratch)
        }
    }
}

fn encode(p: &Packet<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    assert_eq!(p.encode(&mut out), out.len());
    out
}

/// Writes a MultiPacket length in the wide forms other peers may send (test-only: our writer
/// sends only one byte). Lengths below 256 are never written wide (their u16 high byte would be
/// zero, which reads as a one-byte 255).
fn write_multi_wide(len: usize, out: &mut Vec<u8>) {
    assert!(len >= 0x100);
    if len < 0xFFFF {
        out.push(0xFF);
        out.extend_from_slice(&u16::try_from(len).unwrap().to_be_bytes());
    } else {
        out.extend_from_slice(&[0xFF; 3]);
        out.extend_from_slice(&u32::try_from(len).unwrap().to_be_bytes());
    }
}

fn group_len() -> impl Strategy<Value = usize> {
    prop_oneof![
        0..0x200usize,
        0xFF00..0x1_0100usize,
        Just(0xFFFE),
        Just(0xFFFF),
        Just(0x1_0000),
        0..=u32::MAX as usize,
    ]
}

fn frame_config() -> impl Strategy<Value = FrameConfig> {
    (any::<u32>(), 0..=4u8, any::<bool>()).prop_map(|(seed, crc, compression)| {
        FrameConfig::new(seed)
            .with_crc_length(CrcLength::new(crc).unwrap())
            .with_compression(compression)
    })
}

/// Bodies that deflate well (repeats) as often as bodies that do not.
fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        bytes(500),
        (prop::collection::vec(any::<u8>(), 1..8), 0..120usize).prop_map(|(unit, n)| unit
            .iter()
            .copied()
            .cycle()
            .take(unit.len() * n)
            .collect()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_packet_round_trips(spec in spec()) {
        let mut scratch = Vec::new();
        let p = packet(&spec, &mut scratch);
        let bytes = encode(&p);
        prop_assert_eq!(bytes.len(), p.encoded_len());
        let decoded = Packet::decode(&bytes);
        prop_assert_eq!(decoded.clone(), Ok(p));
        prop_assert_eq!(encode(&decoded.unwrap()), bytes.clone());
        prop_assert_eq!(p.opcode().map(|o| o.to_u16().to_be_bytes()), match p {
            Packet::Unreliable(_) => None,
            _ => Some([bytes[0], bytes[1]]),
        });
    }

    #[test]
    fn group_varint_round_trips(len in group_len(), tail in bytes(4)) {
        let mut out = Vec::new();
        let n = varint::write_group(len, &mut out);
        prop_assert_eq!(n, out.len());
        prop_assert_eq!(n, varint::group_len_size(len));
        out.extend_from_slice(&tail);
        prop_assert_eq!(varint::read_group(&out), Ok((len, n)));
        // every strict prefix of the length is truncated
        for cut in 0..n {
            let truncated = matches!(varint::read_group(&out[..cut]), Err(WireError::Truncated { .. }));
            prop_assert!(truncated);
        }
    }

    #[test]
    fn multi_varint_round_trips(len in 1..=0x1_0100usize, op_lo in any::<u8>()) {
        let mut out = Vec::new();
        let n = if len <= 0xFF {
            varint::write_multi(len, &mut out).unwrap()
        } else {
            prop_assert!(varint::write_multi(len, &mut out).is_err());
            write_multi_wide(len, &mut out);
            out.len()
        };
        // the sub-packet that follows starts with opcode high byte zero
        out.extend_from_slice(&[0x00, op_lo]);
        prop_assert_eq!(varint::read_multi(&out), Ok((len, n)));
    }

    #[test]
    fn multipacket_writer_and_iter(
        subs in prop::collection::vec((any::<u8>(), bytes(260)), 1..12),
        budget in 0..1500usize,
    ) {
        let mut writer = MultiPacketWriter::new(budget);
        let mut pushed: Vec<Vec<u8>> = Vec::new();
        for (op, body) in &subs {
            let sub: Vec<u8> = [&[0x00, *op][..], body].concat();
            let fits = writer.fits(sub.len());
            prop_assert_eq!(writer.push(&sub), fits);
            prop_assert_eq!(fits, (1..=255).contains(&sub.len()) && {
                let used: usize = 2 + pushed.iter().map(|s| s.len() + 1).sum::<usize>();
                used + 1 + sub.len() <= budget
            });
            if fits {
                pushed.push(sub);
            }
        }
        prop_assert_eq!(writer.count(), pushed.len());
        let mut out = vec![0xAB];
        let n = writer.finish(&mut out);
        prop_assert_eq!(n, out.len() - 1);
        prop_assert!(n <= budget);
        prop_assert!(writer.is_empty());
        let out = &out[1..];
        match pushed.len() {
            0 => prop_assert!(out.is_empty()),
            1 => prop_assert_eq!(out, &pushed[0][..]),
            _ => {
                let Ok(Packet::MultiPacket(multi)) = Packet::decode(out) else {
                    return Err(TestCaseError::fail("not a MultiPacket"));
                };
                let got: Vec<&[u8]> = multi.iter().collect::<Result<_, _>>().unwrap();
                let want: Vec<&[u8]> = pushed.iter().map(Vec::as_slice).collect();
                prop_assert_eq!(got, want);
            }
        }
    }

    #[test]
    fn multipacket_wide_lengths_read(lens in prop::collection::vec(1..700usize, 1..6)) {
        // a MultiPacket as a peer writing wide lengths would send it
        let mut body = Vec::new();
        let mut want = Vec::new();
        for (i, len) in lens.iter().enumerate() {
            let sub: Vec<u8> = [0x00, 0x09].into_iter().chain((0..*len).map(|j| (i + j) as u8)).collect();
            if sub.len() <= 0xFF {
                varint::write_multi(sub.len(), &mut body).unwrap();
            } else {
                write_multi_wide(sub.len(), &mut body);
            }
            body.extend_from_slice(&sub);
            want.push(sub);
        }
        let got: Vec<&[u8]> = MultiPacket::new(&body).iter().collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(got, want.iter().map(Vec::as_slice).collect::<Vec<_>>());
    }

    #[test]
    fn group_writer_and_iter(
        items in prop::collection::vec(bytes(400), 1..10),
        budget in 0..2000usize,
    ) {
        let mut writer = GroupWriter::new(budget);
        let mut pushed: Vec<Vec<u8>> = Vec::new();
        for message in &items {
            let mut item = Vec::new();
            reliable::escape_into(message, &mut item);
            let fits = writer.fits(item.len());
            prop_assert_eq!(writer.push(&item), fits);
            if fits {
                pushed.push(item);
            } else {
                prop_assert!(item.is_empty() || writer.len().max(2) + varint::group_len_size(item.len()) + item.len() > budget);
            }
        }
        let mut out = Vec::new();
        let n = writer.finish(&mut out);
        prop_assert_eq!(n, out.len());
        prop_assert!(n <= budget);
        match pushed.len() {
            0 => prop_assert!(out.is_empty()),
            1 => prop_assert_eq!(&out, &pushed[0]),
            _ => {
                let Ok(ReliablePayload::Group(group)) = ReliablePayload::decode(&out) else {
                    return Err(TestCaseError::fail("not a Group"));
                };
                let got: Vec<&[u8]> = group.iter().collect::<Result<_, _>>().unwrap();
                prop_assert_eq!(got, pushed.iter().map(Vec::as_slice).collect::<Vec<_>>());
                // each item unescapes to the message it came from
                for item in group.iter() {
                    let message = reliable::unescape(item.unwrap()).unwrap();
                    prop_assert!(items.iter().any(|m| m == message));
                }
            }
        }
    }

    #[test]
    fn escape_round_trips(message in prop_oneof![
        bytes(40),
        bytes(40).prop_map(|m| [&[0x00][..], &m].concat()),
        bytes(40).prop_map(|m| [&[0x00, 0x19][..], &m].concat()),
        bytes(40).prop_map(|m| [&[0x00, 0x00][..], &m].concat()),
    ]) {
        let mut escaped = Vec::new();
        reliable::escape_into(&message, &mut escaped);
        prop_assert_eq!(escaped.len(), reliable::escaped_len(&message));
        prop_assert_eq!(reliable::unescape(&escaped), Ok(&message[..]));
        prop_assert_eq!(ReliablePayload::decode(&escaped), Ok(ReliablePayload::Message(&message)));
    }

    #[test]
    fn framing_round_trips(
        config in frame_config(),
        op in prop_oneof![0x03..=0x1Cu16, Just(0x1D), Just(0x01)],
        body in body(),
        reuse in 1..3usize,
    ) {
        let mut framer = Framer::new(config);
        let packet: Vec<u8> = op.to_be_bytes().into_iter().chain(body.iter().copied()).collect();
        for _ in 0..reuse {
            let mut buf = vec![0x55; 3];
            buf.extend_from_slice(&packet);
            framer.seal(&mut buf, 3);
            prop_assert_eq!(&buf[..3], &[0x55; 3]);
            let datagram = buf.split_off(3);
            let contextless = matches!(op, 0x01 | 0x1D);
            if contextless {
                prop_assert_eq!(&datagram, &packet);
            } else {
                prop_assert!(datagram.len() <= packet.len() + framer.overhead());
            }
            prop_assert_eq!(framer.open(&datagram), Ok(&packet[..]));

            // a corrupted trailer never opens
            let crc_len = config.crc_length.get();
            if crc_len > 0 && !contextless {
                for bit in 0..8 * crc_len {
                    let mut bad = datagram.clone();
                    let at = bad.len() - crc_len + bit / 8;
                    bad[at] ^= 1 << (bit % 8);
                    let mismatch = matches!(framer.open(&bad), Err(WireError::CrcMismatch { .. }));
                    prop_assert!(mismatch);
                }
            }
        }
    }

    #[test]
    fn full_crc_catches_any_body_bit(
        seed in any::<u32>(),
        compression in any::<bool>(),
        body in body(),
        flip in any::<prop::sample::Index>(),
        bit in 0..8u8,
    ) {
        let mut framer = Framer::new(
            FrameConfig::new(seed).with_crc_length(CrcLength::FOUR).with_compression(compression),
        );
        let mut datagram = [&[0x00, 0x09, 0x00, 0x01][..], &body].concat();
        framer.seal(&mut datagram, 0);
        // any bit after the opcode (which decides the framing itself)
        let at = 2 + flip.index(datagram.len() - 2);
        datagram[at] ^= 1 << bit;
        let mismatch = matches!(framer.open(&datagram), Err(WireError::CrcMismatch { .. }));
        prop_assert!(mismatch);
    }

    #[test]
    fn compressed_bodies_are_standard_zlib(
        seed in any::<u32>(),
        unit in prop::collection::vec(any::<u8>(), 1..40),
        repeats in 1..60usize,
        noise in bytes(600),
    ) {
        // Repetitive text (matches at every distance the unit allows) followed by noise (no
        // matches), as game traffic mixes them.
        let body: Vec<u8> = unit.iter().copied().cycle().take(unit.len() * repeats)
            .chain(noise.iter().copied()).collect();
        let mut framer = Framer::new(
            FrameConfig::new(seed).with_crc_length(CrcLength::TWO).with_compression(true),
        );
        let mut datagram = [&[0x00, 0x09][..], &body].concat();
        framer.seal(&mut datagram, 0);
        if datagram[2] == 1 {
            // The deflated body (between the flag and the CRC) is a zlib stream any inflater reads.
            let deflated = &datagram[3..datagram.len() - 2];
            let inflated = miniz_oxide::inflate::decompress_to_vec_zlib(deflated);
            prop_assert_eq!(inflated.as_deref().ok(), Some(&body[..]));
            prop_assert!(deflated.len() < body.len());
        }
        prop_assert_eq!(framer.open(&datagram), Ok(&[&[0x00, 0x09][..], &body].concat()[..]));
    }

    #[test]
    fn unreliable_framing(config in frame_config(), first in 1..=255u8, rest in bytes(300)) {
        let mut framer = Framer::new(config);
        let message = [&[first][..], &rest].concat();
        let mut datagram = message.clone();
        framer.seal(&mut datagram, 0);
        prop_assert_eq!(datagram.len(), message.len() + config.crc_length.get());
        prop_assert_eq!(framer.open(&datagram), Ok(&message[..]));
    }
}

#[test]
fn budgets_are_exact() {
    // 2 (opcode) + 1 + 10 + 1 + 10 = 24
    let mut writer = MultiPacketWriter::new(24);
    assert!(writer.push(&[0; 10]));
    assert!(writer.push(&[0; 10]));
    assert!(!writer.fits(1));
    writer.set_budget(26);
    assert!(writer.fits(1));
    assert!(!writer.fits(2));
    assert!(!writer.fits(0));
    // a 255-byte sub-packet must start with a zero byte
    let mut writer = MultiPacketWriter::new(1000);
    assert!(!writer.push(&[1; 255]));
    assert!(writer.push(&[0; 255]));
    assert!(!writer.push(&[0; 256]));
    assert!(!writer.push_packet(&Packet::Unreliable(&[1; 255])));
    assert!(writer.push_packet(&Packet::Unreliable(&[1; 254])));
    assert_eq!(writer.count(), 2);

    let mut group = GroupWriter::new(2 + 1 + 5 + 3 + 255);
    assert!(group.push(&[1; 5]));
    assert!(!group.fits(256));
    assert!(group.fits(255));
    assert!(!group.fits(0));
    assert!(!group.push(&[]));
    assert!(group.push(&[2; 255]));
    let mut out = Vec::new();
    assert_eq!(group.finish(&mut out), 2 + 1 + 5 + 3 + 255);
    assert_eq!(&out[..3], &[0x00, 0x19, 5]);
    assert_eq!(&out[8..11], &[0xFF, 0x00, 0xFF]);
}

#[test]
fn bundle_errors_stop_iteration() {
    // a zero length
    let mut it = MultiPacket::new(&[2, 0, 6, 0, 9, 9]).iter();
    assert_eq!(it.next(), Some(Ok(&[0, 6][..])));
    assert_eq!(
        it.next(),
        Some(Err(WireError::EmptyEntry {
            what: "MultiPacket"
        }))
    );
    assert_eq!(it.next(), None);
    // a length past the end
    let mut it = Group::new(&[3, 1, 2]).iter();
    assert_eq!(
        it.next(),
        Some(Err(WireError::Truncated {
            what: "Group item",
            needed: 3,
            got: 2
        }))
    );
    assert_eq!(it.next(), None);
    // a nested MultiPacket decodes as a packet but the typed walk rejects it
    let body = [4, 0, 3, 1, 0, 2, 0, 6];
    let multi = MultiPacket::new(&body);
    assert!(multi.iter().all(|s| s.is_ok()));
    let mut packets = multi.packets();
    assert_eq!(
        packets.next(),
        Some(Err(WireError::Nested {
            what: "MultiPacket",
            inside: "MultiPacket"
        }))
    );
    assert_eq!(packets.next(), None);
}
