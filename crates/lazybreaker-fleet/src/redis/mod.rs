//! The fleet-wide breaker on Redis (feature `redis`): [`RedisStore`], a
//! [`FleetStore`](crate::FleetStore) whose every operation is one Lua script, and
//! [`SharedBreaker`], the [fleet's shared breaker](crate::SharedBreaker) on it, built
//! from a [`redis::Client`].
//!
//! The protocol (what is shared, when, what a store outage does, the quorum against one bad
//! instance) is the [`fleet`](crate) module's, and holds for every store; what Redis
//! adds:
//!
//! - **One timeline.** Deadlines are kept in the Redis server's time (`TIME`, read inside
//!   each script) and mapped onto each process's clock when read, so clock skew between
//!   hosts does not matter.
//! - **One round trip per operation**: a read, a publication (a compare-and-set fenced by
//!   the generation, with the quorum's vote), a lease and the end of a probe are each one
//!   Lua script, atomic on the server.
//! - **Connection.** The store connects at its first operation (within the store timeout)
//!   and again at the next operation after a failure; nothing is connected when a shared
//!   breaker is built. A wrong address or password then only degrades the breaker to local
//!   decisions: [`check_store`](crate::SharedBreaker::check_store) at start-up
//!   returns the error instead.
//! - **Keys expire** when unused ([`key_ttl`](SharedBuilder::key_ttl) after their last
//!   update, and never before an open period ends), and the keys of one breaker share a
//!   Redis Cluster hash tag (so a breaker's name may not hold `{` or `}`).
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
//! fields `generation`, `state` (`open` or `closed`), `until` (server time, in
//! microseconds since the epoch, while open) and `ok` (probe successes of the half-open
//! period); a sorted set of half-open probe leases, `lazybreaker:{<name>}:probes`; and with a
//! quorum, a sorted set of trip votes, `lazybreaker:{<name>}:votes`. A record that expired
//! or vanished reads as a fresh breaker: closed, generation 0. A hash whose `generation`,
//! `until` or `ok` is not a whole number from 0 to 2^53 in digits (`2.5`, `1e3`, `-1`, set by
//! hand) is refused by every script, which writes nothing then:
//! [`StoreError::Invalid`].
//!
//! # Why `redis::SharedBreaker` is a type of its own
//!
//! It is [`fleet::SharedBreaker<RedisStore, P, O>`](crate::SharedBreaker) (it
//! dereferences to it, so every method of that one is at hand), wrapped so that its
//! `builder` can take a [`redis::Client`] as 0.1's did: a type alias would resolve
//! `SharedBreaker::builder` to the generic `builder(store: RedisStore)`, and a generic
//! `builder(impl Into<S>)` would leave the store type to be inferred from nothing. Code
//! that wants the generic type spells `fleet::SharedBreaker::builder(RedisStore::from(client))`
//! or takes [`into_inner`](SharedBreaker::into_inner).

mod store;

use std::ops::Deref;
use std::time::Duration;

use crate::shared as fleet;
use lazybreaker::observe::Observer;
use lazybreaker::policy::{ConsecutiveFailures, TripPolicy};
use lazybreaker::Builder;
use lazybreaker::ConfigError;

pub use crate::stats::FleetStats;
pub use crate::store::{Lease, SharedRecord, StoreError, Vote};
pub use store::RedisStore;

/// A breaker shared by a fleet through Redis: the [fleet's shared
/// breaker](crate::SharedBreaker) on a [`RedisStore`], built from a
/// [`redis::Client`] (see [why a type of its own](self#why-redissharedbreaker-is-a-type-of-its-own)).
/// Every method is the generic one's, through `Deref`.
///
/// # Examples
///
/// ```no_run
/// use lazybreaker_fleet::redis::SharedBreaker;
/// use lazybreaker::Breaker;
/// use std::time::Duration;
///
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// let client = redis::Client::open("redis://127.0.0.1:6379/")?;
/// let shared = SharedBreaker::builder(client)
///     .sync_interval(Duration::from_millis(200))
///     .store_timeout(Duration::from_millis(20))
///     .build(
///         Breaker::builder()
///             .name("payments")
///             .max_requests(2)
///             .timeout(Duration::from_secs(30)),
///     )?;
/// // Nothing is connected yet: at start-up, check the address and the password (one read).
/// shared.check_store().await?;
/// let reply = shared.execute(|| async { Ok::<_, std::io::Error>("paid") }).await;
/// assert_eq!(reply.unwrap(), "paid");
/// # Ok(())
/// # }
/// # let _ = example;
/// ```
pub struct SharedBreaker<P = ConsecutiveFailures, O = ()>(fleet::SharedBreaker<RedisStore, P, O>);

