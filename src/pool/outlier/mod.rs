//! [`OutlierDetection`]: a pool judges each endpoint against its peers, as Envoy and gRPC
//! (A50) do, at pick time. See [`Pool::outlier_detection`](super::Pool::outlier_detection).

mod detector;
mod judge;

use std::time::Duration;

use crate::error::ConfigError;

pub(crate) use detector::{Detector, EndpointRecord};

/// Outlier detection for a [`Pool`](super::Pool): every `interval`, each endpoint's
/// successes and failures in it are compared with its peers', and an outlier is ejected:
/// its breaker opened for an ejection time, with [`Origin::Ejected`](crate::observe::Origin)
/// and the reason. Attached with [`Pool::outlier_detection`](super::Pool::outlier_detection).
///
/// Two detectors, each off until asked for:
///
/// - [`success_rate`](Self::success_rate): among the endpoints with at least
///   `request_volume` results in the interval, if there are at least `minimum_hosts` of
///   them, an endpoint whose success rate is below `mean − stdev_factor × σ` (Envoy's
///   default 1.9, 5, 100; [`Spread::MedianAbsoluteDeviation`] for a robust spread);
/// - [`failure_percentage`](Self::failure_percentage): among the same kind of endpoints, one
///   whose failures reach `threshold_percent` of its results (Envoy's 85, 5, 50).
///
/// Successes and failures count, as each endpoint's breaker counted them; exclusions and
/// overload answers do not (they are not the endpoint's fault; unless
/// [`overload_isolates`](super::Pool::overload_isolates) makes overload a failure). An
/// ejection lasts `base_ejection` × a multiplier that grows by one with each ejection and
/// shrinks by one with each interval that ends past the endpoint's ejection time (whatever
/// its breaker does then), at most `max_ejection` (or `base_ejection`, if longer), and at
/// most the breaker's [longest open period](crate::Builder::max_open_duration); the pool's
/// [jitter](super::Pool::jitter), if set, draws each from `[d × (1 − fraction), d]`. Ejections
/// stop at the pool's [isolation cap](super::Pool::max_isolated): a share of the endpoints
/// that are not down, counting those isolated on the traffic's judgement (tripped or
/// ejected); [`enforcement`](Self::enforcement) ejects a percentage of the outliers found
/// (0: detect and report only, a dry run). An outlier is one among its peers: the last
/// endpoint in rotation (the one endpoint of a pool, or the last one not isolated) is never
/// ejected, whatever the cap; its breaker still trips on its own policy.
///
/// # Settings out of range
///
/// The setters keep what they are given. [`validate`](Self::validate) (and
/// [`Pool::try_outlier_detection`](super::Pool::try_outlier_detection)) refuses a setting
/// out of its range, naming it (`outlier_detection.failure_percentage.threshold`);
/// [`Pool::outlier_detection`](super::Pool::outlier_detection) reads it leniently: a
/// setting that is not a finite number (NaN, an infinity) turns off the detector it
/// belongs to, which then ejects nothing (a threshold that is no number never reads as
/// "eject everything"), and a finite one out of range is brought into it, as each setter
/// says.
///
/// # Zero timers
///
/// Nothing sweeps. The first pick after an interval's end evaluates it (intervals that went
/// by without a pick are caught up at once: their results judged together, the multipliers
/// shrunk once per interval); picks that arrive meanwhile do not wait for it. An ejected
/// endpoint is back at the first pick after its ejection time (its breaker's open period),
/// through its breaker's half-open probes (and its health check, if it has one), not at the
/// next interval as in Envoy.
///
/// # Which spread
///
/// The two success-rate rules on the scenarios of the tests (`tests/breaker/outlier.rs`,
/// each asserted there), `success_rate(1.9, 5, 100)`:
///
/// | endpoints' success rates | mean − 1.9 σ (Envoy, gRPC) | median − max(3 × 1.4826 × MAD, floor) |
/// |---|---|---|
/// | nine at 99.9 %, one gray at 99.5 % | ejects the gray one | ejects it with a floor of 0.2 points (a floor of 1 point keeps it: it is within a point of the median) |
/// | three of ten at 50 %, seven at 100 % | ejects none: the three pull the mean down and σ up (threshold 41.5 %) | ejects the three (floor 1) |
/// | nine at 100 %, one at 99.9 % (one failure in 1 000) | ejects the 99.9 % one: σ is tiny (Envoy #18752) | keeps it (floor 1) |
/// | all ten at 80 % (a fault downstream of them all) | ejects none | ejects none |
///
/// Envoy's rule is the default, for its familiarity; the robust one, with a floor that says
/// how far below its peers an endpoint must be to be worth ejecting, is the better choice
/// when several endpoints may fail at once or when every rate sits near 100 %.
///
/// # Where it differs from Envoy and gRPC
///
/// - The cap is the pool's [`max_isolated`](super::Pool::max_isolated) (half by default,
///   at least one endpoint), shared with the breakers: Envoy's `max_ejection_percent`
///   (10 % by default) counts ejections alone.
/// - The failure percentage ejects at or above the threshold (Envoy; gRPC ejects above it).
/// - One [`enforcement`](Self::enforcement) for both detectors (Envoy's
///   `enforcing_failure_percentage` defaults to 0, gRPC's to 100: here a detector asked for
///   enforces, unless told otherwise); its draws come from [`seed`](Self::seed), so that a
///   replay ejects the same endpoints.
/// - A returning endpoint goes through its breaker's probes, so a still-failing one is out
///   again after one call rather than after the next interval.
///
/// # Examples
///
/// ```
/// use lazybreaker::pool::{Balance, OutlierDetection, Pool};
/// use lazybreaker::{Breaker, ManualClock, State};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let pool = Pool::new(|_: &u32| Breaker::builder()) // 6 failures in a row trip a breaker
///     .clock(clock.clone())
///     .balance(Balance::RoundRobin)
///     .outlier_detection(
///         OutlierDetection::new()
///             .interval(Duration::from_secs(10))
///             .success_rate(1.9, 5, 100),
///     );
/// pool.set(1..=5);
/// // 200 calls to each endpoint; endpoint 5 fails every other one: never 2 in a row.
/// for i in 0..1_000 {
///     let pick = pool.pick().unwrap();
///     if *pick.key() == 5 && i % 2 == 0 { pick.failure() } else { pick.success() }
/// }
/// clock.advance(Duration::from_secs(10));
/// // The first pick after the interval judges it: 5 is out for 30 s.
/// for _ in 0..8 {
///     assert_ne!(*pool.pick().unwrap().key(), 5);
/// }
/// assert_eq!(pool.breaker(&5).unwrap().state(), State::Open);
/// assert_eq!(pool.stats().ejected_success_rate, 1);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct OutlierDetection {
    pub(crate) interval: Duration,
    pub(crate) base_ejection: Duration,
    pub(crate) max_ejection: Duration,
    pub(crate) success_rate: Option<SuccessRate>,
    pub(crate) failure_percentage: Option<FailurePercentage>,
    pub(crate) spread: Spread,
    pub(crate) enforcement: u32,
    pub(crate) seed: u64,
}

