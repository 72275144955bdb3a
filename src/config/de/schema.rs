//! This crate's file shape: which tables hold which fields, read with the [`Table`] reader
//! of [`super::value`], and the `Deserialize` impls and typed readers built on them. A knob
//! is one row of [`KNOBS`]; a policy kind is one table plus one constructor call in
//! [`policy`].

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use super::value::{
    bool_of, duration, f64_of, set, string, table, u32_of, u64_of, Field, Key, Path, Table, Value,
    ValueVisitor,
};
use super::{into_format_error, read, DeserializeError};
use crate::abandoned::AbandonedAs;
use crate::config::{OpenDurationConfig, PolicyConfig, RegistrySettings, Settings, SettingsMap};
use crate::error::ConfigError;
use crate::knobs::{Abandoned, Knobs};
use crate::policy::{ConsecutiveFailures, EmaConfig};
use crate::throttle::Throttle;

impl Settings {
    /// Reads settings from any self-describing serde [`Deserializer`] (a TOML document, a
    /// JSON value, …), keeping the format's errors and the shape's apart.
    ///
    /// This checks the shape only, as `Deserialize` does: field names, types, durations and
    /// `kind`s. The ranges are checked when the breaker is built, or by
    /// [`validate`](Settings::validate), whose error converts into [`DeserializeError`].
    ///
    /// # Errors
    ///
    /// [`DeserializeError::Format`] with the deserializer's error when the input is not valid
    /// in its format; [`DeserializeError::Config`] with a [`ConfigError`] naming the field by
    /// its path, the value as written and why it does not fit, and the breaker by the table's
    /// `name` when it has one.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::config::{DeserializeError, Settings};
    ///
    /// let text = r#"
    ///     name = "payments"
    ///     policy = { kind = "any_of", policies = [
    ///         { kind = "consecutive_failures", threshold = 5 },
    ///         { kind = "failure_ratio", ratio = 0.5, min_requests = -1 },
    ///     ] }
    /// "#;
    /// let document = toml::Deserializer::parse(text)?; // a TOML syntax error stops here
    /// let Err(DeserializeError::Config(err)) = Settings::from_deserializer(document) else {
    ///     panic!("-1 requests");
    /// };
    /// assert_eq!(err.breaker(), Some("payments"));
    /// assert_eq!(err.field(), "policy.policies[1].min_requests");
    /// assert_eq!(err.value(), "-1");
    /// assert_eq!(
    ///     err.to_string(),
    ///     "breaker `payments`: invalid `policy.policies[1].min_requests` = -1: \
    ///      expected a non-negative integer"
    /// );
    ///
    /// // Through `Deserialize`, the same message is the format's.
    /// let err = toml::from_str::<Settings>(text).unwrap_err();
    /// assert_eq!(
    ///     err.message(),
    ///     "breaker `payments`: invalid `policy.policies[1].min_requests` = -1: \
    ///      expected a non-negative integer"
    /// );
    /// # Ok::<(), toml::de::Error>(())
    /// ```
    pub fn from_deserializer<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Self, DeserializeError<D::Error>> {
        read(deserializer, |value| {
            settings(value, Path::Root("settings"))
        })
    }
}

impl PolicyConfig {
    /// Reads a policy from any self-describing serde [`Deserializer`], as
    /// [`Settings::from_deserializer`] does settings. Paths are relative to the policy, as in
    /// [`PolicyConfig::build`]'s errors: `ratio`, `policies[1].min_requests`.
    ///
    /// # Errors
    ///
    /// As [`Settings::from_deserializer`]; no breaker is named.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::config::{DeserializeError, PolicyConfig};
    /// use serde_json::json;
    ///
    /// let Err(DeserializeError::Config(err)) =
    ///     PolicyConfig::from_deserializer(json!({ "kind": "failure_ratio", "ratio": "0.5" }))
    /// else {
    ///     panic!("a string is not a ratio");
    /// };
    /// assert_eq!(err.to_string(), r#"invalid `ratio` = "0.5": expected a number"#);
    /// ```
    pub fn from_deserializer<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Self, DeserializeError<D::Error>> {
        read(deserializer, |value| policy(value, Path::Root("policy")))
    }
}

