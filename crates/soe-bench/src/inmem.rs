//! In-memory session pairs: a client sends messages one way to a server, datagrams pass between
//! the two in memory, on a virtual clock that moves 1 µs per exchange round and jumps to the
//! next deadline when nothing else is pending. Wall time is measured.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use soe_protocol::{
    ApplicationParameters, Rc4KeyState, SessionParameters, SocketConfig, SocketEvent,
    SoeMultiplexer,
};
use soe_session::{Channel, Endpoint, EndpointConfig, Event, SessionConfig};

/// Which protocol options a pair uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// No encryption, no compression.
    Plain,
    /// RC4 on reliable data.
    Rc4,
    /// zlib compression negotiated.
    Compressed,
}

impl Mode {
    /// All three modes, in report order.
    pub const ALL: [Self; 3] = [Self::Plain, Self::Rc4, Self::Compressed];

    /// A short label.
    pub fn label(self) -> &'static str {
        match self {
            Self::Plain => "plain",
            Self::Rc4 => "RC4",
            Self::Compressed => "compressed",
        }
    }
}

/// The RC4 key both stacks use (16 arbitrary bytes).
pub const KEY: [u8; 16] = *b"soe-bench-key-16";
/// The application protocol name both sides use.
pub const PROTO: &str = "SoeBench";
/// Messages in flight (sent, not yet delivered) that the sender allows itself.
const WINDOW: usize = 64;

/// What one in-memory run delivered.
#[derive(Debug, Clone, Copy)]
pub struct Outcome {
    /// Messages delivered and verified (right length, right content).
    pub delivered: u64,
    /// Wall time taken.
    pub elapsed: Duration,
}

impl Outcome {
    /// Messages per second.
    pub fn per_sec(&self) -> f64 {
        self.delivered as f64 / self.elapsed.as_secs_f64()
    }
}

/// The message number `i` of `size` bytes: compressible text-like content (a repeating
/// pattern with the number in front), so compression has something to do.
pub fn message(i: u64, size: usize) -> Vec<u8> {
    let mut m: Vec<u8> = b"soe bench message payload "
        .iter()
        .copied()
        .cycle()
        .take(size)
        .collect();
    let n = i.to_le_bytes();
    let k = size.min(8);
    m[..k].copy_from_slice(&n[..k]);
    m
}

fn verify(i: u64, size: usize, data: &[u8]) -> bool {
    let k = size.min(8);
    data.len() == size && data[..k] == i.to_le_bytes()[..k]
}

/// Our stack: `count` messages of `size` bytes through an Endpoint pair.
///
/// # Panics
///
/// If a message arrives wrong or the pair stalls (no progress for 10 virtual seconds).
pub fn ours(size: usize, count: u64, mode: Mode) -> Outcome {
    let mut cfg = SessionConfig::new(PROTO)
        .with_udp_length(512)
        .with_compression(mode == Mode::Compressed)
        .with_idle_timeout(None);
    if mode == Mode::Rc4 {
        cfg = cfg
            .with_encryption_key(Bytes::from_static(&KEY))
            .expect("a 16-byte key is valid");
    }
    let cfg = Arc::new(cfg);
    let mut server: Endpoint<u32> = Endpoint::new(Arc::new(
        EndpointConfig::server(cfg.clone()).with_rng_seed(1),
    ));
    let mut client: Endpoint<u32> =
        Endpoint::new(Arc::new(EndpointConfig::client(cfg).with_rng_seed(2)));
    let mut now = Instant::now();
    let h = client.connect(now, 0).expect("connect");
    let payloads: Vec<Bytes> = (0..WINDOW as u64 * 2)
        .map(|i| Bytes::from(message(i, size)))
        .collect();
    let mut buf = Vec::with_capacity(2048);
    let (mut sent, mut delivered) = (0u64, 0u64);
    let mut connected = false;
    let mut stalled_since = now;
    let start = Instant::now();
    while delivered < count {
        if connected {
            while sent < count && sent - delivered < WINDOW as u64 {
                let p = payloads[(sent % payloads.len() as u64) as usize].clone();
                if client.send(h, Channel::ZERO, p).is_err() {
                    break;
                }
                sent += 1;
            }
        }
        let mut moved = false;
        while let Some(t) = client.poll_transmit(now, &mut buf) {
            server.handle_datagram(now, 1, &buf[..t.len]);
            moved = true;
        }
        while let Some(t) = server.poll_transmit(now, &mut buf) {
            client.handle_datagram(now, 0, &buf[..t.len]);
            moved = true;
        }
        while let Some((_, ev)) = client.poll_event() {
            if ev == Event::Connected {
                connected = true;
            }
        }
        while let Some((_, ev)) = server.poll_event() {
            if let Event::Message { data, .. } = ev {
                let i = delivered % payloads.len() as u64;
                assert!(verify(i, size, &data), "message {delivered} arrived wrong");
                delivered += 1;
                moved = true;
            }
        }
        if moved {
            now += Duration::from_micros(1);
            stalled_since = now;
        } else {
            let next = [client.poll_timeout(), server.poll_timeout()]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(now + Duration::from_millis(1));
            now = now.max(next);
            assert!(
                now - stalled_since < Duration::from_secs(10),
                "our pair stalled at {delivered} of {count}"
            );
        }
        client.handle_timeout(now);
        server.handle_timeout(now);
    }
    Outcome {
        delivered,
        elapsed: start.elapsed(),
    }
}

