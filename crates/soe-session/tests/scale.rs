//! Scale: 100,000 sessions made through real handshakes (timer wakes touch only what is due,
//! memory per idle session), and a flood of 1,000,000 spoofed SessionRequests with bounded
//! memory while real clients still connect.
//!
//! Memory is measured with `stats_alloc`'s instrumented system allocator, which counts the whole
//! process. The tests of this binary run one at a time (a lock) so their counts do not mix.

use std::alloc::System;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use soe_session::{
    Endpoint, EndpointConfig, Event, RandomSource, SessionConfig, SplitMix64, State,
};
use soe_wire::{CrcLength, FrameConfig, Framer, Packet, SessionRequest};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

static SERIAL: Mutex<()> = Mutex::new(());

/// Heap bytes allocated and not freed since `region` began. A reallocation counts too:
/// `stats_alloc` adds its growth to `bytes_allocated` and its shrinkage to `bytes_deallocated`
/// (`bytes_reallocated` is the same figure again, so it is not added).
fn live(region: &Region<'_, System>) -> isize {
    let change = region.change();
    change.bytes_allocated as isize - change.bytes_deallocated as isize
}

const PROTO: &[u8] = b"ScaleProto_1";

fn request(session_id: u32) -> Vec<u8> {
    let mut v = Vec::new();
    Packet::SessionRequest(SessionRequest {
        protocol_version: 3,
        session_id,
        udp_length: 512,
        application_protocol: PROTO,
    })
    .encode(&mut v);
    v
}

fn server(max_sessions: usize) -> Endpoint<u32> {
    Endpoint::new(Arc::new(
        EndpointConfig::server(Arc::new(SessionConfig::new(PROTO)))
            .with_rng_seed(77)
            .with_max_sessions(max_sessions),
    ))
}

/// Completes `n` handshakes from fake clients at addresses `base..base + n`, one microsecond
/// apart: SessionRequest in, SessionResponse out, then a Heartbeat framed with the seed from
/// the response (the client's first packet, which completes the server side).
fn populate(ep: &mut Endpoint<u32>, base: u32, n: u32, mut now: Instant) -> Instant {
    let mut buf = Vec::with_capacity(512);
    let mut hb = Vec::with_capacity(16);
    for i in 0..n {
        now += Duration::from_micros(1);
        let addr = base + i;
        ep.handle_datagram(now, addr, &request(i.wrapping_mul(2_654_435_761)));
        let t = ep.poll_transmit(now, &mut buf).expect("a SessionResponse");
        assert_eq!(t.destination, addr);
        let Ok(Packet::SessionResponse(r)) = Packet::decode(&buf[..t.len]) else {
            panic!("expected SessionResponse, got {:02x?}", &buf[..t.len]);
        };
        let mut f = Framer::new(
            FrameConfig::new(r.crc_seed).with_crc_length(CrcLength::new(r.crc_length).unwrap()),
        );
        hb.clear();
        hb.extend_from_slice(&[0x00, 0x06]);
        f.seal(&mut hb, 0);
        ep.handle_datagram(now, addr, &hb);
        while ep.poll_transmit(now, &mut buf).is_some() {}
        while let Some((_, e)) = ep.poll_event() {
            assert_eq!(e, Event::Accepted);
        }
    }
    now
}

