//! The machine's side of the SRE throttle: `p` for a snapshot and for the next admission, the
//! draw under the lock (through [`Throttle::decide`], the one decision the lane's shedding
//! calls too), the room the lane may admit or shed in, and the calls the lane turned away.

use std::sync::Arc;

use super::Machine;
use crate::counts::Counts;
use crate::policy::TripPolicy;
use crate::state::State;
use crate::throttle::{Decision, Throttling};

impl<P: TripPolicy> Machine<P> {
    /// The throttle's `p` for a breaker in `state` with `counts` (a snapshot's: the window as
    /// the next call would find it): `None` without a throttle, zero unless closed.
    pub(crate) fn throttle_probability_at(&self, state: State, counts: &Counts) -> Option<f64> {
        let throttle = self.throttle()?;
        if state != State::Closed || self.forced.is_some() {
            return Some(0.0);
        }
        let (requests, accepts) =
            counts.throttle_counts(throttle.count_throttled, self.window.is_by_count());
        Some(throttle.probability(requests, accepts))
    }

    /// The throttle's `p` for the next closed-state admission, with the window as it is.
    pub(crate) fn throttle_probability(&self) -> f64 {
        self.throttle().map_or(0.0, |t| {
            let (requests, accepts) = self.window.throttle_counts(t.count_throttled);
            t.probability(requests, accepts)
        })
    }

    /// Asks the throttle about the next closed-state admission: `Some(p)` turns it away
    /// (counted as a request of the throttle's if it counts them); no draw while `p` is zero,
    /// nor while forced closed.
    pub(super) fn throttle_draw(&mut self) -> Option<f64> {
        if self.forced.is_some() {
            return None; // forced closed: every call goes through, as an operator asked
        }
        if !self.has_throttle {
            return None;
        }
        let throttling = self.cold.as_deref()?.throttle.as_ref()?;
        let throttle = throttling.settings;
        let (requests, accepts) = self.window.throttle_counts(throttle.count_throttled);
        let Decision::Shed(p) = throttle.decide(requests, accepts, || throttling.draws.next())
        else {
            return None;
        };
        if throttle.count_throttled {
            self.window.on_throttled(1);
        }
        Some(p)
    }

    /// Whether the throttle started or stopped turning calls away since last told: `Some`
    /// with whether it now does, the probability the next call meets, and the calls turned
    /// away so far. Asked by the lock holder after each step.
    pub(crate) fn throttle_note(&mut self) -> Option<(bool, f64, u64)> {
        self.throttling()?;
        let p = if self.state == State::Closed && self.forced.is_none() {
            self.throttle_probability()
        } else {
            0.0
        };
        let on = p > 0.0;
        if on == self.throttling {
            return None;
        }
        self.throttling = on;
        Some((on, p, self.totals().rejected_throttled))
    }

    /// The throttle and its generator, for the lock-free lane to shed with.
    pub(crate) fn lane_throttle(&self) -> Option<Arc<Throttling>> {
        self.throttling().cloned()
    }

    /// Counts `n` calls the lock-free lane's throttle turned away: rejected, and requests of
    /// the throttle's if it counts them (at the current age).
    pub(crate) fn absorb_throttled(&mut self, n: u64) {
        if n == 0 {
            return;
        }
        self.cold().totals.rejected_throttled += n;
        if self.throttle().is_some_and(|t| t.count_throttled) {
            self.window.on_throttled(n);
        }
    }

    /// Where the lane may shed from (see [`Phase::Closed`]): with no `room` left, not in dry
    /// run, and where an admission adds a request (not a count window).
    pub(super) fn shed_from(&self, room: u64) -> Option<(u64, u64)> {
        let throttle = self.throttle()?;
        if self.rules.dry_run || !self.window.admission_counts() || room > 0 {
            return None;
        }
        Some(self.window.throttle_counts(throttle.count_throttled))
    }

    /// How many closed-state admissions the lock-free lane may make before the machine must
    /// see one (after them, the throttle's `p` may no longer be zero): unbounded without a
    /// throttle, or where an admission adds no request (a count window).
    pub(super) fn throttle_room(&self) -> u64 {
        let Some(throttle) = self.throttle() else {
            return u64::MAX;
        };
        let (requests, accepts) = self.window.throttle_counts(throttle.count_throttled);
        if !self.window.admission_counts() {
            return if throttle.probability(requests, accepts) == 0.0 {
                u64::MAX
            } else {
                0
            };
        }
        throttle.room(requests, accepts)
    }
}
