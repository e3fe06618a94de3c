//! The two cryptographic primitives of the SOE protocol (version 3).
//!
//! * [`Crc32`]: the seeded SOE CRC-32. It equals the standard (zlib/IEEE) CRC-32 of the seed's four
//!   little-endian bytes followed by the data, so it runs on [`crc32fast`] at hardware speed. The
//!   hasher state after the seed is kept, so checking a packet costs one pass over its bytes.
//!   [`CrcLength`] truncates it to the 0..=4 bytes a session negotiated, written big endian.
//! * [`Rc4`]: the RC4 stream cipher that encrypts reliable application data. One instance is one
//!   key stream that runs on across calls, as the protocol keeps one cipher state per direction for
//!   the whole session.
//!
//! ```
//! use soe_crypto::{Crc32, CrcLength, Rc4};
//!
//! let crc = Crc32::new(0);
//! assert_eq!(crc.checksum(&[0x00, 0x15, 0x00, 0x00, 0x02]), 0x6fc0_d22f);
//!
//! let len = CrcLength::new(2).unwrap();
//! let mut trailer = [0u8; 4];
//! let n = len.write(0x6fc0_d22f, &mut trailer);
//! assert_eq!(&trailer[..n], &[0xd2, 0x2f]);
//!
//! let mut rc4 = Rc4::new(b"Key").unwrap();
//! let mut data = *b"Plaintext";
//! rc4.apply(&mut data);
//! assert_eq!(data, [0xbb, 0xf3, 0x16, 0xe8, 0xd9, 0x40, 0xaf, 0x0a, 0xd3]);
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(not(test), warn(clippy::unwrap_used))]

// The README's examples run as doc tests, so the published front page stays true to the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod crc;
mod rc4;

pub use crc::{Crc32, CrcLength, soe_crc32};
pub use rc4::Rc4;

/// Errors of this crate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CryptoError {
    /// An RC4 key must have at least one byte.
    #[error("RC4 key is empty; a key needs 1 to 256 bytes")]
    EmptyKey,
    /// An RC4 key has at most 256 bytes.
    #[error("RC4 key has {len} bytes; a key needs 1 to 256 bytes")]
    KeyTooLong {
        /// The length of the rejected key.
        len: usize,
    },
    /// A CRC length must be 0 to 4 bytes.
    #[error("CRC length {len} is out of range; it must be 0 to 4 bytes")]
    BadCrcLength {
        /// The rejected length.
        len: u8,
    },
}
