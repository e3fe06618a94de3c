//! Handshake: under loss, connect timeout, refusal, repeated and replaced requests.

mod common;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::{CLIENT, NetConfig, Pair, SERVER, client_config, server_config};
use soe_session::{
    Channel, DisconnectReason, Endpoint, EndpointConfig, Event, RandomSource, Session,
    SessionConfig, SplitMix64, State,
};
use soe_wire::{Packet, SessionRequest};

#[test]
fn handshake_completes_without_loss() {
    let mut p = Pair::new(
        common::seed(1),
        server_config(),
        client_config(),
        NetConfig::default(),
    );
    let (c, s) = p.connect();
    // One round trip for the handshake, and the probe that completes the server side.
    assert!(
        p.elapsed() < Duration::from_millis(200),
        "{:?}",
        p.elapsed()
    );
    assert_eq!(p.client.state(c), Some(State::Connected));
    assert_eq!(p.server.state(s), Some(State::Connected));
    let cs = p.client.session(c).unwrap();
    let ss = p.server.session(s).unwrap();
    assert_eq!(cs.session_id(), ss.session_id());
    assert_eq!(cs.crc_seed(), ss.crc_seed());
    assert_eq!(p.server.half_open(), 0);
    assert_eq!(p.client.remote(c), Some(SERVER));
    assert_eq!(p.server.remote(s), Some(CLIENT));
}

#[test]
fn handshake_completes_under_heavy_loss() {
    for i in 0..20u64 {
        let seed = common::seed(100 + i);
        let mut p = Pair::new(
            seed,
            server_config(),
            client_config(),
            NetConfig::hostile(0.4),
        );
        let (c, s) = p.connect();
        assert_eq!(p.client.state(c), Some(State::Connected), "seed {seed}");
        assert_eq!(p.server.state(s), Some(State::Connected), "seed {seed}");
        // Exactly one session each side, whatever got duplicated or resent.
        assert_eq!(p.server.len(), 1, "seed {seed}");
        assert_eq!(
            p.server_events
                .iter()
                .filter(|(_, e)| *e == Event::Accepted)
                .count(),
            1
        );
    }
}

#[test]
fn client_resends_request_every_second_then_times_out() {
    let mut p = Pair::new(
        common::seed(2),
        server_config(),
        client_config(),
        NetConfig::default(),
    );
    p.server_alive = false; // a server that never answers
    let h = p.client.connect(p.now, SERVER).unwrap();
    let done = p.run_until(Duration::from_secs(30), |p| {
        Pair::closed(&p.client_events, h).is_some()
    });
    assert!(done);
    assert_eq!(
        Pair::closed(&p.client_events, h),
        Some(Event::Closed {
            reason: DisconnectReason::ConnectFail,
            by_peer: false
        })
    );
    let t = p.elapsed();
    assert!(
        t >= Duration::from_secs(10) && t < Duration::from_millis(10_100),
        "{t:?}"
    );
    // One request at 0 s and one every second until 10 s: 10 in all.
    assert_eq!(p.client.endpoint_stats().datagrams_sent, 10);
    // The closed session is reaped.
    assert!(p.client.is_empty());
}

#[test]
fn protocol_mismatch_is_refused_with_a_reason_the_client_sees() {
    let mut p = Pair::new(
        common::seed(3),
        server_config(),
        SessionConfig::new("OtherProto_2"),
        NetConfig::default(),
    );
    let h = p.client.connect(p.now, SERVER).unwrap();
    assert!(p.run_until(Duration::from_secs(5), |p| {
        Pair::closed(&p.client_events, h).is_some()
    }));
    assert_eq!(
        Pair::closed(&p.client_events, h),
        Some(Event::Closed {
            reason: DisconnectReason::ProtocolMismatch,
            by_peer: true
        })
    );
    assert!(p.elapsed() < Duration::from_millis(100));
    assert!(p.server.is_empty(), "no state kept for a refused request");
    assert_eq!(p.server.endpoint_stats().requests_refused, 1);
    assert!(p.server_events.is_empty());
}

