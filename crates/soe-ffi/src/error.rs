//! Status codes, the thread's last error message, and the panic boundary.

use std::cell::Cell;
use std::ffi::{CStr, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// What every function returns. Zero and positive values are outcomes; negative values are
/// errors, explained by `soe_last_error()`.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub enum soe_status {
    /// Done.
    SOE_OK = 0,
    /// Nothing to take: no datagram to send, no event, no deadline. Not an error.
    SOE_DONE = 1,
    /// A required pointer was NULL.
    SOE_ERR_NULL = -1,
    /// An argument is out of range: a channel above 3, an address family other than 4 or 6, a
    /// datagram longer than 65535 bytes, a close reason above 16, `on` above 1, encryption
    /// switched for a session without a key, or a data pointer and length that run past the
    /// end of the address space.
    SOE_ERR_INVALID_ARGUMENT = -2,
    /// The configuration is invalid; the message names the field.
    SOE_ERR_INVALID_CONFIG = -3,
    /// The caller's buffer is too small. The size needed was written to the length
    /// out-parameter, and the datagram or event is kept for the next call.
    SOE_ERR_BUFFER_TOO_SMALL = -4,
    /// The session handle names no session: it was never issued, or its session closed (its
    /// `SOE_EVENT_CLOSED` was taken). Handles are never reused.
    SOE_ERR_STALE_SESSION = -5,
    /// The message is longer than the limit (`max_message_size` for reliable data, one
    /// datagram for unreliable and ordered data), or an unreliable message is empty or starts
    /// with byte 0.
    SOE_ERR_MESSAGE_TOO_LARGE = -6,
    /// The session's send queue is full: take events, send datagrams, and try again (like
    /// `EAGAIN`). `soe_send_capacity` tells when there is room.
    SOE_ERR_QUEUE_FULL = -7,
    /// The session is closing and takes no more messages.
    SOE_ERR_CLOSED = -8,
    /// A session could not be started: one with that address exists, or the endpoint holds
    /// `max_sessions`.
    SOE_ERR_CONNECT = -9,
    /// A bug in this library: a Rust panic was caught at the boundary. The endpoint is
    /// poisoned; free it.
    SOE_ERR_PANIC = -10,
    /// The endpoint panicked in an earlier call and refuses every call but
    /// `soe_endpoint_free`.
    SOE_ERR_POISONED = -11,
    /// `soe_config_set` or `soe_config_get` named an option this library does not know: one
    /// from a newer header than the library loaded. The config is unchanged.
    SOE_ERR_UNKNOWN_OPTION = -12,
    /// The operating system's random generator failed, so no endpoint was made: its secret and
    /// session ids must be what no peer can predict, and nothing weaker is used instead. The
    /// message gives the system's error.
    SOE_ERR_RANDOM = -13,
}

impl soe_status {
    /// The constant's name.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Self::SOE_OK => "SOE_OK\0",
            Self::SOE_DONE => "SOE_DONE\0",
            Self::SOE_ERR_NULL => "SOE_ERR_NULL\0",
            Self::SOE_ERR_INVALID_ARGUMENT => "SOE_ERR_INVALID_ARGUMENT\0",
            Self::SOE_ERR_INVALID_CONFIG => "SOE_ERR_INVALID_CONFIG\0",
            Self::SOE_ERR_BUFFER_TOO_SMALL => "SOE_ERR_BUFFER_TOO_SMALL\0",
            Self::SOE_ERR_STALE_SESSION => "SOE_ERR_STALE_SESSION\0",
            Self::SOE_ERR_MESSAGE_TOO_LARGE => "SOE_ERR_MESSAGE_TOO_LARGE\0",
            Self::SOE_ERR_QUEUE_FULL => "SOE_ERR_QUEUE_FULL\0",
            Self::SOE_ERR_CLOSED => "SOE_ERR_CLOSED\0",
            Self::SOE_ERR_CONNECT => "SOE_ERR_CONNECT\0",
            Self::SOE_ERR_PANIC => "SOE_ERR_PANIC\0",
            Self::SOE_ERR_POISONED => "SOE_ERR_POISONED\0",
            Self::SOE_ERR_UNKNOWN_OPTION => "SOE_ERR_UNKNOWN_OPTION\0",
            Self::SOE_ERR_RANDOM => "SOE_ERR_RANDOM\0",
        }
    }
}

