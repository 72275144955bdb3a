//! The README's examples, compiled and run as doc tests with every crate of the workspace
//! at hand (the README shows the core and its integrations together). Not published.

/// The README's examples.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
