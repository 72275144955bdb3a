//! [`MemoryStore`]: a [`FleetStore`] in this process, for tests (yours and ours) and for
//! several shared breakers of one process, with the Redis scripts' semantics.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::store::{Decision, FleetStore, Lease, SharedRecord, StoreError, Vote};

/// A [`FleetStore`] held in this process: the fleet's protocol without a server, for tests
/// of code that uses a [`SharedBreaker`](super::SharedBreaker), and for the shared breakers
/// of one process.
///
/// Clones share one store (through an `Arc`): give each shared breaker a clone. The
/// semantics are the Redis scripts': generation fencing, quorum votes in a window, probe
/// leases that expire, the `max_requests` successes of a half-open period closing the record
/// at the next generation. Records never expire by themselves; [`remove`](Self::remove) and
/// [`clear`](Self::clear) make one vanish (as a store restarted without persistence), and
/// [`set_failing`](Self::set_failing) makes every operation fail (a store outage).
///
/// **Time.** The store's timeline is the latest clock reading any caller gave it (see
/// [`FleetStore`]'s "Time"): it never runs backwards, and it moves only when a breaker that
/// uses the store reads a later time. With every breaker on one
/// [`ManualClock`](lazybreaker::ManualClock), advancing that clock advances the store, and no
/// other call is needed. Breakers on clocks that disagree (each its own `ManualClock`,
/// advanced apart) share the fastest one's timeline: a deadline set when that clock was
/// ahead comes later on the others. Give every breaker of one store the same kind of clock:
/// a breaker on the default clock reads the platform's coarse clock from its origin (boot,
/// on Linux), a `ManualClock` or a clock made by the application from when it was made: the
/// store's time would follow the default breaker's, far ahead, and stand still while only
/// the others call.
///
/// # Examples
///
/// Two instances of one breaker on one manual clock: a trip on one is adopted by the
/// other, and once the open period has passed, one probe closes the fleet.
///
/// ```
/// use lazybreaker_fleet::{MemoryStore, SharedBreaker};
/// use lazybreaker::policy::ConsecutiveFailures;
/// use lazybreaker::{Breaker, Error, ManualClock, Rejected, State};
/// use std::time::Duration;
///
/// let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
/// rt.block_on(async {
///     let (store, clock) = (MemoryStore::new(), ManualClock::new());
///     let member = || {
///         SharedBreaker::builder(store.clone())
///             .sync_interval(Duration::from_millis(100))
///             .build(
///                 Breaker::builder()
///                     .name("payments")
///                     .policy(ConsecutiveFailures::new(1).unwrap())
///                     .timeout(Duration::from_secs(30))
///                     .clock(clock.clone()),
///             )
///             .unwrap()
///     };
///     let (a, b) = (member(), member());
///     b.execute(|| async { Ok::<_, ()>(()) }).await.unwrap();
///     // A trips, and publishes it.
///     let _ = a.execute(|| async { Err::<(), _>("down") }).await;
///     // B follows at its first call after its sync interval.
///     clock.advance(Duration::from_millis(100));
///     let r = b.execute(|| async { Ok::<_, ()>(()) }).await;
///     assert!(matches!(r, Err(Error::Rejected(Rejected::Open { .. }))));
///     // The open period passes: B's probe closes the fleet, and A follows.
///     clock.advance(Duration::from_secs(30));
///     b.execute(|| async { Ok::<_, ()>(()) }).await.unwrap();
///     assert_eq!(b.state(), State::Closed);
///     clock.advance(Duration::from_millis(100));
///     a.execute(|| async { Ok::<_, ()>(()) }).await.unwrap();
///     assert_eq!((a.state(), a.stats().generation), (State::Closed, 2));
/// });
/// ```
#[derive(Clone, Default)]
pub struct MemoryStore {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    failing: AtomicBool,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// The store's time: the latest reading given (microseconds).
    now_us: u64,
    records: HashMap<String, Record>,
}

/// One breaker's record, its probe leases and its trip votes.
#[derive(Debug, Default)]
struct Record {
    generation: u64,
    /// Open until (store time, microseconds); `None`: closed.
    open_until_us: Option<u64>,
    /// Probe successes counted in the half-open period.
    ok: u64,
    /// Probe holders and when their leases expire.
    probes: HashMap<String, u64>,
    /// Voting instances and when they voted.
    votes: HashMap<String, u64>,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.shared.inner.lock();
        f.debug_struct("MemoryStore")
            .field("now_us", &inner.now_us)
            .field("records", &inner.records)
            .field("failing", &self.shared.failing.load(Ordering::Relaxed))
            .finish()
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes every operation fail with [`StoreError::Backend`] while `failing` (an outage),
    /// or answer again: for testing how shared breakers degrade to local decisions and
    /// recover. The records are kept meanwhile.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker_fleet::{FleetStore, MemoryStore, StoreError};
    /// use std::time::Duration;
    ///
    /// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// let store = MemoryStore::new();
    /// store.set_failing(true);
    /// let read = rt.block_on(store.read("payments", Duration::ZERO));
    /// assert!(matches!(read, Err(StoreError::Backend(_))));
    /// store.set_failing(false);
    /// assert_eq!(rt.block_on(store.read("payments", Duration::ZERO)).unwrap().generation, 0);
    /// ```
    pub fn set_failing(&self, failing: bool) {
        self.shared.failing.store(failing, Ordering::Release);
    }

