//! The blocking event loop (`blocking::EventLoop`) over real loopback UDP: a server whose
//! endpoint runs on the test's own thread, against clients on the blocking driver; and the
//! loop's wake-ups from other threads, with shards on one port too (issue 43 §2).
#![allow(missing_docs)]

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use soe_runtime::blocking::{Endpoint, EventLoop};
use soe_runtime::platform::UdpIo;
use soe_runtime::{
    Config, Connection, ConnectionId, Delivery, DisconnectReason, EndpointConfig, EndpointEvent,
    RecvTimeoutError, SessionConfig,
};

fn session() -> SessionConfig {
    SessionConfig::new("SoeEventLoopTest").with_connect_timeout(Duration::from_secs(2))
}

fn server_config(session: SessionConfig) -> Config {
    Config::new(Arc::new(EndpointConfig::server(Arc::new(session))))
}

fn server(session: SessionConfig) -> EventLoop {
    EventLoop::bind("127.0.0.1:0".parse().unwrap(), server_config(session)).unwrap()
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
    many_clients_echo(server(session()));
}

#[test]
fn the_plain_send_to_and_recv_from_path_serves_as_well() {
    // Where quinn-udp cannot set its socket up (IPv4 sockets under wine), the loop runs on
    // plain send_to/recv_from: the same scenario on that path, on every platform.
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let events = EventLoop::with_io(socket, UdpIo::plain(), server_config(session())).unwrap();
    many_clients_echo(events);
}

#[test]
fn a_receive_coalescing_window_serves_every_message_in_order() {
    // The loop leaves its socket unread for 2 ms after each wake-up that read: the messages
    // (and acknowledgements) of the four clients wait in the socket meanwhile, and every one
    // still comes back, in order, on both datagram paths.
    let config = || server_config(session()).with_receive_coalesce(Duration::from_millis(2));
    many_clients_echo(EventLoop::bind("127.0.0.1:0".parse().unwrap(), config()).unwrap());
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    many_clients_echo(EventLoop::with_io(socket, UdpIo::plain(), config()).unwrap());
}

fn many_clients_echo(events: EventLoop) {
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

/// Runs each loop on a thread of its own until it ends; returns the channel each reports its
/// index on when it did, with what it saw.
fn run_loops(loops: Vec<EventLoop>) -> mpsc::Receiver<(usize, Seen)> {
    let (done, ended) = mpsc::channel();
    for (i, events) in loops.into_iter().enumerate() {
        let done = done.clone();
        thread::spawn(move || {
            let seen = echo(events);
            let _ = done.send((i, seen));
        });
    }
    ended
}

/// Which of `count` loops report within `within`.
fn ended_within(
    ended: &mpsc::Receiver<(usize, Seen)>,
    count: usize,
    within: Duration,
) -> Vec<usize> {
    let deadline = Instant::now() + within;
    let mut which = Vec::new();
    while which.len() < count {
        match ended.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok((i, _)) => which.push(i),
            Err(_) => break,
        }
    }
    which.sort_unstable();
    which
}

/// `count` loops sharing one port through `SO_REUSEPORT`.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn shards(count: usize, session: SessionConfig) -> Vec<EventLoop> {
    let config = || {
        server_config(session.clone())
            .with_socket(soe_runtime::SocketConfig::default().with_reuse_port(true))
    };
    let first = EventLoop::bind("127.0.0.1:0".parse().unwrap(), config()).unwrap();
    let addr = first.local_addr();
    let mut loops = vec![first];
    for _ in 1..count {
        loops.push(EventLoop::bind(addr, config()).unwrap());
    }
    loops
}

