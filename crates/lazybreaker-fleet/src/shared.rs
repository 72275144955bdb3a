//! [`SharedBreaker`]: a local breaker that follows, and feeds, the fleet's shared decision
//! (see the [module documentation](super)), and [`SharedBuilder`], which makes one. Generic
//! over the [`FleetStore`]: nothing here names a store.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use lazybreaker::classify::{Classify, OkIsSuccess};
use lazybreaker::door::contain::{self, FirstPanic};
use lazybreaker::door::gate::{self, Admit, At, Recorded};
use lazybreaker::door::{self, BreakerSeam};
use lazybreaker::observe::{FleetEvent, Observer};
use lazybreaker::policy::{ConsecutiveFailures, Outcome, TripPolicy};
use lazybreaker::Breaker;
use lazybreaker::Permit;
use lazybreaker::State;
use lazybreaker::{Error, Rejected};
use parking_lot::Mutex;

mod builder;
mod check;
mod publish;
mod slots;

pub use builder::SharedBuilder;

use builder::Knobs;

use slots::Slots;

use super::link::Link;
use super::stats::FleetStats;
use super::store::{FleetStore, Lease, SharedRecord, StoreError};

/// The breaker type a [`SharedBreaker`] runs: yours, with its [`Link`] beside your observer.
/// Crate-private: users see it as what [`SharedBreaker::breaker`] returns.
pub(crate) type LinkedBreaker<P, O> = Breaker<P, (O, Arc<Link>)>;

/// A permit of a [`LinkedBreaker`].
type LinkedPermit<'a, P, O> = Permit<'a, P, (O, Arc<Link>)>;

/// A breaker shared by a fleet through a [`FleetStore`]: see the
/// [module documentation](super).
///
/// Each process makes one per breaker name, around a local [`Breaker`] configured as usual,
/// and calls through it with [`execute`](Self::execute); the local breaker stays reachable
/// with [`breaker`](Self::breaker) (its state, counts, snapshot and manual controls).
///
/// # Examples
///
/// ```
/// use lazybreaker_fleet::{MemoryStore, SharedBreaker};
/// use lazybreaker::Breaker;
/// use std::time::Duration;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let shared = SharedBreaker::builder(MemoryStore::new())
///     .sync_interval(Duration::from_millis(200))
///     .store_timeout(Duration::from_millis(20))
///     .build(
///         Breaker::builder()
///             .name("payments")
///             .max_requests(2)
///             .timeout(Duration::from_secs(30)),
///     )?;
/// let rt = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
/// let reply = rt.block_on(shared.execute(|| async { Ok::<_, std::io::Error>("paid") }));
/// assert_eq!(reply.unwrap(), "paid");
/// assert_eq!(shared.stats().round_trips, 1, "the first call synced");
/// # Ok(())
/// # }
/// ```
///
/// The store has no bound here (bounds are on the impls); the policy and observer carry
/// the bounds [`Breaker`] itself has.
pub struct SharedBreaker<S, P = ConsecutiveFailures, O = ()> {
    breaker: Arc<LinkedBreaker<P, O>>,
    link: Arc<Link>,
    fleet: Fleet<S>,
}

/// Everything about the fleet: the store, the view of the shared record, the counters.
struct Fleet<S> {
    /// The store; it connects and reconnects by itself.
    store: S,
    knobs: Knobs,
    max_requests: u64,
    /// The local breaker's longest open period: none longer is adopted, followed or
    /// published, whatever the record says.
    max_open: Duration,
    /// The local breaker is in dry run: a shadow candidate beside enforcing members. It
    /// follows the fleet, but writes nothing (no trip, no recovery, no probe lease), so
    /// that no member rejects a real call because of it.
    dry_run: bool,
    instance: String,
    /// When the view goes stale, on the breaker's clock (nanoseconds).
    next_sync: AtomicU64,
    /// A refresh or publication is in flight.
    syncing: AtomicBool,
    view: Mutex<View>,
    degraded: AtomicBool,
    /// Probe leases taken, for their holder ids.
    probes: AtomicU64,
    /// The fleet's probe slots as this process knows them taken (see [`Slots`]).
    slots: Mutex<Slots>,
    /// Whether `slots` may say the fleet is full: read before every call, without the lock.
    slots_hint: AtomicBool,
    stats: Stats,
}

