//! Configuration: knobs, files, errors that name the field, the registry and its bounds.
//!
//! One test binary for the area (its files are modules), so the suite links a few binaries
//! rather than one per file.

#[path = "../support/mod.rs"]
mod support;

mod config_errors;
#[cfg(feature = "serde")]
mod count_window;
mod file_edges;
mod jitter;
mod knobs;
mod pool_settings;
mod registry;
mod registry_room;
mod serde;
mod throttle;
