//! An echo server: every message a client sends comes back to it.
//!
//! `cargo run --example echo_server -- 127.0.0.1:20260`
//! then `cargo run --example echo_client -- 127.0.0.1:20260`.

use std::net::SocketAddr;
use std::sync::Arc;

use soe_tokio::{Endpoint, EndpointConfig, SessionConfig};

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr: SocketAddr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:20260".into())
        .parse()
        .map_err(std::io::Error::other)?;
    let session = Arc::new(SessionConfig::new("SoeEcho"));
    let server = Endpoint::bind(addr, EndpointConfig::server(session))?;
    println!("echo server on {}", server.local_addr());
    while let Some(conn) = server.accept().await {
        println!("{} connected from {}", conn.id(), conn.remote_addr());
        tokio::spawn(async move {
            let mut echoed = 0u64;
            while let Some(message) = conn.recv().await {
                if conn.send(message).await.is_err() {
                    break;
                }
                echoed += 1;
            }
            println!(
                "{} closed ({}) after {echoed} messages",
                conn.id(),
                conn.closed().await
            );
        });
    }
    Ok(())
}