impl SettingsMap {
    /// Reads a file of breakers (a table of [`Settings`] keyed by breaker name) from any
    /// self-describing serde [`Deserializer`], as [`Settings::from_deserializer`] does one.
    ///
    /// # Errors
    ///
    /// As [`Settings::from_deserializer`], for the first entry that does not fit; its error
    /// names the breaker by the entry's `name`, or else by its key.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::config::{SettingsMap, DeserializeError};
    ///
    /// let text = r#"
    ///     [payments]
    ///     timeout = "30s"
    ///     [search]
    ///     intervall = "10s"
    /// "#;
    /// let document = toml::Deserializer::parse(text)?;
    /// let Err(DeserializeError::Config(err)) = SettingsMap::from_deserializer(document) else {
    ///     panic!("a typo");
    /// };
    /// assert_eq!((err.breaker(), err.field()), (Some("search"), "intervall"));
    /// assert!(err.reason().starts_with("unknown field, expected one of `name`, `max_requests`"));
    /// # Ok::<(), toml::de::Error>(())
    /// ```
    pub fn from_deserializer<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Self, DeserializeError<D::Error>> {
        let mut failed = None;
        let result = deserializer.deserialize_any(MapVisitor {
            failed: &mut failed,
        });
        match (result, failed) {
            (Ok(breakers), _) => Ok(breakers),
            // The format passed our error through, perhaps with a location added.
            (Err(_), Some(err)) => Err(DeserializeError::Config(err)),
            (Err(err), None) => Err(DeserializeError::Format(err)),
        }
    }
}

// `Deserialize` through the typed route: a `ConfigError` becomes the format's error, with
// exactly the `ConfigError`'s message.

impl<'de> Deserialize<'de> for Settings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Settings::from_deserializer(deserializer).map_err(into_format_error)
    }
}

impl<'de> Deserialize<'de> for Knobs {
    /// As [`Settings`] reads its knobs, and only them.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        read(deserializer, |value| {
            named(
                value,
                Path::Root("knobs"),
                "expected a table (map) of knobs",
                &KNOBS_ONLY,
            )
            .map(|settings| settings.knobs)
        })
        .map_err(into_format_error)
    }
}

impl<'de> Deserialize<'de> for Abandoned {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        read(deserializer, |value| {
            abandoned(value, Path::Root("abandoned_as"))
        })
        .map_err(into_format_error)
    }
}

impl<'de> Deserialize<'de> for PolicyConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        PolicyConfig::from_deserializer(deserializer).map_err(into_format_error)
    }
}

impl<'de> Deserialize<'de> for OpenDurationConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        read(deserializer, |value| {
            open_duration(value, Path::Root("open_duration"))
        })
        .map_err(into_format_error)
    }
}

impl<'de> Deserialize<'de> for EmaConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        read(deserializer, |value| {
            let root = Path::Root("ema");
            let entries = table(value, root, "expected a table (map) of ema fields")?;
            EMA.read(entries, root, EmaConfig::default())
        })
        .map_err(into_format_error)
    }
}

impl<'de> Deserialize<'de> for SettingsMap {
    /// Attributes an error inside an entry to that entry's breaker: its `name`, or else its
    /// key (which a plain `BTreeMap<String, Settings>` cannot do).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // The format's own error, which carries the message and, in toml, the entry's place.
        deserializer.deserialize_any(MapVisitor { failed: &mut None })
    }
}

// -----------------------------------------------------------------------------------------
// The tables

// The reasons are `&'static str`: each list is spelled once, in a macro, for `concat!`.

macro_rules! policy_kinds {
    () => {
        "`consecutive_failures`, `failure_ratio`, `failure_count`, `slow_calls`, `ema`, `any_of`"
    };
}

macro_rules! open_duration_kinds {
    () => {
        "`policy`, `exponential`"
    };
}

