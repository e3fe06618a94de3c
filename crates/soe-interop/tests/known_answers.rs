//! The known-answer vectors of `tests/fixtures/known-answers.json`, produced by our **session
//! layer** (`soe_session::Session`, sans-I/O) byte for byte: the SessionRequest and
//! SessionResponse of a real H1Z1 login, the acks whose CRCs the vectors give, and the first
//! RC4-encrypted ReliableData under the H1Z1 login key. The vectors that no session can produce
//! on its own (a captured MultiPacket of encrypted data, a captured fragment) are rebuilt with
//! `soe_wire` and framed with our `Framer`. (`soe-wire`'s own tests decode and re-encode the
//! same vectors; these check what our sessions put on the wire.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::Value;
use soe_session::{Event, RandomSource, Session, SessionConfig};
use soe_wire::{
    Ack, Channel, CrcLength, FrameConfig, Framer, MultiPacketWriter, Packet, ReliableData,
};

fn fixture() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/known-answers.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).expect("the fixture")).expect("json")
}

/// The hex of the packet vector named `name`.
fn packet_hex(fx: &Value, name: &str) -> Vec<u8> {
    let v = fx["packets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no packet vector {name}"));
    hex::decode(v["hex"].as_str().unwrap()).unwrap()
}

/// The crc32 vector whose data is `data_hex` (or starts with it, for the long one).
fn crc_vector(fx: &Value, data_prefix: &str) -> Value {
    fx["crc32"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["data"].as_str().unwrap().starts_with(data_prefix))
        .unwrap_or_else(|| panic!("no crc32 vector starting {data_prefix}"))
        .clone()
}

fn unhex(v: &Value, field: &str) -> Vec<u8> {
    hex::decode(v[field].as_str().unwrap_or_else(|| panic!("no {field}"))).unwrap()
}

/// A random source that yields one fixed session id: `Session::client` draws the id with
/// `next_u32`, and this is how a test pins it.
struct FixedId(u32);

impl RandomSource for FixedId {
    fn next_u64(&mut self) -> u64 {
        u64::from(self.0) << 32
    }
}

const H1Z1_SESSION_ID: u32 = 0x3c17_8c63;

/// Our client session of the captured login: `LoginUdp_9`, udp_length 512, session id
/// 0x3c178c63.
fn login_client(now: Instant, key: Option<&[u8]>) -> Session {
    let mut config = SessionConfig::new("LoginUdp_9").with_udp_length(512);
    if let Some(key) = key {
        config = config
            .with_encryption_key(Bytes::copy_from_slice(key))
            .unwrap();
    }
    Session::client(now, Arc::new(config), &mut FixedId(H1Z1_SESSION_ID))
}

/// Our server session answering the captured request with the captured CRC seed (0).
fn login_server(now: Instant, request: &[u8], compression: bool, key: Option<&[u8]>) -> Session {
    let mut config = SessionConfig::new("LoginUdp_9")
        .with_udp_length(512)
        .with_crc_length(CrcLength::TWO)
        .with_compression(compression);
    if let Some(key) = key {
        config = config
            .with_encryption_key(Bytes::copy_from_slice(key))
            .unwrap();
    }
    let Ok(Packet::SessionRequest(r)) = Packet::decode(request) else {
        panic!("the request vector does not decode");
    };
    Session::server(now, Arc::new(config), &r, 0).expect("the request is acceptable")
}

/// Every datagram `session` has to send now.
fn drain(session: &mut Session, now: Instant) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while let Some(n) = session.poll_transmit(now, &mut buf) {
        out.push(buf[..n].to_vec());
    }
    out
}

/// The only datagram `session` has to send now.
fn one(session: &mut Session, now: Instant) -> Vec<u8> {
    let mut all = drain(session, now);
    assert_eq!(all.len(), 1, "datagrams: {all:02x?}");
    all.remove(0)
}

fn events(session: &mut Session) -> Vec<Event> {
    std::iter::from_fn(|| session.poll_event()).collect()
}

