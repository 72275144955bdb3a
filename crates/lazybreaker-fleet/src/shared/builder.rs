//! [`SharedBuilder`]: the knobs of a [`SharedBreaker`] and the store it shares through.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lazybreaker::door::{self, BuilderSeam};
use lazybreaker::observe::Observer;
use lazybreaker::policy::TripPolicy;
use lazybreaker::{Builder, ConfigError};
use parking_lot::Mutex;

use super::slots::Slots;
use super::{Fleet, SharedBreaker, Stats, View};
use crate::link::Link;
use crate::store::FleetStore;

/// Configures a [`SharedBreaker`]: from [`SharedBreaker::builder`].
///
/// Every knob follows the zero-means-default rule of the breaker's own builder.
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct SharedBuilder<S> {
    store: S,
    knobs: Knobs,
}

/// The knobs as given: zero means the default (see [`Knobs::defaulted`]).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Knobs {
    pub(super) sync_interval: Duration,
    pub(super) store_timeout: Duration,
    pub(super) lease_for: Duration,
    pub(super) quorum: u32,
    pub(super) vote_window: Duration,
}

impl<S: FleetStore> SharedBuilder<S> {
    /// How often at most this process reads the shared record: the first call after the
    /// view is this old refreshes it (one round trip), the others go on with the cached
    /// view meanwhile. The bound on how late this process follows a trip elsewhere. Default
    /// (and zero): 250 ms.
    pub fn sync_interval(mut self, sync_interval: Duration) -> Self {
        self.knobs.sync_interval = sync_interval;
        self
    }

    /// The longest a call waits on the store, for all the store work it does together
    /// (a refresh, a lease, a publication); past it the call goes on with the local breaker.
    /// Default (and zero): 50 ms.
    pub fn store_timeout(mut self, store_timeout: Duration) -> Self {
        self.knobs.store_timeout = store_timeout;
        self
    }

    /// How long a half-open probe's fleet-wide lease lasts if its holder never gives it
    /// back (it died): make it longer than a probe call takes. Default (and zero): 10 s.
    ///
    /// It is the fleet's probe timeout: while a probe of this process holds the lease, the
    /// local breaker does not take that probe over (whatever its
    /// [`probe_timeout`](lazybreaker::Builder::probe_timeout)), and a half-open call is
    /// turned away with [`Rejected::TooManyRequests`] without a store round trip (as it is
    /// after the store answered that every slot is held, until the next refresh). Once the
    /// lease expires, the next call takes the probe over and leases the slot itself; a
    /// result the local breaker then drops is not counted by the fleet either.
    ///
    /// [`Rejected::TooManyRequests`]: lazybreaker::Rejected::TooManyRequests
    pub fn lease_for(mut self, lease_for: Duration) -> Self {
        self.knobs.lease_for = lease_for;
        self
    }

    /// How many distinct instances must trip before the fleet opens (see
    /// [One bad instance](crate#one-bad-instance)); until then an instance that tripped is
    /// open on its own. Default (and zero): 1, every trip opens the fleet.
    pub fn quorum(mut self, quorum: u32) -> Self {
        self.knobs.quorum = quorum;
        self
    }

    /// How long a trip's vote counts toward the [`quorum`](Self::quorum). Default (and
    /// zero): 60 s.
    pub fn vote_window(mut self, vote_window: Duration) -> Self {
        self.knobs.vote_window = vote_window;
        self
    }

    /// The store, for a store's own builder in front of this one (Redis's key TTL).
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }

    /// The shared breaker around the breaker `breaker` builds; its name names the shared
    /// record. Nothing is asked of the store yet: the first call syncs (within the store
    /// timeout).
    ///
    /// # Errors
    ///
    /// [`ConfigError`] for field `name` if the breaker's name is empty, or if the store
    /// cannot key a record by it ([`FleetStore::check_name`]).
    pub fn build<P: TripPolicy, O: Observer>(
        self,
        breaker: Builder<P, O>,
    ) -> Result<SharedBreaker<S, P, O>, ConfigError> {
        let max_requests = u64::from(breaker.max_requests_or_default());
        let max_open = breaker.max_open_duration_or_default();
        let dry_run = breaker.is_dry_run();
        let link = Arc::new(Link::new());
        let breaker = breaker.and_observer(Arc::clone(&link)).build();
        let name = breaker.name();
        if name.is_empty() {
            return Err(ConfigError::new(
                "name",
                "\"\"",
                "must name the shared record: not empty",
            ));
        }
        self.store
            .check_name(name)
            .map_err(|e| door::for_breaker(e, name))?;
        Ok(SharedBreaker {
            breaker: Arc::new(breaker),
            link,
            fleet: Fleet {
                store: self.store,
                knobs: self.knobs.defaulted(),
                max_requests,
                max_open,
                dry_run,
                instance: instance_id(),
                next_sync: AtomicU64::new(0),
                syncing: AtomicBool::new(false),
                view: Mutex::new(View::default()),
                degraded: AtomicBool::new(false),
                probes: AtomicU64::new(0),
                slots: Mutex::new(Slots::default()),
                slots_hint: AtomicBool::new(false),
                stats: Stats::default(),
            },
        })
    }
}

impl Knobs {
    pub(super) fn defaulted(self) -> Self {
        let or = |d: Duration, default: Duration| if d.is_zero() { default } else { d };
        Self {
            sync_interval: or(self.sync_interval, Duration::from_millis(250)),
            store_timeout: or(self.store_timeout, Duration::from_millis(50)),
            lease_for: or(self.lease_for, Duration::from_secs(10)),
            quorum: self.quorum.max(1),
            vote_window: or(self.vote_window, Duration::from_secs(60)),
        }
    }
}

/// An id for this instance's probe leases and votes, unique in the fleet: the host's
/// process id, the time it started, and a count of the shared breakers made.
fn instance_id() -> String {
    static MADE: AtomicU64 = AtomicU64::new(0);
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = MADE.fetch_add(1, Ordering::Relaxed);
    format!("{}-{started:x}-{n}", std::process::id())
}

impl<S: FleetStore> SharedBreaker<S> {
    /// A builder for a shared breaker on `store`.
    pub fn builder(store: S) -> SharedBuilder<S> {
        SharedBuilder {
            store,
            knobs: Knobs::default(),
        }
    }
}
