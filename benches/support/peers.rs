//! lazybreaker and its peers behind one interface: each configured as in the benchmark table,
//! each making the same call of the same [`operation`].
//!
//! | implementation | configuration | forced open by |
//! |---|---|---|
//! | lazybreaker | `Breaker::builder().build()`: gobreaker's defaults (interval 0, trip after more than 5 consecutive failures), the clock the builder picks | 6 failed calls |
//! | lazybreaker_instant_clock | the same on `.clock(MonotonicClock::new())`: `Instant`, the peers' clock | 6 failed calls |
//! | failsafe 1.3 | `Config::new().failure_policy(ConsecutiveFailures::default())`: 5 consecutive failures, equal-jittered backoff 10 s..300 s, no instrument | 5 failed calls |
//! | recloser 1.4 | `Recloser::default()`: error rate 0.5 over a ring of 100 calls, open 30 s | 101 failed calls (the ring must fill first) |
//! | breaker 2.0 | `CircuitBreaker::new(CircuitBreakerConfig::standard())`: 5 consecutive failures or a 50% rate over 10 calls, 3 half-open probes, open 30 s | 5 failed calls |
//!
//! An open breaker gets the same configuration with an open period of [`LONG_OPEN`], so it
//! cannot recover in the middle of a measurement; the rejection path reads the open
//! deadline, whatever its value. Each open breaker is checked to reject before and after it
//! is measured.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use super::{operation, LONG_OPEN};

/// One implementation, as the shared scenarios see it.
pub(crate) trait Subject: Sync + Sized {
    /// The benchmark's name in every group.
    const NAME: &'static str;
    /// How many failed calls in a row trip a fresh breaker.
    const FAILURES_TO_TRIP: usize;
    /// What a call returns. The benches keep it whole (`black_box`), so no part of the work
    /// that produces it (a rejection's `retry_after`, say) can be optimised away.
    type Out;

    /// The configuration of the benchmark table, closed.
    fn closed() -> Self;
    /// The same configuration with an open period of [`LONG_OPEN`], closed.
    fn long_open() -> Self;
    /// One call of `operation(true)` through the breaker: the measured call.
    fn call(&self) -> Self::Out;
    /// One call of `operation(false)` through the breaker.
    fn fail(&self);
    /// Whether a call is rejected now. It makes a call: for checks outside the measurement.
    fn rejects(&self) -> bool;

    /// [`long_open`](Subject::long_open), tripped by failed calls and checked to reject.
    fn open() -> Self {
        let subject = Self::long_open();
        for _ in 0..Self::FAILURES_TO_TRIP {
            subject.fail();
        }
        assert!(subject.rejects(), "{}: not open after failures", Self::NAME);
        subject
    }
}

/// lazybreaker with gobreaker's defaults.
#[derive(Debug)]
pub(crate) struct Lazy(lazybreaker::Breaker);

impl Subject for Lazy {
    const NAME: &'static str = "lazybreaker";
    const FAILURES_TO_TRIP: usize = 6;
    type Out = Result<u64, lazybreaker::Error<()>>;

    fn closed() -> Self {
        Lazy(lazybreaker::Breaker::builder().build())
    }

    fn long_open() -> Self {
        Lazy(lazybreaker::Breaker::builder().timeout(LONG_OPEN).build())
    }

    fn call(&self) -> Self::Out {
        self.0.execute(|| operation(true))
    }

    fn fail(&self) {
        let _ = self.0.execute(|| operation(false));
    }

    fn rejects(&self) -> bool {
        self.call().err().is_some_and(|e| e.is_rejected())
    }
}

/// lazybreaker with gobreaker's defaults on a user-given [`MonotonicClock`]
/// (`std::time::Instant`, through the `Clock` trait object): the clock the peers read, for
/// comparison with the default clock the builder picks.
///
/// [`MonotonicClock`]: lazybreaker::MonotonicClock
#[derive(Debug)]
pub(crate) struct LazyInstantClock(Lazy);

impl Subject for LazyInstantClock {
    const NAME: &'static str = "lazybreaker_instant_clock";
    const FAILURES_TO_TRIP: usize = Lazy::FAILURES_TO_TRIP;
    type Out = <Lazy as Subject>::Out;

    fn closed() -> Self {
        let clock = lazybreaker::MonotonicClock::new();
        LazyInstantClock(Lazy(lazybreaker::Breaker::builder().clock(clock).build()))
    }

    fn long_open() -> Self {
        let clock = lazybreaker::MonotonicClock::new();
        let breaker = lazybreaker::Breaker::builder()
            .timeout(LONG_OPEN)
            .clock(clock);
        LazyInstantClock(Lazy(breaker.build()))
    }

