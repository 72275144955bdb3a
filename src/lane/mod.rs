//! The lock-free lane: what a call can do without taking the state lock.
//!
//! The state lock stays the one place where the state machine changes. The lane is what the
//! lock holder *publishes* after every change, from the machine's [`Phase`] and the lane's
//! [`Plan`], telling callers what they may do without the lock:
//!
//! - **Counting** (closed, a policy that ignores successes or records them itself): admit a
//!   request, or record a success, by adding one to a counter in a *cell*. Without a
//!   closed-state window (**fast**) no clock is read; with a fixed window, or a rolling
//!   one (**windowed**), one clock read shows the window (the bucket) has not ended (an
//!   ended one takes the lock, which starts the next one). The counters are folded into the
//!   machine's counts by the next lock holder.
//! - **Failing** (closed, uncontended: no stripes yet): record a failure the policy said
//!   cannot trip ([`TripPolicy::lane_room`](crate::policy::TripPolicy::lane_room)'s failures,
//!   published as the base cell's failure room), in the base cell beside the successes, which
//!   keeps its results in order (the *tail*): the fold gives the consecutive runs exactly.
//!   Once threads contend, every failure takes the lock, as one that may trip always does.
//! - **Open**: reject while the clock is not past `until`. One clock read, and one count in
//!   this thread's rejection counter (the base one until two threads collide on it, then
//!   the thread's stripe).
//! - **Locked**: everything else takes the lock.
//!
//! # Cells and stripes: no shared write on the closed-state path
//!
//! A cell is one atomic word, `[tag: 32 bits][counters: 32 bits]` (see [`Cell`] for the
//! counters' two layouts); its tag says whether it is *open* for counting, in which
//! generation, and whether windowed (tag zero: closed). A breaker starts with one cell, the
//! *base*. The first time a
//! compare-and-swap on the base fails (two threads collided), the lane makes its *stripes*:
//! one cache-padded cell per core (a power of two, at most 64), made closed. From then on a
//! thread counts in the stripe its probe picks (a per-thread number, moved to another stripe
//! when its own is contended), so in the steady state each thread writes only its own cache
//! line and only reads the lane's shared words, whatever the number of threads. An
//! uncontended breaker never makes stripes: a registry of idle breakers pays for none.
//!
//! # The protocol
//!
//! - **Publish** (lock held, after a change): store the window's end or the open period's
//!   end, then *open* every cell (store its tag, counters zero), then store the mode word.
//!   Cells made since the last publish are closed until the next one; a call that finds its
//!   cell closed takes the lock, which republishes.
//! - **Close** (lock held, before a change): swap in a *stepping* mode word, then swap every
//!   cell to closed, folding the counters found in it into the machine. A lane published
//!   locked has every cell closed and empty already (only a lock holder opens one), so
//!   closing it writes nothing but a rejection counter that holds something. An admission
//!   that finds its cell closed while the word says stepping spins a moment for the publish
//!   and counts again ([`STEPPING`]); a result, or an admission that waited long enough,
//!   takes the lock.
//! - **Count** (no lock): load the cell; if its tag is open (for a windowed cell: and the
//!   clock is not past the window's end), compare-and-swap it to itself plus one. For a
//!   success the tag must also be the permit's generation.
//!
//! A lock-free operation counts only through a compare-and-swap on a cell whose tag is open.
//! Every cell that was opened is closed (swapped) by the next lock holder that changes the
//! machine, before it changes it, so the operation either lands before that swap in the
//! cell's order (and is folded into the machine first: it comes before the locked operation)
//! or fails against the closed tag and takes the lock itself (it comes after): each
//! operation has one place in a single order, as if all had taken the lock. An operation of
//! an old generation never counts in a new one: after the close, its cell holds another tag
//! (closed, or the new generation's), so its compare-and-swap fails.
//!
//! A windowed cell's window end is written before the cell is opened and is constant for a
//! generation; a caller reads it after loading the cell, so a caller whose compare-and-swap
//! succeeds on the value it loaded has read the end of that generation's window. An open
//! period's end is kept apart: a rejection reads it after the mode word with no
//! compare-and-swap to confirm, so it may see a later open period's end (the breaker is open
//! then too), but never a window's.
//!
//! # Rolling windows: a cell counts for one bucket
//!
//! In a rolling window a result belongs to the bucket of its admission, so a rolling lane's
//! cells count for one `(generation, age)` at a time: the *key*, stored before the cells are
//! opened and constant while they are, with the current bucket's end as the window's end.
//! The lock holder that finds the bucket ended rolls the machine (closing the cells first,
//! which folds their counts into the bucket they counted for) and opens them for the next
//! key. An admission reads the key before its compare-and-swap and carries it as its
//! ticket; a success counts only if its ticket is the key, read after loading the cell:
//! as with the window's end, a compare-and-swap that succeeds proves the key read was the
//! cell's. Anything else (a result of an earlier bucket, still in the window or not) takes
//! the lock, which puts it in its bucket or drops it.
//!
//! A cell emptied by a close and opened for the next bucket may hold the very counters a
//! caller loaded from it before: so a rolling lane's cells are tagged not with the
//! generation but with an *epoch*, one more at every opening, and a compare-and-swap on a
//! value loaded in one epoch fails in the next. The epoch wraps at `2^30` openings, as a
//! generation does.
//!
//! Whether closed-state calls may count here at all is decided once, when the breaker is
//! built, by [`Plan::of`]: never for a policy that must see every success under the lock (one
//! with a [`SuccessRecorder`](crate::policy::SuccessRecorder) is given them outside it,
//! after their count here), nor for one with a slow-call threshold over a count window. A
//! policy that measures latency may count here: the breaker then reads the clock before
//! every admission and keeps the reading in the permit as the call's start. That is the one
//! place this is decided.
//!
//! # A slow-call threshold: calls in flight in slots
//!
//! With a slow-call threshold over a time window, a call stuck past the threshold must be
//! counted as slow when the next call arrives (there is no timer). The lane tracks the calls
//! it admits in [`InFlightSlots`] shared with the machine: an admission claims a slot before
//! its cell's compare-and-swap and publishes its start and key after it; a lock holder, after
//! closing the cells, waits for the claimed slots to settle and marks the overdue ones (see
//! that module for the protocol). The lock holder publishes, as the window's end, the first
//! instant at which a call in flight may be overdue (the oldest start it saw, or its own
//! time, plus the threshold), and `since`, its own time: an admission whose clock reading is
//! older takes the lock (which starts it at its latest time), so every call the lane admits
//! is overdue no earlier than the end it checked. What an admission checks thus changes
//! within a generation, so these lanes' cells carry an epoch, as a rolling lane's do. A fast
//! success (within the threshold, its reading not older than `since`: a lock step that saw a
//! later time would have timed it then) counts in the cell while the policy says no such
//! success can trip it ([`lane_room`](crate::policy::TripPolicy::lane_room)'s quiet
//! successes; else the lane is published locked); a slow result, a failure, or a call
//! counted as slow in flight takes the lock, which frees its slot.
//!
//! # A throttle: room, then shedding
//!
//! A throttled breaker ([`Throttle`](crate::throttle::Throttle)) must not let the lane admit
//! a call the throttle would have drawn for. The machine publishes how many admissions
//! cannot raise the throttle's `p` above zero (the *room*); the cells' request counters
//! start that far below full (their *preset*, undone when they are folded), so the fast path
//! is unchanged and the call after the room takes the lock. With no room left (`p` above
//! zero, or about to be), the machine publishes its counts instead and the cells are opened
//! windowed: every admission then takes the path that reads the clock, where it computes `p`
//! from those counts plus its own cell's, draws, and is admitted or turned away there, no
//! lock (a throttled call is counted in the thread's stripe, folded by the next lock holder).
//! One thread's decisions are exactly the machine's; concurrent ones each see their own
//! cell's counts since the last lock holder, not the others'.
//!
//! # Cost
//!
//! | | a closed-state call (admission + success) | an open rejection |
//! |---|---|---|
//! | shared writes | none once striped (two CAS on the thread's own line) | none once striped (one CAS on the thread's own line) |
//! | shared reads | the cell pointer; with a window, its end (and a rolling window's key, one load further: in the lane's box) | the cell, the mode word, the open period's end |
//! | memory | the lane's 80 bytes (the base cell among them) until contention, then 128 bytes per stripe; a rolling, tracked or throttled lane's box (88 bytes) | — |
//!
//! A lock holder closes and opens every stripe (at most 64 cache lines) per locked
//! operation: failures and state changes pay that, successes do not.
//!
//! # Files
//!
//! Admission and results are here; beside them `plan.rs` (what the lane may do),
//! `cell.rs` (the word and its two layouts, and what the cells counted), `stripes.rs`,
//! `publish.rs` (a lock holder's close and publish), `shed.rs` (a throttle),
//! `tracked.rs` (a slow-call threshold's calls in flight) and `uncounted.rs` (`execute`'s
//! admission counted with its success, one compare-and-swap a call).

