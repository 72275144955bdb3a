//! [`HedgeFuture`]: one call's attempts raced, the first answer that is not a failure the
//! call's, the others dropped.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use lazybreaker::classify::{Classify, OkIsSuccess};
use lazybreaker::policy::Outcome;
use lazybreaker::retry::Next;
use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};
use tower_service::Service;

use super::service::Settings;
use crate::retry::rejected::MaybeRejected;
use crate::retry::replay::{CloneRequest, Replay};

pin_project! {
    /// The response future of a [`HedgeService`](super::HedgeService): the call's first
    /// attempt, the hedges sent after it, and the timer of the next one. Dropping it drops
    /// every attempt in flight.
    #[must_use = "futures do nothing unless polled"]
    pub struct HedgeFuture<S, Req, C = OkIsSuccess, Q = CloneRequest>
    where
        S: Service<Req>,
    {
        // The first attempt, in place: a call that is never hedged allocates nothing.
        #[pin]
        first: First<S::Future>,
        // When the next hedge is due (tokio's timer, armed only while one is ahead).
        #[pin]
        timer: Timer,
        call: Call<S, Req, C, Q>,
    }
}

pin_project! {
    #[project = FirstProj]
    enum First<F> {
        Running { #[pin] running: F },
        Done,
    }
}

pin_project! {
    #[project = TimerProj]
    enum Timer {
        Idle,
        Armed { #[pin] sleep: Sleep },
    }
}

/// The rest of a call: what sends its hedges, and what its attempts said so far.
struct Call<S: Service<Req>, Req, C, Q> {
    /// The service that sent the first attempt, polled ready again for each hedge.
    spare: S,
    settings: Arc<Settings<C, Q>>,
    /// The request, kept to send again (`None`: it is sent once).
    kept: Option<Req>,
    /// The hedges in flight, and when each was sent.
    hedges: Vec<(Pin<Box<S::Future>>, Instant)>,
    started: Instant,
    /// Attempts sent, the first included.
    sent: u32,
    last_sent: Instant,
    /// The hedges' delay (`None`: none known yet, for a percentile).
    delay: Option<Duration>,
    /// An attempt failed: the next is due at once.
    hurry: bool,
    /// Not before (an overloaded answer's `Retry-After`).
    hold: Option<Instant>,
    /// No more hedges: none left, refused, or a breaker's rejection met.
    done: bool,
    /// The last failure, the call's answer if every attempt fails.
    last: Option<Result<S::Response, S::Error>>,
}

impl<S, Req, C, Q> HedgeFuture<S, Req, C, Q>
where
    S: Service<Req>,
{
    pub(crate) fn new(
        first: S::Future,
        spare: S,
        settings: Arc<Settings<C, Q>>,
        kept: Option<Req>,
        started: Instant,
        delay: Option<Duration>,
    ) -> Self {
        let done = kept.is_none() || settings.hedge.attempts() <= 1;
        Self {
            first: First::Running { running: first },
            timer: Timer::Idle,
            call: Call {
                spare,
                settings,
                kept,
                hedges: Vec::new(),
                started,
                sent: 1,
                last_sent: started,
                delay,
                hurry: false,
                hold: None,
                done,
                last: None,
            },
        }
    }
}

impl<S, Req, C, Q> Future for HedgeFuture<S, Req, C, Q>
where
    S: Service<Req>,
    S::Error: MaybeRejected,
    C: Classify<S::Response, S::Error>,
    Q: Replay<Req>,
{
    type Output = Result<S::Response, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let call = this.call;
        loop {
            // The first attempt, then the hedges: the first that does not fail wins.
            if let FirstProj::Running { running } = this.first.as_mut().project() {
                if let Poll::Ready(result) = running.poll(cx) {
                    this.first.set(First::Done);
                    if let Some(answer) = call.judge(result, call.started, false) {
                        return Poll::Ready(answer);
                    }
                }
            }
            let mut i = 0;
            while i < call.hedges.len() {
                let Poll::Ready(result) = call.hedges[i].0.as_mut().poll(cx) else {
                    i += 1;
                    continue;
                };
                let (_, sent_at) = call.hedges.swap_remove(i);
                if let Some(answer) = call.judge(result, sent_at, true) {
                    let first_running = matches!(*this.first, First::Running { .. });
                    // Cancelled: the first attempt too, if it is still out.
                    this.first.set(First::Done);
                    call.cancel(u64::from(first_running));
                    return Poll::Ready(answer);
                }
            }
            let in_flight = matches!(*this.first, First::Running { .. }) || !call.hedges.is_empty();
            if !in_flight {
                // Nothing out: the next attempt goes as soon as it may.
                call.hurry = true;
            }

            // Another attempt, if one is due and may go.
            if !call.done {
                let now = Instant::now();
                let due = match (call.hurry, call.delay) {
                    (true, _) => Some(now),
                    (false, Some(delay)) => Some(call.last_sent + delay),
                    (false, None) => None,
                };
                let due = due.map(|due| call.hold.map_or(due, |hold| due.max(hold)));
                match due {
                    Some(due) if now >= due => match call.send(cx, now) {
                        Attempt::Sent(running) => {
                            call.hedges.push((running, now));
                            continue;
                        }
                        // Polled ready later: its waker is registered.
                        Attempt::NotReady => {}
                        Attempt::Stop => call.done = true,
                    },
                    Some(due) => {
                        if call.past_deadline(due) {
                            call.done = true;
                        } else if arm(this.timer.as_mut(), due).poll(cx).is_ready() {
                            continue;
                        }
                    }
                    None => {}
                }
            }
            if !in_flight && call.done {
                let failed = call.last.take().expect("an attempt failed last");
                return Poll::Ready(failed);
            }
            return Poll::Pending;
        }
    }
}

/// The timer armed for `due` (reset if it was armed for another time).
fn arm(mut timer: Pin<&mut Timer>, due: Instant) -> Pin<&mut Sleep> {
    if let TimerProj::Armed { sleep } = timer.as_mut().project() {
        if sleep.deadline() != due {
            sleep.reset(due);
        }
    } else {
        timer.set(Timer::Armed {
            sleep: tokio::time::sleep_until(due),
        });
    }
    match timer.project() {
        TimerProj::Armed { sleep } => sleep,
        TimerProj::Idle => unreachable!("armed above"),
    }
}

/// What trying to send a hedge came to.
enum Attempt<F> {
    Sent(Pin<Box<F>>),
    /// The service is not ready yet.
    NotReady,
    /// No hedge: none left, refused, or the service failed.
    Stop,
}

impl<S, Req, C, Q> Call<S, Req, C, Q>
where
    S: Service<Req>,
    S::Error: MaybeRejected,
    C: Classify<S::Response, S::Error>,
    Q: Replay<Req>,
{
    /// An attempt's `result`: the call's answer (the others cancelled and counted), or
    /// `None` for a failure, kept as the last one.
    fn judge(
        &mut self,
        result: Result<S::Response, S::Error>,
        sent_at: Instant,
        hedged: bool,
    ) -> Option<Result<S::Response, S::Error>> {
        let settings = &self.settings;
        if let Err(error) = &result {
            if error.rejection().is_some() {
                // The breaker would reject another attempt too.
                self.done = true;
                self.last = Some(result);
                return None;
            }
        }
        let classify = &settings.classify;
        let outcome = if classify.unsettled(&result) {
            // Its verdict comes later (gRPC's trailers): the call is committed to it.
            None
        } else {
            Some(classify.classify(&result))
        };
        if let Some(Outcome::Failure | Outcome::Fatal) = outcome {
            if let Some(throttle) = settings.hedge.hedge_throttle() {
                throttle.record_failure();
            }
            if classify.overloaded(&result) {
                if let Some(wait) = classify.open_for(&result) {
                    match Instant::now().checked_add(wait) {
                        Some(until) => {
                            self.hold = Some(self.hold.map_or(until, |hold| hold.max(until)));
                        }
                        None => self.done = true,
                    }
                }
            }
            self.hurry = true;
            self.last = Some(result);
            return None;
        }
        if outcome == Some(Outcome::Success) {
            if let Some(p) = settings.hedge.percentile() {
                settings.shared.estimate.record(sent_at.elapsed(), p);
            }
            if let Some(throttle) = settings.hedge.hedge_throttle() {
                throttle.record_success();
            }
        }
        self.cancel(0);
        self.settings.shared.count_end(hedged, 0);
        self.settings.hedge.count_end(hedged, 0);
        Some(result)
    }

    /// Drops the hedges in flight, counted as cancelled with `more` others.
    fn cancel(&mut self, more: u64) {
        let cancelled = self.hedges.len() as u64 + more;
        self.hedges.clear();
        self.settings.shared.count_end(false, cancelled);
        self.settings.hedge.count_end(false, cancelled);
    }

    /// Whether a hedge due at `due` would start past the call's deadline.
    fn past_deadline(&self, due: Instant) -> bool {
        self.settings
            .within
            .is_some_and(|within| due >= self.started + within)
    }

    /// Sends a hedge now, if one is left, the service is ready, and the hedge pays for it.
    fn send(&mut self, cx: &mut Context<'_>, now: Instant) -> Attempt<S::Future> {
        let hedge = &self.settings.hedge;
        if self.sent >= hedge.attempts() {
            return Attempt::Stop;
        }
        match self.spare.poll_ready(cx) {
            Poll::Pending => return Attempt::NotReady,
            Poll::Ready(Err(error)) => {
                if self.last.is_none() {
                    self.last = Some(Err(error));
                }
                return Attempt::Stop;
            }
            Poll::Ready(Ok(())) => {}
        }
        let left = self
            .settings
            .within
            .map(|within| within.saturating_sub(now.saturating_duration_since(self.started)));
        if let Next::Stop(_) = hedge.next_hedge(self.sent, left) {
            return Attempt::Stop;
        }
        let Some(request) = self
            .kept
            .as_ref()
            .and_then(|kept| self.settings.replay.replay(kept))
        else {
            return Attempt::Stop;
        };
        self.sent += 1;
        self.last_sent = now;
        self.hurry = false;
        Attempt::Sent(Box::pin(self.spare.call(request)))
    }
}

impl<S, Req, C, Q> fmt::Debug for HedgeFuture<S, Req, C, Q>
where
    S: Service<Req>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HedgeFuture")
            .field("sent", &self.call.sent)
            .field("hedges_in_flight", &self.call.hedges.len())
            .field("delay", &self.call.delay)
            .field("done", &self.call.done)
            .finish_non_exhaustive()
    }
}
