//! [`Aimd`]: additive increase, multiplicative decrease of a concurrency limit.

use std::time::Duration;

use super::algorithm::Algorithm;
use super::sample::Sample;
use crate::atomic::{AtomicU64, Ordering};
use crate::error::{ConfigError, Number};

/// A concurrency limit that grows by one while the calls in flight reach half of it, and is
/// cut by the backoff ratio when a call is dropped or takes longer than the timeout, within
/// `[min_limit, max_limit]` (Netflix's `AIMDLimit`, whose defaults it takes: 20 at first,
/// 20 to 200, a ratio of 0.9, a 5 s timeout).
///
/// The limit is one word, updated with a compare-and-swap per sample: no lock, no timer.
/// The first limit is `initial_limit` as given (a sample brings it within the bounds).
///
/// # Examples
///
/// ```
/// use lazybreaker::limit::{Aimd, Sample};
/// use std::time::Duration;
///
/// let limit = Aimd::new().initial_limit(30);
/// limit.validate()?;
/// assert_eq!(limit.limit(), 30);
/// // A call answered in 1 ms with 20 in flight (at least half the limit): one more.
/// assert_eq!(limit.on_sample(Sample::new(Duration::from_millis(1), 20)), 31);
/// // A dropped call: cut by the ratio, 31 × 0.9 rounded down.
/// assert_eq!(limit.on_sample(Sample::dropped(Duration::ZERO, 0)), 27);
///
/// let err = Aimd::new().backoff_ratio(1.5).validate().unwrap_err();
/// assert_eq!(err.field(), "limit.backoff_ratio");
/// # Ok::<(), lazybreaker::ConfigError>(())
/// ```
#[derive(Debug)]
pub struct Aimd {
    /// The limit, a `u32` in a word the loom models can check.
    limit: AtomicU64,
    min_limit: u32,
    max_limit: u32,
    backoff_ratio: f64,
    timeout: Duration,
}

impl Default for Aimd {
    fn default() -> Self {
        Self::new()
    }
}

impl Aimd {
    /// Netflix's defaults: 20 at first, within 20 to 200, a backoff ratio of 0.9, a 5 s
    /// timeout.
    pub fn new() -> Self {
        Self {
            limit: AtomicU64::new(20),
            min_limit: 20,
            max_limit: 200,
            backoff_ratio: 0.9,
            timeout: Duration::from_secs(5),
        }
    }

    /// The limit at first.
    #[must_use]
    pub fn initial_limit(self, limit: u32) -> Self {
        self.limit.store(u64::from(limit), Ordering::Relaxed);
        self
    }

    /// The least the limit falls to.
    #[must_use]
    pub fn min_limit(mut self, limit: u32) -> Self {
        self.min_limit = limit;
        self
    }

    /// The most the limit grows to.
    #[must_use]
    pub fn max_limit(mut self, limit: u32) -> Self {
        self.max_limit = limit;
        self
    }

    /// What a drop or a timeout multiplies the limit by, in [0.5, 1).
    #[must_use]
    pub fn backoff_ratio(mut self, ratio: f64) -> Self {
        self.backoff_ratio = ratio;
        self
    }

    /// A call that takes longer counts as dropped.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Refuses a setting out of its range, naming it: `limit.backoff_ratio` outside
    /// [0.5, 1) (Netflix's range), `limit.max_limit` of zero or below `min_limit`,
    /// `limit.timeout` of zero.
    ///
    /// # Errors
    ///
    /// The [`ConfigError`] of the first setting out of range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(0.5..1.0).contains(&self.backoff_ratio) {
            return Err(ConfigError::new(
                "limit.backoff_ratio",
                Number(self.backoff_ratio),
                "must be within [0.5, 1)",
            ));
        }
        if self.max_limit == 0 || self.max_limit < self.min_limit {
            return Err(ConfigError::new(
                "limit.max_limit",
                self.max_limit,
                "must be at least 1 and at least `min_limit`",
            ));
        }
        if self.timeout.is_zero() {
            return Err(ConfigError::new("limit.timeout", "0s", "must be above 0"));
        }
        Ok(())
    }

    /// The limit now.
    pub fn limit(&self) -> u32 {
        self.limit.load(Ordering::Relaxed) as u32
    }

    /// Learns from one call, and gives the limit it leaves: cut by the backoff ratio
    /// (rounded down) if the call was dropped or took longer than the timeout; else one more
    /// if the calls in flight when it started reach half the limit; within the bounds.
    pub fn on_sample(&self, sample: Sample) -> u32 {
        let next = |limit: u64| -> u64 {
            let limit = limit as u32;
            let moved = if sample.dropped || sample.latency > self.timeout {
                (f64::from(limit) * self.backoff_ratio) as u32
            } else if u64::from(sample.in_flight) * 2 >= u64::from(limit) {
                limit.saturating_add(1)
            } else {
                limit
            };
            u64::from(moved.clamp(self.min_limit.min(self.max_limit), self.max_limit))
        };
        // A sample that moves nothing (the common one: a call answered in time, the limit
        // not reached) writes nothing: no compare-and-swap, no cache line taken.
        match self
            .limit
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |limit| {
                let moved = next(limit);
                (moved != limit).then_some(moved)
            }) {
            Ok(previous) => next(previous) as u32,
            Err(unmoved) => unmoved as u32,
        }
    }
}