mod cell;
mod plan;
mod publish;
mod shed;
mod stripes;
mod tracked;
mod uncounted;

pub(crate) use plan::Plan;

use crate::atomic;
use crate::error::Rejected;
use crate::generation::Generation;
use crate::in_flight_slots::InFlightSlots;
use crate::machine::{Phase, Ticket};
use crate::nanos::Nanos;
use crate::sync::{AtomicU64, AtomicU8, Lazy, Ordering};
use crate::throttle::Throttling;
use std::sync::Arc;

use cell::Cell;
use shed::Shedding;
use stripes::Stripe;
use tracked::Tracked;

/// What the lane says of the next call without admitting it ([`Lane::peek_open`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Peek {
    /// Open at the clock's reading: this rejection.
    Open(Rejected),
    /// Not rejected for being open (the lane may still send the call to the lock).
    Passes,
    /// Open, and its period is over: the next call ends it (it probes, or runs the health
    /// check first).
    Expired,
    /// Every call goes to the lock (half-open, forced, a policy the lane cannot count for):
    /// only the machine can answer.
    AskTheLock,
}

/// The bits of a window age in a rolling lane's key (beside a generation's): a generation
/// that reaches this age (`2^34` buckets) counts under the lock from then on.
const KEY_AGE_BITS: u32 = 64 - Generation::BITS;

