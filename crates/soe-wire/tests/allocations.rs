//! Once warm, the hot paths allocate nothing: decode borrows, encode and seal write into reused
//! buffers, open reuses the framer's buffers (inflate included). Measured with `stats_alloc`'s
//! instrumented system allocator. It counts every thread of the process, so this target runs
//! without the test harness (`harness = false`): one thread, the cases one after another.

use std::alloc::System;

use soe_wire::{
    Ack, Channel, CrcLength, FrameConfig, Framer, GroupWriter, MultiPacketWriter, Packet,
    PayloadMessages, ReliableData,
};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// One round of a session's work: bundle two messages into a Group, an ack and the data into a
/// MultiPacket, seal it, open it, and walk everything that came out down to the messages.
struct Round {
    framer: Framer,
    group: GroupWriter,
    multi: MultiPacketWriter,
    payload: Vec<u8>,
    datagram: Vec<u8>,
}

impl Round {
    fn new(compression: bool) -> Self {
        Self {
            framer: Framer::new(
                FrameConfig::new(0xC0FF_EE00)
                    .with_crc_length(CrcLength::TWO)
                    .with_compression(compression),
            ),
            group: GroupWriter::new(400),
            multi: MultiPacketWriter::new(509),
            payload: Vec::with_capacity(512),
            datagram: Vec::with_capacity(512),
        }
    }

    fn run(&mut self, seq: u16, messages: [&[u8]; 2]) -> usize {
        for m in messages {
            assert!(self.group.push(m));
        }
        self.payload.clear();
        self.group.finish(&mut self.payload);
        assert!(self.multi.push_packet(&Packet::AcknowledgeAll(Ack {
            channel: Channel::ZERO,
            sequence: seq,
        })));
        assert!(self.multi.push_packet(&Packet::ReliableData(ReliableData {
            channel: Channel::ZERO,
            sequence: seq,
            data: &self.payload,
        })));
        self.datagram.clear();
        self.multi.finish(&mut self.datagram);
        self.framer.seal(&mut self.datagram, 0);

        let opened = self.framer.open(&self.datagram).expect("opens");
        let Ok(Packet::MultiPacket(multi)) = Packet::decode(opened) else {
            panic!("not a MultiPacket");
        };
        let mut items = 0;
        for p in multi.packets() {
            if let Packet::ReliableData(d) = p.expect("sub-packet") {
                // the payload-to-messages rule, zero-copy: each message a slice of the datagram
                let messages = PayloadMessages::decode(d.data, false).expect("a Group");
                items += messages.count();
            }
        }
        items
    }
}

/// Allocations and reallocations made by 1,000 rounds once warm.
fn measure(compression: bool, messages: [&[u8]; 2]) -> usize {
    let mut round = Round::new(compression);
    // warm: buffers grow to their working size, zlib state is made
    for seq in 0..4 {
        assert_eq!(round.run(seq, messages), 2);
    }
    let region = Region::new(GLOBAL);
    for seq in 4..1004 {
        assert_eq!(round.run(seq, messages), 2);
    }
    let change = region.change();
    change.allocations + change.reallocations
}

/// A plain `main` (the target has `harness = false`): the process has no other thread, so the
/// process-wide counts of `stats_alloc` see only these cases, which run one after another.
fn main() {
    uncompressed_round_allocates_nothing_once_warm();
    println!("allocations: uncompressed_round_allocates_nothing_once_warm ... ok");
    compressed_round_allocates_nothing_once_warm();
    println!("allocations: compressed_round_allocates_nothing_once_warm ... ok");
    println!("allocations: 2 passed, 0 failed");
}

fn uncompressed_round_allocates_nothing_once_warm() {
    let a = [0x5Au8; 120];
    let b = [0xA5u8; 90];
    assert_eq!(measure(false, [&a, &b]), 0);
}

fn compressed_round_allocates_nothing_once_warm() {
    // repetitive messages, so seal deflates and open inflates on every round
    let a = *b"position update position update position update position update....";
    let b = [7u8; 150];
    let mut probe = Round::new(true);
    probe.run(0, [&a, &b]);
    assert_eq!(probe.datagram[2], 0x01, "the bench case must deflate");
    assert_eq!(measure(true, [&a, &b]), 0);
}
