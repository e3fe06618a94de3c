//! Every message arrives exactly once, in order, byte for byte, across many seeds, loss rates,
//! packet sizes, with and without RC4.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{NetConfig, Pair, PairConfig, Rng, Script, mixed_messages};
use soe_reliable::ReliableConfig;

const KEY: &[u8] = b"\x17\xbd\x08\x6b\x1b\x94\xf0\x2f\xf0\xec\x53\xd7\x63\x58\x9b\x5f";

fn setup(seed: u64, loss: f64, key: bool) -> PairConfig {
    PairConfig {
        config: ReliableConfig::default()
            // Half the datagrams lost each way means a quarter of round trips succeed: give
            // the unlucky packet time.
            .with_unacknowledged_timeout(Duration::from_secs(600)),
        max_packet_len: [496, 496, 200, 1400, 64][(seed % 5) as usize],
        key: key.then(|| KEY.to_vec()),
        net: NetConfig::lossy(loss),
    }
}

fn run_matrix(key: bool) {
    let mut resent = 0;
    for loss in [0.0, 0.1, 0.3, 0.5] {
        for seed in 0..50u64 {
            let seed = seed + (loss * 1000.0) as u64 * 100;
            let setup = setup(seed, loss, key);
            let mut pair = Pair::new(
                seed,
                &setup,
                Script::from_vec(mixed_messages(seed, 120)),
                Script::from_vec(mixed_messages(seed + 1_000_000, 60)),
            );
            pair.run(Duration::from_secs(3600));
            assert!(
                pair.largest_packet <= setup.max_packet_len,
                "seed {seed}: packet of {} bytes over {}",
                pair.largest_packet,
                setup.max_packet_len
            );
            let (a, b) = (pair.a().stats(), pair.b().stats());
            assert_eq!(a.messages_sent, 120, "seed {seed}");
            assert_eq!(b.messages_delivered, 120, "seed {seed}");
            assert_eq!(a.messages_delivered, 60, "seed {seed}");
            resent += a.packets_resent + b.packets_resent;
            if seed % 50 == 0 {
                println!(
                    "loss {loss} key {key} seed {seed}: {:?} virtual, a->b {} datagrams ({} lost), a {a:?}",
                    pair.now - pair.start,
                    pair.a_to_b.sent,
                    pair.a_to_b.dropped
                );
            }
        }
    }
    assert!(resent > 1000, "loss must have caused resends, saw {resent}");
}

#[test]
fn exactly_once_in_order_across_seeds_and_loss_plain() {
    run_matrix(false);
}

#[test]
fn exactly_once_in_order_across_seeds_and_loss_rc4() {
    run_matrix(true);
}

#[test]
fn perfect_link_needs_no_resend_and_bundles() {
    let setup = PairConfig {
        config: ReliableConfig::default(),
        max_packet_len: 496,
        key: None,
        net: NetConfig::perfect(),
    };
    let small: Vec<Bytes> = (0..2000u32)
        .map(|i| Bytes::from(i.to_be_bytes().repeat(3)))
        .collect();
    let mut pair = Pair::new(7, &setup, Script::from_vec(small), Script::none());
    pair.run(Duration::from_secs(60));
    let a = pair.a().stats();
    assert_eq!(a.packets_resent, 0, "{a:?}");
    // 12-byte messages, 13 bytes per Group item: about 37 per 492-byte payload.
    assert!(
        a.packets_sent <= 2000 / 30,
        "bundling: {} packets",
        a.packets_sent
    );
    let rtt = pair.a().rtt().expect("acks gave samples");
    assert!(rtt.min >= Duration::from_millis(10), "{rtt:?}");
    assert!(rtt.smoothed < Duration::from_millis(40), "{rtt:?}");
}

#[test]
fn one_mebibyte_message_under_loss() {
    for (seed, key) in [(11u64, false), (12, true)] {
        let mut rng = Rng::new(seed);
        let mut big = vec![0u8; 1 << 20];
        rng.fill(&mut big);
        big[0] = 0; // needs the escape byte, so the reassembled length is 1 MiB + 1
        let messages = vec![
            Bytes::from_static(b"before"),
            Bytes::from(big),
            Bytes::from_static(b"\x00\x19after"),
        ];
        let setup = PairConfig {
            config: ReliableConfig::default(),
            max_packet_len: 496,
            key: key.then(|| KEY.to_vec()),
            net: NetConfig::lossy(0.2),
        };
        let mut pair = Pair::new(seed, &setup, Script::from_vec(messages), Script::none());
        pair.run(Duration::from_secs(3600));
        let a = pair.a().stats();
        assert!(a.packets_sent > (1 << 20) / 496, "seed {seed}: {a:?}");
        assert!(a.packets_resent > 0, "seed {seed}: {a:?}");
        assert_eq!(pair.b().stats().bytes_delivered, (1 << 20) + 13);
    }
}
