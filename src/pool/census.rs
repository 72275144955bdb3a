//! How a pick's walk sees the endpoints: each one's [`Look`], and the one pass that counts
//! them all ([`census`]): how many admit calls, how many are isolated (what the cap bounds)
//! or down, and when the first of those out may take a call.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use crate::breaker::gate::{self, Ready};
use crate::error::Rejected;
use crate::observe::Observer;
use crate::policy::TripPolicy;

use super::choose::{allowed_isolated, stride};
use super::endpoint::Endpoint;
use super::picking::{admit, Choice, Judge};
use super::Endpoints;

/// Every endpoint once, from a start drawn from `r` with a stride coprime to their number
/// (brpc's randomised walk).
pub(super) fn walk<K, P: TripPolicy, O: Observer>(
    endpoints: &Endpoints<K, P, O>,
    r: u64,
) -> impl Iterator<Item = &Arc<Endpoint<K, P, O>>> {
    let n = endpoints.len();
    let start = ((r >> 16) % (n as u64).max(1)) as usize;
    let step = stride(n, r.rotate_left(7));
    (0..n).map(move |k| &endpoints[(start + k * step) % n])
}

/// What one walk over the endpoints counted ([`census`]).
#[derive(Debug, Default)]
pub(super) struct Census {
    /// Endpoints whose breakers admit calls (some may turn out full).
    pub(super) admitting: usize,
    /// Isolated on the traffic's judgement: what the cap bounds.
    pub(super) isolated: usize,
    /// Down on their own evidence: out whatever the cap, and not in the number the cap is
    /// a share of.
    pub(super) down: usize,
    /// The first time one of those out may take a call again (isolated, down, or its check
    /// or trial running), for the pick's rejection.
    pub(super) earliest: Option<Duration>,
}

impl Census {
    /// One more endpoint out that may take a call after `wait`.
    fn wait(&mut self, wait: Duration) {
        self.earliest = Some(self.earliest.map_or(wait, |e| e.min(wait)));
    }

    /// Whether more of the `n` endpoints are isolated than the cap (`max_isolated`) allows:
    /// the cap is a share of the endpoints that are not down, so passive isolation never
    /// takes the last of those.
    pub(super) fn over_cap(&self, n: usize, max_isolated: f64) -> bool {
        self.isolated > allowed_isolated(n - self.down, max_isolated)
    }
}

/// The one walk of a pick that looks at every endpoint (from `r`, see [`walk`]): how many
/// admit calls, are isolated or down, and when the first of those out may take a call; each
/// endpoint that admits calls (`None`) or is isolated (`Some(retry_after)`) is handed to
/// `each` as well. Breaks with the choice of a due check this pick won on the way.
pub(super) fn census<'e, K, P: TripPolicy, O: Observer>(
    endpoints: &'e Endpoints<K, P, O>,
    r: u64,
    checking: bool,
    judge: Judge,
    mut each: impl FnMut(&'e Arc<Endpoint<K, P, O>>, Option<Duration>),
) -> ControlFlow<Choice<K, P, O>, Census> {
    let mut census = Census::default();
    for endpoint in walk(endpoints, r) {
        match look(endpoint, checking, judge) {
            Look::Admits => {
                census.admitting += 1;
                each(endpoint, None);
            }
            Look::Isolated(retry_after) => {
                census.isolated += 1;
                census.wait(retry_after);
                each(endpoint, Some(retry_after));
            }
            Look::Checked(choice) => return ControlFlow::Break(choice),
            Look::Down(wait) => {
                census.down += 1;
                census.wait(wait);
            }
            Look::Checking(wait) => census.wait(wait),
            Look::Out => {}
        }
    }
    ControlFlow::Continue(census)
}

/// What a walk sees of an endpoint.
enum Look<K, P: TripPolicy, O: Observer> {
    /// Its breaker admits calls (it may still turn out full).
    Admits,
    /// Isolated: its breaker open for this much longer, or, past its open period, waiting
    /// for a check that this pick cannot run (for the time a check may take: see
    /// [`check_wait`](crate::breaker::Breaker::check_wait)). Never zero.
    Isolated(Duration),
    /// Its check runs in another call, settled or taken over within this long, or it is
    /// half-open with its probes out (a trial runs): out of this pick, but a time to retry
    /// after.
    Checking(Duration),
    /// Isolated by its own evidence (a failed health check, a hang): out whatever the cap,
    /// open for this much longer (or waiting for a check, as [`Look::Isolated`]).
    Down(Duration),
    /// Its check was due, and this pick won it (or the breaker moved on and admitted it).
    Checked(Choice<K, P, O>),
    /// Forced open by an operator, a check under way, or full: out, and not the pool's to
    /// send to.
    Out,
}

/// How a walk sees `endpoint`; a pick that can run checks (`checking`) takes a due one's
/// lease at once.
fn look<K, P: TripPolicy, O: Observer>(
    endpoint: &Arc<Endpoint<K, P, O>>,
    checking: bool,
    judge: Judge,
) -> Look<K, P, O> {
    match gate::ready(&endpoint.breaker) {
        Ready::Passes => Look::Admits,
        Ready::Rejected(Rejected::Open { retry_after }) if endpoint.breaker.is_down() => {
            Look::Down(retry_after)
        }
        Ready::Rejected(Rejected::Open { retry_after }) => Look::Isolated(retry_after),
        Ready::CheckDue if checking => {
            admit(endpoint, true, judge.at()).map_or(Look::Out, Look::Checked)
        }
        Ready::CheckDue if endpoint.breaker.is_down() => Look::Down(check_wait(endpoint)),
        Ready::CheckDue => Look::Isolated(check_wait(endpoint)),
        Ready::Rejected(Rejected::Checking) => Look::Checking(check_wait(endpoint)),
        // Half-open, every probe out: out of this pick, but a trial runs, with a time to
        // come back (a takeover, or a hint).
        Ready::Rejected(Rejected::TooManyRequests) => match endpoint.breaker.probe_wait() {
            Some(wait) => Look::Checking(wait),
            None => Look::Out,
        },
        Ready::Rejected(_) => Look::Out,
    }
}

/// How long a pick that cannot run `endpoint`'s due or running check should wait (at least
/// a nanosecond, should the check have settled since the look).
fn check_wait<K, P: TripPolicy, O: Observer>(endpoint: &Endpoint<K, P, O>) -> Duration {
    endpoint
        .breaker
        .check_wait()
        .unwrap_or(Duration::from_nanos(1))
}
