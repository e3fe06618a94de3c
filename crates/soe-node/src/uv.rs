//! The few libuv functions the addon uses to drive an endpoint from Node's own event loop
//! (`eventThread: 'js'`, `src/js_thread.rs`), found at run time in the host process.
//!
//! Node exports libuv's symbols to addons, but a host that is not Node (or a Node built
//! without them) may lack some; and on Windows an addon cannot link against `node.exe`'s
//! exports by name without an import library. So every function is looked up in the running
//! process (`dlsym` on Unix, `GetProcAddress` on the executable on Windows), as napi-sys does
//! for N-API itself on Windows; when one is missing, [`Uv::get`] says so and the endpoint runs
//! on its pump thread instead.
//!
//! Every `unsafe` block of the addon's libuv use is in this module, each in a small function
//! that states what makes it sound (docs/architecture.md, "Unsafe code").

use std::alloc::Layout;
use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

/// libuv's `uv_loop_t`, `uv_handle_t` and the handle types: opaque here.
pub(crate) type Loop = c_void;
/// A `uv_handle_t` (or a `uv_poll_t` or `uv_timer_t`, which start with one).
pub(crate) type Handle = c_void;

/// `uv_os_sock_t`: a file descriptor on Unix, a `SOCKET` on Windows.
#[cfg(unix)]
pub(crate) type OsSocket = c_int;
#[cfg(windows)]
pub(crate) type OsSocket = usize;

/// `UV_ASYNC`, `UV_POLL` and `UV_TIMER` of `uv_handle_type` (stable since libuv 1.0).
const UV_ASYNC: c_int = 1;
const UV_POLL: c_int = 8;
const UV_TIMER: c_int = 13;
/// `uv_poll_event` flags.
pub(crate) const READABLE: c_int = 1;
pub(crate) const WRITABLE: c_int = 2;

pub(crate) type PollCb = unsafe extern "C" fn(*mut Handle, c_int, c_int);
pub(crate) type TimerCb = unsafe extern "C" fn(*mut Handle);
pub(crate) type CloseCb = unsafe extern "C" fn(*mut Handle);
pub(crate) type AsyncCb = unsafe extern "C" fn(*mut Handle);

/// The libuv functions, resolved once per process.
pub(crate) struct Uv {
    handle_set_data: unsafe extern "C" fn(*mut Handle, *mut c_void),
    handle_get_data: unsafe extern "C" fn(*const Handle) -> *mut c_void,
    handle_get_type: unsafe extern "C" fn(*const Handle) -> c_int,
    poll_init_socket: unsafe extern "C" fn(*mut Loop, *mut Handle, OsSocket) -> c_int,
    poll_start: unsafe extern "C" fn(*mut Handle, c_int, PollCb) -> c_int,
    timer_init: unsafe extern "C" fn(*mut Loop, *mut Handle) -> c_int,
    timer_start: unsafe extern "C" fn(*mut Handle, TimerCb, u64, u64) -> c_int,
    timer_stop: unsafe extern "C" fn(*mut Handle) -> c_int,
    close: unsafe extern "C" fn(*mut Handle, CloseCb),
    async_init: unsafe extern "C" fn(*mut Loop, *mut Handle, AsyncCb) -> c_int,
    async_send: unsafe extern "C" fn(*mut Handle) -> c_int,
    uv_ref: unsafe extern "C" fn(*mut Handle),
    uv_unref: unsafe extern "C" fn(*mut Handle),
    /// The layouts of a `uv_poll_t`, a `uv_timer_t` and a `uv_async_t` on this platform.
    poll_layout: Layout,
    timer_layout: Layout,
    async_layout: Layout,
}

