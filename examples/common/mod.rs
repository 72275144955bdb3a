//! What the examples share (cargo builds no example from this folder): the demo's
//! deterministic `Rng` (xorshift64*), so that every run prints the same thing with no
//! dependency.

// Each example uses part of it.
#![allow(dead_code)]

#[path = "../../crates/demo/src/rng.rs"]
mod rng;

pub(crate) use rng::Rng;
