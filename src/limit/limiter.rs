//! [`Limiter`]: the calls in flight counted against an adaptive limit.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::algorithm::Algorithm;
use super::sample::Sample;
use crate::atomic::{AtomicU64, Ordering};
use crate::error::{ConfigError, Rejected};

/// Counts the calls in flight against an [`Algorithm`]'s limit: a call is admitted while
/// fewer than the limit are out, and reports how it went when it ends, which is the sample
/// the algorithm learns from.
///
/// Sans-IO: the caller gives the time (`now`, on any clock that only goes forward) when a
/// call starts and when it ends. No lock: a call's admission is one compare-and-swap on the
/// count of calls in flight (so that two calls never both take the last place), its end one
/// subtraction and the algorithm's own update (one compare-and-swap on its word for the
/// algorithms of this module).
///
/// # Examples
///
/// ```
/// use lazybreaker::limit::{Aimd, Limiter};
/// use lazybreaker::Rejected;
/// use std::time::Duration;
///
/// let limiter = Limiter::new(Aimd::new().initial_limit(2).min_limit(1));
/// let t0 = Duration::ZERO;
/// let a = limiter.try_acquire(t0)?;
/// let b = limiter.try_acquire(t0)?;
/// // Two calls out, a limit of two: the third is turned away at once.
/// assert_eq!(limiter.try_acquire(t0).unwrap_err(), Rejected::Limited);
/// // Answered in 5 ms, with 1 of 2 out when it started (half the limit): one more.
/// assert_eq!(a.success(Duration::from_millis(5)), 3);
/// // Overloaded: the limit is cut, 3 × 0.9 rounded down.
/// assert_eq!(b.dropped(Duration::from_millis(9)), 2);
/// assert_eq!(limiter.in_flight(), 0);
/// # Ok::<(), Rejected>(())
/// ```
pub struct Limiter<A = Box<dyn Algorithm>> {
    in_flight: AtomicU64,
    limited: AtomicU64,
    /// The algorithm's [`learns`](Algorithm::learns), read once.
    learns: bool,
    algorithm: A,
}

impl<A: Algorithm> Limiter<A> {
    /// A limiter over `algorithm`, no call in flight. Its settings are not checked: see
    /// [`try_new`](Limiter::try_new).
    pub fn new(algorithm: A) -> Self {
        Self {
            in_flight: AtomicU64::new(0),
            limited: AtomicU64::new(0),
            learns: algorithm.learns(),
            algorithm,
        }
    }

    /// A limiter over `algorithm`, whose settings must be in range.
    ///
    /// # Errors
    ///
    /// The algorithm's [`validate`](Algorithm::validate) error, naming the field.
    pub fn try_new(algorithm: A) -> Result<Self, ConfigError> {
        algorithm.validate()?;
        Ok(Self::new(algorithm))
    }

    /// The algorithm.
    pub fn algorithm(&self) -> &A {
        &self.algorithm
    }

    /// Whether its algorithm learns from samples ([`Algorithm::learns`]): if not, its
    /// callers need not time their calls.
    pub fn learns(&self) -> bool {
        self.learns
    }

    /// The limit now.
    pub fn limit(&self) -> u32 {
        self.algorithm.limit()
    }

    /// Calls in flight now.
    pub fn in_flight(&self) -> u32 {
        self.in_flight.load(Ordering::Relaxed) as u32
    }

    /// Calls turned away so far ([`Rejected::Limited`]).
    pub fn limited(&self) -> u64 {
        self.limited.load(Ordering::Relaxed)
    }

    /// A place for one call if fewer than the limit are in flight: the calls in flight with
    /// it (itself included). `None` at the limit (counted in [`limited`](Limiter::limited)).
    /// The place must be given back with [`end`](Limiter::end): the permits do it for you.
    #[inline]
    pub fn try_start(&self) -> Option<u32> {
        let limit = u64::from(self.algorithm.limit().max(1));
        let mut current = self.in_flight.load(Ordering::Relaxed);
        loop {
            if current >= limit {
                self.limited.fetch_add(1, Ordering::Relaxed);
                return None;
            }
            match self.in_flight.compare_exchange_weak(
                current,
                current + 1,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some((current + 1) as u32),
                Err(actual) => current = actual,
            }
        }
    }

