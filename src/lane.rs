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
//! success can trip it ([`lane_room`](crate::policy::TripPolicy::lane_room)'s quiet successes; else the
//! lane is published locked); a slow result, a failure, or a call counted as slow in flight
//! takes the lock, which frees its slot.
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
//! | shared reads | the cell pointer; with a window, its end (and a rolling window's key) | the cell, the mode word, the open period's end |
//! | memory | one word (the base) until contention; then 128 bytes per stripe | — |
//!
//! A lock holder closes and opens every stripe (at most 64 cache lines) per locked
//! operation: failures and state changes pay that, successes do not.

use crate::atomic;
use crate::counts::Tail;
use crate::error::Rejected;
use crate::generation::Generation;
use crate::in_flight_slots::{InFlightSlots, MAX_KEY};
use crate::machine::{Phase, Ticket};
use crate::nanos::Nanos;
use crate::policy::Capabilities;
use crate::sync::{self, AtomicU64, Lazy, Ordering};
use crate::throttle::{Decision, Throttling};
use std::sync::Arc;

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

/// What the lane may do for this breaker, whatever its state: decided from the policy's
/// capabilities and the window when the breaker is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Whether closed-state admissions and successes may be counted lock-free.
    counts_closed: bool,
    /// Whether the cells count for one key (a generation and a window age) at a time and are
    /// tagged with a lane epoch rather than the generation (see the module docs): a rolling
    /// window's, and a lane that [`tracks`](Self::tracks) its calls in flight (what an
    /// admission checks there changes within a generation).
    epochs: bool,
    /// Whether the policy measures latency: every admission then needs a clock reading.
    needs_latency: bool,
    /// Whether the policy has a slow-call threshold over a time window: the lane then tracks
    /// the calls it admits in its in-flight slots.
    tracks: bool,
}

impl Plan {
    /// The plan for a breaker whose policy has `caps`, and whose closed-state window
    /// `rolls` or not. `records_successes`: the policy has a
    /// [`SuccessRecorder`](crate::policy::SuccessRecorder), which takes the closed-state
    /// successes it needs without the lock.
    pub(crate) fn of(
        caps: &Capabilities,
        rolls: bool,
        by_count: bool,
        records_successes: bool,
    ) -> Self {
        let successes_here = !caps.needs_successes || records_successes;
        let slow = caps.effective_slow_threshold().is_some();
        // A slow-call threshold over a time window: the lane tracks its admissions in its
        // slots, and counts a fast success while the policy says none can trip it. Over a
        // count window (which counts a slow call when it returns) every call takes the lock.
        let tracks = slow && !by_count;
        Self {
            counts_closed: (successes_here && !slow) || tracks,
            epochs: rolls || tracks,
            needs_latency: caps.needs_latency,
            tracks,
        }
    }

    /// Whether the lane tracks the calls it admits in in-flight slots (a slow-call
    /// threshold over a time window).
    pub(crate) fn tracks(&self) -> bool {
        self.tracks
    }

    /// Whether the policy measures latency: then the breaker reads the clock for every
    /// admission, lane or lock, as its start.
    #[inline]
    pub(crate) fn needs_latency(&self) -> bool {
        self.needs_latency
    }

    /// Whether closed-state admissions and successes may be counted lock-free.
    #[inline]
    pub(crate) fn counts_closed(&self) -> bool {
        self.counts_closed
    }
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

/// A cell: `[tag: 32 bits][counters: 32 bits]`, its counters in one of two layouts.
///
/// - **Wide** (the top counter bit clear): `[0][successes: 15][requests: 16]`. Every cell but
///   an uncontended lane's base with room for failures.
/// - **Narrow** (set): `[1][tail is successes: 1][tail: 8][failures: 3][successes: 9]
///   [requests: 10]`: the base cell of an uncontended lane that counts failures too
///   ([`Lane::fail`]). Its results stay in order: the *tail* is the run of like results at
///   the end (failures, or successes after the last failure), so that folding the cell
///   gives the consecutive runs that recording each result under the lock would have. The
///   tail is zero until the cell's first failure (then a run of successes is all of them).
///   The failure counter starts at `7 - room` (the room the machine left, see
///   [`Phase::Closed`]), so that a cell of another room never compares equal.
///
/// A full counter sends the call to the lock, which empties the cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cell(u64);

impl Cell {
    const REQUEST: u64 = 1;
    /// The request counter, full at this value (wide).
    const COUNTER: u64 = 0xffff;
    const SUCCESS: u64 = 1 << 16;
    /// The success counter, full at this value (wide).
    const SUCCESSES: u64 = 0x7fff;
    const NARROW: u64 = 1 << 31;
    const NARROW_COUNTER: u64 = 0x3ff;
    const NARROW_SUCCESS: u64 = 1 << 10;
    const NARROW_SUCCESSES: u64 = 0x1ff;
    const FAILURE_SHIFT: u32 = 19;
    const FAILURE: u64 = 1 << Self::FAILURE_SHIFT;
    /// The failure counter, full at this value.
    const FAILURES: u64 = 7;
    const TAIL_SHIFT: u32 = 22;
    const TAIL_ONE: u64 = 1 << Self::TAIL_SHIFT;
    const TAIL_MAX: u64 = 0xff;
    /// Set: the tail is successes; clear: failures.
    const TAIL_SUCCEEDS: u64 = 1 << 30;
    /// The tail and its kind: zero until the narrow cell's first failure.
    const TAIL_BITS: u64 = (Self::TAIL_MAX << Self::TAIL_SHIFT) | Self::TAIL_SUCCEEDS;
    const TAG_SHIFT: u32 = 32;
    const OPEN: u64 = 1;
    const WINDOWED: u64 = 2;
    const GENERATION_SHIFT: u32 = 2;

    const CLOSED: Cell = Cell(0);

    /// An open cell for `generation` (a rolling lane's epoch, masked to a generation's
    /// bits), windowed or not, with empty counters.
    #[inline]
    fn open(generation: Generation, windowed: bool) -> Self {
        const _: () = assert!(Generation::BITS + Cell::GENERATION_SHIFT <= 32);
        let tag = (generation.get() << Self::GENERATION_SHIFT)
            | if windowed { Self::WINDOWED } else { 0 }
            | Self::OPEN;
        Cell(tag << Self::TAG_SHIFT)
    }

    /// This cell with its request counter started at `preset` (at most the counter's
    /// capacity): it then has room for that capacity less `preset` admissions.
    #[inline]
    fn preset(self, preset: u64) -> Self {
        Cell(self.0 | preset.min(self.request_capacity()))
    }

    #[inline(always)]
    fn tag(self) -> u64 {
        self.0 >> Self::TAG_SHIFT
    }

    #[inline(always)]
    fn is_open(self) -> bool {
        self.tag() & Self::OPEN != 0
    }

