//! The packet vectors of `tests/fixtures/known-answers.json`: decoded field by field, re-encoded to
//! the same bytes, and framed with the seeds and CRC lengths the vectors were captured under.

use serde_json::Value;
use soe_wire::{
    Ack, Channel, CrcLength, FrameConfig, Framer, Group, MultiPacket, MultiPacketWriter, OpCode,
    Packet, ReliablePayload, SessionRequest, SessionResponse, reliable,
};

fn fixture() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/known-answers.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("json")
}

/// The vector of `section` whose `key` field equals `value`.
fn vector(fx: &Value, section: &str, key: &str, value: &str) -> Value {
    fx[section]
        .as_array()
        .expect("section")
        .iter()
        .find(|v| v[key].as_str() == Some(value))
        .unwrap_or_else(|| panic!("no {section} vector with {key} = {value}"))
        .clone()
}

/// The crc32 vector whose data starts with `prefix`.
fn crc_vector(fx: &Value, prefix: &str) -> (u32, Vec<u8>, Value) {
    let v = fx["crc32"]
        .as_array()
        .expect("crc32")
        .iter()
        .find(|v| v["data"].as_str().is_some_and(|d| d.starts_with(prefix)))
        .unwrap_or_else(|| panic!("no crc32 vector starting {prefix}"))
        .clone();
    let seed = u32::try_from(v["seed"].as_u64().expect("seed")).expect("u32 seed");
    let data = hex::decode(v["data"].as_str().expect("data")).expect("hex");
    (seed, data, v)
}

fn field_u32(fields: &Value, name: &str) -> u32 {
    u32::try_from(fields[name].as_u64().expect(name)).expect("u32 field")
}

fn field_u8(fields: &Value, name: &str) -> u8 {
    u8::try_from(fields[name].as_u64().expect(name)).expect("u8 field")
}

fn encode(packet: &Packet<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    let n = packet.encode(&mut out);
    assert_eq!(n, out.len());
    assert_eq!(n, packet.encoded_len());
    out
}

#[test]
fn session_request() {
    let fx = fixture();
    let v = vector(&fx, "packets", "name", "SessionRequest");
    let bytes = hex::decode(v["hex"].as_str().expect("hex")).expect("hex");
    let fields = &v["fields"];
    let packet = Packet::decode(&bytes).expect("decodes");
    let Packet::SessionRequest(request) = packet else {
        panic!("decoded as {packet:?}");
    };
    assert_eq!(
        request.protocol_version,
        field_u32(fields, "protocol_version_or_crc_bytes")
    );
    assert_eq!(request.session_id, field_u32(fields, "session_id"));
    assert_eq!(request.udp_length, field_u32(fields, "udp_length"));
    assert_eq!(
        request.application_protocol,
        fields["application_protocol"]
            .as_str()
            .expect("name")
            .as_bytes()
    );
    assert_eq!(packet.opcode(), Some(OpCode::SessionRequest));

    // built from the listed fields, our encoder gives the captured bytes
    let built = Packet::SessionRequest(SessionRequest {
        protocol_version: field_u32(fields, "protocol_version_or_crc_bytes"),
        session_id: field_u32(fields, "session_id"),
        udp_length: field_u32(fields, "udp_length"),
        application_protocol: fields["application_protocol"]
            .as_str()
            .expect("name")
            .as_bytes(),
    });
    assert_eq!(encode(&built), bytes);

    // contextless: every framing passes it through untouched
    let mut framer = Framer::new(FrameConfig::new(7).with_compression(true));
    assert_eq!(framer.open(&bytes), Ok(&bytes[..]));
    let mut sealed = bytes.clone();
    framer.seal(&mut sealed, 0);
    assert_eq!(sealed, bytes);
}

