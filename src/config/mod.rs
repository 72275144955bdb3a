//! Breakers described by plain values: [`Settings`] for every knob, a [`PolicyConfig`] for
//! every built-in policy, an [`OpenDurationConfig`], and errors that name the breaker, the
//! field by its path, and the reason.
//!
//! The values are plain Rust, available without any feature: build them in code, keep them
//! in your own configuration structs, and turn them into breakers with
//! [`Breaker::from_settings`], [`Settings::to_builder`] or [`build_all`]. With the `serde`
//! feature they also serialise and deserialise, so services keep their breakers' settings in
//! TOML, YAML or JSON next to the rest of their configuration, and change them without a
//! rebuild. Any self-describing serde format works; the examples here use TOML.
//!
//! # Two kinds of error
//!
//! - **The file does not fit the shape** (with `serde`): an unknown field (a typo is never
//!   silently ignored), a wrong type, a duration that does not parse, an unknown policy
//!   `kind`, a list where a table belongs. Deserializing reports these while parsing, as a
//!   [`ConfigError`] that names the field by its full path, the value as written, and the
//!   breaker: `` breaker `payments`: invalid `policy.policies[1].min_requests` = -1: expected
//!   a non-negative integer ``. Through a format crate (`toml::from_str`,
//!   `serde_json::from_str`, …) it arrives as the format's error with exactly that message;
//!   `Settings::from_deserializer` returns it typed, apart from the format's own syntax
//!   errors. A breaker is named by its table's `name`; in a [`Breakers`] file, by its key
//!   when it has no `name`.
//! - **A value is out of range**: a ratio outside `[0, 1]`, a zero window, a bucket period
//!   that does not fit the interval, an isolation minimum above its maximum. Building the
//!   breaker ([`Breaker::from_settings`], [`Settings::to_builder`], [`build_all`]) reports these
//!   as a [`ConfigError`] that names the breaker and the field's path in the settings:
//!   `` breaker `payments`: invalid `policy.ratio` = 1.5: must be within [0, 1] ``.
//!
//! The range checks are the policies' own constructors ([`ConsecutiveFailures::new`],
//! [`FailureRatio::new`], [`Ema::new`] with [`EmaConfig::validate`]) and
//! [`Builder::build_strict`]'s strict reading of the window knobs: a breaker built from a file
//! is checked exactly as one built in code.
//!
//! # Durations
//!
//! In files, durations are strings in [humantime]'s format, and are written back in it:
//! `"250ms"`, `"10s"`, `"1m30s"` (or `"1m 30s"`), `"2h"`. Units: `ns`, `us`, `ms`, `s`, `m`
//! (minutes), `h`, `d`, `w`; beware that `M` is months. `"0s"` (or `"0"`) is zero, which for
//! `interval`, `bucket_period` and `timeout` means the builder's default.
//!
//! [humantime]: https://docs.rs/humantime
//!
//! # Examples
//!
//! Settings made in code:
//!
//! ```
//! use lazybreaker::config::{self, PolicyConfig, Settings};
//! use std::time::Duration;
//!
//! let payments = Settings {
//!     interval: Duration::from_secs(10),
//!     bucket_period: Duration::from_secs(1),
//!     policy: PolicyConfig::FailureRatio { ratio: 0.5, min_requests: 20 },
//!     ..Settings::default()
//! };
//! let breakers = config::build_all([("payments", payments), ("search", Settings::default())])?;
//! assert_eq!(breakers[0].1.name(), "payments"); // the key names a breaker without a `name`
//! # Ok::<(), lazybreaker::ConfigError>(())
//! ```
//!
//! One breaker per downstream, in one TOML file (with the `serde` feature):
//!
//! ```
//! # #[cfg(feature = "serde")]
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use lazybreaker::config::{self, Settings};
//! use lazybreaker::State;
//! use std::collections::BTreeMap;
//!
//! let file = r#"
//!     [payments]
//!     timeout = "30s"
//!     interval = "10s"
//!     bucket_period = "1s"
//!     policy = { kind = "failure_ratio", ratio = 0.5, min_requests = 20 }
//!
//!     [search.policy]
//!     kind = "ema"
//!     min_isolation = "250ms"
//!     max_isolation = "1m30s"
//! "#;
//! let settings: BTreeMap<String, Settings> = toml::from_str(file)?;
//! let breakers = config::build_all(&settings)?;
//! assert_eq!(breakers[0].0, "payments"); // the map key names a breaker without a `name`
//! assert_eq!(breakers[0].1.name(), "payments");
//! assert_eq!(breakers[1].1.state(), State::Closed);
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "serde"))]
//! # fn main() {}
//! ```
//!
//! What a user sees for a value out of range:
//!
//! ```
//! # #[cfg(feature = "serde")]
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use lazybreaker::config::Settings;
//! use lazybreaker::Breaker;
//!
//! let settings: Settings = toml::from_str(r#"
//!     name = "payments"
//!     policy = { kind = "failure_ratio", ratio = 1.5, min_requests = 20 }
//! "#)?;
//! let err = Breaker::from_settings(&settings).unwrap_err();
//! assert_eq!(err.breaker(), Some("payments"));
//! assert_eq!(err.field(), "policy.ratio");
//! assert_eq!(
//!     err.to_string(),
//!     "breaker `payments`: invalid `policy.ratio` = 1.5: must be within [0, 1]"
//! );
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "serde"))]
//! # fn main() {}
//! ```
//!
//! and for a typo or a wrong type, reported while parsing:
//!
//! ```
//! # #[cfg(feature = "serde")]
//! # fn main() {
//! use lazybreaker::config::Settings;
//!
//! let err = toml::from_str::<Settings>(r#"intervall = "10s""#).unwrap_err();
//! assert!(err
//!     .message()
//!     .starts_with(r#"invalid `intervall` = "10s": unknown field, expected one of `name`"#));
//!
//! let err = toml::from_str::<Settings>(r#"
//!     name = "payments"
//!     policy = { kind = "failure_ratio", ratio = "0.5", min_requests = 1 }
//! "#)
//! .unwrap_err();
//! assert_eq!(
//!     err.message(),
//!     r#"breaker `payments`: invalid `policy.ratio` = "0.5": expected a number"#
//! );
//! # }
//! # #[cfg(not(feature = "serde"))]
//! # fn main() {}
//! ```

