//! The lock-free lane: what a call can do without taking the state lock.
//!
//! The state lock stays the one place where the state machine changes. The lane is a single
//! atomic word that the lock holder *publishes* after every change, telling callers what they
//! may do without the lock:
//!
//! - **Fast** (closed, no closed-state window, a policy that ignores successes): admit a
//!   request, or record a success, by adding one to a pending counter in the word. No clock,
//!   no lock. The counters are folded into the machine's counts by the next lock holder.
//! - **Windowed** (the same with a fixed closed-state window): the same, after one clock
//!   read shows the window has not expired. An expired window takes the lock, which starts
//!   the next one.
//! - **Open**: reject while the clock is not past `until`. One clock read, no write.
//! - **Locked**: everything else takes the lock.
//!
//! Every lock holder first *closes* the lane (swapping in a locked word, which hands it the
//! pending counters), and publishes a new word when done. So a lock-free operation either
//! lands before a locked one (and is folded into its counts first) or finds the lane closed
//! and queues for the lock: each operation has one place in a single order, as if all had
//! taken the lock.
//!
//! The word: `[mode: 2 bits][generation: 30 bits][successes: 16 bits][requests: 16 bits]`.
//! A full counter sends callers to the lock, whose holder empties it. A window's end is
//! written before the word that refers to it and is constant for a generation, so a caller
//! whose compare-and-swap succeeds on the word it loaded has read the end of that word's
//! window. An open period's end is kept apart: a rejection reads it after the word with no
//! compare-and-swap to confirm, so it may see a later open period's end (the breaker is
//! open then too), but never a window's.

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
const WINDOWED: u64 = 3;

/// What the lock holder publishes: what callers may do without the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LaneView {
    /// Closed and counting lock-free, in this generation.
    Fast { generation: u64 },
    /// Closed and counting lock-free in this generation, until its window ends (inclusive:
    /// the window expires strictly after `until`).
    Windowed { generation: u64, until: Nanos },
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

/// What a call may do at admission. Any clock reading taken is handed on, so that a call
/// reads the clock at most once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Admitted lock-free, in this generation.
    Admitted { generation: u64 },
    /// The breaker is open until `until`, and the clock read `now`.
    Open { until: Nanos, now: Nanos },
    /// Take the lock (with the clock reading, if one was taken).
    Locked { now: Option<Nanos> },
}

#[derive(Debug)]
pub(crate) struct Lane {
    word: AtomicU64,
    /// The end of the current closed-state window; meaningful only while the word says
    /// windowed. Written before the word is published.
    window_until: AtomicU64,
    /// The end of the current open period; meaningful only while the word says open. Written
    /// before the word is published. Apart from `window_until`: an open-state rejection reads
    /// it without a compare-and-swap to confirm, so it must never hold a window's end.
    open_until: AtomicU64,
}

fn mode(word: u64) -> u64 {
    word >> MODE_SHIFT
}

fn generation(word: u64) -> u64 {
    (word >> GENERATION_SHIFT) & GENERATION_MASK
}

/// A clock read at most once, on first use.
struct Now<F> {
    read: Option<Nanos>,
    clock: Option<F>,
}

impl<F: FnOnce() -> Nanos> Now<F> {
    fn new(clock: F) -> Self {
        Self {
            read: None,
            clock: Some(clock),
        }
    }

    #[inline]
    fn get(&mut self) -> Nanos {
        match (self.read, self.clock.take()) {
            (Some(now), _) => now,
            (None, Some(clock)) => *self.read.insert(clock()),
            (None, None) => unreachable!("the clock is taken only to be read"),
        }
    }
}

impl Lane {
    pub(crate) fn new(view: LaneView) -> Self {
        let lane = Self {
            word: AtomicU64::new(LOCKED << MODE_SHIFT),
            window_until: AtomicU64::new(0),
            open_until: AtomicU64::new(0),
        };
        lane.publish(view);
        lane
    }

    /// Admits a request lock-free if the lane allows it, or says what to do instead.
    /// `clock` is called only if the lane needs the time (windowed or open), and once.
    #[inline]
    pub(crate) fn admit(&self, clock: impl FnOnce() -> Nanos) -> Admission {
        // The common case first, in a few instructions: fast, room to count, no contention.
        let word = self.word.load(Ordering::Acquire);
        if mode(word) == FAST
            && word & COUNTER < COUNTER
            && self
                .word
                .compare_exchange_weak(word, word + REQUEST, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            return Admission::Admitted {
                generation: generation(word),
            };
        }
        self.admit_any(clock)
    }

