//! The endpoint's settings behind an opaque handle (`soe_config`), set one option at a time, the
//! way zstd (`ZSTD_CCtx_setParameter`) and libcurl (`curl_easy_setopt`) keep their ABI: a new
//! option is a new number, never a new struct layout, and an option the loaded library does not
//! know is a status (`SOE_ERR_UNKNOWN_OPTION`), not a misread struct.

use std::ffi::c_char;
use std::sync::Arc;
use std::time::Duration;

use ::soe_session::{
    CrcLength, EndpointConfig, MAX_UDP_LENGTH, MIN_UDP_LENGTH, Preset, RecordingConfig,
    ReliableConfig, SessionConfig,
};
use bytes::Bytes;

use crate::error::{Error, boundary};
use crate::{SOE_ROLE_CLIENT, SOE_ROLE_SERVER, ptr, soe_status};

/// The settings of an endpoint and its sessions. Opaque; made by `soe_config_new` (every
/// option at its default), changed by `soe_config_set` and its typed siblings, read by
/// `soe_endpoint_new` (which copies it), freed by `soe_config_free`.
pub struct soe_config {
    role: u32,
    /// The option values, by option number (`SOE_OPT_*` - 1).
    values: [i64; OPTION_COUNT],
    protocol: Vec<u8>,
    rc4_key: Option<Bytes>,
}

/// A numeric option of `soe_config_set` (`SOE_OPT_*`). A plain integer, not an enum: a
/// program built against a newer header may pass a number this library does not know.
pub type soe_option = u32;

/// The largest datagram this side accepts, announced in the handshake. Default 512; 64 to
/// 65507. A SessionRequest (the protocol name plus 15 bytes) must fit in it.
pub const SOE_OPT_UDP_LENGTH: soe_option = 1;
/// The CRC trailer a server announces, in bytes (clients adopt the server's). Default 2; 0, 2
/// or 4.
pub const SOE_OPT_CRC_LENGTH: soe_option = 2;
/// Whether a server announces compression (1) or not (0). Default 0.
pub const SOE_OPT_COMPRESSION: soe_option = 3;
/// With an RC4 key: 1 encrypts from the session's start; 0 starts in plaintext until
/// `soe_set_encryption` switches a session on (the H1Z1 gateway's way). Default 1.
pub const SOE_OPT_RC4_AT_START: soe_option = 4;
/// The most sessions. Default 10000; at least 1.
pub const SOE_OPT_MAX_SESSIONS: soe_option = 5;
/// The most half-open sessions (handshake answered, not completed). Default 1024; at least 1.
pub const SOE_OPT_MAX_HALF_OPEN: soe_option = 6;
/// The longest reliable message, in bytes. Default 4194304; 1 to 4194304.
pub const SOE_OPT_MAX_MESSAGE_SIZE: soe_option = 7;
/// Messages queued per reliable channel before `soe_send` gives `SOE_ERR_QUEUE_FULL`.
/// Default 4096; at least 1.
pub const SOE_OPT_MAX_QUEUED_MESSAGES: soe_option = 8;
/// Unreliable and ordered messages queued per session before `soe_send_unreliable` gives
/// `SOE_ERR_QUEUE_FULL` (and received ones kept until taken). Default 256; at least 1.
pub const SOE_OPT_MAX_QUEUED_UNRELIABLE: soe_option = 9;
/// A session whose peer is silent this long ends (reason Timeout), in milliseconds. Default
/// 30000; `SOE_NEVER` turns it off.
pub const SOE_OPT_IDLE_TIMEOUT_MS: soe_option = 10;
/// How long a client waits for the server's answer, in milliseconds. Default 10000; at least 1.
pub const SOE_OPT_CONNECT_TIMEOUT_MS: soe_option = 11;
/// A client sends a Heartbeat after this long without hearing from the peer, in milliseconds.
/// Default 10000; `SOE_NEVER` turns it off.
pub const SOE_OPT_HEARTBEAT_INTERVAL_MS: soe_option = 12;
/// The linger of `soe_close`: how long a closing session waits for its queued reliable data to
/// be acknowledged before it sends the Disconnect anyway, in milliseconds. Default 5000; 0
/// sends it at once.
pub const SOE_OPT_CLOSE_TIMEOUT_MS: soe_option = 13;
/// How many times the Disconnect is sent. Default 5; 1 to 16.
pub const SOE_OPT_DISCONNECT_REPEATS: soe_option = 14;
/// The spacing of the repeated Disconnects, in milliseconds. Default 100; at least 1.
pub const SOE_OPT_DISCONNECT_INTERVAL_MS: soe_option = 15;
/// Whether small reliable messages queued together travel packed in one reliable packet (1) or
/// one packet each (0). Default 1.
pub const SOE_OPT_BUNDLE_MESSAGES: soe_option = 16;
/// The most bytes in flight per reliable channel, beside the packet window (sequenced and not
/// yet acknowledged). Default 204800 (200 KiB); the Free Realms client needs 65536; at least 1.
pub const SOE_OPT_MAX_OUTSTANDING_BYTES: soe_option = 17;
/// A known peer's settings (`SOE_PRESET_*`; docs/interop.md gives the source of each). Setting
/// it writes the preset's values into the options it has (`SOE_OPT_UDP_LENGTH`,
/// `SOE_OPT_CRC_LENGTH`, `SOE_OPT_MAX_OUTSTANDING_BYTES`, `SOE_OPT_RC4_AT_START`, and the
/// application protocol of `SOE_PRESET_H1Z1`), so set it first: later options override it.
/// Default 0 (`SOE_PRESET_NONE`).
pub const SOE_OPT_PRESET: soe_option = 18;

