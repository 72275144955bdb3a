//! A pool's adaptive concurrency limits ([`Pool::limit`]): each endpoint its own, a pick
//! skipping an endpoint at its limit as it skips an isolated one, and the pick's place given
//! back, with what the call says of the limit, when the pick is reported.

use std::sync::Arc;
use std::time::Duration;

use crate::breaker::gate::{self, Ready};
use crate::clock::ClockSource;
use crate::contain::{self, FirstPanic};
use crate::error::{ConfigError, Rejected};
use crate::limit::{Algorithm, Limiter, Sample};
use crate::nanos::{instant, Nanos};
use crate::observe::Observer;
use crate::outcome::Outcome;
use crate::policy::TripPolicy;

use super::endpoint::Endpoint;
use super::{Endpoints, Pool};

/// An endpoint's place under its limit: when its call went out, and how many were out with
/// it (itself included); [`Place::NONE`] (no call counted) for a pick without a limit. Two
/// words, copied whole (a pick carries it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Place {
    at: Nanos,
    /// 0 for no place.
    in_flight: u64,
}

impl Place {
    /// No place: the endpoint has no limit.
    pub(super) const NONE: Place = Place {
        at: 0,
        in_flight: 0,
    };

    /// Whether it holds a place (its pick was counted when the place was taken).
    #[inline]
    pub(super) fn held(self) -> bool {
        self.in_flight != 0
    }
}

/// What a call's end says of its endpoint's limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Said {
    /// Its outcome, as the pick reported it.
    Outcome(Outcome),
    /// The endpoint said it is overloaded ([`Pick::overloaded`](super::Pick::overloaded)).
    Overloaded,
}

