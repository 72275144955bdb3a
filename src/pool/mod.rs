//! A pool of endpoints, each behind its own breaker, that skips the broken ones when it
//! picks: node isolation inside the client's load balancer, as brpc does it, and outlier
//! detection as Envoy and gRPC do it, with no timer.
//!
//! # Calling through a pool
//!
//! [`Pool::call`] picks an endpoint, builds the call for its key, and records the result as
//! the classifier judges it: nothing to forget.
//!
//! ```
//! use lazybreaker::classify::OkIsSuccess;
//! use lazybreaker::pool::Pool;
//! use lazybreaker::{Breaker, Error};
//! use std::time::Duration;
//!
//! # fn block_on<F: std::future::Future>(f: F) -> F::Output {
//! #     use std::task::{Context, Poll, Waker};
//! #     let mut f = std::pin::pin!(f);
//! #     loop { if let Poll::Ready(v) = f.as_mut().poll(&mut Context::from_waker(Waker::noop())) { return v; } }
//! # }
//! let pool = Pool::new(|_: &String| Breaker::builder())
//!     .deadline(Duration::from_millis(300)); // the calls' own deadline: a hang is cut off
//! pool.set(["10.0.0.1:8080".to_owned(), "10.0.0.2:8080".to_owned()]);
//!
//! # block_on(async {
//! // In an async handler; a real call sends a request to `addr` within the deadline.
//! match pool.call(|addr| async move { Ok::<_, std::io::Error>(addr) }, OkIsSuccess).await {
//!     Ok(addr) => println!("answered by {addr}"),
//!     Err(Error::Rejected(rejected)) => {
//!         // Every endpoint is out: serve the fallback, a 503 with Retry-After.
//!         let _retry_after = rejected.retry_after();
//!     }
//!     Err(Error::Inner(_io)) => { /* the endpoint's own error, counted as its failure */ }
//! }
//! # });
//! ```
//!
//! [`Pool::pick`] and [`Pool::pick_async`] are the two steps apart: a [`Pick`] names the
//! endpoint and reports the call's result, as a permit does.
//!
//! # How it picks
//!
//! [`Pool::pick`] chooses, at the moment of the call, among the endpoints whose breakers
//! admit a call: an isolated endpoint (its breaker open) is skipped, one whose open period
//! is over is probed by the next pick that lands on it, a half-open one gets at most its
//! probes. Nothing sweeps, nothing sleeps, no caller is parked: when nothing can take the
//! call, the pick fails at once with [`Rejected::NoEndpoint`](crate::Rejected::NoEndpoint), saying when the first
//! isolated endpoint can be probed.
//!
//! By default, two endpoints are drawn at random and the one with fewer picks in flight is
//! taken ([`Balance::PowerOfTwo`]): close to least-loaded without reading every endpoint,
//! and nothing shared is written but the chosen endpoint's own counters. If both are
//! isolated, the pool walks the others from a random start, with a stride coprime to its
//! size (brpc's randomised balancer), and takes the first that admits the call.
//! [`Balance::RoundRobin`] takes each endpoint in turn instead (a turn that lands on an
//! endpoint that does not admit the call goes on to the walk, as above).
//!
//! # Three ways out, and when the pool judges
//!
//! | out because | decided | lasts | bounded by the cap |
//! |---|---|---|---|
//! | its breaker tripped (its own policy: 6 failures in a row by default, gobreaker's more than 5) | at the result that trips it | its open period: 100 ms, doubling with each failed recovery up to 30 s ([`open_backoff`](Pool::open_backoff)), spread by the pool's [jitter](#jitter) if set | yes |
//! | an outlier among its peers ([`outlier_detection`](Pool::outlier_detection)) | by the first pick after each interval | `base_ejection` × its multiplier, spread by the pool's [jitter](#jitter) if set | yes |
//! | down on its own evidence: its [health check](Pool::health_check) failed, or it hangs ([`deadline`](Pool::deadline)) | when the check settles; by the first pick after a call in flight passed the deadline with nothing back since, whichever endpoints that pick draws | until a check passes (or its open period ends, without a check) | **no** |
//!
//! Every one of them is a change of the endpoint's breaker, with its
//! [`Origin`](crate::observe::Origin) (the breaker's own, [`Origin::HealthCheck`](crate::observe::Origin::HealthCheck),
//! [`Origin::Ejected`](crate::observe::Origin::Ejected) and the reason), so observers,
//! metrics and the status page see it as any other transition. An endpoint returns through
//! its breaker's half-open probes, after its health check when it has one.
//!
//! **The open period.** A lone breaker stays open 60 s (gobreaker's default); in a pool that
//! keeps a recovered replica idle for a minute. So an endpoint whose builder sets no
//! [`timeout`](crate::Builder::timeout) opens for 100 ms, doubled with each failed
//! probe, and with each trip within 30 s of its last recovery, up to 30 s; a trip after 30 s
//! of health starts over (brpc's isolation backoff: a flapping endpoint is let back ever
//! more slowly). With a
//! health check, a failed check re-arms the period at the length it has: a down endpoint is
//! checked at a steady cadence (100 ms plus the check's own time, at first), and is back
//! within about one period of its recovery.
//!
//! **Health checks never hold a caller up:** an async pick that wins a due check polls it
//! once, and if it does not answer at once, sends its own call elsewhere (or, with every
//! endpoint out, answers [`Rejected::NoEndpoint`](crate::Rejected::NoEndpoint) at once) and leaves the check running
//! beside the calls, driven by the async picks that follow
//! ([`pick_async`](Pool::pick_async)); only a pool of one endpoint waits for its check.
//!
//! # Jitter
//!
//! Endpoints that one outage tripped at the same instant would otherwise come back at the
//! same instant too, and probe (or run their health checks) in lockstep, as would the
//! outliers one evaluation ejected. With [`jitter(fraction)`](Pool::jitter) (`0.1`, say),
//! each open period an endpoint's breaker computes itself (a trip, a failed probe's
//! backoff, a failed check's re-arm, a hang's ejection) and each outlier ejection is drawn
//! from `[period × (1 − fraction), period]`: never longer than configured, so 30 s stays
//! the longest. The draws are seeded by each endpoint's name (its key) and counted, not
//! clocked: the same traffic gives the same times, live or replayed. An endpoint whose
//! builder sets a jitter of its own ([`Builder::jitter`]) keeps it. A spread ejection may
//! end before an interval boundary that the whole one would have reached, so that the
//! endpoint's multiplier shrinks an interval sooner. Off by default: every period exact.
//!
//! # Never isolate too many; but never send to a dead endpoint
//!
//! A pool isolates at most [`max_isolated`](Pool::max_isolated) of its endpoints *on the
//! traffic's judgement* (half by default): the fraction of the pool rounded down, but
//! always at least one, so that a small pool can still take its one bad endpoint out. When
//! more breakers are open than that, the pool keeps the surplus in rotation, the ones
//! closest to their next probe first: a pick that finds an isolated endpoint among its
//! first choices draws among the admitting endpoints and those kept in rotation alike, each
//! with an equal chance ([`Pick::over_cap`]; counted in [`PoolStats`]), and when nothing
//! admits, sends to one kept in rotation. The cap is a share of the endpoints that are not
//! down (below), so passive isolation (tripped breakers, outlier ejections) never empties a
//! pool of two live endpoints or more: an error rate that every endpoint shares is more
//! likely downstream of them all.
//!
//! An endpoint that is *down on its own evidence* (a failed health check, a hang) is out
//! whatever the cap, as gRPC keeps an address whose health check failed out of its picker:
//! sending to it would only make the caller wait. When no endpoint can take the call, the
//! pool answers [`Rejected::NoEndpoint`](crate::Rejected::NoEndpoint) with the time to the first retry, so the caller
//! serves its fallback (a 503 with `Retry-After`) at once.
//!
//! | endpoints | isolated at most on the traffic's judgement (½) | all tripped (no check) | all down (checks failed, or all hang) |
//! |---|---|---|---|
//! | 1 | 1 | [`NoEndpoint`](crate::Rejected::NoEndpoint) with the time to the probe | [`NoEndpoint`](crate::Rejected::NoEndpoint) with the time to the next check |
//! | 2 | 1 | one kept in rotation | [`NoEndpoint`](crate::Rejected::NoEndpoint) |
//! | 3 | 1 | two kept in rotation | [`NoEndpoint`](crate::Rejected::NoEndpoint) |
//! | 10 | 5 | five kept in rotation | [`NoEndpoint`](crate::Rejected::NoEndpoint) |
//!
//! A `max_isolated` of 1 lets every endpoint be isolated on the traffic's judgement too.
//!
//! # Discovery
//!
//! [`insert`](Pool::insert), [`remove`](Pool::remove) and [`set`](Pool::set) change the
//! endpoints at run time; the breakers of endpoints that stay are kept. A pick of an
//! endpoint removed since stays valid and reports to its breaker.
//!
//! # Observing it
//!
//! [`Pool::snapshot`] gives each endpoint's breaker snapshot, picks in flight, ejection and
//! whether it is down; [`Pool::summary`] the pool's own figures without a breaker snapshot
//! (endpoints, isolated, ejected, down, in flight); [`Pool::stats`] its counts (picks over
//! the cap, no-endpoint answers, outliers found, ejections by reason). With the
//! `prometheus` feature, `BreakerCollector::pool` exports them, and the status page shows
//! them. Each endpoint's breaker is named after its key, so its transitions reach its
//! observers (a `tracing::TracingObserver` the factory adds, say) with the key.
//!
//! # Cost
//!
//! A pick reads the endpoints through one lock-free load and writes nothing shared but the
//! chosen endpoint's own counters (round robin adds its cursor). With outlier detection or
//! a deadline it also reads the pool's clock once (and, with a deadline, takes a start
//! slot on its endpoint and reads when the pool next looks for hangs); the detection
//! itself reads each breaker's totals once per interval, in the one pick that evaluates it,
//! and the look for hangs reads each endpoint's calls in flight only when one of them may
//! be past the deadline (in steady traffic, about once per deadline). A pick that finds an isolated endpoint
//! among its first choices walks the others, and asks each open one under its breaker's
//! lock whether it is down. A pick allocates nothing, unless more endpoints are isolated
//! than the cap allows (then the walk collects the ones kept in rotation) or it evaluates
//! an interval.
//!
//! # Examples
//!
//! ```
//! use lazybreaker::pool::Pool;
//! use lazybreaker::policy::ConsecutiveFailures;
//! use lazybreaker::{Breaker, ManualClock};
//! use std::time::Duration;
//!
//! let clock = ManualClock::new();
//! let pool = Pool::new(|_addr: &&str| {
//!     Breaker::builder()
//!         .policy(ConsecutiveFailures::new(1).unwrap())
//!         .timeout(Duration::from_secs(10))
//! })
//! .clock(clock.clone())
//! .max_isolated(1.0);
//! pool.set(["10.0.0.1:80", "10.0.0.2:80"]);
//!
//! let pick = pool.pick().unwrap();
//! let broken = *pick.key();
//! pick.failure(); // isolates it
//! for _ in 0..10 {
//!     let pick = pool.pick().unwrap();
//!     assert_ne!(*pick.key(), broken, "an isolated endpoint is skipped");
//!     pick.success();
//! }
//! ```