#[test]
fn session_response() {
    let fx = fixture();
    let v = vector(&fx, "packets", "name", "SessionResponse");
    let bytes = hex::decode(v["hex"].as_str().expect("hex")).expect("hex");
    let fields = &v["fields"];
    let expected = SessionResponse {
        session_id: field_u32(fields, "session_id"),
        crc_seed: field_u32(fields, "crc_seed"),
        crc_length: field_u8(fields, "crc_length"),
        compression: field_u8(fields, "compression"),
        encryption_method: field_u8(fields, "encryption_method"),
        udp_length: field_u32(fields, "udp_length"),
        protocol_version: field_u32(fields, "protocol_version"),
    };
    assert_eq!(
        Packet::decode(&bytes),
        Ok(Packet::SessionResponse(expected))
    );
    assert_eq!(encode(&Packet::SessionResponse(expected)), bytes);
}

/// A config with `seed`, a two-byte CRC and compression off, as the crc16 vectors were sealed.
fn crc16(seed: u32) -> Framer {
    Framer::new(
        FrameConfig::new(seed)
            .with_crc_length(CrcLength::TWO)
            .with_compression(false),
    )
}

fn crc16_trailer(v: &Value) -> Vec<u8> {
    hex::decode(v["crc16"].as_str().expect("crc16")).expect("hex")
}

#[test]
fn multipacket_vector() {
    let fx = fixture();
    let (seed, data, v) = crc_vector(&fx, "0003");
    assert_eq!(seed, 0);
    let datagram = [data.clone(), crc16_trailer(&v)].concat();

    let mut framer = crc16(seed);
    let opened = framer.open(&datagram).expect("CRC checks").to_vec();
    assert_eq!(opened, data);
    let Ok(Packet::MultiPacket(multi)) = Packet::decode(&opened) else {
        panic!("not a MultiPacket");
    };
    let subs: Vec<&[u8]> = multi.iter().collect::<Result<_, _>>().expect("walks");
    assert_eq!(subs.len(), 2);

    // an AcknowledgeAll, then a ReliableData whose payload is a Group
    let Ok(Packet::AcknowledgeAll(ack)) = Packet::decode(subs[0]) else {
        panic!("first is {:?}", Packet::decode(subs[0]));
    };
    assert_eq!(ack.channel, Channel::ZERO);
    assert_eq!(ack.sequence, 0x00CE);
    let Ok(Packet::ReliableData(data_packet)) = Packet::decode(subs[1]) else {
        panic!("second is {:?}", Packet::decode(subs[1]));
    };
    assert_eq!(data_packet.channel, Channel::ZERO);
    assert_eq!(data_packet.sequence, 1);
    let Ok(ReliablePayload::Group(group)) = ReliablePayload::decode(data_packet.data) else {
        panic!("payload is not a Group");
    };
    let items: Vec<&[u8]> = group.iter().collect::<Result<_, _>>().expect("items");
    assert!(items.len() >= 2, "{} items", items.len());
    let item_bytes: usize = items.iter().map(|i| i.len() + 1).sum();
    assert_eq!(
        item_bytes,
        group.body().len(),
        "one-byte lengths cover the body"
    );
    assert_eq!(group, Group::new(&data_packet.data[2..]));

    // the decoded packets through the typed iterator
    let packets: Vec<Packet<'_>> = multi.packets().collect::<Result<_, _>>().expect("packets");
    assert_eq!(
        packets[0],
        Packet::AcknowledgeAll(Ack {
            channel: Channel::ZERO,
            sequence: 0xCE
        })
    );

    // rebuilt with the writer: the same bytes, and sealed: the same datagram
    let mut writer = MultiPacketWriter::new(512);
    assert!(writer.push(subs[0]));
    assert!(writer.push_packet(&Packet::ReliableData(data_packet)));
    let mut rebuilt = Vec::new();
    assert_eq!(writer.finish(&mut rebuilt), data.len());
    assert_eq!(rebuilt, data);
    assert!(writer.is_empty());
    assert_eq!(
        encode(&Packet::MultiPacket(MultiPacket::new(&data[2..]))),
        data
    );
    framer.seal(&mut rebuilt, 0);
    assert_eq!(rebuilt, datagram);
}

