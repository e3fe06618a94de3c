//! The blocking event loop (`blocking::EventLoop`) over real loopback UDP: a server whose
//! endpoint runs on the test's own thread, against clients on the blocking driver.
#![cfg(unix)]
#![allow(missing_docs)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use bytes::Bytes;
use soe_runtime::blocking::{Endpoint, EventLoop};
use soe_runtime::{
    Config, Connection, ConnectionId, Delivery, DisconnectReason, EndpointConfig, EndpointEvent,
    RecvTimeoutError, SessionConfig,
};

fn session() -> SessionConfig {
    SessionConfig::new("SoeEventLoopTest").with_connect_timeout(Duration::from_secs(2))
}

fn server(session: SessionConfig) -> EventLoop {
    let config = Config::new(Arc::new(EndpointConfig::server(Arc::new(session))));
    EventLoop::bind("127.0.0.1:0".parse().unwrap(), config).unwrap()
}

fn client() -> Endpoint {
    Endpoint::bind(
        "127.0.0.1:0".parse().unwrap(),
        EndpointConfig::client(Arc::new(session())),
    )
    .unwrap()
}

/// What the echo loop saw.
#[derive(Debug, Default)]
struct Seen {
    accepted: usize,
    echoed: usize,
    closed: Vec<DisconnectReason>,
}

/// Echoes every message the way it came, on the calling thread, until the loop ends.
fn echo(mut events: EventLoop) -> Seen {
    let mut conns: HashMap<ConnectionId, Connection> = HashMap::new();
    let mut seen = Seen::default();
    while let Some(event) = events.next_event() {
        match event {
            EndpointEvent::Accepted(conn) => {
                seen.accepted += 1;
                conns.insert(conn.id(), conn);
            }
            EndpointEvent::Message {
                connection,
                channel,
                data,
                kind,
            } => {
                let conn = &conns[&connection];
                match kind {
                    Delivery::Reliable => conn.try_send_on(channel, data).unwrap(),
                    _ => conn.send_unreliable(data).unwrap(),
                }
                seen.echoed += 1;
            }
            EndpointEvent::Closed { connection, reason } => {
                conns.remove(&connection);
                seen.closed.push(reason.reason);
            }
            _ => {}
        }
    }
    seen
}

#[test]
fn many_clients_get_every_message_back_in_order_then_the_loop_closes() {
    let events = server(session());
    let addr: SocketAddr = events.local_addr();
    let handle = events.handle();
    let looping = thread::spawn(move || echo(events));
    // Four clients at once, each sending 300 messages (some fragmented) without waiting.
    let clients: Vec<_> = (0..4u8)
        .map(|c| {
            thread::spawn(move || {
                let endpoint = client();
                let conn = endpoint.connect(addr).unwrap();
                let messages: Vec<Bytes> = (0..300u32)
                    .map(|i| {
                        let len = if i % 7 == 0 {
                            2000
                        } else {
                            4 + i as usize % 90
                        };
                        let mut m = vec![c; len];
                        m[..4].copy_from_slice(&i.to_le_bytes());
                        Bytes::from(m)
                    })
                    .collect();
                for m in &messages {
                    conn.send(m.clone()).unwrap();
                }
                for m in &messages {
                    assert_eq!(&conn.recv_timeout(Duration::from_secs(10)).unwrap(), m);
                }
                (endpoint, conn)
            })
        })
        .collect();
    let clients: Vec<_> = clients.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(handle.session_count(), 4);
    // Closing from another thread wakes the loop; it ends once every session is gone.
    handle.close(DisconnectReason::Application);
    let seen = looping.join().unwrap();
    assert_eq!(seen.accepted, 4);
    assert_eq!(seen.echoed, 4 * 300);
    assert_eq!(seen.closed.len(), 4);
    for (_, conn) in &clients {
        assert_eq!(conn.closed().reason, DisconnectReason::Application);
    }
}

