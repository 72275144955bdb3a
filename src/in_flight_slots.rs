//! The calls in flight that a slow-call policy's breaker admitted on the lock-free lane: a
//! table of slots, one per call, so that the lock holder can count a call stuck past the
//! threshold as slow when the next call arrives (as [`InFlight`](crate::in_flight::InFlight)
//! does for the calls admitted under the lock), without the calls taking the lock.
//!
//! # The protocol
//!
//! A slot holds 0 (free), `BUSY` or `COMPLETING` (its owner is a few instructions from
//! moving it on), or a call's key (its ticket's generation and window age, plus one), with
//! `MARK` once the lock holder counted it as slow while in flight.
//!
//! - **Claim** (an admission on the lane, *before* its cell's compare-and-swap): a free slot
//!   goes from 0 to `BUSY`. A full table sends the admission to the lock.
//! - **Publish** (the compare-and-swap succeeded): store the start, then the key.
//!   **Abandon** (it failed): `BUSY` back to 0.
//! - **A fast success** (its latency within the threshold, on the lane): the key, unmarked,
//!   goes to `COMPLETING` (a marked one cannot: the call was counted as slow, and its result
//!   goes to the lock), then the cell's compare-and-swap counts the success; then the slot
//!   is freed, or, if that compare-and-swap failed, the key is put back and the result goes
//!   to the lock.
//! - **Release** (any other result, under the lock): the key is swapped for 0; its `MARK`
//!   says whether the call was counted as slow already.
//! - **Scan** (the lock holder, with the lane's cells closed, so that no compare-and-swap on
//!   them can succeed): wait for every `BUSY` or `COMPLETING` slot to move on, then mark the
//!   calls of the current generation admitted more than the threshold ago. After the close,
//!   every call the lane admitted is either published here or was abandoned, and every fast
//!   success either counted (its slot free) or put its key back: the scan sees each call
//!   exactly as a lock holder would have.
//!
//! Only a slot's owner frees it (or the lock, on the owner's behalf, with the owner's
//! ticket), so no slot is freed for another call. A call of an older generation stays until
//! its result frees it; a scan skips it (its result is stale). A permit that is leaked
//! (`mem::forget`) leaks its slot: the table then has one fewer for the lane.

use crate::atomic::{self, AtomicU64, Ordering};
use crate::nanos::Nanos;

/// A slot claimed by an admission, not yet published or abandoned.
const BUSY: u64 = u64::MAX;
/// A slot whose call is counting its success on the lane.
const COMPLETING: u64 = u64::MAX - 1;
/// Set in a published key: counted as slow while in flight.
const MARK: u64 = 1 << 63;

/// How many slots a lane has: calls in flight beyond them are tracked under the lock.
#[cfg(not(loom))]
pub(crate) const SLOTS: usize = 64;
/// Two in a model: enough for two calls in flight on the lane, and a scan loom can explore.
#[cfg(loom)]
pub(crate) const SLOTS: usize = 2;

/// The largest key a slot holds (below `MARK`, with room for the plus one).
pub(crate) const MAX_KEY: u64 = MARK - 2;

#[derive(Debug)]
struct Slot {
    /// 0 free, `BUSY`, `COMPLETING`, or the call's key plus one, with `MARK` once counted.
    key: AtomicU64,
    /// When the call was admitted; meaningful once the key is published.
    start: AtomicU64,
}

/// How a released call stood.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Released {
    /// Still in flight when it returned: its latency decides whether it was slow.
    Fresh,
    /// Counted as slow while in flight: not to be counted again.
    Counted,
}

/// The slots of one lane, shared by the lane (claims, publishes, fast successes) and the
/// machine (scans and releases, under the lock).
#[derive(Debug)]
pub(crate) struct InFlightSlots {
    slots: Box<[Slot]>,
}

impl InFlightSlots {
    /// A table of `n` free slots.
    pub(crate) fn new(n: usize) -> Self {
        Self {
            slots: (0..n)
                .map(|_| Slot {
                    key: AtomicU64::new(0),
                    start: AtomicU64::new(0),
                })
                .collect(),
        }
    }

