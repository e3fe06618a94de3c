//! The flight recorder on a virtual-time pair of endpoints: off by default; turned on for one
//! session by handle or for every session; what it keeps is what crossed the wire and what the
//! application saw, oldest dropped first within the budgets; a recording outlives a session that
//! ended abnormally and only such a one; and once its pool is warm it allocates nothing per
//! datagram.
//!
//! Allocations are counted with `stats_alloc`'s instrumented allocator, which counts the whole
//! process, so the tests of this binary run one at a time (a lock).

mod common;

use std::alloc::System;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use common::{NetConfig, Pair, client_config, seed, server_config};
use soe_session::recorder::{CHUNK_SIZE, ENTRY_HEADER, Recorded, RecordedEntry};
use soe_session::{
    Channel, Delivery, DisconnectReason, EndpointConfig, Event, Recording, RecordingConfig,
    SessionHandle, Side,
};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A pair whose server endpoint records as `recording` says.
fn pair(seed: u64, recording: RecordingConfig, net: NetConfig) -> Pair {
    let server = EndpointConfig::server(Arc::new(server_config()))
        .with_rng_seed(seed ^ 0x5E5E)
        .with_secret(u128::from(seed ^ 0x5EC2))
        .with_recording(recording);
    let client = EndpointConfig::client(Arc::new(client_config())).with_rng_seed(seed ^ 0xC1C1);
    Pair::with_endpoints(seed, server, client, net)
}

/// Game-like message `i`, `len` bytes.
fn message(i: usize, len: usize) -> Bytes {
    let mut m = format!("message {i}:").into_bytes();
    m.resize(len.max(m.len()), b'x');
    m.truncate(len);
    Bytes::from(m)
}

/// Sends `n` messages each way (every fifth one fragmented), 50 ms apart, and runs until both
/// sides got them all; returns what the server got and sent.
fn traffic(p: &mut Pair, ch: SessionHandle, sh: SessionHandle, n: usize) -> [Vec<Bytes>; 2] {
    let mut got = Vec::new();
    let mut sent = Vec::new();
    for i in 0..n {
        let len = if i % 5 == 4 { 1500 } else { 80 };
        p.client.send(ch, Channel::ZERO, message(i, len)).unwrap();
        let reply = message(1000 + i, len / 2);
        p.server.send(sh, Channel::ZERO, reply.clone()).unwrap();
        sent.push(reply);
        p.run_for(Duration::from_millis(50));
        got.extend(
            Pair::take_messages(&mut p.server_events, sh)
                .into_iter()
                .map(|m| m.1),
        );
    }
    let all = p.run_until(Duration::from_secs(10), |p| {
        let more = Pair::take_messages(&mut p.server_events, sh);
        got.extend(more.into_iter().map(|m| m.1));
        got.len() == n
    });
    assert!(all, "the server got every message (seed {})", p.seed);
    [got, sent]
}

/// The data of the entries that are `what`.
fn of<'a>(entries: &[RecordedEntry<'a>], what: impl Fn(&Recorded) -> bool) -> Vec<&'a [u8]> {
    entries
        .iter()
        .filter(|e| what(&e.what))
        .map(|e| e.data)
        .collect()
}

fn received(r: &Recorded) -> bool {
    matches!(r, Recorded::Received { .. })
}

fn delivered(r: &Recorded) -> bool {
    matches!(r, Recorded::Delivered { .. })
}

#[test]
fn recording_is_off_by_default() {
    let _serial = serial();
    let mut p = Pair::new(
        seed(1),
        server_config(),
        client_config(),
        NetConfig::default(),
    );
    let (ch, sh) = p.connect();
    traffic(&mut p, ch, sh, 10);
    let stats = p.server.recorder_stats();
    assert_eq!(
        (stats.recording, stats.entries, stats.pool_bytes),
        (0, 0, 0)
    );
    assert!(!p.server.is_recording(sh));
    assert!(p.server.take_recording(sh).is_none());
    p.client.close(p.now, ch, DisconnectReason::Timeout);
    p.run_for(Duration::from_secs(2));
    assert!(p.server.poll_recording().is_none());
}

