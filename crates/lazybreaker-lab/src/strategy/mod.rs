//! The strategies a client can take against the same replicas, one at a time: no breaker,
//! lazybreaker per node or as a pool (alone, behind a throttle, retrying, hedging, ramping up a returning replica or
//! under a concurrency limit per replica), the
//! peers per node (tower's p2c alone, with its retry budget or with its hedge), a naive
//! retry, and a load balancer in front (with or without retries, or `maxconn`).

mod failsafe_per_node;
mod haproxy;
mod lazy_per_node;
mod lazy_pool;
mod lazy_pool_hedge;
mod lazy_pool_limit;
mod lazy_pool_retry;
mod lazy_pool_slow_start;
mod lazy_pool_throttled;
mod naive_retry;
mod no_breaker;
mod tower_hedge;
mod tower_p2c;
mod tower_retry;

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use lazybreaker::policy::Outcome;

use crate::client::{Answer, Http, Sent};

pub use haproxy::HaProxy;

/// One way to call the replicas.
pub trait Strategy: Send + Sync {
    /// Its name in the report.
    fn name(&self) -> &'static str;
    /// One call, due `at` from the run's start, within the client's deadline. Each attempt
    /// asks for [`work`]`(at)`, so that the replicas count the attempts of each call.
    fn call(&self, at: Duration) -> Pin<Box<dyn Future<Output = Sent> + Send + '_>>;
}

/// The path of an attempt of the call due `at`: `/work?at=<ms>`.
pub fn work(at: Duration) -> String {
    format!("/work?at={}", at.as_millis())
}

/// The per-attempt timeout of the strategies that retry on their own: HAProxy's server
/// timeout with retries (140 ms), so that a retry after a hang still fits in the 300 ms
/// deadline (an attempt that may take the whole deadline leaves no room for one).
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_millis(140);

/// The strategies' names, in the report's order.
pub const NAMES: &[&str] = &[
    "no breaker",
    "lazybreaker per node",
    "lazybreaker pool",
    "lazybreaker pool + throttle",
    "lazybreaker pool + retry",
    "lazybreaker pool + hedge",
    "lazybreaker pool + slow start",
    "lazybreaker pool + aimd",
    "lazybreaker pool + gradient2",
    "tower-resilience p2c",
    "tower retry + p2c",
    "tower hedge + p2c",
    "failsafe per node",
    "naive retry",
    "haproxy",
    "haproxy + retries",
    "haproxy maxconn",
];

/// Variants of the strategies above, run only when named (`--strategies`): the hedge's
/// settings, to tell what its percentile estimate and its wake by the picks cost (the
/// ticker: a pick every millisecond, dropped unused, wakes a waiting hedge as a timer
/// would), and slow start's; a fixed limit of the replica's workers (`limit::Fixed`: HAProxy's
/// `maxconn` on the client's side, the baseline of the adaptive limits), and the adaptive
/// limits held tighter (AIMD with a 40 ms timeout, twice the healthy p99; Gradient2 with a
/// queue size of 1 and no tolerance).
pub const VARIANTS: &[&str] = &[
    "lazybreaker pool + hedge after 12ms",
    "lazybreaker pool + hedge p99",
    "lazybreaker pool + hedge + 1ms ticker",
    "lazybreaker pool + slow start 6s/0.5",
    "lazybreaker pool + hedge + slow start",
    "lazybreaker pool + fixed",
    "lazybreaker pool + aimd 40ms",
    "lazybreaker pool + gradient2 q1",
];

