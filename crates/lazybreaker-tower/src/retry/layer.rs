//! [`RetryLayer`]: tower's retry middleware with a [`RetryPolicy`](super::RetryPolicy).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tower::retry::Retry as RetryService;
use tower_layer::Layer;

use super::policy::RetryPolicy;
use super::replay::CloneRequest;
use lazybreaker::classify::OkIsSuccess;
use lazybreaker::observe::Observer;
use lazybreaker::policy::TripPolicy;
use lazybreaker::retry::Retry;
use lazybreaker::Breaker;

/// Wraps services in tower's retry middleware (`tower::retry::Retry`) with a
/// [`RetryPolicy`]: see the [crate documentation](crate#retries) for where it goes in a
/// stack (outside the breaker or the pool, a timeout per attempt inside).
///
/// The methods are the policy's ([`classify`](RetryPolicy::classify),
/// [`replay`](RetryPolicy::replay), [`deadline`](RetryPolicy::deadline),
/// [`elsewhere`](RetryPolicy::elsewhere), [`count_on`](RetryPolicy::count_on)). The
/// service it makes needs its inner service to be `Clone` (every layer of this crate is, over
/// a `Clone` service): each call keeps a clone for its retries.
pub struct RetryLayer<C = OkIsSuccess, Q = CloneRequest> {
    policy: RetryPolicy<C, Q>,
}

impl RetryLayer {
    /// Retries as `retry` decides, every `Ok` a success and every `Err` a failure (a
    /// breaker's rejection never retried), every request copied with `Clone`.
    pub fn new(retry: Retry) -> Self {
        Self::from_policy(RetryPolicy::new(retry))
    }
}

#[cfg(feature = "http")]
impl RetryLayer<lazybreaker::http::StatusRules, super::replay::Idempotent> {
    /// Retries for HTTP ([`RetryPolicy::http`]): responses judged by
    /// [`StatusRules`](lazybreaker::http::StatusRules), a `Retry-After` waited for, only
    /// idempotent methods retried.
    #[cfg_attr(docsrs, doc(cfg(feature = "http")))]
    pub fn http(retry: Retry) -> Self {
        Self::from_policy(RetryPolicy::http(retry))
    }
}

impl<C, Q> RetryLayer<C, Q> {
    /// A layer whose services retry as `policy` says.
    pub fn from_policy(policy: RetryPolicy<C, Q>) -> Self {
        Self { policy }
    }

    /// [`RetryPolicy::classify`].
    pub fn classify<D>(self, classify: D) -> RetryLayer<D, Q> {
        RetryLayer::from_policy(self.policy.classify(classify))
    }

    /// [`RetryPolicy::replay`].
    pub fn replay<R>(self, replay: R) -> RetryLayer<C, R> {
        RetryLayer::from_policy(self.policy.replay(replay))
    }

    /// [`RetryPolicy::deadline`].
    pub fn deadline(self, within: Duration) -> Self {
        Self::from_policy(self.policy.deadline(within))
    }

    /// [`RetryPolicy::elsewhere`]: set it over a [`PoolService`](crate::PoolService).
    pub fn elsewhere(self, elsewhere: bool) -> Self {
        Self::from_policy(self.policy.elsewhere(elsewhere))
    }

    /// [`RetryPolicy::count_on`]: give it the breaker of the
    /// [`BreakerLayer`](crate::BreakerLayer) inside.
    pub fn count_on<P, O>(self, breaker: Arc<Breaker<P, O>>) -> Self
    where
        P: TripPolicy + Send + Sync + 'static,
        O: Observer + Send + Sync + 'static,
    {
        Self::from_policy(self.policy.count_on(breaker))
    }

    /// The policy each service gets a clone of.
    pub fn policy(&self) -> &RetryPolicy<C, Q> {
        &self.policy
    }
}

impl<S, C: Clone, Q: Clone> Layer<S> for RetryLayer<C, Q> {
    type Service = RetryService<RetryPolicy<C, Q>, S>;

    fn layer(&self, inner: S) -> Self::Service {
        RetryService::new(self.policy.clone(), inner)
    }
}

impl<C: Clone, Q: Clone> Clone for RetryLayer<C, Q> {
    fn clone(&self) -> Self {
        Self::from_policy(self.policy.clone())
    }
}

impl<C, Q> fmt::Debug for RetryLayer<C, Q> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryLayer")
            .field("policy", &self.policy)
            .finish()
    }
}
