//! An echo client on async-std: sends messages, checks the echoes, prints round-trip times.
//!
//! `cargo run --example async_std_echo_client -- 127.0.0.1:20270 [count]`

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use soe_async_std::bytes::Bytes;
use soe_async_std::{DisconnectReason, Endpoint, EndpointConfig, SessionConfig};

#[async_std::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let server: SocketAddr = args
        .next()
        .unwrap_or_else(|| "127.0.0.1:20270".into())
        .parse()?;
    let count: u32 = args.next().map_or(Ok(100), |n| n.parse())?;
    let session = Arc::new(SessionConfig::new("SoeEcho"));
    let client = Endpoint::client(EndpointConfig::client(session))?;
    let conn = client.connect(server).await?;
    println!("connected to {server} from {}", client.local_addr());
    let (mut min, mut max, mut total) = (Duration::MAX, Duration::ZERO, Duration::ZERO);
    for i in 0..count {
        let message = Bytes::from(format!("message {i}"));
        let sent = Instant::now();
        conn.send(message.clone()).await?;
        let echo = conn.recv().await.ok_or("connection closed")?;
        let rtt = sent.elapsed();
        assert_eq!(echo, message);
        (min, max, total) = (min.min(rtt), max.max(rtt), total + rtt);
    }
    println!(
        "{count} echoes, rtt min/avg/max {min:?} / {:?} / {max:?}",
        total / count.max(1)
    );
    client.close(DisconnectReason::Application);
    client.wait_idle().await;
    Ok(())
}
