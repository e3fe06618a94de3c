//! A seeded random-input run over the decoders: over a million random and mutated datagrams
//! through `soe_wire::fuzzing`, on stable, in every `cargo test`. Nothing may panic (the entry
//! points also assert the codec's round-trip promises on whatever decodes).
//!
//! The seed is printed; set `SOE_WIRE_SEED` to replay a run and `SOE_WIRE_ITERATIONS` to run
//! longer.

use soe_wire::{
    Ack, Channel, CrcLength, Disconnect, DisconnectReason, FrameConfig, Framer, GroupWriter,
    MultiPacketWriter, NetStatusRequest, Packet, ReliableData, SessionRequest, fuzzing, reliable,
};

/// A tiny xorshift64* generator: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn byte(&mut self) -> u8 {
        self.next() as u8
    }

    fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }

    fn fill(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.byte()).collect()
    }
}

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim();
    match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => v.parse().ok(),
    }
}

/// Valid datagrams of every shape, framed under the fuzzing entry point's configs (those without
/// CRC, so mutations reach the decoders) and a few with CRCs.
fn seeds(rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut packets: Vec<Vec<u8>> = Vec::new();
    let mut push = |p: Packet<'_>| {
        let mut out = Vec::new();
        p.encode(&mut out);
        packets.push(out);
    };
    push(Packet::SessionRequest(SessionRequest {
        protocol_version: 3,
        session_id: 0x3C17_8C63,
        udp_length: 512,
        application_protocol: b"LoginUdp_9",
    }));
    push(Packet::Disconnect(Disconnect {
        session_id: 7,
        reason: DisconnectReason::Application,
        bare: false,
    }));
    push(Packet::Heartbeat);
    push(Packet::NetStatusRequest(NetStatusRequest {
        client_tick: 9,
        packets_sent: 100,
        ..NetStatusRequest::default()
    }));
    for ch in Channel::ALL {
        push(Packet::Acknowledge(Ack {
            channel: ch,
            sequence: rng.next() as u16,
        }));
        push(Packet::AcknowledgeAll(Ack {
            channel: ch,
            sequence: rng.next() as u16,
        }));
    }
    let message = rng.fill(60);
    let mut fragment = vec![0, 0, 0x05, 0x7F];
    fragment.extend_from_slice(&message);
    push(Packet::ReliableDataFragment(ReliableData {
        channel: Channel::ZERO,
        sequence: 0,
        data: &fragment,
    }));
    push(Packet::Unreliable(b"\x42unreliable"));

    // a Group of escaped messages in a ReliableData, and both inside a MultiPacket
    let mut group = GroupWriter::new(496);
    let mut item = Vec::new();
    for len in [3usize, 40, 0, 300] {
        item.clear();
        let mut m = rng.fill(len.max(1));
        if rng.chance(2) {
            m[0] = 0;
        }
        reliable::escape_into(&m, &mut item);
        group.push(&item);
    }
    let mut payload = Vec::new();
    group.finish(&mut payload);
    push(Packet::ReliableData(ReliableData {
        channel: Channel::ZERO,
        sequence: 1,
        data: &payload,
    }));
    let mut small_group = GroupWriter::new(200);
    small_group.push(b"\x01abc");
    small_group.push(b"\x00\x00def");
    let mut small_payload = Vec::new();
    small_group.finish(&mut small_payload);
    let mut multi = MultiPacketWriter::new(512);
    multi.push_packet(&Packet::AcknowledgeAll(Ack {
        channel: Channel::ZERO,
        sequence: 0xCE,
    }));
    multi.push_packet(&Packet::ReliableData(ReliableData {
        channel: Channel::ZERO,
        sequence: 2,
        data: &small_payload,
    }));
    multi.push_packet(&Packet::Heartbeat);
    let mut multi_bytes = Vec::new();
    multi.finish(&mut multi_bytes);
    packets.push(multi_bytes);

    // frame each: raw, and with the flag (deflated when it pays) under no CRC, and with CRCs
    let mut out = Vec::new();
    let mut framers: Vec<Framer> = [
        (CrcLength::NONE, false),
        (CrcLength::NONE, true),
        (CrcLength::TWO, true),
        (CrcLength::FOUR, false),
    ]
    .into_iter()
    .map(|(crc, compression)| {
        Framer::new(
            FrameConfig::new(0x5EED_0001)
                .with_crc_length(crc)
                .with_compression(compression),
        )
    })
    .collect();
    for p in &packets {
        for framer in &mut framers {
            let mut d = p.clone();
            framer.seal(&mut d, 0);
            out.push(d);
        }
    }
    // a compressed MultiPacket of repetitive data, sure to be deflated
    let mut repetitive = vec![0x00, 0x03];
    for i in 0..4u8 {
        repetitive.extend_from_slice(&[60, 0x00, 0x09, 0x00, i]);
        repetitive.extend_from_slice(&[i; 56]);
    }
    let mut d = repetitive.clone();
    framers[1].seal(&mut d, 0);
    assert_eq!(d[2], 0x01, "deflated");
    out.push(d);
    out
}