/// `SOE_OPT_PRESET`: no preset, the defaults.
pub const SOE_PRESET_NONE: i64 = 0;
/// `SOE_OPT_PRESET`: a server for the Free Realms client (512-byte datagrams, 2-byte CRC, at
/// most 64 KiB in flight).
pub const SOE_PRESET_FREE_REALMS: i64 = 1;
/// `SOE_OPT_PRESET`: a client of the Free Realms emulator's own server (OSFR's LibSOE), which
/// takes its bare `00 06` Heartbeat and its CRC-less Disconnect from the server's address.
pub const SOE_PRESET_OSFR_LIBSOE: i64 = 2;
/// `SOE_OPT_PRESET`: the H1Z1 gateway as h1z1-server runs it (`ExternalGatewayApi_3`, RC4
/// switched on after the first message, acks held up to 50 ms).
pub const SOE_PRESET_H1Z1: i64 = 3;
/// `SOE_OPT_PRESET`: a server for the PlanetSide 2 client (acks only now and then).
pub const SOE_PRESET_PLANETSIDE2: i64 = 4;

/// Whether the flight recorder records every session (1) from its start (a server's from its
/// first valid packet), or only those `soe_session_set_recording` names (0). Default 0.
pub const SOE_OPT_RECORD_SESSIONS: soe_option = 19;
/// The most bytes one session's recording holds, half each way, in 4 KiB chunks. Default
/// 65536; 8192 to 4294967295.
pub const SOE_OPT_RECORD_SESSION_BYTES: soe_option = 20;
/// The most bytes the recordings of the endpoint hold together (its pool, allocated as it
/// fills, never beyond). Default 67108864; 8192 to 4294967295.
pub const SOE_OPT_RECORD_ENDPOINT_BYTES: soe_option = 21;

/// The value of an optional timer that never runs (`SOE_OPT_IDLE_TIMEOUT_MS`,
/// `SOE_OPT_HEARTBEAT_INTERVAL_MS`). The header defines it in `cbindgen.toml` as `(-1)`:
/// cbindgen drops the parentheses, and a bare `-1` reads as a decrement in `x-SOE_NEVER`.
/// cbindgen:ignore
pub const SOE_NEVER: i64 = -1;

