//! HTTP helpers (feature `http`, on the `http` crate): how a response counts
//! ([`StatusRules`], itself a classifier), the upstream's `Retry-After` ([`retry_after`]),
//! and what to answer when the breaker rejects a call ([`rejected_response`]: a 503 with
//! `Retry-After`, e.g. as a tower layer's
//! fallback, in `lazybreaker-tower`).
//!
//! The rules, status by status:
//!
//! | response | counts as | why |
//! |---|---|---|
//! | `Err(_)`: refused, unreachable (an `io::Error` among its causes) | fatal: opens at once | the dependency is gone |
//! | `Err(_)`: any other transport error (reset, timed out) | failure | the dependency did not answer |
//! | 5xx | failure | the dependency failed |
//! | 429 Too Many Requests | failure (configurable) | the dependency is shedding load: backing off is the breaker's job |
//! | 408 Request Timeout | failure (configurable) | the dependency did not finish in time |
//! | other 4xx | excluded | the request was wrong, not the dependency |
//! | 1xx, 2xx, 3xx | success | |
//!
//! With [`StatusRules::honor_retry_after`], a 503 or 429 that carries `Retry-After` opens the
//! breaker at once for as long as the upstream asked (bounded by the breaker's longest open
//! period), instead of waiting for the policy to trip.
//!
//! # Examples
//!
//! ```
//! use http::{Response, StatusCode};
//! use lazybreaker::classify::Classify;
//! use lazybreaker::http::StatusRules;
//! use lazybreaker::policy::Outcome;
//!
//! let rules = StatusRules::new(); // give it to a layer: `.classify(StatusRules::new())`
//! let response = |code: u16| -> Result<_, std::io::Error> {
//!     Ok(Response::builder().status(code).body(()).unwrap())
//! };
//! assert_eq!(rules.classify(&response(200)), Outcome::Success);
//! assert_eq!(rules.classify(&response(404)), Outcome::Excluded);
//! assert_eq!(rules.classify(&response(503)), Outcome::Failure);
//! assert_eq!(rules.classify(&Err::<Response<()>, _>(std::io::Error::other("reset"))), Outcome::Failure);
//!
//! // A 429 that should not count against the dependency:
//! let rules = StatusRules::new().too_many_requests(Outcome::Excluded);
//! assert_eq!(rules.outcome(StatusCode::TOO_MANY_REQUESTS), Outcome::Excluded);
//! ```

use std::time::{Duration, SystemTime};

use http::{header, HeaderMap, HeaderValue, Response, StatusCode};

use crate::classify::Classify;
use crate::error::Rejected;
use crate::policy::Outcome;

/// How HTTP responses count: the table of the [module documentation](self), with 429 and 408
/// configurable, and the upstream's `Retry-After` honoured on request.
///
/// `StatusRules` is itself a [`Classify`] of `Result<Response<B>, E>` for every error type:
/// give it to a layer as it is (`BreakerLayer::new(b).classify(StatusRules::new())`). A
/// transport error is a failure; a refused connection or an unreachable host (an
/// `std::io::Error` of that kind, found among the causes of a `BoxError`, an `io::Error` or
/// a [`crate::Error`] around one) is [`Outcome::Fatal`] and opens the breaker at once.
///
/// # Examples
///
/// ```
/// use http::Response;
/// use lazybreaker::classify::Classify;
/// use lazybreaker::http::StatusRules;
/// use lazybreaker::policy::Outcome;
/// use std::time::Duration;
///
/// type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// let rules = StatusRules::new().honor_retry_after();
/// let busy: Result<Response<()>, BoxError> =
///     Ok(Response::builder().status(503).header("retry-after", "120").body(()).unwrap());
/// assert_eq!(rules.classify(&busy), Outcome::Failure);
/// assert_eq!(rules.open_for(&busy), Some(Duration::from_secs(120)));
///
/// let refused: Result<Response<()>, BoxError> =
///     Err(std::io::Error::from(std::io::ErrorKind::ConnectionRefused).into());
/// assert_eq!(rules.classify(&refused), Outcome::Fatal);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StatusRules {
    too_many_requests: Outcome,
    request_timeout: Outcome,
    honor_retry_after: bool,
}