#[cfg(feature = "serde")]
mod de;
mod registry;

use std::borrow::Borrow;
use std::collections::btree_map::{self, BTreeMap};
use std::time::Duration;

use crate::policy::{
    AnyOf, Backoff, ConsecutiveFailures, Ema, EmaConfig, FailureCount, FailureRatio, SlowCalls,
    TripPolicy,
};
use crate::{Breaker, Builder, ConfigError};

pub use crate::{DynBreaker, DynBuilder};

#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
pub use de::DeserializeError;
pub use registry::RegistrySettings;

/// Everything that configures a [`Breaker`], as a plain value or a table in a configuration
/// file.
///
/// Every field has the [builder](Breaker::builder)'s default (`..Settings::default()` in code);
/// in a file every field may be omitted, so an empty table is the default breaker, and
/// unknown fields are rejected. In files, durations are strings such as `"250ms"` or
/// `"1m30s"` (see the [module documentation](self)).
///
/// | field | default | meaning |
/// |---|---|---|
/// | `name` | empty | [`Builder::name`]; in a map of breakers, empty means the map key ([`build_all`]) |
/// | `max_requests` | `0` (means 1) | [`Builder::max_requests`]: half-open probes |
/// | `interval` | `"0s"` (never cleared) | [`Builder::interval`]: the closed-state count window |
/// | `bucket_period` | `"0s"` (fixed window) | [`Builder::bucket_period`]: must divide `interval` into at most [`MAX_BUCKETS`](crate::MAX_BUCKETS) whole buckets |
/// | `timeout` | `"0s"` (means 60 s) | [`Builder::timeout`]: the open duration of the counting policies |
/// | `policy` | `consecutive_failures`, threshold 6 | the [`PolicyConfig`] that decides when to trip |
/// | `open_duration` | `kind = "policy"` | the [`OpenDurationConfig`]: the policy's rule, or an exponential backoff |
///
/// # How long the breaker stays open
///
/// `open_duration` says ([`OpenDurationConfig`]). By default (`kind = "policy"`) the policy
/// decides, as in code ([`TripPolicy::open_duration`]): `consecutive_failures` and
/// `failure_ratio` stay open for `timeout`; `ema` stays open for brpc's isolation duration
/// (`min_isolation`, doubling up to `max_isolation` on repeated breaks) and ignores `timeout`;
/// `any_of` stays open for the duration of the policy that tripped (the longest when several
/// did, or when a half-open probe failed). `kind = "exponential"` overrides that with a
/// [`Backoff`]: `initial`, doubled on each failed recovery, up to `max`, whatever the policy.
///
/// # Examples
///
/// ```
/// use lazybreaker::config::{PolicyConfig, Settings};
/// use lazybreaker::{ManualClock, State};
/// use std::time::Duration;
///
/// let settings = Settings {
///     name: "inventory".into(),
///     timeout: Duration::from_secs(90),
///     policy: PolicyConfig::ConsecutiveFailures { threshold: 3 },
///     ..Settings::default()
/// };
///
/// // The settings are a builder away from a breaker: add a clock or a callback.
/// let clock = ManualClock::new();
/// let breaker = settings.to_builder()?.clock(clock.clone()).build_strict()?;
/// for _ in 0..3 {
///     let _ = breaker.execute(|| Err::<(), _>("refused"));
/// }
/// assert_eq!(breaker.state(), State::Open);
/// clock.advance(Duration::from_secs(90));
/// assert_eq!(breaker.state(), State::Open);
/// clock.advance(Duration::from_nanos(1));
/// assert_eq!(breaker.state(), State::HalfOpen);
/// # Ok::<(), lazybreaker::ConfigError>(())
/// ```
///
/// The same settings in a file (with the `serde` feature), and written back:
///
/// ```
/// # #[cfg(feature = "serde")]
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use lazybreaker::config::{PolicyConfig, Settings};
/// use std::time::Duration;
///
/// let settings: Settings = toml::from_str(r#"
///     name = "inventory"
///     timeout = "1m30s"
///     [policy]
///     kind = "consecutive_failures"
///     threshold = 3
/// "#)?;
/// assert_eq!(settings.timeout, Duration::from_secs(90));
/// assert_eq!(settings.policy, PolicyConfig::ConsecutiveFailures { threshold: 3 });
/// assert_eq!(settings.max_requests, 0); // omitted: the builder's default
///
/// // Settings serialise back, durations as humantime strings.
/// let text = toml::to_string(&settings)?;
/// assert!(text.contains(r#"timeout = "1m 30s""#));
/// assert_eq!(toml::from_str::<Settings>(&text)?, settings);
/// # Ok(())
/// # }
/// # #[cfg(not(feature = "serde"))]
/// # fn main() {}
/// ```
///
/// `Settings::default()` is the builder's defaults: every field's own default (no name,
/// `max_requests` 0, zero `interval`, `bucket_period` and `timeout`, the default
/// [`PolicyConfig`] and [`OpenDurationConfig`]).
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Settings {
    /// The breaker's name ([`Builder::name`]), reported by [`ConfigError::breaker`]. Empty by
    /// default; written out only when not empty.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "String::is_empty"))]
    pub name: String,
    /// How many probes the half-open state admits ([`Builder::max_requests`]); 0 means 1.
    pub max_requests: u32,
    /// The closed-state count window ([`Builder::interval`]); zero never clears the counts.
    #[cfg_attr(
        feature = "serde",
        serde(serialize_with = "crate::serde_duration::serialize")
    )]
    pub interval: Duration,
    /// The rolling window's bucket length ([`Builder::bucket_period`]); zero means a fixed
    /// window. Checked strictly, as by [`Builder::build_strict`]: it must divide `interval` into
    /// whole buckets, at most [`MAX_BUCKETS`](crate::MAX_BUCKETS) of them.
    #[cfg_attr(
        feature = "serde",
        serde(serialize_with = "crate::serde_duration::serialize")
    )]
    pub bucket_period: Duration,
    /// How long the breaker stays open when a counting policy trips it
    /// ([`Builder::timeout`]); zero means 60 s. `ema` chooses its own duration: see
    /// [How long the breaker stays open](Settings#how-long-the-breaker-stays-open).
    #[cfg_attr(
        feature = "serde",
        serde(serialize_with = "crate::serde_duration::serialize")
    )]
    pub timeout: Duration,
    /// When to trip.
    pub policy: PolicyConfig,
    /// How long to stay open: the policy's own rule (the default), or an exponential backoff.
    /// Written out only when not the default.
    #[cfg_attr(
        feature = "serde",
        serde(skip_serializing_if = "OpenDurationConfig::is_policy")
    )]
    pub open_duration: OpenDurationConfig,
}

