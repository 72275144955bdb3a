//! Retry budgets against tower's: a deposit per call and a withdrawal every tenth (a tenth
//! of the calls failing and asking for a retry), on Finagle's defaults (20 %, 10 retries a
//! second, a 10 s ttl).
//!
//! | group | bench | what one call is |
//! |---|---|---|
//! | `retry_budget_1t` | `lazybreaker` ([`RetryBudget`] on its coarse clock), `tower_tps_budget` (tower 0.5's `TpsBudget::new(10 s, 10, 0.2)`) | one thread |
//! | `retry_budget_2t` | the same | two threads on one budget (`support::contended`) |

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::Criterion;
use lazybreaker::retry::RetryBudget;
use tower::retry::budget::{Budget, TpsBudget};

use crate::support::{contended, group, group_2t};

/// A budget as the benches call it.
trait Subject: Sync {
    fn deposit(&self);
    fn withdraw(&self) -> bool;
}

impl Subject for RetryBudget {
    fn deposit(&self) {
        RetryBudget::deposit(self);
    }
    fn withdraw(&self) -> bool {
        self.try_withdraw()
    }
}

impl Subject for TpsBudget {
    fn deposit(&self) {
        Budget::deposit(self);
    }
    fn withdraw(&self) -> bool {
        Budget::withdraw(self)
    }
}

/// One call: a deposit, and every tenth a withdrawal.
fn call<S: Subject>(budget: &S, calls: &AtomicU64) -> bool {
    budget.deposit();
    calls.fetch_add(1, Ordering::Relaxed) % 10 == 9 && budget.withdraw()
}

fn subjects() -> (RetryBudget, TpsBudget) {
    (
        RetryBudget::default(),
        TpsBudget::new(Duration::from_secs(10), 10, 0.2),
    )
}

/// `retry_budget_1t`.
pub(crate) fn one_thread(c: &mut Criterion) {
    let mut g = group(c, "retry_budget_1t");
    let (lazy, tower) = subjects();
    let calls = AtomicU64::new(0);
    g.bench_function("lazybreaker", |b| b.iter(|| call(&lazy, &calls)));
    g.bench_function("tower_tps_budget", |b| b.iter(|| call(&tower, &calls)));
    g.finish();
}

/// `retry_budget_2t`.
pub(crate) fn two_threads(c: &mut Criterion) {
    let mut g = group_2t(c, "retry_budget_2t");
    let (lazy, tower) = subjects();
    let calls = AtomicU64::new(0);
    g.bench_function("lazybreaker", |b| {
        b.iter_custom(|iters| contended(iters, || call(&lazy, &calls)))
    });
    g.bench_function("tower_tps_budget", |b| {
        b.iter_custom(|iters| contended(iters, || call(&tower, &calls)))
    });
    g.finish();
}
