//! What the C ABI costs: one 64-byte reliable message from a client endpoint through a server
//! endpoint (send, take the datagram, hand it in, take the event, take and hand back the ack,
//! run both timers), in memory, once through the Rust API and once through the exported C
//! functions, in one run. The difference divided by the boundary calls per message (about 12)
//! is the cost of one call; docs/c-api.md reports it.

#![allow(missing_docs)] // criterion_group! makes an undocumented public function

use std::net::SocketAddr;
use std::ptr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ::soe_session::{Channel, Endpoint, EndpointConfig, Event, SessionConfig};
use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use soe_ffi::*;

const MESSAGE: [u8; 64] = [0x5A; 64];

fn rust_pair() -> (
    Endpoint<SocketAddr>,
    Endpoint<SocketAddr>,
    Instant,
    SocketAddr,
    SocketAddr,
) {
    let cfg = Arc::new(SessionConfig::new("Bench"));
    let mut server = Endpoint::new(Arc::new(EndpointConfig::server(cfg.clone())));
    let mut client = Endpoint::new(Arc::new(EndpointConfig::client(cfg)));
    let s: SocketAddr = "127.0.0.1:20042".parse().unwrap();
    let c: SocketAddr = "127.0.0.1:40000".parse().unwrap();
    let mut now = Instant::now();
    client.connect(now, s).unwrap();
    let mut buf = Vec::new();
    for _ in 0..5 {
        now += Duration::from_millis(1);
        while let Some(t) = client.poll_transmit(now, &mut buf) {
            server.handle_datagram(now, c, &buf[..t.len]);
        }
        while let Some(t) = server.poll_transmit(now, &mut buf) {
            client.handle_datagram(now, s, &buf[..t.len]);
        }
    }
    while client.poll_event().is_some() {}
    while server.poll_event().is_some() {}
    (client, server, now, c, s)
}

fn rust_api(c: &mut Criterion, group: &str) {
    let (mut client, mut server, mut now, c_addr, s_addr) = rust_pair();
    let h = client.handle_of(s_addr).unwrap();
    let mut buf = Vec::with_capacity(2048);
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Elements(1));
    g.bench_function("rust_api", |b| {
        b.iter(|| {
            now += Duration::from_micros(50);
            client
                .send(h, Channel::ZERO, Bytes::copy_from_slice(&MESSAGE))
                .unwrap();
            while let Some(t) = client.poll_transmit(now, &mut buf) {
                server.handle_datagram(now, c_addr, &buf[..t.len]);
            }
            while let Some((_, e)) = server.poll_event() {
                if let Event::Message { data, .. } = e {
                    std::hint::black_box(data);
                }
            }
            server.handle_timeout(now);
            while let Some(t) = server.poll_transmit(now, &mut buf) {
                client.handle_datagram(now, s_addr, &buf[..t.len]);
            }
            client.handle_timeout(now);
        });
    });
    g.finish();
}

fn addr(last: u8, port: u16) -> soe_addr {
    let mut ip = [0u8; 16];
    ip[..4].copy_from_slice(&[127, 0, 0, last]);
    soe_addr {
        family: SOE_AF_INET,
        port,
        ip,
        scope_id: 0,
    }
}

fn c_config(role: u32) -> soe_config {
    let mut config = soe_config {
        role,
        application_protocol: ptr::null(),
        udp_length: 0,
        crc_length: 0,
        compression: 0,
        rc4_key: ptr::null(),
        rc4_key_len: 0,
        rc4_at_start: 0,
        max_sessions: 0,
        max_half_open: 0,
        max_message_size: 0,
        max_queued_messages: 0,
        idle_timeout_ms: 0,
        connect_timeout_ms: 0,
        heartbeat_interval_ms: 0,
    };
    assert_eq!(soe_config_init(&mut config, role), soe_status::SOE_OK);
    config.application_protocol = c"Bench".as_ptr();
    config
}

