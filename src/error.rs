//! Errors: a rejected call ([`Rejected`], and [`RejectedBy`] naming its breaker), a wrapped
//! call's result ([`Error`]) and invalid configuration ([`ConfigError`]).

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use crate::human;

/// Why the breaker did not admit a call.
///
/// # Examples
///
/// ```
/// use lazybreaker::{Breaker, Rejected};
///
/// let breaker = Breaker::builder().ready_to_trip(|c| c.consecutive_failures >= 1).build();
/// let _ = breaker.execute(|| Err::<(), _>("boom"));
/// match breaker.allow() {
///     Ok(_permit) => unreachable!("the breaker is open"),
///     Err(Rejected::Open { retry_after }) => assert!(retry_after > std::time::Duration::ZERO),
///     Err(other) => panic!("unexpected {other}"),
/// };
/// ```
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[non_exhaustive]
pub enum Rejected {
    /// The breaker is open.
    #[error("circuit breaker is open")]
    Open {
        /// What is left of the open period: a breaker tripped for 60 s says 60 s at the trip,
        /// 59.5 s half a second later. It lets a probe through just after this much time has
        /// passed on its clock, if nothing else changes it first (the period ends strictly
        /// after its last instant, at which it still rejects and says 1 ns, never zero).
        retry_after: Duration,
    },
    /// The breaker is half-open and already has as many probes in flight as it admits. No
    /// time rides with it; the breaker's [`Snapshot::retry_after`](crate::Snapshot::retry_after)
    /// (and a pool's [`NoEndpoint`](Rejected::NoEndpoint)) says how long until a call is
    /// admitted again at the latest (the probes' takeover: see
    /// [`Builder::probe_timeout`](crate::Builder::probe_timeout)).
    #[error("too many requests")]
    TooManyRequests,
    /// The breaker was forced open ([`Breaker::force_open`](crate::Breaker::force_open)) and
    /// rejects every call until it is released: there is no time to retry after.
    #[error("circuit breaker is forced open")]
    ForcedOpen,
    /// The breaker's open period is over and its health check
    /// ([`Builder::health_check`](crate::Builder::health_check)) is under way, run by
    /// another call: this one is not parked behind it. (Or this call's own check settled too
    /// late to count, and another is due.) Retry shortly: how long the check takes is not
    /// known.
    #[error("circuit breaker is open: a health check is under way")]
    Checking,
    /// A [`Pool`](crate::pool::Pool) found no endpoint that can take the call: every one is
    /// isolated (as many as the pool's cap allows) or full, or the pool is empty. Never a
    /// parked caller.
    #[error("no endpoint can take the call")]
    NoEndpoint {
        /// When the first isolated endpoint can be probed (it lets a probe through just
        /// after this much time), or one half-open with its probes out admits a call again
        /// at the latest; `None` for an empty pool, or when every endpoint is forced open.
        retry_after: Option<Duration>,
    },
    /// The breaker is closed, and its throttle ([`Builder::throttle`](crate::Builder::throttle))
    /// turned this call away: the dependency accepts less than it is sent. Retry later, or
    /// elsewhere; the next call is drawn again.
    #[error("throttled: the dependency accepts less than it is sent (p = {probability:.3})")]
    Throttled {
        /// The probability this call was turned away with, in `(0, 1]`: the throttle's `p`
        /// at that moment.
        probability: f64,
    },
    /// An adaptive concurrency limit turned the call away: as many calls as the limit
    /// allows are in flight ([`Limiter`](crate::limit::Limiter)), or, in a
    /// [`Pool`](crate::pool::Pool) with a [limit](crate::pool::Pool::limit), every endpoint
    /// that could take the call is at its limit. Overload, not a failure: no breaker
    /// counts it. Retry elsewhere, or shortly: a place frees as soon as a call ends.
    #[error("limited: as many calls as the concurrency limit allows are in flight")]
    Limited,
}

