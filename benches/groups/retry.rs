//! What retries cost a call that needs none: a closed call through the default breaker,
//! bare, with a deposit in a [`RetryBudget`] (what every retrying layer does per call), and
//! started as a [`Retry`]'s call (the deposit, the call's deadline). Lazybreaker's own
//! variants (no peer: the peers' budgets are compared in the tower crate's bench).
//!
//! | group | bench | what one call is |
//! |---|---|---|
//! | `ratio_retry_closed_1t` | `bare`, `budget`, `retry` | one thread, `operation(true)` |
//! | `ratio_retry_closed_2t` | the same | two threads on one breaker and one budget (`support::contended`) |

use criterion::Criterion;
use lazybreaker::retry::{Retry, RetryBudget};
use lazybreaker::Breaker;
use std::hint::black_box;
use std::time::Duration;

use crate::support::{contended, group, group_2t, operation};

/// A retry on the default budget, deadline 300 ms.
fn retry() -> Retry {
    Retry::new(3).expect("valid").seed(1)
}

/// `ratio_retry_closed_1t`.
pub(crate) fn closed_1t(c: &mut Criterion) {
    let mut g = group(c, "ratio_retry_closed_1t");
    let breaker = Breaker::builder().build();
    g.bench_function("bare", |b| b.iter(|| breaker.execute(|| operation(true))));
    let budget = RetryBudget::default();
    g.bench_function("budget", |b| {
        b.iter(|| {
            budget.deposit();
            breaker.execute(|| operation(true))
        })
    });
    let retry = retry();
    let within = Some(Duration::from_millis(300));
    g.bench_function("retry", |b| {
        b.iter(|| {
            let attempts = retry.start(within);
            black_box(&attempts);
            breaker.execute(|| operation(true))
        })
    });
    assert!(budget.deposits() > 0 && retry.retry_budget().deposits() > 0);
    g.finish();
}

/// `ratio_retry_closed_2t`.
pub(crate) fn closed_2t(c: &mut Criterion) {
    let mut g = group_2t(c, "ratio_retry_closed_2t");
    let breaker = Breaker::builder().build();
    g.bench_function("bare", |b| {
        b.iter_custom(|iters| contended(iters, || breaker.execute(|| operation(true))))
    });
    let budget = RetryBudget::default();
    g.bench_function("budget", |b| {
        b.iter_custom(|iters| {
            contended(iters, || {
                budget.deposit();
                breaker.execute(|| operation(true))
            })
        })
    });
    let retry = retry();
    let within = Some(Duration::from_millis(300));
    g.bench_function("retry", |b| {
        b.iter_custom(|iters| {
            contended(iters, || {
                let attempts = retry.start(within);
                black_box(&attempts);
                breaker.execute(|| operation(true))
            })
        })
    });
    g.finish();
}