/// An error: its status and its explanation. The constructors are cold and out of line, so
/// the checks on the hot path compile to a compare and a branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Error {
    pub(crate) status: soe_status,
    pub(crate) message: String,
}

impl Error {
    #[cold]
    #[inline(never)]
    pub(crate) fn new(status: soe_status, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }

    #[cold]
    #[inline(never)]
    pub(crate) fn null(what: &str) -> Self {
        Self::new(soe_status::SOE_ERR_NULL, format!("`{what}` is NULL"))
    }

    #[cold]
    #[inline(never)]
    pub(crate) fn too_small(what: &str, needed: usize) -> Self {
        Self::new(
            soe_status::SOE_ERR_BUFFER_TOO_SMALL,
            format!("`{what}` is too small: {needed} bytes are needed"),
        )
    }

    #[cold]
    #[inline(never)]
    pub(crate) fn invalid(what: impl std::fmt::Display) -> Self {
        Self::new(soe_status::SOE_ERR_INVALID_ARGUMENT, what.to_string())
    }

    #[cold]
    #[inline(never)]
    pub(crate) fn config(what: impl std::fmt::Display) -> Self {
        Self::new(soe_status::SOE_ERR_INVALID_CONFIG, what.to_string())
    }
}

/// Room for one message, its NUL included; a longer message is cut at a character boundary.
const LAST_ERROR_CAPACITY: usize = 512;

thread_local! {
    /// The explanation of this thread's latest error, NUL-terminated; empty after a success.
    ///
    /// A fixed array, not a heap string: it has no destructor, so it is never "destroyed" while
    /// the thread tears down, and a host may call in from an `atexit` handler, a thread-local
    /// destructor or a pthread-key destructor (all of which run after Rust's thread-locals with
    /// destructors are gone). Every access still goes through `try_with`, so a platform that
    /// does destroy it cannot make an access panic. A `const` initialiser (no lazy-init check)
    /// and `Cell`s (no borrow flag): clearing it after a success is one byte written.
    static LAST_ERROR: [Cell<u8>; LAST_ERROR_CAPACITY] =
        const { [const { Cell::new(0) }; LAST_ERROR_CAPACITY] };
}

/// What `soe_last_error` returns when this thread's slot cannot be reached (a platform that
/// destroys it at thread exit); static.
const NO_SLOT: &CStr = c"(no message: this thread's last-error slot is gone, as the thread exits)";

/// Records `message` as this thread's last error (cut to fit, interior NULs made spaces);
/// nothing when the slot cannot be reached.
fn set_last_error(message: &str) {
    let _ = LAST_ERROR.try_with(|slot| {
        let mut end = message.len().min(LAST_ERROR_CAPACITY - 1);
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        let text = message.as_bytes().get(..end).unwrap_or_default();
        for (to, &from) in slot.iter().zip(text) {
            to.set(if from == 0 { b' ' } else { from });
        }
        if let Some(nul) = slot.get(text.len()) {
            nul.set(0);
        }
    });
}

/// Empties this thread's last error message: one byte written (the hot path).
#[inline]
fn clear_last_error() {
    let _ = LAST_ERROR.try_with(|slot| slot[0].set(0));
}

/// A pointer to this thread's last error message (empty after a success), valid until the
/// thread's next call into the library; a static explanation when the slot cannot be reached.
pub(crate) fn last_error_ptr() -> *const c_char {
    LAST_ERROR
        .try_with(|slot| Cell::as_ptr(&slot[0]).cast::<c_char>().cast_const())
        .unwrap_or(NO_SLOT.as_ptr())
}

