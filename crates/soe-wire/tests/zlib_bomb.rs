//! A compressed body that inflates far past the limit is an error, never a huge allocation.

use soe_wire::{CrcLength, FrameConfig, Framer, MultiPacket, Packet, WireError};

/// `00 09 | flag 01 | zlib(10 MiB of zeros)`, no CRC trailer.
fn bomb() -> Vec<u8> {
    let zlib = miniz_oxide::deflate::compress_to_vec_zlib(&vec![0u8; 10 << 20], 9);
    assert!(zlib.len() < 20 << 10, "deflated to {} bytes", zlib.len());
    [&[0x00, 0x09, 0x01][..], &zlib].concat()
}

#[test]
fn ten_mib_of_zeros_is_inflate_too_large() {
    let datagram = bomb();
    let config = FrameConfig::new(0)
        .with_crc_length(CrcLength::NONE)
        .with_compression(true);
    assert_eq!(config.max_inflated, 64 * 1024, "default limit");
    let mut framer = Framer::new(config);
    assert_eq!(
        framer.open(&datagram),
        Err(WireError::InflateTooLarge { limit: 64 * 1024 })
    );

    // the framer still works afterwards, and the same body within a CRC is refused the same way
    let mut sealed = vec![0x00, 0x15, 0x00, 0x07];
    framer.seal(&mut sealed, 0);
    assert_eq!(framer.open(&sealed), Ok(&[0x00, 0x15, 0x00, 0x07][..]));

    let mut with_crc = Framer::new(config.with_crc_length(CrcLength::TWO));
    let mut framed = datagram.clone();
    let crc = with_crc.crc().checksum(&framed);
    framed.extend_from_slice(&(crc as u16).to_be_bytes());
    assert_eq!(
        with_crc.open(&framed),
        Err(WireError::InflateTooLarge { limit: 64 * 1024 })
    );
}

#[test]
fn limit_is_configurable() {
    let datagram = bomb();
    let mut small = Framer::new(
        FrameConfig::new(0)
            .with_crc_length(CrcLength::NONE)
            .with_compression(true)
            .with_max_inflated(1000),
    );
    assert_eq!(
        small.open(&datagram),
        Err(WireError::InflateTooLarge { limit: 1000 })
    );
    // a MultiPacket whose sub-packets are all fine but whose total is over the limit
    let mut body = vec![0x00, 0x03];
    for _ in 0..6 {
        body.push(200);
        body.extend_from_slice(&[0x00, 0x09, 0x00, 0x01]);
        body.extend_from_slice(&[0x42; 196]);
    }
    let mut roomy = Framer::new(
        FrameConfig::new(0)
            .with_crc_length(CrcLength::NONE)
            .with_compression(true),
    );
    let mut sealed = body.clone();
    roomy.seal(&mut sealed, 0);
    assert_eq!(sealed[2], 0x01, "deflated");
    let opened = roomy.open(&sealed).expect("opens under 64 KiB");
    let Ok(Packet::MultiPacket(multi)) = Packet::decode(opened) else {
        panic!("not a MultiPacket");
    };
    assert_eq!(multi, MultiPacket::new(&body[2..]));
    assert_eq!(
        small.open(&sealed),
        Err(WireError::InflateTooLarge { limit: 1000 })
    );
}
