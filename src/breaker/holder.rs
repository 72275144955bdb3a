//! [`Holder`]: how an admission holds its breaker, borrowed or shared, and so which permit
//! it hands out.

use std::sync::Arc;

use crate::observe::Observer;
use crate::policy::TripPolicy;

use super::permit::Grant;
use super::{Breaker, OwnedPermit, Permit};

/// How an admission holds its breaker: borrowed (a [`Permit`]: `execute_async`, a fleet's
/// call, a lent registry breaker) or shared (an [`OwnedPermit`]: the tower layers, the
/// reqwest middleware, a pool's pick, which keep the permit past the borrow).
pub trait Holder: Clone + sealed::Sealed {
    /// The breaker's policy.
    type P: TripPolicy;
    /// The breaker's observer.
    type O: Observer;
    /// The permit an admission through this holder reports with.
    type Permit;
    /// The breaker.
    fn breaker(&self) -> &Breaker<Self::P, Self::O>;
    /// The permit of `grant`.
    fn permit(self, grant: Grant) -> Self::Permit;
    /// Gives `permit` back unused (an exclusion).
    fn exclude(permit: Self::Permit);
}

impl<'a, P: TripPolicy, O: Observer> Holder for &'a Breaker<P, O> {
    type P = P;
    type O = O;
    type Permit = Permit<'a, P, O>;
    #[inline(always)]
    fn breaker(&self) -> &Breaker<P, O> {
        self
    }
    #[inline(always)]
    fn permit(self, grant: Grant) -> Permit<'a, P, O> {
        Permit::new(self, grant)
    }
    fn exclude(permit: Permit<'a, P, O>) {
        permit.exclude();
    }
}

impl<P: TripPolicy, O: Observer> Holder for Arc<Breaker<P, O>> {
    type P = P;
    type O = O;
    type Permit = OwnedPermit<P, O>;
    #[inline(always)]
    fn breaker(&self) -> &Breaker<P, O> {
        self
    }
    #[inline(always)]
    fn permit(self, grant: Grant) -> OwnedPermit<P, O> {
        OwnedPermit::new(self, grant)
    }
    fn exclude(permit: OwnedPermit<P, O>) {
        permit.exclude();
    }
}

/// Keeps [`Holder`] to this crate: another holder could drop a grant and leave its call in
/// flight for good.
mod sealed {
    use std::sync::Arc;

    use super::Breaker;
    use crate::observe::Observer;
    use crate::policy::TripPolicy;

    pub trait Sealed {}
    impl<P: TripPolicy, O: Observer> Sealed for &Breaker<P, O> {}
    impl<P: TripPolicy, O: Observer> Sealed for Arc<Breaker<P, O>> {}
    impl<P: TripPolicy, O: Observer> Sealed for &Arc<Breaker<P, O>> {}
}

/// A borrowed `Arc`: the permit holds a clone of it, made only for an admission.
impl<P: TripPolicy, O: Observer> Holder for &Arc<Breaker<P, O>> {
    type P = P;
    type O = O;
    type Permit = OwnedPermit<P, O>;
    #[inline(always)]
    fn breaker(&self) -> &Breaker<P, O> {
        self
    }
    #[inline(always)]
    fn permit(self, grant: Grant) -> OwnedPermit<P, O> {
        OwnedPermit::new(Arc::clone(self), grant)
    }
    fn exclude(permit: OwnedPermit<P, O>) {
        permit.exclude();
    }
}
