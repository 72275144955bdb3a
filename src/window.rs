//! The closed-state count window: the counts of one generation, with a rolling window's
//! buckets or a count window's ring (see [`Window`]).

use crate::counts::{Counts, Tail};
use crate::last_calls::{self, LastCalls};
use crate::nanos::Nanos;
use crate::outcome::Outcome;

/// The counts of one generation, with the buckets of a rolling window, or the ring of a
/// count window, when there is one.
///
/// Every request carries the window's *age* (the number of bucket periods since the generation
/// started) at admission; its result goes to the bucket of that age, and is dropped when that
/// bucket has rolled out of the window. With a fixed window the age is always zero.
///
/// A count window (the last `n` results, resilience4j's `COUNT_BASED` window) counts in the
/// closed state only: there `requests` is the number of results it holds, each success or
/// failure pushes out the oldest once it is full, and an exclusion is counted in
/// `total_exclusions` but takes no place in it. In the other states it counts as a fixed
/// window does (the probes of half-open need every admission).
///
/// The counts an idle closed breaker's calls change are kept in place ([`Hot`]); the rest,
/// with the buckets or the ring, in a [`Rare`] built on first need (a rolling or a count
/// window builds it with its ring, a fixed one on its first exclusion, slow or throttled
/// call). [`counts`](Window::counts) puts the two together.
#[derive(Debug)]
pub(crate) struct Window {
    hot: Hot,
    /// None for a fixed window that has not needed it yet: whether the window rolls or
    /// counts by count is read from it (a fixed window's calls find it absent at once).
    rare: Option<Box<Rare>>,
}

/// The counts a window keeps in place: those of [`Counts`] that an idle closed breaker's
/// admissions, successes and failures change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Hot {
    requests: u64,
    total_successes: u64,
    total_failures: u64,
    consecutive_successes: u64,
    consecutive_failures: u64,
}

impl Hot {
    fn on_request(&mut self) {
        self.requests += 1;
    }

    fn on_success(&mut self) {
        self.total_successes += 1;
        self.consecutive_successes += 1;
        self.consecutive_failures = 0;
    }

    fn on_failure(&mut self) {
        self.total_failures += 1;
        self.consecutive_failures += 1;
        self.consecutive_successes = 0;
    }
}

/// What a window holds beyond its [`Hot`] counts (see [`Window`]).
#[derive(Debug, Default)]
struct Rare {
    total_exclusions: u64,
    slow_calls: u64,
    throttled: u64,
    /// Whether the ring counts (a count window, in the closed state).
    by_count: bool,
    /// A rolling window's buckets, or a count window's ring; none for a fixed window.
    ring: Option<Ring>,
}

/// A rolling window's buckets, or a count window's ring.
#[derive(Debug)]
enum Ring {
    Rolling {
        /// When the generation started: the buckets' ages count from it.
        start: Nanos,
        /// The bucket periods since `start` the window was advanced to.
        age: u64,
        /// At least two buckets, indexed by `age % len`.
        buckets: Box<[Counts]>,
    },
    Last(LastCalls),
}

impl Window {
    /// A rolling window of `buckets` buckets (0 or 1 makes a fixed window). The only
    /// allocation the breaker makes after it is built happens here, once.
    pub(crate) fn rolling(buckets: usize) -> Self {
        Self::with_ring((buckets >= 2).then(|| Ring::Rolling {
            start: 0,
            age: 0,
            buckets: vec![Counts::default(); buckets].into_boxed_slice(),
        }))
    }

    /// A count window of the last `n` results (allocated here, once; zero: a fixed window).
    pub(crate) fn last(n: usize) -> Self {
        Self::with_ring((n > 0).then(|| Ring::Last(LastCalls::new(n))))
    }

    /// A window holding `ring` (with its [`Rare`] part built now), or a fixed window.
    fn with_ring(ring: Option<Ring>) -> Self {
        Self {
            hot: Hot::default(),
            rare: ring.map(|ring| {
                Box::new(Rare {
                    ring: Some(ring),
                    ..Rare::default()
                })
            }),
        }
    }

    /// The rare part, built now if it was not yet.
    #[inline]
    fn rare_mut(&mut self) -> &mut Rare {
        if self.rare.is_none() {
            self.build_rare();
        }
        match &mut self.rare {
            Some(rare) => rare,
            None => unreachable!("built just above"),
        }
    }