/// The mode word's modes, in its top two bits.
const LOCKED: u64 = 0;
const COUNTING: u64 = 1;
const OPEN: u64 = 2;
/// A lock holder closed a counting or open lane and will publish it again before it lets
/// go of the lock: an admission that finds its cell closed spins a moment for that publish
/// ([`atomic::STEP_SPINS`] times at most) and asks the lane again. Without this, it would
/// take the lock itself, close every cell and republish them, which sent another thread's
/// admission arriving meanwhile to the lock in turn: two threads kept each other on the
/// lock that way (one call in 100 took it on a throttled breaker at two threads).
const STEPPING: u64 = 3;
const MODE_SHIFT: u32 = 62;

/// What a call may do at admission. Any clock reading taken is handed on, so that a call
/// reads the clock at most once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Entry {
    /// Admitted lock-free, with this ticket (its generation, and its age in a rolling
    /// window). A caller that needs the admission's time (a policy that measures latency,
    /// whose cells are windowed for that, so the lane reads the clock) keeps the reading its
    /// clock closure gave: the entry stays three words.
    Admitted { ticket: Ticket },
    /// The breaker is open until `until`, and the clock read `now`.
    Open { until: Nanos, now: Nanos },
    /// Take the lock (with the clock reading, if one was taken).
    Locked { now: Option<Nanos> },
    /// Turned away by the throttle, lock-free, drawn against this probability.
    Throttled { probability: f64 },
}

