//! `eventThread: 'js'`: the endpoint driven from Node's own event loop, on the JS thread, as
//! Node's `dgram` sockets are: no pump thread, and no hand-over between threads.
//!
//! A libuv poll handle watches (a duplicate of) the endpoint's socket and a libuv timer waits
//! for its next deadline ([`EventLoop::next_turn`]). When either fires, the loop turns once
//! without blocking ([`EventLoop::turn_ready`]), the writes that waited for room are passed on
//! (as the pump does), and the ready events go to JS in one call, packed as the pump packs
//! them, through `napi_make_callback` (which runs the microtasks and `process.nextTick`s after
//! it, as for any I/O callback). Sends from JS need no wake-up: they are made on this thread,
//! and each call into the endpoint moves the timer to the loop's new next turn.
//!
//! `eventBatchMs` holds events as in the pump: while they keep coming, a call into JS at most
//! once per that long (the loop keeps turning meanwhile).
//!
//! While the JS thread is held (a long handler, a slow reader, any long-running JS code), a
//! guard thread (`src/guard.rs`) drives the loop in its place, so acks, resends and heartbeats
//! do not wait for JS, and wakes this loop through a libuv async handle (never ref'd: it keeps
//! no process alive), whose callback takes the loop back and delivers what the guard's turns
//! made ready (the poll handle may see nothing: the guard read the socket).
//!
//! The handles hold the state (a reference each, through their `data`); once the endpoint has
//! ended and JS heard it (or the environment's cleanup hook ran), the guard is stopped and
//! joined, then the handles are closed, and their close callbacks free them.

use std::cell::{Cell, RefCell};
use std::ffi::c_int;
use std::net::UdpSocket;
use std::ptr;
use std::rc::Rc;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use napi::{Env, JsFunction, NapiRaw, sys};
use soe_runtime::RecvTimeoutError;
use soe_runtime::blocking::EventLoop;

use crate::Shared;
use crate::guard::{Guard, Guarded};
use crate::pump::{BATCH, END, Ev, Packed, convert, flush_pending, pack};
use crate::uv::{self, Handle, Uv};

/// The endpoint on the JS thread's libuv loop.
pub(crate) struct JsThread {
    uv: &'static Uv,
    env: sys::napi_env,
    /// The handles; null once closed.
    poll: Cell<*mut Handle>,
    timer: Cell<*mut Handle>,
    /// The async handle the guard wakes this loop with.
    wake: Cell<*mut Handle>,
    /// The loop, shared with the guard.
    events: Arc<Guarded>,
    /// The guard thread, until the handles close (`None` if it could not start: the JS thread
    /// then drives the loop alone).
    guard: RefCell<Option<Guard>>,
    /// What the poll handle waits for (`uv::READABLE`, `uv::WRITABLE`).
    polling: Cell<c_int>,
    /// The JS function that takes the batches, and the async resource its calls run in.
    callback: sys::napi_ref,
    resource: sys::napi_ref,
    context: sys::napi_async_context,
    /// The environment's cleanup hook is set (and holds a reference).
    hooked: Cell<bool>,
    state: RefCell<State>,
}

struct State {
    shared: Arc<Shared>,
    /// The duplicate of the endpoint's socket that the poll handle watches: open until the
    /// handle is closed, even once the driver has closed its own.
    socket: Option<UdpSocket>,
    batch: Vec<Ev>,
    last_call: Option<Instant>,
    last_full: bool,
    moderation: Duration,
    ended: bool,
}

#[cfg(unix)]
fn raw_socket(socket: &UdpSocket) -> uv::OsSocket {
    std::os::unix::io::AsRawFd::as_raw_fd(socket)
}

#[cfg(windows)]
fn raw_socket(socket: &UdpSocket) -> uv::OsSocket {
    std::os::windows::io::AsRawSocket::as_raw_socket(socket) as uv::OsSocket
}

/// The running thread's libuv loop.
fn uv_loop(env: sys::napi_env) -> Option<*mut uv::Loop> {
    let mut out: *mut sys::uv_loop_s = ptr::null_mut();
    // SAFETY: `env` is the live environment of the calling (JS) thread.
    let status = unsafe { sys::napi_get_uv_event_loop(env, &mut out) };
    (status == sys::Status::napi_ok && !out.is_null()).then_some(out.cast())
}

