//! One run: fresh replicas, one strategy, one scenario's timeline, open-loop load. Calls
//! are sent at a fixed rate whatever came back (a slow dependency cannot slow the load down,
//! so nothing is omitted), and each call's latency is measured from when it was due. The
//! replicas count the attempts they receive by the due time of the call they belong to.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::client::{Answer, Http, Sent};
use crate::replicas::Replicas;
use crate::scenario::{
    Fault, Hit, Scenario, Timeline, QUEUE_CAPACITY, RESTART_DOWN, STORM_CAPACITY,
};
use crate::strategy::{self, HaProxy, Strategy};
use crate::upstream::Mode;

/// One call as the client saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// When it was due, from the run's start.
    pub at: Duration,
    /// From when it was due to its answer (or its deadline).
    pub latency: Duration,
    pub answer: Answer,
    /// The replica it went to, when known.
    pub node: Option<usize>,
}

/// What a run is given.
#[derive(Debug, Clone)]
pub struct Setup {
    /// This binary, to start the replicas from.
    pub exe: std::path::PathBuf,
    pub replicas: usize,
    /// Calls per second.
    pub rate: u32,
    pub deadline: Duration,
    pub timeline: Timeline,
    pub seed: u64,
    /// Where HAProxy's configuration is written.
    pub dir: std::path::PathBuf,
}

/// What one run measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// The calls, in the order they were due.
    pub samples: Vec<Sample>,
    /// The attempts the replicas received, per
    /// [`ATTEMPT_BIN`](crate::upstream::ATTEMPT_BIN) of the due times of their calls.
    pub attempts: Vec<u64>,
}

/// Runs `scenario` against `strategy_name`.
pub async fn run(setup: &Setup, scenario: &Scenario, strategy_name: &str) -> std::io::Result<Run> {
    let mut replicas = Replicas::start(setup.exe.clone(), setup.replicas, setup.seed).await?;
    let http = Http::new(setup.deadline);
    // A storming replica serves a share of its fair share of the load.
    let capacity =
        (f64::from(setup.rate) / setup.replicas.max(1) as f64 * STORM_CAPACITY).round() as u64;
    // A queueing replica's workers serve a share of its fair share.
    let queue_capacity =
        (f64::from(setup.rate) / setup.replicas.max(1) as f64 * QUEUE_CAPACITY).round() as u64;
    let strategy: Arc<dyn Strategy> = match strategy_name {
        name if HaProxy::NAMES.contains(&name) => {
            let dir = haproxy_dir(&setup.dir);
            Arc::new(HaProxy::start(http, &replicas.addrs(), &dir, name).await?)
        }
        name => Arc::from(
            strategy::build(name, &http, &replicas.addrs())
                .ok_or_else(|| std::io::Error::other(format!("no strategy {name:?}")))?,
        ),
    };
    let samples = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let timeline = setup.timeline;
    let hit: Vec<usize> = match scenario.hit {
        Hit::One => vec![0],
        Hit::All => (0..replicas.len()).collect(),
    };
    let fault = scenario.fault;
    // The fault and the recovery, on the timeline, beside the load.
    let faults = tokio::spawn(async move {
        tokio::time::sleep_until(start + timeline.fault_at).await;
        for &node in &hit {
            let done = match fault {
                Fault::Mode(mode) => replicas.set(node, mode).await,
                Fault::Refuse => {
                    replicas.kill(node).await;
                    Ok(())
                }
                Fault::FullQueue => replicas.blackhole(node).await,
                Fault::Storm => replicas.storm(node, capacity).await,
                Fault::Queueing => {
                    replicas
                        .set_with(node, Mode::Queueing, queue_capacity)
                        .await
                }
                Fault::ColdRestart => {
                    replicas.kill(node).await;
                    Ok(())
                }
            };
            if let Err(e) = done {
                eprintln!("fault on replica {node}: {e}");
            }
        }
        if fault == Fault::ColdRestart {
            tokio::time::sleep_until(start + timeline.fault_at + RESTART_DOWN).await;
            for &node in &hit {
                if let Err(e) = replicas.restart_as(node, Mode::Cold).await {
                    eprintln!("cold restart of replica {node}: {e}");
                }
            }
        }
        tokio::time::sleep_until(start + timeline.recover_at).await;
        for &node in &hit {
            let done = match fault {
                Fault::Mode(_) | Fault::Storm | Fault::Queueing | Fault::ColdRestart => {
                    replicas.set(node, Mode::Healthy).await
                }
                Fault::Refuse | Fault::FullQueue => replicas.restart(node).await,
            };
            if let Err(e) = done {
                eprintln!("recovery of replica {node}: {e}");
            }
        }
        replicas
    });
    let period = Duration::from_secs(1) / setup.rate.max(1);
    let mut calls = JoinSet::new();
    let bound = setup.deadline + Duration::from_millis(500);
    for i in 0.. {
        let at = period * i;
        if at >= timeline.end {
            break;
        }
        let due = start + at;
        tokio::time::sleep_until(due).await;
        let (strategy, samples) = (Arc::clone(&strategy), Arc::clone(&samples));
        calls.spawn(async move {
            // The strategy keeps the deadline; this bound only catches a strategy that
            // does not (counted as a timeout, at the bound).
            let sent = tokio::time::timeout(bound, strategy.call(at))
                .await
                .unwrap_or(Sent {
                    answer: Answer::Timeout,
                    node: None,
                });
            let sample = Sample {
                at,
                latency: due.elapsed(),
                answer: sent.answer,
                node: sent.node,
            };
            if let Ok(mut samples) = samples.lock() {
                samples.push(sample);
            }
        });
    }
    while calls.join_next().await.is_some() {}
    let mut replicas = faults.await.map_err(std::io::Error::other)?;
    replicas.stop().await;
    drop(strategy);
    let mut samples = std::mem::take(
        &mut *samples
            .lock()
            .map_err(|_| std::io::Error::other("poisoned"))?,
    );
    samples.sort_by_key(|s| s.at);
    Ok(Run {
        samples,
        attempts: replicas.attempts().to_vec(),
    })
}

fn haproxy_dir(dir: &Path) -> std::path::PathBuf {
    dir.join("haproxy")
}
