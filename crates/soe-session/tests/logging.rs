//! The endpoint's `tracing` events: what an operator sees, and that strangers and broken peers
//! cannot flood the log.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use soe_session::{Endpoint, EndpointConfig, Event, Session, SessionConfig, SplitMix64};
use soe_wire::{Packet, SessionRequest};
use tracing::Level;

const PROTO: &[u8] = b"LogProto_1";

/// A log writer that keeps every line in memory.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn lines(&self) -> Vec<String> {
        let bytes = self.0.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8_lossy(&bytes)
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut b) = self.0.lock() {
            b.extend_from_slice(buf);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs `f` with a subscriber recording INFO and above, and returns the lines it logged.
fn logged(f: impl FnOnce()) -> Vec<String> {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(Level::INFO)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, f);
    captured.lines()
}

fn server() -> Endpoint<u32> {
    let config = Arc::new(SessionConfig::new(PROTO));
    Endpoint::new(Arc::new(EndpointConfig::server(config).with_rng_seed(3)))
}

#[test]
fn a_protocol_mismatch_is_logged_with_address_session_and_reason() {
    let lines = logged(|| {
        let mut ep = server();
        let mut req = Vec::new();
        Packet::SessionRequest(SessionRequest {
            protocol_version: 3,
            session_id: 0xABCD,
            udp_length: 512,
            application_protocol: b"OtherGame",
        })
        .encode(&mut req);
        ep.handle_datagram(Instant::now(), 42, &req);
    });
    let refused: Vec<_> = lines
        .iter()
        .filter(|l| l.contains("session refused"))
        .collect();
    assert_eq!(refused.len(), 1, "{lines:#?}");
    let line = refused[0];
    assert!(line.contains("remote=42"), "{line}");
    assert!(line.contains("session_id=43981"), "{line}");
    assert!(line.contains("ProtocolMismatch"), "{line}");
}

#[test]
fn sessions_opening_and_closing_and_crc_rejects_are_logged_at_most_once_a_second() {
    let lines = logged(|| {
        let config = Arc::new(SessionConfig::new(PROTO));
        let mut ep = server();
        let mut now = Instant::now();
        let mut client = Session::client(now, config, &mut SplitMix64::new(4));
        let mut buf = Vec::new();
        let mut accepted = false;
        for _ in 0..4 {
            while let Some(n) = client.poll_transmit(now, &mut buf) {
                ep.handle_datagram(now, 9, &buf[..n]);
            }
            while let Some(t) = ep.poll_transmit(now, &mut buf) {
                client.handle_datagram(now, &buf[..t.len]);
            }
            while let Some((_, event)) = ep.poll_event() {
                accepted |= event == Event::Accepted;
            }
        }
        assert!(accepted);

        // 100 corrupt datagrams within half a second, then one more a second later.
        let bad = [0x00, 0x06, 0x00, 0x00];
        for _ in 0..100 {
            now += Duration::from_millis(5);
            ep.handle_datagram(now, 9, &bad);
        }
        now += Duration::from_secs(1);
        ep.handle_datagram(now, 9, &bad);

        ep.close_all(now, soe_wire::DisconnectReason::Application);
        for _ in 0..50 {
            while ep.poll_transmit(now, &mut buf).is_some() {}
            while ep.poll_event().is_some() {}
            now += Duration::from_millis(200);
            ep.handle_timeout(now);
        }
    });
    let count = |text: &str| lines.iter().filter(|l| l.contains(text)).count();
    assert_eq!(count("session accepted"), 1, "{lines:#?}");
    assert_eq!(count("CRC mismatch"), 2, "{lines:#?}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("CRC mismatch") && l.contains("rejected=100")),
        "the second event counts the 99 suppressed rejects and its own: {lines:#?}"
    );
    assert_eq!(count("session closed"), 1, "{lines:#?}");
}