    fn call(&self) -> Self::Out {
        self.0.call()
    }

    fn fail(&self) {
        self.0.fail()
    }

    fn rejects(&self) -> bool {
        self.0.rejects()
    }
}

/// failsafe's `consecutive_failures` policy with its default settings.
#[derive(Debug)]
pub(crate) struct Failsafe(
    failsafe::StateMachine<
        failsafe::failure_policy::ConsecutiveFailures<failsafe::backoff::EqualJittered>,
        (),
    >,
);

impl Subject for Failsafe {
    const NAME: &'static str = "failsafe";
    const FAILURES_TO_TRIP: usize = 5;
    type Out = Result<u64, failsafe::Error<()>>;

    fn closed() -> Self {
        let policy = failsafe::failure_policy::ConsecutiveFailures::default();
        Failsafe(failsafe::Config::new().failure_policy(policy).build())
    }

    fn long_open() -> Self {
        // The default policy's type, with the backoff pinned near LONG_OPEN (equal jitter
        // draws from [LONG_OPEN / 2, LONG_OPEN]).
        let backoff = failsafe::backoff::equal_jittered(LONG_OPEN, LONG_OPEN);
        let policy = failsafe::failure_policy::consecutive_failures(5, backoff);
        Failsafe(failsafe::Config::new().failure_policy(policy).build())
    }

    fn call(&self) -> Self::Out {
        failsafe::CircuitBreaker::call(&self.0, || operation(true))
    }

    fn fail(&self) {
        let _ = failsafe::CircuitBreaker::call(&self.0, || operation(false));
    }

    fn rejects(&self) -> bool {
        matches!(self.call(), Err(failsafe::Error::Rejected))
    }
}

/// recloser with its defaults.
#[derive(Debug)]
pub(crate) struct Recloser(recloser::Recloser);

impl Subject for Recloser {
    const NAME: &'static str = "recloser";
    const FAILURES_TO_TRIP: usize = 101;
    type Out = Result<u64, recloser::Error<()>>;

    fn closed() -> Self {
        Recloser(recloser::Recloser::default())
    }

    fn long_open() -> Self {
        Recloser(recloser::Recloser::custom().open_wait(LONG_OPEN).build())
    }

    fn call(&self) -> Self::Out {
        self.0.call(|| operation(true))
    }

    fn fail(&self) {
        let _ = self.0.call(|| operation(false));
    }

    fn rejects(&self) -> bool {
        matches!(self.call(), Err(recloser::Error::Rejected))
    }
}

/// breaker's `standard` configuration. Its `call` is an `async fn`; the future it returns
/// around an already-ready operation completes on its first poll, which is all the bench
/// does (no runtime; a no-op waker made once).
#[derive(Debug)]
pub(crate) struct BreakerCrate(breaker::CircuitBreaker, Waker);

impl Subject for BreakerCrate {
    const NAME: &'static str = "breaker";
    const FAILURES_TO_TRIP: usize = 5;
    type Out = Result<u64, breaker::CircuitBreakerError<()>>;

    fn closed() -> Self {
        BreakerCrate(
            breaker::CircuitBreaker::new(breaker::CircuitBreakerConfig::standard()),
            noop_waker(),
        )
    }

    fn long_open() -> Self {
        let mut config = breaker::CircuitBreakerConfig::standard();
        config.backoff = breaker::BackoffStrategy::Fixed(LONG_OPEN);
        BreakerCrate(breaker::CircuitBreaker::new(config), noop_waker())
    }

    fn call(&self) -> Self::Out {
        poll_once(&self.1, self.0.call(|| std::future::ready(operation(true))))
    }

    fn fail(&self) {
        let _ = poll_once(
            &self.1,
            self.0.call(|| std::future::ready(operation(false))),
        );
    }

    fn rejects(&self) -> bool {
        matches!(
            self.call(),
            Err(breaker::CircuitBreakerError::CircuitOpen | breaker::CircuitBreakerError::Rejected)
        )
    }
}

/// Polls a future that never waits, once, and returns its output.
#[inline(always)]
pub(crate) fn poll_once<F: Future>(waker: &Waker, future: F) -> F::Output {
    match pin!(future).poll(&mut Context::from_waker(waker)) {
        Poll::Ready(output) => output,
        Poll::Pending => unreachable!("the operation is ready at once"),
    }
}

/// A waker that does nothing (`Waker::noop` needs Rust 1.85; the crate's MSRV is 1.75).
pub(crate) fn noop_waker() -> Waker {
    struct Noop;
    impl Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }
    Waker::from(Arc::new(Noop))
}
