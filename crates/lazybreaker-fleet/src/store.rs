//! [`FleetStore`]: what a fleet needs from the store it shares one breaker's decision through,
//! and the values that cross it ([`SharedRecord`], [`Decision`], [`Vote`], [`Lease`],
//! [`StoreError`]). Store-agnostic: Redis is one implementation, [`MemoryStore`](super::MemoryStore)
//! another.

use std::future::Future;
use std::time::Duration;

use lazybreaker::ConfigError;

/// What went wrong talking to the store. Every store error means the same thing to a
/// breaker: decide locally.
///
/// **Its text is the whole story**, on every store: a [`Backend`](Self::Backend) error
/// reads "the breaker store failed: " then the backend error's own text, then the text of
/// each error of its [`source`](std::error::Error::source) chain that the text so far does
/// not hold already, each after ": ". So what the server said reaches everything that shows
/// an error as text: the [`FleetEvent::Degraded`](lazybreaker::observe::FleetEvent::Degraded)
/// event's `Display` and `Debug`, the tracing observer's `WARN`, a log line. PostgreSQL's
/// `db error` reads `db error: ERROR: permission denied for table lazybreaker_fleet`, and
/// `error connecting to server` reads `error connecting to server: Connection refused (os
/// error 111)`, as Redis's errors read `WRONGTYPE: Operation against a key holding the wrong
/// kind of value`. Since the text holds the cause, [`source`](std::error::Error::source) is
/// `None` (a cause is in an error's text or behind its `source`, never both, so that a
/// reporter that walks the chain does not print it twice): the backend's own error is in
/// [`Backend`](Self::Backend), to match or downcast.
///
/// ```
/// use lazybreaker_fleet::StoreError;
/// use std::error::Error as _;
///
/// let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
/// let error = StoreError::backend(Wrapped(refused));
/// assert_eq!(error.to_string(), "the breaker store failed: connecting: connection refused");
/// assert!(error.source().is_none());
///
/// /// An error whose text leaves its cause to `source`, as `tokio_postgres`'s do.
/// #[derive(Debug)]
/// struct Wrapped(std::io::Error);
/// impl std::fmt::Display for Wrapped {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
///         f.write_str("connecting")
///     }
/// }
/// impl std::error::Error for Wrapped {
///     fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
///         Some(&self.0)
///     }
/// }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store did not answer within the store timeout.
    #[error("the breaker store did not answer within {}", lazybreaker::human::span(*.0))]
    Timeout(Duration),
    /// The store answered with an error, or could not be reached. Its text holds the
    /// error's whole source chain (see [`StoreError`]).
    #[error("the breaker store failed: {}", Chain(&**.0))]
    Backend(Box<dyn std::error::Error + Send + Sync>),
    /// The store answered with a record no breaker writes: a negative generation or one
    /// above [`SharedRecord::MAX_GENERATION`], or a deadline or a time beyond
    /// [`SharedRecord::MAX_TIME_US`] (written by hand, or by a client that is not a shared
    /// breaker). The breaker decides locally, as for any store error, until the record is
    /// repaired or removed.
    #[error("the breaker store holds an invalid record: {0}")]
    Invalid(String),
}

impl StoreError {
    /// A [`Backend`](Self::Backend) error from anything that is an error.
    pub fn backend(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self::Backend(error.into())
    }
}

/// An error and its source chain as one text: its own, then each source's that the text so
/// far does not hold, after ": " (an error that shows its cause already, as Redis's do, is
/// not repeated). At most [`Chain::DEPTH`] sources: a chain is finite, but nothing bounds it.
struct Chain<'a>(&'a (dyn std::error::Error + 'static));

impl Chain<'_> {
    const DEPTH: usize = 16;
}

impl std::fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut text = self.0.to_string();
        let mut source = self.0.source();
        for _ in 0..Self::DEPTH {
            let Some(error) = source else { break };
            let said = error.to_string();
            if !said.is_empty() && !text.contains(&said) {
                text.push_str(": ");
                text.push_str(&said);
            }
            source = error.source();
        }
        f.write_str(&text)
    }
}

