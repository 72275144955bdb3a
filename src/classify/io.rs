//! Classifying `std::io::Error`s by kind: what a transport error says about the dependency.

use std::any::Any;
use std::error::Error as StdError;
use std::io::{self, ErrorKind};

use crate::error::{Error, Rejected, RejectedBy};
use crate::policy::Outcome;

type BoxError = Box<dyn StdError + Send + Sync>;

/// How an I/O error counts, by its kind:
///
/// | kind | counts as | why |
/// |---|---|---|
/// | `ConnectionRefused`, `HostUnreachable`, `NetworkUnreachable`, `AddrNotAvailable` | [`Fatal`](Outcome::Fatal) | nothing listens there, or no route to it: the dependency is gone (brpc isolates the node at once on `ECONNREFUSED`, `ENETUNREACH`, `EHOSTUNREACH`) |
/// | `TimedOut` | [`Failure`](Outcome::Failure) | the dependency did not answer in time: it may be overloaded or stuck (count it, do not trip at once) |
/// | `ConnectionReset`, `ConnectionAborted`, `BrokenPipe`, `UnexpectedEof`, `NotConnected` | [`Failure`](Outcome::Failure) | the connection died mid-call |
/// | `Interrupted`, `WouldBlock` | [`Excluded`](Outcome::Excluded) | a signal or a non-blocking retry on our side: nothing happened to the dependency |
/// | `InvalidInput`, `InvalidData`, `PermissionDenied`, `Unsupported`, `OutOfMemory` | [`Excluded`](Outcome::Excluded) | our request or our process, not the dependency |
/// | anything else | [`Failure`](Outcome::Failure) | unknown: count it |
///
/// # Examples
///
/// ```
/// use lazybreaker::classify::io_error;
/// use lazybreaker::policy::Outcome;
/// use std::io::{Error, ErrorKind};
///
/// assert_eq!(io_error(&Error::from(ErrorKind::ConnectionRefused)), Outcome::Fatal);
/// assert_eq!(io_error(&Error::from(ErrorKind::TimedOut)), Outcome::Failure);
/// assert_eq!(io_error(&Error::from(ErrorKind::Interrupted)), Outcome::Excluded);
/// ```
pub fn io_error(error: &io::Error) -> Outcome {
    match error.kind() {
        ErrorKind::ConnectionRefused
        | ErrorKind::HostUnreachable
        | ErrorKind::NetworkUnreachable
        | ErrorKind::AddrNotAvailable => Outcome::Fatal,
        ErrorKind::TimedOut
        | ErrorKind::ConnectionReset
        | ErrorKind::ConnectionAborted
        | ErrorKind::BrokenPipe
        | ErrorKind::UnexpectedEof
        | ErrorKind::NotConnected => Outcome::Failure,
        ErrorKind::Interrupted
        | ErrorKind::WouldBlock
        | ErrorKind::InvalidInput
        | ErrorKind::InvalidData
        | ErrorKind::PermissionDenied
        | ErrorKind::Unsupported
        | ErrorKind::OutOfMemory => Outcome::Excluded,
        _ => Outcome::Failure,
    }
}

/// The classifier of calls that return `io::Result<T>`: `Ok` succeeds, an error counts as
/// [`io_error`] says.
///
/// # Examples
///
/// ```
/// use lazybreaker::classify::io_errors;
/// use lazybreaker::{Breaker, State};
/// use std::io::{Error, ErrorKind};
///
/// let breaker = Breaker::builder().build(); // trips after more than 5 failures...
/// let refused = breaker.execute_classified(
///     || Err::<(), _>(Error::from(ErrorKind::ConnectionRefused)),
///     io_errors(),
/// );
/// assert!(refused.is_err());
/// assert_eq!(breaker.state(), State::Open); // ...but a refused connection trips at once
/// ```
pub fn io_errors<T>() -> impl Fn(&io::Result<T>) -> Outcome + Clone + Send + Sync {
    |result| match result {
        Ok(_) => Outcome::Success,
        Err(e) => io_error(e),
    }
}