#[test]
fn a_hundred_thousand_sessions_timer_wakes_touch_only_what_is_due() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const N: u32 = 100_000;
    let t0 = Instant::now();
    let mut ep = server(200_000);
    let now = populate(&mut ep, 1_000_000, N, t0);
    assert_eq!(ep.len(), N as usize);
    assert_eq!(ep.half_open(), 0);

    // poll_timeout is the minimum over every session.
    let min = (0..N)
        .map(|i| {
            let h = ep.handle_of(1_000_000 + i).unwrap();
            ep.session(h).unwrap().poll_timeout().unwrap()
        })
        .min()
        .unwrap();
    assert_eq!(ep.poll_timeout(), Some(min));
    // The first session's idle timer (30 s after its heartbeat) comes first.
    assert_eq!(min, t0 + Duration::from_micros(1) + Duration::from_secs(30));

    // A wake with nothing due touches no session, and leaves nothing to send.
    let before = ep.endpoint_stats().clone();
    ep.handle_timeout(now);
    ep.handle_timeout(min - Duration::from_nanos(1));
    let mut buf = Vec::new();
    assert!(ep.poll_transmit(now, &mut buf).is_none());
    let after = ep.endpoint_stats().clone();
    assert_eq!(after.timer_wakes, before.timer_wakes + 2);
    assert_eq!(
        after.sessions_woken, before.sessions_woken,
        "no session touched"
    );
    assert_eq!(
        after.transmit_visits, before.transmit_visits,
        "no session polled"
    );

    // At the first deadline exactly one session is due; it times out and only it is polled.
    ep.handle_timeout(min);
    assert_eq!(ep.endpoint_stats().sessions_woken, after.sessions_woken + 1);
    let first = ep.handle_of(1_000_000).unwrap();
    assert_eq!(ep.state(first), Some(State::Draining));
    let mut sent = 0;
    while let Some(t) = ep.poll_transmit(min, &mut buf) {
        assert_eq!(t.destination, 1_000_000);
        sent += 1;
    }
    assert_eq!(sent, 1, "the first of its Disconnects");
    // One visit: with its Disconnect gone it has nothing more to send, so it is not asked again.
    assert_eq!(
        ep.endpoint_stats().transmit_visits,
        after.transmit_visits + 1
    );
    assert_eq!(
        ep.poll_event(),
        Some((
            first,
            Event::Closed {
                reason: soe_session::DisconnectReason::Timeout,
                by_peer: false
            }
        ))
    );
    // The next deadline is the second session's idle timer, 1 us after the first (ahead of the
    // first session's Disconnect repeat, 100 ms later).
    assert_eq!(
        ep.poll_timeout(),
        Some(min + Duration::from_micros(1)),
        "the second session's idle timer"
    );
}

#[test]
fn an_idle_session_costs_at_most_one_kibibyte() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const N: u32 = 100_000;
    let t0 = Instant::now();
    let mut ep = server(200_000);
    // Warm the endpoint's fixed tables with one session, so they are not charged per session.
    let now = populate(&mut ep, 1, 1, t0);
    let region = Region::new(GLOBAL);
    populate(&mut ep, 1_000_000, N, now);
    let per_session = live(&region) as f64 / f64::from(N);
    println!(
        "memory per idle session: {per_session:.0} bytes ({} sessions, {:.1} MB)",
        ep.len(),
        live(&region) as f64 / 1e6
    );
    assert_eq!(ep.len(), N as usize + 1);
    assert!(
        per_session <= 1024.0,
        "{per_session:.0} bytes per idle session"
    );
    drop(ep);
}

