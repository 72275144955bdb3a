//! The README's examples, those of the pages under docs/ and those of the published crates'
//! own READMEs, compiled and run as doc tests with every crate of the workspace at hand (they
//! show the core and its integrations together). Not published. `tests/links.rs` checks that
//! the relative links of the README and docs/ resolve; `tests/family.rs` names every crate's
//! main items, as a user of the whole family does.

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

/// The examples of the published crates' own READMEs (crates.io shows them).
#[cfg(doctest)]
pub mod crate_readmes {
    /// lazybreaker-tower's README.
    #[doc = include_str!("../../lazybreaker-tower/README.md")]
    pub struct Tower;

    /// lazybreaker-reqwest's README.
    #[doc = include_str!("../../lazybreaker-reqwest/README.md")]
    pub struct Reqwest;

    /// lazybreaker-grpc's README.
    #[doc = include_str!("../../lazybreaker-grpc/README.md")]
    pub struct Grpc;

    /// lazybreaker-dashboard's README.
    #[doc = include_str!("../../lazybreaker-dashboard/README.md")]
    pub struct Dashboard;

    /// lazybreaker-fleet's README.
    #[doc = include_str!("../../lazybreaker-fleet/README.md")]
    pub struct Fleet;

    /// lazybreaker-otel's README.
    #[doc = include_str!("../../lazybreaker-otel/README.md")]
    pub struct Otel;

    /// lazybreaker-replay's README.
    #[doc = include_str!("../../lazybreaker-replay/README.md")]
    pub struct Replay;
}
