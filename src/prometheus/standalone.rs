//! The retries, hedges and limiters a [`BreakerCollector`] was given on their own (not
//! through a breaker or a pool): their counters and present figures, read at each scrape.
//! The families are in the [module documentation](super)'s table:
//! `circuit_breaker_retry_…` (label `retry`), `circuit_breaker_hedge_…` (label `hedge`),
//! `circuit_breaker_limiter_…` (label `limiter`).

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;

use super::{family, BreakerCollector, Count, Level};
use crate::contain::{self, end, FirstPanic};
use crate::limit::{Algorithm, Limiter};
use crate::retry::{Hedge, HedgeStats, Retry, RetryStats};

/// What a collector reads besides breakers and pools, each under the name it was given.
#[derive(Default)]
pub(super) struct Standalone {
    retries: Vec<(String, Retry)>,
    hedges: Vec<(String, Hedge)>,
    limiters: Vec<(String, LimiterSource)>,
}

/// Reads one limiter's figures (its algorithm's limit is user code: a panic is contained
/// by the caller).
type LimiterSource = Box<dyn Fn() -> LimiterFigures + Send + Sync>;

/// A limiter's figures, read at a scrape.
struct LimiterFigures {
    limit: u32,
    in_flight: u32,
    limited: u64,
}

impl BreakerCollector {
    /// Also collects `retry`, a [`Retry`] held on its own (alone, or the one a tower
    /// `RetryLayer`, a reqwest or a gRPC retry decides with), under the label
    /// `retry="name"`: its decisions ([`Retry::stats`]) as
    /// `circuit_breaker_retry_decisions_total` and its budget's balance
    /// ([`RetryBudget::balance`](crate::retry::RetryBudget::balance)) as
    /// `circuit_breaker_retry_budget_balance`, read at each scrape.
    ///
    /// A clone of the retry is as good as the retry: clones share the counters and the
    /// budget (but [`Retry::seed`] starts a retry's counters afresh: give the collector the
    /// retry as configured). The retries' names must be unique: a name already collected is
    /// skipped, the first kept.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::prometheus::BreakerCollector;
    /// use lazybreaker::retry::{Cause, Retry, RetryBudget};
    /// use lazybreaker::ManualClock;
    /// use prometheus_client::encoding::text::encode;
    ///
    /// let budget = RetryBudget::new(0.2)?.clock(ManualClock::new());
    /// let retry = Retry::new(2)?.budget(budget);
    /// let mut metrics = prometheus_client::registry::Registry::default();
    /// metrics.register_collector(Box::new(BreakerCollector::new().retry("search", retry.clone())));
    ///
    /// let mut attempts = retry.start(None);
    /// let _ = retry.next(&mut attempts, Cause::Failure); // retried
    /// let _ = retry.next(&mut attempts, Cause::Failure); // two attempts made: exhausted
    /// let mut text = String::new();
    /// encode(&mut text, &metrics).unwrap();
    /// assert!(text.contains(
    ///     r#"circuit_breaker_retry_decisions_total{retry="search",decision="exhausted"} 1"#
    /// ));
    /// // The reserve (10 a second for 10 s), one retry spent.
    /// assert!(text.contains(r#"circuit_breaker_retry_budget_balance{retry="search"} 99"#));
    /// # Ok::<(), lazybreaker::ConfigError>(())
    /// ```
    #[must_use]
    pub fn retry(mut self, name: impl Into<String>, retry: Retry) -> Self {
        self.standalone.retries.push((name.into(), retry));
        self
    }