    /// Claims a free slot, looking from `hint` on (a thread's probe spreads the threads);
    /// `None` when every slot is taken.
    pub(crate) fn claim(&self, hint: usize) -> Option<usize> {
        let n = self.slots.len();
        (0..n).map(|k| (hint + k) % n).find(|&i| {
            let key = &self.slots[i].key;
            key.load(Ordering::Relaxed) == 0
                && key
                    .compare_exchange(0, BUSY, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
        })
    }

    /// Publishes claimed slot `i`: the call admitted at `start` with key `key` (at most
    /// [`MAX_KEY`]).
    pub(crate) fn publish(&self, i: usize, key: u64, start: Nanos) {
        debug_assert!(key <= MAX_KEY);
        let slot = &self.slots[i];
        slot.start.store(start, Ordering::Relaxed);
        slot.key.store(key + 1, Ordering::Release);
    }

    /// Gives claimed slot `i` back: its admission was not counted.
    pub(crate) fn abandon(&self, i: usize) {
        self.slots[i].key.store(0, Ordering::Release);
    }

    /// Starts a fast success of the call in slot `i` (its key `key`): `false` if the call
    /// was counted as slow while in flight (its result then goes to the lock, which
    /// releases the slot). After `true`, the caller must [`finish`](Self::finish) or
    /// [`resume`](Self::resume), without running user code in between.
    pub(crate) fn begin_success(&self, i: usize, key: u64) -> bool {
        self.slots[i]
            .key
            .compare_exchange(key + 1, COMPLETING, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }

    /// Frees slot `i` after its call's success counted on the lane.
    pub(crate) fn finish(&self, i: usize) {
        self.slots[i].key.store(0, Ordering::Release);
    }

    /// Puts the key `key` back in slot `i`: its success could not count on the lane, and
    /// goes to the lock with the call still in flight.
    pub(crate) fn resume(&self, i: usize, key: u64) {
        self.slots[i].key.store(key + 1, Ordering::Release);
    }

    /// Frees published slot `i` for its call's result, under the lock.
    pub(crate) fn release(&self, i: usize) -> Released {
        let key = self.slots[i].key.swap(0, Ordering::AcqRel);
        debug_assert!(
            key != 0 && key != BUSY && key != COMPLETING,
            "released a slot not published"
        );
        if key & MARK != 0 {
            Released::Counted
        } else {
            Released::Fresh
        }
    }

    /// The key slot `i` holds once its owner moved on: waits for `BUSY` and `COMPLETING`.
    fn settled(slot: &Slot) -> u64 {
        loop {
            match slot.key.load(Ordering::Acquire) {
                BUSY | COMPLETING => atomic::wait_a_moment(),
                key => return key,
            }
        }
    }

    /// The lock holder's scan at `now`, the lane's cells closed: marks every call whose key
    /// `current` says is of the current generation and that was admitted more than
    /// `threshold` before `now`, calling `overdue` with its key; how many it marked.
    pub(crate) fn mark_overdue(
        &self,
        now: Nanos,
        threshold: Nanos,
        current: impl Fn(u64) -> bool,
        mut overdue: impl FnMut(u64),
    ) -> usize {
        let mut marked = 0;
        for slot in self.slots.iter() {
            loop {
                let key = Self::settled(slot);
                if key == 0 || key & MARK != 0 || !current(key - 1) {
                    break;
                }
                let start = slot.start.load(Ordering::Relaxed);
                if now.saturating_sub(start) <= threshold {
                    break;
                }
                // Its owner may be starting a fast success meanwhile (it then finds the
                // mark, or this finds it completing and waits): look again on a miss.
                if slot
                    .key
                    .compare_exchange(key, key | MARK, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    overdue(key - 1);
                    marked += 1;
                    break;
                }
            }
        }
        marked
    }

    /// The earliest start of the calls of the current generation (`current` says which
    /// keys) not counted as slow yet, the lane's cells closed: the next call after that
    /// start plus the threshold must take the lock, to count it.
    pub(crate) fn oldest(&self, current: impl Fn(u64) -> bool) -> Option<Nanos> {
        self.slots
            .iter()
            .filter_map(|slot| {
                let key = Self::settled(slot);
                (key != 0 && key & MARK == 0 && current(key - 1))
                    .then(|| slot.start.load(Ordering::Relaxed))
            })
            .min()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_call_past_the_threshold_is_counted_once_and_its_release_says_so() {
        let t = InFlightSlots::new(4);
        let (a, b) = (t.claim(0).unwrap(), t.claim(0).unwrap());
        assert_ne!(a, b);
        t.publish(a, 7, 100);
        t.publish(b, 7, 150);
        let mut counted = Vec::new();
        let marked = t.mark_overdue(240, 100, |_| true, |k| counted.push(k));
        assert_eq!(
            (marked, &counted[..]),
            (1, &[7][..]),
            "a only: 140 past its start, b 90"
        );
        assert_eq!(
            t.oldest(|_| true),
            Some(150),
            "a is counted: b is the oldest left"
        );
        assert_eq!(t.mark_overdue(240, 100, |_| true, |k| counted.push(k)), 0);
        assert_eq!(counted, [7], "counted once");
        assert!(
            !t.begin_success(a, 7),
            "a counted call's success goes to the lock"
        );
        assert_eq!(t.release(a), Released::Counted);
        assert_eq!(t.release(b), Released::Fresh);
        assert_eq!(t.oldest(|_| true), None);
        assert_eq!(t.mark_overdue(1_000, 100, |_| true, |_| panic!("empty")), 0);
    }

    #[test]
    fn exactly_the_threshold_is_not_overdue() {
        let t = InFlightSlots::new(1);
        let a = t.claim(0).unwrap();
        t.publish(a, 1, 100);
        assert_eq!(t.mark_overdue(200, 100, |_| true, |_| ()), 0);
        assert_eq!(t.mark_overdue(201, 100, |_| true, |_| ()), 1);
    }

    #[test]
    fn a_full_table_claims_nothing_and_an_abandoned_slot_is_free_again() {
        let t = InFlightSlots::new(2);
        let (a, _b) = (t.claim(1).unwrap(), t.claim(1).unwrap());
        assert_eq!(t.claim(0), None);
        t.abandon(a);
        assert_eq!(t.claim(0), Some(a));
    }

    #[test]
    fn an_older_generations_call_is_skipped() {
        let t = InFlightSlots::new(2);
        let a = t.claim(0).unwrap();
        t.publish(a, 3, 0);
        assert_eq!(
            t.mark_overdue(1_000, 10, |key| key == 4, |_| panic!("stale")),
            0
        );
        assert_eq!(t.oldest(|key| key == 4), None);
        assert_eq!(t.release(a), Released::Fresh);
    }

    #[test]
    fn a_fast_success_frees_its_slot_or_puts_it_back() {
        let t = InFlightSlots::new(1);
        let a = t.claim(0).unwrap();
        t.publish(a, 5, 10);
        assert!(t.begin_success(a, 5));
        t.resume(a, 5);
        assert_eq!(t.oldest(|_| true), Some(10), "back in flight");
        assert!(t.begin_success(a, 5));
        t.finish(a);
        assert_eq!(t.oldest(|_| true), None);
        assert_eq!(t.claim(0), Some(a));
    }
}
