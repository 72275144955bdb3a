//! [`RetryBudget`]: Finagle's and Envoy's percent budget, exact and lock-free.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;

use super::feed::{Feed, RequestCount};
use super::ledger::{Ledger, MILLION, MIN_SLICE_NANOS, SLICES};
use crate::clock::{Clock, ClockSource};
use crate::error::{ConfigError, Number};
use crate::nanos::{saturating_nanos, Nanos};

/// A retry budget: retries may be at most a percent of the requests made within a `ttl`,
/// plus a reserve, so that retries cannot multiply the load on a dependency that fails
/// (Finagle's `RetryBudget`, Envoy's retry budgets).
///
/// - [`deposit`](Self::deposit) once per request (not per retry);
///   [`try_withdraw`](Self::try_withdraw) once per retry, which goes out only if it returns
///   `true`.
/// - Within any `ttl` (10 s by default), the withdrawals are at most `percent` of the
///   deposits (0.2 = 20 %, the default), rounded down, plus the reserve:
///   [`min_retries_per_second`](Self::min_retries_per_second) (10) × the `ttl` in seconds
///   (100 by default), so that a client with little traffic can still retry.
/// - **Exact.** The percent is kept in millionths and the arithmetic is on integers: 0.6 of
///   ten requests is six retries, not ten (a percent truncated to its inverse, as some
///   budgets do, makes 0.6 allow one retry per request). Under any number of threads, the
///   withdrawals that succeed never exceed the budget: they are serialized by one
///   compare-and-swap, and each one counts every other.
/// - **Cheap on the call's path.** A deposit is a reading of the budget's clock and one
///   compare-and-swap on the calling core's own cache line (no line is shared between cores
///   for it); only a retry reads every core's counts.
/// - **Lazy**: the `ttl` is cut into 10 slices, and a slice's counts leave the window when
///   it is more than 10 slices old, computed from the clock when the budget is used (no
///   timer). A deposit thus counts for between 0.9 and 1 `ttl`, as in Finagle.
///
/// Clones share the budget: give one to every layer, pool or client that retries to the
/// same dependency.
///
/// | | Finagle | Envoy | here |
/// |---|---|---|---|
/// | percent | `percentCanRetry` 0.2 | `budget_percent` 20 % of active requests | `percent` 0.2, of requests within the `ttl` |
/// | reserve | `minRetriesPerSec` 10 × `ttl` | `min_retry_concurrency` 3 | `min_retries_per_second` 10 × `ttl` |
/// | window | `ttl` 10 s | (concurrency, not a window) | `ttl` 10 s |
///
/// # Examples
///
/// ```
/// use lazybreaker::retry::RetryBudget;
/// use lazybreaker::ManualClock;
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let budget = RetryBudget::new(0.6)?
///     .min_retries_per_second(0)
///     .clock(clock.clone());
/// for _ in 0..10 {
///     budget.deposit();
/// }
/// let retries = (0..10).filter(|_| budget.try_withdraw()).count();
/// assert_eq!(retries, 6, "60 % of ten requests");
///
/// // Ten seconds later the requests have left the window, and the retries with them.
/// clock.advance(Duration::from_secs(10));
/// assert_eq!(budget.balance(), 0);
/// budget.deposit();
/// budget.deposit();
/// assert!(budget.try_withdraw(), "60 % of two is one");
/// assert!(!budget.try_withdraw());
/// # Ok::<(), lazybreaker::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct RetryBudget {
    settings: Settings,
    clock: ClockSource,
    ledger: Arc<Ledger>,
    feeds: Arc<Feeds>,
    /// Whether this budget is fed ([`RetryBudget::fed_by`]): a plain copy of the shared
    /// flag, read by [`deposit`](RetryBudget::deposit) without following a pointer.
    fed: bool,
}

/// The sources a budget is fed from ([`RetryBudget::fed_by`]), shared by its clones.
#[derive(Debug, Default)]
struct Feeds {
    /// Whether the budget is fed, for the clones made before it was.
    fed: AtomicBool,
    /// Read by the one who asks the budget, others going on without (never waited for).
    list: Mutex<Vec<Feed>>,
}

