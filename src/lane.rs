//! The lock-free lane: what a call can do without taking the state lock.
//!
//! The state lock stays the one place where the state machine changes. The lane is a single
//! atomic [`Word`] that the lock holder *publishes* after every change, from the machine's
//! [`Phase`] and the lane's [`Plan`], telling callers what they may do without the lock:
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
//! Every lock holder that may change the machine first *closes* the lane (swapping in a
//! locked word, which hands it the pending counters), and publishes a new word when done; a
//! lock holder that only reads *drains* the counters without closing (the machine's
//! generation cannot change under its lock, so what it drains belongs to the current one). So a lock-free operation either
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
//!
//! Whether closed-state calls may count here at all is decided once, when the breaker is
//! built, by [`Plan::of`]: never with a rolling window (a result needs its bucket), a policy
//! that must see every success, or a policy that measures latency (a lane admission records
//! no start time). That is the one place this is decided.

use crate::generation::Generation;
use crate::machine::Phase;
use crate::nanos::Nanos;
use crate::policy::TripPolicy;
use crate::sync::{AtomicU64, Ordering};

/// What the lane may do for this breaker, whatever its state: decided from the policy's
/// capabilities and the window when the breaker is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Whether closed-state admissions and successes may be counted lock-free.
    counts_closed: bool,
    /// Whether the policy measures latency: every admission then needs a clock reading.
    needs_latency: bool,
}

impl Plan {
    /// The plan for a breaker with `policy`, whose closed-state window `rolls` or not.
    pub(crate) fn of<P: TripPolicy + ?Sized>(policy: &P, rolls: bool) -> Self {
        let needs_latency = policy.needs_latency();
        Self {
            counts_closed: !rolls && !needs_latency && !policy.needs_successes(),
            needs_latency,
        }
    }

    /// Whether the policy measures latency (then no admission is made lock-free).
    pub(crate) fn needs_latency(&self) -> bool {
        self.needs_latency
    }
}

/// The lane's modes, in the word's top two bits.
const LOCKED: u64 = 0;
const FAST: u64 = 1;
const OPEN: u64 = 2;
const WINDOWED: u64 = 3;

/// The lane's atomic word, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Word(u64);

impl Word {
    const REQUEST: u64 = 1;
    const SUCCESS: u64 = 1 << 16;
    const COUNTER: u64 = 0xffff;
    const PENDING: u64 = (1 << 32) - 1;
    const GENERATION_SHIFT: u32 = 32;
    const MODE_SHIFT: u32 = 62;

    const LOCKED: Word = Word(LOCKED << Self::MODE_SHIFT);
    const OPEN: Word = Word(OPEN << Self::MODE_SHIFT);

    /// A counting word (fast or windowed) for `generation`, with empty counters.
    fn counting(mode: u64, generation: Generation) -> Self {
        const _: () = assert!(Generation::BITS <= Word::MODE_SHIFT - Word::GENERATION_SHIFT);
        Word((mode << Self::MODE_SHIFT) | (generation.get() << Self::GENERATION_SHIFT))
    }

    #[inline(always)]
    fn mode(self) -> u64 {
        self.0 >> Self::MODE_SHIFT
    }

    #[inline(always)]
    fn generation(self) -> Generation {
        Generation::from_bits(self.0 >> Self::GENERATION_SHIFT)
    }

    /// Whether the request counter has room for one more.
    #[inline(always)]
    fn has_request_room(self) -> bool {
        self.0 & Self::COUNTER < Self::COUNTER
    }

    /// Whether the success counter has room for one more.
    #[inline(always)]
    fn has_success_room(self) -> bool {
        (self.0 >> 16) & Self::COUNTER < Self::COUNTER
    }

    #[inline(always)]
    fn with_request(self) -> Self {
        Word(self.0 + Self::REQUEST)
    }

    #[inline(always)]
    fn with_success(self) -> Self {
        Word(self.0 + Self::SUCCESS)
    }

    fn pending(self) -> Pending {
        Pending {
            requests: self.0 & Self::COUNTER,
            successes: (self.0 >> 16) & Self::COUNTER,
        }
    }
}

/// Requests admitted and successes recorded on the lane since the lock last emptied it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Pending {
    pub(crate) requests: u64,
    pub(crate) successes: u64,
}

/// What a call may do at admission. Any clock reading taken is handed on, so that a call
/// reads the clock at most once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Entry {
    /// Admitted lock-free, in this generation.
    Admitted { generation: Generation },
    /// The breaker is open until `until`, and the clock read `now`.
    Open { until: Nanos, now: Nanos },
    /// Take the lock (with the clock reading, if one was taken).
    Locked { now: Option<Nanos> },
}

