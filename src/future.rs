//! Async calls over permits: the named future of
//! [`Breaker::execute_async`](crate::Breaker::execute_async) and
//! [`Breaker::execute_async_classified`](crate::Breaker::execute_async_classified). Standard
//! futures only: no async runtime, no allocation, no timer.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use pin_project_lite::pin_project;

use crate::breaker::gate::{self, At, Gate};
use crate::breaker::{Breaker, Permit};
use crate::classify::{Classify, OkIsSuccess};
use crate::error::Error;
use crate::observe::Observer;
use crate::policy::{Outcome, TripPolicy};

pin_project! {
    /// The future of [`Breaker::execute_async`] and [`Breaker::execute_async_classified`]:
    /// resolves to the call's value, [`Error::Rejected`] when the breaker did not make it, or
    /// the call's own error in [`Error::Inner`].
    ///
    /// - Admission happens on the first poll, and the closure that builds the call runs only
    ///   when the call is admitted: an open breaker builds no request.
    /// - The call's result is classified and recorded when it completes.
    /// - A panic while the call is polled counts as a failure and keeps unwinding.
    /// - Dropped before the call completes (a cancelled task, a `select!` that chose
    ///   another branch, a timeout *around* this future), the call is abandoned: its permit
    ///   is dropped without a verdict (see [`Permit`]), so a half-open breaker gets its probe
    ///   slot back. To have a hung dependency trip the breaker, put the deadline *inside*
    ///   the call, classified by [`classify::deadline`](crate::classify::deadline):
    ///   `execute_async_with(|| tokio::time::timeout(d, request()), deadline(OkIsSuccess))`
    ///   (with `deadline(StatusRules::new())` for HTTP responses), not around this future.
    ///
    /// `Send` when the closure, the call and the classifier are; no allocation.
    #[must_use = "futures do nothing unless polled: the call is admitted on the first poll"]
    pub struct ExecuteAsync<'a, P: TripPolicy, O: Observer, F, Fut, C> {
        breaker: &'a Breaker<P, O>,
        classify: C,
        #[pin]
        stage: Stage<'a, P, O, F, Fut>,
    }
}

pin_project! {
    #[project = StageProj]
    enum Stage<'a, P: TripPolicy, O: Observer, F, Fut> {
        /// Not polled yet: the closure that builds the call.
        Start { make: Option<F> },
        /// The open period is over and this call runs the breaker's health check before it
        /// builds its request.
        Checking {
            gate: Gate<&'a Breaker<P, O>>,
            make: Option<F>,
        },
        /// Admitted: the call in flight and the permit it reports through.
        Running {
            #[pin]
            call: Fut,
            permit: Option<Permit<'a, P, O>>,
        },
        /// Resolved.
        Done,
    }
}

impl<P: TripPolicy, O: Observer> Breaker<P, O> {
    /// Runs the call that `make` builds, if the breaker admits it, and records its result:
    /// `Ok` is a success, `Err` a failure. The async twin of [`execute`](Breaker::execute):
    /// see [`ExecuteAsync`] for when admission happens and what cancellation means.
    ///
    /// **Where the deadline goes.** A timeout *around* the returned future cancels the call,
    /// which the breaker records as abandoned (not as a failure): a dependency that hangs
    /// would then never trip it. Put the deadline *inside* the call, and classify its nested
    /// result with [`classify::deadline`](crate::classify::deadline) (with this method's
    /// default classifier, `timeout`'s `Ok(Err(refused))` would be a success):
    ///
    /// ```text
    /// breaker.execute_async_with(|| timeout(d, request()), deadline(OkIsSuccess))
    /// ```
    ///
    /// (`deadline(StatusRules::new())` for an HTTP call: a 5xx is an `Ok(response)` too.)
    ///
    /// # Errors
    ///
    /// As [`execute`](Breaker::execute).
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::{Breaker, Error};
    /// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #     use std::sync::Arc;
    /// #     use std::task::{Context, Poll, Wake, Waker};
    /// #     struct Noop;
    /// #     impl Wake for Noop { fn wake(self: Arc<Self>) {} }
    /// #     let waker = Waker::from(Arc::new(Noop));
    /// #     let mut f = std::pin::pin!(f);
    /// #     let mut cx = Context::from_waker(&waker);
    /// #     loop { if let Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
    /// # }
    ///
    /// async fn fetch(id: u32) -> Result<String, std::io::Error> {
    ///     Ok(format!("item {id}"))
    /// }
    ///
    /// let breaker = Breaker::builder().build();
    /// let item: Result<String, Error<std::io::Error>> =
    ///     block_on(breaker.execute_async(|| fetch(7)));
    /// assert_eq!(item.unwrap(), "item 7");
    /// assert_eq!(breaker.counts().total_successes, 1);
    /// ```
    pub fn execute_async<F, Fut, T, E>(
        &self,
        make: F,
    ) -> ExecuteAsync<'_, P, O, F, Fut, OkIsSuccess>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        ExecuteAsync::new(self, make, OkIsSuccess)
    }

    /// Like [`execute_async`](Breaker::execute_async), with `classify` deciding how the
    /// result counts (as [`execute_classified`](Breaker::execute_classified) does).
    ///
    /// # Errors
    ///
    /// As [`execute`](Breaker::execute): the call's `Err` is returned as [`Error::Inner`]
    /// whatever `classify` said of it.
    pub fn execute_async_classified<F, Fut, T, E, C>(
        &self,
        make: F,
        classify: C,
    ) -> ExecuteAsync<'_, P, O, F, Fut, C>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        C: Fn(&Result<T, E>) -> Outcome,
    {
        ExecuteAsync::new(self, make, classify)
    }
}