    /// Builds the rare part of a fixed window, once, out of line.
    #[cold]
    #[inline(never)]
    fn build_rare(&mut self) {
        self.rare = Some(Box::default());
    }

    fn ring(&self) -> Option<&Ring> {
        self.rare.as_deref().and_then(|rare| rare.ring.as_ref())
    }

    fn ring_mut(&mut self) -> Option<&mut Ring> {
        self.rare.as_deref_mut().and_then(|rare| rare.ring.as_mut())
    }

    /// A rolling window's buckets (none for another).
    fn buckets(&self) -> &[Counts] {
        match self.ring() {
            Some(Ring::Rolling { buckets, .. }) => buckets,
            _ => &[],
        }
    }

    /// A rolling window's buckets, to change (none for another).
    fn buckets_mut(&mut self) -> &mut [Counts] {
        match self.ring_mut() {
            Some(Ring::Rolling { buckets, .. }) => buckets,
            _ => &mut [],
        }
    }

    /// When a rolling window's generation started (its buckets' ages count from it); zero
    /// for another window.
    pub(crate) fn start(&self) -> Nanos {
        match self.ring() {
            Some(Ring::Rolling { start, .. }) => *start,
            _ => 0,
        }
    }

    /// Whether this is a count window counting (in the closed state).
    pub(crate) fn is_by_count(&self) -> bool {
        self.rare.as_deref().is_some_and(|rare| rare.by_count)
    }

    /// Forgets everything for a new generation started at `now`, `closed` or not (a count
    /// window counts in the closed state only).
    pub(crate) fn restart(&mut self, closed: bool, now: Nanos) {
        self.clear();
        if let Some(rare) = self.rare.as_deref_mut() {
            if let Some(Ring::Rolling { start, .. }) = &mut rare.ring {
                *start = now;
            }
            rare.by_count = closed && matches!(rare.ring, Some(Ring::Last(_)));
        }
    }

    /// The counts: the ones in place, with the rare ones (zero when there are none).
    #[inline]
    pub(crate) fn counts(&self) -> Counts {
        let h = &self.hot;
        let (total_exclusions, slow_calls, throttled) = match self.rare.as_deref() {
            Some(rare) => (rare.total_exclusions, rare.slow_calls, rare.throttled),
            None => (0, 0, 0),
        };
        Counts {
            requests: h.requests,
            total_successes: h.total_successes,
            total_failures: h.total_failures,
            total_exclusions,
            consecutive_successes: h.consecutive_successes,
            consecutive_failures: h.consecutive_failures,
            slow_calls,
            throttled,
        }
    }

    /// Sets the counts to `c` (a rare count other than zero builds the rare part).
    fn set_counts(&mut self, c: &Counts) {
        self.hot = Hot {
            requests: c.requests,
            total_successes: c.total_successes,
            total_failures: c.total_failures,
            consecutive_successes: c.consecutive_successes,
            consecutive_failures: c.consecutive_failures,
        };
        if self.rare.is_none() && (c.total_exclusions, c.slow_calls, c.throttled) == (0, 0, 0) {
            return;
        }
        let rare = self.rare_mut();
        rare.total_exclusions = c.total_exclusions;
        rare.slow_calls = c.slow_calls;
        rare.throttled = c.throttled;
    }

    /// The window's age: the bucket periods since the generation started that a rolling
    /// window was advanced to (always zero for another window).
    pub(crate) fn age(&self) -> u64 {
        match self.ring() {
            Some(Ring::Rolling { age, .. }) => *age,
            _ => 0,
        }
    }

    /// Sets a rolling window's age.
    fn set_age(&mut self, to: u64) {
        if let Some(Ring::Rolling { age, .. }) = self.ring_mut() {
            *age = to;
        }
    }

    pub(crate) fn is_rolling(&self) -> bool {
        matches!(self.ring(), Some(Ring::Rolling { .. }))
    }

    /// Forgets everything: a new generation starts at age zero.
    pub(crate) fn clear(&mut self) {
        self.hot = Hot::default();
        let Some(rare) = self.rare.as_deref_mut() else {
            return;
        };
        rare.total_exclusions = 0;
        rare.slow_calls = 0;
        rare.throttled = 0;
        match &mut rare.ring {
            Some(Ring::Rolling { buckets, age, .. }) => {
                buckets.fill(Counts::default());
                *age = 0;
            }
            Some(Ring::Last(last)) => last.clear(),
            None => {}
        }
    }

