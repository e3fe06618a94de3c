//! What the `tracing` events of the endpoint cost on the hot datagram path: the same work with
//! no subscriber installed, and with a `fmt` subscriber that records INFO and above (writing to
//! a sink, so the figure is the filtering and not the terminal).
//!
//! * `datagram_round_trip`: one 64-byte reliable message from a client session through the
//!   server endpoint (`handle_datagram`, `poll_transmit` of the ack, `poll_event` of the
//!   message), and the ack back into the client.
//! * `crc_reject`: one datagram with a bad CRC into an established session; the endpoint's
//!   CRC-reject event is rate-limited to one a second per session, so nearly every iteration
//!   takes the suppressed branch.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{Criterion, Throughput};
use soe_session::{
    Channel, Endpoint, EndpointConfig, Event, Session, SessionConfig, SessionHandle, SplitMix64,
};
use tracing::Level;

const PROTO: &[u8] = b"BenchProto_1";
const REMOTE: u32 = 7;

/// A server endpoint and a client session connected to it, with their clock.
struct Pair {
    server: Endpoint<u32>,
    client: Session,
    /// The server's handle to the client's session.
    handle: SessionHandle,
    now: Instant,
    buf: Vec<u8>,
}

impl Pair {
    fn new() -> Self {
        let config = Arc::new(SessionConfig::new(PROTO));
        let now = Instant::now();
        let server = Endpoint::new(Arc::new(
            EndpointConfig::server(config.clone()).with_rng_seed(1),
        ));
        let mut client = Session::client(now, config, &mut SplitMix64::new(2));
        let mut buf = Vec::with_capacity(2048);
        let mut server = server;
        let mut handle = None;
        for _ in 0..4 {
            while let Some(n) = client.poll_transmit(now, &mut buf) {
                server.handle_datagram(now, REMOTE, &buf[..n]);
            }
            while let Some(t) = server.poll_transmit(now, &mut buf) {
                client.handle_datagram(now, &buf[..t.len]);
            }
            while let Some((h, event)) = server.poll_event() {
                if event == Event::Accepted {
                    handle = Some(h);
                }
            }
        }
        while client.poll_event().is_some() {}
        let Some(handle) = handle else {
            panic!("the handshake did not complete");
        };
        Self {
            server,
            client,
            handle,
            now,
            buf,
        }
    }

    /// Moves every pending datagram each way once, and takes the server's events.
    fn exchange(&mut self) {
        while let Some(n) = self.client.poll_transmit(self.now, &mut self.buf) {
            self.server
                .handle_datagram(self.now, REMOTE, black_box(&self.buf[..n]));
        }
        while let Some(t) = self.server.poll_transmit(self.now, &mut self.buf) {
            self.client.handle_datagram(self.now, &self.buf[..t.len]);
        }
        while let Some(event) = self.server.poll_event() {
            black_box(event);
        }
    }

    /// One message through, acknowledged; time moves past the ack delay.
    fn round_trip(&mut self, message: &Bytes) {
        self.now += Duration::from_millis(3);
        if self.client.send(Channel::ZERO, message.clone()).is_err() {
            panic!("client send queue full");
        }
        self.exchange();
        if self.server.poll_timeout().is_some_and(|t| t <= self.now) {
            self.server.handle_timeout(self.now);
            self.exchange();
        }
        while self.client.poll_event().is_some() {}
    }
}

fn run(c: &mut Criterion, mode: &str) {
    let mut group = c.benchmark_group(format!("endpoint/tracing/{mode}"));
    group.throughput(Throughput::Elements(1));
    let message = Bytes::from(vec![0x42u8; 64]);
    group.bench_function("datagram_round_trip", |b| {
        let mut pair = Pair::new();
        b.iter(|| pair.round_trip(&message));
    });
    group.bench_function("crc_reject", |b| {
        let mut pair = Pair::new();
        // A heartbeat with a CRC that cannot match (any two bytes are some session's CRC, but
        // not this one's: the seed is fixed by rng_seed).
        let bad = [0x00, 0x06, 0x00, 0x00];
        let rejects = |pair: &Pair| {
            pair.server
                .stats(pair.handle)
                .map_or(0, |stats| stats.crc_rejects)
        };
        let before = rejects(&pair);
        pair.server.handle_datagram(pair.now, REMOTE, &bad);
        assert_eq!(rejects(&pair), before + 1, "the datagram must fail the CRC");
        b.iter(|| {
            pair.now += Duration::from_micros(10);
            pair.server
                .handle_datagram(pair.now, REMOTE, black_box(&bad));
        });
    });
    group.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    run(&mut c, "no_subscriber");
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(Level::INFO)
        .with_writer(std::io::sink)
        .finish();
    tracing::subscriber::with_default(subscriber, || run(&mut c, "info_subscriber"));
    c.final_summary();
}