/// A reference that keeps `value` alive.
fn reference(env: sys::napi_env, value: sys::napi_value) -> Option<sys::napi_ref> {
    let mut out = ptr::null_mut();
    // SAFETY: `value` is a live value of `env`, on its thread.
    let status = unsafe { sys::napi_create_reference(env, value, 1, &mut out) };
    (status == sys::Status::napi_ok).then_some(out)
}

/// The async context the batches are delivered in (for async_hooks and domains), on a new
/// resource object named `SoeEndpoint`.
fn async_context(env: &Env) -> Option<(sys::napi_ref, sys::napi_async_context)> {
    let resource = env.create_object().ok()?;
    let name = env.create_string("SoeEndpoint").ok()?;
    let mut context = ptr::null_mut();
    // SAFETY: both values are live values of `env`, on its thread.
    let (resource, status) = unsafe {
        let resource = resource.raw();
        let status = sys::napi_async_init(env.raw(), resource, name.raw(), &mut context);
        (resource, status)
    };
    if status != sys::Status::napi_ok {
        return None;
    }
    Some((reference(env.raw(), resource)?, context))
}

/// Starts driving `events` from the JS thread's loop; gives the loop back when something is
/// missing (a libuv function, the loop itself), for the pump to drive instead.
pub(crate) fn start(
    env: &Env,
    events: EventLoop,
    shared: Arc<Shared>,
    on_events: &JsFunction,
    moderation: Duration,
) -> Result<Rc<JsThread>, Box<EventLoop>> {
    let Some(uv) = Uv::get() else {
        return Err(Box::new(events));
    };
    let Some(uv_loop) = uv_loop(env.raw()) else {
        return Err(Box::new(events));
    };
    let Some(socket) = events.socket().and_then(|s| s.try_clone().ok()) else {
        return Err(Box::new(events));
    };
    // The guard's own duplicate, which it peeks at.
    let Ok(peeked) = socket.try_clone() else {
        return Err(Box::new(events));
    };
    // SAFETY (of `raw`): the function is a live value of `env`.
    let Some(callback) = reference(env.raw(), unsafe { on_events.raw() }) else {
        return Err(Box::new(events));
    };
    let Some((resource, context)) = async_context(env) else {
        return Err(Box::new(events));
    };
    let poll = uv.new_poll(uv_loop, raw_socket(&socket));
    let timer = uv.new_timer(uv_loop);
    let wake = uv.new_async(uv_loop, on_wake);
    let (Some(poll), Some(timer), Some(wake)) = (poll, timer, wake) else {
        // Handles without data: their close callbacks only free them.
        for handle in [poll, timer, wake].into_iter().flatten() {
            uv.close(handle, closed);
        }
        return Err(Box::new(events));
    };
    // The guard's wake-ups never keep the process alive (the poll handle does, if ref'd).
    uv.set_ref(wake, false);
    let events = Guarded::new(events);
    let this = Rc::new(JsThread {
        uv,
        env: env.raw(),
        poll: Cell::new(poll),
        timer: Cell::new(timer),
        wake: Cell::new(wake),
        events: events.clone(),
        guard: RefCell::new(None),
        polling: Cell::new(0),
        callback,
        resource,
        context,
        hooked: Cell::new(false),
        state: RefCell::new(State {
            shared,
            socket: Some(socket),
            batch: Vec::with_capacity(BATCH),
            last_call: None,
            last_full: false,
            moderation,
            ended: false,
        }),
    });
    // Each handle holds a reference, given back by its close callback.
    uv.set_handle_data(poll, Rc::into_raw(this.clone()).cast_mut().cast());
    uv.set_handle_data(timer, Rc::into_raw(this.clone()).cast_mut().cast());
    uv.set_handle_data(wake, Rc::into_raw(this.clone()).cast_mut().cast());
    let waker = Waker(wake);
    *this.guard.borrow_mut() = Guard::start(events, peeked, Box::new(move || waker.send(uv)));
    this.hook();
    this.rearm();
    Ok(this)
}