impl<P: TripPolicy, O: Observer> Breaker<P, O> {
    /// Like [`execute_async_classified`](Breaker::execute_async_classified), with any
    /// [`Classify`] rather than a closure: [`classify::deadline`](crate::classify::deadline)
    /// for a call with a deadline inside it, [`http::StatusRules`](crate::http::StatusRules)
    /// for responses, or a classifier that says how long the dependency asked to be left
    /// alone ([`Classify::open_for`]: the breaker then opens for that long).
    ///
    /// # Errors
    ///
    /// As [`execute`](Breaker::execute).
    pub fn execute_async_with<F, Fut, T, E, C>(
        &self,
        make: F,
        classify: C,
    ) -> ExecuteAsync<'_, P, O, F, Fut, C>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        C: Classify<T, E>,
    {
        ExecuteAsync::new(self, make, classify)
    }
}

impl<'a, P: TripPolicy, O: Observer, F, Fut, C> ExecuteAsync<'a, P, O, F, Fut, C> {
    pub(crate) fn new(breaker: &'a Breaker<P, O>, make: F, classify: C) -> Self {
        Self {
            breaker,
            classify,
            stage: Stage::Start { make: Some(make) },
        }
    }
}

impl<P, O, F, Fut, C, T, E> Future for ExecuteAsync<'_, P, O, F, Fut, C>
where
    P: TripPolicy,
    O: Observer,
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    C: Classify<T, E>,
{
    type Output = Result<T, Error<E>>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.stage.as_mut().project() {
                StageProj::Start { make } => {
                    let make = make
                        .take()
                        .expect("`ExecuteAsync` polled after it panicked");
                    // The call built around the permit in place; the stage and the closure
                    // go to whichever continuation runs.
                    let rejected = gate::admit_into(
                        *this.breaker,
                        At::Now,
                        (this.stage.as_mut(), make),
                        |(mut stage, make), permit, _| {
                            // Built only once admitted. A panic building it drops the
                            // permit while unwinding: a failure.
                            let call = make();
                            stage.set(Stage::Running {
                                call,
                                permit: Some(permit),
                            });
                            None
                        },
                        |_, _, rejected| Some(rejected),
                        |(mut stage, make), gate| {
                            stage.set(Stage::Checking {
                                gate,
                                make: Some(make),
                            });
                            None
                        },
                    );
                    if let Some(rejected) = rejected {
                        this.stage.set(Stage::Done);
                        return Poll::Ready(Err(Error::Rejected(rejected)));
                    }
                }
                StageProj::Checking { gate, make } => {
                    let admitted = ready!(Pin::new(gate).poll(cx));
                    let make = make.take().expect("settled once");
                    match admitted {
                        Err(rejected) => {
                            this.stage.set(Stage::Done);
                            return Poll::Ready(Err(Error::Rejected(rejected)));
                        }
                        Ok(permit) => {
                            let call = make();
                            this.stage.set(Stage::Running {
                                call,
                                permit: Some(permit),
                            });
                        }
                    }
                }
                StageProj::Running { call, permit } => {
                    let result = ready!(gate::poll_call(call, cx, permit, &*this.classify));
                    this.stage.set(Stage::Done);
                    return Poll::Ready(result.map_err(Error::Inner));
                }
                StageProj::Done => panic!("`ExecuteAsync` polled after completion"),
            }
        }
    }
}

impl<P: TripPolicy, O: Observer, F, Fut, C> std::fmt::Debug for ExecuteAsync<'_, P, O, F, Fut, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let stage = match self.stage {
            Stage::Start { .. } => "start",
            Stage::Checking { .. } => "checking",
            Stage::Running { .. } => "running",
            Stage::Done => "done",
        };
        f.debug_struct("ExecuteAsync")
            .field("breaker", &self.breaker.name())
            .field("stage", &stage)
            .finish_non_exhaustive()
    }
}
