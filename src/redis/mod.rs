//! A fleet-wide breaker on Redis (feature `redis`): processes share one breaker's
//! *decisions*, never its calls.
//!
//! Every process keeps its own [`Breaker`](crate::Breaker), with its own counts and policy;
//! a [`SharedBreaker`] puts it in a fleet. What the fleet shares is one small record per
//! breaker, "open until T, at generation G", and the half-open probe slots:
//!
//! - **Nothing on the hot path.** A closed-state call or an open rejection does no store
//!   I/O. The shared view is refreshed lazily, at most once per
//!   [`sync_interval`](SharedBuilder::sync_interval) per process, by the call that finds it
//!   stale; one refresh is in flight at a time, and the other calls go on with the cached
//!   view. There is no background task and no timer.
//! - **One round trip per decision.** A local trip publishes "open until T, generation G+1"
//!   with one Lua compare-and-set fenced by the generation; if the record has moved on
//!   already, the process adopts it instead. The others stop sending at their next call
//!   after their view goes stale (within `sync_interval`). A recovery (a probe that closes
//!   the breaker) is published the same way.
//! - **Probes leased fleet-wide.** In half-open a probe must first lease one of
//!   `max_requests` slots of the fleet's half-open period (an atomic lease that expires if
//!   its holder dies), so the sick dependency sees at most `max_requests` probes per period
//!   across the fleet, not per process; their result closes or reopens the breaker for
//!   everyone, with the local policy's backoff.
//! - **One timeline.** Deadlines are kept in the Redis server's time (`TIME`) and mapped
//!   onto each process's clock when read, so clock skew between hosts does not matter.
//! - **The store is never a single point of failure.** Every store call is bounded by
//!   [`store_timeout`](SharedBuilder::store_timeout). On a failure the process decides
//!   locally (its breaker keeps protecting the dependency), tells its observers once
//!   ([`FleetEvent::Degraded`](crate::observe::FleetEvent)), counts it
//!   ([`FleetStats::store_errors`]), reconnects lazily at the next refresh and re-syncs when
//!   the store is back; a record that vanished (Redis restarted without persistence) is
//!   written again from the local state. No call fails because of the store, and none
//!   waits on it longer than the store timeout (a call that refreshes, publishes or leases
//!   waits for that one round trip).
//! - **Transitions everywhere.** A change adopted from the fleet is delivered to the local
//!   observers and `on_state_change` like any other, with
//!   [`Transition::origin`](crate::observe::Transition::origin) set to
//!   [`Origin::Adopted`](crate::observe::Origin::Adopted).
//! - **Keys expire** when unused ([`key_ttl`](SharedBuilder::key_ttl) after their last
//!   update, and never before an open period ends), and the keys of one breaker share a
//!   Redis Cluster hash tag.
//!
//! What is published: every change to open or closed that this process's policy, clock or
//! [`trip_for`](crate::Breaker::trip_for) made. Forced modes
//! ([`force_open`](crate::Breaker::force_open), [`force_closed`](crate::Breaker::force_closed))
//! stay local: an operator's override of one instance.
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
//! # Compared with gobreaker's `DistributedCircuitBreaker`
//!
//! gobreaker v2 reads the state, takes a Redis lock, runs the call *holding the lock*,
//! writes the state and unlocks: at least four round trips per call, one call in flight per
//! breaker name across the fleet, and no call at all while Redis is down. Here a call costs
//! no round trip at all in the closed state or when rejected, a refresh costs one per
//! `sync_interval` per process, a decision one, and a probe two (lease and release or
//! publish); calls run concurrently, and a store outage leaves every process with a working
//! local breaker.
//!
//! # Keys
//!
//! One hash per breaker, `lazybreaker:{<name>}:state` (the braces are the hash tag), with the
//! fields `generation`, `state` (`open` or `closed`) and `until` (server time, in
//! microseconds since the epoch, while open); a sorted set of half-open probe leases,
//! `lazybreaker:{<name>}:probes`; and with a quorum, a sorted set of trip votes,
//! `lazybreaker:{<name>}:votes`. A record that expired or vanished reads as a fresh breaker:
//! closed, generation 0.

mod link;
mod shared;
mod store;

pub use link::Link;
pub use shared::{FleetStats, LinkedBreaker, SharedBreaker, SharedBuilder};
pub use store::{Lease, RedisStore, SharedRecord, StoreError, Vote};
