//! Helpers the soe-ffi test binaries share (each binary uses some of them).
#![allow(dead_code)]

use std::ffi::CStr;

use soe_ffi::*;

/// `127.0.0.last:port` as the C ABI's address.
pub(crate) fn addr(last: u8, port: u16) -> soe_addr {
    std::net::SocketAddr::from(([127, 0, 0, last], port)).into()
}

/// Reads a NUL-terminated string the library returned (static, or valid until the next call).
#[allow(unsafe_code)]
pub(crate) fn cstr(p: *const std::ffi::c_char) -> String {
    assert!(!p.is_null());
    // SAFETY: the library returns NUL-terminated strings, valid until this thread's next call.
    unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_owned()
}

/// This thread's last error message.
pub(crate) fn last_error() -> String {
    cstr(soe_last_error())
}

/// `soe_config_init` for `role`, checked to return `SOE_OK`.
#[allow(unsafe_code)]
pub(crate) fn config_init(role: u32) -> soe_config {
    let mut c = std::mem::MaybeUninit::<soe_config>::zeroed();
    assert_eq!(soe_config_init(c.as_mut_ptr(), role), soe_status::SOE_OK);
    // SAFETY: soe_config_init returned SOE_OK, so it wrote a whole soe_config.
    unsafe { c.assume_init() }
}