#[test]
fn our_client_session_sends_the_captured_session_request() {
    let fx = fixture();
    let now = Instant::now();
    let mut client = login_client(now, None);
    assert_eq!(client.session_id(), H1Z1_SESSION_ID);
    assert_eq!(
        hex::encode(one(&mut client, now)),
        hex::encode(packet_hex(&fx, "SessionRequest"))
    );
}

#[test]
fn our_server_session_sends_the_captured_session_response() {
    let fx = fixture();
    let now = Instant::now();
    let request = packet_hex(&fx, "SessionRequest");
    let mut server = login_server(now, &request, true, None);
    assert_eq!(
        hex::encode(one(&mut server, now)),
        hex::encode(packet_hex(&fx, "SessionResponse"))
    );
}

/// The captured handshake between our two sessions, then the first RC4-encrypted message under
/// the H1Z1 login key: the ciphertext on the wire is the RC4 vector's, framed with the flag
/// byte (compression on, not worth it for random bytes) and the CRC of seed 0.
#[test]
fn our_sessions_replay_the_login_handshake_and_encrypt_like_the_rc4_vector() {
    let fx = fixture();
    let rc4 = &fx["rc4"][0];
    use base64::Engine as _;
    let key = base64::engine::general_purpose::STANDARD
        .decode(rc4["key_base64"].as_str().unwrap())
        .unwrap();
    let plaintext = unhex(rc4, "plaintext");
    let ciphertext = unhex(rc4, "ciphertext");

    let now = Instant::now();
    let mut client = login_client(now, Some(&key));
    let request = one(&mut client, now);
    assert_eq!(request, packet_hex(&fx, "SessionRequest"));
    let mut server = login_server(now, &request, true, Some(&key));
    let response = one(&mut server, now);
    assert_eq!(response, packet_hex(&fx, "SessionResponse"));

    client.handle_datagram(now, &response);
    assert!(matches!(events(&mut client)[..], [Event::Connected]));
    // The client's post-handshake probe completes the server's side.
    for d in drain(&mut client, now) {
        server.handle_datagram(now, &d);
    }
    assert!(matches!(events(&mut server)[..], [Event::Accepted]));
    drain(&mut server, now);

    client
        .send(Channel::ZERO, Bytes::from(plaintext.clone()))
        .unwrap();
    let datagram = one(&mut client, now);
    let mut want = vec![0x00, 0x09, 0x00, 0x00, 0x00];
    want.extend_from_slice(&ciphertext);
    let crc = soe_crypto::Crc32::new(0).checksum(&want);
    want.extend_from_slice(&crc.to_be_bytes()[2..]);
    assert_eq!(hex::encode(&datagram), hex::encode(&want));

    server.handle_datagram(now, &datagram);
    let got = events(&mut server);
    assert!(
        matches!(&got[..], [Event::Message { data, .. }] if data[..] == plaintext[..]),
        "{got:?}"
    );
}

/// A server session with CRC seed 0, fed reliable data with the given sequences at once; the
/// datagrams it sends once its ack delay has passed.
fn acks_for(sequences: &[u16], compression: bool) -> Vec<Vec<u8>> {
    let fx = fixture();
    let now = Instant::now();
    let mut server = login_server(now, &packet_hex(&fx, "SessionRequest"), compression, None);
    drain(&mut server, now);
    let mut framer = Framer::new(
        FrameConfig::new(0)
            .with_crc_length(CrcLength::TWO)
            .with_compression(compression),
    );
    for &sequence in sequences {
        let mut buf = Vec::new();
        Packet::ReliableData(ReliableData {
            channel: Channel::ZERO,
            sequence,
            data: b"data",
        })
        .encode(&mut buf);
        framer.seal(&mut buf, 0);
        server.handle_datagram(now, &buf);
    }
    drain(&mut server, now + Duration::from_millis(50))
}

