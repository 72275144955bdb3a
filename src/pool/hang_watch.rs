//! The pool's watch for hung endpoints ([`Pool::deadline`](super::Pool::deadline)), without a
//! lock: each endpoint's [`Progress`] (the start times of the calls it tracks in flight, and
//! when it last answered) and the pool's [`NextLook`] (a lower bound on when the first
//! tracked call could hang).
//!
//! A call that goes out takes a start slot, then lowers the bound to its due time if that is
//! earlier ([`Progress::start`]). The look ([`NextLook::look`]) claims the bound (moves it a
//! deadline past its own time: no call that goes out from then on is due earlier), reads
//! every endpoint's slots, writes off the hung ones, and lowers the bound to the first due
//! time it found. The slot's claim, the bound's read and the look's claim and reads are all
//! sequentially consistent, so that a call and a look that race never forget the call:
//! either the look reads its slot, or the call reads the bound the look claimed, and lowers
//! it. The atomics are `crate::sync`'s: under `--cfg loom`, the models in `tests/loom.rs`
//! run this code through `LoomHangWatch` (every store to a slot is sequentially consistent
//! too, for loom's sake: see [`Progress::end`]).

use std::num::NonZeroU64;

use crate::nanos::Nanos;
use crate::sync::{AtomicU64, Ordering};

/// How many calls in flight at once an endpoint tracks for the deadline: its hang is judged
/// on those (a hang holds its calls, so the slots fill with hanging ones).
const START_SLOTS: usize = 4;

/// The pool's next look for hangs, on its clock: no tracked call can hang before then (a
/// lower bound; `u64::MAX`, none tracked). Read by every pick; lowered by a call that goes
/// out due earlier (almost never: calls go out in time order), set by the look.
#[derive(Debug)]
pub(super) struct NextLook(AtomicU64);

impl NextLook {
    /// No call tracked yet: no look due.
    pub(super) fn new() -> Self {
        Self(AtomicU64::new(Nanos::MAX))
    }

    /// Whether a look is due at `now`: one relaxed read per pick (a stale bound delays the
    /// look to a later pick, or finds it claimed).
    #[inline]
    pub(super) fn due(&self, now: Nanos) -> bool {
        now >= self.0.load(Ordering::Relaxed)
    }

    /// A call tracked from now on could hang at `due`: the next look comes no later.
    #[inline]
    fn lower(&self, due: Nanos) {
        // Calls go out in time order, so this is almost never earlier than the next look:
        // one read, and no write. Sequentially consistent with the slot's claim before it,
        // and with the look's claim: either the look reads the slot, or this reads the
        // bound it claimed.
        if due < self.0.load(Ordering::SeqCst) {
            self.0.fetch_min(due, Ordering::SeqCst);
        }
    }

    /// The look for hangs at `now`, if it is due and no other look claimed it first: every
    /// endpoint of `endpoints` (its [`Progress`] given by `progress`) whose tracked call is
    /// due by `now` has its calls written off and is handed to `hung`, and the next look is
    /// set for the first due time of the calls tracked now. Returns that first due time
    /// (`u64::MAX`: none tracked), or `None` when this look claimed nothing. `hung` must
    /// not unwind (keep a panic for after: the next look is set last).
    pub(super) fn look<E>(
        &self,
        now: Nanos,
        deadline: Nanos,
        endpoints: impl IntoIterator<Item = E>,
        progress: impl Fn(&E) -> &Progress,
        mut hung: impl FnMut(E),
    ) -> Option<Nanos> {
        // The claim first: a call that goes out after it and is missed by the reads below
        // reads this bound, and lowers it to its own due time.
        self.0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |due| {
                (now >= due).then_some(now.saturating_add(deadline))
            })
            .ok()?;
        let mut first_due = Nanos::MAX;
        for endpoint in endpoints {
            let watched = progress(&endpoint);
            match watched.hang_due(deadline) {
                Some(due) if due <= now => {
                    watched.write_off();
                    hung(endpoint);
                }
                Some(due) => first_due = first_due.min(due),
                None => {}
            }
        }
        if first_due < Nanos::MAX {
            self.0.fetch_min(first_due, Ordering::SeqCst);
        }
        Some(first_due)
    }
}

/// An endpoint's progress, for the deadline: the start times of the calls in flight it
/// tracks, and when it last answered, on the pool's clock.
#[derive(Debug, Default)]
pub(super) struct Progress {
    /// The start times of calls in flight, one above (0: a free slot).
    starts: [AtomicU64; START_SLOTS],
    /// When it last answered.
    answered_at: AtomicU64,
}

impl Progress {
    /// A call goes out at `at`: it takes a free start slot if one is left, and the slot it
    /// took comes back; a call due (a `deadline` later) before the pool's `next` look
    /// brings that look forward.
    #[inline]
    pub(super) fn start(&self, at: Nanos, deadline: Nanos, next: &NextLook) -> Option<Tracked> {
        // 0 marks a free slot: a start is kept one above its time.
        let mark = NonZeroU64::new(at.saturating_add(1)).unwrap_or(NonZeroU64::MAX);
        let tracked = self.starts.iter().enumerate().find_map(|(slot, start)| {
            // Sequentially consistent with the bound's read that follows, and with the
            // look's claim and reads (`NextLook::look`): either the look reads this slot, or
            // this start reads the bound the look claimed, and lowers it. (A locked
            // instruction either way on x86.)
            start
                .compare_exchange(0, mark.get(), Ordering::SeqCst, Ordering::Relaxed)
                .ok()
                .map(|_| Tracked {
                    slot: slot as u32,
                    mark,
                })
        })?;
        next.lower(at.saturating_add(deadline));
        Some(tracked)
    }