mod beside;
mod call;
mod census;
mod choose;
mod endpoint;
mod hang_watch;
mod hedge;
mod limit;
mod outlier;
mod pick;
mod picking;
mod retry;
mod slow_start;
mod stats;

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use parking_lot::Mutex;

use crate::breaker::{Breaker, Builder};
use crate::clock::{Clock, ClockSource};
use crate::error::ConfigError;
use crate::nanos::{saturating_nanos, Nanos};
use crate::observe::Observer;
use crate::policy::{ConsecutiveFailures, TripPolicy};
use crate::retry::Retry;

pub use choose::Balance;
pub use endpoint::Endpoint;
pub use outlier::{OutlierDetection, Spread};
pub use pick::Pick;
pub use slow_start::SlowStart;
// For the tower service over the pool.
pub use beside::{Beside, HandingPick};
pub use picking::Choice;
pub use stats::{EndpointSnapshot, PoolSnapshot, PoolStats, PoolSummary};

use choose::{fraction, DEFAULT_MAX_ISOLATED};
use hang_watch::NextLook;
use hedge::Hedging;
use outlier::Detector;
use slow_start::Ramp;
use stats::{Retired, Stats};

// The loom models' way in to the hang watch (`tests/loom.rs`).
#[cfg(loom)]
#[doc(hidden)]
pub use hang_watch::{LoomCall, LoomHangWatch, LoomLook};

