//! The `/metrics` endpoint of `soe serve`: Prometheus text on `GET /metrics`, 404 on any other
//! path, 405 for any other method, with a `# HELP` line for every metric.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result};
use metrics_exporter_prometheus::PrometheusBuilder;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The largest request head read; longer requests get 431.
const MAX_REQUEST: usize = 8 * 1024;
/// How long a client may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Installs the recorder, describes the metrics, and serves them on `addr`; returns the bound
/// address. `publish` sets the metrics from the server's counters; it runs at every scrape,
/// so what one scrape shows was read at one moment (no counter lags behind another).
pub(crate) async fn serve(
    addr: SocketAddr,
    publish: impl Fn() + Send + Sync + 'static,
) -> Result<SocketAddr> {
    let publish = std::sync::Arc::new(publish);
    let handle = PrometheusBuilder::new()
        .install_recorder()
        .context("cannot install the metrics recorder")?;
    describe();
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot serve metrics on {addr}"))?;
    let local = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let (handle, publish) = (handle.clone(), publish.clone());
            tokio::spawn(async move {
                let render = || {
                    publish();
                    handle.render()
                };
                let _ = tokio::time::timeout(REQUEST_TIMEOUT, answer(stream, render)).await;
            });
        }
    });
    Ok(local)
}

/// A `# HELP` (and `# TYPE`) line for every metric `soe serve` exports, each registered at
/// zero.
fn describe() {
    metrics::describe_gauge!("soe_sessions", "Sessions open now.");
    metrics::describe_counter!("soe_sessions_opened_total", "Sessions opened since start.");
    metrics::describe_counter!(
        "soe_sessions_closed_total",
        "Sessions closed since start, by disconnect reason."
    );
    metrics::describe_counter!(
        "soe_messages_received_total",
        "Application messages received, all sessions."
    );
    metrics::describe_counter!(
        "soe_messages_sent_total",
        "Application messages sent, all sessions."
    );
    metrics::describe_counter!(
        "soe_bytes_received_total",
        "Application message bytes received, all sessions."
    );
    metrics::describe_counter!(
        "soe_resends_total",
        "Reliable packets sent again, all sessions."
    );
    metrics::describe_counter!(
        "soe_crc_rejects_total",
        "Datagrams dropped for a bad CRC, all sessions."
    );
    metrics::describe_counter!(
        "soe_echoes_dropped_total",
        "Unreliable and ordered echoes the session's queue had no room for."
    );
    metrics::describe_counter!(
        "soe_key_checks_total",
        "Key probes of soe ping and soe load, by result: agreed, or mismatch (the probe did not read)."
    );
    metrics::describe_counter!(
        "soe_sessions_looking_encrypted_total",
        "Sessions whose first KiB of reliable data looks encrypted after this server's decryption."
    );
    // Every metric is there from the start, at zero, so a scrape before the first session
    // sees the whole set (the per-reason close counters appear with their first close).
    metrics::gauge!("soe_sessions").set(0.0);
    for name in [
        "soe_sessions_opened_total",
        "soe_messages_received_total",
        "soe_messages_sent_total",
        "soe_bytes_received_total",
        "soe_resends_total",
        "soe_crc_rejects_total",
        "soe_echoes_dropped_total",
        "soe_sessions_looking_encrypted_total",
    ] {
        metrics::counter!(name).absolute(0);
    }
    for result in ["agreed", "mismatch"] {
        metrics::counter!("soe_key_checks_total", "result" => result).absolute(0);
    }
}

/// Reads one request and answers it; the connection closes after.
async fn answer(mut stream: TcpStream, render: impl Fn() -> String) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
        if head.len() > MAX_REQUEST {
            return respond(&mut stream, "431 Request Header Fields Too Large", "", "").await;
        }
    }
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    match (method, path) {
        ("GET" | "HEAD", "/metrics") => {
            let body = render();
            // HEAD: the headers of the GET, its Content-Length included, without the body.
            let mut out = head_of("200 OK", "text/plain; version=0.0.4; charset=utf-8", &body);
            if method == "GET" {
                out.push_str(&body);
            }
            stream.write_all(out.as_bytes()).await?;
            stream.shutdown().await
        }
        (_, "/metrics") => {
            respond(
                &mut stream,
                "405 Method Not Allowed",
                "text/plain",
                "use GET /metrics\n",
            )
            .await
        }
        _ => {
            respond(
                &mut stream,
                "404 Not Found",
                "text/plain",
                "not found: the metrics are at /metrics\n",
            )
            .await
        }
    }
}

/// Writes a whole response.
async fn respond(
    stream: &mut TcpStream,
    status: &str,
    content_type: &str,
    body: &str,
) -> std::io::Result<()> {
    let mut out = head_of(status, content_type, body);
    out.push_str(body);
    stream.write_all(out.as_bytes()).await?;
    stream.shutdown().await
}

/// The status line and headers of a response carrying `body`.
fn head_of(status: &str, content_type: &str, body: &str) -> String {
    let mut out = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\n", body.len());
    if !content_type.is_empty() {
        out.push_str(&format!("Content-Type: {content_type}\r\n"));
    }
    out.push_str("Connection: close\r\n\r\n");
    out
}
