//! What a call's result says to its limit: a sample of its latency, a drop (an overload
//! answer, a timeout), or nothing; and [`OverloadRules`], HTTP's answers as a limit hears
//! them (feature `http`).

use std::any::Any;
use std::error::Error as StdError;
use std::time::Duration;

use lazybreaker::classify::{causes, Classify};
use lazybreaker::policy::Outcome;
use lazybreaker::{Error, RejectedBy};

type BoxError = Box<dyn StdError + Send + Sync>;

/// What a finished call tells the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// A sample of its latency (`OwnedLimitPermit::success`).
    Success,
    /// Overloaded or timed out: the limit is cut (`OwnedLimitPermit::dropped`).
    Dropped,
    /// Nothing: its place is given back unsampled (`OwnedLimitPermit::ignore`).
    Ignore,
}

/// How `result`, which took `took`, speaks to the limit, as `classify` judges it:
///
/// - a success: a sample of its latency;
/// - a failure the classifier calls an overload ([`Classify::overloaded`]), or a timeout (a
///   timer's `Elapsed` or an `io::ErrorKind::TimedOut` among the error's causes, or a
///   failure that took `deadline` or longer): dropped;
/// - any other failure, an excluded result (a 404, another breaker's rejection), a result
///   whose verdict comes later ([`Classify::unsettled`]): nothing.
pub(crate) fn verdict<T, E: 'static, C: Classify<T, E>>(
    classify: &C,
    result: &Result<T, E>,
    took: Duration,
    deadline: Option<Duration>,
) -> Verdict {
    if classify.unsettled(result) {
        return Verdict::Ignore;
    }
    match classify.classify(result) {
        Outcome::Success => Verdict::Success,
        Outcome::Failure | Outcome::Fatal => {
            let timed_out = deadline.is_some_and(|deadline| took >= deadline)
                || result.as_ref().err().is_some_and(timed_out);
            if timed_out || classify.overloaded(result) {
                Verdict::Dropped
            } else {
                Verdict::Ignore
            }
        }
        _ => Verdict::Ignore,
    }
}

/// Whether `error` is a timeout: a timer's `Elapsed` (tower's `timeout`, tokio's: with the
/// feature `retry`, which brings those crates) or an `io::Error` of kind `TimedOut` among
/// its causes, for the error types that carry one without naming a client's types (a
/// `BoxError`, an `io::Error`, a layer's [`Error`] around either).
pub(crate) fn timed_out<E: 'static>(error: &E) -> bool {
    let any: &dyn Any = error;
    if let Some(e) = any.downcast_ref::<BoxError>() {
        return among_causes(e.as_ref());
    }
    if let Some(e) = any.downcast_ref::<std::io::Error>() {
        return among_causes(e);
    }
    if let Some(Error::Inner(e)) = any.downcast_ref::<Error<BoxError>>() {
        return among_causes(e.as_ref());
    }
    if let Some(Error::Inner(e)) = any.downcast_ref::<Error<BoxError, RejectedBy>>() {
        return among_causes(e.as_ref());
    }
    if let Some(Error::Inner(e)) = any.downcast_ref::<Error<std::io::Error>>() {
        return among_causes(e);
    }
    false
}

fn among_causes(error: &(dyn StdError + 'static)) -> bool {
    causes(error).any(|e| {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return io.kind() == std::io::ErrorKind::TimedOut;
        }
        // A layer's boxed error: its inner error is no `source`, so it is looked into here.
        if let Some(Error::Inner(inner)) = e.downcast_ref::<Error<BoxError>>() {
            return among_causes(inner.as_ref());
        }
        is_elapsed(e)
    })
}