/// The shared state of one breaker, as the store holds it, with the store's time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SharedRecord {
    /// Fences every update: a record only ever moves to a higher generation.
    pub generation: u64,
    /// Open until this store time (microseconds on the store's timeline); `None`: closed.
    pub open_until_us: Option<u64>,
    /// The store's time when the record was read or written (microseconds).
    pub server_now_us: u64,
    /// Whether the operation that returned the record wrote it: a publication that won, or
    /// the probe that completed a recovery. `false` for a read, and for a publication that
    /// found the record moved on (adopt it) or a vote short of its quorum.
    pub written: bool,
}

impl SharedRecord {
    /// The highest generation a record may hold: 2^53. Redis's scripts compute in doubles,
    /// in which the generations above it are not all distinct, so the generation fence
    /// would not hold there; every store keeps to the same bound.
    pub const MAX_GENERATION: u64 = 1 << 53;

    /// The latest deadline or store time a record may hold, in microseconds: 2^53 (about
    /// 285 years after the store's epoch), what a double holds exactly.
    pub const MAX_TIME_US: u64 = 1 << 53;

    /// `span` in microseconds, at most [`MAX_TIME_US`](Self::MAX_TIME_US): what a store is
    /// sent for a duration (an open period, a lease, a vote window), whatever it is.
    pub(crate) fn span_us(span: Duration) -> u64 {
        u64::try_from(span.as_micros()).map_or(Self::MAX_TIME_US, |us| us.min(Self::MAX_TIME_US))
    }

    /// The deadline `span` after `now_us` (store time), saturating at
    /// [`MAX_TIME_US`](Self::MAX_TIME_US): see [`FleetStore`]'s "Durations".
    pub(crate) fn deadline_us(now_us: u64, span: Duration) -> u64 {
        now_us
            .saturating_add(Self::span_us(span))
            .min(Self::MAX_TIME_US)
    }

    /// This record, if a shared breaker may follow it: its generation at most
    /// [`MAX_GENERATION`](Self::MAX_GENERATION), its deadline and its time at most
    /// [`MAX_TIME_US`](Self::MAX_TIME_US). The one check every record a store returns goes
    /// through.
    pub(crate) fn validated(self) -> Result<Self, StoreError> {
        if self.generation > Self::MAX_GENERATION {
            return Err(StoreError::Invalid(format!(
                "generation {} is above 2^53",
                self.generation
            )));
        }
        if let Some(until) = self.open_until_us.filter(|u| *u > Self::MAX_TIME_US) {
            return Err(StoreError::Invalid(format!(
                "deadline {until} us is beyond 2^53 us"
            )));
        }
        if self.server_now_us > Self::MAX_TIME_US {
            return Err(StoreError::Invalid(format!(
                "store time {} us is beyond 2^53 us",
                self.server_now_us
            )));
        }
        Ok(self)
    }

    /// A record from the signed numbers a store answers (Redis's scripts, PostgreSQL's
    /// functions): a negative one (a field set by hand) is a [`StoreError::Invalid`], never
    /// wrapped.
    // Only the real stores' answers need it.
    #[cfg_attr(not(any(feature = "redis", feature = "postgres")), allow(dead_code))]
    pub(crate) fn from_signed(
        generation: i64,
        open: bool,
        until_us: i64,
        server_now_us: i64,
        written: bool,
    ) -> Result<Self, StoreError> {
        let unsigned = |field: &str, n: i64| {
            u64::try_from(n).map_err(|_| StoreError::Invalid(format!("{field} {n} is negative")))
        };
        let until = unsigned("until", until_us)?;
        Ok(Self::new(
            unsigned("generation", generation)?,
            open.then_some(until),
            unsigned("server time", server_now_us)?,
            written,
        ))
    }

    /// A record as a store answers it: at `generation`, open until `open_until_us` (store
    /// time) or closed, read or written at `server_now_us`.
    pub fn new(
        generation: u64,
        open_until_us: Option<u64>,
        server_now_us: u64,
        written: bool,
    ) -> Self {
        Self {
            generation,
            open_until_us,
            server_now_us,
            written,
        }
    }

    /// How long the breaker stays open after the moment this record was read, in the
    /// store's time; `None` when closed or already past.
    pub fn open_for(&self) -> Option<Duration> {
        self.open_until_us
            .filter(|until| *until > self.server_now_us)
            .map(|until| Duration::from_micros(until - self.server_now_us))
    }
}

