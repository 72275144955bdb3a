//! `pool_scale_1t`: the pool's pick and report, and its tower service, against tower's
//! power-of-two-choices balancer, on 3, 100 and 1 000 endpoints.

use std::collections::HashSet;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion};
use lazybreaker::pool::Pool;
use lazybreaker::{Breaker, Rejected};
use lazybreaker_tower::PoolService;
use tower::balance::p2c;
use tower::discover::ServiceList;
use tower::load::{CompleteOnResponse, PendingRequests};
use tower::Service;

use super::exec::{block_on, call, one_thread_calls, thread_waker, Driver};
use super::services::Inner;
use crate::support::{group, operation};

/// The pool and balancer sizes.
pub(crate) const SIZES: [usize; 3] = [3, 100, 1_000];

/// `n` endpoints' keys: `10.0.0.1:80` onwards, 250 to a /24.
fn keys(n: usize) -> Vec<SocketAddr> {
    (0..n)
        .map(|i| {
            let (hi, lo) = ((i / 250) as u8, (i % 250) as u8 + 1);
            SocketAddr::from((Ipv4Addr::new(10, 0, hi, lo), 80))
        })
        .collect()
}

/// The default pool (power of two choices, gobreaker's defaults per endpoint) of `n`
/// endpoints, checked to pick every one of them.
fn pool(n: usize) -> Pool<SocketAddr> {
    let pool = Pool::new(|_: &SocketAddr| Breaker::builder());
    pool.set(keys(n));
    assert_eq!(pool.len(), n);
    let mut seen = HashSet::new();
    for _ in 0..64 * n {
        let pick = pool.pick().expect("a closed pool picks");
        seen.insert(*pick.key());
        pick.success();
    }
    assert_eq!(seen.len(), n, "pool of {n}: some endpoints never picked");
    pool
}

/// tower's power-of-two-choices balancer over `n` inner services, each counting its requests
/// in flight, as `pool_service_1t` builds it.
fn tower_p2c(n: usize) -> p2c::Balance<ServiceList<Vec<PendingRequests<Inner>>>, bool> {
    let services = (0..n)
        .map(|_| PendingRequests::new(Inner, CompleteOnResponse::default()))
        .collect::<Vec<_>>();
    p2c::Balance::new(ServiceList::new(services))
}

/// `iters` tower calls of `service` in one loop, as the bench `name/n`, after `64 n` calls
/// outside the measurement that must succeed (which fill the balancer's ready set and the
/// pool service's map of inner services).
fn one_thread<S: Service<bool>>(
    g: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    n: usize,
    mut service: S,
) {
    let waker = thread_waker();
    for _ in 0..64 * n {
        let result = block_on(&waker, call(&mut service, true));
        assert!(result.is_ok(), "{name}/{n}: a call failed");
    }
    g.bench_function(BenchmarkId::new(name, n), |b| {
        b.iter_custom(|iters| one_thread_calls(iters, &mut service, true, Driver::Park))
    });
}

/// `pool_scale_1t`: one thread, every breaker closed, the call succeeds, for each of
/// [`SIZES`]: `lazybreaker/N`: `pool.pick()`, `operation(true)`, `pick.success()` on the
/// default pool of N endpoints (as `pool_pick_1t`'s `lazybreaker`); `lazybreaker_service/N`:
/// a tower call through `PoolService` over that pool (as `pool_service_1t`'s
/// `lazybreaker`); `tower_p2c/N`: a tower call through tower's balancer over N
/// `PendingRequests<Inner>` (as `pool_service_1t`'s `tower_p2c`).
pub(crate) fn scale_1t(c: &mut Criterion) {
    let mut g = group(c, "pool_scale_1t");
    for n in SIZES {
        let picked = Arc::new(pool(n));
        g.bench_function(BenchmarkId::new("lazybreaker", n), |b| {
            b.iter(|| {
                let pick = picked.pick()?;
                let result = operation(true);
                pick.success();
                Ok::<_, Rejected>(result)
            })
        });
        assert_eq!(
            picked.stats().no_endpoint,
            0,
            "pool of {n}: a pick was rejected"
        );
        let service = PoolService::new(Arc::clone(&picked), |_: &SocketAddr| Inner);
        one_thread(&mut g, "lazybreaker_service", n, service);
        assert_eq!(
            picked.stats().no_endpoint,
            0,
            "pool of {n}: a pick was rejected"
        );
        one_thread(&mut g, "tower_p2c", n, tower_p2c(n));
    }
    g.finish();
}
