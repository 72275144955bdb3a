//! [`Admitted`]: the rest of the chain, once the breaker admitted the request.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use reqwest::Response;
use reqwest_middleware::Error;

use super::classify::ResponseRules;
use lazybreaker::door::gate;
use lazybreaker::observe::Observer;
use lazybreaker::policy::TripPolicy;
use lazybreaker::OwnedPermit;

pin_project! {
    /// The rest of the chain (`next.run(..)`) with the permit it reports through, settled
    /// as every async call of the crate is ([`gate::poll_call`]): a panic while it is polled
    /// is recorded as a failure, then keeps unwinding. (The permit's own drop would count it
    /// as a failure too, since an async body's locals are dropped while the panic unwinds
    /// through its `poll`; settling it here does not depend on that.) Dropped before it
    /// completes, the call is abandoned (the permit's drop).
    pub(super) struct Admitted<F, P: TripPolicy, O: Observer> {
        #[pin]
        call: F,
        permit: OwnedPermit<P, O>,
        rules: ResponseRules,
    }
}

impl<F, P: TripPolicy, O: Observer> Admitted<F, P, O> {
    pub(super) fn new(call: F, permit: OwnedPermit<P, O>, rules: ResponseRules) -> Self {
        Self {
            call,
            permit,
            rules,
        }
    }
}

impl<F, P, O> Future for Admitted<F, P, O>
where
    F: Future<Output = Result<Response, Error>>,
    P: TripPolicy,
    O: Observer,
{
    type Output = Result<Response, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        gate::poll_call(this.call, cx, this.permit, &*this.rules)
    }
}
