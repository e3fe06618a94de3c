//! Throughput of one sender -> receiver channel pair in memory (lossless, acks flowing back):
//! messages/s for 64-byte messages (grouped) and MB/s for 4 KiB messages (fragmented), with and
//! without RC4. Run briefly: `cargo bench -p soe-reliable -- --warm-up-time 1 --measurement-time 2`.
// `criterion_group!` defines an undocumented public function.
#![allow(missing_docs)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

#[path = "../tests/common/memory_link.rs"]
mod memory_link;
use memory_link::MemoryLink;

const KEY: &[u8] = b"benchmark key 16";

fn bench(c: &mut Criterion) {
    for (size, batch) in [(64usize, 10_000usize), (4096, 1_000)] {
        for (label, throughput) in [
            ("messages", Throughput::Elements(batch as u64)),
            ("bytes", Throughput::Bytes((batch * size) as u64)),
        ] {
            let mut group = c.benchmark_group(format!("{label}/{size}B"));
            group.throughput(throughput);
            for (name, key) in [("plain", None), ("rc4", Some(KEY))] {
                let mut pair = MemoryLink::new(key, size);
                group.bench_function(name, |b| b.iter(|| pair.run(batch)));
            }
            group.finish();
        }
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