/// Issue 43 §2: the wake-up datagram went to the shared port, where the kernel gave every
/// shard's to one socket, so `close` ended 1 (or 0) of 4 loops. A loop with no session has no
/// deadline: only a wake-up that reaches it can end it.
#[cfg(any(target_os = "linux", target_os = "android"))]
#[test]
fn close_wakes_every_shard_on_a_shared_port() {
    let loops = shards(4, session());
    let handles: Vec<_> = loops.iter().map(EventLoop::handle).collect();
    assert!(handles.iter().all(|h| h.session_count() == 0));
    let ended = run_loops(loops);
    // The loops block (none has a deadline); close holds whether or not they did yet.
    thread::sleep(Duration::from_millis(200));
    for handle in &handles {
        handle.close(DisconnectReason::ManagerDeleted);
    }
    assert_eq!(
        ended_within(&ended, 4, Duration::from_secs(20)),
        [0, 1, 2, 3],
        "loops that ended after close"
    );
}

/// Issue 43 §2, for sends: a message queued from another thread on each shard's session goes
/// out at once. The sessions keep no timers (no heartbeat, no idle timeout), so a loop whose
/// wake-up is lost would never send it.
#[cfg(any(target_os = "linux", target_os = "android"))]
#[test]
fn sends_from_other_threads_wake_every_shard() {
    let quiet = || {
        session()
            .with_heartbeat_interval(None)
            .with_idle_timeout(None)
    };
    let loops = shards(4, quiet());
    let addr = loops[0].local_addr();
    let handles: Vec<_> = loops.iter().map(EventLoop::handle).collect();
    // Each shard reports the sessions it accepts, then idles in its loop.
    let (accepted_tx, accepted) = mpsc::channel();
    for (i, mut events) in loops.into_iter().enumerate() {
        let accepted_tx = accepted_tx.clone();
        thread::spawn(move || {
            while let Some(event) = events.next_event() {
                if let EndpointEvent::Accepted(conn) = event {
                    let _ = accepted_tx.send((i, conn));
                }
            }
        });
    }
    // Clients from new ports until every shard holds a session (the kernel spreads them by
    // address hash; 200 leave a shard without one with odds of 1 in 10^24).
    let client_config = Arc::new(EndpointConfig::client(Arc::new(quiet())));
    let mut per_shard: Vec<Option<(Connection, Endpoint, soe_runtime::blocking::Connection)>> =
        (0..4).map(|_| None).collect();
    for _ in 0..200 {
        if per_shard.iter().all(Option::is_some) {
            break;
        }
        let endpoint =
            Endpoint::bind("127.0.0.1:0".parse().unwrap(), client_config.clone()).unwrap();
        let conn = endpoint.connect(addr).unwrap();
        let (shard, server_conn) = accepted.recv_timeout(Duration::from_secs(5)).unwrap();
        if per_shard[shard].is_none() {
            per_shard[shard] = Some((server_conn, endpoint, conn));
        }
    }
    let per_shard: Vec<_> = per_shard
        .into_iter()
        .map(|s| s.expect("a session on every shard"))
        .collect();
    // Sends from this thread (a plain send on shards 0 and 1, a batch on 2 and 3).
    thread::sleep(Duration::from_millis(200));
    for (i, (server_conn, _, _)) in per_shard.iter().enumerate() {
        let message = Bytes::from(vec![i as u8; 8]);
        if i < 2 {
            server_conn.try_send(message).unwrap();
        } else {
            handles[i].send_batch(|batch| {
                batch
                    .try_send_on(server_conn, soe_runtime::Channel::ZERO, message)
                    .unwrap();
            });
        }
    }
    for (i, (_, _, conn)) in per_shard.iter().enumerate() {
        assert_eq!(
            conn.recv_timeout(Duration::from_secs(20)),
            Ok(Bytes::from(vec![i as u8; 8])),
            "shard {i}"
        );
    }
    for handle in &handles {
        handle.close(DisconnectReason::ManagerDeleted);
    }
}

