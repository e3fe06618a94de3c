//! Endpoint benchmarks: memory per idle session (`stats_alloc`'s instrumented allocator) and the cost of one timer
//! wake-up with a single session due, among 1,000 and 100,000 idle sessions (it should not
//! grow with the number of sessions).

use std::alloc::System;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion};
use soe_session::{Endpoint, EndpointConfig, SessionConfig};
use soe_wire::{CrcLength, FrameConfig, Framer, Packet, SessionRequest};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Heap bytes allocated and not freed since `region` began. A reallocation counts too:
/// `stats_alloc` adds its growth to `bytes_allocated` and its shrinkage to `bytes_deallocated`
/// (`bytes_reallocated` is the same figure again, so it is not added).
fn live(region: &Region<'_, System>) -> isize {
    let change = region.change();
    change.bytes_allocated as isize - change.bytes_deallocated as isize
}

const PROTO: &[u8] = b"BenchProto_1";

/// A server whose idle sessions wake only for their own heartbeat (sent after 10 s of silence,
/// retried every second while unanswered) and never time out, so the timer set stays full and
/// every wake-up has exactly one session due.
fn server(sessions: usize) -> Endpoint<u32> {
    let cfg = SessionConfig::new(PROTO)
        .with_server_heartbeats(true)
        .with_heartbeat_interval(Some(Duration::from_secs(10)))
        .with_idle_timeout(None);
    Endpoint::new(Arc::new(
        EndpointConfig::server(Arc::new(cfg))
            .with_rng_seed(1)
            .with_max_sessions(sessions + 1),
    ))
}

/// `n` real handshakes from fake clients, one microsecond apart.
fn populate(ep: &mut Endpoint<u32>, base: u32, n: u32, mut now: Instant) -> Instant {
    let mut buf = Vec::with_capacity(512);
    let mut req = Vec::new();
    let mut hb = Vec::new();
    for i in 0..n {
        now += Duration::from_micros(1);
        req.clear();
        Packet::SessionRequest(SessionRequest {
            protocol_version: 3,
            session_id: i,
            udp_length: 512,
            application_protocol: PROTO,
        })
        .encode(&mut req);
        ep.handle_datagram(now, base + i, &req);
        let Some(t) = ep.poll_transmit(now, &mut buf) else {
            panic!("no SessionResponse");
        };
        let Ok(Packet::SessionResponse(r)) = Packet::decode(&buf[..t.len]) else {
            panic!("not a SessionResponse");
        };
        let crc = CrcLength::new(r.crc_length).unwrap_or(CrcLength::TWO);
        let mut f = Framer::new(FrameConfig::new(r.crc_seed).with_crc_length(crc));
        hb.clear();
        hb.extend_from_slice(&[0x00, 0x06]);
        f.seal(&mut hb, 0);
        ep.handle_datagram(now, base + i, &hb);
        while ep.poll_transmit(now, &mut buf).is_some() {}
        while ep.poll_event().is_some() {}
    }
    now
}

fn report_memory() {
    for n in [1_000u32, 100_000] {
        let t0 = Instant::now();
        let mut ep = server(n as usize);
        // One session first, so the endpoint's fixed tables are not charged per session.
        let now = populate(&mut ep, 1, 1, t0);
        let region = Region::new(GLOBAL);
        populate(&mut ep, 1000, n, now);
        let used = live(&region);
        println!(
            "endpoint/memory_per_idle_session/{n}: {:.0} bytes per session ({:.2} MB for {n})",
            used as f64 / f64::from(n),
            used as f64 / 1e6
        );
    }
}

fn timer_wake(c: &mut Criterion) {
    let mut group = c.benchmark_group("endpoint/timer_wake_one_due");
    for n in [1_000u32, 100_000] {
        let t0 = Instant::now();
        let mut ep = server(n as usize);
        populate(&mut ep, 1000, n, t0);
        let mut buf = Vec::with_capacity(512);
        // Check the premise once: a wake-up at the next deadline runs exactly one session.
        let woken = ep.endpoint_stats().sessions_woken;
        let t = ep.poll_timeout().expect("a deadline");
        ep.handle_timeout(t);
        assert_eq!(ep.endpoint_stats().sessions_woken, woken + 1);
        while ep.poll_transmit(t, &mut buf).is_some() {}
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| {
                let Some(t) = ep.poll_timeout() else {
                    return;
                };
                ep.handle_timeout(black_box(t));
                while ep.poll_transmit(t, &mut buf).is_some() {}
            });
        });
    }
    group.finish();

    let mut group = c.benchmark_group("endpoint/timer_wake_none_due");
    for n in [1_000u32, 100_000] {
        let t0 = Instant::now();
        let mut ep = server(n as usize);
        let now = populate(&mut ep, 1000, n, t0);
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| ep.handle_timeout(black_box(now)));
        });
    }
    group.finish();
}

fn main() {
    report_memory();
    let mut c = Criterion::default().configure_from_args();
    timer_wake(&mut c);
    c.final_summary();
}
