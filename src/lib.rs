//! A circuit breaker with **zero timers**: gobreaker's state machine (closed → open →
//! half-open → closed), where every time-based change is computed lazily from an injected
//! clock when a call arrives. No background thread, no sleep, no spawned task.
//!
//! # Quick example
//!
//! ```
//! use lazybreaker::{Breaker, Counts, Error, ManualClock, Rejected, State};
//! use std::time::Duration;
//!
//! let clock = ManualClock::new(); // starts at zero; clones share one time
//! let breaker = Breaker::builder()
//!     .name("payments")
//!     .max_requests(3) // half-open admissions; 0 means 1
//!     .interval(Duration::from_secs(10)) // closed-state time window; ZERO = never cleared
//!     .bucket_period(Duration::from_secs(1)) // optional rolling window inside `interval`
//!     .timeout(Duration::from_secs(30)) // open duration; ZERO means 60 s
//!     .ready_to_trip(|c: &Counts| c.consecutive_failures > 3)
//!     .on_state_change(|name: &str, from: State, to: State| println!("{name}: {from} -> {to}"))
//!     .clock(clock.clone()) // default: a monotonic clock (coarse unless the policy times calls)
//!     .build();
//!
//! let r: Result<u32, Error<std::io::Error>> = breaker.execute(|| Ok(7));
//! assert_eq!(r.unwrap(), 7);
//!
//! match breaker.allow() {
//!     // two-step API, for async and callback code
//!     Ok(permit) => permit.success(), // or .failure() or .exclude(); each consumes it
//!     Err(rejected) => eprintln!("not sent: {rejected}"), // Rejected::Open or TooManyRequests
//! }
//! assert_eq!(breaker.state(), State::Closed);
//! assert_eq!(breaker.counts().total_successes, 2);
//!
//! for _ in 0..4 {
//!     let _ = breaker.execute(|| Err::<(), _>("refused"));
//! }
//! assert_eq!(breaker.state(), State::Open);
//! assert!(matches!(breaker.allow(), Err(Rejected::Open { .. })));
//!
//! clock.advance(Duration::from_secs(31));
//! assert_eq!(breaker.state(), State::HalfOpen);
//! ```
//!
//! # Semantics
//!
//! Exactly gobreaker v2's, checked against vectors recorded from the real gobreaker:
//!
//! - Counts belong to a *generation*. A new one starts at every state change and when a
//!   closed-state `interval` expires; a result that arrives after its generation ended is
//!   dropped, not miscounted.
//! - Expiries are strict: an open breaker goes half-open strictly after `timeout`. The wait
//!   it reports (a rejection's `retry_after`, a snapshot's, the metrics') is what is left of
//!   the open period, `timeout` itself at the trip (1 ns at its very last instant).
//! - `requests` is counted at admission. The policy is consulted on results in the closed
//!   state only.
//! - Half-open admits `max(1, max_requests)` probes (an excluded result gives its slot back)
//!   and closes after that many consecutive successes; any failure reopens it.
//! - With a `bucket_period`, the closed-state window rolls bucket by bucket.
//!
//! On top of gobreaker:
//!
//! - **No stuck half-open.** A [`Permit`] dropped without a verdict counts as an exclusion and
//!   gives its slot back; dropped during a panic it counts as a failure. [`Breaker::execute`]
//!   records a panic as a failure and lets it unwind. A probe that never reports (a call that
//!   hangs with no deadline, a permit kept by mistake) holds its slot for at most the open
//!   `timeout`: the next call is then admitted as a probe of its own, and the probe it
//!   relieved keeps its verdict, so a dependency slower than the open period still closes
//!   the breaker ([`probe_timeout`](Builder::probe_timeout) sets a probe deadline instead,
//!   past which a late verdict is dropped; gobreaker waits for good:
//!   `probe_timeout(Duration::MAX)`).
//! - **Callbacks outside the lock.** `on_state_change` never runs while the state lock is held
//!   and may call back into the breaker; changes are delivered once each, in order, one at a
//!   time.
//! - **Time you control.** Every reading comes from a [`Clock`]; tests use [`ManualClock`].
//! - **Cheap calls.** The state machine changes under one `parking_lot` mutex, but with
//!   a counting policy a closed-state success takes no lock, whatever the window (fixed,
//!   rolling or none; with gobreaker's defaults it reads no clock), and an open-state
//!   rejection reads the clock and takes no lock. No call allocates (but see [`Builder::on_state_change`] for a slow
//!   callback; a [`RejectedBy`] copies its breaker's name).
//!
//! # Calls over the network
//!
//! A breaker around a network call must see a refused connection, a 5xx and a hang as
//! failures. The recipes that do, shortest first:
//!
//! - **reqwest** (the `lazybreaker-reqwest` crate): `BreakerMiddleware` keeps a breaker per
//!   host and classifies by itself; put the deadline on the client or the request
//!   (`.timeout(d)`), inside the middleware.
//! - **tower** (the `lazybreaker-tower` crate, and the feature `http` here):
//!   `.layer(BreakerLayer::new(b).classify(StatusRules::new())).timeout(d)`: the HTTP
//!   classifier, the deadline inside the breaker; `.fallback(http::rejected_response)`
//!   answers 503 with `Retry-After` instead of an error, so the layer fits an axum `Router`.
//! - **any async call**: `breaker.execute_async_with(|| timeout(d, call()), classify::deadline(OkIsSuccess))`:
//!   [`classify::deadline`] counts the elapsed deadline and the call's own `Err` as failures
//!   (`classify::deadline(StatusRules::new())` for an HTTP call, whose 5xx is an `Ok`).
//!
//! With [`http::StatusRules::honor_retry_after`], an upstream's 503 or 429 with
//! `Retry-After` opens the breaker for as long as it asked.
//!
//! # Policies
//!
//! [`policy`] holds [`TripPolicy`](policy::TripPolicy) and the built-in policies:
//! consecutive failures (the default), failure ratio, failure count, slow calls, brpc's EMA,
//! and any `ready_to_trip` closure; `a.or(b)` and `with_backoff` compose them. Whatever the
//! policy, a call reported [`Outcome::Fatal`](policy::Outcome::Fatal) opens the breaker at
//! once. Policies run under the breaker's lock: they must be quick and must not call the
//! breaker. Which policy, window and knobs suit a database, a rate-limited HTTP API, a fleet
//! of replicas or a gRPC service, with the replay and lab figures behind each choice: see
//! docs/choosing.md in the repository.
//!
//! # Many breakers, manual control, observability
//!
//! [`Registry`] keeps a breaker per key (endpoint, host, method), bounded without timers.
//! [`Breaker::force_open`], [`Breaker::force_closed`], [`Breaker::release`] and
//! [`Breaker::trip_for`] are the manual controls. [`Breaker::snapshot`] reads everything a
//! scrape needs without side effects.
//!
//! # Configuration
//!
//! [`Knobs`] holds every plain-value knob once: the [`Builder`] sets it, and [`config`]
//! describes breakers as plain values around it ([`config::Settings`], a
//! [`config::PolicyConfig`] for every built-in policy), so a file sets exactly what code can.
//! Two ways lead to breakers, [`Breaker::from_settings`] for one and [`config::build_all`]
//! for a map (see [From configuration](config#from-configuration)), with errors that name
//! the breaker and the field by its path.
//!
//! # Features
//!
//! - `serde`: `Serialize`/`Deserialize` for [`State`], [`Counts`], [`Totals`],
//!   [`Outcome`](policy::Outcome) and [`EmaConfig`](policy::EmaConfig), and for the
//!   [`config`] values: breakers configured from files, durations written as `"250ms"` or
//!   `"1m30s"`, errors that name the breaker and the field by its path.
//! - `http`: `http::StatusRules` (a classifier of responses, `Retry-After` on request),
//!   `http::rejected_response` (503 with `Retry-After`), `http::retry_after`.
//! - `prometheus`: `prometheus::BreakerCollector`, metrics read at scrape time.
//! - `tracing`: `tracing::TracingObserver`, one event per state change.
//!
//! # Integrations
//!
//! Each is a crate of its own, on the current major of what it integrates, released in
//! lockstep with this one: `lazybreaker-tower` (layers, a keyed layer, a pool service,
//! fallbacks), `lazybreaker-reqwest` (a `reqwest_middleware::Middleware` with a breaker per
//! host), `lazybreaker-grpc` (tonic: status rules, per-method keys, `grpc.health.v1`
//! checks), `lazybreaker-fleet` (a breaker shared by a fleet through a store; Redis with its
//! feature `redis`, PostgreSQL with `postgres`), `lazybreaker-dashboard` (a status page as
//! an axum `Router`) and `lazybreaker-replay` (a recorded trace replayed through candidate
//! settings, and the `lazybreaker-replay` tool).
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![doc(test(attr(deny(warnings))))]

