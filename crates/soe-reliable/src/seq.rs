//! Full-width sequences: kept as `u64` inside, truncated to `u16` on the wire.

/// The full-width sequence congruent to `wire` (mod 2^16) nearest to `reference`, or `None` when
/// that would be below zero (a sequence from before the stream began). Ties (exactly half the
/// circle away) resolve behind `reference`.
pub(crate) fn expand(reference: u64, wire: u16) -> Option<u64> {
    let delta = wire.wrapping_sub(reference as u16) as i16;
    reference.checked_add_signed(i64::from(delta))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_near_the_reference() {
        assert_eq!(expand(0, 0), Some(0));
        assert_eq!(expand(0, 5), Some(5));
        assert_eq!(expand(0, 0xFFFF), None, "just before the start");
        assert_eq!(expand(10, 3), Some(3));
        assert_eq!(expand(65_530, 2), Some(65_538), "forward across the wrap");
        assert_eq!(
            expand(65_538, 0xFFFA),
            Some(65_530),
            "backward across the wrap"
        );
        assert_eq!(
            expand(0x8000, 0),
            Some(0),
            "half the circle resolves behind"
        );
        assert_eq!(expand(0x8000, 0xFFFF), Some(0xFFFF));
    }

    #[test]
    fn round_trips_across_many_wraps() {
        for wraps in [0u64, 1, 3, 17, 1 << 20] {
            let base = wraps << 16;
            for offset in [0u64, 1, 100, 0x7FFF, 0xFFFF, 0x1_0000, 0x1_7FFE] {
                let reference = base + offset;
                for d in [-0x8000i64, -300, -1, 0, 1, 255, 0x7FFF] {
                    let Some(value) = reference.checked_add_signed(d) else {
                        continue;
                    };
                    assert_eq!(
                        expand(reference, value as u16),
                        Some(value),
                        "reference {reference} delta {d}"
                    );
                }
            }
        }
    }
}
