//! `pool_service_1t`: one tower call through the pool's service, against tower's power of two
//! choices over the same inner services.

use std::net::SocketAddr;
use std::sync::Arc;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion};
use lazybreaker::pool::Balance;
use lazybreaker_tower::PoolService;
use tower::balance::p2c;
use tower::discover::ServiceList;
use tower::load::{CompleteOnResponse, PendingRequests};
use tower::Service;

use super::exec::{block_on, call, one_thread_calls, thread_waker, Driver};
use super::services::{judging_pool, pool, Inner, ENDPOINTS};
use crate::support::group;

/// `iters` calls of `service` in one loop on this thread, as the bench `name`, after a few
/// calls outside the measurement that must succeed (which also fill the per-endpoint state
/// each service keeps: the pool service's map of inner services, the balancer's ready set).
fn one_thread<S: Service<bool>>(g: &mut BenchmarkGroup<'_, WallTime>, name: &str, mut service: S) {
    let waker = thread_waker();
    for _ in 0..64 * ENDPOINTS {
        let result = block_on(&waker, call(&mut service, true));
        assert!(result.is_ok(), "{name}: a call failed");
    }
    g.bench_function(name, |b| {
        b.iter_custom(|iters| one_thread_calls(iters, &mut service, true, Driver::Park))
    });
}

/// tower's power-of-two-choices balancer over the 16 inner services, each counting its
/// requests in flight (`PendingRequests`, a request done when its response is).
fn tower_p2c() -> p2c::Balance<ServiceList<Vec<PendingRequests<Inner>>>, bool> {
    let services = (0..ENDPOINTS)
        .map(|_| PendingRequests::new(Inner, CompleteOnResponse::default()))
        .collect::<Vec<_>>();
    p2c::Balance::new(ServiceList::new(services))
}

/// `pool_service_1t`: one thread, 16 endpoints, every breaker closed, the call succeeds.
/// `lazybreaker`: `PoolService` over the pool of `pool_pick_1t` (power of two choices), each
/// endpoint's service an `Inner`; `lazybreaker_round_robin`: over the round-robin pool;
/// `lazybreaker_judging`: over the pool with outlier detection and a deadline;
/// `tower_p2c`: tower's balancer over 16 `PendingRequests<Inner>`; `bare`: one `Inner`.
pub(crate) fn service_1t(c: &mut Criterion) {
    let mut g = group(c, "pool_service_1t");
    one_thread(&mut g, "bare", Inner);
    for (name, pool) in [
        ("lazybreaker", pool(Balance::PowerOfTwo)),
        ("lazybreaker_round_robin", pool(Balance::RoundRobin)),
        ("lazybreaker_judging", judging_pool()),
    ] {
        let pool = Arc::new(pool);
        let service = PoolService::new(Arc::clone(&pool), |_: &SocketAddr| Inner);
        one_thread(&mut g, name, service);
        let stats = pool.stats();
        assert_eq!(stats.no_endpoint, 0, "{name}: a pick was rejected");
    }
    one_thread(&mut g, "tower_p2c", tower_p2c());
    g.finish();
}
