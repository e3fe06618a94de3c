//! Loopback UDP echo: `sessions` clients, each keeping `outstanding` messages in flight to an
//! echo server; every echo is verified and answered by the next message. The same client logic
//! drives our stack (soe-tokio), the peer (its tokio adapter) and bare tokio UDP sockets.

use std::alloc::System;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use soe_protocol::{ClientEvent, SocketEvent, TokioSoeClient, TokioSoeServer};
use soe_tokio::{DisconnectReason, Endpoint, EndpointConfig, SessionConfig};
use stats_alloc::StatsAlloc;
use tokio::net::UdpSocket;
use tokio::task::JoinSet;

use crate::inmem::{Mode, PROTO, message, peer_config};

/// One echo workload.
#[derive(Debug, Clone, Copy)]
pub struct Workload {
    /// Client sessions.
    pub sessions: usize,
    /// Messages each keeps in flight.
    pub outstanding: usize,
    /// Message size in bytes.
    pub size: usize,
    /// How long to measure (after connecting).
    pub duration: Duration,
    /// Compression on (ours and peer).
    pub compression: bool,
    /// When set (the process's global allocator), allocations during the measured time are
    /// counted into [`EchoOutcome::allocations`].
    pub alloc: Option<&'static StatsAlloc<System>>,
}

/// What an echo run measured.
#[derive(Debug, Clone, Default)]
pub struct EchoOutcome {
    /// Echoes received and verified.
    pub echoes: u64,
    /// Echoes per second over the measured time.
    pub per_sec: f64,
    /// Median round trip, µs.
    pub p50_us: f64,
    /// 99th percentile round trip, µs.
    pub p99_us: f64,
    /// Kernel UDP receive-buffer drops during the run (whole machine, /proc/net/snmp).
    pub kernel_drops: u64,
    /// Sessions that connected (less than asked: the stack collapsed).
    pub connected: usize,
    /// Sessions that stopped (closed or stalled) before the end.
    pub failed: usize,
    /// Heap allocations (and reallocations) in the whole process during the measured time, when
    /// [`Workload::alloc`] was given.
    pub allocations: u64,
}

impl EchoOutcome {
    /// Payload bytes per second, one direction.
    pub fn bytes_per_sec(&self, size: usize) -> f64 {
        self.per_sec * size as f64
    }
}

/// The UDP RcvbufErrors counter of /proc/net/snmp (0 where unavailable).
pub fn kernel_rcvbuf_errors() -> u64 {
    let Ok(text) = std::fs::read_to_string("/proc/net/snmp") else {
        return 0;
    };
    let mut lines = text.lines().filter(|l| l.starts_with("Udp:"));
    let (Some(head), Some(vals)) = (lines.next(), lines.next()) else {
        return 0;
    };
    head.split_whitespace()
        .zip(vals.split_whitespace())
        .find(|(h, _)| *h == "RcvbufErrors")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

/// The client side of one session, whatever the stack.
trait EchoClient: Send + 'static {
    /// Whether echoes come back exactly once and in order (false for bare UDP).
    const ORDERED: bool = true;
    /// Queues a message.
    fn send(&mut self, data: Bytes) -> impl Future<Output = bool> + Send;
    /// The next echoed message; `None` when the session ended.
    fn recv(&mut self) -> impl Future<Output = Option<Bytes>> + Send;
}

struct Ours(soe_tokio::Connection);

impl EchoClient for Ours {
    async fn send(&mut self, data: Bytes) -> bool {
        self.0.send(data).await.is_ok()
    }
    async fn recv(&mut self) -> Option<Bytes> {
        self.0.recv().await
    }
}

struct Peer(TokioSoeClient);

impl EchoClient for Peer {
    async fn send(&mut self, data: Bytes) -> bool {
        self.0.handle().enqueue_data(data)
    }
    async fn recv(&mut self) -> Option<Bytes> {
        loop {
            match self.0.recv_event().await? {
                ClientEvent::DataReceived { data, .. } => return Some(data),
                ClientEvent::Disconnected { .. } => return None,
                ClientEvent::Connected => {}
            }
        }
    }
}

struct Raw {
    socket: Arc<UdpSocket>,
    buf: Vec<u8>,
}

