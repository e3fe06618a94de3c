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
    SocketAddr::from(([127, 0, 0, last], port)).into()
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

/// A client and a server endpoint connected through the C ABI, in memory.
struct CPair {
    client: *mut soe_endpoint,
    server: *mut soe_endpoint,
    session: soe_session,
    client_addr: soe_addr,
    server_addr: soe_addr,
    event: soe_event,
    buf: Vec<u8>,
    now: u64,
    /// Boundary calls made so far.
    calls: u64,
}

impl CPair {
    fn new() -> Self {
        let (mut client, mut server) = (ptr::null_mut(), ptr::null_mut());
        let now = 1_000_000u64;
        assert_eq!(
            soe_endpoint_new(&c_config(SOE_ROLE_SERVER), now, &mut server),
            soe_status::SOE_OK
        );
        assert_eq!(
            soe_endpoint_new(&c_config(SOE_ROLE_CLIENT), now, &mut client),
            soe_status::SOE_OK
        );
        let mut pair = Self {
            client,
            server,
            session: 0,
            client_addr: addr(2, 40_000),
            server_addr: addr(1, 20_042),
            event: soe_event {
                kind: soe_event_kind::SOE_EVENT_ACCEPTED,
                session: 0,
                channel: 0,
                delivery: soe_delivery::SOE_DELIVERY_RELIABLE,
                len: 0,
                reason: 0,
                by_peer: 0,
            },
            buf: vec![0u8; 2048],
            now,
            calls: 0,
        };
        assert_eq!(
            soe_connect(client, now, &pair.server_addr, &mut pair.session),
            soe_status::SOE_OK
        );
        for _ in 0..5 {
            pair.now += 1000;
            pair.pump(true);
            pair.pump(false);
        }
        for ep in [client, server] {
            while pair.take_event(ep) {}
        }
        pair
    }

    /// Moves every datagram one side has to the other.
    fn pump(&mut self, from_client: bool) {
        let (from, to, source) = if from_client {
            (self.client, self.server, self.client_addr)
        } else {
            (self.server, self.client, self.server_addr)
        };
        let (mut len, mut dest) = (0, addr(0, 0));
        loop {
            self.calls += 1;
            let status = soe_endpoint_poll_transmit(
                from,
                self.now,
                self.buf.as_mut_ptr(),
                self.buf.len(),
                &mut len,
                &mut dest,
            );
            if status != soe_status::SOE_OK {
                return;
            }
            self.calls += 1;
            soe_endpoint_handle_datagram(to, self.now, &source, self.buf.as_ptr(), len);
        }
    }

    /// Takes one event of `ep`; whether there was one.
    fn take_event(&mut self, ep: *mut soe_endpoint) -> bool {
        self.calls += 1;
        let status =
            soe_endpoint_poll_event(ep, &mut self.event, self.buf.as_mut_ptr(), self.buf.len());
        std::hint::black_box(&self.buf[..self.event.len.min(self.buf.len())]);
        status == soe_status::SOE_OK
    }

    /// One message from the client through the server, and the ack back.
    fn one_message(&mut self) {
        self.now += 50;
        self.calls += 1;
        assert_eq!(
            soe_send(
                self.client,
                self.session,
                0,
                MESSAGE.as_ptr(),
                MESSAGE.len()
            ),
            soe_status::SOE_OK
        );
        self.pump(true);
        while self.take_event(self.server) {}
        self.calls += 2;
        soe_endpoint_handle_timeout(self.server, self.now);
        self.pump(false);
        soe_endpoint_handle_timeout(self.client, self.now);
    }
}

impl Drop for CPair {
    fn drop(&mut self) {
        soe_endpoint_free(self.client);
        soe_endpoint_free(self.server);
    }
}

fn c_abi(c: &mut Criterion, group: &str) {
    let mut pair = CPair::new();
    // The boundary calls per message, counted over a warm-up.
    pair.calls = 0;
    for _ in 0..10_000 {
        pair.one_message();
    }
    eprintln!(
        "ffi_one_message/c_abi: {:.1} boundary calls per message",
        pair.calls as f64 / 10_000.0
    );
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Elements(1));
    g.bench_function("c_abi", |b| b.iter(|| pair.one_message()));
    g.finish();
}

fn boundary(c: &mut Criterion) {
    rust_api(c, "ffi_one_message");
    c_abi(c, "ffi_one_message");
}

criterion_group!(benches, boundary);
criterion_main!(benches);
