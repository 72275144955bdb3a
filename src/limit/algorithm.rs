//! [`Algorithm`]: what every adaptive limit is to the code that enforces it.

use std::fmt;
use std::sync::Arc;

use super::sample::Sample;
use crate::error::ConfigError;

/// An adaptive concurrency limit: a value that learns from the calls its callers report
/// ([`Sample`]s) and gives how many calls may be in flight at once.
///
/// Implementations update themselves lazily, from the samples alone (no timer, no thread),
/// and take `&self` from many threads at once: the ones in this module keep their state in
/// one atomic word, updated by compare-and-swap, so that no update is lost and no caller
/// waits on a lock. A [`Limiter`](super::Limiter) counts the calls in flight against it; a
/// [`Pool`](crate::pool::Pool) gives each endpoint its own copy
/// ([`Pool::limit`](crate::pool::Pool::limit)).
///
/// `Clone` gives a copy with the same settings and the limit it has now (a pool clones the
/// value it was given, unsampled, for each endpoint).
pub trait Algorithm: Send + Sync + fmt::Debug + 'static {
    /// The limit now: at least 1 for the algorithms of this module.
    fn limit(&self) -> u32;

    /// Learns from one call, and gives the limit it leaves.
    fn on_sample(&self, sample: Sample) -> u32;

    /// Refuses a setting out of its range, naming it (`limit.<field>`).
    ///
    /// # Errors
    ///
    /// The [`ConfigError`] of the first setting out of range.
    fn validate(&self) -> Result<(), ConfigError> {
        Ok(())
    }

    /// A copy, boxed: its settings, and its state as it is now.
    fn boxed_clone(&self) -> Box<dyn Algorithm>;

    /// A copy for one of several callers that should not move in step (each endpoint of a
    /// [`Pool`](crate::pool::Pool), `salt` from its key): for an algorithm that draws
    /// random numbers, its seed mixed with `salt` (the same salt gives the same draws:
    /// replayable); for the others, [`boxed_clone`](Algorithm::boxed_clone).
    fn boxed_clone_salted(&self, salt: u64) -> Box<dyn Algorithm> {
        let _ = salt;
        self.boxed_clone()
    }

    /// Whether it learns from samples at all: `false` spares the callers the clock reads
    /// that time each call ([`Fixed`] says so). `true` by default.
    fn learns(&self) -> bool {
        true
    }

    /// Whether it tells latencies apart finer than a coarse clock's tick (1 to 4 ms): a
    /// [`Pool`](crate::pool::Pool) then times its calls on the precise clock (about 10 ns a
    /// read) rather than the coarse one (about 4 ns). `true` by default; [`Aimd`](super::Aimd)
    /// with a timeout of 100 ms or more says `false` (it only compares a latency with its
    /// timeout: a tick is under 4 % of it).
    fn fine_latency(&self) -> bool {
        true
    }
}

impl Algorithm for Box<dyn Algorithm> {
    fn limit(&self) -> u32 {
        (**self).limit()
    }

    fn on_sample(&self, sample: Sample) -> u32 {
        (**self).on_sample(sample)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        (**self).validate()
    }

    fn boxed_clone(&self) -> Box<dyn Algorithm> {
        (**self).boxed_clone()
    }

    fn boxed_clone_salted(&self, salt: u64) -> Box<dyn Algorithm> {
        (**self).boxed_clone_salted(salt)
    }

    fn learns(&self) -> bool {
        (**self).learns()
    }

    fn fine_latency(&self) -> bool {
        (**self).fine_latency()
    }
}

impl<A: Algorithm> Algorithm for Arc<A> {
    fn limit(&self) -> u32 {
        (**self).limit()
    }

    fn on_sample(&self, sample: Sample) -> u32 {
        (**self).on_sample(sample)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        (**self).validate()
    }

    fn boxed_clone(&self) -> Box<dyn Algorithm> {
        (**self).boxed_clone()
    }

    fn boxed_clone_salted(&self, salt: u64) -> Box<dyn Algorithm> {
        (**self).boxed_clone_salted(salt)
    }

    fn learns(&self) -> bool {
        (**self).learns()
    }

    fn fine_latency(&self) -> bool {
        (**self).fine_latency()
    }
}

/// A fixed limit: `n` calls in flight at most, whatever the samples say (a bulkhead; HAProxy's
/// `maxconn` on a server). For a baseline beside the adaptive ones, and for a dependency
/// whose capacity is known.
///
/// ```
/// use lazybreaker::limit::{Algorithm, Fixed, Sample};
/// use std::time::Duration;
///
/// let limit = Fixed::new(8);
/// assert_eq!(limit.on_sample(Sample::dropped(Duration::from_secs(9), 8)), 8);
/// assert_eq!(Fixed::new(0).validate().unwrap_err().field(), "limit.limit");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fixed {
    limit: u32,
}

impl Fixed {
    /// At most `limit` calls in flight (at least 1: see [`validate`](Algorithm::validate)).
    pub fn new(limit: u32) -> Self {
        Self { limit }
    }
}

impl Algorithm for Fixed {
    fn limit(&self) -> u32 {
        self.limit.max(1)
    }

    fn on_sample(&self, _sample: Sample) -> u32 {
        self.limit()
    }

    /// Refuses a limit of zero (`limit.limit`).
    fn validate(&self) -> Result<(), ConfigError> {
        if self.limit == 0 {
            return Err(ConfigError::new("limit.limit", 0, "must be at least 1"));
        }
        Ok(())
    }

    fn boxed_clone(&self) -> Box<dyn Algorithm> {
        Box::new(*self)
    }

    fn learns(&self) -> bool {
        false
    }
}
