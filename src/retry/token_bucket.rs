//! [`TokenBucket`]: gRPC's retry throttling (proposal A6), lock-free.

use crate::atomic::{AtomicU64, Ordering};
use crate::error::{ConfigError, Number};

/// gRPC's retry throttling (proposal A6, `retryThrottling` in a service config): a bucket of
/// tokens that failures drain and successes refill, which allows retries while more than half
/// of it is left.
///
/// - It starts full, with `max_tokens`.
/// - [`record_failure`](Self::record_failure) takes one token (never below 0).
/// - [`record_success`](Self::record_success) gives back `token_ratio` (never above
///   `max_tokens`).
/// - [`allows_retry`](Self::allows_retry) while more than `max_tokens / 2` tokens are left:
///   at exactly half, retries stop.
///
/// Tokens are counted in thousandths, as gRPC's C++ core counts them (`token_ratio` has at
/// most three decimal places there; here it is rounded to the nearest thousandth), so that a
/// sequence of results leaves the same count whatever the order of threads: each record is
/// one compare-and-swap on one word, no lock, no clock.
///
/// # Examples
///
/// ```
/// use lazybreaker::retry::TokenBucket;
///
/// // `"retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}`
/// let bucket = TokenBucket::new(10.0, 0.1)?;
/// assert!(bucket.allows_retry());
/// for _ in 0..5 {
///     bucket.record_failure();
/// }
/// assert_eq!(bucket.tokens(), 5.0);
/// assert!(!bucket.allows_retry(), "half left: retries stop");
/// bucket.record_success();
/// assert_eq!(bucket.tokens(), 5.1);
/// assert!(bucket.allows_retry());
/// # Ok::<(), lazybreaker::ConfigError>(())
/// ```
#[derive(Debug)]
pub struct TokenBucket {
    /// Thousandths of a token left.
    milli_tokens: AtomicU64,
    /// The bucket's size, in thousandths.
    max_milli_tokens: u64,
    /// What a success gives back, in thousandths (at least 1).
    milli_token_ratio: u64,
}

/// The largest bucket gRPC's service config allows.
const MAX_TOKENS: f64 = 1000.0;

impl TokenBucket {
    /// A full bucket of `max_tokens`, refilled by `token_ratio` a success.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] for field `max_tokens` unless it is a finite number in (0, 1000]
    /// (gRPC's bounds), or for field `token_ratio` unless it is a finite number of at least
    /// 0.0005 (a thousandth, rounded: gRPC keeps three decimal places).
    pub fn new(max_tokens: f64, token_ratio: f64) -> Result<Self, ConfigError> {
        if !max_tokens.is_finite() || max_tokens <= 0.0 || max_tokens > MAX_TOKENS {
            return Err(ConfigError::new(
                "max_tokens",
                Number(max_tokens),
                "must be a finite number above 0, at most 1000",
            ));
        }
        let milli_token_ratio = if token_ratio.is_finite() && token_ratio > 0.0 {
            // Below 1000 * u64::MAX thousandths: the cast saturates, and the bucket caps it.
            (token_ratio * 1000.0).round() as u64
        } else {
            0
        };
        if milli_token_ratio == 0 {
            return Err(ConfigError::new(
                "token_ratio",
                Number(token_ratio),
                "must be a finite number, at least 0.001 (three decimal places)",
            ));
        }
        // At least one thousandth: a bucket of 0.0004 tokens is one thousandth.
        let max_milli_tokens = ((max_tokens * 1000.0).round() as u64).max(1);
        Ok(Self {
            milli_tokens: AtomicU64::new(max_milli_tokens),
            max_milli_tokens,
            milli_token_ratio,
        })
    }

    /// A failed call (one gRPC would count: a retryable status, or a pushback): one token
    /// less, not below 0. Returns whether retries are still allowed after it.
    pub fn record_failure(&self) -> bool {
        let left = self.add(|t| t.saturating_sub(1000));
        left > self.threshold()
    }

    /// A successful call: `token_ratio` tokens more, not above `max_tokens`.
    pub fn record_success(&self) {
        let ratio = self.milli_token_ratio;
        let max = self.max_milli_tokens;
        self.add(|t| t.saturating_add(ratio).min(max));
    }

    /// `successes` and `failures` recorded at once, counted lazily elsewhere (a pool's calls):
    /// the successes first, then the failures, the order that leaves the fewest tokens.
    /// Returns whether retries are still allowed after them.
    pub fn record(&self, successes: u64, failures: u64) -> bool {
        let ratio = self.milli_token_ratio;
        let max = self.max_milli_tokens;
        let left = self.add(|t| {
            t.saturating_add(successes.saturating_mul(ratio))
                .min(max)
                .saturating_sub(failures.saturating_mul(1000))
        });
        left > self.threshold()
    }

