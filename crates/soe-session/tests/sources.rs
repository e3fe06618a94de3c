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

// ----- Issue 43 §1: limits that hold for a network -----

/// Completes a handshake from `from` (SessionRequest, then a Heartbeat framed with the seed of
/// the SessionResponse): whether the session was accepted.
fn handshake(ep: &mut Endpoint, now: Instant, from: SocketAddr, session_id: u32) -> bool {
    use soe_wire::{CrcLength, FrameConfig, Framer};
    ep.handle_datagram(now, from, &request(session_id));
    let mut buf = Vec::new();
    let mut seed = None;
    while let Some(t) = ep.poll_transmit(now, &mut buf) {
        if let (true, Ok(Packet::SessionResponse(r))) =
            (t.destination == from, Packet::decode(&buf[..t.len]))
        {
            seed = Some((r.crc_seed, r.crc_length));
        }
    }
    let Some((crc_seed, crc_length)) = seed else {
        return false;
    };
    let mut f = Framer::new(
        FrameConfig::new(crc_seed).with_crc_length(CrcLength::new(crc_length).expect("a length")),
    );
    let mut hb = vec![0x00, 0x06];
    f.seal(&mut hb, 0);
    ep.handle_datagram(now, from, &hb);
    while ep.poll_transmit(now, &mut buf).is_some() {}
    let mut accepted = false;
    while let Some((_, e)) = ep.poll_event() {
        accepted |= e == soe_session::Event::Accepted;
    }
    accepted
}

#[test]
fn a_48_cannot_fill_the_server_and_lock_out_another_player() {
    let mut ep = server(7, |c| c.with_max_half_open(100_000));
    let t0 = Instant::now();
    // 335 /64s of one /48 (free from a tunnel broker, or 6to4's 2002:V4::/48), 30 sessions
    // each (every host's request bucket), within one second.
    let mut taken = 0usize;
    for i in 0..335u32 {
        for j in 0..30u32 {
            let now = t0 + Duration::from_micros(u64::from(i * 30 + j) * 99);
            // Spread over the /48's /56s too.
            let net = ((i % 256) << 8 | (i / 256)) as u16;
            let ip = std::net::Ipv6Addr::new(0x2001, 0xdb8, 0x48, net, 0, 0, 0, j as u16 + 1);
            let from = SocketAddr::new(ip.into(), 5000 + j as u16);
            taken += usize::from(handshake(&mut ep, now, from, (i << 8) | j));
        }
    }
    let now = t0 + Duration::from_secs(1);
    let victim = handshake(&mut ep, now, addr("198.51.100.9:4000"), 0xFEED);
    println!(
        "one /48 opened {taken} sessions of max_sessions 10,000; the player from elsewhere got in: {victim}"
    );
    assert!(victim, "a player from another network was refused");
    // 5 % of max_sessions for one network (its request rate, 600 a minute, let 609 through).
    assert_eq!(taken, 500);
    assert!(ep.endpoint_stats().requests_source_full >= 100);
}

#[test]
fn each_level_holds_its_share_of_sessions() {
    // The default levels' caps, with request rates high enough not to bind first.
    let levels = EndpointConfig::default()
        .source_levels()
        .iter()
        .map(|l| l.with_requests_per_minute(100_000))
        .collect::<Vec<_>>();
    let mut ep = server(8, |c| {
        c.with_max_half_open(100_000).with_source_levels(levels)
    });
    let t0 = Instant::now();
    // 1 % per host: one IPv4 address over many ports.
    let host = (0..150u32)
        .filter(|&i| handshake(&mut ep, t0, addr(&format!("192.0.2.7:{}", 2000 + i)), i))
        .count();
    // 2 % per IPv6 /56: its /64s, five addresses each.
    let v6 = |site: u16, i: u32, j: u32| {
        let ip = std::net::Ipv6Addr::new(0x2001, 0xdb8, site, i as u16, 0, 0, 0, j as u16 + 1);
        SocketAddr::new(ip.into(), 9)
    };
    let site = (0..256u32 * 5)
        .filter(|&n| handshake(&mut ep, t0, v6(0x56, n / 5, n % 5), 0x1_0000 + n))
        .count();
    // 5 % per IPv4 /24 and IPv6 /48.
    let v4_net = (0..256u32 * 5)
        .filter(|&n| {
            let from = SocketAddr::new([203, 0, 113, (n / 5) as u8].into(), 1000 + n as u16);
            handshake(&mut ep, t0, from, 0x2_0000 + n)
        })
        .count();
    // (Each /64 in a /56 of its own.)
    let v6_net = (0..256u32 * 5)
        .filter(|&n| handshake(&mut ep, t0, v6(0x48, (n % 256) << 8, n / 256), 0x3_0000 + n))
        .count();
    println!("held: host {host}, /56 {site}, /24 {v4_net}, /48 {v6_net} of 10,000");
    assert_eq!((host, site, v4_net, v6_net), (100, 200, 500, 500));
    // Closing gives the share back.
    ep.close_all_immediately(t0, soe_session::DisconnectReason::Application);
    let mut buf = Vec::new();
    let later = t0 + Duration::from_secs(2);
    while ep.poll_transmit(later, &mut buf).is_some() {}
    while ep.poll_event().is_some() {}
    assert!(handshake(&mut ep, later, addr("192.0.2.7:9999"), 0xAAAA));
}

