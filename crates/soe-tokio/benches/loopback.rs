//! Loopback figures a user cares about: the round trip of one small message through an echo
//! server (time per iteration = one RTT), and how many 64-byte messages per second one
//! connection delivers to the server (criterion's elements/s). For scale, the same round trip
//! over bare tokio UDP sockets (no protocol at all) runs in the same process and runtime.
//!
//! `cargo bench -p soe-tokio --bench loopback -- --warm-up-time 1 --measurement-time 2`
#![allow(missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use soe_tokio::bytes::Bytes;
use soe_tokio::{DisconnectReason, Endpoint, EndpointConfig, SessionConfig};

/// Messages per throughput iteration.
const BATCH: u64 = 2000;

fn configs() -> (EndpointConfig, EndpointConfig) {
    let session = Arc::new(SessionConfig::new("SoeBench"));
    (
        EndpointConfig::server(session.clone()),
        EndpointConfig::client(session),
    )
}

fn loopback(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (server_config, client_config) = configs();
    let (server, client, conn, mut batches) = rt.block_on(async {
        let server = Endpoint::bind("127.0.0.1:0".parse().unwrap(), server_config).unwrap();
        let (batch_tx, batches) = tokio::sync::mpsc::unbounded_channel();
        let acceptor = server.clone();
        tokio::spawn(async move {
            while let Some(conn) = acceptor.accept().await {
                let batch_tx = batch_tx.clone();
                tokio::spawn(async move {
                    let mut sunk = 0u64;
                    while let Some(msg) = conn.recv().await {
                        if msg.len() == 64 {
                            // Throughput: count, report each full batch.
                            sunk += 1;
                            if sunk % BATCH == 0 {
                                let _ = batch_tx.send(());
                            }
                        } else if conn.send(msg).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        let client = Endpoint::bind("127.0.0.1:0".parse().unwrap(), client_config).unwrap();
        let conn = client.connect(server.local_addr()).await.unwrap();
        (server, client, conn, batches)
    });

    let mut group = c.benchmark_group("loopback");
    let ping = Bytes::from_static(b"ping");
    group.throughput(Throughput::Elements(1));
    group.bench_function("echo_round_trip_4_bytes", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    conn.send(ping.clone()).await.unwrap();
                    conn.recv().await.unwrap();
                }
                start.elapsed()
            })
        })
    });

    // The floor: the same echo with bare UDP sockets on the same runtime (kernel + tokio only).
    let (raw_client, raw_server) = rt.block_on(async {
        let server = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let client = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        client.connect(server.local_addr().unwrap()).await.unwrap();
        (client, server)
    });
    let echo = rt.spawn(async move {
        let mut buf = [0u8; 64];
        while let Ok((n, from)) = raw_server.recv_from(&mut buf).await {
            if raw_server.send_to(&buf[..n], from).await.is_err() {
                break;
            }
        }
    });
    group.throughput(Throughput::Elements(1));
    group.bench_function("raw_udp_echo_round_trip_4_bytes", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut buf = [0u8; 64];
                let start = Instant::now();
                for _ in 0..iters {
                    raw_client.send(b"ping").await.unwrap();
                    raw_client.recv(&mut buf).await.unwrap();
                }
                start.elapsed()
            })
        })
    });
    echo.abort();

    let payload = Bytes::from(vec![0x5a; 64]);
    group.throughput(Throughput::Elements(BATCH));
    group.bench_function("one_connection_64_byte_messages", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    for _ in 0..BATCH {
                        conn.send(payload.clone()).await.unwrap();
                    }
                    batches.recv().await.unwrap();
                }
                start.elapsed()
            })
        })
    });
    group.finish();

    rt.block_on(async {
        client.close(DisconnectReason::Application);
        server.close(DisconnectReason::ManagerDeleted);
        let _ = tokio::time::timeout(Duration::from_secs(2), server.wait_idle()).await;
    });
}

criterion_group!(benches, loopback);
criterion_main!(benches);
