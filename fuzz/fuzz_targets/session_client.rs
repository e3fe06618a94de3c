//! A client endpoint after its handshake, driven by a script of datagrams from its server and
//! strangers, time steps and application calls (CRC length 0; compression and RC4 from the
//! first byte).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| soe_session::fuzzing::client(data));