/// The longest duration an option takes, in milliseconds: one year (365 * 24 * 3600 * 1000),
/// written out with a suffix so that the header has a 64-bit literal: cbindgen copies the
/// product as it is, and C evaluates it in `int`, which overflows.
pub const SOE_MAX_DURATION_MS: i64 = 31_536_000_000_i64;

const OPTION_COUNT: usize = 21;

/// What one option takes.
struct Spec {
    name: &'static str,
    min: i64,
    max: i64,
    /// Whether `SOE_NEVER` is allowed.
    never: bool,
}

const fn spec(name: &'static str, min: i64, max: i64) -> Spec {
    Spec {
        name,
        min,
        max,
        never: false,
    }
}

const U32: i64 = u32::MAX as i64;

/// The options, by number - 1.
const SPECS: [Spec; OPTION_COUNT] = [
    spec(
        "SOE_OPT_UDP_LENGTH",
        MIN_UDP_LENGTH as i64,
        MAX_UDP_LENGTH as i64,
    ),
    spec("SOE_OPT_CRC_LENGTH", 0, 4),
    spec("SOE_OPT_COMPRESSION", 0, 1),
    spec("SOE_OPT_RC4_AT_START", 0, 1),
    spec("SOE_OPT_MAX_SESSIONS", 1, U32),
    spec("SOE_OPT_MAX_HALF_OPEN", 1, U32),
    spec(
        "SOE_OPT_MAX_MESSAGE_SIZE",
        1,
        crate::SOE_MAX_MESSAGE_SIZE as i64,
    ),
    spec("SOE_OPT_MAX_QUEUED_MESSAGES", 1, U32),
    spec("SOE_OPT_MAX_QUEUED_UNRELIABLE", 1, U32),
    Spec {
        never: true,
        ..spec("SOE_OPT_IDLE_TIMEOUT_MS", 1, SOE_MAX_DURATION_MS)
    },
    spec("SOE_OPT_CONNECT_TIMEOUT_MS", 1, SOE_MAX_DURATION_MS),
    Spec {
        never: true,
        ..spec("SOE_OPT_HEARTBEAT_INTERVAL_MS", 1, SOE_MAX_DURATION_MS)
    },
    spec("SOE_OPT_CLOSE_TIMEOUT_MS", 0, SOE_MAX_DURATION_MS),
    spec("SOE_OPT_DISCONNECT_REPEATS", 1, 16),
    spec("SOE_OPT_DISCONNECT_INTERVAL_MS", 1, SOE_MAX_DURATION_MS),
    spec("SOE_OPT_BUNDLE_MESSAGES", 0, 1),
    spec("SOE_OPT_MAX_OUTSTANDING_BYTES", 1, U32),
    spec("SOE_OPT_PRESET", SOE_PRESET_NONE, SOE_PRESET_PLANETSIDE2),
    spec("SOE_OPT_RECORD_SESSIONS", 0, 1),
    spec("SOE_OPT_RECORD_SESSION_BYTES", 8192, U32),
    spec("SOE_OPT_RECORD_ENDPOINT_BYTES", 8192, U32),
];

/// The Rust preset of a `SOE_PRESET_*` value.
fn preset(value: i64) -> Option<Preset> {
    match value {
        SOE_PRESET_FREE_REALMS => Some(Preset::FreeRealms),
        SOE_PRESET_OSFR_LIBSOE => Some(Preset::OsfrLibSoe),
        SOE_PRESET_H1Z1 => Some(Preset::H1z1),
        SOE_PRESET_PLANETSIDE2 => Some(Preset::PlanetSide2),
        _ => None,
    }
}

/// The bytes a SessionRequest adds to the protocol name: the packet's opcode (2), the
/// protocol version (4), session id (4), udp_length (4) and the name's NUL (1).
pub(crate) const SESSION_REQUEST_OVERHEAD: usize = 15;

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn optional_ms(d: Option<Duration>) -> i64 {
    d.map_or(SOE_NEVER, ms)
}

fn size(v: usize) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX).min(U32)
}

