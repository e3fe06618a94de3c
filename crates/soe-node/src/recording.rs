//! The flight recorder in Node: the options that turn it on, and a session's recording written
//! as a pcapng capture ([`soe_dissect::recording`]) for the `'disconnect'` event of a session
//! that ended abnormally, or for `takeRecording` while it runs.

use std::net::SocketAddr;

use soe_dissect::recording::{RecordingOptions, write_recording};
use soe_runtime::bytes::Bytes;
use soe_runtime::{Connection, EndpointConfig, RecordingConfig};

use crate::NativeOptions;

/// The endpoint's config with the recorder as the options say (off by default).
pub(crate) fn configure(config: EndpointConfig, o: &NativeOptions) -> EndpointConfig {
    let defaults = RecordingConfig::new();
    let recording = RecordingConfig::new()
        .with_every_session(o.record_sessions == Some(true))
        .with_session_budget(
            o.record_session_bytes
                .map_or(defaults.session_budget(), |n| n as usize),
        )
        .with_endpoint_budget(
            o.record_endpoint_bytes
                .map_or(defaults.endpoint_budget(), |n| n as usize),
        );
    config.with_recording(recording)
}

/// The key written into recordings: the RC4 key with `recordKeys`, else none.
pub(crate) fn key(o: &NativeOptions) -> Option<Bytes> {
    match (&o.rc4_key, o.record_keys) {
        (Some(key), Some(true)) => Some(Bytes::copy_from_slice(key)),
        _ => None,
    }
}

/// `conn`'s recording as a pcapng capture (see [`Connection::take_recording`]), between
/// `local` (this endpoint's socket) and the peer; `None` when there is none.
pub(crate) fn capture(conn: &Connection, local: SocketAddr, key: Option<&Bytes>) -> Option<Bytes> {
    let recording = conn.take_recording()?;
    let remote = recording.remote();
    let mut options = RecordingOptions::new(local, remote).with_start_instant(recording.start());
    if let Some(key) = key {
        options = options.with_key(key);
    }
    let mut out = Vec::with_capacity(recording.as_bytes().len() + 4096);
    write_recording(&mut out, recording.as_bytes(), &options).ok()?;
    Some(Bytes::from(out))
}
