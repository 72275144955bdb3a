//! Trip policies on the closed, successful path. lazybreaker only.

use criterion::Criterion;
use lazybreaker::policy::{Ema, EmaConfig};
use lazybreaker::Breaker;

use crate::support::{group, operation};

/// `policies_1t`: the default consecutive-failures policy against brpc's EMA policy with
/// brpc's defaults, which needs each call's latency and so reads the clock at admission as
/// well as at the verdict.
pub(crate) fn success_1t(c: &mut Criterion) {
    let mut g = group(c, "policies_1t");
    let consecutive = Breaker::builder().build();
    g.bench_function("consecutive", |b| {
        b.iter(|| consecutive.execute(|| operation(true)))
    });
    let ema = Breaker::builder()
        .policy(Ema::new(EmaConfig::default()).expect("brpc's defaults are valid"))
        .build();
    g.bench_function("ema", |b| b.iter(|| ema.execute(|| operation(true))));
    g.finish();
}
