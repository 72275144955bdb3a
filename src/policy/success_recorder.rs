//! [`SuccessRecorder`]: the part of a policy that records closed-state successes without the
//! breaker's lock.

use std::fmt;
use std::time::Duration;

/// A policy's record of its closed-state successes, which the breaker updates without taking
/// its lock ([`TripPolicy::success_recorder`](super::TripPolicy::success_recorder), asked
/// once, when the breaker is built).
///
/// It is for a policy that must learn from every success but that no success can trip:
/// brpc's EMA ([`Ema`](super::Ema)), whose success only moves the latency average and decays
/// the error cost. With a recorder, the breaker counts closed-state successes on its
/// lock-free lane (as it does for a policy that ignores successes) and hands each one's
/// latency to the recorder, outside the lock, instead of calling
/// [`on_result`](super::TripPolicy::on_result) for it. Failures, exclusions, half-open probes
/// and state changes still reach the policy under the lock, as does a success the lane could
/// not take (its cell busy with a lock holder for a moment): `on_result` must record such a
/// success as the recorder would.
///
/// The contract, since the recorder runs on many threads at once and beside the policy:
///
/// - it shares its state with the policy through atomics (or any `Sync` state): it runs
///   concurrently with itself and with the policy's methods, which run under the lock;
/// - a success recorded here is never a reason to trip: the breaker does not ask the policy
///   after it;
/// - a success counted before a state change may reach the recorder just after it (it is
///   recorded after its count, outside the lock): the recorder takes it as it comes;
/// - it may panic: the success stays counted, and the panic continues to the caller.
///
/// The breaker gives no recorder to a policy with a slow-call threshold
/// ([`Capabilities::slow_call_threshold`](super::Capabilities::slow_call_threshold)): its
/// admissions must be tracked under the lock, so its successes are recorded there too.
///
/// # Examples
///
/// A policy that trips on the tenth failure, and keeps its success count in an atomic:
///
/// ```
/// use lazybreaker::policy::{CallResult, Outcome, SuccessRecorder, TripPolicy};
/// use lazybreaker::Breaker;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// #[derive(Debug, Default)]
/// struct Successes(AtomicU64);
///
/// impl SuccessRecorder for Successes {
///     fn record_success(&self, _latency: Option<Duration>) {
///         self.0.fetch_add(1, Ordering::Relaxed);
///     }
/// }
///
/// #[derive(Debug, Default)]
/// struct Tenth(Arc<Successes>);
///
/// impl TripPolicy for Tenth {
///     fn on_result(&mut self, result: &CallResult<'_>) -> bool {
///         match result.outcome {
///             // A success the lane could not take: recorded as the recorder would.
///             Outcome::Success => {
///                 self.0.record_success(result.latency);
///                 false
///             }
///             Outcome::Failure => result.counts.total_failures >= 10,
///             _ => false,
///         }
///     }
///
///     fn success_recorder(&self) -> Option<Arc<dyn SuccessRecorder>> {
///         Some(self.0.clone())
///     }
/// }
///
/// let policy = Tenth::default();
/// let successes = policy.0.clone();
/// let breaker = Breaker::builder().policy(policy).build();
/// for _ in 0..100 {
///     breaker.execute(|| Ok::<_, ()>(())).unwrap();
/// }
/// assert_eq!(successes.0.load(Ordering::Relaxed), 100);
/// assert_eq!(breaker.counts().total_successes, 100);
/// ```
pub trait SuccessRecorder: Send + Sync + fmt::Debug {
    /// Records one closed-state success: its latency (admission to result, on the breaker's
    /// clock) if the policy's capabilities ask for latencies, `None` otherwise.
    fn record_success(&self, latency: Option<Duration>);
}
