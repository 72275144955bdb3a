//! Errors: a rejected call ([`Rejected`]), a wrapped call's result ([`Error`]) and invalid
//! configuration ([`ConfigError`]).

use std::fmt;
use std::time::Duration;

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum Rejected {
    /// The breaker is open.
    #[error("circuit breaker is open")]
    Open {
        /// How long until the breaker lets a probe through (it goes half-open once this much
        /// time has passed on its clock, if nothing else changes it first).
        retry_after: Duration,
    },
    /// The breaker is half-open and already has as many probes in flight as it admits.
    #[error("too many requests")]
    TooManyRequests,
}

impl Rejected {
    /// How long until the breaker lets a probe through, when it is open; `None` when it is
    /// half-open and full (a slot frees up when a probe ends, not at a known time).
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
            Rejected::TooManyRequests => None,
        }
    }
}

/// The result of a call made through [`Breaker::execute`](crate::Breaker::execute): the call
/// was rejected, or it ran and returned its own error.
///
/// A [`Rejected`] converts into `Error<E>` for every `E`, so `breaker.allow()?` works in a
/// function that returns `Result<_, Error<E>>`.
///
/// # Examples
///
/// ```
/// use lazybreaker::{Breaker, Error};
///
/// fn call(breaker: &Breaker) -> Result<u32, Error<std::io::Error>> {
///     let permit = breaker.allow()?;
///     permit.success();
///     Ok(7)
/// }
///
/// let breaker = Breaker::builder().build();
/// assert_eq!(call(&breaker).unwrap(), 7);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error<E> {
    /// The breaker is open: the call was not made.
    #[error("circuit breaker is open")]
    Open {
        /// How long until the breaker lets a probe through.
        retry_after: Duration,
    },
    /// The breaker is half-open and full: the call was not made.
    #[error("too many requests")]
    TooManyRequests,
    /// The call was made and returned this error, untouched.
    #[error(transparent)]
    Inner(E),
}

impl<E> Error<E> {
    /// The call's own error, if the call was made.
    pub fn into_inner(self) -> Option<E> {
        match self {
            Error::Inner(e) => Some(e),
            _ => None,
        }
    }

    /// The rejection, if the breaker did not make the call.
    pub fn rejection(&self) -> Option<Rejected> {
        match *self {
            Error::Open { retry_after } => Some(Rejected::Open { retry_after }),
            Error::TooManyRequests => Some(Rejected::TooManyRequests),
            Error::Inner(_) => None,
        }
    }

    /// Whether the breaker rejected the call (it was never made).
    pub fn is_rejected(&self) -> bool {
        !matches!(self, Error::Inner(_))
    }
}

impl<E> From<Rejected> for Error<E> {
    fn from(rejected: Rejected) -> Self {
        match rejected {
            Rejected::Open { retry_after } => Error::Open { retry_after },
            Rejected::TooManyRequests => Error::TooManyRequests,
        }
    }
}

/// An invalid parameter, named.
///
/// Returned where a parameter can be invalid: when a policy is constructed (a ratio outside
/// `[0, 1]`, a zero threshold). The breaker's own knobs follow gobreaker's zero-means-default
/// rules and cannot be invalid.
///
/// # Examples
///
/// ```
/// use lazybreaker::policy::FailureRatio;
///
/// let err = FailureRatio::new(1.5, 10).unwrap_err();
/// assert_eq!(err.field(), "ratio");
/// assert_eq!(err.to_string(), "invalid `ratio` = 1.5: must be within [0, 1]");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid `{field}` = {value}: {reason}")]
pub struct ConfigError {
    field: &'static str,
    value: String,
    reason: &'static str,
}

impl ConfigError {
    pub(crate) fn new(field: &'static str, value: impl fmt::Display, reason: &'static str) -> Self {
        Self {
            field,
            value: value.to_string(),
            reason,
        }
    }

    /// The name of the invalid parameter, as the constructor or configuration spells it.
    pub fn field(&self) -> &'static str {
        self.field
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
