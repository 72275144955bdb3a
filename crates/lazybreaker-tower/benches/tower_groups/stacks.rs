//! The services the tower groups call: the inner service alone, and each breaker layer over
//! it, configured as in the table at the top of `benches/tower.rs`.

use std::future::{ready, Ready};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use lazybreaker::classify::OkIsSuccess;
use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::{Breaker, Builder, Registry, RegistryHasher, Rejected};
use lazybreaker_tower::{
    BreakerLayer, BreakerService, Fallback, KeyedBreakerLayer, KeyedBreakerService,
};
use tower::{Layer, Service};
use tower_resilience_circuitbreaker::{CircuitBreaker, CircuitBreakerLayer, DefaultClassifier};

use super::exec::{block_on, call, thread_waker};
use crate::support::{operation, LONG_OPEN};

/// The inner service: always ready, and its response future is `operation(ok)`, ready at
/// once (`std::future::Ready`). The request says whether the operation succeeds.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Inner;

impl Service<bool> for Inner {
    type Response = u64;
    type Error = ();
    type Future = Ready<Result<u64, ()>>;

    #[inline]
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), ()>> {
        Poll::Ready(Ok(()))
    }

    #[inline]
    fn call(&mut self, ok: bool) -> Self::Future {
        ready(operation(ok))
    }
}

/// gobreaker's default open period (`Timeout`), for the closed stacks.
const GOBREAKER_TIMEOUT: Duration = Duration::from_secs(60);

/// gobreaker's default `ReadyToTrip` trips after more than 5 consecutive failures.
const FAILURES_TO_TRIP: usize = 6;

/// lazybreaker's layer over [`Inner`].
pub(crate) type Lazy = BreakerService<Inner, ConsecutiveFailures, (), OkIsSuccess>;

/// lazybreaker's layer over [`Inner`] answering rejected requests with a response of its own
/// ([`FALLBACK`]): `F` is the fallback closure.
pub(crate) type LazyFallback<F> =
    BreakerService<Inner, ConsecutiveFailures, (), OkIsSuccess, Fallback<F>>;

/// lazybreaker's keyed layer over [`Inner`]: a registry of breakers keyed by `&'static str`,
/// `F` the closure that gives each request's key (always [`KEY`]).
pub(crate) type Keyed<F> = KeyedBreakerService<
    Inner,
    &'static str,
    F,
    ConsecutiveFailures,
    (),
    RegistryHasher,
    OkIsSuccess,
>;

/// The fallback stack's answer to a rejected request: a response no call of [`Inner`] gives
/// (`operation` answers 1), so a check can tell a fallback answer from a call.
pub(crate) const FALLBACK: u64 = 0;

/// The key of every request to the keyed stack, and so the name of its breaker (which a
/// rejection copies): a host name of a typical length.
pub(crate) const KEY: &str = "api.example.com";

/// tower-resilience's layer over [`Inner`].
pub(crate) type Resilience = CircuitBreaker<Inner, DefaultClassifier>;

/// lazybreaker's layer over [`Inner`] with `Breaker::builder().build()` (gobreaker's
/// defaults), or with an open period of [`LONG_OPEN`].
pub(crate) fn lazy(long_open: bool) -> Lazy {
    BreakerLayer::new(Arc::new(builder(long_open).build())).layer(Inner)
}

/// `Breaker::builder()` (gobreaker's defaults), or with an open period of [`LONG_OPEN`].
fn builder(long_open: bool) -> Builder {
    let builder = Breaker::builder();
    if long_open {
        builder.timeout(LONG_OPEN)
    } else {
        builder
    }
}

/// [`lazy`] with a fallback: `BreakerLayer::new(b).fallback(|_r: &Rejected| FALLBACK)`, so a
/// rejected request gets `Ok(FALLBACK)` instead of an error.
pub(crate) fn lazy_fallback(
    long_open: bool,
) -> LazyFallback<impl Fn(&Rejected) -> u64 + Clone + Send> {
    BreakerLayer::new(Arc::new(builder(long_open).build()))
        .fallback(|_r: &Rejected| FALLBACK)
        .layer(Inner)
}

