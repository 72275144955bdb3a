//! [`deadline`] and [`Deadline`]: a classifier for a call with a deadline inside it.

use std::time::Duration;

use crate::policy::Outcome;

use super::Classify;

/// A classifier for `Result<Result<T, E>, D>`, what a call with a deadline inside it returns
/// (`tokio::time::timeout(d, call())`: the outer `Err` is the deadline's): an elapsed
/// deadline is a failure, and a call that finished in time counts as `inner` says of its own
/// result (and asks for the open period `inner` asks for: an HTTP `Retry-After` with
/// [`http::StatusRules`](crate::http::StatusRules)).
///
/// Without it, the default classifier would see `Ok(Err(refused))` and count a failed call
/// as a success. Pass [`OkIsSuccess`](super::OkIsSuccess) for "`Err` fails", or an HTTP
/// classifier ([`http::StatusRules`](crate::http::StatusRules)) for responses. A type, not
/// a closure: give it to the calls that take any [`Classify`]
/// ([`execute_async_with`](crate::Breaker::execute_async_with),
/// [`execute_with`](crate::Breaker::execute_with), the tower layers).
///
/// # Examples
///
/// ```
/// use lazybreaker::classify::{deadline, Classify, OkIsSuccess};
/// use lazybreaker::policy::Outcome;
///
/// struct Elapsed; // what a timer's timeout returns
/// let classify = deadline(OkIsSuccess);
/// let judge = |r: Result<Result<u32, &str>, Elapsed>| classify.classify(&r);
/// assert_eq!(judge(Ok(Ok(7))), Outcome::Success);
/// assert_eq!(judge(Ok(Err("refused"))), Outcome::Failure);
/// assert_eq!(judge(Err(Elapsed)), Outcome::Failure);
/// ```
///
/// With tokio, the recipe for an async call that counts a hang as a failure:
///
/// ```
/// use lazybreaker::classify::{deadline, OkIsSuccess};
/// use lazybreaker::Breaker;
/// use std::time::Duration;
///
/// async fn hangs() -> Result<(), std::io::Error> {
///     std::future::pending().await
/// }
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let breaker = Breaker::builder().ready_to_trip(|c| c.consecutive_failures >= 1).build();
/// let result = breaker
///     .execute_async_with(
///         || tokio::time::timeout(Duration::from_millis(10), hangs()),
///         deadline(OkIsSuccess),
///     )
///     .await;
/// // The deadline's error, returned as the call's own; a refused call would be `Ok(Err(_))`.
/// assert!(matches!(result, Err(lazybreaker::Error::Inner(_))));
/// assert_eq!(breaker.state(), lazybreaker::State::Open);
/// # });
/// ```
pub fn deadline<C>(inner: C) -> Deadline<C> {
    Deadline(inner)
}

/// The classifier [`deadline`] returns: an elapsed deadline fails, a finished call counts as
/// the inner classifier says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Deadline<C>(C);

impl<T, E, D, C: Classify<T, E>> Classify<Result<T, E>, D> for Deadline<C> {
    #[inline]
    fn classify(&self, result: &Result<Result<T, E>, D>) -> Outcome {
        match result {
            Ok(finished) => self.0.classify(finished),
            Err(_) => Outcome::Failure,
        }
    }

    #[inline]
    fn open_for(&self, result: &Result<Result<T, E>, D>) -> Option<Duration> {
        match result {
            Ok(finished) => self.0.open_for(finished),
            Err(_) => None,
        }
    }
}