/// The lane (see the module docs). 80 bytes: what the default breaker's calls read is
/// inline (the mode word, the cells, a fixed window's end, the open period's end); what only
/// a rolling, tracked or throttled lane needs is in one box beside it ([`Extra`]).
#[derive(Debug)]
pub(crate) struct Lane {
    plan: Plan,
    /// The failures the base cell was opened with room for (zero once the stripes are made;
    /// at most a cell's failure counter holds, [`Cell::FAILURES`]): written and read only by
    /// lock holders, to fold the base's failure counter.
    failure_room: AtomicU8,
    /// `[mode: 2 bits][0: 62 bits]`: what a call whose cell is closed should do.
    word: AtomicU64,
    /// The end of the current closed-state window (a rolling window's current bucket);
    /// meaningful only while the cells are open and windowed. Written before they are opened.
    window_until: AtomicU64,
    /// The end of the current open period; meaningful only while the word says open. Written
    /// before the word is published. Apart from `window_until`: an open-state rejection reads
    /// it without a compare-and-swap to confirm, so it must never hold a window's end.
    open_until: AtomicU64,
    /// The cell every thread counts in until two collide.
    base: AtomicU64,
    /// The rejection counter every thread counts in until two collide (on it or on `base`).
    base_rejected: AtomicU64,
    /// The cells threads count in once two collided on `base`.
    stripes: Lazy<Box<[Stripe]>>,
    /// A rolling, tracked or throttled lane's: what it needs beyond the default's (`None`
    /// for any other, which allocates nothing).
    extra: Option<Box<Extra>>,
}

/// What a lane keeps beyond the default breaker's, in one box made when the breaker is
/// built, for a lane whose cells carry an epoch (a rolling window, or a slow-call threshold
/// over a time window) or that has a throttle. Read through one more load than a field of
/// the lane: a rolling lane's admission and success read its key here, a tracked or throttled
/// admission its slots or shedding state (whose box it replaces); the default breaker's
/// calls, and a fixed window's, never come here, nor does a call look for more here than
/// its lane's plan says there is (a rolling lane's admission reads the key alone). The key
/// first, beside the tracked calls, the throttle after.
#[derive(Debug)]
#[repr(C)]
struct Extra {
    /// A rolling lane's key, `[age: 34 bits][generation: 30 bits]`: the generation and the
    /// window age the open cells count for. Written before they are opened, constant while
    /// they are.
    key: AtomicU64,
    /// A slow-call threshold's: the calls in flight the lane admitted.
    tracked: Option<Tracked>,
    /// A throttled breaker's: what the lane sheds with (`None` without a throttle).
    throttle: Option<Shedding>,
    /// A rolling lane's epoch: how many times the lock holder opened its cells, the tag
    /// they carry (masked to a generation's bits). Written only under the state lock.
    epoch: AtomicU64,
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

    #[inline(always)]
    fn get(&mut self) -> Nanos {
        match (self.read, self.clock.take()) {
            (Some(now), _) => now,
            (None, Some(clock)) => *self.read.insert(clock()),
            (None, None) => unreachable!("the clock is taken only to be read"),
        }
    }
}

impl Lane {
    /// A lane for `plan`, published for `phase`; `throttle`: a throttled breaker's
    /// settings and generator (shared with its machine).
    pub(crate) fn new(
        plan: Plan,
        phase: Phase,
        throttle: Option<Arc<Throttling>>,
        tracked: Option<(Arc<InFlightSlots>, Nanos)>,
    ) -> Self {
        let plan = plan.for_throttle(throttle.is_some());
        let throttle = throttle.map(|throttling| Shedding {
            preset: AtomicU64::new(0),
            throttling,
            on: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            accepts: AtomicU64::new(0),
            throttled: AtomicU64::new(0),
        });
        let tracked = tracked
            .filter(|_| plan.tracks())
            .map(|(slots, threshold)| Tracked {
                slots,
                threshold,
                since: AtomicU64::new(0),
            });
        let extra = (plan.epochs() || throttle.is_some()).then(|| {
            Box::new(Extra {
                key: AtomicU64::new(0),
                tracked,
                throttle,
                epoch: AtomicU64::new(0),
            })
        });
        let lane = Self {
            plan,
            failure_room: AtomicU8::new(0),
            word: AtomicU64::new(LOCKED << MODE_SHIFT),
            window_until: AtomicU64::new(0),
            open_until: AtomicU64::new(0),
            base: AtomicU64::new(Cell::CLOSED.0),
            base_rejected: AtomicU64::new(0),
            stripes: Lazy::new(),
            extra,
        };
        lane.publish(phase);
        lane
    }

