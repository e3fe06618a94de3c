//! A datagram under several framings, decoded and walked to the last Group item.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| soe_wire::fuzzing::decode_datagram(data));