/// How long a breaker built from [`Settings`] stays open each time it opens.
///
/// In a file, a table whose `kind` says which rule: `{ kind = "policy" }` (the default) or
/// `{ kind = "exponential", initial = "1s", max = "2m" }`.
///
/// # Examples
///
/// ```
/// use lazybreaker::config::{OpenDurationConfig, PolicyConfig, Settings};
/// use lazybreaker::Breaker;
/// use std::time::Duration;
///
/// let settings = Settings {
///     policy: PolicyConfig::ConsecutiveFailures { threshold: 5 },
///     open_duration: OpenDurationConfig::Exponential {
///         initial: Duration::from_secs(1),
///         max: Duration::from_secs(120),
///     },
///     ..Settings::default()
/// };
/// let _breaker = Breaker::from_settings(&settings)?;
///
/// let err = Settings {
///     name: "payments".into(),
///     open_duration: OpenDurationConfig::Exponential {
///         initial: Duration::from_secs(300),
///         max: Duration::from_secs(60),
///     },
///     ..Settings::default()
/// }
/// .validate()
/// .unwrap_err();
/// assert_eq!(err.field(), "open_duration.initial");
/// # Ok::<(), lazybreaker::ConfigError>(())
/// ```
///
/// In a file (with the `serde` feature):
///
/// ```
/// # #[cfg(feature = "serde")]
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use lazybreaker::config::{OpenDurationConfig, Settings};
/// use std::time::Duration;
///
/// let settings: Settings = toml::from_str(r#"
///     policy = { kind = "consecutive_failures", threshold = 5 }
///     open_duration = { kind = "exponential", initial = "1s", max = "2m" }
/// "#)?;
/// assert_eq!(
///     settings.open_duration,
///     OpenDurationConfig::Exponential {
///         initial: Duration::from_secs(1),
///         max: Duration::from_secs(120),
///     }
/// );
/// # Ok(())
/// # }
/// # #[cfg(not(feature = "serde"))]
/// # fn main() {}
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(tag = "kind", rename_all = "snake_case"))]
#[non_exhaustive]
pub enum OpenDurationConfig {
    /// The policy decides: `timeout` for the counting policies, brpc's isolation for `ema`.
    /// In a file, `{ kind = "policy" }` and nothing else (`{ kind = "policy", max = "1m" }` is
    /// an error).
    Policy {},
    /// A [`Backoff`]: `initial`, doubled on each trip after a failed recovery, up to `max`;
    /// back to `initial` once the breaker closes.
    Exponential {
        /// The first open duration, above zero.
        #[cfg_attr(
            feature = "serde",
            serde(serialize_with = "crate::serde_duration::serialize")
        )]
        initial: Duration,
        /// The longest open duration, at least `initial`.
        #[cfg_attr(
            feature = "serde",
            serde(serialize_with = "crate::serde_duration::serialize")
        )]
        max: Duration,
    },
}

