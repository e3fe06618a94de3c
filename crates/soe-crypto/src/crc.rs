//! The seeded SOE CRC-32 and its truncation.

use crate::CryptoError;

/// The SOE CRC-32 under one seed, with the hasher state after the seed precomputed.
///
/// Cloning is cheap (a few words), so a session keeps one and checks every datagram with
/// [`Crc32::checksum`] at [`crc32fast`] speed.
#[derive(Clone)]
pub struct Crc32 {
    seed: u32,
    seeded: crc32fast::Hasher,
}

impl Crc32 {
    /// Prepares the CRC for `seed`.
    pub fn new(seed: u32) -> Self {
        let mut seeded = crc32fast::Hasher::new();
        seeded.update(&seed.to_le_bytes());
        Self { seed, seeded }
    }

    /// The seed this CRC was prepared with.
    pub fn seed(&self) -> u32 {
        self.seed
    }

    /// The full 32-bit SOE CRC of `data`.
    #[inline]
    pub fn checksum(&self, data: &[u8]) -> u32 {
        let mut hasher = self.seeded.clone();
        hasher.update(data);
        hasher.finalize()
    }
}

impl std::fmt::Debug for Crc32 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Crc32").field("seed", &self.seed).finish()
    }
}

/// The full 32-bit SOE CRC of `data` under `seed`, for one-off use. Prefer [`Crc32`] when the same
/// seed checks many packets.
pub fn soe_crc32(seed: u32, data: &[u8]) -> u32 {
    Crc32::new(seed).checksum(data)
}

/// How many low-order bytes of the CRC a session puts on the wire: 0 to 4, big endian.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CrcLength(u8);

impl CrcLength {
    /// No CRC trailer.
    pub const NONE: Self = Self(0);
    /// Two bytes, the length every known peer negotiates.
    pub const TWO: Self = Self(2);
    /// The full four bytes.
    pub const FOUR: Self = Self(4);

    /// A CRC length of `len` bytes, or `None` when `len > 4`.
    pub const fn new(len: u8) -> Option<Self> {
        if len <= 4 { Some(Self(len)) } else { None }
    }

    /// Like [`CrcLength::new`], with a typed error.
    pub fn try_new(len: u8) -> Result<Self, CryptoError> {
        Self::new(len).ok_or(CryptoError::BadCrcLength { len })
    }

    /// The number of trailer bytes.
    pub const fn get(self) -> usize {
        self.0 as usize
    }

    /// Keeps the low-order bytes of `crc` that this length puts on the wire.
    pub const fn truncate(self, crc: u32) -> u32 {
        match self.0 {
            0 => 0,
            4 => crc,
            n => crc & ((1u32 << (8 * n as u32)) - 1),
        }
    }

    /// Writes the truncated `crc` big endian into the start of `out` and returns the number of
    /// bytes written ([`CrcLength::get`]); the trailer is `out[..n]`, and the rest of `out` is
    /// zeroed.
    #[inline]
    pub fn write(self, crc: u32, out: &mut [u8; 4]) -> usize {
        let n = self.get();
        // The kept bytes shifted to the top, so that they lead the big-endian form: one store
        // of four bytes (the bytes past `n` are zeros, outside the trailer).
        let shift = 8 * (4 - n as u32);
        *out = crc.checked_shl(shift).unwrap_or(0).to_be_bytes();
        n
    }

    /// Reads a big-endian trailer of this length from `bytes` (which must be exactly
    /// [`CrcLength::get`] bytes long; shorter input reads as the value of the bytes present).
    #[inline]
    pub fn read(self, bytes: &[u8]) -> u32 {
        bytes
            .iter()
            .take(self.get())
            .fold(0u32, |acc, &b| (acc << 8) | u32::from(b))
    }
}

impl Default for CrcLength {
    fn default() -> Self {
        Self::TWO
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte-at-a-time table CRC the original library uses, as an independent oracle.
    fn reference(seed: u32, data: &[u8]) -> u32 {
        let mut table = [0u32; 256];
        for (i, slot) in table.iter_mut().enumerate() {
            let mut c = i as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0xedb8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
            *slot = c;
        }
        let mut crc = 0xffff_ffffu32;
        for b in seed.to_le_bytes().iter().chain(data) {
            crc = table[((crc ^ u32::from(*b)) & 0xff) as usize] ^ (crc >> 8);
        }
        !crc
    }

    proptest::proptest! {
        #[test]
        fn matches_table_reference(seed: u32, data: Vec<u8>) {
            proptest::prop_assert_eq!(Crc32::new(seed).checksum(&data), reference(seed, &data));
        }

        #[test]
        fn truncation_round_trips(crc: u32, len in 0u8..=4) {
            let len = CrcLength::new(len).unwrap();
            let mut buf = [0u8; 4];
            let n = len.write(crc, &mut buf);
            proptest::prop_assert_eq!(n, len.get());
            proptest::prop_assert_eq!(len.read(&buf[..n]), len.truncate(crc));
        }
    }

    #[test]
    fn lengths() {
        assert_eq!(CrcLength::new(5), None);
        assert_eq!(
            CrcLength::try_new(9),
            Err(CryptoError::BadCrcLength { len: 9 })
        );
        assert_eq!(CrcLength::TWO.truncate(0x1234_5678), 0x5678);
        assert_eq!(CrcLength::NONE.truncate(0x1234_5678), 0);
        assert_eq!(CrcLength::new(3).unwrap().truncate(0x1234_5678), 0x34_5678);
    }
}
