//! Lines on stdout that end a command quietly when its reader goes away, as Unix tools do
//! (`soe ping ADDR | head -3`): `println!` would panic on the broken pipe.
//!
//! The first write that fails marks stdout gone; later lines are dropped, and the commands
//! that print as they go (`ping`, `serve`) stop at their next step, close their sessions, and
//! exit with [`GONE_EXIT`].

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether a write to stdout failed (its reader went away).
static GONE: AtomicBool = AtomicBool::new(false);

/// The exit status once stdout is gone: 128 + SIGPIPE, what a shell reports for a tool that a
/// broken pipe ended.
pub(crate) const GONE_EXIT: u8 = 141;

/// Writes one line to stdout; a failed write marks stdout [`gone`] and drops this line and
/// every later one.
pub(crate) fn line(args: std::fmt::Arguments<'_>) {
    if gone() {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    let written = stdout
        .write_fmt(args)
        .and_then(|()| stdout.write_all(b"\n"))
        .and_then(|()| stdout.flush());
    if written.is_err() {
        GONE.store(true, Ordering::Relaxed);
    }
}

/// Whether stdout is gone.
pub(crate) fn gone() -> bool {
    GONE.load(Ordering::Relaxed)
}

/// `println!` that never panics: see [`line()`].
macro_rules! say {
    () => {
        $crate::out::line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::out::line(format_args!($($arg)*))
    };
}
pub(crate) use say;
