//! Throughput of one sender -> receiver channel pair in memory (lossless, acks flowing back):
//! messages/s for 64-byte messages (grouped) and MB/s for 4 KiB messages (fragmented), with and
//! without RC4. Run briefly: `cargo bench -p soe-reliable -- --warm-up-time 1 --measurement-time 2`.
// `criterion_group!` defines an undocumented public function.
#![allow(missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use soe_reliable::{ReliableChannel, ReliableConfig};
use soe_wire::{Channel, Packet};

const KEY: &[u8] = b"benchmark key 16";

fn dispatch(channel: &mut ReliableChannel, now: Instant, datagram: &[u8]) {
    match Packet::decode(datagram).expect("valid packet") {
        Packet::ReliableData(d) => channel.handle_data(now, d.sequence, d.data).unwrap(),
        Packet::ReliableDataFragment(d) => {
            channel.handle_fragment(now, d.sequence, d.data).unwrap()
        }
        Packet::Acknowledge(a) => channel.handle_ack(now, a.sequence),
        Packet::AcknowledgeAll(a) => channel.handle_ack_all(now, a.sequence),
        other => panic!("unexpected {other:?}"),
    }
}

struct Pair {
    tx: ReliableChannel,
    rx: ReliableChannel,
    now: Instant,
    buf: Vec<u8>,
    message: Bytes,
}

impl Pair {
    fn new(key: Option<&[u8]>, size: usize) -> Self {
        let config = Arc::new(ReliableConfig::default());
        let make = || ReliableChannel::new(Channel::ZERO, config.clone(), 496, key).unwrap();
        Self {
            tx: make(),
            rx: make(),
            now: Instant::now(),
            buf: Vec::with_capacity(2048),
            message: Bytes::from(vec![0x5Au8; size]),
        }
    }

    /// Moves `count` messages from `tx` to `rx` and takes them out.
    fn run(&mut self, count: usize) {
        let (mut sent, mut received) = (0, 0);
        while received < count {
            while sent < count && self.tx.send(self.message.clone()).is_ok() {
                sent += 1;
            }
            while self.tx.poll_transmit(self.now, &mut self.buf).is_some() {
                dispatch(&mut self.rx, self.now, &self.buf);
                self.buf.clear();
            }
            while let Some(m) = self.rx.poll_message() {
                std::hint::black_box(m);
                received += 1;
            }
            self.now += Duration::from_millis(1);
            while self.rx.poll_transmit(self.now, &mut self.buf).is_some() {
                dispatch(&mut self.tx, self.now, &self.buf);
                self.buf.clear();
            }
        }
    }
}

fn bench(c: &mut Criterion) {
    for (size, batch) in [(64usize, 10_000usize), (4096, 1_000)] {
        for (label, throughput) in [
            ("messages", Throughput::Elements(batch as u64)),
            ("bytes", Throughput::Bytes((batch * size) as u64)),
        ] {
            let mut group = c.benchmark_group(format!("{label}/{size}B"));
            group.throughput(throughput);
            for (name, key) in [("plain", None), ("rc4", Some(KEY))] {
                let mut pair = Pair::new(key, size);
                group.bench_function(name, |b| b.iter(|| pair.run(batch)));
            }
            group.finish();
        }
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