/// Stateless replies (UnknownSender) that `victim` gets, one datagram every 500 ms for 20 s,
/// while `flooder` sends 10,000 datagrams a second.
fn victim_answers_beside(
    config: impl FnOnce(EndpointConfig) -> EndpointConfig,
    flooder: SocketAddr,
    victim: SocketAddr,
) -> (usize, usize) {
    let mut ep = server(3, config);
    let mut rng = SplitMix64::new(3);
    let t0 = Instant::now();
    let (mut answered, mut flooder_answered) = (0, 0);
    let mut buf = Vec::new();
    for ms in 0..20_000u64 {
        let now = t0 + Duration::from_millis(ms);
        for _ in 0..FLOOD_PER_MS {
            ep.handle_datagram(now, flooder, &garbage(&mut rng));
        }
        if ms % 500 == 250 {
            ep.handle_datagram(now, victim, &garbage(&mut rng));
        }
        while let Some(t) = ep.poll_transmit(now, &mut buf) {
            answered += usize::from(t.destination == victim);
            flooder_answered += usize::from(t.destination == flooder);
        }
    }
    (answered, flooder_answered)
}

#[test]
fn the_nat64_spelling_of_loopback_is_not_exempt() {
    // Global unicast: anyone can send from it.
    let (answered, flooder) = victim_answers_beside(
        |c| c,
        addr("[64:ff9b::127.0.0.1]:4000"),
        addr("[2001:db8:feed::9]:4000"),
    );
    println!(
        "beside a flood from 64:ff9b::127.0.0.1 the victim got {answered} of 40 (the flooder {flooder})"
    );
    assert!(answered >= 39, "the victim got {answered} of 40");
    assert!(
        flooder <= 4 * 21,
        "the flooder got {flooder}: more than its share"
    );
    // Real loopback still is exempt.
    let (_, local) = victim_answers_beside(
        |c| c,
        addr("[::ffff:127.0.0.1]:4000"),
        addr("[2001:db8:feed::9]:4000"),
    );
    assert!(local > 4 * 21, "loopback got only {local}");
}

#[test]
fn the_ipv4_clients_of_a_translator_are_sources_of_their_own() {
    // Behind RFC 8215's local-use prefix, configured; one IPv4 client floods requests.
    let local: std::net::Ipv6Addr = "64:ff9b:1::".parse().expect("an address");
    let nat64 = |c: EndpointConfig| {
        c.with_max_half_open(100_000)
            .with_nat64_prefixes([("64:ff9b::".parse().expect("an address"), 96), (local, 48)])
            .expect("valid prefixes")
    };
    let mut ep = server(4, nat64);
    let t0 = Instant::now();
    // 198.51.100.7 behind the translator: 64:ff9b:1:c633:64:700:: (RFC 6052, /48).
    let attacker = |port: u16| addr(&format!("[64:ff9b:1:c633:64:700::]:{port}"));
    let answered = sessions_through_ports(
        &mut ep,
        t0,
        |i| attacker(1000 + i as u16),
        Duration::from_millis(10),
        Duration::from_secs(2),
    );
    assert_eq!(answered, 30, "the attacker's own share");
    // Another IPv4 client of the same translator (203.0.113.9) is not charged for it.
    let victim = addr("[64:ff9b:1:cb00:71:900::]:1000");
    let now = t0 + Duration::from_secs(2);
    ep.handle_datagram(now, victim, &request(0xBEEF));
    assert_eq!(
        sent_to(&mut ep, now, victim),
        1,
        "the translator's other client was refused"
    );
    // And the attacker seen without the translator is the same source.
    ep.handle_datagram(now, addr("198.51.100.7:1"), &request(0xBEF0));
    assert_eq!(sent_to(&mut ep, now, addr("198.51.100.7:1")), 0);
}

#[test]
fn a_full_source_table_never_forgets_a_spender_more_cheaply_than_waiting() {
    let mut ep = server(5, |c| c.with_max_half_open(100_000));
    let t0 = Instant::now();
    let spender = |i: u64| SocketAddr::new([198, 51, 100, 7].into(), 2000 + i as u16);
    let every = Duration::from_millis(25);
    let first = sessions_through_ports(&mut ep, t0, spender, every, Duration::from_secs(1));
    assert_eq!(first, 30, "its bucket");
    // 5,000 other sources, one request each, within a second: more than the table holds.
    let t1 = t0 + Duration::from_secs(1);
    for i in 0..5000u32 {
        let now = t1 + Duration::from_micros(u64::from(i) * 200);
        let from = SocketAddr::new(std::net::Ipv4Addr::from(0x0a00_0000 + (i << 8)).into(), 7);
        ep.handle_datagram(now, from, &request(0x9000_0000 + i));
    }
    // Another 40 requests one second on: waiting gives one more at most.
    let t2 = t1 + Duration::from_secs(1);
    let again = sessions_through_ports(
        &mut ep,
        t2,
        |i| spender(100 + i),
        every,
        Duration::from_secs(1),
    );
    println!("after 5,000 other sources the spender got {again} of 40 more (waiting gives 1-2)");
    assert!(again <= 2, "the spender got {again} more: forgotten");
}