#[derive(Debug)]
pub(crate) struct Lane {
    plan: Plan,
    word: AtomicU64,
    /// The end of the current closed-state window; meaningful only while the word says
    /// windowed. Written before the word is published.
    window_until: AtomicU64,
    /// The end of the current open period; meaningful only while the word says open. Written
    /// before the word is published. Apart from `window_until`: an open-state rejection reads
    /// it without a compare-and-swap to confirm, so it must never hold a window's end.
    open_until: AtomicU64,
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
    pub(crate) fn new(plan: Plan, phase: Phase) -> Self {
        let lane = Self {
            plan,
            word: AtomicU64::new(Word::LOCKED.0),
            window_until: AtomicU64::new(0),
            open_until: AtomicU64::new(0),
        };
        lane.publish(phase);
        lane
    }

    #[inline(always)]
    fn load(&self) -> Word {
        Word(self.word.load(Ordering::Acquire))
    }

    /// Replaces `current` with `new` if the word still is `current`; the actual word if not.
    #[inline(always)]
    fn swap_if(&self, current: Word, new: Word) -> Result<(), Word> {
        self.word
            .compare_exchange_weak(current.0, new.0, Ordering::AcqRel, Ordering::Acquire)
            .map(drop)
            .map_err(Word)
    }

    /// Admits a request lock-free if the lane allows it, or says what to do instead.
    /// `clock` is called only if the lane needs the time (windowed or open), and once.
    #[inline]
    pub(crate) fn admit(&self, clock: impl FnOnce() -> Nanos) -> Entry {
        // The common case first, in a few instructions: fast, room to count, no contention.
        let word = self.load();
        if word.mode() == FAST
            && word.has_request_room()
            && self.swap_if(word, word.with_request()).is_ok()
        {
            return Entry::Admitted {
                generation: word.generation(),
            };
        }
        self.admit_any(clock)
    }

    /// [`admit`](Lane::admit) in every mode, retrying under contention.
    #[inline(never)]
    fn admit_any(&self, clock: impl FnOnce() -> Nanos) -> Entry {
        let mut now = Now::new(clock);
        let mut word = self.load();
        loop {
            match word.mode() {
                _ if !word.has_request_room() => return Entry::Locked { now: now.read },
                FAST => {}
                WINDOWED => {
                    if now.get() > self.window_until.load(Ordering::Acquire) {
                        return Entry::Locked { now: now.read };
                    }
                }
                OPEN => {
                    let until = self.open_until.load(Ordering::Acquire);
                    return Entry::Open {
                        until,
                        now: now.get(),
                    };
                }
                _ => return Entry::Locked { now: now.read },
            }
            match self.swap_if(word, word.with_request()) {
                Ok(()) => {
                    return Entry::Admitted {
                        generation: word.generation(),
                    }
                }
                Err(actual) => word = actual,
            }
        }
    }

    /// Records a success lock-free in the common case only: the lane is fast (no clock
    /// needed), still in `generation`, with room, and uncontended. `false`: try
    /// [`succeed`](Lane::succeed).
    #[inline(always)]
    pub(crate) fn succeed_fast(&self, generation: Generation) -> bool {
        let word = self.load();
        word.mode() == FAST
            && word.generation() == generation
            && word.has_success_room()
            && self.swap_if(word, word.with_success()).is_ok()
    }

    /// Records a success lock-free if the lane is closed and still in `generation` (and,
    /// windowed, the window has not ended), retrying under contention. `Err` sends the caller
    /// to the lock, with the clock reading if one was taken; the lock also finds out whether
    /// the result is stale. `clock` is called only for a windowed lane, and once.
    pub(crate) fn succeed(
        &self,
        generation: Generation,
        clock: impl FnOnce() -> Nanos,
    ) -> Result<(), Option<Nanos>> {
        let mut now = Now::new(clock);
        let mut word = self.load();
        loop {
            let counting = matches!(word.mode(), FAST | WINDOWED)
                && word.generation() == generation
                && word.has_success_room();
            if !counting
                || (word.mode() == WINDOWED
                    && now.get() > self.window_until.load(Ordering::Acquire))
            {
                return Err(now.read);
            }
            match self.swap_if(word, word.with_success()) {
                Ok(()) => return Ok(()),
                Err(actual) => word = actual,
            }
        }
    }

    /// Closes the lane for a lock holder about to change the machine, handing it what was
    /// recorded lock-free. Call with the state lock held, and [`publish`](Lane::publish)
    /// before releasing it.
    pub(crate) fn close(&self) -> Pending {
        Word(self.word.swap(Word::LOCKED.0, Ordering::AcqRel)).pending()
    }

    /// Empties the pending counters without closing the lane, for a lock holder that only
    /// reads.
    pub(crate) fn drain(&self) -> Pending {
        Word(self.word.fetch_and(!Word::PENDING, Ordering::AcqRel)).pending()
    }

