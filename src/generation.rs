//! [`Generation`]: which period of the state machine a count belongs to. A leaf module.

/// The number of the current count generation. A new generation starts at every state change
/// and whenever a closed-state window expires; a result carries the generation it was
/// admitted in, and one from an older generation is dropped rather than counted.
///
/// Generations count modulo `2^BITS`, so that a generation fits beside two counters in one
/// atomic word (the lock-free lane's). A result is mistaken for a current one only if its
/// permit was held across `2^30` state changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Generation(u32);

impl Generation {
    /// How many bits a generation takes.
    pub(crate) const BITS: u32 = 30;
    const MASK: u32 = (1 << Self::BITS) - 1;

    /// The generation of no period: a shadow call's (a breaker in dry run admits the calls
    /// it would reject with it). Outside the `BITS` bits, it equals no generation, and no
    /// lane cell's tag (whose generation is read masked).
    pub(crate) const SHADOW: Self = Self(u32::MAX);

    /// The generation after this one.
    #[must_use]
    #[inline]
    pub(crate) fn next(self) -> Self {
        Self((self.0 + 1) & Self::MASK)
    }

    /// The generation as a number below `2^BITS`.
    #[inline]
    pub(crate) fn get(self) -> u64 {
        u64::from(self.0)
    }

    /// How many generations this one is after `earlier` (modulo `2^BITS`).
    #[inline]
    pub(crate) fn since(self, earlier: Self) -> u64 {
        u64::from(self.0.wrapping_sub(earlier.0) & Self::MASK)
    }

    /// The generation as it is stored (the shadow generation included), for a word that
    /// keeps it beside something else.
    #[inline(always)]
    pub(crate) const fn raw(self) -> u32 {
        self.0
    }

    /// The generation stored as [`raw`](Self::raw) gave it.
    #[inline(always)]
    pub(crate) fn from_raw(raw: u32) -> Self {
        Self(raw)
    }

    /// The generation whose number is `bits`, for a word that stores it in `BITS` bits
    /// (higher bits are ignored).
    #[inline]
    pub(crate) fn from_bits(bits: u64) -> Self {
        // Truncation intended: the mask keeps the low `BITS` bits.
        Self((bits & u64::from(Self::MASK)) as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::Generation;

    #[test]
    fn generations_wrap_within_their_bits() {
        let last = Generation::from_bits(u64::MAX);
        assert_eq!(last.get(), (1 << 30) - 1);
        assert_eq!(last.next(), Generation::default());
        assert_eq!(Generation::default().next().get(), 1);
    }
}
