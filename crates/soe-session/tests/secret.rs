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

// ----- Issue 43 §5: fail closed -----

#[test]
fn an_endpoint_is_not_made_without_the_os_random_generator() {
    soe_session::fail_os_random(true);
    let config = Arc::new(EndpointConfig::server(Arc::new(server_config())));
    let made = Endpoint::<u32>::try_new(config.clone());
    let group = soe_session::ShardGroup::new();
    soe_session::fail_os_random(false);
    let err = made.expect_err("an endpoint with weaker keys");
    assert!(
        matches!(err, soe_session::EndpointError::RandomUnavailable { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("random generator"), "{err}");
    assert!(group.is_err());
    // With the generator back, it is made.
    assert!(Endpoint::<u32>::try_new(config).is_ok());
}

// ----- Issue 43 §1: shards -----

#[test]
fn shards_of_one_group_share_the_per_source_limits() {
    use std::net::SocketAddr;
    let group = soe_session::ShardGroup::with_secret(42);
    let config = Arc::new(
        EndpointConfig::server(Arc::new(server_config())).with_shard_group(Some(group.clone())),
    );
    let mut shards: Vec<Endpoint> = (0..4).map(|_| Endpoint::new(config.clone())).collect();
    assert_eq!(group.shards(), 4);
    assert!(
        shards[0]
            .shard_group()
            .same_as(&shards[3].shard_group().clone())
    );
    // One host, 120 source ports: the kernel spreads them over the shards.
    let now = Instant::now();
    let mut answered = 0;
    let mut buf = Vec::new();
    for port in 0..120u16 {
        let from = SocketAddr::from(([198, 51, 100, 7], 2000 + port));
        let shard = &mut shards[usize::from(port % 4)];
        let mut wire = Vec::new();
        Packet::SessionRequest(SessionRequest {
            protocol_version: 3,
            session_id: u32::from(port),
            udp_length: 512,
            application_protocol: b"TestProto_1",
        })
        .encode(&mut wire);
        shard.handle_datagram(now, from, &wire);
        while shard.poll_transmit(now, &mut buf).is_some() {
            answered += 1;
        }
    }
    println!("one host through 4 shards: {answered} sessions (one share: 30)");
    assert_eq!(answered, 30);
    // Separate groups: a share each.
    let alone = |_| {
        Endpoint::<u32>::new(Arc::new(EndpointConfig::server(Arc::new(server_config()))))
            .shard_group()
            .clone()
    };
    assert!(!alone(0).same_as(&alone(1)));
}

#[test]
fn a_cookie_is_honoured_only_by_the_shard_that_issued_it() {
    // Shards share the secret, but a session's state lives on one: another shard must not
    // rebuild it from its cookie (its reliable state, or its closing, is on the first one).
    let group = soe_session::ShardGroup::with_secret(43);
    let config =
        Arc::new(EndpointConfig::server(Arc::new(server_config())).with_shard_group(Some(group)));
    let mut a = Endpoint::<u32>::new(config.clone());
    let mut b = Endpoint::<u32>::new(config);
    let now = Instant::now();
    let seed = crc_seed(&mut a, now);
    let mut remap = Vec::new();
    Packet::RemapConnection(soe_wire::RemapConnection {
        session_id: 42,
        crc_seed: seed,
    })
    .encode(&mut remap);
    // From the address the cookie was made for (a NAT that kept it, and the kernel picked b).
    b.handle_datagram(now, 5, &remap);
    assert_eq!(b.len(), 0, "another shard rebuilt the session");
    assert_eq!(b.endpoint_stats().recovered, 0);
}
