//! The scenarios: what goes wrong, on which replicas, when, and when it recovers. Every
//! scenario is one fault over one span of the run, the same timeline for every strategy.

use std::time::Duration;

use crate::upstream::Mode;

/// A fault the lab makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The replica's `/work` behaves so.
    Mode(Mode),
    /// The replica's process is killed: connections are refused.
    Refuse,
    /// The replica's port is held by a listener that never accepts: connects time out.
    FullQueue,
    /// The replica sheds (503, [`Mode::Storm`]) what it receives beyond
    /// [`STORM_CAPACITY`] of its fair share of the load.
    Storm,
    /// The replica queues its calls for [`WORKERS`](crate::upstream::WORKERS) workers
    /// ([`Mode::Queueing`]) that serve [`QUEUE_CAPACITY`] of its fair share of the load.
    Queueing,
    /// The replica's process is killed (connections refused) and restarted
    /// [`RESTART_DOWN`] later, cold ([`Mode::Cold`]): slow at first, warming up over
    /// [`COLD_WARMUP`](crate::upstream::COLD_WARMUP).
    ColdRestart,
}

/// How long a cold-restarting replica is down before it returns.
pub const RESTART_DOWN: Duration = Duration::from_millis(500);

/// A storming replica's capacity, as a share of its fair share of the load (the rate over
/// the replicas): 80 %, so that even without a retry a fifth of the calls are shed.
pub const STORM_CAPACITY: f64 = 0.8;

/// A queueing replica's capacity, as a share of its fair share of the load: 90 %, so that
/// the queues of a client that sends every replica its share grow by a tenth of that share
/// each second, until the waits reach the deadline, while a call's service stays near the
/// healthy latency (2.2 times it, with one worker). `queueing` hits
/// every replica: with one alone, a pick that weighs latencies and calls in flight (the
/// pool's, HAProxy's round robin skipping a server at its `maxconn`) sends the excess to
/// the others, and no limit is needed; with all of them over their capacity, no routing
/// helps, and only a limit keeps the queues short.
pub const QUEUE_CAPACITY: f64 = 0.9;

/// Which replicas a fault hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hit {
    /// Replica 0, the sick node.
    One,
    /// Every replica: a total outage.
    All,
}

/// One scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scenario {
    pub name: &'static str,
    /// What it shows, for the report.
    pub what: &'static str,
    pub fault: Fault,
    pub hit: Hit,
    /// Whether the sick node should be isolated (for `gray`, it should not: every node
    /// fails a little, and cutting them off costs more than it saves).
    pub isolate: bool,
}

/// Every scenario, in the report's order.
pub const ALL: &[Scenario] = &[
    Scenario {
        name: "healthy",
        what: "nothing goes wrong: the baseline, what each strategy costs a healthy pool",
        fault: Fault::Mode(Mode::Healthy),
        hit: Hit::All,
        isolate: false,
    },
    Scenario {
        name: "errors",
        what: "one replica answers 500 to everything, then recovers",
        fault: Fault::Mode(Mode::Errors),
        hit: Hit::One,
        isolate: true,
    },
    Scenario {
        name: "hang",
        what: "one replica accepts and never answers, then recovers",
        fault: Fault::Mode(Mode::Hang),
        hit: Hit::One,
        isolate: true,
    },
    Scenario {
        name: "refuse",
        what: "one replica's process dies (connections refused), then restarts",
        fault: Fault::Refuse,
        hit: Hit::One,
        isolate: true,
    },
    Scenario {
        name: "full-queue",
        what: "one replica's port is held by a listener that never accepts (connects time out), then it restarts",
        fault: Fault::FullQueue,
        hit: Hit::One,
        isolate: true,
    },
    Scenario {
        name: "slow",
        what: "one replica answers 20 times slower (around 100 ms, up to 800 ms), then recovers",
        fault: Fault::Mode(Mode::Slow),
        hit: Hit::One,
        isolate: true,
    },
    Scenario {
        name: "cold-start",
        what: "one replica restarts (connections refused for 0.5 s), then returns cold: its latency 15 times the healthy one (around 75 ms, up to 600 ms) at first, easing linearly to normal over 3 s, its health check passing at once",
        fault: Fault::ColdRestart,
        hit: Hit::One,
        isolate: false,
    },
    Scenario {
        name: "flapping",
        what: "one replica alternates a second answering 500 to everything (its health check too) and a second healthy, then recovers",
        fault: Fault::Mode(Mode::Flapping),
        hit: Hit::One,
        isolate: true,
    },
    Scenario {
        name: "gray",
        what: "every replica fails 0.5 % of calls, never two in a row: nothing should be cut off",
        fault: Fault::Mode(Mode::Gray),
        hit: Hit::All,
        isolate: false,
    },
    Scenario {
        name: "overloaded",
        what: "one replica answers 503 with Retry-After for a share of calls rising with its load, then recovers",
        fault: Fault::Mode(Mode::Overloaded),
        hit: Hit::One,
        isolate: true,
    },
    Scenario {
        name: "storm",
        what: "every replica serves 80 % of its share of the load and answers 503 to the rest, a share rising with every extra attempt, then recovers",
        fault: Fault::Storm,
        hit: Hit::All,
        isolate: false,
    },
    Scenario {
        name: "queueing",
        what: "every replica queues its calls for one worker (first in, first out, no bound) that serves 90 % of its share of the load (11 ms a call), each call waiting its turn until the waits reach the deadline; then all recover",
        fault: Fault::Queueing,
        hit: Hit::All,
        isolate: false,
    },
    Scenario {
        name: "outage",
        what: "every replica answers 500, then all recover at once",
        fault: Fault::Mode(Mode::Errors),
        hit: Hit::All,
        isolate: true,
    },
    Scenario {
        name: "hang-all",
        what: "every replica hangs, then all recover at once",
        fault: Fault::Mode(Mode::Hang),
        hit: Hit::All,
        isolate: true,
    },
];

/// The short mode's scenarios (CI): one of each kind of fault a breaker must see (an answer,
/// no answer, no connection), and the overload a retry must not feed.
pub const SHORT: &[&str] = &["errors", "hang", "refuse", "storm"];

/// A run's timeline: the fault from `fault_at` to `recover_at`, the run until `end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeline {
    pub fault_at: Duration,
    pub recover_at: Duration,
    pub end: Duration,
}

impl Timeline {
    /// The full mode: 2 s healthy, 5 s of fault, 7 s after recovery.
    pub const FULL: Self = Self {
        fault_at: Duration::from_secs(2),
        recover_at: Duration::from_secs(7),
        end: Duration::from_secs(14),
    };

    /// The short mode: 1 s healthy, 1.5 s of fault, 1.5 s after recovery.
    pub const SHORT: Self = Self {
        fault_at: Duration::from_secs(1),
        recover_at: Duration::from_millis(2_500),
        end: Duration::from_secs(4),
    };
}

impl Scenario {
    /// The span of the run its goal is judged on, when it is not the fault's: `cold-start`'s
    /// warm-up (from the fault to the end of the warm-up, the restart included), named.
    pub fn focus(&self, timeline: Timeline) -> Option<(&'static str, Duration, Duration)> {
        match self.fault {
            Fault::ColdRestart => {
                let from = timeline.fault_at;
                let to =
                    (from + RESTART_DOWN + crate::upstream::COLD_WARMUP).min(timeline.recover_at);
                Some(("warm-up", from, to))
            }
            _ => None,
        }
    }
}

/// The scenario named `name`.
pub fn named(name: &str) -> Option<&'static Scenario> {
    ALL.iter().find(|s| s.name == name)
}
