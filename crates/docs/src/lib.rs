//! The README's examples, and those of the pages under docs/, compiled and run as doc tests
//! with every crate of the workspace at hand (they show the core and its integrations
//! together). Not published. `tests/links.rs` checks that their relative links resolve;
//! `tests/family.rs` names every crate's main items, as a user of the whole family does.

/// The README's examples.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

/// The examples of docs/integrations.md (moved there from the README).
#[cfg(doctest)]
#[doc = include_str!("../../../docs/integrations.md")]
pub struct IntegrationsDoctests;

/// The examples of docs/semantics.md.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/semantics.md")]
pub struct SemanticsDoctests;

/// The examples of docs/retries.md.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/retries.md")]
pub struct RetriesDoctests;

/// The examples of docs/hedging.md.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/hedging.md")]
pub struct HedgingDoctests;

/// The examples of docs/limits.md.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/limits.md")]
pub struct LimitsDoctests;

/// The examples of docs/throttle.md.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/throttle.md")]
pub struct ThrottleDoctests;