#[test]
fn ack_vectors_seal_to_data_and_crc16() {
    let fx = fixture();
    for (prefix, make) in [
        ("0011", Packet::Acknowledge as fn(Ack) -> Packet<'static>),
        ("0015", Packet::AcknowledgeAll),
    ] {
        let (seed, data, v) = crc_vector(&fx, &format!("{prefix}0001"));
        let packet = make(Ack {
            channel: Channel::ZERO,
            sequence: 1,
        });
        assert_eq!(Packet::decode(&data), Ok(packet));
        let mut framer = crc16(seed);
        let mut buf = vec![0xAB];
        packet.encode(&mut buf);
        framer.seal(&mut buf, 1);
        assert_eq!(buf[1..], [data.clone(), crc16_trailer(&v)].concat(), "{v}");
        assert_eq!(framer.open(&buf[1..]), Ok(&data[..]));
    }
}

#[test]
fn compressed_ack_vector_with_full_crc() {
    // `00 15 00 00 02` is an AcknowledgeAll of sequence 2 with a zero compression flag; sealed with
    // a four-byte CRC its trailer is the full CRC of the vector.
    let fx = fixture();
    let (seed, data, v) = crc_vector(&fx, "0015000002");
    let crc = hex::decode(v["crc"].as_str().expect("crc")).expect("hex");
    let mut framer = Framer::new(
        FrameConfig::new(seed)
            .with_crc_length(CrcLength::FOUR)
            .with_compression(true),
    );
    let mut buf = Vec::new();
    Packet::AcknowledgeAll(Ack {
        channel: Channel::ZERO,
        sequence: 2,
    })
    .encode(&mut buf);
    framer.seal(&mut buf, 0);
    assert_eq!(buf, [data, crc].concat());
    assert_eq!(framer.open(&buf), Ok(&[0x00, 0x15, 0x00, 0x02][..]));
}

#[test]
fn fragment_vector_through_open() {
    let fx = fixture();
    let (seed, data, v) = crc_vector(&fx, "000d");
    assert_eq!(seed, 1_858_192_374);
    let full = hex::decode(v["crc"].as_str().expect("crc")).expect("hex");
    let datagram = [&data[..], &full[2..]].concat();
    assert_eq!(datagram.len(), 512);

    // The session had compression on (the login's SessionResponse says so): the byte after the
    // opcode is a zero flag, and the first fragment's total length follows the sequence.
    let mut framer = Framer::new(
        FrameConfig::new(seed)
            .with_crc_length(CrcLength::TWO)
            .with_compression(true),
    );
    assert_eq!(data[2], 0, "compression flag");
    let unflagged = [&data[..2], &data[3..]].concat();
    let opened = framer.open(&datagram).expect("CRC checks");
    assert_eq!(opened, &unflagged[..]);
    let Ok(Packet::ReliableDataFragment(fragment)) = Packet::decode(opened) else {
        panic!("not a fragment");
    };
    assert_eq!(fragment.channel, Channel::ZERO);
    assert_eq!(fragment.sequence, 0);
    let (total, rest) = reliable::split_first_fragment(fragment.data).expect("first fragment");
    assert_eq!(total, 1407);
    assert_eq!(rest.len(), 512 - 2 - 1 - 2 - 4 - 2);

    // one flipped bit anywhere is caught
    for at in [0, 2, 100, 509, 511] {
        let mut bad = datagram.clone();
        bad[at] ^= 0x10;
        assert!(
            matches!(
                framer.open(&bad),
                Err(soe_wire::WireError::CrcMismatch { .. })
            ),
            "flip at {at}"
        );
    }
    // and sealed by us (encrypted data does not deflate, so the flag stays zero) the fragment
    // gives back the captured datagram
    let mut sealed = unflagged.clone();
    framer.seal(&mut sealed, 0);
    assert_eq!(sealed, datagram);
}