/// Every option's default: the Rust crates' defaults.
fn defaults() -> [i64; OPTION_COUNT] {
    let s = SessionConfig::default();
    let e = EndpointConfig::default();
    let r = ReliableConfig::default();
    let rec = e.recording();
    [
        i64::from(s.udp_length()),
        s.crc_length().get() as i64,
        i64::from(s.compression()),
        i64::from(s.encryption_at_start()),
        size(e.max_sessions()),
        size(e.max_half_open()),
        size(r.max_message_size),
        size(r.max_queued_messages),
        size(s.max_queued_unreliable()),
        optional_ms(s.idle_timeout()),
        ms(s.connect_timeout()),
        optional_ms(s.heartbeat_interval()),
        ms(s.close_timeout()),
        i64::from(s.disconnect_repeats()),
        ms(s.disconnect_interval()),
        i64::from(r.bundle_messages),
        size(r.max_outstanding_bytes),
        SOE_PRESET_NONE,
        i64::from(rec.every_session()),
        size(rec.session_budget()),
        size(rec.endpoint_budget()),
    ]
}

/// The application protocol a new config names.
pub(crate) const DEFAULT_PROTOCOL: &[u8] = b"SoeEcho";

impl soe_config {
    fn new(role: u32) -> Result<Self, Error> {
        if role != SOE_ROLE_SERVER && role != SOE_ROLE_CLIENT {
            return Err(Error::config(format!(
                "role = {role} is neither SOE_ROLE_SERVER (1) nor SOE_ROLE_CLIENT (2)"
            )));
        }
        Ok(Self {
            role,
            values: defaults(),
            protocol: DEFAULT_PROTOCOL.to_vec(),
            rc4_key: None,
        })
    }

    fn slot(option: soe_option) -> Result<usize, Error> {
        let index = (option as usize).wrapping_sub(1);
        if index < OPTION_COUNT {
            Ok(index)
        } else {
            Err(Error::new(
                soe_status::SOE_ERR_UNKNOWN_OPTION,
                format!(
                    "option {option} is not one this library knows (SOE_OPT_* 1 to \
                     {OPTION_COUNT}, soe {})",
                    env!("CARGO_PKG_VERSION")
                ),
            ))
        }
    }

    fn set(&mut self, option: soe_option, value: i64) -> Result<(), Error> {
        let index = Self::slot(option)?;
        let s = &SPECS[index];
        let in_range = (s.min..=s.max).contains(&value) || (s.never && value == SOE_NEVER);
        let crc_ok = option != SOE_OPT_CRC_LENGTH || matches!(value, 0 | 2 | 4);
        if !in_range || !crc_ok {
            let allowed = match option {
                SOE_OPT_CRC_LENGTH => "0, 2 or 4".to_owned(),
                _ if s.never => format!("{}..={} or SOE_NEVER (-1)", s.min, s.max),
                _ => format!("{}..={}", s.min, s.max),
            };
            return Err(Error::config(format!(
                "{} = {value} is out of range; allowed {allowed} (default {})",
                s.name,
                defaults()[index]
            )));
        }
        self.values[index] = value;
        if option == SOE_OPT_PRESET {
            self.apply_preset(value);
        }
        Ok(())
    }

    /// Writes the values of the preset `value` into the options that hold them.
    fn apply_preset(&mut self, value: i64) {
        let Some(p) = preset(value) else {
            return;
        };
        let s = SessionConfig::default().with_preset(p);
        let d = SessionConfig::default();
        for (option, now, default) in [
            (
                SOE_OPT_UDP_LENGTH,
                i64::from(s.udp_length()),
                i64::from(d.udp_length()),
            ),
            (
                SOE_OPT_CRC_LENGTH,
                s.crc_length().get() as i64,
                d.crc_length().get() as i64,
            ),
            (
                SOE_OPT_MAX_OUTSTANDING_BYTES,
                size(s.reliable().max_outstanding_bytes),
                size(d.reliable().max_outstanding_bytes),
            ),
            (
                SOE_OPT_RC4_AT_START,
                i64::from(s.encryption_at_start()),
                i64::from(d.encryption_at_start()),
            ),
        ] {
            if now != default {
                self.values[(option - 1) as usize] = now;
            }
        }
        if s.application_protocol() != d.application_protocol() {
            self.protocol = s.application_protocol().to_vec();
        }
    }

