//! The recorded conformance vectors (gobreaker, brpc), the model-based property tests, and open periods and the ways back from them.
//!
//! One test binary for the area (its files are modules), so the suite links a few binaries
//! rather than one per file.

#[path = "../support/mod.rs"]
mod support;

mod conformance_brpc;
mod conformance_gobreaker;
mod model;
mod open_periods;
