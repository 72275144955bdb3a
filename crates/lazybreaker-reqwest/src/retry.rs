//! [`RetryMiddleware`]: retries on a [`Retry`] policy, with the breakers' verdicts.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::{header, Extensions, Method, StatusCode};
use reqwest::{Request, Response};
use reqwest_middleware::{Middleware, Next, Result};

use super::classify::ResponseRules;
use super::rejection::rejection;
use super::verdict::Verdict;
use lazybreaker::classify::Classify;
use lazybreaker::http::{retry_after, StatusRules};
use lazybreaker::policy::Outcome;
use lazybreaker::retry::{self, Cause, Retry};

/// The methods retried by default: the safe and idempotent ones (RFC 9110, 9.2.2).
const IDEMPOTENT: [Method; 6] = [
    Method::GET,
    Method::HEAD,
    Method::OPTIONS,
    Method::TRACE,
    Method::PUT,
    Method::DELETE,
];

/// A [`reqwest_middleware::Middleware`] that retries a failed request on a [`Retry`]
/// policy: at most its attempts, each retry paid for in its
/// [`RetryBudget`](lazybreaker::retry::RetryBudget), after its backoff (waited with
/// `tokio::time::sleep`), never past the call's deadline.
///
/// Add it **before** the [`BreakerMiddleware`](super::BreakerMiddleware) (it then runs
/// around it), and the two share the breaker's verdicts:
///
/// - **A rejection is never retried.** A request the breaker rejected
///   ([`rejection`](super::rejection)) would be rejected again: it is returned at once
///   ([`Cause::Rejected`]). So is an attempt after which its breaker is open (the failure
///   that tripped it, a `Retry-After` it honours): a retry would meet the rejection.
/// - **Retried:** what the breaker's rules called a failure (a 5xx, a 408, a timeout, a
///   refused connection, a reset one: see the [crate documentation](crate) for the table),
///   and a 503 or a 429, whose `Retry-After` (delta-seconds or an HTTP date) the retry waits
///   at least, and is not made if that reaches past the deadline ([`Cause::Overload`]).
///   Anything else (a success, a 404, a builder error) is returned as it is.
/// - **Counted.** Each decision is counted in the policy's [`Retry::stats`], and, after an
///   attempt through a breaker, in that breaker's [`Totals`](lazybreaker::Totals)
///   (`retries`, `retries_budget_denied`, `retries_exhausted`): the breaker middleware hands
///   the breaker that counted the attempt to this one, whatever its key.
///
/// Without a breaker middleware inside it, a result counts by this middleware's own
/// [`rules`](Self::rules) (the same [`StatusRules::new`] by default), and the breakers'
/// open periods are not known to it.
///
/// Only requests that may run twice are retried: those of a safe and idempotent method
/// (GET, HEAD, OPTIONS, TRACE, PUT, DELETE; see [`methods`](Self::methods)), whose body can
/// be copied ([`Request::try_clone`]: not a stream). Any other request is sent once, and
/// its result returned as it is.
///
/// # The deadline
///
/// The call's deadline is the shorter of [`deadline`](Self::deadline) and the request's own
/// timeout (`client.get(url).timeout(d)`), measured from when the middleware gets the
/// request. With the request's own timeout, each retry's timeout is what is left of it; the
/// client's timeout (`Client::builder().timeout(d)`) is each attempt's own, and is left
/// alone. A retry is made only if its wait (and the policy's
/// [`min_attempt_time`](Retry::min_attempt_time)) ends before the deadline.
///
/// # Examples
///
/// The recommended chain: the retries outermost, then a breaker per host.
///
/// ```no_run
/// use lazybreaker::retry::{Retry, RetryBudget};
/// use lazybreaker::{Breaker, Registry};
/// use lazybreaker_reqwest::{BreakerMiddleware, RetryMiddleware};
/// use reqwest_middleware::ClientBuilder;
/// use std::sync::Arc;
/// use std::time::Duration;
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
///
/// let registry = Arc::new(Registry::new(|_host: &String| {
///     Breaker::builder().timeout(Duration::from_secs(30))
/// }));
/// let retry = Retry::new(3).unwrap().budget(RetryBudget::new(0.2).unwrap());
/// let http = reqwest::Client::builder().timeout(Duration::from_secs(2)).build().unwrap();
/// let client = ClientBuilder::new(http)
///     .with(RetryMiddleware::new(retry.clone()).deadline(Duration::from_secs(5)))
///     .with(BreakerMiddleware::new(Arc::clone(&registry)))
///     .build();
///
/// let response = client.get("http://127.0.0.1:8080/items").send().await.unwrap();
/// println!("{}: {:?}", response.status(), retry.stats());
/// # });
/// ```
#[derive(Clone)]
pub struct RetryMiddleware {
    retry: Retry,
    methods: Arc<[Method]>,
    deadline: Option<Duration>,
    rules: StatusRules,
}