impl Default for OpenDurationConfig {
    fn default() -> Self {
        OpenDurationConfig::Policy {}
    }
}

impl OpenDurationConfig {
    #[cfg(feature = "serde")]
    fn is_policy(&self) -> bool {
        matches!(self, OpenDurationConfig::Policy {})
    }

    /// `policy`, with this rule for its open duration.
    fn apply(&self, policy: Box<dyn TripPolicy>) -> Result<Box<dyn TripPolicy>, ConfigError> {
        Ok(match *self {
            OpenDurationConfig::Policy {} => policy,
            OpenDurationConfig::Exponential { initial, max } => {
                Box::new(Backoff::new(policy, initial, max)?)
            }
        })
    }
}

impl Settings {
    /// A builder with these settings and their policy, checked: add a
    /// [`clock`](Builder::clock) or an [`on_state_change`](Builder::on_state_change) callback,
    /// then [`build`](Builder::build) it.
    ///
    /// # Errors
    ///
    /// The first invalid field, in declaration order, as a [`ConfigError`] that names this
    /// breaker (when `name` is set) and the field's path: `bucket_period` when it does not fit
    /// `interval` (as [`Builder::build_strict`] checks it), then `policy.…` for the policy's
    /// parameters (see [`PolicyConfig::build`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::config::Settings;
    /// use std::time::Duration;
    ///
    /// let settings = Settings {
    ///     name: "search".into(),
    ///     interval: Duration::from_secs(10),
    ///     bucket_period: Duration::from_secs(3),
    ///     ..Settings::default()
    /// };
    /// let err = settings.to_builder().err().unwrap();
    /// assert_eq!(
    ///     err.to_string(),
    ///     "breaker `search`: invalid `bucket_period` = 3s: must divide `interval` into whole buckets"
    /// );
    /// ```
    pub fn to_builder(&self) -> Result<Builder<Box<dyn TripPolicy>>, ConfigError> {
        let named = |err: ConfigError| err.for_breaker(&self.name);
        crate::window_check::check(self.interval, self.bucket_period).map_err(named)?;
        let policy = self
            .policy
            .build()
            .map_err(|err| named(err.within("policy")))?;
        let policy = self
            .open_duration
            .apply(policy)
            .map_err(|err| named(err.within("open_duration")))?;
        Ok(Breaker::builder()
            .name(self.name.as_str())
            .max_requests(self.max_requests)
            .interval(self.interval)
            .bucket_period(self.bucket_period)
            .timeout(self.timeout)
            .policy(policy))
    }

    /// Checks every field as [`to_builder`](Settings::to_builder) does, without keeping the
    /// builder.
    ///
    /// # Errors
    ///
    /// As [`to_builder`](Settings::to_builder).
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.to_builder().map(drop)
    }
}

