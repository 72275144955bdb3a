//! Slow start ([`Pool::slow_start`]): an endpoint that comes back gets a share of the picks
//! that ramps up over a window, computed at pick time from the time of its return.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::error::{ConfigError, Number};
use crate::nanos::{saturating_nanos, Nanos};
use crate::observe::Observer;
use crate::policy::TripPolicy;

use super::choose::random;
use super::endpoint::Endpoint;
use super::{Endpoints, Pool, Shared};

/// Slow start for the endpoints of a [`Pool`]: an endpoint that comes back (its breaker
/// closed after a trip, a passed health check or an ejection, or newly added to a pool that
/// has others) is picked less at first, its share growing over `window` (Envoy's
/// `slow_start_config`), so that a cold cache or a JIT still warming is not flooded.
///
/// Its weight `t` after its return is `max(min_weight, (t / window)^(1 / aggression))`
/// (Envoy's curve): with aggression 1 it grows linearly from `min_weight` to 1; above 1 it
/// rises faster at first, below 1 slower. Defaults: aggression 1.0, minimum weight 10 %.
///
/// A pick that draws the returning endpoint first keeps it with a chance of its weight, and
/// otherwise takes the other one it drew: computed at pick time, with no timer. While no
/// endpoint ramps, a pick pays one load of a word for it.
///
/// # Examples
///
/// ```
/// use lazybreaker::pool::{Pool, SlowStart};
/// use lazybreaker::{Breaker, ManualClock};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let pool = Pool::new(|_: &&str| Breaker::builder())
///     .clock(clock.clone())
///     .slow_start(SlowStart::new(Duration::from_secs(10)));
/// pool.set(["a", "b"]);
/// pool.insert("new"); // added to a pool that has others: it ramps up over 10 s
/// let weight = |key| {
///     let snapshot = pool.snapshot();
///     snapshot.endpoints.iter().find(|e| e.key == key).unwrap().weight
/// };
/// assert_eq!(weight("new"), 0.1); // the minimum weight at first
/// assert_eq!(weight("a"), 1.0);
/// clock.advance(Duration::from_secs(5));
/// assert_eq!(weight("new"), 0.5);
/// clock.advance(Duration::from_secs(5));
/// assert_eq!(weight("new"), 1.0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SlowStart {
    window: Duration,
    aggression: f64,
    min_weight_percent: f64,
}

impl SlowStart {
    /// A ramp over `window` (Envoy's `slow_start_window`), aggression 1.0, minimum weight
    /// 10 %. A zero window is refused by [`validate`](Self::validate).
    pub fn new(window: Duration) -> Self {
        Self {
            window,
            aggression: 1.0,
            min_weight_percent: 10.0,
        }
    }

    /// The curve's aggression (Envoy's `aggression`, 1.0 by default: linear); above 0.
    #[must_use]
    pub fn aggression(mut self, aggression: f64) -> Self {
        self.aggression = aggression;
        self
    }

    /// The weight at the start of the ramp, in percent of a full one (Envoy's
    /// `min_weight_percent`, 10 by default); within [0, 100].
    #[must_use]
    pub fn min_weight_percent(mut self, percent: f64) -> Self {
        self.min_weight_percent = percent;
        self
    }

    /// The window.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// Refuses a setting out of its range, naming it: `slow_start.window` zero,
    /// `slow_start.aggression` not above 0 (or not a finite number),
    /// `slow_start.min_weight_percent` outside [0, 100].
    ///
    /// # Errors
    ///
    /// The [`ConfigError`] of the first setting out of range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.window.is_zero() {
            return Err(ConfigError::new(
                "slow_start.window",
                "0s",
                "must be above 0",
            ));
        }
        if !(self.aggression.is_finite() && self.aggression > 0.0) {
            return Err(ConfigError::new(
                "slow_start.aggression",
                Number(self.aggression),
                "must be a finite number above 0 (1.0: linear)",
            ));
        }
        if !(0.0..=100.0).contains(&self.min_weight_percent) {
            return Err(ConfigError::new(
                "slow_start.min_weight_percent",
                Number(self.min_weight_percent),
                "must be within [0, 100]",
            ));
        }
        Ok(())
    }

    /// The weight of an endpoint `since` nanoseconds after its return: in (0, 1].
    pub(crate) fn weight(&self, since: Nanos) -> f64 {
        let window = saturating_nanos(self.window);
        if since >= window {
            return 1.0;
        }
        let time = since as f64 / window as f64;
        let curve = if self.aggression == 1.0 {
            time
        } else {
            time.powf(1.0 / self.aggression)
        };
        curve
            .max(self.min_weight_percent / 100.0)
            .clamp(f64::MIN_POSITIVE, 1.0)
    }
}

/// A pool's slow start: the settings, and until when some endpoint ramps (in [`Shared`]).
#[derive(Debug)]
pub(super) struct Ramp {
    pub(super) settings: SlowStart,
}

/// No return to ramp from.
pub(super) const NOT_RETURNED: Nanos = Nanos::MAX;