/// Runs `body` at the boundary: its error becomes the status and this thread's last error
/// message (a success clears it), and a panic becomes `SOE_ERR_PANIC` instead of unwinding into
/// C (which would abort the host). `on_panic` runs after a caught panic (to poison an
/// endpoint).
///
/// Nothing here can unwind past the caller: recording the outcome runs inside the same
/// `catch_unwind` as `body`, and what runs after a caught panic (the hook, the message, dropping
/// the panic's payload, whose `Drop` could itself panic) runs under `catch_unwind` again.
#[inline]
pub(crate) fn boundary(
    body: impl FnOnce() -> Result<soe_status, Error>,
    on_panic: impl FnOnce(),
) -> soe_status {
    let outcome = catch_unwind(AssertUnwindSafe(|| match body() {
        Ok(status) => {
            clear_last_error();
            status
        }
        Err(error) => {
            set_last_error(&error.message);
            error.status
        }
    }));
    match outcome {
        Ok(status) => status,
        Err(panic) => {
            let after = catch_unwind(AssertUnwindSafe(|| {
                on_panic();
                let what = panic
                    .downcast_ref::<&str>()
                    .copied()
                    .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                    .unwrap_or_default();
                set_last_error(&format!(
                    "internal error (a bug in soe-ffi; please report it): {what}"
                ));
            }));
            forget_if_it_panics(move || drop(panic));
            forget_if_it_panics(move || drop(after));
            soe_status::SOE_ERR_PANIC
        }
    }
}

/// Runs `f` (a drop); should it panic, the new panic's payload is leaked rather than dropped,
/// as its drop could panic too.
fn forget_if_it_panics(f: impl FnOnce()) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(f)) {
        std::mem::forget(payload);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last() -> String {
        LAST_ERROR.with(|e| {
            let bytes: Vec<u8> = e.iter().map(Cell::get).collect();
            let text = CStr::from_bytes_until_nul(&bytes).expect("NUL-terminated");
            text.to_string_lossy().into_owned()
        })
    }

    #[test]
    fn a_panic_becomes_a_status_and_runs_the_poisoning_hook() {
        let mut poisoned = false;
        let status = boundary(|| panic!("planted"), || poisoned = true);
        assert_eq!(status, soe_status::SOE_ERR_PANIC);
        assert!(poisoned);
        assert!(last().contains("planted"), "{}", last());
    }

    #[test]
    fn errors_set_the_message_and_success_clears_it() {
        let status = boundary(|| Err(Error::null("data")), || {});
        assert_eq!(status, soe_status::SOE_ERR_NULL);
        assert_eq!(last(), "`data` is NULL");
        assert_eq!(
            boundary(|| Ok(soe_status::SOE_DONE), || {}),
            soe_status::SOE_DONE
        );
        assert_eq!(last(), "");
    }

    #[test]
    fn every_status_has_a_nul_terminated_name() {
        for s in [
            soe_status::SOE_OK,
            soe_status::SOE_DONE,
            soe_status::SOE_ERR_NULL,
            soe_status::SOE_ERR_POISONED,
        ] {
            let name = CStr::from_bytes_with_nul(s.name().as_bytes()).unwrap();
            assert!(name.to_str().unwrap().starts_with("SOE_"));
        }
    }

    #[test]
    fn a_long_message_is_cut_at_a_character_boundary_and_nuls_become_spaces() {
        let long = "é".repeat(LAST_ERROR_CAPACITY);
        let _ = boundary(|| Err(Error::invalid(&long)), || {});
        let got = last();
        assert!(got.len() < LAST_ERROR_CAPACITY && got.len() >= LAST_ERROR_CAPACITY - 2);
        assert!(got.chars().all(|c| c == 'é'), "{got}");
        let _ = boundary(|| Err(Error::invalid("a\0b")), || {});
        assert_eq!(last(), "a b");
    }

    #[test]
    fn a_panic_whose_payload_panics_when_dropped_still_becomes_a_status() {
        struct Bomb;
        impl Drop for Bomb {
            fn drop(&mut self) {
                panic!("the payload's drop panicked");
            }
        }
        let status = boundary(|| std::panic::panic_any(Bomb), || {});
        assert_eq!(status, soe_status::SOE_ERR_PANIC);
        assert!(last().starts_with("internal error"), "{}", last());
    }
}
