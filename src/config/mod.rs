//! Breakers described by plain values: [`Settings`] for every knob, a [`PolicyConfig`] for
//! every built-in policy, an [`OpenDurationConfig`], and errors that name the breaker, the
//! field by its path, and the reason.
//!
//! The values are plain Rust, available without any feature: build them in code, keep them
//! in your own configuration structs, and turn them into breakers. With the `serde` feature
//! they also serialise and deserialise, so services keep their breakers' settings in TOML,
//! YAML or JSON next to the rest of their configuration, and change them without a rebuild.
//! Any self-describing serde format works; the examples here use TOML.
//!
//! # From configuration
//!
//! Two ways lead from configuration to breakers:
//!
//! - **One breaker**: [`Breaker::from_settings(&settings)`](Breaker::from_settings).
//!   [`Settings::to_builder`] is the same path one step earlier, to add a clock, an observer
//!   or a callback before [`build`](Builder::build).
//! - **A map of breakers**: [`build_all`], from any `(key, settings)` pairs: a
//!   `BTreeMap<String, Settings>`, an array, or a [`SettingsMap`], which reads a whole file
//!   of them and attributes an error inside an entry to that entry's breaker. A breaker is
//!   named by its `name`, or else by its key.
//!
//! (A [`Registry`](crate::Registry) has its own: [`RegistrySettings`]. So has a
//! [`Pool`](crate::pool::Pool): [`PoolSettings`], its endpoints' [`Settings`] with its
//! `deadline`, `max_isolated`, `jitter`, `hedge` ([`HedgeSettings`]), `slow_start`
//! ([`SlowStartSettings`]) and adaptive concurrency `limit` ([`LimitSettings`]: `aimd`,
//! `gradient2`, `vegas` or `fixed`).)
//!
//! Each pair below says one thing twice, in code and in a file (with the `serde` feature).
//!
//! **One breaker.** In code, then built on a clock of your own:
//!
//! ```
//! use lazybreaker::config::{PolicyConfig, Settings};
//! use lazybreaker::{Knobs, ManualClock, State};
//! use std::time::Duration;
//!
//! let settings = Settings {
//!     knobs: Knobs {
//!         name: "inventory".into(),
//!         timeout: Duration::from_secs(90),
//!         ..Knobs::default()
//!     },
//!     policy: PolicyConfig::ConsecutiveFailures { threshold: 3 },
//!     ..Settings::default()
//! };
//!
//! let clock = ManualClock::new();
//! let breaker = settings.to_builder()?.clock(clock.clone()).build();
//! for _ in 0..3 {
//!     let _ = breaker.execute(|| Err::<(), _>("refused"));
//! }
//! assert_eq!(breaker.state(), State::Open);
//! clock.advance(Duration::from_secs(90));
//! assert_eq!(breaker.state(), State::Open);
//! clock.advance(Duration::from_nanos(1));
//! assert_eq!(breaker.state(), State::HalfOpen);
//! # Ok::<(), lazybreaker::ConfigError>(())
//! ```
//!
//! In a file, and written back (durations as humantime strings, defaults left out):
//!
//! ```
//! # #[cfg(feature = "serde")]
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use lazybreaker::config::{PolicyConfig, Settings};
//! use lazybreaker::Breaker;
//! use std::time::Duration;
//!
//! let settings: Settings = toml::from_str(r#"
//!     name = "inventory"
//!     timeout = "1m30s"
//!     [policy]
//!     kind = "consecutive_failures"
//!     threshold = 3
//! "#)?;
//! assert_eq!(settings.knobs.timeout, Duration::from_secs(90));
//! assert_eq!(settings.policy, PolicyConfig::ConsecutiveFailures { threshold: 3 });
//! assert_eq!(settings.knobs.max_requests, 0); // omitted: the builder's default
//! let breaker = Breaker::from_settings(&settings)?;
//! assert_eq!(breaker.name(), "inventory");
//!
//! let text = toml::to_string(&settings)?;
//! assert!(text.contains(r#"timeout = "1m 30s""#));
//! assert_eq!(toml::from_str::<Settings>(&text)?, settings);
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "serde"))]
//! # fn main() {}
//! ```
//!
//! **The knobs** ([`Knobs`], written flat in a file): how an abandoned call counts, and a
//! breaker that nothing trips. In code:
//!
//! ```
//! use lazybreaker::config::Settings;
//! use lazybreaker::{Abandoned, AbandonedAs, Breaker, Knobs, State};
//!
//! let settings = Settings {
//!     knobs: Knobs {
//!         abandoned_as: Abandoned { closed: AbandonedAs::Failure, ..Abandoned::default() },
//!         never_trips: true,
//!         ..Knobs::default()
//!     },
//!     ..Settings::default()
//! };
//! let breaker = Breaker::from_settings(&settings)?;
//! for _ in 0..10 {
//!     drop(breaker.allow().unwrap()); // abandoned: a failure, but nothing trips it
//! }
//! assert_eq!((breaker.state(), breaker.counts().total_failures), (State::Closed, 10));
//! # Ok::<(), lazybreaker::ConfigError>(())
//! ```
//!
//! In a file:
//!
//! ```
//! # #[cfg(feature = "serde")]
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use lazybreaker::config::Settings;
//! use lazybreaker::{AbandonedAs, Breaker, State};
//!
//! let settings: Settings = toml::from_str(r#"
//!     abandoned_as = { closed = "failure", half_open = "exclusion" }
//!     never_trips = true
//! "#)?;
//! assert_eq!(settings.knobs.abandoned_as.closed, AbandonedAs::Failure);
//! assert!(settings.knobs.never_trips);
//! let breaker = Breaker::from_settings(&settings)?;
//! drop(breaker.allow().unwrap());
//! assert_eq!((breaker.state(), breaker.counts().total_failures), (State::Closed, 1));
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "serde"))]
//! # fn main() {}
//! ```
//!
//! **A policy**, composed ([`PolicyConfig`] lists every `kind`). In code:
//!
//! ```
//! use lazybreaker::config::PolicyConfig;
//! use lazybreaker::policy::{EmaConfig, FailureRatio};
//! use std::time::Duration;
//!
//! let policy = PolicyConfig::AnyOf {
//!     policies: vec![
//!         PolicyConfig::ConsecutiveFailures { threshold: 20 },
//!         PolicyConfig::from(FailureRatio::new(0.5, 10)?),
//!         PolicyConfig::Ema(EmaConfig {
//!             max_isolation: Duration::from_secs(10),
//!             ..EmaConfig::default()
//!         }),
//!     ],
//! };
//! let _trip_policy = policy.build()?; // a Box<dyn TripPolicy>
//! # Ok::<(), lazybreaker::ConfigError>(())
//! ```
//!
//! In a file:
//!
//! ```
//! # #[cfg(feature = "serde")]
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use lazybreaker::config::PolicyConfig;
//! use lazybreaker::policy::EmaConfig;
//! use std::time::Duration;
//!
//! let policy: PolicyConfig = toml::from_str(r#"
//!     kind = "any_of"
//!     [[policies]]
//!     kind = "consecutive_failures"
//!     threshold = 20
//!     [[policies]]
//!     kind = "ema"
//!     short_window_size = 100
//!     max_isolation = "10s"
//! "#)?;
//! let expected = PolicyConfig::AnyOf {
//!     policies: vec![
//!         PolicyConfig::ConsecutiveFailures { threshold: 20 },
//!         PolicyConfig::Ema(EmaConfig {
//!             short_window_size: 100,
//!             max_isolation: Duration::from_secs(10),
//!             ..EmaConfig::default()
//!         }),
//!     ],
//! };
//! assert_eq!(policy, expected);
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "serde"))]
//! # fn main() {}
//! ```
//!
//! **The open duration** ([`OpenDurationConfig`]): an exponential backoff instead of the
//! policy's own rule. In code:
//!
//! ```
//! use lazybreaker::config::{OpenDurationConfig, PolicyConfig, Settings};
//! use lazybreaker::{Breaker, Knobs};
//! use std::time::Duration;
//!
//! let settings = Settings {
//!     policy: PolicyConfig::ConsecutiveFailures { threshold: 5 },
//!     open_duration: OpenDurationConfig::Exponential {
//!         initial: Duration::from_secs(1),
//!         max: Duration::from_secs(120),
//!     },
//!     ..Settings::default()
//! };
//! let _breaker = Breaker::from_settings(&settings)?;
//!
//! let err = Settings {
//!     knobs: Knobs { name: "payments".into(), ..Knobs::default() },
//!     open_duration: OpenDurationConfig::Exponential {
//!         initial: Duration::from_secs(300),
//!         max: Duration::from_secs(60),
//!     },
//!     ..Settings::default()
//! }
//! .validate()
//! .unwrap_err();
//! assert_eq!(err.field(), "open_duration.initial");
//! # Ok::<(), lazybreaker::ConfigError>(())
//! ```
//!
//! In a file:
//!
//! ```
//! # #[cfg(feature = "serde")]
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use lazybreaker::config::{OpenDurationConfig, Settings};
//! use std::time::Duration;
//!
//! let settings: Settings = toml::from_str(r#"
//!     policy = { kind = "consecutive_failures", threshold = 5 }
//!     open_duration = { kind = "exponential", initial = "1s", max = "2m" }
//! "#)?;
//! assert_eq!(
//!     settings.open_duration,
//!     OpenDurationConfig::Exponential {
//!         initial: Duration::from_secs(1),
//!         max: Duration::from_secs(120),
//!     }
//! );
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "serde"))]
//! # fn main() {}
//! ```
//!
//! **A map of breakers**, one per downstream. In code:
//!
//! ```
//! use lazybreaker::config::{self, PolicyConfig, Settings};
//! use lazybreaker::Knobs;
//! use std::time::Duration;
//!
//! let payments = Settings {
//!     knobs: Knobs {
//!         interval: Duration::from_secs(10),
//!         bucket_period: Duration::from_secs(1),
//!         ..Knobs::default()
//!     },
//!     policy: PolicyConfig::FailureRatio { ratio: 0.5, min_requests: 20 },
//!     ..Settings::default()
//! };
//! let breakers = config::build_all([("payments", payments), ("search", Settings::default())])?;
//! assert_eq!(breakers[0].1.name(), "payments"); // the key names a breaker without a `name`
//! # Ok::<(), lazybreaker::ConfigError>(())
//! ```
//!
//! In a file, as a [`SettingsMap`] (a plain `BTreeMap<String, Settings>` reads it too, but
//! cannot name the breaker in an error inside an entry):
//!
//! ```
//! # #[cfg(feature = "serde")]
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use lazybreaker::config::{self, SettingsMap};
//! use lazybreaker::State;
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
//! let settings: SettingsMap = toml::from_str(file)?;
//! let breakers = config::build_all(&settings)?;
//! assert_eq!(breakers[0].0, "payments"); // in key order, each with its key
//! assert_eq!(breakers[0].1.name(), "payments");
//! assert_eq!(breakers[1].1.state(), State::Closed);
//!
//! let typo = "[search]\npolicy = { kind = \"ema\", epsilon = \"x\" }";
//! let err = toml::from_str::<SettingsMap>(typo).unwrap_err();
//! assert_eq!(
//!     err.message(),
//!     r#"breaker `search`: invalid `policy.epsilon` = "x": expected a number"#
//! );
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "serde"))]
//! # fn main() {}
//! ```
//!
//! To add a clock or an observer to each breaker of a map, give each entry its key as its
//! name and take the one-breaker path, [`Settings::to_builder`]:
//!
//! ```
//! use lazybreaker::config::{Settings, SettingsMap};
//! use lazybreaker::{DynBreaker, Knobs, ManualClock};
//! use std::time::Duration;
//!
//! let map: SettingsMap = [
//!     ("inventory", Settings::default()),
//!     ("payments", Settings {
//!         knobs: Knobs {
//!             name: "payments-eu".into(),
//!             timeout: Duration::from_secs(5),
//!             ..Knobs::default()
//!         },
//!         ..Settings::default()
//!     }),
//! ]
//! .into_iter()
//! .collect();
//! let clock = ManualClock::new();
//! let mut breakers: Vec<(String, DynBreaker)> = Vec::new();
//! for (key, settings) in &map {
//!     let mut settings = settings.clone();
//!     if settings.knobs.name.is_empty() {
//!         settings.knobs.name = key.clone(); // as `build_all` names it, errors included
//!     }
//!     breakers.push((key.clone(), settings.to_builder()?.clock(clock.clone()).build()));
//! }
//! assert_eq!(breakers[0].1.name(), "inventory");
//! assert_eq!(breakers[1].1.name(), "payments-eu");
//! # Ok::<(), lazybreaker::ConfigError>(())
//! ```
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
//!   errors. A breaker is named by its table's `name`; in a [`SettingsMap`] file, by its key
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
//! [`ConsecutiveFailures::new`]: crate::policy::ConsecutiveFailures::new
//! [`FailureRatio::new`]: crate::policy::FailureRatio::new
//! [`Ema::new`]: crate::policy::Ema::new
//! [`EmaConfig::validate`]: crate::policy::EmaConfig::validate
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
//!
//! # Durations
//!
//! In files, durations are strings in [humantime]'s format, and are written back in it:
//! `"250ms"`, `"10s"`, `"1m30s"` (or `"1m 30s"`), `"2h"`. Units: `ns`, `us`, `ms`, `s`, `m`
//! (minutes), `h`, `d`, `w`; beware that `M` is months. `"0s"` (or `"0"`) is zero, which for
//! `interval`, `bucket_period` and `timeout` means the builder's default.
//!
//! [humantime]: https://docs.rs/humantime