impl StatusRules {
    /// The default rules: 429 and 408 are failures; `Retry-After` is not honoured.
    pub const fn new() -> Self {
        Self {
            too_many_requests: Outcome::Failure,
            request_timeout: Outcome::Failure,
            honor_retry_after: false,
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

    /// Honours the upstream's `Retry-After` on a 503 Service Unavailable and a 429 Too Many
    /// Requests that count as failures: the breaker opens at once for as long as the header
    /// says (in seconds, or until an HTTP date), whatever its policy says, bounded by its
    /// [`max_open_duration`](crate::Builder::max_open_duration); then it probes as usual.
    /// The upstream that asked for time is not called again before then. A header that does
    /// not parse, or a date in the past, is ignored: the response counts as a failure, as
    /// without this rule.
    #[must_use]
    pub const fn honor_retry_after(mut self) -> Self {
        self.honor_retry_after = true;
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

    /// How long a response asks the breaker to stay open: its `Retry-After`, when these
    /// rules honour it ([`honor_retry_after`](StatusRules::honor_retry_after)), the status
    /// is 503 or 429 and counts as a failure; `None` otherwise. An HTTP date is measured
    /// from the system's wall clock.
    pub fn open_for_response(&self, status: StatusCode, headers: &HeaderMap) -> Option<Duration> {
        if !self.honor_retry_after
            || !matches!(
                status,
                StatusCode::SERVICE_UNAVAILABLE | StatusCode::TOO_MANY_REQUESTS
            )
            || !matches!(self.outcome(status), Outcome::Failure | Outcome::Fatal)
        {
            return None;
        }
        // "Retry-After: 0" asks for nothing: the policy decides, as without the header.
        retry_after(headers.get(header::RETRY_AFTER)?, SystemTime::now()).filter(|d| !d.is_zero())
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
    ///
    /// A rejection by another breaker (a [`Rejected`] or a [`RejectedBy`](crate::RejectedBy) among the causes:
    /// a breaker further down the stack) is excluded: that request never reached the
    /// dependency, and the breaker that rejected it counted it already, so an outer breaker
    /// does not trip on an inner one's decision.
    pub fn transport(&self, error: &(dyn std::error::Error + 'static)) -> Outcome {
        crate::classify::transport(error, &|_| None)
    }

    /// How a transport error of any type counts: [`transport`](StatusRules::transport) for
    /// the error types that can carry an `std::io::Error` without naming a client's types
    /// (a `BoxError`, an `io::Error`, a [`crate::Error`] around either), else a failure.
    fn transport_any<E: 'static>(&self, error: &E) -> Outcome {
        crate::classify::transport_any(error, &|_| None, &|_| None)
    }

    /// These rules as a closure over `Result<Response<B>, BoxError>`: the same as the rules
    /// themselves ([`StatusRules`] is a [`Classify`]), for code that wants a closure.
    pub fn classifier_with_io<B>(
        self,
    ) -> impl Fn(&Result<Response<B>, Box<dyn std::error::Error + Send + Sync>>) -> Outcome
           + Clone
           + Send
           + Sync {
        move |result: &Result<Response<B>, Box<dyn std::error::Error + Send + Sync>>| {
            self.classify(result)
        }
    }

    /// These rules as a closure over `Result<Response<B>, E>`, for code that wants a closure
    /// (such as [`Breaker::execute_classified`](crate::Breaker::execute_classified)): a
    /// response counts by its status, a transport error as the rules say. Without
    /// `Retry-After`, which only a [`Classify`] can report.
    pub fn classifier<B, E: 'static>(
        self,
    ) -> impl Fn(&Result<Response<B>, E>) -> Outcome + Clone + Send + Sync {
        move |result: &Result<Response<B>, E>| self.classify(result)
    }
}

impl Default for StatusRules {
    fn default() -> Self {
        Self::new()
    }
}

impl<B, E: 'static> Classify<Response<B>, E> for StatusRules {
    #[inline]
    fn classify(&self, result: &Result<Response<B>, E>) -> Outcome {
        match result {
            Ok(response) => self.outcome(response.status()),
            Err(error) => self.transport_any(error),
        }
    }

    #[inline]
    fn open_for(&self, result: &Result<Response<B>, E>) -> Option<Duration> {
        match result {
            Ok(response) => self.open_for_response(response.status(), response.headers()),
            Err(_) => None,
        }
    }

    /// A 503 Service Unavailable or a 429 Too Many Requests with a `Retry-After` header:
    /// the server is shedding load.
    #[inline]
    fn overloaded(&self, result: &Result<Response<B>, E>) -> bool {
        match result {
            Ok(response) => {
                matches!(
                    response.status(),
                    StatusCode::SERVICE_UNAVAILABLE | StatusCode::TOO_MANY_REQUESTS
                ) && response.headers().contains_key(http::header::RETRY_AFTER)
            }
            Err(_) => false,
        }
    }
}

/// The wait a `Retry-After` header value asks for, at wall-clock time `now`: delay-seconds
/// (`"120"`) or an HTTP date (`"Wed, 21 Oct 2026 07:28:00 GMT"`, measured from `now`). `None`
/// when it does not parse, or the date is not after `now`.
///
/// # Examples
///
/// ```
/// use http::HeaderValue;
/// use lazybreaker::http::retry_after;
/// use std::time::{Duration, SystemTime};
///
/// let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480); // 21 Oct 2015 07:28:00
/// assert_eq!(retry_after(&HeaderValue::from_static("120"), now), Some(Duration::from_secs(120)));
/// let date = HeaderValue::from_static("Wed, 21 Oct 2015 07:30:00 GMT");
/// assert_eq!(retry_after(&date, now), Some(Duration::from_secs(120)));
/// assert_eq!(retry_after(&HeaderValue::from_static("soon"), now), None);
/// ```
pub fn retry_after(value: &HeaderValue, now: SystemTime) -> Option<Duration> {
    let text = value.to_str().ok()?.trim();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        // Too many digits to count is still "a very long time": the breaker's longest open
        // period bounds it anyway.
        return Some(Duration::from_secs(text.parse().unwrap_or(u64::MAX)));
    }
    let until = httpdate::parse_http_date(text).ok()?;
    until.duration_since(now).ok().filter(|d| !d.is_zero())
}

/// The default rules ([`StatusRules::new`]) as a closure over `Result<Response<B>, E>`.
pub fn status_classifier<B, E: 'static>(
) -> impl Fn(&Result<Response<B>, E>) -> Outcome + Clone + Send + Sync {
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
    use crate::error::RejectedBy;
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

    fn response(code: u16, retry_after: Option<&'static str>) -> Response<()> {
        let mut response = Response::builder().status(code);
        if let Some(value) = retry_after {
            response = response.header(header::RETRY_AFTER, value);
        }
        response.body(()).unwrap()
    }

    #[test]
    fn retry_after_reads_seconds_and_dates_and_ignores_the_rest() {
        // 2015-10-21 07:28:00 UTC
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480);
        let parse = |v: &'static str| retry_after(&HeaderValue::from_static(v), now);
        assert_eq!(parse("0"), Some(Duration::ZERO));
        assert_eq!(parse(" 7 "), Some(Duration::from_secs(7)));
        assert_eq!(
            parse("Wed, 21 Oct 2015 07:28:30 GMT"),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse("Wednesday, 21-Oct-15 07:29:00 GMT"),
            Some(Duration::from_secs(60))
        );
        assert_eq!(parse("Wed, 21 Oct 2015 07:27:00 GMT"), None, "in the past");
        assert_eq!(parse("Wed, 21 Oct 2015 07:28:00 GMT"), None, "now");
        assert_eq!(parse("-5"), None);
        assert_eq!(parse("1.5"), None);
        assert_eq!(parse(""), None);
        assert_eq!(
            parse("99999999999999999999999"),
            Some(Duration::from_secs(u64::MAX)),
            "too long to count is the longest wait (the breaker bounds it)"
        );
    }

    #[test]
    fn retry_after_opens_only_when_honoured_on_503_and_429_failures() {
        type Res = Result<Response<()>, std::io::Error>;
        let plain = StatusRules::new();
        let honour = StatusRules::new().honor_retry_after();
        let asks = |code| -> Res { Ok(response(code, Some("120"))) };
        let two_minutes = Some(Duration::from_secs(120));
        assert_eq!(plain.open_for(&asks(503)), None, "opt-in");
        assert_eq!(honour.open_for(&asks(503)), two_minutes);
        assert_eq!(honour.open_for(&asks(429)), two_minutes);
        assert_eq!(honour.open_for(&asks(500)), None, "only 503 and 429");
        assert_eq!(honour.open_for(&asks(200)), None);
        let excluded_429 = honour.too_many_requests(Outcome::Excluded);
        assert_eq!(
            excluded_429.open_for(&asks(429)),
            None,
            "a 429 that does not count opens nothing"
        );
        assert_eq!(honour.open_for(&Res::Ok(response(503, None))), None);
        assert_eq!(
            honour.open_for(&Res::Ok(response(503, Some("0")))),
            None,
            "zero asks for nothing: the policy decides"
        );
        assert_eq!(
            honour.open_for(&Res::Ok(response(503, Some("later")))),
            None
        );
        assert_eq!(
            honour.open_for(&Res::Err(std::io::Error::other("reset"))),
            None
        );
    }

    #[test]
    fn transport_errors_are_fatal_when_refused_whatever_wraps_them() {
        use std::io::{Error as IoError, ErrorKind};
        type BoxError = Box<dyn std::error::Error + Send + Sync>;
        let rules = StatusRules::new();
        let refused = || IoError::from(ErrorKind::ConnectionRefused);
        let io: Result<Response<()>, IoError> = Err(refused());
        assert_eq!(rules.classify(&io), Outcome::Fatal);
        let boxed: Result<Response<()>, BoxError> = Err(refused().into());
        assert_eq!(rules.classify(&boxed), Outcome::Fatal);
        let layered: Result<Response<()>, crate::Error<BoxError>> =
            Err(crate::Error::Inner(refused().into()));
        assert_eq!(rules.classify(&layered), Outcome::Fatal);
        let reset: Result<Response<()>, BoxError> =
            Err(IoError::from(ErrorKind::ConnectionReset).into());
        assert_eq!(rules.classify(&reset), Outcome::Failure);
        let opaque: Result<Response<()>, &str> = Err("refused, but who knows");
        assert_eq!(rules.classify(&opaque), Outcome::Failure);

        // An inner breaker's rejection is not the dependency's failure.
        let inner: Result<Response<()>, crate::Error<BoxError>> =
            Err(crate::Error::Rejected(Rejected::TooManyRequests));
        assert_eq!(rules.classify(&inner), Outcome::Excluded);
        let boxed_by: Result<Response<()>, BoxError> =
            Err(RejectedBy::new("inner", Rejected::ForcedOpen).into());
        assert_eq!(rules.classify(&boxed_by), Outcome::Excluded);
        let boxed_layer: Result<Response<()>, BoxError> = Err(Box::new(
            crate::Error::<BoxError>::Rejected(Rejected::TooManyRequests),
        ));
        assert_eq!(rules.classify(&boxed_layer), Outcome::Excluded);
    }
}
