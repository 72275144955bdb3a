//! The calls in flight, oldest first, for a policy with a slow-call threshold: so that a call
//! outstanding longer than the threshold is known to be slow before it returns, when another
//! call arrives (there is no timer to notice it earlier). A leaf module, sans-IO.
//!
//! Admissions come in time order, so the oldest outstanding call is at the front: finding
//! the calls that became overdue is a walk from the last one found, O(1) amortised per call.
//! A completion finds its call by admission time (a binary search): calls admitted at the
//! same instant are interchangeable here (same bucket, overdue together).

use std::collections::VecDeque;

use crate::nanos::Nanos;

#[derive(Debug, Clone, Copy)]
struct Entry {
    admitted: Nanos,
    /// The window age it was admitted at (its bucket).
    age: u64,
    done: bool,
    /// Counted as slow while still in flight.
    overdue: bool,
}

/// The admissions of the current generation not yet completed (and those completed behind
/// an older outstanding one), in admission order.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    entries: VecDeque<Entry>,
    /// Entries before this index are overdue already.
    checked: usize,
}

impl InFlight {
    /// With room for `capacity` calls in flight before it allocates.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Self {
            entries: VecDeque::with_capacity(capacity),
            ..Self::default()
        }
    }

    /// Forgets every call: a new generation (their results will be stale).
    pub(crate) fn clear(&mut self) {
        self.entries.clear();
        self.checked = 0;
    }

    /// Records an admission at `admitted` (never before the previous one), in the bucket of
    /// `age`.
    pub(crate) fn admit(&mut self, admitted: Nanos, age: u64) {
        debug_assert!(self.entries.back().is_none_or(|e| e.admitted <= admitted));
        self.entries.push_back(Entry {
            admitted,
            age,
            done: false,
            overdue: false,
        });
    }

    /// Records the completion of a call admitted at `admitted`: whether it had been counted
    /// as overdue (`None`: not tracked, e.g. admitted before the last `clear`).
    pub(crate) fn complete(&mut self, admitted: Nanos) -> Option<bool> {
        let first = self.entries.partition_point(|e| e.admitted < admitted);
        let i = (first..self.entries.len())
            .take_while(|&i| self.entries[i].admitted == admitted)
            .find(|&i| !self.entries[i].done)?;
        let entry = &mut self.entries[i];
        entry.done = true;
        let overdue = entry.overdue;
        while self.entries.front().is_some_and(|e| e.done) {
            self.entries.pop_front();
            self.checked = self.checked.saturating_sub(1);
        }
        Some(overdue)
    }

    /// Marks the calls still in flight that were admitted more than `threshold` before
    /// `now` and not marked yet, calling `overdue` with each one's window age; how many.
    pub(crate) fn mark_overdue(
        &mut self,
        now: Nanos,
        threshold: Nanos,
        mut overdue: impl FnMut(u64),
    ) -> usize {
        let mut marked = 0;
        while let Some(entry) = self.entries.get_mut(self.checked) {
            if now.saturating_sub(entry.admitted) <= threshold {
                break; // admitted in time order: the later ones are younger
            }
            if !entry.done {
                entry.overdue = true;
                overdue(entry.age);
                marked += 1;
            }
            self.checked += 1;
        }
        marked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overdue_calls_are_marked_once_oldest_first() {
        let mut f = InFlight::with_capacity(4);
        let (a, b, c) = (0, 10, 20);
        f.admit(a, 0);
        f.admit(b, 0);
        f.admit(c, 1);
        assert_eq!(f.complete(b), Some(false), "b returns in time");
        let mut ages = Vec::new();
        assert_eq!(
            f.mark_overdue(115, 100, |age| ages.push(age)),
            1,
            "only a is overdue"
        );
        assert_eq!(ages, [0]);
        assert_eq!(f.mark_overdue(115, 100, |_| {}), 0, "marked once");
        assert_eq!(f.mark_overdue(121, 100, |age| ages.push(age)), 1, "now c");
        assert_eq!(ages, [0, 1]);
        assert_eq!(f.complete(a), Some(true), "a was counted while in flight");
        assert_eq!(f.complete(a), None, "once");
        assert_eq!(f.complete(c), Some(true));
        assert!(f.entries.is_empty());
    }

    #[test]
    fn a_cleared_generation_forgets_its_calls() {
        let mut f = InFlight::default();
        f.admit(0, 0);
        f.clear();
        assert_eq!(f.complete(0), None);
        f.admit(5, 0);
        assert_eq!(f.mark_overdue(1_000, 10, |_| {}), 1);
        assert_eq!(f.complete(5), Some(true));
    }

    #[test]
    fn calls_admitted_at_one_instant_complete_one_at_a_time() {
        let mut f = InFlight::default();
        f.admit(7, 0);
        f.admit(7, 0);
        assert_eq!(f.complete(7), Some(false));
        assert_eq!(f.complete(7), Some(false));
        assert_eq!(f.complete(7), None, "both done");
    }
}
