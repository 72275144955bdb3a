//! [`Registry`]: breakers per key (endpoint, host, method), made on first use from a
//! factory, looked up without a lock and without a shared write, optionally bounded, with no
//! timer.
//!
//! The map is a lock-free hash map ([papaya](https://docs.rs/papaya)): a lookup hashes its
//! key once (with `S`, [`RegistryHasher`] by default: keyed per process, since keys often
//! come from traffic) and reads the table under an epoch guard that writes only this
//! thread's own slot. [`with`](Registry::with) and [`execute`](Registry::execute) lend the
//! breaker for one call, so that a lookup of an existing key writes nothing another core
//! reads; [`breaker`](Registry::breaker) returns an `Arc`, whose count it increments (a
//! shared write: two threads on one key then share its cache line). A new key builds its
//! breaker outside the map (the factory is user code), then inserts it unless another
//! thread inserted one first.
//!
//! Eviction (when bounded) is in [`evict`]; the answer when the bound is reached and
//! nothing can be evicted is [`RegistryFull`].

mod evict;

use std::borrow::Borrow;
use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::breaker::gate;
use crate::breaker::BreakerSeam;
use crate::breaker::{Breaker, Builder, OwnedPermit};
use crate::clock::Clock;
use crate::clock::ClockSource;
use crate::error::{Error, RejectedBy};
use crate::nanos::{saturating_nanos, Nanos};
use crate::observe::Observer;
use crate::policy::{ConsecutiveFailures, TripPolicy};

/// A registry's default key hasher: foldhash's `RandomState`, fast and keyed per process
/// (minimally DoS-resistant). See [`Registry::with_hasher`] for another.
pub type RegistryHasher = foldhash::fast::RandomState;

/// The factory a registry builds its breakers with.
type Factory<K, P, O> = dyn Fn(&K) -> Builder<P, O> + Send + Sync;

/// Breakers per key, made on first use: one breaker per endpoint, host or method (brpc keeps
/// one per server node, Kitex one per method, Polly selects a pipeline per authority).
///
/// - [`execute`](Registry::execute) and [`with`](Registry::with) run a call through the
///   key's breaker, building it on first use with the factory's [`Builder`], and lend it
///   for the call: an existing key's lookup takes no lock and writes nothing shared, so two
///   threads on one key scale like two threads on one breaker.
/// - [`breaker`](Registry::breaker) returns the key's breaker as an `Arc` to keep;
///   [`get`](Registry::get) only looks. Lookups borrow (`&str` for `String` keys).
/// - Each breaker is named after its key (its `Display`), unless the factory named it, so
///   callbacks and metrics can tell them apart.
/// - With [`clock`](Registry::clock), every breaker and the registry itself share one
///   clock (a [`ManualClock`](crate::ManualClock) in tests).
/// - With [`max_keys`](Registry::max_keys), the registry holds at most that many
///   breakers: inserting into a full registry first evicts idle closed breakers, least
///   recently used first, evaluated then and there (no background task). See
///   [`try_breaker`](Registry::try_breaker) for what a key gets when nothing can be evicted.
/// - [`remove_idle`](Registry::remove_idle), [`retain`](Registry::retain) and
///   [`remove`](Registry::remove) sweep on demand; [`breakers`](Registry::breakers) lists
///   them (for snapshots and metrics); [`force_open_all`](Registry::force_open_all) and its
///   siblings apply a manual control to every breaker at once.
///
/// A breaker removed or evicted while someone still holds it (a permit, an `Arc`, a call
/// it was lent to) stays valid for them: it is only no longer the key's breaker, and the next
/// lookup of the key builds a new one. The registry drops its own reference once no lookup
/// can still see the breaker, perhaps a little later and on another thread.
///
/// # Examples
///
/// ```
/// use lazybreaker::{Breaker, Registry, State};
/// use std::time::Duration;
///
/// let registry: Registry<String> = Registry::new(|_host: &String| {
///     Breaker::builder().timeout(Duration::from_secs(30))
/// });
/// // The call path: the key's breaker, lent for the call.
/// let body = registry.execute("api.example.com", || Ok::<_, ()>("body"))?;
/// assert_eq!(body, "body");
/// // A breaker to keep: an `Arc`.
/// let a = registry.breaker("api.example.com");
/// assert_eq!(a.name(), "api.example.com");
/// assert!(std::sync::Arc::ptr_eq(&a, &registry.breaker("api.example.com")));
/// assert!(registry.get("other.example.com").is_none());
/// assert_eq!(registry.len(), 1);
///
/// // An operator takes every dependency out at once:
/// registry.force_open_all();
/// assert_eq!(a.state(), State::Open);
/// # Ok::<(), lazybreaker::Error<()>>(())
/// ```
pub struct Registry<K, P = ConsecutiveFailures, O = (), S = RegistryHasher> {
    /// The breakers by key, hashed with `S`.
    map: papaya::HashMap<K, Slot<P, O>, S>,
    factory: Box<Factory<K, P, O>>,
    /// The clock given with [`clock`](Registry::clock), for the breakers; `None`: each
    /// breaker's builder picks its own.
    shared_clock: Option<ClockSource>,
    /// What the registry measures idleness with: the shared clock, or a coarse one.
    clock: ClockSource,
    max_keys: Option<usize>,
    /// Breakers held; at most `max_keys`. Kept here (the map's own length is not reserved
    /// ahead of an insertion), and changed only by the thread whose insertion or removal
    /// took effect.
    len: AtomicUsize,
    /// Keys answered with a breaker the registry could not keep (see `try_breaker`).
    overflowed: AtomicU64,
    /// After an eviction scan found nothing to evict: how many full insertions are answered
    /// at once before the next scan (see `evict`).
    skip_scans: AtomicUsize,
}