impl PartialEq for Rejected {
    /// As derived, a probability compared bit for bit (it is never NaN).
    fn eq(&self, other: &Self) -> bool {
        match (*self, *other) {
            (Rejected::Open { retry_after: a }, Rejected::Open { retry_after: b }) => a == b,
            (Rejected::TooManyRequests, Rejected::TooManyRequests)
            | (Rejected::ForcedOpen, Rejected::ForcedOpen)
            | (Rejected::Checking, Rejected::Checking)
            | (Rejected::Limited, Rejected::Limited) => true,
            (Rejected::NoEndpoint { retry_after: a }, Rejected::NoEndpoint { retry_after: b }) => {
                a == b
            }
            (Rejected::Throttled { probability: a }, Rejected::Throttled { probability: b }) => {
                a.to_bits() == b.to_bits()
            }
            _ => false,
        }
    }
}

impl Eq for Rejected {}

impl std::hash::Hash for Rejected {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::mem::discriminant(self).hash(state);
        match *self {
            Rejected::Open { retry_after } => retry_after.hash(state),
            Rejected::NoEndpoint { retry_after } => retry_after.hash(state),
            Rejected::Throttled { probability } => probability.to_bits().hash(state),
            Rejected::TooManyRequests
            | Rejected::ForcedOpen
            | Rejected::Checking
            | Rejected::Limited => {}
        }
    }
}

impl Rejected {
    /// The rejection of a breaker that stays open until `until` (inclusive), at `now`.
    ///
    /// The one place the open period's rest is computed for users (rejections, snapshots,
    /// metrics): `until - now`, the configured open period less the time since the trip, so a
    /// breaker tripped for 60 s says 60 s at the trip, not 60 s and the nanosecond by which
    /// the strict expiry goes half-open after `until`. At `until` itself the breaker still
    /// rejects, and says 1 ns rather than zero. An open period too long to count gives the
    /// longest wait, not an overflow.
    #[inline]
    pub(crate) fn open_until(until: u64, now: u64) -> Self {
        Rejected::Open {
            retry_after: Duration::from_nanos(until.saturating_sub(now).max(1)),
        }
    }

    /// How long until the breaker lets a probe through, when it is open; `None` when it is
    /// half-open and full (ask the breaker's [`snapshot`](crate::Breaker::snapshot), which
    /// knows when the probes out are taken over) or forced open (it opens when an operator
    /// releases it).
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::Rejected;
    /// use std::time::Duration;
    ///
    /// let open = Rejected::Open { retry_after: Duration::from_secs(3) };
    /// assert_eq!(open.retry_after(), Some(Duration::from_secs(3)));
    /// assert_eq!(Rejected::TooManyRequests.retry_after(), None);
    /// ```
    pub fn retry_after(&self) -> Option<Duration> {
        match *self {
            Rejected::Open { retry_after } => Some(retry_after),
            Rejected::NoEndpoint { retry_after } => retry_after,
            Rejected::TooManyRequests
            | Rejected::ForcedOpen
            | Rejected::Checking
            | Rejected::Throttled { .. }
            | Rejected::Limited => None,
        }
    }

    /// The probability a throttled call was turned away with
    /// ([`Rejected::Throttled`]); `None` for the other rejections.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::Rejected;
    ///
    /// assert_eq!(Rejected::Throttled { probability: 0.4 }.throttle_probability(), Some(0.4));
    /// assert_eq!(Rejected::TooManyRequests.throttle_probability(), None);
    /// ```
    pub fn throttle_probability(&self) -> Option<f64> {
        match *self {
            Rejected::Throttled { probability } => Some(probability),
            _ => None,
        }
    }

    /// [`retry_after`](Rejected::retry_after) in whole seconds, rounded up (so a client that
    /// waits that long does not come back before the open period ends: a breaker tripped
    /// for 60 s says 60), as an HTTP `Retry-After` header wants it; at least 1.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::Rejected;
    /// use std::time::Duration;
    ///
    /// let open = Rejected::Open { retry_after: Duration::from_millis(2_001) };
    /// assert_eq!(open.retry_after_secs(), Some(3));
    /// let open = Rejected::Open { retry_after: Duration::from_nanos(1) };
    /// assert_eq!(open.retry_after_secs(), Some(1));
    /// assert_eq!(Rejected::TooManyRequests.retry_after_secs(), None);
    /// ```
    pub fn retry_after_secs(&self) -> Option<u64> {
        self.retry_after().map(|d| {
            let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
            secs.max(1)
        })
    }
}

