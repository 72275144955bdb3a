//! [`Verdict`]: what a breaker said of one attempt, handed from the breaker middleware to a
//! retry middleware around it through the request's extensions.

use std::sync::Arc;

use http::Extensions;

use lazybreaker::door::BreakerSeam;
use lazybreaker::policy::Outcome;

/// How the breaker middleware counted one attempt, and the breaker it went through: the
/// slot a [`RetryMiddleware`](super::RetryMiddleware) puts in the request's extensions
/// before each attempt ([`Verdict::ask`]), and a [`BreakerMiddleware`](super::BreakerMiddleware)
/// further down the chain fills in once the attempt is done ([`Verdict::tell`]). Without
/// the slot the breaker middleware writes nothing (nothing on a call's path without a
/// retry middleware).
#[derive(Clone, Default)]
pub(super) struct Verdict {
    /// How the breaker's rules counted the attempt's result.
    pub(super) outcome: Option<Outcome>,
    /// The breaker that counted it: a retry after it failed is counted in its totals.
    pub(super) breaker: Option<Arc<dyn BreakerSeam + Send + Sync>>,
}

impl Verdict {
    /// An empty slot in `extensions`, for the next attempt.
    pub(super) fn ask(extensions: &mut Extensions) {
        extensions.insert(Verdict::default());
    }

    /// Whether a retry middleware asked for the verdict of this attempt.
    pub(super) fn asked(extensions: &Extensions) -> bool {
        extensions.get::<Verdict>().is_some()
    }

    /// The breaker's verdict on the attempt, if a retry middleware asked for it.
    pub(super) fn tell(
        extensions: &mut Extensions,
        outcome: Outcome,
        breaker: Arc<dyn BreakerSeam + Send + Sync>,
    ) {
        if let Some(verdict) = extensions.get_mut::<Verdict>() {
            verdict.outcome = Some(outcome);
            verdict.breaker = Some(breaker);
        }
    }

    /// The verdict on the attempt just made, taken out of `extensions`.
    pub(super) fn take(extensions: &mut Extensions) -> Verdict {
        extensions.remove::<Verdict>().unwrap_or_default()
    }
}