    /// Also collects `hedge`, a [`Hedge`] held on its own (alone, or the one a tower
    /// `HedgeLayer` or a gRPC hedge decides with), under the label `hedge="name"`: its
    /// decisions ([`Hedge::stats`]) as `circuit_breaker_hedge_decisions_total` and its
    /// budget's balance ([`Hedge::hedge_budget`]) as `circuit_breaker_hedge_budget_balance`,
    /// read at each scrape.
    ///
    /// A clone of the hedge is as good as the hedge: clones share the counters and the
    /// budget. The hedges' names must be unique: a name already collected is skipped, the
    /// first kept.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::prometheus::BreakerCollector;
    /// use lazybreaker::retry::Hedge;
    /// use prometheus_client::encoding::text::encode;
    /// use std::time::Duration;
    ///
    /// let hedge = Hedge::after(Duration::from_millis(20));
    /// let mut metrics = prometheus_client::registry::Registry::default();
    /// metrics.register_collector(Box::new(BreakerCollector::new().hedge("search", hedge.clone())));
    ///
    /// let _ = hedge.next_hedge(1, None); // one attempt out: a hedge goes
    /// hedge.count_end(true, 1); // the hedge answered first, the first attempt cancelled
    /// let mut text = String::new();
    /// encode(&mut text, &metrics).unwrap();
    /// assert!(text.contains(
    ///     r#"circuit_breaker_hedge_decisions_total{hedge="search",decision="won"} 1"#
    /// ));
    /// # Ok::<(), lazybreaker::ConfigError>(())
    /// ```
    #[must_use]
    pub fn hedge(mut self, name: impl Into<String>, hedge: Hedge) -> Self {
        self.standalone.hedges.push((name.into(), hedge));
        self
    }

    /// Also collects `limiter`, an adaptive concurrency [`Limiter`] held on its own (over
    /// any algorithm: `Limiter<Box<dyn Algorithm>>`, `Limiter<Aimd>`, …), under the label
    /// `limiter="name"`: its limit as `circuit_breaker_limiter_limit`, its calls in flight
    /// as `circuit_breaker_limiter_in_flight` and the calls it turned away
    /// ([`Rejected::Limited`](crate::Rejected::Limited)) as
    /// `circuit_breaker_limiter_limited_total`, read at each scrape. (A pool's limits are
    /// its endpoints': `circuit_breaker_pool_at_limit`.)
    ///
    /// The limiters' names must be unique: a name already collected is skipped, the first
    /// kept.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::limit::{Aimd, Limiter};
    /// use lazybreaker::prometheus::BreakerCollector;
    /// use prometheus_client::encoding::text::encode;
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// let limiter = Arc::new(Limiter::new(Aimd::new().initial_limit(1).min_limit(1)));
    /// let mut metrics = prometheus_client::registry::Registry::default();
    /// metrics.register_collector(Box::new(
    ///     BreakerCollector::new().limiter("search", Arc::clone(&limiter)),
    /// ));
    ///
    /// let _held = limiter.try_acquire(Duration::ZERO)?;
    /// assert!(limiter.try_acquire(Duration::ZERO).is_err(), "at the limit");
    /// let mut text = String::new();
    /// encode(&mut text, &metrics).unwrap();
    /// assert!(text.contains(r#"circuit_breaker_limiter_in_flight{limiter="search"} 1"#));
    /// assert!(text.contains(r#"circuit_breaker_limiter_limited_total{limiter="search"} 1"#));
    /// # Ok::<(), lazybreaker::Rejected>(())
    /// ```
    #[must_use]
    pub fn limiter<A: Algorithm>(
        mut self,
        name: impl Into<String>,
        limiter: Arc<Limiter<A>>,
    ) -> Self {
        let read: LimiterSource = Box::new(move || LimiterFigures {
            limit: limiter.limit(),
            in_flight: limiter.in_flight(),
            limited: limiter.limited(),
        });
        self.standalone.limiters.push((name.into(), read));
        self
    }
}

impl Standalone {
    /// How many retries, hedges and limiters were added.
    pub(super) fn len(&self) -> usize {
        self.retries.len() + self.hedges.len() + self.limiters.len()
    }

    /// Their families, each left out when none of its kind was added. Figures whose reading
    /// panicked (a budget's clock, a limiter's algorithm: user code) are left out of this
    /// scrape; the others are encoded as usual.
    pub(super) fn encode(&self, e: &mut DescriptorEncoder<'_>) -> fmt::Result {
        if !self.retries.is_empty() {
            let retries = read(&self.retries, |r| (r.stats(), r.retry_budget().balance()));
            encode_retries(e, &retries)?;
        }
        if !self.hedges.is_empty() {
            let hedges = read(&self.hedges, |h| (h.stats(), h.hedge_budget().balance()));
            encode_hedges(e, &hedges)?;
        }
        if !self.limiters.is_empty() {
            let limiters = read(&self.limiters, |read| read());
            encode_limiters(e, &limiters)?;
        }
        Ok(())
    }
}