/// The shared record as this process last saw it.
#[derive(Debug, Clone, Copy, Default)]
struct View {
    /// The generation this process follows.
    generation: u64,
    /// The record was open at that generation.
    open: bool,
    /// Until when, on the breaker's clock (nanoseconds), as mapped when it was read.
    open_until: u64,
    /// This process tripped on its own and the fleet has not followed (its vote fell short
    /// of the quorum): it probes on its own, and its recovery is not published.
    local_only: bool,
    /// The record's open period was longer than the local breaker's longest, and was cut
    /// to it: once the cut period is over, the record is cut too (published half-open).
    capped: bool,
}

#[derive(Debug, Default)]
struct Stats {
    round_trips: AtomicU64,
    store_errors: AtomicU64,
    published: AtomicU64,
    adopted: AtomicU64,
    recreated: AtomicU64,
    fleet_rejections: AtomicU64,
}

/// What is left of a call's store budget: the store timeout, spent only by the call's
/// store operations (not by the call itself); and the first panic of an observer told of
/// a store event during the call, which continues when the call's bookkeeping is done.
struct Budget {
    left: Duration,
    panics: FirstPanic,
}

impl Budget {
    /// A budget with `left` to spend: the store timeout, or what an earlier part of the
    /// call left.
    fn new(left: Duration) -> Self {
        Self {
            left,
            panics: FirstPanic::default(),
        }
    }

    /// The time left; `None` when spent.
    fn left(&self) -> Option<Duration> {
        (!self.left.is_zero()).then_some(self.left)
    }

    /// Spends the time since `started`.
    fn spend(&mut self, started: Instant) {
        self.left = self.left.saturating_sub(started.elapsed());
    }
}

/// Clears the in-flight mark of a refresh when it ends, however it ends (a cancelled
/// call's refresh too); and puts back a decision it took but did not publish.
struct SyncGuard<'a, S> {
    fleet: &'a Fleet<S>,
    link: &'a Link,
    unpublished: bool,
}

impl<S> Drop for SyncGuard<'_, S> {
    fn drop(&mut self) {
        if self.unpublished {
            self.link.restore_pending();
        }
        self.fleet.syncing.store(false, Ordering::Release);
    }
}

/// A fleet-wide probe lease held by a call: its holder id (and number) and the generation
/// it is of.
struct Held {
    holder: String,
    number: u64,
    generation: u64,
}

impl<S: FleetStore, P: TripPolicy, O: Observer> SharedBreaker<S, P, O> {
    /// The local breaker: its state, counts, snapshot and manual controls. Calls made on it
    /// directly are counted as usual, and its changes are published at this shared
    /// breaker's next call. Its observer is yours, paired with the shared breaker's own
    /// (`breaker().observer().0` is yours). Shared (an `Arc`), so that what reads breakers
    /// reads it as any other: `Arc::clone(shared.breaker())` to the core's Prometheus
    /// collector, `lazybreaker-otel`'s `BreakerMetrics` or the status page; the fleet's own
    /// figures are [`stats`](Self::stats) (in Prometheus: `prometheus::FleetCollector`,
    /// feature `prometheus`).
    pub fn breaker(&self) -> &Arc<LinkedBreaker<P, O>> {
        &self.breaker
    }

    /// The breaker's name, which names the shared record.
    pub fn name(&self) -> &str {
        self.breaker.name()
    }

    /// The local breaker's state (see [`Breaker::state`]).
    pub fn state(&self) -> State {
        self.breaker.state()
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.fleet.store
    }

    /// What this shared breaker did with its store so far.
    pub fn stats(&self) -> FleetStats {
        let s = &self.fleet.stats;
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        FleetStats {
            round_trips: n(&s.round_trips),
            store_errors: n(&s.store_errors),
            published: n(&s.published),
            adopted: n(&s.adopted),
            recreated: n(&s.recreated),
            fleet_rejections: n(&s.fleet_rejections),
            generation: self.fleet.view.lock().generation,
            degraded: self.fleet.degraded.load(Ordering::Relaxed),
        }
    }