/// The environment's cleanup hook (a worker thread that ends, the process's exit): closes the
/// handles of an endpoint still open, which would otherwise keep the worker's loop from
/// closing.
unsafe extern "C" fn cleanup(arg: *mut std::ffi::c_void) {
    // SAFETY: the reference `hook` made for the hook, given back once (here, or by `hook`
    // when the endpoint ends first, which removes the hook).
    let this = unsafe { Rc::from_raw(arg.cast_const().cast::<JsThread>()) };
    this.hooked.set(false);
    this.close_handles();
}

/// The state a handle's `data` points at, for its callback.
fn of<'a>(uv: &Uv, handle: *mut Handle) -> Option<&'a JsThread> {
    let data = uv.data(handle).cast::<JsThread>();
    // SAFETY: a handle's data is null or a reference made by `Rc::into_raw` in `start`, which
    // only its close callback gives back, after the last callback of the handle.
    unsafe { data.cast_const().as_ref() }
}

/// The poll handle's callback: the socket is readable (or writable, or failed).
unsafe extern "C" fn on_poll(handle: *mut Handle, status: c_int, events: c_int) {
    let Some(uv) = Uv::get() else { return };
    if let Some(this) = of(uv, handle) {
        // An error: the turn's receive reports it.
        let readable = status < 0 || events & uv::READABLE != 0;
        this.run(readable, events & uv::WRITABLE != 0);
    }
}

/// The timer's callback: the loop's next turn is due.
unsafe extern "C" fn on_timer(handle: *mut Handle) {
    let Some(uv) = Uv::get() else { return };
    if let Some(this) = of(uv, handle) {
        this.run(false, false);
    }
}

/// The async handle's callback: the guard drove the loop while the JS thread was held, and
/// events may be ready; takes the loop back (the socket may hold datagrams too).
unsafe extern "C" fn on_wake(handle: *mut Handle) {
    let Some(uv) = Uv::get() else { return };
    if let Some(this) = of(uv, handle) {
        this.run(true, false);
    }
}

/// The async handle, for the guard's thread.
struct Waker(*mut Handle);

// SAFETY: the guard only passes the pointer to `uv_async_send`, which libuv allows from any
// thread, and is joined before the handle is closed (`close_handles`).
unsafe impl Send for Waker {}

impl Waker {
    fn send(&self, uv: &Uv) {
        uv.async_send(self.0);
    }
}

/// A handle's close callback: libuv is done with it; frees it and drops its reference.
unsafe extern "C" fn closed(handle: *mut Handle) {
    let Some(uv) = Uv::get() else { return };
    let data = uv.data(handle).cast::<JsThread>();
    uv.free_handle(handle);
    if !data.is_null() {
        // SAFETY: the reference `start` made for this handle, given back once.
        drop(unsafe { Rc::from_raw(data.cast_const()) });
    }
}

impl JsThread {
    /// Lets the endpoint keep the process alive (`true`) or not, as `ref`/`unref`.
    /// (The async handle stays unref'd: see `start`.)
    pub(crate) fn set_ref(&self, on: bool) {
        for handle in [self.poll.get(), self.timer.get()] {
            if !handle.is_null() {
                self.uv.set_ref(handle, on);
            }
        }
    }

    /// After a call from JS into the endpoint (a send, a close, a connect): moves the timer to
    /// the loop's next turn, which the call may have brought forward.
    pub(crate) fn kick(&self) {
        self.rearm();
    }

