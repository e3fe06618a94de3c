//! Every `unsafe` operation of the crate: turning the raw pointers and lengths a C caller passes
//! into references and slices, and back. Each function states the contract that `soe.h`
//! documents for its pointers. A null pointer is never dereferenced: it is an error, or an empty
//! slice when its length is 0. Nothing else in the crate may use `unsafe` (the crate denies it;
//! this module alone allows it).
#![allow(unsafe_code)]

use std::ffi::{CStr, c_char};

use crate::error::Error;

/// The `len` bytes at `ptr`, read-only for the call. Callers check `len` against its own limit
/// first (a message's, a datagram's, a key's); this is the last guard, for what a slice can
/// never be: longer than `isize::MAX`, or running past the end of the address space.
#[inline]
pub(crate) fn bytes<'a>(ptr: *const u8, len: usize, what: &'static str) -> Result<&'a [u8], Error> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Error::null(what));
    }
    if len > isize::MAX as usize || (ptr as usize).checked_add(len).is_none() {
        return Err(Error::invalid(format!(
            "`{what}`: a length of {len} bytes cannot describe a buffer"
        )));
    }
    // SAFETY: soe.h requires a non-null data pointer to point to `len` readable bytes that the
    // caller does not change during the call; they are only read, and not kept past it. `len`
    // is at most isize::MAX and the range does not wrap, as `from_raw_parts` requires.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Copies `data` into the caller's buffer of `cap` bytes at `ptr` (the caller checked that it
/// fits; a shorter buffer is an error here too, never an overflow).
#[inline]
pub(crate) fn copy_to(
    ptr: *mut u8,
    cap: usize,
    data: &[u8],
    what: &'static str,
) -> Result<(), Error> {
    if data.len() > cap {
        return Err(Error::too_small(what, data.len()));
    }
    if data.is_empty() {
        return Ok(());
    }
    if ptr.is_null() {
        return Err(Error::null(what));
    }
    // SAFETY: soe.h requires a non-null buffer pointer to point to `cap` writable bytes that
    // nothing else accesses during the call, and `data.len() <= cap`. Only bytes are written (no
    // reference to the possibly uninitialised buffer is made), and `data` is memory of this
    // crate, so the two do not overlap.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), ptr, data.len()) };
    Ok(())
}

/// The `T` at `ptr`, read-only for the call.
#[inline]
pub(crate) fn reference<'a, T>(ptr: *const T, what: &'static str) -> Result<&'a T, Error> {
    if ptr.is_null() {
        return Err(Error::null(what));
    }
    // SAFETY: soe.h requires a non-null struct pointer to point to an initialised, aligned `T`
    // (a struct declared in soe.h, or one of its fields' types) for the call; it is only read.
    Ok(unsafe { &*ptr })
}

/// Writes `value` to the out-parameter at `ptr`.
#[inline]
pub(crate) fn write<T>(ptr: *mut T, value: T, what: &'static str) -> Result<(), Error> {
    if ptr.is_null() {
        return Err(Error::null(what));
    }
    // SAFETY: soe.h requires a non-null out-pointer to point to writable, aligned storage for a
    // `T`. `write` does not read or drop the old content, which may be uninitialised; every `T`
    // written here is a plain C struct or integer without a destructor.
    unsafe { ptr.write(value) };
    Ok(())
}

/// The NUL-terminated string at `ptr`, or `None` for a null pointer; `Err` when no NUL comes
/// within its first `max + 1` bytes, which are then all that was read.
pub(crate) fn c_str<'a>(ptr: *const c_char, max: usize) -> Result<Option<&'a CStr>, ()> {
    if ptr.is_null() {
        return Ok(None);
    }
    let bytes = ptr.cast::<u8>();
    for len in 0..=max {
        // SAFETY: soe.h requires a non-null string pointer to point to a NUL-terminated string
        // that stays unchanged during the call. Bytes are read one at a time, up to and
        // including the NUL, so none past the string is read (a string with no NUL, against the
        // contract, is read no further than `max + 1` bytes).
        if unsafe { bytes.add(len).read() } == 0 {
            // SAFETY: the `len + 1` bytes up to and including the NUL were just read: they are
            // the caller's string, unchanged during the call; the string is copied before the
            // call returns.
            let with_nul = unsafe { std::slice::from_raw_parts(bytes, len + 1) };
            return Ok(CStr::from_bytes_with_nul(with_nul).ok());
        }
    }
    Err(())
}

/// Gives the endpoint to the caller as an opaque pointer.
pub(crate) fn into_handle<T>(value: Box<T>) -> *mut T {
    Box::into_raw(value)
}

/// The endpoint behind a handle from [`into_handle`], for the call.
#[inline]
pub(crate) fn handle<'a, T>(ptr: *mut T) -> Result<&'a mut T, Error> {
    if ptr.is_null() {
        return Err(Error::null("endpoint"));
    }
    // SAFETY: soe.h requires a non-null endpoint pointer to be one that soe_endpoint_new
    // returned and soe_endpoint_free has not freed, used by one thread at a time. So it points to
    // a live, aligned `T` from `Box::into_raw`, and no other reference to it exists during the
    // call.
    Ok(unsafe { &mut *ptr })
}

/// Takes back and drops a handle from [`into_handle`]; a null pointer is ignored.
pub(crate) fn free_handle<T>(ptr: *mut T) {
    if ptr.is_null() {
        return;
    }
    // SAFETY: soe.h requires the pointer to come from soe_endpoint_new and not to have been freed
    // before, nor to be used after: the Box is rebuilt and dropped exactly once.
    drop(unsafe { Box::from_raw(ptr) });
}
