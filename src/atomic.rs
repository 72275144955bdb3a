//! The atomics a policy shares with the lock-free lane: `std`'s, or loom's under
//! `cfg(loom)`, so that the loom models check a policy's atomics too (brpc's EMA windows,
//! the slow-call policy's in-flight slots), and the yield of a thread waiting on them.
//! A leaf: the rest of the loom shim (the state mutex, the lane's stripes) is the engine's,
//! in `sync`, which takes its atomics from here.

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};

/// Spins once while another thread finishes a short step (a lock holder publishing the
/// lane again): the processor's pause.
#[cfg(not(loom))]
pub(crate) fn spin_a_moment() {
    std::hint::spin_loop();
}

/// Spins once (loom explores it as a yield).
#[cfg(loom)]
pub(crate) fn spin_a_moment() {
    loom::thread::yield_now();
}

/// How many times a caller spins for a lock holder's step before it goes to the lock
/// itself: a step takes a few hundred nanoseconds unless the policy is slow.
#[cfg(not(loom))]
pub(crate) const STEP_SPINS: u32 = 256;
/// Two in a model: enough for loom to see a caller wait for a step and give up on one.
#[cfg(loom)]
pub(crate) const STEP_SPINS: u32 = 2;

/// Lets another thread run: a lock holder waiting for a lock-free caller a few instructions
/// from done (see `InFlightSlots`).
#[cfg(not(loom))]
pub(crate) fn wait_a_moment() {
    std::thread::yield_now();
}

/// Lets another thread run (loom explores it as a yield).
#[cfg(loom)]
pub(crate) fn wait_a_moment() {
    loom::thread::yield_now();
}
