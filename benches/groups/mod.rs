//! The scenarios, one file per state (plus policies, the windowed ratio breakers, the
//! floor references and the registry at scale). Each group holds one bench per
//! implementation or variant, so criterion prints them side by side.

pub(crate) mod closed;
pub(crate) mod floor;
pub(crate) mod half_open;
pub(crate) mod open;
pub(crate) mod policies;
pub(crate) mod registry;
pub(crate) mod retry;
pub(crate) mod scale;
pub(crate) mod throttle;
pub(crate) mod windows;