macro_rules! ema_fields {
    () => {
        "`short_window_size`, `short_window_error_percent`, `long_window_size`, \
         `long_window_error_percent`, `min_error_cost`, `max_failed_latency_multiple`, \
         `min_isolation`, `max_isolation`, `epsilon`, `half_open_window_size`"
    };
}

/// The knobs, as a settings table holds them (flat). One row per [`Knobs`] field.
static KNOB_FIELDS: [Field<Settings>; 17] = [
    Field::optional("name", |s, v, p| set(&mut s.knobs.name, string(v, p))),
    Field::optional("max_requests", |s, v, p| {
        set(&mut s.knobs.max_requests, u32_of(v, p))
    }),
    Field::optional("interval", |s, v, p| {
        set(&mut s.knobs.interval, duration(v, p))
    }),
    Field::optional("bucket_period", |s, v, p| {
        set(&mut s.knobs.bucket_period, duration(v, p))
    }),
    Field::optional("count_window", |s, v, p| {
        set(&mut s.knobs.count_window, u32_of(v, p))
    }),
    Field::optional("timeout", |s, v, p| {
        set(&mut s.knobs.timeout, duration(v, p))
    }),
    Field::optional("max_open_duration", |s, v, p| {
        set(&mut s.knobs.max_open_duration, duration(v, p))
    }),
    Field::optional("abandoned_as", |s, v, p| {
        set(&mut s.knobs.abandoned_as, abandoned(v, p))
    }),
    Field::optional("never_trips", |s, v, p| {
        set(&mut s.knobs.never_trips, bool_of(v, p))
    }),
    Field::optional("dry_run", |s, v, p| {
        set(&mut s.knobs.dry_run, bool_of(v, p))
    }),
    Field::optional("verdict_at_latest", |s, v, p| {
        set(&mut s.knobs.verdict_at_latest, bool_of(v, p))
    }),
    Field::optional("check_timeout", |s, v, p| {
        set(&mut s.knobs.check_timeout, duration(v, p))
    }),
    Field::optional("probe_timeout", |s, v, p| {
        set(&mut s.knobs.probe_timeout, duration(v, p))
    }),
    Field::optional("backoff", |s, v, p| {
        set(&mut s.knobs.backoff, duration(v, p))
    }),
    Field::optional("jitter", |s, v, p| {
        set(&mut s.knobs.jitter, f64_of(v, p).map(Some))
    }),
    Field::optional("jitter_seed", |s, v, p| {
        set(&mut s.knobs.jitter_seed, u64_of(v, p).map(Some))
    }),
    Field::optional("throttle", |s, v, p| {
        set(&mut s.knobs.throttle, throttle(v, p).map(Some))
    }),
];

/// A table of [`Settings`]: the knobs, the policy and the open duration.
pub(super) static SETTINGS: Table<Settings> = Table {
    fields: &[
        &KNOB_FIELDS,
        &[
            Field::optional("policy", |s, v, p| set(&mut s.policy, policy(v, p))),
            Field::optional("open_duration", |s, v, p| {
                set(&mut s.open_duration, open_duration(v, p))
            }),
        ],
    ],
    tag: None,
    unknown: "unknown field, expected one of `name`, `max_requests`, `interval`, \
        `bucket_period`, `count_window`, `timeout`, `max_open_duration`, `abandoned_as`, \
        `never_trips`, `dry_run`, `verdict_at_latest`, `check_timeout`, `probe_timeout`, `backoff`, `jitter`, \
        `jitter_seed`, `throttle`, `policy`, `open_duration`",
    missing: "",
};

/// A table of [`Knobs`] alone.
static KNOBS_ONLY: Table<Settings> = Table {
    fields: &[&KNOB_FIELDS],
    tag: None,
    unknown: "unknown field, expected one of `name`, `max_requests`, `interval`, \
        `bucket_period`, `count_window`, `timeout`, `max_open_duration`, `abandoned_as`, \
        `never_trips`, `dry_run`, `verdict_at_latest`, `check_timeout`, `probe_timeout`, `backoff`, `jitter`, \
        `jitter_seed`, `throttle`",
    missing: "",
};