#[test]
fn timers_fire_while_the_loop_waits_for_nothing() {
    // A session that goes silent is dropped by the idle timeout: only the loop's deadline can
    // wake it, since no datagram comes.
    let session = session()
        .with_idle_timeout(Some(Duration::from_millis(300)))
        .with_heartbeat_interval(None);
    let mut events = server(session);
    let addr = events.local_addr();
    let silent = thread::spawn(move || {
        let endpoint = Endpoint::bind(
            "127.0.0.1:0".parse().unwrap(),
            EndpointConfig::client(Arc::new(crate::session().with_heartbeat_interval(None))),
        )
        .unwrap();
        let conn = endpoint.connect(addr).unwrap();
        // Never send, never answer: keep the handles alive past the server's timeout.
        thread::sleep(Duration::from_secs(2));
        drop(conn);
    });
    let accepted = events.next_event_timeout(Duration::from_secs(5)).unwrap();
    let EndpointEvent::Accepted(conn) = accepted else {
        panic!("expected Accepted, got {accepted:?}");
    };
    let closed = events.next_event_timeout(Duration::from_secs(5)).unwrap();
    let EndpointEvent::Closed { connection, reason } = closed else {
        panic!("expected Closed, got {closed:?}");
    };
    assert_eq!(connection, conn.id());
    assert_eq!(reason.reason, DisconnectReason::Timeout);
    // Nothing else happens: a short wait times out.
    assert_eq!(
        events
            .next_event_timeout(Duration::from_millis(50))
            .unwrap_err(),
        RecvTimeoutError::Timeout(Duration::from_millis(50))
    );
    silent.join().unwrap();
}

#[test]
fn a_send_from_another_thread_wakes_the_blocked_loop() {
    let mut events = server(session());
    let addr = events.local_addr();
    let endpoint = client();
    let conn = thread::spawn(move || {
        let conn = endpoint.connect(addr).unwrap();
        (endpoint, conn)
    });
    let EndpointEvent::Accepted(server_conn) =
        events.next_event_timeout(Duration::from_secs(5)).unwrap()
    else {
        panic!("expected Accepted");
    };
    let (_endpoint, conn) = conn.join().unwrap();
    // The loop blocks on this thread for 800 ms while another thread sends on the server's
    // side after 100 ms: the client must have the message well before the loop's wait ends.
    let sender = thread::spawn(move || {
        thread::sleep(Duration::from_millis(100));
        server_conn.try_send(Bytes::from_static(b"pushed")).unwrap();
        let got = conn.recv_timeout(Duration::from_millis(400));
        (server_conn, conn, got)
    });
    assert!(matches!(
        events.next_event_timeout(Duration::from_millis(800)),
        Err(RecvTimeoutError::Timeout(_))
    ));
    let (_server_conn, _conn, got) = sender.join().unwrap();
    assert_eq!(got.unwrap(), Bytes::from_static(b"pushed"));
}

#[test]
fn a_batch_from_another_thread_reaches_every_session_while_the_loop_blocks() {
    let mut events = server(session());
    let addr = events.local_addr();
    let handle = events.handle();
    let clients = thread::spawn(move || {
        (0..3)
            .map(|_| {
                let endpoint = client();
                let conn = endpoint.connect(addr).unwrap();
                (endpoint, conn)
            })
            .collect::<Vec<_>>()
    });
    let mut accepted = Vec::new();
    while accepted.len() < 3 {
        if let EndpointEvent::Accepted(conn) =
            events.next_event_timeout(Duration::from_secs(5)).unwrap()
        {
            accepted.push(conn);
        }
    }
    let clients = clients.join().unwrap();
    let sender = thread::spawn(move || {
        thread::sleep(Duration::from_millis(100));
        handle.send_batch(|batch| {
            for (i, conn) in accepted.iter().enumerate() {
                batch
                    .try_send_on(
                        conn,
                        soe_runtime::Channel::ZERO,
                        Bytes::from(vec![i as u8; 3]),
                    )
                    .unwrap();
                batch
                    .send_unreliable(conn, Bytes::from(vec![0x40 + i as u8; 5]))
                    .unwrap();
            }
        });
        let got: Vec<_> = clients
            .iter()
            .map(|(_, conn)| conn.recv_timeout(Duration::from_millis(400)))
            .collect();
        (accepted, clients, got)
    });
    assert!(matches!(
        events.next_event_timeout(Duration::from_millis(800)),
        Err(RecvTimeoutError::Timeout(_))
    ));
    let (_accepted, _clients, got) = sender.join().unwrap();
    for (i, got) in got.into_iter().enumerate() {
        // The unreliable one may come first or second; the reliable one is there.
        let got = got.unwrap();
        assert!(
            got == vec![i as u8; 3] || got == vec![0x40 + i as u8; 5],
            "{got:?}"
        );
    }
}
