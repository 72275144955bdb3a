//! Replay and recording: `cargo bench -p lazybreaker-replay --bench replay`, see
//! `benches/README.md`.
//!
//! | group | bench | what one element is |
//! |---|---|---|
//! | `replay_record_1t` | bare | `breaker.execute(operation)`, gobreaker's defaults, closed |
//! | `replay_record_1t` | recorder_off | the same through `Recorder::execute`, the recorder off |
//! | `replay_record_1t` | recorder_on | the same, recording (a ring of 4096 calls, full: each call overwrites one) |
//! | `replay_record_1t` | recorder_on_keyed | `begin()`, the call, `end_keyed("api.example.com", ..)` |
//! | `replay_calls` | consecutive, ratio_rolling, ema | one call of a 100,000-call trace replayed through one candidate |
//! | `replay_calls` | ten_candidates | one call of the trace replayed through each of ten candidates (`replay_all`, on every core) |
//!
//! The trace: 200 calls a second, 1 % failures, an outage of 30 s and a blip; latencies 1 to
//! 60 ms, so that calls overlap.

#[allow(dead_code)]
use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use lazybreaker::config::{PolicyConfig, Settings, SettingsMap};
use lazybreaker::policy::{EmaConfig, Outcome};
use lazybreaker::{Breaker, Knobs};
use lazybreaker_replay::{replay, replay_all, Recorder, Trace};

use lazybreaker_bench_support as support;

lazybreaker_bench_support::local_operation!();

const CALLS: u64 = 100_000;

fn trace() -> Trace {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut trace = Trace::new();
    for i in 0..CALLS {
        let start = i * 5; // 200 a second
        let down = (100_000..130_000).contains(&start) || (300_000..302_000).contains(&start);
        let fails = down || next() % 100 == 0;
        let outcome = if fails {
            Outcome::Failure
        } else {
            Outcome::Success
        };
        let latency = 1 + next() % 60;
        trace.push(
            Duration::from_millis(start),
            Duration::from_millis(latency),
            outcome,
        );
    }
    trace
}

fn candidate(policy: PolicyConfig, rolling: bool) -> Settings {
    let (interval, bucket_period) = if rolling {
        (Duration::from_secs(10), Duration::from_secs(1))
    } else {
        (Duration::ZERO, Duration::ZERO)
    };
    Settings {
        knobs: Knobs {
            interval,
            bucket_period,
            timeout: Duration::from_secs(5),
            ..Knobs::default()
        },
        policy,
        ..Settings::default()
    }
}

fn record_1t(c: &mut Criterion) {
    let mut group = support::group(c, "replay_record_1t");
    let b = Breaker::builder().build();
    group.bench_function("bare", |bench| {
        bench.iter(|| black_box(b.execute(|| operation(true))))
    });
    let off = Recorder::new(4096);
    group.bench_function("recorder_off", |bench| {
        bench.iter(|| black_box(off.execute(&b, || operation(true))))
    });
    let on = Recorder::new(4096);
    on.start();
    group.bench_function("recorder_on", |bench| {
        bench.iter(|| black_box(on.execute(&b, || operation(true))))
    });
    group.bench_function("recorder_on_keyed", |bench| {
        bench.iter(|| {
            let call = on.begin();
            let r = black_box(b.execute(|| operation(true)));
            if let Some(call) = call {
                call.end_keyed("api.example.com", Outcome::Success);
            }
            r
        })
    });
    group.finish();
}

fn calls(c: &mut Criterion) {
    let trace = trace();
    let mut group = c.benchmark_group("replay_calls");
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(500));
    group.throughput(Throughput::Elements(CALLS));
    let one = [
        (
            "consecutive",
            candidate(PolicyConfig::ConsecutiveFailures { threshold: 5 }, false),
        ),
        (
            "ratio_rolling",
            candidate(
                PolicyConfig::FailureRatio {
                    ratio: 0.5,
                    min_requests: 20,
                },
                true,
            ),
        ),
        (
            "ema",
            candidate(PolicyConfig::Ema(EmaConfig::default()), false),
        ),
    ];
    for (name, settings) in &one {
        group.bench_function(*name, |bench| {
            bench.iter(|| black_box(replay(&trace, settings)))
        });
    }
    let ten: SettingsMap = (0..10u64)
        .map(|i| {
            let settings = match i % 3 {
                0 => candidate(
                    PolicyConfig::ConsecutiveFailures { threshold: 3 + i },
                    false,
                ),
                1 => candidate(
                    PolicyConfig::FailureRatio {
                        ratio: 0.2 + 0.05 * i as f64,
                        min_requests: 20,
                    },
                    true,
                ),
                _ => candidate(PolicyConfig::Ema(EmaConfig::default()), false),
            };
            (format!("c{i}"), settings)
        })
        .collect();
    group.throughput(Throughput::Elements(CALLS * 10));
    group.bench_function("ten_candidates", |bench| {
        bench.iter(|| black_box(replay_all(&trace, &ten).unwrap()))
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = support::criterion();
    targets = record_1t, calls,
}
criterion_main!(benches);