    /// Runs `make()`'s future if the breaker admits it, and counts its result (`Ok` a
    /// success, `Err` a failure); as [`Breaker::execute_async`], in the fleet.
    ///
    /// Before the call, a stale view is refreshed (by this call only if no other is
    /// refreshing); a half-open probe first leases a fleet-wide slot, and is rejected with
    /// [`Rejected::TooManyRequests`] if the fleet's slots are all held; after the call, a
    /// change it caused is published. The store work of one call waits at most the store
    /// timeout in all; a store that fails or is slow only makes the breaker decide locally.
    ///
    /// With a [health check](lazybreaker::Builder::health_check), the call that finds the open
    /// period over runs it first, under the fleet-wide probe lease with room for one holder:
    /// while it runs, no other instance runs a check (their checks are rejected with
    /// [`Rejected::Checking`], counted in [`FleetStats::fleet_rejections`]), and no probe
    /// of an instance still open starts. A passed check's call is the fleet's probe, under
    /// the same lease, its result published as a probe's; a failed check reopens the
    /// breaker, published as a failed probe's reopening. A check cancelled midway holds the
    /// fleet's slot until its lease expires ([`lease_for`](SharedBuilder::lease_for)).
    /// (With `max_requests` above 1, an instance that has not heard of the recovery checks
    /// before its own first probe, one at a time across the fleet.)
    ///
    /// A cancelled call counts as the local breaker's
    /// [`abandoned_as`](lazybreaker::Builder::abandoned_as) says, and its lease, if any, expires.
    ///
    /// # Errors
    ///
    /// [`Error::Rejected`] if the breaker, or the fleet, did not admit the call;
    /// [`Error::Inner`] with the call's own error.
    pub async fn execute<F, Fut, T, E>(&self, make: F) -> Result<T, Error<E>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        self.execute_with(make, OkIsSuccess).await
    }

    /// Like [`execute`](Self::execute), with `classify` deciding how the result counts.
    ///
    /// A panic in `classify` counts as an exclusion, as in
    /// [`Breaker::execute_classified`] (the breaker cannot know what the result meant): a
    /// half-open probe's lease is given back, counting nothing toward the fleet's recovery
    /// and reopening nothing; the panic continues once the call's bookkeeping is done.
    ///
    /// # Errors
    ///
    /// As [`execute`](Self::execute).
    pub async fn execute_classified<F, Fut, T, E, C>(
        &self,
        make: F,
        classify: C,
    ) -> Result<T, Error<E>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        C: Fn(&Result<T, E>) -> Outcome,
    {
        self.execute_with(make, classify).await
    }

    /// Like [`execute_classified`](Self::execute_classified), with any [`Classify`] rather
    /// than a closure (as [`Breaker::execute_with`]): an HTTP classifier, or one that says
    /// how long the dependency asked to be left alone ([`Classify::open_for`]: the local
    /// breaker opens for that long, and the fleet adopts the opening as any other).
    ///
    /// # Errors
    ///
    /// As [`execute`](Self::execute).
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::classify::Classify;
    /// use lazybreaker::policy::Outcome;
    /// use lazybreaker::{Breaker, Error, State};
    /// use lazybreaker_fleet::{MemoryStore, SharedBreaker};
    /// use std::time::Duration;
    ///
    /// /// `Err(secs)`: the dependency said "come back in `secs` seconds".
    /// struct Backoff;
    /// impl Classify<(), u64> for Backoff {
    ///     fn classify(&self, r: &Result<(), u64>) -> Outcome {
    ///         if r.is_ok() { Outcome::Success } else { Outcome::Failure }
    ///     }
    ///     fn open_for(&self, r: &Result<(), u64>) -> Option<Duration> {
    ///         r.as_ref().err().map(|secs| Duration::from_secs(*secs))
    ///     }
    /// }
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let shared = SharedBreaker::builder(MemoryStore::new())
    ///     .build(Breaker::builder().name("payments"))?; // trips after 6 failures in a row...
    /// let rt = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
    /// let asked = rt.block_on(shared.execute_with(|| async { Err::<(), u64>(90) }, Backoff));
    /// assert!(matches!(asked, Err(Error::Inner(90))));
    /// assert_eq!(shared.state(), State::Open); // ...but the dependency asked for 90 s
    /// # Ok(())
    /// # }
    /// ```
    pub async fn execute_with<F, Fut, T, E, C>(&self, make: F, classify: C) -> Result<T, Error<E>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        C: Classify<T, E>,
    {
        // The fast path: a fresh view, and the local breaker closed or rejecting. Every store
        // operation is boxed, off this future, so that the calls that do none (almost all)
        // move and poll a future of a few words; a half-open probe runs in a boxed future of
        // its own. What the store work before the call spent is carried to the work after
        // it, so that one call never waits on the store longer than the store timeout.
        let mut left = self.fleet.knobs.store_timeout;
        let now = self.breaker.clock_nanos();
        let now = if self.is_stale(now) {
            left = Box::pin(self.sync_before()).await;
            self.breaker.clock_nanos()
        } else {
            now // one clock read for the staleness check and the admission both
        };
        if self.fleet.slots_hint.load(Ordering::Relaxed) && self.fleet_full(now) {
            // The fleet's probe slots are held: no local takeover, no store round trip.
            let rejected = Rejected::TooManyRequests;
            self.breaker.count_rejection(rejected);
            self.fleet
                .stats
                .fleet_rejections
                .fetch_add(1, Ordering::Relaxed);
            return Err(Error::Rejected(rejected));
        }
        let (permit, probe) = match gate::admit(&*self.breaker, At::Given(now)) {
            Admit::Call(permit, probe) => (permit, probe),
            Admit::Rejected(_, rejected) => return Err(Error::Rejected(rejected)),
            Admit::Check(gate) => {
                return Box::pin(self.checked(gate, make, classify, left)).await;
            }
        };
        // Whether the call is a half-open probe is the admission's answer, not the link's:
        // the link hears of a change only when it is delivered, which a slow observer on
        // another thread can delay past this admission.
        // A dry run's probes are its own: they lease no fleet-wide slot.
        if probe && !self.fleet.dry_run {
            return Box::pin(self.probe(permit, make, classify, left)).await;
        }
        let mut result = make().await;
        let (outcome, panics) = classified(&classify, &mut result, permit);
        if self.link.pending() {
            Box::pin(self.settle_after(None, outcome, left, panics)).await;
        } else {
            contain::resume(panics);
        }
        result.map_err(Error::Inner)
    }

    /// The refresh before a call: returns the store time left for the rest of the call.
    /// An observer's panic continues after the refresh's bookkeeping, before anything is
    /// admitted.
    async fn sync_before(&self) -> Duration {
        let mut budget = Budget::new(self.fleet.knobs.store_timeout);
        self.sync_now(&mut budget).await;
        contain::resume(budget.panics);
        budget.left
    }

    /// The store work after a call, within `left`; the classifier's panic in `panics`, or
    /// else an observer's, then continues.
    async fn settle_after(
        &self,
        lease: Option<Held>,
        outcome: Outcome,
        left: Duration,
        panics: FirstPanic,
    ) {
        let mut budget = Budget::new(left);
        budget.panics = panics;
        self.settle(lease, outcome, &mut budget).await;
        contain::resume(budget.panics);
    }

    /// A half-open probe the local breaker admitted: leased fleet-wide, made, and settled,
    /// within `left` of store time.
    async fn probe<F, Fut, T, E, C>(
        &self,
        permit: Permit<'_, P, (O, Arc<Link>)>,
        make: F,
        classify: C,
        left: Duration,
    ) -> Result<T, Error<E>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        C: Classify<T, E>,
    {
        let mut budget = Budget::new(left);
        let (permit, lease) = match self.lease(permit, &mut budget).await {
            Ok(admitted) => admitted,
            Err(rejected) => {
                contain::resume(budget.panics);
                return Err(Error::Rejected(rejected));
            }
        };
        self.probe_call(permit, lease, make, classify, budget).await
    }

    /// A probe admitted locally and leased fleet-wide (`lease`: `None` for a local one, or a
    /// health check's lease carried over): the call made, classified, its result settled
    /// with the store within what is left of `budget`; then a panic kept on the way
    /// continues.
    async fn probe_call<F, Fut, T, E, C>(
        &self,
        permit: LinkedPermit<'_, P, O>,
        lease: Option<Held>,
        make: F,
        classify: C,
        mut budget: Budget,
    ) -> Result<T, Error<E>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        C: Classify<T, E>,
    {
        let mut result = make().await;
        let (outcome, panics) = classified(&classify, &mut result, permit);
        budget.panics.merge(panics);
        if lease.is_some() || self.link.pending() {
            self.settle(lease, outcome, &mut budget).await;
        }
        contain::resume(budget.panics);
        result.map_err(Error::Inner)
    }

    /// Refreshes the view now, or publishes a local decision that waits (one round trip,
    /// within the store timeout), unless a refresh is in flight already: for a process that
    /// wants to follow the fleet before its next call (at start-up, say).
    pub async fn sync(&self) {
        let mut budget = Budget::new(self.fleet.knobs.store_timeout);
        self.sync_now(&mut budget).await;
        contain::resume(budget.panics);
    }

    /// Checks that the store answers, at start-up say: one read, within the store timeout.
    /// A misconfigured store (a wrong address or password) otherwise shows only through
    /// [`FleetEvent::Degraded`] and [`FleetStats::store_errors`], while the breaker decides
    /// locally. On success the view is synced, as [`sync`](Self::sync) does; on failure the
    /// breaker degrades, as a failed sync does (and re-syncs when the store answers), and
    /// the error is returned.
    ///
    /// # Errors
    ///
    /// The [`StoreError`] of the read: the store could not be reached, refused the read
    /// (authentication), did not answer within the store timeout, or holds an invalid
    /// record.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker_fleet::{MemoryStore, SharedBreaker};
    /// use lazybreaker::Breaker;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = MemoryStore::new();
    /// let shared = SharedBreaker::builder(store.clone()).build(Breaker::builder().name("payments"))?;
    /// let rt = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
    /// rt.block_on(shared.check_store())?; // fails fast on a store that does not answer
    /// store.set_failing(true);
    /// assert!(rt.block_on(shared.check_store()).is_err());
    /// assert!(shared.stats().degraded);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn check_store(&self) -> Result<(), StoreError> {
        let mut budget = Budget::new(self.fleet.knobs.store_timeout);
        let now = self.breaker.clock_nanos();
        let interval = nanos(self.fleet.knobs.sync_interval);
        self.fleet
            .next_sync
            .store(now.saturating_add(interval), Ordering::Relaxed);
        let read = self.fleet.store.read(self.name(), self.now());
        let checked = match self.op_result(&mut budget, validated(read)).await {
            Ok(record) => {
                self.follow_read(record, &mut budget, false).await;
                Ok(())
            }
            Err(e) => Err(e),
        };
        contain::resume(budget.panics);
        checked
    }

    /// The hot-path check at `now`: one or two atomic loads. Stale: the view is
    /// past its sync interval, or a local decision waits to be published (and the store is
    /// not known to be failing: then the interval paces the retries).
    #[inline]
    fn is_stale(&self, now: u64) -> bool {
        now >= self.fleet.next_sync.load(Ordering::Relaxed)
            || (self.link.pending() && !self.fleet.degraded.load(Ordering::Relaxed))
    }

    /// One refresh or publication, if none is in flight.
    async fn sync_now(&self, budget: &mut Budget) {
        self.sync_with(budget, false).await;
    }

    /// [`sync_now`](Self::sync_now); with `follow_equal`, a refresh follows a record at the
    /// view's own generation too (after a stale lease: the local state disagrees with it).
    async fn sync_with(&self, budget: &mut Budget, follow_equal: bool) {
        let fleet = &self.fleet;
        if fleet.syncing.swap(true, Ordering::Acquire) {
            return;
        }
        let mut guard = SyncGuard {
            fleet,
            link: &self.link,
            unpublished: false,
        };
        self.forget_full();
        let now = self.breaker.clock_nanos();
        let interval = nanos(fleet.knobs.sync_interval);
        fleet
            .next_sync
            .store(now.saturating_add(interval), Ordering::Relaxed);
        if self.link.take_pending() {
            guard.unpublished = true;
            guard.unpublished = !self.publish_local(budget).await;
        } else {
            self.refresh(budget, follow_equal).await;
        }
    }

    /// The breaker's clock, as the store operations are given it.
    fn now(&self) -> Duration {
        Duration::from_nanos(self.breaker.clock_nanos())
    }

    /// Runs one store operation within what is left of the budget, counting it and
    /// noting a failure (degraded) or a success (recovered). `None` if it failed or the
    /// budget was spent.
    async fn op<T>(
        &self,
        budget: &mut Budget,
        op: impl Future<Output = Result<T, StoreError>> + Send,
    ) -> Option<T> {
        budget.left()?;
        self.op_result(budget, op).await.ok()
    }

    /// [`op`](Self::op), returning the error; the budget has time left.
    async fn op_result<T>(
        &self,
        budget: &mut Budget,
        op: impl Future<Output = Result<T, StoreError>> + Send,
    ) -> Result<T, StoreError> {
        let left = budget.left;
        self.fleet.stats.round_trips.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        let result = match tokio::time::timeout(left, op).await {
            Ok(result) => result,
            Err(_) => Err(StoreError::Timeout(left)),
        };
        budget.spend(started);
        match result {
            Ok(value) => {
                self.recovered(budget);
                Ok(value)
            }
            Err(e) => {
                self.degrade(&e, budget);
                Err(e)
            }
        }
    }

    /// Reads the record and follows it: adopts a newer one, or writes a vanished one again.
    async fn refresh(&self, budget: &mut Budget, follow_equal: bool) {
        let read = self.fleet.store.read(self.name(), self.now());
        let Some(record) = self.op(budget, validated(read)).await else {
            return;
        };
        self.follow_read(record, budget, follow_equal).await;
    }

    /// Follows the record a read returned: adopts a newer one, writes a vanished one again,
    /// or cuts one whose open period outlasts the local breaker's longest.
    async fn follow_read(&self, record: SharedRecord, budget: &mut Budget, follow_equal: bool) {
        let view = *self.fleet.view.lock();
        if record.generation > view.generation {
            self.adopt(record);
        } else if record.generation < view.generation {
            self.recreate(view, budget).await;
        } else if view.capped
            && view.open
            && self.breaker.clock_nanos() >= view.open_until
            && record.open_for().is_some()
        {
            self.cut(view, budget).await;
        } else if follow_equal && !view.local_only {
            self.follow(record);
        }
    }

    /// A half-open probe the local breaker admitted first leases a fleet-wide slot (its
    /// holder id is returned). A stale lease answer re-syncs and admits once more, as a
    /// closed call only.
    async fn lease<'a>(
        &'a self,
        permit: Permit<'a, P, (O, Arc<Link>)>,
        budget: &mut Budget,
    ) -> Result<(Permit<'a, P, (O, Arc<Link>)>, Option<Held>), Rejected> {
        let view = *self.fleet.view.lock();
        if view.local_only || self.fleet.degraded.load(Ordering::Relaxed) {
            return Ok((permit, None)); // a local probe
        }
        let n = self.fleet.probes.fetch_add(1, Ordering::Relaxed);
        let holder = format!("{}/{n}", self.fleet.instance);
        let knobs = &self.fleet.knobs;
        let lease = self.fleet.store.lease_probe(
            self.name(),
            view.generation,
            self.fleet.max_requests,
            knobs.lease_for,
            &holder,
            self.now(),
        );
        match self.op(budget, lease).await {
            Some(Lease::Taken) => {
                self.note_lease(n);
                Ok((
                    permit,
                    Some(Held {
                        holder,
                        number: n,
                        generation: view.generation,
                    }),
                ))
            }
            None => Ok((permit, None)), // the store failed: a local probe
            Some(Lease::Full) => {
                self.note_full();
                permit.exclude();
                self.fleet
                    .stats
                    .fleet_rejections
                    .fetch_add(1, Ordering::Relaxed);
                Err(Rejected::TooManyRequests)
            }
            Some(Lease::Stale) => {
                // The fleet moved on (or is still open in the server's time): follow it,
                // and if it recovered meanwhile, this call goes ahead as a closed one.
                permit.exclude();
                self.sync_with(budget, true).await;
                let (again, probe) = self.readmit()?;
                if probe {
                    again.exclude();
                    return Err(Rejected::TooManyRequests);
                }
                Ok((again, None))
            }
        }
    }

    /// A call admitted again after a stale lease answer: as at first, except that a breaker
    /// with a health check is never revived unchecked by it (a check it would win is given
    /// back, and the call held back: the next call runs the check).
    fn readmit(&self) -> Result<(LinkedPermit<'_, P, O>, bool), Rejected> {
        let now = self.breaker.clock_nanos();
        match gate::admit(&*self.breaker, At::Given(now)) {
            Admit::Call(permit, probe) => Ok((permit, probe)),
            Admit::Rejected(_, rejected) => Err(rejected),
            Admit::Check(gate) => Err(gate.decline()),
        }
    }

    /// After a call: publishes the change it caused, if any; a probe then gives its lease
    /// back, counting its success toward the fleet's recovery (a publication that starts a
    /// new generation frees every lease at once instead).
    async fn settle(&self, lease: Option<Held>, outcome: Outcome, budget: &mut Budget) {
        if self.link.pending() && !self.fleet.degraded.load(Ordering::Relaxed) {
            self.sync_now(budget).await;
        }
        let Some(Held {
            holder,
            number,
            generation,
        }) = lease
        else {
            return;
        };
        self.fleet
            .slots
            .lock()
            .own
            .retain(|&(held, _)| held != number);
        if self.fleet.view.lock().generation != generation {
            return; // a new generation: every lease of the old one is gone
        }
        let succeeded = outcome == Outcome::Success;
        let max = self.fleet.max_requests;
        let now = self.now();
        let finish =
            self.fleet
                .store
                .finish_probe(self.name(), generation, &holder, succeeded, max, now);
        let Some(record) = self.op(budget, validated(finish)).await else {
            return;
        };
        if record.written {
            // This probe's success was the period's last one: the fleet closed.
            self.fleet.stats.published.fetch_add(1, Ordering::Relaxed);
            self.follow(record);
        } else if record.generation > generation {
            self.adopt(record);
        }
    }

    /// The store failed: decide locally (the store reconnects by itself), and tell the
    /// observers once per outage.
    fn degrade(&self, error: &StoreError, budget: &mut Budget) {
        self.fleet
            .stats
            .store_errors
            .fetch_add(1, Ordering::Relaxed);
        if !self.fleet.degraded.swap(true, Ordering::AcqRel) {
            self.tell(
                &FleetEvent::Degraded {
                    breaker: self.name(),
                    error,
                },
                budget,
            );
        }
    }

    /// The store answered: follow the fleet again, telling the observers if it had failed.
    fn recovered(&self, budget: &mut Budget) {
        if self.fleet.degraded.load(Ordering::Relaxed)
            && self.fleet.degraded.swap(false, Ordering::AcqRel)
        {
            self.tell(
                &FleetEvent::Recovered {
                    breaker: self.name(),
                },
                budget,
            );
        }
    }

    /// Tells the observers of `event`; a panic is kept in the budget and continues when the
    /// call's bookkeeping is done.
    fn tell(&self, event: &FleetEvent<'_>, budget: &mut Budget) {
        budget
            .panics
            .catch((), || self.breaker.observer().0.on_fleet(event));
    }
}