/// `abandoned_as = { closed = "failure", half_open = "exclusion" }`.
static ABANDONED: Table<Abandoned> = Table {
    fields: &[&[
        Field::optional("closed", |a, v, p| set(&mut a.closed, abandoned_as(v, p))),
        Field::optional("half_open", |a, v, p| {
            set(&mut a.half_open, abandoned_as(v, p))
        }),
    ]],
    tag: None,
    unknown: "unknown field, expected `closed` or `half_open`",
    missing: "",
};

/// `throttle = { k = 2.0, min_requests = 20, max_probability = 0.9, seed = 7,
/// count_throttled = false }`: `k` required, the rest with [`Throttle`]'s defaults.
static THROTTLE: Table<Throttle> = Table {
    fields: &[&[
        Field::required("k", |t, v, p| set(&mut t.k, f64_of(v, p))),
        Field::optional("min_requests", |t, v, p| {
            set(&mut t.min_requests, u64_of(v, p))
        }),
        Field::optional("max_probability", |t, v, p| {
            set(&mut t.max_probability, f64_of(v, p))
        }),
        Field::optional("seed", |t, v, p| set(&mut t.seed, u64_of(v, p))),
        Field::optional("count_throttled", |t, v, p| {
            set(&mut t.count_throttled, bool_of(v, p))
        }),
    ]],
    tag: None,
    unknown: "unknown field, expected one of `k`, `min_requests`, `max_probability`, `seed`, \
        `count_throttled`",
    missing: "required: the multiplier, at least 1 (the book suggests 2.0)",
};

static CONSECUTIVE: Table<u64> = Table {
    fields: &[&[Field::optional("threshold", |t, v, p| set(t, u64_of(v, p)))]],
    tag: Some("kind"),
    unknown: "unknown field, expected `kind` or `threshold`",
    missing: "",
};

static RATIO: Table<(f64, u64)> = Table {
    fields: &[&[
        Field::required("ratio", |d, v, p| set(&mut d.0, f64_of(v, p))),
        Field::required("min_requests", |d, v, p| set(&mut d.1, u64_of(v, p))),
    ]],
    tag: Some("kind"),
    unknown: "unknown field, expected one of `kind`, `ratio`, `min_requests`",
    missing: "required for kind `failure_ratio`",
};

static COUNT: Table<(u64, u64)> = Table {
    fields: &[&[
        Field::required("failures", |d, v, p| set(&mut d.0, u64_of(v, p))),
        Field::required("min_requests", |d, v, p| set(&mut d.1, u64_of(v, p))),
    ]],
    tag: Some("kind"),
    unknown: "unknown field, expected one of `kind`, `failures`, `min_requests`",
    missing: "required for kind `failure_count`",
};

static SLOW: Table<(Duration, f64, u64, bool)> = Table {
    fields: &[&[
        Field::required("threshold", |d, v, p| set(&mut d.0, duration(v, p))),
        Field::required("ratio", |d, v, p| set(&mut d.1, f64_of(v, p))),
        Field::required("min_requests", |d, v, p| set(&mut d.2, u64_of(v, p))),
        Field::optional("probes_on_latency_alone", |d, v, p| {
            set(&mut d.3, bool_of(v, p))
        }),
    ]],
    tag: Some("kind"),
    unknown: "unknown field, expected one of `kind`, `threshold`, `ratio`, `min_requests`, \
        `probes_on_latency_alone`",
    missing: "required for kind `slow_calls`",
};

static ANY_OF: Table<Vec<PolicyConfig>> = Table {
    fields: &[&[Field::required("policies", |d, v, p| {
        set(d, policies(v, p))
    })]],
    tag: Some("kind"),
    unknown: "unknown field, expected `kind` or `policies`",
    missing: "required for kind `any_of`: a list of policy tables",
};

