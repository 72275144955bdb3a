//! [`Replay`]: which requests a retry may send again, and how it copies them
//! ([`CloneRequest`], a function, or HTTP's [`Idempotent`] methods).

/// How a [`RetryPolicy`](super::RetryPolicy) copies a request for another attempt, and which
/// requests it sends only once.
///
/// Implemented by [`CloneRequest`] (every request, copied with `Clone`: the default), by
/// every `Fn(&Req) -> Option<Req>`, and, with the feature `http`, by [`Idempotent`] (HTTP
/// requests whose method may be sent twice).
pub trait Replay<Req> {
    /// A copy of `request` to send again if this attempt fails, or `None`: the request is
    /// sent once and never retried (its method is not idempotent, its body cannot be
    /// copied). Asked before each attempt is sent; a call whose first request gets `None`
    /// is not counted in the retry budget either.
    fn replay(&self, request: &Req) -> Option<Req>;
}

/// Every request may be retried, copied with `Clone`. The default [`Replay`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct CloneRequest;

impl<Req: Clone> Replay<Req> for CloneRequest {
    #[inline]
    fn replay(&self, request: &Req) -> Option<Req> {
        Some(request.clone())
    }
}

impl<Req, F: Fn(&Req) -> Option<Req>> Replay<Req> for F {
    #[inline]
    fn replay(&self, request: &Req) -> Option<Req> {
        self(request)
    }
}

/// Only HTTP requests whose method is idempotent are retried: GET, HEAD, OPTIONS, TRACE
/// (safe), PUT and DELETE (RFC 9110, 9.2.2); POST, PATCH, CONNECT and other methods are sent
/// once. A request retried is copied by `Q`: [`CloneRequest`] by default (an
/// `http::Request<B>` is `Clone` when its body is), or a function of yours
/// ([`copy_with`](Idempotent::copy_with)) for a body that is not `Clone`: return `None` and
/// that request is not retried.
///
/// # Examples
///
/// ```
/// use http::{Method, Request};
/// use lazybreaker_tower::{Idempotent, Replay};
///
/// let idempotent = Idempotent::new();
/// let get = Request::get("/users/7").body(String::new()).unwrap();
/// assert!(idempotent.replay(&get).is_some());
/// let post = Request::post("/users").body("{}".to_owned()).unwrap();
/// assert!(idempotent.replay(&post).is_none(), "sent once");
///
/// // A body that cannot be copied: the requests that carry none are copied empty.
/// struct Stream(Option<Vec<u8>>); // not `Clone`
/// let copy = Idempotent::new().copy_with(|r: &Request<Stream>| {
///     r.body().0.is_none().then(|| {
///         let mut copy = Request::new(Stream(None));
///         *copy.method_mut() = r.method().clone();
///         *copy.uri_mut() = r.uri().clone();
///         *copy.headers_mut() = r.headers().clone();
///         copy
///     })
/// });
/// let delete = Request::delete("/users/7").body(Stream(None)).unwrap();
/// assert_eq!(copy.replay(&delete).unwrap().method(), Method::DELETE);
/// let put = Request::put("/users/7").body(Stream(Some(b"{}".to_vec()))).unwrap();
/// assert!(copy.replay(&put).is_none(), "a body it cannot copy: sent once");
/// ```
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Idempotent<Q = CloneRequest>(Q);

#[cfg(feature = "http")]
impl Idempotent {
    /// Idempotent methods retried, their requests copied with `Clone`.
    pub const fn new() -> Self {
        Self(CloneRequest)
    }
}

#[cfg(feature = "http")]
impl<Q> Idempotent<Q> {
    /// Idempotent methods retried, their requests copied by `copy` (a
    /// `Fn(&Request<B>) -> Option<Request<B>>`, or any [`Replay`]).
    pub fn copy_with<R>(self, copy: R) -> Idempotent<R> {
        Idempotent(copy)
    }
}

#[cfg(feature = "http")]
impl<B, Q: Replay<http::Request<B>>> Replay<http::Request<B>> for Idempotent<Q> {
    #[inline]
    fn replay(&self, request: &http::Request<B>) -> Option<http::Request<B>> {
        if !request.method().is_idempotent() {
            return None;
        }
        self.0.replay(request)
    }
}
