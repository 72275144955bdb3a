//! [`deadline`]: a classifier for a call with a deadline inside it.

use crate::policy::Outcome;

use super::Classify;

/// A classifier for `Result<Result<T, E>, D>`, what a call with a deadline inside it returns
/// (`tokio::time::timeout(d, call())`: the outer `Err` is the deadline's): an elapsed
/// deadline is a failure, and a call that finished in time counts as `inner` says of its own
/// result.
///
/// Without it, the default classifier would see `Ok(Err(refused))` and count a failed call
/// as a success. Pass [`OkIsSuccess`](super::OkIsSuccess) for "`Err` fails", or an HTTP
/// classifier ([`http::StatusRules`](crate::http::StatusRules)) for responses.
///
/// # Examples
///
/// ```
/// use lazybreaker::classify::{deadline, OkIsSuccess};
/// use lazybreaker::policy::Outcome;
///
/// struct Elapsed; // what a timer's timeout returns
/// let classify = deadline::<u32, &str, Elapsed, _>(OkIsSuccess);
/// assert_eq!(classify(&Ok(Ok(7))), Outcome::Success);
/// assert_eq!(classify(&Ok(Err("refused"))), Outcome::Failure);
/// assert_eq!(classify(&Err(Elapsed)), Outcome::Failure);
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
///     .execute_async_classified(
///         || tokio::time::timeout(Duration::from_millis(10), hangs()),
///         deadline(OkIsSuccess),
///     )
///     .await;
/// // The deadline's error, returned as the call's own; a refused call would be `Ok(Err(_))`.
/// assert!(matches!(result, Err(lazybreaker::Error::Inner(_))));
/// assert_eq!(breaker.state(), lazybreaker::State::Open);
/// # });
/// ```
pub fn deadline<T, E, D, C>(inner: C) -> impl Fn(&Result<Result<T, E>, D>) -> Outcome + Clone
where
    C: Classify<T, E> + Clone,
{
    move |result: &Result<Result<T, E>, D>| match result {
        Ok(finished) => inner.classify(finished),
        Err(_) => Outcome::Failure,
    }
}