// Three layers, no cycles (`.ci/check-dag`; CONTRIBUTING.md has a row per file): core
// (`machine`, `counts`, `policy`, `classify` and the leaf values) imports core only; the
// engine (`lane`, `breaker` with its permits, `future`, `clock`, `sync`, `observe`) imports
// core and engine; each integration imports what it declares there.
mod abandoned;
mod atomic;
mod breaker;
pub mod classify;
mod clock;
pub mod config;
mod contain;
mod counts;
#[doc(hidden)]
pub mod door;
mod error;
mod forced;
mod future;
mod generation;
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub mod http;
pub mod human;
mod in_flight;
mod in_flight_slots;
mod jitter;
mod knobs;
mod lane;
mod last_calls;
pub mod limit;
mod machine;
mod metric_values;
mod nanos;
pub mod observe;
mod origin;
mod outcome;
pub mod policy;
pub mod pool;
#[cfg(feature = "prometheus")]
#[cfg_attr(docsrs, doc(cfg(feature = "prometheus")))]
pub mod prometheus;
mod registry;
pub mod retry;
#[cfg(feature = "serde")]
mod serde_duration;
mod snapshot;
mod state;
mod sync;
pub mod throttle;
#[cfg(feature = "tracing")]
#[cfg_attr(docsrs, doc(cfg(feature = "tracing")))]
pub mod tracing;
mod window;
mod window_check;

pub use abandoned::AbandonedAs;
pub use breaker::{Breaker, Builder, OwnedPermit, Permit};
pub use classify::Classify;
pub use clock::{Clock, CoarseMonotonicClock, ManualClock, MonotonicClock, PreciseClock};
pub use config::{DynBreaker, DynBuilder};
pub use counts::{Counts, Totals, Transitions};
pub use error::{ConfigError, Error, Rejected, RejectedBy};
pub use forced::Forced;
pub use future::ExecuteAsync;
pub use knobs::{Abandoned, Knobs};
pub use machine::{MAX_BUCKETS, MAX_COUNT_WINDOW};
pub use registry::{Registry, RegistryFull, RegistryHasher};
pub use snapshot::{CheckStatus, Snapshot};
pub use state::State;
