//! Bad configuration, row by row: every error names the field by its full path, the value as
//! written, and the breaker, through the typed route (`from_deserializer`) and through the
//! format crates' own errors (`toml::from_str`, `serde_json::from_str`) alike.
#![cfg(feature = "serde")]

use std::collections::BTreeMap;
use std::time::Duration;

use lazybreaker::config::{
    DeserializeError, OpenDurationConfig, PolicyConfig, Settings, SettingsMap,
};
use lazybreaker::policy::EmaConfig;
use lazybreaker::{Breaker, ConfigError};

#[derive(Debug, Clone, Copy)]
enum Input {
    Toml(&'static str),
    Json(&'static str),
}
use Input::{Json, Toml};

/// When the error shows: while reading (the shape), or when the breaker is built (a range).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Stage {
    Shape,
    Range,
}
use Stage::{Range, Shape};

/// A bad input: what it is read as, and the error it must give.
#[derive(Debug, Clone, Copy)]
struct Case {
    input: Input,
    stage: Stage,
    field: &'static str,
    value: &'static str,
    breaker: Option<&'static str>,
    /// The start of the reason.
    reason: &'static str,
}

const fn case(
    input: Input,
    stage: Stage,
    field: &'static str,
    value: &'static str,
    breaker: Option<&'static str>,
    reason: &'static str,
) -> Case {
    Case {
        input,
        stage,
        field,
        value,
        breaker,
        reason,
    }
}

const PAYMENTS: Option<&str> = Some("payments");
const NON_NEGATIVE: &str = "expected a non-negative integer";
const NOT_A_DURATION: &str = "expected a duration string such as";
const NOT_PARSED: &str = r#"expected a duration such as "250ms""#;
const UNKNOWN: &str = "unknown field, expected";

/// One `Settings` table each.
const SETTINGS: &[Case] = &[
    // Wrong types, at every level.
    case(Toml(r#"max_requests = "3""#), Shape, "max_requests", r#""3""#, None, NON_NEGATIVE),
    case(Toml("name = 5"), Shape, "name", "5", None, "expected a string"),
    case(
        Toml("name = \"payments\"\ntimeout = 30"),
        Shape,
        "timeout",
        "30",
        PAYMENTS,
        NOT_A_DURATION,
    ),
    // The name counts wherever it is written.
    case(
        Toml("timeout = 30\nname = \"payments\""),
        Shape,
        "timeout",
        "30",
        PAYMENTS,
        NOT_A_DURATION,
    ),
    case(
        Toml(r#"policy = "consecutive_failures""#),
        Shape,
        "policy",
        r#""consecutive_failures""#,
        None,
        "expected a policy table (map) with a `kind`",
    ),
    case(
        Toml(
            r#"name = "payments"
            policy = { kind = "failure_ratio", ratio = "0.5", min_requests = 1 }"#,
        ),
        Shape,
        "policy.ratio",
        r#""0.5""#,
        PAYMENTS,
        "expected a number",
    ),
    case(
        Toml(r#"policy = { kind = "failure_ratio", ratio = 0.5, min_requests = "1" }"#),
        Shape,
        "policy.min_requests",
        r#""1""#,
        None,
        NON_NEGATIVE,
    ),
    case(
        Toml("policy = { kind = 3 }"),
        Shape,
        "policy.kind",
        "3",
        None,
        "expected a string, one of `consecutive_failures`",
    ),
    case(
        Toml(r#"policy = { kind = "any_of", policies = { kind = "ema" } }"#),
        Shape,
        "policy.policies",
        r#"{ kind = "ema" }"#,
        None,
        "expected a list of policy tables",
    ),
    case(
        Toml(r#"policy = { kind = "any_of", policies = ["ema"] }"#),
        Shape,
        "policy.policies[0]",
        r#""ema""#,
        None,
        "expected a policy table (map)",
    ),
    case(
        Toml(
            r#"name = "payments"
            [policy]
            kind = "any_of"
            policies = [
                { kind = "consecutive_failures", threshold = 5 },
                { kind = "failure_ratio", ratio = 0.5, min_requests = -1 },
            ]"#,
        ),
        Shape,
        "policy.policies[1].min_requests",
        "-1",
        PAYMENTS,
        NON_NEGATIVE,
    ),
    case(
        Toml(
            r#"policy = { kind = "any_of", policies = [
                { kind = "any_of", policies = [
                    { kind = "consecutive_failures" },
                    { kind = "ema", epsilon = "small" },
                ] },
            ] }"#,
        ),
        Shape,
        "policy.policies[0].policies[1].epsilon",
        r#""small""#,
        None,
        "expected a number",
    ),
    case(
        Toml("[open_duration]\nkind = \"exponential\"\ninitial = \"1s\"\nmax = 60"),
        Shape,
        "open_duration.max",
        "60",
        None,
        NOT_A_DURATION,
    ),
    case(
        Toml(r#"open_duration = "exponential""#),
        Shape,
        "open_duration",
        r#""exponential""#,
        None,
        "expected an open_duration table (map) with a `kind`",
    ),
    case(
        Toml(r#"policy = { kind = "ema", half_open_window_size = 4294967296 }"#),
        Shape,
        "policy.half_open_window_size",
        "4294967296",
        None,
        "expected an integer within [0, 4294967295]",
    ),
    case(
        Toml(r#"timeout = 1979-05-27T07:32:00Z"#),
        Shape,
        "timeout",
        "1979-05-27T07:32:00Z",
        None,
        NOT_A_DURATION,
    ),
    case(
        Json(r#"{"name": "orders", "interval": null}"#),
        Shape,
        "interval",
        "null",
        Some("orders"),
        NOT_A_DURATION,
    ),
    case(
        Json(r#"{"policy": {"kind": "failure_ratio", "ratio": true, "min_requests": 1}}"#),
        Shape,
        "policy.ratio",
        "true",
        None,
        "expected a number",
    ),
    // Negative numbers, and floats where integers belong.
    case(Toml("max_requests = -1"), Shape, "max_requests", "-1", None, NON_NEGATIVE),
    case(
        Toml(r#"policy = { kind = "consecutive_failures", threshold = -3 }"#),
        Shape,
        "policy.threshold",
        "-3",
        None,
        NON_NEGATIVE,
    ),
    case(
        Toml(r#"policy = { kind = "consecutive_failures", threshold = 3.0 }"#),
        Shape,
        "policy.threshold",
        "3.0",
        None,
        NON_NEGATIVE,
    ),
    case(
        Toml(r#"policy = { kind = "ema", short_window_size = 1.5 }"#),
        Shape,
        "policy.short_window_size",
        "1.5",
        None,
        NON_NEGATIVE,
    ),
    case(Json(r#"{"max_requests": 2.5}"#), Shape, "max_requests", "2.5", None, NON_NEGATIVE),
    case(
        Json(r#"{"policy": {"kind": "ema", "long_window_error_percent": -5}}"#),
        Shape,
        "policy.long_window_error_percent",
        "-5",
        None,
        NON_NEGATIVE,
    ),
    // The slow-call, error-count and fatal policies.
    case(
        Toml(r#"policy = { kind = "failure_count", failures = 5 }"#),
        Shape,
        "policy.min_requests",
        "(missing)",
        None,
        "required for kind `failure_count`",
    ),
    case(
        Toml(r#"policy = { kind = "failure_count", failures = 5, min_request = 1 }"#),
        Shape,
        "policy.min_request",
        "1",
        None,
        "unknown field, expected one of `kind`, `failures`, `min_requests`",
    ),
    case(
        Toml(r#"policy = { kind = "failure_count", failures = 0, min_requests = 1 }"#),
        Range,
        "policy.failures",
        "0",
        None,
        "must be at least 1",
    ),
    case(
        Toml(r#"policy = { kind = "slow_calls", threshold = "1q", ratio = 0.5, min_requests = 1 }"#),
        Shape,
        "policy.threshold",
        r#""1q""#,
        None,
        "unknown time unit",
    ),
    case(
        Toml(r#"policy = { kind = "slow_calls", ratio = 0.5, min_requests = 1 }"#),
        Shape,
        "policy.threshold",
        "(missing)",
        None,
        "required for kind `slow_calls`",
    ),
    case(
        Toml(r#"policy = { kind = "slow_calls", threshold = "0s", ratio = 0.5, min_requests = 1 }"#),
        Range,
        "policy.threshold",
        "0ns",
        None,
        "must be more than zero",
    ),
    case(
        Toml(r#"policy = { kind = "slow_calls", threshold = "1s", ratio = 1.1, min_requests = 1 }"#),
        Range,
        "policy.ratio",
        "1.1",
        None,
        "must be within [0, 1]",
    ),
    // Out of range, and zero thresholds: checked when the breaker is built.
    case(
        Toml(
            r#"name = "payments"
            policy = { kind = "failure_ratio", ratio = 1.5, min_requests = 20 }"#,
        ),
        Range,
        "policy.ratio",
        "1.5",
        PAYMENTS,
        "must be within [0, 1]",
    ),
    case(
        Toml(r#"policy = { kind = "failure_ratio", ratio = nan, min_requests = 20 }"#),
        Range,
        "policy.ratio",
        "NaN",
        None,
        "must be within [0, 1]",
    ),
    case(
        Toml(r#"policy = { kind = "failure_ratio", ratio = -inf, min_requests = 20 }"#),
        Range,
        "policy.ratio",
        "-inf",
        None,
        "must be within [0, 1]",
    ),
    case(
        Toml(r#"policy = { kind = "consecutive_failures", threshold = 0 }"#),
        Range,
        "policy.threshold",
        "0",
        None,
        "must be at least 1",
    ),
    case(
        Json(r#"{"policy": {"kind": "ema", "short_window_size": 0}}"#),
        Range,
        "policy.short_window_size",
        "0",
        None,
        "must be at least 1",
    ),
    case(
        Toml(r#"policy = { kind = "ema", epsilon = 1.0 }"#),
        Range,
        "policy.epsilon",
        "1",
        None,
        "must be strictly between 0 and 1",
    ),
    // Bad durations.
    case(
        Toml(r#"timeout = "10x""#),
        Shape,
        "timeout",
        r#""10x""#,
        None,
        "unknown time unit",
    ),
    case(
        Toml(r#"interval = """#),
        Shape,
        "interval",
        r#""""#,
        None,
        NOT_PARSED,
    ),
    case(
        Toml(r#"bucket_period = "ten""#),
        Shape,
        "bucket_period",
        r#""ten""#,
        None,
        NOT_PARSED,
    ),
    case(
        Toml(r#"policy = { kind = "ema", min_isolation = "1 fortnight" }"#),
        Shape,
        "policy.min_isolation",
        r#""1 fortnight""#,
        None,
        "unknown time unit",
    ),
    case(
        Toml(r#"open_duration = { kind = "exponential", initial = "-1s", max = "1m" }"#),
        Shape,
        "open_duration.initial",
        r#""-1s""#,
        None,
        NOT_PARSED,
    ),
    case(
        Json(r#"{"timeout": "99999999999999999999s"}"#),
        Shape,
        "timeout",
        r#""99999999999999999999s""#,
        None,
        "too long a duration",
    ),
    // Unknown fields, at every level.
    case(
        Toml(r#"intervall = "10s""#),
        Shape,
        "intervall",
        r#""10s""#,
        None,
        "unknown field, expected one of `name`, `max_requests`, `interval`",
    ),
    case(
        Toml(r#"policy = { kind = "failure_ratio", ratoi = 0.5, min_requests = 1 }"#),
        Shape,
        "policy.ratoi",
        "0.5",
        None,
        "unknown field, expected one of `kind`, `ratio`, `min_requests`",
    ),
    case(
        Json(
            r#"{"name": "payments", "policy": {"kind": "any_of", "policies": [
                {"kind": "consecutive_failures"}, {"kind": "ema", "epsilonn": 0.1}]}}"#,
        ),
        Shape,
        "policy.policies[1].epsilonn",
        "0.1",
        PAYMENTS,
        "unknown field, expected one of `kind`, `short_window_size`",
    ),
    case(
        Toml(
            r#"policy = { kind = "any_of", policies = [
                { kind = "any_of", policies = [{ kind = "consecutive_failures", treshold = 3 }] },
            ] }"#,
        ),
        Shape,
        "policy.policies[0].policies[0].treshold",
        "3",
        None,
        "unknown field, expected `kind` or `threshold`",
    ),
    case(
        Toml(r#"policy = { kind = "any_of", policy = [] }"#),
        Shape,
        "policy.policy",
        "[]",
        None,
        "unknown field, expected `kind` or `policies`",
    ),
    case(
        Toml(r#"open_duration = { kind = "policy", max = "1m" }"#),
        Shape,
        "open_duration.max",
        r#""1m""#,
        None,
        "unknown field, expected only `kind`",
    ),
    case(
        Toml(r#"open_duration = { kind = "exponential", initial = "1s", maximum = "1m" }"#),
        Shape,
        "open_duration.maximum",
        r#""1m""#,
        None,
        "unknown field, expected one of `kind`, `initial`, `max`",
    ),
    case(
        Json(r#"{"timeout": "1s", "timeout": "2s"}"#),
        Shape,
        "timeout",
        r#""2s""#,
        None,
        "duplicate field",
    ),
    // Unknown, missing and mistyped kinds; missing required fields.
    case(
        Toml(r#"policy = { kind = "ratio", ratio = 0.5 }"#),
        Shape,
        "policy.kind",
        r#""ratio""#,
        None,
        "unknown kind, expected one of `consecutive_failures`, `failure_ratio`, `failure_count`, `slow_calls`, `ema`, `any_of`",
    ),
    case(
        Toml(r#"policy = { kind = "any_of", policies = [{ kind = "circuit" }] }"#),
        Shape,
        "policy.policies[0].kind",
        r#""circuit""#,
        None,
        "unknown kind, expected one of",
    ),
    case(
        Toml(r#"policy = { kind = "any_of", policies = [{ kind = "ema" }, { threshold = 3 }] }"#),
        Shape,
        "policy.policies[1].kind",
        "(missing)",
        None,
        "required, one of `consecutive_failures`",
    ),
    case(
        Toml(r#"open_duration = { kind = "linear", initial = "1s" }"#),
        Shape,
        "open_duration.kind",
        r#""linear""#,
        None,
        "unknown kind, expected one of `policy`, `exponential`",
    ),
    case(
        Toml(r#"policy = { kind = "failure_ratio", ratio = 0.5 }"#),
        Shape,
        "policy.min_requests",
        "(missing)",
        None,
        "required for kind `failure_ratio`",
    ),
    case(
        Toml(r#"open_duration = { kind = "exponential", initial = "1s" }"#),
        Shape,
        "open_duration.max",
        "(missing)",
        None,
        "required for kind `exponential`",
    ),
    case(
        Toml(r#"policy = { kind = "any_of" }"#),
        Shape,
        "policy.policies",
        "(missing)",
        None,
        "required for kind `any_of`",
    ),
    // Empty any_of.
    case(
        Toml(r#"policy = { kind = "any_of", policies = [] }"#),
        Range,
        "policy.policies",
        "[]",
        None,
        "must list at least one policy",
    ),
    case(
        Toml(
            r#"name = "payments"
            policy = { kind = "any_of", policies = [{ kind = "any_of", policies = [] }] }"#,
        ),
        Range,
        "policy.policies[0].policies",
        "[]",
        PAYMENTS,
        "must list at least one policy",
    ),
    // Positional arrays.
    case(
        Json(r#"["payments", 3, "10s"]"#),
        Shape,
        "settings",
        r#"["payments", 3, "10s"]"#,
        None,
        "expected a table (map) of settings",
    ),
    case(
        Json(r#"{"policy": ["failure_ratio", 0.5, 10]}"#),
        Shape,
        "policy",
        r#"["failure_ratio", 0.5, 10]"#,
        None,
        "expected a policy table (map)",
    ),
    case(
        Json(r#"{"name": "payments", "open_duration": ["exponential", "1s", "1m"]}"#),
        Shape,
        "open_duration",
        r#"["exponential", "1s", "1m"]"#,
        PAYMENTS,
        "expected an open_duration table (map)",
    ),
    case(
        Json(r#"{"policy": {"kind": "any_of", "policies": [["ema"]]}}"#),
        Shape,
        "policy.policies[0]",
        r#"["ema"]"#,
        None,
        "expected a policy table (map)",
    ),
    case(
        Toml(r#"policy = ["consecutive_failures", 3]"#),
        Shape,
        "policy",
        r#"["consecutive_failures", 3]"#,
        None,
        "expected a policy table (map)",
    ),
    // EMA durations counted in whole milliseconds or microseconds.
    case(
        Toml(r#"policy = { kind = "ema", min_isolation = "500us" }"#),
        Range,
        "policy.min_isolation",
        "500µs",
        None,
        "must be at least 1ms",
    ),
    case(
        Toml(r#"policy = { kind = "ema", min_isolation = "0s" }"#),
        Range,
        "policy.min_isolation",
        "0ns",
        None,
        "must be at least 1ms",
    ),
    case(
        Toml(
            r#"name = "payments"
            policy = { kind = "any_of", policies = [
                { kind = "ema", min_isolation = "1ms", max_isolation = "999us" },
            ] }"#,
        ),
        Range,
        "policy.policies[0].max_isolation",
        "999µs",
        PAYMENTS,
        "must be at least 1ms",
    ),
    case(
        Toml(r#"policy = { kind = "ema", min_error_cost = "500ns" }"#),
        Range,
        "policy.min_error_cost",
        "500ns",
        None,
        "must be zero or at least 1us",
    ),
    // Buckets that do not fit the interval.
    case(
        Toml(r#"bucket_period = "1s""#),
        Range,
        "bucket_period",
        "1s",
        None,
        "is ignored without an `interval`",
    ),
    case(
        Toml("name = \"payments\"\ninterval = \"10s\"\nbucket_period = \"3s\""),
        Range,
        "bucket_period",
        "3s",
        PAYMENTS,
        "must divide `interval` into whole buckets",
    ),
    case(
        Toml("interval = \"1s\"\nbucket_period = \"2s\""),
        Range,
        "bucket_period",
        "2s",
        None,
        "must not exceed `interval`",
    ),
    case(
        Toml("interval = \"2s\"\nbucket_period = \"1ms\""),
        Range,
        "bucket_period",
        "1ms",
        None,
        "makes more than MAX_BUCKETS (1024) buckets",
    ),
    // Beyond 584 years (the clock's u64 nanoseconds), refused when read.
    case(
        Toml("interval = \"800y\"\nbucket_period = \"700y\""),
        Shape,
        "bucket_period",
        r#""700y""#,
        None,
        "exceeds the clock's range",
    ),
    case(
        Json(r#"{"interval": "700y", "bucket_period": "800y"}"#),
        Shape,
        "interval",
        r#""700y""#,
        None,
        "exceeds the clock's range",
    ),
    // Exponential open durations.
    case(
        Toml(r#"open_duration = { kind = "exponential", initial = "5m", max = "1m" }"#),
        Range,
        "open_duration.initial",
        "300s",
        None,
        "must not exceed `max`",
    ),
    case(
        Toml("name = \"payments\"\n[open_duration]\nkind = \"exponential\"\ninitial = \"0s\"\nmax = \"1m\""),
        Range,
        "open_duration.initial",
        "0ns",
        PAYMENTS,
        "must be above zero",
    ),
];

/// Whole files of breakers, as `SettingsMap`: the key names the breaker without a `name`.
const FILES: &[Case] = &[
    case(
        Toml("[payments]\ntimeout = \"30s\"\n\n[search]\nintervall = \"10s\""),
        Shape,
        "intervall",
        r#""10s""#,
        Some("search"),
        UNKNOWN,
    ),
    case(
        Toml("[search]\nname = \"search-eu\"\npolicy = { kind = \"ema\", epsilon = \"x\" }"),
        Shape,
        "policy.epsilon",
        r#""x""#,
        Some("search-eu"),
        "expected a number",
    ),
    case(
        Json(r#"{"payments": {"timeout": "30s"}, "search": [1, 2]}"#),
        Shape,
        "settings",
        "[1, 2]",
        Some("search"),
        "expected a table (map) of settings",
    ),
    case(
        Json(r#"[{"name": "payments"}]"#),
        Shape,
        "breakers",
        r#"[{ name = "payments" }]"#,
        None,
        "expected a table (map) of breakers keyed by name",
    ),
    case(
        Json(r#"{"payments": {}, "payments": {}}"#),
        Shape,
        "payments",
        "{ … }",
        None,
        "duplicate breaker",
    ),
    case(
        Toml("[inventory]\n[payments.policy]\nkind = \"consecutive_failures\"\nthreshold = 0"),
        Range,
        "policy.threshold",
        "0",
        PAYMENTS,
        "must be at least 1",
    ),
];

/// The typed route's answer: `Err(None)` for the format's own error.
type Typed<T> = Result<T, Option<ConfigError>>;

fn typed<T, E>(result: Result<T, DeserializeError<E>>) -> Typed<T> {
    result.map_err(|err| match err {
        DeserializeError::Config(err) => Some(err),
        DeserializeError::Format(_) => None,
        _ => unreachable!("no other kind of error yet"),
    })
}

/// Reads `input` both ways: typed, and through the format's own error as text.
fn read<T>(
    input: Input,
    from_toml: fn(toml::Deserializer<'_>) -> Typed<T>,
    from_json: fn(&mut serde_json::Deserializer<serde_json::de::StrRead<'_>>) -> Typed<T>,
) -> (Typed<T>, Result<T, String>)
where
    T: serde::de::DeserializeOwned,
{
    match input {
        Toml(text) => {
            let document = toml::Deserializer::parse(text).expect("valid TOML");
            let through = toml::from_str::<T>(text).map_err(|e| e.message().to_owned());
            (from_toml(document), through)
        }
        Json(text) => {
            let mut de = serde_json::Deserializer::from_str(text);
            let through = serde_json::from_str::<T>(text).map_err(|e| message_of(&e));
            (from_json(&mut de), through)
        }
    }
}

/// serde_json's message without the place it adds to an error from inside a value
/// (" at line 1 column 50").
fn message_of(err: &serde_json::Error) -> String {
    let text = err.to_string();
    let suffix = format!(" at line {} column {}", err.line(), err.column());
    match text.strip_suffix(&suffix) {
        Some(message) if err.line() > 0 => message.to_owned(),
        _ => text,
    }
}

/// Equality that sees a NaN ratio as itself.
fn same<T: std::fmt::Debug>(a: &T, b: &T) -> bool {
    format!("{a:?}") == format!("{b:?}")
}

fn check_error(case: &Case, err: &ConfigError) {
    assert_eq!(err.field(), case.field, "{case:?}\n{err}");
    assert_eq!(err.value(), case.value, "{case:?}\n{err}");
    assert_eq!(err.breaker(), case.breaker, "{case:?}\n{err}");
    assert!(err.reason().starts_with(case.reason), "{case:?}\n{err}");
    let prefix = case
        .breaker
        .map(|name| format!("breaker `{name}`: "))
        .unwrap_or_default();
    assert_eq!(
        err.to_string(),
        format!(
            "{prefix}invalid `{}` = {}: {}",
            case.field,
            case.value,
            err.reason()
        )
    );
}

#[test]
fn every_bad_setting_names_its_field_and_breaker() {
    assert!(SETTINGS.len() >= 40, "{} rows", SETTINGS.len());
    assert!(SETTINGS.iter().any(|c| matches!(c.input, Json(_))));
    for case in SETTINGS {
        let (typed_result, through) = read::<Settings>(
            case.input,
            |de| typed(Settings::from_deserializer(de)),
            |de| typed(Settings::from_deserializer(de)),
        );
        match case.stage {
            Shape => {
                let err = typed_result
                    .expect_err(case.field)
                    .expect("not a syntax error");
                check_error(case, &err);
                // Through the format, the message is exactly the error's.
                assert_eq!(through.expect_err(case.field), err.to_string(), "{case:?}");
            }
            Range => {
                let settings = typed_result.unwrap_or_else(|e| panic!("{case:?}: {e:?}"));
                assert!(same(&through.unwrap(), &settings), "{case:?}");
                let err = Breaker::from_settings(&settings).expect_err(case.field);
                check_error(case, &err);
                assert_eq!(settings.validate(), Err(err.clone()));
                // The typed route joins the range checks with `?`.
                let joined =
                    (|| -> Result<(), DeserializeError<()>> { Ok(settings.validate()?) })();
                assert_eq!(joined, Err(DeserializeError::Config(err)));
            }
        }
    }
}

#[test]
fn every_bad_file_names_its_breaker_by_name_or_key() {
    for case in FILES {
        let (typed_result, through) = read::<SettingsMap>(
            case.input,
            |de| typed(SettingsMap::from_deserializer(de)),
            |de| typed(SettingsMap::from_deserializer(de)),
        );
        match case.stage {
            Shape => {
                let err = typed_result
                    .expect_err(case.field)
                    .expect("not a syntax error");
                check_error(case, &err);
                assert_eq!(through.expect_err(case.field), err.to_string(), "{case:?}");
            }
            Range => {
                let breakers = typed_result.unwrap_or_else(|e| panic!("{case:?}: {e:?}"));
                assert!(same(&through.unwrap(), &breakers), "{case:?}");
                let err = lazybreaker::config::build_all(&breakers)
                    .map(drop)
                    .expect_err(case.field);
                check_error(case, &err);
            }
        }
    }
}

#[test]
fn a_plain_map_of_settings_names_a_breaker_by_its_name_only() {
    let file = "[search]\nintervall = \"10s\"\n[payments]\nname = \"payments-eu\"\ntimeout = 3\n";
    let err = toml::from_str::<BTreeMap<String, Settings>>(file).unwrap_err();
    // Entries are read in key order: `payments` first.
    assert_eq!(
        err.message(),
        r#"breaker `payments-eu`: invalid `timeout` = 3: expected a duration string such as "250ms", "10s" or "1m30s""#
    );
    let err = toml::from_str::<BTreeMap<String, Settings>>("[search]\nintervall = \"10s\"\n")
        .unwrap_err();
    assert!(err.message().starts_with("invalid `intervall`"), "{err}");
    // `SettingsMap` names it by its key.
    let err = toml::from_str::<SettingsMap>("[search]\nintervall = \"10s\"\n").unwrap_err();
    assert!(
        err.message()
            .starts_with("breaker `search`: invalid `intervall`"),
        "{err}"
    );
}

#[test]
fn a_syntax_error_is_the_formats_own() {
    let err = Settings::from_deserializer(&mut serde_json::Deserializer::from_str(r#"{"name": "#))
        .unwrap_err();
    assert!(matches!(err, DeserializeError::Format(_)), "{err:?}");
    assert!(err.to_string().contains("EOF"), "{err}");
    let err = SettingsMap::from_deserializer(&mut serde_json::Deserializer::from_str(r#"{"a": {"#))
        .unwrap_err();
    assert!(matches!(err, DeserializeError::Format(_)), "{err:?}");
    // A format's own type error too: JSON numbers beyond f64.
    let err = Settings::from_deserializer(&mut serde_json::Deserializer::from_str(
        r#"{"policy": {"kind": "ema", "epsilon": 1e400}}"#,
    ))
    .unwrap_err();
    assert!(matches!(err, DeserializeError::Format(_)), "{err:?}");
    // Valid TOML, bad shape: ours.
    let document = toml::Deserializer::parse("timeout = 3").unwrap();
    let err = Settings::from_deserializer(document).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"invalid `timeout` = 3: expected a duration string such as "250ms", "10s" or "1m30s""#
    );
    assert!(std::error::Error::source(&err).is_none());
}

#[test]
fn every_value_refuses_an_array() {
    let json = |text: &str| serde_json::from_str::<serde_json::Value>(text).unwrap();
    let err = PolicyConfig::from_deserializer(json(r#"["failure_ratio", 0.5, 10]"#)).unwrap_err();
    let DeserializeError::Config(err) = err else {
        panic!("{err:?}")
    };
    assert_eq!(
        (err.field(), err.value()),
        ("policy", r#"["failure_ratio", 0.5, 10]"#)
    );
    assert!(err.reason().starts_with("expected a policy table (map)"));

    let err =
        serde_json::from_str::<OpenDurationConfig>(r#"["exponential", "1s", "1m"]"#).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"invalid `open_duration` = ["exponential", "1s", "1m"]: expected an open_duration table (map) with a `kind`"#
    );
    let err = serde_json::from_str::<EmaConfig>("[1500, 10, 3000, 5]").unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid `ema` = [1500, 10, 3000, 5]: expected a table (map) of ema fields"
    );
    let err = serde_json::from_str::<Settings>(r#"["payments", 3, "10s"]"#).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"invalid `settings` = ["payments", 3, "10s"]: expected a table (map) of settings"#
    );
}

#[test]
fn standalone_values_name_their_fields_relative_to_themselves() {
    let err = toml::from_str::<EmaConfig>("min_isolation = 5").unwrap_err();
    assert_eq!(
        err.message(),
        r#"invalid `min_isolation` = 5: expected a duration string such as "250ms", "10s" or "1m30s""#
    );
    let err = toml::from_str::<EmaConfig>("kind = \"ema\"").unwrap_err();
    assert!(
        err.message()
            .starts_with("invalid `kind` = \"ema\": unknown field"),
        "{err}"
    );
    assert_eq!(
        toml::from_str::<EmaConfig>("max_isolation = \"10s\"").unwrap(),
        EmaConfig {
            max_isolation: Duration::from_secs(10),
            ..EmaConfig::default()
        }
    );
    let err = toml::from_str::<PolicyConfig>(
        "kind = \"any_of\"\n[[policies]]\nkind = \"failure_ratio\"\nratio = 0.5\nmin_requests = -1",
    )
    .unwrap_err();
    assert_eq!(
        err.message(),
        "invalid `policies[0].min_requests` = -1: expected a non-negative integer"
    );
    let err =
        toml::from_str::<OpenDurationConfig>("kind = \"exponential\"\ninitial = 1").unwrap_err();
    assert_eq!(
        err.message(),
        r#"invalid `initial` = 1: expected a duration string such as "250ms", "10s" or "1m30s""#
    );
}

#[test]
fn windows_beyond_584_years_are_refused_when_read() {
    // They would saturate the clock's u64 nanoseconds: both lengths cut to one, a fixed window.
    let err =
        toml::from_str::<Settings>("interval = \"1000y\"\nbucket_period = \"1y\"").unwrap_err();
    assert!(
        err.message()
            .starts_with("invalid `interval` = \"1000y\": exceeds the clock's range"),
        "{}",
        err.message()
    );
    let err = serde_json::from_str::<Settings>(r#"{"interval": "1200y", "bucket_period": "600y"}"#)
        .unwrap_err();
    assert!(err.to_string().starts_with("invalid `interval`"), "{err}");
}
