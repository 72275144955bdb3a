//! The services the tower groups call: the inner service alone, and each breaker layer over
//! it, configured as in the table at the top of `benches/tower.rs`.

use std::future::{ready, Ready};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use lazybreaker::classify::OkIsSuccess;
use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::tower::{BreakerLayer, BreakerService};
use lazybreaker::Breaker;
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

/// tower-resilience's layer over [`Inner`].
pub(crate) type Resilience = CircuitBreaker<Inner, DefaultClassifier>;

/// lazybreaker's layer over [`Inner`] with `Breaker::builder().build()` (gobreaker's
/// defaults), or with an open period of [`LONG_OPEN`].
pub(crate) fn lazy(long_open: bool) -> Lazy {
    let builder = Breaker::builder();
    let breaker = if long_open {
        builder.timeout(LONG_OPEN).build()
    } else {
        builder.build()
    };
    BreakerLayer::new(Arc::new(breaker)).layer(Inner)
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
    /// Whether this error is the breaker's rejection (not the inner service's error).
    fn is_rejection(error: &Self::Error) -> bool;

    /// Whether a call (with an operation that would succeed) is rejected now. It makes a call
    /// on a clone: for checks outside the measurement.
    fn rejects(&self) -> bool
    where
        Self: Clone,
    {
        let waker = thread_waker();
        let mut service = self.clone();
        block_on(&waker, call(&mut service, true))
            .err()
            .is_some_and(|e| Self::is_rejection(&e))
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
    fn is_rejection(error: &lazybreaker::Error<()>) -> bool {
        error.is_rejected()
    }
}

impl Rejecting for Resilience {
    fn is_rejection(error: &tower_resilience_circuitbreaker::CircuitBreakerError<()>) -> bool {
        error.is_circuit_open()
    }
}