impl EchoClient for Raw {
    const ORDERED: bool = false;
    async fn send(&mut self, data: Bytes) -> bool {
        self.socket.send(&data).await.is_ok()
    }
    async fn recv(&mut self) -> Option<Bytes> {
        let n = self.socket.recv(&mut self.buf).await.ok()?;
        Some(Bytes::copy_from_slice(&self.buf[..n]))
    }
}

/// The identical client logic: keep `outstanding` in flight, verify each echo, record its
/// round trip, until `stop`. Returns (echoes, round trips in ns, whether it ended early).
async fn run_client<C: EchoClient>(
    mut c: C,
    w: Workload,
    stop: Arc<AtomicBool>,
) -> (u64, Vec<u32>, bool) {
    let payloads: Vec<Bytes> = (0..w.outstanding as u64 * 2)
        .map(|i| Bytes::from(message(i, w.size)))
        .collect();
    let mut sent_at = std::collections::VecDeque::with_capacity(w.outstanding);
    let mut rtts = Vec::with_capacity(1 << 16);
    let (mut next, mut done) = (0u64, 0u64);
    for _ in 0..w.outstanding {
        sent_at.push_back(Instant::now());
        if !c
            .send(payloads[next as usize % payloads.len()].clone())
            .await
        {
            return (done, rtts, true);
        }
        next += 1;
    }
    while !stop.load(Ordering::Relaxed) {
        let patience = if C::ORDERED {
            Duration::from_secs(2)
        } else {
            Duration::from_millis(10)
        };
        let got = tokio::time::timeout(patience, c.recv()).await;
        let data = match got {
            Ok(Some(data)) => data,
            // Bare UDP loses datagrams when the kernel's buffers overflow: count the oldest as
            // lost and send a new one, so the pipeline stays full.
            Err(_) if !C::ORDERED => {
                sent_at.pop_front();
                sent_at.push_back(Instant::now());
                if !c
                    .send(payloads[next as usize % payloads.len()].clone())
                    .await
                {
                    return (done, rtts, true);
                }
                next += 1;
                continue;
            }
            _ => return (done, rtts, true),
        };
        let expect = &payloads[done as usize % payloads.len()];
        assert_eq!(data.len(), expect.len(), "echo {done} has the wrong length");
        assert!(
            !C::ORDERED || data == expect,
            "echo {done} has the wrong content"
        );
        if let Some(t) = sent_at.pop_front() {
            rtts.push(u32::try_from(t.elapsed().as_nanos()).unwrap_or(u32::MAX));
        }
        done += 1;
        sent_at.push_back(Instant::now());
        if !c
            .send(payloads[next as usize % payloads.len()].clone())
            .await
        {
            return (done, rtts, true);
        }
        next += 1;
    }
    (done, rtts, false)
}

async fn measure<C: EchoClient>(clients: Vec<C>, w: Workload) -> EchoOutcome {
    let stop = Arc::new(AtomicBool::new(false));
    let connected = clients.len();
    let drops0 = kernel_rcvbuf_errors();
    let mut set = JoinSet::new();
    let start = Instant::now();
    for c in clients {
        set.spawn(run_client(c, w, stop.clone()));
    }
    // Count allocations only in the steady state (after every client has started).
    tokio::time::sleep(w.duration / 10).await;
    let counted0 = w.alloc.map(StatsAlloc::stats);
    tokio::time::sleep(w.duration - w.duration / 10).await;
    let counted = w.alloc.zip(counted0).map_or(0, |(a, s0)| {
        let s1 = a.stats();
        (s1.allocations + s1.reallocations).saturating_sub(s0.allocations + s0.reallocations)
    });
    stop.store(true, Ordering::Relaxed);
    let elapsed = start.elapsed();
    let mut out = EchoOutcome {
        connected,
        allocations: counted as u64,
        ..EchoOutcome::default()
    };
    let mut rtts = Vec::new();
    while let Some(r) = set.join_next().await {
        let (n, mut r, failed) = r.expect("an echo client panicked");
        out.echoes += n;
        out.failed += usize::from(failed);
        rtts.append(&mut r);
    }
    out.kernel_drops = kernel_rcvbuf_errors().saturating_sub(drops0);
    out.per_sec = out.echoes as f64 / elapsed.as_secs_f64();
    rtts.sort_unstable();
    let pct = |p: f64| {
        rtts.get(((rtts.len() as f64 * p) as usize).min(rtts.len().saturating_sub(1)))
            .map_or(f64::NAN, |v| f64::from(*v) / 1000.0)
    };
    out.p50_us = pct(0.50);
    out.p99_us = pct(0.99);
    out
}

