//! The front door of this workspace's integration crates (`lazybreaker-tower`,
//! `lazybreaker-reqwest`, `lazybreaker-grpc`, `lazybreaker-fleet`, `lazybreaker-dashboard`):
//! what they need of the engine beyond the public API, in one place. **Not a public API**:
//! hidden from the docs, outside semver; the integration crates require this crate's exact
//! version, so they always agree with it.
//!
//! - [`gate`]: admission, health checks and verdicts, for every call path;
//! - [`contain`]: panic containment of user code;
//! - [`metrics`]: how the metrics crates write states and decisions;
//! - [`BreakerSeam`], [`BuilderSeam`]: the few reads and counts that are not a call;
//! - the pool's pick for a tower service ([`pick_beside`], [`Beside`], [`HandingPick`]).

use std::sync::Arc;

use crate::breaker::OwnedPermit;
use crate::error::{ConfigError, Rejected};
use crate::observe::Observer;
use crate::policy::TripPolicy;
use crate::pool::{Pick, Pool};

pub use crate::breaker::{BreakerSeam, BuilderSeam, Handing, Report};
pub use crate::nanos::saturating_nanos;
pub use crate::pool::{Beside, Endpoint, HandingPick};

/// Admission, health checks and verdicts: the breaker's front door (see the engine's
/// `breaker/gate.rs`).
pub mod gate {
    pub use crate::breaker::gate::{
        admit, admit_into, poll_call, ready, record, Admit, At, Checked, Gate, Ready, Recorded,
    };
}

/// Panic containment of user code: caught, the breaker's bookkeeping finished, then let
/// continue (see the engine's `contain.rs`).
pub mod contain {
    pub use crate::contain::{catch, end, resume, resume_payload, FirstPanic};
}

/// How metrics write a breaker's values (state labels, gauge values, retry decisions, a
/// retry's and a hedge's own decisions): the core's Prometheus collector and
/// `lazybreaker-otel` read the same (see the engine's `metric_values.rs`).
pub mod metrics {
    pub use crate::metric_values::{forced_value, state_label, state_value};
}

/// The pick of an async caller at once, its health checks run beside the calls: see
/// [`Pool::pick_async`] (the tower service over the pool, whose `call` cannot wait).
pub fn pick_beside<K, P: TripPolicy, O: Observer>(
    pool: &Pool<K, P, O>,
    cx: &mut std::task::Context<'_>,
) -> Result<Beside<K, P, O>, Rejected>
where
    K: Clone + Eq + std::fmt::Display,
{
    pool.pick_beside(cx)
}

/// The pick of `endpoint`, its breaker having admitted the call with `permit` (after a
/// passed check).
pub fn pick_admitted<K, P: TripPolicy, O: Observer>(
    endpoint: Arc<Endpoint<K, P, O>>,
    permit: OwnedPermit<P, O>,
) -> Pick<K, P, O> {
    Pick::after_check(endpoint, permit)
}

/// The key of the endpoint a [`Beside::Wait`] names.
pub fn endpoint_key<K, P: TripPolicy, O: Observer>(endpoint: &Endpoint<K, P, O>) -> &K {
    endpoint.key()
}

/// `error`, attributed to the breaker called `name` (unless it already is, or `name` is
/// empty).
pub fn for_breaker(error: ConfigError, name: &str) -> ConfigError {
    error.for_breaker(name)
}
