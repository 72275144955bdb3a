//! HTTP helpers (feature `http`, on the `http` crate): how a response counts
//! ([`StatusRules`], [`status_classifier`]), and what to answer when the breaker rejects a
//! call ([`rejected_response`]: a 503 with `Retry-After`).
//!
//! The rules, status by status:
//!
//! | response | counts as | why |
//! |---|---|---|
//! | `Err(_)` (transport: refused, reset, timed out) | failure | the dependency did not answer |
//! | 5xx | failure | the dependency failed |
//! | 429 Too Many Requests | failure (configurable) | the dependency is shedding load: backing off is the breaker's job |
//! | 408 Request Timeout | failure (configurable) | the dependency did not finish in time |
//! | other 4xx | excluded | the request was wrong, not the dependency |
//! | 1xx, 2xx, 3xx | success | |
//!
//! # Examples
//!
//! ```
//! use http::{Response, StatusCode};
//! use lazybreaker::http::{status_classifier, StatusRules};
//! use lazybreaker::policy::Outcome;
//!
//! let classify = status_classifier::<(), std::io::Error>();
//! let response = |code: u16| Ok(Response::builder().status(code).body(()).unwrap());
//! assert_eq!(classify(&response(200)), Outcome::Success);
//! assert_eq!(classify(&response(404)), Outcome::Excluded);
//! assert_eq!(classify(&response(503)), Outcome::Failure);
//! assert_eq!(classify(&Err(std::io::Error::other("reset"))), Outcome::Failure);
//!
//! // A 429 that should not count against the dependency:
//! let rules = StatusRules::new().too_many_requests(Outcome::Excluded);
//! assert_eq!(rules.outcome(StatusCode::TOO_MANY_REQUESTS), Outcome::Excluded);
//! ```

use http::{header, HeaderValue, Response, StatusCode};

use crate::error::Rejected;
use crate::policy::Outcome;

/// How HTTP statuses count: the table of the [module documentation](self), with 429 and 408
/// configurable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StatusRules {
    too_many_requests: Outcome,
    request_timeout: Outcome,
}

impl StatusRules {
    /// The default rules: 429 and 408 are failures.
    pub const fn new() -> Self {
        Self {
            too_many_requests: Outcome::Failure,
            request_timeout: Outcome::Failure,
        }
    }

    /// How a 429 Too Many Requests counts.
    #[must_use]
    pub const fn too_many_requests(mut self, outcome: Outcome) -> Self {
        self.too_many_requests = outcome;
        self
    }

    /// How a 408 Request Timeout counts.
    #[must_use]
    pub const fn request_timeout(mut self, outcome: Outcome) -> Self {
        self.request_timeout = outcome;
        self
    }

    /// How a response with `status` counts.
    pub fn outcome(&self, status: StatusCode) -> Outcome {
        match status {
            StatusCode::TOO_MANY_REQUESTS => self.too_many_requests,
            StatusCode::REQUEST_TIMEOUT => self.request_timeout,
            s if s.is_server_error() => Outcome::Failure,
            s if s.is_client_error() => Outcome::Excluded,
            _ => Outcome::Success,
        }
    }