impl Ramp {
    /// The time some endpoint may still ramp at, if one may (one load while none does); an
    /// end found passed is cleared.
    #[inline]
    pub(super) fn active(&self, shared: &Shared, now: impl FnOnce() -> Nanos) -> Option<Nanos> {
        let until = shared.ramp_until.load(Ordering::Relaxed);
        if until == 0 {
            return None;
        }
        let now = now();
        if now >= until {
            // A return noted meanwhile moved the end: then this fails, and it stays.
            let _ =
                shared
                    .ramp_until
                    .compare_exchange(until, 0, Ordering::Relaxed, Ordering::Relaxed);
            return None;
        }
        Some(now)
    }

    /// The weight of `endpoint` at `now`.
    #[inline]
    pub(super) fn weight<K, P: TripPolicy, O: Observer>(
        &self,
        endpoint: &Endpoint<K, P, O>,
        now: Nanos,
    ) -> f64 {
        let returned = endpoint.returned_at.load(Ordering::Relaxed);
        if returned == NOT_RETURNED {
            return 1.0;
        }
        // A return noted by another thread after this pick read the clock: just back.
        self.settings.weight(now.saturating_sub(returned))
    }
}

/// Notes that an endpoint returned now: its ramp starts, and the pool's end of ramps moves.
pub(super) fn returned(shared: &Shared, returned_at: &AtomicU64, window: Duration) {
    let now = shared.now();
    returned_at.store(now, Ordering::Relaxed);
    let end = now.saturating_add(saturating_nanos(window)).max(1);
    shared.ramp_until.fetch_max(end, Ordering::Relaxed);
}

impl<K, P: TripPolicy, O: Observer> Pool<K, P, O>
where
    K: Clone + Eq + std::fmt::Display,
{
    /// Ramps up the share of picks of an endpoint that comes back: see [`SlowStart`]. A
    /// setting for building the pool, before its first endpoint; settings out of range
    /// turn it off ([`try_slow_start`](Pool::try_slow_start) refuses them).
    ///
    /// An endpoint comes back when its breaker closes after being open or half-open (a trip,
    /// a failed health check, an ejection, a hang: each ends in a probe that closes it), or
    /// when it is [inserted](Pool::insert) into a pool that has endpoints already (the
    /// pool's first endpoints take the traffic as they come). Its weight shows in
    /// [`EndpointSnapshot::weight`](super::EndpointSnapshot::weight) (and the status page).
    ///
    /// The ramp applies to the power of two choices and the round-robin turn (a pick that
    /// draws a ramping endpoint keeps it with a chance of its weight, else takes the other
    /// one it drew); the walk over a pool with isolated endpoints ignores it.
    #[must_use]
    pub fn slow_start(mut self, slow_start: SlowStart) -> Self {
        self.ramp = slow_start.validate().is_ok().then_some(Ramp {
            settings: slow_start,
        });
        self
    }

    /// [`slow_start`](Pool::slow_start), unless a setting is out of its range.
    ///
    /// # Errors
    ///
    /// The [`ConfigError`] of [`SlowStart::validate`], naming the setting
    /// (`slow_start.aggression`, …).
    pub fn try_slow_start(self, slow_start: SlowStart) -> Result<Self, ConfigError> {
        slow_start.validate()?;
        Ok(self.slow_start(slow_start))
    }

    /// The slow start, if [`slow_start`](Pool::slow_start) set one.
    pub fn slow_start_settings(&self) -> Option<SlowStart> {
        self.ramp.as_ref().map(|r| r.settings)
    }
}

impl<K, P: TripPolicy, O: Observer> Pool<K, P, O> {
    /// With an endpoint ramping up ([`Pool::slow_start`]): the first choice is kept with a
    /// chance of its weight, else the other one drawn goes first (round robin: the next
    /// endpoint in turn).
    #[cold]
    #[inline(never)]
    pub(super) fn ramped(
        &self,
        endpoints: &Endpoints<K, P, O>,
        [a, b]: [usize; 2],
        now: crate::nanos::Nanos,
    ) -> [usize; 2] {
        let weight = self.weight_now(&endpoints[a], now);
        if weight >= 1.0 {
            return [a, b];
        }
        // A fresh draw: the bits of `r` chose the endpoints, and would bias the chance by
        // their index.
        let chance = (random() >> 40) as f64 / (1u64 << 24) as f64;
        if chance < weight {
            return [a, b];
        }
        let other = if a == b { (a + 1) % endpoints.len() } else { b };
        if self.weight_now(&endpoints[other], now) < weight {
            return [a, b];
        }
        [other, a]
    }

    /// The weight of `endpoint` now (1 without slow start, or after its ramp).
    pub(super) fn weight_now(&self, endpoint: &Endpoint<K, P, O>, now: Nanos) -> f64 {
        match &self.ramp {
            Some(ramp) => ramp.weight(endpoint, now),
            None => 1.0,
        }
    }
}
