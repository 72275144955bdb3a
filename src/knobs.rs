//! [`Knobs`]: every setting of a breaker that is a plain value (everything but its policy,
//! observer, clock and callback), written once for the builder, configuration files and the
//! machine's rules. Core: it imports only [`AbandonedAs`], [`Throttle`] and the serde helpers.

use std::time::Duration;

use crate::abandoned::AbandonedAs;
use crate::throttle::Throttle;

/// Every plain-value knob of a breaker, with gobreaker's zero-means-default rules: a value
/// out of range is read leniently by [`Builder::build`](crate::Builder::build) and refused,
/// naming it, by [`Builder::build_strict`](crate::Builder::build_strict) and configuration
/// (the policies own their own knobs). [`Builder`](crate::Builder) holds
/// one and sets it field by field ([`Builder::timeout`](crate::Builder::timeout), …) or at
/// once ([`Builder::knobs`](crate::Builder::knobs)); [`config::Settings`](crate::config::Settings)
/// holds one too, its fields written flat in a file (`timeout = "30s"`).
///
/// The fields are public and the struct is not `#[non_exhaustive]`, so set the ones you need
/// and leave the rest to [`Knobs::default`], the builder's defaults. (A knob added later is
/// then not a breaking change for code written that way.)
///
/// # Examples
///
/// ```
/// use lazybreaker::{Breaker, Knobs};
/// use std::time::Duration;
///
/// let knobs = Knobs {
///     name: "payments".into(),
///     timeout: Duration::from_secs(30),
///     ..Knobs::default()
/// };
/// let breaker = Breaker::builder().knobs(knobs).build();
/// assert_eq!(breaker.name(), "payments");
/// ```
///
/// With the `serde` feature it serialises as a flat table, durations as humantime strings,
/// and reads back through the configuration's reader, whose errors name the field by its
/// path:
///
/// ```
/// # #[cfg(feature = "serde")]
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use lazybreaker::{AbandonedAs, Knobs};
///
/// let knobs: Knobs = toml::from_str(r#"
///     timeout = "30s"
///     abandoned_as = { closed = "failure" }
///     never_trips = true
/// "#)?;
/// assert_eq!(knobs.abandoned_as.closed, AbandonedAs::Failure);
/// assert_eq!(knobs.abandoned_as.half_open, AbandonedAs::Exclusion); // omitted: the default
/// assert!(knobs.never_trips);
/// assert_eq!(toml::from_str::<Knobs>(&toml::to_string(&knobs)?)?, knobs);
///
/// let err = toml::from_str::<Knobs>(r#"abandoned_as = { closed = "failed" }"#).unwrap_err();
/// assert_eq!(
///     err.message(),
///     r#"invalid `abandoned_as.closed` = "failed": unknown value, expected `exclusion` or `failure`"#
/// );
/// # Ok(())
/// # }
/// # #[cfg(not(feature = "serde"))]
/// # fn main() {}
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Knobs {
    /// The name passed to `on_state_change` and returned by
    /// [`Breaker::name`](crate::Breaker::name). Empty by default (in a map of settings, empty
    /// means the map key: [`config::build_all`](crate::config::build_all)); written out only
    /// when not empty.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "String::is_empty"))]
    pub name: String,
    /// How many probes the half-open state admits at once, and how many consecutive
    /// successes close it. `0` means 1 (the default).
    pub max_requests: u32,
    /// The closed-state time window: the counts are cleared when it expires (strictly after
    /// `interval` since the window started). Zero (the default) never clears them.
    #[cfg_attr(
        feature = "serde",
        serde(serialize_with = "crate::serde_duration::serialize")
    )]
    pub interval: Duration,
    /// Splits `interval` into buckets of this length, so the window rolls bucket by bucket
    /// instead of clearing at once. Zero (the default) means a fixed window; ignored when
    /// `interval` is zero. The builder rounds `interval` up to whole buckets and widens a
    /// period that would make more than [`MAX_BUCKETS`](crate::MAX_BUCKETS) of them;
    /// [`Builder::build_strict`](crate::Builder::build_strict) and configuration refuse both.
    #[cfg_attr(
        feature = "serde",
        serde(serialize_with = "crate::serde_duration::serialize")
    )]
    pub bucket_period: Duration,
    /// A count-based sliding window: the closed-state counts cover the last `count_window`
    /// results (resilience4j's `COUNT_BASED` window), each success or failure pushing out
    /// the oldest once it is full. `requests` is then the number of results held (calls in
    /// flight are not in it), and an exclusion is counted but takes no place. It replaces
    /// `interval` and `bucket_period`; zero (the default) means none. At most
    /// [`MAX_COUNT_WINDOW`](crate::MAX_COUNT_WINDOW). Written out only when set.
    #[cfg_attr(
        feature = "serde",
        serde(skip_serializing_if = "crate::serde_duration::is_default")
    )]
    pub count_window: u32,
    /// How long the breaker stays open before it admits a probe (it goes half-open strictly
    /// after this much time). Zero (the default) means 60 s. A policy may choose another
    /// duration for each open period
    /// ([`TripPolicy::open_duration`](crate::policy::TripPolicy::open_duration)).
    #[cfg_attr(
        feature = "serde",
        serde(serialize_with = "crate::serde_duration::serialize")
    )]
    pub timeout: Duration,
    /// The longest any open period lasts, whatever opens it: the policy (a backoff, brpc's
    /// doubling isolation), [`trip_for`](crate::Breaker::trip_for), a permit's
    /// `failure_open_for` (an upstream's `Retry-After`), a decision adopted from a fleet. A
    /// longer one is cut to this length, so that no mistake (a misparsed header, a stray
    /// record) keeps a dependency cut off for good. Zero (the default) means one hour, or
    /// `timeout` if that is longer. A forced open ([`force_open`](crate::Breaker::force_open))
    /// is an operator's, and lasts until released. Written out only when set.
    #[cfg_attr(
        feature = "serde",
        serde(
            serialize_with = "crate::serde_duration::serialize",
            skip_serializing_if = "Duration::is_zero"
        )
    )]
    pub max_open_duration: Duration,
    /// How a call abandoned without a verdict counts, in the closed and in the half-open
    /// state: an exclusion in both by default (see [`AbandonedAs`] for why). Written out only
    /// when not the default.
    #[cfg_attr(
        feature = "serde",
        serde(skip_serializing_if = "crate::serde_duration::is_default")
    )]
    pub abandoned_as: Abandoned,
    /// Whether nothing trips the breaker: neither its policy nor a fatal result. It still
    /// counts every call, and the manual controls ([`Breaker::force_open`](crate::Breaker::force_open),
    /// a permit's `failure_open_for`, …) still apply. `false` by default; written out only
    /// when `true`. For a key that must never be cut off (a health check).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "std::ops::Not::not"))]
    pub never_trips: bool,
    /// Dry run (shadow mode): the breaker runs its state machine as usual but admits every
    /// call; the calls it would have rejected are counted in
    /// [`Totals::would_reject`](crate::Totals::would_reject) (see
    /// [`Builder::dry_run`](crate::Builder::dry_run)). `false` by default; written out only
    /// when `true`.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "std::ops::Not::not"))]
    pub dry_run: bool,
    /// Whether a success is judged at the latest time the breaker saw rather than at a clock
    /// reading of its own (see [`Builder::verdict_at_latest`](crate::Builder::verdict_at_latest)):
    /// a call in a time window then reads the clock once, at its admission. `false` by
    /// default (gobreaker's: a success whose window ended while it ran is stale); written
    /// out only when `true`.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "std::ops::Not::not"))]
    pub verdict_at_latest: bool,
    /// How long a health check ([`Builder::health_check`](crate::Builder::health_check)) may
    /// run before the next call treats it as lost and runs the check itself. Zero (the
    /// default) means 500 ms, brpc's `health_check_timeout_ms`; ignored without a check.
    /// Written out only when set.
    #[cfg_attr(
        feature = "serde",
        serde(
            serialize_with = "crate::serde_duration::serialize",
            skip_serializing_if = "Duration::is_zero"
        )
    )]
    pub check_timeout: Duration,
    /// How long a half-open probe may be out before it is written off (see
    /// [`Builder::probe_timeout`](crate::Builder::probe_timeout)): once every slot has been
    /// held that long, the next call that finds them taken starts the trial again as its
    /// first probe, and the results of the probes it replaced are dropped when they come
    /// (counted in [`Totals::dropped`](crate::Totals::dropped), or in
    /// [`Totals::abandoned`](crate::Totals::abandoned)), the takeover in
    /// [`Totals::probes_taken_over`](crate::Totals::probes_taken_over). Zero (the default)
    /// writes no probe off: once every slot has been held longer than the breaker's
    /// `timeout`, the next call is admitted as a probe of its own and the probes out are
    /// relieved of their slots but keep their verdicts (a dependency slower than the open
    /// period still closes the breaker; a probe that hangs cannot hold it half-open);
    /// `Duration::MAX` never takes a probe over (gobreaker's behaviour). Written out only when
    /// set.
    #[cfg_attr(
        feature = "serde",
        serde(
            serialize_with = "crate::serde_duration::serialize",
            skip_serializing_if = "Duration::is_zero"
        )
    )]
    pub probe_timeout: Duration,
    /// The longest open period of a backoff: each failed recovery (a failed half-open probe)
    /// doubles the open period, from `timeout` up to this, and so does a trip within this
    /// long of the last recovery (a relapse); a trip after a longer healthy spell starts
    /// over from `timeout` (brpc's isolation backoff). A failed health check re-arms the
    /// period at the length it has (checks keep a steady cadence, as brpc's and HAProxy's
    /// check intervals do). Zero (the
    /// default) means no backoff: every open period is `timeout` (or the policy's). A pool
    /// gives its endpoints 100 ms doubling to 30 s unless their builders set a `timeout`
    /// ([`Pool::open_backoff`](crate::pool::Pool::open_backoff)). Written out only when set.
    #[cfg_attr(
        feature = "serde",
        serde(
            serialize_with = "crate::serde_duration::serialize",
            skip_serializing_if = "Duration::is_zero"
        )
    )]
    pub backoff: Duration,
    /// The random spread of the open periods the breaker computes itself (see
    /// [`Builder::jitter`](crate::Builder::jitter)): each is drawn from
    /// `[period × (1 − jitter), period]`, never longer than configured. Within `[0, 1]`;
    /// `None` (the default) means none for a lone breaker, every period exact (gobreaker's),
    /// and the pool's spread for an endpoint of a [`Pool`](crate::pool::Pool::jitter).
    /// [`Builder::build_strict`](crate::Builder::build_strict) and configuration refuse a
    /// fraction that is not a number within `[0, 1]`; `build` reads a NaN as none and clamps
    /// the rest. Written out only when set: `jitter = 0.1`.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub jitter: Option<f64>,
    /// The seed of the spread's draws (see [`Builder::jitter_seed`](crate::Builder::jitter_seed)):
    /// `None` (the default) derives it from the breaker's name, so that breakers of different
    /// names spread differently with the same settings. Written out only when set:
    /// `jitter_seed = 7`.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub jitter_seed: Option<u64>,
    /// Adaptive client-side throttling in the closed state ([`Throttle`]): none by default.
    /// In a file: `throttle = { k = 2.0, min_requests = 20, max_probability = 0.9, seed = 7 }`.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub throttle: Option<Throttle>,
}

/// How an abandoned call counts in each state that admits calls: the
/// [`Knobs::abandoned_as`] knob.
///
/// A struct with a field per state rather than a pair, so that a file says which state it
/// means and may set one alone, the other keeping its default:
/// `abandoned_as = { closed = "failure" }` reads plainly where a positional
/// `["failure", "exclusion"]` would have to be looked up. The default is
/// [`AbandonedAs::Exclusion`] in both states.
///
/// # Examples
///
/// ```
/// use lazybreaker::{Abandoned, AbandonedAs, Breaker, Knobs, State};
///
/// let breaker = Breaker::builder()
///     .knobs(Knobs {
///         abandoned_as: Abandoned { closed: AbandonedAs::Failure, ..Abandoned::default() },
///         ..Knobs::default()
///     })
///     .ready_to_trip(|c| c.consecutive_failures >= 1)
///     .build();
/// drop(breaker.allow().unwrap()); // abandoned: a failure in the closed state
/// assert_eq!(breaker.state(), State::Open);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Abandoned {
    /// How an abandoned call counts in the closed state.
    pub closed: AbandonedAs,
    /// How an abandoned probe counts in the half-open state.
    pub half_open: AbandonedAs,
}
