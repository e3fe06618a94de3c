//! Through a relay that drops 10 % of the datagrams each way (seeded), in both pairings with the
//! peer (soe-protocol 2.3.0): 400 messages of 1 to 1,200 bytes from us, 8 outstanding, each
//! echoed by the peer's application; every message checked in order, byte for byte, on both
//! sides, and no session ends. (With its whole window in flight at once, 400 messages queued on
//! each side, the peer's own sender sometimes stops for good under this loss, our old and new
//! loss recovery alike: see docs/interop.md. An echo keeps its window small.) The peer never re-acknowledges a duplicate, so lost acks must be
//! repaired by new data or an ack elicitor rather than by resends (our side uses the
//! `TruncatedGroup` elicitor this peer reads as nothing).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use soe_protocol::{ClientEvent, SocketEvent};
use soe_reliable::{AckElicitor, ReliableConfig};
use soe_tokio::{Connection, DisconnectReason, SessionConfig};

const COUNT: usize = 400;
const LOSS_PER_MILLE: u64 = 100;
const OURS: u8 = 21;
/// Messages of ours not yet echoed.
const DEPTH: usize = 8;
/// A lossy run takes longer than a clean one: the peer resends only on its own timer.
const LOSSY_PATIENCE: Duration = Duration::from_secs(20);

/// Message `i` of stream `salt`: 1 to 1,200 bytes (one to three datagrams).
fn lossy_message(i: usize, salt: u8) -> Bytes {
    let full = message(i, salt);
    full.slice(..full.len().min(1 + (i * 37) % 1200))
}

fn our_lossy_session() -> SessionConfig {
    let reliable = ReliableConfig::default().with_ack_elicitor(AckElicitor::TruncatedGroup);
    our_session()
        .with_reliable(Arc::new(reliable))
        .expect("valid reliable config")
}

/// A relay that drops about 10 % of the datagrams each way while `lossy` is set (seeded
/// SplitMix64), counting what it dropped.
async fn lossy_relay(
    server: std::net::SocketAddr,
    seed: u64,
) -> (Relay, Arc<AtomicBool>, Arc<AtomicU64>) {
    let lossy = Arc::new(AtomicBool::new(false));
    let dropped = Arc::new(AtomicU64::new(0));
    let mut state = seed;
    let relay = Relay::with_filter(
        server,
        Box::new({
            let lossy = lossy.clone();
            let dropped = dropped.clone();
            move |_, _| {
                state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = state;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                let drop = lossy.load(Ordering::SeqCst) && (z ^ (z >> 31)) % 1000 < LOSS_PER_MILLE;
                if drop {
                    dropped.fetch_add(1, Ordering::SeqCst);
                }
                drop
            }
        }),
    )
    .await;
    (relay, lossy, dropped)
}

/// Sends our stream on `conn`, at most `DEPTH` messages ahead of the echoes, and checks each
/// echo.
async fn our_side(conn: Connection, relay: &Relay) -> Connection {
    let window = Arc::new(tokio::sync::Semaphore::new(DEPTH));
    let sender = tokio::spawn({
        let conn = conn.clone();
        let window = window.clone();
        async move {
            for i in 0..COUNT {
                window.acquire().await.expect("open").forget();
                conn.send(lossy_message(i, OURS)).await.expect("send");
            }
        }
    });
    for i in 0..COUNT {
        let got = match tokio::time::timeout(LOSSY_PATIENCE, conn.recv()).await {
            Ok(got) => got.unwrap_or_else(|| panic!("our connection closed after {i} echoes")),
            Err(_) => {
                let log = relay.log();
                for r in log.iter().rev().take(40).rev() {
                    eprintln!(
                        "{:>8.1?} {:?} {:02x?} dropped {}",
                        r.at,
                        r.dir,
                        &r.bytes[..r.bytes.len().min(12)],
                        r.dropped
                    );
                }
                panic!(
                    "no echo {i} from the peer within {LOSSY_PATIENCE:?}; our stats {:?}",
                    conn.stats()
                )
            }
        };
        assert_eq!(got, lossy_message(i, OURS), "echo {i} from the peer");
        window.add_permits(1);
    }
    sender.await.unwrap();
    conn
}

