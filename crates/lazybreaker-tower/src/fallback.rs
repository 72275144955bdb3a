//! What a layer answers for a rejected request: an error ([`FailFast`], the default; the
//! inner service's own with [`IntoInner`]) or a response of its own ([`Fallback`], from
//! [`BreakerLayer::fallback`](super::BreakerLayer::fallback)).

use std::fmt;

use lazybreaker::{Error, Rejected};

/// What a breaker's service answers for a request its breaker rejected, and so what its
/// error type is: [`FailFast`] fails the request with [`Error::Rejected`]; [`Fallback`]
/// answers it with a response and keeps the inner service's error type.
///
/// `T` and `E` are the inner service's response and error, `R` the rejection the layer
/// has (a [`Rejected`], or a [`RejectedBy`](lazybreaker::RejectedBy) naming a keyed breaker).
/// Implemented by this module's three types; the trait is public so that it can appear in
/// the services' bounds.
pub trait OnRejected<T, E, R> {
    /// The error type of the breaker's service.
    type Error;

    /// The answer to a rejected request.
    ///
    /// # Errors
    ///
    /// For [`FailFast`], always: the rejection.
    fn answer(&self, rejected: R) -> Result<T, Self::Error>;

    /// The inner service's error, as the breaker's service returns it.
    fn inner(error: E) -> Self::Error;
}

/// Rejected requests fail with [`Error::Rejected`]: the services' error type is
/// `Error<S::Error>` (`Error<S::Error, RejectedBy>` for the keyed layer). The default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct FailFast;

impl<T, E, R> OnRejected<T, E, R> for FailFast {
    type Error = Error<E, R>;

    #[inline]
    fn answer(&self, rejected: R) -> Result<T, Self::Error> {
        Err(Error::Rejected(rejected))
    }

    #[inline]
    fn inner(error: E) -> Self::Error {
        Error::Inner(error)
    }
}

/// Rejected requests fail with the inner service's own error, made from the rejection
/// (`E: From<R>`): for a layer over another layer of this crate, whose
/// [`Error<E>`](lazybreaker::Error) takes a [`Rejected`] as its own, so that the stack's error
/// stays one `Error<E>` that carries the rejections of both (a
/// [`LimitLayer`](super::LimitLayer) over a [`BreakerLayer`](super::BreakerLayer), with a
/// [`RetryLayer`](https://docs.rs/lazybreaker-tower/latest/lazybreaker_tower/struct.RetryLayer.html)
/// outside that tells them apart); or over a `BoxError` stack, which boxes it.
///
/// ```
/// use lazybreaker::{Error, Rejected};
/// use lazybreaker_tower::{IntoInner, OnRejected};
///
/// let answer: Result<(), Error<std::io::Error>> =
///     OnRejected::<(), Error<std::io::Error>, Rejected>::answer(&IntoInner, Rejected::Limited);
/// assert!(matches!(answer, Err(Error::Rejected(Rejected::Limited))));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct IntoInner;

impl<T, E: From<R>, R> OnRejected<T, E, R> for IntoInner {
    type Error = E;

    #[inline]
    fn answer(&self, rejected: R) -> Result<T, E> {
        Err(E::from(rejected))
    }

    #[inline]
    fn inner(error: E) -> E {
        error
    }
}

/// Rejected requests are answered by a function of the rejection (`Fn(&Rejected) -> T`,
/// e.g. [`http::rejected_response`](lazybreaker::http::rejected_response)): the services' error
/// type stays the inner service's, so a breaker fits where errors are not allowed (an axum
/// `Router`, with no `HandleErrorLayer`). From
/// [`BreakerLayer::fallback`](super::BreakerLayer::fallback).
///
/// A fallback answer is still a rejection: counted in
/// [`Totals`](lazybreaker::Totals)' `rejected_*` and the metrics, never reported to the breaker as
/// the outcome of a call (no call was made). The function runs when the response future is
/// first polled; a panic in it unwinds out of that `poll`, with nothing admitted.
#[derive(Clone, Copy)]
pub struct Fallback<F>(pub(super) F);

impl<F> Fallback<F> {
    /// Rejected requests answered by `fallback(&rejected)`: for
    /// [`BreakerService::with_answer`](super::BreakerService::with_answer); the layers'
    /// `fallback` methods build one.
    pub fn new(fallback: F) -> Self {
        Self(fallback)
    }
}

impl<T, E, R, F> OnRejected<T, E, R> for Fallback<F>
where
    R: AsRef<Rejected>,
    F: Fn(&Rejected) -> T,
{
    type Error = E;

    #[inline]
    fn answer(&self, rejected: R) -> Result<T, E> {
        Ok((self.0)(rejected.as_ref()))
    }

    #[inline]
    fn inner(error: E) -> E {
        error
    }
}

impl<F> fmt::Debug for Fallback<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Fallback").finish_non_exhaustive()
    }
}