    /// A place for one call counted on two counters kept elsewhere instead of the limiter's
    /// own (a pool's endpoint counts its picks started and ended anyway): one more on
    /// `started` (a read-modify-write, whose value counts every call started before), then
    /// the calls in flight are `started − ended` (`ended` read after: a stale read only
    /// overcounts; the end of a call counted since, which saw this one and is gone, only
    /// lowers it, and the count given is at least 1). Over the limit, `started` is given its one back (so that a later reader
    /// never subtracts an end it did not count the start of) and the try is counted limited.
    /// The place is given back by one more on `ended` (the caller's, at the call's end); the
    /// sample, if any, with [`learn`](Limiter::learn). The calls in flight with it, itself
    /// included, or `None` at the limit. Sequentially consistent, so that two calls never
    /// both take the last place (a loom model checks it: `tests/loom.rs`).
    ///
    /// ```
    /// use lazybreaker::limit::{Fixed, Limiter};
    /// use std::sync::atomic::{AtomicU64, Ordering};
    ///
    /// let limiter = Limiter::new(Fixed::new(1));
    /// let (started, ended) = (AtomicU64::new(0), AtomicU64::new(0));
    /// assert_eq!(limiter.try_start_on(&started, &ended), Some(1));
    /// assert_eq!(limiter.try_start_on(&started, &ended), None); // full: its count taken back
    /// assert_eq!(started.load(Ordering::SeqCst), 1);
    /// ended.fetch_add(1, Ordering::SeqCst); // the call ended: its place is free
    /// assert_eq!(limiter.try_start_on(&started, &ended), Some(1));
    /// ```
    #[inline]
    pub fn try_start_on(&self, started: &AtomicU64, ended: &AtomicU64) -> Option<u32> {
        let limit = u64::from(self.algorithm.limit().max(1));
        let after = started.fetch_add(1, Ordering::SeqCst).wrapping_add(1);
        let in_flight = after.saturating_sub(ended.load(Ordering::SeqCst));
        if in_flight > limit {
            started.fetch_sub(1, Ordering::SeqCst);
            self.limited.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        // At least itself: `ended` may count the end of a call that started after this
        // one's count was taken (it saw this one, and is gone), which only lowers the count.
        Some(in_flight.clamp(1, u64::from(u32::MAX)) as u32)
    }

    /// Learns from a call counted elsewhere ([`try_start_on`](Limiter::try_start_on)): the
    /// limit it leaves.
    #[inline]
    pub fn learn(&self, sample: Sample) -> u32 {
        if self.learns {
            self.algorithm.on_sample(sample)
        } else {
            self.algorithm.limit()
        }
    }

    /// Gives back a place [`try_start`](Limiter::try_start) gave, with what the call says
    /// of the limit (`None`: nothing, as for a call cancelled or failed for a reason of its
    /// own). Returns the limit it leaves.
    #[inline]
    pub fn end(&self, sample: Option<Sample>) -> u32 {
        // Never below zero: a place given back twice is a caller's bug, not an underflow.
        let _ = self
            .in_flight
            .fetch_update(Ordering::Release, Ordering::Relaxed, |n| n.checked_sub(1));
        match sample {
            Some(sample) if self.learns => self.algorithm.on_sample(sample),
            _ => self.algorithm.limit(),
        }
    }

    /// A permit for one call starting at `now`, or [`Rejected::Limited`] at the limit.
    ///
    /// # Errors
    ///
    /// [`Rejected::Limited`] when the limit's calls are in flight.
    pub fn try_acquire(&self, now: Duration) -> Result<LimitPermit<'_, A>, Rejected> {
        match self.try_start() {
            Some(in_flight) => Ok(LimitPermit {
                limiter: self,
                start: Start { at: now, in_flight },
                done: false,
            }),
            None => Err(Rejected::Limited),
        }
    }

