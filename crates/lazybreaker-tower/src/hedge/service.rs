//! [`HedgeService`]: a call's first attempt through the ready inner service, and what its
//! [`HedgeFuture`] needs to send the others.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use lazybreaker::classify::{Classify, OkIsSuccess};
use lazybreaker::retry::{Hedge, LatencyEstimate};
use tokio::time::Instant;
use tower_service::Service;

use super::future::HedgeFuture;
use crate::retry::rejected::MaybeRejected;
use crate::retry::replay::{CloneRequest, Replay};

/// What the services of one [`HedgeLayer`](super::HedgeLayer) share: the estimate of their
/// latencies, and what their calls ended as.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// The hedge's percentile of the successful attempts' latencies.
    pub(crate) estimate: LatencyEstimate,
    /// Calls answered first by a hedge.
    pub(crate) won: AtomicU64,
    /// Attempts cancelled because another answered first.
    pub(crate) cancelled: AtomicU64,
}

impl Shared {
    /// Counts a call's end: answered by a hedge (`won`), `cancelled` attempts.
    pub(crate) fn count_end(&self, won: bool, cancelled: u64) {
        if won {
            self.won.fetch_add(1, Ordering::Relaxed);
        }
        if cancelled > 0 {
            self.cancelled.fetch_add(cancelled, Ordering::Relaxed);
        }
    }
}

/// What a service's calls read: the layer's settings, and what its services share.
#[derive(Debug)]
pub(crate) struct Settings<C, Q> {
    pub(crate) hedge: Hedge,
    /// Whether the hedge's settings are in range (a hedge out of range hedges nothing).
    pub(crate) valid: bool,
    pub(crate) classify: C,
    pub(crate) replay: Q,
    pub(crate) within: Option<Duration>,
    pub(crate) shared: Arc<Shared>,
}

/// The service of a [`HedgeLayer`](super::HedgeLayer): each call's first attempt goes
/// through the inner service, the others (after the hedge's delay, or at once after a
/// failure) through a clone of it, polled ready first; the first answer that is not a
/// failure is the call's, and the other attempts are dropped. See the layer for the rules.
pub struct HedgeService<S, C = OkIsSuccess, Q = CloneRequest> {
    inner: S,
    settings: Arc<Settings<C, Q>>,
}

impl<S, C, Q> HedgeService<S, C, Q> {
    pub(crate) fn new(inner: S, settings: Arc<Settings<C, Q>>) -> Self {
        Self { inner, settings }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The hedge: its budget, its [`stats`](Hedge::stats).
    pub fn hedge(&self) -> &Hedge {
        &self.settings.hedge
    }
}

impl<S, Req, C, Q> Service<Req> for HedgeService<S, C, Q>
where
    S: Service<Req> + Clone,
    S::Error: MaybeRejected,
    C: Classify<S::Response, S::Error>,
    Q: Replay<Req>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = HedgeFuture<S, Req, C, Q>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let settings = &self.settings;
        // A copy to send again, if the request may be sent twice: the call is then counted
        // in the budget that pays for its hedges.
        let kept = if settings.valid {
            settings.replay.replay(&request)
        } else {
            None
        };
        if kept.is_some() {
            settings.hedge.hedge_budget().deposit();
        }
        let delay = match settings.hedge.delay() {
            Some(delay) => Some(delay),
            None => settings.shared.estimate.get(),
        };
        // The ready service makes the first attempt, and stays with the call for the
        // others (polled ready again before each); a clone stays for the next call.
        let clone = self.inner.clone();
        let mut ready = std::mem::replace(&mut self.inner, clone);
        let started = Instant::now();
        let first = ready.call(request);
        HedgeFuture::new(first, ready, Arc::clone(settings), kept, started, delay)
    }
}

impl<S: Clone, C, Q> Clone for HedgeService<S, C, Q> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            settings: Arc::clone(&self.settings),
        }
    }
}

impl<S: fmt::Debug, C, Q> fmt::Debug for HedgeService<S, C, Q> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HedgeService")
            .field("inner", &self.inner)
            .field("hedge", &self.settings.hedge)
            .field("deadline", &self.settings.within)
            .finish_non_exhaustive()
    }
}
