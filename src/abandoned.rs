//! [`AbandonedAs`]: how a call that ends without a verdict counts. A leaf module.

/// How a call abandoned before its verdict counts: a permit dropped without a verdict, a
/// future of [`execute_async`](crate::Breaker::execute_async) dropped before the call
/// completed (a cancelled task, a timeout *around* the call). Set per state with
/// [`Builder::abandoned_as`](crate::Builder::abandoned_as).
///
/// Whatever it counts as, an abandoned call is counted on its own in
/// [`Totals::abandoned`](crate::Totals::abandoned), never as an exclusion or a failure there,
/// and it never leaves a half-open breaker stuck: as an exclusion it gives its probe slot
/// back, as a failure it reopens the breaker. A permit dropped while its thread panics is not
/// abandoned: the call blew up, and that is a failure.
///
/// The default is [`Exclusion`](AbandonedAs::Exclusion) in both states: most abandoned calls
/// say nothing about the dependency (the client went away, a `select!` or a hedged request
/// took another branch, an early `?` return), and counting them as failures would trip a
/// healthy breaker. The price is that a deadline placed *around* the breaker hides a hung
/// dependency: put the deadline *inside* the call (so its expiry is the call's own error),
/// or choose [`Failure`](AbandonedAs::Failure) for the states where an abandoned call should
/// count against the dependency.
///
/// # Examples
///
/// ```
/// use lazybreaker::{AbandonedAs, Breaker, State};
///
/// let breaker = Breaker::builder()
///     .ready_to_trip(|c| c.consecutive_failures >= 1)
///     .abandoned_as(AbandonedAs::Failure, AbandonedAs::Failure)
///     .build();
/// drop(breaker.allow().unwrap()); // e.g. cancelled by a timeout around the call
/// assert_eq!(breaker.state(), State::Open);
/// let t = breaker.totals();
/// assert_eq!((t.abandoned, t.failures), (1, 0));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum AbandonedAs {
    /// Counts as an exclusion: neither a success nor a failure; in half-open it gives the
    /// probe slot back.
    #[default]
    Exclusion,
    /// Counts as a failure: it can trip a closed breaker, and reopens a half-open one.
    Failure,
}