    /// Open and not windowed: counts without a clock.
    #[inline(always)]
    fn is_fast(self) -> bool {
        self.tag() & (Self::OPEN | Self::WINDOWED) == Self::OPEN
    }

    #[inline(always)]
    fn is_windowed(self) -> bool {
        self.tag() & Self::WINDOWED != 0
    }

    #[inline(always)]
    fn generation(self) -> Generation {
        Generation::from_bits(self.tag() >> Self::GENERATION_SHIFT)
    }

    /// Open in `generation` and not windowed.
    #[inline(always)]
    fn is_fast_in(self, generation: Generation) -> bool {
        self.tag() == (generation.get() << Self::GENERATION_SHIFT) | Self::OPEN
    }

    #[inline(always)]
    fn is_narrow(self) -> bool {
        self.0 & Self::NARROW != 0
    }

    #[inline(always)]
    fn request_capacity(self) -> u64 {
        if self.is_narrow() {
            Self::NARROW_COUNTER
        } else {
            Self::COUNTER
        }
    }

    #[inline(always)]
    fn has_request_room(self) -> bool {
        let capacity = self.request_capacity();
        self.0 & capacity < capacity
    }

    #[inline(always)]
    fn successes(self) -> u64 {
        if self.is_narrow() {
            (self.0 >> 10) & Self::NARROW_SUCCESSES
        } else {
            (self.0 >> 16) & Self::SUCCESSES
        }
    }

    #[inline(always)]
    fn tail(self) -> u64 {
        (self.0 >> Self::TAIL_SHIFT) & Self::TAIL_MAX
    }

    /// Room for a success: its counter, and (narrow) a tail of successes that is not full.
    #[inline(always)]
    fn has_success_room(self) -> bool {
        if !self.is_narrow() {
            return (self.0 >> 16) & Self::SUCCESSES < Self::SUCCESSES;
        }
        self.successes() < Self::NARROW_SUCCESSES
            && (self.0 & Self::TAIL_SUCCEEDS == 0 || self.tail() < Self::TAIL_MAX)
    }

    /// Room for a failure: a narrow cell whose failure counter (started at `7 - room`) is
    /// not full.
    #[inline(always)]
    fn has_failure_room(self) -> bool {
        self.is_narrow() && (self.0 >> Self::FAILURE_SHIFT) & Self::FAILURES < Self::FAILURES
    }

    #[inline(always)]
    fn with_request(self) -> Self {
        Cell(self.0 + Self::REQUEST)
    }

    /// One more success (with room): in a narrow cell after a failure it also grows (or
    /// starts) the tail of successes.
    #[inline(always)]
    fn with_success(self) -> Self {
        if !self.is_narrow() {
            return Cell(self.0 + Self::SUCCESS);
        }
        if self.0 & Self::TAIL_BITS == 0 {
            return Cell(self.0 + Self::NARROW_SUCCESS);
        }
        self.with_success_after_failures()
    }

    #[cold]
    fn with_success_after_failures(self) -> Self {
        let counted = self.0 + Self::NARROW_SUCCESS;
        if self.0 & Self::TAIL_SUCCEEDS != 0 {
            Cell(counted + Self::TAIL_ONE)
        } else {
            Cell((counted & !Self::TAIL_BITS) | Self::TAIL_SUCCEEDS | Self::TAIL_ONE)
        }
    }

    /// One more failure (a narrow cell, with room): grows the tail of failures, or starts
    /// one.
    #[inline(always)]
    fn with_failure(self) -> Self {
        let counted = self.0 + Self::FAILURE;
        if self.0 & Self::TAIL_SUCCEEDS == 0 && self.tail() > 0 {
            Cell(counted + Self::TAIL_ONE)
        } else {
            Cell((counted & !Self::TAIL_BITS) | Self::TAIL_ONE)
        }
    }

    /// This empty open cell, narrow with room for `room` failures (its failure counter
    /// started at `7 - room`) if `room` is above zero; else as it is (wide).
    #[inline]
    fn failure_room(self, room: u64) -> Self {
        if room == 0 {
            return self;
        }
        debug_assert!(
            self.0 as u32 == 0,
            "a throttle's preset leaves no room for failures"
        );
        let from = Self::FAILURES - room.min(Self::FAILURES);
        Cell(self.0 | Self::NARROW | (from << Self::FAILURE_SHIFT))
    }

    /// What an open cell counted, its request counter having started at `preset` and (a
    /// narrow one) its failure counter at `7 - failure_room`; nothing for a closed one.
    #[inline]
    fn pending(self, preset: u64, failure_room: u64) -> Pending {
        if !self.is_open() {
            return Pending::default();
        }
        let requests = (self.0 & self.request_capacity()).saturating_sub(preset);
        if !self.is_narrow() {
            return Pending {
                requests,
                successes: self.successes(),
                ..Pending::default()
            };
        }
        let failures_from = Self::FAILURES - failure_room.min(Self::FAILURES);
        let tail = match (self.0 & Self::TAIL_SUCCEEDS != 0, self.tail()) {
            (_, 0) => Tail::None,
            (true, n) => Tail::Successes(n),
            (false, n) => Tail::Failures(n),
        };
        Pending {
            requests,
            successes: self.successes(),
            failures: ((self.0 >> Self::FAILURE_SHIFT) & Self::FAILURES)
                .saturating_sub(failures_from),
            tail,
            rejected: 0,
            throttled: 0,
        }
    }
}

/// One cell and one rejection counter alone on their cache line (128 bytes: the line and
/// the one the hardware prefetches with it), so that threads counting in neighbouring
/// stripes never share one. The cell counts in the closed state, the counter in the open
/// state: a thread writes one line whatever the state.
#[derive(Debug)]
#[repr(align(128))]
struct Stripe {
    cell: AtomicU64,
    rejected: AtomicU64,
    /// A throttled lane's, while it sheds: the calls turned away on this stripe, and the
    /// draws made here (this stripe's own generator stream: no line shared for a draw).
    throttled: AtomicU64,
    draws: AtomicU64,
}

/// The most stripes a lane makes: 64 cache lines, 8 KiB.
const MAX_STRIPES: usize = 64;

/// A lane's stripes, closed: one per core the process may run on (a power of two, at most
/// [`MAX_STRIPES`]).
fn make_stripes() -> Box<[Stripe]> {
    let n = sync::parallelism()
        .next_power_of_two()
        .clamp(2, MAX_STRIPES);
    (0..n)
        .map(|_| Stripe {
            cell: AtomicU64::new(Cell::CLOSED.0),
            rejected: AtomicU64::new(0),
            throttled: AtomicU64::new(0),
            draws: AtomicU64::new(0),
        })
        .collect()
}

/// Requests admitted, successes recorded and open-state rejections made on the lane since
/// the lock last emptied it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Pending {
    pub(crate) requests: u64,
    pub(crate) successes: u64,
    /// Failures counted on the lane (the base cell's only: see [`Lane::fail`]).
    pub(crate) failures: u64,
    /// The run of like results at the end of the lane's (the base cell's) results, once it
    /// counted a failure.
    pub(crate) tail: Tail,
    pub(crate) rejected: u64,
    /// Calls the lane's throttle turned away.
    pub(crate) throttled: u64,
}