#[test]
fn a_server_that_accepts_any_protocol_name_reports_the_clients() {
    // h1z1-server's login server takes LoginUdp_9 and LoginUdp_11 clients on one port and
    // tells them apart by the name in their SessionRequest.
    for (i, name) in ["LoginUdp_9", "LoginUdp_11", "TestProto_1"]
        .into_iter()
        .enumerate()
    {
        let mut p = Pair::new(
            common::seed(30 + i as u64),
            server_config().with_any_application_protocol(true),
            SessionConfig::new(name),
            NetConfig::default(),
        );
        let (c, s) = p.connect();
        assert_eq!(p.client.state(c), Some(State::Connected), "{name}");
        let session = p.server.session(s).unwrap();
        assert_eq!(session.config().application_protocol(), name.as_bytes());
        assert!(session.config().any_application_protocol());
    }
    // The protocol version is still checked.
    let cfg = server_config().with_any_application_protocol(true);
    let req = SessionRequest {
        protocol_version: 2,
        session_id: 7,
        udp_length: 512,
        application_protocol: b"Anything",
    };
    assert_eq!(
        soe_session::check_request(&cfg, &req).unwrap_err(),
        DisconnectReason::ProtocolMismatch
    );
    assert!(
        soe_session::check_request(
            &cfg,
            &SessionRequest {
                protocol_version: 3,
                ..req
            }
        )
        .is_ok()
    );
}