#[test]
fn a_session_recorded_by_handle_keeps_what_crossed_the_wire_and_what_the_application_saw() {
    let _serial = serial();
    let mut p = pair(seed(2), RecordingConfig::new(), NetConfig::default());
    let (ch, sh) = p.connect();
    assert!(p.server.set_recording(sh, true));
    assert!(p.server.is_recording(sh));
    p.log_datagrams = true;
    let [got, sent] = traffic(&mut p, ch, sh, 20);
    let recording = p
        .server
        .take_recording(sh)
        .expect("a live session's recording");
    assert_eq!(recording.remote(), common::CLIENT);
    assert_eq!(recording.side(), Side::Server);
    assert_eq!(recording.end(), None);
    assert_eq!(recording.dropped(), 0);
    let entries: Vec<RecordedEntry<'_>> = recording.entries().collect();
    // Datagrams as they were on the wire, each way, in order.
    let wire_in: Vec<&[u8]> = p.to_server_log.iter().map(Vec::as_slice).collect();
    let wire_out: Vec<&[u8]> = p.from_server_log.iter().map(Vec::as_slice).collect();
    assert_eq!(of(&entries, received), wire_in);
    assert_eq!(of(&entries, |r| *r == Recorded::Sent), wire_out);
    // Messages as the application saw them, reassembled (some were fragmented).
    let got: Vec<&[u8]> = got.iter().map(|b| &b[..]).collect();
    let sent: Vec<&[u8]> = sent.iter().map(|b| &b[..]).collect();
    assert_eq!(of(&entries, delivered), got);
    assert_eq!(of(&entries, |r| matches!(r, Recorded::Queued { .. })), sent);
    assert!(entries.iter().all(|e| e.data.len() == e.len));
    assert!(
        entries.windows(2).all(|w| w[0].at <= w[1].at),
        "oldest first"
    );
    assert!(entries.iter().any(|e| matches!(
        e.what,
        Recorded::Delivered {
            channel: Channel::ZERO,
            kind: Delivery::Reliable,
            encrypted: false
        }
    )));
    // Taking empties it; recording goes on.
    p.server
        .send_unreliable(sh, Bytes::from_static(b"\x01after"))
        .unwrap();
    p.run_for(Duration::from_millis(100));
    let again = p.server.take_recording(sh).unwrap();
    let queued: Vec<RecordedEntry<'_>> = again
        .entries()
        .filter(|e| matches!(e.what, Recorded::Queued { .. }))
        .collect();
    assert_eq!(queued.len(), 1);
    assert_eq!(queued[0].data, b"\x01after");
    // Stopping forgets.
    assert!(p.server.set_recording(sh, false));
    assert!(p.server.take_recording(sh).is_none());
}

#[test]
fn the_oldest_entries_go_first_within_the_session_budget() {
    let _serial = serial();
    let budget = 2 * CHUNK_SIZE;
    let config = RecordingConfig::new()
        .with_every_session(true)
        .with_session_budget(budget);
    let mut p = pair(seed(3), config, NetConfig::default());
    p.log_datagrams = true;
    let (ch, sh) = p.connect();
    traffic(&mut p, ch, sh, 60);
    let recording = p.server.take_recording(sh).unwrap();
    let entries: Vec<RecordedEntry<'_>> = recording.entries().collect();
    let kept = of(&entries, received);
    let wire: Vec<&[u8]> = p.to_server_log.iter().map(Vec::as_slice).collect();
    assert!(recording.dropped() > 0, "the budget was exceeded");
    assert!(!kept.is_empty() && kept.len() < wire.len());
    assert_eq!(
        kept,
        wire[wire.len() - kept.len()..],
        "the newest, in order"
    );
    let held: usize = entries.iter().map(|e| ENTRY_HEADER + e.data.len()).sum();
    assert!(held <= budget, "{held} bytes held, budget {budget}");
    let stats = p.server.recorder_stats();
    assert_eq!(stats.pool_bytes, budget, "one chunk each way, reused");
    assert!(stats.dropped >= recording.dropped());
}

/// Runs a pair whose every datagram is lost after `traffic` seconds of messages, until the
/// server's session ends; returns the pair, the server's handle and the messages it got.
fn lost_after_traffic(seed: u64, seconds: usize) -> (Pair, SessionHandle, Vec<Bytes>) {
    let config = RecordingConfig::new().with_every_session(true);
    let mut p = pair(seed, config, NetConfig::default());
    let (ch, sh) = p.connect();
    let [got, _] = traffic(&mut p, ch, sh, seconds * 20);
    p.up.loss = 1.0;
    p.down.loss = 1.0;
    let ended = p.run_until(Duration::from_secs(60), |p| {
        Pair::closed(&p.server_events, sh).is_some()
    });
    assert!(ended, "the server's session ended (seed {})", p.seed);
    (p, sh, got)
}

