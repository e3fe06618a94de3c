//! The C ABI called while a thread's thread-locals are being destroyed, as a C host does from a
//! thread-local destructor (or, on the main thread, from an `atexit` handler: see
//! tests/c/teardown.c, which `cargo xtask c-abi` runs under valgrind).
//!
//! Before the fix, the library's last-error slot was a thread-local with a destructor: a call
//! after its destruction panicked in a function that cannot unwind, and the process aborted.

use std::cell::Cell;
use std::ptr;
use std::sync::Mutex;

use soe_ffi::*;

mod support;
use support::{Config, addr, last_error};

/// What each destructor saw, for the test thread to check after the join.
static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn config(role: u32) -> Config {
    // Compression on: framing's shared zlib state is a thread-local too.
    Config::new(role).set(SOE_OPT_COMPRESSION, 1)
}

/// A whole session through the ABI: create, handshake, a compressible message each way, an
/// error and its message, a close, free. Returns what went wrong, if anything.
fn exercise(label: &str) -> Result<(), String> {
    let check = |what: &str, got: soe_status, want: soe_status| {
        if got == want {
            Ok(())
        } else {
            Err(format!(
                "{label}: {what} returned {got:?}, expected {want:?}"
            ))
        }
    };
    let (mut server, mut client) = (ptr::null_mut(), ptr::null_mut());
    let mut now = 1_000_000;
    check(
        "soe_endpoint_new",
        soe_endpoint_new(config(SOE_ROLE_SERVER).ptr(), now, &mut server),
        soe_status::SOE_OK,
    )?;
    check(
        "soe_endpoint_new",
        soe_endpoint_new(config(SOE_ROLE_CLIENT).ptr(), now, &mut client),
        soe_status::SOE_OK,
    )?;
    let (s_addr, c_addr) = (addr(1, 20_042), addr(2, 40_000));
    let mut session = 0;
    check(
        "soe_connect",
        soe_connect(client, now, &s_addr, &mut session),
        soe_status::SOE_OK,
    )?;
    let message = vec![b'z'; 400];
    let mut buf = vec![0u8; 2048];
    let mut got = 0;
    for round in 0..20 {
        now += 10_000;
        if round == 3 {
            check(
                "soe_send",
                soe_send(client, session, 0, message.as_ptr(), message.len()),
                soe_status::SOE_OK,
            )?;
        }
        for (from, to, source) in [(client, server, c_addr), (server, client, s_addr)] {
            soe_endpoint_handle_timeout(from, now);
            let (mut len, mut dest) = (0, addr(0, 0));
            while soe_endpoint_poll_transmit(
                from,
                now,
                buf.as_mut_ptr(),
                buf.len(),
                &mut len,
                &mut dest,
            ) == soe_status::SOE_OK
            {
                soe_endpoint_handle_datagram(to, now, &source, buf.as_ptr(), len);
            }
        }
        let mut ev = soe_event {
            kind: soe_event_kind::SOE_EVENT_ACCEPTED,
            session: 0,
            channel: 0,
            delivery: soe_delivery::SOE_DELIVERY_RELIABLE,
            len: 0,
            reason: 0,
            by_peer: 0,
            user: ptr::null_mut(),
        };
        while soe_endpoint_poll_event(server, &mut ev, buf.as_mut_ptr(), buf.len())
            == soe_status::SOE_OK
        {
            if ev.kind == soe_event_kind::SOE_EVENT_MESSAGE && buf[..ev.len] == message[..] {
                got += 1;
            }
        }
        while soe_endpoint_poll_event(client, &mut ev, buf.as_mut_ptr(), buf.len())
            == soe_status::SOE_OK
        {}
    }
    if got != 1 {
        return Err(format!("{label}: the message arrived {got} times"));
    }
    check(
        "soe_send (channel 9)",
        soe_send(client, session, 9, message.as_ptr(), 1),
        soe_status::SOE_ERR_INVALID_ARGUMENT,
    )?;
    let e = last_error();
    if e.is_empty() {
        return Err(format!("{label}: soe_last_error() is empty after an error"));
    }
    check(
        "soe_close",
        soe_close(client, now, session, SOE_REASON_APPLICATION),
        soe_status::SOE_OK,
    )?;
    soe_endpoint_free(client);
    soe_endpoint_free(server);
    Ok(())
}

/// Calls the ABI from its destructor.
struct CallsInDrop(&'static str);

impl Drop for CallsInDrop {
    fn drop(&mut self) {
        let outcome = exercise(self.0).map(|()| format!("{}: ok", self.0));
        SEEN.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(outcome.unwrap_or_else(|e| e));
    }
}

thread_local! {
    static FIRST: Cell<Option<CallsInDrop>> = const { Cell::new(None) };
    static LAST: Cell<Option<CallsInDrop>> = const { Cell::new(None) };
}

#[test]
fn the_abi_works_from_thread_local_destructors() {
    std::thread::spawn(|| {
        // One destructor registered before the library's thread-locals exist and one after,
        // so that one of them runs after the library's are gone, whichever order the platform
        // destroys them in.
        FIRST.set(Some(CallsInDrop(
            "registered before the library's thread-locals",
        )));
        exercise("while the thread runs").expect("the ABI works on a live thread");
        LAST.set(Some(CallsInDrop(
            "registered after the library's thread-locals",
        )));
    })
    .join()
    .expect("the thread exits cleanly (no panic, no abort)");
    let mut seen = SEEN.lock().unwrap().clone();
    seen.sort();
    assert_eq!(
        seen,
        [
            "registered after the library's thread-locals: ok",
            "registered before the library's thread-locals: ok",
        ]
    );
}
