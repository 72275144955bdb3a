//! The lab's short mode, as CI runs it: four scenarios (an answer that fails, no answer, no
//! connection, a retry storm), four seconds each, every strategy, real processes on
//! 127.0.0.1. It asserts only what must hold on any machine, however loaded: the load is open
//! (every call due is made), no call outlives its deadline by more than a second, lazybreaker
//! (per node and as a pool) isolates a failing or refusing node and keeps the calls off it,
//! the attempts the replicas count are consistent with each strategy's retries, and the
//! pool's retries stay within their budget in a storm. The figures themselves are the full
//! run's, by hand (`cargo run -p lazybreaker-lab --release`).

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use lazybreaker_lab::report::Row;

/// The short mode's rows, run once for every test of this file.
fn short_run() -> &'static [Row] {
    static ROWS: OnceLock<Vec<Row>> = OnceLock::new();
    ROWS.get_or_init(run_short)
}

/// Runs the short mode (bounded: 10 minutes, a guard against a hang) and reads its rows
/// back.
fn run_short() -> Vec<Row> {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("lab-short");
    let mut child = Command::new(env!("CARGO_BIN_EXE_lazybreaker-lab"))
        .args(["--short", "--out"])
        .arg(&out)
        .spawn()
        .expect("the lab starts");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("the lab runs") {
            break status;
        }
        if started.elapsed() > Duration::from_secs(600) {
            let _ = child.kill();
            panic!("the short mode took more than 10 minutes");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(status.success(), "the lab failed: {status}");
    let json = std::fs::read_to_string(out.join("results.json")).expect("results.json");
    assert!(out.join("lab.html").exists(), "the page is written");
    serde_json::from_str(&json).expect("rows")
}

fn row<'a>(rows: &'a [Row], scenario: &str, strategy: &str) -> &'a Row {
    rows.iter()
        .find(|r| r.scenario == scenario && r.strategy == strategy)
        .unwrap_or_else(|| panic!("no row for {scenario} / {strategy}"))
}

#[test]
fn the_short_mode_protects_and_never_hangs_past_the_deadline() {
    let rows = short_run();
    let haproxy = lazybreaker_lab::strategy::HaProxy::available();
    // CI installs it (`.ci/test` says where): there, its rows must be in.
    assert!(
        haproxy || std::env::var_os("LAZYBREAKER_HAPROXY").is_none(),
        "LAZYBREAKER_HAPROXY is set, but haproxy does not run"
    );
    let haproxies = lazybreaker_lab::strategy::HaProxy::NAMES.len();
    let strategies = lazybreaker_lab::strategy::NAMES.len() - haproxies * usize::from(!haproxy);
    assert_eq!(rows.len(), 4 * strategies, "every scenario, every strategy");
    for r in rows {
        // 200 calls/s for 4 s, whatever the answers: nothing omitted.
        assert_eq!(r.calls, 800, "{} / {}: open loop", r.scenario, r.strategy);
        // The deadline is 300 ms; the latency counts from when the call was due.
        assert!(
            r.max_ms < 1_300.0,
            "{} / {}: a call took {} ms",
            r.scenario,
            r.strategy,
            r.max_ms
        );
    }
    for strategy in ["lazybreaker per node", "lazybreaker pool"] {
        for scenario in ["errors", "refuse"] {
            let r = row(rows, scenario, strategy);
            assert!(r.isolate_ms.is_some(), "{scenario} / {strategy}: isolated");
            assert!(
                r.sick_after_isolation.unwrap_or(u64::MAX) < 20,
                "{scenario} / {strategy}: {r:?}"
            );
            let unprotected = row(rows, scenario, "no breaker");
            assert!(
                r.success > unprotected.success + 5.0,
                "{scenario} / {strategy}: {} % against {} % without a breaker",
                r.success,
                unprotected.success
            );
        }
    }
    // A node that hangs: the pool's pick avoids the calls in flight, and its breaker trips.
    let (pool, unprotected) = (
        row(rows, "hang", "lazybreaker pool"),
        row(rows, "hang", "no breaker"),
    );
    assert!(pool.success > unprotected.success, "{pool:?}");
    assert!(pool.isolate_ms.is_some(), "{pool:?}");
}

/// The most attempts a call of `strategy` makes, the first included.
fn most_attempts(strategy: &str) -> f64 {
    match strategy {
        "naive retry" => 4.0,
        "lazybreaker pool + retry" | "tower retry + p2c" | "haproxy + retries" => 3.0,
        "lazybreaker pool + hedge" | "tower hedge + p2c" => 2.0,
        _ => 1.0,
    }
}

#[test]
fn the_replicas_count_each_attempt_and_the_pool_retries_within_its_budget() {
    let rows = short_run();
    for r in rows {
        let (name, most) = (
            format!("{} / {}", r.scenario, r.strategy),
            most_attempts(&r.strategy),
        );
        assert_eq!(r.phases.len(), 3, "{name}: before, fault, after");
        assert_eq!(
            r.phases.iter().map(|p| p.calls).sum::<u64>(),
            r.calls,
            "{name}: every call in one phase"
        );
        assert_eq!(
            r.phases.iter().map(|p| p.attempts).sum::<u64>(),
            r.attempts,
            "{name}: every attempt in one phase"
        );
        for p in &r.phases {
            // A success is an attempt a replica received; no strategy makes more attempts
            // than it is set to (a strategy without retries: one a call at most).
            assert!(
                p.attempts >= p.calls - p.failed,
                "{name} / {}: {p:?}",
                p.phase
            );
            assert!(p.amplification <= most, "{name} / {}: {p:?}", p.phase);
        }
        let before = &r.phases[0];
        if before.failed == 0 {
            // Every replica healthy: each call reached one at least once.
            assert!(before.amplification >= 1.0, "{name}: {before:?}");
        }
    }
    // A one-replica fault: the pool's retry, and its hedge (a failed attempt hedged at
    // once), go elsewhere and save calls the pool alone loses.
    for scenario in ["errors", "hang", "refuse"] {
        for strategy in ["lazybreaker pool + retry", "lazybreaker pool + hedge"] {
            let (retrying, alone) = (
                row(rows, scenario, strategy),
                row(rows, scenario, "lazybreaker pool"),
            );
            assert!(
                retrying.phases[1].failed <= alone.phases[1].failed,
                "{scenario} / {strategy}: {retrying:?} against {alone:?}"
            );
        }
    }
    // A storm: the pool's retries stay within the default budget (20 % of the calls plus a
    // reserve of 10 a second over its 10 s ttl, which the short run does not outlast), where
    // the naive retry multiplies the load.
    let (pool, naive) = (
        row(rows, "storm", "lazybreaker pool + retry"),
        row(rows, "storm", "naive retry"),
    );
    let extra = pool.attempts.saturating_sub(pool.calls) as f64;
    assert!(
        extra <= 0.2 * pool.calls as f64 + 100.0,
        "storm: {} retries for {} calls",
        extra,
        pool.calls
    );
    assert!(
        naive.phases[1].amplification > pool.phases[1].amplification,
        "storm: naive {naive:?} against the pool's {pool:?}"
    );
}