    fn bucket_index(&self, age: u64) -> usize {
        // `buckets.len() >= 2` here, and the remainder is below it, so it fits a usize.
        (age % self.buckets().len() as u64) as usize
    }

    pub(crate) fn on_request(&mut self) {
        if self.rare.is_none() {
            // A fixed window: the common case, at once.
            self.hot.on_request();
            return;
        }
        if self.is_by_count() {
            return; // its `requests` are the results it holds
        }
        self.hot.on_request();
        if self.is_rolling() {
            let i = self.bucket_index(self.age());
            self.buckets_mut()[i].on_request();
        }
    }

    /// Counts `n` calls the throttle turned away, as requests of the throttle's only (not in
    /// a count window, which holds results).
    pub(crate) fn on_throttled(&mut self, n: u64) {
        if self.is_by_count() {
            return;
        }
        self.rare_mut().throttled += n;
        if self.is_rolling() {
            let i = self.bucket_index(self.age());
            self.buckets_mut()[i].throttled += n;
        }
    }

    /// The throttle's requests and accepts: the window's requests (with the throttled ones
    /// if `with_throttled`), and its results that were not failures (a count window's
    /// exclusions take no place in it, so they are not among its accepts).
    pub(crate) fn throttle_counts(&self, with_throttled: bool) -> (u64, u64) {
        (self.counts()).throttle_counts(with_throttled, self.is_by_count())
    }

    /// Whether an admission adds a request to the window (not in a count window, whose
    /// requests are the results it holds).
    pub(crate) fn admission_counts(&self) -> bool {
        !self.is_by_count()
    }

    /// Records `requests` admissions and `successes` successes at once, as the lock-free
    /// lane reports them, at the current age (the lane counts in one age at a time: a roll
    /// closes it first). Without failures, their order does not matter: every success resets
    /// the failure run, and the successes' own run grows by all of them, in the totals as in
    /// the bucket.
    ///
    /// With failures among them (`failures`, never in a count window), `tail` says how they
    /// end, which is all the runs need: a tail of successes is the success run, a tail of
    /// failures the failure run (grown from the current run if they hold no success).
    pub(crate) fn absorb(&mut self, requests: u64, successes: u64, failures: u64, tail: Tail) {
        // The same on the counts in place and on a bucket (both have these fields).
        macro_rules! add {
            ($c:expr) => {{
                let c = $c;
                c.requests += requests;
                c.total_successes += successes;
                c.total_failures += failures;
                match tail {
                    Tail::None if successes > 0 => {
                        c.consecutive_successes += successes;
                        c.consecutive_failures = 0;
                    }
                    Tail::None => {}
                    Tail::Successes(n) => {
                        c.consecutive_successes = n;
                        c.consecutive_failures = 0;
                    }
                    Tail::Failures(n) => {
                        c.consecutive_successes = 0;
                        c.consecutive_failures = if successes == 0 {
                            c.consecutive_failures + n
                        } else {
                            n
                        };
                    }
                }
            }};
        }
        if self.is_by_count() {
            debug_assert!(failures == 0, "a count window's failures take the lock");
            self.push_successes(successes);
            return;
        }
        add!(&mut self.hot);
        if self.is_rolling() {
            let i = self.bucket_index(self.age());
            add!(&mut self.buckets_mut()[i]);
        }
    }

    /// Pushes `n` successes into a count window, oldest results out: as many single pushes,
    /// and no more work than the ring holds.
    fn push_successes(&mut self, n: u64) {
        if n == 0 {
            return;
        }
        // Counting by count: the ring is there.
        let Some(rare) = self.rare.as_deref_mut() else {
            return;
        };
        let Some(Ring::Last(last)) = &mut rare.ring else {
            return;
        };
        let success = last_calls::Result {
            failed: false,
            slow: false,
        };
        let c = &mut self.hot;
        if n >= last.capacity() as u64 {
            last.fill(success);
            let len = last.len() as u64;
            c.requests = len;
            c.total_successes = len;
            c.total_failures = 0;
            rare.slow_calls = 0;
            c.consecutive_successes = len;
            c.consecutive_failures = 0;
            return;
        }
        // Fewer than the ring holds (so `n` fits a usize).
        let (failed, slow) = last.push_many(success, n as usize);
        let len = last.len() as u64;
        c.total_failures -= failed;
        rare.slow_calls -= slow;
        c.total_successes = len - c.total_failures;
        c.requests = len;
        c.consecutive_successes = (c.consecutive_successes + n).min(len);
        c.consecutive_failures = 0;
    }