/// A pool's endpoints open for 100 ms at first ([`Pool::open_backoff`])…
const DEFAULT_OPEN: Duration = Duration::from_millis(100);
/// …doubling with each failed recovery up to 30 s.
const DEFAULT_OPEN_MAX: Duration = Duration::from_secs(30);
/// No spread by default ([`Pool::jitter`]): every open period and ejection exact.
const DEFAULT_JITTER: f64 = 0.0;

/// Builds an endpoint's breaker, for its key.
type Factory<K, P, O> = Box<dyn Fn(&K) -> Builder<P, O> + Send + Sync>;

/// Gives an endpoint's builder the pool's health check, for its key.
type WithCheck<K, P, O> = Box<dyn Fn(&K, Builder<P, O>) -> Builder<P, O> + Send + Sync>;

/// The endpoints, as a pick reads them: one snapshot, replaced whole by discovery.
type Endpoints<K, P, O> = Vec<Arc<Endpoint<K, P, O>>>;

/// A pool of endpoints keyed by `K` (a `SocketAddr`, a URI authority), each behind its own
/// breaker built by a factory, as [`Registry`](crate::Registry) builds them: see the
/// [module documentation](self) for how it picks, and for the isolation cap.
///
/// Every method takes `&self`; `Pool` is `Send + Sync` (share it in an `Arc`). A pick reads
/// the endpoints without a lock; discovery replaces them under one.
pub struct Pool<K, P: TripPolicy = ConsecutiveFailures, O: Observer = ()> {
    endpoints: ArcSwap<Endpoints<K, P, O>>,
    /// Serialises discovery: each change reads the endpoints and replaces them.
    discovery: Mutex<()>,
    /// The endpoints removed from the pool, for its count of picks; taken by discovery
    /// around its replacing of the endpoints, and by [`Pool::stats`] (never by a pick, and
    /// never over user code).
    retired: Mutex<Retired<K, P, O>>,
    factory: Factory<K, P, O>,
    /// The pool's health check, given to each endpoint's breaker with its key.
    check: Option<WithCheck<K, P, O>>,
    clock: Option<ClockSource>,
    /// The open period given to endpoints whose builders set none: first, longest.
    open_backoff: Option<(Duration, Duration)>,
    /// The spread given to endpoints whose builders set none, and of the ejections
    /// ([`Pool::jitter`]).
    jitter: f64,
    /// Outlier detection, if attached.
    detector: Option<Detector>,
    /// The calls' deadline in nanoseconds ([`Pool::deadline`]); 0 without one.
    pub(crate) deadline: Nanos,
    max_isolated: f64,
    balance: Balance,
    /// The round-robin cursor.
    next: AtomicUsize,
    /// For metrics: empty unless [`named`](Pool::named).
    name: String,
    /// Retries on another endpoint ([`Pool::retry`]), if set.
    retry: Option<Retry>,
    /// Hedged calls ([`Pool::hedge`]), if set.
    hedging: Option<Arc<Hedging>>,
    /// With a hedge at a percentile: the power of two choices weighs the calls in flight by
    /// the endpoints' latency estimates.
    latency_aware: bool,
    /// Slow start ([`Pool::slow_start`]), if set.
    ramp: Option<Ramp>,
    /// The adaptive concurrency limit each endpoint gets a copy of ([`Pool::limit`]).
    limit: Option<limit::Prototype>,
    shared: Arc<Shared>,
}

