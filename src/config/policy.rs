//! [`PolicyConfig`]: a trip policy as a configuration file writes it, and the policy it builds.

use std::time::Duration;

use crate::error::ConfigError;
use crate::policy::{
    AnyOf, ConsecutiveFailures, Ema, EmaConfig, FailureCount, FailureRatio, SlowCalls, TripPolicy,
};

/// A trip policy as it appears in a configuration file: a table whose `kind` says which
/// built-in policy, with that policy's parameters beside it.
///
/// | `kind` | parameters | policy |
/// |---|---|---|
/// | `consecutive_failures` | `threshold` (default 6) | [`ConsecutiveFailures`] |
/// | `failure_ratio` | `ratio`, `min_requests` (both required) | [`FailureRatio`] |
/// | `failure_count` | `failures`, `min_requests` (both required) | [`FailureCount`] |
/// | `slow_calls` | `threshold` (a duration), `ratio`, `min_requests` (all required), `probes_on_latency_alone` (default `false`) | [`SlowCalls`] |
/// | `ema` | the ten fields of [`EmaConfig`], each optional with brpc's default | [`Ema`] |
/// | `any_of` | `policies`: a list of at least one policy, `any_of` included | [`AnyOf`], folded left: `a.or(b).or(c)` |
///
/// The default is `consecutive_failures` with threshold 6: the builder's default policy,
/// [`ConsecutiveFailures::default`]. In a file, unknown parameters are rejected. See
/// [From configuration](super#from-configuration) for examples in code and in a file.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(tag = "kind", rename_all = "snake_case"))]
#[non_exhaustive]
pub enum PolicyConfig {
    /// [`ConsecutiveFailures`]: trips on the `threshold`-th consecutive failure.
    ConsecutiveFailures {
        /// The number of consecutive failures that trips the breaker, at least 1; 6 when
        /// omitted ([`ConsecutiveFailures::DEFAULT_THRESHOLD`]).
        threshold: u64,
    },
    /// [`FailureRatio`]: trips when `failures / requests` reaches `ratio`, once `requests`
    /// reaches `min_requests`.
    FailureRatio {
        /// The failure ratio that trips the breaker, within `[0, 1]`.
        ratio: f64,
        /// The number of requests in the window before the ratio is considered.
        min_requests: u64,
    },
    /// [`FailureCount`]: trips on `failures` failures, once `requests` reaches
    /// `min_requests`.
    FailureCount {
        /// The number of failures in the window that trips the breaker, at least 1.
        failures: u64,
        /// The number of requests in the window before the failures are considered.
        min_requests: u64,
    },
    /// [`SlowCalls`]: trips when `slow_calls / requests` reaches `ratio`, once `requests`
    /// reaches `min_requests`; a call slower than `threshold` is slow.
    SlowCalls {
        /// The latency above which a call is slow, more than zero (a duration string in a
        /// file).
        #[cfg_attr(
            feature = "serde",
            serde(serialize_with = "crate::serde_duration::serialize")
        )]
        threshold: Duration,
        /// The share of slow calls that trips the breaker, within `[0, 1]`.
        ratio: f64,
        /// The number of requests in the window before the ratio is considered.
        min_requests: u64,
        /// Judge half-open probes on latency alone (Sentinel's way,
        /// [`SlowCalls::judging_probes_on_latency_alone`]); `false` when omitted.
        probes_on_latency_alone: bool,
    },
    /// [`Ema`]: brpc's EMA dual-window policy, with its ten knobs named as the fields of
    /// [`EmaConfig`] (each optional, brpc's default when omitted; `min_error_cost`,
    /// `min_isolation` and `max_isolation` are duration strings).
    Ema(EmaConfig),
    /// [`AnyOf`]: trips when any of `policies` trips, and stays open for the duration the
    /// tripping one chooses.
    AnyOf {
        /// The policies, at least one. A single policy behaves as itself.
        policies: Vec<PolicyConfig>,
    },
}