    /// Pushes a success or a failure into a count window, taking out the result it pushes
    /// out; the runs never outgrow the results held.
    fn push(&mut self, outcome: Outcome, slow: bool) {
        // Counting by count: the ring is there.
        let Some(rare) = self.rare.as_deref_mut() else {
            return;
        };
        let Some(Ring::Last(last)) = &mut rare.ring else {
            return;
        };
        let failed = outcome != Outcome::Success;
        let c = &mut self.hot;
        if let Some(oldest) = last.push(last_calls::Result { failed, slow }) {
            if oldest.failed {
                c.total_failures -= 1;
            } else {
                c.total_successes -= 1;
            }
            rare.slow_calls -= u64::from(oldest.slow);
        }
        if failed {
            c.on_failure();
        } else {
            c.on_success();
        }
        rare.slow_calls += u64::from(slow);
        let len = last.len() as u64;
        c.requests = len;
        c.consecutive_successes = c.consecutive_successes.min(len);
        c.consecutive_failures = c.consecutive_failures.min(len);
    }

    /// Records the result of a request admitted at `age`. Returns whether it was counted
    /// (`false`: its bucket has rolled out of the window).
    #[cfg(test)]
    pub(crate) fn record(&mut self, age: u64, outcome: Outcome) -> bool {
        self.record_slow(age, outcome, false)
    }

    /// Counts a request admitted at `age` (a rolling window: in its bucket, if that is still
    /// in the window; else nowhere).
    pub(crate) fn on_request_at(&mut self, age: u64) {
        if !self.is_rolling() {
            self.on_request();
            return;
        }
        let current = self.age();
        if age > current || current - age >= self.buckets().len() as u64 {
            return;
        }
        self.hot.on_request();
        let i = self.bucket_index(age);
        self.buckets_mut()[i].on_request();
    }

    /// Counts a call admitted at `age`, still in flight, as slow (if its bucket is still in
    /// the window).
    pub(crate) fn add_slow(&mut self, age: u64) {
        debug_assert!(
            !self.is_by_count(),
            "a count window counts a slow call when it returns"
        );
        if !self.is_rolling() {
            self.rare_mut().slow_calls += 1;
            return;
        }
        let current = self.age();
        if age > current || current - age >= self.buckets().len() as u64 {
            return;
        }
        self.rare_mut().slow_calls += 1;
        let i = self.bucket_index(age);
        self.buckets_mut()[i].slow_calls += 1;
    }

    /// Counts a result in the counts (not in a bucket), also as slow if `slow`.
    #[inline]
    fn count(&mut self, outcome: Outcome, slow: bool) {
        match outcome.counted() {
            Outcome::Success => self.hot.on_success(),
            Outcome::Excluded => self.rare_mut().total_exclusions += 1,
            _ => self.hot.on_failure(),
        }
        if slow {
            self.rare_mut().slow_calls += 1;
        }
    }

    /// [`record`](Window::record), also counting the result as slow if `slow`.
    pub(crate) fn record_slow(&mut self, age: u64, outcome: Outcome, slow: bool) -> bool {
        if self.rare.is_none() {
            // A fixed window: the common case, at once.
            self.count(outcome, slow);
            return true;
        }
        if self.is_by_count() {
            match outcome.counted() {
                Outcome::Excluded => self.rare_mut().total_exclusions += 1,
                counted => self.push(counted, slow),
            }
            return true;
        }
        if !self.is_rolling() {
            self.count(outcome, slow);
            return true;
        }
        let current = self.age();
        if age > current || current - age >= self.buckets().len() as u64 {
            return false;
        }
        self.count(outcome, slow);
        let i = self.bucket_index(age);
        let c = &mut self.buckets_mut()[i];
        match outcome.counted() {
            Outcome::Success => c.on_success(),
            Outcome::Excluded => c.on_exclusion(),
            _ => c.on_failure(),
        }
        c.slow_calls += u64::from(slow);
        true
    }