/// The strategy named `name` over `addrs` (HAProxy, with or without retries, is started
/// apart: [`HaProxy`]).
pub fn build(name: &str, http: &Http, addrs: &[SocketAddr]) -> Option<Box<dyn Strategy>> {
    let addrs = addrs.to_vec();
    Some(match name {
        "no breaker" => Box::new(no_breaker::NoBreaker::new(http.clone(), addrs)),
        "lazybreaker per node" => Box::new(lazy_per_node::LazyPerNode::new(http.clone(), addrs)),
        "lazybreaker pool" => Box::new(lazy_pool::LazyPool::new(http.clone(), addrs)),
        "lazybreaker pool + throttle" => Box::new(lazy_pool_throttled::LazyPoolThrottled::new(
            http.clone(),
            addrs,
        )),
        "lazybreaker pool + retry" => {
            Box::new(lazy_pool_retry::LazyPoolRetry::new(http.clone(), addrs))
        }
        "lazybreaker pool + hedge" => {
            Box::new(lazy_pool_hedge::LazyPoolHedge::new(http.clone(), addrs))
        }
        "lazybreaker pool + hedge after 12ms" => Box::new(lazy_pool_hedge::LazyPoolHedge::with(
            http.clone(),
            addrs,
            lazybreaker::retry::Hedge::after(Duration::from_millis(12)),
            "lazybreaker pool + hedge after 12ms",
        )),
        "lazybreaker pool + hedge p99" => Box::new(lazy_pool_hedge::LazyPoolHedge::with(
            http.clone(),
            addrs,
            lazybreaker::retry::Hedge::at_percentile(0.99),
            "lazybreaker pool + hedge p99",
        )),
        "lazybreaker pool + slow start" => Box::new(lazy_pool_slow_start::LazyPoolSlowStart::new(
            http.clone(),
            addrs,
        )),
        "lazybreaker pool + hedge + 1ms ticker" => {
            Box::new(lazy_pool_hedge::LazyPoolHedge::ticking(
                http.clone(),
                addrs,
                lazybreaker::retry::Hedge::at_percentile(0.95),
                Duration::from_millis(1),
                "lazybreaker pool + hedge + 1ms ticker",
            ))
        }
        "lazybreaker pool + slow start 6s/0.5" => {
            Box::new(lazy_pool_slow_start::LazyPoolSlowStart::with(
                http.clone(),
                addrs,
                lazybreaker::pool::SlowStart::new(Duration::from_secs(6)).aggression(0.5),
                None,
                "lazybreaker pool + slow start 6s/0.5",
            ))
        }
        "lazybreaker pool + hedge + slow start" => {
            Box::new(lazy_pool_slow_start::LazyPoolSlowStart::with(
                http.clone(),
                addrs,
                lazybreaker::pool::SlowStart::new(Duration::from_secs(3)),
                Some(lazybreaker::retry::Hedge::at_percentile(0.95)),
                "lazybreaker pool + hedge + slow start",
            ))
        }
        "lazybreaker pool + aimd" => Box::new(lazy_pool_limit::LazyPoolLimit::new(
            http.clone(),
            addrs,
            lazy_pool_limit::aimd(),
            "lazybreaker pool + aimd",
        )),
        "lazybreaker pool + gradient2" => Box::new(lazy_pool_limit::LazyPoolLimit::new(
            http.clone(),
            addrs,
            lazy_pool_limit::gradient2(),
            "lazybreaker pool + gradient2",
        )),
        "lazybreaker pool + fixed" => Box::new(lazy_pool_limit::LazyPoolLimit::new(
            http.clone(),
            addrs,
            lazybreaker::limit::Fixed::new(crate::upstream::WORKERS as u32),
            "lazybreaker pool + fixed",
        )),
        "lazybreaker pool + aimd 40ms" => Box::new(lazy_pool_limit::LazyPoolLimit::new(
            http.clone(),
            addrs,
            lazy_pool_limit::aimd().timeout(Duration::from_millis(40)),
            "lazybreaker pool + aimd 40ms",
        )),
        "lazybreaker pool + gradient2 q1" => Box::new(lazy_pool_limit::LazyPoolLimit::new(
            http.clone(),
            addrs,
            lazy_pool_limit::gradient2()
                .queue_size(1.0)
                .rtt_tolerance(1.0),
            "lazybreaker pool + gradient2 q1",
        )),
        "tower-resilience p2c" => Box::new(tower_p2c::TowerP2c::new(http.clone(), addrs)),
        "tower hedge + p2c" => Box::new(tower_hedge::TowerHedge::new(http.clone(), addrs)),
        "tower retry + p2c" => Box::new(tower_retry::TowerRetry::new(http.clone(), addrs)),
        "naive retry" => Box::new(naive_retry::NaiveRetry::new(http.clone(), addrs)),
        "failsafe per node" => {
            Box::new(failsafe_per_node::FailsafePerNode::new(http.clone(), addrs))
        }
        _ => return None,
    })
}

/// Round-robin turns, shared by the strategies that take one.
#[derive(Debug, Default)]
struct Turns(AtomicUsize);

impl Turns {
    /// The nodes in this call's order: its turn first, then the others in turn.
    fn order(&self, n: usize) -> impl Iterator<Item = usize> {
        let first = self.0.fetch_add(1, Ordering::Relaxed);
        (0..n).map(move |k| (first + k) % n)
    }
}

/// How lazybreaker counts an answer: the `http` module's rules for a status (a 5xx fails, a
/// 4xx is excluded), a refused connection fatal (it opens at once), a timeout or another
/// transport error a failure.
fn outcome(answer: Answer) -> Outcome {
    match answer {
        Answer::Ok => Outcome::Success,
        Answer::Status { code, .. } => lazybreaker::http::StatusRules::new().outcome(
            http::StatusCode::from_u16(code).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR),
        ),
        Answer::Refused => Outcome::Fatal,
        Answer::Timeout | Answer::Io | Answer::Rejected | Answer::Shed => Outcome::Failure,
    }
}

/// A call turned away before it was sent.
fn rejected() -> Sent {
    Sent {
        answer: Answer::Rejected,
        node: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_and_variant_builds_under_its_own_name() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let _entered = runtime.enter();
        let http = Http::new(Duration::from_millis(300));
        let addrs: Vec<SocketAddr> = (1..=3)
            .map(|port| SocketAddr::from(([127, 0, 0, 1], port)))
            .collect();
        for name in NAMES.iter().chain(VARIANTS) {
            if HaProxy::NAMES.contains(name) {
                assert!(
                    build(name, &http, &addrs).is_none(),
                    "{name}: started apart"
                );
                continue;
            }
            let strategy = build(name, &http, &addrs).unwrap_or_else(|| panic!("{name}"));
            assert_eq!(strategy.name(), *name);
        }
        assert!(build("no such strategy", &http, &addrs).is_none());
    }
}
