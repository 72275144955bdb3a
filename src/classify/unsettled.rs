//! [`Unsettled`]: the verdict of a call whose response arrived before its outcome is known
//! (a gRPC status in the trailers), handed by the classifier to the response itself.

use std::fmt;
use std::time::Duration;

use crate::policy::Outcome;

/// What reports an unsettled call's verdict: an owned permit, type-erased. Implemented by
/// the engine; the classifiers only ever see [`Unsettled`].
pub(crate) trait Finish: Send {
    /// Reports `outcome` (a failure that asked for `open_for`, when given).
    fn finish(&mut self, outcome: Outcome, open_for: Option<Duration>);
    /// The name of the breaker the call went through.
    fn breaker_name(&self) -> &str;
}

/// The verdict of an admitted call whose outcome is known only after its response arrived:
/// a gRPC response whose status comes in its trailers, at the end of its body. A classifier
/// that says a result is unsettled ([`Classify::unsettled`](super::Classify::unsettled)) is
/// given this by the layers that own their call's permit (the tower layers), and moves it
/// into the response (its body), which settles it when the outcome is known.
///
/// - [`settle`](Unsettled::settle) reports the outcome, at most once (it takes `self`).
/// - Dropped unsettled (a response body dropped before its end), the call is abandoned, as a
///   dropped [`Permit`](crate::Permit) is: counted as
///   [`Builder::abandoned_as`](crate::Builder::abandoned_as) says, an exclusion by default.
/// - The call stays in flight until then: a half-open breaker's probe slot is held by a
///   streaming response until the stream ends, and a slow-call policy measures the call to
///   its last frame.
///
/// `Send` and `'static`, so a body that holds it can be boxed into a type-erased body.
pub struct Unsettled {
    verdict: Box<dyn Finish>,
}

impl Unsettled {
    /// The verdict `verdict` reports (made by the tower layers' permits: unused without them).
    pub(crate) fn new(verdict: Box<dyn Finish>) -> Self {
        Self { verdict }
    }

    /// Reports the call's outcome.
    pub fn settle(mut self, outcome: Outcome) {
        self.verdict.finish(outcome, None);
    }

    /// Reports a failure (or a fatal result) after which the dependency asked to be left
    /// alone for `open_for`: the breaker opens for at least that long, as with
    /// [`Classify::open_for`](super::Classify::open_for). Other outcomes ignore `open_for`.
    pub fn settle_open_for(mut self, outcome: Outcome, open_for: Duration) {
        let open_for = matches!(outcome, Outcome::Failure | Outcome::Fatal).then_some(open_for);
        self.verdict.finish(outcome, open_for);
    }

    /// The name of the breaker the call went through.
    pub fn breaker(&self) -> &str {
        self.verdict.breaker_name()
    }
}

impl fmt::Debug for Unsettled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Unsettled")
            .field("breaker", &self.breaker())
            .finish_non_exhaustive()
    }
}