/// A [`Rejected`] that names the breaker that made it: what the keyed tower layer, the
/// `reqwest` middleware and [`Registry::allow`](crate::Registry::allow) return, so that a log
/// line says *which* of many per-key breakers is open.
///
/// Its `Display` reads "circuit breaker \`api.example.com:443\` is open (retry after 30000ms)";
/// its [`source`](std::error::Error::source) is the [`Rejected`], so an error chain (an
/// `anyhow::Error`, a `BoxError`) can be searched for either type.
///
/// The name is copied from the breaker on the rejected path only (a read of the breaker, no
/// shared write): an admitted call pays nothing for it.
///
/// # Examples
///
/// ```
/// use lazybreaker::{Breaker, Registry, Rejected};
/// use std::time::Duration;
///
/// let registry = Registry::new(|_: &String| Breaker::builder());
/// registry.breaker("search").trip_for(Duration::from_secs(30));
/// let rejected = registry.allow("search").unwrap_err();
/// assert_eq!(rejected.breaker(), "search");
/// assert_eq!(rejected.rejected(), Rejected::Open { retry_after: Duration::from_secs(30) });
/// assert_eq!(rejected.to_string(), "circuit breaker `search` is open (retry after 30000ms)");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RejectedBy {
    breaker: String,
    rejected: Rejected,
}

impl RejectedBy {
    /// The rejection `rejected`, made by the breaker called `breaker`.
    pub fn new(breaker: impl Into<String>, rejected: Rejected) -> Self {
        Self {
            breaker: breaker.into(),
            rejected,
        }
    }

    /// The name of the breaker that rejected the call.
    pub fn breaker(&self) -> &str {
        &self.breaker
    }

    /// Why it rejected the call.
    pub fn rejected(&self) -> Rejected {
        self.rejected
    }

    /// As [`Rejected::retry_after`].
    pub fn retry_after(&self) -> Option<Duration> {
        self.rejected.retry_after()
    }
}

impl AsRef<Rejected> for RejectedBy {
    fn as_ref(&self) -> &Rejected {
        &self.rejected
    }
}

impl AsRef<Rejected> for Rejected {
    fn as_ref(&self) -> &Rejected {
        self
    }
}

impl From<RejectedBy> for Rejected {
    fn from(by: RejectedBy) -> Self {
        by.rejected
    }
}

impl fmt::Display for RejectedBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = &self.breaker;
        match self.rejected {
            Rejected::Open { retry_after } => write!(
                f,
                "circuit breaker `{name}` is open (retry after {})",
                human::wait(retry_after)
            ),
            Rejected::TooManyRequests => write!(
                f,
                "circuit breaker `{name}` is half-open and has as many probes in flight as it admits"
            ),
            Rejected::ForcedOpen => write!(f, "circuit breaker `{name}` is forced open"),
            Rejected::Checking => write!(
                f,
                "circuit breaker `{name}` is open: a health check is under way"
            ),
            Rejected::NoEndpoint { .. } => write!(f, "pool `{name}`: no endpoint can take the call"),
            Rejected::Throttled { probability } => write!(
                f,
                "circuit breaker `{name}` throttled the call (p = {probability:.3})"
            ),
            Rejected::Limited => write!(
                f,
                "`{name}`: as many calls as its concurrency limit allows are in flight"
            ),
        }
    }
}

impl std::error::Error for RejectedBy {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.rejected)
    }
}