/// brpc's ten EMA knobs, each optional with brpc's default: a policy table (`kind = "ema"`)
/// and a table of [`EmaConfig`] alone share them.
static EMA_FIELDS: [Field<EmaConfig>; 10] = [
    Field::optional("short_window_size", |c, v, p| {
        set(&mut c.short_window_size, u32_of(v, p))
    }),
    Field::optional("short_window_error_percent", |c, v, p| {
        set(&mut c.short_window_error_percent, u32_of(v, p))
    }),
    Field::optional("long_window_size", |c, v, p| {
        set(&mut c.long_window_size, u32_of(v, p))
    }),
    Field::optional("long_window_error_percent", |c, v, p| {
        set(&mut c.long_window_error_percent, u32_of(v, p))
    }),
    Field::optional("min_error_cost", |c, v, p| {
        set(&mut c.min_error_cost, duration(v, p))
    }),
    Field::optional("max_failed_latency_multiple", |c, v, p| {
        set(&mut c.max_failed_latency_multiple, u32_of(v, p))
    }),
    Field::optional("min_isolation", |c, v, p| {
        set(&mut c.min_isolation, duration(v, p))
    }),
    Field::optional("max_isolation", |c, v, p| {
        set(&mut c.max_isolation, duration(v, p))
    }),
    Field::optional("epsilon", |c, v, p| set(&mut c.epsilon, f64_of(v, p))),
    Field::optional("half_open_window_size", |c, v, p| {
        set(&mut c.half_open_window_size, u32_of(v, p))
    }),
];

static EMA: Table<EmaConfig> = Table {
    fields: &[&EMA_FIELDS],
    tag: None,
    unknown: concat!("unknown field, expected one of ", ema_fields!()),
    missing: "",
};

static EMA_POLICY: Table<EmaConfig> = Table {
    fields: &[&EMA_FIELDS],
    tag: Some("kind"),
    unknown: concat!("unknown field, expected one of `kind`, ", ema_fields!()),
    missing: "",
};

static OPEN_POLICY: Table<()> = Table {
    fields: &[],
    tag: Some("kind"),
    unknown: "unknown field, expected only `kind`",
    missing: "",
};

static EXPONENTIAL: Table<(Duration, Duration)> = Table {
    fields: &[&[
        Field::required("initial", |d, v, p| set(&mut d.0, duration(v, p))),
        Field::required("max", |d, v, p| set(&mut d.1, duration(v, p))),
    ]],
    tag: Some("kind"),
    unknown: "unknown field, expected one of `kind`, `initial`, `max`",
    missing: "required for kind `exponential`",
};

// -----------------------------------------------------------------------------------------
// The readers

fn settings(value: &Value, path: Path<'_>) -> Result<Settings, ConfigError> {
    named(value, path, "expected a table (map) of settings", &SETTINGS)
}

/// A table read by `shape` into [`Settings`], its errors attributed to the breaker its
/// `name` names.
pub(super) fn named(
    value: &Value,
    path: Path<'_>,
    not_a_table: &'static str,
    shape: &Table<Settings>,
) -> Result<Settings, ConfigError> {
    let entries = table(value, path, not_a_table)?;
    let name = match entries.iter().find(|(key, _)| key == "name") {
        Some((_, Value::Str(name))) => name.as_str(),
        _ => "",
    };
    shape
        .read(entries, path, Settings::default())
        .map_err(|err| err.for_breaker(name))
}

fn abandoned(value: &Value, path: Path<'_>) -> Result<Abandoned, ConfigError> {
    let entries = table(
        value,
        path,
        r#"expected a table (map) such as { closed = "failure", half_open = "exclusion" }"#,
    )?;
    ABANDONED.read(entries, path, Abandoned::default())
}

fn throttle(value: &Value, path: Path<'_>) -> Result<Throttle, ConfigError> {
    let entries = table(
        value,
        path,
        "expected a table (map) such as { k = 2.0, min_requests = 20, max_probability = 0.9 }",
    )?;
    let draft = Throttle::new(2.0).expect("2 is a valid multiplier");
    let throttle = THROTTLE.read(entries, path, draft)?;
    // A count window is checked with the other knobs (`Settings::to_builder`).
    match throttle.invalid(false) {
        Some(err) => Err(err.within(path.render())),
        None => Ok(throttle),
    }
}

