//! A MultiPacket body: every sub-packet decoded and walked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| soe_wire::fuzzing::multipacket(data));
