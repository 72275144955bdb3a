//! [`rejection`]: the breaker's rejection, found in a `reqwest_middleware::Error`.

use reqwest_middleware::Error;

use lazybreaker::RejectedBy;

/// The [`RejectedBy`] in `error`, if a breaker rejected the request (it was never sent):
/// the error is a [`reqwest_middleware::Error::Middleware`] with a `RejectedBy` among its
/// causes (the error itself, as [`BreakerMiddleware`](super::BreakerMiddleware) returns
/// it, or an outer middleware's error around it); `None` for any other error.
///
/// `rejection(&err).map(|r| r.rejected())` is the plain [`Rejected`](lazybreaker::Rejected),
/// with its [`retry_after`](lazybreaker::Rejected::retry_after).
///
/// # Examples
///
/// ```
/// use lazybreaker_reqwest::rejection;
/// use lazybreaker::{Rejected, RejectedBy};
/// use std::time::Duration;
///
/// let open = Rejected::Open { retry_after: Duration::from_secs(30) };
/// let err = reqwest_middleware::Error::middleware(RejectedBy::new("127.0.0.1:8080", open));
/// assert_eq!(rejection(&err).map(|r| r.rejected()), Some(open));
/// assert_eq!(rejection(&err).unwrap().breaker(), "127.0.0.1:8080");
/// assert_eq!(err.to_string(), "circuit breaker `127.0.0.1:8080` is open (retry after 30000ms)");
///
/// let other = reqwest_middleware::Error::middleware(std::io::Error::other("signing failed"));
/// assert!(rejection(&other).is_none());
/// ```
pub fn rejection(error: &Error) -> Option<&RejectedBy> {
    match error {
        Error::Middleware(e) => lazybreaker::classify::causes(e.as_ref())
            .find_map(|cause| cause.downcast_ref::<RejectedBy>()),
        Error::Reqwest(_) => None,
    }
}
