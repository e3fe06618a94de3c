//! Loopback scenarios every adapter must pass, written once against the runtime seam.
//!
//! Each adapter's `tests/loopback.rs` includes this file with `#[path]` and runs every scenario on
//! its runtime `R`. Everything talks over real UDP on 127.0.0.1 only.
#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::net::{SocketAddr, UdpSocket};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_lite::future;
use soe_runtime::{
    CloseReason, Config, ConnectError, Connection, DisconnectReason, Endpoint, EndpointConfig,
    EndpointEvent, EventMode, Runtime, SessionConfig,
};

const PROTOCOL: &str = "SoeLoopbackTest";
const RC4_KEY: &[u8] = b"\x17\xbd\x08\x6b\x1b\x94\xf0\x2f\xf0\xec\x53\xd7\x63\x58\x9b\x5f";

/// Fails the test if `fut` takes longer than `limit`.
pub async fn within<R: Runtime + Default, T>(
    limit: Duration,
    what: &str,
    fut: impl Future<Output = T>,
) -> T {
    let mut timer = R::default().new_timer(Instant::now() + limit);
    let expired = std::future::poll_fn(move |cx| timer.as_mut().poll(cx));
    match future::or(async { Some(fut.await) }, async {
        expired.await;
        None
    })
    .await
    {
        Some(value) => value,
        None => panic!("{what} did not finish within {limit:?}"),
    }
}

/// Sleeps on the runtime's timer.
pub async fn sleep<R: Runtime + Default>(d: Duration) {
    let mut timer = R::default().new_timer(Instant::now() + d);
    std::future::poll_fn(move |cx| timer.as_mut().poll(cx)).await;
}

/// A boxed future, as `join_all` takes them.
pub type Task<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Polls every future to completion on the current task and returns their outputs in order.
pub async fn join_all<T>(futures: Vec<Task<'_, T>>) -> Vec<T> {
    let mut slots: Vec<(Option<Task<'_, T>>, Option<T>)> =
        futures.into_iter().map(|f| (Some(f), None)).collect();
    std::future::poll_fn(move |cx: &mut Context<'_>| {
        let mut done = true;
        for (fut, out) in slots.iter_mut() {
            if let Some(f) = fut {
                match f.as_mut().poll(cx) {
                    Poll::Ready(v) => {
                        *out = Some(v);
                        *fut = None;
                    }
                    Poll::Pending => done = false,
                }
            }
        }
        if done {
            Poll::Ready(slots.iter_mut().map(|(_, o)| o.take().unwrap()).collect())
        } else {
            Poll::Pending
        }
    })
    .await
}

pub fn session_config(rc4: bool) -> SessionConfig {
    let config = SessionConfig::new(PROTOCOL)
        .with_connect_timeout(Duration::from_secs(2))
        .with_retry_interval(Duration::from_millis(200));
    if rc4 {
        config
            .with_encryption_key(Bytes::from_static(RC4_KEY))
            .unwrap()
    } else {
        config
    }
}

pub fn server_config(rc4: bool) -> EndpointConfig {
    EndpointConfig::server(Arc::new(session_config(rc4)))
        .with_client(Arc::new(session_config(rc4)))
        .with_requests_per_source_per_minute(100_000)
        .with_stateless_reply_rate(100_000)
}

pub fn client_config(rc4: bool) -> EndpointConfig {
    EndpointConfig::client(Arc::new(session_config(rc4)))
}

pub fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// Starts an echo server on an ephemeral loopback port: every message is sent back on the same
/// connection.
pub fn echo_server<R: Runtime + Default>(config: impl Into<Config>) -> Endpoint<R> {
    echo_server_at::<R>(loopback(), config.into())
}

/// The size of message `i` of client `c`: mostly small, some around a datagram, a few fragmented
/// up to 8 KiB.
pub fn message_size(c: usize, i: usize) -> usize {
    let x = (c * 7919 + i * 104_729) % 1000;
    match x {
        0..=899 => 1 + x % 200,
        900..=989 => 200 + (x * 37) % 1300,
        _ => 1500 + (x * 613) % (8192 - 1500 + 1),
    }
}

/// Message `i` of client `c`: its index, then a pattern; every 17th starts with 0x00 so the
/// zero-escape is exercised.
pub fn message(c: usize, i: usize) -> Bytes {
    let size = message_size(c, i).max(8);
    let mut data = Vec::with_capacity(size);
    data.extend_from_slice(&(i as u32).to_be_bytes());
    data.extend_from_slice(&(c as u32).to_be_bytes());
    data.extend((8..size).map(|k| (k * 31 + c + i) as u8));
    if i % 17 == 0 {
        data[0] = 0;
    }
    Bytes::from(data)
}

