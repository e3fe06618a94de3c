//! Broadcast: one payload to many sessions without copying it per recipient.
//!
//! A `Bytes` clone is a reference count increment: every session's send queue points at the same
//! buffer (RC4 sessions excepted: encryption needs its own copy per session, made inside the
//! session at send time).
//!
//! `cargo run --example broadcast`

use std::sync::Arc;
use std::time::Instant;

use soe_tokio::bytes::Bytes;
use soe_tokio::{DisconnectReason, Endpoint, EndpointConfig, SessionConfig};

const CLIENTS: usize = 20;
const ROUNDS: usize = 50;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let session = Arc::new(SessionConfig::new("SoeBroadcast"));
    let server = Endpoint::bind(
        "127.0.0.1:0".parse()?,
        EndpointConfig::server(session.clone()),
    )?;

    // Clients: each counts what it receives.
    let mut clients = Vec::new();
    let mut listeners = Vec::new();
    for _ in 0..CLIENTS {
        let client = Endpoint::client(EndpointConfig::client(session.clone()))?;
        let conn = client.connect(server.local_addr()).await?;
        listeners.push(tokio::spawn(async move {
            let mut bytes = 0usize;
            for _ in 0..ROUNDS {
                bytes += conn.recv().await.map_or(0, |m| m.len());
            }
            bytes
        }));
        clients.push(client);
    }
    let mut sessions = Vec::new();
    for _ in 0..CLIENTS {
        sessions.push(server.accept().await.ok_or("server closed")?);
    }

    let started = Instant::now();
    for round in 0..ROUNDS {
        // One allocation per round, whatever the audience.
        let payload = Bytes::from(format!("world state #{round}: {}", "x".repeat(200)));
        for conn in &sessions {
            conn.send(payload.clone()).await?; // refcount +1, no copy
        }
    }
    let mut received = 0;
    for listener in listeners {
        received += listener.await?;
    }
    println!(
        "{ROUNDS} payloads to {CLIENTS} sessions: {received} bytes delivered in {:?}, {ROUNDS} buffers allocated",
        started.elapsed()
    );
    server.close(DisconnectReason::ManagerDeleted);
    server.wait_idle().await;
    for client in clients {
        client.wait_idle().await;
    }
    Ok(())
}
