//! Arbitrary input never panics a session or an endpoint: random datagrams, mutations of real
//! ones, and garbage with a valid CRC (which may end the session, never the process).

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{CLIENT, NetConfig, Pair, SERVER, client_config, server_config};
use soe_session::{Channel, RandomSource, SplitMix64};
use soe_wire::{CrcLength, FrameConfig, Framer};

#[test]
fn random_and_mutated_datagrams_never_panic() {
    let seed = common::seed(60);
    let mut rng = SplitMix64::new(seed);
    let mut corrupt_closes = 0;
    for round in 0..20u64 {
        let mut p = Pair::new(
            seed ^ round,
            server_config(),
            client_config(),
            NetConfig::default(),
        );
        p.log_datagrams = true;
        let (c, s) = p.connect();
        p.client
            .send(c, Channel::ZERO, Bytes::from(vec![0u8; 3000]))
            .unwrap();
        p.run_for(Duration::from_millis(200));
        let seed_crc = p.server.session(s).map(|x| x.crc_seed()).unwrap_or(0);
        let mut framer = Framer::new(FrameConfig::new(seed_crc).with_crc_length(CrcLength::TWO));
        let samples: Vec<Vec<u8>> = p
            .to_server_log
            .iter()
            .chain(p.from_server_log.iter())
            .cloned()
            .collect();
        for i in 0..2000u32 {
            let mut d = match rng.next_u32() % 3 {
                // Pure noise of any length.
                0 => {
                    let len = (rng.next_u32() % 80) as usize;
                    (0..len).map(|_| rng.next_u32() as u8).collect::<Vec<u8>>()
                }
                // A real datagram with a few bytes changed, cut or extended.
                1 => {
                    let mut d = samples[(rng.next_u32() as usize) % samples.len()].clone();
                    for _ in 0..1 + rng.next_u32() % 3 {
                        if !d.is_empty() {
                            let at = (rng.next_u32() as usize) % d.len();
                            d[at] = rng.next_u32() as u8;
                        }
                    }
                    d.truncate((rng.next_u32() as usize) % (d.len() + 4));
                    d
                }
                // Garbage behind a real opcode, with a valid CRC.
                _ => {
                    let op = (rng.next_u32() % 0x20) as u8;
                    let len = (rng.next_u32() % 40) as usize;
                    let mut d = vec![0x00, op];
                    d.extend((0..len).map(|_| rng.next_u32() as u8));
                    framer.seal(&mut d, 0);
                    d
                }
            };
            if i % 2 == 0 {
                p.server.handle_datagram(p.now, CLIENT, &d);
            } else {
                d.truncate(d.len().min(600));
                p.client.handle_datagram(p.now, SERVER, &d);
            }
            // Strangers too.
            p.server.handle_datagram(p.now, 5000 + i, &d);
            p.flush();
        }
        p.run_for(Duration::from_secs(40));
        corrupt_closes += p
            .server_events
            .iter()
            .chain(p.client_events.iter())
            .filter(|(_, e)| {
                matches!(
                    e,
                    soe_session::Event::Closed {
                        reason: soe_session::DisconnectReason::CorruptPacket,
                        ..
                    }
                )
            })
            .count();
        // Whatever happened, everything ends cleanly.
        p.server
            .close_all(p.now, soe_session::DisconnectReason::Application);
        p.client
            .close_all(p.now, soe_session::DisconnectReason::Application);
        p.run_for(Duration::from_secs(15));
        assert!(p.client.is_empty(), "seed {}", seed ^ round);
        assert!(p.server.is_empty(), "seed {}", seed ^ round);
    }
    assert!(
        corrupt_closes >= 20,
        "valid-CRC garbage ends sessions: {corrupt_closes}"
    );
}