fn localhost() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// Our stack: an echo server Endpoint and one client Endpoint per session (soe-tokio).
///
/// # Panics
///
/// If binding fails or an echo arrives wrong.
pub async fn ours(w: Workload) -> EchoOutcome {
    let cfg = Arc::new(
        SessionConfig::new(PROTO)
            .with_udp_length(512)
            .with_compression(w.compression),
    );
    let server = Endpoint::bind(localhost(), EndpointConfig::server(cfg.clone())).expect("bind");
    let acceptor = server.clone();
    let accept = tokio::spawn(async move {
        while let Some(conn) = acceptor.accept().await {
            tokio::spawn(async move {
                while let Some(msg) = conn.recv().await {
                    if conn.send(msg).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    let mut endpoints = Vec::new();
    let mut clients = Vec::new();
    for _ in 0..w.sessions {
        let ep = Endpoint::bind(localhost(), EndpointConfig::client(cfg.clone())).expect("bind");
        if let Ok(Ok(c)) =
            tokio::time::timeout(Duration::from_secs(5), ep.connect(server.local_addr())).await
        {
            clients.push(Ours(c));
        }
        endpoints.push(ep);
    }
    let out = measure(clients, w).await;
    for ep in &endpoints {
        ep.close(DisconnectReason::Application);
    }
    server.close(DisconnectReason::ManagerDeleted);
    let _ = tokio::time::timeout(Duration::from_secs(1), server.wait_idle()).await;
    accept.abort();
    out
}

/// The peer's tick (its timer granularity), as its interop tests use.
pub const PEER_TICK: Duration = Duration::from_millis(2);

/// soe-protocol 2.3.0: its TokioSoeServer echoing, one TokioSoeClient per session.
///
/// # Panics
///
/// If binding fails or an echo arrives wrong.
pub async fn peer(w: Workload) -> EchoOutcome {
    let mode = if w.compression {
        Mode::Compressed
    } else {
        Mode::Plain
    };
    let mut server = TokioSoeServer::bind(localhost(), peer_config(mode, 1), PEER_TICK)
        .await
        .expect("bind the peer server");
    let addr = server.local_addr();
    let handle = server.handle();
    let echo = tokio::spawn(async move {
        while let Some(ev) = server.recv_event().await {
            if let SocketEvent::DataReceived { remote, data, .. } = ev {
                handle.enqueue_data(remote, data);
            }
        }
    });
    let mut clients = Vec::new();
    for i in 0..w.sessions {
        let Ok(mut c) = TokioSoeClient::connect(
            localhost(),
            addr,
            peer_config(mode, 100 + i as u64),
            PEER_TICK,
        )
        .await
        else {
            continue;
        };
        let ok = tokio::time::timeout(Duration::from_secs(5), c.recv_event()).await;
        if matches!(ok, Ok(Some(ClientEvent::Connected))) {
            clients.push(Peer(c));
        }
    }
    let out = measure(clients, w).await;
    echo.abort();
    out
}

/// Bare tokio UDP: one echo socket, one client socket per session, no protocol at all.
///
/// # Panics
///
/// If binding fails.
pub async fn raw(w: Workload) -> EchoOutcome {
    let server = UdpSocket::bind(localhost()).await.expect("bind");
    let addr = server.local_addr().expect("local address");
    let echo = tokio::spawn(async move {
        let mut buf = vec![0u8; 65536];
        while let Ok((n, from)) = server.recv_from(&mut buf).await {
            if server.send_to(&buf[..n], from).await.is_err() {
                break;
            }
        }
    });
    let mut clients = Vec::new();
    for _ in 0..w.sessions {
        let s = UdpSocket::bind(localhost()).await.expect("bind");
        s.connect(addr).await.expect("connect");
        clients.push(Raw {
            socket: Arc::new(s),
            buf: vec![0u8; 65536],
        });
    }
    let out = measure(clients, w).await;
    echo.abort();
    out
}
