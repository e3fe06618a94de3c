//! Turning RC4 on for one session while it runs, through the `Connection` handle: the H1Z1
//! gateway's login flow over loopback UDP (plaintext first, then the switch on both sides).
#![allow(missing_docs)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use soe_tokio::{DisconnectReason, Endpoint, EndpointConfig, SessionConfig};

const PATIENCE: Duration = Duration::from_secs(30);

fn session(key: Option<&'static [u8]>) -> Arc<SessionConfig> {
    let config =
        SessionConfig::new("SoeRc4SwitchTest").with_connect_timeout(Duration::from_secs(5));
    Arc::new(match key {
        Some(k) => config
            .with_encryption_key(Bytes::from_static(k))
            .unwrap()
            .with_encryption_at_start(false),
        None => config,
    })
}

fn local() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_switches_to_rc4_after_its_login_request() {
    let key: &'static [u8] = b"gateway key";
    let server = Endpoint::bind(local(), EndpointConfig::server(session(Some(key)))).unwrap();
    let target = server.local_addr();
    let acceptor = server.clone();
    // Both sides must switch at the same point of the exchange: the client once it has sent
    // its request, the server before its reply. Over loopback the reply could otherwise come
    // back before the client's switch (and be read as the ciphertext it is), so the server
    // replies only once the client has switched (a test of the switch, not of that race).
    let client_ready = Arc::new(tokio::sync::Notify::new());
    let ready = client_ready.clone();
    let serving = tokio::spawn(async move {
        while let Some(conn) = acceptor.accept().await {
            let ready = ready.clone();
            tokio::spawn(async move {
                let login = conn.recv().await.expect("the login request");
                assert_eq!(&login[..], b"LoginRequest");
                ready.notified().await;
                assert!(conn.set_encryption(true), "the server session has the key");
                conn.send(Bytes::from_static(b"LoginReply")).await.unwrap();
                // Then an echo, encrypted both ways.
                while let Some(m) = conn.recv().await {
                    if conn.send(m).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    // A client that does not switch reads the server's reply as the ciphertext it now is.
    let stray = Endpoint::bind(local(), EndpointConfig::client(session(Some(key)))).unwrap();
    let unswitched = stray.connect(target).await.unwrap();
    unswitched
        .send(Bytes::from_static(b"LoginRequest"))
        .await
        .unwrap();
    client_ready.notify_one(); // it will not switch
    let garbled = tokio::time::timeout(PATIENCE, unswitched.recv())
        .await
        .unwrap()
        .unwrap();
    assert_ne!(&garbled[..], b"LoginReply");
    stray.close(DisconnectReason::Application);
    let client = Endpoint::bind(local(), EndpointConfig::client(session(Some(key)))).unwrap();
    let conn = client.connect(target).await.unwrap();
    conn.send(Bytes::from_static(b"LoginRequest"))
        .await
        .unwrap();
    assert!(conn.set_encryption(true));
    client_ready.notify_one();
    let reply = tokio::time::timeout(PATIENCE, conn.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&reply[..], b"LoginReply");
    for i in 0..20u32 {
        let m = Bytes::from(vec![(i % 251) as u8; 100 + 1000 * (i as usize % 3)]);
        conn.send(m.clone()).await.unwrap();
        let back = tokio::time::timeout(PATIENCE, conn.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(back, m, "echo {i}");
    }
    let stats = conn.stats().unwrap();
    assert!(stats.reliable_messages_received >= 21, "{stats:?}");
    conn.close(DisconnectReason::Application);
    conn.closed().await;
    // A session without a key has nothing to switch on; neither has one that ended.
    assert!(!conn.set_encryption(true));
    client.close(DisconnectReason::Application);
    server.close(DisconnectReason::ManagerDeleted);
    let _ = serving.await;
    let plain_server = Endpoint::bind(local(), EndpointConfig::server(session(None))).unwrap();
    let plain_client = Endpoint::bind(local(), EndpointConfig::client(session(None))).unwrap();
    let plain = plain_client
        .connect(plain_server.local_addr())
        .await
        .unwrap();
    assert!(!plain.set_encryption(true));
    plain_client.close(DisconnectReason::Application);
    plain_server.close(DisconnectReason::ManagerDeleted);
}

/// In stream mode each message says how it travelled, so a game server can tell a reliable
/// message from an unreliable one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_events_tell_reliable_from_unreliable() {
    use soe_tokio::{Channel, Config, Delivery, EndpointEvent, EventMode};
    let server = Endpoint::bind(
        local(),
        Config::from(EndpointConfig::server(session(None))).with_event_mode(EventMode::Stream),
    )
    .unwrap();
    let client = Endpoint::bind(local(), EndpointConfig::client(session(None))).unwrap();
    let conn = client.connect(server.local_addr()).await.unwrap();
    conn.send_on(Channel::new(2).unwrap(), Bytes::from_static(b"reliable"))
        .await
        .unwrap();
    conn.send_unreliable(Bytes::from_static(b"unreliable"))
        .unwrap();
    conn.send_ordered(Bytes::from_static(b"ordered")).unwrap();
    let mut seen = Vec::new();
    // Dropping the last handle of a connection closes it: keep the accepted one.
    let mut accepted = Vec::new();
    while seen.len() < 3 {
        let next = tokio::time::timeout(Duration::from_secs(3), server.next_event()).await;
        let Ok(next) = next else {
            panic!("seen so far: {seen:?}");
        };
        match next {
            Some(EndpointEvent::Message {
                channel,
                data,
                kind,
                ..
            }) => seen.push((channel.index(), data, kind)),
            Some(EndpointEvent::Accepted(c)) => accepted.push(c),
            Some(_) => {}
            None => panic!("the server ended"),
        }
    }
    seen.sort_by_key(|(_, d, _)| d.clone());
    assert_eq!(
        seen,
        [
            (0, Bytes::from_static(b"ordered"), Delivery::Ordered),
            (2, Bytes::from_static(b"reliable"), Delivery::Reliable),
            (0, Bytes::from_static(b"unreliable"), Delivery::Unreliable),
        ]
    );
    client.close(DisconnectReason::Application);
    server.close(DisconnectReason::ManagerDeleted);
}