/// `clients` sessions each echo `messages` messages through one server; every reply is checked
/// byte for byte, in order.
pub async fn echo_many<R: Runtime + Default>(clients: usize, messages: usize, rc4: bool) {
    let server = echo_server::<R>(server_config(rc4));
    let server_addr = server.local_addr();
    let verified = Arc::new(AtomicUsize::new(0));
    let mut tasks: Vec<Pin<Box<dyn Future<Output = ()> + Send>>> = Vec::new();
    for c in 0..clients {
        let verified = verified.clone();
        tasks.push(Box::pin(async move {
            let endpoint = Endpoint::<R>::bind(loopback(), client_config(rc4)).unwrap();
            let conn = endpoint.connect(server_addr).await.unwrap();
            let sender = async {
                for i in 0..messages {
                    conn.send(message(c, i)).await.unwrap();
                }
            };
            let receiver = async {
                for i in 0..messages {
                    let Some(got) = conn.recv().await else {
                        panic!(
                            "client {c}: connection closed early at message {i}: {:?}, {:?}",
                            conn.close_reason(),
                            conn.stats()
                        );
                    };
                    assert_eq!(got, message(c, i), "client {c} message {i} differs");
                    verified.fetch_add(1, Ordering::Relaxed);
                }
            };
            future::zip(sender, receiver).await;
            conn.close(DisconnectReason::Application);
            endpoint.close(DisconnectReason::Application);
            endpoint.wait_idle().await;
        }));
    }
    within::<R, _>(Duration::from_secs(40), "echo", join_all(tasks)).await;
    assert_eq!(verified.load(Ordering::Relaxed), clients * messages);
    server.close(DisconnectReason::ManagerDeleted);
    within::<R, _>(
        Duration::from_secs(5),
        "server wait_idle",
        server.wait_idle(),
    )
    .await;
}

async fn connected_pair<R: Runtime + Default>() -> (Endpoint<R>, Connection, Endpoint<R>, Connection)
{
    let server = Endpoint::<R>::bind(loopback(), server_config(false)).unwrap();
    let client = Endpoint::<R>::bind(loopback(), client_config(false)).unwrap();
    let (accepted, connected) =
        future::zip(server.accept(), client.connect(server.local_addr())).await;
    (server, accepted.unwrap(), client, connected.unwrap())
}

/// A close from either side reaches the other with the reason sent, marked as the peer's.
pub async fn close_from_either_side<R: Runtime + Default>() {
    within::<R, _>(Duration::from_secs(10), "close", async {
        // Client closes.
        let (server, on_server, client, on_client) = connected_pair::<R>().await;
        // Unreliable data (loopback does not lose it) and its first-byte rule.
        on_client
            .send_unreliable(Bytes::from_static(b"\x01quick"))
            .unwrap();
        assert_eq!(on_server.recv().await.unwrap(), &b"\x01quick"[..]);
        assert!(matches!(
            on_client.send_unreliable(Bytes::from_static(b"\x00no")),
            Err(soe_runtime::TrySendError::Session(_))
        ));
        on_client
            .send(Bytes::from_static(b"last words"))
            .await
            .unwrap();
        assert_eq!(on_server.recv().await.unwrap(), &b"last words"[..]);
        on_client.close(DisconnectReason::Application);
        let seen = on_server.closed().await;
        assert_eq!(seen.reason, DisconnectReason::Application);
        assert!(seen.by_peer, "server should see the client's close: {seen}");
        assert_eq!(on_server.recv().await, None);
        let own = on_client.closed().await;
        assert!(!own.by_peer);
        assert!(on_client.send(Bytes::from_static(b"x")).await.is_err());
        drop((on_server, on_client));
        client.close(DisconnectReason::Application);
        client.wait_idle().await;

        // Server closes, with another reason.
        let client = Endpoint::<R>::bind(loopback(), client_config(false)).unwrap();
        let (accepted, connected) =
            future::zip(server.accept(), client.connect(server.local_addr())).await;
        let (on_server, on_client) = (accepted.unwrap(), connected.unwrap());
        on_server.close(DisconnectReason::ConnectionRefused);
        let seen: CloseReason = on_client.closed().await;
        assert_eq!(seen.reason, DisconnectReason::ConnectionRefused);
        assert!(seen.by_peer, "client should see the server's close: {seen}");
        assert_eq!(on_client.recv().await, None);

        // Dropping the last handle closes too.
        let client2 = Endpoint::<R>::bind(loopback(), client_config(false)).unwrap();
        let (accepted, connected) =
            future::zip(server.accept(), client2.connect(server.local_addr())).await;
        let on_server2 = accepted.unwrap();
        drop(connected.unwrap());
        let seen = on_server2.closed().await;
        assert_eq!(seen.reason, DisconnectReason::Application);
        assert!(seen.by_peer);

        server.close(DisconnectReason::ManagerDeleted);
        server.wait_idle().await;
        assert!(server.accept().await.is_none());
    })
    .await;
}