/// Issue 43 §2: `next_event_timeout(Duration::MAX)` overflowed `Instant + Duration` and
/// panicked. A timeout past what an `Instant` holds is no timeout.
#[test]
fn a_timeout_past_what_an_instant_holds_is_no_timeout() {
    let mut events = server(session());
    let handle = events.handle();
    let closer = thread::spawn(move || {
        thread::sleep(Duration::from_millis(50));
        handle.close(DisconnectReason::ManagerDeleted);
    });
    assert_eq!(
        events.next_event_timeout(Duration::MAX).unwrap_err(),
        RecvTimeoutError::Closed
    );
    closer.join().unwrap();
}

/// Lets `events` read what strangers sent it (one turn, while no client is there yet), checks
/// that it answered at least one of them, then runs it on a thread of its own: a client gets
/// `echoes` messages back, and `close` ends the loop.
fn answers_strangers_then_serves(mut events: EventLoop, echoes: u8) {
    let addr = events.local_addr();
    let handle = events.handle();
    assert!(matches!(
        events.next_event_timeout(Duration::from_millis(200)),
        Err(RecvTimeoutError::Timeout(_))
    ));
    assert!(
        handle.stats().unknown_sender_sent >= 1,
        "{:?}",
        handle.stats()
    );
    let ended = run_loops(vec![events]);
    let client = client();
    let conn = client.connect(addr).unwrap();
    for i in 0..echoes {
        let message = Bytes::from(vec![i; 100]);
        conn.send(message.clone()).unwrap();
        assert_eq!(conn.recv_timeout(Duration::from_secs(5)).unwrap(), message);
    }
    handle.close(DisconnectReason::ManagerDeleted);
    assert_eq!(ended_within(&ended, 1, Duration::from_secs(20)), [0]);
}

/// A server that sends to a port nobody serves keeps serving: Windows reports the ICMP answer
/// to such a datagram as `WSAECONNRESET` on a later receive, which must concern that datagram
/// only. (Linux, and wine on it, report nothing to an unconnected socket: there the test shows
/// that the sends do no harm.)
#[test]
fn a_loop_that_sends_to_a_closed_port_keeps_serving() {
    let events = server(session());
    // Datagrams from strangers that the endpoint answers (UnknownSender), whose ports close
    // before the loop runs: each answer goes to a closed port.
    for _ in 0..3 {
        let gone = UdpSocket::bind("127.0.0.1:0").unwrap();
        gone.send_to(&[0, 9, 0, 0], events.local_addr()).unwrap();
    }
    answers_strangers_then_serves(events, 20);
}