/// What a budget was made with.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Settings {
    percent: f64,
    min_retries_per_second: u32,
    ttl: Duration,
}

/// The shortest `ttl`: ten slices of the shortest slice.
const MIN_TTL: Duration = Duration::from_nanos(MIN_SLICE_NANOS * SLICES);

/// The largest percent: a thousand retries a request.
const MAX_PERCENT: f64 = 1000.0;

impl RetryBudget {
    /// A budget of `percent` of the requests (0.2 is 20 %), with the default reserve (10
    /// retries a second) and `ttl` (10 s), on its own coarse monotonic clock.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] for field `percent` unless it is a finite number in [0, 1000] (0: only
    /// the reserve; 1000: a thousand retries a request).
    pub fn new(percent: f64) -> Result<Self, ConfigError> {
        if !percent.is_finite() || !(0.0..=MAX_PERCENT).contains(&percent) {
            return Err(ConfigError::new(
                "percent",
                Number(percent),
                "must be a finite number in [0, 1000] (0.2 is 20 %)",
            ));
        }
        let settings = Settings {
            percent,
            min_retries_per_second: 10,
            ttl: Duration::from_secs(10),
        };
        Ok(Self {
            settings,
            clock: ClockSource::Coarse,
            ledger: Arc::new(settings.ledger()),
            feeds: Arc::default(),
            fed: false,
        })
    }

    /// The retries allowed each second whatever the requests (10 by default): a reserve of
    /// `n` × the `ttl` in seconds (rounded down) within the window. 0 leaves only the
    /// percent. Starts the budget afresh (set it before use).
    pub fn min_retries_per_second(mut self, n: u32) -> Self {
        self.settings.min_retries_per_second = n;
        self.afresh()
    }

