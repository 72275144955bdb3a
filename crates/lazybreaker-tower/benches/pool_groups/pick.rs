//! `pool_pick_1t`: the pool's own pick and report, without tower.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;

use criterion::Criterion;
use lazybreaker::pool::{Balance, Pool};
use lazybreaker::{Breaker, Rejected};

use super::services::{bulkhead_pool, hedging_pool, judging_pool, limited_pool, pool, ENDPOINTS};
use crate::support::{group, operation};

/// One successful call through `pool`: a pick, the operation, the success reported.
#[inline]
fn call(pool: &Pool<SocketAddr>) -> Result<Result<u64, ()>, Rejected> {
    let pick = pool.pick()?;
    let result = operation(true);
    pick.success();
    Ok(result)
}

/// Checks that picks from `pool` succeed and reach every endpoint (outside the measurement):
/// a pool that kept picking one endpoint would measure less than a balancer.
fn spreads(pool: &Pool<SocketAddr>, name: &str) {
    let mut seen = HashSet::new();
    for _ in 0..64 * ENDPOINTS {
        let pick = pool.pick().expect("a closed pool picks");
        seen.insert(*pick.key());
        pick.success();
    }
    assert_eq!(seen.len(), ENDPOINTS, "{name}: some endpoints never picked");
}

/// `pool_pick_1t`: one thread, 16 endpoints, every breaker closed. `lazybreaker`: the power
/// of two choices (the default); `lazybreaker_round_robin`: `Balance::RoundRobin`; `bare`: one
/// breaker alone, admitted as the pool admits an endpoint (`allow_owned`), for what choosing
/// adds; `lazybreaker_judging`: the default pool with outlier detection (both detectors)
/// and a deadline, for what judging adds (a clock read per pick, one at each report);
/// `lazybreaker_hedging`: the default pool with a hedge and slow start, neither due (one
/// load each per pick); `lazybreaker_limited`: the default pool with `Aimd` limits per
/// endpoint (a place taken and given back, a latency sample: two clock reads);
/// `lazybreaker_bulkhead`: a `Fixed` limit (a place, no clock read).
pub(crate) fn pick_1t(c: &mut Criterion) {
    let mut g = group(c, "pool_pick_1t");
    for (name, pool) in [
        ("lazybreaker", pool(Balance::PowerOfTwo)),
        ("lazybreaker_round_robin", pool(Balance::RoundRobin)),
        ("lazybreaker_judging", judging_pool()),
        ("lazybreaker_hedging", hedging_pool()),
        ("lazybreaker_limited", limited_pool()),
        ("lazybreaker_bulkhead", bulkhead_pool()),
    ] {
        spreads(&pool, name);
        g.bench_function(name, |b| b.iter(|| call(&pool)));
        assert_eq!(pool.stats().no_endpoint, 0, "{name}: a pick was rejected");
        assert_eq!(
            pool.stats().outliers_detected,
            0,
            "{name}: an endpoint judged"
        );
    }
    let breaker = Arc::new(Breaker::builder().build());
    g.bench_function("bare", |b| {
        b.iter(|| {
            let permit = breaker.allow_owned()?;
            let result = operation(true);
            permit.success();
            Ok::<_, Rejected>(result)
        })
    });
    g.finish();
}