impl Default for PolicyConfig {
    /// The builder's default policy: consecutive failures with
    /// [`ConsecutiveFailures::default`]'s threshold (6).
    fn default() -> Self {
        ConsecutiveFailures::default().into()
    }
}

impl PolicyConfig {
    /// The trip policy this describes, through the policy's own constructor.
    ///
    /// # Errors
    ///
    /// The constructor's [`ConfigError`], with the field's path relative to this policy:
    /// `threshold`, `ratio`, an [`EmaConfig::validate`] field such as `min_isolation`, or for
    /// `any_of` `policies` when the list is empty and `policies[i].…` for an invalid entry.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::config::PolicyConfig;
    ///
    /// let policy = PolicyConfig::AnyOf {
    ///     policies: vec![
    ///         PolicyConfig::ConsecutiveFailures { threshold: 3 },
    ///         PolicyConfig::FailureRatio { ratio: 2.0, min_requests: 10 },
    ///     ],
    /// };
    /// let err = policy.build().err().unwrap();
    /// assert_eq!(err.field(), "policies[1].ratio");
    /// assert_eq!(err.value(), "2");
    /// ```
    pub fn build(&self) -> Result<Box<dyn TripPolicy>, ConfigError> {
        Ok(match self {
            Self::ConsecutiveFailures { threshold } => {
                Box::new(ConsecutiveFailures::new(*threshold)?)
            }
            Self::FailureRatio {
                ratio,
                min_requests,
            } => Box::new(FailureRatio::new(*ratio, *min_requests)?),
            Self::FailureCount {
                failures,
                min_requests,
            } => Box::new(FailureCount::new(*failures, *min_requests)?),
            Self::SlowCalls {
                threshold,
                ratio,
                min_requests,
                probes_on_latency_alone,
            } => {
                let policy = SlowCalls::new(*threshold, *ratio, *min_requests)?;
                Box::new(if *probes_on_latency_alone {
                    policy.judging_probes_on_latency_alone()
                } else {
                    policy
                })
            }
            Self::Ema(config) => Box::new(Ema::new(*config)?),
            Self::AnyOf { policies } => {
                let mut built = policies.iter().enumerate().map(|(i, policy)| {
                    policy
                        .build()
                        .map_err(|err| err.within(format_args!("policies[{i}]")))
                });
                let first = built.next().unwrap_or_else(|| {
                    Err(ConfigError::new(
                        "policies",
                        "[]",
                        "must list at least one policy",
                    ))
                })?;
                built.try_fold(first, |any, next| {
                    Ok::<Box<dyn TripPolicy>, ConfigError>(Box::new(AnyOf::new(any, next?)))
                })?
            }
        })
    }
}

impl From<ConsecutiveFailures> for PolicyConfig {
    fn from(policy: ConsecutiveFailures) -> Self {
        Self::ConsecutiveFailures {
            threshold: policy.threshold(),
        }
    }
}

impl From<FailureRatio> for PolicyConfig {
    fn from(policy: FailureRatio) -> Self {
        Self::FailureRatio {
            ratio: policy.ratio(),
            min_requests: policy.min_requests(),
        }
    }
}

impl From<FailureCount> for PolicyConfig {
    fn from(policy: FailureCount) -> Self {
        Self::FailureCount {
            failures: policy.failures(),
            min_requests: policy.min_requests(),
        }
    }
}

impl From<SlowCalls> for PolicyConfig {
    fn from(policy: SlowCalls) -> Self {
        Self::SlowCalls {
            threshold: policy.threshold(),
            ratio: policy.ratio(),
            min_requests: policy.min_requests(),
            probes_on_latency_alone: policy.probes_on_latency_alone(),
        }
    }
}

impl From<EmaConfig> for PolicyConfig {
    fn from(config: EmaConfig) -> Self {
        Self::Ema(config)
    }
}
