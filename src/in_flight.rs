//! The calls in flight, oldest first, for a policy with a slow-call threshold: so that a call
//! outstanding longer than the threshold is known to be slow before it returns, when another
//! call arrives (there is no timer to notice it earlier). A leaf module, sans-IO.
//!
//! Admissions come in time order, so the oldest call is at the front. A call found overdue
//! is counted as slow and dropped from the front at once, whether it ever returns or not, so
//! the memory held is bounded by the calls admitted within one threshold (a hung call does
//! not pin the calls after it). A completion finds its call by admission time (a binary
//! search): calls admitted at the same instant are interchangeable here (same bucket,
//! overdue together); a completion that finds none was counted as overdue already.

use std::collections::VecDeque;

use crate::nanos::Nanos;

#[derive(Debug, Clone, Copy)]
struct Entry {
    admitted: Nanos,
    /// The window age it was admitted at (its bucket).
    age: u64,
    done: bool,
}

/// The admissions of the current generation admitted within the last threshold and not yet
/// completed (and those completed behind an older outstanding one), in admission order.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    entries: VecDeque<Entry>,
}

impl InFlight {
    /// With room for `capacity` calls in flight before it allocates.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Self {
            entries: VecDeque::with_capacity(capacity),
        }
    }

    /// Forgets every call: a new generation (their results will be stale).
    pub(crate) fn clear(&mut self) {
        self.entries.clear();
    }

    /// Records an admission at `admitted` (never before the previous one), in the bucket of
    /// `age`.
    pub(crate) fn admit(&mut self, admitted: Nanos, age: u64) {
        debug_assert!(self.entries.back().is_none_or(|e| e.admitted <= admitted));
        self.entries.push_back(Entry {
            admitted,
            age,
            done: false,
        });
    }

    /// Records the completion of a call admitted at `admitted`: `true` if it was still
    /// tracked (it returned in time), `false` if it was counted as overdue already.
    pub(crate) fn complete(&mut self, admitted: Nanos) -> bool {
        let i = match self.entries.front() {
            // Most often the oldest in flight (calls made one after another): no search.
            Some(front) if front.admitted == admitted && !front.done => 0,
            _ => {
                let first = self.entries.partition_point(|e| e.admitted < admitted);
                let found = (first..self.entries.len())
                    .take_while(|&i| self.entries[i].admitted == admitted)
                    .find(|&i| !self.entries[i].done);
                let Some(i) = found else {
                    return false;
                };
                i
            }
        };
        self.entries[i].done = true;
        while self.entries.front().is_some_and(|e| e.done) {
            self.entries.pop_front();
        }
        true
    }

    /// Drops the calls admitted more than `threshold` before `now`, calling `overdue` with
    /// the window age of each one still in flight; how many were.
    pub(crate) fn take_overdue(
        &mut self,
        now: Nanos,
        threshold: Nanos,
        mut overdue: impl FnMut(u64),
    ) -> usize {
        let mut marked = 0;
        while let Some(entry) = self.entries.front() {
            if now.saturating_sub(entry.admitted) <= threshold {
                break; // admitted in time order: the later ones are younger
            }
            if !entry.done {
                overdue(entry.age);
                marked += 1;
            }
            self.entries.pop_front();
        }
        marked
    }

    /// When the oldest call still in flight was admitted.
    pub(crate) fn oldest(&self) -> Option<Nanos> {
        self.entries.iter().find(|e| !e.done).map(|e| e.admitted)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overdue_calls_are_counted_once_oldest_first() {
        let mut f = InFlight::with_capacity(4);
        let (a, b, c) = (0, 10, 20);
        f.admit(a, 0);
        f.admit(b, 0);
        f.admit(c, 1);
        assert!(f.complete(b), "b returns in time");
        let mut ages = Vec::new();
        assert_eq!(
            f.take_overdue(115, 100, |age| ages.push(age)),
            1,
            "only a is overdue"
        );
        assert_eq!(ages, [0]);
        assert_eq!(f.take_overdue(115, 100, |_| {}), 0, "counted once");
        assert_eq!(f.take_overdue(121, 100, |age| ages.push(age)), 1, "now c");
        assert_eq!(ages, [0, 1]);
        assert!(!f.complete(a), "a was counted while in flight");
        assert!(!f.complete(c));
        assert_eq!(f.len(), 0);
    }

    #[test]
    fn a_cleared_generation_forgets_its_calls() {
        let mut f = InFlight::default();
        f.admit(0, 0);
        f.clear();
        assert_eq!(f.len(), 0);
        f.admit(5, 0);
        assert_eq!(f.take_overdue(1_000, 10, |_| {}), 1);
        assert!(!f.complete(5));
    }

    #[test]
    fn calls_admitted_at_one_instant_complete_one_at_a_time() {
        let mut f = InFlight::default();
        f.admit(7, 0);
        f.admit(7, 0);
        assert!(f.complete(7));
        assert!(f.complete(7));
        assert_eq!(f.len(), 0);
    }

    /// A call that never returns does not pin the calls admitted after it.
    #[test]
    fn a_hung_call_holds_no_memory_past_its_threshold() {
        let mut f = InFlight::default();
        f.admit(0, 0); // never completes
        for t in 1..=1_000 {
            f.admit(t, 0);
            assert!(f.complete(t));
        }
        assert_eq!(
            f.len(),
            1_001,
            "pinned behind the hung call until it is overdue"
        );
        assert_eq!(f.take_overdue(10_000, 100, |_| {}), 1);
        assert_eq!(f.len(), 0);
    }
}
