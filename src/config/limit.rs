//! [`LimitSettings`]: an adaptive concurrency limit ([`crate::limit`]) described by plain
//! values, and the algorithm it builds.

use std::time::Duration;

use crate::error::ConfigError;
use crate::limit::{Aimd, Algorithm, Fixed, Gradient2, Vegas};

/// An adaptive concurrency limit in plain values ([`Pool::limit`](crate::pool::Pool::limit),
/// `limit` in [`PoolSettings`](super::PoolSettings)): a table whose `kind` says which
/// algorithm, with that algorithm's settings beside it. Every setting may be left out
/// (`None`) for the algorithm's default, except `fixed`'s `limit`.
///
/// | `kind` | settings (default) | algorithm |
/// |---|---|---|
/// | `aimd` | `initial_limit` (20), `min_limit` (20), `max_limit` (200), `backoff_ratio` (0.9), `timeout` (a duration, `"5s"`) | [`Aimd`] |
/// | `gradient2` | `initial_limit` (20), `min_limit` (20), `max_limit` (200), `smoothing` (0.2), `queue_size` (4), `rtt_tolerance` (1.5), `long_window` (600) | [`Gradient2`] |
/// | `vegas` | `initial_limit` (20), `max_limit` (1000), `smoothing` (1), `probe_multiplier` (30), `seed` (0) | [`Vegas`] |
/// | `fixed` | `limit` (required) | [`Fixed`] |
///
/// In a file (with the `serde` feature), unknown settings are refused, naming the ones the
/// `kind` has:
///
/// ```toml
/// limit = { kind = "aimd", max_limit = 100, backoff_ratio = 0.8, timeout = "2s" }
/// ```
///
/// The ranges are checked by [`to_algorithm`](Self::to_algorithm) (and so by
/// [`PoolSettings::validate`](super::PoolSettings::validate) and
/// [`build`](super::PoolSettings::build)), with the algorithm's `validate`: its error names
/// the field by its path, `limit.backoff_ratio`.
///
/// # Examples
///
/// ```
/// use lazybreaker::config::LimitSettings;
///
/// let settings = LimitSettings::Gradient2 {
///     initial_limit: Some(50),
///     min_limit: None,
///     max_limit: Some(400),
///     smoothing: None,
///     queue_size: None,
///     rtt_tolerance: Some(2.0),
///     long_window: None,
/// };
/// assert_eq!(settings.to_algorithm()?.limit(), 50);
///
/// let settings = LimitSettings::Fixed { limit: 0 };
/// assert_eq!(settings.to_algorithm().unwrap_err().field(), "limit.limit");
/// # Ok::<(), lazybreaker::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(tag = "kind", rename_all = "snake_case"))]
#[non_exhaustive]
pub enum LimitSettings {
    /// [`Aimd`]: one more while the calls in flight reach half the limit, a cut by the
    /// backoff ratio on a drop or a timeout.
    Aimd {
        /// The limit at first ([`Aimd::initial_limit`]); 20 when left out.
        #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
        initial_limit: Option<u32>,
        /// The least the limit falls to ([`Aimd::min_limit`]); 20 when left out.
        #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
        min_limit: Option<u32>,
        /// The most the limit grows to ([`Aimd::max_limit`]), at least 1 and at least
        /// `min_limit`; 200 when left out.
        #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
        max_limit: Option<u32>,
        /// What a drop or a timeout multiplies the limit by ([`Aimd::backoff_ratio`]), in
        /// [0.5, 1); 0.9 when left out.
        #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
        backoff_ratio: Option<f64>,
        /// A call that takes longer counts as dropped ([`Aimd::timeout`]), above 0 (a
        /// duration string in a file); 5 s when left out.
        #[cfg_attr(
            feature = "serde",
            serde(
                skip_serializing_if = "Option::is_none",
                serialize_with = "super::pool::serialize_some_duration"
            )
        )]
        timeout: Option<Duration>,
    },
    /// [`Gradient2`]: the limit follows the ratio of a long-run latency to the latest one.
    Gradient2 {
        /// The limit at first ([`Gradient2::initial_limit`]); 20 when left out.
        #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
        initial_limit: Option<u32>,
        /// The least the limit falls to ([`Gradient2::min_limit`]); 20 when left out.
        #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
        min_limit: Option<u32>,
        /// The most the limit grows to ([`Gradient2::max_limit`]), within [1, 2²⁴] and at
        /// least `min_limit`; 200 when left out.
        #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
        max_limit: Option<u32>,
        /// How much of a new estimate the limit takes ([`Gradient2::smoothing`]), in (0, 1];
        /// 0.2 when left out.
        #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
        smoothing: Option<f64>,
        /// How much the limit grows by while the latency stays low
        /// ([`Gradient2::queue_size`]), at least 0; 4 when left out.
        #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
        queue_size: Option<f64>,
        /// How much slower than the long-run latency a call may be before the limit shrinks
        /// ([`Gradient2::rtt_tolerance`]), at least 1; 1.5 when left out.
        #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
        rtt_tolerance: Option<f64>,
        /// How many calls the long-run latency averages over ([`Gradient2::long_window`]),
        /// at least 1; 600 when left out.
        #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
        long_window: Option<u32>,
    },
    /// [`Vegas`]: the queue a call's latency implies against the least latency seen. Its
    /// functions of the limit (`alpha`, `beta`, `threshold`, `increase`, `decrease`) are set
    /// in code only ([`Vegas::alpha`], …): here they keep Netflix's defaults.
    Vegas {
        /// The limit at first ([`Vegas::initial_limit`]), at most 65 535 (a larger one is
        /// taken as 65 535); 20 when left out.
        #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
        initial_limit: Option<u32>,
        /// The most the limit grows to ([`Vegas::max_limit`]), within [1, 65 535]; 1 000
        /// when left out.
        #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
        max_limit: Option<u32>,
        /// How much of a new limit the estimate takes ([`Vegas::smoothing`]), in (0, 1]; 1
        /// when left out.
        #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
        smoothing: Option<f64>,
        /// How many times the limit the calls between two probes of the no-load latency are
        /// ([`Vegas::probe_multiplier`]), at least 1; 30 when left out.
        #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
        probe_multiplier: Option<u32>,
        /// The seed of the probes' jitter ([`Vegas::seed`]); 0 when left out. Each endpoint
        /// of a pool gets a copy whose seed is this one mixed with its key, so that the
        /// endpoints re-probe at times of their own (replayable).
        #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
        seed: Option<u64>,
    },
    /// [`Fixed`]: a limit that does not move.
    Fixed {
        /// At most this many calls in flight ([`Fixed::new`]), at least 1; required.
        limit: u32,
    },
}