    /// [`try_acquire`](Limiter::try_acquire) for a permit that owns its limiter (to move
    /// into a future).
    ///
    /// # Errors
    ///
    /// [`Rejected::Limited`] when the limit's calls are in flight.
    pub fn try_acquire_owned(
        self: &Arc<Self>,
        now: Duration,
    ) -> Result<OwnedLimitPermit<A>, Rejected> {
        match self.try_start() {
            Some(in_flight) => Ok(OwnedLimitPermit {
                limiter: Arc::clone(self),
                start: Start { at: now, in_flight },
                done: false,
            }),
            None => Err(Rejected::Limited),
        }
    }
}

impl<A: fmt::Debug> fmt::Debug for Limiter<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limiter")
            .field("in_flight", &self.in_flight.load(Ordering::Relaxed))
            .field("limited", &self.limited.load(Ordering::Relaxed))
            .field("algorithm", &self.algorithm)
            .finish()
    }
}

/// When a call started, and how many were out with it.
#[derive(Debug, Clone, Copy)]
struct Start {
    at: Duration,
    in_flight: u32,
}

impl Start {
    fn sample(self, now: Duration, dropped: bool) -> Sample {
        Sample {
            latency: now.saturating_sub(self.at),
            in_flight: self.in_flight,
            dropped,
        }
    }
}

macro_rules! permit_methods {
    () => {
        /// Calls in flight when this one started, itself included.
        pub fn in_flight_at_start(&self) -> u32 {
            self.start.in_flight
        }

        /// The call answered at `now`: a sample of its latency.
        pub fn success(mut self, now: Duration) -> u32 {
            self.finish(Some(self.start.sample(now, false)))
        }

        /// The call was dropped at `now`: the dependency said it is overloaded, or the
        /// call timed out.
        pub fn dropped(mut self, now: Duration) -> u32 {
            self.finish(Some(self.start.sample(now, true)))
        }

        /// The call ended and says nothing of the limit (it failed for a reason of its
        /// own, it was cancelled): its place is given back, no sample taken. What a
        /// permit dropped unused does.
        pub fn ignore(mut self) -> u32 {
            self.finish(None)
        }

        fn finish(&mut self, sample: Option<Sample>) -> u32 {
            self.done = true;
            self.limiter.end(sample)
        }
    };
}

/// One call's place under a [`Limiter`]: give its verdict with [`success`](LimitPermit::success),
/// [`dropped`](LimitPermit::dropped) or [`ignore`](LimitPermit::ignore); dropped without
/// one (a panic, a cancelled future), its place is given back without a sample.
#[must_use = "a permit holds a place under the limit until it gives its verdict or is dropped"]
#[derive(Debug)]
pub struct LimitPermit<'a, A: Algorithm = Box<dyn Algorithm>> {
    limiter: &'a Limiter<A>,
    start: Start,
    done: bool,
}

impl<A: Algorithm> LimitPermit<'_, A> {
    permit_methods!();
}

impl<A: Algorithm> Drop for LimitPermit<'_, A> {
    fn drop(&mut self) {
        if !self.done {
            self.finish(None);
        }
    }
}

/// A [`LimitPermit`] that owns its limiter ([`Limiter::try_acquire_owned`]).
#[must_use = "a permit holds a place under the limit until it gives its verdict or is dropped"]
#[derive(Debug)]
pub struct OwnedLimitPermit<A: Algorithm = Box<dyn Algorithm>> {
    limiter: Arc<Limiter<A>>,
    start: Start,
    done: bool,
}

impl<A: Algorithm> OwnedLimitPermit<A> {
    permit_methods!();

    /// Its limiter.
    pub fn limiter(&self) -> &Arc<Limiter<A>> {
        &self.limiter
    }
}

