//! Many sessions in memory: accepts per second and heap bytes per idle session, for our Endpoint
//! and the peer's SoeMultiplexer, fed the same handshakes (a SessionRequest, then a sealed
//! heartbeat from each fake client).

use std::alloc::System;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use soe_protocol::SoeMultiplexer;
use soe_session::{Endpoint, EndpointConfig, PeerAddress, SessionConfig};
use soe_wire::{CrcLength, FrameConfig, Framer, Packet, SessionRequest};
use stats_alloc::{Region, StatsAlloc};

use crate::inmem::{Mode, PROTO, peer_config};

/// What a scale run measured.
#[derive(Debug, Clone, Copy)]
pub struct ScaleOutcome {
    /// Sessions established.
    pub sessions: usize,
    /// Handshakes completed per second.
    pub accepts_per_sec: f64,
    /// Heap bytes still held per session afterwards.
    pub bytes_per_session: f64,
}

/// Heap bytes allocated and not freed since `region` began.
fn live(region: &Region<'_, System>) -> f64 {
    let c = region.change();
    c.bytes_allocated as f64 - c.bytes_deallocated as f64
}

/// Fake client `i`'s address: distinct IPs in 10.0.0.0/8 (the run turns the per-source limits
/// off).
pub fn socket_addr(i: u32) -> SocketAddr {
    addr(i)
}

fn addr(i: u32) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::from(0x0a00_0000 + i), 40_000))
}

fn request(i: u32, out: &mut Vec<u8>) {
    out.clear();
    Packet::SessionRequest(SessionRequest {
        protocol_version: 3,
        session_id: i,
        udp_length: 512,
        application_protocol: PROTO.as_bytes(),
    })
    .encode(out);
}

/// A heartbeat sealed for the session the response describes (`None` if it is not one).
fn heartbeat(response: &[u8], out: &mut Vec<u8>) -> bool {
    let Ok(Packet::SessionResponse(r)) = Packet::decode(response) else {
        return false;
    };
    let crc = CrcLength::new(r.crc_length).unwrap_or(CrcLength::TWO);
    let mut f = Framer::new(FrameConfig::new(r.crc_seed).with_crc_length(crc));
    out.clear();
    out.extend_from_slice(&[0x00, 0x06]);
    f.seal(out, 0);
    true
}

/// Our Endpoint, its sessions keyed by `addr(i)`: `n` handshakes, then the heap it holds per
/// session.
///
/// # Panics
///
/// If a handshake fails.
pub fn ours<A: PeerAddress>(
    alloc: &'static StatsAlloc<System>,
    n: u32,
    addr: fn(u32) -> A,
) -> ScaleOutcome {
    let cfg = SessionConfig::new(PROTO)
        .with_server_heartbeats(true)
        .with_heartbeat_interval(Some(Duration::from_secs(10)))
        .with_idle_timeout(None);
    let mut ep: Endpoint<A> = Endpoint::new(Arc::new(
        EndpointConfig::server(Arc::new(cfg))
            .with_rng_seed(1)
            .with_max_sessions(n as usize + 1)
            .with_max_half_open(n as usize + 1)
            // The fake clients share 10.0.0.0/8: the per-source limits (a /24 holds at most 5 %
            // of max_sessions) would refuse most of them. This measures the session table.
            .with_source_levels([]),
    ));
    let (mut buf, mut req, mut hb) = (Vec::with_capacity(512), Vec::new(), Vec::new());
    let mut now = Instant::now();
    let mut one = |ep: &mut Endpoint<A>, i: u32, now: Instant| {
        request(i, &mut req);
        ep.handle_datagram(now, addr(i), &req);
        let t = ep.poll_transmit(now, &mut buf).expect("a SessionResponse");
        assert!(heartbeat(&buf[..t.len], &mut hb), "not a SessionResponse");
        ep.handle_datagram(now, addr(i), &hb);
        while ep.poll_transmit(now, &mut buf).is_some() {}
        while ep.poll_event().is_some() {}
    };
    // One session first, so fixed tables are not charged per session.
    one(&mut ep, 0, now);
    let region = Region::new(alloc);
    let start = Instant::now();
    for i in 1..=n {
        now += Duration::from_micros(1);
        one(&mut ep, i, now);
    }
    let elapsed = start.elapsed();
    let used = live(&region);
    assert_eq!(ep.len(), n as usize + 1, "not every handshake completed");
    ScaleOutcome {
        sessions: ep.len() - 1,
        accepts_per_sec: f64::from(n) / elapsed.as_secs_f64(),
        bytes_per_session: used / f64::from(n),
    }
}

/// The peer's SoeMultiplexer fed the same handshakes (it answers within `process_incoming`,
/// so its tick, which visits every session, is not run).
pub fn peer(alloc: &'static StatsAlloc<System>, n: u32) -> ScaleOutcome {
    let mut mux = SoeMultiplexer::new(peer_config(Mode::Plain, 1));
    let (mut req, mut hb) = (Vec::new(), Vec::new());
    let mut now = Instant::now();
    let mut one = |mux: &mut SoeMultiplexer<SocketAddr>, i: u32, now: Instant| {
        request(i, &mut req);
        mux.process_incoming(addr(i), Bytes::copy_from_slice(&req), now);
        for (_, d) in mux.take_outgoing() {
            if heartbeat(&d, &mut hb) {
                mux.process_incoming(addr(i), Bytes::copy_from_slice(&hb), now);
            }
        }
        drop(mux.take_outgoing());
        drop(mux.take_events());
    };
    one(&mut mux, 0, now);
    let region = Region::new(alloc);
    let start = Instant::now();
    for i in 1..=n {
        now += Duration::from_micros(1);
        one(&mut mux, i, now);
    }
    let elapsed = start.elapsed();
    let used = live(&region);
    ScaleOutcome {
        sessions: mux.session_count().saturating_sub(1),
        accepts_per_sec: f64::from(n) / elapsed.as_secs_f64(),
        bytes_per_session: used / f64::from(n),
    }
}
