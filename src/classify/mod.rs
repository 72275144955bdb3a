//! Classifiers: how the result of a call counts, one concept for every way of calling
//! ([`Breaker::execute_classified`](crate::Breaker::execute_classified),
//! [`Breaker::execute_async_classified`](crate::Breaker::execute_async_classified)).
//!
//! A [`Classify`] looks at a call's `Result` and says whether it was a success, a failure or
//! excluded (gobreaker's `IsSuccessful` and `IsExcluded` in one). It is exactly a
//! `Fn(&Result<T, E>) -> Outcome`: every such closure or function is one, and a closure passed
//! where a classifier is expected needs no type annotations. [`ok_is_success`] is the
//! classifier of the unclassified calls: `Ok` succeeds, `Err` fails. [`io_error`],
//! [`io_errors`] and [`io_error_in`] classify transport errors by `std::io::ErrorKind` (a
//! refused connection is [`Outcome::Fatal`]: it opens the breaker at once).

mod io;

pub use io::{io_error, io_error_in, io_errors};

use crate::policy::Outcome;

/// Decides how the result of a call counts: any `Fn(&Result<T, E>) -> Outcome`.
///
/// (A trait with the closure trait as its supertrait, rather than a trait a struct could
/// implement, so that `|r| match r { … }` infers its argument at every call site. A
/// configurable classifier is a function that returns a closure.)
///
/// # Examples
///
/// ```
/// use lazybreaker::classify::{ok_is_success, Classify};
/// use lazybreaker::policy::Outcome;
///
/// let not_found_is_fine = |r: &Result<u32, &str>| match r {
///     Ok(_) | Err("not found") => Outcome::Success,
///     Err(_) => Outcome::Failure,
/// };
/// assert_eq!(not_found_is_fine.classify(&Err("not found")), Outcome::Success);
/// assert_eq!(ok_is_success.classify(&Err::<u32, _>("not found")), Outcome::Failure);
/// ```
pub trait Classify<T, E>: Fn(&Result<T, E>) -> Outcome {
    /// How `result` counts.
    #[inline]
    fn classify(&self, result: &Result<T, E>) -> Outcome {
        self(result)
    }
}

impl<T, E, F> Classify<T, E> for F where F: Fn(&Result<T, E>) -> Outcome {}

/// The default classifier: `Ok` is a success, `Err` a failure.
#[inline]
pub fn ok_is_success<T, E>(result: &Result<T, E>) -> Outcome {
    match result {
        Ok(_) => Outcome::Success,
        Err(_) => Outcome::Failure,
    }
}

/// What the breaker's calls and middleware accept as a classifier: any [`Classify`], or
/// [`OkIsSuccess`], the default, which works for every `T` and `E`.
///
/// (A second trait because the default is a type of its own: [`Classify`] is exactly the
/// closure trait, which a named type cannot implement.)
pub trait Classifier<T, E> {
    /// How `result` counts.
    fn outcome(&self, result: &Result<T, E>) -> Outcome;
}

impl<T, E, C: Classify<T, E>> Classifier<T, E> for C {
    #[inline]
    fn outcome(&self, result: &Result<T, E>) -> Outcome {
        self.classify(result)
    }
}

/// The default classifier, as a type: `Ok` is a success, `Err` a failure, for every `T` and
/// `E` ([`ok_is_success`]).
///
/// # Examples
///
/// ```
/// use lazybreaker::classify::{Classifier, OkIsSuccess};
/// use lazybreaker::policy::Outcome;
///
/// assert_eq!(OkIsSuccess.outcome(&Ok::<_, ()>(1)), Outcome::Success);
/// assert_eq!(OkIsSuccess.outcome(&Err::<(), _>("boom")), Outcome::Failure);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct OkIsSuccess;

impl<T, E> Classifier<T, E> for OkIsSuccess {
    #[inline]
    fn outcome(&self, result: &Result<T, E>) -> Outcome {
        ok_is_success(result)
    }
}
