//! The CRC and RC4 known-answer vectors from `tests/fixtures/known-answers.json`.

use base64::Engine as _;
use soe_crypto::{Crc32, CrcLength, Rc4};

fn fixture() -> serde_json::Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/known-answers.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("json")
}

#[test]
fn crc_vectors() {
    let fx = fixture();
    let vectors = fx["crc32"].as_array().expect("crc32 array");
    assert!(vectors.len() >= 5);
    for v in vectors {
        let seed = v["seed"].as_u64().expect("seed") as u32;
        let data = hex::decode(v["data"].as_str().expect("data")).expect("hex");
        let crc = Crc32::new(seed).checksum(&data);
        if let Some(full) = v["crc"].as_str() {
            assert_eq!(format!("{crc:08x}"), full, "{v}");
            // The note on the 512-byte fragment: its on-wire trailer is the low two bytes.
            let mut out = [0u8; 4];
            let n = CrcLength::TWO.write(crc, &mut out);
            assert_eq!(hex::encode(&out[..n]), full[4..]);
        }
        if let Some(short) = v["crc16"].as_str() {
            let mut out = [0u8; 4];
            let n = CrcLength::TWO.write(crc, &mut out);
            assert_eq!(hex::encode(&out[..n]), short, "{v}");
        }
    }
}

#[test]
fn rc4_vectors() {
    let fx = fixture();
    let vectors = fx["rc4"].as_array().expect("rc4 array");
    assert!(vectors.len() >= 4);
    for v in vectors {
        let key = match (v["key_base64"].as_str(), v["key_ascii"].as_str()) {
            (Some(b64), _) => base64::engine::general_purpose::STANDARD
                .decode(b64)
                .expect("base64"),
            (None, Some(ascii)) => ascii.as_bytes().to_vec(),
            _ => panic!("vector without key: {v}"),
        };
        let plain = match (v["plaintext"].as_str(), v["plaintext_ascii"].as_str()) {
            (Some(h), _) => hex::decode(h).expect("hex"),
            (None, Some(ascii)) => ascii.as_bytes().to_vec(),
            _ => panic!("vector without plaintext: {v}"),
        };
        let expected = hex::decode(v["ciphertext"].as_str().expect("ciphertext")).expect("hex");
        let mut data = plain.clone();
        Rc4::new(&key).expect("key").apply(&mut data);
        assert_eq!(data, expected, "{v}");
        // Same stream, fed one byte at a time.
        let mut rc4 = Rc4::new(&key).expect("key");
        let mut bytewise = plain.clone();
        for b in bytewise.chunks_mut(1) {
            rc4.apply(b);
        }
        assert_eq!(bytewise, expected);
    }
}
