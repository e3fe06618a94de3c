//! Entry points for the fuzz targets (feature `fuzzing`). Each runs the decoder over arbitrary
//! bytes and must never panic.
//!
//! Beyond "no panic", they check the codec's own promises on whatever decodes: every packet
//! re-encodes to [`Packet::encoded_len`] bytes that decode to the same value, and an iterator
//! stops after its first error. A broken promise panics, which the fuzzer reports.

use std::cell::RefCell;

use crate::{
    CrcLength, FrameConfig, Framer, Group, MultiPacket, Packet, ReliablePayload, reliable,
};

/// Nesting deeper than this is not walked (a MultiPacket may decode inside a MultiPacket; sessions
/// reject that, and the walk must not recurse on attacker input without bound).
const MAX_DEPTH: usize = 3;

/// The seed every fuzzing framer uses. A fuzzer cannot guess CRCs, so the configs without a CRC
/// trailer are the ones that reach the decoders behind framing.
const SEED: u32 = 0x5EED_0001;

thread_local! {
    /// One framer per config, reused across calls as a session reuses its own.
    static FRAMERS: RefCell<Vec<Framer>> = RefCell::new(configs().into_iter().map(Framer::new).collect());
    /// Scratch for re-encoding.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The framings tried on every datagram: CRC lengths 0, 2 and 4, compression on and off, and a
/// small inflate limit so the limit path runs often.
fn configs() -> [FrameConfig; 6] {
    let with = |crc: CrcLength, compression: bool| {
        FrameConfig::new(SEED)
            .with_crc_length(crc)
            .with_compression(compression)
    };
    [
        with(CrcLength::NONE, false),
        with(CrcLength::NONE, true),
        with(CrcLength::NONE, true).with_max_inflated(300),
        with(CrcLength::TWO, true),
        with(CrcLength::TWO, false),
        with(CrcLength::FOUR, false),
    ]
}

/// Decodes `data` as a datagram under a few framings, walking MultiPackets and Groups.
///
/// Also decodes `data` as already unframed `opcode | body`, so the packet decoders see every
/// input even when a CRC check would stop it.
pub fn decode_datagram(data: &[u8]) {
    walk_packet(data, 0);
    FRAMERS.with(|framers| {
        let Ok(mut framers) = framers.try_borrow_mut() else {
            return;
        };
        for framer in framers.iter_mut() {
            let crcless = framer.open_crcless(data);
            let crcless_packet = framer.open_crcless_packet(data);
            if let Some(bytes) = crcless {
                assert_eq!(Packet::decode(bytes).ok(), crcless_packet);
            }
            if let Ok(inner) = framer.open(data) {
                walk_packet(inner, 0);
            }
        }
    });
}

/// Walks `data` as a MultiPacket body: each sub-packet decoded and walked.
pub fn multipacket(data: &[u8]) {
    walk_multi(MultiPacket::new(data), 0);
    // the same bytes as a reliable payload, a Group body and a whole packet
    walk_reliable(data);
}

/// Walks `data` as a Group body: each item unescaped.
pub fn group(data: &[u8]) {
    walk_group(Group::new(data));
    walk_reliable(data);
}

fn walk_packet(bytes: &[u8], depth: usize) {
    let Ok(packet) = Packet::decode(bytes) else {
        return;
    };
    check_round_trip(&packet);
    match packet {
        Packet::MultiPacket(multi) if depth < MAX_DEPTH => walk_multi(multi, depth + 1),
        Packet::ReliableData(data) => walk_reliable(data.data),
        Packet::ReliableDataFragment(data) => {
            // A first fragment or a later one: only the receiver knows, so try both.
            walk_reliable(data.data);
            if let Ok((_total, rest)) = reliable::split_first_fragment(data.data) {
                walk_reliable(rest);
            }
        }
        Packet::Group(group) => walk_group(group),
        _ => {}
    }
}

fn walk_multi(multi: MultiPacket<'_>, depth: usize) {
    let mut errors = 0;
    for sub in multi.iter() {
        match sub {
            Ok(sub) => walk_packet(sub, depth),
            Err(_) => errors += 1,
        }
    }
    assert!(errors <= 1, "SubPackets went on after an error");
    let mut errors = 0;
    for packet in multi.packets() {
        if packet.is_err() {
            errors += 1;
        }
    }
    assert!(errors <= 1, "Packets went on after an error");
}

fn walk_reliable(payload: &[u8]) {
    match ReliablePayload::decode(payload) {
        Ok(ReliablePayload::Group(group)) => walk_group(group),
        Ok(ReliablePayload::Message(message)) => {
            // unescaping drops at most one byte
            assert!(payload.len() - message.len() <= 1);
        }
        Err(_) => {}
    }
}

fn walk_group(group: Group<'_>) {
    let mut errors = 0;
    for item in group.iter() {
        match item {
            Ok(item) => {
                assert!(!item.is_empty(), "Group yielded an empty item");
                let _ = reliable::unescape(item);
            }
            Err(_) => errors += 1,
        }
    }
    assert!(errors <= 1, "GroupIter went on after an error");
}

/// Re-encodes `packet` and checks it decodes to the same value.
fn check_round_trip(packet: &Packet<'_>) {
    SCRATCH.with(|scratch| {
        let Ok(mut scratch) = scratch.try_borrow_mut() else {
            return;
        };
        scratch.clear();
        let written = packet.encode(&mut scratch);
        assert_eq!(written, packet.encoded_len(), "encoded_len of {packet:?}");
        assert_eq!(scratch.len(), written);
        assert_eq!(
            Packet::decode(&scratch).as_ref(),
            Ok(packet),
            "re-encoding changed the packet"
        );
    });
}