/// What a pool's picks share with it: its counts and the settings a report reads.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) stats: Stats,
    pub(crate) overload_isolates: AtomicBool,
    /// Health checks parked in endpoints for the async picks to drive (a hint: the picks
    /// that drive them count them again).
    pub(crate) parked: AtomicUsize,
    /// With a deadline, the pool's next look for hangs ([`Pool::deadline`]).
    hang_due: NextLook,
    /// The pool's clock: its intervals, its deadline.
    clock: ClockSource,
    /// The attempts [`Pool::call`] saw fail, for a retry's throttle.
    pub(crate) retry_failures: AtomicU64,
    /// How far the retry's throttle was fed: the picks ended, and the failures.
    pub(crate) throttle_fed: Mutex<(u64, u64)>,
    /// With slow start, until when some endpoint ramps up (0: none does).
    pub(crate) ramp_until: AtomicU64,
}

impl Default for Shared {
    fn default() -> Self {
        Self {
            stats: Stats::default(),
            overload_isolates: AtomicBool::new(false),
            parked: AtomicUsize::new(0),
            hang_due: NextLook::new(),
            clock: ClockSource::default_for(false, Duration::ZERO),
            retry_failures: AtomicU64::new(0),
            throttle_fed: Mutex::new((0, 0)),
            ramp_until: AtomicU64::new(0),
        }
    }
}

impl Shared {
    /// The pool's clock's reading.
    #[inline]
    pub(crate) fn now(&self) -> Nanos {
        self.clock.now()
    }

    /// The pool's clock's reading, if no user code reads it (a built-in clock): for a pick
    /// admitted where a user clock's panic could not be let out.
    #[inline]
    pub(crate) fn now_infallible(&self) -> Option<Nanos> {
        self.clock.now_infallible()
    }
}