/// The peer's configuration for `mode`.
pub fn peer_config(mode: Mode, seed: u64) -> SocketConfig {
    SocketConfig {
        default_session_params: SessionParameters {
            application_protocol: PROTO.to_owned(),
            udp_length: 512,
            is_compression_enabled: mode == Mode::Compressed,
            inactivity_timeout: Duration::from_secs(3600),
            ..SessionParameters::default()
        },
        app_params: ApplicationParameters {
            encryption_key_state: (mode == Mode::Rc4).then(|| Rc4KeyState::new(&KEY)),
        },
        base_rng_seed: seed,
        ..SocketConfig::default()
    }
}

/// soe-protocol 2.3.0: `count` messages of `size` bytes through two `SoeMultiplexer`s, with its
/// tick run every exchange round. Returns `None` if the pair stalls (no delivery for 10 virtual
/// seconds) or a session closes.
///
/// # Panics
///
/// If a message arrives wrong.
pub fn peer(size: usize, count: u64, mode: Mode) -> Option<Outcome> {
    let (ca, sa): (SocketAddr, SocketAddr) =
        (([127, 0, 0, 1], 1).into(), ([127, 0, 0, 1], 2).into());
    let mut server = SoeMultiplexer::new(peer_config(mode, 1));
    let mut client = SoeMultiplexer::new(peer_config(mode, 2));
    let mut now = Instant::now();
    client.connect(sa, now);
    let payloads: Vec<Vec<u8>> = (0..WINDOW as u64 * 2).map(|i| message(i, size)).collect();
    let (mut sent, mut delivered) = (0u64, 0u64);
    let mut connected = false;
    let mut last_progress = now;
    let start = Instant::now();
    while delivered < count {
        if connected {
            while sent < count && sent - delivered < WINDOW as u64 {
                let p = &payloads[(sent % payloads.len() as u64) as usize];
                if !client.enqueue_data(&sa, p) {
                    break;
                }
                sent += 1;
            }
        }
        client.run_tick(now);
        let mut moved = false;
        for (_, d) in client.take_outgoing() {
            server.process_incoming(ca, d, now);
            moved = true;
        }
        server.run_tick(now);
        for (_, d) in server.take_outgoing() {
            client.process_incoming(sa, d, now);
            moved = true;
        }
        for ev in client.take_events() {
            match ev {
                SocketEvent::SessionOpened { .. } => connected = true,
                SocketEvent::SessionClosed { .. } => return None,
                SocketEvent::DataReceived { .. } => {}
            }
        }
        for ev in server.take_events() {
            match ev {
                SocketEvent::DataReceived { data, .. } => {
                    let i = delivered % payloads.len() as u64;
                    assert!(
                        verify(i, size, &data),
                        "peer message {delivered} arrived wrong"
                    );
                    delivered += 1;
                    last_progress = now;
                }
                SocketEvent::SessionClosed { .. } => return None,
                SocketEvent::SessionOpened { .. } => {}
            }
        }
        // The peer acts on its tick: let virtual time pass faster when nothing moved.
        now += if moved {
            Duration::from_micros(1)
        } else {
            Duration::from_millis(1)
        };
        if now - last_progress > Duration::from_secs(10) {
            return None;
        }
    }
    Some(Outcome {
        delivered,
        elapsed: start.elapsed(),
    })
}
