//! [`PoolSettings`]: a [`Pool`] described by plain values: its endpoints' breakers, its
//! deadline and cap, its hedge, its slow start and its adaptive concurrency limit.

use std::fmt;
use std::time::Duration;

use crate::breaker::Breaker;
use crate::error::{ConfigError, Number};
use crate::policy::{ConsecutiveFailures, TripPolicy};
use crate::pool::{Pool, SlowStart};
use crate::retry::Hedge;

use super::limit::LimitSettings;
use super::Settings;

/// A [`Pool`] keyed by endpoint (an address): every endpoint's breaker from `endpoint`
/// (named after its key), and the pool's own settings, each left out for the pool's
/// default.
///
/// In a file (with the `serde` feature):
///
/// ```toml
/// deadline = "300ms"
/// max_isolated = 0.5
/// jitter = 0.1
/// hedge = { percentile = 0.95, max_attempts = 2 }
/// slow_start = { window = "30s", aggression = 1.0, min_weight_percent = 10.0 }
/// limit = { kind = "aimd", initial_limit = 20, max_limit = 100, timeout = "2s" }
///
/// [endpoint]
/// policy = { kind = "consecutive_failures", threshold = 5 }
/// ```
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "serde")]
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use lazybreaker::config::PoolSettings;
///
/// let settings: PoolSettings = toml::from_str(r#"
///     deadline = "300ms"
///     hedge = { percentile = 0.95 }
///     slow_start = { window = "30s" }
///     limit = { kind = "gradient2", initial_limit = 40 }
/// "#)?;
/// let pool = settings.build::<String>()?;
/// assert_eq!(pool.hedge_policy().unwrap().percentile(), Some(0.95));
/// assert_eq!(pool.limit_algorithm().unwrap().limit(), 40);
///
/// // A value out of range is refused, naming its field.
/// let settings: PoolSettings = toml::from_str("hedge = { percentile = 1.5 }")?;
/// let err = settings.build::<String>().unwrap_err();
/// assert_eq!(err.field(), "hedge.percentile");
/// let err = toml::from_str::<PoolSettings>("slow_start = { window = 30 }").unwrap_err();
/// assert!(err.message().contains("`slow_start.window`"));
/// let settings: PoolSettings = toml::from_str(r#"limit = { kind = "aimd", backoff_ratio = 1.5 }"#)?;
/// assert_eq!(settings.validate().unwrap_err().field(), "limit.backoff_ratio");
/// # Ok(())
/// # }
/// # #[cfg(not(feature = "serde"))]
/// # fn main() {}
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct PoolSettings {
    /// Every endpoint's breaker (its `name` is ignored: each is named after its key). An
    /// open period left out gets the pool's backoff ([`Pool::open_backoff`]).
    pub endpoint: Settings,
    /// The calls' deadline ([`Pool::deadline`]); none by default.
    #[cfg_attr(
        feature = "serde",
        serde(
            skip_serializing_if = "Option::is_none",
            serialize_with = "serialize_some_duration"
        )
    )]
    pub deadline: Option<Duration>,
    /// The isolation cap ([`Pool::max_isolated`]), within [0, 1]; 0.5 by default.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub max_isolated: Option<f64>,
    /// The spread of the endpoints' open periods and ejections ([`Pool::jitter`]), within
    /// [0, 1]; the pool's default when left out. An `endpoint` that sets a `jitter` of its
    /// own keeps it.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub jitter: Option<f64>,
    /// Hedged calls ([`Pool::hedge`]); none by default.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub hedge: Option<HedgeSettings>,
    /// Slow start ([`Pool::slow_start`]); none by default.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub slow_start: Option<SlowStartSettings>,
    /// Each endpoint's adaptive concurrency limit ([`Pool::limit`]); none by default.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub limit: Option<LimitSettings>,
}

/// An optional duration (`deadline`, `hedge.delay`, `limit.timeout`) written as the crate
/// writes durations.
#[cfg(feature = "serde")]
pub(super) fn serialize_some_duration<S: serde::Serializer>(
    duration: &Option<Duration>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match duration {
        Some(d) => crate::serde_duration::serialize(d, serializer),
        None => serializer.serialize_none(),
    }
}

/// A [`Hedge`] in plain values: `delay` (a fixed one) or `percentile` (of the recent
/// latencies), exactly one of them, and `max_attempts` (2 by default).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct HedgeSettings {
    /// A hedge after this long ([`Hedge::after`]).
    #[cfg_attr(
        feature = "serde",
        serde(
            skip_serializing_if = "Option::is_none",
            serialize_with = "serialize_some_duration"
        )
    )]
    pub delay: Option<Duration>,
    /// A hedge after this quantile of the recent latencies ([`Hedge::at_percentile`]), in
    /// (0, 1).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub percentile: Option<f64>,
    /// At most this many attempts a call, the first included ([`Hedge::max_attempts`]).
    pub max_attempts: u32,
}

impl Default for HedgeSettings {
    fn default() -> Self {
        Self {
            delay: None,
            percentile: None,
            max_attempts: 2,
        }
    }
}