/// A key's breaker, and when it was last seen in use.
///
/// Use is tracked the CLOCK way, so that a lookup reads no clock and, in the steady state,
/// writes nothing: a lookup sets the `referenced` flag (only if it is not set already); a
/// sweep or an eviction scan at time `now` moves a set flag into `seen = now` and clears it.
/// A breaker's last use is therefore known to the granularity of those scans, and never
/// later than it was: `seen` is the insertion or the latest scan that found it referenced.
struct Slot<P, O> {
    breaker: Arc<Breaker<P, O>>,
    /// `[referenced: 1 bit][seen: 63 bits]`, `seen` on the registry's clock (saturated to
    /// 63 bits): one word, so that a key's slot is two.
    used: AtomicU64,
}

/// The flag of [`Slot::used`]: used since the last scan.
const REFERENCED: u64 = 1 << 63;

impl<P: TripPolicy, O: Observer> Slot<P, O> {
    fn new(breaker: Arc<Breaker<P, O>>, now: Nanos) -> Self {
        Self {
            breaker,
            used: AtomicU64::new(now.min(!REFERENCED)),
        }
    }

    /// The breaker, its use recorded (a write only when the flag is not set already).
    #[inline]
    fn lend(&self) -> &Breaker<P, O> {
        if self.used.load(Ordering::Relaxed) & REFERENCED == 0 {
            self.used.fetch_or(REFERENCED, Ordering::Relaxed);
        }
        &self.breaker
    }

    #[inline]
    fn touch(&self) -> Arc<Breaker<P, O>> {
        self.lend();
        Arc::clone(&self.breaker)
    }

    /// The last use known at `now`, moving a reference since the last scan into it.
    fn last_used(&self, now: Nanos) -> Nanos {
        let now = now.min(!REFERENCED);
        let mut used = self.used.load(Ordering::Relaxed);
        while used & REFERENCED != 0 {
            let seen = (used & !REFERENCED).max(now);
            match self
                .used
                .compare_exchange_weak(used, seen, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return seen,
                Err(now_used) => used = now_used,
            }
        }
        used
    }
}

/// The answer of [`Registry::try_breaker`] for a new key when the registry holds
/// [`max_keys`](Registry::max_keys) breakers and none of them can be evicted: every one is
/// open, half-open, forced, or in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[error("breaker registry is full: {max_keys} keys, none idle and closed")]
#[non_exhaustive]
pub struct RegistryFull {
    /// The registry's bound.
    pub max_keys: usize,
}

