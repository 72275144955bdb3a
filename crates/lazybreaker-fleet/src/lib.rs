//! A fleet-wide breaker on any store: processes share one breaker's
//! *decisions*, never its calls.
//!
//! Every process keeps its own [`Breaker`](lazybreaker::Breaker), with its own counts and policy;
//! a [`SharedBreaker`] puts it in a fleet. What the fleet shares, through a [`FleetStore`],
//! is one small record per breaker, "open until T, at generation G", and the half-open probe
//! slots. The stores offered are [`MemoryStore`] (in this process: tests, and the shared
//! breakers of one process), with the `redis` feature
//! [`RedisStore`](crate::redis::RedisStore), and with the `postgres` feature
//! [`PostgresStore`](crate::postgres::PostgresStore); another store is one type implementing
//! [`FleetStore`] (four operations), and the protocol below comes with it.
//!
//! - **Nothing on the hot path.** A closed-state call or an open rejection does no store
//!   I/O. The shared view is refreshed lazily, at most once per
//!   [`sync_interval`](SharedBuilder::sync_interval) per process, by the call that finds it
//!   stale; one refresh is in flight at a time, and the other calls go on with the cached
//!   view. There is no background task and no timer.
//! - **One round trip per decision.** A local trip publishes "open until T, generation G+1"
//!   with one atomic compare-and-set fenced by the generation ([`FleetStore::publish`]); if
//!   the record has moved on already, the process adopts it instead. The others stop sending
//!   at their next call after their view goes stale (within `sync_interval`). A recovery (a
//!   probe that closes the breaker) is published the same way.
//! - **Probes leased fleet-wide.** In half-open a probe must first lease one of
//!   `max_requests` slots of the fleet's half-open period (an atomic lease that expires if
//!   its holder dies, [`FleetStore::lease_probe`]), so the sick dependency sees at most
//!   `max_requests` probes per period across the fleet, not per process; their result
//!   ([`FleetStore::finish_probe`]) closes or reopens the breaker for everyone, with the
//!   local policy's backoff. Whether a call is a probe is decided by its admission.
//! - **One timeline.** Deadlines are kept in the store's time and mapped onto each process's
//!   clock when read, so clock skew between hosts does not matter (see [`FleetStore`]'s
//!   "Time").
//! - **The store is never a single point of failure.** Every store call is bounded by
//!   [`store_timeout`](SharedBuilder::store_timeout). On a failure the process decides
//!   locally (its breaker keeps protecting the dependency), tells its observers once
//!   ([`FleetEvent::Degraded`]), counts it ([`FleetStats::store_errors`]), and re-syncs when
//!   the store is back (a store that connects reconnects by itself); a record that vanished
//!   (the store restarted without persistence, or the record expired) is written again from
//!   the local state. No call fails because of the store, and none waits on it longer than
//!   the store timeout (a call that refreshes, publishes or leases waits for that one round
//!   trip).
//! - **Transitions everywhere.** A change adopted from the fleet is delivered to the local
//!   observers and `on_state_change` like any other, with
//!   [`Transition::origin`](lazybreaker::observe::Transition::origin) set to
//!   [`Origin::Adopted`](lazybreaker::observe::Origin::Adopted).
//!
//! What is published: every change to open or closed that this process's policy, clock or
//! [`trip_for`](lazybreaker::Breaker::trip_for) made. Forced modes
//! ([`force_open`](lazybreaker::Breaker::force_open), [`force_closed`](lazybreaker::Breaker::force_closed))
//! stay local: an operator's override of one instance. So does everything an instance in
//! [dry run](lazybreaker::Builder::dry_run) decides: a shadow candidate beside enforcing
//! members follows the fleet but writes nothing to it (no trip, no recovery, no probe
//! lease), so no member rejects a real call because of it.
//!
//! # One bad instance
//!
//! Sharing decisions means one instance can open everyone's breaker: an instance whose own
//! network is broken sees every call fail, trips, and the whole fleet stops calling a
//! healthy dependency for an open period (and then probes it, and closes again: the damage
//! is bounded by one open period per trip, but it repeats while the instance stays bad).
//! The mitigation offered is a **quorum**: with [`quorum(k)`](SharedBuilder::quorum) a local
//! trip is a vote, and the fleet opens only once `k` distinct instances voted within
//! [`vote_window`](SharedBuilder::vote_window); until then the tripped instance stays open on
//! its own (it protects itself) and probes on its own. It costs nothing extra: the vote is
//! the same single round trip. `k = 1` (the default) shares every trip at once. A quorum
//! suits fleets of more than a few instances; it delays the fleet's reaction until `k`
//! instances have seen the failures.
//!
//! # In numbers
//!
//! `cargo run -p lazybreaker-fleet --example fleet --features redis` runs five instances that each call a
//! dependency every 10 ms while it is sick for 1.5 s; each breaker trips after 5 failures in
//! a row and stays open 300 ms. First every instance has a breaker of its own, then they
//! share one on Redis:
//!
//! | five instances | local breakers | shared |
//! |---|---|---|
//! | failed calls let through to the sick dependency | 45 | 29 |
//! | probes among them | 20 | 4 (one per half-open period, fleet-wide) |
//!
//! Both fleets stop calling the dependency within about 60 ms of its failure; the shared one
//! recovers a few tens of milliseconds later, each instance following the fleet's recovery
//! at its next refresh.
//!
//! Store round trips, counted on a manual clock (`tests/fleet.rs`): 10 000 calls at 1 kHz
//! with a 100 ms sync interval make 100 round trips while the breaker stays closed, and 103
//! with a trip and a recovery (the trip's publication, the probe's lease, and the probe's
//! end, which publishes the recovery). [`crate::redis`] compares this with gobreaker's
//! `DistributedCircuitBreaker`.
//!
//! # Bounds on what the store says
//!
//! No open period longer than the local breaker's
//! [`max_open_duration`](lazybreaker::Builder::max_open_duration) is adopted, followed or
//! published, whoever wrote the record: a record open for longer is followed for that
//! maximum, and then cut to half-open (published at the next generation), so the fleet
//! probes as the local breaker does. A record no breaker writes (a negative generation or
//! one above [`SharedRecord::MAX_GENERATION`], a deadline beyond
//! [`SharedRecord::MAX_TIME_US`], in Redis a field that is not a whole number in digits) is
//! a store error ([`StoreError::Invalid`]): the breaker degrades to local decisions until it
//! is repaired or removed.
//!
//! The other way round, every duration may be [`Duration::MAX`](std::time::Duration::MAX)
//! (a user's "never"): an open period, a [`lease_for`](SharedBuilder::lease_for), a
//! [`vote_window`](SharedBuilder::vote_window), a store timeout, a key time to live. Each
//! saturates, the same on every store: a deadline at [`SharedRecord::MAX_TIME_US`] (about
//! 285 years after the store's epoch, so it reads back valid), a timeout at what the store
//! can wait (see each store). A [`trip_for(Duration::MAX)`](lazybreaker::Breaker::trip_for)
//! under a `max_open_duration` of `Duration::MAX` is published as that longest open period.
//!
//! # Start-up
//!
//! Building a shared breaker asks nothing of the store, and a store that fails only makes
//! the breaker decide locally; to learn of a misconfigured store (a wrong address or
//! password) at start-up, call [`check_store`](SharedBreaker::check_store): one read, whose
//! error it returns.
//!
//! ```
//! use lazybreaker_fleet::{MemoryStore, SharedBreaker};
//! use lazybreaker::Breaker;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let shared = SharedBreaker::builder(MemoryStore::new())
//!     .build(Breaker::builder().name("payments"))?;
//! let rt = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
//! rt.block_on(shared.check_store())?; // the store answers: the view is synced
//! assert_eq!(shared.stats().round_trips, 1);
//! # Ok(())
//! # }
//! ```
//!
//! # Testing
//!
//! [`MemoryStore`] runs the protocol in this process, on the breakers' clocks: with every
//! breaker on one [`ManualClock`](lazybreaker::ManualClock), a test drives a whole fleet through
//! trips, adoptions, probes and recoveries without a server and without sleeping, and
//! [`MemoryStore::set_failing`] and [`MemoryStore::remove`] stage an outage and a vanished
//! record.

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![doc(test(attr(deny(warnings))))]

mod link;
mod memory;
mod shared;
mod stats;
mod store;

#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub mod postgres;
#[cfg(feature = "prometheus")]
#[cfg_attr(docsrs, doc(cfg(feature = "prometheus")))]
pub mod prometheus;
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub mod redis;

pub use lazybreaker::observe::FleetEvent;
pub use memory::MemoryStore;
pub use shared::{SharedBreaker, SharedBuilder};
pub use stats::{FleetFigure, FleetStats};
pub use store::{Decision, FleetStore, Lease, SharedRecord, StoreError, Vote};
