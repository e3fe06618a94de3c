//! The driver has no periodic tick: an idle endpoint sleeps until its next deadline.
#![allow(missing_docs)]

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use soe_runtime::{AsyncTimer, AsyncUdpSocket, Config, Runtime, SocketConfig};
use soe_tokio::{DisconnectReason, EndpointConfig, SessionConfig, TokioRuntime};

/// Tokio, counting how often the driver polls its timer (once per driver wake-up with a
/// deadline) and re-arms it.
#[derive(Debug, Clone, Default)]
struct Counting {
    inner: TokioRuntime,
    polls: Arc<AtomicUsize>,
    resets: Arc<AtomicUsize>,
}

#[derive(Debug)]
struct CountingTimer {
    inner: Pin<Box<dyn AsyncTimer>>,
    polls: Arc<AtomicUsize>,
    resets: Arc<AtomicUsize>,
}

impl AsyncTimer for CountingTimer {
    fn reset(mut self: Pin<&mut Self>, deadline: Instant) {
        self.resets.fetch_add(1, Ordering::Relaxed);
        self.inner.as_mut().reset(deadline);
    }

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.polls.fetch_add(1, Ordering::Relaxed);
        self.inner.as_mut().poll(cx)
    }
}

impl Runtime for Counting {
    fn new_timer(&self, deadline: Instant) -> Pin<Box<dyn AsyncTimer>> {
        Box::pin(CountingTimer {
            inner: self.inner.new_timer(deadline),
            polls: self.polls.clone(),
            resets: self.resets.clone(),
        })
    }

    fn spawn(&self, future: Pin<Box<dyn Future<Output = ()> + Send>>) {
        self.inner.spawn(future);
    }

    fn wrap_udp_socket(&self, socket: std::net::UdpSocket) -> io::Result<Arc<dyn AsyncUdpSocket>> {
        self.inner.wrap_udp_socket(socket)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_does_not_wake_the_driver() {
    let session = Arc::new(SessionConfig::new("SoeIdle"));
    let bind = |config: EndpointConfig, runtime: Counting| {
        let socket = SocketConfig::default()
            .bind("127.0.0.1:0".parse().unwrap())
            .unwrap();
        soe_runtime::Endpoint::with_socket(socket, Config::from(config), runtime).unwrap()
    };
    let server_rt = Counting::default();
    let client_rt = Counting::default();
    let server = bind(EndpointConfig::server(session.clone()), server_rt.clone());
    let client = bind(EndpointConfig::client(session), client_rt.clone());
    let (accepted, connected) = tokio::join!(server.accept(), client.connect(server.local_addr()));
    let (on_server, on_client) = (accepted.unwrap(), connected.unwrap());
    on_client
        .send(bytes::Bytes::from_static(b"hello"))
        .await
        .unwrap();
    assert_eq!(on_server.recv().await.unwrap(), &b"hello"[..]);
    // Let the acknowledgements settle (event-driven: the client has the server's ack of
    // "hello", and nothing else is queued either way), then watch one idle second.
    let settled = async {
        loop {
            let acked = on_client.stats().is_some_and(|s| s.acks_received >= 1);
            let server_acked = on_server.stats().is_some_and(|s| s.acks_sent >= 1);
            if acked && server_acked {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), settled)
        .await
        .expect("the ack of hello arrives");
    let before = [
        server_rt.polls.load(Ordering::Relaxed),
        client_rt.polls.load(Ordering::Relaxed),
    ];
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = [
        server_rt.polls.load(Ordering::Relaxed),
        client_rt.polls.load(Ordering::Relaxed),
    ];
    for (side, (b, a)) in ["server", "client"].iter().zip(before.iter().zip(after)) {
        assert!(
            a - b <= 3,
            "the {side} driver woke {} times in an idle second",
            a - b
        );
    }
    // It did run: the timer was armed for the session's deadlines.
    assert!(server_rt.polls.load(Ordering::Relaxed) > 0);
    client.close(DisconnectReason::Application);
    client.wait_idle().await;
}
