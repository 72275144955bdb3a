//! [`HedgeLayer`]: a [`Hedge`] around a tower service.

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use lazybreaker::classify::OkIsSuccess;
use lazybreaker::retry::{Hedge, LatencyEstimate};
use lazybreaker::ConfigError;
use tower_layer::Layer;

use super::service::{HedgeService, Settings, Shared};
use crate::retry::replay::CloneRequest;

/// Hedges a service's calls as a [`Hedge`] says: an attempt that has not answered after
/// the hedge's delay gets another, sent through a clone of the inner service; the first
/// answer that is not a failure is the call's, and the other attempts are dropped
/// (cancelled: a breaker inside records them as abandoned, an exclusion by default).
///
/// - **The delay.** [`Hedge::after`] a fixed one, or [`Hedge::at_percentile`] `p`: the
///   layer keeps one [`LatencyEstimate`] of the `p`-th quantile of its services'
///   successful attempts (one word, written without a lock), read at each call's start;
///   before any success, no hedge is made on time (a failure still sends the next).
/// - **How many.** At most [`Hedge::max_attempts`] attempts a call, the first included
///   (2 by default), each paid for in the hedge's budget ([`Hedge::next_hedge`]: the
///   budget, the [throttle](Hedge::throttle), the [`deadline`](Self::deadline)); each call
///   whose request may be sent again is deposited in that budget once. Give the hedge the
///   budget of a [`RetryLayer`](crate::RetryLayer)'s retry to bound both together. A
///   throttle given to the hedge is fed by the attempts: a failure takes a token, a success
///   gives `token_ratio` back.
/// - **Failures.** An attempt the classifier calls a failure sends the next at once, while
///   attempts are left (gRPC's non-fatal status, A6); an overload with a `Retry-After`
///   ([`Classify::open_for`](lazybreaker::classify::Classify::open_for)) holds the next one
///   until then. A breaker's rejection ([`MaybeRejected`](crate::MaybeRejected)) sends no
///   other: the breaker would reject it too; nor does a concurrency limit's
///   ([`Rejected::Limited`](lazybreaker::Rejected::Limited)): a hedge adds load, which the
///   limit just refused (an attempt already out goes on). With every attempt failed, the call's answer
///   is the last failure.
/// - **Which requests.** Those [`Replay`](crate::Replay) copies: every `Clone` request with
///   [`new`](Self::new), HTTP's idempotent methods with [`http`](Self::http). Another is
///   sent once.
/// - **Ready-ness.** Each hedge is sent through the service that sent the call's first
///   attempt, polled ready again (`poll_ready`) before the hedge is paid for and sent.
///
/// Waits on tokio's timer (`tokio::time::sleep_until`): a call whose hedge's delay is not
/// zero needs a tokio runtime with its time driver. The hedge's decisions are counted in
/// [`Hedge::stats`] (`hedges`, `budget_denied`, `throttled`, `past_deadline`), the calls a
/// hedge answered in [`won`](Self::won), the attempts dropped in
/// [`cancelled`](Self::cancelled).
///
/// Put it outside the breaker (or the pool), so that each attempt gets the breaker's
/// verdict, and a timeout per attempt inside it; over a
/// [`PoolService`](crate::PoolService), each hedge is a pick of its own (which may be the
/// endpoint that is slow: [`Pool::hedge`](lazybreaker::pool::Pool::hedge) sends it to
/// another one).
///
/// # Examples
///
/// ```
/// use lazybreaker::retry::{Hedge, RetryBudget};
/// use lazybreaker_tower::HedgeLayer;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
/// use std::time::Duration;
/// use tower::{Layer, Service, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), lazybreaker::ConfigError> {
/// // The first call's first attempt takes a second; every other attempt 10 ms.
/// let calls = Arc::new(AtomicUsize::new(0));
/// let seen = Arc::clone(&calls);
/// let service = tower::service_fn(move |n: u32| {
///     let slow = seen.fetch_add(1, Ordering::SeqCst) == 0;
///     async move {
///         let took = if slow { 1_000 } else { 10 };
///         tokio::time::sleep(Duration::from_millis(took)).await;
///         Ok::<_, std::io::Error>((n, took))
///     }
/// });
///
/// let hedge = Hedge::after(Duration::from_millis(50)).budget(RetryBudget::new(0.1)?);
/// let layer = HedgeLayer::try_new(hedge.clone())?;
/// let mut service = layer.layer(service);
///
/// let started = tokio::time::Instant::now();
/// let answer = service.ready().await.unwrap().call(7).await.unwrap();
/// assert_eq!(answer, (7, 10), "the hedge's");
/// assert_eq!(started.elapsed(), Duration::from_millis(60), "50 ms, then the hedge's 10");
/// assert_eq!((hedge.stats().hedges, layer.won(), layer.cancelled()), (1, 1, 1));
/// # Ok(())
/// # }
/// ```
pub struct HedgeLayer<C = OkIsSuccess, Q = CloneRequest> {
    hedge: Hedge,
    valid: bool,
    classify: C,
    replay: Q,
    within: Option<Duration>,
    shared: Arc<Shared>,
}

