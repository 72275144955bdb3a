//! A budget fed by a count of requests kept elsewhere ([`RetryBudget::fed_by`]): a breaker's
//! admissions, so that a call pays nothing for the budget.
//!
//! The count is read when the budget is asked (a retry, its balance), never on a call's
//! path: the requests made since the last reading are credited to that reading's time, the
//! earliest they can have been made. So they leave the window no later than they would have
//! counted in it, and the budget is never more generous than one fed request by request:
//! after a quiet spell longer than the `ttl`, it starts from its reserve, and grows with
//! the requests made since.
//!
//! [`RetryBudget::fed_by`]: super::RetryBudget::fed_by

use std::sync::Weak;

use super::ledger::Ledger;
use crate::nanos::Nanos;

/// A count of requests a [`RetryBudget`](super::RetryBudget) can be fed from
/// ([`fed_by`](super::RetryBudget::fed_by)): a [`Breaker`](crate::Breaker) (the calls it
/// admitted, less the retries made after its failures), or a count of your own.
///
/// # Examples
///
/// A count the application keeps anyway (a server's requests served, say):
///
/// ```
/// use lazybreaker::retry::{RequestCount, RetryBudget};
/// use lazybreaker::ManualClock;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
///
/// struct Served(AtomicU64);
///
/// impl RequestCount for Served {
///     fn requests(&self) -> u64 {
///         self.0.load(Ordering::Relaxed)
///     }
/// }
///
/// let served = Arc::new(Served(AtomicU64::new(0)));
/// let budget = RetryBudget::new(0.5)?
///     .min_retries_per_second(0)
///     .clock(ManualClock::new())
///     .fed_by(&served);
/// served.0.fetch_add(4, Ordering::Relaxed);
/// assert_eq!(budget.balance(), 2, "half of the 4 requests served since");
/// # Ok::<(), lazybreaker::ConfigError>(())
/// ```
pub trait RequestCount: Send + Sync {
    /// The requests made so far, retries left out. It should never go down; if it does,
    /// the budget counts from the lower figure on, and credits nothing for the drop.
    fn requests(&self) -> u64;
}

/// One source a budget is fed from, and how far it was read.
pub(super) struct Feed {
    source: Weak<dyn RequestCount>,
    /// The count at the last reading.
    seen: u64,
    /// The time of the last reading: what the requests made since are credited to.
    at: Nanos,
}

impl Feed {
    /// A feed from `source`, read now (what it counted before is not the budget's).
    pub(super) fn new(source: Weak<dyn RequestCount>, seen: u64, at: Nanos) -> Self {
        Feed { source, seen, at }
    }

    /// Reads the source and credits the requests made since the last reading to that
    /// reading's time; `false` once the source is gone.
    pub(super) fn catch_up(&mut self, ledger: &Ledger, now: Nanos) -> bool {
        let Some(source) = self.source.upgrade() else {
            return false;
        };
        let count = source.requests();
        let made = count.saturating_sub(self.seen);
        if made > 0 {
            ledger.deposit_many(self.at, made);
        }
        self.seen = count;
        self.at = self.at.max(now);
        true
    }
}

impl std::fmt::Debug for Feed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Feed")
            .field("seen", &self.seen)
            .field("at", &self.at)
            .finish_non_exhaustive()
    }
}