    /// One turn, then the events to JS.
    fn run(&self, readable: bool, writable: bool) {
        let Ok(mut st) = self.state.try_borrow_mut() else {
            return;
        };
        // Held for the turn and the taking of events, never across a call into JS (the guard
        // takes the loop over while JS runs long).
        let mut events = Some(self.events.reclaim());
        if let Some(events) = events.as_mut().filter(|_| !st.ended) {
            events.turn_ready(readable, writable);
        }
        loop {
            let State {
                shared,
                batch,
                ended,
                ..
            } = &mut *st;
            flush_pending(shared, batch);
            let turning = events.get_or_insert_with(|| self.events.reclaim());
            while batch.len() < BATCH && !*ended {
                match turning.try_next_event() {
                    Ok(event) => batch.extend(convert(shared, event)),
                    Err(RecvTimeoutError::Closed) => *ended = true,
                    Err(_) => break,
                }
            }
            let now = Instant::now();
            let full = st.batch.len() >= BATCH;
            let holding = st.hold(now).is_some();
            if !(st.ended || (!st.batch.is_empty() && (!holding || full))) {
                break;
            }
            st.last_full = full;
            if st.ended {
                st.batch.push(Ev::new(END, 0));
            }
            let packed = pack(&mut st.batch);
            st.last_call = Some(now);
            let ended = st.ended;
            drop(st);
            events = None;
            if ended {
                // The port is free before JS hears of the end (it may bind it again at once).
                self.close_handles();
                self.call_js(&packed);
                self.release_js();
                self.unhook();
                return;
            }
            self.call_js(&packed);
            st = match self.state.try_borrow_mut() {
                Ok(st) => st,
                Err(_) => return,
            };
            if !full {
                break;
            }
        }
        drop(events);
        let held = !st.batch.is_empty();
        drop(st);
        if held {
            test_pause();
        }
        self.rearm();
    }

    /// Sets the poll handle's interest and the timer from the loop's state.
    fn rearm(&self) {
        let Ok(st) = self.state.try_borrow() else {
            return;
        };
        let (poll, timer) = (self.poll.get(), self.timer.get());
        if st.ended || poll.is_null() || timer.is_null() {
            return;
        }
        // While the guard drives the loop, the JS thread asks again once the guard wakes it
        // (after each of its turns, and when it lets the loop go).
        let Some(events) = self.events.try_lock() else {
            return;
        };
        let wanted = uv::READABLE
            | if events.wants_writable() {
                uv::WRITABLE
            } else {
                0
            };
        if wanted != self.polling.get() && self.uv.poll_start(poll, wanted, on_poll) {
            self.polling.set(wanted);
        }
        let now = Instant::now();
        let due = st.due(now);
        let next = match (events.next_turn(), due) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        drop(events);
        self.events.expect(next);
        match next {
            Some(at) => {
                let wait = at.saturating_duration_since(now);
                // Whole milliseconds, rounded up: libuv's clock has no finer grain.
                let ms = wait.as_nanos().div_ceil(1_000_000);
                self.uv
                    .timer_start(timer, on_timer, u64::try_from(ms).unwrap_or(u64::MAX));
            }
            None => self.uv.timer_stop(timer),
        }
    }

    /// Stops the guard, then closes the handles (their close callbacks free them) and the
    /// socket the poll handle watched.
    fn close_handles(&self) {
        // First: once joined, the guard sends on the async handle no more.
        let guard = self.guard.borrow_mut().take();
        drop(guard);
        for handle in [
            self.poll.replace(ptr::null_mut()),
            self.timer.replace(ptr::null_mut()),
            self.wake.replace(ptr::null_mut()),
        ] {
            if !handle.is_null() {
                self.uv.close(handle, closed);
            }
        }
        if let Ok(mut st) = self.state.try_borrow_mut() {
            // The poll handle is closed, so no longer watches it.
            st.socket = None;
        }
    }

    /// Sets the environment's cleanup hook, which holds a reference.
    fn hook(self: &Rc<Self>) {
        let arg = Rc::into_raw(self.clone()).cast_mut().cast();
        // SAFETY: on the JS thread of `env`; `cleanup` or `unhook` takes `arg` back.
        let status = unsafe { sys::napi_add_env_cleanup_hook(self.env, Some(cleanup), arg) };
        if status == sys::Status::napi_ok {
            self.hooked.set(true);
        } else {
            // SAFETY: the reference made just above, not handed to N-API.
            drop(unsafe { Rc::from_raw(arg.cast_const().cast::<Self>()) });
        }
    }

