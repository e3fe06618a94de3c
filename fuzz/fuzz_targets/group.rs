//! A Group body: every item unescaped.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| soe_wire::fuzzing::group(data));