#[test]
fn a_million_spoofed_requests_use_bounded_memory_and_real_clients_still_connect() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const FLOOD: u32 = 1_000_000;
    let max_half_open = 1024;
    let max_sessions = 10_000;
    let mut rng = SplitMix64::new(common_seed());
    let t0 = Instant::now();
    let mut now = t0;
    let mut server = server(max_sessions);
    let mut buf = Vec::with_capacity(512);
    // Warm up: the fixed-size tables fill during the first seconds of the flood.
    let region = Region::new(GLOBAL);
    let mut peak = 0isize;

    // Two real clients. The fast one's handshake completes while its half-open entry is still
    // there; the slow one's SessionResponse is delayed past thousands of spoofed requests, so
    // its half-open entry is evicted and the cookie recovery brings it in.
    let client_cfg =
        Arc::new(EndpointConfig::client(Arc::new(SessionConfig::new(PROTO))).with_rng_seed(5));
    let mut fast = Endpoint::<u32>::new(client_cfg.clone());
    let mut slow = Endpoint::<u32>::new(client_cfg);
    const SERVER: u32 = 1;
    const FAST: u32 = 7;
    const SLOW: u32 = 8;
    let mut held_for_slow: Vec<Vec<u8>> = Vec::new();

    let mut flood_request = Vec::new();
    for i in 0..FLOOD {
        now += Duration::from_micros(2); // 500,000 requests per second
        let addr = 1000 + (rng.next_u32() % 4_000_000_000);
        flood_request.clear();
        Packet::SessionRequest(SessionRequest {
            protocol_version: 3,
            session_id: rng.next_u32(),
            udp_length: 512,
            application_protocol: PROTO,
        })
        .encode(&mut flood_request);
        server.handle_datagram(now, addr, &flood_request);

        if i == 400_000 {
            fast.connect(now, SERVER).unwrap();
        }
        if i == 500_000 {
            slow.connect(now, SERVER).unwrap();
        }
        // The slow client's datagrams from the server reach it 5,000 requests later.
        if i == 505_000 {
            for d in held_for_slow.drain(..) {
                slow.handle_datagram(now, SERVER, &d);
            }
        }

        if i % 64 == 0 || (400_000..400_100).contains(&i) || (500_000..520_000).contains(&i) {
            // The server sends; replies to spoofed addresses vanish.
            while let Some(t) = server.poll_transmit(now, &mut buf) {
                match t.destination {
                    FAST => fast.handle_datagram(now, SERVER, &buf[..t.len]),
                    SLOW if i < 505_000 => held_for_slow.push(buf[..t.len].to_vec()),
                    SLOW => slow.handle_datagram(now, SERVER, &buf[..t.len]),
                    _ => {}
                }
            }
            for (client, addr) in [(&mut fast, FAST), (&mut slow, SLOW)] {
                if client.poll_timeout().is_some_and(|t| t <= now) {
                    client.handle_timeout(now);
                }
                while let Some(t) = client.poll_transmit(now, &mut buf) {
                    server.handle_datagram(now, addr, &buf[..t.len]);
                }
            }
            if server.poll_timeout().is_some_and(|t| t <= now) {
                server.handle_timeout(now);
            }
        }
        if i % 4096 == 0 {
            assert!(server.half_open() <= max_half_open);
            assert!(server.len() <= max_sessions + max_half_open);
            peak = peak.max(live(&region));
        }
    }
    // Let the real clients finish (their probes and any remap), then look at the events.
    for _ in 0..5000 {
        now += Duration::from_millis(1);
        while let Some(t) = server.poll_transmit(now, &mut buf) {
            match t.destination {
                FAST => fast.handle_datagram(now, SERVER, &buf[..t.len]),
                SLOW => slow.handle_datagram(now, SERVER, &buf[..t.len]),
                _ => {}
            }
        }
        for (client, addr) in [(&mut fast, FAST), (&mut slow, SLOW)] {
            if client.poll_timeout().is_some_and(|t| t <= now) {
                client.handle_timeout(now);
            }
            while let Some(t) = client.poll_transmit(now, &mut buf) {
                server.handle_datagram(now, addr, &buf[..t.len]);
            }
        }
        if server.poll_timeout().is_some_and(|t| t <= now) {
            server.handle_timeout(now);
        }
    }
    let mut accepted = Vec::new();
    while let Some((h, e)) = server.poll_event() {
        if e == Event::Accepted {
            accepted.push(server.remote(h).unwrap());
        }
    }
    accepted.sort_unstable();
    let client_events = |ep: &mut Endpoint<u32>| {
        let mut v = Vec::new();
        while let Some((_, e)) = ep.poll_event() {
            v.push(e);
        }
        v
    };
    let stats = server.endpoint_stats().clone();
    println!(
        "flood: {FLOOD} requests, peak {:.2} MB above baseline, {} half-open evicted, {} recovered",
        peak as f64 / 1e6,
        stats.half_open_evicted,
        stats.recovered
    );
    assert_eq!(client_events(&mut fast), [Event::Connected]);
    assert_eq!(client_events(&mut slow), [Event::Connected]);
    assert_eq!(accepted, [FAST, SLOW], "both real clients are accepted");
    assert_eq!(
        stats.recovered, 1,
        "the slow client came in through its cookie"
    );
    assert!(stats.half_open_evicted > 900_000, "{stats:?}");
    // Bounded: 1024 half-open sessions and the fixed tables, whatever the request count.
    assert!(peak < 6_000_000, "peak {peak} bytes");
    assert!(server.half_open() <= max_half_open);
}

fn common_seed() -> u64 {
    let seed = std::env::var("SOE_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1234);
    println!("seed = {seed} (replay with SOE_TEST_SEED={seed})");
    seed
}