impl HedgeSettings {
    /// The hedge these settings describe.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `hedge` when neither or both of `delay` and `percentile` are
    /// set, else [`Hedge::validate`]'s (`hedge.percentile`, `hedge.max_attempts`).
    pub fn to_hedge(&self) -> Result<Hedge, ConfigError> {
        let hedge = match (self.delay, self.percentile) {
            (Some(delay), None) => Hedge::after(delay),
            (None, Some(p)) => Hedge::at_percentile(p),
            (delay, p) => {
                return Err(ConfigError::new(
                    "hedge",
                    Both(delay, p),
                    "set exactly one of `delay` and `percentile`",
                ))
            }
        };
        let hedge = hedge.max_attempts(self.max_attempts);
        hedge.validate()?;
        Ok(hedge)
    }
}

/// How a hedge's two whens read in an error.
struct Both(Option<Duration>, Option<f64>);

impl fmt::Display for Both {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.0, self.1) {
            (None, None) => f.write_str("{}"),
            (delay, p) => write!(
                f,
                "{{ delay = {:?}, percentile = {} }}",
                delay.unwrap_or_default(),
                Number(p.unwrap_or_default())
            ),
        }
    }
}

/// A [`SlowStart`] in plain values: `window` (required), `aggression` (1.0 by default),
/// `min_weight_percent` (10 by default).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct SlowStartSettings {
    /// The ramp's length ([`SlowStart::new`]).
    #[cfg_attr(
        feature = "serde",
        serde(serialize_with = "crate::serde_duration::serialize")
    )]
    pub window: Duration,
    /// The curve's aggression ([`SlowStart::aggression`]).
    pub aggression: f64,
    /// The weight at the start, in percent ([`SlowStart::min_weight_percent`]).
    pub min_weight_percent: f64,
}

impl Default for SlowStartSettings {
    fn default() -> Self {
        Self {
            window: Duration::ZERO,
            aggression: 1.0,
            min_weight_percent: 10.0,
        }
    }
}

impl SlowStartSettings {
    /// The slow start these settings describe.
    ///
    /// # Errors
    ///
    /// [`SlowStart::validate`]'s [`ConfigError`] (`slow_start.window`, …).
    pub fn to_slow_start(&self) -> Result<SlowStart, ConfigError> {
        let slow_start = SlowStart::new(self.window)
            .aggression(self.aggression)
            .min_weight_percent(self.min_weight_percent);
        slow_start.validate()?;
        Ok(slow_start)
    }
}

impl PoolSettings {
    /// Checks every setting's range: the endpoint's as [`Settings::validate`] does (under
    /// `endpoint`), `max_isolated` and `jitter` within [0, 1], the hedge's, the slow
    /// start's and the limit's ([`LimitSettings::to_algorithm`]).
    ///
    /// # Errors
    ///
    /// The first setting out of range, named by its path (`endpoint.policy.ratio`,
    /// `max_isolated`, `jitter`, `hedge.percentile`, `slow_start.aggression`,
    /// `limit.backoff_ratio`).
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.endpoint
            .validate()
            .map_err(|err| err.within("endpoint"))?;
        if let Some(cap) = self.max_isolated {
            if !(0.0..=1.0).contains(&cap) {
                return Err(ConfigError::new(
                    "max_isolated",
                    Number(cap),
                    "must be within [0, 1] (a fraction of the endpoints)",
                ));
            }
        }
        if let Some(fraction) = self.jitter {
            crate::jitter::check(fraction)?;
        }
        if let Some(hedge) = &self.hedge {
            hedge.to_hedge()?;
        }
        if let Some(slow_start) = &self.slow_start {
            slow_start.to_slow_start()?;
        }
        if let Some(limit) = &self.limit {
            limit.to_algorithm()?;
        }
        Ok(())
    }

    /// The pool these settings describe, with no endpoint yet ([`Pool::set`] them), after
    /// [`validate`](Self::validate).
    ///
    /// # Errors
    ///
    /// [`validate`](Self::validate)'s.
    pub fn build<K>(&self) -> Result<Pool<K, Box<dyn TripPolicy>>, ConfigError>
    where
        K: Clone + Eq + fmt::Display + Send + Sync + 'static,
    {
        self.validate()?;
        let endpoint = self.endpoint.clone();
        let mut pool = Pool::new(move |key: &K| {
            let mut settings = endpoint.clone();
            settings.knobs.name = key.to_string();
            // Checked by `validate`: the fallback (the builder's defaults) is never used.
            settings.to_builder().unwrap_or_else(|_| {
                Breaker::builder()
                    .knobs(settings.knobs)
                    .policy(Box::new(ConsecutiveFailures::default()) as Box<dyn TripPolicy>)
            })
        });
        if let Some(deadline) = self.deadline {
            pool = pool.deadline(deadline);
        }
        if let Some(cap) = self.max_isolated {
            pool = pool.max_isolated(cap);
        }
        if let Some(fraction) = self.jitter {
            pool = pool.jitter(fraction);
        }
        if let Some(hedge) = &self.hedge {
            pool = pool.hedge(hedge.to_hedge()?);
        }
        if let Some(slow_start) = &self.slow_start {
            pool = pool.slow_start(slow_start.to_slow_start()?);
        }
        if let Some(limit) = &self.limit {
            pool = pool.limit(limit.to_algorithm()?);
        }
        Ok(pool)
    }
}
