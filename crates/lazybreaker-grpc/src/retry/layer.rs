//! [`RetryLayer`] and [`GrpcRetry`]: gRPC's retries (proposal A6) around a tonic channel.

use std::any::Any;
use std::error::Error as StdError;
use std::fmt;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use lazybreaker::door::BreakerSeam;
use lazybreaker::observe::Observer;
use lazybreaker::policy::TripPolicy;
use lazybreaker::retry::{Attempts, Cause, Next, TokenBucket};
use lazybreaker::Breaker;
use lazybreaker::ConfigError;
use lazybreaker::{Error, Rejected, RejectedBy};
use tonic::body::Body;
use tonic::{Code, ConnectError, Status, TimeoutExpired};
use tower_layer::Layer;
use tower_service::Service;

use super::config::{RetryPolicy, ServiceConfig};
use super::replay::{read_ahead, Read};
use super::watch::Committed;
use crate::reject::Rejection;
use crate::rules::{code_in, http_code, PUSHBACK};

type BoxError = Box<dyn StdError + Send + Sync>;

/// The largest request a call keeps to send again, by default: grpc-go's per-call retry
/// buffer (256 KiB).
pub const MAX_BUFFER: usize = 256 * 1024;

/// The header that tells the server how many attempts came before this one (A6).
pub(super) const PREVIOUS_ATTEMPTS: &str = "grpc-previous-rpc-attempts";

/// A tower layer that retries gRPC calls as a service config's `retryPolicy` says (gRPC's
/// proposal A6): [`GrpcRetry`] around a tonic `Channel`, or around a
/// [breaker layer](lazybreaker_tower::BreakerLayer) on one, so that every attempt goes
/// through the breaker.
///
/// A call is retried when all of these hold:
///
/// - its method has a `retryPolicy` ([`ServiceConfig::policy`]); the calls of other methods
///   pass through untouched;
/// - its request could be kept to send again: a body that is whole at once and within
///   [`max_buffer`](Self::max_buffer) bytes, which a unary or server-streaming call's one
///   message is (a client or bidirectional stream whose next message is not there yet is
///   sent once, never retried);
/// - the attempt's status is in `retryableStatusCodes`, and the server had not committed
///   the call: the status came without a message (a trailers-only response, what a server
///   sends for a handler's error), or as a transport error (a refused connection is
///   `UNAVAILABLE`, tonic's own timeout `CANCELLED`, as tonic's client maps them); a status
///   in the trailers, after response headers, is the call's answer;
/// - the attempt was not a breaker's rejection ([`AsStatus`](crate::AsStatus)'s answer, or
///   a [`FailFast`](lazybreaker_tower::FailFast) layer's error): a retry would meet the
///   same breaker ([`Cause::Rejected`]);
/// - the server's `grpc-retry-pushback-ms`, if it sent one, is a whole number of
///   milliseconds: the retry waits exactly that ([`Cause::Pushback`]); a negative or
///   malformed value says *do not retry*;
/// - the channel's retry throttling ([`ServiceConfig::throttling`]) allows it, after the
///   failure is recorded: a retryable status or a pushback takes a token, an `OK` gives
///   `tokenRatio` back (in the headers, or in the trailers of a committed call);
/// - the policy's [`Retry`](lazybreaker::retry::Retry) says so: attempts left, the wait
///   (its backoff's draw, or the pushback) ending before the call's deadline (the request's
///   `grpc-timeout`, or the method config's `timeout` if shorter), room in its budget.
///
/// Then it waits (`tokio::time::sleep`: a tokio runtime with its time driver) and sends the
/// request again, with `grpc-previous-rpc-attempts` and what is left of its `grpc-timeout`.
/// The caller gets the last attempt's answer.
///
/// Decisions are counted in the policy's [`Retry::stats`](lazybreaker::retry::Retry::stats),
/// calls refused by the throttling in [`throttled`](Self::throttled); with
/// [`count_on`](Self::count_on), in a breaker's totals too.
///
/// # Examples
///
/// ```
/// use lazybreaker::Breaker;
/// use lazybreaker_grpc as grpc;
/// use lazybreaker_tower::BreakerLayer;
/// use std::sync::Arc;
/// use tower::ServiceBuilder;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), lazybreaker::ConfigError> {
/// let retries = grpc::RetryLayer::from_service_config(r#"{
///   "methodConfig": [{
///     "name": [{"service": "echo.Echo"}],
///     "retryPolicy": {
///       "maxAttempts": 3,
///       "initialBackoff": "0.05s",
///       "maxBackoff": "0.5s",
///       "backoffMultiplier": 2,
///       "retryableStatusCodes": ["UNAVAILABLE"]
///     }
///   }],
///   "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
/// }"#)?;
/// let breaker = Arc::new(Breaker::builder().name("echo").build());
/// let channel = tonic::transport::Endpoint::from_static("http://127.0.0.1:50051").connect_lazy();
/// let service = ServiceBuilder::new()
///     .layer(retries.count_on(Arc::clone(&breaker))) // outside: each attempt is a call
///     .layer(
///         BreakerLayer::new(breaker)
///             .classify(grpc::status_classifier())
///             .on_rejected(grpc::AsStatus), // a rejection is never retried
///     )
///     .service(channel);
/// // `tonic::client::Grpc::new(service)`, or a generated client's `new(service)`.
/// # let _ = service;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RetryLayer {
    shared: Arc<Shared>,
}

