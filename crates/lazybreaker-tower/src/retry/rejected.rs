//! [`MaybeRejected`]: whether an attempt's error is a breaker's rejection, which a retry
//! would meet again (so none is made).

use std::convert::Infallible;
use std::error::Error as StdError;

use lazybreaker::classify::causes;
use lazybreaker::{Error, Rejected, RejectedBy};

type BoxError = Box<dyn StdError + Send + Sync>;

/// An error that may be a breaker's rejection: the attempt was not made, and a retry would
/// be rejected as well, so a [`RetryPolicy`](super::RetryPolicy) never retries it
/// ([`Cause::Rejected`](lazybreaker::retry::Cause::Rejected)), nor a `HedgeLayer` (feature
/// `hedge`) hedges it again. A concurrency limit's
/// [`Rejected::Limited`] is the exception for the retries: an overload, retried (a place
/// frees as soon as a call ends); a hedge makes no other attempt after it (hedging adds
/// load, which the limit just refused).
///
/// Implemented for the layers' errors ([`Error`], a rejection plain or naming its breaker),
/// for a `BoxError` and an `std::io::Error` (a rejection among their causes: a breaker
/// under a layer that boxes errors, such as `tower::timeout`), and for `Infallible`. For an
/// error type of your own that never carries one:
///
/// ```
/// use lazybreaker::Rejected;
/// use lazybreaker_tower::MaybeRejected;
///
/// #[derive(Debug)]
/// struct Refused;
/// impl MaybeRejected for Refused {
///     fn rejection(&self) -> Option<Rejected> {
///         None
///     }
/// }
/// assert!(Refused.rejection().is_none());
/// ```
pub trait MaybeRejected {
    /// The breaker's rejection this error is, or carries, if any.
    fn rejection(&self) -> Option<Rejected>;
}

/// A layer's error: its rejection, if it is one. An inner error is not looked into (a
/// breaker's layer right under another answers with a rejection of its own type).
impl<E, R: AsRef<Rejected>> MaybeRejected for Error<E, R> {
    #[inline]
    fn rejection(&self) -> Option<Rejected> {
        Error::rejection(self)
    }
}

/// A rejection among the error's causes, or inside a layer's boxed error.
impl MaybeRejected for BoxError {
    fn rejection(&self) -> Option<Rejected> {
        among_causes(self.as_ref())
    }
}

/// A rejection among the causes of the error an `io::Error` wraps.
impl MaybeRejected for std::io::Error {
    fn rejection(&self) -> Option<Rejected> {
        let inner: &(dyn StdError + 'static) = self.get_ref()?;
        among_causes(inner)
    }
}

impl MaybeRejected for Infallible {
    fn rejection(&self) -> Option<Rejected> {
        match *self {}
    }
}

/// The first rejection among `error` and its causes: a [`Rejected`], a [`RejectedBy`], or a
/// layer's boxed error (whose inner error is no `source`, so it is looked into here).
fn among_causes(error: &(dyn StdError + 'static)) -> Option<Rejected> {
    causes(error).find_map(|e| {
        if let Some(rejected) = e.downcast_ref::<Rejected>() {
            return Some(*rejected);
        }
        if let Some(by) = e.downcast_ref::<RejectedBy>() {
            return Some(by.rejected());
        }
        if let Some(layer) = e.downcast_ref::<Error<BoxError>>() {
            return match layer {
                Error::Rejected(rejected) => Some(*rejected),
                Error::Inner(inner) => among_causes(inner.as_ref()),
            };
        }
        if let Some(layer) = e.downcast_ref::<Error<BoxError, RejectedBy>>() {
            return match layer {
                Error::Rejected(by) => Some(by.rejected()),
                Error::Inner(inner) => among_causes(inner.as_ref()),
            };
        }
        None
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const OPEN: Rejected = Rejected::Open {
        retry_after: Duration::from_secs(1),
    };

    #[test]
    fn rejections_are_found_where_layers_put_them() {
        let plain: Error<std::io::Error> = Error::Rejected(OPEN);
        assert!(plain.rejection().is_some());
        let inner: Error<std::io::Error> = Error::Inner(std::io::Error::other("reset"));
        assert!(MaybeRejected::rejection(&inner).is_none());
        let by: Error<(), RejectedBy> = Error::Rejected(RejectedBy::new("b", OPEN));
        assert!(MaybeRejected::rejection(&by).is_some());

        // Boxed by a layer around the breaker's, or deeper inside another breaker's error.
        let boxed: BoxError = Box::new(Error::<BoxError>::Rejected(OPEN));
        assert!(boxed.rejection().is_some());
        let deeper: BoxError = Box::new(Error::<BoxError>::Inner(Box::new(OPEN)));
        assert!(deeper.rejection().is_some());
        let reset: BoxError = Box::new(std::io::Error::other("reset"));
        assert!(reset.rejection().is_none());
        let io = std::io::Error::other(RejectedBy::new("b", OPEN));
        assert!(io.rejection().is_some());
        assert!(std::io::Error::other("reset").rejection().is_none());
    }
}
