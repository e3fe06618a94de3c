//! The flight recorder in C: a session recorded (every one with `SOE_OPT_RECORD_SESSIONS`, or
//! one by `soe_session_set_recording`) keeps its last datagrams and messages; its recording is
//! written as a pcapng capture into the caller's buffer or to a file, while it runs or after it
//! ended abnormally. See [`::soe_session::recorder`] and `soe_dissect::recording`.

use std::collections::VecDeque;
use std::ffi::c_char;
use std::time::SystemTime;

use ::soe_session::{DisconnectReason, SessionHandle, Side};
use soe_dissect::recording::{RecordingOptions, write_recording};

use crate::error::Error;
use crate::{ptr, soe_addr, soe_endpoint, soe_session, soe_status, with_endpoint};

/// `soe_session_recording`'s flag: write the session's RC4 key into the recording (its framing
/// record), so its reader can decrypt what the key protects. Without it keys are never written.
pub const SOE_RECORDING_WITH_KEY: u32 = 1;

/// The most closed sessions whose numbers still name their recordings.
const MAX_ENDED: usize = 4096;

/// The longest path `soe_session_recording_file` reads, in bytes without the NUL.
pub const SOE_MAX_PATH_LENGTH: usize = 4096;

/// What the endpoint keeps for the recordings: the numbers of sessions that ended abnormally,
/// and a recording written for a caller whose buffer was too small.
#[derive(Debug, Default)]
pub(crate) struct Recordings {
    /// Sessions that ended abnormally, newest last: their numbers and handles (the recording
    /// stays in the protocol endpoint's pool until taken or overwritten by newer entries).
    ended: VecDeque<(soe_session, SessionHandle)>,
    /// The capture last written for a buffer that was too small, kept for the next call.
    written: Option<(soe_session, Vec<u8>)>,
}

impl Recordings {
    /// A session closed with `reason`: its number keeps naming its recording when the end was
    /// abnormal.
    pub(crate) fn closed(
        &mut self,
        number: soe_session,
        h: SessionHandle,
        reason: DisconnectReason,
    ) {
        if !::soe_session::recorder::ends_abnormally(reason) {
            return;
        }
        if self.ended.len() >= MAX_ENDED {
            self.ended.pop_front();
        }
        self.ended.push_back((number, h));
    }
}

/// Starts (`on` non-zero) or stops recording one session: the flight recorder keeps its last
/// datagrams each way and its messages, within `SOE_OPT_RECORD_SESSION_BYTES` and
/// `SOE_OPT_RECORD_ENDPOINT_BYTES`. Stopping forgets what was recorded.
///
/// Thread safety: one thread at a time per endpoint (lock it to share it).
///
/// Statuses: `SOE_OK`, `SOE_ERR_NULL`, `SOE_ERR_STALE_SESSION`, `SOE_ERR_PANIC`,
/// `SOE_ERR_POISONED`.
#[unsafe(no_mangle)]
#[allow(unsafe_code)] // `no_mangle` exports the C symbol; the body has no unsafe code.
pub extern "C" fn soe_session_set_recording(
    ep: *mut soe_endpoint,
    session: soe_session,
    on: i32,
) -> soe_status {
    with_endpoint(ep, |e| {
        let h = e.handle(session)?;
        // SOE_OPT_RECORD_ENDPOINT_BYTES is at least two chunks, so the recorder always takes it.
        let on = e.endpoint.set_recording(h, on != 0);
        debug_assert!(on || e.endpoint.config().recording().endpoint_budget() < 8192);
        Ok(soe_status::SOE_OK)
    })
}

/// Writes a session's recording as a pcapng capture into `buf` (`cap` bytes) and its length to
/// `*len`: a live session's so far (it goes on recording, from empty), or, after its
/// `SOE_EVENT_CLOSED`, the whole recording of a session that ended abnormally (any reason but
/// 0 None, 3 OtherSideTerminated, 4 ManagerDeleted, 6 Application, 14 ApplicationReleased),
/// once. The capture holds the raw datagrams as UDP between `*local` (this endpoint's socket
/// address) and the peer, and the messages as the session saw them for the Wireshark plugin
/// (docs/c-api.md). `now_us` is the host's clock now (it dates the capture).
///
/// Size query: with a buffer too small (or NULL and 0), returns `SOE_ERR_BUFFER_TOO_SMALL` with
/// the size needed in `*len`, and keeps the capture for the next call. Returns `SOE_DONE` when
/// there is no recording: the session is not recorded, it ended cleanly, its recording was
/// taken, or the pool needed its room. `flags`: 0, or `SOE_RECORDING_WITH_KEY`.
///
/// Thread safety: one thread at a time per endpoint (lock it to share it).
///
/// Statuses: `SOE_OK`, `SOE_DONE`, `SOE_ERR_NULL`, `SOE_ERR_INVALID_ARGUMENT`,
/// `SOE_ERR_BUFFER_TOO_SMALL`, `SOE_ERR_STALE_SESSION`, `SOE_ERR_PANIC`, `SOE_ERR_POISONED`.
#[unsafe(no_mangle)]
#[allow(unsafe_code)] // `no_mangle` exports the C symbol; the body has no unsafe code.
pub extern "C" fn soe_session_recording(
    ep: *mut soe_endpoint,
    session: soe_session,
    now_us: u64,
    local: *const soe_addr,
    flags: u32,
    buf: *mut u8,
    cap: usize,
    len: *mut usize,
) -> soe_status {
    with_endpoint(ep, |e| {
        if len.is_null() {
            return Err(Error::null("len"));
        }
        let Some(written) = kept_or_capture(e, session, now_us, local, flags)? else {
            return Ok(soe_status::SOE_DONE);
        };
        ptr::write(len, written.len(), "len")?;
        if written.len() > cap || buf.is_null() {
            let error = if written.len() > cap {
                Error::too_small("buf", written.len())
            } else {
                Error::null("buf")
            };
            e.recordings.written = Some((session, written));
            return Err(error);
        }
        ptr::copy_to(buf, cap, &written, "buf")?;
        Ok(soe_status::SOE_OK)
    })
}