    fn value(&self, option: soe_option) -> i64 {
        self.values[(option - 1) as usize]
    }

    fn set_protocol(&mut self, name: *const c_char) -> Result<(), Error> {
        let max = crate::SOE_MAX_PROTOCOL_LENGTH;
        self.protocol = match ptr::c_str(name, max) {
            Ok(Some(s)) => s.to_bytes().to_vec(),
            Ok(None) => DEFAULT_PROTOCOL.to_vec(),
            Err(()) => {
                return Err(Error::config(format!(
                    "application_protocol has no NUL within its first {} bytes; names are at \
                     most {max} bytes",
                    max + 1
                )));
            }
        };
        Ok(())
    }

    fn set_rc4_key(&mut self, key: *const u8, len: usize) -> Result<(), Error> {
        // Checked before the key's bytes are read: a wrong length must not reach past the key.
        if len > crate::SOE_MAX_RC4_KEY_LENGTH {
            return Err(Error::config(format!(
                "rc4_key_len = {len} is out of range; a key is 1 to {} bytes",
                crate::SOE_MAX_RC4_KEY_LENGTH
            )));
        }
        self.rc4_key = if key.is_null() && len == 0 {
            None
        } else {
            let bytes = ptr::bytes(key, len, "key")?;
            if bytes.is_empty() {
                return Err(Error::config(
                    "rc4_key_len = 0 with a key: a key is 1 to 256 bytes (NULL and 0 remove it)",
                ));
            }
            Some(Bytes::copy_from_slice(bytes))
        };
        Ok(())
    }

    /// The longest reliable message (`SOE_OPT_MAX_MESSAGE_SIZE`).
    pub(crate) fn max_message_size(&self) -> usize {
        self.value(SOE_OPT_MAX_MESSAGE_SIZE) as usize
    }