#[cfg(feature = "retry")]
fn is_elapsed(e: &(dyn StdError + 'static)) -> bool {
    e.is::<tower::timeout::error::Elapsed>() || e.is::<tokio::time::error::Elapsed>()
}

#[cfg(not(feature = "retry"))]
fn is_elapsed(_: &(dyn StdError + 'static)) -> bool {
    false
}

/// HTTP's answers as a limit hears them: [`StatusRules`](lazybreaker::http::StatusRules),
/// with every 503 Service Unavailable and 429 Too Many Requests a failure and an overload,
/// with or without `Retry-After` (the server is shedding load: the limit is cut). The
/// classifier of [`LimitLayer::http`](super::LimitLayer::http).
///
/// # Examples
///
/// ```
/// use http::Response;
/// use lazybreaker::classify::Classify;
/// use lazybreaker::policy::Outcome;
/// use lazybreaker_tower::OverloadRules;
///
/// let rules = OverloadRules::new();
/// let busy: Result<_, std::io::Error> = Ok(Response::builder().status(503).body(()).unwrap());
/// assert_eq!(rules.classify(&busy), Outcome::Failure);
/// assert!(rules.overloaded(&busy), "no `Retry-After` needed");
/// let failed: Result<_, std::io::Error> = Ok(Response::builder().status(500).body(()).unwrap());
/// assert!(!rules.overloaded(&failed));
/// ```
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
#[derive(Debug, Clone, Copy, Default)]
pub struct OverloadRules(lazybreaker::http::StatusRules);

#[cfg(feature = "http")]
impl OverloadRules {
    /// [`StatusRules::new`](lazybreaker::http::StatusRules::new), every 503 and 429 an
    /// overload.
    pub fn new() -> Self {
        Self(lazybreaker::http::StatusRules::new())
    }

    /// `rules`, every 503 and 429 an overload.
    pub fn from_rules(rules: lazybreaker::http::StatusRules) -> Self {
        Self(rules)
    }
}

#[cfg(feature = "http")]
fn shedding<B, E>(result: &Result<http::Response<B>, E>) -> bool {
    result.as_ref().is_ok_and(|response| {
        matches!(
            response.status(),
            http::StatusCode::SERVICE_UNAVAILABLE | http::StatusCode::TOO_MANY_REQUESTS
        )
    })
}

#[cfg(feature = "http")]
impl<B, E: 'static> Classify<http::Response<B>, E> for OverloadRules {
    #[inline]
    fn classify(&self, result: &Result<http::Response<B>, E>) -> Outcome {
        if shedding(result) {
            return Outcome::Failure;
        }
        self.0.classify(result)
    }

    #[inline]
    fn open_for(&self, result: &Result<http::Response<B>, E>) -> Option<Duration> {
        self.0.open_for(result)
    }

    #[inline]
    fn overloaded(&self, result: &Result<http::Response<B>, E>) -> bool {
        shedding(result)
    }

    #[inline]
    fn unsettled(&self, result: &Result<http::Response<B>, E>) -> bool {
        self.0.unsettled(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lazybreaker::classify::OkIsSuccess;
    use lazybreaker::Rejected;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn successes_are_samples_timeouts_and_overloads_drops_the_rest_nothing() {
        let ok: Result<(), BoxError> = Ok(());
        assert_eq!(verdict(&OkIsSuccess, &ok, MS, None), Verdict::Success);
        let reset: Result<(), BoxError> = Err(std::io::Error::other("reset").into());
        assert_eq!(verdict(&OkIsSuccess, &reset, MS, None), Verdict::Ignore);
        assert_eq!(
            verdict(&OkIsSuccess, &reset, MS, Some(MS)),
            Verdict::Dropped,
            "a failure that took the deadline is a timeout"
        );
        let timed_out: Result<(), std::io::Error> = Err(std::io::ErrorKind::TimedOut.into());
        assert_eq!(
            verdict(&OkIsSuccess, &timed_out, MS, None),
            Verdict::Dropped
        );
        let layered: Result<(), Error<BoxError>> = Err(Error::Inner(Box::new(
            std::io::Error::from(std::io::ErrorKind::TimedOut),
        )));
        assert_eq!(verdict(&OkIsSuccess, &layered, MS, None), Verdict::Dropped);
        let rejected: Result<(), Error<BoxError>> = Err(Error::Rejected(Rejected::Limited));
        assert_eq!(verdict(&OkIsSuccess, &rejected, MS, None), Verdict::Ignore);
        let excluded = |_: &Result<(), BoxError>| Outcome::Excluded;
        assert_eq!(verdict(&excluded, &ok, MS, None), Verdict::Ignore);
    }
}