impl HedgeLayer {
    /// Hedges as `hedge` says, every `Ok` a success and every `Err` a failure (a breaker's
    /// rejection never hedged again), every request copied with `Clone`. A hedge whose
    /// settings are out of range hedges nothing ([`try_new`](Self::try_new) refuses it).
    pub fn new(hedge: Hedge) -> Self {
        Self {
            valid: hedge.validate().is_ok(),
            hedge,
            classify: OkIsSuccess,
            replay: CloneRequest,
            within: None,
            shared: Arc::default(),
        }
    }

    /// [`new`](Self::new), unless a setting of `hedge` is out of its range.
    ///
    /// # Errors
    ///
    /// The [`ConfigError`] of [`Hedge::validate`], naming the setting (`hedge.percentile`,
    /// `hedge.max_attempts`).
    pub fn try_new(hedge: Hedge) -> Result<Self, ConfigError> {
        hedge.validate()?;
        Ok(Self::new(hedge))
    }
}

#[cfg(feature = "http")]
impl HedgeLayer<lazybreaker::http::StatusRules, crate::retry::replay::Idempotent> {
    /// Hedges for HTTP: responses judged by
    /// [`StatusRules`](lazybreaker::http::StatusRules) (5xx, 408, 429 and transport errors
    /// are failures, which send the next attempt at once; a 503 or 429 with `Retry-After`
    /// holds it until then), only requests with idempotent methods hedged
    /// ([`Idempotent`](crate::Idempotent)).
    #[cfg_attr(docsrs, doc(cfg(feature = "http")))]
    pub fn http(hedge: Hedge) -> Self {
        HedgeLayer::new(hedge)
            .classify(lazybreaker::http::StatusRules::new().honor_retry_after())
            .replay(crate::retry::replay::Idempotent::new())
    }
}

impl<C, Q> HedgeLayer<C, Q> {
    /// The same layer, with `classify` judging each attempt's result (any
    /// [`Classify`](lazybreaker::classify::Classify)): what it calls a failure
    /// ([`Outcome::Failure`](lazybreaker::policy::Outcome::Failure) or `Fatal`) does not
    /// answer the call.
    pub fn classify<D>(self, classify: D) -> HedgeLayer<D, Q> {
        HedgeLayer {
            hedge: self.hedge,
            valid: self.valid,
            classify,
            replay: self.replay,
            within: self.within,
            shared: self.shared,
        }
    }

    /// The same layer, with `replay` copying requests for their hedges and saying which
    /// are sent only once (a [`Replay`](crate::Replay)).
    pub fn replay<R>(self, replay: R) -> HedgeLayer<C, R> {
        HedgeLayer {
            hedge: self.hedge,
            valid: self.valid,
            classify: self.classify,
            replay,
            within: self.within,
            shared: self.shared,
        }
    }

    /// Each call has `within` to finish, from its first attempt: no hedge starts past it.
    /// Give it the timeout outside the hedge layer, if there is one.
    #[must_use]
    pub fn deadline(mut self, within: Duration) -> Self {
        self.within = Some(within);
        self
    }

    /// The hedge: its budget, its [`stats`](Hedge::stats).
    pub fn hedge(&self) -> &Hedge {
        &self.hedge
    }

    /// The estimate of the hedge's percentile of the successful attempts' latencies
    /// (recorded only for a hedge [`at_percentile`](Hedge::at_percentile)), shared by every
    /// service of this layer and of its clones.
    pub fn estimate(&self) -> &LatencyEstimate {
        &self.shared.estimate
    }

    /// Calls answered first by a hedge rather than by their first attempt.
    pub fn won(&self) -> u64 {
        self.shared.won.load(Ordering::Relaxed)
    }

    /// Attempts dropped because another answered first (counted neither way).
    pub fn cancelled(&self) -> u64 {
        self.shared.cancelled.load(Ordering::Relaxed)
    }
}

impl<S, C: Clone, Q: Clone> Layer<S> for HedgeLayer<C, Q> {
    type Service = HedgeService<S, C, Q>;

    fn layer(&self, inner: S) -> Self::Service {
        let settings = Settings {
            hedge: self.hedge.clone(),
            valid: self.valid,
            classify: self.classify.clone(),
            replay: self.replay.clone(),
            within: self.within,
            shared: Arc::clone(&self.shared),
        };
        HedgeService::new(inner, Arc::new(settings))
    }
}

impl<C: Clone, Q: Clone> Clone for HedgeLayer<C, Q> {
    fn clone(&self) -> Self {
        Self {
            hedge: self.hedge.clone(),
            valid: self.valid,
            classify: self.classify.clone(),
            replay: self.replay.clone(),
            within: self.within,
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<C, Q> fmt::Debug for HedgeLayer<C, Q> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HedgeLayer")
            .field("hedge", &self.hedge)
            .field("deadline", &self.within)
            .field("won", &self.won())
            .field("cancelled", &self.cancelled())
            .finish_non_exhaustive()
    }
}