#[test]
fn a_session_that_ends_abnormally_leaves_its_recording_and_a_clean_close_does_not() {
    let _serial = serial();
    let (mut p, sh, got) = lost_after_traffic(seed(4), 20);
    let Some(Event::Closed { reason, by_peer }) = Pair::closed(&p.server_events, sh) else {
        unreachable!()
    };
    assert!(soe_session::recorder::ends_abnormally(reason));
    let (h, recording): (SessionHandle, Recording<u32>) =
        p.server.poll_recording().expect("kept for the host");
    assert_eq!(h, sh);
    assert_eq!(recording.end(), Some((reason, by_peer)));
    assert!(p.server.poll_recording().is_none(), "taken once");
    let entries: Vec<RecordedEntry<'_>> = recording.entries().collect();
    let last: Vec<&[u8]> = got.iter().rev().take(5).rev().map(|b| &b[..]).collect();
    let delivered = of(&entries, delivered);
    assert!(
        delivered.ends_with(&last),
        "the last messages before the loss"
    );
    // After the loss only sent datagrams (resends, heartbeats) were recorded.
    let loss_began = entries.iter().rposition(|e| received(&e.what)).unwrap();
    assert!(
        entries[loss_began + 1..]
            .iter()
            .all(|e| matches!(e.what, Recorded::Sent | Recorded::Queued { .. }))
    );
    assert_eq!(p.server.recorder_stats().ended, 0);

    // The same with a clean close: nothing is kept, and the chunks go back to the pool.
    let mut p = pair(
        seed(5),
        RecordingConfig::new().with_every_session(true),
        NetConfig::default(),
    );
    let (ch, sh) = p.connect();
    traffic(&mut p, ch, sh, 5);
    p.client.close(p.now, ch, DisconnectReason::Application);
    let closed = p.run_until(Duration::from_secs(10), |p| {
        Pair::closed(&p.server_events, sh).is_some()
    });
    assert!(closed);
    p.run_for(Duration::from_secs(2));
    assert!(p.server.poll_recording().is_none());
    let stats = p.server.recorder_stats();
    assert_eq!((stats.recording, stats.ended), (0, 0));
}

#[test]
fn half_open_sessions_record_nothing() {
    let _serial = serial();
    let config = RecordingConfig::new().with_every_session(true);
    let mut p = pair(seed(6), config, NetConfig::default());
    // SessionRequests from 100 addresses that never complete their handshakes.
    let mut buf = Vec::new();
    for i in 0..100u32 {
        buf.clear();
        soe_wire::Packet::SessionRequest(soe_wire::SessionRequest {
            protocol_version: 3,
            session_id: i,
            udp_length: 512,
            application_protocol: b"TestProto_1",
        })
        .encode(&mut buf);
        p.server.handle_datagram(p.now, 1000 + i, &buf);
    }
    p.flush();
    assert_eq!(p.server.half_open(), 100);
    let stats = p.server.recorder_stats();
    assert_eq!((stats.recording, stats.pool_bytes), (0, 0));
    let (_, sh) = p.connect();
    assert!(p.server.is_recording(sh), "an established one does");
}

/// Heap allocations made while `run` runs.
fn allocations(run: impl FnOnce()) -> usize {
    let region = Region::new(GLOBAL);
    run();
    region.change().allocations
}

/// Heap bytes allocated and not freed since `region` began.
fn live(region: &Region<'_, System>) -> isize {
    let change = region.change();
    change.bytes_allocated as isize - change.bytes_deallocated as isize
}

#[test]
fn a_warm_recorder_allocates_nothing_per_datagram_and_holds_its_budget() {
    let _serial = serial();
    // Identical pairs, off and recording; the same traffic through each allocates the same once
    // the recorder's pool has all its chunks. Each runs twice: the count of a run now and then
    // has a few allocations more from outside the test (the harness's threads), never fewer.
    let budget = 4 * CHUNK_SIZE;
    let on = RecordingConfig::new()
        .with_every_session(true)
        .with_session_budget(budget);
    let mut counts = Vec::new();
    let mut held = Vec::new();
    let mut recorded = 0;
    for config in [RecordingConfig::new(), RecordingConfig::new(), on, on] {
        let region = Region::new(GLOBAL);
        let mut p = pair(seed(7), config, NetConfig::default());
        let (ch, sh) = p.connect();
        traffic(&mut p, ch, sh, 80);
        let before = p.server.recorder_stats().entries;
        counts.push(allocations(|| {
            traffic(&mut p, ch, sh, 80);
        }));
        held.push(live(&region));
        if p.server.is_recording(sh) {
            let stats = p.server.recorder_stats();
            assert_eq!(stats.pool_bytes, budget);
            recorded = stats.entries - before;
        }
    }
    println!("allocations off, off, on, on: {counts:?}; {recorded} entries recorded");
    assert!(recorded > 400, "{recorded} entries");
    let off = counts[..2].iter().min().unwrap();
    let on = counts[2..].iter().min().unwrap();
    assert!(
        on <= &(off + 8),
        "{on} allocations recording, {off} not, for {recorded} entries"
    );
    // The memory a recorded session holds: its budget in chunks, and a little bookkeeping.
    let extra = held[2..].iter().min().unwrap() - held[..2].iter().min().unwrap();
    println!(
        "heap held with the recorder on: {extra} bytes more for one session ({budget} of chunks, {} of bookkeeping)",
        extra - budget as isize
    );
    assert!(
        extra >= budget as isize && extra <= budget as isize + 4096,
        "{extra} bytes for a budget of {budget}"
    );
}