    /// Replaces `current` with `new` in `cell` if it still holds `current`; else what it holds.
    #[inline(always)]
    fn try_count(cell: &AtomicU64, current: Cell, new: Cell) -> Result<(), Cell> {
        cell.compare_exchange(current.0, new.0, Ordering::AcqRel, Ordering::Acquire)
            .map(drop)
            .map_err(Cell)
    }

    /// Replaces `current` with `new` in `cell` if it still holds `current`.
    #[inline(always)]
    fn count(cell: &AtomicU64, current: Cell, new: Cell) -> bool {
        // A strong compare-and-swap: a failure means another thread, not a spurious miss,
        // and makes the stripes.
        cell.compare_exchange(current.0, new.0, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Admits a request lock-free if the lane allows it, or says what to do instead.
    /// `clock` is called only if the lane needs the time (windowed or open), and once.
    #[inline(always)]
    pub(crate) fn admit(&self, clock: impl FnOnce() -> Nanos) -> Entry {
        // The common case first, in a few instructions: a fast cell with room, uncontended.
        let (cell, base) = self.cell();
        let c = Cell(cell.load(Ordering::Acquire));
        if c.is_fast() && c.has_request_room() && Self::count(cell, c, c.with_request()) {
            return Entry::Admitted {
                ticket: Ticket::unaged(c.generation()),
            };
        }
        if c.is_windowed() && c.has_request_room() {
            // A window (or a rolling window's bucket) on the lane: one clock read, then the
            // same compare-and-swap.
            let now = clock();
            if now > self.window_until.load(Ordering::Acquire) {
                return Entry::Locked { now: Some(now) };
            }
            if let Some(tracked) = self.tracked() {
                return self.admit_tracked(tracked, now);
            }
            if let Some(shedding) = self.shedding() {
                return self.admit_shedding(shedding, move || now);
            }
            let ticket = self.ticket_in(c);
            match Self::try_count(cell, c, c.with_request()) {
                Ok(()) => return Entry::Admitted { ticket },
                // A collision here (likelier than on the fast path: the clock was read between
                // the load and the compare-and-swap) makes the stripes, as in `admit_any`.
                Err(found) => self.contended(base, c, found),
            }
            return self.admit_any(move || now);
        }
        self.admit_any(clock)
    }

    /// The ticket of an admission counted in open cell `c`, just loaded: its generation, or
    /// in a rolling lane the key of its epoch. Read before the compare-and-swap that counts
    /// it: if that succeeds, the key read was this cell's epoch's (a later key is stored
    /// only after this epoch's cells were closed).
    #[inline(always)]
    fn ticket_in(&self, c: Cell) -> Ticket {
        match self.key() {
            Some(key) => Self::ticket_of(key.load(Ordering::Acquire)),
            None => Ticket::unaged(c.generation()),
        }
    }

    /// A lane whose cells carry an epoch: its key (in its [`Extra`], which
    /// [`new`](Lane::new) makes for every such lane). Checked on the plan first: another
    /// lane reads no more than its own plan.
    #[inline(always)]
    fn key(&self) -> Option<&AtomicU64> {
        if self.plan.epochs() {
            self.extra.as_deref().map(|extra| &extra.key)
        } else {
            None
        }
    }

    /// A slow-call threshold's calls in flight, if the lane tracks them.
    #[inline(always)]
    fn tracked(&self) -> Option<&Tracked> {
        if self.plan.tracks() {
            self.extra.as_deref()?.tracked.as_ref()
        } else {
            None
        }
    }

    /// A throttled lane's shedding state.
    #[inline(always)]
    fn throttle(&self) -> Option<&Shedding> {
        if self.plan.throttled() {
            self.extra.as_deref()?.throttle.as_ref()
        } else {
            None
        }
    }

    /// [`admit`](Lane::admit) in every mode, retrying under contention.
    #[inline(never)]
    fn admit_any(&self, clock: impl FnOnce() -> Nanos) -> Entry {
        let mut now = Now::new(clock);
        // Open first: a rejection then reads the mode word and the open period's end only.
        if self.word.load(Ordering::Acquire) >> MODE_SHIFT == OPEN {
            let until = self.open_until.load(Ordering::Acquire);
            return Entry::Open {
                until,
                now: now.get(),
            };
        }
        if let Some(tracked) = self.tracked() {
            if self.word.load(Ordering::Acquire) >> MODE_SHIFT == COUNTING {
                return self.admit_tracked(tracked, now.get());
            }
            return Entry::Locked { now: now.read };
        }
        let mut spins = 0;
        loop {
            let (cell, base) = self.cell();
            let c = Cell(cell.load(Ordering::Acquire));
            if !c.is_open() {
                // Closed: the mode word says why (open since the check above, or the lock:
                // a change is under way, or this cell was made after the last publish).
                let word = self.word.load(Ordering::Acquire);
                if word >> MODE_SHIFT == OPEN {
                    let until = self.open_until.load(Ordering::Acquire);
                    return Entry::Open {
                        until,
                        now: now.get(),
                    };
                }
                if word >> MODE_SHIFT == STEPPING && spins < atomic::STEP_SPINS {
                    // A lock holder's step: its publish, rather than a step of this call's.
                    spins += 1;
                    atomic::spin_a_moment();
                    continue;
                }
                return Entry::Locked { now: now.read };
            }
            if !c.has_request_room()
                || (c.is_windowed() && now.get() > self.window_until.load(Ordering::Acquire))
            {
                return Entry::Locked { now: now.read };
            }
            if let Some(shedding) = self.shedding() {
                let read = now.get();
                return self.admit_shedding(shedding, move || read);
            }
            let ticket = self.ticket_in(c);
            match Self::try_count(cell, c, c.with_request()) {
                Ok(()) => return Entry::Admitted { ticket },
                Err(found) => self.contended(base, c, found),
            }
        }
    }

    /// Whether a success is judged at the latest time the breaker saw, without a clock
    /// reading of its own, while the breaker is closed
    /// ([`Builder::verdict_at_latest`](crate::Builder::verdict_at_latest)): on the lane, and
    /// under the lock if the machine is closed then (in every other state a verdict reads
    /// the clock, so that, say, an open period that ended is ended by it as by
    /// gobreaker's).
    #[inline(always)]
    pub(crate) fn latest_successes(&self) -> bool {
        self.plan.latest_successes()
    }

    /// What the lane says of the next call, without admitting it (see [`Peek`]): one load
    /// of the mode word, and one clock read while open.
    #[inline]
    pub(crate) fn peek_open(&self, clock: impl FnOnce() -> Nanos) -> Peek {
        match self.word.load(Ordering::Acquire) >> MODE_SHIFT {
            OPEN => {
                let until = self.open_until.load(Ordering::Acquire);
                let now = clock();
                if now <= until {
                    Peek::Open(Rejected::open_until(until, now))
                } else {
                    Peek::Expired
                }
            }
            LOCKED | STEPPING => Peek::AskTheLock,
            _ => Peek::Passes,
        }
    }

    /// Records a success lock-free in the common case only: this thread's cell counts for
    /// `ticket`, has room, and is uncontended, and either is fast (no clock read) or is
    /// windowed and `clock` (read then, once) is within its window (not read where
    /// successes are judged at the latest time the breaker saw: [`Plan`]'s
    /// `latest_successes`). `clock` gives `None`
    /// when it cannot be read here (a user clock, which may panic). `false`: try
    /// [`succeed`](Lane::succeed), or for a call tracked in flight
    /// [`succeed_tracked`](Lane::succeed_tracked) (never counted here: its slot goes with
    /// its success).
    #[inline(always)]
    pub(crate) fn succeed_fast(
        &self,
        ticket: Ticket,
        clock: impl FnOnce() -> Option<Nanos>,
    ) -> bool {
        let (cell, _) = self.cell();
        let c = Cell(cell.load(Ordering::Acquire));
        if !c.has_success_room() {
            return false;
        }
        if c.is_fast_in(ticket.generation()) {
            // Never a tracked call's: a lane that tracks its calls opens windowed cells.
            debug_assert!(!ticket.tracked());
            return Self::count(cell, c, c.with_success());
        }
        // A tracked call's success frees its slot too (`succeed_tracked`).
        c.is_windowed()
            && !ticket.tracked()
            && self.counts_for(c, ticket)
            && (self.plan.latest_successes()
                || clock().is_some_and(|now| now <= self.window_until.load(Ordering::Acquire)))
            && Self::count(cell, c, c.with_success())
    }

    /// Records a success lock-free if this thread's cell is open for `ticket` (its
    /// generation; in a rolling window, its generation and age) and, windowed, the window (or
    /// bucket) has not ended, retrying under contention; `Ok` with the clock reading if one
    /// was taken. `Err` sends the caller to the lock, with the clock reading if one was taken; the lock also finds out whether the result
    /// is stale, or its bucket gone. `clock` is called only for a windowed cell, and once.
    #[inline]
    pub(crate) fn succeed(
        &self,
        ticket: Ticket,
        clock: impl FnOnce() -> Nanos,
    ) -> Result<Option<Nanos>, Option<Nanos>> {
        let mut now = Now::new(clock);
        if ticket.tracked() {
            // Its slot is freed with its success (see `succeed_tracked`), or the machine
            // tracks it.
            return Err(None);
        }
        loop {
            let (cell, base) = self.cell();
            let c = Cell(cell.load(Ordering::Acquire));
            let counting = c.is_open() && c.has_success_room() && self.counts_for(c, ticket);
            if !counting
                || (c.is_windowed()
                    && !self.plan.latest_successes()
                    && now.get() > self.window_until.load(Ordering::Acquire))
            {
                return Err(now.read);
            }
            match Self::try_count(cell, c, c.with_success()) {
                Ok(()) => return Ok(now.read),
                Err(found) => self.contended(base, c, found),
            }
        }
    }

    /// Records a failure lock-free, if the breaker is uncontended (no stripes: the base cell
    /// keeps every result in order) and its cell is open for `ticket` with room for a
    /// failure, the room the policy left ([`TripPolicy::lane_room`]) so that this failure
    /// cannot trip it; windowed, if `clock` (read then, once) is within the window. One
    /// compare-and-swap, no retry: `false` sends the failure to the lock, which decides.
    ///
    /// [`TripPolicy::lane_room`]: crate::policy::TripPolicy::lane_room
    #[inline]
    pub(crate) fn fail(&self, ticket: Ticket, clock: impl FnOnce() -> Option<Nanos>) -> bool {
        if self.stripes.get().is_some() || ticket.tracked() {
            return false;
        }
        let c = Cell(self.base.load(Ordering::Acquire));
        c.is_open()
            && c.has_failure_room()
            && self.counts_for(c, ticket)
            && (!c.is_windowed()
                || clock().is_some_and(|now| now <= self.window_until.load(Ordering::Acquire)))
            && Self::count(&self.base, c, c.with_failure())
    }

    /// Whether open cell `c`, just loaded, counts for `ticket`: the cell's generation, or in
    /// a rolling lane the key of the cell's epoch (read after the cell: a compare-and-swap
    /// on the cell that succeeds proves it was that epoch's key).
    #[inline(always)]
    fn counts_for(&self, c: Cell, ticket: Ticket) -> bool {
        match self.key() {
            Some(key) => Self::key_of(ticket) == Some(key.load(Ordering::Acquire)),
            None => c.generation() == ticket.generation(),
        }
    }

    /// A rolling lane's key for `ticket`; `None` for a ticket no key names (a shadow
    /// call's, or an age past the key's bits).
    #[inline(always)]
    fn key_of(ticket: Ticket) -> Option<u64> {
        let generation = ticket.generation().get();
        (generation < 1 << Generation::BITS && ticket.age() < 1 << KEY_AGE_BITS)
            .then(|| (ticket.age() << Generation::BITS) | generation)
    }

    /// The ticket a rolling lane's key stands for.
    #[inline(always)]
    fn ticket_of(key: u64) -> Ticket {
        Ticket::aged(Generation::from_bits(key), key >> Generation::BITS)
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
