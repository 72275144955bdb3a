//! The lock-free lane: what a call can do without taking the state lock.
//!
//! The state lock stays the one place where the state machine changes. The lane is a single
//! atomic word that the lock holder *publishes* after every change, telling callers what they
//! may do without the lock:
//!
//! - **Fast** (closed, no time-based window, a policy that ignores successes): admit a
//!   request, or record a success, by adding one to a pending counter in the word. No clock,
//!   no lock. The counters are folded into the machine's counts by the next lock holder.
//! - **Open**: reject while the clock is before `open_until`. One clock read, no write.
//! - **Locked**: everything else takes the lock.
//!
//! Every lock holder first *closes* the lane (swapping in a locked word, which hands it the
//! pending counters), and publishes a new word when done. So a lock-free operation either
//! lands before a locked one (and is folded into its counts first) or finds the lane closed
//! and queues for the lock: each operation has one place in a single order, as if all had
//! taken the lock.
//!
//! The word: `[mode: 2 bits][generation: 30 bits][successes: 16 bits][requests: 16 bits]`.
//! A full counter sends callers to the lock, whose holder empties it.

use crate::clock::Nanos;
use crate::state::GENERATION_MASK;
use crate::sync::{AtomicU64, Ordering};

const REQUEST: u64 = 1;
const SUCCESS: u64 = 1 << 16;
const COUNTER: u64 = 0xffff;
const PENDING: u64 = (1 << 32) - 1;
const GENERATION_SHIFT: u32 = 32;
const MODE_SHIFT: u32 = 62;

const LOCKED: u64 = 0;
const FAST: u64 = 1;
const OPEN: u64 = 2;

/// What the lock holder publishes: what callers may do without the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LaneView {
    /// Closed and counting lock-free, in this generation.
    Fast { generation: u64 },
    /// Open: reject until this instant (inclusive: the breaker goes half-open strictly after).
    Open { until: Nanos },
    /// Take the lock.
    Locked,
}

/// Requests admitted and successes recorded on the lane since the lock last emptied it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Pending {
    pub(crate) requests: u64,
    pub(crate) successes: u64,
}

impl Pending {
    fn of(word: u64) -> Self {
        Self {
            requests: word & COUNTER,
            successes: (word >> 16) & COUNTER,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        *self == Pending::default()
    }
}

/// What a call may do at admission, read from one load of the lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Admitted lock-free, in this generation.
    Admitted { generation: u64 },
    /// The breaker is open until this instant: reject if the clock has not passed it.
    OpenUntil(Nanos),
    /// Take the lock.
    Locked,
}

#[derive(Debug)]
pub(crate) struct Lane {
    word: AtomicU64,
    /// Meaningful while the word says open; written before the word is published.
    open_until: AtomicU64,
}

fn mode(word: u64) -> u64 {
    word >> MODE_SHIFT
}

fn generation(word: u64) -> u64 {
    (word >> GENERATION_SHIFT) & GENERATION_MASK
}

impl Lane {
    pub(crate) fn new(view: LaneView) -> Self {
        let lane = Self {
            word: AtomicU64::new(LOCKED << MODE_SHIFT),
            open_until: AtomicU64::new(0),
        };
        lane.publish(view);
        lane
    }

    /// Admits a request lock-free if the lane is fast, or says what to do instead.
    #[inline]
    pub(crate) fn admit(&self) -> Admission {
        let mut word = self.word.load(Ordering::Acquire);
        loop {
            match mode(word) {
                FAST if word & COUNTER < COUNTER => {}
                OPEN => return Admission::OpenUntil(self.open_until.load(Ordering::Acquire)),
                _ => return Admission::Locked,
            }
            match self.word.compare_exchange_weak(
                word,
                word + REQUEST,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    return Admission::Admitted {
                        generation: generation(word),
                    }
                }
                Err(actual) => word = actual,
            }
        }
    }

    /// Records a success lock-free if the lane is fast and still in `generation`; `false`
    /// means the caller must take the lock (which also finds out whether it is stale).
    #[inline]
    pub(crate) fn succeed(&self, generation_: u64) -> bool {
        let mut word = self.word.load(Ordering::Acquire);
        loop {
            if mode(word) != FAST
                || generation(word) != generation_
                || (word >> 16) & COUNTER == COUNTER
            {
                return false;
            }
            match self.word.compare_exchange_weak(
                word,
                word + SUCCESS,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(actual) => word = actual,
            }
        }
    }

    /// Closes the lane for a lock holder about to change the machine, handing it what was
    /// recorded lock-free. Call with the state lock held, and [`publish`](Lane::publish)
    /// before releasing it.
    pub(crate) fn close(&self) -> Pending {
        Pending::of(self.word.swap(LOCKED << MODE_SHIFT, Ordering::AcqRel))
    }

    /// Empties the pending counters without closing the lane, for a lock holder that only
    /// reads.
    pub(crate) fn drain(&self) -> Pending {
        Pending::of(self.word.fetch_and(!PENDING, Ordering::AcqRel))
    }

    /// Publishes what callers may do without the lock. Call with the state lock held.
    pub(crate) fn publish(&self, view: LaneView) {
        let word = match view {
            LaneView::Fast { generation } => {
                (FAST << MODE_SHIFT) | ((generation & GENERATION_MASK) << GENERATION_SHIFT)
            }
            LaneView::Open { until } => {
                self.open_until.store(until, Ordering::Release);
                OPEN << MODE_SHIFT
            }
            LaneView::Locked => LOCKED << MODE_SHIFT,
        };
        self.word.store(word, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn fast_lane_counts_and_hands_over() {
        let lane = Lane::new(LaneView::Fast { generation: 7 });
        assert_eq!(lane.admit(), Admission::Admitted { generation: 7 });
        assert_eq!(lane.admit(), Admission::Admitted { generation: 7 });
        assert!(lane.succeed(7));
        assert!(!lane.succeed(6), "another generation takes the lock");
        assert_eq!(
            lane.drain(),
            Pending {
                requests: 2,
                successes: 1
            }
        );
        assert_eq!(
            lane.admit(),
            Admission::Admitted { generation: 7 },
            "still fast"
        );
        assert_eq!(
            lane.close(),
            Pending {
                requests: 1,
                successes: 0
            }
        );
        assert_eq!(lane.admit(), Admission::Locked, "closed");
        assert!(!lane.succeed(7));
    }

    #[test]
    fn a_full_counter_sends_callers_to_the_lock() {
        let lane = Lane::new(LaneView::Fast {
            generation: GENERATION_MASK,
        });
        for _ in 0..COUNTER {
            assert!(matches!(lane.admit(), Admission::Admitted { .. }));
            assert!(lane.succeed(GENERATION_MASK));
        }
        assert_eq!(lane.admit(), Admission::Locked);
        assert!(!lane.succeed(GENERATION_MASK));
        let pending = lane.close();
        assert_eq!((pending.requests, pending.successes), (COUNTER, COUNTER));
    }

    #[test]
    fn open_lane_gives_its_deadline() {
        let lane = Lane::new(LaneView::Open { until: 42 });
        assert_eq!(lane.admit(), Admission::OpenUntil(42));
        assert!(!lane.succeed(0));
        lane.publish(LaneView::Locked);
        assert_eq!(lane.admit(), Admission::Locked);
    }
}