/// The result of a call made through [`Breaker::execute`](crate::Breaker::execute): the call
/// was rejected, or it ran and returned its own error.
///
/// Exactly two variants, so a `match` needs no wildcard: the ways a call can be rejected grow
/// inside [`Rejected`], which is `#[non_exhaustive]`. The rejection is a [`Rejected`] by
/// default; where a breaker is one of many (the keyed tower layer) it is a [`RejectedBy`],
/// which names it (`R` is any type that holds a [`Rejected`]).
///
/// A [`Rejected`] converts into `Error<E>` for every `E`, so `breaker.allow()?` works in a
/// function that returns `Result<_, Error<E>>`. `Error<E>` is a [`std::error::Error`]
/// whenever `E` is `Debug + Display`, so `Error<BoxError>` converts into a `BoxError` (as the
/// outer layers of a tower stack need). Its `Display` is the inner error's message, or the
/// rejection's.
///
/// # Examples
///
/// ```
/// use lazybreaker::{Breaker, Error, Rejected};
///
/// fn call(breaker: &Breaker) -> Result<u32, Error<std::io::Error>> {
///     let permit = breaker.allow()?;
///     permit.success();
///     Ok(7)
/// }
///
/// let breaker = Breaker::builder().build();
/// assert_eq!(call(&breaker).unwrap(), 7);
///
/// let err: Error<std::io::Error> = Rejected::TooManyRequests.into();
/// assert!(matches!(err, Error::Rejected(Rejected::TooManyRequests)));
/// let boxed: Box<dyn std::error::Error + Send + Sync> = err.into();
/// assert_eq!(boxed.to_string(), "too many requests");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Error<E, R = Rejected> {
    /// The breaker did not make the call, and says why.
    Rejected(R),
    /// The call was made and returned this error, untouched.
    Inner(E),
}

impl<E, R> Error<E, R> {
    /// The call's own error, if the call was made.
    pub fn into_inner(self) -> Option<E> {
        match self {
            Error::Inner(e) => Some(e),
            Error::Rejected(_) => None,
        }
    }

    /// A reference to the call's own error, if the call was made.
    pub fn inner(&self) -> Option<&E> {
        match self {
            Error::Inner(e) => Some(e),
            Error::Rejected(_) => None,
        }
    }

    /// Whether the breaker rejected the call (it was never made).
    pub fn is_rejected(&self) -> bool {
        matches!(self, Error::Rejected(_))
    }

    /// The same error with the call's own error mapped by `f`.
    pub fn map_inner<F>(self, f: impl FnOnce(E) -> F) -> Error<F, R> {
        match self {
            Error::Rejected(rejected) => Error::Rejected(rejected),
            Error::Inner(e) => Error::Inner(f(e)),
        }
    }
}

impl<E, R: AsRef<Rejected>> Error<E, R> {
    /// The rejection, if the breaker did not make the call.
    pub fn rejection(&self) -> Option<Rejected> {
        match self {
            Error::Rejected(rejected) => Some(*rejected.as_ref()),
            Error::Inner(_) => None,
        }
    }
}

impl<E> From<Rejected> for Error<E> {
    fn from(rejected: Rejected) -> Self {
        Error::Rejected(rejected)
    }
}

/// Drops the name: for code that handles every rejection as a plain [`Rejected`].
impl<E> From<RejectedBy> for Error<E> {
    fn from(rejected: RejectedBy) -> Self {
        Error::Rejected(rejected.rejected)
    }
}

impl<E> From<RejectedBy> for Error<E, RejectedBy> {
    fn from(rejected: RejectedBy) -> Self {
        Error::Rejected(rejected)
    }
}

impl<E: fmt::Display, R: fmt::Display> fmt::Display for Error<E, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Rejected(rejected) => fmt::Display::fmt(rejected, f),
            Error::Inner(e) => fmt::Display::fmt(e, f),
        }
    }
}

/// The inner error is shown by `Display`, not reported again as a `source` (a `source` would
/// need `E: Error + 'static`, which would keep `Error<BoxError>` from being an error at all):
/// reach it with [`Error::inner`] or [`Error::into_inner`].
impl<E: fmt::Debug + fmt::Display, R: fmt::Debug + fmt::Display> std::error::Error for Error<E, R> {}

