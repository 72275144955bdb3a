//! [`HedgeLayer`] and [`GrpcHedge`]: gRPC's hedging (proposal A6) around a tonic channel.

use std::fmt;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{HeaderValue, Request, Response, StatusCode};
use lazybreaker::retry::{Next, TokenBucket};
use lazybreaker::ConfigError;
use tokio::time::{Instant, Sleep};
use tonic::body::Body;
use tonic::Code;
use tower_layer::Layer;
use tower_service::Service;

use super::config::{HedgingPolicy, ServiceConfig};
use super::layer::{
    error_code, min_some, pushback_in, timeout_in, timeout_value, Attempt, Pushback, MAX_BUFFER,
    PREVIOUS_ATTEMPTS,
};
use super::replay::{read_ahead, Read};
use super::watch::Committed;
use crate::reject::Rejection;
use crate::rules::{code_in, http_code};

/// A tower layer that hedges gRPC calls as a service config's `hedgingPolicy` says (gRPC's
/// proposal A6): [`GrpcHedge`] around a tonic `Channel`, or around a
/// [breaker layer](lazybreaker_tower::BreakerLayer) on one, so that every attempt goes
/// through the breaker.
///
/// A unary call of a method with a `hedgingPolicy` ([`ServiceConfig::hedging`]), whose
/// request is whole at once and within [`max_buffer`](Self::max_buffer) bytes, is sent
/// again, through the same service polled ready, each time `hedgingDelay` passes without
/// an answer (a delay of `0s` sends every attempt at once), at most `maxAttempts` attempts
/// in all, while:
///
/// - the policy's [`Hedge`](lazybreaker::retry::Hedge) pays for it
///   ([`Hedge::next_hedge`](lazybreaker::retry::Hedge::next_hedge): its budget, and the
///   call's deadline, the request's `grpc-timeout` or the method config's `timeout` if
///   shorter);
/// - the channel's retry throttling ([`ServiceConfig::throttling`]) holds more than half its
///   tokens (the same tokens as the retries': a non-fatal status takes one, an `OK` gives
///   `tokenRatio` back);
/// - no attempt was a breaker's rejection ([`AsStatus`](crate::AsStatus)'s answer, or a
///   [`FailFast`](lazybreaker_tower::FailFast) layer's error), and no server asked for no
///   more (`grpc-retry-pushback-ms` negative or malformed).
///
/// Each attempt's answer:
///
/// - `OK`, or a status not in `nonFatalStatusCodes` (fatal), or a committed response (its
///   status in the trailers): the call's answer; the other attempts are dropped
///   (cancelled);
/// - a non-fatal status: the next hedge goes at once, or after the server's
///   `grpc-retry-pushback-ms` if it sent a whole number of milliseconds; with every
///   attempt answered non-fatally and none left to send, the last one is the call's answer.
///
/// Hedges carry `grpc-previous-rpc-attempts` and what is left of the call's `grpc-timeout`.
/// Calls of other methods, and requests that cannot be kept (a client stream), pass
/// through once. Waits on tokio's timer. Counted in each policy's
/// [`Hedge::stats`](lazybreaker::retry::Hedge::stats), and here: hedges the throttling
/// refused ([`throttled`](Self::throttled)), calls a hedge answered ([`won`](Self::won)),
/// attempts dropped ([`cancelled`](Self::cancelled)).
///
/// # Examples
///
/// ```
/// use lazybreaker::Breaker;
/// use lazybreaker_grpc as grpc;
/// use lazybreaker_tower::BreakerLayer;
/// use std::sync::Arc;
/// use std::time::Duration;
/// use tower::ServiceBuilder;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), lazybreaker::ConfigError> {
/// let hedges = grpc::HedgeLayer::from_service_config(r#"{
///   "methodConfig": [{
///     "name": [{"service": "echo.Echo", "method": "Get"}],
///     "hedgingPolicy": {
///       "maxAttempts": 3,
///       "hedgingDelay": "0.05s",
///       "nonFatalStatusCodes": ["UNAVAILABLE"]
///     }
///   }],
///   "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
/// }"#)?;
/// let hedge = hedges.config().hedging("/echo.Echo/Get").unwrap().hedge();
/// assert_eq!(hedge.delay(), Some(Duration::from_millis(50)));
///
/// let breaker = Arc::new(Breaker::builder().name("echo").build());
/// let channel = tonic::transport::Endpoint::from_static("http://127.0.0.1:50051").connect_lazy();
/// let service = ServiceBuilder::new()
///     .layer(hedges) // outside: each attempt is a call of the breaker's
///     .layer(
///         BreakerLayer::new(breaker)
///             .classify(grpc::status_classifier())
///             .on_rejected(grpc::AsStatus), // a rejection is never hedged
///     )
///     .service(channel);
/// // `tonic::client::Grpc::new(service)`, or a generated client's `new(service)`.
/// # let _ = service;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct HedgeLayer {
    shared: Arc<Shared>,
}