/// What a layer and its services share.
struct Shared {
    config: ServiceConfig,
    breaker: Option<Arc<dyn BreakerSeam + Send + Sync>>,
    max_buffer: usize,
    throttled: AtomicU64,
}

impl RetryLayer {
    /// Retries as `config` says.
    pub fn new(config: ServiceConfig) -> Self {
        Self {
            shared: Arc::new(Shared {
                config,
                breaker: None,
                max_buffer: MAX_BUFFER,
                throttled: AtomicU64::new(0),
            }),
        }
    }

    /// Retries as the service config `json` says ([`ServiceConfig::from_json`]).
    ///
    /// # Errors
    ///
    /// [`ConfigError`] naming the path of the first value at fault.
    pub fn from_service_config(json: &str) -> Result<Self, ConfigError> {
        ServiceConfig::from_json(json).map(Self::new)
    }

    /// Counts each decision after a failed attempt in `breaker`'s totals too
    /// ([`Totals::retries`](lazybreaker::Totals::retries), `retries_budget_denied`,
    /// `retries_exhausted`): give it the breaker every attempt goes through (the layer's
    /// inner service is a [`BreakerLayer`](lazybreaker_tower::BreakerLayer)'s on it).
    #[must_use]
    pub fn count_on<P, O>(self, breaker: Arc<Breaker<P, O>>) -> Self
    where
        P: TripPolicy + 'static,
        O: Observer + 'static,
    {
        self.with(|shared| shared.breaker = Some(breaker))
    }

    /// The largest request (in bytes, encoded) a call keeps to send again
    /// ([`MAX_BUFFER`] by default): a larger one is sent once.
    #[must_use]
    pub fn max_buffer(self, bytes: usize) -> Self {
        self.with(|shared| shared.max_buffer = bytes)
    }

    /// The service config the layer retries by: its policies' [`stats`](lazybreaker::retry::Retry::stats),
    /// its throttling's tokens.
    pub fn config(&self) -> &ServiceConfig {
        &self.shared.config
    }

    /// Failed attempts not retried because the channel's retry throttling said no.
    pub fn throttled(&self) -> u64 {
        self.shared.throttled.load(Ordering::Relaxed)
    }

    fn with(self, f: impl FnOnce(&mut Shared)) -> Self {
        let mut shared = Arc::try_unwrap(self.shared).unwrap_or_else(|shared| Shared {
            config: shared.config.clone(),
            breaker: shared.breaker.clone(),
            max_buffer: shared.max_buffer,
            throttled: AtomicU64::new(shared.throttled.load(Ordering::Relaxed)),
        });
        f(&mut shared);
        Self {
            shared: Arc::new(shared),
        }
    }
}

impl fmt::Debug for RetryLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryLayer")
            .field("config", &self.shared.config)
            .field("counts_on_a_breaker", &self.shared.breaker.is_some())
            .field("max_buffer", &self.shared.max_buffer)
            .field("throttled", &self.throttled())
            .finish()
    }
}

impl<S> Layer<S> for RetryLayer {
    type Service = GrpcRetry<S>;

    fn layer(&self, inner: S) -> GrpcRetry<S> {
        GrpcRetry {
            inner,
            shared: Arc::clone(&self.shared),
        }
    }
}

/// The service of a [`RetryLayer`]: retries the calls of `S` (a tonic `Channel`, or a
/// breaker's service on one) as the layer's service config says.
#[derive(Clone)]
pub struct GrpcRetry<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S: fmt::Debug> fmt::Debug for GrpcRetry<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcRetry")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S> Service<Request<Body>> for GrpcRetry<S>
where
    S: Service<Request<Body>, Response = Response<Body>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Send + 'static,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Response<Body>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        // The ready service makes the first attempt; a clone stays for the next call.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(call(inner, Arc::clone(&self.shared), request))
    }
}

