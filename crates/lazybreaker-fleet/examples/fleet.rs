//! A fleet of instances calling one dependency that fails and recovers, first each with its
//! own breaker, then sharing their breaker's decisions through Redis (or PostgreSQL).
//!
//! Run it with `cargo run -p lazybreaker-fleet --example fleet --features redis,postgres`
//! (add `-- --store postgres` for PostgreSQL). It starts its own `redis-server` (persistence
//! off, on a free loopback port, stopped at the end) if one is installed (`apt-get install
//! redis-server`, or `bash .ci/test` once, which installs it), or its own PostgreSQL server
//! (Debian's `postgresql` package; in a temporary directory, stopped at the end); without
//! one it runs the local fleet only and says how to get one. Each run takes about three
//! seconds.
//!
//! The dependency is healthy for 0.5 s, sick for 1.5 s, then healthy again. Each instance
//! calls it every 10 ms; its breaker trips after 5 failures in a row and stays open 300 ms
//! before one probe. The totals: failed calls let through to the sick dependency, probes
//! among them, and how long the fleet took to stop calling it and to recover.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lazybreaker::human;
use lazybreaker::observe::{FleetEvent, Observer, Origin, Transition};
use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::{Breaker, Builder, State};
use lazybreaker_fleet::postgres::PostgresStore;
use lazybreaker_fleet::redis::RedisStore;
use lazybreaker_fleet::{FleetStore, SharedBreaker};

const INSTANCES: usize = 5;
const HEALTHY_UNTIL: Duration = Duration::from_millis(500);
const SICK_UNTIL: Duration = Duration::from_millis(2_000);
const RUN_FOR: Duration = Duration::from_millis(3_000);
const PERIOD: Duration = Duration::from_millis(10);

/// The dependency: sick between `HEALTHY_UNTIL` and `SICK_UNTIL`; counts what reached it
/// while sick.
struct Dependency {
    start: Instant,
    failed: AtomicU64,
}

impl Dependency {
    fn sick(&self) -> bool {
        let t = self.start.elapsed();
        (HEALTHY_UNTIL..SICK_UNTIL).contains(&t)
    }

    async fn call(&self) -> Result<(), &'static str> {
        if self.sick() {
            self.failed.fetch_add(1, Ordering::Relaxed);
            Err("503")
        } else {
            Ok(())
        }
    }
}

/// One instance's timeline: its transitions, at their time since the start.
struct Timeline {
    start: Instant,
    lines: Mutex<Vec<(Duration, String)>>,
    /// (first time open, first time closed again after that)
    stopped: Mutex<(Option<Duration>, Option<Duration>)>,
    /// Probes of this instance that failed (its own half-open -> open).
    failed_probes: AtomicU64,
}

impl Observer for Timeline {
    fn on_transition(&self, t: &Transition<'_>) {
        let at = self.start.elapsed();
        let origin = if t.origin == Origin::Adopted {
            " (from the fleet)"
        } else {
            ""
        };
        self.lines
            .lock()
            .unwrap()
            .push((at, format!("{} -> {}{origin}", t.from, t.to)));
        if t.from == State::HalfOpen && t.to == State::Open && t.origin != Origin::Adopted {
            self.failed_probes.fetch_add(1, Ordering::Relaxed);
        }
        let mut stopped = self.stopped.lock().unwrap();
        match t.to {
            State::Open if stopped.0.is_none() => stopped.0 = Some(at),
            State::Closed if stopped.0.is_some() => stopped.1 = Some(at),
            _ => {}
        }
    }

    fn on_fleet(&self, event: &FleetEvent<'_>) {
        let at = self.start.elapsed();
        self.lines.lock().unwrap().push((at, event.to_string()));
    }
}

/// Every instance's breaker: the same name, so in the shared fleet the same record.
fn breaker(timeline: Arc<Timeline>) -> Builder<ConsecutiveFailures, Arc<Timeline>> {
    Breaker::builder()
        .name("inventory")
        .policy(ConsecutiveFailures::new(5).expect("valid"))
        .timeout(Duration::from_millis(300))
        .max_requests(1)
        .observer(timeline)
}

/// Where the shared fleet keeps its record.
#[derive(Clone)]
enum Store {
    Redis(Box<RedisStore>),
    Postgres(PostgresStore),
}

/// Runs one instance: a call to the dependency every `PERIOD` through `shared`.
fn spawn_shared<S: FleetStore + Clone>(
    tasks: &mut tokio::task::JoinSet<()>,
    store: S,
    builder: Builder<ConsecutiveFailures, Arc<Timeline>>,
    dependency: Arc<Dependency>,
    start: Instant,
) {
    let shared = SharedBreaker::builder(store)
        .sync_interval(Duration::from_millis(50))
        .store_timeout(Duration::from_millis(20))
        .lease_for(Duration::from_secs(1))
        .build(builder)
        .expect("a valid name");
    tasks.spawn(async move {
        while start.elapsed() < RUN_FOR {
            let _ = shared.execute(|| dependency.call()).await;
            tokio::time::sleep(PERIOD).await;
        }
    });
}