impl<K, P: TripPolicy, O: Observer> Registry<K, P, O, RegistryHasher>
where
    K: Hash + Eq,
{
    /// A registry that builds each key's breaker from the builder `factory` returns for it.
    ///
    /// The factory runs once per key (more than once only if two threads ask for a new key
    /// at the same moment: one breaker is kept), outside every lock of the registry.
    pub fn new<F>(factory: F) -> Self
    where
        F: Fn(&K) -> Builder<P, O> + Send + Sync + 'static,
    {
        Self::with_hasher(factory, RegistryHasher::default())
    }
}

impl<K, P: TripPolicy, O: Observer, S> Registry<K, P, O, S>
where
    K: Hash + Eq,
    S: BuildHasher + Clone,
{
    /// [`new`](Registry::new) with another key hasher: the default is foldhash's
    /// `RandomState`, keyed per process and minimally DoS-resistant; pass std's
    /// `RandomState` (SipHash) for stronger resistance at about 5x the hashing cost.
    pub fn with_hasher<F>(factory: F, hasher: S) -> Self
    where
        F: Fn(&K) -> Builder<P, O> + Send + Sync + 'static,
    {
        Self {
            map: papaya::HashMap::with_hasher(hasher),
            factory: Box::new(factory),
            shared_clock: None,
            clock: ClockSource::default_for(false, Duration::ZERO),
            max_keys: None,
            len: AtomicUsize::new(0),
            overflowed: AtomicU64::new(0),
            skip_scans: AtomicUsize::new(0),
        }
    }

    /// Every breaker this registry builds from now on reads `clock`, and so does the
    /// registry when it measures idleness: one time for all (pass a
    /// [`ManualClock`](crate::ManualClock) in tests). A setting for building the registry,
    /// before its first breaker: the last uses of breakers it already holds were read on
    /// the previous clock.
    #[must_use]
    pub fn clock<C: Clock + 'static>(mut self, clock: C) -> Self {
        let clock = ClockSource::of(clock);
        self.clock = clock.clone();
        self.shared_clock = Some(clock);
        self
    }

    /// Holds at most `max_keys` breakers (at least 1): see
    /// [`try_breaker`](Registry::try_breaker) for what happens at the bound. A setting for
    /// building the registry: breakers it already holds are not evicted to meet it (the
    /// next insertions evict first).
    #[must_use]
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = Some(max_keys.max(1));
        self
    }

    /// The bound set with [`max_keys`](Registry::max_keys), if any.
    pub fn key_limit(&self) -> Option<usize> {
        self.max_keys
    }

    /// The key's breaker, if it has one; builds nothing. Like a call through the breaker,
    /// this counts as a use for eviction and [`remove_idle`](Registry::remove_idle): an
    /// exporter that only reads should use [`breakers`](Registry::breakers) or
    /// [`for_each`](Registry::for_each).
    pub fn get<Q>(&self, key: &Q) -> Option<Arc<Breaker<P, O>>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.map.pin().get(key).map(Slot::touch)
    }

    /// How many breakers the registry holds.
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// Whether the registry holds no breaker.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many times a key got a breaker the registry could not keep, because it was full
    /// (see [`breaker`](Registry::breaker)).
    pub fn overflowed(&self) -> u64 {
        self.overflowed.load(Ordering::Relaxed)
    }

    /// Removes the key's breaker and returns it. Whoever still holds it keeps a valid
    /// breaker; the next lookup of the key builds a new one.
    pub fn remove<Q>(&self, key: &Q) -> Option<Arc<Breaker<P, O>>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let map = self.map.pin();
        let removed = map.remove(key).map(|slot| Arc::clone(&slot.breaker));
        if removed.is_some() {
            self.len.fetch_sub(1, Ordering::Relaxed);
        }
        removed
    }

    /// Keeps only the breakers for which `keep` answers `true`. `keep` runs under no lock of
    /// the registry (it may call the registry and the breaker it is given), once for each
    /// breaker present when the sweep reaches it; a breaker inserted meanwhile may or may not
    /// be seen. If `keep` panics, what was removed so far stays removed.
    pub fn retain(&self, mut keep: impl FnMut(&K, &Arc<Breaker<P, O>>) -> bool) {
        let map = self.map.pin();
        for (key, slot) in map.iter() {
            if !keep(key, &slot.breaker) {
                // This entry, not one inserted for the key since `keep` saw it.
                self.remove_slot(&map, key, |now| Arc::ptr_eq(&now.breaker, &slot.breaker));
            }
        }
    }

    /// Removes the breakers that are idle: closed and not forced, not returned by a lookup
    /// for at least `idle_for` (on the registry's clock), and held by nobody else (no
    /// permit outstanding, no `Arc` kept by a caller). Returns how many it removed.
    ///
    /// Lookups read no clock: a breaker's last use is known to the granularity of these
    /// sweeps (and of the eviction scans of a full registry). A breaker used since the
    /// previous sweep counts as used at this one, so what this removes has really been
    /// unused for at least `idle_for`, perhaps for up to one sweep interval more.
    pub fn remove_idle(&self, idle_for: Duration) -> usize {
        let now = self.clock.now();
        let idle_since = now.saturating_sub(saturating_nanos(idle_for));
        self.evict_where(|slot| slot.last_used(now) <= idle_since, usize::MAX)
    }

    /// Every key and its breaker, at this moment (clones of the keys and of the `Arc`s), in
    /// no particular order: for snapshots and metrics.
    pub fn breakers(&self) -> Vec<(K, Arc<Breaker<P, O>>)>
    where
        K: Clone,
    {
        let map = self.map.pin();
        let mut all = Vec::with_capacity(self.len());
        all.extend(
            map.iter()
                .map(|(k, slot)| (k.clone(), Arc::clone(&slot.breaker))),
        );
        all
    }

    /// Runs `f` on every breaker the registry holds (under no lock: `f` may call the
    /// registry), without cloning a key or an `Arc`. A breaker inserted meanwhile may or may
    /// not be seen.
    pub fn for_each(&self, mut f: impl FnMut(&Breaker<P, O>)) {
        for (_, slot) in self.map.pin().iter() {
            f(&slot.breaker);
        }
    }

    /// [`Breaker::force_open`] on every breaker the registry holds now (breakers built
    /// later start normal).
    pub fn force_open_all(&self) {
        self.for_each(Breaker::force_open);
    }

    /// [`Breaker::force_closed`] on every breaker the registry holds now.
    pub fn force_closed_all(&self) {
        self.for_each(Breaker::force_closed);
        self.rescan();
    }

    /// [`Breaker::release`] on every breaker the registry holds now; a full registry then
    /// finds the breakers that became idle at its next insertion.
    pub fn release_all(&self) {
        self.for_each(Breaker::release);
        self.rescan();
    }

    /// Removes `key`'s entry if `pick` chooses it, as one step of the map; whether it did
    /// (then this thread, and only this one, counts the removal in `len`).
    fn remove_slot(
        &self,
        map: &papaya::HashMapRef<'_, K, Slot<P, O>, S, impl papaya::Guard>,
        key: &K,
        mut pick: impl FnMut(&Slot<P, O>) -> bool,
    ) -> bool {
        let removed = matches!(map.remove_if(key, |_, slot| pick(slot)), Ok(Some(_)));
        if removed {
            self.len.fetch_sub(1, Ordering::Relaxed);
        }
        removed
    }
}

