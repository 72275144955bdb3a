//! Exponential backoff with full jitter, from a seeded stream: the n-th retry waits a draw
//! in `[0, min(max, initial × multiplier^(n-1)))`, as gRPC's retry policy (proposal A6) and
//! AWS's "full jitter" compute it.

use std::time::Duration;

use crate::nanos::{saturating_nanos, Nanos};

/// The backoff's settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Backoff {
    pub(super) initial: Duration,
    pub(super) max: Duration,
    pub(super) multiplier: f64,
}

impl Backoff {
    /// gRPC's common choice, made for a pool whose retries go elsewhere at once: 10 ms,
    /// doubling, at most 1 s.
    pub(super) const DEFAULT: Backoff = Backoff {
        initial: Duration::from_millis(10),
        max: Duration::from_secs(1),
        multiplier: 2.0,
    };

    /// The ceiling of the `retry`-th retry's wait (1-based).
    pub(super) fn ceiling(&self, retry: u32) -> Nanos {
        let initial = saturating_nanos(self.initial) as f64;
        let grown = initial
            * self
                .multiplier
                .powi(retry.saturating_sub(1).min(1024) as i32);
        let max = saturating_nanos(self.max);
        if grown.is_finite() && grown < max as f64 {
            grown as Nanos
        } else {
            max
        }
    }

    /// The `retry`-th retry's wait, drawn by `draw` (uniform over `u64`).
    pub(super) fn wait(&self, retry: u32, draw: u64) -> Duration {
        let ceiling = self.ceiling(retry);
        // Uniform in [0, ceiling): the draw's share of the ceiling, on integers.
        Duration::from_nanos(((u128::from(draw) * u128::from(ceiling)) >> 64) as Nanos)
    }
}

/// SplitMix64: one step of a stream seeded per call, so that a replay that makes the same
/// calls in the same order draws the same waits.
pub(super) fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ceiling_doubles_up_to_the_max() {
        let backoff = Backoff {
            initial: Duration::from_millis(10),
            max: Duration::from_millis(50),
            multiplier: 2.0,
        };
        let ceilings: Vec<u64> = (1..=5).map(|n| backoff.ceiling(n) / 1_000_000).collect();
        assert_eq!(ceilings, [10, 20, 40, 50, 50]);
        assert_eq!(backoff.ceiling(u32::MAX), 50_000_000, "no overflow");
        let shrinking = Backoff {
            multiplier: 0.5,
            ..backoff
        };
        let ceilings: Vec<u64> = (1..=3).map(|n| shrinking.ceiling(n) / 100_000).collect();
        assert_eq!(ceilings, [100, 50, 25], "gRPC allows a multiplier below 1");
    }

    #[test]
    fn a_wait_spans_zero_to_the_ceiling() {
        let backoff = Backoff::DEFAULT;
        assert_eq!(backoff.wait(1, 0), Duration::ZERO);
        assert_eq!(backoff.wait(1, u64::MAX / 2 + 1), Duration::from_millis(5));
        assert!(backoff.wait(1, u64::MAX) < Duration::from_millis(10));
    }

    #[test]
    fn the_stream_is_the_seeds() {
        let (mut a, mut b, mut c) = (7, 7, 8);
        let first: Vec<u64> = (0..4).map(|_| next(&mut a)).collect();
        let again: Vec<u64> = (0..4).map(|_| next(&mut b)).collect();
        let other: Vec<u64> = (0..4).map(|_| next(&mut c)).collect();
        assert_eq!(first, again);
        assert_ne!(first, other);
    }
}