/// Each named source's figures, the first of each name only, a source whose reading
/// panicked left out (its panic ended: a scrape does not panic).
fn read<S, F>(sources: &[(String, S)], figures: impl Fn(&S) -> F) -> Vec<(&str, F)> {
    let mut seen = HashSet::new();
    let mut panics = FirstPanic::default();
    let read = sources
        .iter()
        .filter(|(name, _)| seen.insert(name.as_str()))
        .filter_map(|(name, source)| match contain::catch(|| figures(source)) {
            Ok(figures) => Some((name.as_str(), figures)),
            Err(payload) => {
                panics.keep(payload);
                None
            }
        })
        .collect();
    end(panics);
    read
}

/// The retries' decisions and budgets.
fn encode_retries(
    e: &mut DescriptorEncoder<'_>,
    retries: &[(&str, (RetryStats, u64))],
) -> fmt::Result {
    family(
        e,
        "circuit_breaker_retry_decisions",
        "What a retry decided after a failed attempt: retried, budget_denied, exhausted, \
         past_deadline, pushed_back, throttled.",
        MetricType::Counter,
        retries.iter().flat_map(|(name, (s, _))| {
            s.decisions().map(move |(decision, n)| {
                (
                    [
                        ("retry", (*name).to_owned()),
                        ("decision", decision.to_owned()),
                    ],
                    Count(n),
                )
            })
        }),
    )?;
    family(
        e,
        "circuit_breaker_retry_budget_balance",
        "The retries the retry's budget allows now, beyond those already made.",
        MetricType::Gauge,
        retries
            .iter()
            .map(|(name, (_, balance))| ([("retry", (*name).to_owned())], Level(gauge(*balance)))),
    )
}

/// The hedges' decisions and budgets.
fn encode_hedges(
    e: &mut DescriptorEncoder<'_>,
    hedges: &[(&str, (HedgeStats, u64))],
) -> fmt::Result {
    family(
        e,
        "circuit_breaker_hedge_decisions",
        "What a hedge did: hedged (an attempt sent), won (a call answered first by a hedge), \
         cancelled (attempts cancelled, counted neither way), budget_denied, throttled, \
         past_deadline.",
        MetricType::Counter,
        hedges.iter().flat_map(|(name, (s, _))| {
            s.decisions().map(move |(decision, n)| {
                (
                    [
                        ("hedge", (*name).to_owned()),
                        ("decision", decision.to_owned()),
                    ],
                    Count(n),
                )
            })
        }),
    )?;
    family(
        e,
        "circuit_breaker_hedge_budget_balance",
        "The hedges the hedge's budget allows now, beyond those already made.",
        MetricType::Gauge,
        hedges
            .iter()
            .map(|(name, (_, balance))| ([("hedge", (*name).to_owned())], Level(gauge(*balance)))),
    )
}

/// The limiters' limits, calls in flight and calls turned away.
fn encode_limiters(
    e: &mut DescriptorEncoder<'_>,
    limiters: &[(&str, LimiterFigures)],
) -> fmt::Result {
    let label = |name: &str| [("limiter", name.to_owned())];
    family(
        e,
        "circuit_breaker_limiter_limit",
        "The limiter's adaptive concurrency limit now.",
        MetricType::Gauge,
        limiters
            .iter()
            .map(|(name, f)| (label(name), Level(i64::from(f.limit)))),
    )?;
    family(
        e,
        "circuit_breaker_limiter_in_flight",
        "Calls in flight under the limiter.",
        MetricType::Gauge,
        limiters
            .iter()
            .map(|(name, f)| (label(name), Level(i64::from(f.in_flight)))),
    )?;
    family(
        e,
        "circuit_breaker_limiter_limited",
        "Calls the limiter turned away at its limit.",
        MetricType::Counter,
        limiters
            .iter()
            .map(|(name, f)| (label(name), Count(f.limited))),
    )
}

/// A count as a gauge's value (saturating: never above `i64::MAX`).
fn gauge(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