/// One call: its attempts, until one is the answer.
async fn call<S>(
    mut inner: S,
    shared: Arc<Shared>,
    request: Request<Body>,
) -> Result<Response<Body>, S::Error>
where
    S: Service<Request<Body>, Response = Response<Body>> + Clone,
    S::Error: 'static,
{
    let Some(policy) = shared.config.policy(request.uri().path()) else {
        return inner.call(request).await;
    };
    let throttle = shared.config.throttling();
    let (parts, body) = request.into_parts();
    let within = min_some(timeout_in(&parts.headers), policy.timeout());
    let mut attempts = policy.retry().start(within);
    let (kept, mut once) = match read_ahead(body, shared.max_buffer) {
        Read::Whole(kept) => (Some(kept), None),
        Read::Partial(body) => {
            attempts = attempts.retryable(false);
            (None, Some(body))
        }
    };
    let mut first = true;
    loop {
        let body = match (&kept, once.take()) {
            (Some(kept), _) => kept.body(),
            (None, Some(body)) => body,
            (None, None) => unreachable!("a call that is not kept is sent once"),
        };
        let mut request = Request::from_parts(parts.clone(), body);
        if !first {
            // Polled ready for the first attempt by the caller; again for each retry.
            poll_fn(|cx| inner.poll_ready(cx)).await?;
            retried(&mut request, &attempts, policy);
        }
        first = false;
        let mut result = inner.call(request).await;
        let cause = match judge(&mut result, policy, throttle) {
            Judged::Answer => return result,
            Judged::Throttled => {
                shared.throttled.fetch_add(1, Ordering::Relaxed);
                return result;
            }
            Judged::Failed(cause) => cause,
        };
        let next = policy.retry().next(&mut attempts, cause);
        if let Some(breaker) = &shared.breaker {
            breaker.count_retry(next);
        }
        match next {
            Next::Retry { after } => {
                drop(result);
                if !after.is_zero() {
                    tokio::time::sleep(after).await;
                }
            }
            Next::Stop(_) => return result,
        }
    }
}

/// A retry's request: the attempts before it, and what is left of the call's deadline.
fn retried(request: &mut Request<Body>, attempts: &Attempts, policy: &RetryPolicy) {
    let headers = request.headers_mut();
    headers.insert(PREVIOUS_ATTEMPTS, HeaderValue::from(attempts.made() - 1));
    if let Some(deadline) = attempts.deadline() {
        let left = deadline.saturating_sub(policy.retry().now());
        headers.insert("grpc-timeout", timeout_value(left));
    }
}

/// What an attempt's result says.
enum Judged {
    /// It is the call's answer: a success, a status not retried, a committed call, a
    /// rejection.
    Answer,
    /// A retryable failure, which the throttling does not let retry.
    Throttled,
    /// A failure the policy decides on.
    Failed(Cause),
}

/// How an attempt ended, as A6 (and grpc-go's order) reads it. A committed response with
/// a throttling gets its body watched for its `OK`.
fn judge<E: 'static>(
    result: &mut Result<Response<Body>, E>,
    policy: &RetryPolicy,
    throttle: Option<&Arc<TokenBucket>>,
) -> Judged {
    let (code, headers) = match result {
        Err(error) => match error_code(error) {
            Attempt::Rejected => return Judged::Failed(Cause::Rejected),
            Attempt::Status(code) => (code, None),
        },
        Ok(response) => {
            if response.extensions().get::<Rejection>().is_some() {
                return Judged::Failed(Cause::Rejected);
            }
            let code = match code_in(response.headers()) {
                Some(code) => code,
                None if response.status() == StatusCode::OK => {
                    // Committed: the status is in the trailers, and is the answer.
                    if let Some(bucket) = throttle {
                        let body = std::mem::take(response.body_mut());
                        *response.body_mut() = Body::new(Committed::new(body, Arc::clone(bucket)));
                    }
                    return Judged::Answer;
                }
                None => http_code(response.status()),
            };
            (code, Some(response.headers()))
        }
    };
    if code == Code::Ok {
        if let Some(bucket) = throttle {
            bucket.record_success();
        }
        return Judged::Answer;
    }
    let pushback = headers.and_then(pushback_in);
    if pushback == Some(Pushback::Stop) {
        if let Some(bucket) = throttle {
            bucket.record_failure();
        }
        return Judged::Failed(Cause::Pushback(None));
    }
    if !policy.retries(code) {
        return Judged::Answer;
    }
    if let Some(bucket) = throttle {
        if !bucket.record_failure() {
            return Judged::Throttled;
        }
    }
    Judged::Failed(match pushback {
        Some(Pushback::After(wait)) => Cause::Pushback(Some(wait)),
        _ => Cause::Failure,
    })
}