/// How the success-rate detector measures the spread of its endpoints' rates.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[non_exhaustive]
pub enum Spread {
    /// Envoy's and gRPC's: outliers below `mean − stdev_factor × σ`. Masks the outliers
    /// once about a third of the endpoints fail (they pull the mean down and σ up), and
    /// ejects a healthy endpoint when σ is tiny (every rate near 100 %: Envoy #18752).
    #[default]
    StandardDeviation,
    /// Robust: outliers below `median − max(factor × 1.4826 × MAD, min_difference)`, the
    /// median absolute deviation standing in for σ (1.4826 makes it σ for normal rates).
    /// The median ignores up to half of the endpoints failing, and `min_difference` (in
    /// percentage points) keeps a healthy endpoint in when every rate is near 100 %: give
    /// one above zero, since when more than half of the rates are equal the MAD is zero,
    /// and with no floor a single failure would make an outlier.
    MedianAbsoluteDeviation {
        /// How many deviations below the median an outlier is (3 is a common choice).
        factor: f64,
        /// The least difference from the median, in percentage points, that makes an
        /// outlier.
        min_difference: f64,
    },
}

/// The success-rate detector's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SuccessRate {
    pub(crate) stdev_factor: f64,
    pub(crate) minimum_hosts: usize,
    pub(crate) request_volume: u64,
}

/// The failure-percentage detector's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct FailurePercentage {
    pub(crate) threshold: f64,
    pub(crate) minimum_hosts: usize,
    pub(crate) request_volume: u64,
}

