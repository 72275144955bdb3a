//! A throttle on the lane: the room the machine leaves, then shedding without the lock once
//! there is none (see [`Shedding`]).

use super::cell::Cell;
use super::{Entry, Lane};
use crate::machine::Phase;
use crate::nanos::Nanos;
use crate::sync::{AtomicU64, Ordering};
use crate::throttle::{Decision, Throttling};
use std::sync::Arc;

/// What the lane sheds with, once the machine left it no room ([`Phase::Closed`]'s
/// `shed_from`): each admission computes the throttle's `p` from the window's counts at the
/// last publish plus what this thread's cell counted since, and draws from the breaker's
/// generator when it is above zero. A single thread's calls are decided exactly as the
/// machine would; concurrent ones each see their own cell's counts, not the others'.
#[derive(Debug)]
pub(super) struct Shedding {
    /// What the open cells' request counters started at, so that each has room for the
    /// admissions the machine allows without it. Written only by the lock holder, before it
    /// opens the cells; read by the next one, closing them.
    pub(super) preset: AtomicU64,
    pub(super) throttling: Arc<Throttling>,
    /// Whether the open cells shed (written before they are opened, constant while they are).
    pub(super) on: AtomicU64,
    /// The throttle's requests and accepts at the last publish (likewise).
    pub(super) requests: AtomicU64,
    pub(super) accepts: AtomicU64,
    /// Calls turned away since the last close, folded by the next lock holder.
    pub(super) throttled: AtomicU64,
}

impl Shedding {
    /// The throttle's requests and accepts as this thread sees them: those published, plus
    /// what its open cell `c` counted since, and (if the throttle counts them) the calls
    /// turned away on its `counter`.
    #[inline(always)]
    fn counts(&self, c: Cell, counter: &AtomicU64) -> (u64, u64) {
        let mine = c.pending(0, 0);
        let throttled = if self.throttling.settings.count_throttled {
            counter.load(Ordering::Relaxed)
        } else {
            0
        };
        let requests = self.requests.load(Ordering::Acquire) + mine.requests + throttled;
        let accepts = self.accepts.load(Ordering::Acquire) + mine.successes;
        (requests, accepts)
    }
}

impl Lane {
    /// The throttle's part of a publish in `phase`, stored before the cells are opened: the
    /// request counters' starting value (the room the machine leaves, shared among the cells),
    /// and with no room left the counts the lane sheds from, which it returns with the
    /// preset.
    #[inline]
    pub(super) fn publish_throttle(&self, phase: Phase) -> (u64, Option<(u64, u64)>) {
        // The admissions allowed without the machine, shared among the cells callers count
        // in (the stripes once made, else the base), as the counters' starting value.
        // Each cell gets an equal share: a share a counter cannot hold leaves the counter
        // its whole capacity (a full counter sends callers to the lock anyway).
        let preset = match phase {
            Phase::Closed { room, .. } => {
                let cells = self.stripes.get().map_or(1, |s| s.len() as u64);
                Cell::COUNTER.saturating_sub(room / cells)
            }
            _ => 0,
        };
        // A throttle with no room left sheds on the lane, from the counts published here:
        // its cells are opened windowed, so that every admission takes the path that asks.
        let shed_from = match phase {
            Phase::Closed { shed_from, .. } if self.plan.counts_closed() => shed_from,
            _ => None,
        };
        // (Only a throttle leaves less room than a counter holds: without one, none.)
        let preset = if shed_from.is_some() || self.throttle().is_none() {
            0
        } else {
            preset
        };
        if let Some(shedding) = self.throttle() {
            let (requests, accepts) = shed_from.unwrap_or((0, 0));
            shedding.preset.store(preset, Ordering::Relaxed);
            shedding.requests.store(requests, Ordering::Release);
            shedding.accepts.store(accepts, Ordering::Release);
            shedding
                .on
                .store(u64::from(shed_from.is_some()), Ordering::Release);
        }
        (preset, shed_from)
    }