/// Moves every datagram `from` has to `to`, counting the boundary calls.
fn pump(
    from: *mut soe_endpoint,
    to: *mut soe_endpoint,
    now: u64,
    source: &soe_addr,
    buf: &mut [u8],
    calls: &mut u64,
) {
    let mut len = 0;
    let mut dest = addr(0, 0);
    *calls += 1;
    while soe_endpoint_poll_transmit(from, now, buf.as_mut_ptr(), buf.len(), &mut len, &mut dest)
        == soe_status::SOE_OK
    {
        soe_endpoint_handle_datagram(to, now, source, buf.as_ptr(), len);
        *calls += 2;
    }
}

/// One message through the C ABI, counting the boundary calls.
#[allow(clippy::too_many_arguments)]
fn one_message(
    client: *mut soe_endpoint,
    server: *mut soe_endpoint,
    session: soe_session,
    now: u64,
    addrs: (&soe_addr, &soe_addr),
    event: &mut soe_event,
    buf: &mut [u8],
    calls: &mut u64,
) {
    assert_eq!(
        soe_send(client, session, 0, MESSAGE.as_ptr(), MESSAGE.len()),
        soe_status::SOE_OK
    );
    *calls += 2;
    pump(client, server, now, addrs.0, buf, calls);
    while soe_endpoint_poll_event(server, event, buf.as_mut_ptr(), buf.len()) == soe_status::SOE_OK
    {
        std::hint::black_box(&buf[..event.len]);
        *calls += 1;
    }
    soe_endpoint_handle_timeout(server, now);
    pump(server, client, now, addrs.1, buf, calls);
    soe_endpoint_handle_timeout(client, now);
    *calls += 2;
}

fn c_abi(c: &mut Criterion, group: &str) {
    let (mut client, mut server) = (ptr::null_mut(), ptr::null_mut());
    let mut now = 1_000_000u64;
    assert_eq!(
        soe_endpoint_new(&c_config(SOE_ROLE_SERVER), now, &mut server),
        soe_status::SOE_OK
    );
    assert_eq!(
        soe_endpoint_new(&c_config(SOE_ROLE_CLIENT), now, &mut client),
        soe_status::SOE_OK
    );
    let (c_addr, s_addr) = (addr(2, 40_000), addr(1, 20_042));
    let mut session = 0;
    assert_eq!(
        soe_connect(client, now, &s_addr, &mut session),
        soe_status::SOE_OK
    );
    let mut buf = vec![0u8; 2048];
    let mut event = soe_event {
        kind: soe_event_kind::SOE_EVENT_ACCEPTED,
        session: 0,
        channel: 0,
        delivery: soe_delivery::SOE_DELIVERY_RELIABLE,
        len: 0,
        reason: 0,
        by_peer: 0,
    };
    for _ in 0..5 {
        now += 1000;
        pump(client, server, now, &c_addr, &mut buf, &mut 0);
        pump(server, client, now, &s_addr, &mut buf, &mut 0);
    }
    for ep in [client, server] {
        while soe_endpoint_poll_event(ep, &mut event, buf.as_mut_ptr(), buf.len())
            == soe_status::SOE_OK
        {}
    }
    // The boundary calls per message, counted over a warm-up.
    let mut calls = 0u64;
    for _ in 0..10_000 {
        now += 50;
        one_message(
            client,
            server,
            session,
            now,
            (&c_addr, &s_addr),
            &mut event,
            &mut buf,
            &mut calls,
        );
    }
    eprintln!(
        "ffi_one_message/c_abi: {:.1} boundary calls per message",
        calls as f64 / 10_000.0
    );
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Elements(1));
    g.bench_function("c_abi", |b| {
        b.iter(|| {
            now += 50;
            one_message(
                client,
                server,
                session,
                now,
                (&c_addr, &s_addr),
                &mut event,
                &mut buf,
                &mut calls,
            );
        });
    });
    g.finish();
    soe_endpoint_free(client);
    soe_endpoint_free(server);
}

fn boundary(c: &mut Criterion) {
    rust_api(c, "ffi_one_message");
    c_abi(c, "ffi_one_message");
}

criterion_group!(benches, boundary);
criterion_main!(benches);