impl Breaker<Box<dyn TripPolicy>> {
    /// A breaker built from `settings`, with the default clock and no state-change callback
    /// (use [`Settings::to_builder`] to add them). Its policy is chosen at run time: a
    /// `Box<dyn TripPolicy>`.
    ///
    /// # Errors
    ///
    /// As [`Settings::to_builder`]: a [`ConfigError`] naming the breaker and the invalid
    /// field.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::config::{PolicyConfig, Settings};
    /// use lazybreaker::{Breaker, State};
    ///
    /// let settings = Settings {
    ///     name: "payments".into(),
    ///     policy: PolicyConfig::FailureRatio { ratio: 0.5, min_requests: 4 },
    ///     ..Settings::default()
    /// };
    /// let breaker = Breaker::from_settings(&settings)?;
    /// assert_eq!(breaker.name(), "payments");
    /// for ok in [true, false, true, false] {
    ///     let _ = breaker.execute(|| if ok { Ok(()) } else { Err("boom") });
    /// }
    /// assert_eq!(breaker.state(), State::Open); // 2 failures of 4 requests
    /// # Ok::<(), lazybreaker::ConfigError>(())
    /// ```
    pub fn from_settings(settings: &Settings) -> Result<Self, ConfigError> {
        // `to_builder` has checked the window already, naming the breaker.
        Ok(settings.to_builder()?.build())
    }
}

/// A trip policy as it appears in a configuration file: a table whose `kind` says which
/// built-in policy, with that policy's parameters beside it.
///
/// | `kind` | parameters | policy |
/// |---|---|---|
/// | `consecutive_failures` | `threshold` (default 6) | [`ConsecutiveFailures`] |
/// | `failure_ratio` | `ratio`, `min_requests` (both required) | [`FailureRatio`] |
/// | `failure_count` | `failures`, `min_requests` (both required) | [`FailureCount`] |
/// | `slow_calls` | `threshold` (a duration), `ratio`, `min_requests` (all required), `probes_on_latency_alone` (default `false`) | [`SlowCalls`] |
/// | `ema` | the ten fields of [`EmaConfig`], each optional with brpc's default | [`Ema`] |
/// | `any_of` | `policies`: a list of at least one policy, `any_of` included | [`AnyOf`], folded left: `a.or(b).or(c)` |
///
/// The default is `consecutive_failures` with threshold 6: the builder's default policy,
/// [`ConsecutiveFailures::default`]. In a file, unknown parameters are rejected.
///
/// # Examples
///
/// ```
/// use lazybreaker::config::PolicyConfig;
/// use lazybreaker::policy::{EmaConfig, FailureRatio};
/// use std::time::Duration;
///
/// let policy = PolicyConfig::AnyOf {
///     policies: vec![
///         PolicyConfig::ConsecutiveFailures { threshold: 20 },
///         PolicyConfig::from(FailureRatio::new(0.5, 10)?),
///         PolicyConfig::Ema(EmaConfig {
///             max_isolation: Duration::from_secs(10),
///             ..EmaConfig::default()
///         }),
///     ],
/// };
/// let _trip_policy = policy.build()?; // a Box<dyn TripPolicy>
/// # Ok::<(), lazybreaker::ConfigError>(())
/// ```
///
/// In a file (with the `serde` feature):
///
/// ```
/// # #[cfg(feature = "serde")]
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use lazybreaker::config::PolicyConfig;
/// use lazybreaker::policy::EmaConfig;
/// use std::time::Duration;
///
/// let policy: PolicyConfig = toml::from_str(r#"
///     kind = "any_of"
///     [[policies]]
///     kind = "consecutive_failures"
///     threshold = 20
///     [[policies]]
///     kind = "ema"
///     short_window_size = 100
///     max_isolation = "10s"
/// "#)?;
/// let expected = PolicyConfig::AnyOf {
///     policies: vec![
///         PolicyConfig::ConsecutiveFailures { threshold: 20 },
///         PolicyConfig::Ema(EmaConfig {
///             short_window_size: 100,
///             max_isolation: Duration::from_secs(10),
///             ..EmaConfig::default()
///         }),
///     ],
/// };
/// assert_eq!(policy, expected);
/// # Ok(())
/// # }
/// # #[cfg(not(feature = "serde"))]
/// # fn main() {}
/// ```
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(tag = "kind", rename_all = "snake_case"))]
#[non_exhaustive]
pub enum PolicyConfig {
    /// [`ConsecutiveFailures`]: trips on the `threshold`-th consecutive failure.
    ConsecutiveFailures {
        /// The number of consecutive failures that trips the breaker, at least 1; 6 when
        /// omitted ([`ConsecutiveFailures::DEFAULT_THRESHOLD`]).
        threshold: u64,
    },
    /// [`FailureRatio`]: trips when `failures / requests` reaches `ratio`, once `requests`
    /// reaches `min_requests`.
    FailureRatio {
        /// The failure ratio that trips the breaker, within `[0, 1]`.
        ratio: f64,
        /// The number of requests in the window before the ratio is considered.
        min_requests: u64,
    },
    /// [`FailureCount`]: trips on `failures` failures, once `requests` reaches
    /// `min_requests`.
    FailureCount {
        /// The number of failures in the window that trips the breaker, at least 1.
        failures: u64,
        /// The number of requests in the window before the failures are considered.
        min_requests: u64,
    },
    /// [`SlowCalls`]: trips when `slow_calls / requests` reaches `ratio`, once `requests`
    /// reaches `min_requests`; a call slower than `threshold` is slow.
    SlowCalls {
        /// The latency above which a call is slow, more than zero (a duration string in a
        /// file).
        #[cfg_attr(
            feature = "serde",
            serde(serialize_with = "crate::serde_duration::serialize")
        )]
        threshold: Duration,
        /// The share of slow calls that trips the breaker, within `[0, 1]`.
        ratio: f64,
        /// The number of requests in the window before the ratio is considered.
        min_requests: u64,
        /// Judge half-open probes on latency alone (Sentinel's way,
        /// [`SlowCalls::judging_probes_on_latency_alone`]); `false` when omitted.
        probes_on_latency_alone: bool,
    },
    /// [`Ema`]: brpc's EMA dual-window policy, with its ten knobs named as the fields of
    /// [`EmaConfig`] (each optional, brpc's default when omitted; `min_error_cost`,
    /// `min_isolation` and `max_isolation` are duration strings).
    Ema(EmaConfig),
    /// [`AnyOf`]: trips when any of `policies` trips, and stays open for the duration the
    /// tripping one chooses.
    AnyOf {
        /// The policies, at least one. A single policy behaves as itself.
        policies: Vec<PolicyConfig>,
    },
}