/// How an error counts if an `io::Error` is among its causes (the error itself or its
/// [`source`](StdError::source) chain: a hyper or reqwest error wrapping the socket's), as
/// [`io_error`] says; `None` if there is none. For composing with other classifiers:
///
/// ```
/// use lazybreaker::classify::io_error_in;
/// use lazybreaker::policy::Outcome;
/// use std::io::{Error, ErrorKind};
///
/// #[derive(Debug)]
/// struct Transport(Error);
/// impl std::fmt::Display for Transport {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str("transport") }
/// }
/// impl std::error::Error for Transport {
///     fn source(&self) -> Option<&(dyn std::error::Error + 'static)> { Some(&self.0) }
/// }
///
/// let e = Transport(Error::from(ErrorKind::ConnectionRefused));
/// assert_eq!(io_error_in(&e), Some(Outcome::Fatal));
/// // With an HTTP classifier: `Err(e) => io_error_in(e).unwrap_or(Outcome::Failure)`.
/// ```
pub fn io_error_in(error: &(dyn StdError + 'static)) -> Option<Outcome> {
    causes(error).find_map(|e| e.downcast_ref::<io::Error>().map(io_error))
}

/// How many causes of an error the classifiers look at: a chain longer than this (or one
/// that loops back on itself) is not followed further.
const MAX_CAUSES: usize = 64;

/// `error` and its causes, at most 64 of them.
pub fn causes<'a>(
    error: &'a (dyn StdError + 'static),
) -> impl Iterator<Item = &'a (dyn StdError + 'static)> {
    std::iter::successors(Some(error), |&e| e.source()).take(MAX_CAUSES)
}

/// How a transport error counts, whatever wraps it: the first of its causes that says
/// something decides. `first` looks at each cause before the rules here (a gRPC `Status`,
/// say). A rejection by another breaker (a [`Rejected`] or a [`RejectedBy`], or a layer's
/// [`Error::Rejected`], among the causes: a breaker further down the stack) is excluded:
/// that request never reached the dependency, and the breaker that rejected it counted it
/// already. An `std::io::Error` counts as [`io_error`] says. Anything else is a failure.
pub fn transport(
    error: &(dyn StdError + 'static),
    first: &dyn Fn(&(dyn StdError + 'static)) -> Option<Outcome>,
) -> Outcome {
    for e in causes(error) {
        if let Some(outcome) = first(e) {
            return outcome;
        }
        if e.is::<Rejected>() || e.is::<RejectedBy>() {
            return Outcome::Excluded;
        }
        if let Some(io) = e.downcast_ref::<io::Error>() {
            return io_error(io);
        }
        // An inner breaker layer's error, boxed by a layer around it: its inner error is not
        // a `source` (see `Error`), so it is looked into here.
        if let Some(layer) = e.downcast_ref::<Error<BoxError>>() {
            return match layer {
                Error::Rejected(_) => Outcome::Excluded,
                Error::Inner(inner) => transport(inner.as_ref(), first),
            };
        }
    }
    Outcome::Failure
}

/// [`transport`] for an error of any type: the types that can carry an `std::io::Error`
/// without naming a client's types (a `BoxError`, an `io::Error`, a layer's [`Error`] around
/// either), and the error types `first_type` knows (a client's own); else a failure.
pub fn transport_any<E: 'static>(
    error: &E,
    first_type: &dyn Fn(&dyn Any) -> Option<&(dyn StdError + 'static)>,
    first: &dyn Fn(&(dyn StdError + 'static)) -> Option<Outcome>,
) -> Outcome {
    let any: &dyn Any = error;
    if let Some(e) = first_type(any) {
        return transport(e, first);
    }
    if let Some(e) = any.downcast_ref::<BoxError>() {
        return transport(e.as_ref(), first);
    }
    if let Some(e) = any.downcast_ref::<io::Error>() {
        return transport(e, first);
    }
    if let Some(e) = any.downcast_ref::<Error<BoxError>>() {
        return match e {
            Error::Inner(e) => transport(e.as_ref(), first),
            Error::Rejected(_) => Outcome::Excluded,
        };
    }
    if let Some(e) = any.downcast_ref::<Error<BoxError, RejectedBy>>() {
        return match e {
            Error::Inner(e) => transport(e.as_ref(), first),
            Error::Rejected(_) => Outcome::Excluded,
        };
    }
    Outcome::Failure
}