/// Runs the fleet: each instance a task calling the dependency every `PERIOD`, through a
/// local breaker, or a shared one on `shared`.
async fn run_fleet(shared: Option<Store>) {
    let start = Instant::now();
    let dependency = Arc::new(Dependency {
        start,
        failed: AtomicU64::new(0),
    });
    let timelines: Vec<Arc<Timeline>> = (0..INSTANCES)
        .map(|_| {
            Arc::new(Timeline {
                start,
                lines: Mutex::new(Vec::new()),
                stopped: Mutex::new((None, None)),
                failed_probes: AtomicU64::new(0),
            })
        })
        .collect();
    let mut tasks = tokio::task::JoinSet::new();
    for timeline in &timelines {
        let dependency = Arc::clone(&dependency);
        let builder = breaker(Arc::clone(timeline));
        match shared.clone() {
            Some(Store::Redis(store)) => {
                spawn_shared(&mut tasks, *store, builder, dependency, start);
            }
            Some(Store::Postgres(store)) => {
                spawn_shared(&mut tasks, store, builder, dependency, start);
            }
            None => {
                let local = builder.build();
                tasks.spawn(async move {
                    while start.elapsed() < RUN_FOR {
                        let _ = local.execute_async(|| dependency.call()).await;
                        tokio::time::sleep(PERIOD).await;
                    }
                });
            }
        }
    }
    while tasks.join_next().await.is_some() {}

    for (i, timeline) in timelines.iter().enumerate() {
        println!("  instance {i}:");
        for (at, line) in timeline.lines.lock().unwrap().iter() {
            println!("    {:>8}  {line}", human::span(*at));
        }
    }
    let stops: Vec<_> = timelines
        .iter()
        .map(|t| *t.stopped.lock().unwrap())
        .collect();
    let all_stopped = stops.iter().filter_map(|s| s.0).max();
    let all_recovered = stops.iter().filter_map(|s| s.1).max();
    let ms = |d: Option<Duration>, from: Duration| match d {
        Some(d) => human::span(d.saturating_sub(from)).to_string(),
        None => "never".to_owned(),
    };
    println!(
        "  totals: {} failed calls let through to the sick dependency, {} of them probes; \
         every instance stopped {} after it fell sick, and all had recovered {} after it healed",
        dependency.failed.load(Ordering::Relaxed),
        timelines
            .iter()
            .map(|t| t.failed_probes.load(Ordering::Relaxed))
            .sum::<u64>(),
        ms(all_stopped, HEALTHY_UNTIL),
        ms(all_recovered, SICK_UNTIL),
    );
}

// The tests' own servers: a free loopback port of their own, stopped on drop.
#[path = "../tests/postgres_server/mod.rs"]
mod postgres_server;
#[path = "../tests/redis_server/mod.rs"]
mod redis_server;

fn main() {
    let postgres = match std::env::args().skip(1).collect::<Vec<_>>().as_slice() {
        [] => false,
        [flag, store] if flag == "--store" && store == "redis" => false,
        [flag, store] if flag == "--store" && store == "postgres" => true,
        _ => {
            eprintln!("usage: fleet [--store redis|postgres]");
            std::process::exit(2);
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    println!("{INSTANCES} instances, each with its own breaker:");
    rt.block_on(run_fleet(None));
    if postgres {
        match postgres_server::PgServer::try_start() {
            Some(server) => {
                println!("\n{INSTANCES} instances sharing their breaker through PostgreSQL:");
                // One pool for the fleet's five instances in this process, a statement's
                // time as their store timeout.
                let store = server.store().with_timeout(Duration::from_millis(20));
                // Connect and create the table now: a first operation within 20 ms could not.
                rt.block_on(store.prepare(Duration::from_secs(5)))
                    .expect("the server answers");
                rt.block_on(run_fleet(Some(Store::Postgres(store))));
                drop(server);
            }
            None => println!(
                "\nPostgreSQL not found: install it (`apt-get install postgresql`, or run \
                 `bash .ci/test` once) to see the shared fleet"
            ),
        }
        return;
    }
    match redis_server::Server::try_start() {
        Some(server) => {
            println!("\n{INSTANCES} instances sharing their breaker through Redis:");
            let store = RedisStore::from(server.client()).with_timeout(Duration::from_millis(20));
            rt.block_on(run_fleet(Some(Store::Redis(Box::new(store)))));
            drop(server);
        }
        None => println!(
            "\nredis-server not found: install it (`apt-get install redis-server`, or run \
             `bash .ci/test` once) to see the shared fleet"
        ),
    }
}
