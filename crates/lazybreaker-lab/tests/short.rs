//! The lab's short mode, as CI runs it: three scenarios (an answer that fails, no answer, no
//! connection), four seconds each, every strategy, real processes on 127.0.0.1. It asserts
//! only what must hold on any machine, however loaded: the load is open (every call due is
//! made), no call outlives its deadline by more than a second, and lazybreaker (per node and
//! as a pool) isolates a failing or refusing node and keeps the calls off it. The figures
//! themselves are the full run's, by hand (`cargo run -p lazybreaker-lab --release`).

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use lazybreaker_lab::report::Row;

/// Runs the short mode (bounded: 5 minutes) and reads its rows back.
fn short_run() -> Vec<Row> {
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
        if started.elapsed() > Duration::from_secs(300) {
            let _ = child.kill();
            panic!("the short mode took more than 5 minutes");
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
    let strategies = lazybreaker_lab::strategy::NAMES.len() - usize::from(!haproxy);
    assert_eq!(rows.len(), 3 * strategies, "every scenario, every strategy");
    for r in &rows {
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
            let r = row(&rows, scenario, strategy);
            assert!(r.isolate_s.is_some(), "{scenario} / {strategy}: isolated");
            assert!(
                r.sick_after_isolation.unwrap_or(u64::MAX) < 20,
                "{scenario} / {strategy}: {r:?}"
            );
            let unprotected = row(&rows, scenario, "no breaker");
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
        row(&rows, "hang", "lazybreaker pool"),
        row(&rows, "hang", "no breaker"),
    );
    assert!(pool.success > unprotected.success, "{pool:?}");
    assert!(pool.isolate_s.is_some(), "{pool:?}");
}
