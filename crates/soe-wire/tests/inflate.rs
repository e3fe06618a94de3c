//! What other deflaters send inflates: zlib streams from miniz_oxide at every level (stored,
//! fixed-Huffman and dynamic-Huffman blocks), from zlib-rs (a port of zlib-ng, the deflate a C
//! client links), and a hand-built stream of several blocks of different kinds. And on damaged
//! streams our inflater never panics and never accepts what an independent inflater (miniz_oxide)
//! reads differently.

use proptest::prelude::*;
use soe_wire::{CrcLength, FrameConfig, Framer, WireError};

const OPCODE: [u8; 2] = [0x00, 0x09];

fn framer(limit: usize) -> Framer {
    Framer::new(
        FrameConfig::new(0)
            .with_crc_length(CrcLength::NONE)
            .with_compression(true)
            .with_max_inflated(limit),
    )
}

/// `opcode | flag 01 | zlib`, no CRC trailer.
fn datagram(zlib: &[u8]) -> Vec<u8> {
    [&OPCODE[..], &[0x01], zlib].concat()
}

/// Bodies as game traffic mixes them: text, noise, long runs, and text with noise inside.
fn bodies(len: usize) -> [Vec<u8>; 4] {
    let text: Vec<u8> = b"{\"zone\":\"Indar\",\"player\":1234,\"x\":-102.5,\"state\":\"moving\"}"
        .iter()
        .copied()
        .cycle()
        .take(len)
        .collect();
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 24) as u8
    };
    let noise: Vec<u8> = (0..len).map(|_| next()).collect();
    let mixed: Vec<u8> = text
        .iter()
        .enumerate()
        .map(|(i, &b)| if i % 5 == 0 { next() } else { b })
        .collect();
    [text, noise, vec![0x42; len], mixed]
}

const LENGTHS: [usize; 9] = [24, 100, 400, 512, 1500, 4000, 20_000, 65_535, 65_536];

fn opens_to(f: &mut Framer, zlib: &[u8], body: &[u8], what: &str) {
    let d = datagram(zlib);
    let expected = [&OPCODE[..], body].concat();
    assert_eq!(f.open(&d), Ok(&expected[..]), "{what}");
}

#[test]
fn miniz_oxide_streams_at_every_level_inflate() {
    let mut f = framer(64 * 1024);
    for len in LENGTHS {
        for (kind, body) in bodies(len).iter().enumerate() {
            // 0: stored blocks only; 1: fast; 6: the default; 10: the best (dynamic blocks)
            for level in [0u8, 1, 2, 6, 9, 10] {
                let zlib = miniz_oxide::deflate::compress_to_vec_zlib(body, level);
                opens_to(
                    &mut f,
                    &zlib,
                    body,
                    &format!("{len} B kind {kind} level {level}"),
                );
            }
        }
    }
}

#[test]
fn zlib_rs_streams_inflate() {
    let mut f = framer(64 * 1024);
    let mut out = vec![0u8; 70_000];
    for len in LENGTHS {
        for (kind, body) in bodies(len).iter().enumerate() {
            for level in [1, 6, 9] {
                let config = zlib_rs::DeflateConfig::new(level);
                let (zlib, rc) = zlib_rs::compress_slice(&mut out, body, config);
                assert_eq!(rc, zlib_rs::ReturnCode::Ok);
                opens_to(
                    &mut f,
                    zlib,
                    body,
                    &format!("{len} B kind {kind} level {level}"),
                );
            }
        }
    }
}

/// Adler-32 (RFC 1950 § 8.2), written plainly.
fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for &x in data {
        a = (a + u32::from(x)) % 65_521;
        b = (b + a) % 65_521;
    }
    (b << 16) | a
}

#[test]
fn a_stream_of_several_kinds_of_block_inflates() {
    // zlib header | stored block (not final) | an empty stored block (what a sync flush
    // writes) | the rest as miniz_oxide's raw deflate (fixed or dynamic, final) | Adler-32
    let mut f = framer(64 * 1024);
    for body in bodies(3000) {
        let (head, tail) = body.split_at(700);
        let mut zlib = vec![0x78, 0x9C];
        for chunk in [head, &[][..]] {
            let len = chunk.len() as u16;
            zlib.push(0x00);
            zlib.extend_from_slice(&len.to_le_bytes());
            zlib.extend_from_slice(&(!len).to_le_bytes());
            zlib.extend_from_slice(chunk);
        }
        zlib.extend_from_slice(&miniz_oxide::deflate::compress_to_vec(tail, 6));
        zlib.extend_from_slice(&adler32(&body).to_be_bytes());
        opens_to(
            &mut f,
            &zlib,
            &body,
            "stored, empty stored, then compressed",
        );
    }
}

#[test]
fn streams_that_need_more_than_the_first_buffer_inflate() {
    // A tiny stream inflating to 60 KiB: the output buffer grows several times on the way.
    let mut f = framer(64 * 1024);
    let body: Vec<u8> = (0..60_000u32).map(|i| (i / 300) as u8).collect();
    let zlib = miniz_oxide::deflate::compress_to_vec_zlib(&body, 9);
    assert!(zlib.len() * 64 < body.len());
    opens_to(&mut f, &zlib, &body, "60 KiB from a small stream");
    // and a short one afterwards still opens
    let short = &bodies(100)[0];
    let zlib = miniz_oxide::deflate::compress_to_vec_zlib(short, 6);
    opens_to(&mut f, &zlib, short, "short after long");
}

/// A valid stream of one of the body kinds, at a level, to damage.
fn stream() -> impl Strategy<Value = (Vec<u8>, Vec<u8>)> {
    (0..4usize, 24..2000usize, 0..=10u8).prop_map(|(kind, len, level)| {
        let body = bodies(len)[kind].clone();
        let zlib = miniz_oxide::deflate::compress_to_vec_zlib(&body, level);
        (body, zlib)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn damaged_streams_never_open_to_something_else(
        (body, mut zlib) in stream(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 0..8u8), 0..4),
        cut in any::<prop::sample::Index>(),
        cut_it in any::<bool>(),
        limit in prop_oneof![Just(64 * 1024), 0..3000usize],
    ) {
        let damaged = !flips.is_empty() || cut_it;
        for (at, bit) in flips {
            let i = at.index(zlib.len());
            zlib[i] ^= 1 << bit;
        }
        if cut_it {
            zlib.truncate(cut.index(zlib.len() + 1));
        }
        let mut f = framer(limit);
        let sent = datagram(&zlib);
        let reference = miniz_oxide::inflate::decompress_to_vec_zlib(&zlib).ok();
        match f.open(&sent) {
            Ok(opened) => {
                // what we accept, an independent inflater reads the same, within the limit
                prop_assert_eq!(opened.get(..2), Some(&OPCODE[..]));
                prop_assert!(opened.len() - 2 <= limit);
                prop_assert_eq!(reference.as_deref(), opened.get(2..));
            }
            Err(WireError::InflateTooLarge { limit: l }) => {
                prop_assert_eq!(l, limit);
                // every error is reported as one of the two inflate errors
            }
            Err(e) => prop_assert_eq!(e, WireError::InflateFailed),
        }
        // an undamaged stream within the limit always opens to its body
        if !damaged && body.len() <= limit {
            let expected = [&OPCODE[..], &body].concat();
            prop_assert_eq!(f.open(&sent), Ok(&expected[..]));
        }
    }
}