    /// The counts as they would be once advanced to `age`, without advancing: what a
    /// snapshot reports of a rolling window that no call has rolled yet.
    pub(crate) fn counts_at(&self, age: u64) -> Counts {
        let current = self.age();
        if !self.is_rolling() || age <= current {
            return self.counts();
        }
        let steps = age - current;
        if steps >= self.buckets().len() as u64 {
            return Counts::default();
        }
        // Each step drops a different bucket (fewer steps than buckets), as `roll` would.
        let mut counts = self.counts();
        for step in 1..=steps {
            roll_out(
                &mut counts,
                &self.buckets()[self.bucket_index(current + step)],
            );
        }
        counts
    }

    /// Advances a rolling window to `age`: each bucket that leaves the window is subtracted
    /// from the totals. A jump of a whole window or more clears everything at once, so the
    /// work under the lock is bounded by the number of buckets whatever the idle time.
    pub(crate) fn advance_to(&mut self, age: u64) {
        let current = self.age();
        if !self.is_rolling() || age <= current {
            return;
        }
        let steps = age - current;
        if steps >= self.buckets().len() as u64 {
            self.clear();
            self.set_age(age);
            return;
        }
        for _ in 0..steps {
            self.roll();
        }
    }

    /// Moves to the next age, dropping the oldest bucket (gobreaker v2 `rollingCounts.roll`).
    fn roll(&mut self) {
        let age = self.age() + 1;
        self.set_age(age);
        let i = self.bucket_index(age);
        let oldest = std::mem::take(&mut self.buckets_mut()[i]);
        let mut counts = self.counts();
        roll_out(&mut counts, &oldest);
        self.set_counts(&counts);
    }
}