    /// The throttle's shedding state, while the open cells shed.
    #[inline(always)]
    pub(super) fn shedding(&self) -> Option<&Shedding> {
        self.throttle()
            .filter(|t| t.on.load(Ordering::Acquire) != 0)
    }

    /// An admission while the cells shed: the throttle's `p` from the published counts and
    /// this thread's cell, a draw when it is above zero, then the cell's count, retried
    /// under contention. `clock` has been read (the cells are windowed while shedding).
    #[cold]
    #[inline(never)]
    pub(super) fn admit_shedding(
        &self,
        shedding: &Shedding,
        clock: impl FnOnce() -> Nanos,
    ) -> Entry {
        let now = clock();
        let t = &shedding.throttling.settings;
        loop {
            // The thread's stripe once contention made them (its own counters and draws),
            // else the base: the lane's own counter and the generator the machine shares,
            // so that one thread's calls meet one stream whichever path decides them.
            let stripe = self.stripes.get().map(|stripes| {
                let i = Self::stripe_index(stripes);
                (i as u64, &stripes[i])
            });
            let (cell, base) = match stripe {
                Some((_, stripe)) => (&stripe.cell, false),
                None => (&self.base, true),
            };
            let counter = stripe.map_or(&shedding.throttled, |(_, s)| &s.throttled);
            let c = Cell(cell.load(Ordering::Acquire));
            if !c.is_open()
                || !c.has_request_room()
                || now > self.window_until.load(Ordering::Acquire)
            {
                return Entry::Locked { now: Some(now) };
            }
            let (requests, accepts) = shedding.counts(c, counter);
            let draw = || match stripe {
                Some((i, stripe)) => {
                    let k = stripe.draws.fetch_add(1, Ordering::Relaxed);
                    shedding.throttling.draws.at(i, k)
                }
                None => shedding.throttling.draws.next(),
            };
            match t.decide(requests, accepts, draw) {
                // Back to zero as far as this thread sees: the lock holder decides and
                // republishes (room again, or shedding from fresher counts), and tells the
                // observers if the throttle stopped.
                Decision::Zero => return Entry::Locked { now: Some(now) },
                Decision::Shed(probability) => {
                    counter.fetch_add(1, Ordering::Relaxed);
                    return Entry::Throttled { probability };
                }
                Decision::Admit => {}
            }
            let ticket = self.ticket_in(c);
            match Self::try_count(cell, c, c.with_request()) {
                Ok(()) => return Entry::Admitted { ticket },
                Err(found) => self.contended(base, c, found),
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::lane::tests::{counting, gen, never};

    /// A throttled lane whose room is more than one counter holds but less than its
    /// stripes' counters together: the stripes share the room, so that no interleaving of
    /// threads admits more than it without the machine.
    #[test]
    fn stripes_share_a_throttles_room_that_one_counter_could_hold_alone() {
        let throttling = Arc::new(Throttling::new(
            crate::throttle::Throttle::new(2.0).expect("valid"),
        ));
        let lane = Lane::new(counting(), Phase::Forced, Some(throttling), None);
        lane.stripes.force(super::super::stripes::make_stripes);
        let cells = (lane.stripe_bytes() / 128) as u64;
        assert!(cells >= 2);
        let room = Cell::COUNTER + 100;
        lane.close();
        lane.publish(Phase::Closed {
            generation: gen(3),
            age: 0,
            window_end: None,
            room,
            failure_room: 0,
            shed_from: None,
            since: 0,
            locked: false,
        });
        // This thread counts in its own stripe only: the most it may admit is a share.
        let mut admitted = 0u64;
        while let Entry::Admitted { .. } = lane.admit(never) {
            admitted += 1;
            assert!(admitted <= Cell::COUNTER, "a counter holds no more");
        }
        assert!(admitted > 0, "room is left: the lane admits");
        assert!(
            admitted * cells <= room,
            "{admitted} admissions on one of {cells} stripes: together they could pass the room {room}"
        );
    }
}
