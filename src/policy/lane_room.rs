//! [`LaneRoom`]: what a policy lets the lock-free lane count without showing it.

/// What a closed breaker's lock-free lane may count without the lock and without showing the
/// policy, from the counts it was asked with: the answer of
/// [`TripPolicy::lane_room`](super::TripPolicy::lane_room).
///
/// `#[non_exhaustive]`: build it from [`LaneRoom::NONE`] (every result shown, the
/// conservative answer) with the setters, which are named after the fields, so that room
/// added later breaks nobody.
///
/// | field | in [`NONE`](Self::NONE) | meaning |
/// |---|---|---|
/// | [`failures`](Self::failures) | 0 | how many more failures cannot trip the policy |
/// | [`quiet_successes`](Self::quiet_successes) | `false` | no success within the slow-call threshold can trip it |
///
/// # Examples
///
/// ```
/// use lazybreaker::policy::LaneRoom;
///
/// let room = LaneRoom::NONE.failures(9).quiet_successes(true);
/// assert_eq!((room.failures, room.quiet_successes), (9, true));
/// let other = LaneRoom::NONE.failures(3);
/// assert_eq!(room.both(other), LaneRoom::NONE.failures(3), "the lesser of each");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct LaneRoom {
    /// How many more failures, from the counts asked with, cannot make
    /// [`on_result`](super::TripPolicy::on_result) trip, whatever admissions and successes
    /// come among them. An uncontended breaker counts that many closed-state failures on its
    /// lane and folds them into the counts the policy sees next. 0: every failure reaches
    /// `on_result`.
    pub failures: u64,
    /// Whether, from the counts asked with, no closed-state success that is not slow can make
    /// [`on_result`](super::TripPolicy::on_result) trip, whatever admissions and such
    /// successes come among them. A breaker with a slow-call threshold then counts those
    /// successes on its lane (its calls in flight are tracked there too, so that a call past
    /// the threshold is still counted as slow when the next call arrives); a breaker without
    /// one does not ask (its lane counts successes whenever the
    /// [`Capabilities`](super::Capabilities) allow). `false`: every result of a slow-call
    /// policy's breaker takes the lock.
    pub quiet_successes: bool,
}

impl LaneRoom {
    /// No room: every failure, and every result of a slow-call policy's breaker, is shown to
    /// the policy under the lock. The default answer, and the one a panicking
    /// [`lane_room`](super::TripPolicy::lane_room) is read as.
    pub const NONE: LaneRoom = LaneRoom {
        failures: 0,
        quiet_successes: false,
    };

    /// The same, with room for `failures` more failures (see [`LaneRoom::failures`]).
    #[must_use]
    pub const fn failures(mut self, failures: u64) -> Self {
        self.failures = failures;
        self
    }

    /// The same, with fast successes quiet or not (see [`LaneRoom::quiet_successes`]).
    #[must_use]
    pub const fn quiet_successes(mut self, quiet: bool) -> Self {
        self.quiet_successes = quiet;
        self
    }

    /// The room both `self` and `other` leave: the lesser of the failures, successes quiet
    /// only if quiet for both. [`AnyOf`](super::AnyOf) answers so.
    #[must_use]
    pub const fn both(self, other: LaneRoom) -> Self {
        LaneRoom {
            failures: if self.failures < other.failures {
                self.failures
            } else {
                other.failures
            },
            quiet_successes: self.quiet_successes && other.quiet_successes,
        }
    }
}

impl Default for LaneRoom {
    /// [`LaneRoom::NONE`].
    fn default() -> Self {
        Self::NONE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_keeps_the_lesser_of_each() {
        let wide = LaneRoom::NONE.failures(5).quiet_successes(true);
        assert_eq!(wide.both(LaneRoom::NONE), LaneRoom::NONE);
        assert_eq!(wide.both(wide), wide);
        assert_eq!(
            wide.both(LaneRoom::NONE.failures(7)),
            LaneRoom::NONE.failures(5)
        );
        assert_eq!(LaneRoom::default(), LaneRoom::NONE);
    }
}