impl RetryMiddleware {
    /// A middleware that retries on `retry` (its attempts, budget and backoff): the safe and
    /// idempotent methods, with no deadline but the request's own timeout, results counted
    /// by the breaker middleware inside it (else by [`StatusRules::new`]).
    pub fn new(retry: Retry) -> Self {
        Self {
            retry,
            methods: Arc::new(IDEMPOTENT),
            deadline: None,
            rules: StatusRules::new(),
        }
    }

    /// The methods whose requests may be retried (GET, HEAD, OPTIONS, TRACE, PUT and
    /// DELETE by default): add POST only for an API whose POSTs are idempotent (an
    /// idempotency key, say); none at all never retries.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::retry::Retry;
    /// use lazybreaker_reqwest::RetryMiddleware;
    /// use reqwest::Method;
    ///
    /// let middleware = RetryMiddleware::new(Retry::new(3)?)
    ///     .methods([Method::GET, Method::HEAD, Method::POST]);
    /// # drop(middleware);
    /// # Ok::<(), lazybreaker::ConfigError>(())
    /// ```
    #[must_use]
    pub fn methods<I: IntoIterator<Item = Method>>(mut self, methods: I) -> Self {
        self.methods = methods.into_iter().collect();
        self
    }

    /// Each call's deadline, from when the middleware gets its request (none by default:
    /// only the request's own timeout, if it has one). No retry is made whose wait reaches
    /// past it.
    #[must_use]
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// How a result counts where no [`BreakerMiddleware`](super::BreakerMiddleware) inside
    /// this one said ([`StatusRules::new`] by default: give it the breaker middleware's
    /// rules when it has its own).
    #[must_use]
    pub fn rules(mut self, rules: StatusRules) -> Self {
        self.rules = rules;
        self
    }

    /// The policy: its [`stats`](Retry::stats) count this middleware's decisions.
    pub fn policy(&self) -> &Retry {
        &self.retry
    }

    /// Why the attempt that gave `result` failed, if a retry can help: `None` returns it.
    fn cause(&self, result: &Result<Response>, verdict: &Verdict) -> Option<Cause> {
        match result {
            Err(error) if rejection(error).is_some() => return Some(Cause::Rejected),
            Ok(response) => {
                if let Some(cause) = overload(response) {
                    return Some(cause);
                }
            }
            Err(_) => {}
        }
        let outcome = verdict
            .outcome
            .unwrap_or_else(|| ResponseRules::from_rules(self.rules).classify(result));
        if !matches!(outcome, Outcome::Failure | Outcome::Fatal) {
            return None;
        }
        Some(Cause::Failure)
    }

    /// The call's deadline from now: the shorter of the middleware's and the request's own
    /// timeout.
    fn within(&self, request: &Request) -> Option<Duration> {
        match (self.deadline, request.timeout().copied()) {
            (Some(mine), Some(its)) => Some(mine.min(its)),
            (mine, its) => mine.or(its),
        }
    }
}

/// A 503 or a 429: the server is overloaded, and its `Retry-After` (delta-seconds, or an
/// HTTP date measured from the system's clock) is the least wait.
fn overload(response: &Response) -> Option<Cause> {
    if !matches!(
        response.status(),
        StatusCode::SERVICE_UNAVAILABLE | StatusCode::TOO_MANY_REQUESTS
    ) {
        return None;
    }
    let retry_after = response
        .headers()
        .get(header::RETRY_AFTER)
        .and_then(|value| retry_after(value, SystemTime::now()));
    Some(Cause::Overload { retry_after })
}

