//! The synchronisation primitives the breaker's protocol is built on.
//!
//! Normal builds use `parking_lot` and `std`; under `RUSTFLAGS="--cfg loom"` the same names
//! resolve to loom's checked versions, so the loom models in `tests/loom.rs` explore every
//! interleaving of the real code. Only the primitives that take part in the protocol go
//! through here: the state mutex, the lock-free lane's atomics and the manual clock's shared
//! time.

#[cfg(not(loom))]
mod imp {
    pub(crate) use parking_lot::{Mutex, MutexGuard};
    pub(crate) use std::sync::atomic::{AtomicU64, Ordering};
    pub(crate) use std::sync::Arc;
}

#[cfg(loom)]
mod imp {
    pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
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
}

pub(crate) use imp::*;