/// A datagram longer than the receive buffer (9,000 bytes by default) is truncated on Linux and
/// fails the receive with `WSAEMSGSIZE` on Windows: either way it is dropped alone, and the loop
/// serves on (it answers the stranger's next datagram).
#[test]
fn a_datagram_longer_than_the_buffer_is_dropped_alone() {
    let events = server(session());
    let stranger = UdpSocket::bind("127.0.0.1:0").unwrap();
    stranger
        .send_to(&vec![0x5A; 20_000], events.local_addr())
        .unwrap();
    stranger
        .send_to(&[0, 9, 0, 0], events.local_addr())
        .unwrap();
    answers_strangers_then_serves(events, 5);
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
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
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
    let started = Instant::now();
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
    let (done, finished) = mpsc::channel();
    thread::spawn(move || {
        let started = Instant::now();
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
    // The loop is woken before each of its waits, so it never waits in the kernel, which is
    // what tells it that datagrams came: it must read them all the same. Woken from its own
    // thread, so every wait is skipped, not most (a thread waking it without pause also fights
    // it for the endpoint's lock).
    let mut events = server(session());
    let addr = events.local_addr();
    let handle = events.handle();
    let client = thread::spawn(move || {
        let endpoint = client();
        let conn = endpoint.connect(addr).unwrap();
        conn.send(Bytes::from_static(b"through the noise")).unwrap();
        (endpoint, conn)
    });
    let mut got = None;
    let mut accepted = Vec::new();
    let started = Instant::now();
    while got.is_none() && started.elapsed() < Duration::from_secs(10) {
        handle.wake();
        assert!(events.drive(Duration::from_secs(1)));
        while let Ok(event) = events.try_next_event() {
            match event {
                EndpointEvent::Message { data, .. } => got = Some(data),
                // Held: a session whose last handle is dropped is closed, its messages unread.
                EndpointEvent::Accepted(conn) => accepted.push(conn),
                _ => {}
            }
        }
        // The client's thread gets the core (the loop spins without waiting).
        thread::yield_now();
    }
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

/// Once `drive` says the driver has stopped, the port is free, though the loop itself is still
/// alive: whoever heard the end (a binding's JS thread) may bind it again at once.
#[test]
fn the_port_is_free_once_the_driver_has_stopped() {
    let mut events = server(session());
    let addr = events.local_addr();
    events.handle().close(DisconnectReason::Application);
    let started = Instant::now();
    while events.drive(Duration::from_millis(100)) {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the driver did not stop"
        );
    }
    UdpSocket::bind(addr).expect("the stopped loop's port is free while the loop lives");
    drop(events);
}

/// Waits, as a host's own event loop would, until a datagram waits on `socket` (a duplicate of
/// the loop's: peeking takes nothing from it). The bound only ends a test that would otherwise
/// hang: 30 s, since under wine, with the binary's other tests starting their own endpoints on
/// a loaded 2-core machine, a client once took more than the 5 s this had.
fn wait_readable(socket: &UdpSocket) {
    let started = Instant::now();
    // Room for any datagram: Windows fails a peek into a smaller buffer (WSAEMSGSIZE).
    let mut buf = vec![0u8; 65_536];
    while socket.peek_from(&mut buf).is_err() {
        assert!(started.elapsed() < Duration::from_secs(30), "no datagram");
        thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_host_loop_turns_it_with_turn_ready_when_next_turn_and_the_socket_say() {
    let mut events = server(session());
    let addr = events.local_addr();
    let handle = events.handle();
    let socket = events.socket().unwrap().try_clone().unwrap();
    // Nothing to do: no deadline, no send refused; a wake-up asks for a turn now, which the
    // turn answers.
    assert_eq!(events.next_turn(), None);
    assert!(!events.wants_writable());
    handle.wake();
    assert!(events.next_turn().unwrap() <= Instant::now());
    assert!(events.turn_ready(true, false));
    assert_eq!(events.next_turn(), None);

    let endpoint = client();
    let sender = thread::spawn(move || {
        let conn = endpoint.connect(addr).unwrap();
        conn.send(Bytes::from_static(b"hello")).unwrap();
        (endpoint, conn)
    });
    // A turn that is not told the socket is readable receives nothing: the request waits.
    wait_readable(&socket);
    assert!(events.turn_ready(false, false));
    assert_eq!(handle.session_count(), 0);
    let started = Instant::now();
    let mut message = None;
    while message.is_none() {
        wait_readable(&socket);
        assert!(events.turn_ready(true, false));
        while let Ok(event) = events.try_next_event() {
            if let EndpointEvent::Message { data, .. } = event {
                message = Some(data);
            }
        }
        assert!(started.elapsed() < Duration::from_secs(30), "no message");
    }
    assert_eq!(message.unwrap(), Bytes::from_static(b"hello"));
    // A live session has a deadline (its heartbeat or idle timeout).
    assert!(events.next_turn().is_some());
    let (_endpoint, _conn) = sender.join().unwrap();

    // Closed: turns go on until the driver stops, which closes the socket.
    handle.close(DisconnectReason::Application);
    while events.turn_ready(true, true) {
        if let Some(at) = events.next_turn() {
            thread::sleep(at.saturating_duration_since(Instant::now()));
        }
        assert!(started.elapsed() < Duration::from_secs(40), "no end");
    }
    assert!(events.socket().is_none());
    assert_eq!(events.next_turn(), None);
    assert!(!events.turn_ready(true, false));
}