impl Uv {
    /// The host's libuv functions, or `None` when one of them is missing.
    pub(crate) fn get() -> Option<&'static Self> {
        static UV: OnceLock<Option<Uv>> = OnceLock::new();
        UV.get_or_init(resolve).as_ref()
    }

    /// A zeroed block for a handle of `layout`, owned by libuv until its close callback
    /// gives it to [`free_handle`](Self::free_handle).
    fn alloc(layout: Layout) -> *mut Handle {
        // SAFETY: the layout has a non-zero size (checked in `resolve`).
        unsafe { std::alloc::alloc_zeroed(layout).cast() }
    }

    /// A new poll handle on `socket` in `uv_loop` (its data null), or `None` (nothing
    /// allocated).
    pub(crate) fn new_poll(&self, uv_loop: *mut Loop, socket: OsSocket) -> Option<*mut Handle> {
        let handle = Self::alloc(self.poll_layout);
        if handle.is_null() {
            return None;
        }
        // SAFETY: `uv_loop` is the running thread's live loop (from N-API); the handle is a
        // zeroed block of uv_poll_t's size; `socket` is open while the handle lives.
        let status = unsafe { (self.poll_init_socket)(uv_loop, handle, socket) };
        if status != 0 {
            // Not initialized: libuv holds no reference to it.
            self.free(handle, self.poll_layout);
            return None;
        }
        Some(handle)
    }

    /// A new timer handle in `uv_loop` (its data null), or `None`.
    pub(crate) fn new_timer(&self, uv_loop: *mut Loop) -> Option<*mut Handle> {
        let handle = Self::alloc(self.timer_layout);
        if handle.is_null() {
            return None;
        }
        // SAFETY: as in `new_poll`.
        let status = unsafe { (self.timer_init)(uv_loop, handle) };
        if status != 0 {
            self.free(handle, self.timer_layout);
            return None;
        }
        Some(handle)
    }

    /// A new async handle in `uv_loop` (its data null) whose callback is `cb`, or `None`.
    pub(crate) fn new_async(&self, uv_loop: *mut Loop, cb: AsyncCb) -> Option<*mut Handle> {
        let handle = Self::alloc(self.async_layout);
        if handle.is_null() {
            return None;
        }
        // SAFETY: as in `new_poll`.
        let status = unsafe { (self.async_init)(uv_loop, handle, cb) };
        if status != 0 {
            self.free(handle, self.async_layout);
            return None;
        }
        Some(handle)
    }

    /// Wakes the loop of an async handle, which then runs its callback (once for any number of
    /// sends before it runs). The one libuv call made from another thread (the guard's).
    pub(crate) fn async_send(&self, handle: *mut Handle) {
        // SAFETY: `handle` is an initialized async handle not yet closed (its owner joins the
        // only other thread that sends before closing it); `uv_async_send` is thread-safe.
        unsafe {
            (self.async_send)(handle);
        }
    }

    /// Sets a handle's `data`, which its callbacks read.
    pub(crate) fn set_handle_data(&self, handle: *mut Handle, data: *mut c_void) {
        // SAFETY: `handle` is an initialized handle.
        unsafe { (self.handle_set_data)(handle, data) }
    }

    /// The `data` of an initialized handle.
    pub(crate) fn data(&self, handle: *const Handle) -> *mut c_void {
        // SAFETY: callers pass a handle that libuv passed to a callback, or one they own.
        unsafe { (self.handle_get_data)(handle) }
    }

    fn free(&self, handle: *mut Handle, layout: Layout) {
        // SAFETY: `handle` came from `alloc` with this layout and libuv no longer uses it.
        unsafe { std::alloc::dealloc(handle.cast(), layout) }
    }

    /// Frees a handle's block, from its close callback (libuv is done with it).
    pub(crate) fn free_handle(&self, handle: *mut Handle) {
        // SAFETY: `handle` is a handle libuv passed to its close callback, still readable.
        let kind = unsafe { (self.handle_get_type)(handle) };
        let layout = match kind {
            UV_POLL => self.poll_layout,
            UV_ASYNC => self.async_layout,
            _ => self.timer_layout,
        };
        self.free(handle, layout);
    }

    /// Starts (or changes) what a poll handle waits for.
    pub(crate) fn poll_start(&self, handle: *mut Handle, events: c_int, cb: PollCb) -> bool {
        // SAFETY: `handle` is an initialized, unclosed poll handle.
        unsafe { (self.poll_start)(handle, events, cb) == 0 }
    }

    /// Starts (or moves) a timer `ms` milliseconds from the loop's time.
    pub(crate) fn timer_start(&self, handle: *mut Handle, cb: TimerCb, ms: u64) {
        // SAFETY: `handle` is an initialized, unclosed timer handle.
        unsafe {
            (self.timer_start)(handle, cb, ms, 0);
        }
    }

    /// Stops a timer.
    pub(crate) fn timer_stop(&self, handle: *mut Handle) {
        // SAFETY: as in `timer_start`.
        unsafe {
            (self.timer_stop)(handle);
        }
    }

    /// Closes a handle; `cb` runs on a later turn of the loop, when its block may be freed.
    pub(crate) fn close(&self, handle: *mut Handle, cb: CloseCb) {
        // SAFETY: `handle` is an initialized handle not closed before.
        unsafe { (self.close)(handle, cb) }
    }

    /// `uv_ref` (`true`) or `uv_unref` a handle: whether it keeps the loop, and so the
    /// process, alive.
    pub(crate) fn set_ref(&self, handle: *mut Handle, on: bool) {
        // SAFETY: `handle` is an initialized, unclosed handle.
        unsafe {
            if on {
                (self.uv_ref)(handle);
            } else {
                (self.uv_unref)(handle);
            }
        }
    }
}

