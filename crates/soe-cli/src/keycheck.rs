//! The RC4 key check between `soe ping`/`soe load` and `soe serve`.
//!
//! An echo cannot tell a wrong key: what the server decrypts with another key (or none) is
//! garbage, but it encrypts the garbage back with the same wrong keystream, and the client's
//! decryption gives its own message back. So before its workload a client checks:
//!
//! 1. It sends [`HELLO`] unreliably (unreliable data is never encrypted), again every
//!    [`HELLO_EVERY`] until answered. A `soe serve` answers [`HELLO_ACK`], unreliably: it now
//!    takes the client's next reliable message as the key probe. A plain echo server sends the
//!    hello back as it came: the key cannot be checked there (the workload goes on, and the
//!    client says so). No answer within [`HELLO_WAIT`]: not checked either.
//! 2. The client sends the probe, reliably: 8 random bytes and 8 bytes derived from them
//!    ([`probe`]), no fixed text, so the probe gives an eavesdropper no known plaintext.
//! 3. The server answers with the probe as it read it, reversed, reliably. Reversing moves each
//!    byte to another keystream position, so a wrong key no longer cancels out: the client gets
//!    its probe reversed back only if both sides read each other's plaintext. The server also
//!    knows: the last 8 bytes it read must derive from the first 8 ([`is_probe`]); it logs and
//!    counts a probe it could not read.
//!
//! Ordinary echo users never send the hello, so the server echoes everything they send. With
//! `--rc4-after-first-message` the probe is the first reliable message: it travels in
//! plaintext, both sides switch RC4 on after it, and the answer comes back encrypted, so the
//! switch is checked too.

use std::time::Duration;

/// The client's unreliable hello: "do you check keys?". Its first byte is not zero, as an
/// unreliable message's must be.
pub(crate) const HELLO: &[u8] = b"\x7fsoe key check?";
/// The server's unreliable answer: "I do: your next reliable message is the probe".
pub(crate) const HELLO_ACK: &[u8] = b"\x7fsoe key check!";
/// How often the hello is sent again while unanswered (it is unreliable).
pub(crate) const HELLO_EVERY: Duration = Duration::from_millis(250);
/// How long the hello waits for its answer at most (less when the command's timeout is
/// shorter): a `soe serve` answers at once, and a server that does not answer (one that does
/// not take part, or whose application is busy) must not hold the workload up long.
pub(crate) const HELLO_WAIT: Duration = Duration::from_secs(1);
/// The probe's length.
pub(crate) const PROBE_LEN: usize = 16;

/// A probe from 8 random bytes: the bytes, then [`derive()`] of them.
pub(crate) fn probe(random: u64) -> [u8; PROBE_LEN] {
    let mut out = [0u8; PROBE_LEN];
    out[..8].copy_from_slice(&random.to_be_bytes());
    out[8..].copy_from_slice(&derive(random).to_be_bytes());
    out
}

/// Whether `bytes` read as a probe: 16 bytes, the last 8 derived from the first 8.
pub(crate) fn is_probe(bytes: &[u8]) -> bool {
    let (Some(head), Some(tail)) = (bytes.first_chunk::<8>(), bytes.get(8..)) else {
        return false;
    };
    bytes.len() == PROBE_LEN && tail == derive(u64::from_be_bytes(*head)).to_be_bytes()
}

/// The answer to a probe: its bytes reversed.
pub(crate) fn answer(probe: &[u8]) -> Vec<u8> {
    probe.iter().rev().copied().collect()
}

/// Whether a received message belongs to the key check (a late hello, echoed or answered),
/// so that a workload skips it.
pub(crate) fn is_noise(message: &[u8]) -> bool {
    message == HELLO || message == HELLO_ACK
}

/// A bijective 64-bit mix (SplitMix64's finaliser): what the probe's second half is.
fn derive(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// What the server's side of the key check makes of one session.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ServerCheck {
    /// No hello (an ordinary client, or not yet).
    #[default]
    Idle,
    /// The hello came: the next reliable message is the probe.
    Awaiting,
    /// The probe read right: the keys agree.
    Read,
    /// The probe did not read as one: the keys differ.
    Unreadable,
}

impl ServerCheck {
    /// Takes an unreliable message; `true` when it is the hello, which gets [`HELLO_ACK`] and
    /// is not echoed.
    pub(crate) fn on_unreliable(&mut self, message: &[u8]) -> bool {
        if message != HELLO {
            return false;
        }
        if *self == Self::Idle {
            *self = Self::Awaiting;
        }
        true
    }

