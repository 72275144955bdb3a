//! [`LimitLayer`]: wraps services in a [`LimitService`](super::LimitService) over one
//! [`Limiter`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tower_layer::Layer;

use super::service::LimitService;
use crate::fallback::{FailFast, Fallback};
use lazybreaker::classify::OkIsSuccess;
use lazybreaker::limit::{Algorithm, Limiter};
use lazybreaker::{Clock, ConfigError, PreciseClock, Rejected};

/// Wraps services in a [`LimitService`]: each call takes a place under an adaptive
/// concurrency limit ([`lazybreaker::limit`]) when it starts, and gives it back when it
/// ends, with what it says of the limit; a call at the limit is answered at once with
/// [`Rejected::Limited`] ([`Error::Rejected`](lazybreaker::Error::Rejected) by default).
///
/// - **It sheds, it never queues.** `poll_ready` is the inner service's; a call that finds
///   the limit's calls in flight is turned away in `call`, not held until a place frees
///   (put a `Buffer` or a retry outside it to wait).
/// - **What a call says.** Judged by `C` (every `Ok` a success by default;
///   `LimitLayer::http` for HTTP, feature `http`): a success is a sample of its latency (which
///   [`Aimd`](lazybreaker::limit::Aimd) counts as a drop past its timeout); a failure the
///   classifier calls an overload (a 503 or 429 with `OverloadRules`, feature `http`),
///   or a timeout (tower's or tokio's `Elapsed`, with the feature `retry`, or an
///   `io::ErrorKind::TimedOut`, among the error's causes; or a failure that took the
///   [`deadline`](LimitLayer::deadline)), is a drop, which cuts the limit; any other
///   failure and an excluded result (a 404, another breaker's rejection) give their place
///   back unsampled, as a call cancelled (its future dropped) or panicking does.
/// - **One limiter per layer.** Every service the layer makes, and every clone, counts
///   against the same [`Limiter`]; [`shared`](LimitLayer::shared) puts several layers on one.
///
/// No feature: the limit is the core's, with no timer and no runtime. See the
/// [crate documentation](crate#concurrency-limits) for where it goes in a stack.
///
/// # Examples
///
/// ```
/// use lazybreaker::limit::Fixed;
/// use lazybreaker::{Error, ManualClock, Rejected};
/// use lazybreaker_tower::LimitLayer;
/// use std::future::Future;
/// use std::pin::pin;
/// use std::task::{Context, Poll, Waker};
/// use tower::{Layer, Service};
///
/// // An inner service whose calls never answer: each holds its place.
/// let inner = tower::service_fn(|_: ()| std::future::pending::<Result<(), std::io::Error>>());
/// let layer = LimitLayer::new(Fixed::new(2)).clock(ManualClock::new());
/// let mut service = layer.layer(inner);
///
/// let first = service.call(());
/// let second = service.call(());
/// assert_eq!(layer.limiter().in_flight(), 2);
/// // The third is turned away at once, without reaching the inner service.
/// let third = pin!(service.call(()));
/// let mut cx = Context::from_waker(Waker::noop());
/// let Poll::Ready(Err(err)) = third.poll(&mut cx) else { panic!("answered at once") };
/// assert!(matches!(err, Error::Rejected(Rejected::Limited)));
///
/// drop(first); // cancelled: its place comes back
/// assert_eq!(layer.limiter().in_flight(), 1);
/// # drop(second);
/// ```
pub struct LimitLayer<
    A: Algorithm = Box<dyn Algorithm>,
    K = PreciseClock,
    C = OkIsSuccess,
    J = FailFast,
> {
    limiter: Arc<Limiter<A>>,
    clock: Arc<K>,
    classify: C,
    on_rejected: J,
    deadline: Option<Duration>,
}

impl<A: Algorithm> LimitLayer<A> {
    /// A layer over a new [`Limiter`] on `algorithm` (its settings unchecked: see
    /// [`try_new`](Self::try_new)), on the precise clock, every `Ok` a success.
    pub fn new(algorithm: A) -> Self {
        Self::shared(Arc::new(Limiter::new(algorithm)))
    }

    /// [`new`](Self::new), unless a setting of `algorithm` is out of its range.
    ///
    /// # Errors
    ///
    /// The algorithm's [`validate`](Algorithm::validate) error, naming the setting
    /// (`limit.backoff_ratio`, `limit.max_limit`, `limit.timeout`, `limit.limit`).
    ///
    /// ```
    /// use lazybreaker::limit::Aimd;
    /// use lazybreaker_tower::LimitLayer;
    ///
    /// let err = LimitLayer::try_new(Aimd::new().backoff_ratio(1.5)).unwrap_err();
    /// assert_eq!(err.field(), "limit.backoff_ratio");
    /// ```
    pub fn try_new(algorithm: A) -> Result<Self, ConfigError> {
        Ok(Self::shared(Arc::new(Limiter::try_new(algorithm)?)))
    }