impl Default for PolicyConfig {
    /// The builder's default policy: consecutive failures with
    /// [`ConsecutiveFailures::default`]'s threshold (6).
    fn default() -> Self {
        ConsecutiveFailures::default().into()
    }
}

impl PolicyConfig {
    /// The trip policy this describes, through the policy's own constructor.
    ///
    /// # Errors
    ///
    /// The constructor's [`ConfigError`], with the field's path relative to this policy:
    /// `threshold`, `ratio`, an [`EmaConfig::validate`] field such as `min_isolation`, or for
    /// `any_of` `policies` when the list is empty and `policies[i].…` for an invalid entry.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::config::PolicyConfig;
    ///
    /// let policy = PolicyConfig::AnyOf {
    ///     policies: vec![
    ///         PolicyConfig::ConsecutiveFailures { threshold: 3 },
    ///         PolicyConfig::FailureRatio { ratio: 2.0, min_requests: 10 },
    ///     ],
    /// };
    /// let err = policy.build().err().unwrap();
    /// assert_eq!(err.field(), "policies[1].ratio");
    /// assert_eq!(err.value(), "2");
    /// ```
    pub fn build(&self) -> Result<Box<dyn TripPolicy>, ConfigError> {
        Ok(match self {
            Self::ConsecutiveFailures { threshold } => {
                Box::new(ConsecutiveFailures::new(*threshold)?)
            }
            Self::FailureRatio {
                ratio,
                min_requests,
            } => Box::new(FailureRatio::new(*ratio, *min_requests)?),
            Self::FailureCount {
                failures,
                min_requests,
            } => Box::new(FailureCount::new(*failures, *min_requests)?),
            Self::SlowCalls {
                threshold,
                ratio,
                min_requests,
                probes_on_latency_alone,
            } => {
                let policy = SlowCalls::new(*threshold, *ratio, *min_requests)?;
                Box::new(if *probes_on_latency_alone {
                    policy.judging_probes_on_latency_alone()
                } else {
                    policy
                })
            }
            Self::Ema(config) => Box::new(Ema::new(*config)?),
            Self::AnyOf { policies } => {
                let mut built = policies.iter().enumerate().map(|(i, policy)| {
                    policy
                        .build()
                        .map_err(|err| err.within(format_args!("policies[{i}]")))
                });
                let first = built.next().unwrap_or_else(|| {
                    Err(ConfigError::new(
                        "policies",
                        "[]",
                        "must list at least one policy",
                    ))
                })?;
                built.try_fold(first, |any, next| {
                    Ok::<Box<dyn TripPolicy>, ConfigError>(Box::new(AnyOf::new(any, next?)))
                })?
            }
        })
    }
}

impl From<ConsecutiveFailures> for PolicyConfig {
    fn from(policy: ConsecutiveFailures) -> Self {
        Self::ConsecutiveFailures {
            threshold: policy.threshold(),
        }
    }
}

impl From<FailureRatio> for PolicyConfig {
    fn from(policy: FailureRatio) -> Self {
        Self::FailureRatio {
            ratio: policy.ratio(),
            min_requests: policy.min_requests(),
        }
    }
}

