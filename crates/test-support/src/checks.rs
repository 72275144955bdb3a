//! What the health-check tests share: a check the test settles by hand, a log of the
//! changes with their origins, and a poll with a waker that does nothing. The core's tests
//! include this file by path (`tests/breaker/main.rs`: the core's package depends on no
//! crate of the family); the crates' tests use it as `lazybreaker_test_support::checks`.

#![allow(dead_code)] // each test file uses its part

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use std::time::Duration;

use lazybreaker::observe::{Observer, Origin, Transition};
use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::{Breaker, ManualClock, State};

/// The open period of the breakers under test.
pub const OPEN_FOR: Duration = Duration::from_secs(30);
/// Just past it: the open period is over (strictly after `OPEN_FOR`).
pub const PAST_OPEN: Duration = Duration::from_millis(30_001);

/// A waker that does nothing.
#[derive(Debug)]
pub struct Noop;

impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

/// Polls `f` once, with a waker that does nothing.
pub fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
    let waker = Waker::from(Arc::new(Noop));
    Pin::new(f).poll(&mut Context::from_waker(&waker))
}

/// A health check the test settles by hand: each run counts, and stays pending until the
/// test gives it a verdict (`Some(true)`, `Some(false)`) or tells it to panic.
#[derive(Debug, Clone, Default)]
pub struct Check {
    runs: Arc<AtomicUsize>,
    verdict: Arc<Mutex<Option<Verdict>>>,
}

/// What a [`Check`]'s pending run answers once settled.
#[derive(Debug, Clone, Copy)]
pub enum Verdict {
    /// The check passes.
    Pass,
    /// The check fails.
    Fail,
    /// The check panics.
    Panic,
}

impl Check {
    /// Its runs (the pending one included) answer `verdict` from now on.
    pub fn settle(&self, verdict: Verdict) {
        *self.verdict.lock().unwrap() = Some(verdict);
    }

    /// Back to no verdict: the next run stays pending until settled.
    pub fn reset(&self) {
        *self.verdict.lock().unwrap() = None;
    }

    /// The runs started so far.
    pub fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }

    /// One run: counted now, pending until settled.
    pub fn run(&self) -> impl Future<Output = bool> + Send + 'static {
        self.runs.fetch_add(1, Ordering::SeqCst);
        let verdict = Arc::clone(&self.verdict);
        std::future::poll_fn(move |_| match *verdict.lock().unwrap() {
            None => Poll::Pending,
            Some(Verdict::Pass) => Poll::Ready(true),
            Some(Verdict::Fail) => Poll::Ready(false),
            Some(Verdict::Panic) => panic!("the health check's own bug"),
        })
    }
}

/// Every change, with its origin.
#[derive(Debug, Default)]
pub struct Log(Mutex<Vec<(State, State, Origin)>>);

impl Observer for Log {
    fn on_transition(&self, t: &Transition<'_>) {
        self.0.lock().unwrap().push((t.from, t.to, t.origin));
    }
}

impl Log {
    /// The changes logged so far, taken.
    pub fn take(&self) -> Vec<(State, State, Origin)> {
        std::mem::take(&mut self.0.lock().unwrap())
    }
}

/// A breaker that trips on one failure, checked by `check`, opened and past its period.
pub fn due(check: &Check) -> (Breaker<ConsecutiveFailures, Log>, ManualClock) {
    let clock = ManualClock::new();
    let c = check.clone();
    let breaker = Breaker::builder()
        .policy(ConsecutiveFailures::new(1).unwrap())
        .timeout(OPEN_FOR)
        .clock(clock.clone())
        .observer(Log::default())
        .health_check(move || c.run())
        .build();
    breaker.allow().unwrap().failure();
    assert_eq!(breaker.state(), State::Open);
    clock.advance(PAST_OPEN);
    breaker.observer().take();
    (breaker, clock)
}
