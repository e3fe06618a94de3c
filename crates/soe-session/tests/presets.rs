//! Presets, and the Free Realms emulator's own server (OSFR's LibSOE): it answers a Heartbeat
//! with a bare `00 06` and sends its Disconnect without a CRC, always with compression
//! negotiated. With `Preset::OsfrLibSoe` a client session takes both shapes from its server's
//! address; without it, or from any other address, neither.

mod common;

use std::time::Duration;

use common::{NetConfig, Pair, SERVER, client_config, server_config};
use soe_session::{DisconnectReason, Event, Preset, SessionConfig, SessionHandle, State};

/// An address that is not the server's.
const STRANGER: u32 = 99;

/// A client connected to a server that announces compression, as LibSOE always does.
fn connected(seed: u64, client: SessionConfig) -> (Pair, SessionHandle) {
    let mut p = Pair::new(
        common::seed(seed),
        server_config().with_compression(true),
        client,
        NetConfig::default(),
    );
    let (c, _s) = p.connect();
    (p, c)
}

/// Runs `seconds` of virtual time with the real server silent, and answers each Heartbeat the
/// client sends with a bare `00 06` from `from`, as LibSOE's `HandlePing` does.
fn idle_against_libsoe(p: &mut Pair, c: SessionHandle, from: u32, seconds: u64) {
    p.server_alive = false;
    let mut answered = 0;
    for _ in 0..seconds * 10 {
        p.run_for(Duration::from_millis(100));
        let Some(stats) = p.client.stats(c) else {
            return;
        };
        while answered < stats.heartbeats_sent {
            p.client.handle_datagram(p.now, from, &[0x00, 0x06]);
            answered += 1;
        }
        p.flush();
    }
}

/// LibSOE's Disconnect: `00 05`, the compression flag, session id, reason, and no CRC.
fn libsoe_disconnect(session_id: u32, reason: u16) -> Vec<u8> {
    let mut d = vec![0x00, 0x05, 0x00];
    d.extend_from_slice(&session_id.to_be_bytes());
    d.extend_from_slice(&reason.to_be_bytes());
    d
}

#[test]
fn with_the_preset_an_idle_session_to_libsoe_outlives_the_idle_timeout() {
    let (mut p, c) = connected(60, client_config().with_preset(Preset::OsfrLibSoe));
    idle_against_libsoe(&mut p, c, SERVER, 120);
    assert!(
        Pair::closed(&p.client_events, c).is_none(),
        "{:?}",
        p.client_events
    );
    assert_eq!(p.client.state(c), Some(State::Connected));
    let st = p.client.stats(c).unwrap();
    assert!(st.crcless_accepted >= 10, "{st:?}");
}

#[test]
fn without_the_preset_an_idle_session_to_libsoe_times_out_as_today() {
    let (mut p, c) = connected(61, client_config());
    idle_against_libsoe(&mut p, c, SERVER, 40);
    assert_eq!(
        Pair::closed(&p.client_events, c),
        Some(Event::Closed {
            reason: DisconnectReason::Timeout,
            by_peer: false
        })
    );
}

#[test]
fn bare_heartbeats_from_another_address_keep_nothing_alive() {
    let (mut p, c) = connected(62, client_config().with_preset(Preset::OsfrLibSoe));
    idle_against_libsoe(&mut p, c, STRANGER, 40);
    assert!(matches!(
        Pair::closed(&p.client_events, c),
        Some(Event::Closed {
            reason: DisconnectReason::Timeout,
            ..
        })
    ));
}

#[test]
fn with_the_preset_a_crcless_disconnect_closes_the_session() {
    let (mut p, c) = connected(63, client_config().with_preset(Preset::OsfrLibSoe));
    let id = p.client.session(c).unwrap().session_id();
    // Another session's id, or another address: ignored.
    p.client
        .handle_datagram(p.now, SERVER, &libsoe_disconnect(id ^ 1, 6));
    p.client
        .handle_datagram(p.now, STRANGER, &libsoe_disconnect(id, 6));
    p.flush();
    assert_eq!(p.client.state(c), Some(State::Connected));
    p.client
        .handle_datagram(p.now, SERVER, &libsoe_disconnect(id, 6));
    p.flush();
    assert_eq!(
        Pair::closed(&p.client_events, c),
        Some(Event::Closed {
            reason: DisconnectReason::Application,
            by_peer: true
        })
    );
}

#[test]
fn without_the_preset_a_crcless_disconnect_is_rejected_as_today() {
    let (mut p, c) = connected(64, client_config());
    let id = p.client.session(c).unwrap().session_id();
    let before = p.client.stats(c).unwrap().crc_rejects;
    p.client
        .handle_datagram(p.now, SERVER, &libsoe_disconnect(id, 6));
    p.client.handle_datagram(p.now, SERVER, &[0x00, 0x06]);
    p.flush();
    assert_eq!(p.client.state(c), Some(State::Connected));
    assert_eq!(p.client.stats(c).unwrap().crc_rejects, before + 2);
}

#[test]
fn server_sessions_ignore_the_libsoe_quirks() {
    let mut p = Pair::new(
        common::seed(65),
        server_config().with_preset(Preset::OsfrLibSoe),
        client_config(),
        NetConfig::default(),
    );
    let (_c, s) = p.connect();
    let id = p.server.session(s).unwrap().session_id();
    p.server
        .handle_datagram(p.now, common::CLIENT, &libsoe_disconnect(id, 6));
    p.flush();
    assert_eq!(p.server.state(s), Some(State::Connected));
}

#[test]
fn the_free_realms_preset_caps_the_bytes_in_flight() {
    let c = SessionConfig::preset(Preset::FreeRealms);
    assert_eq!(c.reliable().max_outstanding_bytes, 64 * 1024);
    assert_eq!(c.udp_length(), 512);
}