    /// Removes the record of `breaker` (with its leases and votes), as if it had expired or
    /// the store restarted without it: the next read answers a fresh breaker, generation 0,
    /// and the shared breakers write it again from their local state.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker_fleet::{Decision, FleetStore, MemoryStore, Vote};
    /// use std::time::Duration;
    ///
    /// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// let store = MemoryStore::new();
    /// let open = Decision::Open(Duration::from_secs(30));
    /// let written = rt.block_on(store.publish("payments", 1, open, Vote::NONE, Duration::ZERO));
    /// assert_eq!(written.unwrap().generation, 1);
    /// store.remove("payments");
    /// assert_eq!(rt.block_on(store.read("payments", Duration::ZERO)).unwrap().generation, 0);
    /// ```
    pub fn remove(&self, breaker: &str) {
        self.shared.inner.lock().records.remove(breaker);
    }

    /// Removes every record ([`remove`](Self::remove) for all).
    pub fn clear(&self) {
        self.shared.inner.lock().records.clear();
    }

    /// Runs `op` on `breaker`'s record at the store's time as advanced by `now`, unless the
    /// store is failing.
    fn with<T>(
        &self,
        breaker: &str,
        now: Duration,
        op: impl FnOnce(&mut Record, u64) -> T,
    ) -> Result<T, StoreError> {
        if self.shared.failing.load(Ordering::Acquire) {
            return Err(StoreError::backend("the memory store is set to fail"));
        }
        let mut inner = self.shared.inner.lock();
        inner.now_us = inner.now_us.max(micros(now));
        let now_us = inner.now_us;
        let record = inner.records.entry(breaker.to_owned()).or_default();
        Ok(op(record, now_us))
    }
}

impl Record {
    fn answer(&self, now_us: u64, written: bool) -> SharedRecord {
        SharedRecord::new(self.generation, self.open_until_us, now_us, written)
    }

    /// A decision written at `generation`: the period before it ends with its leases and votes.
    fn write(&mut self, generation: u64, open_until_us: Option<u64>) {
        self.generation = generation;
        self.open_until_us = open_until_us;
        self.ok = 0;
        self.probes.clear();
        self.votes.clear();
    }
}

impl FleetStore for MemoryStore {
    async fn read(&self, breaker: &str, now: Duration) -> Result<SharedRecord, StoreError> {
        self.with(breaker, now, |r, now_us| r.answer(now_us, false))
    }

    async fn publish(
        &self,
        breaker: &str,
        generation: u64,
        decision: Decision,
        vote: Vote<'_>,
        now: Duration,
    ) -> Result<SharedRecord, StoreError> {
        if generation > SharedRecord::MAX_GENERATION {
            // As Redis, whose scripts compute in doubles: refused, never wrapped or rounded.
            return Err(StoreError::Invalid(format!(
                "generation {generation} is above 2^53"
            )));
        }
        self.with(breaker, now, |r, now_us| {
            let mut write = r.generation < generation;
            if let (true, Decision::Open(_), true) = (write, decision, vote.quorum > 1) {
                r.votes.insert(vote.instance.to_owned(), now_us);
                // Kept while in the window (as Redis's ZREMRANGEBYSCORE up to now - window).
                let window = SharedRecord::span_us(vote.window);
                r.votes.retain(|_, at| at.saturating_add(window) > now_us);
                write = r.votes.len() >= vote.quorum as usize;
            }
            if write {
                let until = match decision {
                    Decision::Open(d) => Some(SharedRecord::deadline_us(now_us, d)),
                    Decision::Closed => None,
                };
                r.write(generation, until);
            }
            r.answer(now_us, write)
        })
    }

    async fn lease_probe(
        &self,
        breaker: &str,
        generation: u64,
        max_requests: u64,
        lease_for: Duration,
        holder: &str,
        now: Duration,
    ) -> Result<Lease, StoreError> {
        self.with(breaker, now, |r, now_us| {
            let half_open = r.open_until_us.is_some_and(|until| now_us >= until);
            if r.generation != generation || !half_open {
                return Lease::Stale;
            }
            r.probes.retain(|_, expires| *expires > now_us);
            if r.probes.len() as u64 >= max_requests {
                return Lease::Full;
            }
            let expires = SharedRecord::deadline_us(now_us, lease_for);
            r.probes.insert(holder.to_owned(), expires);
            Lease::Taken
        })
    }

    async fn finish_probe(
        &self,
        breaker: &str,
        generation: u64,
        holder: &str,
        succeeded: bool,
        max_requests: u64,
        now: Duration,
    ) -> Result<SharedRecord, StoreError> {
        self.with(breaker, now, |r, now_us| {
            let held = r.probes.remove(holder).is_some();
            let mut written = false;
            if held && succeeded && r.generation == generation && r.open_until_us.is_some() {
                r.ok = r.ok.saturating_add(1);
                if r.ok >= max_requests {
                    let next = generation
                        .checked_add(1)
                        .filter(|next| *next <= SharedRecord::MAX_GENERATION)
                        .ok_or_else(|| {
                            StoreError::Invalid(format!("generation {generation} is the last"))
                        })?;
                    r.write(next, None);
                    written = true;
                }
            }
            Ok(r.answer(now_us, written))
        })?
    }
}