/// A decision to publish: what a breaker's change to open or closed says to the fleet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Decision {
    /// A trip: open for this long from the store's now (zero: the open period is over, the
    /// half-open probes decide).
    Open(Duration),
    /// A recovery.
    Closed,
}

/// A trip's vote: the record opens once `quorum` distinct instances voted within `window`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Vote<'a> {
    /// How many distinct instances must have voted (1: the trip opens the record at once).
    pub quorum: u32,
    /// How long a vote counts.
    pub window: Duration,
    /// The voting instance, unique in the fleet.
    pub instance: &'a str,
}

impl<'a> Vote<'a> {
    /// No vote: a trip opens the record at once (and a recovery needs none).
    pub const NONE: Vote<'static> = Vote {
        quorum: 1,
        window: Duration::ZERO,
        instance: "",
    };

    /// A vote of `instance`, counted for `window`, toward a quorum of `quorum` instances.
    pub fn new(quorum: u32, window: Duration, instance: &'a str) -> Self {
        Self {
            quorum,
            window,
            instance,
        }
    }
}

/// The outcome of [`FleetStore::lease_probe`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Lease {
    /// A probe slot was taken; give it back with [`FleetStore::finish_probe`].
    Taken,
    /// Every probe slot of this half-open period is held.
    Full,
    /// The record is not half-open at this generation (another generation, or still open
    /// in the store's time): the caller's view is stale.
    Stale,
}

impl Lease {
    /// The lease a store's answer stands for: 1 taken, 0 full, anything else stale.
    // Only the real stores' answers need it.
    #[cfg_attr(not(any(feature = "redis", feature = "postgres")), allow(dead_code))]
    pub(crate) fn from_answer(answer: i64) -> Self {
        match answer {
            1 => Lease::Taken,
            0 => Lease::Full,
            _ => Lease::Stale,
        }
    }
}