    /// Takes the session's first reliable message; when it is the probe, returns the answer
    /// to send instead of an echo.
    pub(crate) fn on_first_reliable(&mut self, message: &[u8]) -> Option<Vec<u8>> {
        if *self != Self::Awaiting || message.len() != PROBE_LEN {
            return None;
        }
        *self = if is_probe(message) {
            Self::Read
        } else {
            Self::Unreadable
        };
        Some(answer(message))
    }
}

/// What the client's key check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeyCheck {
    /// The server read the probe and this side read its answer: the keys agree (and with
    /// `--rc4-after-first-message`, both switched at the same message).
    Agreed,
    /// The server does not take part (a plain echo server), or did not answer: why.
    Unchecked(String),
    /// The keys differ: what was seen.
    Differ(String),
}

impl KeyCheck {
    /// The client's verdict on the answer to its probe.
    pub(crate) fn of_answer(sent: &[u8], answer_read: &[u8], key: bool) -> Self {
        if answer_read == answer(sent).as_slice() {
            return Self::Agreed;
        }
        Self::Differ(format!(
            "the server's answer to the key probe does not read back ({} key on this side): \
             the RC4 keys differ (one side has --rc4-key and the other none, or another), or \
             only one side uses --rc4-after-first-message",
            if key { "with the" } else { "no" }
        ))
    }

    /// One line for the user.
    pub(crate) fn describe(&self, key: bool) -> String {
        match (self, key) {
            (Self::Agreed, true) => "RC4 key checked: the server reads this side's data".into(),
            (Self::Agreed, false) => {
                "checked: no RC4 on either side, the server reads this side's plaintext".into()
            }
            (Self::Unchecked(why), _) => format!("RC4 key not checked: {why}"),
            (Self::Differ(why), _) => format!("RC4 key mismatch: {why}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_reads_only_as_itself() {
        for seed in [0u64, 1, 0xDEAD_BEEF, u64::MAX] {
            let p = probe(seed);
            assert!(is_probe(&p));
            let mut garbled = p;
            garbled[3] ^= 0x40;
            assert!(!is_probe(&garbled));
            assert!(!is_probe(&p[..15]));
            // the answer is no echo
            assert_ne!(answer(&p), p.to_vec());
        }
        assert!(!is_probe(HELLO));
    }

    #[test]
    fn a_wrong_keystream_does_not_cancel_out_in_the_answer() {
        use soe_crypto::Rc4;
        let p = probe(42);
        for (client_key, server_key) in [
            (Some(&b"one key"[..]), Some(&b"another"[..])),
            (Some(b"one key"), None),
            (None, Some(b"one key")),
            (Some(b"same key"), Some(b"same key")),
        ] {
            let cipher = |key: Option<&[u8]>| key.map(|k| Rc4::new(k).unwrap());
            let (mut c_send, mut c_recv) = (cipher(client_key), cipher(client_key));
            let (mut s_recv, mut s_send) = (cipher(server_key), cipher(server_key));
            let mut wire = p.to_vec();
            if let Some(c) = c_send.as_mut() {
                c.apply(&mut wire);
            }
            if let Some(c) = s_recv.as_mut() {
                c.apply(&mut wire);
            }
            let mut server = ServerCheck::Awaiting;
            let mut back = server.on_first_reliable(&wire).unwrap();
            if let Some(c) = s_send.as_mut() {
                c.apply(&mut back);
            }
            if let Some(c) = c_recv.as_mut() {
                c.apply(&mut back);
            }
            let agree = client_key == server_key;
            let verdict = KeyCheck::of_answer(&p, &back, client_key.is_some());
            assert_eq!(
                verdict == KeyCheck::Agreed,
                agree,
                "{client_key:?} {server_key:?}"
            );
            assert_eq!(server == ServerCheck::Read, agree);
        }
    }

    #[test]
    fn ordinary_clients_are_echoed() {
        let mut server = ServerCheck::default();
        // no hello: a 16-byte first message is an ordinary message
        assert_eq!(server.on_first_reliable(&probe(1)), None);
        assert!(!server.on_unreliable(b"\x01hello"));
        assert!(server.on_unreliable(HELLO));
        assert_eq!(server, ServerCheck::Awaiting);
        // after the hello, a first message of another length is ordinary too
        assert_eq!(server.on_first_reliable(b"short"), None);
    }
}
