//! The guard of `eventThread: 'js'`: a light thread that drives the endpoint's loop while the
//! JS thread cannot (a long handler, a slow reader, any long-running JS code), so that acks,
//! resends and heartbeats do not wait for JS, and datagrams go on into the endpoint's receive
//! queue, bounded by `receiveQueueBytes` as on the pump, instead of waiting in the socket.
//!
//! The loop sits behind a mutex both threads share; the JS thread holds it for a turn, never
//! across a call into JS. The JS thread counts its turns ([`Guarded::turned`]) and publishes
//! when it next expects one (its timer, [`Guarded::expect`]). The guard wakes every [`PERIOD`]
//! and looks, with atomics and one non-blocking peek at its own duplicate of the socket: when
//! the JS thread has not turned since the last look, and either its timer is [`PERIOD`]
//! overdue or a datagram has waited in the socket across two looks, the JS thread is held, and
//! the guard takes the loop over. It then drives it as the pump does (blocking in the kernel
//! until a datagram, a deadline or [`PERIOD`]), and wakes the JS thread's loop (`wake`, a libuv
//! async handle) so that the events its turns made ready reach JS as soon as JS is free. The
//! first thing the JS thread does when free is ask for the loop back ([`Guarded::reclaim`]):
//! the guard lets it go after the turn it is in, which that request cuts short.
//!
//! While the endpoint holds no session and the JS thread has no timer set, nothing can be due
//! but a new session: the guard sleeps without a timeout until the JS thread's next turn sets
//! one (an idle server costs no wake-ups). Standard library only: it builds wherever the addon
//! does.

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, TryLockError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use soe_runtime::blocking::{EventLoop, EventLoopHandle};

/// How often the guard looks while sessions are open, and how late the JS thread may be
/// before the guard takes over (a datagram: between one and two periods).
pub(crate) const PERIOD: Duration = Duration::from_millis(10);

/// `expect`'s value when the JS thread has no timer set.
const NEVER: u64 = u64::MAX;

/// What the JS thread and its guard share.
pub(crate) struct Guarded {
    events: Mutex<EventLoop>,
    /// For the endpoint's session count and to cut a blocked turn short.
    handle: EventLoopHandle,
    /// The JS thread's turns so far.
    turns: AtomicU64,
    /// When the JS thread's timer fires, in microseconds since `epoch` (or [`NEVER`]).
    expect: AtomicU64,
    epoch: Instant,
    /// The JS thread waits for the loop: the guard lets it go.
    wanted: AtomicBool,
    /// The guard holds the loop.
    active: AtomicBool,
    /// The guard sleeps without a timeout (see [`Guarded::expect`]).
    parked: AtomicBool,
    /// Set to stop the guard; `sleep` and `woken` are its timed wait.
    stop: AtomicBool,
    sleep: Mutex<()>,
    woken: Condvar,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Guarded {
    /// Shares `events` between the JS thread and a guard.
    pub(crate) fn new(events: EventLoop) -> Arc<Self> {
        Arc::new(Self {
            handle: events.handle(),
            events: Mutex::new(events),
            turns: AtomicU64::new(0),
            expect: AtomicU64::new(NEVER),
            epoch: Instant::now(),
            wanted: AtomicBool::new(false),
            active: AtomicBool::new(false),
            parked: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            sleep: Mutex::new(()),
            woken: Condvar::new(),
        })
    }

    /// The loop for the JS thread's turn: at once, or, while the guard drives it, once the
    /// guard has let it go (the request wakes its blocked turn). Also counts the turn.
    pub(crate) fn reclaim(&self) -> MutexGuard<'_, EventLoop> {
        self.turns.fetch_add(1, Ordering::Relaxed);
        match self.events.try_lock() {
            Ok(events) => events,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => {
                self.wanted.store(true, Ordering::SeqCst);
                self.handle.wake();
                let events = lock(&self.events);
                self.wanted.store(false, Ordering::SeqCst);
                events
            }
        }
    }

