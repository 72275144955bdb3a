//! The retry budget's ledger: deposits and withdrawals counted in time slices, lock-free and
//! exact, with the time given (sans-IO: [`RetryBudget`](super::RetryBudget) reads the clock).
//!
//! The `ttl` is cut into [`SLICES`] slices; a slice's counts live while the slice is one of
//! the last [`SLICES`] (the current one included), as Finagle's windowed counters do.
//!
//! - **Deposits** are counted per stripe (one cache line per core, the thread's own, as the
//!   lane counts its calls): a deposit is one compare-and-swap on a line no other core
//!   writes, of a word that holds the slice and its count.
//! - **Withdrawals** are serialized by one word, the *head* (the latest slice a withdrawal
//!   saw, and the withdrawals in it): every withdrawal is one compare-and-swap of the head,
//!   made only if the window holds room for it. The slices before the head's are kept in a
//!   ring, each written (with `fetch_max`, so a late writer cannot lower it) before the head
//!   moves past it. So a withdrawal that lands counted every other one, whatever the
//!   threads: the budget is never exceeded. Deposits only add room, so a deposit a
//!   withdrawal did not see yet can only make it stricter.
//! - Time never goes back for withdrawals: a thread whose reading is behind the head's
//!   slice counts in the head's slice.

use crate::nanos::Nanos;
use crate::sync::{self, AtomicU64, Ordering};

/// The slices a `ttl` is cut into.
pub(super) const SLICES: u64 = 10;

/// One in a million: the percent is kept in millionths, so that the arithmetic is exact on
/// integers (0.6 is 600 000 millionths: ten requests make exactly six retries).
pub(super) const MILLION: u128 = 1_000_000;

/// The shortest slice: a millisecond (a `ttl` of at least 10 ms).
pub(super) const MIN_SLICE_NANOS: Nanos = 1_000_000;

/// The most stripes a ledger makes (64 cache lines).
const MAX_STRIPES: usize = 64;

/// A slice's number and its count in one word: the slice above (40 bits: at a slice of at
/// least a millisecond, 35 years), the count below (24 bits, saturating: a count that
/// saturates only makes the budget stricter). Zero is no slice at all (slices are numbered
/// from 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slot(u64);

/// The bits of a slot's count.
const COUNT_BITS: u32 = 24;
const MAX_COUNT: u64 = (1 << COUNT_BITS) - 1;

impl Slot {
    const EMPTY: Slot = Slot(0);

    fn new(slice: u64, count: u64) -> Self {
        Slot((slice << COUNT_BITS) | count.min(MAX_COUNT))
    }

    fn slice(self) -> u64 {
        self.0 >> COUNT_BITS
    }

    fn count(self) -> u64 {
        self.0 & MAX_COUNT
    }

    /// The count, if the slot holds `slice`.
    fn count_in(self, slice: u64) -> u64 {
        if self.slice() == slice {
            self.count()
        } else {
            0
        }
    }
}

/// One core's deposits, alone on its cache lines.
#[derive(Debug)]
#[repr(align(128))]
struct Stripe {
    slots: [AtomicU64; SLICES as usize],
}

/// The counts of a budget: see the module's documentation.
#[derive(Debug)]
pub(super) struct Ledger {
    /// The length of a slice, in nanoseconds (at least 1).
    slice_nanos: Nanos,
    /// The percent of the window's deposits that may be withdrawn, in millionths.
    percent_millionths: u128,
    /// The withdrawals allowed whatever the deposits (the reserve).
    reserve: u64,
    stripes: Box<[Stripe]>,
    /// The latest slice a withdrawal counted in, and its withdrawals.
    head: AtomicU64,
    /// The withdrawals of the slices before the head's, by slice modulo [`SLICES`].
    ring: [AtomicU64; SLICES as usize],
    /// The slice a reading last fell in: a deposit whose reading falls in it too finds its
    /// slice with a multiplication, not a division (written once a slice).
    recent: AtomicU64,
}

impl Ledger {
    pub(super) fn new(slice_nanos: Nanos, percent_millionths: u128, reserve: u64) -> Self {
        let stripes = sync::parallelism()
            .next_power_of_two()
            .clamp(2, MAX_STRIPES);
        Ledger {
            slice_nanos: slice_nanos.max(MIN_SLICE_NANOS),
            percent_millionths,
            reserve,
            stripes: (0..stripes)
                .map(|_| Stripe {
                    slots: std::array::from_fn(|_| AtomicU64::new(0)),
                })
                .collect(),
            head: AtomicU64::new(Slot::EMPTY.0),
            ring: std::array::from_fn(|_| AtomicU64::new(0)),
            recent: AtomicU64::new(1),
        }
    }

