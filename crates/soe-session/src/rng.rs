//! Randomness: session ids, and the endpoint's secret.
//!
//! The protocol core never reads the OS generator on its own except through this module: a
//! [`Session`](crate::Session) draws its session id from a [`RandomSource`] it is given. An
//! [`Endpoint`](crate::Endpoint) gives its sessions a [`KeyedRandom`] (a CSPRNG keyed once from
//! the OS generator), or a [`SplitMix64`] from a fixed seed for reproducible tests and simulators
//! only (`EndpointConfig::with_rng_seed`, feature `testing`).
//!
//! The endpoint's 128-bit secret (which keys its CRC-seed cookies and the buckets of its reply
//! budget) is drawn straight from the OS generator ([`os_key`]) and from nothing else: no
//! generator whose output goes on the wire ever makes a secret, so no session id an observer
//! sees says anything about it. When the OS generator fails, nothing is drawn from anything
//! weaker: [`os_key`] returns the error and no endpoint is made.

use crate::EndpointError;

/// A source of random 64-bit values.
pub trait RandomSource {
    /// The next value.
    fn next_u64(&mut self) -> u64;

    /// The next 32-bit value (the high half of [`RandomSource::next_u64`]).
    fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }
}

/// SplitMix64: a small, fast generator with a 64-bit state; equal seeds give equal sequences.
///
/// Not for values a peer must not predict: two outputs give its state away. For tests,
/// simulators and network emulators; an endpoint uses it only under
/// `EndpointConfig::with_rng_seed` (feature `testing`).
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator starting from `seed`.
    pub const fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// A generator seeded once from the operating system's random generator (see
    /// [`os_key`]).
    pub fn from_os() -> Result<Self, EndpointError> {
        Ok(Self::new(os_key()? as u64))
    }
}

impl RandomSource for SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// A CSPRNG for values a peer must not predict (session ids): SipHash-2-4, a pseudorandom
/// function, of a counter under a 128-bit key drawn once from the OS generator. Seeing any
/// number of its outputs tells nothing about the next one, nor about the key.
#[derive(Clone)]
pub struct KeyedRandom {
    key: u128,
    counter: u64,
}

impl KeyedRandom {
    /// A generator keyed from the operating system's random generator (see [`os_key`]).
    pub fn from_os() -> Result<Self, EndpointError> {
        Ok(Self::with_key(os_key()?))
    }

    /// A generator under `key`: equal keys give equal sequences.
    pub const fn with_key(key: u128) -> Self {
        Self { key, counter: 0 }
    }
}

impl std::fmt::Debug for KeyedRandom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key stays out of logs.
        f.debug_struct("KeyedRandom").finish_non_exhaustive()
    }
}

impl RandomSource for KeyedRandom {
    fn next_u64(&mut self) -> u64 {
        use std::hash::Hasher;
        let mut h =
            siphasher::sip::SipHasher24::new_with_keys(self.key as u64, (self.key >> 64) as u64);
        h.write_u64(self.counter);
        self.counter = self.counter.wrapping_add(1);
        h.finish()
    }
}

/// 128 bits from the operating system's random generator (`getrandom`), or its error: there
/// is no fallback to anything weaker (the clock, std's hash keys), since everything drawn here
/// keys a secret or names a session that a peer must not predict.
pub fn os_key() -> Result<u128, EndpointError> {
    let mut bytes = [0u8; 16];
    fill(&mut bytes).map_err(|e| EndpointError::RandomUnavailable {
        message: e.to_string(),
        raw_os_error: e.raw_os_error(),
    })?;
    Ok(u128::from_le_bytes(bytes))
}

#[cfg(not(any(test, feature = "testing")))]
fn fill(bytes: &mut [u8]) -> Result<(), getrandom::Error> {
    getrandom::fill(bytes)
}

#[cfg(any(test, feature = "testing"))]
fn fill(bytes: &mut [u8]) -> Result<(), getrandom::Error> {
    if FAIL.with(std::cell::Cell::get) {
        return Err(getrandom::Error::UNSUPPORTED);
    }
    getrandom::fill(bytes)
}

#[cfg(any(test, feature = "testing"))]
thread_local! {
    static FAIL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Makes the OS random generator fail (`on`), or work again, for the calling thread: the
/// failure path of every constructor that draws from it, for tests only (feature `testing`).
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub fn fail_os_random(on: bool) {
    FAIL.with(|f| f.set(on));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_matches_reference_values() {
        // First outputs of SplitMix64 seeded with 0 (from the published reference algorithm).
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(r.next_u64(), 0x06C4_5D18_8009_454F);
    }

    #[test]
    fn equal_seeds_equal_sequences() {
        let mut a = SplitMix64::new(42);
        let mut b = SplitMix64::new(42);
        for _ in 0..100 {
            assert_eq!(a.next_u32(), b.next_u32());
        }
        let mut os1 = SplitMix64::from_os().unwrap();
        let mut os2 = SplitMix64::from_os().unwrap();
        assert_ne!(
            (os1.next_u64(), os1.next_u64()),
            (os2.next_u64(), os2.next_u64())
        );
    }

    #[test]
    fn keyed_random_is_siphash_of_a_counter() {
        use std::hash::Hasher;
        let key = 0x0f0e_0d0c_0b0a_0908_0706_0504_0302_0100u128;
        let mut r = KeyedRandom::with_key(key);
        for counter in 0..4u64 {
            let mut h = siphasher::sip::SipHasher24::new_with_keys(key as u64, (key >> 64) as u64);
            h.write_u64(counter);
            assert_eq!(r.next_u64(), h.finish());
        }
        // Different keys, different streams; the OS keys differ from run to run.
        assert_ne!(
            KeyedRandom::with_key(1).next_u64(),
            KeyedRandom::with_key(2).next_u64()
        );
        assert_ne!(os_key().unwrap(), os_key().unwrap());
        assert!(!format!("{r:?}").contains("key"));
    }

    #[test]
    fn a_failing_generator_is_an_error_not_a_weaker_key() {
        fail_os_random(true);
        let err = os_key().unwrap_err();
        fail_os_random(false);
        assert!(
            matches!(err, EndpointError::RandomUnavailable { .. }),
            "{err}"
        );
        assert!(KeyedRandom::from_os().is_ok());
    }
}