/// An invalid parameter, named: which breaker, which field, what value, and why.
///
/// Returned where a parameter can be invalid: when a policy is constructed (a ratio outside
/// `[0, 1]`, a zero threshold), by [`Builder::build_strict`](crate::Builder::build_strict) (a bucket
/// period that does not fit the interval), when a breaker is built from configuration
/// ([`config::Settings`](crate::config::Settings)), and when configuration read from a file
/// does not fit its shape. The builder's plain [`build`](crate::Builder::build) follows
/// gobreaker's zero-means-default rules and cannot fail.
///
/// A parameter checked by a constructor is named as the constructor spells it (`ratio`); one
/// that came from configuration is named by its path in the settings (`policy.ratio`,
/// `policy.policies[1].min_isolation`), and the error carries the name of the breaker it
/// belongs to, when that breaker has one.
///
/// # Examples
///
/// ```
/// use lazybreaker::policy::FailureRatio;
///
/// let err = FailureRatio::new(1.5, 10).unwrap_err();
/// assert_eq!(err.field(), "ratio");
/// assert_eq!(err.breaker(), None);
/// assert_eq!(err.to_string(), "invalid `ratio` = 1.5: must be within [0, 1]");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
#[error("{}invalid `{field}` = {value}: {reason}", BreakerPrefix(.breaker.as_deref()))]
pub struct ConfigError {
    breaker: Option<String>,
    field: Cow<'static, str>,
    value: String,
    reason: &'static str,
}

impl ConfigError {
    /// An error naming `field`, its `value` and what a valid value looks like (`reason`, in
    /// lowercase without a final period), for the constructors of your own policies.
    ///
    /// `field` is a `&'static str` or, for a name made at run time (a path in your own
    /// configuration, say), a `String`.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::ConfigError;
    ///
    /// let err = ConfigError::new("window", 0, "must be at least 1");
    /// assert_eq!(err.to_string(), "invalid `window` = 0: must be at least 1");
    /// ```
    pub fn new(
        field: impl Into<Cow<'static, str>>,
        value: impl fmt::Display,
        reason: &'static str,
    ) -> Self {
        Self {
            breaker: None,
            field: field.into(),
            value: value.to_string(),
            reason,
        }
    }

    /// The same error, for a field found at `prefix` in a configuration: `ratio` within
    /// `policy` becomes `policy.ratio`, within `policies[1]` it becomes `policies[1].ratio`.
    pub(crate) fn within(mut self, prefix: impl fmt::Display) -> Self {
        self.field = Cow::Owned(format!("{prefix}.{}", self.field));
        self
    }

    /// The same error, attributed to the breaker called `name`, unless it already is
    /// attributed to one or `name` is empty.
    pub(crate) fn for_breaker(mut self, name: &str) -> Self {
        if self.breaker.is_none() && !name.is_empty() {
            self.breaker = Some(name.to_owned());
        }
        self
    }

    /// The name of the breaker the invalid parameter belongs to, when the error came from
    /// building a named breaker from configuration; `None` for a constructor's error.
    pub fn breaker(&self) -> Option<&str> {
        self.breaker.as_deref()
    }

    /// The name of the invalid parameter: as the constructor spells it (`ratio`), or its path
    /// in the configuration (`policy.policies[1].ratio`).
    pub fn field(&self) -> &str {
        &self.field
    }

    /// The invalid value, as given.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// What a valid value looks like.
    pub fn reason(&self) -> &'static str {
        self.reason
    }
}

/// A number as an error message shows it: the shortest digits that read back as the same
/// `f64`, in decimal from 1e-4 up to 1e16 and for zero (`1.5`, `2`, `0`), in scientific
/// notation outside (`2.2250738585072014e-308`, `1e300`: never hundreds of digits), `NaN`
/// and `inf` as they are. For every `f64` a [`ConfigError`] names.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Number(pub(crate) f64);

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let magnitude = self.0.abs();
        if !magnitude.is_finite() || magnitude == 0.0 || (1e-4..1e16).contains(&magnitude) {
            write!(f, "{}", self.0)
        } else {
            write!(f, "{:e}", self.0)
        }
    }
}

/// Displays "breaker `name`: " when there is a name, nothing otherwise.
struct BreakerPrefix<'a>(Option<&'a str>);