    /// How long a request counts for the budget (10 s by default); at least 10 ms (a
    /// shorter `ttl` counts as 10 ms). Starts the budget afresh (set it before use).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.settings.ttl = ttl.max(MIN_TTL);
        self.afresh()
    }

    /// The clock the budget reads (its own coarse monotonic clock by default): give it the
    /// breaker's, or a [`ManualClock`](crate::ManualClock) in a test. Starts the budget
    /// afresh (set it before use).
    pub fn clock<C: Clock + 'static>(mut self, clock: C) -> Self {
        self.clock = ClockSource::of(clock);
        self.afresh()
    }

    fn afresh(mut self) -> Self {
        self.ledger = Arc::new(self.settings.ledger());
        self.feeds = Arc::default();
        self.fed = false;
        self
    }

    /// Feeds the budget from `source`'s count of requests (a breaker's calls, less the
    /// retries made after its failures), read when the budget is asked: a call then pays
    /// nothing for the budget, not even a [`deposit`](Self::deposit), which does nothing
    /// on a fed budget (the source counts the requests). Several sources add up; one
    /// dropped is left out. Set it after the other settings (they start the budget afresh).
    ///
    /// The requests made since the budget was last asked are credited to that time, the
    /// earliest they can have been made: the budget is never more generous than one fed
    /// request by request, but after a quiet spell longer than the `ttl` it starts from its
    /// reserve, and grows with the requests made since.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::retry::RetryBudget;
    /// use lazybreaker::{Breaker, ManualClock};
    /// use std::sync::Arc;
    ///
    /// let clock = ManualClock::new();
    /// let breaker = Arc::new(Breaker::builder().clock(clock.clone()).build());
    /// let budget = RetryBudget::new(0.2)?
    ///     .min_retries_per_second(0)
    ///     .clock(clock.clone())
    ///     .fed_by(&breaker);
    /// assert!(!budget.try_withdraw(), "no call yet");
    /// for _ in 0..10 {
    ///     let _ = breaker.execute(|| Ok::<_, ()>(()));
    /// }
    /// assert_eq!(budget.balance(), 2, "20 % of the breaker's ten calls");
    /// # Ok::<(), lazybreaker::ConfigError>(())
    /// ```
    pub fn fed_by<S: RequestCount + 'static>(mut self, source: &Arc<S>) -> Self {
        let source: Weak<dyn RequestCount> = Arc::downgrade(source) as Weak<S>;
        let seen = source.upgrade().map_or(0, |s| s.requests());
        let feed = Feed::new(source, seen, self.clock.now());
        self.feeds.list.lock().push(feed);
        self.feeds.fed.store(true, Ordering::Release);
        self.fed = true;
        self
    }

    /// Whether the budget is fed from a count of requests ([`fed_by`](Self::fed_by)).
    #[inline]
    pub fn is_fed(&self) -> bool {
        self.fed || self.feeds.fed.load(Ordering::Relaxed)
    }

    /// Reads the sources the budget is fed from, unless another caller does.
    fn catch_up(&self, now: Nanos) {
        if !self.is_fed() {
            return;
        }
        if let Some(mut list) = self.feeds.list.try_lock() {
            list.retain_mut(|feed| feed.catch_up(&self.ledger, now));
        }
    }

    /// One request: call it once per call that may be retried (not for the retries).
    /// Nothing on a budget [fed](Self::fed_by) from a count of requests.
    #[inline]
    pub fn deposit(&self) {
        if !self.is_fed() {
            self.ledger.deposit(self.clock.now());
        }
    }

    /// One retry, if the budget has room for it: `true` spends it (send the retry), `false`
    /// leaves the budget as it was (do not retry).
    pub fn try_withdraw(&self) -> bool {
        self.try_withdraw_at(self.clock.now())
    }

    /// [`deposit`](Self::deposit) at `now` (a reading of the budget's clock, in nanoseconds).
    #[inline]
    pub(crate) fn deposit_at(&self, now: Nanos) {
        if !self.is_fed() {
            self.ledger.deposit(now);
        }
    }

    /// [`try_withdraw`](Self::try_withdraw) at `now` (a reading of the budget's clock).
    pub(crate) fn try_withdraw_at(&self, now: Nanos) -> bool {
        self.catch_up(now);
        self.ledger.try_withdraw(now)
    }

    /// The retries the budget allows now, beyond those already made.
    pub fn balance(&self) -> u64 {
        let now = self.clock.now();
        self.catch_up(now);
        self.ledger.balance(now)
    }

    /// The requests deposited within the window now.
    pub fn deposits(&self) -> u64 {
        let now = self.clock.now();
        self.catch_up(now);
        self.ledger.deposits_at(now)
    }

    /// The percent, as made.
    pub fn percent(&self) -> f64 {
        self.settings.percent
    }

    /// The reserve: the retries allowed each second whatever the requests.
    pub fn retries_per_second(&self) -> u32 {
        self.settings.min_retries_per_second
    }

    /// How long a request counts for the budget.
    pub fn window(&self) -> Duration {
        self.settings.ttl
    }

    /// The budget's clock reading, for a caller that computes a deadline from the same
    /// time.
    pub(crate) fn now(&self) -> Nanos {
        self.clock.now()
    }
}

impl Default for RetryBudget {
    /// Finagle's defaults: 20 %, 10 retries a second, a ttl of 10 s.
    fn default() -> Self {
        match Self::new(0.2) {
            Ok(budget) => budget,
            Err(_) => unreachable!("0.2 is a valid percent"),
        }
    }
}

impl fmt::Debug for RetryBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryBudget")
            .field("percent", &self.settings.percent)
            .field(
                "min_retries_per_second",
                &self.settings.min_retries_per_second,
            )
            .field("ttl", &self.settings.ttl)
            .finish_non_exhaustive()
    }
}

