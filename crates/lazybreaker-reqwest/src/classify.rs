//! [`ResponseRules`]: how a `reqwest` call counts, for the middlewares and for any call of
//! your own (a [`Pool::call`](lazybreaker::pool::Pool::call), an
//! [`execute_async_with`](lazybreaker::Breaker::execute_async_with)): the
//! [`StatusRules`] of a response and this module's reading of `reqwest`'s errors.

use std::time::Duration;

use http::StatusCode;
use reqwest::Response;

use lazybreaker::classify::Classify;
use lazybreaker::http::StatusRules;
use lazybreaker::policy::Outcome;
use lazybreaker::RejectedBy;

/// The classifier of `reqwest` calls, the one [`BreakerMiddleware`](super::BreakerMiddleware)
/// and [`RetryMiddleware`](super::RetryMiddleware) use: a [`Classify`] of
/// `Result<reqwest::Response, reqwest::Error>` (a plain client's `send()`) and of
/// `Result<reqwest::Response, reqwest_middleware::Error>` (a middleware client's).
///
/// | result | [`classify`](Classify::classify) | also |
/// |---|---|---|
/// | a response | by its status, as the [`StatusRules`] say: 5xx, 429, 408 fail, other 4xx are excluded, the rest succeed | |
/// | a 503 or 429 with `Retry-After` | a failure | [`overloaded`](Classify::overloaded) (a pool does not isolate the endpoint for it by default); with [`honor_retry_after`](Self::honor_retry_after), [`open_for`](Classify::open_for) the header's time |
/// | a `reqwest::Error` | as [`transport`](Self::transport) says: a timeout fails, a connect error is [`Fatal`](Outcome::Fatal), a builder error is excluded, anything else fails | |
/// | an inner middleware's error | as [`error`](Self::error) says | |
///
/// Build it from [`StatusRules`] (`ResponseRules::from(rules)`), or with the same setters.
///
/// # Examples
///
/// A [`Pool`](lazybreaker::pool::Pool) of upstreams called with a plain `reqwest::Client`,
/// each call counted as the middleware would count it:
///
/// ```
/// use lazybreaker::pool::Pool;
/// use lazybreaker::{Breaker, Error};
/// use lazybreaker_reqwest::ResponseRules;
/// use std::net::SocketAddr;
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
///
/// // An upstream whose `/fail` answers 500.
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
/// let addr = listener.local_addr().unwrap();
/// let app = axum::Router::new()
///     .route("/", axum::routing::get(|| async { "hello" }))
///     .route("/fail", axum::routing::get(|| async { axum::http::StatusCode::INTERNAL_SERVER_ERROR }));
/// tokio::spawn(async move { axum::serve(listener, app).await });
///
/// let pool = Pool::new(|_: &SocketAddr| Breaker::builder());
/// pool.set([addr]);
/// let client = reqwest::Client::builder()
///     .timeout(std::time::Duration::from_secs(5)) // inside the call: a hang is a failure
///     .no_proxy()
///     .build()
///     .unwrap();
/// let rules = ResponseRules::new().honor_retry_after();
///
/// let ok = pool
///     .call(|addr| client.get(format!("http://{addr}/")).send(), rules)
///     .await
///     .unwrap();
/// assert_eq!(ok.status(), 200);
/// // The response comes back as it is: only the pool's verdict differs.
/// let failed = pool
///     .call(|addr| client.get(format!("http://{addr}/fail")).send(), rules)
///     .await
///     .unwrap();
/// assert_eq!(failed.status(), 500);
///
/// let totals = pool.breaker(&addr).unwrap().totals();
/// assert_eq!((totals.successes, totals.failures), (1, 1));
///
/// // No endpoint left: a rejection, and no request.
/// pool.set(Vec::<SocketAddr>::new());
/// let none = pool.call(|addr| client.get(format!("http://{addr}/")).send(), rules).await;
/// assert!(matches!(none, Err(Error::Rejected(_))));
/// # });
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ResponseRules {
    rules: StatusRules,
}

