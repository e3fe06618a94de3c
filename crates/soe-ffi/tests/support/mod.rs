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

/// A config made by `soe_config_new`, freed on drop; each setter is checked to return
/// `SOE_OK`.
pub(crate) struct Config(*mut soe_config);

impl Config {
    pub(crate) fn new(role: u32) -> Self {
        let mut c = std::ptr::null_mut();
        assert_eq!(soe_config_new(role, &mut c), soe_status::SOE_OK);
        assert!(!c.is_null());
        Self(c)
    }

    pub(crate) fn set(self, option: soe_option, value: i64) -> Self {
        let s = soe_config_set(self.0, option, value);
        assert_eq!(s, soe_status::SOE_OK, "{option}: {}", last_error());
        self
    }

    pub(crate) fn protocol(self, name: &CStr) -> Self {
        let s = soe_config_set_application_protocol(self.0, name.as_ptr());
        assert_eq!(s, soe_status::SOE_OK, "{}", last_error());
        self
    }

    pub(crate) fn key(self, key: &[u8]) -> Self {
        let s = soe_config_set_rc4_key(self.0, key.as_ptr(), key.len());
        assert_eq!(s, soe_status::SOE_OK, "{}", last_error());
        self
    }

    pub(crate) fn ptr(&self) -> *mut soe_config {
        self.0
    }

    pub(crate) fn get(&self, option: soe_option) -> i64 {
        let mut v = 0;
        assert_eq!(soe_config_get(self.0, option, &mut v), soe_status::SOE_OK);
        v
    }
}

impl Drop for Config {
    fn drop(&mut self) {
        soe_config_free(self.0);
    }
}

/// An endpoint from `config`, checked to be created.
pub(crate) fn endpoint(config: &Config, now: u64) -> *mut soe_endpoint {
    let mut ep = std::ptr::null_mut();
    let s = soe_endpoint_new(config.ptr(), now, &mut ep);
    assert_eq!(s, soe_status::SOE_OK, "{}", last_error());
    ep
}

/// An event to write into.
pub(crate) fn empty_event() -> soe_event {
    soe_event {
        kind: soe_event_kind::SOE_EVENT_ACCEPTED,
        session: 0,
        channel: 0,
        delivery: soe_delivery::SOE_DELIVERY_RELIABLE,
        len: 0,
        reason: 0,
        by_peer: 0,
        user: std::ptr::null_mut(),
    }
}
