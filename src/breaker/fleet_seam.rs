//! What a fleet in front of a breaker may ask of it (`crate::fleet`): one admission that says
//! whether the call it admitted is a half-open probe. (The fleet's other entry points,
//! `clock_nanos`, `adopt_open`/`adopt_closed` and the builder's `and_observer` and
//! `max_requests_or_default`, are where they were.)

use crate::contain::{self, FirstPanic};
use crate::lane::Entry;
use crate::machine::Verdict;
use crate::nanos::Nanos;
use crate::observe::Observer;
use crate::permit::{Grant, Permit};
use crate::policy::{Outcome, TripPolicy};
use crate::state::State;
use crate::Rejected;

use super::Breaker;

impl<P: TripPolicy, O: Observer> Breaker<P, O> {
    /// [`allow`](Self::allow) at `now`, a reading of this breaker's clock the caller took (a
    /// layer in front that needed it first; the clock is not read again), with whether the
    /// call admitted is a probe of a half-open period: decided by the admission itself, not
    /// by what observers were told (a delivery can lag the change behind a slow observer).
    /// An admission off the lock-free lane is a closed one; under the lock, the machine's
    /// state at the admission says.
    #[cfg_attr(not(feature = "fleet"), allow(dead_code))]
    #[inline]
    pub(crate) fn allow_probing_at(
        &self,
        now: Nanos,
    ) -> Result<(Permit<'_, P, O>, bool), Rejected> {
        match self.lane.admit(|| now) {
            Entry::Admitted { generation } => {
                Ok((Permit::new(self, Grant::unaged(generation)), false))
            }
            other => self
                .allow_probing_slow(other)
                .map(|(grant, probe)| (Permit::new(self, grant), probe)),
        }
    }

    /// `allow_slow` (in `mod.rs`), telling whether the admission was half-open.
    #[cfg_attr(not(feature = "fleet"), allow(dead_code))]
    #[inline(never)]
    fn allow_probing_slow(&self, entry: Entry) -> Result<(Grant, bool), Rejected> {
        let now = match entry {
            Entry::Open { until, now } if now <= until => {
                self.lane.count_rejection();
                return Err(Rejected::open_until(until, now));
            }
            Entry::Open { now, .. } | Entry::Locked { now: Some(now) } => now,
            Entry::Locked { now: None } | Entry::Admitted { .. } => self.clock.now(),
        };
        let mut panics = FirstPanic::default();
        let admitted = self.transact(Some(now), &mut panics, |m, now| {
            let (ticket, change) = m.admit(now);
            let probe = m.state() == State::HalfOpen;
            (
                ticket.map(|ticket| (Grant::new(ticket, now), probe)),
                change,
            )
        });
        if panics.will_resume() {
            // As in `allow_slow`: the call will not be made, so its admission is given back.
            if let Ok((grant, _)) = admitted {
                self.complete_with(grant, Verdict::Reported(Outcome::Excluded), &mut panics);
            }
            contain::resume(panics);
        }
        admitted
    }
}
