//! The driver under tokio's paused test clock (`start_paused`), as applications test with it.
//! tokio's timers then run in virtual time, so the driver must read that clock too: on the
//! system's, it saw a timer that had fired as still to come, and polled it again at once, in a
//! busy loop, until real time caught up (issue 44 §2). A driver that skipped polling a timer it
//! believed still to come (branch async-wakeup-wip) was never woken again and stalled here.
#![allow(missing_docs)]

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use soe_runtime::{AsyncTimer, AsyncUdpSocket, ConnectError, Runtime};
use soe_tokio::{Endpoint, EndpointConfig, SessionConfig, TokioRuntime};

const CONNECT_TIMEOUT: Duration = Duration::from_millis(300);

/// A connect to a port where nothing answers, with a short connect timeout.
async fn connect_to_silent_port<R: Runtime>(runtime: R) -> Result<(), ConnectError> {
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let session = SessionConfig::new("SoePaused").with_connect_timeout(CONNECT_TIMEOUT);
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let config = EndpointConfig::client(Arc::new(session));
    let client = soe_runtime::Endpoint::with_socket(socket, config.into(), runtime).unwrap();
    let connect = client.connect(silent.local_addr().unwrap());
    match tokio::time::timeout(Duration::from_secs(3600), connect).await {
        Ok(outcome) => outcome.map(drop),
        Err(_) => panic!("the connect did not end within an hour of virtual time"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_connect_to_a_silent_port_times_out_under_the_paused_clock() {
    let client = Endpoint::client(EndpointConfig::client(Arc::new(
        SessionConfig::new("SoePaused").with_connect_timeout(CONNECT_TIMEOUT),
    )))
    .unwrap();
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let outcome = tokio::time::timeout(
        Duration::from_secs(3600),
        client.connect(silent.local_addr().unwrap()),
    )
    .await;
    assert!(
        matches!(outcome, Ok(Err(ConnectError::TimedOut { .. }))),
        "the connect did not time out: {outcome:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_runtime_reads_the_paused_clock() {
    let runtime = TokioRuntime::default();
    let before = runtime.now();
    tokio::time::advance(Duration::from_secs(3600)).await;
    let after = runtime.now();
    assert!(
        after.duration_since(before) >= Duration::from_secs(3600),
        "an hour of virtual time read as {:?}",
        after.duration_since(before)
    );
}

/// tokio's runtime, counting the driver's reads of the clock (one or two per wake-up).
#[derive(Debug, Clone, Default)]
struct Counting {
    inner: TokioRuntime,
    reads: Arc<AtomicUsize>,
}

impl Runtime for Counting {
    fn new_timer(&self, deadline: Instant) -> Pin<Box<dyn AsyncTimer>> {
        self.inner.new_timer(deadline)
    }

    fn spawn(&self, future: Pin<Box<dyn Future<Output = ()> + Send>>) {
        self.inner.spawn(future);
    }

    fn wrap_udp_socket(&self, socket: std::net::UdpSocket) -> io::Result<Arc<dyn AsyncUdpSocket>> {
        self.inner.wrap_udp_socket(socket)
    }

    fn now(&self) -> Instant {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.inner.now()
    }
}

#[tokio::test(start_paused = true)]
async fn the_driver_sleeps_until_its_timer_fires_in_virtual_time() {
    // The connect sends a few requests before it gives up, each a wake-up of the driver (six
    // reads of the clock in all). On the system's clock the driver instead polled its fired
    // timer again and again until the 300 ms had passed in real time: some 800,000 reads here.
    let runtime = Counting::default();
    let reads = runtime.reads.clone();
    let outcome = connect_to_silent_port(runtime).await;
    assert!(
        matches!(outcome, Err(ConnectError::TimedOut { .. })),
        "{outcome:?}"
    );
    let reads = reads.load(Ordering::Relaxed);
    assert!(reads <= 50, "the driver read the clock {reads} times");
}

#[tokio::test(start_paused = true)]
async fn a_connect_times_out_in_virtual_time_after_the_clock_moved_on() {
    // The connect reads the driver's clock too: on the system's, a connect an hour of virtual
    // time after the start found its deadlines an hour gone at the driver's first wake-up.
    tokio::time::advance(Duration::from_secs(3600)).await;
    let start = tokio::time::Instant::now();
    let outcome = connect_to_silent_port(TokioRuntime::default()).await;
    assert!(
        matches!(outcome, Err(ConnectError::TimedOut { .. })),
        "{outcome:?}"
    );
    let waited = start.elapsed();
    assert!(
        (CONNECT_TIMEOUT..CONNECT_TIMEOUT * 2).contains(&waited),
        "the connect timed out after {waited:?} of virtual time"
    );
}