/// Subtracts the bucket leaving a rolling window from its counts.
fn roll_out(c: &mut Counts, oldest: &Counts) {
    // The consecutive counters can only be trimmed when the current run started inside the
    // oldest bucket and covers every later result: then the run is the oldest bucket's own
    // run plus all the later buckets' totals. The totals are always the sums of the
    // buckets, so "all later buckets" is the total minus the oldest bucket's share.
    let later_successes = c.total_successes - oldest.total_successes;
    if c.consecutive_successes == oldest.consecutive_successes + later_successes {
        c.consecutive_successes = c
            .consecutive_successes
            .saturating_sub(oldest.consecutive_successes);
    }
    let later_failures = c.total_failures - oldest.total_failures;
    if c.consecutive_failures == oldest.consecutive_failures + later_failures {
        c.consecutive_failures = c
            .consecutive_failures
            .saturating_sub(oldest.consecutive_failures);
    }
    c.requests -= oldest.requests;
    c.total_successes -= oldest.total_successes;
    c.total_failures -= oldest.total_failures;
    c.total_exclusions -= oldest.total_exclusions;
    c.throttled -= oldest.throttled;
    c.slow_calls -= oldest.slow_calls;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(w: &Window) -> Counts {
        let mut s = Counts::default();
        for b in w.buckets().iter() {
            s.requests += b.requests;
            s.total_successes += b.total_successes;
            s.total_failures += b.total_failures;
            s.total_exclusions += b.total_exclusions;
        }
        s
    }

    #[test]
    fn fixed_window_counts_everything() {
        let mut w = Window::rolling(0);
        w.on_request();
        w.on_request();
        assert!(w.record(0, Outcome::Failure));
        assert!(w.record(0, Outcome::Excluded));
        assert_eq!(
            w.counts(),
            Counts {
                requests: 2,
                total_failures: 1,
                total_exclusions: 1,
                consecutive_failures: 1,
                ..Counts::default()
            }
        );
    }

    #[test]
    fn a_fixed_window_builds_its_rare_part_on_first_need_and_keeps_it() {
        let mut w = Window::rolling(0);
        w.on_request();
        assert!(w.record(0, Outcome::Success));
        w.on_request();
        assert!(w.record(0, Outcome::Failure));
        assert!(w.rare.is_none(), "successes and failures build nothing");
        w.on_request();
        assert!(w.record_slow(0, Outcome::Excluded, true));
        w.on_throttled(2);
        assert!(w.rare.is_some());
        assert!(!w.is_rolling() && !w.is_by_count() && w.admission_counts());
        assert_eq!(
            w.counts(),
            Counts::default()
                .with_requests(3)
                .with_total_successes(1)
                .with_total_failures(1)
                .with_total_exclusions(1)
                .with_consecutive_failures(1)
                .with_slow_calls(1)
                .with_throttled(2)
        );
        assert_eq!(w.throttle_counts(true), (5, 2));
        w.restart(true, 7);
        assert_eq!(w.counts(), Counts::default());
        assert!(w.rare.is_some(), "kept for the next generation");
        assert!(!w.is_by_count());
    }

    #[test]
    fn a_count_window_counts_by_count_while_closed_only() {
        let mut w = Window::last(2);
        w.restart(true, 0);
        assert!(w.is_by_count() && !w.is_rolling());
        w.on_request(); // its requests are the results it holds
        assert_eq!(w.counts().requests, 0);
        assert!(w.record_slow(0, Outcome::Failure, true));
        assert!(w.record(0, Outcome::Success));
        assert!(w.record(0, Outcome::Success)); // pushes the slow failure out
        assert_eq!(
            w.counts(),
            Counts::default()
                .with_requests(2)
                .with_total_successes(2)
                .with_consecutive_successes(2)
        );
        w.restart(false, 0);
        assert!(!w.is_by_count());
        w.on_request();
        assert_eq!(w.counts().requests, 1);
    }

    #[test]
    fn rolling_drops_the_oldest_bucket_and_results_that_left_the_window() {
        let mut w = Window::rolling(3);
        w.on_request(); // age 0
        assert!(w.record(0, Outcome::Failure));
        w.advance_to(1);
        w.on_request(); // age 1
        w.advance_to(3); // age 0 leaves the window
        assert_eq!(w.counts().requests, 1);
        assert_eq!(w.counts().total_failures, 0);
        // The failure run lay entirely in the dropped bucket.
        assert_eq!(w.counts().consecutive_failures, 0);
        assert!(!w.record(0, Outcome::Success), "age 0 is out of the window");
        assert!(w.record(1, Outcome::Success));
        assert_eq!(w.counts().total_successes, 1);
    }

    #[test]
    fn consecutive_run_that_started_before_the_oldest_bucket_is_kept() {
        let mut w = Window::rolling(2);
        // age 0: success then failure; age 1: failure. The failure run is 2, it started in
        // bucket 0 and covers all of bucket 1.
        w.on_request();
        w.record(0, Outcome::Success);
        w.on_request();
        w.record(0, Outcome::Failure);
        w.advance_to(1);
        w.on_request();
        w.record(1, Outcome::Failure);
        assert_eq!(w.counts().consecutive_failures, 2);
        w.advance_to(2);
        // Bucket 0 held one failure of the run: the run shrinks to the one in bucket 1.
        assert_eq!(w.counts().consecutive_failures, 1);
        assert_eq!(w.counts().total_failures, 1);
        assert_eq!(w.counts().total_successes, 0);
    }

    #[test]
    fn a_long_idle_jump_clears_at_once() {
        let mut w = Window::rolling(4);
        w.on_request();
        w.record(0, Outcome::Failure);
        w.advance_to(u64::MAX / 2);
        assert_eq!(w.counts(), Counts::default());
        assert_eq!(w.age(), u64::MAX / 2);
    }

    #[test]
    fn totals_stay_the_sum_of_the_buckets() {
        let mut w = Window::rolling(5);
        let mut seed = 7u64;
        for step in 0..2_000u64 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            match seed >> 61 {
                0 => w.advance_to(w.age() + (seed >> 40) % 3),
                1 | 2 => w.on_request(),
                3 | 4 => {
                    let age = w.age().saturating_sub((seed >> 30) % 6);
                    w.record(age, Outcome::Success);
                }
                5 | 6 => {
                    let age = w.age().saturating_sub((seed >> 30) % 6);
                    w.record(age, Outcome::Failure);
                }
                _ => {
                    w.record(w.age(), Outcome::Excluded);
                }
            }
            let s = sum(&w);
            assert_eq!(s.requests, w.counts().requests, "step {step}");
            assert_eq!(s.total_successes, w.counts().total_successes, "step {step}");
            assert_eq!(s.total_failures, w.counts().total_failures, "step {step}");
            assert_eq!(
                s.total_exclusions,
                w.counts().total_exclusions,
                "step {step}"
            );
        }
    }
}
