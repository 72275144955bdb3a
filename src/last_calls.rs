//! [`LastCalls`]: the results of the last `n` calls, oldest first, the memory of a
//! count-based sliding window (resilience4j's `COUNT_BASED` window). A leaf module: the
//! counts built on it live in `counts`.

/// One result in a [`LastCalls`]: whether it failed, and whether it was slow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Result {
    pub(crate) failed: bool,
    pub(crate) slow: bool,
}

impl Result {
    const FAILED: u8 = 1;
    const SLOW: u8 = 2;

    fn to_bits(self) -> u8 {
        (if self.failed { Self::FAILED } else { 0 }) | (if self.slow { Self::SLOW } else { 0 })
    }

    fn from_bits(bits: u8) -> Self {
        Self {
            failed: bits & Self::FAILED != 0,
            slow: bits & Self::SLOW != 0,
        }
    }
}

/// A ring of the last `capacity` results, one byte each, allocated once when it is made.
#[derive(Debug, Clone)]
pub(crate) struct LastCalls {
    slots: Box<[u8]>,
    /// The oldest result's slot.
    head: usize,
    len: usize,
}

impl LastCalls {
    /// A ring for the last `capacity` results (zero: no ring at all).
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            slots: vec![0; capacity].into_boxed_slice(),
            head: 0,
            len: 0,
        }
    }

    /// How many results it keeps at most.
    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// How many results it holds.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Forgets every result.
    pub(crate) fn clear(&mut self) {
        self.head = 0;
        self.len = 0;
    }

    /// Appends `result` as the newest; returns the oldest, which it pushed out, once full.
    /// A ring of capacity zero keeps nothing.
    pub(crate) fn push(&mut self, result: Result) -> Option<Result> {
        let capacity = self.capacity();
        if capacity == 0 {
            return None;
        }
        if self.len < capacity {
            let tail = (self.head + self.len) % capacity;
            self.slots[tail] = result.to_bits();
            self.len += 1;
            return None;
        }
        let oldest = Result::from_bits(self.slots[self.head]);
        self.slots[self.head] = result.to_bits();
        self.head = (self.head + 1) % capacity;
        Some(oldest)
    }

    /// Appends `n` copies of `result` as the newest, at most the capacity (what as many
    /// [`push`](Self::push)es do, in one pass over the slots); returns how many of the
    /// results pushed out failed, and how many were slow.
    pub(crate) fn push_many(&mut self, result: Result, n: usize) -> (u64, u64) {
        let capacity = self.capacity();
        let n = n.min(capacity);
        let bits = result.to_bits();
        let (mut failed, mut slow) = (0, 0);
        for _ in 0..n {
            if self.len < capacity {
                self.slots[(self.head + self.len) % capacity] = bits;
                self.len += 1;
                continue;
            }
            let oldest = Result::from_bits(self.slots[self.head]);
            failed += u64::from(oldest.failed);
            slow += u64::from(oldest.slow);
            self.slots[self.head] = bits;
            self.head = (self.head + 1) % capacity;
        }
        (failed, slow)
    }

    /// Fills the ring with `result` alone (what `capacity` or more pushes of it leave).
    pub(crate) fn fill(&mut self, result: Result) {
        self.slots.fill(result.to_bits());
        self.head = 0;
        self.len = self.capacity();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: Result = Result {
        failed: false,
        slow: false,
    };
    const FAILED: Result = Result {
        failed: true,
        slow: false,
    };
    const SLOW_FAILED: Result = Result {
        failed: true,
        slow: true,
    };

    #[test]
    fn it_keeps_the_last_results_and_pushes_out_the_oldest() {
        let mut ring = LastCalls::new(3);
        assert_eq!(ring.push(FAILED), None);
        assert_eq!(ring.push(OK), None);
        assert_eq!(ring.push(SLOW_FAILED), None);
        assert_eq!(ring.len(), 3);
        assert_eq!(ring.push(OK), Some(FAILED), "the first one in goes first");
        assert_eq!(ring.push(OK), Some(OK));
        assert_eq!(ring.push(OK), Some(SLOW_FAILED), "its slow flag kept");
        assert_eq!(ring.push(OK), Some(OK));
        ring.clear();
        assert_eq!((ring.len(), ring.push(FAILED)), (0, None));
    }

    #[test]
    fn pushing_many_is_pushing_each() {
        for n in 0..9 {
            let (mut one, mut many) = (LastCalls::new(5), LastCalls::new(5));
            for r in [FAILED, OK, SLOW_FAILED] {
                one.push(r);
                many.push(r);
            }
            let mut out = (0, 0);
            for _ in 0..n {
                if let Some(r) = one.push(OK) {
                    out.0 += u64::from(r.failed);
                    out.1 += u64::from(r.slow);
                }
            }
            assert_eq!(many.push_many(OK, n), out, "{n}");
            assert_eq!(many.len(), one.len(), "{n}");
            for _ in 0..5 {
                assert_eq!(many.push(FAILED), one.push(FAILED), "{n}");
            }
        }
    }

    #[test]
    fn a_filled_ring_holds_only_that_result() {
        let mut ring = LastCalls::new(2);
        ring.push(FAILED);
        ring.fill(OK);
        assert_eq!(ring.len(), 2);
        assert_eq!(ring.push(FAILED), Some(OK));
        assert_eq!(ring.push(FAILED), Some(OK));
        assert_eq!(
            LastCalls::new(0).push(FAILED),
            None,
            "no ring keeps nothing"
        );
    }
}
