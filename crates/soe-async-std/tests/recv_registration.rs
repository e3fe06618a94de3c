//! A receive that runs the socket empty leaves the task registered for the next datagram, so
//! the driver makes no second call (a system call that finds nothing) only to register
//! (issue 44).
#![allow(missing_docs)]

use std::io::IoSliceMut;
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use soe_async_std::AsyncStdRuntime;
use soe_runtime::udp::{BATCH_SIZE, RecvMeta};
use soe_runtime::{AsyncUdpSocket, Runtime};

/// Counts its wake-ups; the test blocks on it between polls (async-io's reactor runs on a
/// thread of its own).
#[derive(Default)]
struct Woken {
    count: Mutex<usize>,
    changed: Condvar,
}

impl Wake for Woken {
    fn wake(self: Arc<Self>) {
        *self.count.lock().unwrap() += 1;
        self.changed.notify_all();
    }
}

impl Woken {
    fn count(&self) -> usize {
        *self.count.lock().unwrap()
    }

    /// Blocks until the count passes `seen`.
    fn wait_past(&self, seen: usize) {
        let count = self.count.lock().unwrap();
        let (count, timeout) = self
            .changed
            .wait_timeout_while(count, Duration::from_secs(20), |c| *c <= seen)
            .unwrap();
        assert!(!timeout.timed_out(), "the socket woke the task ({count})");
    }
}

/// Polls until datagrams come; returns the first one's bytes and how many came.
fn receive(socket: &dyn AsyncUdpSocket, woken: &Arc<Woken>) -> (Vec<u8>, usize) {
    let waker = Waker::from(woken.clone());
    let mut cx = Context::from_waker(&waker);
    let mut storage = [[0u8; 64]; 4];
    let mut meta = [RecvMeta::default(); 4];
    loop {
        let seen = woken.count();
        let mut bufs: Vec<IoSliceMut<'_>> =
            storage.iter_mut().map(|b| IoSliceMut::new(b)).collect();
        match socket.poll_recv(&mut cx, &mut bufs, &mut meta) {
            Poll::Ready(result) => {
                let n = result.expect("receive");
                drop(bufs);
                return (storage[0][..meta[0].len].to_vec(), n);
            }
            Poll::Pending => woken.wait_past(seen),
        }
    }
}

#[test]
fn a_short_receive_registers_for_the_next_datagram() {
    let std_socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let socket = AsyncStdRuntime.wrap_udp_socket(std_socket).unwrap();
    let to = socket.local_addr().unwrap();
    let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let woken = Arc::new(Woken::default());

    peer.send_to(b"one", to).unwrap();
    let (first, n) = receive(&*socket, &woken);
    assert_eq!((first.as_slice(), n), (&b"one"[..], 1));
    if BATCH_SIZE == 1 {
        // The plain path fills one buffer a call: never short, never registered early.
        assert!(!socket.registered_after_recv());
        return;
    }
    // One datagram in four buffers: the socket ran empty, and the same call registered.
    assert!(socket.registered_after_recv());
    // Only that registration can wake the task now: nothing else polled the socket since.
    let before = woken.count();
    peer.send_to(b"two", to).unwrap();
    woken.wait_past(before);
    let (second, n) = receive(&*socket, &woken);
    assert_eq!((second.as_slice(), n), (&b"two"[..], 1));
}