    /// Removes the environment's cleanup hook, if set, and drops its reference (the handles
    /// still hold theirs, so `self` lives on).
    fn unhook(&self) {
        if self.hooked.replace(false) {
            let this: *const Self = self;
            // SAFETY: the hook set in `hook` with this function and this address (which
            // `Rc::into_raw` returned), and its reference, given back once.
            unsafe {
                sys::napi_remove_env_cleanup_hook(self.env, Some(cleanup), this.cast_mut().cast());
                drop(Rc::from_raw(this));
            }
        }
    }

    /// Lets go of the JS function and the async context, after the last call.
    fn release_js(&self) {
        // SAFETY: on the JS thread of `env`, each made once in `start` and released once here
        // (the handles are closed, so no callback calls JS again).
        unsafe {
            sys::napi_async_destroy(self.env, self.context);
            sys::napi_delete_reference(self.env, self.callback);
            sys::napi_delete_reference(self.env, self.resource);
        }
    }

    /// Calls the JS function with a batch, inside a handle scope, through
    /// `napi_make_callback`; an exception it throws goes to `uncaughtException`, as one thrown
    /// by a `dgram` listener does.
    fn call_js(&self, packed: &Packed) {
        let env = self.env;
        let mut scope = ptr::null_mut();
        // SAFETY: on the JS thread of `env`, outside any JS frame (a libuv callback).
        if unsafe { sys::napi_open_handle_scope(env, &mut scope) } != sys::Status::napi_ok {
            return;
        }
        self.call_in_scope(packed);
        // SAFETY: the scope opened above.
        unsafe {
            sys::napi_close_handle_scope(env, scope);
        }
    }

    fn call_in_scope(&self, packed: &Packed) {
        // SAFETY: `self.env` is the live environment of this (JS) thread.
        let env = unsafe { Env::from_raw(self.env) };
        let Ok(args) = crate::batch_args(&env, packed) else {
            return;
        };
        // SAFETY: each value is a live value of `env` in the open handle scope.
        let argv: Vec<sys::napi_value> = args.iter().map(|a| unsafe { a.raw() }).collect();
        let (mut func, mut recv, mut result) = (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
        // SAFETY: the references and the async context were made in `start` on this thread and
        // are released only after the last call; `argv` holds `argv.len()` values.
        let status = unsafe {
            sys::napi_get_reference_value(self.env, self.callback, &mut func);
            sys::napi_get_reference_value(self.env, self.resource, &mut recv);
            sys::napi_make_callback(
                self.env,
                self.context,
                recv,
                func,
                argv.len(),
                argv.as_ptr(),
                &mut result,
            )
        };
        if status == sys::Status::napi_pending_exception {
            let mut error = ptr::null_mut();
            // SAFETY: an exception is pending on this thread's `env`.
            unsafe {
                sys::napi_get_and_clear_last_exception(self.env, &mut error);
                sys::napi_fatal_exception(self.env, error);
            }
        }
    }
}

/// A pause for the tests, never set in use (`SOE_NODE_TEST_HELD_PAUSE_MS`): how long the JS
/// thread waits after a turn that held events back, before it sets its timer. A test makes
/// the hold end in between, as a thread preempted there does.
fn test_pause() {
    static PAUSE: OnceLock<Option<Duration>> = OnceLock::new();
    let pause = PAUSE.get_or_init(|| {
        std::env::var("SOE_NODE_TEST_HELD_PAUSE_MS")
            .ok()
            .and_then(|ms| ms.parse().ok())
            .map(Duration::from_millis)
    });
    if let Some(pause) = *pause {
        std::thread::sleep(pause);
    }
}

impl State {
    /// Until when events are held (see the pump's `eventBatchMs`), or `None`.
    fn hold(&self, now: Instant) -> Option<Instant> {
        self.last_call
            .map(|last| last + self.moderation)
            .filter(|until| !self.moderation.is_zero() && !self.last_full && now < *until)
    }

    /// When the events held in the batch must go to JS (`None`: it is empty): at the end of
    /// their hold, or at once when that has passed. It may have passed since the turn that
    /// held them looked (the thread can be preempted in between), and with no timer for them
    /// they would wait for the next datagram or deadline, maybe the idle timeout's.
    fn due(&self, now: Instant) -> Option<Instant> {
        (!self.batch.is_empty()).then(|| self.hold(now).unwrap_or(now))
    }
}
