//! Which sessions a key decrypts, and what the dissector says of encrypted data it has no key
//! for, or of plaintext decrypted with a key that does not fit.

use std::net::SocketAddr;
use std::time::Duration;

use soe_crypto::Rc4;
use soe_dissect::{DissectConfig, Dissector, Encryption};
use soe_wire::reliable::escape_into;
use soe_wire::{Channel, Packet, ReliableData, SessionRequest, SessionResponse};

const KEY: &[u8] = b"\x17\xbd\x08\x6b\x1b\x94\xf0\x2f\xf0\xec\x53\xd7\x63\x58\x9b\x5f";

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn encode(packet: &Packet<'_>) -> Vec<u8> {
    let mut buf = Vec::new();
    packet.encode(&mut buf);
    buf
}

/// A handshake with CRC length 0 (so data packets need no trailer).
fn handshake(d: &mut Dissector, client: SocketAddr, server: SocketAddr, id: u32) {
    let request = encode(&Packet::SessionRequest(SessionRequest {
        protocol_version: 3,
        session_id: id,
        udp_length: 512,
        application_protocol: b"Test_1",
    }));
    let response = encode(&Packet::SessionResponse(SessionResponse {
        session_id: id,
        crc_seed: 9,
        crc_length: 0,
        compression: 0,
        encryption_method: 0,
        udp_length: 512,
        protocol_version: 3,
    }));
    d.dissect(Duration::ZERO, client, server, &request);
    d.dissect(Duration::ZERO, server, client, &response);
}

/// Game-like plaintext messages: a little-endian opcode, a counter and some text.
fn messages() -> Vec<Vec<u8>> {
    (0..40u32)
        .map(|i| {
            let mut m = vec![0x03, 0x00];
            m.extend_from_slice(&i.to_le_bytes());
            m.extend_from_slice(b"PlayerUpdate position=12.5,0.0,-3.25 ");
            m
        })
        .collect()
}

/// Sends `messages` from `from` to `to` as reliable data, RC4-encrypted with `key` when given;
/// returns the messages the dissector reported, and whether it said they were decrypted.
fn send(
    d: &mut Dissector,
    from: SocketAddr,
    to: SocketAddr,
    messages: &[Vec<u8>],
    key: Option<&[u8]>,
) -> (Vec<Vec<u8>>, Vec<bool>, Vec<String>) {
    let mut cipher = key.map(|k| Rc4::new(k).unwrap());
    let (mut got, mut decrypted, mut notes) = (Vec::new(), Vec::new(), Vec::new());
    for (seq, message) in messages.iter().enumerate() {
        let mut bytes = message.clone();
        if let Some(c) = cipher.as_mut() {
            c.apply(&mut bytes);
        }
        let mut payload = Vec::new();
        escape_into(&bytes, &mut payload);
        let datagram = encode(&Packet::ReliableData(ReliableData {
            channel: Channel::ZERO,
            sequence: seq as u16,
            data: &payload,
        }));
        let record = d.dissect(Duration::from_millis(seq as u64), from, to, &datagram);
        for m in record.messages {
            got.push(hex::decode(&m.hex).unwrap());
            decrypted.push(m.decrypted);
        }
        notes.extend(record.notes);
    }
    (got, decrypted, notes)
}

#[test]
fn a_port_key_decrypts_its_server_only() {
    let (c1, rc4_server) = (addr("10.0.0.1:40000"), addr("10.0.0.9:20260"));
    let (c2, plain_server) = (addr("10.0.0.2:40000"), addr("10.0.0.9:20042"));
    let mut d = Dissector::new(DissectConfig::new().with_key(Some(20260), KEY));
    handshake(&mut d, c1, rc4_server, 1);
    handshake(&mut d, c2, plain_server, 2);
    let sent = messages();
    let (got, decrypted, _) = send(&mut d, c1, rc4_server, &sent, Some(KEY));
    assert_eq!(got, sent, "the RC4 session decrypts to what was sent");
    assert!(decrypted.iter().all(|&d| d));
    let (got, decrypted, _) = send(&mut d, c2, plain_server, &sent, None);
    assert_eq!(got, sent, "the plaintext session is shown as sent");
    assert!(decrypted.iter().all(|&d| !d));
    let summaries = d.summaries();
    assert_eq!(
        summaries[0].directions[0].stats.encryption,
        Encryption::Decrypted
    );
    assert_eq!(
        summaries[1].directions[0].stats.encryption,
        Encryption::Plaintext
    );
}

#[test]
fn without_a_key_encrypted_data_is_called_so() {
    let (client, server) = (addr("10.0.0.1:40000"), addr("10.0.0.9:20260"));
    let mut d = Dissector::new(DissectConfig::new());
    handshake(&mut d, client, server, 1);
    let sent = messages();
    let (got, _, notes) = send(&mut d, client, server, &sent, Some(KEY));
    assert_ne!(got, sent);
    assert!(
        notes.iter().any(|n| n.contains("looks encrypted")),
        "{notes:?}"
    );
    let summary = &d.summaries()[0];
    assert_eq!(
        summary.directions[0].stats.encryption,
        Encryption::LooksEncrypted
    );
    assert!(summary.render().contains("looks encrypted"));
}

#[test]
fn a_key_that_does_not_fit_is_dropped_and_said_so() {
    let (client, server) = (addr("10.0.0.1:40000"), addr("10.0.0.9:20042"));
    let mut d = Dissector::new(DissectConfig::new().with_key(None, KEY));
    handshake(&mut d, client, server, 1);
    let sent = messages();
    let (got, decrypted, notes) = send(&mut d, client, server, &sent, None);
    assert!(
        notes.iter().any(|n| n.contains("does not fit")),
        "{notes:?}"
    );
    let judged = decrypted
        .iter()
        .position(|&d| !d)
        .expect("decryption stops");
    assert!(
        judged > 0 && judged < sent.len() / 2,
        "judged after {judged} messages"
    );
    assert_eq!(got[judged..], sent[judged..], "shown as sent once judged");
    assert!(decrypted[judged..].iter().all(|&d| !d));
    let summary = &d.summaries()[0];
    assert_eq!(
        summary.directions[0].stats.encryption,
        Encryption::KeyDoesNotFit
    );
}

#[test]
fn port_rules_come_before_the_default_key() {
    let other: &[u8] = b"another key";
    let (client, server) = (addr("10.0.0.1:40000"), addr("10.0.0.9:20260"));
    let mut d = Dissector::new(
        DissectConfig::new()
            .with_key(None, other)
            .with_key(Some(20260), KEY),
    );
    handshake(&mut d, client, server, 1);
    let sent = messages();
    let (got, _, _) = send(&mut d, client, server, &sent, Some(KEY));
    assert_eq!(got, sent);
}