#[test]
fn a_server_that_accepts_any_protocol_version_takes_version_0() {
    // h1z1-server never reads the version; its echo benchmark client sends 0.
    let req = SessionRequest {
        protocol_version: 0,
        session_id: 7,
        udp_length: 512,
        application_protocol: b"TestProto_1",
    };
    let strict = server_config();
    assert!(!strict.any_protocol_version(), "strict by default");
    assert_eq!(
        soe_session::check_request(&strict, &req).unwrap_err(),
        DisconnectReason::ProtocolMismatch
    );
    let lenient = server_config().with_any_protocol_version(true);
    for version in [0, 2, 3, 4, u32::MAX] {
        let req = SessionRequest {
            protocol_version: version,
            ..req
        };
        assert!(
            soe_session::check_request(&lenient, &req).is_ok(),
            "{version}"
        );
    }
    // The name is still checked.
    let other = SessionRequest {
        application_protocol: b"Other",
        ..req
    };
    assert_eq!(
        soe_session::check_request(&lenient, &other).unwrap_err(),
        DisconnectReason::ProtocolMismatch
    );
    // Through an endpoint: a version-0 request is answered and the session opens.
    let now = std::time::Instant::now();
    let mut ep: Endpoint<u32> = Endpoint::new(Arc::new(
        EndpointConfig::server(Arc::new(lenient)).with_rng_seed(9),
    ));
    let mut wire = Vec::new();
    Packet::SessionRequest(req).encode(&mut wire);
    ep.handle_datagram(now, 77, &wire);
    let mut buf = Vec::new();
    let t = ep.poll_transmit(now, &mut buf).unwrap();
    match Packet::decode(&buf[..t.len]).unwrap() {
        Packet::SessionResponse(r) => {
            assert_eq!((r.session_id, r.protocol_version), (7, 3));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn refusal_is_an_unframed_disconnect_no_larger_than_the_request() {
    let mut buf = Vec::new();
    let n = soe_session::encode_refusal(0xDEAD_BEEF, DisconnectReason::ProtocolMismatch, &mut buf);
    assert_eq!(n, 8);
    assert_eq!(buf, [0x00, 0x05, 0xDE, 0xAD, 0xBE, 0xEF, 0x00, 0x10]);

    // A wrong protocol version is refused the same way.
    let cfg = Arc::new(server_config());
    let req = SessionRequest {
        protocol_version: 2,
        session_id: 7,
        udp_length: 512,
        application_protocol: b"TestProto_1",
    };
    assert_eq!(
        soe_session::check_request(&cfg, &req).unwrap_err(),
        DisconnectReason::ProtocolMismatch
    );
    let small = SessionRequest {
        protocol_version: 3,
        udp_length: 10,
        ..req
    };
    assert_eq!(
        soe_session::check_request(&cfg, &small).unwrap_err(),
        DisconnectReason::ConnectionRefused
    );
    let good = SessionRequest {
        protocol_version: 3,
        ..req
    };
    assert!(soe_session::check_request(&cfg, &good).is_ok());
    let mut wire = Vec::new();
    Packet::SessionRequest(good).encode(&mut wire);
    assert!(wire.len() > n);
}

#[test]
fn a_refusal_for_another_session_id_is_ignored() {
    let now = std::time::Instant::now();
    let mut rng = SplitMix64::new(5);
    let mut s = Session::client(now, Arc::new(client_config()), &mut rng);
    let mut buf = Vec::new();
    soe_session::encode_refusal(
        s.session_id().wrapping_add(1),
        DisconnectReason::ProtocolMismatch,
        &mut buf,
    );
    s.handle_datagram(now, &buf);
    assert_eq!(s.state(), State::Handshake);
    soe_session::encode_refusal(
        s.session_id(),
        DisconnectReason::ConnectionRefused,
        &mut buf,
    );
    s.handle_datagram(now, &buf);
    assert_eq!(
        s.poll_event(),
        Some(Event::Closed {
            reason: DisconnectReason::ConnectionRefused,
            by_peer: true
        })
    );
    assert!(s.is_closed());
}

fn request(session_id: u32) -> Vec<u8> {
    let mut wire = Vec::new();
    Packet::SessionRequest(SessionRequest {
        protocol_version: 3,
        session_id,
        udp_length: 512,
        application_protocol: b"TestProto_1",
    })
    .encode(&mut wire);
    wire
}

fn server_endpoint() -> Endpoint<u32> {
    Endpoint::new(Arc::new(
        EndpointConfig::server(Arc::new(server_config())).with_rng_seed(9),
    ))
}

#[test]
fn a_repeated_request_is_answered_again_with_the_same_seed() {
    let now = std::time::Instant::now();
    let mut ep = server_endpoint();
    let mut buf = Vec::new();
    ep.handle_datagram(now, 77, &request(1234));
    let t = ep.poll_transmit(now, &mut buf).unwrap();
    assert_eq!(t.destination, 77);
    let Ok(Packet::SessionResponse(first)) = Packet::decode(&buf[..t.len]) else {
        panic!("not a SessionResponse: {:02x?}", &buf[..t.len]);
    };
    assert!(ep.poll_transmit(now, &mut buf).is_none());
    // The response was lost; the client asks again.
    ep.handle_datagram(now + Duration::from_secs(1), 77, &request(1234));
    let t = ep
        .poll_transmit(now + Duration::from_secs(1), &mut buf)
        .unwrap();
    let Ok(Packet::SessionResponse(second)) = Packet::decode(&buf[..t.len]) else {
        panic!("not a SessionResponse");
    };
    assert_eq!(first, second);
    assert_eq!(first.session_id, 1234);
    assert_eq!(ep.len(), 1);
}

#[test]
fn a_request_with_a_new_session_id_replaces_the_live_session() {
    let mut p = Pair::new(
        common::seed(4),
        server_config(),
        client_config(),
        NetConfig::default(),
    );
    let (_c, s) = p.connect();
    let old_id = p.server.session(s).unwrap().session_id();
    // The client process restarts on the same address and sends a fresh request. The old
    // session is probed first (the dead process cannot answer) and replaced by a request that
    // comes after `replace_after_silence` (2 s) without an answer.
    p.client_alive = false;
    p.server
        .handle_datagram(p.now, CLIENT, &request(old_id ^ 1));
    p.flush();
    assert_eq!(
        Pair::closed(&p.server_events, s),
        None,
        "not at the first request"
    );
    p.run_for(Duration::from_secs(3));
    p.server
        .handle_datagram(p.now, CLIENT, &request(old_id ^ 1));
    p.flush();
    assert_eq!(
        Pair::closed(&p.server_events, s),
        Some(Event::Closed {
            reason: DisconnectReason::NewConnectionAttempt,
            by_peer: true
        })
    );
    let new = p.server.handle_of(CLIENT).expect("new session");
    assert_ne!(new, s);
    assert_eq!(p.server.session(new).unwrap().session_id(), old_id ^ 1);
    assert_eq!(p.server.len(), 1, "the old session is reaped");
    assert_eq!(p.server.half_open(), 1);
}

#[test]
fn requests_per_source_are_rate_limited() {
    let now = std::time::Instant::now();
    let mut ep = Endpoint::<u32>::new(Arc::new(
        EndpointConfig::server(Arc::new(server_config()))
            .with_rng_seed(1)
            .with_requests_per_source_per_minute(3),
    ));
    let mut buf = Vec::new();
    let mut answered = 0;
    for i in 0..10 {
        ep.handle_datagram(now + Duration::from_millis(i), 5, &request(42));
        while ep.poll_transmit(now, &mut buf).is_some() {
            answered += 1;
        }
    }
    assert_eq!(answered, 3);
    assert_eq!(ep.endpoint_stats().requests_rate_limited, 7);
    // A minute later the bucket has refilled.
    ep.handle_datagram(now + Duration::from_secs(61), 5, &request(42));
    assert!(ep.poll_transmit(now, &mut buf).is_some());
}

#[test]
fn ids_and_seeds_are_reproducible_from_the_rng_seed() {
    let now = std::time::Instant::now();
    let cfg = Arc::new(client_config());
    let a = Session::client(now, cfg.clone(), &mut SplitMix64::new(11));
    let b = Session::client(now, cfg.clone(), &mut SplitMix64::new(11));
    let c = Session::client(now, cfg, &mut SplitMix64::new(12));
    assert_eq!(a.session_id(), b.session_id());
    assert_ne!(a.session_id(), c.session_id());
    let mut r = SplitMix64::new(11);
    assert_eq!(a.session_id(), r.next_u32());
}

#[test]
fn a_mismatched_request_from_a_live_sessions_address_does_not_end_it() {
    // A SessionRequest with another session id from the address of a live session replaces
    // it only when it is one we would accept; a mismatched one (stray, or spoofed garbage that
    // happens to decode) is refused and the session lives on. Found by soe-sim.
    let mut p = Pair::new(
        common::seed(91),
        server_config(),
        client_config(),
        NetConfig::default(),
    );
    let (c, s) = p.connect();
    for (version, name) in [(3, &b"OtherProto"[..]), (2, &b"TestProto_1"[..])] {
        let mut wire = Vec::new();
        Packet::SessionRequest(SessionRequest {
            protocol_version: version,
            session_id: 0xBAD0_0001,
            udp_length: 512,
            application_protocol: name,
        })
        .encode(&mut wire);
        let now = p.now;
        p.server.handle_datagram(now, CLIENT, &wire);
        p.run_for(Duration::from_millis(200));
    }
    assert_eq!(
        Pair::closed(&p.server_events, s),
        None,
        "{:?}",
        p.server_events
    );
    assert_eq!(Pair::closed(&p.client_events, c), None);
    p.client
        .send(c, Channel::ZERO, Bytes::from_static(b"still here"))
        .unwrap();
    p.run_for(Duration::from_millis(500));
    assert!(
        p.server_events
            .iter()
            .any(|(h, e)| *h == s
                && matches!(e, Event::Message { data, .. } if data == "still here")),
        "{:?}",
        p.server_events
    );
}
