//! Entry points for the fuzz targets (feature `fuzzing`). Each runs the decoder over arbitrary
//! bytes and must never panic.

/// Decodes `data` as a datagram under a few framings, walking MultiPackets and Groups.
pub fn decode_datagram(data: &[u8]) {
    todo!()
}