impl Clone for Aimd {
    /// The same settings, and the limit it has now.
    fn clone(&self) -> Self {
        Self {
            limit: AtomicU64::new(self.limit.load(Ordering::Relaxed)),
            ..*self
        }
    }
}

impl Algorithm for Aimd {
    fn limit(&self) -> u32 {
        Aimd::limit(self)
    }

    fn on_sample(&self, sample: Sample) -> u32 {
        Aimd::on_sample(self, sample)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        Aimd::validate(self)
    }

    fn boxed_clone(&self) -> Box<dyn Algorithm> {
        Box::new(self.clone())
    }

    /// A latency only compared with the timeout: fine only for a timeout under 100 ms.
    fn fine_latency(&self) -> bool {
        self.timeout < COARSE_ENOUGH
    }
}

/// The least timeout a coarse clock (a tick of 1 to 4 ms) times well enough: a tick is under
/// 4 % of it.
const COARSE_ENOUGH: Duration = Duration::from_millis(100);

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    // Netflix's `AIMDLimitTest`, case for case.
    #[test]
    fn netflix_default() {
        assert_eq!(Aimd::new().initial_limit(10).limit(), 10);
    }

    #[test]
    fn netflix_increase_on_success() {
        let limit = Aimd::new().initial_limit(20);
        limit.on_sample(Sample::new(MS, 10));
        assert_eq!(limit.limit(), 21);
    }

    #[test]
    fn netflix_decrease_on_drops() {
        let limit = Aimd::new().initial_limit(30);
        limit.on_sample(Sample::dropped(Duration::ZERO, 0));
        assert_eq!(limit.limit(), 27);
    }

    #[test]
    fn netflix_success_overflow() {
        let limit = Aimd::new().initial_limit(21).max_limit(21).min_limit(0);
        limit.on_sample(Sample::new(MS, 10));
        // After a success the limit is still at the max.
        assert_eq!(limit.limit(), 21);
    }

    #[test]
    fn a_timeout_counts_as_a_drop_and_the_bounds_hold() {
        let limit = Aimd::new()
            .initial_limit(100)
            .timeout(Duration::from_secs(1));
        assert_eq!(limit.on_sample(Sample::new(Duration::from_secs(2), 1)), 90);
        for _ in 0..50 {
            limit.on_sample(Sample::dropped(MS, 1));
        }
        assert_eq!(limit.limit(), 20, "never below min_limit");
        for _ in 0..1_000 {
            limit.on_sample(Sample::new(MS, 1_000));
        }
        assert_eq!(limit.limit(), 200, "never above max_limit");
        // Few calls in flight: the limit is not reached, so it does not grow.
        let idle = Aimd::new().initial_limit(50);
        assert_eq!(idle.on_sample(Sample::new(MS, 24)), 50);
        assert_eq!(idle.on_sample(Sample::new(MS, 25)), 51);
    }

    #[test]
    fn settings_out_of_range_name_their_field() {
        for (aimd, field) in [
            (Aimd::new().backoff_ratio(0.4), "limit.backoff_ratio"),
            (Aimd::new().backoff_ratio(1.0), "limit.backoff_ratio"),
            (Aimd::new().backoff_ratio(f64::NAN), "limit.backoff_ratio"),
            (Aimd::new().max_limit(0).min_limit(0), "limit.max_limit"),
            (Aimd::new().min_limit(50).max_limit(10), "limit.max_limit"),
            (Aimd::new().timeout(Duration::ZERO), "limit.timeout"),
        ] {
            assert_eq!(aimd.validate().unwrap_err().field(), field);
        }
        assert!(Aimd::new().validate().is_ok());
    }

    #[test]
    fn only_a_short_timeout_needs_the_precise_clock() {
        assert!(
            !Algorithm::fine_latency(&Aimd::new()),
            "5 s: the coarse clock times it"
        );
        assert!(!Algorithm::fine_latency(
            &Aimd::new().timeout(Duration::from_millis(100))
        ));
        assert!(Algorithm::fine_latency(
            &Aimd::new().timeout(Duration::from_millis(99))
        ));
        assert!(Algorithm::fine_latency(&super::super::Gradient2::new()));
        assert!(!Algorithm::learns(&super::super::Fixed::new(3)));
    }

    #[test]
    fn samples_from_threads_lose_no_update() {
        let limit = std::sync::Arc::new(Aimd::new().initial_limit(20).max_limit(10_000));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let limit = std::sync::Arc::clone(&limit);
                std::thread::spawn(move || {
                    for _ in 0..1_000 {
                        limit.on_sample(Sample::new(MS, 10_000));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        // Every sample grew it by one: a lost update would leave it short.
        assert_eq!(limit.limit(), 20 + 4_000);
    }
}