    /// The Rust configuration, with the checks that involve more than one option.
    pub(crate) fn endpoint_config(&self) -> Result<EndpointConfig, Error> {
        let udp_length = self.value(SOE_OPT_UDP_LENGTH) as u32;
        let request = self.protocol.len() + SESSION_REQUEST_OVERHEAD;
        if request > udp_length as usize {
            return Err(Error::config(format!(
                "SOE_OPT_UDP_LENGTH = {udp_length} is too small for application_protocol ({} \
                 bytes): its SessionRequest takes {request} bytes; raise SOE_OPT_UDP_LENGTH to \
                 at least {request} or shorten the name",
                self.protocol.len()
            )));
        }
        let u = |o| self.value(o) as usize;
        let d = |o| Duration::from_millis(self.value(o) as u64);
        let optional = |o| (self.value(o) != SOE_NEVER).then(|| d(o));
        let flag = |o| self.value(o) == 1;
        let base = preset(self.value(SOE_OPT_PRESET)).map_or_else(SessionConfig::default, |p| {
            SessionConfig::default().with_preset(p)
        });
        let reliable = (**base.reliable())
            .clone()
            .with_max_outstanding_bytes(u(SOE_OPT_MAX_OUTSTANDING_BYTES))
            .with_max_message_size(u(SOE_OPT_MAX_MESSAGE_SIZE))
            .with_max_queued_messages(u(SOE_OPT_MAX_QUEUED_MESSAGES))
            .with_bundle_messages(flag(SOE_OPT_BUNDLE_MESSAGES));
        let crc = CrcLength::new(self.value(SOE_OPT_CRC_LENGTH) as u8).unwrap_or(CrcLength::TWO);
        let mut session = base
            .with_application_protocol(&self.protocol)
            .with_udp_length(udp_length)
            .with_crc_length(crc)
            .with_compression(flag(SOE_OPT_COMPRESSION))
            .with_idle_timeout(optional(SOE_OPT_IDLE_TIMEOUT_MS))
            .with_connect_timeout(d(SOE_OPT_CONNECT_TIMEOUT_MS))
            .with_heartbeat_interval(optional(SOE_OPT_HEARTBEAT_INTERVAL_MS))
            .with_close_timeout(d(SOE_OPT_CLOSE_TIMEOUT_MS))
            .with_disconnect_repeats(self.value(SOE_OPT_DISCONNECT_REPEATS) as u8)
            .with_disconnect_interval(d(SOE_OPT_DISCONNECT_INTERVAL_MS))
            .with_max_queued_unreliable(u(SOE_OPT_MAX_QUEUED_UNRELIABLE))
            .with_encryption_at_start(flag(SOE_OPT_RC4_AT_START))
            .with_reliable(Arc::new(reliable))
            .map_err(Error::config)?;
        if let Some(key) = &self.rc4_key {
            session = session
                .with_encryption_key(key.clone())
                .map_err(|e| Error::config(format!("rc4_key: {e}")))?;
        }
        let session = Arc::new(session);
        let config = if self.role == SOE_ROLE_SERVER {
            EndpointConfig::server(session.clone()).with_client(session)
        } else {
            EndpointConfig::client(session)
        };
        let recording = RecordingConfig::new()
            .with_every_session(flag(SOE_OPT_RECORD_SESSIONS))
            .with_session_budget(u(SOE_OPT_RECORD_SESSION_BYTES))
            .with_endpoint_budget(u(SOE_OPT_RECORD_ENDPOINT_BYTES));
        Ok(config
            .with_max_sessions(u(SOE_OPT_MAX_SESSIONS))
            .with_max_half_open(u(SOE_OPT_MAX_HALF_OPEN))
            .with_recording(recording))
    }
}

/// Runs `body` on the config behind `cfg` at the boundary.
fn with_config(
    cfg: *mut soe_config,
    body: impl FnOnce(&mut soe_config) -> Result<(), Error>,
) -> soe_status {
    boundary(
        || {
            if cfg.is_null() {
                return Err(Error::null("config"));
            }
            body(ptr::handle(cfg)?)?;
            Ok(soe_status::SOE_OK)
        },
        || {},
    )
}

/// Creates a config for `role` (`SOE_ROLE_SERVER` or `SOE_ROLE_CLIENT`) with every option at
/// its default, and writes it to `*out`. Free it with `soe_config_free`.
///
/// Thread-safe. On an error `*out` is set to NULL.
///
/// Statuses: `SOE_OK`, `SOE_ERR_NULL`, `SOE_ERR_INVALID_CONFIG`, `SOE_ERR_PANIC`.
#[unsafe(no_mangle)]
#[allow(unsafe_code)] // `no_mangle` exports the C symbol; the body has no unsafe code.
pub extern "C" fn soe_config_new(role: u32, out: *mut *mut soe_config) -> soe_status {
    boundary(
        || {
            if out.is_null() {
                return Err(Error::null("out"));
            }
            ptr::write(out, std::ptr::null_mut(), "out")?;
            let config = Box::new(soe_config::new(role)?);
            ptr::write(out, ptr::into_handle(config), "out")?;
            Ok(soe_status::SOE_OK)
        },
        || {},
    )
}

/// Frees a config; NULL is ignored. Endpoints made from it keep their own copy.
///
/// Thread safety: no other call may use the config during or after this one.
#[unsafe(no_mangle)]
#[allow(unsafe_code)] // `no_mangle` exports the C symbol; the body has no unsafe code.
pub extern "C" fn soe_config_free(cfg: *mut soe_config) {
    let _ = boundary(
        || {
            ptr::free_handle(cfg);
            Ok(soe_status::SOE_OK)
        },
        || {},
    );
}