    /// [`admit`](Lane::admit) in every mode, retrying under contention.
    #[inline(never)]
    fn admit_any(&self, clock: impl FnOnce() -> Nanos) -> Admission {
        let mut now = Now::new(clock);
        let mut word = self.word.load(Ordering::Acquire);
        loop {
            match mode(word) {
                _ if word & COUNTER == COUNTER => return Admission::Locked { now: now.read },
                FAST => {}
                WINDOWED => {
                    if now.get() > self.window_until.load(Ordering::Acquire) {
                        return Admission::Locked { now: now.read };
                    }
                }
                OPEN => {
                    let until = self.open_until.load(Ordering::Acquire);
                    return Admission::Open {
                        until,
                        now: now.get(),
                    };
                }
                _ => return Admission::Locked { now: now.read },
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

    /// Records a success lock-free if the lane is closed and still in `generation_` (and,
    /// windowed, the window has not ended). `Err` sends the caller to the lock, with the
    /// clock reading if one was taken; the lock also finds out whether the result is stale.
    #[inline]
    pub(crate) fn succeed(
        &self,
        generation_: u64,
        clock: impl FnOnce() -> Nanos,
    ) -> Result<(), Option<Nanos>> {
        let word = self.word.load(Ordering::Acquire);
        if mode(word) == FAST
            && generation(word) == generation_
            && (word >> 16) & COUNTER < COUNTER
            && self
                .word
                .compare_exchange_weak(word, word + SUCCESS, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            return Ok(());
        }
        self.succeed_any(generation_, clock)
    }

    /// [`succeed`](Lane::succeed) in every mode, retrying under contention.
    #[inline(never)]
    fn succeed_any(
        &self,
        generation_: u64,
        clock: impl FnOnce() -> Nanos,
    ) -> Result<(), Option<Nanos>> {
        let mut now = Now::new(clock);
        let mut word = self.word.load(Ordering::Acquire);
        loop {
            let counting = matches!(mode(word), FAST | WINDOWED)
                && generation(word) == generation_
                && (word >> 16) & COUNTER < COUNTER;
            if !counting
                || (mode(word) == WINDOWED && now.get() > self.window_until.load(Ordering::Acquire))
            {
                return Err(now.read);
            }
            match self.word.compare_exchange_weak(
                word,
                word + SUCCESS,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(()),
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
        let counting = |mode: u64, generation: u64| {
            (mode << MODE_SHIFT) | ((generation & GENERATION_MASK) << GENERATION_SHIFT)
        };
        let word = match view {
            LaneView::Fast { generation } => counting(FAST, generation),
            LaneView::Windowed { generation, until } => {
                self.window_until.store(until, Ordering::Release);
                counting(WINDOWED, generation)
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

    fn never() -> Nanos {
        panic!("the fast lane reads no clock")
    }

    #[test]
    fn fast_lane_counts_and_hands_over() {
        let lane = Lane::new(LaneView::Fast { generation: 7 });
        assert_eq!(lane.admit(never), Admission::Admitted { generation: 7 });
        assert_eq!(lane.admit(never), Admission::Admitted { generation: 7 });
        assert_eq!(lane.succeed(7, never), Ok(()));
        assert_eq!(
            lane.succeed(6, never),
            Err(None),
            "another generation takes the lock"
        );
        assert_eq!(
            lane.drain(),
            Pending {
                requests: 2,
                successes: 1
            }
        );
        assert_eq!(
            lane.admit(never),
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
        assert_eq!(lane.admit(never), Admission::Locked { now: None }, "closed");
        assert_eq!(lane.succeed(7, never), Err(None));
    }

    #[test]
    fn a_full_counter_sends_callers_to_the_lock() {
        let lane = Lane::new(LaneView::Fast {
            generation: GENERATION_MASK,
        });
        for _ in 0..COUNTER {
            assert!(matches!(lane.admit(never), Admission::Admitted { .. }));
            assert_eq!(lane.succeed(GENERATION_MASK, never), Ok(()));
        }
        assert_eq!(lane.admit(never), Admission::Locked { now: None });
        assert_eq!(lane.succeed(GENERATION_MASK, never), Err(None));
        let pending = lane.close();
        assert_eq!((pending.requests, pending.successes), (COUNTER, COUNTER));
    }

    #[test]
    fn a_windowed_lane_counts_until_its_window_ends() {
        let lane = Lane::new(LaneView::Windowed {
            generation: 3,
            until: 100,
        });
        assert_eq!(lane.admit(|| 100), Admission::Admitted { generation: 3 });
        assert_eq!(lane.succeed(3, || 100), Ok(()));
        // Strictly after `until` the window has expired: the lock starts the next one.
        assert_eq!(lane.admit(|| 101), Admission::Locked { now: Some(101) });
        assert_eq!(lane.succeed(3, || 101), Err(Some(101)));
        assert_eq!(lane.succeed(2, never), Err(None), "stale: no clock needed");
        assert_eq!(
            lane.close(),
            Pending {
                requests: 1,
                successes: 1
            }
        );
    }

    #[test]
    fn open_lane_gives_its_deadline_with_the_reading() {
        let lane = Lane::new(LaneView::Open { until: 42 });
        assert_eq!(lane.admit(|| 40), Admission::Open { until: 42, now: 40 });
        assert_eq!(lane.succeed(0, never), Err(None));
        lane.publish(LaneView::Locked);
        assert_eq!(lane.admit(never), Admission::Locked { now: None });
    }
}