impl<S: FleetStore, P: TripPolicy, O: Observer> std::fmt::Debug for SharedBreaker<S, P, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedBreaker")
            .field("name", &self.name())
            .field("knobs", &self.fleet.knobs)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

/// The verdict on `result`, recorded on `permit` through the front door ([`gate::record`]:
/// every method of the classifier), and how it counted; a panicking classifier records an
/// exclusion (the breaker cannot know what the result meant), as the local breaker's calls
/// do, and its panic is returned to continue once the call's bookkeeping is done.
///
/// (Always inlined: passed to a call, the permit was copied sixteen bytes at a time from
/// the eight-byte stores that had just made it, a store-forwarding stall of a fifth of the
/// shared breaker's closed call.)
#[inline(always)]
fn classified<T, E, C, P, O>(
    classify: &C,
    result: &mut Result<T, E>,
    permit: Permit<'_, P, O>,
) -> (Outcome, FirstPanic)
where
    C: Classify<T, E>,
    P: TripPolicy,
    O: Observer,
{
    match gate::record(&mut Some(permit), classify, result) {
        Recorded::Counted(outcome) => (outcome, FirstPanic::default()),
        // A borrowed permit cannot leave its call: it counts at once, never deferred.
        Recorded::Deferred => (Outcome::Excluded, FirstPanic::default()),
        Recorded::Panicked(panics) => (Outcome::Excluded, panics),
    }
}

/// A store operation's record, validated ([`SharedRecord::validated`]): every record a
/// store returns goes through here, so that one no breaker writes is a store error.
async fn validated(
    op: impl Future<Output = Result<SharedRecord, StoreError>> + Send,
) -> Result<SharedRecord, StoreError> {
    op.await.and_then(SharedRecord::validated)
}

fn nanos(d: Duration) -> u64 {
    door::saturating_nanos(d)
}