/// Our session's acks carry the CRCs of the vectors: AcknowledgeAll of 1 (`8e64`) and
/// Acknowledge of 1 (`26b8`) without compression, and AcknowledgeAll of 2 behind a compression
/// flag (the full CRC `6fc0d22f` of `00 15 00 00 02`).
#[test]
fn our_session_acks_match_the_crc_vectors() {
    let fx = fixture();
    let ack_all_1 = crc_vector(&fx, "00150001");
    let mut want = unhex(&ack_all_1, "data");
    want.extend(unhex(&ack_all_1, "crc16"));
    assert_eq!(acks_for(&[0, 1], false), vec![want]);

    // Sequence 1 alone is ahead of the window: a selective Acknowledge.
    let ack_1 = crc_vector(&fx, "00110001");
    let mut want = unhex(&ack_1, "data");
    want.extend(unhex(&ack_1, "crc16"));
    assert_eq!(acks_for(&[1], false), vec![want]);

    let ack_all_2 = crc_vector(&fx, "0015000002");
    let mut want = unhex(&ack_all_2, "data");
    let crc = unhex(&ack_all_2, "crc");
    want.extend_from_slice(&crc[2..]);
    assert_eq!(acks_for(&[0, 1, 2], true), vec![want]);
    assert_eq!(
        soe_crypto::Crc32::new(0).checksum(&unhex(&ack_all_2, "data")),
        u32::from_be_bytes(crc.try_into().unwrap())
    );
}

/// The captured MultiPacket (an AcknowledgeAll and a ReliableData holding a Group of encrypted
/// messages), rebuilt from its two sub-packets with our writer and sealed with our framer.
#[test]
fn the_captured_multipacket_rebuilt_and_sealed() {
    let fx = fixture();
    let v = crc_vector(&fx, "000304");
    let data = unhex(&v, "data");
    // Its parts: `00 03 | 04 | AckAll(0x00ce) | 0x43 | ReliableData(seq 1, payload)`.
    let payload = &data[2 + 1 + 4 + 1 + 4..];
    let mut multi = MultiPacketWriter::new(512);
    assert!(multi.push_packet(&Packet::AcknowledgeAll(Ack {
        channel: Channel::ZERO,
        sequence: 0x00ce,
    })));
    assert!(multi.push_packet(&Packet::ReliableData(ReliableData {
        channel: Channel::ZERO,
        sequence: 1,
        data: payload,
    })));
    let mut buf = Vec::new();
    multi.finish(&mut buf);
    assert_eq!(hex::encode(&buf), hex::encode(&data));
    let mut framer = Framer::new(FrameConfig::new(0).with_crc_length(CrcLength::TWO));
    framer.seal(&mut buf, 0);
    let mut want = data.clone();
    want.extend(unhex(&v, "crc16"));
    assert_eq!(hex::encode(&buf), hex::encode(&want));
}

/// The captured 512-byte fragment: our framer, under the captured seed, gives the captured
/// CRC's low two bytes, and our CRC the full 32 bits.
#[test]
fn the_captured_fragment_sealed_with_its_seed() {
    let fx = fixture();
    let v = crc_vector(&fx, "000d");
    let seed = u32::try_from(v["seed"].as_u64().unwrap()).unwrap();
    let data = unhex(&v, "data");
    let crc = unhex(&v, "crc");
    assert_eq!(
        soe_crypto::Crc32::new(seed).checksum(&data).to_be_bytes()[..],
        crc[..]
    );
    let mut buf = data.clone();
    Framer::new(FrameConfig::new(seed).with_crc_length(CrcLength::TWO)).seal(&mut buf, 0);
    assert_eq!(buf.len(), 512);
    assert_eq!(&buf[510..], &crc[2..]);
}

/// The RC4 vectors with our cipher.
#[test]
fn rc4_vectors() {
    use base64::Engine as _;
    let fx = fixture();
    let vectors = fx["rc4"].as_array().unwrap();
    assert_eq!(vectors.len(), 4);
    for v in vectors {
        let key = match (v["key_base64"].as_str(), v["key_ascii"].as_str()) {
            (Some(b64), _) => base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap(),
            (None, Some(ascii)) => ascii.as_bytes().to_vec(),
            _ => panic!("no key in {v}"),
        };
        let mut data = match v["plaintext_ascii"].as_str() {
            Some(ascii) => ascii.as_bytes().to_vec(),
            None => unhex(v, "plaintext"),
        };
        soe_crypto::Rc4::new(&key).unwrap().apply(&mut data);
        assert_eq!(hex::encode(&data), v["ciphertext"].as_str().unwrap());
    }
}
