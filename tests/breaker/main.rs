//! The breaker as users call it: sync and async calls, permits, callbacks and observers, half-open, health checks, manual control, panics, snapshots, policies that time calls, dry run, the pool.
//!
//! One test binary for the area (its files are modules), so the suite links a few binaries
//! rather than one per file.

// The health-check helpers the crates share (the core depends on no crate of the family).
#[allow(unreachable_pub)]
#[path = "../../crates/test-support/src/checks.rs"]
mod checks;
#[path = "../support/mod.rs"]
mod support;

mod api;
mod async_calls;
mod callbacks;
mod dry_run;
mod ema_breaker;
mod fatal;
mod forwarders;
mod half_open;
mod health_check;
mod jitter;
mod lane_differential;
mod lane_failures;
mod lane_slow_calls;
mod lane_slow_calls_probes;
mod manual;
mod origin;
mod outlier;
mod panics;
mod pool;
mod pool_call;
mod pool_hang;
mod pool_hedge;
mod pool_judgement;
mod pool_limit;
mod pool_picks;
mod pool_retry;
mod pool_slow_start;
mod probe_timeout;
mod slow_calls;
mod slow_dependency;
mod snapshot;
mod throttle;
mod uncounted;
