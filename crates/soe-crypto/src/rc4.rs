//! The RC4 stream cipher.

use crate::CryptoError;

/// One RC4 key stream. Every call to [`Rc4::apply`] continues where the last one stopped, as the
/// protocol keeps one cipher state per direction for a whole session.
///
/// `Debug` never shows key or state bytes.
#[derive(Clone)]
pub struct Rc4 {
    s: [u8; 256],
    i: u8,
    j: u8,
}

impl Rc4 {
    /// Runs the key schedule for `key` (1 to 256 bytes).
    pub fn new(key: &[u8]) -> Result<Self, CryptoError> {
        if key.is_empty() {
            return Err(CryptoError::EmptyKey);
        }
        if key.len() > 256 {
            return Err(CryptoError::KeyTooLong { len: key.len() });
        }
        let mut s = [0u8; 256];
        for (i, slot) in s.iter_mut().enumerate() {
            *slot = i as u8;
        }
        let mut j = 0u8;
        for i in 0..256 {
            j = j.wrapping_add(s[i]).wrapping_add(key[i % key.len()]);
            s.swap(i, usize::from(j));
        }
        Ok(Self { s, i: 0, j: 0 })
    }

    /// XORs `data` in place with the next `data.len()` bytes of the key stream: encrypts plaintext,
    /// decrypts ciphertext.
    #[inline]
    pub fn apply(&mut self, data: &mut [u8]) {
        let (mut i, mut j) = (self.i, self.j);
        let s = &mut self.s;
        for byte in data {
            i = i.wrapping_add(1);
            j = j.wrapping_add(s[usize::from(i)]);
            s.swap(usize::from(i), usize::from(j));
            let k = s[usize::from(s[usize::from(i)].wrapping_add(s[usize::from(j)]))];
            *byte ^= k;
        }
        self.i = i;
        self.j = j;
    }
}

impl std::fmt::Debug for Rc4 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Rc4 { .. }")
    }
}

impl Drop for Rc4 {
    fn drop(&mut self) {
        // Best effort: do not leave key-derived state behind in freed memory.
        self.s = [0; 256];
        self.i = 0;
        self.j = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_errors() {
        assert_eq!(Rc4::new(b"").err(), Some(CryptoError::EmptyKey));
        assert_eq!(
            Rc4::new(&[0; 257]).err(),
            Some(CryptoError::KeyTooLong { len: 257 })
        );
        assert!(Rc4::new(&[0; 256]).is_ok());
    }

    #[test]
    fn debug_hides_state() {
        let rc4 = Rc4::new(b"Secret").unwrap();
        assert_eq!(format!("{rc4:?}"), "Rc4 { .. }");
    }

    proptest::proptest! {
        #[test]
        fn stream_runs_on_across_calls(key in proptest::collection::vec(proptest::prelude::any::<u8>(), 1..64),
                                       data: Vec<u8>, split in 0usize..1000) {
            let split = split.min(data.len());
            let mut whole = data.clone();
            Rc4::new(&key).unwrap().apply(&mut whole);
            let mut parts = data.clone();
            let mut rc4 = Rc4::new(&key).unwrap();
            let (a, b) = parts.split_at_mut(split);
            rc4.apply(a);
            rc4.apply(b);
            proptest::prop_assert_eq!(&whole, &parts);
            let mut back = whole.clone();
            Rc4::new(&key).unwrap().apply(&mut back);
            proptest::prop_assert_eq!(back, data);
        }
    }
}
