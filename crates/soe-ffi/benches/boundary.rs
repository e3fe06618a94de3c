//! What the C ABI costs: one 64-byte reliable message from a client endpoint through a server
//! endpoint (send, take the datagram, hand it in, take the event, take and hand back the ack,
//! run both timers), in memory, once through the Rust API and once through the exported C
//! functions, in one run. The difference divided by the boundary calls per message (about 9)
//! is the cost of one call; docs/c-api.md reports it. The C path does two copies the Rust path
//! does not (each datagram into the caller's buffer, the message out into the caller's buffer):
//! that is what a C caller gets, so it counts.
//!
//! `--count rust|c|c-uncounted N` runs N messages through one path without criterion, for
//! `valgrind --tool=callgrind` instruction counts (see `main`).

#![allow(missing_docs)] // criterion_group! makes an undocumented public function

use std::net::SocketAddr;
use std::ptr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ::soe_session::{Channel, Endpoint, EndpointConfig, Event, SessionConfig};
use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group};
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

/// A client and a server endpoint connected through the Rust API, in memory.
struct RustPair {
    client: Endpoint<SocketAddr>,
    server: Endpoint<SocketAddr>,
    now: Instant,
    c_addr: SocketAddr,
    s_addr: SocketAddr,
    h: ::soe_session::SessionHandle,
    buf: Vec<u8>,
}

impl RustPair {
    fn new() -> Self {
        let (client, server, now, c_addr, s_addr) = rust_pair();
        let h = client.handle_of(s_addr).unwrap();
        Self {
            client,
            server,
            now,
            c_addr,
            s_addr,
            h,
            buf: Vec::with_capacity(2048),
        }
    }

    /// One message from the client through the server, and the ack back: the same steps as
    /// [`CPair::one_message`].
    fn one_message(&mut self) {
        self.now += Duration::from_micros(50);
        let now = self.now;
        self.client
            .send(self.h, Channel::ZERO, Bytes::copy_from_slice(&MESSAGE))
            .unwrap();
        while let Some(t) = self.client.poll_transmit(now, &mut self.buf) {
            self.server
                .handle_datagram(now, self.c_addr, &self.buf[..t.len]);
        }
        while let Some((_, e)) = self.server.poll_event() {
            if let Event::Message { data, .. } = e {
                std::hint::black_box(data);
            }
        }
        self.server.handle_timeout(now);
        while let Some(t) = self.server.poll_transmit(now, &mut self.buf) {
            self.client
                .handle_datagram(now, self.s_addr, &self.buf[..t.len]);
        }
        self.client.handle_timeout(now);
    }
}

fn rust_api(c: &mut Criterion, group: &str) {
    let mut pair = RustPair::new();
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Elements(1));
    g.bench_function("rust_api", |b| b.iter(|| pair.one_message()));
    g.finish();
}

fn addr(last: u8, port: u16) -> soe_addr {
    SocketAddr::from(([127, 0, 0, last], port)).into()
}

/// A config for `role` naming the bench's protocol; free it with `soe_config_free`.
fn c_config(role: u32) -> *mut soe_config {
    let mut config = ptr::null_mut();
    assert_eq!(soe_config_new(role, &mut config), soe_status::SOE_OK);
    assert_eq!(
        soe_config_set_application_protocol(config, c"Bench".as_ptr()),
        soe_status::SOE_OK
    );
    config
}

/// A client and a server endpoint connected through the C ABI, in memory. With `COUNT`, it
/// counts its boundary calls (a separate instance: the timed one does not pay for counting).
struct CPair<const COUNT: bool> {
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

impl<const COUNT: bool> CPair<COUNT> {
    /// Counts one boundary call (nothing unless `COUNT`).
    #[inline(always)]
    fn call(&mut self) {
        if COUNT {
            self.calls += 1;
        }
    }

    fn new() -> Self {
        let (mut client, mut server) = (ptr::null_mut(), ptr::null_mut());
        let now = 1_000_000u64;
        for (role, ep) in [
            (SOE_ROLE_SERVER, &mut server),
            (SOE_ROLE_CLIENT, &mut client),
        ] {
            let config = c_config(role);
            assert_eq!(soe_endpoint_new(config, now, ep), soe_status::SOE_OK);
            soe_config_free(config);
        }
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
                user: ptr::null_mut(),
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
            self.call();
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
            self.call();
            soe_endpoint_handle_datagram(to, self.now, &source, self.buf.as_ptr(), len);
        }
    }