/// A store a fleet shares one breaker's decision through: see the
/// [module documentation](super) for the protocol it serves.
///
/// Each operation is one atomic step on the store (a script, a transaction, a lock held
/// for the step), on the record of the breaker named `breaker`. An absent record reads as a
/// fresh breaker: closed, generation 0.
///
/// **Time.** Every operation is given `now`, the caller's clock reading (its breaker's
/// clock, since that clock's origin). A store with a clock of its own, shared by the whole
/// fleet (Redis's `TIME`), ignores it and keeps deadlines on its own timeline; a store
/// without one (the in-process [`MemoryStore`](super::MemoryStore)) may make its timeline
/// out of the readings it is given. Either way the record answers with the store's time
/// ([`SharedRecord::server_now_us`]), and callers map deadlines onto their own clocks.
///
/// **Durations.** An open period, a lease or a vote window may be anything up to
/// [`Duration::MAX`] (a user's "never"): a deadline computed from one saturates at
/// [`SharedRecord::MAX_TIME_US`] (about 285 years after the store's epoch, the latest a
/// record may hold), and never overflows, fails or is refused when read back. Every store
/// here does so, on the server too (Redis's scripts, PostgreSQL's functions), and sends no
/// duration above `MAX_TIME_US` microseconds to its server.
///
/// **Failures and time limits.** Return [`StoreError`] for anything that went wrong; the
/// shared breaker bounds every operation by its store timeout itself (a future that does
/// not finish in time is dropped), so a store need not. A store that connects should
/// connect lazily, inside an operation, and reconnect by itself after a failure: the shared
/// breaker never asks it to.
///
/// The methods return `impl Future + Send`, so an implementation may write `async fn`.
///
/// # Examples
///
/// A store of one's own, here one that counts the round trips of another (a store on etcd
/// or Postgres implements the four operations the same way, each as one atomic step):
///
/// ```
/// use lazybreaker_fleet::{
///     Decision, FleetStore, Lease, MemoryStore, SharedBreaker, SharedRecord, StoreError, Vote,
/// };
/// use lazybreaker::Breaker;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// #[derive(Clone, Default)]
/// struct Counted {
///     inner: MemoryStore,
///     trips: Arc<AtomicU64>,
/// }
///
/// impl FleetStore for Counted {
///     async fn read(&self, breaker: &str, now: Duration) -> Result<SharedRecord, StoreError> {
///         self.trips.fetch_add(1, Ordering::Relaxed);
///         self.inner.read(breaker, now).await
///     }
///
///     async fn publish(
///         &self,
///         breaker: &str,
///         generation: u64,
///         decision: Decision,
///         vote: Vote<'_>,
///         now: Duration,
///     ) -> Result<SharedRecord, StoreError> {
///         self.trips.fetch_add(1, Ordering::Relaxed);
///         self.inner.publish(breaker, generation, decision, vote, now).await
///     }
///
///     async fn lease_probe(
///         &self,
///         breaker: &str,
///         generation: u64,
///         max_requests: u64,
///         lease_for: Duration,
///         holder: &str,
///         now: Duration,
///     ) -> Result<Lease, StoreError> {
///         self.trips.fetch_add(1, Ordering::Relaxed);
///         let inner = &self.inner;
///         inner.lease_probe(breaker, generation, max_requests, lease_for, holder, now).await
///     }
///
///     async fn finish_probe(
///         &self,
///         breaker: &str,
///         generation: u64,
///         holder: &str,
///         succeeded: bool,
///         max_requests: u64,
///         now: Duration,
///     ) -> Result<SharedRecord, StoreError> {
///         self.trips.fetch_add(1, Ordering::Relaxed);
///         let inner = &self.inner;
///         inner.finish_probe(breaker, generation, holder, succeeded, max_requests, now).await
///     }
/// }
///
/// let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
/// rt.block_on(async {
///     let store = Counted::default();
///     let shared = SharedBreaker::builder(store.clone())
///         .build(Breaker::builder().name("payments"))
///         .unwrap();
///     shared.execute(|| async { Ok::<_, ()>(()) }).await.unwrap(); // syncs once
///     shared.execute(|| async { Ok::<_, ()>(()) }).await.unwrap(); // no store I/O
///     assert_eq!(store.trips.load(Ordering::Relaxed), 1);
/// });
/// ```
pub trait FleetStore: Send + Sync + 'static {
    /// Whether `name` (never empty: the shared breaker refuses an empty name itself) can
    /// name a record in this store, asked once when a shared breaker is built. The default
    /// accepts every name.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] for field `name`.
    fn check_name(&self, name: &str) -> Result<(), ConfigError> {
        let _ = name;
        Ok(())
    }

    /// The record as it stands (closed at generation 0 if there is none).
    fn read(
        &self,
        breaker: &str,
        now: Duration,
    ) -> impl Future<Output = Result<SharedRecord, StoreError>> + Send;

    /// Publishes `decision` at `generation`, unless the record is at `generation` or later
    /// already: the one compare-and-set of a decision, fenced by the generation. A trip with
    /// a `vote` whose quorum is above 1 counts the vote and opens the record only once
    /// enough distinct instances voted within the vote's window. A decision written clears
    /// the probe leases and votes of the period it ends. Returns the record as it stands
    /// afterwards: the new one ([`written`](SharedRecord::written)), the newer one the
    /// caller must adopt, or the older one a vote left unchanged.
    fn publish(
        &self,
        breaker: &str,
        generation: u64,
        decision: Decision,
        vote: Vote<'_>,
        now: Duration,
    ) -> impl Future<Output = Result<SharedRecord, StoreError>> + Send;

    /// Takes one of `max_requests` probe leases of the half-open period at `generation`
    /// (the record open at `generation`, its open period over), held by `holder` (unique
    /// per call) until given back or for at most `lease_for`.
    fn lease_probe(
        &self,
        breaker: &str,
        generation: u64,
        max_requests: u64,
        lease_for: Duration,
        holder: &str,
        now: Duration,
    ) -> impl Future<Output = Result<Lease, StoreError>> + Send;

    /// Ends the probe `holder` of the half-open period at `generation`: gives its lease
    /// back and, if it `succeeded`, counts the success; the `max_requests`-th success of the
    /// period closes the record at `generation + 1` (then the record comes back
    /// [`written`](SharedRecord::written)). A lease that is not held (it expired) counts
    /// nothing.
    fn finish_probe(
        &self,
        breaker: &str,
        generation: u64,
        holder: &str,
        succeeded: bool,
        max_requests: u64,
        now: Duration,
    ) -> impl Future<Output = Result<SharedRecord, StoreError>> + Send;
}
