//! Lengths are checked against their limits before any byte is read: a length that underflowed
//! in C (`n - header`) or one above `isize::MAX` is an error status, never a slice of memory the
//! caller does not own (undefined behaviour), an 18 EB allocation, or an abort.
//!
//! Each case here crashed this test binary before the checks existed; they live in their own
//! binary so such a crash cannot hide the results of the other tests.

use std::ptr;

use soe_ffi::*;

mod support;
use support::{Config, addr, last_error};

/// A client endpoint with one session (the handshake is not needed: sends are queued).
fn client() -> (*mut soe_endpoint, soe_session) {
    let mut ep = ptr::null_mut();
    assert_eq!(
        soe_endpoint_new(Config::new(SOE_ROLE_CLIENT).ptr(), 0, &mut ep),
        soe_status::SOE_OK
    );
    let mut session = 0;
    assert_eq!(
        soe_connect(ep, 0, &addr(1, 20_042), &mut session),
        soe_status::SOE_OK
    );
    (ep, session)
}

/// Lengths no caller buffer can have: an underflowed `n - 4`, `isize::MAX + 1`, and the
/// largest `size_t`.
const HUGE: [usize; 3] = [0usize.wrapping_sub(4), isize::MAX as usize + 1, usize::MAX];

#[test]
fn a_huge_reliable_message_length_is_too_large_before_a_byte_is_read() {
    let (ep, s) = client();
    let data = [1u8; 16];
    for len in HUGE.into_iter().chain([4_194_305]) {
        assert_eq!(
            soe_send(ep, s, 0, data.as_ptr(), len),
            soe_status::SOE_ERR_MESSAGE_TOO_LARGE,
            "{len}"
        );
        let e = last_error();
        assert!(
            e.contains(&len.to_string()) && e.contains("max_message_size"),
            "{e}"
        );
    }
    // The session is untouched: a real message still goes.
    assert_eq!(soe_send(ep, s, 0, data.as_ptr(), 16), soe_status::SOE_OK);
    soe_endpoint_free(ep);
}

#[test]
fn a_huge_unreliable_or_ordered_length_is_too_large_before_a_byte_is_read() {
    let (ep, s) = client();
    let data = [1u8; 16];
    for len in HUGE.into_iter().chain([65_536]) {
        assert_eq!(
            soe_send_unreliable(ep, s, data.as_ptr(), len),
            soe_status::SOE_ERR_MESSAGE_TOO_LARGE,
            "{len}"
        );
        assert!(last_error().contains(&len.to_string()), "{}", last_error());
        assert_eq!(
            soe_send_ordered(ep, s, data.as_ptr(), len),
            soe_status::SOE_ERR_MESSAGE_TOO_LARGE,
            "{len}"
        );
    }
    soe_endpoint_free(ep);
}

#[test]
fn a_huge_datagram_length_is_an_invalid_argument_before_a_byte_is_read() {
    let mut ep = ptr::null_mut();
    assert_eq!(
        soe_endpoint_new(Config::new(SOE_ROLE_SERVER).ptr(), 0, &mut ep),
        soe_status::SOE_OK
    );
    let data = [0u8, 1, 0, 0, 0, 3];
    for len in HUGE.into_iter().chain([65_536]) {
        assert_eq!(
            soe_endpoint_handle_datagram(ep, 0, &addr(2, 4000), data.as_ptr(), len),
            soe_status::SOE_ERR_INVALID_ARGUMENT,
            "{len}"
        );
        let e = last_error();
        assert!(e.contains(&len.to_string()) && e.contains("65535"), "{e}");
    }
    // The largest UDP payload is still taken (and dropped inside as malformed: not an error).
    let big = vec![0u8; 65_535];
    assert_eq!(
        soe_endpoint_handle_datagram(ep, 0, &addr(2, 4000), big.as_ptr(), big.len()),
        soe_status::SOE_OK
    );
    soe_endpoint_free(ep);
}

#[test]
fn a_huge_rc4_key_length_is_an_invalid_config_before_a_byte_is_read() {
    let key = [9u8; 4];
    for len in HUGE.into_iter().chain([257]) {
        let c = Config::new(SOE_ROLE_SERVER);
        assert_eq!(
            soe_config_set_rc4_key(c.ptr(), key.as_ptr(), len),
            soe_status::SOE_ERR_INVALID_CONFIG,
            "{len}"
        );
        let e = last_error();
        assert!(
            e.contains("rc4_key_len") && e.contains(&len.to_string()),
            "{e}"
        );
    }
}

#[test]
fn an_unterminated_protocol_name_is_read_no_further_than_its_limit() {
    // 300 bytes without a NUL: the library stops at its 255-byte limit instead of running on.
    let name = [b'a'; 300];
    let c = Config::new(SOE_ROLE_SERVER);
    assert_eq!(
        soe_config_set_application_protocol(c.ptr(), name.as_ptr().cast()),
        soe_status::SOE_ERR_INVALID_CONFIG
    );
    assert!(
        last_error().contains("application_protocol"),
        "{}",
        last_error()
    );
}
