//! How a pool chooses: the balancing rule, the isolation cap, and the per-thread random
//! numbers the choices draw (no shared state: a pick writes nothing but its endpoint's
//! counters).

use std::cell::Cell;

use crate::observe::Observer;
use crate::policy::TripPolicy;

use super::endpoint::Endpoint;

/// How a [`Pool`](super::Pool) chooses among the endpoints whose breakers admit a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Balance {
    /// Two endpoints drawn at random, the one with fewer calls in flight taken (the power of
    /// two choices: close to the least loaded endpoint, without reading every one). The
    /// default: it writes nothing shared to choose.
    #[default]
    PowerOfTwo,
    /// Each endpoint in turn, from one cursor that every pick advances (one shared atomic
    /// write per pick).
    RoundRobin,
}

/// The default [`max_isolated`](super::Pool::max_isolated): half the endpoints, Envoy's
/// panic threshold.
pub(super) const DEFAULT_MAX_ISOLATED: f64 = 0.5;

/// How many of `n` endpoints may be isolated at once under a cap of `fraction`: the
/// fraction of `n`, rounded down, but at least one (so that a small pool can still isolate
/// its one bad endpoint: a tenth of 2 to 9 endpoints would round to none); every endpoint
/// at a fraction of 1.
pub(super) fn allowed_isolated(n: usize, fraction: f64) -> usize {
    if n == 0 {
        return 0;
    }
    if fraction >= 1.0 {
        return n;
    }
    // In integers, the fraction to a millionth: in floating point `0.29 × 100` is
    // 28.999…, which rounds down to 28.
    let millionths = (fraction * 1e6).round() as u128;
    let share = (n as u128 * millionths / 1_000_000) as usize;
    share.clamp(1, n)
}

/// A fraction for the cap: within 0 to 1, `NaN` the default.
pub(super) fn fraction(fraction: f64) -> f64 {
    if fraction.is_nan() {
        DEFAULT_MAX_ISOLATED
    } else {
        fraction.clamp(0.0, 1.0)
    }
}

/// A stride through `n` endpoints that visits each once from any start: coprime with `n`
/// (brpc's randomised balancer walks a prime stride the same way).
pub(super) fn stride(n: usize, random: u64) -> usize {
    if n <= 2 {
        return 1;
    }
    let mut s = 1 + (random as usize) % (n - 1);
    while gcd(s, n) != 1 {
        s = if s + 1 >= n { 1 } else { s + 1 };
    }
    s
}

fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Whether `b` costs less than `a` by their calls in flight weighted by their latency (a
/// pool that hedges at a percentile keeps a [`LatencyEstimate`](crate::retry::LatencyEstimate)
/// per endpoint): `(in flight + 1) × estimate`, Finagle's power of two choices over peak
/// latencies, so that a replica that answers slowly, whose calls a hedge cancels (and so
/// takes out of its calls in flight), keeps being avoided. One pick in 32 (from the draw
/// `r`) explores by calls in flight alone, so that a replica whose estimate is stale (it
/// recovered, and lost every comparison since) still gets calls to learn from, with no
/// timer to age its estimate. Without both estimates, by calls in flight alone.
#[inline]
pub(super) fn lighter_by_latency<K, P: TripPolicy, O: Observer>(
    b: &Endpoint<K, P, O>,
    a: &Endpoint<K, P, O>,
    r: u64,
) -> bool {
    let (in_b, in_a) = (b.in_flight() as u64, a.in_flight() as u64);
    match (b.latency.nanos_now(), a.latency.nanos_now()) {
        (Some(lb), Some(la)) if r.rotate_left(7) & 31 != 0 => {
            // Equal costs: the faster one (a queue on a fast replica moves).
            let (cost_b, cost_a) = ((in_b + 1).saturating_mul(lb), (in_a + 1).saturating_mul(la));
            (cost_b, lb) < (cost_a, la)
        }
        _ => in_b < in_a,
    }
}

thread_local! {
    static STATE: Cell<u64> = const { Cell::new(0) };
}

/// A random number from this thread's generator (xorshift64*, seeded per thread from its
/// stack address and the time): for spreading picks, not for secrets.
pub(super) fn random() -> u64 {
    STATE.with(|state| {
        let mut x = state.get();
        if x == 0 {
            let here = &x as *const u64 as u64;
            let time = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            x = (here ^ time.rotate_left(32)) | 1;
        }
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        state.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_10_the_cap_is_the_fraction_of_the_pool_rounded_down_in_integers() {
        // The probe's cases, each one below in floating point.
        for (n, fraction, share) in [
            (100, 0.29, 29),
            (100, 0.57, 57),
            (100, 0.58, 58),
            (50, 0.58, 29),
        ] {
            assert_eq!(allowed_isolated(n, fraction), share, "{fraction} of {n}");
        }
        // Every hundredth of 100 and of 1 000 endpoints is exact.
        for percent in 1..100usize {
            let fraction = percent as f64 / 100.0;
            assert_eq!(allowed_isolated(100, fraction), percent, "{fraction}");
            assert_eq!(
                allowed_isolated(1_000, fraction),
                percent * 10,
                "{fraction}"
            );
        }
        // Still rounded down, and at least one.
        assert_eq!(allowed_isolated(10, 0.15), 1);
        assert_eq!(allowed_isolated(7, 0.5), 3);
        assert_eq!(allowed_isolated(3, 0.0), 1);
    }

    #[test]
    fn the_small_cluster_rule() {
        // (endpoints, fraction) -> at most isolated at once
        for (n, f, allowed) in [
            (0, 0.5, 0),
            (1, 0.5, 1),
            (2, 0.5, 1),
            (3, 0.5, 1),
            (10, 0.5, 5),
            (2, 0.1, 1),
            (9, 0.1, 1),
            (10, 0.1, 1),
            (20, 0.1, 2),
            (3, 1.0, 3),
            (3, 0.0, 1),
        ] {
            assert_eq!(allowed_isolated(n, f), allowed, "{n} endpoints at {f}");
        }
    }

    #[test]
    fn a_stride_visits_every_endpoint_once() {
        for n in 1..40 {
            for r in [0, 1, 7, 12345, u64::MAX] {
                let s = stride(n, r);
                let mut seen = vec![false; n];
                for k in 0..n {
                    seen[(3 + k * s) % n] = true;
                }
                assert!(seen.iter().all(|v| *v), "n={n} stride={s}");
            }
        }
    }

    #[test]
    fn fractions_are_clamped() {
        assert_eq!(fraction(f64::NAN), DEFAULT_MAX_ISOLATED);
        assert_eq!(fraction(-1.0), 0.0);
        assert_eq!(fraction(2.0), 1.0);
        assert_eq!(fraction(0.3), 0.3);
    }
}