    /// How a transport error counts: as [`classify::io_error_in`](crate::classify::io_error_in)
    /// says when an `std::io::Error` is among its causes (a refused connection is
    /// [`Outcome::Fatal`]), else a failure.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::http::StatusRules;
    /// use lazybreaker::policy::Outcome;
    /// use std::io::{Error, ErrorKind};
    ///
    /// let rules = StatusRules::new();
    /// assert_eq!(rules.transport(&Error::from(ErrorKind::ConnectionRefused)), Outcome::Fatal);
    /// assert_eq!(rules.transport(&std::fmt::Error), Outcome::Failure);
    /// ```
    pub fn transport(&self, error: &(dyn std::error::Error + 'static)) -> Outcome {
        crate::classify::io_error_in(error).unwrap_or(Outcome::Failure)
    }

    /// These rules as a classifier of `Result<Response<B>, BoxError>` (tower's boxed error,
    /// what a `timeout` layer or a boxed client returns): a response counts by its status, a
    /// transport error as [`transport`](StatusRules::transport) says, so a refused
    /// connection under the layers trips the breaker at once.
    pub fn classifier_with_io<B>(
        self,
    ) -> impl Fn(&Result<Response<B>, Box<dyn std::error::Error + Send + Sync>>) -> Outcome
           + Clone
           + Send
           + Sync {
        move |result: &Result<Response<B>, Box<dyn std::error::Error + Send + Sync>>| match result {
            Ok(response) => self.outcome(response.status()),
            Err(error) => {
                let error: &(dyn std::error::Error + 'static) = error.as_ref();
                self.transport(error)
            }
        }
    }

    /// These rules as a [`Classify`](crate::Classify) of `Result<Response<B>, E>`: a
    /// transport error (`Err`) is a failure, a response counts by its status (see
    /// [`classifier_with_io`](StatusRules::classifier_with_io) to tell a refused
    /// connection apart).
    pub fn classifier<B, E>(
        self,
    ) -> impl Fn(&Result<Response<B>, E>) -> Outcome + Clone + Send + Sync {
        move |result: &Result<Response<B>, E>| match result {
            Ok(response) => self.outcome(response.status()),
            Err(_) => Outcome::Failure,
        }
    }
}

impl Default for StatusRules {
    fn default() -> Self {
        Self::new()
    }
}

/// The default rules ([`StatusRules::new`]) as a classifier of `Result<Response<B>, E>`.
pub fn status_classifier<B, E>() -> impl Fn(&Result<Response<B>, E>) -> Outcome + Clone + Send + Sync
{
    StatusRules::new().classifier()
}

/// The response to send when the breaker rejected a call: 503 Service Unavailable, with a
/// `Retry-After` header in whole seconds, rounded up, while the breaker is open
/// ([`Rejected::retry_after_secs`]); without one when it is half-open and full (a slot frees
/// up when a probe ends, not at a known time).
///
/// # Examples
///
/// ```
/// use lazybreaker::http::rejected_response;
/// use lazybreaker::Rejected;
/// use std::time::Duration;
///
/// let response = rejected_response::<()>(&Rejected::Open { retry_after: Duration::from_millis(1_500) });
/// assert_eq!(response.status(), 503);
/// assert_eq!(response.headers()["retry-after"], "2");
/// ```
pub fn rejected_response<B: Default>(rejected: &Rejected) -> Response<B> {
    let mut response = Response::new(B::default());
    *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    if let Some(secs) = rejected.retry_after_secs() {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn every_class_of_status_counts_as_the_table_says() {
        let rules = StatusRules::new();
        for (code, want) in [
            (100, Outcome::Success),
            (200, Outcome::Success),
            (204, Outcome::Success),
            (301, Outcome::Success),
            (400, Outcome::Excluded),
            (401, Outcome::Excluded),
            (404, Outcome::Excluded),
            (408, Outcome::Failure),
            (422, Outcome::Excluded),
            (429, Outcome::Failure),
            (500, Outcome::Failure),
            (502, Outcome::Failure),
            (503, Outcome::Failure),
            (504, Outcome::Failure),
        ] {
            let status = StatusCode::from_u16(code).unwrap();
            assert_eq!(rules.outcome(status), want, "{code}");
        }
        let lenient = rules
            .too_many_requests(Outcome::Excluded)
            .request_timeout(Outcome::Excluded);
        assert_eq!(
            lenient.outcome(StatusCode::TOO_MANY_REQUESTS),
            Outcome::Excluded
        );
        assert_eq!(
            lenient.outcome(StatusCode::REQUEST_TIMEOUT),
            Outcome::Excluded
        );
    }

    #[test]
    fn a_half_open_rejection_has_no_retry_after() {
        let response = rejected_response::<()>(&Rejected::TooManyRequests);
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(response.headers().get(header::RETRY_AFTER).is_none());
        let response = rejected_response::<String>(&Rejected::Open {
            retry_after: Duration::from_secs(30),
        });
        assert_eq!(response.headers()[header::RETRY_AFTER], "30");
    }

    #[test]
    fn the_classifier_works_with_a_breaker() {
        let breaker = crate::Breaker::builder()
            .ready_to_trip(|c| c.consecutive_failures >= 1)
            .build();
        let classify = status_classifier::<(), &str>();
        let respond = |code: u16| Ok(Response::builder().status(code).body(()).unwrap());
        let _ = breaker.execute_classified(|| respond(404), &classify);
        assert_eq!(breaker.state(), crate::State::Closed);
        let _ = breaker.execute_classified(|| respond(500), &classify);
        assert_eq!(breaker.state(), crate::State::Open);
    }
}