    /// Whether a retry may go out: more than half of `max_tokens` left.
    pub fn allows_retry(&self) -> bool {
        self.milli_tokens.load(Ordering::Acquire) > self.threshold()
    }

    /// The tokens left, in thousandths made a number (`5.1` for 5 100 thousandths).
    pub fn tokens(&self) -> f64 {
        self.milli_tokens.load(Ordering::Acquire) as f64 / 1000.0
    }

    /// The bucket's size, as made (rounded to a thousandth).
    pub fn max_tokens(&self) -> f64 {
        self.max_milli_tokens as f64 / 1000.0
    }

    /// What a success gives back, as made (rounded to a thousandth).
    pub fn token_ratio(&self) -> f64 {
        self.milli_token_ratio as f64 / 1000.0
    }

    /// Half the bucket, in thousandths, rounded down (gRPC's integer division).
    fn threshold(&self) -> u64 {
        self.max_milli_tokens / 2
    }

    /// Applies `f` to the count in one compare-and-swap loop; the new count.
    fn add(&self, f: impl Fn(u64) -> u64) -> u64 {
        let mut current = self.milli_tokens.load(Ordering::Acquire);
        loop {
            let new = f(current);
            match self.milli_tokens.compare_exchange_weak(
                current,
                new,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return new,
                Err(found) => current = found,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_drain_to_half_and_successes_refill() {
        let bucket = TokenBucket::new(4.0, 0.5).unwrap();
        assert_eq!(bucket.tokens(), 4.0);
        assert!(bucket.record_failure(), "3 > 2");
        assert!(!bucket.record_failure(), "2 is half: no more retries");
        assert!(!bucket.allows_retry());
        bucket.record_success();
        assert_eq!(bucket.tokens(), 2.5);
        assert!(bucket.allows_retry());
    }

    #[test]
    fn the_count_stays_within_zero_and_the_bucket() {
        let bucket = TokenBucket::new(2.0, 1.5).unwrap();
        for _ in 0..5 {
            bucket.record_failure();
        }
        assert_eq!(bucket.tokens(), 0.0, "never below zero");
        for _ in 0..5 {
            bucket.record_success();
        }
        assert_eq!(bucket.tokens(), 2.0, "never above the bucket");
    }

    #[test]
    fn a_ratio_keeps_three_decimal_places() {
        let bucket = TokenBucket::new(10.0, 1.005).unwrap();
        assert_eq!(
            bucket.token_ratio(),
            1.005,
            "1.005 * 1000 is 1004.999…: rounded"
        );
        bucket.record_failure();
        bucket.record_failure();
        bucket.record_success();
        assert_eq!(bucket.tokens(), 9.005);
    }

    #[test]
    fn records_at_once_leave_the_fewest_tokens() {
        let bucket = TokenBucket::new(10.0, 0.5).unwrap();
        // Ten successes at a full bucket are clamped, then three failures: 7.
        assert!(bucket.record(10, 3));
        assert_eq!(bucket.tokens(), 7.0);
        assert!(!bucket.record(4, 4), "7 + 2 - 4 = 5: half, no more retries");
        assert_eq!(bucket.tokens(), 5.0);
        bucket.record(0, 100);
        assert_eq!(bucket.tokens(), 0.0);
    }

    #[test]
    fn bad_settings_name_their_field() {
        for max in [0.0, -1.0, 1000.5, f64::NAN, f64::INFINITY] {
            let err = TokenBucket::new(max, 0.1).unwrap_err();
            assert_eq!(err.field(), "max_tokens", "{max}");
        }
        for ratio in [0.0, -0.1, 0.0004, f64::NAN, f64::INFINITY] {
            let err = TokenBucket::new(10.0, ratio).unwrap_err();
            assert_eq!(err.field(), "token_ratio", "{ratio}");
        }
        assert!(
            TokenBucket::new(1000.0, 0.0005).is_ok(),
            "the bounds themselves"
        );
    }

    #[test]
    fn threads_drain_exactly_what_they_record() {
        let bucket = TokenBucket::new(1000.0, 0.25).unwrap();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..100 {
                        bucket.record_failure();
                        bucket.record_success();
                        bucket.record_failure();
                    }
                });
            }
        });
        // 800 failures and 400 successes of a quarter, none clamped: 1000 - 800 + 100.
        assert_eq!(bucket.tokens(), 300.0);
        assert!(!bucket.allows_retry());
    }
}