    /// A tracked call ended: its start slot, if it still holds it, is free again.
    #[inline]
    pub(super) fn end(&self, tracked: Tracked) {
        // Sequentially consistent, as every store to a slot: not for the protocol (the
        // single order already keeps a look's read from returning this store past a call's
        // later claim of the slot), but for loom, whose sequentially consistent load may
        // return a store that is not past a later one that is (tokio-rs/loom#180), where
        // C++20's single order does not. The same instruction as `AcqRel` on x86 and ARMv8.
        let _ = self.starts[tracked.slot as usize].compare_exchange(
            tracked.mark.get(),
            0,
            Ordering::SeqCst,
            Ordering::Relaxed,
        );
    }

    /// It answered at `now`.
    #[inline]
    pub(super) fn answered(&self, now: Nanos) {
        self.answered_at.fetch_max(now, Ordering::Relaxed);
    }

    /// When it hangs if nothing comes back meanwhile: a `deadline` after the oldest of the
    /// calls it tracks (the first [`START_SLOTS`] in flight at once) that went out since it
    /// last answered; `None` when it tracks no such call. It hangs at any time from then on:
    /// a call in flight for the whole deadline, and nothing back since that call went out
    /// (a call that went out before its last answer never makes it hang: the answers only
    /// move on).
    fn hang_due(&self, deadline: Nanos) -> Option<Nanos> {
        let answered = self.answered_at.load(Ordering::SeqCst);
        self.starts
            .iter()
            .map(|s| s.load(Ordering::SeqCst))
            .filter(|&mark| mark != 0)
            .map(|mark| mark - 1)
            .filter(|&start| start >= answered)
            .min()
            .map(|start| start.saturating_add(deadline))
    }

    /// Judged hung: the calls in flight are written off (their slots freed, so that a call
    /// sent after the judgement, its probe, gets a deadline of its own).
    fn write_off(&self) {
        for start in &self.starts {
            // Sequentially consistent for loom, as `end`'s (the look is rare).
            start.store(0, Ordering::SeqCst);
        }
    }
}

/// A call's start slot on its endpoint, for the deadline: which slot, and what it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Tracked {
    slot: u32,
    /// Non-zero: an untracked pick (`None`) takes no room of its own.
    mark: NonZeroU64,
}

impl Tracked {
    /// When the call went out, on the pool's clock.
    #[inline]
    pub(super) fn at(self) -> Nanos {
        self.mark.get() - 1
    }
}

/// The hang watch of a pool of bare endpoints (no breakers, no clock), under `--cfg loom`
/// only: for the models in `tests/loom.rs`, which drive [`Progress`] and [`NextLook`] (the
/// code a pool runs) through it.
#[cfg(loom)]
#[doc(hidden)]
#[derive(Debug)]
pub struct LoomHangWatch {
    deadline: Nanos,
    next: NextLook,
    endpoints: Vec<Progress>,
}

/// A call tracked by a [`LoomHangWatch`]: its endpoint and start slot.
#[cfg(loom)]
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct LoomCall {
    endpoint: usize,
    tracked: Tracked,
}

/// What a [`LoomHangWatch::look`] did.
#[cfg(loom)]
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoomLook {
    /// The first due time of the calls it found not yet due (`u64::MAX`: none); `None` when
    /// it claimed no look (another look had, or none was due).
    pub first_due: Option<u64>,
    /// The endpoints it judged hung, by index.
    pub hung: Vec<usize>,
}

#[cfg(loom)]
impl LoomHangWatch {
    /// `endpoints` endpoints with nothing in flight, and a `deadline` (nanoseconds).
    pub fn new(endpoints: usize, deadline: u64) -> Self {
        Self {
            deadline,
            next: NextLook::new(),
            endpoints: (0..endpoints).map(|_| Progress::default()).collect(),
        }
    }

    /// A call to `endpoint` goes out at `at`: its slot, if it took one.
    pub fn start(&self, endpoint: usize, at: u64) -> Option<LoomCall> {
        self.endpoints[endpoint]
            .start(at, self.deadline, &self.next)
            .map(|tracked| LoomCall { endpoint, tracked })
    }

    /// A tracked call ended.
    pub fn end(&self, call: LoomCall) {
        self.endpoints[call.endpoint].end(call.tracked);
    }

    /// Whether a pick at `now` looks for hangs.
    pub fn due(&self, now: u64) -> bool {
        self.next.due(now)
    }

    /// A pick's look for hangs at `now`, as [`Pool`](super::Pool)'s picks take it.
    pub fn look(&self, now: u64) -> LoomLook {
        let mut hung = Vec::new();
        let first_due = self.next.look(
            now,
            self.deadline,
            self.endpoints.iter().enumerate(),
            |&(_, progress)| progress,
            |(i, _)| hung.push(i),
        );
        LoomLook { first_due, hung }
    }

    /// The next look's bound, read sequentially consistent.
    pub fn next_look(&self) -> u64 {
        self.next.0.load(Ordering::SeqCst)
    }
}