    /// A layer over `limiter`, shared with whatever else holds it (another layer, another
    /// stack towards the same dependency): the calls of all of them count against one limit.
    pub fn shared(limiter: Arc<Limiter<A>>) -> Self {
        Self {
            limiter,
            clock: Arc::new(PreciseClock::new()),
            classify: OkIsSuccess,
            on_rejected: FailFast,
            deadline: None,
        }
    }
}

#[cfg(feature = "http")]
impl<A: Algorithm> LimitLayer<A, PreciseClock, super::verdict::OverloadRules> {
    /// A layer for HTTP: responses judged by [`OverloadRules`](crate::OverloadRules) (a 503
    /// or a 429 cuts the limit, with or without `Retry-After`; other 5xx and transport
    /// errors give their place back unsampled, a timeout cuts it).
    #[cfg_attr(docsrs, doc(cfg(feature = "http")))]
    pub fn http(algorithm: A) -> Self {
        LimitLayer::new(algorithm).classify(super::verdict::OverloadRules::new())
    }
}

impl<A: Algorithm, K, C, J> LimitLayer<A, K, C, J> {
    /// The same layer, reading the time of each call's start and end on `clock` (a
    /// [`ManualClock`](lazybreaker::ManualClock) in tests).
    pub fn clock<L: Clock>(self, clock: L) -> LimitLayer<A, L, C, J> {
        LimitLayer {
            limiter: self.limiter,
            clock: Arc::new(clock),
            classify: self.classify,
            on_rejected: self.on_rejected,
            deadline: self.deadline,
        }
    }

    /// The same layer, with `classify` judging each call's result (any
    /// [`Classify`](lazybreaker::Classify)): see the layer for what each outcome says.
    pub fn classify<D>(self, classify: D) -> LimitLayer<A, K, D, J> {
        LimitLayer {
            limiter: self.limiter,
            clock: self.clock,
            classify,
            on_rejected: self.on_rejected,
            deadline: self.deadline,
        }
    }

    /// The same layer, answering a rejected request with `answer`: any
    /// [`OnRejected`](crate::OnRejected). [`IntoInner`](crate::IntoInner) fails it with the
    /// inner service's own error (for a limit over a [`BreakerLayer`](crate::BreakerLayer),
    /// whose `Error<E>` then carries both layers' rejections); [`FailFast`], the default,
    /// with [`Error::Rejected`](lazybreaker::Error::Rejected).
    pub fn on_rejected<R>(self, answer: R) -> LimitLayer<A, K, C, R> {
        LimitLayer {
            limiter: self.limiter,
            clock: self.clock,
            classify: self.classify,
            on_rejected: answer,
            deadline: self.deadline,
        }
    }

    /// The same layer, answering a rejected request with `fallback(&rejected)` instead of
    /// an error (a server's own limit answering 503 with
    /// `lazybreaker::http::rejected_response`), as
    /// [`BreakerLayer::fallback`](crate::BreakerLayer::fallback) does.
    pub fn fallback<F, T>(self, fallback: F) -> LimitLayer<A, K, C, Fallback<F>>
    where
        F: Fn(&Rejected) -> T + Clone,
    {
        self.on_rejected(Fallback::new(fallback))
    }

    /// A call that fails after `deadline` or longer timed out: a drop, which cuts the limit
    /// (give it the timeout inside the layer, for a timer whose error is not recognised).
    #[must_use]
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// The limiter: its [`limit`](Limiter::limit), [`in_flight`](Limiter::in_flight) and
    /// [`limited`](Limiter::limited) calls.
    pub fn limiter(&self) -> &Arc<Limiter<A>> {
        &self.limiter
    }
}

impl<S, A: Algorithm, K, C: Clone, J: Clone> Layer<S> for LimitLayer<A, K, C, J> {
    type Service = LimitService<S, A, K, C, J>;

    fn layer(&self, inner: S) -> Self::Service {
        LimitService::new(
            inner,
            Arc::clone(&self.limiter),
            Arc::clone(&self.clock),
            self.classify.clone(),
            self.on_rejected.clone(),
            self.deadline,
        )
    }
}

impl<A: Algorithm, K, C: Clone, J: Clone> Clone for LimitLayer<A, K, C, J> {
    fn clone(&self) -> Self {
        Self {
            limiter: Arc::clone(&self.limiter),
            clock: Arc::clone(&self.clock),
            classify: self.classify.clone(),
            on_rejected: self.on_rejected.clone(),
            deadline: self.deadline,
        }
    }
}

impl<A: Algorithm, K, C, J> fmt::Debug for LimitLayer<A, K, C, J> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LimitLayer")
            .field("limiter", &self.limiter)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}
