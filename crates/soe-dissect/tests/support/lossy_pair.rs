//! A client and a server endpoint (soe-session, sans-I/O) on real-looking addresses, in virtual
//! time: `seconds` of traffic (the client sends a message every 100 ms, every tenth one
//! fragmented, and the server answers each), then 100 % loss both ways until the server's
//! session ends. The server records every session (the flight recorder). soe-cli's tests
//! include this file by path.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use soe_session::{
    Channel, Endpoint, EndpointConfig, Event, Recording, RecordingConfig, SessionConfig,
};

/// The server's address.
pub(crate) const SERVER: &str = "10.0.0.2:20260";
/// The client's address.
pub(crate) const CLIENT: &str = "10.0.0.1:40000";

/// What a run left (each including test uses what it needs).
#[allow(dead_code)]
pub(crate) struct Lossy {
    /// The server's recording of the session, taken after it ended.
    pub(crate) recording: Recording,
    /// The messages the server received, in order.
    pub(crate) got_by_server: Vec<Vec<u8>>,
    /// The messages the server sent, in order.
    pub(crate) sent_by_server: Vec<Vec<u8>>,
    /// When the loss began, since the start.
    pub(crate) loss_at: Duration,
    /// The server's Closed event.
    pub(crate) closed: Event,
}

/// Message `i` of the client: text, 1,200 bytes (fragmented) every tenth, else 40 to 100.
pub(crate) fn client_message(i: usize) -> Vec<u8> {
    let len = if i % 10 == 9 { 1200 } else { 40 + i % 61 };
    let mut m = format!("client message {i}: ").into_bytes();
    m.extend(b"x=1.5;y=-2.25;z=0.125;".iter().cycle().take(len));
    m.truncate(len);
    m
}

/// Runs the pair with `config` on both sides (see the [module](self)).
pub(crate) fn run(config: SessionConfig, seconds: u64) -> Lossy {
    let config = Arc::new(config);
    let server_addr = SERVER.parse().unwrap();
    let client_addr = CLIENT.parse().unwrap();
    let mut server: Endpoint = Endpoint::new(Arc::new(
        EndpointConfig::server(config.clone())
            .with_recording(RecordingConfig::new().with_every_session(true)),
    ));
    let mut client: Endpoint = Endpoint::new(Arc::new(EndpointConfig::client(config)));
    let start = Instant::now();
    let mut now = start;
    let ch = client.connect(now, server_addr).unwrap();
    let delay = Duration::from_millis(15);
    let loss_at = Duration::from_secs(seconds);
    let mut flight: Vec<(Instant, bool, Vec<u8>)> = Vec::new();
    let mut buf = Vec::new();
    let (mut got, mut sent, mut next_send, mut i) = (Vec::new(), Vec::new(), start, 0);
    let mut closed = None;
    while closed.is_none() {
        assert!(now - start < loss_at + Duration::from_secs(120), "no end");
        let lossy = now - start >= loss_at;
        if !lossy && now >= next_send {
            client
                .send(ch, Channel::ZERO, Bytes::from(client_message(i)))
                .ok();
            i += 1;
            next_send += Duration::from_millis(100);
        }
        while let Some(t) = client.poll_transmit(now, &mut buf) {
            if !lossy {
                flight.push((now + delay, true, buf[..t.len].to_vec()));
            }
        }
        while let Some(t) = server.poll_transmit(now, &mut buf) {
            if !lossy {
                flight.push((now + delay, false, buf[..t.len].to_vec()));
            }
        }
        while let Some((h, e)) = server.poll_event() {
            match e {
                Event::Message { data, .. } => {
                    let reply = format!("server reply to {} bytes", data.len()).into_bytes();
                    got.push(data.to_vec());
                    server
                        .send(h, Channel::ZERO, Bytes::from(reply.clone()))
                        .unwrap();
                    sent.push(reply);
                }
                e @ Event::Closed { .. } => closed = Some(e),
                _ => {}
            }
        }
        while client.poll_event().is_some() {}
        // The next moment something happens.
        let next = [
            server.poll_timeout(),
            client.poll_timeout(),
            flight.iter().map(|f| f.0).min(),
            (!lossy).then_some(next_send),
            (!lossy).then_some(start + loss_at),
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(next) = next else { break };
        now = now.max(next);
        flight.sort_by_key(|f| f.0);
        while flight.first().is_some_and(|f| f.0 <= now) {
            let (_, to_server, data) = flight.remove(0);
            if to_server {
                server.handle_datagram(now, client_addr, &data);
            } else {
                client.handle_datagram(now, server_addr, &data);
            }
        }
        if server.poll_timeout().is_some_and(|t| t <= now) {
            server.handle_timeout(now);
        }
        if client.poll_timeout().is_some_and(|t| t <= now) {
            client.handle_timeout(now);
        }
    }
    let (_, recording) = server
        .poll_recording()
        .expect("the server kept the recording");
    Lossy {
        recording,
        got_by_server: got,
        sent_by_server: sent,
        loss_at,
        closed: closed.unwrap(),
    }
}