/// The running process, to look symbols up in.
#[cfg(unix)]
fn this() -> Option<libloading::Library> {
    Some(libloading::os::unix::Library::this().into())
}

#[cfg(windows)]
fn this() -> Option<libloading::Library> {
    libloading::os::windows::Library::this()
        .ok()
        .map(Into::into)
}

/// Looks one function up in the process.
fn symbol<T: Copy>(lib: &libloading::Library, name: &[u8]) -> Option<T> {
    // SAFETY: every `T` asked for below is the C signature of the libuv function of that
    // name (libuv 1.x's public API, which Node has carried since 0.12); the pointer stays
    // valid for the process's life, as the library is never unloaded (it is the host).
    unsafe { lib.get::<T>(name).ok().map(|f| *f) }
}

fn resolve() -> Option<Uv> {
    let lib = this()?;
    let handle_size: unsafe extern "C" fn(c_int) -> usize = symbol(&lib, b"uv_handle_size\0")?;
    // SAFETY: `uv_handle_size` takes a handle type and returns its size, with no other effect.
    let (poll, timer, wake) = unsafe {
        (
            handle_size(UV_POLL),
            handle_size(UV_TIMER),
            handle_size(UV_ASYNC),
        )
    };
    if poll == 0 || timer == 0 || wake == 0 {
        return None;
    }
    let layout = |size| Layout::from_size_align(size, 16).ok();
    let uv = Uv {
        handle_set_data: symbol(&lib, b"uv_handle_set_data\0")?,
        handle_get_data: symbol(&lib, b"uv_handle_get_data\0")?,
        handle_get_type: symbol(&lib, b"uv_handle_get_type\0")?,
        poll_init_socket: symbol(&lib, b"uv_poll_init_socket\0")?,
        poll_start: symbol(&lib, b"uv_poll_start\0")?,
        timer_init: symbol(&lib, b"uv_timer_init\0")?,
        timer_start: symbol(&lib, b"uv_timer_start\0")?,
        timer_stop: symbol(&lib, b"uv_timer_stop\0")?,
        close: symbol(&lib, b"uv_close\0")?,
        async_init: symbol(&lib, b"uv_async_init\0")?,
        async_send: symbol(&lib, b"uv_async_send\0")?,
        uv_ref: symbol(&lib, b"uv_ref\0")?,
        uv_unref: symbol(&lib, b"uv_unref\0")?,
        poll_layout: layout(poll)?,
        timer_layout: layout(timer)?,
        async_layout: layout(wake)?,
    };
    // The functions live as long as the process: the handle on it is never closed.
    std::mem::forget(lib);
    Some(uv)
}
