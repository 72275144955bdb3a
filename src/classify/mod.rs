//! Classifiers: how the result of a call counts, one concept for every way of calling
//! ([`Breaker::execute_classified`](crate::Breaker::execute_classified),
//! [`Breaker::execute_async_classified`](crate::Breaker::execute_async_classified)).
//!
//! A [`Classify`] looks at a call's `Result` and says whether it was a success, a failure or
//! excluded (gobreaker's `IsSuccessful` and `IsExcluded` in one). Every
//! `Fn(&Result<T, E>) -> Outcome` closure or function is one. [`OkIsSuccess`] is the
//! classifier of the unclassified calls: `Ok` succeeds, `Err` fails. [`io_error`],
//! [`io_errors`] and [`io_error_in`] classify transport errors by `std::io::ErrorKind` (a
//! refused connection is [`Outcome::Fatal`]: it opens the breaker at once). [`deadline`]
//! classifies a call with a deadline inside it (`Result<Result<T, E>, Elapsed>`), so that
//! neither an elapsed deadline nor the call's own error counts as a success.

mod deadline;
mod io;
mod unsettled;

pub use deadline::{deadline, Deadline};
pub use io::causes;
pub use io::{io_error, io_error_in, io_errors};
pub use io::{transport, transport_any};
pub(crate) use unsettled::Finish;
pub use unsettled::Unsettled;

use std::time::Duration;

use crate::policy::Outcome;

/// Decides how the result of a call counts: every `Fn(&Result<T, E>) -> Outcome` (a
/// closure, a function) is one, and so is [`OkIsSuccess`], the default.
///
/// The methods that take a classifier straight from your code
/// ([`execute_classified`](crate::Breaker::execute_classified),
/// [`execute_async_classified`](crate::Breaker::execute_async_classified)) ask for the
/// closure trait itself, so that `|r| match r { … }` infers its argument there; the types
/// that keep a classifier (the tower layers, the async call's future) accept any
/// `Classify`. A classifier with configuration of its own is a function that returns a
/// closure (see [`io_errors`]), or a type implementing this trait.
///
/// # Examples
///
/// ```
/// use lazybreaker::classify::{Classify, OkIsSuccess};
/// use lazybreaker::policy::Outcome;
///
/// let not_found_is_fine = |r: &Result<u32, &str>| match r {
///     Ok(_) | Err("not found") => Outcome::Success,
///     Err(_) => Outcome::Failure,
/// };
/// assert_eq!(not_found_is_fine.classify(&Err("not found")), Outcome::Success);
/// assert_eq!(OkIsSuccess.classify(&Err::<u32, _>("not found")), Outcome::Failure);
/// ```
pub trait Classify<T, E> {
    /// How `result` counts.
    fn classify(&self, result: &Result<T, E>) -> Outcome;

    /// For a result this classifier counted as a failure: how long the dependency asked to
    /// be left alone (an HTTP `Retry-After`, say), if it did. The breaker then opens for
    /// that long at once, whatever the policy says, bounded by its
    /// [`max_open_duration`](crate::Builder::max_open_duration) (what
    /// [`Permit::failure_open_for`](crate::Permit::failure_open_for) does). `None`, the
    /// default, leaves the opening to the policy.
    ///
    /// Asked only of failures (and fatal results), so a classifier that never says anything
    /// here costs nothing on the success path. A panic here is contained like one in
    /// [`classify`](Classify::classify): the call counts as excluded.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::classify::Classify;
    /// use lazybreaker::policy::Outcome;
    /// use std::time::Duration;
    ///
    /// /// `Err(Some(secs))`: the dependency said "come back in `secs` seconds".
    /// struct Backoff;
    /// impl Classify<(), Option<u64>> for Backoff {
    ///     fn classify(&self, result: &Result<(), Option<u64>>) -> Outcome {
    ///         if result.is_ok() { Outcome::Success } else { Outcome::Failure }
    ///     }
    ///     fn open_for(&self, result: &Result<(), Option<u64>>) -> Option<Duration> {
    ///         result.as_ref().err().copied().flatten().map(Duration::from_secs)
    ///     }
    /// }
    /// assert_eq!(Backoff.open_for(&Err(Some(30))), Some(Duration::from_secs(30)));
    /// ```
    #[inline]
    fn open_for(&self, result: &Result<T, E>) -> Option<Duration> {
        let _ = result;
        None
    }