fn abandoned_as(value: &Value, path: Path<'_>) -> Result<AbandonedAs, ConfigError> {
    match value {
        Value::Str(text) if text == "exclusion" => Ok(AbandonedAs::Exclusion),
        Value::Str(text) if text == "failure" => Ok(AbandonedAs::Failure),
        Value::Str(_) => Err(path.error(value, "unknown value, expected `exclusion` or `failure`")),
        _ => Err(path.error(value, "expected a string, `exclusion` or `failure`")),
    }
}

/// The `kind` of a tagged table, checked to be a string.
pub(super) fn kind<'v>(
    entries: &'v [(String, Value)],
    path: Path<'_>,
    missing: &'static str,
    not_a_string: &'static str,
) -> Result<&'v str, ConfigError> {
    match entries.iter().find(|(key, _)| key == "kind") {
        None => Err(path.key("kind").missing(missing)),
        Some((_, Value::Str(kind))) => Ok(kind),
        Some((_, other)) => Err(path.key("kind").error(other, not_a_string)),
    }
}

fn policy(value: &Value, path: Path<'_>) -> Result<PolicyConfig, ConfigError> {
    let entries = table(value, path, "expected a policy table (map) with a `kind`")?;
    let kind = kind(
        entries,
        path,
        concat!("required, one of ", policy_kinds!()),
        concat!("expected a string, one of ", policy_kinds!()),
    )?;
    Ok(match kind {
        "consecutive_failures" => {
            let threshold = ConsecutiveFailures::default().threshold();
            let threshold = CONSECUTIVE.read(entries, path, threshold)?;
            PolicyConfig::ConsecutiveFailures { threshold }
        }
        "failure_ratio" => {
            let (ratio, min_requests) = RATIO.read(entries, path, (0.0, 0))?;
            PolicyConfig::FailureRatio {
                ratio,
                min_requests,
            }
        }
        "failure_count" => {
            let (failures, min_requests) = COUNT.read(entries, path, (0, 0))?;
            PolicyConfig::FailureCount {
                failures,
                min_requests,
            }
        }
        "slow_calls" => {
            let draft = (Duration::ZERO, 0.0, 0, false);
            let (threshold, ratio, min_requests, probes_on_latency_alone) =
                SLOW.read(entries, path, draft)?;
            PolicyConfig::SlowCalls {
                threshold,
                ratio,
                min_requests,
                probes_on_latency_alone,
            }
        }
        "ema" => PolicyConfig::Ema(EMA_POLICY.read(entries, path, EmaConfig::default())?),
        "any_of" => PolicyConfig::AnyOf {
            policies: ANY_OF.read(entries, path, Vec::new())?,
        },
        _ => {
            return Err(path.key("kind").error(
                Value::Str(kind.to_owned()),
                concat!("unknown kind, expected one of ", policy_kinds!()),
            ))
        }
    })
}

/// The list of `any_of`.
fn policies(value: &Value, path: Path<'_>) -> Result<Vec<PolicyConfig>, ConfigError> {
    let Value::Seq(items) = value else {
        return Err(path.error(value, "expected a list of policy tables"));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| policy(item, path.index(i)))
        .collect()
}

fn open_duration(value: &Value, path: Path<'_>) -> Result<OpenDurationConfig, ConfigError> {
    let entries = table(
        value,
        path,
        "expected an open_duration table (map) with a `kind`",
    )?;
    let kind = kind(
        entries,
        path,
        concat!("required, one of ", open_duration_kinds!()),
        concat!("expected a string, one of ", open_duration_kinds!()),
    )?;
    Ok(match kind {
        "policy" => {
            OPEN_POLICY.read(entries, path, ())?;
            OpenDurationConfig::Policy {}
        }
        "exponential" => {
            let draft = (Duration::ZERO, Duration::ZERO);
            let (initial, max) = EXPONENTIAL.read(entries, path, draft)?;
            OpenDurationConfig::Exponential { initial, max }
        }
        _ => {
            return Err(path.key("kind").error(
                Value::Str(kind.to_owned()),
                concat!("unknown kind, expected one of ", open_duration_kinds!()),
            ))
        }
    })
}