    /// Takes one event of `ep`; whether there was one.
    fn take_event(&mut self, ep: *mut soe_endpoint) -> bool {
        self.call();
        let status =
            soe_endpoint_poll_event(ep, &mut self.event, self.buf.as_mut_ptr(), self.buf.len());
        std::hint::black_box(&self.buf[..self.event.len.min(self.buf.len())]);
        status == soe_status::SOE_OK
    }

    /// One message from the client through the server, and the ack back.
    fn one_message(&mut self) {
        self.now += 50;
        self.call();
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
        self.call();
        self.call();
        soe_endpoint_handle_timeout(self.server, self.now);
        self.pump(false);
        soe_endpoint_handle_timeout(self.client, self.now);
    }
}

impl<const COUNT: bool> Drop for CPair<COUNT> {
    fn drop(&mut self) {
        soe_endpoint_free(self.client);
        soe_endpoint_free(self.server);
    }
}

fn c_abi(c: &mut Criterion, group: &str) {
    // The boundary calls per message, counted over 10,000 messages by a counting pair.
    let mut counting = CPair::<true>::new();
    counting.calls = 0;
    for _ in 0..10_000 {
        counting.one_message();
    }
    eprintln!(
        "ffi_one_message/c_abi: {:.2} boundary calls per message",
        counting.calls as f64 / 10_000.0
    );
    drop(counting);
    let mut pair = CPair::<false>::new();
    for _ in 0..10_000 {
        pair.one_message();
    }
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

/// `boundary --count rust|c N`: N messages through one path after the same warm-up, and no
/// timing, for an instruction count (`valgrind --tool=callgrind`, stable on a loaded machine;
/// subtract a run with N = 0 to leave out the setup). Otherwise criterion's bench.
fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--count") {
        let path = args.get(at + 1).map(String::as_str);
        let n: u64 = args.get(at + 2).and_then(|n| n.parse().ok()).unwrap_or(0);
        match path {
            Some("rust") => {
                let mut pair = RustPair::new();
                for _ in 0..10_000 + n {
                    pair.one_message();
                }
            }
            Some("c") => {
                let mut pair = CPair::<true>::new();
                for _ in 0..10_000 + n {
                    pair.one_message();
                }
                eprintln!("boundary calls: {}", pair.calls);
            }
            Some("c-uncounted") => {
                let mut pair = CPair::<false>::new();
                for _ in 0..10_000 + n {
                    pair.one_message();
                }
            }
            _ => eprintln!("usage: boundary --count rust|c|c-uncounted N"),
        }
        return;
    }
    if let Some(at) = args.iter().position(|a| a == "--paired") {
        let rounds: usize = args.get(at + 1).and_then(|n| n.parse().ok()).unwrap_or(200);
        paired(rounds);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}

/// `boundary --paired ROUNDS`: the two paths timed in alternating blocks of 2,000 messages, so
/// that load from other processes falls on both alike; prints the median and quartiles of each
/// path's time per message and of the difference per boundary call, block pair by block pair.
/// For a machine others use at the same time, where criterion's runs of one path and then the
/// other meet different loads.
fn paired(rounds: usize) {
    const BLOCK: u32 = 2_000;
    let mut counting = CPair::<true>::new();
    counting.calls = 0;
    for _ in 0..10_000 {
        counting.one_message();
    }
    let calls = counting.calls as f64 / 10_000.0;
    drop(counting);
    let mut rust = RustPair::new();
    let mut c = CPair::<false>::new();
    for _ in 0..10_000 {
        rust.one_message();
        c.one_message();
    }
    let (mut rust_ns, mut c_ns, mut per_call) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let time = |f: &mut dyn FnMut()| {
            let started = Instant::now();
            for _ in 0..BLOCK {
                f();
            }
            started.elapsed().as_nanos() as f64 / f64::from(BLOCK)
        };
        let (r, k) = if round % 2 == 0 {
            let r = time(&mut || rust.one_message());
            (r, time(&mut || c.one_message()))
        } else {
            let k = time(&mut || c.one_message());
            (time(&mut || rust.one_message()), k)
        };
        rust_ns.push(r);
        c_ns.push(k);
        per_call.push((k - r) / calls);
    }
    let quartiles = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
        (at(0.25), at(0.5), at(0.75))
    };
    let (r25, r50, r75) = quartiles(&mut rust_ns);
    let (c25, c50, c75) = quartiles(&mut c_ns);
    let (d25, d50, d75) = quartiles(&mut per_call);
    println!(
        "paired, {rounds} rounds of {BLOCK} messages: rust_api {r50:.0} ns/message \
         (quartiles {r25:.0}-{r75:.0}), c_abi {c50:.0} ns/message ({c25:.0}-{c75:.0}), \
         {calls:.2} calls/message; per call {d50:.1} ns ({d25:.1}-{d75:.1})"
    );
}