impl Pending {
    /// Adds a stripe's counts. A stripe counts no failure, and is never open in the same
    /// period as a base that counted one (a publish opens the base only while there are no
    /// stripes), so the order of the two needs no merging.
    #[inline]
    fn add(&mut self, other: Pending) {
        debug_assert!(other.failures == 0 && other.tail == Tail::None);
        debug_assert!(other.successes == 0 || self.tail == Tail::None);
        self.requests += other.requests;
        self.successes += other.successes;
        self.rejected += other.rejected;
        self.throttled += other.throttled;
    }
}

/// Empties a rejection counter, writing it only if it holds something (a lock holder's
/// swap of a counter a rejection just wrote would take its line for nothing).
#[inline]
fn take(counter: &AtomicU64) -> u64 {
    if counter.load(Ordering::Relaxed) == 0 {
        0
    } else {
        counter.swap(0, Ordering::Relaxed)
    }
}

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

#[derive(Debug)]
pub(crate) struct Lane {
    plan: Plan,
    /// `[mode: 2 bits][0: 62 bits]`: what a call whose cell is closed should do.
    word: AtomicU64,
    /// The end of the current closed-state window (a rolling window's current bucket);
    /// meaningful only while the cells are open and windowed. Written before they are opened.
    window_until: AtomicU64,
    /// A rolling lane's key, `[age: 34 bits][generation: 30 bits]`: the generation and the
    /// window age the open cells count for. Written before they are opened, constant while
    /// they are.
    key: AtomicU64,
    /// A rolling lane's epoch: how many times the lock holder opened its cells, the tag
    /// they carry (masked to a generation's bits). Written only under the state lock.
    epoch: AtomicU64,
    /// The end of the current open period; meaningful only while the word says open. Written
    /// before the word is published. Apart from `window_until`: an open-state rejection reads
    /// it without a compare-and-swap to confirm, so it must never hold a window's end.
    open_until: AtomicU64,
    /// The cell every thread counts in until two collide.
    base: AtomicU64,
    /// The failures the base cell was opened with room for (zero once the stripes are made):
    /// written and read only by lock holders, to fold the base's failure counter.
    failure_room: AtomicU64,
    /// The rejection counter every thread counts in until two collide (on it or on `base`).
    base_rejected: AtomicU64,
    /// The cells threads count in once two collided on `base`.
    stripes: Lazy<Box<[Stripe]>>,
    /// A throttled breaker's: what the lane sheds with (`None` without a throttle).
    throttle: Option<Box<Shedding>>,
    /// A slow-call threshold's: the calls in flight the lane admitted.
    tracked: Option<Tracked>,
    /// With `tracked`: the machine's latest time at the opening, before which no call is
    /// admitted here (see [`Phase::Closed`]'s `since`). Written before the cells are opened.
    since: AtomicU64,
}

/// What a lane that tracks its calls in flight keeps (see [`InFlightSlots`]).
#[derive(Debug)]
struct Tracked {
    slots: Arc<InFlightSlots>,
    /// The slow-call threshold: a success slower than this goes to the lock.
    threshold: Nanos,
}