fn mutate(rng: &mut Rng, d: &mut Vec<u8>) {
    for _ in 0..1 + rng.below(4) {
        match rng.below(8) {
            // bit flip
            0 | 1 if !d.is_empty() => {
                let at = rng.below(d.len());
                d[at] ^= 1 << rng.below(8);
            }
            // byte set to an interesting value (length bytes, markers)
            2 if !d.is_empty() => {
                let at = rng.below(d.len());
                d[at] = [0x00, 0x01, 0x19, 0xFE, 0xFF, 0x03, rng.byte()][rng.below(7)];
            }
            // truncation
            3 => {
                let keep = rng.below(d.len() + 1);
                d.truncate(keep);
            }
            // extension
            4 => {
                let extra = rng.below(40);
                for _ in 0..extra {
                    d.push(rng.byte());
                }
            }
            // a length-like byte just after the header, or an inserted 0xFF marker
            5 if d.len() > 2 => {
                let at = 2 + rng.below(d.len() - 2);
                if rng.chance(2) {
                    d.insert(at, 0xFF);
                } else {
                    d[at] = d[at].wrapping_add(rng.byte() % 5).wrapping_sub(2);
                }
            }
            // splice a random range out
            6 if d.len() > 4 => {
                let from = rng.below(d.len());
                let to = from + rng.below(d.len() - from);
                d.drain(from..to);
            }
            // the compression flag / opcode bytes
            _ if d.len() > 2 => {
                d[rng.below(3)] = rng.byte() % 0x22;
            }
            _ => d.push(rng.byte()),
        }
    }
}

#[test]
fn a_million_random_and_mutated_datagrams() {
    let seed = env_u64("SOE_WIRE_SEED").unwrap_or(0x5E3D_C0DE);
    let iterations = env_u64("SOE_WIRE_ITERATIONS").unwrap_or(1_000_000);
    println!("random_inputs: seed {seed:#x}, {iterations} datagrams (SOE_WIRE_SEED to replay)");
    eprintln!("random_inputs: seed {seed:#x}");
    let mut rng = Rng::new(seed);
    let seeds = seeds(&mut rng);
    assert!(seeds.len() > 50);
    let mut d = Vec::with_capacity(2048);
    for i in 0..iterations {
        d.clear();
        match rng.below(8) {
            // fully random, with a plausible opcode half the time
            0 => {
                let len = rng.below(80);
                d.extend((0..len).map(|_| rng.byte()));
                if d.len() >= 2 && rng.chance(2) {
                    d[0] = 0;
                    d[1] = rng.byte() % 0x20;
                }
            }
            // a valid datagram as is
            1 => d.extend_from_slice(&seeds[rng.below(seeds.len())]),
            // a mutated one
            _ => {
                d.extend_from_slice(&seeds[rng.below(seeds.len())]);
                mutate(&mut rng, &mut d);
            }
        }
        fuzzing::decode_datagram(&d);
        if i % 4 == 0 {
            let body = d.get(2..).unwrap_or_default();
            fuzzing::multipacket(body);
            fuzzing::group(body);
        }
    }
}
