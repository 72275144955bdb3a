//! The strict reading of the window knobs, for [`Builder::build_strict`] and configuration:
//! where the builder adjusts a bucket period silently (gobreaker's rules), this names it.
//!
//! A leaf: it computes on whole durations (`u128` nanoseconds), never on the clock's
//! saturated `u64` nanoseconds, so a pair beyond 584 years is judged by its real lengths.
//!
//! [`Builder::build_strict`]: crate::Builder::build_strict

use std::time::Duration;

use crate::error::ConfigError;
use crate::machine::{MAX_BUCKETS, MAX_COUNT_WINDOW};

/// Checks that `bucket_period` splits `interval` into whole buckets, at most
/// [`MAX_BUCKETS`] of them; a zero `bucket_period` (a fixed window) always fits.
///
/// # Errors
///
/// A [`ConfigError`] naming `bucket_period`: set without an `interval`, longer than
/// `interval`, not dividing it into whole buckets, or making more than `MAX_BUCKETS` of them.
pub(crate) fn check(interval: Duration, bucket_period: Duration) -> Result<(), ConfigError> {
    if bucket_period.is_zero() {
        return Ok(());
    }
    let (interval_ns, bucket_ns) = (interval.as_nanos(), bucket_period.as_nanos());
    let reason = if interval_ns == 0 {
        "is ignored without an `interval`; set both or neither"
    } else if bucket_ns > interval_ns {
        "must not exceed `interval`"
    } else if interval_ns % bucket_ns != 0 {
        "must divide `interval` into whole buckets"
    } else if interval_ns / bucket_ns > u128::from(MAX_BUCKETS) {
        "makes more than MAX_BUCKETS (1024) buckets in `interval`"
    } else {
        return Ok(());
    };
    Err(ConfigError::new(
        "bucket_period",
        format_args!("{bucket_period:?}"),
        reason,
    ))
}

/// Checks that a count window (`count_window`, zero: none) is not combined with a time
/// window (`interval`) and is at most [`MAX_COUNT_WINDOW`] results long.
///
/// # Errors
///
/// A [`ConfigError`] naming `count_window`.
pub(crate) fn check_count(interval: Duration, count_window: u32) -> Result<(), ConfigError> {
    let reason = if count_window == 0 {
        return Ok(());
    } else if !interval.is_zero() {
        "is a window of its own: set `count_window` or `interval`, not both"
    } else if u64::from(count_window) > MAX_COUNT_WINDOW {
        "must be at most MAX_COUNT_WINDOW (65536) results"
    } else {
        return Ok(());
    };
    Err(ConfigError::new("count_window", count_window, reason))
}

/// Checks that an explicit `max_open_duration` is not shorter than `timeout` (the builder
/// would cut every open period to it); zero (the default) always fits.
///
/// # Errors
///
/// A [`ConfigError`] naming `max_open_duration`.
pub(crate) fn check_open(
    timeout: Duration,
    max_open_duration: Duration,
) -> Result<(), ConfigError> {
    if max_open_duration.is_zero() || max_open_duration >= timeout {
        return Ok(());
    }
    Err(ConfigError::new(
        "max_open_duration",
        format_args!("{max_open_duration:?}"),
        "must not be shorter than `timeout`",
    ))
}

#[cfg(test)]
mod tests {
    use super::check;
    use std::time::Duration;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A Julian year: 365.25 days.
    const YEAR: Duration = Duration::from_secs(31_557_600);

    fn reason(interval: Duration, bucket_period: Duration) -> Result<(), &'static str> {
        check(interval, bucket_period).map_err(|e| e.reason())
    }

    #[test]
    fn names_a_bucket_period_that_does_not_fit() {
        assert_eq!(reason(ms(0), ms(0)), Ok(()));
        assert_eq!(reason(ms(1000), ms(0)), Ok(()));
        assert_eq!(reason(ms(1000), ms(250)), Ok(()));
        assert_eq!(reason(ms(1000), ms(1000)), Ok(()));
        assert_eq!(reason(ms(1024), ms(1)), Ok(()));
        assert!(reason(ms(0), ms(100))
            .unwrap_err()
            .contains("without an `interval`"));
        assert!(reason(ms(1000), ms(1001)).unwrap_err().contains("exceed"));
        assert!(reason(ms(1000), ms(300))
            .unwrap_err()
            .contains("whole buckets"));
        assert!(reason(ms(1025), ms(1)).unwrap_err().contains("MAX_BUCKETS"));
        assert!(reason(ms(2000), ms(1)).unwrap_err().contains("MAX_BUCKETS"));
        let err = check(ms(1000), ms(300)).unwrap_err();
        assert_eq!((err.field(), err.value()), ("bucket_period", "300ms"));
    }

    #[test]
    fn nanoseconds_count_exactly() {
        let ns = Duration::from_nanos;
        assert_eq!(
            reason(ns(1_000_000_001), ns(1)),
            Err("makes more than MAX_BUCKETS (1024) buckets in `interval`")
        );
        assert!(reason(ns(1_000_000_001), ms(1)).is_err());
        assert_eq!(reason(ns(3), ns(1)), Ok(()));
    }

    #[test]
    fn durations_beyond_584_years_are_judged_whole() {
        // u64 nanoseconds end at about 584.5 years: each of these pairs would saturate there.
        assert!(YEAR.as_nanos() * 1000 > u128::from(u64::MAX));
        // Valid: 1000 buckets of a year (saturated, 584.5 years would not divide by a year).
        assert_eq!(reason(YEAR * 1000, YEAR), Ok(()));
        // Valid: two buckets of 600 years.
        assert_eq!(reason(YEAR * 1200, YEAR * 600), Ok(()));
        // Invalid: 700 years does not divide 800 (saturated, both are the same length).
        assert_eq!(
            reason(YEAR * 800, YEAR * 700),
            Err("must divide `interval` into whole buckets")
        );
        // Invalid: longer than the interval (saturated, both are the same length).
        assert_eq!(
            reason(YEAR * 700, YEAR * 800),
            Err("must not exceed `interval`")
        );
        // Invalid: 2000 buckets.
        assert_eq!(
            reason(YEAR * 2000, YEAR),
            Err("makes more than MAX_BUCKETS (1024) buckets in `interval`")
        );
        // The extremes: Duration::MAX is one bucket of itself, and nanoseconds past 2^64.
        assert_eq!(reason(Duration::MAX, Duration::MAX), Ok(()));
        assert!(reason(Duration::MAX, Duration::from_secs(u64::MAX)).is_err());
        let err = check(YEAR * 800, YEAR * 700).unwrap_err();
        assert_eq!(err.value(), format!("{:?}", YEAR * 700));
    }
}