impl ResponseRules {
    /// The default rules ([`StatusRules::new`]): 5xx, 429 and 408 fail, `Retry-After` is not
    /// honoured.
    pub const fn new() -> Self {
        Self::from_rules(StatusRules::new())
    }

    /// Responses counted by `rules`; errors as [`transport`](Self::transport) and
    /// [`error`](Self::error) say.
    pub const fn from_rules(rules: StatusRules) -> Self {
        Self { rules }
    }

    /// The [`StatusRules`] responses count by.
    pub const fn status_rules(&self) -> StatusRules {
        self.rules
    }

    /// How a 429 Too Many Requests counts ([`StatusRules::too_many_requests`]).
    #[must_use]
    pub const fn too_many_requests(self, outcome: Outcome) -> Self {
        Self::from_rules(self.rules.too_many_requests(outcome))
    }

    /// How a 408 Request Timeout counts ([`StatusRules::request_timeout`]).
    #[must_use]
    pub const fn request_timeout(self, outcome: Outcome) -> Self {
        Self::from_rules(self.rules.request_timeout(outcome))
    }

    /// Honours the upstream's `Retry-After` on a 503 or a 429 that counts as a failure
    /// ([`StatusRules::honor_retry_after`]): the breaker opens at once for as long as the
    /// header says.
    #[must_use]
    pub const fn honor_retry_after(self) -> Self {
        Self::from_rules(self.rules.honor_retry_after())
    }

