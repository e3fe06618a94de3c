//! A lossless in-memory link between two channels, and the dispatch of an emitted packet to its
//! handler. Shared by the test suites (through `common`) and the throughput bench (which includes
//! this file by path).
#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use soe_reliable::{ReliableChannel, ReliableConfig, ReliableError};
use soe_wire::{Channel, Packet};

/// Hands one packet a channel emitted to the matching handler of `channel`.
pub fn dispatch(
    channel: &mut ReliableChannel,
    now: Instant,
    datagram: &[u8],
) -> Result<(), ReliableError> {
    match Packet::decode(datagram).expect("the channel emits valid packets") {
        Packet::ReliableData(d) => channel.handle_data(now, d.sequence, d.data),
        Packet::ReliableDataFragment(d) => channel.handle_fragment(now, d.sequence, d.data),
        Packet::Acknowledge(a) => {
            channel.handle_ack(now, a.sequence);
            Ok(())
        }
        Packet::AcknowledgeAll(a) => {
            channel.handle_ack_all(now, a.sequence);
            Ok(())
        }
        other => panic!("unexpected packet {other:?}"),
    }
}

/// A sender and a receiver with default settings, 496-byte packets, one message size.
pub struct MemoryLink {
    tx: ReliableChannel,
    rx: ReliableChannel,
    now: Instant,
    buf: Vec<u8>,
    message: Bytes,
}

impl MemoryLink {
    pub fn new(key: Option<&[u8]>, size: usize) -> Self {
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

    /// Sends `count` messages through the link, acks flowing back, and takes them all out.
    pub fn run(&mut self, count: usize) {
        let mut sent = 0;
        let mut received = 0;
        while received < count {
            while sent < count && self.tx.send(self.message.clone()).is_ok() {
                sent += 1;
            }
            while self.tx.poll_transmit(self.now, &mut self.buf).is_some() {
                dispatch(&mut self.rx, self.now, &self.buf).unwrap();
                self.buf.clear();
            }
            while let Some(m) = self.rx.poll_message() {
                assert_eq!(m.len(), self.message.len());
                received += 1;
            }
            self.now += Duration::from_millis(1);
            while self.rx.poll_transmit(self.now, &mut self.buf).is_some() {
                dispatch(&mut self.tx, self.now, &self.buf).unwrap();
                self.buf.clear();
            }
        }
    }
}
