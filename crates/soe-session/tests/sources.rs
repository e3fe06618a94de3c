//! Issue 35 §1.1: the per-source limits count hosts, not addresses. Any host owns as many ports
//! as it likes (and an IPv6 host a /64), so a limit keyed by address and port gives one host as
//! many shares as it has ports. Sans-I/O, in virtual time.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::server_config;
use soe_session::{Endpoint, EndpointConfig, RandomSource, SplitMix64};
use soe_wire::{Packet, SessionRequest};

/// Flood datagrams per millisecond: 10,000 a second.
const FLOOD_PER_MS: u64 = 10;
/// Source ports the flood rotates over.
const FLOOD_PORTS: u64 = 50_000;

fn server(seed: u64, config: impl FnOnce(EndpointConfig) -> EndpointConfig) -> Endpoint {
    Endpoint::new(Arc::new(config(
        EndpointConfig::server(Arc::new(server_config()))
            .with_rng_seed(seed)
            .with_secret(u128::from(seed)),
    )))
}

fn addr(s: &str) -> SocketAddr {
    s.parse().expect("an address")
}

/// A contextual packet (reliable data) from nobody the server knows: answered with
/// UnknownSender within the budget.
fn garbage(rng: &mut SplitMix64) -> [u8; 8] {
    let x = rng.next_u64().to_be_bytes();
    [0x00, 0x09, x[0], x[1], x[2], x[3], x[4], x[5]]
}

fn request(session_id: u32) -> Vec<u8> {
    let mut wire = Vec::new();
    Packet::SessionRequest(SessionRequest {
        protocol_version: 3,
        session_id,
        udp_length: 512,
        application_protocol: b"TestProto_1",
    })
    .encode(&mut wire);
    wire
}

/// Takes every datagram the endpoint has to send; returns how many went to `to`.
fn sent_to(ep: &mut Endpoint, now: Instant, to: SocketAddr) -> usize {
    let mut buf = Vec::new();
    let mut n = 0;
    while let Some(t) = ep.poll_transmit(now, &mut buf) {
        n += usize::from(t.destination == to);
    }
    n
}

/// One host floods 10,000 datagrams a second from `ports` source ports while a victim on
/// another IP sends one datagram every 500 ms, 40 in all. Returns the victim's UnknownSenders.
fn victim_answers_under_flood(seed: u64, flooder: &str, victim: SocketAddr, ports: u64) -> usize {
    let mut ep = server(seed, |c| c);
    let flooder: std::net::IpAddr = flooder.parse().expect("an IP");
    let mut rng = SplitMix64::new(seed ^ 0xF100D);
    let t0 = Instant::now();
    let mut answered = 0;
    let mut port = 0;
    for ms in 0..20_000u64 {
        let now = t0 + Duration::from_millis(ms);
        for _ in 0..FLOOD_PER_MS {
            let from = SocketAddr::new(flooder, 1024 + (port % ports) as u16);
            port += 1;
            ep.handle_datagram(now, from, &garbage(&mut rng));
        }
        if ms % 500 == 250 {
            ep.handle_datagram(now, victim, &garbage(&mut rng));
        }
        answered += sent_to(&mut ep, now, victim);
    }
    answered
}

#[test]
fn a_flood_from_one_ip_over_50000_ports_leaves_another_ip_its_replies() {
    for seed in 0..3 {
        let answered =
            victim_answers_under_flood(seed, "198.51.100.7", addr("203.0.113.9:4000"), FLOOD_PORTS);
        println!("seed {seed}: the victim got {answered} UnknownSenders of 40");
        assert!(
            answered >= 39,
            "seed {seed}: the victim got {answered} of 40"
        );
    }
}

#[test]
fn a_flood_from_one_ipv6_64_over_many_addresses_is_one_source() {
    for seed in 0..2 {
        let mut ep = server(seed, |c| c);
        let mut rng = SplitMix64::new(seed);
        let t0 = Instant::now();
        let victim = addr("[2001:db8:feed::1]:4000");
        let mut answered = 0;
        for ms in 0..20_000u64 {
            let now = t0 + Duration::from_millis(ms);
            for _ in 0..FLOOD_PER_MS {
                // A new interface id and port every time, all in one /64.
                let x = rng.next_u64();
                let ip =
                    std::net::Ipv6Addr::from((0x2001_0db8_0000_0001u128 << 64) | u128::from(x));
                let from = SocketAddr::new(ip.into(), (x >> 48) as u16 | 1);
                ep.handle_datagram(now, from, &garbage(&mut rng));
            }
            if ms % 500 == 250 {
                ep.handle_datagram(now, victim, &garbage(&mut rng));
            }
            answered += sent_to(&mut ep, now, victim);
        }
        assert!(
            answered >= 39,
            "seed {seed}: the victim got {answered} of 40"
        );
    }
}

/// `from` sends one SessionRequest (a new session id each time) every `every`, for `span`;
/// returns how many the endpoint answered.
fn sessions_through_ports(
    ep: &mut Endpoint,
    t0: Instant,
    from: impl Fn(u64) -> SocketAddr,
    every: Duration,
    span: Duration,
) -> usize {
    let mut answered = 0;
    let mut i = 0u64;
    while every * (i as u32) < span {
        let now = t0 + every * (i as u32);
        let a = from(i);
        ep.handle_datagram(now, a, &request(0x1000 + i as u32));
        answered += sent_to(ep, now, a);
        i += 1;
    }
    answered
}

#[test]
fn one_ip_gets_no_more_sessions_a_minute_for_using_many_ports() {
    for seed in 0..3 {
        let mut ep = server(seed, |c| c.with_max_half_open(100_000));
        // 600 ports, one request each, ten a second, for a minute.
        let t0 = Instant::now();
        let answered = sessions_through_ports(
            &mut ep,
            t0,
            |i| SocketAddr::new([198, 51, 100, 7].into(), 2000 + i as u16),
            Duration::from_millis(100),
            Duration::from_secs(60),
        );
        println!("seed {seed}: one IP through 600 ports opened {answered} sessions in a minute");
        // The bucket's 30, plus what it refills in the minute (30).
        assert!(
            answered <= 60,
            "seed {seed}: {answered} sessions from one IP in a minute"
        );
        assert!(
            answered >= 59,
            "seed {seed}: only {answered}: the limit is per minute"
        );
        assert_eq!(ep.endpoint_stats().requests_accepted, answered as u64);
        // Another IP is not charged for it; the same IP seen as IPv4-mapped IPv6 is.
        let other = addr("198.51.100.8:2000");
        let now = t0 + Duration::from_millis(59_950);
        ep.handle_datagram(now, other, &request(7));
        assert_eq!(sent_to(&mut ep, now, other), 1, "seed {seed}");
        let mapped = addr("[::ffff:198.51.100.7]:9999");
        ep.handle_datagram(now, mapped, &request(8));
        assert_eq!(sent_to(&mut ep, now, mapped), 0, "seed {seed}");
    }
}

#[test]
fn loopback_sources_are_not_limited_unless_asked() {
    let from = |i: u64| SocketAddr::new([127, 0, 0, 1].into(), 2000 + i as u16);
    let every = Duration::from_millis(10);
    let span = Duration::from_secs(1);
    let mut ep = server(1, |c| c);
    // A benchmark opening a hundred sessions at once from this machine.
    assert_eq!(
        sessions_through_ports(&mut ep, Instant::now(), from, every, span),
        100
    );
    let mut ep = server(1, |c| c.with_limit_loopback(true));
    assert_eq!(
        sessions_through_ports(&mut ep, Instant::now(), from, every, span),
        30
    );
}