impl LimitSettings {
    /// The algorithm these settings describe: the algorithm's defaults (its `new()`), each
    /// setting given applied, then its `validate`.
    ///
    /// # Errors
    ///
    /// The algorithm's `validate` [`ConfigError`], naming the field by its path within a
    /// pool's settings: `limit.backoff_ratio`, `limit.max_limit`, `limit.limit`.
    pub fn to_algorithm(&self) -> Result<Box<dyn Algorithm>, ConfigError> {
        let algorithm: Box<dyn Algorithm> = match *self {
            Self::Aimd {
                initial_limit,
                min_limit,
                max_limit,
                backoff_ratio,
                timeout,
            } => {
                let mut aimd = Aimd::new();
                if let Some(limit) = initial_limit {
                    aimd = aimd.initial_limit(limit);
                }
                if let Some(limit) = min_limit {
                    aimd = aimd.min_limit(limit);
                }
                if let Some(limit) = max_limit {
                    aimd = aimd.max_limit(limit);
                }
                if let Some(ratio) = backoff_ratio {
                    aimd = aimd.backoff_ratio(ratio);
                }
                if let Some(timeout) = timeout {
                    aimd = aimd.timeout(timeout);
                }
                Box::new(aimd)
            }
            Self::Gradient2 {
                initial_limit,
                min_limit,
                max_limit,
                smoothing,
                queue_size,
                rtt_tolerance,
                long_window,
            } => {
                let mut gradient = Gradient2::new();
                if let Some(limit) = initial_limit {
                    gradient = gradient.initial_limit(limit);
                }
                if let Some(limit) = min_limit {
                    gradient = gradient.min_limit(limit);
                }
                if let Some(limit) = max_limit {
                    gradient = gradient.max_limit(limit);
                }
                if let Some(smoothing) = smoothing {
                    gradient = gradient.smoothing(smoothing);
                }
                if let Some(size) = queue_size {
                    gradient = gradient.queue_size(size);
                }
                if let Some(tolerance) = rtt_tolerance {
                    gradient = gradient.rtt_tolerance(tolerance);
                }
                if let Some(samples) = long_window {
                    gradient = gradient.long_window(samples);
                }
                Box::new(gradient)
            }
            Self::Vegas {
                initial_limit,
                max_limit,
                smoothing,
                probe_multiplier,
                seed,
            } => {
                let mut vegas = Vegas::new();
                if let Some(limit) = initial_limit {
                    vegas = vegas.initial_limit(limit);
                }
                if let Some(limit) = max_limit {
                    vegas = vegas.max_limit(limit);
                }
                if let Some(smoothing) = smoothing {
                    vegas = vegas.smoothing(smoothing);
                }
                if let Some(multiplier) = probe_multiplier {
                    vegas = vegas.probe_multiplier(multiplier);
                }
                if let Some(seed) = seed {
                    vegas = vegas.seed(seed);
                }
                Box::new(vegas)
            }
            Self::Fixed { limit } => Box::new(Fixed::new(limit)),
        };
        algorithm.validate()?;
        Ok(algorithm)
    }
}