    /// The slice `now` falls in (numbered from 1: slice `s` is
    /// `[(s - 1) × slice_nanos, s × slice_nanos)`).
    #[inline]
    fn slice_at(&self, now: Nanos) -> u64 {
        let recent = self.recent.load(Ordering::Relaxed);
        let start = (recent - 1).saturating_mul(self.slice_nanos);
        if now >= start && now - start < self.slice_nanos {
            return recent;
        }
        let slice = now / self.slice_nanos + 1;
        self.recent.store(slice, Ordering::Relaxed);
        slice
    }

    /// One request more, at `now`.
    #[inline]
    pub(super) fn deposit(&self, now: Nanos) {
        self.deposit_many(now, 1);
    }

    /// `n` requests more, at `now`.
    pub(super) fn deposit_many(&self, now: Nanos, n: u64) {
        let slice = self.slice_at(now);
        let stripes = &self.stripes;
        // `stripes.len()` is a power of two: the probe's top bits pick one.
        let index = (sync::probe() >> (u32::BITS - stripes.len().trailing_zeros())) as usize;
        let slot = &stripes[index].slots[(slice % SLICES) as usize];
        let mut current = Slot(slot.load(Ordering::Relaxed));
        loop {
            let next = if current.slice() == slice {
                Slot::new(slice, current.count().saturating_add(n))
            } else if current.slice() > slice {
                // A later slice already took the slot (this thread's reading is more than a
                // ttl behind another's): the deposit has expired for it.
                return;
            } else {
                Slot::new(slice, n)
            };
            match slot.compare_exchange_weak(
                current.0,
                next.0,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(found) => current = Slot(found),
            }
        }
    }

    /// The deposits within the window that ends with `slice`.
    fn deposits(&self, slice: u64) -> u64 {
        let mut sum = 0u64;
        for stripe in self.stripes.iter() {
            for back in 0..SLICES.min(slice) {
                let at = slice - back;
                let slot = Slot(stripe.slots[(at % SLICES) as usize].load(Ordering::Acquire));
                sum = sum.saturating_add(slot.count_in(at));
            }
        }
        sum
    }

    /// The withdrawals within the window that ends with `slice` (at or after the head's),
    /// the head's own slice read from `head`.
    fn withdrawals(&self, head: Slot, slice: u64) -> u64 {
        let mut sum = 0u64;
        for back in 0..SLICES.min(slice) {
            let at = slice - back;
            sum += if head.slice() == at {
                head.count()
            } else {
                Slot(self.ring[(at % SLICES) as usize].load(Ordering::Acquire)).count_in(at)
            };
        }
        sum
    }

    /// How many withdrawals the window that ends with `slice` allows in all: the reserve,
    /// plus the percent of its deposits, rounded down.
    fn allowance(&self, slice: u64) -> u64 {
        let earned = u128::from(self.deposits(slice)) * self.percent_millionths / MILLION;
        u64::try_from(earned)
            .unwrap_or(u64::MAX)
            .saturating_add(self.reserve)
    }

    /// The slice a withdrawal at `now` counts in given the head: never before the head's.
    fn current(&self, head: Slot, now: Nanos) -> u64 {
        self.slice_at(now).max(head.slice())
    }

    /// One retry, if the window has room for it at `now`.
    pub(super) fn try_withdraw(&self, now: Nanos) -> bool {
        let mut head = Slot(self.head.load(Ordering::Acquire));
        loop {
            let slice = self.current(head, now);
            let taken = self.withdrawals(head, slice);
            if taken >= self.allowance(slice) {
                return false;
            }
            let next = if head.slice() == slice {
                Slot::new(slice, head.count() + 1)
            } else {
                if head != Slot::EMPTY {
                    // The head's slice goes into the ring before the head leaves it.
                    self.ring[(head.slice() % SLICES) as usize].fetch_max(head.0, Ordering::AcqRel);
                }
                Slot::new(slice, 1)
            };
            match self
                .head
                .compare_exchange(head.0, next.0, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return true,
                Err(found) => head = Slot(found),
            }
        }
    }

    /// The withdrawals the window allows at `now`, beyond those it has.
    pub(super) fn balance(&self, now: Nanos) -> u64 {
        let head = Slot(self.head.load(Ordering::Acquire));
        let slice = self.current(head, now);
        self.allowance(slice)
            .saturating_sub(self.withdrawals(head, slice))
    }

    /// The deposits within the window at `now`.
    pub(super) fn deposits_at(&self, now: Nanos) -> u64 {
        let head = Slot(self.head.load(Ordering::Acquire));
        self.deposits(self.current(head, now))
    }
}
