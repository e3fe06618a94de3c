//! A tour of the codec: the H1Z1 login handshake from the known-answer vectors, then one framed
//! datagram carrying an ack and two reliable messages, printed as hex and decoded back.
//!
//! Run: `cargo run -p soe-wire --example wire_tour`.

use soe_wire::{
    Ack, Channel, CrcLength, FrameConfig, Framer, GroupWriter, MultiPacketWriter, Packet,
    ReliableData, ReliablePayload, SessionRequest, SessionResponse, WireError, reliable,
};

fn main() -> Result<(), WireError> {
    println!("== 1. Handshake (contextless: no compression flag, no CRC) ==\n");

    // The client's SessionRequest, as the H1Z1 login client sends it.
    let request = Packet::SessionRequest(SessionRequest {
        protocol_version: soe_wire::PROTOCOL_VERSION,
        session_id: 0x3C17_8C63,
        udp_length: 512,
        application_protocol: b"LoginUdp_9",
    });
    let mut request_bytes = Vec::new();
    request.encode(&mut request_bytes);
    show("client -> server  SessionRequest", &request_bytes);

    // The server's answer: it echoes the session id and sets up the framing.
    let response = Packet::SessionResponse(SessionResponse {
        session_id: 0x3C17_8C63,
        crc_seed: 0,
        crc_length: 2,
        compression: 1,
        encryption_method: 0,
        udp_length: 512,
        protocol_version: soe_wire::PROTOCOL_VERSION,
    });
    let mut response_bytes = Vec::new();
    response.encode(&mut response_bytes);
    show("server -> client  SessionResponse", &response_bytes);

    for bytes in [&request_bytes, &response_bytes] {
        println!("  decoded: {}", describe(&Packet::decode(bytes)?));
    }

    // Both sides now frame contextual packets the way the SessionResponse says. A real server
    // picks a random seed; this one is fixed so the output is the same on every run.
    let Packet::SessionResponse(negotiated) = response else {
        unreachable!("built above")
    };
    let config = FrameConfig::new(0x6EC1_4BF6)
        .with_crc_length(CrcLength::new(negotiated.crc_length).unwrap_or_default())
        .with_compression(negotiated.compression != 0);
    let mut framer = Framer::new(config);
    println!(
        "\n  framing: CRC seed {:#010x}, {}-byte CRC, compression {}, overhead {} bytes",
        config.crc_seed,
        config.crc_length.get(),
        if config.compression { "on" } else { "off" },
        framer.overhead()
    );

    println!("\n== 2. One datagram: an ack and two messages ==\n");

    // Two application messages; the second starts with 0x00 and so is escaped.
    let messages: [&[u8]; 2] = [
        b"Hello from the login server: your character list follows.",
        b"\x00\x01zero-led message, escaped on the wire",
    ];
    let mut group = GroupWriter::new(512);
    let mut item = Vec::new();
    for m in messages {
        item.clear();
        reliable::escape_into(m, &mut item);
        assert!(group.push(&item), "fits the budget");
    }
    let mut payload = Vec::new();
    group.finish(&mut payload);
    show("reliable payload (Group)", &payload);

    // Bundle an AcknowledgeAll with the ReliableData carrying the Group.
    let mut multi = MultiPacketWriter::new(512 - framer.overhead());
    multi.push_packet(&Packet::AcknowledgeAll(Ack {
        channel: Channel::ZERO,
        sequence: 0x00CE,
    }));
    multi.push_packet(&Packet::ReliableData(ReliableData {
        channel: Channel::ZERO,
        sequence: 1,
        data: &payload,
    }));
    let mut datagram = Vec::new();
    multi.finish(&mut datagram);
    show("MultiPacket before framing", &datagram);
    let unframed_len = datagram.len();

    framer.seal(&mut datagram, 0);
    show("datagram on the wire", &datagram);
    println!(
        "  {} bytes unframed -> {} bytes sent ({})",
        unframed_len,
        datagram.len(),
        match datagram.get(2) {
            Some(0) => "body sent as is",
            _ => "body deflated",
        }
    );

    println!("\n== 3. The receiver's side ==\n");
    let opened = framer.open(&datagram)?;
    println!("  CRC good; opened {} bytes", opened.len());
    let packet = Packet::decode(opened)?;
    println!("  {}", describe(&packet));
    if let Packet::MultiPacket(multi) = packet {
        for sub in multi.packets() {
            let sub = sub?;
            println!("    - {}", describe(&sub));
            if let Packet::ReliableData(data) = sub {
                match ReliablePayload::decode(data.data)? {
                    ReliablePayload::Message(m) => println!("        message {}", text(m)),
                    ReliablePayload::Group(group) => {
                        for item in group.iter() {
                            let message = reliable::unescape(item?)?;
                            println!("        message {}", text(message));
                        }
                    }
                }
            }
        }
    }

    println!("\n== 4. A corrupted datagram ==\n");
    let mut corrupted = datagram.clone();
    if let Some(byte) = corrupted.get_mut(5) {
        *byte ^= 0x01;
    }
    match framer.open(&corrupted) {
        Ok(_) => println!("  opened?!"),
        Err(e) => println!("  one flipped bit: {e}"),
    }
    Ok(())
}

/// Prints a labelled hex dump, 16 bytes a line.
fn show(label: &str, bytes: &[u8]) {
    println!("  {label} ({} bytes):", bytes.len());
    for chunk in bytes.chunks(16) {
        let hex: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
        println!("    {}", hex.join(" "));
    }
}

/// A one-line summary of a packet.
fn describe(packet: &Packet<'_>) -> String {
    match packet {
        Packet::SessionRequest(r) => format!(
            "SessionRequest: protocol {}, session {:#010x}, udp_length {}, application {:?}",
            r.protocol_version,
            r.session_id,
            r.udp_length,
            String::from_utf8_lossy(r.application_protocol)
        ),
        Packet::SessionResponse(r) => format!(
            "SessionResponse: session {:#010x}, CRC seed {:#x}, CRC length {}, compression {}, \
             udp_length {}, protocol {}",
            r.session_id, r.crc_seed, r.crc_length, r.compression, r.udp_length, r.protocol_version
        ),
        Packet::MultiPacket(m) => format!(
            "MultiPacket of {} sub-packets",
            m.iter().filter(Result::is_ok).count()
        ),
        Packet::AcknowledgeAll(a) => format!(
            "AcknowledgeAll: channel {}, everything up to sequence {}",
            a.channel.index(),
            a.sequence
        ),
        Packet::Acknowledge(a) => format!(
            "Acknowledge: channel {}, sequence {}",
            a.channel.index(),
            a.sequence
        ),
        Packet::ReliableData(d) => format!(
            "ReliableData: channel {}, sequence {}, {} bytes of payload",
            d.channel.index(),
            d.sequence,
            d.data.len()
        ),
        other => format!("{other:?}"),
    }
}

/// A message as text where it is printable, with its length.
fn text(bytes: &[u8]) -> String {
    let shown: String = bytes
        .iter()
        .map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                char::from(b).to_string()
            } else {
                format!("\\x{b:02x}")
            }
        })
        .collect();
    format!("({} bytes) \"{shown}\"", bytes.len())
}
