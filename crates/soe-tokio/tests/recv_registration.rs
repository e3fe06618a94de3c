//! A receive that runs the socket empty leaves the task registered for the next datagram, so
//! the driver makes no second call that would only register (issue 44).
#![allow(missing_docs)]

use std::io::IoSliceMut;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use soe_runtime::udp::{BATCH_SIZE, RecvMeta};
use soe_runtime::{AsyncUdpSocket, Runtime};
use soe_tokio::TokioRuntime;
use tokio::sync::Notify;

/// Counts its wake-ups and lets the test wait for the next one.
#[derive(Default)]
struct Woken {
    count: AtomicUsize,
    notify: Notify,
}

impl Wake for Woken {
    fn wake(self: Arc<Self>) {
        self.count.fetch_add(1, Ordering::SeqCst);
        self.notify.notify_one();
    }
}

/// Polls `socket` until it returns datagrams, waiting for the waker between polls; returns the
/// first datagram's bytes and how many were received.
async fn receive(socket: &dyn AsyncUdpSocket, woken: &Arc<Woken>) -> (Vec<u8>, usize) {
    let waker = Waker::from(woken.clone());
    let mut cx = Context::from_waker(&waker);
    let mut storage = [[0u8; 64]; 4];
    let mut meta = [RecvMeta::default(); 4];
    loop {
        let mut bufs: Vec<IoSliceMut<'_>> =
            storage.iter_mut().map(|b| IoSliceMut::new(b)).collect();
        match socket.poll_recv(&mut cx, &mut bufs, &mut meta) {
            Poll::Ready(result) => {
                let n = result.expect("receive");
                drop(bufs);
                return (storage[0][..meta[0].len].to_vec(), n);
            }
            Poll::Pending => wait(woken).await,
        }
    }
}

async fn wait(woken: &Woken) {
    tokio::time::timeout(Duration::from_secs(20), woken.notify.notified())
        .await
        .expect("the socket woke the task");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_short_receive_registers_for_the_next_datagram() {
    let std_socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let socket = TokioRuntime::default().wrap_udp_socket(std_socket).unwrap();
    let to = socket.local_addr().unwrap();
    let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let woken = Arc::new(Woken::default());

    peer.send_to(b"one", to).unwrap();
    let (first, n) = receive(&*socket, &woken).await;
    assert_eq!((first.as_slice(), n), (&b"one"[..], 1));
    if BATCH_SIZE == 1 {
        // The plain path fills one buffer a call: never short, never registered early.
        assert!(!socket.registered_after_recv());
        return;
    }
    // One datagram in four buffers: the socket ran empty, and the same call registered.
    assert!(socket.registered_after_recv());
    let before = woken.count.load(Ordering::SeqCst);
    // Only that registration can wake the task now: nothing else polled the socket since.
    peer.send_to(b"two", to).unwrap();
    while woken.count.load(Ordering::SeqCst) == before {
        wait(&woken).await;
    }
    let (second, n) = receive(&*socket, &woken).await;
    assert_eq!((second.as_slice(), n), (&b"two"[..], 1));
}
