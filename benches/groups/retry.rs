//! What retries cost a call that needs none, through the default breaker: bare; in a retry
//! loop whose [`Retry`] deposits each call in a [`RetryBudget`] of its own (`budget`), with
//! a deadline too (`deadline`); and in the same loop on a budget fed by the breaker
//! ([`RetryBudget::fed_by`], `fed`: the breaker's own count of calls is the budget's,
//! read when a retry asks). Lazybreaker's own variants (no peer: the peers' budgets are
//! compared in the tower crate's bench).
//!
//! | group | bench | what one call is |
//! |---|---|---|
//! | `ratio_retry_closed_1t` | `bare`, `budget`, `deadline`, `fed` | one thread, `operation(true)` |
//! | `ratio_retry_closed_2t` | the same | two threads on one breaker and one budget (`support::contended`) |

use criterion::Criterion;
use lazybreaker::retry::{Cause, Next, Retry, RetryBudget};
use lazybreaker::{Breaker, Error};
use std::sync::Arc;
use std::time::Duration;

use crate::support::{contended, group, group_2t, operation};

/// A retry on `budget`, three attempts.
fn retry(budget: RetryBudget) -> Retry {
    Retry::new(3).expect("valid").seed(1).budget(budget)
}

/// A call with retries, as a caller writes it around a breaker (no wait: a retry here
/// would go at once; none is made, every call succeeding).
#[inline]
fn call(retry: &Retry, within: Option<Duration>, breaker: &Breaker) -> Result<u64, Error<()>> {
    let mut attempts = retry.start(within);
    loop {
        match breaker.execute(|| operation(true)) {
            Err(Error::Inner(e)) => match retry.next(&mut attempts, Cause::Failure) {
                Next::Retry { .. } => continue,
                Next::Stop(_) => return Err(Error::Inner(e)),
            },
            other => return other,
        }
    }
}

/// The variants: name, retry (none for the bare call), deadline.
fn variants(breaker: &Arc<Breaker>) -> [(&'static str, Option<Retry>, Option<Duration>); 4] {
    let deadline = Some(Duration::from_millis(300));
    [
        ("bare", None, None),
        ("budget", Some(retry(RetryBudget::default())), None),
        ("deadline", Some(retry(RetryBudget::default())), deadline),
        (
            "fed",
            Some(retry(RetryBudget::default().fed_by(breaker))),
            None,
        ),
    ]
}

/// `ratio_retry_closed_1t`.
pub(crate) fn closed_1t(c: &mut Criterion) {
    let mut g = group(c, "ratio_retry_closed_1t");
    let breaker = Arc::new(Breaker::builder().build());
    for (name, retry, within) in variants(&breaker) {
        match &retry {
            None => g.bench_function(name, |b| b.iter(|| breaker.execute(|| operation(true)))),
            Some(retry) => g.bench_function(name, |b| b.iter(|| call(retry, within, &breaker))),
        };
        if let Some(retry) = retry {
            assert_eq!(retry.stats().retries, 0, "{name}: every call succeeds");
        }
    }
    g.finish();
}

/// `ratio_retry_closed_2t`.
pub(crate) fn closed_2t(c: &mut Criterion) {
    let mut g = group_2t(c, "ratio_retry_closed_2t");
    let breaker = Arc::new(Breaker::builder().build());
    for (name, retry, within) in variants(&breaker) {
        match &retry {
            None => g.bench_function(name, |b| {
                b.iter_custom(|iters| contended(iters, || breaker.execute(|| operation(true))))
            }),
            Some(retry) => g.bench_function(name, |b| {
                b.iter_custom(|iters| contended(iters, || call(retry, within, &breaker)))
            }),
        };
    }
    g.finish();
}