    /// The loop for a question from the JS thread (its timer, after a call into the endpoint),
    /// or `None` while the guard drives it: the guard's wake-up brings the JS thread back to
    /// ask again once it is free.
    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, EventLoop>> {
        match self.events.try_lock() {
            Ok(events) => Some(events),
            Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// The JS thread's timer fires at `at` (`None`: no timer); wakes a guard that sleeps
    /// without a timeout, since work may be coming.
    pub(crate) fn expect(&self, at: Option<Instant>) {
        let micros = at.map_or(NEVER, |at| {
            u64::try_from(at.saturating_duration_since(self.epoch).as_micros()).unwrap_or(NEVER)
        });
        // Sequentially consistent with `wait`'s store of `parked` and load of `expect`: either
        // the guard sees the new timer, or this sees it parked.
        self.expect.store(micros, Ordering::SeqCst);
        if self.parked.load(Ordering::SeqCst) {
            self.notify();
        }
    }

    fn notify(&self) {
        drop(lock(&self.sleep));
        self.woken.notify_all();
    }

    fn micros(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_micros()).unwrap_or(NEVER)
    }

    /// Waits for the next look: [`PERIOD`], or until woken when nothing can be due. `false`
    /// once asked to stop.
    fn wait(&self) -> bool {
        let guard = lock(&self.sleep);
        if self.stop.load(Ordering::SeqCst) {
            return false;
        }
        let idle = self.expect.load(Ordering::Relaxed) == NEVER && self.handle.session_count() == 0;
        if idle {
            self.parked.store(true, Ordering::SeqCst);
            // Looked at again once parked, under the lock the JS thread's notify takes: no
            // wake-up is lost.
            if self.expect.load(Ordering::SeqCst) == NEVER {
                drop(
                    self.woken
                        .wait(guard)
                        .unwrap_or_else(PoisonError::into_inner),
                );
            }
            self.parked.store(false, Ordering::SeqCst);
        } else {
            drop(
                self.woken
                    .wait_timeout(guard, PERIOD)
                    .unwrap_or_else(PoisonError::into_inner),
            );
        }
        !self.stop.load(Ordering::SeqCst)
    }

    /// Drives the loop until the JS thread wants it back, the guard is stopped, or the
    /// endpoint has ended; wakes the JS thread's loop after each turn. `false` once the
    /// endpoint has ended.
    fn take_over(&self, wake: &dyn Fn()) -> bool {
        // Held by the JS thread: it is turning, so not held itself.
        let Some(mut events) = self.try_lock() else {
            return true;
        };
        self.active.store(true, Ordering::SeqCst);
        let mut running = true;
        while running && !self.wanted.load(Ordering::SeqCst) && !self.stop.load(Ordering::SeqCst) {
            running = events.drive(PERIOD);
            // Events may be ready; libuv makes one call of many sends.
            wake();
        }
        self.active.store(false, Ordering::SeqCst);
        drop(events);
        // Once more after letting go: a JS thread that found the loop taken meanwhile (its
        // `rearm` set no timer) then looks again, so none is left without a wake-up.
        wake();
        running
    }
}

/// A running guard thread; dropping it (or [`Guard::stop`]) stops and joins it.
pub(crate) struct Guard {
    shared: Arc<Guarded>,
    thread: Option<JoinHandle<()>>,
}

impl Guard {
    /// Starts a guard on `shared` that peeks at `socket` (a duplicate of the loop's) and calls
    /// `wake` to wake the JS thread's loop; `None` when no thread can start (the JS thread then
    /// runs alone, as before the guard).
    pub(crate) fn start(
        shared: Arc<Guarded>,
        socket: UdpSocket,
        wake: Box<dyn Fn() + Send>,
    ) -> Option<Self> {
        socket.set_nonblocking(true).ok()?;
        let watched = shared.clone();
        let name = format!("soe-guard {}", shared.handle.local_addr());
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || run(&watched, &socket, &*wake))
            .ok()?;
        Some(Self {
            shared,
            thread: Some(thread),
        })
    }

    /// Stops the guard and waits for it: at most the end of the turn it is in, which this cuts
    /// short. After this, it never calls `wake` again.
    pub(crate) fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.notify();
        // Cuts a turn of the guard short (else it ends within `PERIOD` anyway).
        self.shared.handle.wake();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether a datagram (or an error, which a turn's receive reports) waits on the socket.
fn readable(socket: &UdpSocket) -> bool {
    let mut byte = [0u8; 1];
    match socket.peek_from(&mut byte) {
        Ok(_) => true,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    }
}

fn run(shared: &Guarded, socket: &UdpSocket, wake: &dyn Fn()) {
    let mut seen = shared.turns.load(Ordering::Relaxed);
    let mut waiting = false;
    while shared.wait() {
        let turns = shared.turns.load(Ordering::Relaxed);
        if turns != seen {
            // The JS thread turned since the last look.
            seen = turns;
            waiting = false;
            continue;
        }
        let expect = shared.expect.load(Ordering::Relaxed);
        let late = expect != NEVER
            && shared.micros(Instant::now()) > expect.saturating_add(PERIOD.as_micros() as u64);
        let readable = readable(socket);
        if late || (readable && waiting) {
            if !shared.take_over(wake) {
                return;
            }
            seen = shared.turns.load(Ordering::Relaxed);
            waiting = false;
        } else {
            waiting = readable;
        }
    }
}