impl<K, P: TripPolicy, O: Observer, S> Registry<K, P, O, S>
where
    K: Hash + Eq + fmt::Display,
    S: BuildHasher + Clone,
{
    /// The key's breaker, built on first use.
    ///
    /// When the registry is full (see [`max_keys`](Registry::max_keys)) and no breaker can
    /// be evicted, the key gets a breaker of its own that the registry does not keep: the
    /// call goes through, judged by a fresh breaker that remembers nothing past it, and
    /// [`overflowed`](Registry::overflowed) counts it. The registry never grows past its
    /// bound and never panics; use [`try_breaker`](Registry::try_breaker) to handle the full
    /// registry yourself.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::{Breaker, Registry};
    ///
    /// let registry = Registry::new(|_: &String| Breaker::builder());
    /// registry.breaker("search").execute(|| Ok::<_, ()>(()))?;
    /// // A permit that outlives the lookup holds the breaker: `allow_owned`.
    /// let permit = registry.breaker("search").allow_owned()?;
    /// permit.success();
    /// assert_eq!(registry.breaker("search").counts().total_successes, 2);
    /// # Ok::<(), lazybreaker::Error<()>>(())
    /// ```
    pub fn breaker<Q>(&self, key: &Q) -> Arc<Breaker<P, O>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.kept_or_unkept(self.lookup_or_insert(key))
    }

    /// The breaker of a lookup or insertion, kept or not: one the bound left out is counted
    /// as an overflow.
    #[inline]
    #[allow(clippy::type_complexity)]
    fn kept_or_unkept(
        &self,
        found: Result<Arc<Breaker<P, O>>, (RegistryFull, Arc<Breaker<P, O>>)>,
    ) -> Arc<Breaker<P, O>> {
        match found {
            Ok(breaker) => breaker,
            Err((_, breaker)) => {
                self.overflowed.fetch_add(1, Ordering::Relaxed);
                breaker
            }
        }
    }

    /// Asks the key's breaker (built on first use, as [`breaker`](Registry::breaker) does)
    /// to admit a call: a permit that holds the breaker, or a rejection that names it (so a
    /// log line says which key is open).
    ///
    /// # Errors
    ///
    /// [`RejectedBy`] when the key's breaker does not admit the call.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::{Breaker, Registry};
    ///
    /// let registry = Registry::new(|_: &String| {
    ///     Breaker::builder().ready_to_trip(|c| c.consecutive_failures >= 1)
    /// });
    /// registry.allow("payments")?.failure();
    /// let rejected = registry.allow("payments").unwrap_err();
    /// assert_eq!(rejected.breaker(), "payments");
    /// assert!(rejected.to_string().starts_with("circuit breaker `payments` is open"));
    /// registry.allow("search")?.success(); // another key, another breaker
    /// # Ok::<(), lazybreaker::RejectedBy>(())
    /// ```
    pub fn allow<Q>(&self, key: &Q) -> Result<OwnedPermit<P, O>, RejectedBy>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        gate::allow_into(
            self.breaker(key),
            (),
            |(), permit| Ok(permit),
            |(), breaker, rejected| Err(breaker.rejected_by(rejected)),
        )
    }

    /// The key's breaker, built on first use; [`RegistryFull`] when the registry holds
    /// [`max_keys`](Registry::max_keys) breakers and none is idle and closed (all open,
    /// half-open, forced, or in use), so the new key cannot be kept.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::{Breaker, Registry};
    ///
    /// let registry = Registry::new(|_: &String| Breaker::builder()).max_keys(1);
    /// let a = registry.try_breaker("a").unwrap();
    /// a.force_open(); // forced: never evicted
    /// let full = registry.try_breaker("b").unwrap_err();
    /// assert_eq!(full.max_keys, 1);
    /// ```
    pub fn try_breaker<Q>(&self, key: &Q) -> Result<Arc<Breaker<P, O>>, RegistryFull>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.lookup_or_insert(key).map_err(|(full, _)| full)
    }

    /// Runs `call` through the key's breaker (built on first use, as
    /// [`breaker`](Registry::breaker) does): [`Breaker::execute`] on a breaker lent for the
    /// call. The lookup of an existing key takes no lock and writes nothing another thread
    /// reads (no `Arc` count), so this is the call path to use on a hot key.
    ///
    /// # Errors
    ///
    /// As [`Breaker::execute`]: the rejection when the key's breaker does not admit the
    /// call, or the call's own error.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::{Breaker, Error, Registry};
    ///
    /// let registry = Registry::new(|_: &String| {
    ///     Breaker::builder().ready_to_trip(|c| c.consecutive_failures >= 1)
    /// });
    /// assert_eq!(registry.execute("search", || Ok::<_, &str>(7)), Ok(7));
    /// let _ = registry.execute("payments", || Err::<(), _>("down"));
    /// assert!(matches!(
    ///     registry.execute("payments", || Ok::<_, &str>(())),
    ///     Err(Error::Rejected(_))
    /// ));
    /// ```
    pub fn execute<Q, T, E, F>(&self, key: &Q, call: F) -> Result<T, Error<E>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
        F: FnOnce() -> Result<T, E>,
    {
        self.with(key, |breaker| breaker.execute(call))
    }

    /// Runs `f` with the key's breaker (built on first use, as
    /// [`breaker`](Registry::breaker) does), lent for the duration of `f`: no `Arc` is
    /// cloned, and an existing key's lookup takes no lock and writes nothing shared. For the
    /// two-step calls, or anything else [`execute`](Registry::execute) does not cover.
    ///
    /// While `f` runs, the registry keeps every breaker removed meanwhile (by anyone) in
    /// memory; a breaker evicted while lent to `f` counts `f`'s call all the same, it is only
    /// no longer the key's. Use [`breaker`](Registry::breaker) to keep one past `f`.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::{Breaker, Registry};
    ///
    /// let registry = Registry::new(|_: &String| Breaker::builder());
    /// let admitted = registry.with("search", |breaker| match breaker.allow() {
    ///     Ok(permit) => {
    ///         permit.success();
    ///         true
    ///     }
    ///     Err(_) => false,
    /// });
    /// assert!(admitted);
    /// assert_eq!(registry.with("search", |b| b.counts().total_successes), 1);
    /// ```
    #[inline]
    pub fn with<Q, R>(&self, key: &Q, f: impl FnOnce(&Breaker<P, O>) -> R) -> R
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let map = self.map.pin();
        if let Some(slot) = map.get(key) {
            return f(slot.lend());
        }
        drop(map);
        // A key not held yet (looked up just above): built and inserted.
        let breaker = self.kept_or_unkept(self.insert(key.to_owned()));
        f(&breaker)
    }

    #[inline]
    #[allow(clippy::type_complexity)]
    fn lookup_or_insert<Q>(
        &self,
        key: &Q,
    ) -> Result<Arc<Breaker<P, O>>, (RegistryFull, Arc<Breaker<P, O>>)>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        if let Some(breaker) = self.map.pin().get(key).map(Slot::touch) {
            return Ok(breaker);
        }
        self.insert(key.to_owned())
    }

    /// Builds the key's breaker (outside the map: the factory is user code), then keeps it
    /// unless another thread kept one first, evicting to make room when bounded.
    #[cold]
    #[allow(clippy::type_complexity)]
    fn insert(&self, key: K) -> Result<Arc<Breaker<P, O>>, (RegistryFull, Arc<Breaker<P, O>>)> {
        let mut builder = (self.factory)(&key);
        if builder.unnamed() {
            builder = builder.name(key.to_string());
        }
        if let Some(clock) = &self.shared_clock {
            builder = builder.clock_source(clock.clone());
        }
        let breaker = Arc::new(builder.build());
        // Read before the map: the clock may be user code.
        let now = self.clock.now();
        loop {
            {
                let map = self.map.pin();
                if let Some(slot) = map.get(&key) {
                    return Ok(slot.touch()); // another thread kept one first
                }
                if self.reserve() {
                    // Given back unless the breaker is kept: another thread kept one since
                    // (its place, not this one), or the key's `Hash` or `Eq` panicked.
                    let mut place = Place {
                        len: &self.len,
                        kept: false,
                    };
                    return match map.try_insert(key, Slot::new(Arc::clone(&breaker), now)) {
                        Ok(_) => {
                            place.kept = true;
                            Ok(breaker)
                        }
                        Err(kept) => Ok(kept.current.touch()),
                    };
                }
            }
            // Again while a scan finds idle breakers: if another insertion took the room it
            // made, or another scan evicted what it found, that insertion made progress.
            let max_keys = self.max_keys.unwrap_or(usize::MAX);
            if !self.evict_for_room(max_keys) {
                return Err((RegistryFull { max_keys }, breaker));
            }
        }
    }

    /// Takes one place in the bound, if there is one.
    fn reserve(&self) -> bool {
        match self.max_keys {
            None => {
                self.len.fetch_add(1, Ordering::Relaxed);
                true
            }
            Some(max) => self
                .len
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |len| {
                    (len < max).then_some(len + 1)
                })
                .is_ok(),
        }
    }
}

/// A place taken in the bound for an insertion: given back when dropped unkept (whatever
/// ends the insertion, a panic of the key's `Hash` or `Eq` included).
struct Place<'a> {
    len: &'a AtomicUsize,
    kept: bool,
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        if !self.kept {
            self.len.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl<K, P: TripPolicy, O: Observer, S> fmt::Debug for Registry<K, P, O, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("len", &self.len.load(Ordering::Relaxed))
            .field("max_keys", &self.max_keys)
            .finish_non_exhaustive()
    }
}