// -----------------------------------------------------------------------------------------
// A registry's settings

impl<'de> Deserialize<'de> for RegistrySettings {
    /// A table, as [`Settings`] is: a positional array is refused, and every error names its
    /// field by its full path (`max_keys`, `exempt[1]`, `default.policy.ratio`) and, inside
    /// `breakers`, the entry's breaker.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        read(deserializer, |value| {
            let root = Path::Root("registry");
            let entries = table(value, root, "expected a table (map) of registry settings")?;
            REGISTRY.read(entries, root, RegistrySettings::default())
        })
        .map_err(into_format_error)
    }
}

const REGISTRY: Table<RegistrySettings> = Table {
    fields: &[&[
        Field::optional("max_keys", |s, v, p| {
            let n = u64_of(v, p)?;
            match usize::try_from(n) {
                Ok(0) => Err(p.error(v, MAX_KEYS_ZERO)),
                Ok(n) => set(&mut s.max_keys, Ok(Some(n))),
                Err(_) => Err(p.error(v, "exceeds this platform's `usize`")),
            }
        }),
        Field::optional("exempt", |s, v, p| {
            let Value::Seq(keys) = v else {
                return Err(p.error(v, "expected a list (array) of keys"));
            };
            s.exempt = keys
                .iter()
                .enumerate()
                .map(|(i, key)| string(key, p.index(i)))
                .collect::<Result<_, _>>()?;
            Ok(())
        }),
        Field::optional("default", |s, v, p| {
            set(
                &mut s.default,
                named(v, p, "expected a table (map) of settings", &SETTINGS),
            )
        }),
        Field::optional("breakers", |s, v, p| {
            let entries = table(v, p, "expected a table (map) of breakers keyed by name")?;
            let mut breakers = BTreeMap::new();
            for (key, entry) in entries {
                let entry =
                    settings(entry, Path::Root("settings")).map_err(|err| err.for_breaker(key))?;
                breakers.insert(key.clone(), entry);
            }
            s.breakers = SettingsMap::from(breakers);
            Ok(())
        }),
    ]],
    tag: None,
    unknown: "unknown field, expected one of `max_keys`, `exempt`, `default`, `breakers`",
    missing: "required",
};

/// Why `max_keys = 0` is refused (as [`RegistrySettings::build`] says it).
const MAX_KEYS_ZERO: &str =
    "must be at least 1 (leave `max_keys` out for a registry without a bound)";

// -----------------------------------------------------------------------------------------
// A map of breakers

/// Reads a table of breakers entry by entry, so that a format that knows where each entry is
/// (toml) points its error at the entry; an entry's [`ConfigError`] is also kept in `failed`,
/// for [`SettingsMap::from_deserializer`] to return typed.
struct MapVisitor<'a> {
    failed: &'a mut Option<ConfigError>,
}