/// [`soe_session_recording`] to a file: writes the capture to `path` (created or truncated).
/// `SOE_ERR_INVALID_ARGUMENT` when the file cannot be written (the message says why).
///
/// Thread safety: one thread at a time per endpoint (lock it to share it).
///
/// Statuses: `SOE_OK`, `SOE_DONE`, `SOE_ERR_NULL`, `SOE_ERR_INVALID_ARGUMENT`,
/// `SOE_ERR_STALE_SESSION`, `SOE_ERR_PANIC`, `SOE_ERR_POISONED`.
#[unsafe(no_mangle)]
#[allow(unsafe_code)] // `no_mangle` exports the C symbol; the body has no unsafe code.
pub extern "C" fn soe_session_recording_file(
    ep: *mut soe_endpoint,
    session: soe_session,
    now_us: u64,
    local: *const soe_addr,
    flags: u32,
    path: *const c_char,
) -> soe_status {
    with_endpoint(ep, |e| {
        let path = match ptr::c_str(path, SOE_MAX_PATH_LENGTH) {
            Ok(Some(p)) => p.to_string_lossy().into_owned(),
            Ok(None) => return Err(Error::null("path")),
            Err(()) => {
                return Err(Error::invalid(format!(
                    "`path` has no NUL within its first {} bytes",
                    SOE_MAX_PATH_LENGTH + 1
                )));
            }
        };
        let Some(written) = kept_or_capture(e, session, now_us, local, flags)? else {
            return Ok(soe_status::SOE_DONE);
        };
        std::fs::write(&path, written)
            .map_err(|err| Error::invalid(format!("cannot write {path}: {err}")))?;
        Ok(soe_status::SOE_OK)
    })
}

/// The capture kept for `session` by a call whose buffer was too small, or else its recording
/// taken and written now; `None` when there is none.
fn kept_or_capture(
    e: &mut soe_endpoint,
    session: soe_session,
    now_us: u64,
    local: *const soe_addr,
    flags: u32,
) -> Result<Option<Vec<u8>>, Error> {
    match e
        .recordings
        .written
        .take_if(|(number, _)| *number == session)
    {
        Some((_, bytes)) => Ok(Some(bytes)),
        None => capture(e, session, now_us, local, flags),
    }
}

/// Takes session `session`'s recording and writes it as pcapng; `None` when there is none.
fn capture(
    e: &mut soe_endpoint,
    session: soe_session,
    now_us: u64,
    local: *const soe_addr,
    flags: u32,
) -> Result<Option<Vec<u8>>, Error> {
    if flags & !SOE_RECORDING_WITH_KEY != 0 {
        return Err(Error::invalid(format!(
            "flags = {flags:#x}: only SOE_RECORDING_WITH_KEY (1) is defined"
        )));
    }
    let local = ptr::reference(local, "local")?.to_socket_addr()?;
    let h = match e.handles.session(session) {
        Some(h) => h,
        None => {
            let at = e.recordings.ended.iter().position(|&(n, _)| n == session);
            let Some(at) = at else {
                return Err(Error::new(
                    soe_status::SOE_ERR_STALE_SESSION,
                    format!(
                        "session {session} does not exist, and no recording of it is kept \
                         (it ended cleanly, was not recorded, or was never issued)"
                    ),
                ));
            };
            // The number stays: a second take finds the recording gone (SOE_DONE).
            e.recordings.ended[at].1
        }
    };
    let Some(recording) = e.endpoint.take_recording(h) else {
        return Ok(None);
    };
    let now = e.clock.instant(now_us);
    let ago = now.saturating_duration_since(recording.start());
    let start = SystemTime::now()
        .checked_sub(ago)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let mut options = RecordingOptions::new(local, recording.remote()).with_start(start);
    if flags & SOE_RECORDING_WITH_KEY != 0 {
        let config = e.endpoint.config();
        let session_config = match recording.side() {
            Side::Server => config.server_config().unwrap_or(config.client_config()),
            Side::Client => config.client_config(),
        };
        if let Some(key) = session_config.encryption_key() {
            options = options.with_key(key);
        }
    }
    let mut out = Vec::with_capacity(recording.as_bytes().len() + 4096);
    write_recording(&mut out, recording.as_bytes(), &options)
        .map_err(|err| Error::invalid(format!("the recording could not be written: {err}")))?;
    Ok(Some(out))
}
