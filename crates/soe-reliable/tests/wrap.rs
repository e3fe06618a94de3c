//! One million messages through several sequence wraps under 10 % loss.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{NetConfig, Pair, PairConfig, Script};
use soe_reliable::ReliableConfig;

/// Message `i`: 16 bytes derived from `i` (about one in 256 starts with `00`).
fn message(i: u64) -> Bytes {
    let mut m = [0u8; 16];
    m[..8].copy_from_slice(&i.to_le_bytes());
    m[8..].copy_from_slice(&i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes());
    Bytes::copy_from_slice(&m)
}

#[test]
fn a_million_messages_wrap_the_sequence_under_loss() {
    const COUNT: u64 = 1_000_000;
    // 64-byte packets hold a Group of three 16-byte messages, so the sequence (16 bits on the
    // wire) wraps about five times.
    let setup = PairConfig {
        config: ReliableConfig::default(),
        max_packet_len: 64,
        key: None,
        net: NetConfig {
            loss: 0.1,
            duplicate: 0.01,
            reorder: 0.02,
            delay: Duration::from_millis(10),
            jitter: Duration::from_millis(4),
        },
    };
    let seed = 2024;
    let mut pair = Pair::new(
        seed,
        &setup,
        Script {
            count: COUNT,
            make: Box::new(message),
        },
        Script {
            count: 1000,
            make: Box::new(|i| message(i + 7)),
        },
    );
    pair.run(Duration::from_secs(24 * 3600));
    let a = pair.a().stats();
    let b = pair.b().stats();
    println!(
        "seed {seed}: {:?} virtual; a {a:?}; b {b:?}",
        pair.now - pair.start
    );
    assert_eq!(b.messages_delivered, COUNT, "seed {seed}");
    assert!(
        a.packets_sent > 3 * 65_536,
        "seed {seed}: only {} packets: the sequence must wrap at least three times",
        a.packets_sent
    );
    assert!(a.packets_resent > a.packets_sent / 20, "seed {seed}: {a:?}");
}
