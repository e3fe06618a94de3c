//! The passive dissector fed arbitrary datagram streams after a learned handshake (CRC length
//! 0; compression and RC4 keys from the first byte), with small memory limits: no panic, and
//! memory within the limits after every datagram.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| soe_dissect::fuzzing::stream(data));
