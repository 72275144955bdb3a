//! [`Jitter`]: a seeded random spread of the open periods a breaker computes itself, so that
//! breakers in a fleet and endpoints in a pool do not probe in lockstep.
//!
//! Each open period is drawn from `[period × (1 − fraction), period]`: never longer than
//! configured, so a configured period stays an upper bound (gobreaker's times, with a
//! fraction of zero, exactly). The draw is a pure function of the seed, the count of draws so
//! far and the period (SplitMix64, as the throttle's generator), so that the same inputs give
//! the same times, live or replayed. No dependency, no clock, no lock.

use crate::error::{ConfigError, Number};
use crate::nanos::Nanos;

/// The spread of a breaker's open periods: a fraction within `[0, 1]` (0: none, every period
/// exact) and the seed of its draws.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Jitter {
    fraction: f64,
    seed: u64,
}

impl PartialEq for Jitter {
    /// Bit for bit (the fraction is sanitized: never a NaN).
    fn eq(&self, other: &Self) -> bool {
        self.fraction.to_bits() == other.fraction.to_bits() && self.seed == other.seed
    }
}

impl Eq for Jitter {}

impl Jitter {
    /// No spread: every period exact.
    pub(crate) const NONE: Self = Self {
        fraction: 0.0,
        seed: 0,
    };

    /// A spread of `fraction` (read leniently: see [`lenient`]) drawn from `seed`.
    pub(crate) fn new(fraction: f64, seed: u64) -> Self {
        Self {
            // `+ 0.0` makes a negative zero a zero (equal bit for bit).
            fraction: lenient(fraction, 0.0) + 0.0,
            seed,
        }
    }

    /// Whether it spreads nothing: every period exact, whatever its seed.
    pub(crate) fn is_exact(&self) -> bool {
        self.fraction == 0.0
    }

    /// The `n`-th open period (counted from 0) of length `period`: drawn uniformly from
    /// `[period − ⌊period × fraction⌋, period]`, to the nanosecond; `period` itself without a
    /// spread.
    pub(crate) fn spread(&self, period: Nanos, n: u64) -> Nanos {
        if self.fraction == 0.0 || period == 0 || period == Nanos::MAX {
            return period;
        }
        // At most `period`: the fraction is within [0, 1], and the product rounds down.
        let span = ((period as f64) * self.fraction) as u64;
        let span = span.min(period);
        // Uniform in [0, span]: the draw's top bits scaled, as a 128-bit product.
        let cut = ((u128::from(span) + 1) * u128::from(draw(self.seed, n))) >> 64;
        period - cut as u64
    }
}

/// The `n`-th output of SplitMix64 (Steele, Lea and Flood, 2014) seeded with `seed`.
pub(crate) fn draw(seed: u64, n: u64) -> u64 {
    const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut z = seed.wrapping_add(n.wrapping_add(1).wrapping_mul(GAMMA));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The default seed of a breaker named `name`: the 64-bit FNV-1a hash of its bytes, stable
/// across builds and platforms, so that breakers of different names spread differently with
/// the same settings.
pub(crate) fn seed_of(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A fraction as the lenient setters read it: a NaN means `default`, anything else is
/// clamped into `[0, 1]`.
pub(crate) fn lenient(fraction: f64, default: f64) -> f64 {
    if fraction.is_nan() {
        default
    } else {
        fraction.clamp(0.0, 1.0)
    }
}

/// Checks a jitter fraction strictly: finite and within `[0, 1]`.
///
/// # Errors
///
/// A [`ConfigError`] naming `jitter`.
pub(crate) fn check(fraction: f64) -> Result<(), ConfigError> {
    if fraction.is_finite() && (0.0..=1.0).contains(&fraction) {
        return Ok(());
    }
    Err(ConfigError::new(
        "jitter",
        Number(fraction),
        "must be a number within [0, 1]",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_spread_keeps_the_period_exact() {
        let none = Jitter::new(0.0, 7);
        assert_eq!(
            none,
            Jitter {
                fraction: 0.0,
                seed: 7
            }
        );
        for n in 0..100 {
            assert_eq!(none.spread(1_000_000, n), 1_000_000);
        }
        assert_eq!(Jitter::NONE.spread(5, 3), 5);
    }

    #[test]
    fn a_spread_stays_within_its_bounds_and_covers_them() {
        let half = Jitter::new(0.5, 42);
        let period = 1_000_000_000;
        let drawn: Vec<Nanos> = (0..10_000).map(|n| half.spread(period, n)).collect();
        assert!(drawn.iter().all(|&d| (period / 2..=period).contains(&d)));
        let low = drawn.iter().filter(|&&d| d < period * 3 / 4).count();
        assert!((4_500..5_500).contains(&low), "{low}");
        // The whole fraction: anywhere from zero to the period.
        let whole = Jitter::new(1.0, 1);
        assert!((0..1_000).all(|n| whole.spread(10, n) <= 10));
        assert!((0..1_000).any(|n| whole.spread(10, n) == 0));
        assert!((0..1_000).any(|n| whole.spread(10, n) == 10));
        // Periods at the edges of the range.
        assert_eq!(half.spread(0, 0), 0);
        assert_eq!(half.spread(Nanos::MAX, 0), Nanos::MAX);
        assert!(half.spread(Nanos::MAX - 1, 0) >= (Nanos::MAX - 1) / 2);
    }

    #[test]
    fn draws_are_replayable() {
        // SplitMix64's first output for seed 0 (the published reference value).
        assert_eq!(draw(0, 0), 0xe220_a839_7b1d_cdaf);
        let a = Jitter::new(0.3, 9);
        let b = Jitter::new(0.3, 9);
        assert!((0..100).all(|n| a.spread(77_777, n) == b.spread(77_777, n)));
    }

    #[test]
    fn names_seed_differently() {
        // FNV-1a's reference values.
        assert_eq!(seed_of(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(seed_of("a"), 0xaf63_dc4c_8601_ec8c);
        assert_ne!(seed_of("10.0.0.1:80"), seed_of("10.0.0.2:80"));
    }

    #[test]
    fn fractions_are_read_leniently_or_checked() {
        assert_eq!(lenient(f64::NAN, 0.1), 0.1);
        assert_eq!(lenient(-1.0, 0.1), 0.0);
        assert_eq!(lenient(2.0, 0.1), 1.0);
        assert_eq!(lenient(f64::INFINITY, 0.1), 1.0);
        assert_eq!(Jitter::new(f64::NAN, 0), Jitter::NONE);
        assert!(check(0.0).is_ok() && check(1.0).is_ok() && check(0.25).is_ok());
        for bad in [f64::NAN, -0.1, 1.5, f64::INFINITY] {
            let err = check(bad).unwrap_err();
            assert_eq!(err.field(), "jitter");
        }
        assert_eq!(
            check(1.5).unwrap_err().to_string(),
            "invalid `jitter` = 1.5: must be a number within [0, 1]"
        );
    }
}