/// What a server's `grpc-retry-pushback-ms` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pushback {
    /// Retry after exactly this long.
    After(Duration),
    /// Do not retry: a negative or malformed value.
    Stop,
}

/// The pushback in `headers`, if there is one.
pub(super) fn pushback_in(headers: &HeaderMap) -> Option<Pushback> {
    let value = headers.get(PUSHBACK)?;
    let text = value.to_str().map(str::trim).unwrap_or("");
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Some(Pushback::Stop);
    }
    let ms = text.parse().unwrap_or(u64::MAX);
    Some(Pushback::After(Duration::from_millis(ms)))
}

/// What an attempt that ended in a transport error was.
pub(super) enum Attempt {
    /// A breaker's rejection: never sent.
    Rejected,
    /// The status tonic's client makes of it.
    Status(Code),
}

/// The status a transport error is, as tonic's client maps it (a `Status` among its causes
/// by its code, a failed connection `UNAVAILABLE`, tonic's timeout `CANCELLED`, anything
/// else `UNKNOWN`), or a breaker's rejection (a [`FailFast`](lazybreaker_tower::FailFast)
/// layer's error on a `Channel` or a `BoxError`, or a rejection among the causes).
pub(super) fn error_code<E: 'static>(error: &E) -> Attempt {
    let any: &dyn Any = error;
    macro_rules! layer {
        ($($inner:ty, $rejected:ty);*) => {$(
            if let Some(e) = any.downcast_ref::<Error<$inner, $rejected>>() {
                return match e {
                    Error::Rejected(_) => Attempt::Rejected,
                    Error::Inner(inner) => causes_code(inner_error(inner)),
                };
            }
        )*};
    }
    layer!(
        tonic::transport::Error, Rejected;
        tonic::transport::Error, RejectedBy;
        BoxError, Rejected;
        BoxError, RejectedBy
    );
    if let Some(e) = any.downcast_ref::<tonic::transport::Error>() {
        return causes_code(e);
    }
    if let Some(e) = any.downcast_ref::<Status>() {
        return causes_code(e);
    }
    if let Some(e) = any.downcast_ref::<BoxError>() {
        return causes_code(e.as_ref());
    }
    if let Some(e) = any.downcast_ref::<std::io::Error>() {
        return causes_code(e);
    }
    Attempt::Status(Code::Unknown)
}

/// An inner error of a layer's [`Error`] (a `Channel`'s, or a `BoxError`), as an error to
/// walk.
fn inner_error(inner: &dyn Any) -> &(dyn StdError + 'static) {
    if let Some(boxed) = inner.downcast_ref::<BoxError>() {
        return boxed.as_ref();
    }
    match inner.downcast_ref::<tonic::transport::Error>() {
        Some(e) => e,
        None => &Unknown,
    }
}

/// An error of no type [`error_code`] knows.
#[derive(Debug)]
struct Unknown;

impl fmt::Display for Unknown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("unknown")
    }
}

impl StdError for Unknown {}

/// [`error_code`] over an error's causes.
fn causes_code(error: &(dyn StdError + 'static)) -> Attempt {
    for cause in lazybreaker::classify::causes(error) {
        if cause.is::<Rejected>() || cause.is::<RejectedBy>() {
            return Attempt::Rejected;
        }
        if let Some(status) = cause.downcast_ref::<Status>() {
            return Attempt::Status(status.code());
        }
        if cause.is::<TimeoutExpired>() {
            return Attempt::Status(Code::Cancelled);
        }
        if cause.is::<ConnectError>() || cause.is::<std::io::Error>() {
            return Attempt::Status(Code::Unavailable);
        }
        if let Some(layer) = cause.downcast_ref::<Error<BoxError>>() {
            return match layer {
                Error::Rejected(_) => Attempt::Rejected,
                Error::Inner(inner) => causes_code(inner.as_ref()),
            };
        }
    }
    Attempt::Status(Code::Unknown)
}

/// The deadline a request's `grpc-timeout` gives (`100m`, `5S`: at most eight digits and a
/// unit, `H`, `M`, `S`, `m`, `u` or `n`).
pub(super) fn timeout_in(headers: &HeaderMap) -> Option<Duration> {
    let text = headers.get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = text.split_at_checked(text.len().checked_sub(1)?)?;
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// `left` as a `grpc-timeout`: whole milliseconds (at least 1), or seconds past eight
/// digits of them.
pub(super) fn timeout_value(left: Duration) -> HeaderValue {
    let ms = left.as_millis().max(1);
    let text = if ms < 100_000_000 {
        format!("{ms}m")
    } else {
        format!("{}S", left.as_secs().min(99_999_999))
    };
    HeaderValue::from_str(&text).expect("digits and a unit")
}

pub(super) fn min_some(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