#[async_trait::async_trait]
impl Middleware for RetryMiddleware {
    async fn handle(
        &self,
        req: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> Result<Response> {
        let started = tokio::time::Instant::now();
        let within = self.within(&req);
        let own_timeout = req.timeout().is_some();
        // The copy each retry is made from; none for a request that must not run twice.
        let mut spare = if self.methods.contains(req.method()) {
            req.try_clone()
        } else {
            None
        };
        let mut attempts = self.retry.start(within).retryable(spare.is_some());
        let mut request = req;
        loop {
            Verdict::ask(extensions);
            let result = next.clone().run(request, extensions).await;
            let verdict = Verdict::take(extensions);
            let cause = match self.cause(&result, &verdict) {
                // The attempt tripped its breaker: a retry would be rejected.
                Some(Cause::Failure | Cause::Overload { .. })
                    if verdict
                        .breaker
                        .as_ref()
                        .is_some_and(|b| b.peek_open().is_some()) =>
                {
                    Cause::Rejected
                }
                Some(cause) => cause,
                None => return result,
            };
            let decision = self.retry.next(&mut attempts, cause);
            if let Some(breaker) = &verdict.breaker {
                breaker.count_retry(decision);
            }
            let retry::Next::Retry { after } = decision else {
                return result;
            };
            let Some(copy) = spare.take() else {
                return result; // unreachable: a call without a copy is not retryable
            };
            drop(result);
            if !after.is_zero() {
                tokio::time::sleep(after).await;
            }
            spare = copy.try_clone();
            attempts = attempts.retryable(spare.is_some());
            request = copy;
            if let (true, Some(within)) = (own_timeout, within) {
                *request.timeout_mut() = Some(within.saturating_sub(started.elapsed()));
            }
        }
    }
}

impl fmt::Debug for RetryMiddleware {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryMiddleware")
            .field("retry", &self.retry)
            .field("methods", &self.methods)
            .field("deadline", &self.deadline)
            .field("rules", &self.rules)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lazybreaker::{Rejected, RejectedBy};
    use reqwest_middleware::Error;

    fn respond(code: u16, retry_after: Option<&str>) -> Result<Response> {
        let mut response = http::Response::builder().status(code);
        if let Some(value) = retry_after {
            response = response.header("retry-after", value);
        }
        Ok(Response::from(response.body("").unwrap()))
    }

    fn middleware() -> RetryMiddleware {
        RetryMiddleware::new(Retry::new(3).unwrap())
    }

    fn cause(result: &Result<Response>) -> Option<Cause> {
        middleware().cause(result, &Verdict::default())
    }

    #[test]
    fn overload_reads_seconds_and_dates() {
        let overload = |retry_after| Some(Cause::Overload { retry_after });
        let seconds = Some(Duration::from_secs(120));
        assert_eq!(cause(&respond(503, Some("120"))), overload(seconds));
        assert_eq!(cause(&respond(429, Some("120"))), overload(seconds));
        assert_eq!(cause(&respond(503, None)), overload(None));
        assert_eq!(cause(&respond(503, Some("soon"))), overload(None));
        let past = Some("Wed, 21 Oct 2015 07:28:00 GMT");
        assert_eq!(cause(&respond(429, past)), overload(None));
        let Some(Cause::Overload {
            retry_after: Some(wait),
        }) = cause(&respond(503, Some("Thu, 01 Jan 2099 00:00:00 GMT")))
        else {
            panic!("a date ahead is a wait");
        };
        assert!(wait > Duration::from_secs(365 * 24 * 3600), "{wait:?}");
    }

    #[test]
    fn failures_are_retried_and_the_rest_returned() {
        assert_eq!(cause(&respond(500, Some("120"))), Some(Cause::Failure));
        assert_eq!(cause(&respond(408, None)), Some(Cause::Failure));
        assert_eq!(cause(&respond(200, None)), None);
        assert_eq!(cause(&respond(404, None)), None);
        let other = Err(Error::middleware(std::io::Error::other("signing failed")));
        assert_eq!(cause(&other), Some(Cause::Failure));
        let rejected = RejectedBy::new("host:80", Rejected::TooManyRequests);
        assert_eq!(
            cause(&Err(Error::middleware(rejected))),
            Some(Cause::Rejected)
        );
    }

    #[test]
    fn the_breakers_verdict_comes_first() {
        let excluded = Verdict {
            outcome: Some(Outcome::Excluded),
            breaker: None,
        };
        assert_eq!(middleware().cause(&respond(500, None), &excluded), None);
        let failed = Verdict {
            outcome: Some(Outcome::Failure),
            breaker: None,
        };
        assert_eq!(
            middleware().cause(&respond(404, None), &failed),
            Some(Cause::Failure)
        );
        // A 503 or a 429 is an overload whatever the verdict.
        assert_eq!(
            middleware().cause(&respond(429, None), &excluded),
            Some(Cause::Overload { retry_after: None })
        );
    }

    #[test]
    fn the_deadline_is_the_shorter_one() {
        let request = |timeout: Option<u64>| {
            let mut request = Request::new(Method::GET, "http://host/".parse().unwrap());
            *request.timeout_mut() = timeout.map(Duration::from_secs);
            request
        };
        let secs = |s| Some(Duration::from_secs(s));
        assert_eq!(middleware().within(&request(None)), None);
        assert_eq!(middleware().within(&request(Some(2))), secs(2));
        let five = middleware().deadline(Duration::from_secs(5));
        assert_eq!(five.within(&request(None)), secs(5));
        assert_eq!(five.within(&request(Some(2))), secs(2));
        assert_eq!(five.within(&request(Some(9))), secs(5));
    }
}