/// lazybreaker's keyed layer over [`Inner`]: `KeyedBreakerLayer::new(registry, |_| KEY)`,
/// over a registry whose breakers are built as in [`lazy`]; the key's breaker exists before
/// the first call. A rejection names the breaker ([`lazybreaker::RejectedBy`]).
pub(crate) fn keyed(long_open: bool) -> Keyed<impl Fn(&bool) -> &'static str + Clone + Send> {
    let registry = Arc::new(Registry::new(move |_: &&'static str| builder(long_open)));
    registry.breaker(&KEY);
    KeyedBreakerLayer::new(registry, |_: &bool| KEY).layer(Inner)
}

/// tower-resilience's layer over [`Inner`], as close to gobreaker's defaults as it goes:
/// consecutive failures, 6 to trip, one half-open probe, 60 s open (or [`LONG_OPEN`]).
pub(crate) fn resilience(long_open: bool) -> Resilience {
    let open = if long_open {
        LONG_OPEN
    } else {
        GOBREAKER_TIMEOUT
    };
    CircuitBreakerLayer::builder()
        .consecutive_failures(FAILURES_TO_TRIP)
        .wait_duration_in_open(open)
        .permitted_calls_in_half_open(1)
        .build()
        .expect("a valid tower-resilience configuration")
        .layer(Inner)
}

/// A stack whose calls a breaker may reject.
pub(crate) trait Rejecting: Service<bool> + Sized {
    /// Whether this result is the breaker's answer to a rejected request (not the inner
    /// service's response or error).
    fn is_rejection(result: &Result<Self::Response, Self::Error>) -> bool;

    /// Whether a call (with an operation that would succeed) is rejected now. It makes a call
    /// on a clone: for checks outside the measurement.
    fn rejects(&self) -> bool
    where
        Self: Clone,
    {
        let waker = thread_waker();
        let mut service = self.clone();
        Self::is_rejection(&block_on(&waker, call(&mut service, true)))
    }

    /// Makes [`FAILURES_TO_TRIP`] failed calls, then checks the breaker rejects.
    fn tripped(mut self, name: &str) -> Self
    where
        Self: Clone,
    {
        let waker = thread_waker();
        for _ in 0..FAILURES_TO_TRIP {
            let failed = block_on(&waker, call(&mut self, false));
            assert!(failed.is_err(), "{name}: a failing call succeeded");
        }
        assert!(
            self.rejects(),
            "{name}: not open after {FAILURES_TO_TRIP} failures"
        );
        self
    }

    /// Checks that the breaker still rejects after the measurement.
    fn still_open(&self, name: &str)
    where
        Self: Clone,
    {
        assert!(
            self.rejects(),
            "{name}: the breaker left the open state during the measurement"
        );
    }
}

impl Rejecting for Lazy {
    fn is_rejection(result: &Result<u64, Self::Error>) -> bool {
        result.as_ref().is_err_and(|e| e.is_rejected())
    }
}

impl<F: Fn(&Rejected) -> u64 + Clone> Rejecting for LazyFallback<F> {
    fn is_rejection(result: &Result<u64, ()>) -> bool {
        matches!(result, Ok(FALLBACK))
    }
}

impl<F: Fn(&bool) -> &'static str + Clone> Rejecting for Keyed<F> {
    fn is_rejection(result: &Result<u64, Self::Error>) -> bool {
        result.as_ref().is_err_and(|e| e.is_rejected())
    }
}

impl Rejecting for Resilience {
    fn is_rejection(result: &Result<u64, Self::Error>) -> bool {
        result.as_ref().is_err_and(|e| e.is_circuit_open())
    }
}