impl<A: Algorithm> Drop for OwnedLimitPermit<A> {
    fn drop(&mut self) {
        if !self.done {
            self.finish(None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Aimd, Fixed};
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_permit_gives_its_place_back_however_it_ends() {
        let limiter = Limiter::new(Fixed::new(2));
        let a = limiter.try_acquire(Duration::ZERO).unwrap();
        assert_eq!(a.in_flight_at_start(), 1);
        let b = limiter.try_acquire(Duration::ZERO).unwrap();
        assert_eq!(b.in_flight_at_start(), 2);
        assert_eq!(
            limiter.try_acquire(Duration::ZERO).unwrap_err(),
            Rejected::Limited
        );
        assert_eq!(limiter.limited(), 1);
        drop(a);
        assert_eq!(limiter.in_flight(), 1);
        let c = limiter.try_acquire(MS).unwrap();
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            let _c = c;
            panic!("the call panicked");
        }));
        assert!(caught.is_err());
        assert_eq!(limiter.in_flight(), 1, "a panic gives the place back");
        b.ignore();
        assert_eq!(limiter.in_flight(), 0);
        // Given back once only: the count never goes below zero.
        limiter.end(None);
        assert_eq!(limiter.in_flight(), 0);
    }

    #[test]
    fn the_sample_is_the_latency_and_the_calls_out_at_the_start() {
        let limiter = Limiter::new(Aimd::new().initial_limit(4).min_limit(1));
        let permits: Vec<_> = (0..2)
            .map(|_| limiter.try_acquire(Duration::from_millis(10)).unwrap())
            .collect();
        // 2 out of 4 when the second started: half the limit, so it grows.
        let mut permits = permits.into_iter();
        let first = permits.next().unwrap();
        let second = permits.next().unwrap();
        assert_eq!(
            first.success(Duration::from_millis(12)),
            4,
            "1 of 4: below half"
        );
        assert_eq!(second.success(Duration::from_millis(12)), 5, "2 of 4: half");
        let late = limiter.try_acquire(Duration::ZERO).unwrap();
        // A latency past Aimd's timeout is a drop: 5 × 0.9 = 4.
        assert_eq!(late.success(Duration::from_secs(6)), 4);
    }

    #[test]
    fn a_count_on_counters_kept_elsewhere_includes_the_call_itself() {
        let limiter = Limiter::new(Fixed::new(2));
        // The end of a call that started after this one's count was taken, seen already.
        let (started, ended) = (AtomicU64::new(0), AtomicU64::new(1));
        assert_eq!(limiter.try_start_on(&started, &ended), Some(1));
        assert_eq!(started.load(Ordering::Relaxed), 1);
        let ended = AtomicU64::new(0);
        assert_eq!(limiter.try_start_on(&started, &ended), Some(2));
        assert_eq!(limiter.try_start_on(&started, &ended), None);
        assert_eq!(
            started.load(Ordering::Relaxed),
            2,
            "a refused try takes its count back"
        );
        assert_eq!(limiter.limited(), 1);
    }

    #[test]
    fn owned_permits_move_into_threads() {
        let limiter = Arc::new(Limiter::new(Fixed::new(3)));
        let permits: Vec<_> = (0..3)
            .map(|_| limiter.try_acquire_owned(Duration::ZERO).unwrap())
            .collect();
        assert!(limiter.try_acquire_owned(Duration::ZERO).is_err());
        let threads: Vec<_> = permits
            .into_iter()
            .map(|p| std::thread::spawn(move || p.success(MS)))
            .collect();
        for t in threads {
            assert_eq!(t.join().unwrap(), 3);
        }
        assert_eq!(limiter.in_flight(), 0);
    }

    #[test]
    fn threads_never_hold_more_places_than_the_limit() {
        let limiter = Arc::new(Limiter::new(Fixed::new(3)));
        let peak = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (limiter, peak) = (Arc::clone(&limiter), Arc::clone(&peak));
                std::thread::spawn(move || {
                    let mut admitted = 0;
                    for _ in 0..2_000 {
                        if let Ok(p) = limiter.try_acquire(Duration::ZERO) {
                            peak.fetch_max(
                                p.in_flight_at_start(),
                                std::sync::atomic::Ordering::Relaxed,
                            );
                            admitted += 1;
                            p.success(MS);
                        }
                    }
                    admitted
                })
            })
            .collect();
        let admitted: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert!(peak.load(std::sync::atomic::Ordering::Relaxed) <= 3);
        assert_eq!(
            admitted + limiter.limited(),
            8_000,
            "every try counted once"
        );
        assert_eq!(limiter.in_flight(), 0);
    }
}