/// What a layer and its services share.
struct Shared {
    config: ServiceConfig,
    max_buffer: usize,
    throttled: AtomicU64,
    won: AtomicU64,
    cancelled: AtomicU64,
}

impl HedgeLayer {
    /// Hedges as `config` says.
    pub fn new(config: ServiceConfig) -> Self {
        Self {
            shared: Arc::new(Shared {
                config,
                max_buffer: MAX_BUFFER,
                throttled: AtomicU64::new(0),
                won: AtomicU64::new(0),
                cancelled: AtomicU64::new(0),
            }),
        }
    }

    /// Hedges as the service config `json` says ([`ServiceConfig::from_json`]).
    ///
    /// # Errors
    ///
    /// [`ConfigError`] naming the path of the first value at fault.
    pub fn from_service_config(json: &str) -> Result<Self, ConfigError> {
        ServiceConfig::from_json(json).map(Self::new)
    }

    /// The largest request (in bytes, encoded) a call keeps to send again
    /// ([`MAX_BUFFER`] by default): a larger one is sent once.
    #[must_use]
    pub fn max_buffer(self, bytes: usize) -> Self {
        let shared = &self.shared;
        Self {
            shared: Arc::new(Shared {
                config: shared.config.clone(),
                max_buffer: bytes,
                throttled: AtomicU64::new(shared.throttled.load(Ordering::Relaxed)),
                won: AtomicU64::new(shared.won.load(Ordering::Relaxed)),
                cancelled: AtomicU64::new(shared.cancelled.load(Ordering::Relaxed)),
            }),
        }
    }

    /// The service config the layer hedges by: its policies' hedges and their
    /// [`stats`](lazybreaker::retry::Hedge::stats), its throttling's tokens.
    pub fn config(&self) -> &ServiceConfig {
        &self.shared.config
    }

    /// Hedges not sent because the channel's retry throttling said no.
    pub fn throttled(&self) -> u64 {
        self.shared.throttled.load(Ordering::Relaxed)
    }

    /// Calls answered by a hedge rather than by their first attempt.
    pub fn won(&self) -> u64 {
        self.shared.won.load(Ordering::Relaxed)
    }

    /// Attempts dropped (cancelled) because another answered the call.
    pub fn cancelled(&self) -> u64 {
        self.shared.cancelled.load(Ordering::Relaxed)
    }
}

impl fmt::Debug for HedgeLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HedgeLayer")
            .field("config", &self.shared.config)
            .field("max_buffer", &self.shared.max_buffer)
            .field("throttled", &self.throttled())
            .field("won", &self.won())
            .field("cancelled", &self.cancelled())
            .finish()
    }
}

impl<S> Layer<S> for HedgeLayer {
    type Service = GrpcHedge<S>;

    fn layer(&self, inner: S) -> GrpcHedge<S> {
        GrpcHedge {
            inner,
            shared: Arc::clone(&self.shared),
        }
    }
}

/// The service of a [`HedgeLayer`]: hedges the unary calls of `S` (a tonic `Channel`, or a
/// breaker's service on one) as the layer's service config says.
#[derive(Clone)]
pub struct GrpcHedge<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S: fmt::Debug> fmt::Debug for GrpcHedge<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcHedge")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S> Service<Request<Body>> for GrpcHedge<S>
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
        // The ready service makes the first attempt, and the hedges (polled ready again for
        // each); a clone stays for the next call.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(call(inner, Arc::clone(&self.shared), request))
    }
}

/// What an attempt's answer says of the call.
enum Verdict {
    /// The call's answer: `OK`, a fatal status, a committed response.
    Answer,
    /// A breaker's rejection: no other attempt is sent (the breaker would reject it).
    Rejected,
    /// A non-fatal status, with the server's pushback if it sent one.
    NonFatal(Option<Pushback>),
}