impl<K, P: TripPolicy, O: Observer> Endpoint<K, P, O> {
    /// A place under the endpoint's limit for a call going out at `at` (`None`: read the
    /// pool's clock now), if it has a limit: `None` at its limit (the pick skips it),
    /// [`Place::NONE`] without a limit. The place is counted on the endpoint's own picks started
    /// and ended ([`Limiter::try_start_on`]): the pick it becomes is counted started here,
    /// its end gives the place back; a place not used (the breaker refused the call) is
    /// given back with [`unused`](Self::unused).
    #[inline]
    pub(super) fn take_place(&self, at: Option<Nanos>) -> Option<Place> {
        let Some(limiter) = &self.limiter else {
            return Some(Place::NONE);
        };
        // The clock first (if the limit learns from latencies): a user clock's panic leaves
        // no place taken.
        let at = match at {
            Some(at) => at,
            None if limiter.learns() => self.shared.now(),
            None => 0,
        };
        let (started, ended) = self.counters();
        let place = limiter.try_start_on(started, ended).map(|in_flight| Place {
            at,
            in_flight: u64::from(in_flight),
        });
        if place.is_none() {
            // The pool's count, kept whatever becomes of the endpoint.
            let skips = &self.shared.stats.limit_skips;
            skips.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        place
    }

    /// A place taken and not used (no pick made): not a pick, uncounted.
    pub(super) fn unused(&self, place: Place) {
        if place.held() {
            let (started, _) = self.counters();
            started.fetch_sub(1, crate::atomic::Ordering::SeqCst);
        }
    }

    /// Learns from the end of a pick that held a place (the place itself comes back with
    /// the pick's end, [`Endpoint::end`]), the sample the call's end makes: a success its
    /// latency; an overload answer a drop; a failure a drop if it came after the pool's
    /// deadline (a timeout), else nothing (a failure of the endpoint's own says nothing of
    /// its queue, and is the breaker's to judge); an exclusion, an abandoned or cancelled
    /// call, nothing. A user clock's panic continues from here, the place given back first.
    pub(super) fn learn(&self, place: Place, said: Said) {
        let Some(limiter) = &self.limiter else {
            return;
        };
        if !limiter.learns() {
            return;
        }
        let dropped = match said {
            Said::Outcome(Outcome::Success) => Some(false),
            Said::Overloaded => Some(true),
            Said::Outcome(Outcome::Failure) if self.deadline != 0 => None,
            _ => return,
        };
        // A built-in clock read directly; a user clock through its panic's containment.
        let mut panics = FirstPanic::default();
        let now = match self.shared.clock.now_infallible() {
            Some(now) => Some(now),
            None => self.shared.clock.try_now(&mut panics),
        };
        let sample = now.and_then(|now| {
            let latency = instant(now.saturating_sub(place.at));
            let dropped = match dropped {
                Some(dropped) => dropped,
                // A failure: a drop if it took the deadline, else nothing.
                None if latency.as_nanos() >= u128::from(self.deadline) => true,
                None => return None,
            };
            Some(Sample {
                latency,
                in_flight: place.in_flight as u32,
                dropped,
            })
        });
        if let Some(sample) = sample {
            limiter.learn(sample);
        }
        contain::resume(panics);
    }

    /// Whether the endpoint has a limit and as many picks in flight as the limit.
    pub(super) fn at_limit(&self) -> bool {
        self.limiter
            .as_ref()
            .is_some_and(|l| self.in_flight() >= l.limit().max(1) as usize)
    }

    /// Its limit, if it has one.
    pub(super) fn limit_now(&self) -> Option<u32> {
        self.limiter.as_ref().map(|l| l.limit())
    }

    /// Picks its limit turned away so far.
    pub(super) fn limited(&self) -> u64 {
        self.limiter.as_ref().map_or(0, Limiter::limited)
    }
}

/// The pool's limit: the algorithm every endpoint gets a copy of.
pub(super) type Prototype = Arc<dyn Algorithm>;

/// A limiter for a new endpoint keyed `key`, from the pool's prototype (salted with the
/// key, so that endpoints whose limits draw random numbers do not draw in step).
pub(super) fn limiter(prototype: &Prototype, key: &str) -> Limiter {
    Limiter::new(prototype.boxed_clone_salted(crate::jitter::seed_of(key)))
}

impl<K, P: TripPolicy, O: Observer> Pool<K, P, O> {
    /// Gives each endpoint its own adaptive concurrency limit, a copy of `algorithm`
    /// ([`Aimd`](crate::limit::Aimd), [`Fixed`](crate::limit::Fixed), or your own
    /// [`Algorithm`]): a pick skips an endpoint with as many of its picks in flight as its
    /// limit, as it skips an isolated one, and with every endpoint that could take the call
    /// at its limit answers at once [`Rejected::Limited`] (counted in
    /// [`PoolStats::limited`](super::PoolStats::limited)). A pick never waits for a place.
    ///
    /// Each endpoint's limit learns from its own calls: a success is a sample of its
    /// latency, with the picks in flight when it went out; an overload answer
    /// ([`Pick::overloaded`](super::Pick::overloaded)) a drop; a failure after the pool's
    /// [`deadline`](Pool::deadline) a drop (a timeout); any other failure, an exclusion, a
    /// pick dropped or cancelled by a hedge, nothing. A limit is an overload signal, not a
    /// failure: a pick it turns away reaches no breaker, so it never trips one, and no
    /// outlier detection sees it.
    ///
    /// A setting for building the pool, before its first endpoint. A pool given no
    /// [`clock`](Pool::clock) then times its calls on the precise one (the processor's
    /// counter) if the limit tells latencies apart finer than the coarse clock's 1 to 4 ms
    /// ticks ([`Algorithm::fine_latency`]: [`Gradient2`](crate::limit::Gradient2),
    /// [`Vegas`](crate::limit::Vegas), an [`Aimd`](crate::limit::Aimd) timeout under
    /// 100 ms), else on the coarse one. A limit that learns nothing
    /// ([`Fixed`](crate::limit::Fixed)) reads no clock. Out-of-range settings
    /// are not checked here: see [`try_limit`](Pool::try_limit).
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::limit::Fixed;
    /// use lazybreaker::pool::Pool;
    /// use lazybreaker::{Breaker, Rejected};
    ///
    /// let pool = Pool::new(|_: &&str| Breaker::builder()).limit(Fixed::new(1));
    /// pool.set(["a", "b"]);
    /// let first = pool.pick().unwrap();
    /// let second = pool.pick().unwrap();
    /// assert_ne!(first.key(), second.key(), "the one at its limit is skipped");
    /// // Both at their limit: turned away at once, no breaker told.
    /// assert_eq!(pool.pick().unwrap_err(), Rejected::Limited);
    /// assert_eq!(pool.stats().limited, 1);
    /// first.success();
    /// assert!(pool.pick().is_ok(), "a place came back");
    /// # drop(second);
    /// ```
    #[must_use]
    pub fn limit(mut self, algorithm: impl Algorithm) -> Self {
        let fine = algorithm.learns() && algorithm.fine_latency();
        self.limit = Some(Arc::new(algorithm));
        // Latencies told apart finer than the coarse clock's tick want the precise one,
        // unless the pool was given a clock.
        if self.clock.is_none() && fine {
            if let Some(shared) = Arc::get_mut(&mut self.shared) {
                shared.clock = ClockSource::default_for(true, Duration::from_micros(10));
            }
        }
        self
    }

    /// [`limit`](Pool::limit), refusing settings out of range.
    ///
    /// # Errors
    ///
    /// The algorithm's [`validate`](Algorithm::validate) error, naming the field
    /// (`limit.backoff_ratio`, say).
    pub fn try_limit(self, algorithm: impl Algorithm) -> Result<Self, ConfigError> {
        algorithm.validate()?;
        Ok(self.limit(algorithm))
    }

    /// The limit each endpoint gets a copy of, if set.
    pub fn limit_algorithm(&self) -> Option<&dyn Algorithm> {
        self.limit.as_deref()
    }

    /// The rejection of a pick that found no endpoint to take the call, counted:
    /// [`Rejected::Limited`] if some endpoint whose breaker admits calls is at its limit
    /// (the ones that could take the call are full), else [`Rejected::NoEndpoint`] with
    /// `retry_after` (every endpoint is out, whatever its calls in flight).
    pub(super) fn refuse(
        &self,
        endpoints: &Endpoints<K, P, O>,
        retry_after: Option<Duration>,
    ) -> Rejected {
        let full = |e: &&std::sync::Arc<Endpoint<K, P, O>>| {
            e.at_limit() && gate::ready(&e.breaker) == Ready::Passes
        };
        if self.limit.is_some() && endpoints.iter().any(|e| full(&e)) {
            let stats = &self.shared.stats;
            stats
                .limited
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Rejected::Limited;
        }
        self.no_endpoint(retry_after)
    }
}
