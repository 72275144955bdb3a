//! [`LatencyEstimate`]: a running estimate of one percentile of a stream of latencies, in
//! one word, with no window, no sort and no timer.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::nanos::{saturating_nanos, Nanos};

/// A running estimate of the `p`-th quantile of the latencies recorded, kept in one word.
///
/// Each latency moves the estimate up by `p` of a step when it is above it, and down by
/// `1 − p` of a step when it is not (stochastic approximation, the deterministic form of
/// Ma, Muthukrishnan and Sandler's frugal streaming): it settles where a share `p` of the
/// latencies is at or below it, that is on the `p`-th quantile, and follows a latency that
/// drifts. A step is an eighth of the estimate, so it works in ratios: the same for
/// microseconds and seconds. The first latency recorded is the first estimate.
///
/// Why this and not a histogram: a hedge needs "about the 95th percentile of late", not an
/// exact one; this costs one load and one store per recorded latency, on the caller's own
/// word, and needs no decay, window or timer to forget old latencies (a tenth of the
/// estimate is relearned within a few dozen calls). Writes from threads racing may be lost:
/// the estimate only loses a sample.
///
/// # Examples
///
/// ```
/// use lazybreaker::retry::LatencyEstimate;
/// use std::time::Duration;
///
/// let p95 = LatencyEstimate::new();
/// assert_eq!(p95.get(), None);
/// // 95 calls of 10 ms and 5 of 100 ms, over and over.
/// for round in 0..30 {
///     for i in 0..100 {
///         let ms = if (i + round) % 20 == 0 { 100 } else { 10 };
///         p95.record(Duration::from_millis(ms), 0.95);
///     }
/// }
/// let estimate = p95.get().unwrap();
/// assert!(estimate >= Duration::from_millis(10) && estimate < Duration::from_millis(100));
/// ```
#[derive(Debug, Default)]
pub struct LatencyEstimate {
    /// The estimate in nanoseconds; 0 before the first latency.
    nanos: AtomicU64,
}

/// A step: an eighth of the estimate, in 1/65 536ths.
const STEP: u64 = 65_536 / 8;

impl LatencyEstimate {
    /// An estimate with no latency recorded yet.
    pub const fn new() -> Self {
        Self {
            nanos: AtomicU64::new(0),
        }
    }

    /// Records one `latency`, moving the estimate toward the `p`-th quantile (`p` is
    /// clamped to [0, 1]; a `NaN` records nothing).
    pub fn record(&self, latency: Duration, p: f64) {
        if p.is_nan() {
            return;
        }
        self.record_nanos(saturating_nanos(latency), p.clamp(0.0, 1.0));
    }

    /// [`record`](Self::record) in nanoseconds, `p` within [0, 1].
    #[inline]
    pub(crate) fn record_nanos(&self, latency: Nanos, p: f64) {
        let m = self.nanos.load(Ordering::Relaxed);
        let next = if m == 0 {
            latency.max(1)
        } else if latency > m {
            // A whole step up, not cut at the latency: cut, the steps up would average less
            // than `p` of a step, and settle the estimate below its quantile (the long tail
            // above an estimate is mostly just above it).
            let up = ((m as u128 * (STEP as f64 * p) as u128) >> 16) as u64;
            m.saturating_add(up.max(1))
        } else {
            // Down, not below the latency: a steady latency is its own estimate (the step
            // down, `1 − p` of one, is small where a hedge's quantile is high).
            let down = ((m as u128 * (STEP as f64 * (1.0 - p)) as u128) >> 16) as u64;
            m.saturating_sub(down).max(latency).max(1)
        };
        self.nanos.store(next, Ordering::Relaxed);
    }

    /// The estimate, `None` before the first latency.
    pub fn get(&self) -> Option<Duration> {
        self.nanos_now().map(Duration::from_nanos)
    }