    /// How a response counts: by its status, as the [`StatusRules`] say.
    pub fn response(&self, response: &Response) -> Outcome {
        self.rules.outcome(response.status())
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
    pub fn transport(&self, error: &reqwest::Error) -> Outcome {
        transport(error)
    }

    /// How an error from a `reqwest_middleware` client (or the rest of a middleware chain)
    /// counts:
    ///
    /// - `reqwest`'s own ([`Error::Reqwest`](reqwest_middleware::Error::Reqwest)): as
    ///   [`transport`](Self::transport) says;
    /// - an inner middleware's ([`Error::Middleware`](reqwest_middleware::Error::Middleware)):
    ///   the first `reqwest::Error` among its causes counts as [`transport`](Self::transport)
    ///   says (a retrying middleware's last attempt, say); another breaker's [`RejectedBy`]
    ///   is excluded (the request never left, and that breaker counted it already); any other
    ///   error is a failure (the call did not get a response, and nothing says it was the
    ///   caller's fault).
    pub fn error(&self, error: &reqwest_middleware::Error) -> Outcome {
        match error {
            reqwest_middleware::Error::Reqwest(e) => transport(e),
            reqwest_middleware::Error::Middleware(e) => {
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

    /// How long a response asks the breaker to stay open
    /// ([`StatusRules::open_for_response`]): its `Retry-After` on a failing 503 or 429, when
    /// the rules honour it.
    fn open_for_response(&self, response: &Response) -> Option<Duration> {
        self.rules
            .open_for_response(response.status(), response.headers())
    }
}

impl From<StatusRules> for ResponseRules {
    fn from(rules: StatusRules) -> Self {
        Self::from_rules(rules)
    }
}

/// A 503 Service Unavailable or a 429 Too Many Requests with a `Retry-After` header: the
/// server is shedding load (as [`StatusRules`]' [`Classify::overloaded`] says of an
/// `http::Response`).
fn overloaded(response: &Response) -> bool {
    matches!(
        response.status(),
        StatusCode::SERVICE_UNAVAILABLE | StatusCode::TOO_MANY_REQUESTS
    ) && response.headers().contains_key(http::header::RETRY_AFTER)
}

/// How a `reqwest::Error` counts: see [`ResponseRules::transport`].
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

/// A plain client's call (`reqwest::Client::send`).
impl Classify<Response, reqwest::Error> for ResponseRules {
    fn classify(&self, result: &Result<Response, reqwest::Error>) -> Outcome {
        match result {
            Ok(response) => self.response(response),
            Err(error) => transport(error),
        }
    }

    fn open_for(&self, result: &Result<Response, reqwest::Error>) -> Option<Duration> {
        self.open_for_response(result.as_ref().ok()?)
    }

    fn overloaded(&self, result: &Result<Response, reqwest::Error>) -> bool {
        result.as_ref().is_ok_and(overloaded)
    }
}

/// A middleware client's call (`reqwest_middleware::ClientWithMiddleware`), or the rest of
/// a middleware chain.
impl Classify<Response, reqwest_middleware::Error> for ResponseRules {
    fn classify(&self, result: &Result<Response, reqwest_middleware::Error>) -> Outcome {
        match result {
            Ok(response) => self.response(response),
            Err(error) => self.error(error),
        }
    }

    fn open_for(&self, result: &Result<Response, reqwest_middleware::Error>) -> Option<Duration> {
        self.open_for_response(result.as_ref().ok()?)
    }

    fn overloaded(&self, result: &Result<Response, reqwest_middleware::Error>) -> bool {
        result.as_ref().is_ok_and(overloaded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lazybreaker::Rejected;
    use reqwest_middleware::Error;

    fn respond(code: u16, retry_after: Option<&str>) -> Result<Response, Error> {
        let mut response = http::Response::builder().status(code);
        if let Some(value) = retry_after {
            response = response.header("retry-after", value);
        }
        Ok(Response::from(response.body("").unwrap()))
    }

    #[test]
    fn a_response_counts_by_its_status() {
        let rules = ResponseRules::from_rules(StatusRules::new());
        assert_eq!(rules.classify(&respond(200, None)), Outcome::Success);
        assert_eq!(rules.classify(&respond(404, None)), Outcome::Excluded);
        assert_eq!(rules.classify(&respond(500, None)), Outcome::Failure);
        assert_eq!(rules.classify(&respond(503, Some("120"))), Outcome::Failure);
        assert_eq!(rules.open_for(&respond(503, Some("120"))), None);
    }

    #[test]
    fn retry_after_opens_for_its_time_when_honoured() {
        let rules = ResponseRules::from_rules(StatusRules::new().honor_retry_after());
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
        let rules = ResponseRules::from_rules(StatusRules::new());
        let other = Err(Error::middleware(std::io::Error::other("signing failed")));
        assert_eq!(rules.classify(&other), Outcome::Failure);
        let rejected = RejectedBy::new("inner", Rejected::TooManyRequests);
        let rejected = Err(Error::middleware(rejected));
        assert_eq!(rules.classify(&rejected), Outcome::Excluded);
    }

    #[test]
    fn a_503_or_429_with_retry_after_is_overloaded_whatever_the_rules() {
        for rules in [
            ResponseRules::new(),
            ResponseRules::new().honor_retry_after(),
        ] {
            assert!(rules.overloaded(&respond(503, Some("120"))));
            assert!(rules.overloaded(&respond(429, Some("1"))));
            assert!(!rules.overloaded(&respond(503, None)));
            assert!(!rules.overloaded(&respond(500, Some("120"))));
            let other = Err(Error::middleware(std::io::Error::other("signing failed")));
            assert!(!rules.overloaded(&other));
        }
    }

    #[test]
    fn the_setters_are_the_status_rules_ones() {
        assert_eq!(ResponseRules::default(), ResponseRules::new());
        assert_eq!(ResponseRules::new().status_rules(), StatusRules::new());
        let rules = ResponseRules::new()
            .too_many_requests(Outcome::Excluded)
            .request_timeout(Outcome::Success)
            .honor_retry_after();
        let status = StatusRules::new()
            .too_many_requests(Outcome::Excluded)
            .request_timeout(Outcome::Success)
            .honor_retry_after();
        assert_eq!(rules, ResponseRules::from(status));
        assert_eq!(rules.classify(&respond(429, None)), Outcome::Excluded);
        assert_eq!(rules.classify(&respond(408, None)), Outcome::Success);
    }
}