/// One call: its attempts, until one is the answer.
async fn call<S>(
    mut inner: S,
    shared: Arc<Shared>,
    request: Request<Body>,
) -> Result<Response<Body>, S::Error>
where
    S: Service<Request<Body>, Response = Response<Body>>,
    S::Error: 'static,
{
    let Some(policy) = shared.config.hedging(request.uri().path()) else {
        return inner.call(request).await;
    };
    let (parts, body) = request.into_parts();
    let kept = match read_ahead(body, shared.max_buffer) {
        Read::Whole(kept) => kept,
        Read::Partial(body) => return inner.call(Request::from_parts(parts, body)).await,
    };
    let hedge = policy.hedge();
    let throttle = shared.config.throttling();
    hedge.hedge_budget().deposit();
    let within = min_some(timeout_in(&parts.headers), policy.timeout());
    let delay = hedge.delay().unwrap_or(Duration::ZERO);
    let started = Instant::now();

    let first = inner.call(Request::from_parts(parts.clone(), kept.body()));
    // Each attempt in flight, and how many came before it.
    let mut running: Vec<(Pin<Box<S::Future>>, u32)> = vec![(Box::pin(first), 0)];
    let mut sent: u32 = 1;
    let mut last_sent = started;
    let mut hurry = false;
    let mut hold: Option<Instant> = None;
    let mut done = hedge.attempts() <= 1;
    let mut last = None;
    let mut timer: Option<Pin<Box<Sleep>>> = None;

    poll_fn(|cx| loop {
        let mut i = 0;
        while i < running.len() {
            let Poll::Ready(mut result) = running[i].0.as_mut().poll(cx) else {
                i += 1;
                continue;
            };
            let (_, before) = running.swap_remove(i);
            match verdict(&mut result, policy, throttle) {
                Verdict::Answer => {
                    let cancelled = running.len() as u64;
                    running.clear();
                    if before > 0 {
                        shared.won.fetch_add(1, Ordering::Relaxed);
                    }
                    shared.cancelled.fetch_add(cancelled, Ordering::Relaxed);
                    hedge.count_end(before > 0, cancelled);
                    return Poll::Ready(result);
                }
                Verdict::Rejected | Verdict::NonFatal(Some(Pushback::Stop)) => done = true,
                Verdict::NonFatal(Some(Pushback::After(wait))) => {
                    match Instant::now().checked_add(wait) {
                        Some(until) => hold = Some(hold.map_or(until, |h| h.max(until))),
                        None => done = true,
                    }
                }
                Verdict::NonFatal(None) => hurry = true,
            }
            last = Some(result);
        }
        if running.is_empty() {
            // Nothing out: the next attempt goes as soon as it may.
            hurry = true;
        }
        if !done {
            let now = Instant::now();
            let due = if hurry { now } else { last_sent + delay };
            let due = hold.map_or(due, |hold| due.max(hold));
            if now >= due {
                if sent >= hedge.attempts() {
                    done = true;
                } else if throttle.is_some_and(|bucket| !bucket.allows_retry()) {
                    shared.throttled.fetch_add(1, Ordering::Relaxed);
                    done = true;
                } else {
                    match inner.poll_ready(cx) {
                        Poll::Pending => {}
                        Poll::Ready(Err(error)) => {
                            done = true;
                            if last.is_none() {
                                last = Some(Err(error));
                            }
                        }
                        Poll::Ready(Ok(())) => {
                            let left = within.map(|w| w.saturating_sub(now - started));
                            match hedge.next_hedge(sent, left) {
                                Next::Retry { .. } => {
                                    let mut request =
                                        Request::from_parts(parts.clone(), kept.body());
                                    let headers = request.headers_mut();
                                    headers.insert(PREVIOUS_ATTEMPTS, HeaderValue::from(sent));
                                    if let Some(left) = left {
                                        headers.insert("grpc-timeout", timeout_value(left));
                                    }
                                    running.push((Box::pin(inner.call(request)), sent));
                                    sent += 1;
                                    last_sent = now;
                                    hurry = false;
                                    continue;
                                }
                                Next::Stop(_) => done = true,
                            }
                        }
                    }
                }
            } else if within.is_some_and(|within| due >= started + within) {
                done = true;
            } else {
                let sleep = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(due)));
                if sleep.deadline() != due {
                    sleep.as_mut().reset(due);
                }
                if sleep.as_mut().poll(cx).is_ready() {
                    continue;
                }
            }
        }
        if running.is_empty() && done {
            return Poll::Ready(last.take().expect("an attempt answered last"));
        }
        return Poll::Pending;
    })
    .await
}

/// What an attempt's `result` says, as A6 reads a hedged attempt: a committed response
/// with a throttling gets its body watched for its `OK`; a non-fatal status takes a token,
/// an `OK` gives some back.
fn verdict<E: 'static>(
    result: &mut Result<Response<Body>, E>,
    policy: &HedgingPolicy,
    throttle: Option<&Arc<TokenBucket>>,
) -> Verdict {
    let (code, headers) = match result {
        Err(error) => match error_code(error) {
            Attempt::Rejected => return Verdict::Rejected,
            Attempt::Status(code) => (code, None),
        },
        Ok(response) => {
            if response.extensions().get::<Rejection>().is_some() {
                return Verdict::Rejected;
            }
            let code = match code_in(response.headers()) {
                Some(code) => code,
                None if response.status() == StatusCode::OK => {
                    // Committed: the status is in the trailers, and is the answer.
                    if let Some(bucket) = throttle {
                        let body = std::mem::take(response.body_mut());
                        *response.body_mut() = Body::new(Committed::new(body, Arc::clone(bucket)));
                    }
                    return Verdict::Answer;
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
        return Verdict::Answer;
    }
    if !policy.non_fatal(code) {
        return Verdict::Answer;
    }
    if let Some(bucket) = throttle {
        bucket.record_failure();
    }
    Verdict::NonFatal(headers.and_then(pushback_in))
}