    /// The estimate in nanoseconds.
    #[inline]
    pub(crate) fn nanos_now(&self) -> Option<Nanos> {
        match self.nanos.load(Ordering::Relaxed) {
            0 => None,
            n => Some(n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic stream: `n` latencies whose `k`-th part in `parts` is `ms`.
    fn settle(p: f64, shares: &[(u32, u64)], rounds: u32) -> Duration {
        let estimate = LatencyEstimate::new();
        for _ in 0..rounds {
            for &(count, ms) in shares {
                for _ in 0..count {
                    estimate.record(Duration::from_millis(ms), p);
                }
            }
        }
        estimate.get().unwrap()
    }

    #[test]
    fn it_settles_between_the_values_around_its_quantile() {
        // Interleaved: 90 of 10 ms, then 10 of 50 ms, as blocks of one each.
        let estimate = LatencyEstimate::new();
        for i in 0..5_000u32 {
            let ms = if i % 10 == 0 { 50 } else { 10 };
            estimate.record(Duration::from_millis(ms), 0.5);
        }
        // The median of that stream is 10 ms.
        let median = estimate.get().unwrap();
        assert!(median >= Duration::from_millis(10) && median < Duration::from_millis(12));

        let estimate = LatencyEstimate::new();
        for i in 0..5_000u32 {
            let ms = if i % 10 == 0 { 50 } else { 10 };
            estimate.record(Duration::from_millis(ms), 0.95);
        }
        // The 95th percentile is 50 ms: the estimate climbs well above the 10 ms.
        let p95 = estimate.get().unwrap();
        assert!(p95 > Duration::from_millis(20), "{p95:?}");
        assert!(p95 <= Duration::from_millis(50), "{p95:?}");
    }

    #[test]
    fn a_steady_latency_keeps_it_within_a_step_of_it() {
        for p in [0.01, 0.5, 0.99] {
            let got = settle(p, &[(1, 8)], 500);
            let (low, high) = (Duration::from_micros(7_000), Duration::from_micros(9_000));
            assert!(got >= low && got <= high, "{p}: {got:?}");
        }
        let got = settle(0.5, &[(3, 1), (3, 9)], 200);
        assert!(got >= Duration::from_millis(1) && got <= Duration::from_millis(10));
    }

    #[test]
    fn it_settles_on_its_quantile_of_a_long_tail() {
        // 2 ms plus an exponential of mean 3 ms (the lab's healthy replica), drawn from a
        // seeded stream: the share of latencies above the estimate is close to 1 - p.
        let mut x = 0x9E37_79B9_7F4A_7C15_u64;
        let mut draw = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let u = (x >> 11) as f64 / (1u64 << 53) as f64;
            Duration::from_secs_f64(0.002 + 0.003 * -(1.0 - u).ln())
        };
        let estimate = LatencyEstimate::new();
        for _ in 0..20_000 {
            estimate.record(draw(), 0.95);
        }
        let (mut above, n) = (0, 20_000);
        for _ in 0..n {
            let latency = draw();
            if latency > estimate.get().unwrap() {
                above += 1;
            }
            estimate.record(latency, 0.95);
        }
        let share = f64::from(above) / f64::from(n);
        assert!((0.04..0.06).contains(&share), "{share}");
    }

    #[test]
    fn it_follows_a_latency_that_moves() {
        let estimate = LatencyEstimate::new();
        for _ in 0..200 {
            estimate.record(Duration::from_millis(5), 0.9);
        }
        for _ in 0..200 {
            estimate.record(Duration::from_millis(80), 0.9);
        }
        let high = estimate.get().unwrap();
        assert!(
            high >= Duration::from_millis(72) && high <= Duration::from_millis(90),
            "{high:?}"
        );
        for _ in 0..2_000 {
            estimate.record(Duration::from_millis(5), 0.9);
        }
        assert!(estimate.get().unwrap() < Duration::from_millis(6));
    }

    #[test]
    fn a_nan_records_nothing() {
        let estimate = LatencyEstimate::new();
        estimate.record(Duration::from_millis(5), f64::NAN);
        assert_eq!(estimate.get(), None);
    }
}