/// Connecting to a port nobody serves fails with `TimedOut` within the connect timeout.
pub async fn connect_to_nobody_times_out<R: Runtime + Default>() {
    let dead = {
        let socket = UdpSocket::bind(loopback()).unwrap();
        socket.local_addr().unwrap()
    }; // dropped: nobody serves this port now
    let client = Endpoint::<R>::bind(loopback(), client_config(false)).unwrap();
    let started = Instant::now();
    let result = within::<R, _>(
        Duration::from_secs(10),
        "connect to nobody",
        client.connect(dead),
    )
    .await;
    let elapsed = started.elapsed();
    match result {
        Err(ConnectError::TimedOut { timeout }) => assert_eq!(timeout, Duration::from_secs(2)),
        other => panic!("expected TimedOut, got {other:?}"),
    }
    // Not early; and not much later than the 2 s timeout (the bound leaves 3 s of scheduling
    // slack for a loaded 2-core machine; a connect that waited for something else, such as the
    // idle timeout, would take 30 s and fail `within` first).
    assert!(
        elapsed >= Duration::from_millis(1500) && elapsed < Duration::from_secs(5),
        "failed after {elapsed:?}, the connect timeout is 2 s"
    );
    let message = result.unwrap_err().to_string();
    assert!(message.contains("connect timeout"), "{message}");
}

/// A tiny xorshift generator: the garbage must be varied, not secure.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Garbage datagram number `n`: random bytes, packets with a valid opcode and a wrong CRC,
/// malformed SessionRequests, truncations, empty and oversized ones.
fn garbage(rng: &mut XorShift, n: usize) -> Vec<u8> {
    let len = (rng.next() % 600) as usize;
    let mut data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
    match n % 8 {
        0 => {}                // random
        1 => data = vec![],    // empty
        2 => data.truncate(1), // one byte
        3 => {
            // SessionRequest with a bogus body.
            data.insert(0, 0x01);
            data.insert(0, 0x00);
        }
        4 => {
            // Reliable data with a wrong CRC.
            data.splice(0..0, [0x00, 0x09, 0x00, 0x00]);
        }
        5 => {
            // MultiPacket with lying lengths.
            data.splice(0..0, [0x00, 0x03, 0xff, 0xff, 0xff, 0xff, 0xff]);
        }
        6 => {
            // Disconnect, RemapConnection and fragments with random bodies.
            let op = [0x05u8, 0x1e, 0x0d, 0x15, 0x06][(rng.next() % 5) as usize];
            data.splice(0..0, [0x00, op]);
        }
        _ => data.resize(3000, 0xAB), // larger than udp_length
    }
    data
}

/// A server keeps serving its good clients while another socket floods it with garbage.
pub async fn survives_garbage<R: Runtime + Default>() {
    let server = echo_server::<R>(server_config(true));
    let server_addr = server.local_addr();
    within::<R, _>(Duration::from_secs(20), "garbage", async {
        let client = Endpoint::<R>::bind(loopback(), client_config(true)).unwrap();
        let conn = client.connect(server_addr).await.unwrap();

        let attacker = UdpSocket::bind(loopback()).unwrap();
        attacker.set_nonblocking(true).unwrap();
        let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
        for round in 0..20 {
            for n in 0..100 {
                let _ = attacker.send_to(&garbage(&mut rng, round * 100 + n), server_addr);
            }
            for i in 0..10 {
                let m = message(round, i);
                conn.send(m.clone()).await.unwrap();
                assert_eq!(conn.recv().await.unwrap(), m);
            }
            sleep::<R>(Duration::from_millis(5)).await;
        }
        // A new client still gets in, and the old one still works.
        let late = Endpoint::<R>::bind(loopback(), client_config(true)).unwrap();
        let late_conn = late.connect(server_addr).await.unwrap();
        late_conn
            .send(Bytes::from_static(b"still there?"))
            .await
            .unwrap();
        assert_eq!(late_conn.recv().await.unwrap(), &b"still there?"[..]);
        assert!(conn.close_reason().is_none());
        assert!(conn.stats().unwrap().reliable_messages_received >= 200);
    })
    .await;
    // The garbage really reached the protocol endpoint (all but the empty datagrams).
    let stats = server.stats();
    assert!(
        stats.datagrams_received >= 1750,
        "only {} datagrams reached the endpoint",
        stats.datagrams_received
    );
    server.close(DisconnectReason::ManagerDeleted);
    within::<R, _>(Duration::from_secs(5), "idle", server.wait_idle()).await;
}

