#![allow(missing_docs)] // criterion_group! generates undocumented items
//! CRC and RC4 throughput. The CRC is compared with the byte-at-a-time table CRC the original
//! library uses, to show what running on `crc32fast` buys.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use soe_crypto::{Crc32, Rc4};
use std::hint::black_box;

struct TableCrc([u32; 256]);

impl TableCrc {
    fn new() -> Self {
        let mut table = [0u32; 256];
        for (i, slot) in table.iter_mut().enumerate() {
            let mut c = i as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0xedb8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
            *slot = c;
        }
        Self(table)
    }

    fn checksum(&self, seed: u32, data: &[u8]) -> u32 {
        let mut crc = 0xffff_ffffu32;
        for b in seed.to_le_bytes().iter().chain(data) {
            crc = self.0[((crc ^ u32::from(*b)) & 0xff) as usize] ^ (crc >> 8);
        }
        !crc
    }
}

fn crc(c: &mut Criterion) {
    let mut group = c.benchmark_group("crc32");
    let table = TableCrc::new();
    let crc = Crc32::new(0xdead_beef);
    for size in [32usize, 512, 1400, 16384] {
        let data: Vec<u8> = (0..size).map(|i| (i * 31 + 7) as u8).collect();
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_with_input(BenchmarkId::new("soe-crypto", size), &data, |b, d| {
            b.iter(|| crc.checksum(black_box(d)))
        });
        group.bench_with_input(BenchmarkId::new("byte-table", size), &data, |b, d| {
            b.iter(|| table.checksum(0xdead_beef, black_box(d)))
        });
    }
    group.finish();
}

fn rc4(c: &mut Criterion) {
    let mut group = c.benchmark_group("rc4");
    for size in [64usize, 512, 16384] {
        let mut data = vec![0u8; size];
        let mut rc4 = Rc4::new(b"benchmark key").expect("key");
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_function(BenchmarkId::new("apply", size), |b| {
            b.iter(|| rc4.apply(black_box(&mut data)))
        });
    }
    group.finish();
}

criterion_group!(benches, crc, rc4);
criterion_main!(benches);