impl<K, P: TripPolicy, O: Observer> Pool<K, P, O>
where
    K: Clone + Eq + fmt::Display,
{
    /// An empty pool whose endpoints' breakers are built from the builder `factory` returns
    /// for each key (named after the key unless the factory names it).
    pub fn new<F>(factory: F) -> Self
    where
        F: Fn(&K) -> Builder<P, O> + Send + Sync + 'static,
    {
        Self {
            endpoints: ArcSwap::from_pointee(Vec::new()),
            discovery: Mutex::new(()),
            retired: Mutex::new(Retired {
                endpoints: Vec::new(),
                picks: 0,
            }),
            factory: Box::new(factory),
            check: None,
            clock: None,
            open_backoff: Some((DEFAULT_OPEN, DEFAULT_OPEN_MAX)),
            jitter: DEFAULT_JITTER,
            detector: None,
            deadline: 0,
            retry: None,
            hedging: None,
            latency_aware: false,
            ramp: None,
            limit: None,
            max_isolated: DEFAULT_MAX_ISOLATED,
            balance: Balance::default(),
            next: AtomicUsize::new(0),
            name: String::new(),
            shared: Arc::default(),
        }
    }

    /// Every breaker this pool builds from now on reads `clock` (a
    /// [`ManualClock`](crate::ManualClock) in tests). A setting for building the pool, before
    /// its first endpoint.
    #[must_use]
    pub fn clock<C: Clock + 'static>(mut self, clock: C) -> Self {
        let clock = ClockSource::of(clock);
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.clock = clock.clone();
        }
        self.clock = Some(clock);
        self
    }

    /// Judges each endpoint against its peers every interval, and ejects the outliers: see
    /// [`OutlierDetection`]. The first pick after each interval evaluates it; nothing runs
    /// in between. A setting for building the pool.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::pool::{OutlierDetection, Pool, Spread};
    /// use lazybreaker::Breaker;
    /// use std::time::Duration;
    ///
    /// let pool = Pool::new(|_: &String| Breaker::builder()).outlier_detection(
    ///     OutlierDetection::new()
    ///         .interval(Duration::from_secs(10))
    ///         .base_ejection(Duration::from_secs(30))
    ///         .max_ejection(Duration::from_secs(300))
    ///         .success_rate(1.9, 5, 100) // Envoy's figures
    ///         .spread(Spread::MedianAbsoluteDeviation { factor: 3.0, min_difference: 1.0 })
    ///         .failure_percentage(85, 5, 50),
    /// );
    /// # let _ = pool;
    /// ```
    ///
    /// See [`OutlierDetection`] for an ejection on a manual clock.
    ///
    /// Settings out of range are read leniently (see
    /// [Settings out of range](OutlierDetection#settings-out-of-range): a setting that is
    /// not a finite number turns its detector off);
    /// [`try_outlier_detection`](Pool::try_outlier_detection) refuses them.
    #[must_use]
    pub fn outlier_detection(mut self, detection: OutlierDetection) -> Self {
        self.detector = Some(Detector::new(detection.lenient(), self.jitter));
        self
    }

    /// [`outlier_detection`](Pool::outlier_detection), unless a setting is out of its range.
    ///
    /// # Errors
    ///
    /// The [`ConfigError`] of [`OutlierDetection::validate`], naming the setting by its
    /// path (`outlier_detection.failure_percentage.threshold`).
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::pool::{OutlierDetection, Pool};
    /// use lazybreaker::Breaker;
    ///
    /// let detection = OutlierDetection::new().success_rate(f64::NAN, 5, 100);
    /// let err = Pool::new(|_: &String| Breaker::builder())
    ///     .try_outlier_detection(detection)
    ///     .unwrap_err();
    /// assert_eq!(err.field(), "outlier_detection.success_rate.stdev_factor");
    /// ```
    pub fn try_outlier_detection(self, detection: OutlierDetection) -> Result<Self, ConfigError> {
        detection.validate()?;
        Ok(self.outlier_detection(detection))
    }

    /// The deadline of the pool's calls (none by default): an endpoint with a call in flight
    /// for this long, that answered nothing since that call went out, hangs (a call that
    /// came back in time counts as an answer, even failed; one that failed after the
    /// deadline, or a pick dropped without a report, does not). It is judged so by the first
    /// pick after that moment, whichever endpoints that pick would choose (brpc's `E1008`,
    /// with no timer: the pool knows when its first tracked call is due, and a pick
    /// looks at the endpoints only then): its breaker opens
    /// ([`Origin::Ejected`](crate::observe::Origin) with [`Ejection::Hung`](crate::observe::Ejection::Hung)) for its next
    /// open period, its calls in flight are written off (the next call it gets, its probe,
    /// has a deadline of its own), and it is out whatever the [cap](Pool::max_isolated), as a
    /// node whose health check failed is. Give the deadline your calls have (a client
    /// timeout); zero means none. A setting for building the pool, before its first
    /// endpoint.
    ///
    /// Each endpoint tracks the first four of its calls in flight at once (a hang holds its
    /// calls, so those fill with hanging ones). With a deadline, a pick reads the pool's
    /// clock once and each answer once; a pick admitted after a health check on a user
    /// clock (not a built-in one) is not tracked. Under concurrent picks, the one that
    /// claims the look judges; the others go on meanwhile.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::pool::Pool;
    /// use lazybreaker::{Breaker, ManualClock, Rejected};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let pool = Pool::new(|_: &&str| Breaker::builder())
    ///     .clock(clock.clone())
    ///     .deadline(Duration::from_millis(300));
    /// pool.set(["a", "b"]);
    /// // Both replicas take a call that never comes back.
    /// let hanging = [pool.pick().unwrap(), pool.pick().unwrap()];
    /// clock.advance(Duration::from_millis(300));
    /// // A deadline later, with nothing back, both are out (whatever the cap): the pool
    /// // answers at once, rather than sending more calls to wait out their deadline.
    /// assert!(matches!(pool.pick(), Err(Rejected::NoEndpoint { .. })));
    /// assert_eq!(pool.stats().ejected_hung, 2);
    /// # drop(hanging);
    ///
    /// // One hung replica among three: out by the first pick after its deadline, though
    /// // the power of two choices sends that pick to the others.
    /// let clock = ManualClock::new();
    /// let pool = Pool::new(|_: &&str| Breaker::builder())
    ///     .clock(clock.clone())
    ///     .deadline(Duration::from_millis(300));
    /// pool.set(["a", "b", "c"]);
    /// let hung = pool.pick().unwrap(); // never comes back
    /// clock.advance(Duration::from_millis(300));
    /// let pick = pool.pick().unwrap();
    /// assert_ne!(pick.key(), hung.key());
    /// assert_eq!(pool.stats().ejected_hung, 1);
    /// # drop((hung, pick));
    /// ```
    #[must_use]
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = saturating_nanos(deadline);
        self
    }

    /// The open period of the endpoints whose builders set neither a
    /// [`timeout`](Builder::timeout) nor a [`backoff`](Builder::backoff): `first`, doubled
    /// with each failed half-open probe and with each trip within `longest` of the last
    /// recovery, up to `longest`, starting over after `longest` of health (see
    /// [`Builder::backoff`]): brpc's isolation, where a lone
    /// breaker's 60 s would keep a recovered endpoint out for a minute. 100 ms to 30 s by
    /// default; `first` zero gives them the breaker's own default (60 s). A setting for
    /// building the pool, before its first endpoint.
    #[must_use]
    pub fn open_backoff(mut self, first: Duration, longest: Duration) -> Self {
        self.open_backoff = (!first.is_zero()).then_some((first, longest.max(first)));
        self
    }

    /// Spreads the endpoints' open periods and ejections, so that endpoints tripped or
    /// ejected at the same instant (one outage, one evaluation) do not all come back at the
    /// same instant: each is drawn from `[period × (1 − fraction), period]`, never longer
    /// than configured (see [`Builder::jitter`], and [Jitter](self#jitter)). Given to each
    /// endpoint whose builder sets no jitter of its own (seeded from its name, its key by
    /// default), and applied to the [outlier](Pool::outlier_detection) ejections. 0 (off)
    /// by default: every period exact. Read leniently: clamped into `[0, 1]`, `NaN`
    /// meaning the default ([`try_jitter`](Pool::try_jitter) refuses both). A setting for
    /// building the pool, before its first endpoint.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::policy::ConsecutiveFailures;
    /// use lazybreaker::pool::Pool;
    /// use lazybreaker::{Breaker, ManualClock};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let pool = Pool::new(|_: &&str| Breaker::builder().policy(ConsecutiveFailures::new(1).unwrap()))
    ///     .clock(clock.clone())
    ///     .max_isolated(1.0)
    ///     .jitter(0.5);
    /// pool.set(["a", "b", "c"]);
    /// for key in ["a", "b", "c"] {
    ///     pool.breaker(&key).unwrap().allow().unwrap().failure(); // one outage
    /// }
    /// // Each is out for 50 ms to 100 ms (the pool's first open period), at its own time.
    /// let open_for: Vec<Duration> = ["a", "b", "c"]
    ///     .iter()
    ///     .map(|key| pool.breaker(key).unwrap().allow().unwrap_err().retry_after().unwrap())
    ///     .collect();
    /// let (low, high) = (Duration::from_millis(50), Duration::from_millis(100));
    /// assert!(open_for.iter().all(|d| (low..=high).contains(d)));
    /// ```
    #[must_use]
    pub fn jitter(mut self, fraction: f64) -> Self {
        self.jitter = crate::jitter::lenient(fraction, DEFAULT_JITTER);
        if let Some(detector) = &mut self.detector {
            detector.jitter = self.jitter;
        }
        self
    }

    /// [`jitter`](Pool::jitter), unless `fraction` is not a number within `[0, 1]`.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `jitter`.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::pool::Pool;
    /// use lazybreaker::Breaker;
    ///
    /// let err = Pool::new(|_: &String| Breaker::builder()).try_jitter(1.5).unwrap_err();
    /// assert_eq!(err.field(), "jitter");
    /// assert_eq!(err.to_string(), "invalid `jitter` = 1.5: must be a number within [0, 1]");
    /// ```
    pub fn try_jitter(self, fraction: f64) -> Result<Self, ConfigError> {
        crate::jitter::check(fraction)?;
        Ok(self.jitter(fraction))
    }

    /// Isolates at most this fraction of the endpoints at once (see
    /// [Never isolate too many](self#never-isolate-too-many)): 0.5 by default; clamped to
    /// 0 to 1 (at least one endpoint may always be isolated), `NaN` meaning the default.
    #[must_use]
    pub fn max_isolated(mut self, fraction_of_endpoints: f64) -> Self {
        self.max_isolated = fraction(fraction_of_endpoints);
        self
    }

    /// Every endpoint's breaker revives through `check`, given the endpoint's key (a TCP
    /// connect to it, a GET of its health path): see [`Builder::health_check`] for the
    /// semantics, [`Pool::pick_async`] for the pick that runs it. A setting for building the
    /// pool, before its first endpoint; it replaces a check the factory gave.
    ///
    /// Give the check a deadline of its own, shorter than the breaker's
    /// [`check_timeout`](Builder::check_timeout). Ready-made checks for an endpoint in the
    /// `lazybreaker-reqwest` crate, each one call that returns the check's future:
    /// `lazybreaker_reqwest::check_tcp(*addr, deadline)` (a TCP connect) and
    /// `lazybreaker_reqwest::check_path(&client, format!("http://{addr}/health"), deadline)`
    /// (a health path that must answer 2xx).
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::policy::ConsecutiveFailures;
    /// use lazybreaker::pool::Pool;
    /// use lazybreaker::{Breaker, ManualClock, State};
    /// use std::time::Duration;
    ///
    /// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #     use std::sync::Arc;
    /// #     use std::task::{Context, Poll, Wake, Waker};
    /// #     struct Noop;
    /// #     impl Wake for Noop { fn wake(self: Arc<Self>) {} }
    /// #     let waker = Waker::from(Arc::new(Noop));
    /// #     let mut f = std::pin::pin!(f);
    /// #     loop { if let Poll::Ready(v) = f.as_mut().poll(&mut Context::from_waker(&waker)) { return v; } }
    /// # }
    /// let clock = ManualClock::new();
    /// let pool = Pool::new(|_: &u16| {
    ///     Breaker::builder()
    ///         .policy(ConsecutiveFailures::new(1).unwrap())
    ///         .timeout(Duration::from_secs(10))
    /// })
    /// .clock(clock.clone())
    /// // A real check would connect to the port, within a deadline.
    /// .health_check(|port: &u16| std::future::ready(*port != 8081));
    /// pool.set([8080, 8081]);
    /// pool.breaker(&8081).unwrap().allow().unwrap().failure(); // isolated
    /// clock.advance(Duration::from_secs(11));
    /// for _ in 0..20 {
    ///     let pick = block_on(pool.pick_async()).unwrap();
    ///     assert_eq!(*pick.key(), 8080, "8081 fails its check: the picks go to 8080");
    ///     pick.success();
    /// }
    /// assert_eq!(pool.breaker(&8081).unwrap().state(), State::Open);
    /// ```
    #[must_use]
    pub fn health_check<F, Fut>(mut self, check: F) -> Self
    where
        K: Send + Sync + 'static,
        F: Fn(&K) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = bool> + Send + 'static,
    {
        let check = Arc::new(check);
        self.check = Some(Box::new(move |key: &K, builder: Builder<P, O>| {
            let (check, key) = (Arc::clone(&check), key.clone());
            builder.health_check(move || check(&key))
        }));
        self
    }

    /// Whether a pick reported [overloaded](Pick::overloaded) counts as a failure of its
    /// endpoint (`true`) or is excluded (`false`, the default: an endpoint that sheds load is
    /// alive, and isolating it would move its load onto the others). A setting for building
    /// the pool (it applies to every endpoint, those it has already included).
    #[must_use]
    pub fn overload_isolates(self, isolates: bool) -> Self {
        self.shared
            .overload_isolates
            .store(isolates, Ordering::Relaxed);
        self
    }

    /// Names the pool, for metrics (the `pool` label of
    /// [`prometheus::BreakerCollector::pool`](crate::prometheus)'s series); empty by default.
    #[must_use]
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// How picks choose among the endpoints that admit a call ([`Balance::PowerOfTwo`] by
    /// default).
    #[must_use]
    pub fn balance(mut self, balance: Balance) -> Self {
        self.balance = balance;
        self
    }

    /// Adds the endpoint `key`, with a new breaker; `false` (nothing changed) if the pool has
    /// it already.
    pub fn insert(&self, key: K) -> bool {
        let _discovery = self.discovery.lock();
        let current = self.endpoints.load();
        if current.iter().any(|e| e.key == key) {
            return false;
        }
        let endpoint = self.endpoint(key);
        if !current.is_empty() {
            self.ramp_up(&endpoint);
        }
        let mut next = Vec::with_capacity(current.len() + 1);
        next.extend(current.iter().cloned());
        next.push(endpoint);
        self.endpoints.store(Arc::new(next));
        true
    }

    /// Removes the endpoint `key`; `false` if the pool did not have it. Picks of it in flight
    /// stay valid.
    pub fn remove(&self, key: &K) -> bool {
        let _discovery = self.discovery.lock();
        let current = self.endpoints.load();
        if !current.iter().any(|e| &e.key == key) {
            return false;
        }
        let next = current.iter().filter(|e| &e.key != key).cloned().collect();
        let gone = current.iter().filter(|e| &e.key == key).cloned().collect();
        self.replace(next, gone);
        true
    }

    /// Makes `keys` the pool's endpoints: the breakers of keys it had are kept, new keys get
    /// new breakers, the others are removed (their picks in flight stay valid). A key given
    /// twice counts once.
    pub fn set<I: IntoIterator<Item = K>>(&self, keys: I) {
        let _discovery = self.discovery.lock();
        let current = self.endpoints.load();
        let mut next: Endpoints<K, P, O> = Vec::new();
        for key in keys {
            if next.iter().any(|e| e.key == key) {
                continue;
            }
            let kept = current.iter().find(|e| e.key == key).cloned();
            next.push(kept.unwrap_or_else(|| {
                let endpoint = self.endpoint(key);
                if !current.is_empty() {
                    self.ramp_up(&endpoint);
                }
                endpoint
            }));
        }
        let gone = current
            .iter()
            .filter(|e| !next.iter().any(|n| Arc::ptr_eq(n, e)))
            .cloned()
            .collect();
        self.replace(next, gone);
    }

    /// Makes `next` the endpoints, `gone` leaving (under the discovery lock). The pool's
    /// count keeps the picks of the endpoints that left, those made on them from now on
    /// included: they move to the retired ones in one step with the replacement, so that
    /// [`stats`](Pool::stats) finds each in one place or the other. A check parked in one is
    /// dropped (its lease released: no pick will drive it).
    fn replace(&self, next: Endpoints<K, P, O>, gone: Endpoints<K, P, O>) {
        let mut retired = self.retired.lock();
        self.endpoints.store(Arc::new(next));
        retired.endpoints.extend(gone.iter().cloned());
        let compacted = retired.compact();
        drop(retired);
        drop(compacted);
        for endpoint in &gone {
            let parked = endpoint.parked.lock().take();
            if parked.is_some() {
                self.shared.parked.fetch_sub(1, Ordering::Relaxed);
            }
            drop(parked);
        }
    }

    /// The endpoints' keys, in the pool's order.
    pub fn keys(&self) -> Vec<K> {
        self.endpoints
            .load()
            .iter()
            .map(|e| e.key.clone())
            .collect()
    }

    /// How many endpoints the pool has.
    pub fn len(&self) -> usize {
        self.endpoints.load().len()
    }

    /// Whether the pool has no endpoint.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The breaker of endpoint `key`, if the pool has it.
    pub fn breaker(&self, key: &K) -> Option<Arc<Breaker<P, O>>> {
        self.endpoints
            .load()
            .iter()
            .find(|e| &e.key == key)
            .map(|e| Arc::clone(&e.breaker))
    }

    /// Every endpoint with its breaker, in the pool's order (for metrics and dashboards).
    pub fn breakers(&self) -> Vec<(K, Arc<Breaker<P, O>>)> {
        self.endpoints
            .load()
            .iter()
            .map(|e| (e.key.clone(), Arc::clone(&e.breaker)))
            .collect()
    }

    /// Picks in flight on endpoint `key` (`None` if the pool does not have it).
    pub fn in_flight(&self, key: &K) -> Option<usize> {
        self.endpoints
            .load()
            .iter()
            .find(|e| &e.key == key)
            .map(|e| e.in_flight())
    }

    /// The endpoint of `key`, its breaker built now (user code: outside no lock but the
    /// discovery's, which picks and reads of the pool never take).
    fn endpoint(&self, key: K) -> Arc<Endpoint<K, P, O>> {
        let mut builder = (self.factory)(&key);
        if builder.unnamed() {
            builder = builder.name(key.to_string());
        }
        if let Some(clock) = &self.clock {
            builder = builder.clock_source(clock.clone());
        }
        if let Some(with_check) = &self.check {
            builder = with_check(&key, builder);
        }
        if let Some((first, longest)) = self.open_backoff {
            if builder.open_period_unset() {
                builder = builder.timeout(first).backoff(longest);
            }
        }
        if builder.jitter_unset() {
            builder = builder.jitter(self.jitter);
        }
        let returned_at = Arc::new(AtomicU64::new(slow_start::NOT_RETURNED));
        if let Some(ramp) = &self.ramp {
            let (shared, at, window) = (
                Arc::clone(&self.shared),
                Arc::clone(&returned_at),
                ramp.settings.window(),
            );
            builder = builder.on_return(move || slow_start::returned(&shared, &at, window));
        }
        // Each endpoint's limit salted with its key (not its breaker's name, which the
        // factory may give every endpoint alike).
        let limiter = self
            .limit
            .as_ref()
            .map(|prototype| limit::limiter(prototype, &key.to_string()));
        let mut endpoint = Endpoint::new(
            key,
            Arc::new(builder.build()),
            Arc::clone(&self.shared),
            self.deadline,
        );
        endpoint.returned_at = returned_at;
        endpoint.limiter = limiter;
        Arc::new(endpoint)
    }

    /// A new endpoint in a pool that has others ramps up from now, with slow start.
    fn ramp_up(&self, endpoint: &Endpoint<K, P, O>) {
        if let Some(ramp) = &self.ramp {
            slow_start::returned(&self.shared, &endpoint.returned_at, ramp.settings.window());
        }
    }
}

impl<K: fmt::Debug, P: TripPolicy, O: Observer> fmt::Debug for Pool<K, P, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let endpoints = self.endpoints.load();
        f.debug_struct("Pool")
            .field(
                "endpoints",
                &endpoints.iter().map(|e| &e.key).collect::<Vec<_>>(),
            )
            .field("max_isolated", &self.max_isolated)
            .field("jitter", &self.jitter)
            .field("balance", &self.balance)
            .finish_non_exhaustive()
    }
}