#[cfg(feature = "serde")]
mod de;
mod limit;
mod map;
mod policy;
mod pool;
mod registry;

use std::time::Duration;

use crate::breaker::{Breaker, Builder};
use crate::error::ConfigError;
use crate::knobs::Knobs;
use crate::policy::{Backoff, TripPolicy};

/// A breaker whose policy was chosen at run time, e.g. from a [`PolicyConfig`] or
/// [`Breaker::from_settings`]: the policy is a `Box<dyn TripPolicy>`.
pub type DynBreaker<O = ()> = Breaker<Box<dyn TripPolicy>, O>;

/// A builder for a [`DynBreaker`], e.g. from [`Settings::to_builder`].
pub type DynBuilder<O = ()> = Builder<Box<dyn TripPolicy>, O>;

#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
pub use de::DeserializeError;
pub use limit::LimitSettings;
pub use map::{build_all, SettingsMap};
pub use policy::PolicyConfig;
pub use pool::{HedgeSettings, PoolSettings, SlowStartSettings};
pub use registry::RegistrySettings;

/// Everything that configures a [`Breaker`], as a plain value or a table in a configuration
/// file: its [`Knobs`], its policy and how long it stays open. See
/// [From configuration](self#from-configuration) for examples in code and in files.
///
/// Every field has the [builder](Breaker::builder)'s default (`..Settings::default()` in code);
/// in a file every field may be omitted, so an empty table is the default breaker, and
/// unknown fields are rejected. The knobs are written flat, beside `policy`. In files,
/// durations are strings such as `"250ms"` or `"1m30s"` (see the
/// [module documentation](self#durations)).
///
/// | field | default | meaning |
/// |---|---|---|
/// | `name` | empty | [`Knobs::name`]; in a map of breakers, empty means the map key ([`build_all`]) |
/// | `max_requests` | `0` (means 1) | [`Knobs::max_requests`]: half-open probes |
/// | `interval` | `"0s"` (never cleared) | [`Knobs::interval`]: the closed-state count window |
/// | `bucket_period` | `"0s"` (fixed window) | [`Knobs::bucket_period`]: must divide `interval` into at most [`MAX_BUCKETS`](crate::MAX_BUCKETS) whole buckets |
/// | `timeout` | `"0s"` (means 60 s) | [`Knobs::timeout`]: the open duration of the counting policies |
/// | `abandoned_as` | `{ closed = "exclusion", half_open = "exclusion" }` | [`Knobs::abandoned_as`]: how a call abandoned without a verdict counts, per state (`"exclusion"` or `"failure"`) |
/// | `never_trips` | `false` | [`Knobs::never_trips`]: nothing trips the breaker, not even a fatal result |
/// | `verdict_at_latest` | `false` | [`Knobs::verdict_at_latest`]: a success is judged at the latest time the breaker saw, not at a clock reading of its own (one clock read a windowed call) |
/// | `dry_run` | `false` | [`Knobs::dry_run`]: dry run, or shadow mode: the breaker admits every call and counts those it would have rejected in [`Totals::would_reject`](crate::Totals::would_reject) |
/// | `check_timeout` | `"0s"` (means 500 ms) | [`Knobs::check_timeout`]: how long a health check may run before the next call takes it over (the check itself is code: [`Builder::health_check`](crate::Builder::health_check)) |
/// | `probe_timeout` | `"0s"` (no probe deadline: after `timeout`, the probes out are relieved of their slots but keep their verdicts) | [`Knobs::probe_timeout`]: how long a half-open probe may be out before the next call writes it off and starts the trial again |
/// | `jitter` | none (every open period exact; in a pool, the pool's) | [`Knobs::jitter`]: a number within `[0, 1]`; each open period the breaker computes itself (a trip, a failed probe's backoff, a failed health check's re-arm) is drawn from `[period × (1 − jitter), period]` |
/// | `jitter_seed` | the breaker's name, hashed | [`Knobs::jitter_seed`]: the seed of the jitter's draws, a non-negative integer |
/// | `throttle` | none | [`Knobs::throttle`]: adaptive throttling in the closed state, `{ k = 2.0, min_requests = 20, max_probability = 0.9, seed = 0, count_throttled = false }` (`k` required) |
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
/// `Settings::default()` is the builder's defaults: [`Knobs::default`], the default
/// [`PolicyConfig`] and [`OpenDurationConfig`].
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Settings {
    /// The breaker's knobs, written flat in a file (`timeout = "30s"` beside `policy`). Its
    /// `name` names the breaker in a [`ConfigError`] ([`ConfigError::breaker`]); its
    /// `bucket_period` is checked strictly, as by [`Builder::build_strict`].
    #[cfg_attr(feature = "serde", serde(flatten))]
    pub knobs: Knobs,
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
/// `{ kind = "exponential", initial = "1s", max = "2m" }`. See
/// [From configuration](self#from-configuration) for examples in code and in a file.
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
    /// `interval` (as [`Builder::build_strict`] checks it), `jitter` when it is not a number
    /// within `[0, 1]`, then `policy.…` for the policy's
    /// parameters (see [`PolicyConfig::build`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::config::Settings;
    /// use lazybreaker::Knobs;
    /// use std::time::Duration;
    ///
    /// let settings = Settings {
    ///     knobs: Knobs {
    ///         name: "search".into(),
    ///         interval: Duration::from_secs(10),
    ///         bucket_period: Duration::from_secs(3),
    ///         ..Knobs::default()
    ///     },
    ///     ..Settings::default()
    /// };
    /// let err = settings.to_builder().err().unwrap();
    /// assert_eq!(
    ///     err.to_string(),
    ///     "breaker `search`: invalid `bucket_period` = 3s: must divide `interval` into whole buckets"
    /// );
    /// ```
    pub fn to_builder(&self) -> Result<Builder<Box<dyn TripPolicy>>, ConfigError> {
        let knobs = &self.knobs;
        let named = |err: ConfigError| err.for_breaker(&knobs.name);
        crate::window_check::check(knobs.interval, knobs.bucket_period).map_err(named)?;
        crate::window_check::check_count(knobs.interval, knobs.count_window).map_err(named)?;
        crate::window_check::check_open(knobs.timeout, knobs.max_open_duration).map_err(named)?;
        if let Some(err) = knobs
            .throttle
            .and_then(|t| t.invalid(knobs.count_window > 0))
        {
            return Err(named(err.within("throttle")));
        }
        if let Some(fraction) = knobs.jitter {
            crate::jitter::check(fraction).map_err(named)?;
        }
        let policy = self
            .policy
            .build()
            .map_err(|err| named(err.within("policy")))?;
        let policy = self
            .open_duration
            .apply(policy)
            .map_err(|err| named(err.within("open_duration")))?;
        Ok(Breaker::builder().knobs(knobs.clone()).policy(policy))
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
    /// use lazybreaker::{Breaker, Knobs, State};
    ///
    /// let settings = Settings {
    ///     knobs: Knobs { name: "payments".into(), ..Knobs::default() },
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
