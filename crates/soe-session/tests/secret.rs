//! Issue 35 §1.2: the endpoint's secret comes from the OS generator and from nothing else. It
//! used to be the first two outputs of the SplitMix64 that then gave out client session ids,
//! which go on the wire: two of those gave away the generator's state, hence the secret, hence
//! every CRC seed the endpoint hands out (and its reply-budget buckets).

mod common;

use std::sync::Arc;
use std::time::Instant;

use common::{SERVER, server_config};
use soe_session::{Endpoint, EndpointConfig};
use soe_wire::{Packet, SessionRequest};

/// An endpoint that serves and also connects out, as the one in the issue did.
fn endpoint(config: impl FnOnce(EndpointConfig) -> EndpointConfig) -> Endpoint<u32> {
    Endpoint::new(Arc::new(config(EndpointConfig::server(Arc::new(
        server_config(),
    )))))
}

/// The CRC seed `ep` hands a client at address 5 with session id 42 at `now`.
fn crc_seed(ep: &mut Endpoint<u32>, now: Instant) -> u32 {
    let mut wire = Vec::new();
    Packet::SessionRequest(SessionRequest {
        protocol_version: 3,
        session_id: 42,
        udp_length: 512,
        application_protocol: b"TestProto_1",
    })
    .encode(&mut wire);
    ep.handle_datagram(now, 5, &wire);
    let mut buf = Vec::new();
    let t = ep.poll_transmit(now, &mut buf).expect("a SessionResponse");
    match Packet::decode(&buf[..t.len]) {
        Ok(Packet::SessionResponse(r)) => r.crc_seed,
        other => panic!("not a SessionResponse: {other:?}"),
    }
}

/// The session ids of `n` sessions `ep` opens to the server address.
fn session_ids(ep: &mut Endpoint<u32>, now: Instant, n: usize) -> Vec<u32> {
    (0..n)
        .map(|i| {
            let h = ep.connect(now, SERVER + 100 + i as u32).expect("connect");
            ep.session(h).expect("a session").session_id()
        })
        .collect()
}

#[test]
fn the_session_id_stream_does_not_determine_the_crc_seeds() {
    let now = Instant::now();
    // Two endpoints whose generators are the same: every session id one sends, the other
    // sends too. Everything an observer sees of the generator is the same.
    let mut a = endpoint(|c| c.with_rng_seed(7));
    let mut b = endpoint(|c| c.with_rng_seed(7));
    assert_eq!(session_ids(&mut a, now, 4), session_ids(&mut b, now, 4));
    // Their secrets are not: the same client at the same address and time gets different
    // CRC seeds, so knowing the seed and every output does not tell the CRC seed.
    let seeds: Vec<u32> = (0..4)
        .map(|_| crc_seed(&mut endpoint(|c| c.with_rng_seed(7)), now))
        .collect();
    for (i, x) in seeds.iter().enumerate() {
        for y in &seeds[i + 1..] {
            assert_ne!(
                x, y,
                "CRC seeds {seeds:x?} from endpoints with one rng seed"
            );
        }
    }
}

#[test]
fn a_fixed_secret_reproduces_the_crc_seeds_for_tests() {
    let now = Instant::now();
    let fixed = |secret| move |c: EndpointConfig| c.with_rng_seed(1).with_secret(secret);
    let x = crc_seed(&mut endpoint(fixed(99)), now);
    assert_eq!(x, crc_seed(&mut endpoint(fixed(99)), now));
    assert_ne!(x, crc_seed(&mut endpoint(fixed(100)), now));
    // The secret stays out of the config's Debug output.
    let config = EndpointConfig::default().with_secret(0xDEAD_BEEF);
    assert!(!format!("{config:?}").to_lowercase().contains("deadbeef"));
    assert!(!format!("{config:?}").contains(&0xDEAD_BEEFu128.to_string()));
}
