//! The brpc conformance vectors' format (`tests/data/brpc/README.md`).

use std::time::Duration;

use lazybreaker::policy::{EmaConfig, Outcome};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub(crate) struct Scenario {
    pub(crate) name: String,
    pub(crate) flags: Flags,
    pub(crate) derived: Derived,
    pub(crate) steps: Vec<Step>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Flags {
    pub(crate) circuit_breaker_short_window_size: u32,
    pub(crate) circuit_breaker_short_window_error_percent: u32,
    pub(crate) circuit_breaker_long_window_size: u32,
    pub(crate) circuit_breaker_long_window_error_percent: u32,
    pub(crate) circuit_breaker_min_error_cost_us: u64,
    pub(crate) circuit_breaker_max_failed_latency_mutiple: u32,
    pub(crate) circuit_breaker_min_isolation_duration_ms: u64,
    pub(crate) circuit_breaker_max_isolation_duration_ms: u64,
    pub(crate) circuit_breaker_epsilon_value: f64,
    pub(crate) circuit_breaker_half_open_window_size: u32,
}

impl Flags {
    pub(crate) fn config(&self) -> EmaConfig {
        EmaConfig {
            short_window_size: self.circuit_breaker_short_window_size,
            short_window_error_percent: self.circuit_breaker_short_window_error_percent,
            long_window_size: self.circuit_breaker_long_window_size,
            long_window_error_percent: self.circuit_breaker_long_window_error_percent,
            min_error_cost: Duration::from_micros(self.circuit_breaker_min_error_cost_us),
            max_failed_latency_multiple: self.circuit_breaker_max_failed_latency_mutiple,
            min_isolation: Duration::from_millis(self.circuit_breaker_min_isolation_duration_ms),
            max_isolation: Duration::from_millis(self.circuit_breaker_max_isolation_duration_ms),
            epsilon: self.circuit_breaker_epsilon_value,
            half_open_window_size: self.circuit_breaker_half_open_window_size,
        }
    }
}

/// Only the exact bit patterns: the 17-digit decimals are not parsed exactly by serde_json's
/// default float parser.
#[derive(Debug, Deserialize)]
pub(crate) struct Derived {
    pub(crate) long_smooth_bits: String,
    pub(crate) short_smooth_bits: String,
    pub(crate) epsilon_bits: String,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum Step {
    AdvanceMs {
        ms: u64,
    },
    Call {
        error: CallError,
        latency_us: u64,
        expect_healthy: bool,
        expect_isolation_ms: Option<u64>,
        expect_isolated_times: Option<u64>,
    },
    MarkBroken {
        expect_isolation_ms: u64,
        expect_isolated_times: u64,
    },
    Reset,
    Inspect(Box<Inspect>),
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum CallError {
    Ok,
    Fail,
    Elimit,
}

impl CallError {
    pub(crate) fn outcome(self) -> Outcome {
        match self {
            CallError::Ok => Outcome::Success,
            CallError::Fail => Outcome::Failure,
            CallError::Elimit => Outcome::Excluded,
        }
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct Inspect {
    pub(crate) now_ms: u64,
    pub(crate) broken: bool,
    pub(crate) half_open: bool,
    pub(crate) half_open_success_count: u32,
    pub(crate) last_reset_time_ms: u64,
    pub(crate) isolation_ms: u64,
    pub(crate) isolated_times: u64,
    pub(crate) long: WindowState,
    pub(crate) short: WindowState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub(crate) struct WindowState {
    pub(crate) ema_latency: i64,
    pub(crate) ema_error_cost: i64,
    pub(crate) init_sample_count: u32,
    pub(crate) init_error_count: u32,
}