    /// For a result this classifier counted as a failure: whether the dependency said it is
    /// overloaded, alive and shedding load (an HTTP 503 or 429 with `Retry-After`, gRPC's
    /// `RESOURCE_EXHAUSTED`, brpc's `ELIMIT`), rather than broken. A single breaker counts
    /// the call as [`classify`](Classify::classify) said; a [`pool`](crate::pool) does not
    /// isolate an endpoint for it by default (see
    /// [`Pick::overloaded`](crate::pool::Pick::overloaded)). `false`, the default.
    ///
    /// Asked only of failures; a panic here is contained like one in `classify`.
    #[inline]
    fn overloaded(&self, result: &Result<T, E>) -> bool {
        let _ = result;
        false
    }

    /// Whether `result`'s outcome is not known yet: a response whose status comes at the end
    /// of its body (a gRPC response without `grpc-status` in its headers: the status is in
    /// its trailers). For such a result, the layers that own their call's permit (the tower
    /// layers) call [`defer`](Classify::defer) instead of [`classify`](Classify::classify),
    /// handing over the call's [`Unsettled`] verdict; the calls that borrow their permit
    /// (`execute_async`) count what `classify` says. `false`, the default.
    ///
    /// A panic here is contained like one in `classify`: the call counts as excluded.
    #[inline]
    fn unsettled(&self, result: &Result<T, E>) -> bool {
        let _ = result;
        false
    }

    /// Moves `verdict` into `result` (its response's body, say), which settles it once the
    /// outcome is known ([`Unsettled::settle`]); asked only of results
    /// [`unsettled`](Classify::unsettled) said are. The default settles it at once, as
    /// `classify` and `open_for` say.
    ///
    /// A panic here drops the verdict (the call is abandoned) and keeps unwinding.
    fn defer(&self, result: &mut Result<T, E>, verdict: Unsettled) {
        match judge(self, result) {
            (outcome, Some(open_for)) => verdict.settle_open_for(outcome, open_for),
            (outcome, None) => verdict.settle(outcome),
        }
    }
}

impl<T, E, F> Classify<T, E> for F
where
    F: Fn(&Result<T, E>) -> Outcome,
{
    #[inline]
    fn classify(&self, result: &Result<T, E>) -> Outcome {
        self(result)
    }
}

/// The default classifier: `Ok` is a success, `Err` a failure, for every `T` and `E`. What
/// [`execute`](crate::Breaker::execute), [`execute_async`](crate::Breaker::execute_async)
/// and the tower layers use unless given another.
///
/// # Examples
///
/// ```
/// use lazybreaker::classify::{Classify, OkIsSuccess};
/// use lazybreaker::policy::Outcome;
///
/// assert_eq!(OkIsSuccess.classify(&Ok::<_, ()>(1)), Outcome::Success);
/// assert_eq!(OkIsSuccess.classify(&Err::<(), _>("boom")), Outcome::Failure);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct OkIsSuccess;

impl<T, E> Classify<T, E> for OkIsSuccess {
    #[inline]
    fn classify(&self, result: &Result<T, E>) -> Outcome {
        match result {
            Ok(_) => Outcome::Success,
            Err(_) => Outcome::Failure,
        }
    }
}

/// How `result` counts, and for a failure, how long the dependency asked the breaker to stay
/// open ([`Classify::open_for`], asked of failures only): what every call that takes a
/// classifier reports.
#[inline]
pub(crate) fn judge<T, E, C: Classify<T, E> + ?Sized>(
    classify: &C,
    result: &Result<T, E>,
) -> (Outcome, Option<Duration>) {
    let outcome = classify.classify(result);
    let open_for = match outcome {
        Outcome::Failure | Outcome::Fatal => classify.open_for(result),
        _ => None,
    };
    (outcome, open_for)
}