impl From<FailureCount> for PolicyConfig {
    fn from(policy: FailureCount) -> Self {
        Self::FailureCount {
            failures: policy.failures(),
            min_requests: policy.min_requests(),
        }
    }
}

impl From<SlowCalls> for PolicyConfig {
    fn from(policy: SlowCalls) -> Self {
        Self::SlowCalls {
            threshold: policy.threshold(),
            ratio: policy.ratio(),
            min_requests: policy.min_requests(),
            probes_on_latency_alone: policy.probes_on_latency_alone(),
        }
    }
}

impl From<EmaConfig> for PolicyConfig {
    fn from(config: EmaConfig) -> Self {
        Self::Ema(config)
    }
}

/// Builders for a map of named settings (e.g. one breaker per downstream, as a file's tables
/// name them), in the map's order, each paired with its key.
///
/// A breaker's name is its `name` when that is set, and its map key otherwise: a file can key
/// its tables by a short id and still give a breaker a longer name. Errors name the breaker
/// by that same name.
///
/// # Errors
///
/// The first invalid entry's [`ConfigError`] (see [`Settings::to_builder`]), naming the
/// breaker.
///
/// # Examples
///
/// ```
/// use lazybreaker::config::{self, Settings};
/// use lazybreaker::ManualClock;
/// use std::collections::BTreeMap;
/// use std::time::Duration;
///
/// let settings = BTreeMap::from([
///     ("inventory", Settings { timeout: Duration::from_secs(5), ..Settings::default() }),
///     ("payments", Settings { name: "payments-eu".into(), ..Settings::default() }),
/// ]);
/// let clock = ManualClock::new();
/// let breakers: Vec<_> = config::builders(&settings)?
///     .into_iter()
///     .map(|(key, builder)| (key, builder.clock(clock.clone()).build()))
///     .collect();
/// assert_eq!(breakers[0].1.name(), "inventory");
/// assert_eq!((breakers[1].0.as_str(), breakers[1].1.name()), ("payments", "payments-eu"));
/// # Ok::<(), lazybreaker::ConfigError>(())
/// ```
pub fn builders<I, K, S>(settings: I) -> Result<Vec<(String, DynBuilder)>, ConfigError>
where
    I: IntoIterator<Item = (K, S)>,
    K: AsRef<str>,
    S: Borrow<Settings>,
{
    settings
        .into_iter()
        .map(|(key, settings)| {
            let (key, settings) = (key.as_ref(), settings.borrow());
            let name = breaker_name(key, settings);
            let builder = settings.to_builder().map_err(|err| err.for_breaker(name))?;
            Ok((key.to_owned(), builder.name(name)))
        })
        .collect()
}

/// A breaker's name in a map of settings: its `name`, or else its key.
fn breaker_name<'a>(key: &'a str, settings: &'a Settings) -> &'a str {
    if settings.name.is_empty() {
        key
    } else {
        &settings.name
    }
}

/// Breakers for a map of named settings, with the default clock and no callbacks: see
/// [`builders`] for the naming rule and to customise the builders first.
///
/// # Errors
///
/// The first invalid entry's [`ConfigError`], naming the breaker.
///
/// # Examples
///
/// ```
/// use lazybreaker::config::{self, PolicyConfig, Settings};
/// use lazybreaker::policy::EmaConfig;
/// use std::time::Duration;
///
/// let with_policy = |policy| Settings { policy, ..Settings::default() };
/// let settings = [
///     ("inventory", with_policy(PolicyConfig::ConsecutiveFailures { threshold: 3 })),
///     ("payments", with_policy(PolicyConfig::FailureRatio { ratio: 0.5, min_requests: 0 })),
///     ("search", with_policy(PolicyConfig::Ema(EmaConfig {
///         min_isolation: Duration::from_secs(60),
///         max_isolation: Duration::from_secs(30),
///         ..EmaConfig::default()
///     }))),
/// ];
/// let err = config::build_all(settings).unwrap_err();
/// assert_eq!(err.breaker(), Some("search"));
/// assert_eq!(err.field(), "policy.min_isolation");
/// ```
pub fn build_all<I, K, S>(settings: I) -> Result<Vec<(String, DynBreaker)>, ConfigError>
where
    I: IntoIterator<Item = (K, S)>,
    K: AsRef<str>,
    S: Borrow<Settings>,
{
    // `builders` already checked everything `build_strict` would.
    Ok(builders(settings)?
        .into_iter()
        .map(|(key, builder)| (key, builder.build()))
        .collect())
}

