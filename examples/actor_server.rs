//! An actor-style server: one task owns every session and routes every event, with no task per
//! connection. Here it runs a tiny chat: each message is relayed to every other session.
//!
//! `cargo run --example actor_server -- 127.0.0.1:20261`
//! (then run a few `echo_client`s against it: with no other client they get nothing back, with
//! two they see each other's messages).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use soe_tokio::{
    Config, Connection, ConnectionId, Endpoint, EndpointConfig, EndpointEvent, EventMode,
    SessionConfig,
};

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr: SocketAddr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:20261".into())
        .parse()
        .map_err(std::io::Error::other)?;
    let session = Arc::new(SessionConfig::new("SoeEcho"));
    let config = Config::from(EndpointConfig::server(session)).with_event_mode(EventMode::Stream);
    let server = Endpoint::bind(addr, config)?;
    println!("actor server on {}", server.local_addr());

    let mut sessions: HashMap<ConnectionId, Connection> = HashMap::new();
    while let Some(event) = server.next_event().await {
        match event {
            EndpointEvent::Accepted(conn) => {
                println!("{} joined from {}", conn.id(), conn.remote_addr());
                sessions.insert(conn.id(), conn);
            }
            EndpointEvent::Message {
                connection, data, ..
            } => {
                for (id, conn) in &sessions {
                    if *id != connection {
                        // Never wait inside the router: a full queue drops this relay only.
                        if let Err(e) = conn.try_send(data.clone()) {
                            println!("relay to {id} skipped: {e}");
                        }
                    }
                }
            }
            EndpointEvent::Closed { connection, reason } => {
                println!("{connection} left: {reason}");
                sessions.remove(&connection);
            }
            _ => {}
        }
    }
    Ok(())
}
