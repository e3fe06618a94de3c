//! Codec throughput: open+decode and seal of a full 512-byte reliable data datagram, a
//! MultiPacket of ten acks built and walked, a compressed 400-byte body sealed and opened, and a
//! 512-byte datagram compressed: sealed, opened, opened as a zlib client deflates it (dynamic
//! Huffman codes), and sealed when its body does not deflate.
//!
//! Quick run: `cargo bench -p soe-wire --bench wire -- --warm-up-time 1 --measurement-time 2`.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_main};
use soe_wire::{
    Ack, Channel, CrcLength, FrameConfig, Framer, MultiPacketWriter, Packet, ReliableData,
};

/// The session setup the PS2/H1Z1 login uses: 2-byte CRC, and compression on or off.
fn framer(compression: bool) -> Framer {
    Framer::new(
        FrameConfig::new(0x6EC1_4BF6)
            .with_crc_length(CrcLength::TWO)
            .with_compression(compression),
    )
}

/// Pseudo-random (incompressible) bytes, like encrypted game data.
fn noise(len: usize) -> Vec<u8> {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Game-like text that deflates well.
fn text(len: usize) -> Vec<u8> {
    b"{\"zone\":\"Indar\",\"player\":1234,\"x\":-102.5,\"y\":33.25,\"state\":\"moving\"}"
        .iter()
        .copied()
        .cycle()
        .take(len)
        .collect()
}

fn reliable_data(c: &mut Criterion) {
    let mut framer = framer(false);
    // 512 bytes on the wire: opcode 2 + sequence 2 + data 506 + CRC 2
    let data = noise(506);
    let packet = Packet::ReliableData(ReliableData {
        channel: Channel::ZERO,
        sequence: 42,
        data: &data,
    });
    let mut datagram = Vec::with_capacity(600);
    packet.encode(&mut datagram);
    framer.seal(&mut datagram, 0);
    assert_eq!(datagram.len(), 512);

    let mut group = c.benchmark_group("reliable_data_512");
    group.throughput(Throughput::Bytes(datagram.len() as u64));
    group.bench_function("open_decode", |b| {
        b.iter(|| {
            let opened = framer.open(black_box(&datagram)).expect("opens");
            match Packet::decode(opened) {
                Ok(Packet::ReliableData(d)) => d.data.len(),
                _ => unreachable!(),
            }
        })
    });
    let mut buf = Vec::with_capacity(600);
    group.bench_function("encode_seal", |b| {
        b.iter(|| {
            buf.clear();
            black_box(&packet).encode(&mut buf);
            framer.seal(&mut buf, 0);
            buf.len()
        })
    });
    group.finish();
}

fn multipacket_of_acks(c: &mut Criterion) {
    let mut writer = MultiPacketWriter::new(512);
    let mut out = Vec::with_capacity(600);
    let mut group = c.benchmark_group("multipacket_10_acks");
    group.throughput(Throughput::Elements(10));
    group.bench_function("build_walk", |b| {
        b.iter(|| {
            for seq in 0..10u16 {
                writer.push_packet(&Packet::Acknowledge(Ack {
                    channel: Channel::ZERO,
                    sequence: black_box(seq),
                }));
            }
            out.clear();
            writer.finish(&mut out);
            let Ok(Packet::MultiPacket(multi)) = Packet::decode(&out) else {
                unreachable!()
            };
            let mut sum = 0u32;
            for p in multi.packets() {
                if let Ok(Packet::Acknowledge(a)) = p {
                    sum += u32::from(a.sequence);
                }
            }
            sum
        })
    });
    group.finish();
}

fn compressed(c: &mut Criterion) {
    let mut framer = framer(true);
    let data = text(396);
    let packet = Packet::ReliableData(ReliableData {
        channel: Channel::ZERO,
        sequence: 7,
        data: &data,
    });
    let mut datagram = Vec::with_capacity(600);
    packet.encode(&mut datagram);
    framer.seal(&mut datagram, 0);
    assert_eq!(datagram[2], 1, "deflated");

    let mut group = c.benchmark_group("compressed_400");
    // counted in uncompressed body bytes
    group.throughput(Throughput::Bytes(400));
    let mut buf = Vec::with_capacity(600);
    group.bench_function("seal", |b| {
        b.iter(|| {
            buf.clear();
            black_box(&packet).encode(&mut buf);
            framer.seal(&mut buf, 0);
            buf.len()
        })
    });
    group.bench_function("open", |b| {
        b.iter(|| framer.open(black_box(&datagram)).expect("opens").len())
    });
    group.finish();

    // The figure the performance report holds to <= 2 us: a whole 512-byte datagram (510-byte
    // body) deflated and sealed. Also prints how the size compares with miniz_oxide's level 6.
    let data = text(506);
    let packet = Packet::ReliableData(ReliableData {
        channel: Channel::ZERO,
        sequence: 7,
        data: &data,
    });
    buf.clear();
    packet.encode(&mut buf);
    let body_len = buf.len() - 2;
    let miniz = miniz_oxide::deflate::compress_to_vec_zlib(&buf[2..], 6).len();
    framer.seal(&mut buf, 0);
    assert_eq!(buf[2], 1, "deflated");
    println!(
        "compressed_512: body {body_len} B deflates to {} B (miniz_oxide level 6: {miniz} B)",
        buf.len() - 3 - 2
    );
    let mut group = c.benchmark_group("compressed_512");
    group.throughput(Throughput::Bytes(512));
    group.bench_function("seal", |b| {
        b.iter(|| {
            buf.clear();
            black_box(&packet).encode(&mut buf);
            framer.seal(&mut buf, 0);
            buf.len()
        })
    });
    let ours = buf.clone();
    group.bench_function("open", |b| {
        b.iter(|| framer.open(black_box(&ours)).expect("opens").len())
    });
    // The same body as a zlib client sends it (level 6: a dynamic-Huffman block, whose tables
    // the inflater builds for each stream).
    let zlib = miniz_oxide::deflate::compress_to_vec_zlib(&ours_body(&packet), 6);
    let mut theirs = vec![0x00, 0x09, 0x01];
    theirs.extend_from_slice(&zlib);
    let crc = framer.crc().checksum(&theirs) as u16;
    theirs.extend_from_slice(&crc.to_be_bytes());
    group.bench_function("open_zlib_level_6", |b| {
        b.iter(|| framer.open(black_box(&theirs)).expect("opens").len())
    });
    // An incompressible body (RC4 ciphertext, say): the deflate is tried, then dropped.
    let data = noise(506);
    let packet = Packet::ReliableData(ReliableData {
        channel: Channel::ZERO,
        sequence: 7,
        data: &data,
    });
    group.bench_function("seal_incompressible", |b| {
        b.iter(|| {
            buf.clear();
            black_box(&packet).encode(&mut buf);
            framer.seal(&mut buf, 0);
            buf.len()
        })
    });
    assert_eq!(buf[2], 0, "sent plain");
    group.finish();
}

/// `packet`'s body as encoded (after the two opcode bytes).
fn ours_body(packet: &Packet<'_>) -> Vec<u8> {
    let mut buf = Vec::new();
    packet.encode(&mut buf);
    buf.split_off(2)
}

/// Every benchmark of this file (what `criterion_group!` would generate, documented).
fn benches() {
    let mut c = Criterion::default().configure_from_args();
    reliable_data(&mut c);
    multipacket_of_acks(&mut c);
    compressed(&mut c);
}

criterion_main!(benches);