/// A file of breakers: [`Settings`] keyed by breaker name, in key order.
///
/// A map, like `BTreeMap<String, Settings>`, that builds its breakers ([`builders`],
/// [`build_all`]: a breaker is named by its `name`, or else by its key) and, with the `serde`
/// feature, reads a file whose top-level tables are the breakers. Unlike a plain map, whose
/// [`Settings`] cannot know the key they are read under, it attributes an error inside an
/// entry to that entry's breaker: `` breaker `search`: invalid `intervall` = "10s": unknown
/// field, … `` for a typo in `[search]`.
///
/// # Examples
///
/// ```
/// use lazybreaker::config::{Breakers, Settings};
/// use std::time::Duration;
///
/// let breakers: Breakers = [
///     ("payments", Settings { timeout: Duration::from_secs(30), ..Settings::default() }),
///     ("search", Settings { name: "search-eu".into(), ..Settings::default() }),
/// ]
/// .into_iter()
/// .collect();
/// let built = breakers.build_all()?;
/// assert_eq!(built[0].1.name(), "payments");
/// assert_eq!(built[1].1.name(), "search-eu");
/// # Ok::<(), lazybreaker::ConfigError>(())
/// ```
///
/// From a file (with the `serde` feature):
///
/// ```
/// # #[cfg(feature = "serde")]
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use lazybreaker::config::Breakers;
///
/// let breakers: Breakers = toml::from_str(r#"
///     [payments]
///     timeout = "30s"
///     [search.policy]
///     kind = "consecutive_failures"
///     threshold = 3
/// "#)?;
/// assert_eq!(breakers.len(), 2);
/// assert!(breakers.get("search").is_some());
///
/// let err = toml::from_str::<Breakers>(r#"
///     [payments]
///     timeout = "30s"
///     [search]
///     policy = { kind = "consecutive_failures", threshold = -3 }
/// "#)
/// .unwrap_err();
/// assert_eq!(
///     err.message(),
///     "breaker `search`: invalid `policy.threshold` = -3: expected a non-negative integer"
/// );
/// # Ok(())
/// # }
/// # #[cfg(not(feature = "serde"))]
/// # fn main() {}
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize), serde(transparent))]
pub struct Breakers(BTreeMap<String, Settings>);

impl Breakers {
    /// No breakers.
    pub fn new() -> Self {
        Self::default()
    }

    /// The settings of the breaker keyed `key`.
    pub fn get(&self, key: &str) -> Option<&Settings> {
        self.0.get(key)
    }

    /// Adds or replaces the breaker keyed `key`; returns the settings it replaced.
    pub fn insert(&mut self, key: impl Into<String>, settings: Settings) -> Option<Settings> {
        self.0.insert(key.into(), settings)
    }

    /// The breakers' keys and settings, in key order.
    pub fn iter(&self) -> btree_map::Iter<'_, String, Settings> {
        self.0.iter()
    }

    /// How many breakers.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are no breakers.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The map of settings by key.
    pub fn as_map(&self) -> &BTreeMap<String, Settings> {
        &self.0
    }

    /// The map of settings by key, taken out.
    pub fn into_map(self) -> BTreeMap<String, Settings> {
        self.0
    }

    /// A builder for each breaker, as [`builders`] makes them.
    ///
    /// # Errors
    ///
    /// The first invalid entry's [`ConfigError`], naming the breaker.
    pub fn builders(&self) -> Result<Vec<(String, DynBuilder)>, ConfigError> {
        builders(self)
    }

    /// Every breaker, as [`build_all`] builds them.
    ///
    /// # Errors
    ///
    /// The first invalid entry's [`ConfigError`], naming the breaker.
    pub fn build_all(&self) -> Result<Vec<(String, DynBreaker)>, ConfigError> {
        build_all(self)
    }
}

impl From<BTreeMap<String, Settings>> for Breakers {
    fn from(map: BTreeMap<String, Settings>) -> Self {
        Self(map)
    }
}

impl From<Breakers> for BTreeMap<String, Settings> {
    fn from(breakers: Breakers) -> Self {
        breakers.0
    }
}

impl<K: Into<String>> FromIterator<(K, Settings)> for Breakers {
    fn from_iter<I: IntoIterator<Item = (K, Settings)>>(iter: I) -> Self {
        Self(iter.into_iter().map(|(k, s)| (k.into(), s)).collect())
    }
}

impl<K: Into<String>> Extend<(K, Settings)> for Breakers {
    fn extend<I: IntoIterator<Item = (K, Settings)>>(&mut self, iter: I) {
        self.0.extend(iter.into_iter().map(|(k, s)| (k.into(), s)));
    }
}

impl IntoIterator for Breakers {
    type Item = (String, Settings);
    type IntoIter = btree_map::IntoIter<String, Settings>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a Breakers {
    type Item = (&'a String, &'a Settings);
    type IntoIter = btree_map::Iter<'a, String, Settings>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}
