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

/// A client on the event loop: `EventLoopHandle::connect` returns at once, and the loop tells
/// how the handshake ended, as an event.
fn client_loop(session: SessionConfig) -> EventLoop {
    let config = Config::new(Arc::new(EndpointConfig::client(Arc::new(session))));
    EventLoop::bind("127.0.0.1:0".parse().unwrap(), config).unwrap()
}

/// The next event, driving the loop for at most 5 s.
fn next(events: &mut EventLoop) -> EndpointEvent {
    events.next_event_timeout(Duration::from_secs(5)).unwrap()
}

#[test]
fn a_client_on_the_loop_hears_how_each_handshake_ended() {
    let echo_loop = server(session());
    let addr = echo_loop.local_addr();
    let echo_handle = echo_loop.handle();
    let echoing = thread::spawn(move || echo(echo_loop));

    let mut events = client_loop(session());
    let handle = events.handle();
    let conn = handle.connect(addr).unwrap();
    assert_eq!(
        conn.max_unreliable_len(),
        None,
        "not known before the handshake"
    );
    let EndpointEvent::Connected(id) = next(&mut events) else {
        panic!("expected Connected");
    };
    assert_eq!(id, conn.id());
    // 512-byte datagrams with a 2-byte CRC: what is left after the framing.
    assert_eq!(conn.max_unreliable_len(), Some(510));
    conn.try_send(Bytes::from_static(b"round trip")).unwrap();
    let EndpointEvent::Message {
        connection, data, ..
    } = next(&mut events)
    else {
        panic!("expected the echo");
    };
    assert_eq!((connection, &data[..]), (id, &b"round trip"[..]));

    // Nobody there: the connect timeout ends it.
    let nobody = {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        socket.local_addr().unwrap()
    };
    let mut quick = client_loop(session().with_connect_timeout(Duration::from_millis(300)));
    let lost = quick.handle().connect(nobody).unwrap();
    match next(&mut quick) {
        EndpointEvent::ConnectFailed { connection, error } => {
            assert_eq!(connection, lost.id());
            assert!(
                matches!(error, soe_runtime::ConnectError::TimedOut { .. }),
                "{error}"
            );
        }
        other => panic!("expected ConnectFailed, got {other:?}"),
    }
    // A server of another protocol refuses it.
    let mut other = client_loop(SessionConfig::new("AnotherProtocol"));
    let refused = other.handle().connect(addr).unwrap();
    match next(&mut other) {
        EndpointEvent::ConnectFailed { connection, error } => {
            assert_eq!(connection, refused.id());
            assert!(
                matches!(error, soe_runtime::ConnectError::Refused { .. }),
                "{error}"
            );
        }
        other => panic!("expected ConnectFailed, got {other:?}"),
    }
    // A closed endpoint starts nothing.
    quick.close(DisconnectReason::Application);
    assert!(quick.handle().connect(addr).is_err());

    echo_handle.close(DisconnectReason::Application);
    drop((conn, lost, refused));
    echoing.join().unwrap();
}

#[test]
fn drive_keeps_sessions_going_while_their_events_wait_and_wake_ends_its_wait() {
    let mut events = server(session());
    let addr = events.local_addr();
    let handle = events.handle();
    let endpoint = client();
    let sender = thread::spawn(move || {
        let conn = endpoint.connect(addr).unwrap();
        for i in 0..3u8 {
            conn.send(Bytes::from(vec![i + 1; 4])).unwrap();
        }
        (endpoint, conn)
    });
    // Only `drive`: the handshake completes and the messages are taken in (and acknowledged)
    // while every event stays queued.
    let started = std::time::Instant::now();
    while handle.session_count() == 0 || !sender.is_finished() {
        assert!(events.drive(Duration::from_millis(20)));
        assert!(started.elapsed() < Duration::from_secs(5), "no session");
    }
    let (_endpoint, conn) = sender.join().unwrap();
    while conn.stats().unwrap().acks_received == 0 {
        assert!(events.drive(Duration::from_millis(20)));
        assert!(started.elapsed() < Duration::from_secs(5), "no ack");
    }
    let EndpointEvent::Accepted(_accepted) = events.try_next_event().unwrap() else {
        panic!("expected Accepted");
    };
    for i in 0..3u8 {
        let EndpointEvent::Message { data, .. } = events.try_next_event().unwrap() else {
            panic!("expected message {i}");
        };
        assert_eq!(data, vec![i + 1; 4]);
    }
    assert_eq!(
        events.try_next_event().unwrap_err(),
        RecvTimeoutError::Timeout(Duration::ZERO)
    );
    // Once closed and every session gone, `drive` says so and the events end.
    handle.close(DisconnectReason::Application);
    while events.drive(Duration::from_millis(50)) {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the loop did not end"
        );
    }
    loop {
        match events.try_next_event() {
            Ok(_) => {}
            Err(e) => {
                assert_eq!(e, RecvTimeoutError::Closed);
                break;
            }
        }
    }
}

#[test]
fn wake_ends_a_drive_that_has_nothing_to_wait_for() {
    // No session, so no deadline: without the wake-up this `drive` would block for good.
    let mut events = server(session());
    let handle = events.handle();
    let (done, finished) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let started = std::time::Instant::now();
        let running = events.drive(Duration::MAX);
        done.send((running, started.elapsed())).unwrap();
    });
    thread::sleep(Duration::from_millis(100));
    handle.wake();
    let (running, waited) = finished.recv_timeout(Duration::from_secs(5)).unwrap();
    assert!(running);
    assert!(
        waited >= Duration::from_millis(90),
        "returned after {waited:?}"
    );
}

#[test]
fn a_loop_woken_before_every_wait_still_reads_its_socket() {
    // Another thread wakes the loop without pause, so that it never waits in poll(2), which is
    // what tells it that datagrams came: it must read them all the same.
    let mut events = server(session());
    let addr = events.local_addr();
    let handle = events.handle();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let waking = {
        let stop = stop.clone();
        thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                handle.wake();
            }
        })
    };
    let client = thread::spawn(move || {
        let endpoint = client();
        let conn = endpoint.connect(addr).unwrap();
        conn.send(Bytes::from_static(b"through the noise")).unwrap();
        (endpoint, conn)
    });
    let mut got = None;
    let started = std::time::Instant::now();
    while got.is_none() && started.elapsed() < Duration::from_secs(5) {
        if let Ok(EndpointEvent::Message { data, .. }) =
            events.next_event_timeout(Duration::from_millis(100))
        {
            got = Some(data);
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    waking.join().unwrap();
    let _client = client.join();
    assert_eq!(got.as_deref(), Some(&b"through the noise"[..]));
}

#[test]
fn a_batch_is_sent_by_the_thread_that_queues_it() {
    let mut events = server(session());
    let addr = events.local_addr();
    let handle = events.handle();
    let client = thread::spawn(move || {
        let endpoint = client();
        let conn = endpoint.connect(addr).unwrap();
        (endpoint, conn)
    });
    let EndpointEvent::Accepted(conn) = next(&mut events) else {
        panic!("expected Accepted");
    };
    let (_endpoint, client_conn) = client.join().unwrap();
    // Nobody drives the loop from here on: only the batch's own thread can send.
    let loop_parked = events;
    handle.send_batch(|batch| {
        batch
            .try_send_on(
                &conn,
                soe_runtime::Channel::ZERO,
                Bytes::from_static(b"inline"),
            )
            .unwrap();
    });
    assert_eq!(
        client_conn.recv_timeout(Duration::from_secs(5)).unwrap(),
        Bytes::from_static(b"inline")
    );
    drop(loop_parked);
}
