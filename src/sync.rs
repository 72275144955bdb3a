//! The synchronisation primitives the breaker's protocol is built on.
//!
//! Normal builds use `parking_lot` and `std`; under `RUSTFLAGS="--cfg loom"` the same names
//! resolve to loom's checked versions, so the loom models in `tests/loom.rs` explore every
//! interleaving of the real code. Only the primitives that take part in the protocol go
//! through here: the state mutex, the lock-free lane's atomics and its lazily made stripes,
//! the stripe a thread counts in, the manual clock's shared time, and the pool's watch for
//! hung endpoints (`pool::hang_watch`).

#[cfg(not(loom))]
mod imp {
    use std::cell::Cell;
    use std::sync::atomic::AtomicU32;
    use std::sync::OnceLock;

    pub(crate) use crate::atomic::{AtomicU64, Ordering};
    pub(crate) use parking_lot::{Mutex, MutexGuard};
    pub(crate) use std::sync::atomic::AtomicU8;
    pub(crate) use std::sync::Arc;

    /// A value made at most once, on demand, and read without a lock afterwards. What makes
    /// it is given to [`force`](Lazy::force), not kept here: a lane's stripes take 24 bytes
    /// of the lane (a `OnceLock` of a boxed slice), not 32.
    #[derive(Debug)]
    pub(crate) struct Lazy<T> {
        cell: OnceLock<T>,
    }

    impl<T> Lazy<T> {
        pub(crate) const fn new() -> Self {
            Self {
                cell: OnceLock::new(),
            }
        }

        /// The value, if it was made.
        #[inline(always)]
        pub(crate) fn get(&self) -> Option<&T> {
            self.cell.get()
        }

        /// The value, made now by `make` if it was not.
        pub(crate) fn force(&self, make: fn() -> T) -> &T {
            self.cell.get_or_init(make)
        }
    }

    /// How many threads the process can run at once (the stripes a contended lane makes).
    pub(crate) fn parallelism() -> usize {
        std::thread::available_parallelism().map_or(1, usize::from)
    }

    thread_local! {
        /// This thread's stripe probe; 0 until first asked.
        static PROBE: Cell<u32> = const { Cell::new(0) };
    }

    /// Spreads the probes of new threads (Weyl sequence: consecutive threads land far apart).
    static NEXT_PROBE: AtomicU32 = AtomicU32::new(0);

    /// This thread's stripe probe: a number that picks the stripe it counts in.
    #[inline(always)]
    pub(crate) fn probe() -> u32 {
        PROBE.with(|p| match p.get() {
            0 => {
                let probe = NEXT_PROBE
                    .fetch_add(0x9e37_79b9, std::sync::atomic::Ordering::Relaxed)
                    .wrapping_add(0x9e37_79b9)
                    | 1;
                p.set(probe);
                probe
            }
            probe => probe,
        })
    }

    /// Moves this thread to another stripe (after contention on its own).
    pub(crate) fn rehash() {
        PROBE.with(|p| p.set(super::xorshift(probe())));
    }
}

#[cfg(loom)]
mod imp {
    use std::hash::{Hash, Hasher};

    pub(crate) use crate::atomic::{AtomicU64, Ordering};
    pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU8};
    pub(crate) use loom::sync::{Arc, MutexGuard};

    /// loom's mutex with `parking_lot`'s signature: `lock()` returns the guard directly.
    #[derive(Debug)]
    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Self {
            Self(loom::sync::Mutex::new(value))
        }

        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            // The breaker never panics while holding its lock, so the mutex is never poisoned
            // by our code; a poisoned lock in a model is a bug worth a loud failure.
            self.0.lock().expect("state mutex poisoned")
        }
    }

    /// The model of `std::sync::OnceLock`-based laziness: the value is made by the first
    /// `force` (no loom operation in between: a model's thread is not preempted while it
    /// makes it), then published by a flag, so that loom explores every interleaving of
    /// publishing it with its readers.
    #[derive(Debug)]
    pub(crate) struct Lazy<T> {
        made: AtomicBool,
        value: std::sync::OnceLock<T>,
    }

    impl<T> Lazy<T> {
        pub(crate) fn new() -> Self {
            Self {
                made: AtomicBool::new(false),
                value: std::sync::OnceLock::new(),
            }
        }

        pub(crate) fn get(&self) -> Option<&T> {
            if self.made.load(Ordering::Acquire) {
                self.value.get()
            } else {
                None
            }
        }

        pub(crate) fn force(&self, make: fn() -> T) -> &T {
            let value = self.value.get_or_init(make);
            self.made.store(true, Ordering::Release);
            value
        }
    }

    /// Two stripes in a model: enough for two threads to count apart.
    pub(crate) fn parallelism() -> usize {
        2
    }

    loom::thread_local! {
        static REHASHED: std::cell::Cell<u32> = std::cell::Cell::new(0);
    }

    /// A loom thread's probe: from its number within the execution (a `ThreadId` hashes
    /// its execution too, which would make every execution of a model pick other stripes,
    /// and loom needs each to be the same).
    pub(crate) fn probe() -> u32 {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        format!("{:?}", loom::thread::current().id()).hash(&mut hasher);
        (hasher.finish() as u32 | 1) ^ REHASHED.with(|r| r.get())
    }

    /// Flips the probe's top bit: with a model's two stripes, moves to the other one.
    pub(crate) fn rehash() {
        REHASHED.with(|r| r.set(r.get() ^ 0x8000_0000));
    }
}

/// The next value of a xorshift32 sequence: a cheap way to move a probe elsewhere.
#[cfg_attr(loom, allow(dead_code))]
fn xorshift(mut x: u32) -> u32 {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    x | 1
}

pub(crate) use imp::*;