    /// Publishes what callers may do without the lock in `phase`. Call with the state lock
    /// held.
    pub(crate) fn publish(&self, phase: Phase) {
        let word = match phase {
            Phase::Closed {
                generation,
                window_end: None,
            } if self.plan.counts_closed => Word::counting(FAST, generation),
            Phase::Closed {
                generation,
                window_end: Some(until),
            } if self.plan.counts_closed => {
                self.window_until.store(until, Ordering::Release);
                Word::counting(WINDOWED, generation)
            }
            Phase::Open { until } => {
                self.open_until.store(until, Ordering::Release);
                Word::OPEN
            }
            Phase::Closed { .. } | Phase::HalfOpen => Word::LOCKED,
        };
        self.word.store(word.0, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::policy::{CallResult, ConsecutiveFailures};

    fn never() -> Nanos {
        panic!("the fast lane reads no clock")
    }

    fn gen(n: u64) -> Generation {
        Generation::from_bits(n)
    }

    fn counting() -> Plan {
        Plan::of(&ConsecutiveFailures::default(), false)
    }

    fn fast(n: u64) -> Lane {
        Lane::new(
            counting(),
            Phase::Closed {
                generation: gen(n),
                window_end: None,
            },
        )
    }

    #[test]
    fn the_plan_keeps_latency_success_and_rolling_policies_off_the_lane() {
        #[derive(Debug)]
        struct Timed(bool, bool);
        impl TripPolicy for Timed {
            fn on_result(&mut self, _: &CallResult<'_>) -> bool {
                false
            }
            fn needs_latency(&self) -> bool {
                self.0
            }
            fn needs_successes(&self) -> bool {
                self.1
            }
        }
        assert!(counting().counts_closed);
        assert!(!Plan::of(&ConsecutiveFailures::default(), true).counts_closed);
        assert!(!Plan::of(&Timed(true, false), false).counts_closed);
        assert!(Plan::of(&Timed(true, false), false).needs_latency());
        assert!(!Plan::of(&Timed(false, true), false).counts_closed);
        assert!(Plan::of(&Timed(false, false), false).counts_closed);
        let closed = Phase::Closed {
            generation: gen(1),
            window_end: None,
        };
        let lane = Lane::new(Plan::of(&Timed(true, false), false), closed);
        assert_eq!(lane.admit(|| 5), Entry::Locked { now: None });
    }

    #[test]
    fn fast_lane_counts_and_hands_over() {
        let lane = fast(7);
        assert_eq!(lane.admit(never), Entry::Admitted { generation: gen(7) });
        assert_eq!(lane.admit(never), Entry::Admitted { generation: gen(7) });
        assert_eq!(lane.succeed(gen(7), never), Ok(()));
        assert_eq!(
            lane.succeed(gen(6), never),
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
            Entry::Admitted { generation: gen(7) },
            "still fast"
        );
        assert_eq!(
            lane.close(),
            Pending {
                requests: 1,
                successes: 0
            }
        );
        assert_eq!(lane.admit(never), Entry::Locked { now: None }, "closed");
        assert_eq!(lane.succeed(gen(7), never), Err(None));
    }

    #[test]
    fn a_full_counter_sends_callers_to_the_lock() {
        let last = (1 << Generation::BITS) - 1;
        let lane = fast(last);
        for _ in 0..Word::COUNTER {
            assert!(matches!(lane.admit(never), Entry::Admitted { .. }));
            assert_eq!(lane.succeed(gen(last), never), Ok(()));
        }
        assert_eq!(lane.admit(never), Entry::Locked { now: None });
        assert_eq!(lane.succeed(gen(last), never), Err(None));
        let pending = lane.close();
        assert_eq!(
            (pending.requests, pending.successes),
            (Word::COUNTER, Word::COUNTER)
        );
    }

    #[test]
    fn a_windowed_lane_counts_until_its_window_ends() {
        let lane = Lane::new(
            counting(),
            Phase::Closed {
                generation: gen(3),
                window_end: Some(100),
            },
        );
        assert_eq!(lane.admit(|| 100), Entry::Admitted { generation: gen(3) });
        assert_eq!(lane.succeed(gen(3), || 100), Ok(()));
        // Strictly after `until` the window has expired: the lock starts the next one.
        assert_eq!(lane.admit(|| 101), Entry::Locked { now: Some(101) });
        assert_eq!(lane.succeed(gen(3), || 101), Err(Some(101)));
        assert_eq!(
            lane.succeed(gen(2), never),
            Err(None),
            "stale: no clock needed"
        );
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
        let lane = Lane::new(counting(), Phase::Open { until: 42 });
        assert_eq!(lane.admit(|| 40), Entry::Open { until: 42, now: 40 });
        assert_eq!(lane.succeed(gen(0), never), Err(None));
        lane.publish(Phase::HalfOpen);
        assert_eq!(lane.admit(never), Entry::Locked { now: None });
    }
}