impl<'de> Visitor<'de> for MapVisitor<'_> {
    type Value = SettingsMap;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a table of breakers keyed by name")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<SettingsMap, A::Error> {
        let mut breakers = BTreeMap::new();
        while let Some(Key(key)) = map.next_key()? {
            let entry = map.next_value_seed(Entry {
                key: &key,
                failed: &mut *self.failed,
            })?;
            if breakers.contains_key(&key) {
                let err = Path::Root("breakers")
                    .key(&key)
                    .error("{ … }", "duplicate breaker: each key names one");
                return Err(fail(self.failed, err));
            }
            breakers.insert(key, entry);
        }
        Ok(SettingsMap::from(breakers))
    }

    // Anything but a table: read it whole, to show it in the error.

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<SettingsMap, A::Error> {
        let value = ValueVisitor(None).visit_seq(seq)?;
        Err(self.not_a_table(&value))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<SettingsMap, E> {
        Err(self.not_a_table(&Value::Bool(v)))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<SettingsMap, E> {
        Err(self.not_a_table(&Value::Int(v.into())))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<SettingsMap, E> {
        Err(self.not_a_table(&Value::Int(v.into())))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<SettingsMap, E> {
        Err(self.not_a_table(&Value::Float(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<SettingsMap, E> {
        Err(self.not_a_table(&Value::Str(v.to_owned())))
    }

    fn visit_unit<E: de::Error>(self) -> Result<SettingsMap, E> {
        Err(self.not_a_table(&Value::Null))
    }

    fn visit_none<E: de::Error>(self) -> Result<SettingsMap, E> {
        Err(self.not_a_table(&Value::Null))
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<SettingsMap, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<SettingsMap, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl MapVisitor<'_> {
    fn not_a_table<E: de::Error>(self, value: &Value) -> E {
        let err =
            Path::Root("breakers").error(value, "expected a table (map) of breakers keyed by name");
        fail(self.failed, err)
    }
}

/// Keeps `err` for the typed route and hands it to the format.
fn fail<E: de::Error>(failed: &mut Option<ConfigError>, err: ConfigError) -> E {
    let format_error = E::custom(&err);
    *failed = Some(err);
    format_error
}

/// One entry of a table of breakers: its settings, with errors attributed to the breaker its
/// `name` or else its `key` names.
struct Entry<'a> {
    key: &'a str,
    failed: &'a mut Option<ConfigError>,
}

impl<'de> DeserializeSeed<'de> for Entry<'_> {
    type Value = Settings;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Settings, D::Error> {
        let value = Value::deserialize(deserializer)?;
        settings(&value, Path::Root("settings"))
            .map_err(|err| fail(self.failed, err.for_breaker(self.key)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys a reason lists between backticks.
    fn listed(reason: &str) -> Vec<&str> {
        reason.split('`').skip(1).step_by(2).collect()
    }

    fn lists_its_keys<T>(name: &str, table: &Table<T>) {
        assert_eq!(listed(table.unknown), table.keys(), "{name}");
    }

    #[test]
    fn every_unknown_field_reason_lists_its_tables_keys() {
        lists_its_keys("knobs", &KNOBS_ONLY);
        lists_its_keys("abandoned_as", &ABANDONED);
        lists_its_keys("consecutive_failures", &CONSECUTIVE);
        lists_its_keys("failure_ratio", &RATIO);
        lists_its_keys("failure_count", &COUNT);
        lists_its_keys("slow_calls", &SLOW);
        lists_its_keys("any_of", &ANY_OF);
        lists_its_keys("ema", &EMA);
        lists_its_keys("ema policy", &EMA_POLICY);
        lists_its_keys("policy open duration", &OPEN_POLICY);
        lists_its_keys("exponential", &EXPONENTIAL);
        lists_its_keys("settings", &SETTINGS);
        assert_eq!(
            listed(policy_kinds!()),
            [
                "consecutive_failures",
                "failure_ratio",
                "failure_count",
                "slow_calls",
                "ema",
                "any_of"
            ]
        );
    }

    #[test]
    fn a_table_reads_its_fields_and_refuses_the_rest() {
        let entries = |pairs: &[(&str, Value)]| -> Vec<(String, Value)> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect()
        };
        let root = Path::Root("policy");
        let read = |pairs: &[(&str, Value)]| RATIO.read(&entries(pairs), root, (0.0, 0));
        let ok = read(&[
            ("kind", Value::Str("failure_ratio".into())),
            ("min_requests", Value::Int(3)),
            ("ratio", Value::Float(0.5)),
        ]);
        assert_eq!(ok, Ok((0.5, 3)));
        let missing = read(&[("ratio", Value::Float(0.5))]).unwrap_err();
        assert_eq!(
            missing.to_string(),
            "invalid `min_requests` = (missing): required for kind `failure_ratio`"
        );
        let unknown = read(&[("ratoi", Value::Float(0.5))]).unwrap_err();
        assert_eq!(
            (unknown.field(), unknown.reason()),
            ("ratoi", RATIO.unknown)
        );
        // The first field in the order written is refused first.
        let wrong = read(&[
            ("min_requests", Value::Int(-1)),
            ("ratio", Value::Str("x".into())),
        ])
        .unwrap_err();
        assert_eq!(wrong.field(), "min_requests");
    }
}