impl Settings {
    fn ledger(&self) -> Ledger {
        let ttl = saturating_nanos(self.ttl);
        let percent_millionths = (self.percent * MILLION as f64).round() as u128;
        // n × ttl in seconds, rounded down, exactly on integers.
        let reserve = u128::from(self.min_retries_per_second) * u128::from(ttl) / 1_000_000_000;
        Ledger::new(
            ttl / SLICES,
            percent_millionths,
            u64::try_from(reserve).unwrap_or(u64::MAX),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    fn budget(percent: f64, clock: &ManualClock) -> RetryBudget {
        RetryBudget::new(percent)
            .unwrap()
            .min_retries_per_second(0)
            .clock(clock.clone())
    }

    fn withdraw_all(budget: &RetryBudget) -> usize {
        (0..10_000).take_while(|_| budget.try_withdraw()).count()
    }

    #[test]
    fn a_percent_of_the_deposits_rounded_down() {
        // (percent, deposits, retries): 0.6 × 10 = 6 (a truncated inverse would give 10),
        // 0.1 × 9 = 0.9 → 0, 0.1 × 10 = 1, 0.25 × 7 = 1.75 → 1, 1.5 × 3 = 4.5 → 4, 0 → 0.
        let table = [
            (0.6, 10, 6),
            (0.1, 9, 0),
            (0.1, 10, 1),
            (0.25, 7, 1),
            (1.5, 3, 4),
            (0.0, 50, 0),
            (0.333333, 3, 0),
            (0.333334, 3, 1),
            (1000.0, 1, 1000),
        ];
        for (percent, deposits, retries) in table {
            let clock = ManualClock::new();
            let budget = budget(percent, &clock);
            for _ in 0..deposits {
                budget.deposit();
            }
            assert_eq!(budget.balance(), retries, "{percent} of {deposits}");
            assert_eq!(
                withdraw_all(&budget),
                retries as usize,
                "{percent} of {deposits}"
            );
            assert_eq!(budget.balance(), 0);
        }
    }

    #[test]
    fn finagles_sequence_a_reserve_then_deposits_then_expiry() {
        // Finagle's RetryBudget(ttl = 1 s, minRetriesPerSec = 5, percentCanRetry = 0.1).
        let clock = ManualClock::new();
        let budget = RetryBudget::new(0.1)
            .unwrap()
            .min_retries_per_second(5)
            .ttl(Duration::from_secs(1))
            .clock(clock.clone());
        assert_eq!(withdraw_all(&budget), 5, "the reserve: 5 a second over 1 s");
        for _ in 0..9 {
            budget.deposit();
        }
        assert!(!budget.try_withdraw(), "10 % of 9 is none");
        budget.deposit();
        assert!(budget.try_withdraw(), "10 % of 10 is one");
        assert!(!budget.try_withdraw());
        // A ttl later, the deposits and the withdrawals have left the window: the reserve.
        clock.advance(Duration::from_secs(1));
        assert_eq!(budget.balance(), 5);
        assert_eq!(budget.deposits(), 0);
    }

    #[test]
    fn the_reserve_is_per_second_over_the_ttl() {
        let clock = ManualClock::new();
        let budget = RetryBudget::new(0.2)
            .unwrap()
            .min_retries_per_second(3)
            .ttl(Duration::from_millis(2500))
            .clock(clock.clone());
        assert_eq!(budget.balance(), 7, "3 × 2.5 s, rounded down");
        for _ in 0..10 {
            budget.deposit();
        }
        assert_eq!(withdraw_all(&budget), 9, "the reserve and 20 % of ten");
    }

    #[test]
    fn deposits_and_withdrawals_leave_after_ten_slices() {
        let clock = ManualClock::new();
        let budget = budget(1.0, &clock);
        // ttl 10 s: slices of 1 s.
        for _ in 0..4 {
            budget.deposit();
        }
        clock.advance(Duration::from_millis(5500));
        for _ in 0..4 {
            budget.deposit();
        }
        assert_eq!(budget.deposits(), 8);
        assert_eq!(withdraw_all(&budget), 8);
        // At 9.999 s both slices are in; at 10 s the first has left, its deposits with it,
        // and the withdrawals (made in the second slice) are all still in.
        clock.advance(Duration::from_millis(4499));
        assert_eq!(budget.deposits(), 8);
        clock.advance(Duration::from_millis(1));
        assert_eq!(budget.deposits(), 4);
        assert_eq!(
            budget.balance(),
            0,
            "4 deposits, 8 withdrawals in the window"
        );
        // At 15.5 s the withdrawals leave too.
        clock.advance(Duration::from_millis(5500));
        assert_eq!(budget.deposits(), 0);
        budget.deposit();
        assert_eq!(withdraw_all(&budget), 1);
    }

    /// A count of requests kept elsewhere.
    #[derive(Default)]
    struct Counter(std::sync::atomic::AtomicU64);

    impl RequestCount for Counter {
        fn requests(&self) -> u64 {
            self.0.load(std::sync::atomic::Ordering::Relaxed)
        }
    }

    impl Counter {
        fn add(&self, n: u64) {
            self.0.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        }
    }

    #[test]
    fn a_fed_budget_counts_its_sources_requests_from_when_it_last_asked() {
        let clock = ManualClock::new();
        let source = Arc::new(Counter::default());
        source.add(50); // before the feed: not the budget's
        let budget = budget(0.5, &clock).fed_by(&source);
        budget.deposit(); // the source counts the requests: nothing
        assert_eq!(budget.deposits(), 0);
        source.add(10);
        assert_eq!(budget.deposits(), 10);
        assert_eq!(withdraw_all(&budget), 5);
        // Ten requests, then the budget is asked 5.5 s later: they are credited to the
        // last reading (0 s), and leave the window at 10 s, as the earliest they can have
        // been made.
        source.add(10);
        clock.advance(Duration::from_millis(5500));
        assert_eq!(budget.deposits(), 20);
        clock.advance(Duration::from_millis(4500));
        assert_eq!(budget.deposits(), 0, "all credited to 0 s: gone at 10 s");
        // A quiet spell longer than the ttl: what was made in it is not known to be recent.
        source.add(30);
        clock.advance(Duration::from_secs(11));
        assert_eq!(budget.deposits(), 0);
        source.add(4);
        assert_eq!(budget.deposits(), 4, "from the last reading on");
        // A count that goes down credits nothing, and counts on from there.
        source.0.store(2, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(budget.deposits(), 4);
        source.add(2);
        assert_eq!(budget.deposits(), 6);
    }

    #[test]
    fn a_source_dropped_is_left_out() {
        let clock = ManualClock::new();
        let kept = Arc::new(Counter::default());
        let dropped = Arc::new(Counter::default());
        let budget = budget(1.0, &clock).fed_by(&kept).fed_by(&dropped);
        kept.add(3);
        dropped.add(4);
        assert_eq!(budget.deposits(), 7, "the sources add up");
        drop(dropped);
        kept.add(1);
        assert_eq!(budget.deposits(), 8);
        assert_eq!(budget.feeds.list.lock().len(), 1);
        assert!(budget.is_fed());
    }

    #[test]
    fn bad_percents_name_their_field() {
        for percent in [-0.1, 1000.5, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let err = RetryBudget::new(percent).unwrap_err();
            assert_eq!(err.field(), "percent", "{percent}");
        }
        assert!(RetryBudget::new(0.0).is_ok());
        assert!(RetryBudget::new(1000.0).is_ok());
    }

    #[test]
    fn threads_never_withdraw_more_than_the_budget() {
        let clock = ManualClock::new();
        let budget = RetryBudget::new(0.3)
            .unwrap()
            .min_retries_per_second(1)
            .clock(clock.clone());
        let granted = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        budget.deposit();
                        for _ in 0..3 {
                            if budget.try_withdraw() {
                                granted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            }
                        }
                    }
                });
            }
        });
        // 4 000 deposits: 30 % is 1 200, and a reserve of 10 (1 a second over 10 s). Each
        // deposit is followed by three attempts, so the budget is spent to the last retry.
        assert_eq!(granted.into_inner(), 1210);
        assert_eq!(budget.balance(), 0);
    }
}