fn report(what: &str, start: Instant, relay: &Relay, dropped: &AtomicU64, conn: &Connection) {
    let seen = relay.log().len() as u64;
    let dropped = dropped.load(Ordering::SeqCst);
    let stats = conn.stats().expect("open");
    eprintln!(
        "{what}: {COUNT} messages echoed in {:?}; relay dropped {dropped} of {seen}; our stats {stats:?}",
        start.elapsed()
    );
    assert!(
        dropped * 1000 >= seen * (LOSS_PER_MILLE / 2),
        "the link was lossy: {dropped} of {seen}"
    );
    assert!(stats.resends > 0, "losses were repaired by resends");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_percent_loss_our_client_with_the_peer_server() {
    let _serial = serial().await;
    let start = Instant::now();
    let mut server = Peer::default().server().await;
    let handle = server.handle();
    let (relay, lossy, dropped) = lossy_relay(server.local_addr(), 0x5EED_0001).await;
    let ours = our_client(our_lossy_session());
    let conn = within(PATIENCE, "connect", ours.connect(relay.addr))
        .await
        .unwrap();
    lossy.store(true, Ordering::SeqCst);
    let peer = tokio::spawn(async move {
        let mut received = 0;
        let mut closed = None;
        while closed.is_none() {
            match within(
                LOSSY_PATIENCE,
                "the peer server's next event",
                server.recv_event(),
            )
            .await
            .expect("the peer's driver stopped")
            {
                SocketEvent::SessionOpened { .. } => {}
                SocketEvent::DataReceived { remote, data, .. } => {
                    assert_eq!(
                        data,
                        lossy_message(received, OURS),
                        "message {received} from us"
                    );
                    handle.enqueue_data(remote, data);
                    received += 1;
                }
                SocketEvent::SessionClosed { reason, .. } => closed = Some(reason),
            }
        }
        (received, closed, server)
    });
    let conn = our_side(conn, &relay).await;
    assert!(conn.close_reason().is_none());
    report("our client <-> peer server", start, &relay, &dropped, &conn);
    // The close itself goes over a clean link (the peer does not resend a lost Disconnect).
    lossy.store(false, Ordering::SeqCst);
    conn.close(DisconnectReason::Application);
    let (received, closed, server) = within(LOSSY_PATIENCE, "the peer's close", peer)
        .await
        .unwrap();
    assert_eq!(received, COUNT);
    assert_eq!(closed, Some(soe_protocol::DisconnectReason::Application));
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_percent_loss_the_peer_client_with_our_server() {
    let _serial = serial().await;
    let start = Instant::now();
    let ours = our_server(our_lossy_session());
    let (relay, lossy, dropped) = lossy_relay(ours.local_addr(), 0x5EED_0002).await;
    let mut client = Peer::default().client(relay.addr).await;
    let handle = client.handle();
    peer_connected(&mut client).await;
    // Its client is silent until it has data, and our server accepts on the first packet.
    handle.enqueue_data(&b"hello"[..]);
    lossy.store(true, Ordering::SeqCst);
    let echo = handle.clone();
    let peer = tokio::spawn(async move {
        let mut received = 0;
        let mut closed = None;
        while closed.is_none() {
            match within(
                LOSSY_PATIENCE,
                "the peer client's next event",
                client.recv_event(),
            )
            .await
            .expect("the peer's driver stopped")
            {
                ClientEvent::Connected => panic!("connected twice"),
                ClientEvent::DataReceived { data, .. } => {
                    assert_eq!(
                        data,
                        lossy_message(received, OURS),
                        "message {received} from us"
                    );
                    echo.enqueue_data(data);
                    received += 1;
                }
                ClientEvent::Disconnected { reason } => closed = Some(reason),
            }
        }
        (received, closed, client)
    });
    let conn = within(PATIENCE, "accept", ours.accept()).await.unwrap();
    let hello = within(LOSSY_PATIENCE, "hello", conn.recv()).await;
    assert_eq!(hello.as_deref(), Some(&b"hello"[..]));
    let conn = our_side(conn, &relay).await;
    assert!(conn.close_reason().is_none());
    report("peer client <-> our server", start, &relay, &dropped, &conn);
    lossy.store(false, Ordering::SeqCst);
    conn.close(DisconnectReason::Application);
    let (received, closed, client) = within(LOSSY_PATIENCE, "the peer's close", peer)
        .await
        .unwrap();
    assert_eq!(received, COUNT);
    assert_eq!(closed, Some(soe_protocol::DisconnectReason::Application));
    client.abort();
}