impl Default for OutlierDetection {
    fn default() -> Self {
        Self::new()
    }
}

impl OutlierDetection {
    /// Envoy's timings (an interval of 10 s, ejections of 30 s backing off to 300 s), no
    /// detector yet: add [`success_rate`](Self::success_rate),
    /// [`failure_percentage`](Self::failure_percentage), or both.
    pub fn new() -> Self {
        Self {
            interval: Duration::from_secs(10),
            base_ejection: Duration::from_secs(30),
            max_ejection: Duration::from_secs(300),
            success_rate: None,
            failure_percentage: None,
            spread: Spread::StandardDeviation,
            enforcement: 100,
            seed: 0,
        }
    }

    /// How often the endpoints are judged (10 s by default; zero means the default).
    #[must_use]
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = if interval.is_zero() {
            Duration::from_secs(10)
        } else {
            interval
        };
        self
    }

    /// The first ejection's time (30 s by default; zero means the default), multiplied by
    /// the endpoint's ejection count for the next ones.
    #[must_use]
    pub fn base_ejection(mut self, base_ejection: Duration) -> Self {
        self.base_ejection = if base_ejection.is_zero() {
            Duration::from_secs(30)
        } else {
            base_ejection
        };
        self
    }

    /// The longest ejection (300 s by default; `base_ejection` if that is longer).
    #[must_use]
    pub fn max_ejection(mut self, max_ejection: Duration) -> Self {
        self.max_ejection = max_ejection;
        self
    }

    /// Ejects an endpoint whose success rate is below its peers' mean less `stdev_factor`
    /// standard deviations (Envoy's `success_rate_stdev_factor` / 1000: 1.9), judged among
    /// the endpoints with at least `request_volume` results in the interval (100), when
    /// there are at least `minimum_hosts` of them (5). The factor is a finite number above
    /// zero (`outlier_detection.success_rate.stdev_factor`); read leniently, one that is
    /// not a finite number turns this detector off, and zero or less means 1.9.
    #[must_use]
    pub fn success_rate(
        mut self,
        stdev_factor: impl Into<f64>,
        minimum_hosts: usize,
        request_volume: u64,
    ) -> Self {
        self.success_rate = Some(SuccessRate {
            stdev_factor: stdev_factor.into(),
            minimum_hosts,
            request_volume,
        });
        self
    }

    /// The success-rate detector's spread ([`Spread::StandardDeviation`], Envoy's, by
    /// default); it takes effect with [`success_rate`](Self::success_rate), before or after.
    /// [`Spread::MedianAbsoluteDeviation`]'s `factor` and `min_difference` are finite
    /// numbers, at least zero (`outlier_detection.spread.factor`,
    /// `outlier_detection.spread.min_difference`); read leniently, one that is not a finite
    /// number turns the success-rate detector off, and a negative factor means 3, a
    /// negative difference 0.
    #[must_use]
    pub fn spread(mut self, spread: Spread) -> Self {
        self.spread = spread;
        self
    }

    /// Ejects an endpoint whose failures are at least `threshold_percent` of its results in
    /// the interval (Envoy's 85), judged among the endpoints with at least `request_volume`
    /// results (50), when there are at least `minimum_hosts` of them (5). The threshold is
    /// a finite percentage, 0 to 100 (`outlier_detection.failure_percentage.threshold`);
    /// read leniently, one that is not a finite number turns this detector off, and a
    /// finite one is clamped to 0–100.
    #[must_use]
    pub fn failure_percentage(
        mut self,
        threshold_percent: impl Into<f64>,
        minimum_hosts: usize,
        request_volume: u64,
    ) -> Self {
        self.failure_percentage = Some(FailurePercentage {
            threshold: threshold_percent.into(),
            minimum_hosts,
            request_volume,
        });
        self
    }

    /// The percentage of the outliers found that are ejected (100 by default; at most 100,
    /// `outlier_detection.enforcement`, read leniently as 100): 0 detects and reports them
    /// ([`PoolStats::outliers_detected`](super::PoolStats)) without ejecting any, a dry run.
    #[must_use]
    pub fn enforcement(mut self, percent: u32) -> Self {
        self.enforcement = percent;
        self
    }

    /// The seed of the enforcement's draws (0 by default): the same seed, the same results
    /// and the same clock eject the same endpoints.
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Refuses a setting out of its range (see
    /// [Settings out of range](Self#settings-out-of-range)), as
    /// [`Pool::try_outlier_detection`](super::Pool::try_outlier_detection) does.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the first setting out of range by its path:
    /// `outlier_detection.success_rate.stdev_factor` (not a finite number above zero),
    /// `outlier_detection.spread.factor` or `outlier_detection.spread.min_difference` (not
    /// a finite number, at least zero), `outlier_detection.failure_percentage.threshold`
    /// (not a finite percentage within 0–100), `outlier_detection.enforcement` (above 100).
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::pool::OutlierDetection;
    ///
    /// let od = OutlierDetection::new().failure_percentage(f64::NEG_INFINITY, 5, 50);
    /// let err = od.validate().unwrap_err();
    /// assert_eq!(err.field(), "outlier_detection.failure_percentage.threshold");
    /// assert_eq!(
    ///     err.to_string(),
    ///     "invalid `outlier_detection.failure_percentage.threshold` = -inf: \
    ///      must be a finite percentage, 0 to 100"
    /// );
    /// assert!(OutlierDetection::new().failure_percentage(85, 5, 50).validate().is_ok());
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        const AT: &str = "outlier_detection";
        if let Some(rule) = &self.success_rate {
            let factor = rule.stdev_factor;
            if !(factor.is_finite() && factor > 0.0) {
                return Err(ConfigError::new(
                    "success_rate.stdev_factor",
                    factor,
                    "must be a finite number above zero",
                )
                .within(AT));
            }
        }
        if let Spread::MedianAbsoluteDeviation {
            factor,
            min_difference,
        } = self.spread
        {
            for (field, value) in [
                ("spread.factor", factor),
                ("spread.min_difference", min_difference),
            ] {
                if !(value.is_finite() && value >= 0.0) {
                    return Err(ConfigError::new(
                        field,
                        value,
                        "must be a finite number, at least zero",
                    )
                    .within(AT));
                }
            }
        }
        if let Some(rule) = &self.failure_percentage {
            let threshold = rule.threshold;
            if !(threshold.is_finite() && (0.0..=100.0).contains(&threshold)) {
                return Err(ConfigError::new(
                    "failure_percentage.threshold",
                    threshold,
                    "must be a finite percentage, 0 to 100",
                )
                .within(AT));
            }
        }
        if self.enforcement > 100 {
            return Err(ConfigError::new(
                "enforcement",
                self.enforcement,
                "must be a percentage, at most 100",
            )
            .within(AT));
        }
        Ok(())
    }

    /// These settings as [`Pool::outlier_detection`](super::Pool::outlier_detection) reads
    /// them (see [Settings out of range](Self#settings-out-of-range)): a detector with a
    /// setting that is not a finite number turned off, the other settings brought into
    /// their ranges.
    pub(crate) fn lenient(mut self) -> Self {
        let spread_is_number = match self.spread {
            Spread::MedianAbsoluteDeviation {
                factor,
                min_difference,
            } => {
                self.spread = Spread::MedianAbsoluteDeviation {
                    factor: if factor >= 0.0 { factor } else { 3.0 },
                    min_difference: min_difference.max(0.0),
                };
                factor.is_finite() && min_difference.is_finite()
            }
            Spread::StandardDeviation => true,
        };
        self.success_rate = self
            .success_rate
            .filter(|rule| spread_is_number && rule.stdev_factor.is_finite());
        if let Some(rule) = &mut self.success_rate {
            if rule.stdev_factor <= 0.0 {
                rule.stdev_factor = 1.9;
            }
        }
        self.failure_percentage = self
            .failure_percentage
            .filter(|rule| rule.threshold.is_finite());
        if let Some(rule) = &mut self.failure_percentage {
            rule.threshold = rule.threshold.clamp(0.0, 100.0);
        }
        self.enforcement = self.enforcement.min(100);
        self
    }

    /// How long the `n`-th ejection in a row (the multiplier) lasts.
    pub(crate) fn ejection_time(&self, multiplier: u32) -> Duration {
        let cap = self.max_ejection.max(self.base_ejection);
        self.base_ejection
            .checked_mul(multiplier.max(1))
            .unwrap_or(cap)
            .min(cap)
    }
}