impl<P: TripPolicy, O: Observer> std::fmt::Debug for SharedBreaker<P, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl SharedBreaker {
    /// A builder for a shared breaker on `client`'s Redis server.
    pub fn builder(client: redis::Client) -> SharedBuilder {
        SharedBuilder(fleet::SharedBreaker::builder(RedisStore::new(client)))
    }
}

impl<P: TripPolicy, O: Observer> SharedBreaker<P, O> {
    /// The generic shared breaker this is.
    pub fn into_inner(self) -> fleet::SharedBreaker<RedisStore, P, O> {
        self.0
    }
}

impl<P: TripPolicy, O: Observer> Deref for SharedBreaker<P, O> {
    type Target = fleet::SharedBreaker<RedisStore, P, O>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl<P: TripPolicy, O: Observer> From<SharedBreaker<P, O>>
    for fleet::SharedBreaker<RedisStore, P, O>
{
    fn from(shared: SharedBreaker<P, O>) -> Self {
        shared.0
    }
}

/// Configures a [`SharedBreaker`] on Redis: from [`SharedBreaker::builder`]. The knobs are
/// [`fleet::SharedBuilder`]'s, and [`key_ttl`](Self::key_ttl); every knob follows the
/// zero-means-default rule of the breaker's own builder.
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct SharedBuilder(fleet::SharedBuilder<RedisStore>);

impl SharedBuilder {
    /// See [`fleet::SharedBuilder::sync_interval`]. Default (and zero): 250 ms.
    pub fn sync_interval(self, sync_interval: Duration) -> Self {
        Self(self.0.sync_interval(sync_interval))
    }

    /// See [`fleet::SharedBuilder::store_timeout`]; also each Redis operation's own limit
    /// (connecting included). Default (and zero): 50 ms.
    pub fn store_timeout(mut self, store_timeout: Duration) -> Self {
        self.0.store_mut().set_timeout(store_timeout);
        Self(self.0.store_timeout(store_timeout))
    }

    /// How long the shared keys live after their last update (never less than an open
    /// period): a breaker nobody uses any more leaves nothing behind. Default (and zero):
    /// one hour; at most about 285 years, which [`Duration::MAX`] saturates to.
    pub fn key_ttl(mut self, key_ttl: Duration) -> Self {
        self.0.store_mut().set_key_ttl(key_ttl);
        self
    }

    /// See [`fleet::SharedBuilder::lease_for`]. Default (and zero): 10 s.
    pub fn lease_for(self, lease_for: Duration) -> Self {
        Self(self.0.lease_for(lease_for))
    }

    /// See [`fleet::SharedBuilder::quorum`]. Default (and zero): 1.
    pub fn quorum(self, quorum: u32) -> Self {
        Self(self.0.quorum(quorum))
    }

    /// See [`fleet::SharedBuilder::vote_window`]. Default (and zero): 60 s.
    pub fn vote_window(self, vote_window: Duration) -> Self {
        Self(self.0.vote_window(vote_window))
    }

    /// The shared breaker around the breaker `breaker` builds; its name names the shared
    /// record. Nothing is connected yet: the first call connects (within the store timeout).
    ///
    /// # Errors
    ///
    /// [`ConfigError`] for field `name` if the breaker's name is empty (it keys the shared
    /// record) or holds `{` or `}` (they would break the Redis Cluster hash tag).
    pub fn build<P: TripPolicy, O: Observer>(
        self,
        breaker: Builder<P, O>,
    ) -> Result<SharedBreaker<P, O>, ConfigError> {
        self.0.build(breaker).map(SharedBreaker)
    }
}
