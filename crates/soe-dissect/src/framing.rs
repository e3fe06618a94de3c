//! Framing: a session's CRC and compression settings, and taking a datagram's framing off.

use soe_crypto::{Crc32, CrcLength};
use soe_wire::{Framer, OpCode, Packet};

use crate::records::{CrcCheck, CrcVerdict};

#[derive(Debug, Clone, Copy)]
pub(crate) struct Framing {
    /// The CRC seed, when known.
    pub(crate) seed: Option<u32>,
    /// The CRC trailer length.
    pub(crate) crc_length: u8,
    /// Whether contextual packets carry a compression flag.
    pub(crate) compression: bool,
}

pub(crate) fn raw_opcode(bytes: &[u8]) -> Option<u16> {
    match bytes {
        [0, lo, ..] => Some(u16::from(*lo)),
        _ => None,
    }
}

/// Whether a datagram is a contextless packet (no flag, no CRC).
pub(crate) fn is_contextless(datagram: &[u8]) -> bool {
    matches!(datagram, [0, lo, ..]
        if OpCode::from_u16(u16::from(*lo)).is_some_and(OpCode::is_contextless))
}

/// A CRC value as hex of its trailer width.
pub(crate) fn crc_hex(value: u32, len: u8) -> String {
    format!("{value:0width$x}", width = usize::from(len) * 2)
}

/// A Heartbeat or selective Acknowledge sent without any CRC (h1z1-server), re-encoded as
/// `opcode | body`.
pub(crate) fn crcless(framer: &Framer, datagram: &[u8]) -> Option<Vec<u8>> {
    framer.open_crcless_packet(datagram).map(|p| {
        let mut bytes = Vec::new();
        p.encode(&mut bytes);
        bytes
    })
}

pub(crate) struct Unframed {
    /// The CRC check.
    pub(crate) crc: CrcCheck,
    /// Whether the body was zlib-compressed.
    pub(crate) compressed: bool,
    /// The inflated length, when compressed.
    pub(crate) inflated_len: Option<usize>,
    /// `opcode | body`, when it could be unframed.
    pub(crate) bytes: Option<Vec<u8>>,
    /// Why unframing failed.
    pub(crate) error: Option<String>,
    /// Whether its packets update the session state.
    pub(crate) feed: bool,
}

impl Unframed {
    /// A datagram without framing.
    pub(crate) fn plain(datagram: &[u8], verdict: CrcVerdict) -> Self {
        Self {
            crc: CrcCheck {
                verdict,
                length: 0,
                expected: None,
                found: None,
            },
            compressed: false,
            inflated_len: None,
            bytes: Some(datagram.to_vec()),
            error: None,
            feed: true,
        }
    }
}

/// Checks the CRC of a contextual datagram and strips its framing: the CRC verdict, then (a
/// bad CRC, or an unknown seed) whether it is a CRC-less quirk, then the flag and inflation.
pub(crate) fn unframe(
    framers: &mut [Framer; 2],
    framing: Framing,
    datagram: &[u8],
    notes: &mut Vec<String>,
) -> Unframed {
    let crc_length = CrcLength::new(framing.crc_length).unwrap_or_else(|| {
        notes.push(format!(
            "CRC length {} is invalid (0 to 4): 2 assumed",
            framing.crc_length
        ));
        CrcLength::TWO
    });
    let framer = &mut framers[usize::from(framing.compression)];
    let (mut out, inner) = check_crc(framing, crc_length, datagram);
    let short = inner.is_none();
    if out.crc.verdict == CrcVerdict::Bad || (short && framing.seed.is_none()) {
        if let Some(quirk) = crcless_quirk(framer, datagram, notes, false) {
            return quirk;
        }
    }
    let Some(inner) = inner else {
        return out;
    };
    let zero_first = datagram.first() == Some(&0);
    match framer.open(inner) {
        Ok(bytes) => {
            out.compressed = zero_first && framing.compression && inner.get(2) != Some(&0);
            if out.compressed {
                out.inflated_len = Some(bytes.len());
            }
            out.bytes = Some(bytes.to_vec());
            out.feed = out.crc.verdict != CrcVerdict::Bad;
        }
        Err(e) => {
            out.error = Some(format!("cannot unframe: {e}"));
        }
    }
    // With the seed unknown, a packet that does not decode may still be a CRC-less quirk.
    let undecodable = out
        .bytes
        .as_deref()
        .is_none_or(|b| Packet::decode(b).is_err());
    if out.crc.verdict == CrcVerdict::Unknown && undecodable {
        if let Some(quirk) = crcless_quirk(framer, datagram, notes, true) {
            return quirk;
        }
    }
    out
}

/// The CRC verdict of a datagram, and the bytes before its trailer (`None` when it is shorter
/// than its framing, which the verdict's error then says).
fn check_crc(
    framing: Framing,
    crc_length: CrcLength,
    datagram: &[u8],
) -> (Unframed, Option<&[u8]>) {
    let crc_len = crc_length.get();
    let length = crc_len as u8;
    let zero_first = datagram.first() == Some(&0);
    let head = if zero_first {
        2 + usize::from(framing.compression)
    } else {
        1
    };
    let mut out = Unframed {
        crc: CrcCheck {
            verdict: CrcVerdict::Unknown,
            length,
            expected: None,
            found: None,
        },
        compressed: false,
        inflated_len: None,
        bytes: None,
        error: None,
        feed: false,
    };
    if datagram.len() < head + crc_len {
        out.error = Some(format!(
            "a datagram of {} bytes is shorter than its framing ({} bytes: opcode{}, {crc_len}-byte CRC)",
            datagram.len(),
            head + crc_len,
            if framing.compression && zero_first {
                ", compression flag"
            } else {
                ""
            }
        ));
        if framing.seed.is_some() {
            out.crc.verdict = CrcVerdict::Bad;
        }
        return (out, None);
    }
    let (inner, trailer) = datagram.split_at(datagram.len() - crc_len);
    if crc_len == 0 {
        out.crc.verdict = CrcVerdict::None;
        return (out, Some(inner));
    }
    let found = crc_length.read(trailer);
    out.crc.found = Some(crc_hex(found, length));
    if let Some(seed) = framing.seed {
        let expected = crc_length.truncate(Crc32::new(seed).checksum(inner));
        out.crc.expected = Some(crc_hex(expected, length));
        out.crc.verdict = if expected == found {
            CrcVerdict::Ok
        } else {
            CrcVerdict::Bad
        };
    }
    (out, Some(inner))
}

/// The datagram read as a Heartbeat or selective Acknowledge sent without CRC (as h1z1-server
/// does), when it is one. `guessed`: the seed is unknown, so this is a reading, not a check.
fn crcless_quirk(
    framer: &Framer,
    datagram: &[u8],
    notes: &mut Vec<String>,
    guessed: bool,
) -> Option<Unframed> {
    let bytes = crcless(framer, datagram)?;
    notes.push(if guessed {
        "read as a Heartbeat or Acknowledge sent without CRC (as h1z1-server does)".into()
    } else {
        "no CRC trailer: a Heartbeat or Acknowledge sent without CRC (as h1z1-server does), \
         accepted by our sessions"
            .into()
    });
    Some(Unframed {
        crc: CrcCheck {
            verdict: CrcVerdict::Missing,
            length: 0,
            expected: None,
            found: None,
        },
        compressed: false,
        inflated_len: None,
        bytes: Some(bytes),
        error: None,
        feed: true,
    })
}
