//! Trip policies on the closed, successful path. lazybreaker only.

use std::time::Duration;

use criterion::Criterion;
use lazybreaker::policy::{CallResult, Ema, EmaConfig, SlowCalls, TripPolicy};
use lazybreaker::Breaker;

use crate::support::{group, operation};

/// `SlowCalls` without its threshold: the same decision on the same counts, the same clock
/// reads and lock, but no call tracked in flight and nothing counted slow. The difference
/// to `slow_calls` is what the in-flight tracking costs.
#[derive(Debug)]
struct Untracked(SlowCalls);

impl TripPolicy for Untracked {
    fn on_result(&mut self, result: &CallResult<'_>) -> bool {
        self.0.on_result(result)
    }
    fn capabilities(&self) -> lazybreaker::policy::Capabilities {
        // The clock `SlowCalls` gets (the coarse one, for a threshold of a second).
        lazybreaker::policy::Capabilities::default()
            .needs_latency(true)
            .latency_resolution(self.0.threshold() / 100)
    }
}

/// `policies_1t`: the default consecutive-failures policy against brpc's EMA policy with
/// brpc's defaults, which needs each call's latency and so reads the clock at admission as
/// well as at the verdict; and the slow-call policy with and without its in-flight tracking.
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
    let slow = || SlowCalls::new(Duration::from_secs(1), 0.5, 20).expect("valid");
    let tracked = Breaker::builder().policy(slow()).build();
    g.bench_function("slow_calls", |b| {
        b.iter(|| tracked.execute(|| operation(true)))
    });
    let untracked = Breaker::builder().policy(Untracked(slow())).build();
    g.bench_function("slow_calls_untracked", |b| {
        b.iter(|| untracked.execute(|| operation(true)))
    });
    g.finish();
}