impl fmt::Display for BreakerPrefix<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(name) => write!(f, "breaker `{name}`: "),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{ConfigError, Rejected};
    use std::time::Duration;

    #[test]
    fn an_open_rejection_says_the_open_periods_rest_without_the_strict_expirys_nanosecond() {
        const S: u64 = 1_000_000_000;
        // Tripped at 5 s for 60 s: open until 65 s inclusive.
        let until = 65 * S;
        let wait = |now| Rejected::open_until(until, now).retry_after();
        assert_eq!(wait(5 * S), Some(Duration::from_secs(60)), "at the trip");
        assert_eq!(wait(5 * S + S / 2), Some(Duration::from_millis(59_500)));
        assert_eq!(
            wait(until),
            Some(Duration::from_nanos(1)),
            "still open at `until`: 1 ns, not zero"
        );
        assert_eq!(
            Rejected::open_until(until, 5 * S).retry_after_secs(),
            Some(60)
        );
        assert_eq!(
            Rejected::open_until(u64::MAX, 0).retry_after(),
            Some(Duration::from_nanos(u64::MAX)),
            "saturates"
        );
    }

    #[test]
    fn a_path_and_a_breaker_name_show_in_the_message() {
        let err = ConfigError::new("ratio", 1.5, "must be within [0, 1]");
        assert_eq!(
            err.to_string(),
            "invalid `ratio` = 1.5: must be within [0, 1]"
        );
        let err = err
            .within("policies[1]")
            .within("policy")
            .for_breaker("payments");
        assert_eq!(err.field(), "policy.policies[1].ratio");
        assert_eq!(err.breaker(), Some("payments"));
        assert_eq!(err.value(), "1.5");
        assert_eq!(
            err.to_string(),
            "breaker `payments`: invalid `policy.policies[1].ratio` = 1.5: must be within [0, 1]"
        );
    }

    /// I9: a number in an error reads in a few digits (the shortest that read back as the
    /// same `f64`), never written out to hundreds of them, for every `f64` an error names.
    #[test]
    fn item_i9_every_number_an_error_names_reads_in_a_few_digits() {
        use crate::policy::{EmaConfig, FailureRatio, SlowCalls};
        use crate::throttle::Throttle;

        let throttle_k = |k: f64| Throttle::new(k).unwrap_err();
        let max_probability = |p: f64| {
            Throttle::new(2.0)
                .unwrap()
                .max_probability(p)
                .invalid(false)
                .unwrap()
        };
        let ratio = |r: f64| FailureRatio::new(r, 1).unwrap_err();
        let slow_ratio = |r: f64| SlowCalls::new(Duration::from_millis(1), r, 1).unwrap_err();
        let epsilon = |e: f64| {
            EmaConfig {
                epsilon: e,
                ..EmaConfig::default()
            }
            .validate()
            .unwrap_err()
        };
        let cases = [
            (throttle_k(f64::MIN_POSITIVE), "2.2250738585072014e-308"),
            (throttle_k(1e-300), "1e-300"),
            (throttle_k(0.5), "0.5"),
            (throttle_k(0.0), "0"),
            (throttle_k(-1e20), "-1e20"),
            (throttle_k(f64::NAN), "NaN"),
            (throttle_k(f64::NEG_INFINITY), "-inf"),
            (max_probability(f64::MAX), "1.7976931348623157e308"),
            (max_probability(-5e-324), "-5e-324"),
            (max_probability(1.5), "1.5"),
            (ratio(1e300), "1e300"),
            (ratio(-1e-7), "-1e-7"),
            (slow_ratio(2e20), "2e20"),
            (slow_ratio(1234.5), "1234.5"),
            (epsilon(-1e-310), "-1e-310"),
            (epsilon(1e300), "1e300"),
            (epsilon(1.0), "1"),
        ];
        for (err, shown) in cases {
            assert_eq!(err.value(), shown, "{err}");
            assert!(err.to_string().len() < 100, "{err}");
        }
    }

    #[test]
    fn the_first_breaker_name_sticks_and_an_empty_one_is_none() {
        let err = ConfigError::new("threshold", 0, "must be at least 1");
        assert_eq!(err.clone().for_breaker("").breaker(), None);
        let err = err.for_breaker("inner").for_breaker("outer");
        assert_eq!(err.breaker(), Some("inner"));
    }
}