/// What the lane sheds with, once the machine left it no room ([`Phase::Closed`]'s
/// `shed_from`): each admission computes the throttle's `p` from the window's counts at the
/// last publish plus what this thread's cell counted since, and draws from the breaker's
/// generator when it is above zero. A single thread's calls are decided exactly as the
/// machine would; concurrent ones each see their own cell's counts, not the others'.
#[derive(Debug)]
struct Shedding {
    /// What the open cells' request counters started at, so that each has room for the
    /// admissions the machine allows without it. Written only by the lock holder, before it
    /// opens the cells; read by the next one, closing them.
    preset: AtomicU64,
    throttling: Arc<Throttling>,
    /// Whether the open cells shed (written before they are opened, constant while they are).
    on: AtomicU64,
    /// The throttle's requests and accepts at the last publish (likewise).
    requests: AtomicU64,
    accepts: AtomicU64,
    /// Calls turned away since the last close, folded by the next lock holder.
    throttled: AtomicU64,
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
        let lane = Self {
            plan,
            word: AtomicU64::new(LOCKED << MODE_SHIFT),
            window_until: AtomicU64::new(0),
            key: AtomicU64::new(0),
            epoch: AtomicU64::new(0),
            open_until: AtomicU64::new(0),
            base: AtomicU64::new(Cell::CLOSED.0),
            failure_room: AtomicU64::new(0),
            base_rejected: AtomicU64::new(0),
            stripes: Lazy::new(make_stripes),
            throttle: throttle.map(|throttling| {
                Box::new(Shedding {
                    preset: AtomicU64::new(0),
                    throttling,
                    on: AtomicU64::new(0),
                    requests: AtomicU64::new(0),
                    accepts: AtomicU64::new(0),
                    throttled: AtomicU64::new(0),
                })
            }),
            tracked: tracked
                .filter(|_| plan.tracks)
                .map(|(slots, threshold)| Tracked { slots, threshold }),
            since: AtomicU64::new(0),
        };
        lane.publish(phase);
        lane
    }

    /// The cell this thread counts in, and whether it is the base.
    #[inline(always)]
    fn cell(&self) -> (&AtomicU64, bool) {
        match self.stripes.get() {
            Some(stripes) => (&Self::stripe(stripes).cell, false),
            None => (&self.base, true),
        }
    }

    /// This thread's stripe.
    #[inline(always)]
    fn stripe(stripes: &[Stripe]) -> &Stripe {
        &stripes[Self::stripe_index(stripes)]
    }

    /// The index of this thread's stripe.
    #[inline(always)]
    fn stripe_index(stripes: &[Stripe]) -> usize {
        // `stripes.len()` is a power of two, 2 to 64: the probe's top bits pick one (its
        // low bits are poor: every probe is odd).
        (sync::probe() >> (u32::BITS - stripes.len().trailing_zeros())) as usize
    }

    /// Counts an open-state rejection made lock-free, in this thread's rejection counter: a
    /// compare-and-swap, so that two threads colliding on the base make the stripes (as
    /// they do counting in the closed state) rather than share a counter. The counters are
    /// folded into the totals by the next lock holder, like the cells.
    #[inline]
    pub(crate) fn count_rejection(&self) {
        let (counter, base) = match self.stripes.get() {
            Some(stripes) => (&Self::stripe(stripes).rejected, false),
            None => (&self.base_rejected, true),
        };
        let n = counter.load(Ordering::Relaxed);
        if let Err(found) = counter.compare_exchange(n, n + 1, Ordering::Relaxed, Ordering::Relaxed)
        {
            self.count_rejection_contended(counter, base, n, found);
        }
    }

    /// The counter held `found`, not `expected`: count this rejection anyway, and if another
    /// thread counted in between (the counter went up, not down to a lock holder's drain),
    /// make the stripes (it was the base) or move to another stripe.
    #[cold]
    #[inline(never)]
    fn count_rejection_contended(
        &self,
        counter: &AtomicU64,
        base: bool,
        expected: u64,
        found: u64,
    ) {
        counter.fetch_add(1, Ordering::Relaxed);
        if found < expected {
            return; // drained by a lock holder: no collision
        }
        if base {
            self.stripes.force();
        } else {
            sync::rehash();
        }
    }

    /// A compare-and-swap on this thread's cell, which held `expected`, found `found`: if
    /// another counting thread's count got in first, make the stripes (the cell was the base)
    /// or move this thread to another stripe. A lock holder's close and reopening is no
    /// collision, and makes nothing: the tag changed, or the layout or room did (a reopened
    /// cell may compare higher: narrow, or with less room for failures), or a counter went
    /// down (emptied).
    #[cold]
    fn contended(&self, base: bool, expected: Cell, found: Cell) {
        let requests = |c: Cell| c.0 & c.request_capacity();
        let failures = |c: Cell| c.0 & (Cell::FAILURES << Cell::FAILURE_SHIFT);
        // A result counted here always leaves a tail (once there is one); a reopened cell has
        // none.
        let untailed = found.0 & Cell::TAIL_BITS == 0;
        let other_room = failures(found) < failures(expected)
            || (untailed && failures(found) != failures(expected))
            || (untailed && expected.0 & Cell::TAIL_BITS != 0);
        let reopened = found.tag() != expected.tag()
            || found.is_narrow() != expected.is_narrow()
            || requests(found) < requests(expected)
            || found.successes() < expected.successes()
            || (found.is_narrow() && other_room);
        if reopened {
            return;
        }
        if base {
            self.stripes.force();
        } else {
            sync::rehash();
        }
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
            if let Some(tracked) = &self.tracked {
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
        if self.plan.epochs {
            Self::ticket_of(self.key.load(Ordering::Acquire))
        } else {
            Ticket::unaged(c.generation())
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
        if let Some(tracked) = &self.tracked {
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

    /// An admission at `now` on a lane that tracks its calls in flight: a slot claimed first,
    /// then the cell's compare-and-swap, then the slot published with the call's key and
    /// start (or given back if the compare-and-swap failed), retrying under contention. The
    /// opening's window end (which the lock holder bounded by the first instant a call in
    /// flight may be overdue) and `since` are read after the cell: a compare-and-swap that
    /// succeeds proves both were its opening's (the cells carry an epoch).
    #[inline(never)]
    fn admit_tracked(&self, tracked: &Tracked, now: Nanos) -> Entry {
        loop {
            let (cell, base) = self.cell();
            let c = Cell(cell.load(Ordering::Acquire));
            if !c.is_open() {
                if self.word.load(Ordering::Acquire) >> MODE_SHIFT == OPEN {
                    let until = self.open_until.load(Ordering::Acquire);
                    return Entry::Open { until, now };
                }
                return Entry::Locked { now: Some(now) };
            }
            if !c.has_request_room()
                || now > self.window_until.load(Ordering::Acquire)
                || now < self.since.load(Ordering::Acquire)
            {
                return Entry::Locked { now: Some(now) };
            }
            let ticket = self.ticket_in(c);
            let Some(key) = Self::slot_key(ticket) else {
                return Entry::Locked { now: Some(now) };
            };
            // A thread's probe spreads the threads over the table (its top bits: its low
            // ones are poor).
            let hint = (sync::probe() >> 26) as usize;
            let Some(slot) = tracked.slots.claim(hint) else {
                return Entry::Locked { now: Some(now) };
            };
            match Self::try_count(cell, c, c.with_request()) {
                Ok(()) => {
                    tracked.slots.publish(slot, key, now);
                    return Entry::Admitted {
                        ticket: ticket.in_slot(slot),
                    };
                }
                Err(found) => {
                    tracked.slots.abandon(slot);
                    self.contended(base, c, found);
                }
            }
        }
    }

    /// The key a call's slot holds: its rolling key, while it fits a slot.
    #[inline(always)]
    fn slot_key(ticket: Ticket) -> Option<u64> {
        Self::key_of(ticket).filter(|&key| key <= MAX_KEY)
    }

    /// Records the success at `now` of a call this lane admitted in an in-flight slot
    /// (`ticket`, started at `started`) lock-free, if it was not slow, was not counted as
    /// slow while in flight, and its cell is open for it with room, the window not ended and
    /// `now` not older than the opening's `since`:
    /// the slot is marked completing, the cell counts the success, and the slot is freed
    /// (see [`InFlightSlots`]). `false` sends it to the lock, its slot still held.
    #[inline(never)]
    pub(crate) fn succeed_tracked(&self, ticket: Ticket, started: Nanos, now: Nanos) -> bool {
        let (Some(tracked), Some(slot), Some(key)) =
            (&self.tracked, ticket.slot(), Self::slot_key(ticket))
        else {
            return false;
        };
        if now.saturating_sub(started) > tracked.threshold {
            return false;
        }
        loop {
            let (cell, base) = self.cell();
            let c = Cell(cell.load(Ordering::Acquire));
            // A reading older than the opening's `since` comes after a lock step that saw a
            // later time: under the lock it would be timed at that time (and may be slow).
            let counting = c.is_open()
                && c.has_success_room()
                && self.counts_for(c, ticket)
                && now <= self.window_until.load(Ordering::Acquire)
                && now >= self.since.load(Ordering::Acquire);
            if !counting || !tracked.slots.begin_success(slot, key) {
                return false;
            }
            match Self::try_count(cell, c, c.with_success()) {
                Ok(()) => {
                    tracked.slots.finish(slot);
                    return true;
                }
                Err(found) => {
                    tracked.slots.resume(slot, key);
                    self.contended(base, c, found);
                }
            }
        }
    }

    /// The throttle's shedding state, while the open cells shed.
    #[inline(always)]
    fn shedding(&self) -> Option<&Shedding> {
        self.throttle
            .as_deref()
            .filter(|t| t.on.load(Ordering::Acquire) != 0)
    }

    /// An admission while the cells shed: the throttle's `p` from the published counts and
    /// this thread's cell, a draw when it is above zero, then the cell's count, retried
    /// under contention. `clock` has been read (the cells are windowed while shedding).
    #[cold]
    #[inline(never)]
    fn admit_shedding(&self, shedding: &Shedding, clock: impl FnOnce() -> Nanos) -> Entry {
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
            let mine = c.pending(0, 0);
            let throttled = if t.count_throttled {
                counter.load(Ordering::Relaxed)
            } else {
                0
            };
            let requests = shedding.requests.load(Ordering::Acquire) + mine.requests + throttled;
            let accepts = shedding.accepts.load(Ordering::Acquire) + mine.successes;
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
    /// windowed and `clock` (read then, once) is within its window. `clock` gives `None`
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
            && clock().is_some_and(|now| now <= self.window_until.load(Ordering::Acquire))
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
                || (c.is_windowed() && now.get() > self.window_until.load(Ordering::Acquire))
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
        if self.plan.epochs {
            Self::key_of(ticket) == Some(self.key.load(Ordering::Acquire))
        } else {
            c.generation() == ticket.generation()
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

    /// Makes the stripes now (closed), as a collision would: for loom models that start
    /// striped.
    #[cfg(loom)]
    pub(crate) fn make_stripes(&self) {
        self.stripes.force();
    }

    /// Closes the lane for a lock holder about to change the machine, handing it what was
    /// recorded lock-free. Call with the state lock held, and [`publish`](Lane::publish)
    /// before releasing it.
    ///
    /// (Inlined: its three counters come back in registers. Returned through memory, they
    /// were stored one word at a time and read back two at once, a store-forwarding stall
    /// that cost a locked operation about a quarter of its time.)
    #[inline(always)]
    pub(crate) fn close(&self) -> Pending {
        let mut pending = Pending::default();
        // Only lock holders write the mode word and open cells, and a locked lane was
        // published with every cell closed and empty: then there is nothing to swap (a cell
        // made since is made closed), and only the rejection counters may hold anything.
        let mode = self.word.load(Ordering::Relaxed) >> MODE_SHIFT;
        if mode != LOCKED && mode != STEPPING {
            self.word.store(STEPPING << MODE_SHIFT, Ordering::Release);
            let preset = self
                .throttle
                .as_ref()
                .map_or(0, |t| t.preset.load(Ordering::Relaxed));
            // The base first: it holds what was counted before the stripes were opened (a
            // publish opens the base only while there are none), failures included.
            let room = self.failure_room.load(Ordering::Relaxed);
            pending = Cell(self.base.swap(Cell::CLOSED.0, Ordering::AcqRel)).pending(preset, room);
            if let Some(stripes) = self.stripes.get() {
                for stripe in stripes.iter() {
                    let cell = Cell(stripe.cell.swap(Cell::CLOSED.0, Ordering::AcqRel));
                    pending.add(cell.pending(preset, 0));
                }
            }
        }
        // Rejection counters are not part of the cell protocol: a rejection counts whenever
        // it lands, before this swap (folded now) or after (folded by the next lock holder).
        if let Some(shedding) = &self.throttle {
            pending.throttled = shedding.throttled.swap(0, Ordering::AcqRel);
            if let Some(stripes) = self.stripes.get() {
                pending.throttled += stripes
                    .iter()
                    .map(|s| s.throttled.swap(0, Ordering::AcqRel))
                    .sum::<u64>();
            }
        }
        pending.rejected += take(&self.base_rejected);
        if let Some(stripes) = self.stripes.get() {
            pending.rejected += stripes.iter().map(|s| take(&s.rejected)).sum::<u64>();
        }
        pending
    }

    /// Publishes what callers may do without the lock in `phase`. Call with the state lock
    /// held, after [`close`](Lane::close) (or at construction): the cells are empty.
    pub(crate) fn publish(&self, phase: Phase) {
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
            Phase::Closed { shed_from, .. } if self.plan.counts_closed => shed_from,
            _ => None,
        };
        // (Only a throttle leaves less room than a counter holds: without one, none.)
        let preset = if shed_from.is_some() || self.throttle.is_none() {
            0
        } else {
            preset
        };
        if let Some(shedding) = &self.throttle {
            let (requests, accepts) = shed_from.unwrap_or((0, 0));
            shedding.preset.store(preset, Ordering::Relaxed);
            shedding.requests.store(requests, Ordering::Release);
            shedding.accepts.store(accepts, Ordering::Release);
            shedding
                .on
                .store(u64::from(shed_from.is_some()), Ordering::Release);
        }
        let (mode, cell) = match phase {
            // A lane that tracks its calls, while a fast success may trip the policy.
            Phase::Closed { locked: true, .. } => (LOCKED, Cell::CLOSED),
            Phase::Closed {
                generation,
                age,
                window_end,
                since,
                ..
            } if self.plan.counts_closed && self.plan.epochs => {
                match (Self::key_of(Ticket::aged(generation, age)), window_end) {
                    (Some(key), Some(until)) => {
                        // A new epoch at every opening, so that a cell of one bucket is never
                        // mistaken for the next one's (its counters may be back to zero).
                        let epoch = self.epoch.load(Ordering::Relaxed).wrapping_add(1);
                        self.epoch.store(epoch, Ordering::Relaxed);
                        self.key.store(key, Ordering::Release);
                        self.window_until.store(until, Ordering::Release);
                        self.since.store(since, Ordering::Release);
                        (COUNTING, Cell::open(Generation::from_bits(epoch), true))
                    }
                    _ => (LOCKED, Cell::CLOSED),
                }
            }
            Phase::Closed {
                generation,
                window_end,
                ..
            } if self.plan.counts_closed => {
                // A policy that measures latency has windowed cells, windowless or not: an
                // admission then reads the clock, its start.
                let windowed =
                    window_end.is_some() || self.plan.needs_latency || shed_from.is_some();
                if windowed {
                    // Without a window, an end no reading reaches but a clock that panicked
                    // (read as `Nanos::MAX`, which must take the lock).
                    let until = window_end.unwrap_or(Nanos::MAX - 1);
                    self.window_until.store(until, Ordering::Release);
                }
                (COUNTING, Cell::open(generation, windowed))
            }
            Phase::Open { until } => {
                self.open_until.store(until, Ordering::Release);
                (OPEN, Cell::CLOSED)
            }
            Phase::Closed { .. } | Phase::HalfOpen | Phase::Forced => (LOCKED, Cell::CLOSED),
        };
        let cell = if cell.is_open() {
            cell.preset(preset)
        } else {
            cell
        };
        // Failures count on the base alone, in one order with its successes: once the stripes
        // are made, the base is left closed and every failure takes the lock.
        match self.stripes.get() {
            None => {
                let room = match phase {
                    Phase::Closed { failure_room, .. } if cell.is_open() => failure_room,
                    _ => 0,
                };
                self.failure_room.store(room, Ordering::Relaxed);
                let base = if cell.is_open() {
                    cell.failure_room(room)
                } else {
                    cell
                };
                self.base.store(base.0, Ordering::Release);
            }
            Some(stripes) => {
                self.failure_room.store(0, Ordering::Relaxed);
                let cell = if cell.is_open() {
                    cell.failure_room(0)
                } else {
                    cell
                };
                for stripe in stripes.iter() {
                    stripe.cell.store(cell.0, Ordering::Release);
                }
            }
        }
        self.word.store(mode << MODE_SHIFT, Ordering::Release);
    }

    /// The bytes this lane's stripes take (zero until contention made them).
    #[cfg(test)]
    fn stripe_bytes(&self) -> usize {
        self.stripes
            .get()
            .map_or(0, |s| s.len() * std::mem::size_of::<Stripe>())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::policy::{ConsecutiveFailures, TripPolicy};

    fn never() -> Nanos {
        panic!("the fast lane reads no clock")
    }

    fn unread() -> Option<Nanos> {
        panic!("no clock read for a fast cell, or a result it does not count")
    }

    fn gen(n: u64) -> Generation {
        Generation::from_bits(n)
    }

    fn t(n: u64) -> Ticket {
        Ticket::unaged(gen(n))
    }

    fn admitted(n: u64) -> Entry {
        Entry::Admitted { ticket: t(n) }
    }

    fn counting() -> Plan {
        Plan::of(
            &ConsecutiveFailures::default().capabilities(),
            false,
            false,
            false,
        )
    }

    fn fast(n: u64) -> Lane {
        Lane::new(
            counting(),
            Phase::Closed {
                generation: gen(n),
                age: 0,
                window_end: None,
                room: u64::MAX,
                failure_room: 0,
                shed_from: None,
                since: 0,
                locked: false,
            },
            None,
            None,
        )
    }

    #[test]
    fn the_plan_keeps_success_and_slow_call_policies_off_the_lane() {
        fn caps(latency: bool, successes: bool) -> Capabilities {
            Capabilities::default()
                .needs_latency(latency)
                .needs_successes(successes)
        }
        assert!(counting().counts_closed);
        let rolling = Plan::of(
            &ConsecutiveFailures::default().capabilities(),
            true,
            false,
            false,
        );
        assert!(
            rolling.counts_closed && rolling.epochs,
            "a rolling window counts too"
        );
        let latency = Plan::of(&caps(true, false), false, false, false);
        assert!(
            latency.counts_closed && latency.needs_latency(),
            "latency alone: the breaker keeps the start"
        );
        assert!(!Plan::of(&caps(false, true), false, false, false).counts_closed);
        assert!(!Plan::of(&caps(true, true), false, false, false).counts_closed);
        assert!(
            Plan::of(&caps(true, true), false, false, true).counts_closed,
            "successes taken by a recorder"
        );
        let slow = caps(true, false).slow_call_threshold(std::time::Duration::from_secs(1));
        let tracked = Plan::of(&slow, false, false, false);
        assert!(
            tracked.counts_closed && tracked.tracks() && tracked.epochs,
            "a time window: admissions tracked in the lane's slots, its cells epoch-tagged"
        );
        assert!(
            !Plan::of(&slow, false, true, true).counts_closed,
            "a count window: every call under the lock"
        );
        assert!(Plan::of(&caps(false, false), false, false, false).counts_closed);
        let closed = Phase::Closed {
            generation: gen(1),
            age: 0,
            window_end: None,
            room: u64::MAX,
            failure_room: 0,
            shed_from: None,
            since: 0,
            locked: false,
        };
        let lane = Lane::new(
            Plan::of(&caps(false, true), false, false, false),
            closed,
            None,
            None,
        );
        assert_eq!(lane.admit(|| 5), Entry::Locked { now: None });
    }

    #[test]
    fn fast_lane_counts_and_hands_over() {
        let lane = fast(7);
        assert_eq!(lane.admit(never), admitted(7));
        assert_eq!(lane.admit(never), admitted(7));
        assert_eq!(lane.succeed(t(7), never), Ok(None));
        assert_eq!(
            lane.succeed(t(6), never),
            Err(None),
            "another generation takes the lock"
        );
        assert_eq!(
            lane.close(),
            Pending {
                requests: 2,
                successes: 1,
                rejected: 0,
                throttled: 0,
                ..Pending::default()
            }
        );
        lane.publish(Phase::Closed {
            generation: gen(7),
            age: 0,
            window_end: None,
            room: u64::MAX,
            failure_room: 0,
            shed_from: None,
            since: 0,
            locked: false,
        });
        assert_eq!(lane.admit(never), admitted(7), "fast again");
        assert_eq!(
            lane.close(),
            Pending {
                requests: 1,
                successes: 0,
                rejected: 0,
                throttled: 0,
                ..Pending::default()
            }
        );
        assert_eq!(lane.admit(never), Entry::Locked { now: None }, "closed");
        assert_eq!(lane.succeed(t(7), never), Err(None));
    }

    #[test]
    fn a_full_counter_sends_callers_to_the_lock() {
        let last = (1 << Generation::BITS) - 1;
        let lane = fast(last);
        // The success counter (32 767) fills first, then the request counter (65 535).
        for _ in 0..Cell::SUCCESSES {
            assert!(matches!(lane.admit(never), Entry::Admitted { .. }));
            assert_eq!(lane.succeed(t(last), never), Ok(None));
        }
        assert!(matches!(lane.admit(never), Entry::Admitted { .. }));
        assert_eq!(lane.succeed(t(last), never), Err(None));
        for _ in Cell::SUCCESSES + 1..Cell::COUNTER {
            assert!(matches!(lane.admit(never), Entry::Admitted { .. }));
        }
        assert_eq!(lane.admit(never), Entry::Locked { now: None });
        let pending = lane.close();
        assert_eq!(
            (pending.requests, pending.successes),
            (Cell::COUNTER, Cell::SUCCESSES)
        );
    }

    /// Closed in generation 7 (no window), with room for `room` failures.
    fn closed_with_room(room: u64) -> Phase {
        Phase::Closed {
            generation: gen(7),
            age: 0,
            window_end: None,
            room: u64::MAX,
            failure_room: room,
            shed_from: None,
            since: 0,
            locked: false,
        }
    }

    /// A lane with room for `room` failures in generation 7 (no window).
    fn failing(room: u64) -> Lane {
        Lane::new(counting(), closed_with_room(room), None, None)
    }

    #[test]
    fn a_narrow_cell_keeps_its_results_in_order() {
        let lane = failing(3);
        let results = |lane: &Lane, pattern: &str| {
            for c in pattern.chars() {
                assert!(matches!(lane.admit(never), Entry::Admitted { .. }));
                let counted = if c == 'S' {
                    lane.succeed_fast(t(7), unread)
                } else {
                    lane.fail(t(7), unread)
                };
                assert!(counted, "{pattern}: {c} on the lane");
            }
        };
        results(&lane, "SSFSF");
        assert!(matches!(lane.admit(never), Entry::Admitted { .. }));
        assert!(lane.fail(t(7), unread), "the third failure: room for three");
        assert!(matches!(lane.admit(never), Entry::Admitted { .. }));
        assert!(!lane.fail(t(7), unread), "no room for a fourth");
        assert!(!lane.fail(t(6), unread), "another generation's failure");
        let pending = lane.close();
        assert_eq!(
            (
                pending.requests,
                pending.successes,
                pending.failures,
                pending.tail
            ),
            (7, 3, 3, Tail::Failures(2))
        );
        lane.publish(closed_with_room(2));
        results(&lane, "FSS");
        let pending = lane.close();
        assert_eq!((pending.failures, pending.tail), (1, Tail::Successes(2)));
        // No room: a wide cell, which takes no failure.
        lane.publish(closed_with_room(0));
        assert!(!lane.fail(t(7), unread));
        assert_eq!(lane.close().tail, Tail::None);
    }

    /// A caller's compare-and-swap that fails only because a lock holder (a read) closed
    /// the cell and reopened it narrow, or with another room, is no collision.
    #[test]
    fn a_reopening_with_another_room_is_no_collision() {
        for (from, to) in [(0, 3), (3, 1), (1, 3)] {
            let lane = failing(from);
            assert!(matches!(lane.admit(never), Entry::Admitted { .. }));
            let c = Cell(lane.base.load(Ordering::Acquire));
            lane.close();
            lane.publish(closed_with_room(to));
            let found = Lane::try_count(&lane.base, c, c.with_request()).unwrap_err();
            lane.contended(true, c, found);
            assert_eq!(lane.stripe_bytes(), 0, "room {from} then {to}");
        }
        // A cell that counted a failure of an earlier period's admission, reopened with the
        // room it had less that failure: the same failure counter, but no tail.
        let lane = failing(2);
        assert!(lane.fail(t(7), unread));
        let c = Cell(lane.base.load(Ordering::Acquire));
        lane.close();
        lane.publish(closed_with_room(1));
        let found = Lane::try_count(&lane.base, c, c.with_request()).unwrap_err();
        lane.contended(true, c, found);
        assert_eq!(lane.stripe_bytes(), 0, "a tail gone is a reopening");
        // Another thread's failure in between is one.
        let lane = failing(3);
        let c = Cell(lane.base.load(Ordering::Acquire));
        assert!(lane.fail(t(7), unread));
        let found = Lane::try_count(&lane.base, c, c.with_request()).unwrap_err();
        lane.contended(true, c, found);
        assert_ne!(lane.stripe_bytes(), 0, "a failure counted in between");
    }

    #[test]
    fn once_striped_every_failure_takes_the_lock() {
        let lane = failing(7);
        lane.stripes.force();
        lane.close();
        lane.publish(closed_with_room(7));
        assert!(matches!(lane.admit(never), Entry::Admitted { .. }));
        assert!(
            !lane.fail(t(7), unread),
            "striped: the lock keeps the order"
        );
        assert!(
            lane.succeed_fast(t(7), unread),
            "successes still count here"
        );
        assert_eq!(
            Cell(lane.base.load(Ordering::Acquire)),
            Cell::CLOSED,
            "the base stays closed once the stripes are opened"
        );
    }

    #[test]
    fn a_windowed_lane_counts_until_its_window_ends() {
        let lane = Lane::new(
            counting(),
            Phase::Closed {
                generation: gen(3),
                age: 0,
                window_end: Some(100),
                room: u64::MAX,
                failure_room: 0,
                shed_from: None,
                since: 0,
                locked: false,
            },
            None,
            None,
        );
        assert_eq!(lane.admit(|| 100), Entry::Admitted { ticket: t(3) });
        assert_eq!(lane.succeed(t(3), || 100), Ok(Some(100)));
        // Strictly after `until` the window has expired: the lock starts the next one.
        assert_eq!(lane.admit(|| 101), Entry::Locked { now: Some(101) });
        assert_eq!(lane.succeed(t(3), || 101), Err(Some(101)));
        assert_eq!(
            lane.succeed(t(2), never),
            Err(None),
            "stale: no clock needed"
        );
        assert_eq!(
            lane.close(),
            Pending {
                requests: 1,
                successes: 1,
                rejected: 0,
                throttled: 0,
                ..Pending::default()
            }
        );
    }

    /// A rolling lane, open for `age` of `generation` until `bucket_end`.
    fn rolling(generation: u64, age: u64, bucket_end: Nanos) -> Lane {
        let lane = Lane::new(
            Plan::of(
                &ConsecutiveFailures::default().capabilities(),
                true,
                false,
                false,
            ),
            Phase::Closed {
                generation: gen(generation),
                age,
                window_end: Some(bucket_end),
                room: u64::MAX,
                failure_room: 0,
                shed_from: None,
                since: 0,
                locked: false,
            },
            None,
            None,
        );
        assert_eq!(lane.epoch.load(Ordering::Relaxed), 1, "opened once");
        lane
    }

    fn rolling_at(lane: &Lane, generation: u64, age: u64, bucket_end: Nanos) {
        lane.publish(Phase::Closed {
            generation: gen(generation),
            age,
            window_end: Some(bucket_end),
            room: u64::MAX,
            failure_room: 0,
            shed_from: None,
            since: 0,
            locked: false,
        });
    }

    #[test]
    fn a_rolling_lane_counts_for_its_bucket_and_sends_the_others_to_the_lock() {
        let lane = rolling(3, 5, 100);
        let aged = Ticket::aged(gen(3), 5);
        assert_eq!(lane.admit(|| 100), Entry::Admitted { ticket: aged });
        assert_eq!(lane.succeed(aged, || 100), Ok(Some(100)));
        assert_eq!(
            lane.succeed(Ticket::aged(gen(3), 4), never),
            Err(None),
            "an earlier bucket's result is the lock's, without a clock read"
        );
        assert_eq!(
            lane.succeed(Ticket::aged(gen(2), 5), never),
            Err(None),
            "another generation's too"
        );
        assert_eq!(lane.succeed(Ticket::SHADOW, never), Err(None));
        assert!(
            lane.succeed_fast(aged, || Some(100)),
            "in the bucket: counted inline"
        );
        assert!(
            !lane.succeed_fast(aged, || Some(101)),
            "past it: the slow path"
        );
        assert!(
            !lane.succeed_fast(aged, || None),
            "a user clock: the slow path"
        );
        assert!(!lane.succeed_fast(Ticket::aged(gen(3), 4), unread));
        assert_eq!(
            lane.admit(|| 101),
            Entry::Locked { now: Some(101) },
            "the bucket ended"
        );
        assert_eq!(lane.succeed(aged, || 101), Err(Some(101)));
        assert_eq!(
            lane.close(),
            Pending {
                requests: 1,
                successes: 2,
                rejected: 0,
                throttled: 0,
                ..Pending::default()
            }
        );
        rolling_at(&lane, 3, 6, 200);
        assert_eq!(
            lane.admit(|| 150),
            Entry::Admitted {
                ticket: Ticket::aged(gen(3), 6)
            }
        );
        assert_eq!(lane.succeed(aged, never), Err(None), "age 5 rolled");
    }

    #[test]
    fn a_rolling_lanes_next_bucket_never_takes_a_count_meant_for_the_last() {
        let lane = rolling(1, 0, 10);
        // A caller loads its (empty) cell in age 0, then the lock holder rolls to age 1:
        // the new cell is empty too, but its epoch differs, so the caller's
        // compare-and-swap fails and it starts over (seeing age 1's key).
        let loaded = Cell(lane.base.load(Ordering::Acquire));
        lane.close();
        rolling_at(&lane, 1, 1, 20);
        let reopened = Cell(lane.base.load(Ordering::Acquire));
        assert_ne!(loaded, reopened);
        assert_eq!(loaded.pending(0, 0), reopened.pending(0, 0));
        assert!(Lane::try_count(&lane.base, loaded, loaded.with_success()).is_err());
        // The generation keeps its bits; an age past the key's bits counts under the lock.
        rolling_at(&lane, 1, 1 << KEY_AGE_BITS, 30);
        assert_eq!(lane.admit(|| 25), Entry::Locked { now: None });
    }

    fn stepping(lane: &Lane) -> bool {
        lane.word.load(Ordering::Acquire) >> MODE_SHIFT == STEPPING
    }

    #[test]
    fn a_closed_lane_is_stepping_until_its_next_publish() {
        let lane = fast(2);
        assert!(!stepping(&lane), "counting");
        lane.close();
        assert!(stepping(&lane), "a lock holder closed it");
        assert_eq!(lane.admit(never), Entry::Locked { now: None });
        assert_eq!(lane.peek_open(never), Peek::AskTheLock);
        lane.publish(Phase::HalfOpen);
        assert!(
            !stepping(&lane),
            "published locked: half-open waits for the machine"
        );
        lane.close();
        assert!(
            !stepping(&lane),
            "a locked lane has nothing a caller could wait for"
        );
        lane.publish(Phase::Open { until: 10 });
        lane.close();
        assert!(stepping(&lane), "an open lane closed for a step");
        assert_eq!(lane.peek_open(|| 5), Peek::AskTheLock);
    }

    /// A throttled lane whose room is more than one counter holds but less than its
    /// stripes' counters together: the stripes share the room, so that no interleaving of
    /// threads admits more than it without the machine.
    #[test]
    fn stripes_share_a_throttles_room_that_one_counter_could_hold_alone() {
        let throttling = Arc::new(Throttling::new(
            crate::throttle::Throttle::new(2.0).expect("valid"),
        ));
        let lane = Lane::new(counting(), Phase::Forced, Some(throttling), None);
        lane.stripes.force();
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

    #[test]
    fn a_collision_on_the_base_makes_closed_stripes_that_the_next_publish_opens() {
        let lane = fast(4);
        assert!(matches!(lane.admit(never), Entry::Admitted { .. }));
        assert_eq!(lane.stripe_bytes(), 0, "uncontended: no stripes");
        // Another thread's count lands between this thread's load and its CAS.
        let c = Cell(lane.base.load(Ordering::Acquire));
        lane.base.fetch_add(Cell::REQUEST, Ordering::AcqRel);
        let found = Lane::try_count(&lane.base, c, c.with_request()).unwrap_err();
        lane.contended(true, c, found);
        assert!(lane.stripe_bytes() >= 2 * 128);
        assert_eq!(lane.stripe_bytes() % 128, 0);
        // The new stripes are closed: the lock is taken until it republishes.
        assert_eq!(lane.admit(never), Entry::Locked { now: None });
        assert_eq!(
            lane.close(),
            Pending {
                requests: 2,
                successes: 0,
                rejected: 0,
                throttled: 0,
                ..Pending::default()
            },
            "the base's counts are folded in"
        );
        lane.publish(Phase::Closed {
            generation: gen(5),
            age: 0,
            window_end: None,
            room: u64::MAX,
            failure_room: 0,
            shed_from: None,
            since: 0,
            locked: false,
        });
        assert_eq!(lane.admit(never), admitted(5));
        assert!(lane.succeed_fast(t(5), unread));
        assert!(
            !lane.succeed_fast(t(4), unread),
            "an old generation's success takes the lock"
        );
        assert_eq!(
            lane.close(),
            Pending {
                requests: 1,
                successes: 1,
                rejected: 0,
                throttled: 0,
                ..Pending::default()
            }
        );
    }

    #[test]
    fn a_shadow_calls_success_never_counts_on_the_lane() {
        // Every generation's cell, the last one before the wrap and the first included: a
        // dry run's shadow call must take the lock, where the machine drops it.
        for n in [0, 1, (1 << Generation::BITS) - 1] {
            let lane = Lane::new(
                counting(),
                Phase::Closed {
                    generation: gen(n),
                    age: 0,
                    window_end: None,
                    room: u64::MAX,
                    failure_room: 0,
                    shed_from: None,
                    since: 0,
                    locked: false,
                },
                None,
                None,
            );
            assert_eq!(lane.admit(never), admitted(n));
            assert!(!lane.succeed_fast(Ticket::SHADOW, unread), "generation {n}");
            assert_eq!(
                lane.succeed(Ticket::SHADOW, never),
                Err(None),
                "generation {n}"
            );
            assert!(
                lane.succeed_fast(t(n), unread),
                "the cell still counts its own"
            );
        }
    }

    #[test]
    fn open_lane_gives_its_deadline_with_the_reading() {
        let lane = Lane::new(counting(), Phase::Open { until: 42 }, None, None);
        assert_eq!(lane.admit(|| 40), Entry::Open { until: 42, now: 40 });
        assert_eq!(lane.succeed(t(0), never), Err(None));
        lane.publish(Phase::HalfOpen);
        assert_eq!(lane.admit(never), Entry::Locked { now: None });
    }

    #[test]
    fn an_open_lanes_peek_says_what_is_left_of_the_open_period() {
        let lane = Lane::new(counting(), Phase::Open { until: 42 }, None, None);
        let rejected = |ns| {
            Peek::Open(Rejected::Open {
                retry_after: std::time::Duration::from_nanos(ns),
            })
        };
        assert_eq!(lane.peek_open(|| 40), rejected(2));
        assert_eq!(lane.peek_open(|| 42), rejected(1), "the last open instant");
        assert_eq!(lane.peek_open(|| 43), Peek::Expired);
    }

    #[test]
    fn open_rejections_are_counted_and_folded_by_the_next_close() {
        let lane = Lane::new(counting(), Phase::Open { until: 42 }, None, None);
        for _ in 0..5 {
            lane.count_rejection();
        }
        assert_eq!(lane.close().rejected, 5);
        assert_eq!(lane.close().rejected, 0, "folded once");
        lane.publish(Phase::Open { until: 42 });
        lane.stripes.force();
        lane.count_rejection();
        lane.count_rejection();
        assert_eq!(lane.close().rejected, 2, "striped counters are folded too");
    }
}