/// One task routes every session of a stream-mode server.
pub async fn stream_mode_routes_everything<R: Runtime + Default>() {
    stream_echo::<R>(false, Duration::ZERO).await;
}

/// As [`stream_mode_routes_everything`], the server's driver leaving its socket unread for
/// 2 ms after each wake-up that read (a receive-coalescing window): every echo still comes
/// back, in order.
pub async fn a_receive_coalescing_window_serves_every_message<R: Runtime + Default>() {
    stream_echo::<R>(false, Duration::from_millis(2)).await;
}

/// As [`stream_mode_routes_everything`], the server answering from `Endpoint::handle_events`:
/// its echoes go out from its own task.
pub async fn handle_events_answers_from_the_application_task<R: Runtime + Default>() {
    stream_echo::<R>(true, Duration::ZERO).await;
}

/// Five clients, 50 echoes each, from a stream-mode server that takes its events one by one
/// (`next_event`) or with `handle_events`.
async fn stream_echo<R: Runtime + Default>(handle_events: bool, coalesce: Duration) {
    let server = Endpoint::<R>::bind(
        loopback(),
        Config::from(server_config(false))
            .with_event_mode(EventMode::Stream)
            .with_receive_coalesce(coalesce),
    )
    .unwrap();
    let server_addr = server.local_addr();
    let router = server.clone();
    R::default().spawn(Box::pin(async move {
        let mut conns = std::collections::HashMap::new();
        let mut on_event = move |event| match event {
            EndpointEvent::Accepted(conn) => {
                conns.insert(conn.id(), conn);
            }
            EndpointEvent::Message {
                connection, data, ..
            } => {
                if let Some(conn) = conns.get(&connection) {
                    let _ = conn.try_send(data);
                }
            }
            EndpointEvent::Closed { connection, .. } => {
                conns.remove(&connection);
            }
            _ => {}
        };
        if handle_events {
            while router.handle_events(&mut on_event).await {}
        } else {
            while let Some(event) = router.next_event().await {
                on_event(event);
            }
        }
    }));
    within::<R, _>(Duration::from_secs(10), "stream mode", async {
        let mut tasks: Vec<Pin<Box<dyn Future<Output = ()> + Send>>> = Vec::new();
        for c in 0..5 {
            tasks.push(Box::pin(async move {
                let client = Endpoint::<R>::bind(loopback(), client_config(false)).unwrap();
                let conn = client.connect(server_addr).await.unwrap();
                for i in 0..50 {
                    conn.send(message(c, i)).await.unwrap();
                }
                for i in 0..50 {
                    assert_eq!(conn.recv().await.unwrap(), message(c, i));
                }
                client.close(DisconnectReason::Application);
                client.wait_idle().await;
            }));
        }
        join_all(tasks).await;
    })
    .await;
    server.close(DisconnectReason::ManagerDeleted);
    within::<R, _>(Duration::from_secs(5), "idle", server.wait_idle()).await;
}

