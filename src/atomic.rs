//! The atomics a policy shares with the lock-free lane: `std`'s, or loom's under
//! `cfg(loom)`, so that the loom models check a policy's atomics too (brpc's EMA windows).
//! A leaf: the rest of the loom shim (the state mutex, the lane's stripes) is the engine's,
//! in `sync`, which takes its atomics from here.

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