/// Sets a numeric option (`SOE_OPT_*`) to `value`: a count, a flag (0 or 1), or a duration in
/// milliseconds (the options ending in `_MS`; `SOE_NEVER` for an optional timer that never
/// runs). A value out of range is `SOE_ERR_INVALID_CONFIG` (the message names the option, its
/// range and its default) and leaves the option as it was; an option this library does not
/// know (one from a newer header) is `SOE_ERR_UNKNOWN_OPTION`.
///
/// Thread safety: one thread at a time per config.
///
/// Statuses: `SOE_OK`, `SOE_ERR_NULL`, `SOE_ERR_INVALID_CONFIG`, `SOE_ERR_UNKNOWN_OPTION`,
/// `SOE_ERR_PANIC`.
#[unsafe(no_mangle)]
#[allow(unsafe_code)] // `no_mangle` exports the C symbol; the body has no unsafe code.
pub extern "C" fn soe_config_set(
    cfg: *mut soe_config,
    option: soe_option,
    value: i64,
) -> soe_status {
    with_config(cfg, |c| c.set(option, value))
}

/// Writes a numeric option's value (`SOE_OPT_*`) to `*value`: the default until
/// `soe_config_set` changed it.
///
/// Thread safety: one thread at a time per config.
///
/// Statuses: `SOE_OK`, `SOE_ERR_NULL`, `SOE_ERR_UNKNOWN_OPTION`, `SOE_ERR_PANIC`.
#[unsafe(no_mangle)]
#[allow(unsafe_code)] // `no_mangle` exports the C symbol; the body has no unsafe code.
pub extern "C" fn soe_config_get(
    cfg: *mut soe_config,
    option: soe_option,
    value: *mut i64,
) -> soe_status {
    with_config(cfg, |c| {
        let index = soe_config::slot(option)?;
        ptr::write(value, c.values[index], "value")
    })
}

/// Sets the application protocol name sent in SessionRequest (both sides must agree): a
/// NUL-terminated string of at most `SOE_MAX_PROTOCOL_LENGTH` (255) bytes, copied. Default
/// "SoeEcho"; NULL sets the default again. The SessionRequest (the name plus 15 bytes) must fit
/// in `SOE_OPT_UDP_LENGTH`, which `soe_endpoint_new` checks.
///
/// Thread safety: one thread at a time per config.
///
/// Statuses: `SOE_OK`, `SOE_ERR_NULL`, `SOE_ERR_INVALID_CONFIG`, `SOE_ERR_PANIC`.
#[unsafe(no_mangle)]
#[allow(unsafe_code)] // `no_mangle` exports the C symbol; the body has no unsafe code.
pub extern "C" fn soe_config_set_application_protocol(
    cfg: *mut soe_config,
    name: *const c_char,
) -> soe_status {
    with_config(cfg, |c| c.set_protocol(name))
}

/// Sets the RC4 key for reliable data (both sides must agree): `len` bytes (1 to
/// `SOE_MAX_RC4_KEY_LENGTH`, 256), copied. Default none; NULL with 0 removes the key.
///
/// Thread safety: one thread at a time per config.
///
/// Statuses: `SOE_OK`, `SOE_ERR_NULL`, `SOE_ERR_INVALID_ARGUMENT`, `SOE_ERR_INVALID_CONFIG`,
/// `SOE_ERR_PANIC`.
#[unsafe(no_mangle)]
#[allow(unsafe_code)] // `no_mangle` exports the C symbol; the body has no unsafe code.
pub extern "C" fn soe_config_set_rc4_key(
    cfg: *mut soe_config,
    key: *const u8,
    len: usize,
) -> soe_status {
    with_config(cfg, |c| c.set_rc4_key(key, len))
}

/// The options, for the tests: number, name, default.
#[doc(hidden)]
pub fn options() -> Vec<(soe_option, &'static str, i64)> {
    let d = defaults();
    (0..OPTION_COUNT)
        .map(|i| ((i + 1) as soe_option, SPECS[i].name, d[i]))
        .collect()
}