/// A stream-mode server answers its sessions in batches with `Endpoint::send_batch`: every
/// echo arrives in order and intact, batches of more datagrams than one wake-up's worth
/// included; a connection of another endpoint is refused by the batch.
pub async fn send_batch_answers_many_sessions<R: Runtime + Default>() {
    let server = Endpoint::<R>::bind(
        loopback(),
        Config::from(server_config(false)).with_event_mode(EventMode::Stream),
    )
    .unwrap();
    let server_addr = server.local_addr();
    let router = server.clone();
    // A connection of another endpoint, for the batch to refuse.
    let stranger_server = echo_server::<R>(server_config(false));
    let stranger = Endpoint::<R>::bind(loopback(), client_config(false)).unwrap();
    let foreign = within::<R, _>(
        Duration::from_secs(5),
        "connect",
        stranger.connect(stranger_server.local_addr()),
    )
    .await
    .unwrap();
    let refused = Arc::new(AtomicUsize::new(0));
    let batches_over_a_wake_up = Arc::new(AtomicUsize::new(0));
    let (refused_in, over_in) = (refused.clone(), batches_over_a_wake_up.clone());
    R::default().spawn(Box::pin(async move {
        let mut conns = std::collections::HashMap::new();
        loop {
            // Everything ready now: one event awaited, the rest taken while they come.
            let Some(first) = router.next_event().await else {
                break;
            };
            let mut events = vec![first];
            while let Some(Some(event)) = future::poll_once(router.next_event()).await {
                events.push(event);
            }
            let mut replies = Vec::new();
            for event in events {
                match event {
                    EndpointEvent::Accepted(conn) => {
                        conns.insert(conn.id(), conn);
                    }
                    EndpointEvent::Message {
                        connection, data, ..
                    } => replies.push((connection, data)),
                    EndpointEvent::Closed { connection, .. } => {
                        conns.remove(&connection);
                    }
                    _ => {}
                }
            }
            if replies.len() > 64 {
                over_in.fetch_add(1, Ordering::Relaxed);
            }
            router.send_batch(|batch| {
                for (connection, data) in replies {
                    if let Some(conn) = conns.get(&connection) {
                        batch
                            .try_send_on(conn, soe_runtime::Channel::ZERO, data)
                            .expect("the session has room");
                    }
                }
                let other = batch.try_send_on(
                    &foreign,
                    soe_runtime::Channel::ZERO,
                    Bytes::from_static(b"x"),
                );
                if other.is_err() {
                    refused_in.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    }));
    within::<R, _>(Duration::from_secs(30), "send_batch", async {
        let mut tasks: Vec<Pin<Box<dyn Future<Output = ()> + Send>>> = Vec::new();
        for c in 0..40 {
            tasks.push(Box::pin(async move {
                let client = Endpoint::<R>::bind(loopback(), client_config(false)).unwrap();
                let conn = client.connect(server_addr).await.unwrap();
                // Bursts of 20 messages, so that many sessions' echoes share a batch.
                for burst in 0..10 {
                    for i in burst * 20..(burst + 1) * 20 {
                        conn.send(message(c, i)).await.unwrap();
                    }
                    for i in burst * 20..(burst + 1) * 20 {
                        assert_eq!(
                            conn.recv().await.unwrap(),
                            message(c, i),
                            "client {c} message {i}"
                        );
                    }
                }
                client.close(DisconnectReason::Application);
                client.wait_idle().await;
            }));
        }
        join_all(tasks).await;
    })
    .await;
    assert!(
        refused.load(Ordering::Relaxed) > 0,
        "a foreign connection was refused"
    );
    assert!(
        batches_over_a_wake_up.load(Ordering::Relaxed) > 0,
        "some batch held more than one wake-up's worth of echoes"
    );
    server.close(DisconnectReason::ManagerDeleted);
    stranger.close(DisconnectReason::Application);
    stranger_server.close(DisconnectReason::ManagerDeleted);
    within::<R, _>(Duration::from_secs(5), "idle", server.wait_idle()).await;
}

/// A connection whose application stops reading is closed with `ReliableOverflow` once its
/// receive queue passes the bound; the endpoint goes on serving others.
pub async fn unread_queue_overflows<R: Runtime + Default>() {
    let server = Endpoint::<R>::bind(
        loopback(),
        Config::from(server_config(false)).with_receive_queue_bytes(64 * 1024),
    )
    .unwrap();
    let server_addr = server.local_addr();
    within::<R, _>(Duration::from_secs(15), "overflow", async {
        let client = Endpoint::<R>::bind(loopback(), client_config(false)).unwrap();
        let (accepted, connected) = future::zip(server.accept(), client.connect(server_addr)).await;
        let (lazy, conn) = (accepted.unwrap(), connected.unwrap());
        // 100 KiB towards a reader that never reads.
        for i in 0..100 {
            if conn.send(Bytes::from(vec![i as u8; 1024])).await.is_err() {
                break;
            }
        }
        let seen = lazy.closed().await;
        assert_eq!(seen.reason, DisconnectReason::ReliableOverflow);
        assert!(!seen.by_peer);
        let peer_saw = conn.closed().await;
        assert_eq!(peer_saw.reason, DisconnectReason::ReliableOverflow);
        assert!(peer_saw.by_peer);
        // What was queued before the close can still be read (at most the bound).
        let mut read = 0;
        while let Some(m) = lazy.recv().await {
            read += m.len();
        }
        assert!(read > 0 && read <= 64 * 1024, "read {read} bytes");

        // The endpoint still serves a new session.
        let other = Endpoint::<R>::bind(loopback(), client_config(false)).unwrap();
        let (accepted, connected) = future::zip(server.accept(), other.connect(server_addr)).await;
        let (on_server, on_client) = (accepted.unwrap(), connected.unwrap());
        on_client.send(Bytes::from_static(b"hi")).await.unwrap();
        assert_eq!(on_server.recv().await.unwrap(), &b"hi"[..]);
    })
    .await;
}

/// A server that refuses the session (here: another application protocol) makes `connect` fail
/// at once with `Refused` and the server's reason.
pub async fn refused_connect_names_the_reason<R: Runtime + Default>() {
    let server = Endpoint::<R>::bind(loopback(), server_config(false)).unwrap();
    let other_game = EndpointConfig::client(Arc::new(
        SessionConfig::new("AnotherGame").with_connect_timeout(Duration::from_secs(30)),
    ));
    let client = Endpoint::<R>::bind(loopback(), other_game).unwrap();
    let started = Instant::now();
    let result = within::<R, _>(
        Duration::from_secs(10),
        "refused connect",
        client.connect(server.local_addr()),
    )
    .await;
    match result {
        Err(ConnectError::Refused { reason }) => {
            assert_eq!(reason, DisconnectReason::ProtocolMismatch);
        }
        other => panic!("expected Refused, got {other:?}"),
    }
    // `Refused`, not `TimedOut`: the refusal ended the connect, long before its 30 s timeout
    // (5 s here leaves a loaded machine its slack; it takes about a millisecond).
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "refusal took {:?}",
        started.elapsed()
    );
    let message = result.unwrap_err().to_string();
    assert!(message.contains("ProtocolMismatch"), "{message}");
}

/// With a small send queue, `try_send` reports `Full` and hands the message back, and `send`
/// waits for room and resumes once acknowledgements free it; nothing is lost or reordered.
pub async fn send_waits_for_room<R: Runtime + Default>() {
    let server = echo_server::<R>(server_config(false));
    let mut reliable = soe_runtime::soe_session::ReliableConfig::default();
    reliable.max_queued_messages = 16;
    let session = session_config(false)
        .with_reliable(Arc::new(reliable))
        .unwrap();
    let client =
        Endpoint::<R>::bind(loopback(), EndpointConfig::client(Arc::new(session))).unwrap();
    within::<R, _>(Duration::from_secs(15), "backpressure", async {
        let conn = client.connect(server.local_addr()).await.unwrap();
        let mut queued = 0;
        let returned = loop {
            match conn.try_send(message(1, queued)) {
                Ok(()) => queued += 1,
                Err(soe_runtime::TrySendError::Full(back)) => break back,
                Err(e) => panic!("unexpected {e}"),
            }
            assert!(queued <= 1000, "the send queue never filled");
        };
        assert_eq!(
            returned,
            message(1, queued),
            "Full must hand the message back"
        );
        let total = queued + 300;
        let receiver = async {
            for i in 0..total {
                assert_eq!(conn.recv().await.unwrap(), message(1, i), "message {i}");
            }
        };
        let sender = async {
            for i in queued..total {
                conn.send(message(1, i)).await.unwrap();
            }
        };
        future::zip(sender, receiver).await;
    })
    .await;
}

/// Two server endpoints ("shards") share one port with `SO_REUSEPORT`; the kernel spreads the
/// clients over them, every session works end to end, and each shard served some.
#[cfg(target_os = "linux")]
pub async fn reuse_port_shards_share_a_port<R: Runtime + Default>() {
    let shard_config = || {
        Config::from(server_config(false))
            .with_socket(soe_runtime::SocketConfig::default().with_reuse_port(true))
    };
    let first = echo_server::<R>(shard_config());
    let addr = first.local_addr();
    let second = echo_server_at::<R>(addr, shard_config());
    assert_eq!(second.local_addr(), addr);
    within::<R, _>(Duration::from_secs(15), "shards", async {
        let mut tasks: Vec<Task<'_, ()>> = Vec::new();
        for c in 0..16 {
            tasks.push(Box::pin(async move {
                let client = Endpoint::<R>::bind(loopback(), client_config(false)).unwrap();
                let conn = client.connect(addr).await.unwrap();
                for i in 0..20 {
                    conn.send(message(c, i)).await.unwrap();
                    assert_eq!(conn.recv().await.unwrap(), message(c, i));
                }
                client.close(DisconnectReason::Application);
                client.wait_idle().await;
            }));
        }
        join_all(tasks).await;
    })
    .await;
    // Both shards served: the kernel hashes each client's 4-tuple, so with 16 clients the
    // chance that one shard got all of them is 2 in 65,536. Together they accepted every one.
    let accepted = [
        first.stats().requests_accepted,
        second.stats().requests_accepted,
    ];
    assert!(
        accepted.iter().all(|&n| n > 0),
        "each shard served someone: {accepted:?}"
    );
    assert!(accepted.iter().sum::<u64>() >= 16, "{accepted:?}");
    for shard in [first, second] {
        shard.close(DisconnectReason::ManagerDeleted);
        shard.wait_idle().await;
    }
}

/// Like [`echo_server`], at a given address.
pub fn echo_server_at<R: Runtime + Default>(addr: SocketAddr, config: Config) -> Endpoint<R> {
    let server = Endpoint::<R>::bind(addr, config).unwrap();
    let acceptor = server.clone();
    R::default().spawn(Box::pin(async move {
        while let Some(conn) = acceptor.accept().await {
            R::default().spawn(Box::pin(async move {
                while let Some(message) = conn.recv().await {
                    if conn.send(message).await.is_err() {
                        break;
                    }
                }
            }));
        }
    }));
    server
}

/// Dropping every handle of an endpoint with no session stops its driver, which releases the
/// port; a closed endpoint stops too once its sessions are gone.
pub async fn driver_stops_and_releases_the_port<R: Runtime + Default>() {
    for close_first in [false, true] {
        let endpoint = Endpoint::<R>::bind(loopback(), server_config(false)).unwrap();
        let addr = endpoint.local_addr();
        if close_first {
            let client = Endpoint::<R>::bind(loopback(), client_config(false)).unwrap();
            let (accepted, connected) = future::zip(endpoint.accept(), client.connect(addr)).await;
            let (on_server, on_client) = (accepted.unwrap(), connected.unwrap());
            endpoint.close(DisconnectReason::ManagerDeleted);
            within::<R, _>(Duration::from_secs(5), "idle", endpoint.wait_idle()).await;
            let seen = within::<R, _>(Duration::from_secs(5), "close", on_client.closed()).await;
            assert_eq!(seen.reason, DisconnectReason::ManagerDeleted);
            assert!(on_server.close_reason().is_some());
        }
        drop(endpoint);
        let mut freed = false;
        for _ in 0..200 {
            if UdpSocket::bind(addr).is_ok() {
                freed = true;
                break;
            }
            sleep::<R>(Duration::from_millis(10)).await;
        }
        assert!(freed, "port {addr} still taken: the driver did not stop");
    }
}

/// Issue 35 §2: a closed endpoint gives its port back once `wait_idle` returns, while every
/// handle (endpoint clones, connections on both sides) is still held: the port can be bound
/// again at once, by a new endpoint that then serves.
pub async fn closed_endpoint_gives_its_port_back_at_once<R: Runtime + Default>() {
    let endpoint = Endpoint::<R>::bind(loopback(), server_config(false)).unwrap();
    let clone = endpoint.clone();
    let addr = endpoint.local_addr();
    let client = Endpoint::<R>::bind(loopback(), client_config(false)).unwrap();
    let (accepted, connected) = future::zip(endpoint.accept(), client.connect(addr)).await;
    let (on_server, on_client) = (accepted.unwrap(), connected.unwrap());
    endpoint.close(DisconnectReason::ManagerDeleted);
    within::<R, _>(Duration::from_secs(5), "idle", clone.wait_idle()).await;
    // No retry, no sleep: the port is free now.
    let again = Endpoint::<R>::bind(addr, server_config(false));
    assert!(
        again.is_ok(),
        "port {addr} still taken after close and wait_idle: {again:?}"
    );
    let seen = within::<R, _>(Duration::from_secs(5), "close", on_client.closed()).await;
    assert_eq!(seen.reason, DisconnectReason::ManagerDeleted);
    // The old handles still answer, and the new endpoint serves.
    assert!(on_server.close_reason().is_some());
    assert_eq!(endpoint.local_addr(), addr);
    let again = again.unwrap();
    let other = Endpoint::<R>::bind(loopback(), client_config(false)).unwrap();
    let (accepted, connected) = future::zip(again.accept(), other.connect(addr)).await;
    assert!(accepted.is_some() && connected.is_ok());
    drop((clone, on_server, on_client));
}

/// The same in [`EventMode::Stream`] (the Node addon's): once the event stream of a closed
/// endpoint ends, its port is free.
pub async fn closed_stream_endpoint_gives_its_port_back_when_its_events_end<
    R: Runtime + Default,
>() {
    let config = Config::from(server_config(false)).with_event_mode(EventMode::Stream);
    let endpoint = Endpoint::<R>::bind(loopback(), config.clone()).unwrap();
    let addr = endpoint.local_addr();
    let client = Endpoint::<R>::bind(loopback(), client_config(false)).unwrap();
    let (accepted, connected) = future::zip(endpoint.next_event(), client.connect(addr)).await;
    let Some(EndpointEvent::Accepted(on_server)) = accepted else {
        panic!("not an Accepted event: {accepted:?}");
    };
    let on_client = connected.unwrap();
    endpoint.close(DisconnectReason::ManagerDeleted);
    let drain = async { while endpoint.next_event().await.is_some() {} };
    within::<R, _>(Duration::from_secs(5), "end of events", drain).await;
    let again = Endpoint::<R>::bind(addr, config);
    assert!(
        again.is_ok(),
        "port {addr} still taken after the events ended: {again:?}"
    );
    drop((on_server, on_client, again));
}

/// A client endpoint on a socket connected to its server: sessions run as on any socket, and
/// a closed port is reported to it (ICMP port unreachable) and counted as soon as the first
/// SessionRequest meets it: the request is not resent for 30 s, so the report comes from the
/// receiving side, not from a later send. Linux, Android and Windows only: elsewhere a
/// connected UDP socket refuses to send with a destination address.
pub async fn connected_socket_hears_a_closed_port<R: Runtime + Default>() {
    let connected_client = |server: SocketAddr| {
        let socket = UdpSocket::bind(loopback()).unwrap();
        socket.connect(server).unwrap();
        let session = session_config(false)
            .with_connect_timeout(Duration::from_secs(60))
            .with_retry_interval(Duration::from_secs(30));
        let config = EndpointConfig::client(Arc::new(session));
        Endpoint::<R>::with_socket(socket, config.into(), R::default()).unwrap()
    };
    within::<R, _>(Duration::from_secs(10), "echo and closed port", async {
        // An open port: an echo over the connected socket, and nothing to report.
        let server = echo_server::<R>(server_config(false));
        let client = connected_client(server.local_addr());
        let conn = client.connect(server.local_addr()).await.unwrap();
        for i in 0..20 {
            conn.send(message(0, i)).await.unwrap();
            assert_eq!(conn.recv().await.unwrap(), message(0, i));
        }
        assert_eq!(client.port_unreachable(), 0);
        conn.close(DisconnectReason::Application);
        client.wait_idle().await;

        // A closed port.
        let dead = {
            let socket = UdpSocket::bind(loopback()).unwrap();
            socket.local_addr().unwrap()
        };
        let client = connected_client(dead);
        future::or(
            async {
                let result = client.connect(dead).await;
                panic!("the connect ended before the closed port was heard: {result:?}");
            },
            async {
                while client.port_unreachable() == 0 {
                    sleep::<R>(Duration::from_millis(5)).await;
                }
            },
        )
        .await;
        assert_eq!(client.port_unreachable(), 1);
    })
    .await;
}

/// A server that accepts any application protocol name reports, for each accepted session, the
/// name its client asked for and the session id both sides share.
pub async fn accepted_sessions_report_their_protocol_and_id<R: Runtime + Default>() {
    let any = EndpointConfig::server(Arc::new(
        session_config(false).with_any_application_protocol(true),
    ));
    let server = Endpoint::<R>::bind(loopback(), any).unwrap();
    for name in ["LoginUdp_9", "LoginUdp_11"] {
        let client = Endpoint::<R>::bind(
            loopback(),
            EndpointConfig::client(Arc::new(SessionConfig::new(name))),
        )
        .unwrap();
        let conn = within::<R, _>(
            Duration::from_secs(10),
            "connect",
            client.connect(server.local_addr()),
        )
        .await
        .unwrap();
        conn.try_send(Bytes::from_static(b"hello")).unwrap();
        let accepted = within::<R, _>(Duration::from_secs(10), "accept", server.accept())
            .await
            .unwrap();
        assert_eq!(
            accepted.application_protocol().as_deref(),
            Some(name.as_bytes())
        );
        assert_eq!(accepted.session_id(), conn.session_id());
        assert!(accepted.session_id().is_some());
        assert_eq!(
            conn.application_protocol().as_deref(),
            Some(name.as_bytes())
        );
        client.close(DisconnectReason::Application);
    }
}

/// A server whose own datagrams meet a closed port keeps serving. Windows reports the ICMP
/// answer to each as `WSAECONNRESET` on a later receive of the (unconnected) socket, which must
/// concern that datagram only; Linux, and wine on it, report nothing to an unconnected socket,
/// where the scenario shows that the sends do no harm.
pub async fn serves_on_after_sending_to_a_closed_port<R: Runtime + Default>() {
    let server = echo_server::<R>(server_config(false));
    let addr = server.local_addr();
    let dead = {
        let socket = UdpSocket::bind(loopback()).unwrap();
        socket.local_addr().unwrap()
    };
    within::<R, _>(
        Duration::from_secs(20),
        "serving past a closed port",
        async {
            let client = Endpoint::<R>::bind(loopback(), client_config(false)).unwrap();
            let conn = client.connect(addr).await.unwrap();
            let sent_before = server.stats().datagrams_sent;
            // The server's own SessionRequests go to the closed port until its connect times out,
            // while it echoes.
            let (attempt, ()) = future::zip(server.connect(dead), async {
                for i in 0..40 {
                    conn.send(message(0, i)).await.unwrap();
                    assert_eq!(conn.recv().await.unwrap(), message(0, i));
                    sleep::<R>(Duration::from_millis(25)).await;
                }
            })
            .await;
            assert!(attempt.is_err(), "{attempt:?}");
            assert!(server.stats().datagrams_sent >= sent_before + 2);
            conn.send(message(1, 0)).await.unwrap();
            assert_eq!(conn.recv().await.unwrap(), message(1, 0));
        },
    )
    .await;
    server.close(DisconnectReason::ManagerDeleted);
    within::<R, _>(Duration::from_secs(5), "idle", server.wait_idle()).await;
}
