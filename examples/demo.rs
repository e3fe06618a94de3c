//! The SOE demo: two servers (one plain, one RC4-encrypted) and a few clients on 127.0.0.1
//! exchange small and fragmented messages, then everybody closes cleanly.
//!
//! `cargo run --release --example demo`

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use soe_tokio::bytes::Bytes;
use soe_tokio::{
    CloseReason, DisconnectReason, Endpoint, EndpointConfig, SessionConfig, SessionStats,
};

/// Clients per server.
const CLIENTS: usize = 2;
/// Small messages each client sends, one at a time, timing each echo.
const PINGS: usize = 200;
/// Fragmented messages (8 to 20 KiB) each client sends.
const LARGE: usize = 10;
const RC4_KEY: &[u8] = b"demo key 0123456789abcdef";

/// What one client saw.
struct Report {
    name: String,
    messages: usize,
    bytes: usize,
    rtts: Vec<Duration>,
    stats: SessionStats,
    server_saw: CloseReason,
}

type Error = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let started = Instant::now();
    let plain = Arc::new(SessionConfig::new("SoeDemo"));
    let rc4 =
        Arc::new(SessionConfig::new("SoeDemo").with_encryption_key(Bytes::from_static(RC4_KEY))?);

    let mut servers = Vec::new();
    let mut clients = Vec::new();
    for (label, session) in [("plain", plain), ("rc4", rc4)] {
        let server = Endpoint::bind(
            "127.0.0.1:0".parse()?,
            EndpointConfig::server(session.clone()),
        )?;
        println!("server {label:<5} listening on {}", server.local_addr());
        let (closes_tx, closes) = tokio::sync::mpsc::unbounded_channel();
        let acceptor = server.clone();
        tokio::spawn(async move {
            // One task per session: echo everything, then report how the session ended.
            while let Some(conn) = acceptor.accept().await {
                let closes_tx = closes_tx.clone();
                tokio::spawn(async move {
                    while let Some(message) = conn.recv().await {
                        if conn.send(message).await.is_err() {
                            break;
                        }
                    }
                    let _ = closes_tx.send((conn.remote_addr(), conn.closed().await));
                });
            }
        });
        for n in 0..CLIENTS {
            let name = format!("{label}-{}", n + 1);
            let server_addr = server.local_addr();
            let session = session.clone();
            clients.push(tokio::spawn(run_client(name, server_addr, session)));
        }
        servers.push((server, closes));
    }

    let mut reports = Vec::new();
    for client in clients {
        let (report, local) = client.await??;
        reports.push((report, local));
    }
    // Match each client with how its server saw the close.
    for (server, closes) in &mut servers {
        for _ in 0..CLIENTS {
            let (remote, reason) = closes.recv().await.ok_or("server task ended")?;
            if let Some((report, _)) = reports.iter_mut().find(|(_, local)| *local == remote) {
                report.server_saw = reason;
            }
        }
        server.close(DisconnectReason::ManagerDeleted);
        server.wait_idle().await;
    }

    print_reports(
        &reports.iter().map(|(r, _)| r).collect::<Vec<_>>(),
        started.elapsed(),
    );
    Ok(())
}

/// Connects, pings, sends large messages, checks every echo, closes.
async fn run_client(
    name: String,
    server: SocketAddr,
    session: Arc<SessionConfig>,
) -> Result<(Report, SocketAddr), Error> {
    let endpoint = Endpoint::bind("127.0.0.1:0".parse()?, EndpointConfig::client(session))?;
    let conn = endpoint.connect(server).await?;
    let mut report = Report {
        name,
        messages: 0,
        bytes: 0,
        rtts: Vec::with_capacity(PINGS),
        stats: SessionStats::default(),
        server_saw: CloseReason::new(DisconnectReason::None, false),
    };
    for i in 0..PINGS {
        let message = Bytes::from(format!("ping {i} from {}", report.name));
        let sent = Instant::now();
        conn.send(message.clone()).await?;
        let echo = conn.recv().await.ok_or("closed during pings")?;
        report.rtts.push(sent.elapsed());
        if echo != message {
            return Err(format!("{}: echo {i} differs", report.name).into());
        }
        report.messages += 1;
        report.bytes += message.len();
    }
    let large: Vec<Bytes> = (0..LARGE)
        .map(|i| {
            let len = 8 * 1024 + (i * 1229) % (12 * 1024 + 1);
            Bytes::from((0..len).map(|k| (k * 7 + i) as u8).collect::<Vec<u8>>())
        })
        .collect();
    for message in &large {
        conn.send(message.clone()).await?;
    }
    for (i, message) in large.iter().enumerate() {
        let echo = conn.recv().await.ok_or("closed during large messages")?;
        if echo != *message {
            return Err(format!("{}: large echo {i} differs", report.name).into());
        }
        report.messages += 1;
        report.bytes += message.len();
    }
    report.stats = conn.stats().unwrap_or_default();
    let local = endpoint.local_addr();
    conn.close(DisconnectReason::Application);
    endpoint.close(DisconnectReason::Application);
    endpoint.wait_idle().await;
    Ok((report, local))
}

fn print_reports(reports: &[&Report], elapsed: Duration) {
    println!();
    println!(
        "{:<8} {:>5} {:>9}  {:>22}  {:>7} {:>7}  server saw close",
        "client", "msgs", "bytes", "rtt min/avg/max (ms)", "resends", "dgrams"
    );
    let (mut messages, mut bytes, mut resends) = (0, 0, 0);
    let mut all_rtts = Vec::new();
    for r in reports {
        let (min, avg, max) = summary(&r.rtts);
        println!(
            "{:<8} {:>5} {:>9}  {:>6.3} /{:>6.3} /{:>6.3}  {:>7} {:>7}  {:?}{}",
            r.name,
            r.messages,
            r.bytes,
            ms(min),
            ms(avg),
            ms(max),
            r.stats.resends,
            r.stats.datagrams_sent,
            r.server_saw.reason,
            if r.server_saw.by_peer {
                " (by client)"
            } else {
                ""
            },
        );
        messages += r.messages;
        bytes += r.bytes;
        resends += r.stats.resends;
        all_rtts.extend_from_slice(&r.rtts);
    }
    let (min, avg, max) = summary(&all_rtts);
    println!(
        "\n{} sessions, {messages} messages echoed and verified ({} fragmented, {:.1} KiB each way), \
         rtt {:.3}/{:.3}/{:.3} ms, {resends} resends, closed cleanly in {:.2} s",
        reports.len(),
        reports.len() * LARGE,
        bytes as f64 / 1024.0,
        ms(min),
        ms(avg),
        ms(max),
        elapsed.as_secs_f64()
    );
}

fn summary(rtts: &[Duration]) -> (Duration, Duration, Duration) {
    let min = rtts.iter().min().copied().unwrap_or_default();
    let max = rtts.iter().max().copied().unwrap_or_default();
    let avg = rtts.iter().sum::<Duration>() / u32::try_from(rtts.len().max(1)).unwrap_or(1);
    (min, avg, max)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
