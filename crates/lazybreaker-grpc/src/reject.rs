//! What a gRPC client gets for a rejected call: [`rejected_status`], and [`AsStatus`], the
//! layers' answer that sends it.

use std::fmt;

use tonic::metadata::MetadataValue;
use tonic::Status;

use super::rules::PUSHBACK;
use lazybreaker::Rejected;
use lazybreaker_tower::OnRejected;

/// The `Status` for a call the breaker rejected: `UNAVAILABLE` (a client's retry policy
/// retries it, and [`status_classifier`](super::status_classifier) counts it as the
/// dependency's failure only where no breaker made it), with the rejection as its message
/// (naming the breaker for a [`RejectedBy`](lazybreaker::RejectedBy), as the keyed layer's are),
/// and, when the breaker knows when it will let a probe through, `grpc-retry-pushback-ms`
/// in its metadata: the rest of the open period in whole milliseconds, rounded up (at least
/// 1), which gRPC's retry policy waits before it retries. A half-open breaker that is full,
/// a forced one and one whose health check is under way send no pushback (no time is
/// known): the client's own backoff applies.
///
/// On a tonic server the `Status` goes to the client as it is (a handler returns it); in a
/// tower stack, [`AsStatus`] (or a [fallback](lazybreaker_tower::BreakerLayer::fallback) that
/// calls `rejected_status(r).into_http()`) answers with it as a trailers-only response,
/// which a tonic client reads back as this `Status`.
///
/// # Examples
///
/// ```
/// use lazybreaker_grpc::rejected_status;
/// use lazybreaker::{Rejected, RejectedBy};
/// use std::time::Duration;
///
/// let open = Rejected::Open { retry_after: Duration::from_micros(1_500_001) };
/// let status = rejected_status(&open);
/// assert_eq!(status.code(), tonic::Code::Unavailable);
/// assert_eq!(status.metadata().get("grpc-retry-pushback-ms").unwrap(), "1501");
///
/// let by = RejectedBy::new("/echo.Echo/Sub", Rejected::TooManyRequests);
/// let status = rejected_status(&by);
/// assert!(status.message().contains("/echo.Echo/Sub"));
/// assert!(status.metadata().get("grpc-retry-pushback-ms").is_none());
/// ```
pub fn rejected_status<R>(rejected: &R) -> Status
where
    R: AsRef<Rejected> + fmt::Display + ?Sized,
{
    let mut status = Status::unavailable(rejected.to_string());
    if let Some(wait) = rejected.as_ref().retry_after() {
        let ms = wait.as_millis() + u128::from(wait.subsec_nanos() % 1_000_000 > 0);
        let ms = u64::try_from(ms).unwrap_or(u64::MAX).max(1);
        status
            .metadata_mut()
            .insert(PUSHBACK, MetadataValue::from(ms));
    }
    status
}

/// The answer of a tower layer to a rejected request, for gRPC: [`rejected_status`] as a
/// trailers-only response (HTTP 200, `grpc-status: 14`), so the layer's error type stays
/// the inner service's and a tonic client reads the rejection back as an `UNAVAILABLE`
/// `Status` with its pushback. On a client's `Channel` and on a tonic server alike:
/// `KeyedBreakerLayer::new(registry, grpc::per_method).on_rejected(grpc::AsStatus)`. With
/// the keyed layer the message names the method's breaker.
///
/// Like a [fallback](lazybreaker_tower::Fallback), the answer is a rejection: counted in the
/// rejection totals, never reported to the breaker as a call's outcome. A
/// [`RetryLayer`](crate::RetryLayer) around the breaker's layer knows the answer for a
/// rejection (it is marked in the response's extensions) and does not retry it; a fallback's
/// `rejected_status(r).into_http()` is not marked, and would be retried as the server's own
/// `UNAVAILABLE`.
///
/// # Examples
///
/// ```
/// use lazybreaker_grpc::AsStatus;
/// use lazybreaker_tower::OnRejected;
/// use lazybreaker::Rejected;
/// use std::time::Duration;
///
/// let rejected = Rejected::Open { retry_after: Duration::from_secs(2) };
/// let answer: Result<http::Response<tonic::body::Body>, std::convert::Infallible> =
///     AsStatus.answer(rejected);
/// let response = answer.unwrap();
/// assert_eq!(response.headers()["grpc-status"], "14");
/// assert_eq!(response.headers()["grpc-retry-pushback-ms"], "2000");
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct AsStatus;

/// The mark of [`AsStatus`]'s answer in its response's extensions: a breaker's rejection,
/// which a [`RetryLayer`](crate::RetryLayer) never retries (the server's own `UNAVAILABLE`
/// with a pushback looks the same on the wire).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rejection;

impl<B, E, R> OnRejected<http::Response<B>, E, R> for AsStatus
where
    B: Default,
    R: AsRef<Rejected> + fmt::Display,
{
    type Error = E;

    fn answer(&self, rejected: R) -> Result<http::Response<B>, E> {
        let mut response = rejected_status(&rejected).into_http();
        // Marked, so that a retry layer around this one knows it was never sent.
        response.extensions_mut().insert(Rejection);
        Ok(response)
    }

    #[inline]
    fn inner(error: E) -> E {
        error
    }
}
