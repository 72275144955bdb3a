//! How a call through the middleware counts: [`ResponseRules`], the [`StatusRules`] of a
//! response and this module's reading of `reqwest`'s errors.

use std::time::Duration;

use reqwest::Response;
use reqwest_middleware::Error;

use lazybreaker::classify::Classify;
use lazybreaker::http::StatusRules;
use lazybreaker::policy::Outcome;
use lazybreaker::RejectedBy;

/// The classifier of the middleware's calls: a response counts by its status as the
/// [`StatusRules`] say (its `Retry-After` honoured when they do), an error as
/// [`ResponseRules::error`] says.
#[derive(Debug, Clone, Copy)]
pub(super) struct ResponseRules(pub(super) StatusRules);

impl ResponseRules {
    /// How an error from the rest of the chain counts:
    ///
    /// - `reqwest`'s own ([`Error::Reqwest`]): as [`transport`] says;
    /// - an inner middleware's ([`Error::Middleware`]): the first `reqwest::Error` among its
    ///   causes counts as [`transport`] says (a retrying middleware's last attempt, say);
    ///   another breaker's [`RejectedBy`] is excluded (the request never left, and that
    ///   breaker counted it already); any other error is a failure (the call did not get a
    ///   response, and nothing says it was the caller's fault).
    fn error(error: &Error) -> Outcome {
        match error {
            Error::Reqwest(e) => transport(e),
            Error::Middleware(e) => {
                for cause in lazybreaker::classify::causes(e.as_ref()) {
                    if let Some(e) = cause.downcast_ref::<reqwest::Error>() {
                        return transport(e);
                    }
                    if cause.is::<RejectedBy>() {
                        return Outcome::Excluded;
                    }
                }
                Outcome::Failure
            }
        }
    }
}

/// How a `reqwest::Error` from sending a request counts:
///
/// - a timeout ([`is_timeout`](reqwest::Error::is_timeout): the client's or the request's
///   `timeout`, a `connect_timeout`, an I/O timeout found among its causes) is a failure,
///   even when it happened while connecting: a slow dependency may be overloaded, not gone;
/// - a connect error ([`is_connect`](reqwest::Error::is_connect): refused, unreachable, a
///   name that does not resolve) is [`Outcome::Fatal`]: nothing answers there, so the
///   breaker opens at once;
/// - a builder error ([`is_builder`](reqwest::Error::is_builder): a URL `reqwest` cannot
///   send to) is excluded: the request never left, and it was the caller's;
/// - anything else (a reset connection, a malformed response, a redirect loop) is a failure.
fn transport(error: &reqwest::Error) -> Outcome {
    if error.is_timeout() {
        Outcome::Failure
    } else if error.is_connect() {
        Outcome::Fatal
    } else if error.is_builder() {
        Outcome::Excluded
    } else {
        Outcome::Failure
    }
}

impl Classify<Response, Error> for ResponseRules {
    fn classify(&self, result: &Result<Response, Error>) -> Outcome {
        match result {
            Ok(response) => self.0.outcome(response.status()),
            Err(error) => Self::error(error),
        }
    }

    fn open_for(&self, result: &Result<Response, Error>) -> Option<Duration> {
        let response = result.as_ref().ok()?;
        self.0
            .open_for_response(response.status(), response.headers())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lazybreaker::Rejected;

    fn respond(code: u16, retry_after: Option<&str>) -> Result<Response, Error> {
        let mut response = http::Response::builder().status(code);
        if let Some(value) = retry_after {
            response = response.header("retry-after", value);
        }
        Ok(Response::from(response.body("").unwrap()))
    }

    #[test]
    fn a_response_counts_by_its_status() {
        let rules = ResponseRules(StatusRules::new());
        assert_eq!(rules.classify(&respond(200, None)), Outcome::Success);
        assert_eq!(rules.classify(&respond(404, None)), Outcome::Excluded);
        assert_eq!(rules.classify(&respond(500, None)), Outcome::Failure);
        assert_eq!(rules.classify(&respond(503, Some("120"))), Outcome::Failure);
        assert_eq!(rules.open_for(&respond(503, Some("120"))), None);
    }

    #[test]
    fn retry_after_opens_for_its_time_when_honoured() {
        let rules = ResponseRules(StatusRules::new().honor_retry_after());
        let busy = respond(503, Some("120"));
        assert_eq!(rules.open_for(&busy), Some(Duration::from_secs(120)));
        assert_eq!(
            rules.open_for(&respond(429, Some("7"))),
            Some(Duration::from_secs(7))
        );
        assert_eq!(rules.open_for(&respond(500, Some("7"))), None);
        assert_eq!(rules.open_for(&respond(503, None)), None);
    }

    #[test]
    fn an_inner_middlewares_error_is_a_failure_unless_a_breaker_rejected() {
        let rules = ResponseRules(StatusRules::new());
        let other = Err(Error::middleware(std::io::Error::other("signing failed")));
        assert_eq!(rules.classify(&other), Outcome::Failure);
        let rejected = RejectedBy::new("inner", Rejected::TooManyRequests);
        let rejected = Err(Error::middleware(rejected));
        assert_eq!(rules.classify(&rejected), Outcome::Excluded);
    }
}
