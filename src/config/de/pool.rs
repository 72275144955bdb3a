//! A pool's file shape: [`PoolSettings`] (its hedge, its slow start) and [`LimitSettings`]
//! (a concurrency limit's kind and fields), read with the [`Table`] reader of
//! [`super::value`]; every error names its field by its full path.

use std::time::Duration;

use serde::{Deserialize, Deserializer};

use super::schema::{kind, named, SETTINGS};
use super::value::{duration, f64_of, set, table, u32_of, u64_of, Field, Path, Table, Value};
use super::{into_format_error, read};
use crate::config::{HedgeSettings, LimitSettings, PoolSettings, SlowStartSettings};
use crate::error::ConfigError;

impl<'de> Deserialize<'de> for PoolSettings {
    /// A table: every error names its field by its full path (`deadline`,
    /// `hedge.percentile`, `slow_start.window`, `limit.backoff_ratio`,
    /// `endpoint.policy.ratio`).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        read(deserializer, |value| {
            let root = Path::Root("pool");
            let entries = table(value, root, "expected a table (map) of pool settings")?;
            POOL.read(entries, root, PoolSettings::default())
        })
        .map_err(into_format_error)
    }
}

const POOL: Table<PoolSettings> = Table {
    fields: &[&[
        Field::optional("endpoint", |s, v, p| {
            set(
                &mut s.endpoint,
                named(v, p, "expected a table (map) of settings", &SETTINGS),
            )
        }),
        Field::optional("deadline", |s, v, p| {
            set(&mut s.deadline, duration(v, p).map(Some))
        }),
        Field::optional("max_isolated", |s, v, p| {
            set(&mut s.max_isolated, f64_of(v, p).map(Some))
        }),
        Field::optional("jitter", |s, v, p| {
            set(&mut s.jitter, f64_of(v, p).map(Some))
        }),
        Field::optional("hedge", |s, v, p| {
            let entries = table(v, p, "expected a table (map): `delay` or `percentile`, and `max_attempts`")?;
            set(&mut s.hedge, HEDGE.read(entries, p, HedgeSettings::default()).map(Some))
        }),
        Field::optional("slow_start", |s, v, p| {
            let entries = table(v, p, "expected a table (map): `window`, `aggression`, `min_weight_percent`")?;
            let read = SLOW_START.read(entries, p, SlowStartSettings::default());
            set(&mut s.slow_start, read.map(Some))
        }),
        Field::optional("limit", |s, v, p| set(&mut s.limit, limit(v, p).map(Some))),
    ]],
    tag: None,
    unknown: "unknown field, expected one of `endpoint`, `deadline`, `max_isolated`, `jitter`, `hedge`, `slow_start`, `limit`",
    missing: "required",
};

const HEDGE: Table<HedgeSettings> = Table {
    fields: &[&[
        Field::optional("delay", |s, v, p| {
            set(&mut s.delay, duration(v, p).map(Some))
        }),
        Field::optional("percentile", |s, v, p| {
            set(&mut s.percentile, f64_of(v, p).map(Some))
        }),
        Field::optional("max_attempts", |s, v, p| {
            set(&mut s.max_attempts, u32_of(v, p))
        }),
    ]],
    tag: None,
    unknown: "unknown field, expected one of `delay`, `percentile`, `max_attempts`",
    missing: "required",
};

const SLOW_START: Table<SlowStartSettings> = Table {
    fields: &[&[
        Field::required("window", |s, v, p| set(&mut s.window, duration(v, p))),
        Field::optional("aggression", |s, v, p| set(&mut s.aggression, f64_of(v, p))),
        Field::optional("min_weight_percent", |s, v, p| {
            set(&mut s.min_weight_percent, f64_of(v, p))
        }),
    ]],
    tag: None,
    unknown: "unknown field, expected one of `window`, `aggression`, `min_weight_percent`",
    missing: "required",
};

// -----------------------------------------------------------------------------------------
// An adaptive concurrency limit

impl<'de> Deserialize<'de> for LimitSettings {
    /// A table with a `kind`, as a pool's `limit` is: every error names its field as a
    /// pool's settings do (`limit.kind`, `limit.backoff_ratio`), as
    /// [`LimitSettings::to_algorithm`]'s do.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        read(deserializer, |value| {
            let root = Path::Root("pool");
            limit(value, root.key("limit"))
        })
        .map_err(into_format_error)
    }
}

macro_rules! limit_kinds {
    () => {
        "`aimd`, `gradient2`, `vegas`, `fixed`"
    };
}

/// Every setting of every kind of limit, each left out as `None`: each kind's table reads
/// the ones it has.
#[derive(Default)]
struct LimitDraft {
    initial_limit: Option<u32>,
    min_limit: Option<u32>,
    max_limit: Option<u32>,
    backoff_ratio: Option<f64>,
    timeout: Option<Duration>,
    smoothing: Option<f64>,
    queue_size: Option<f64>,
    rtt_tolerance: Option<f64>,
    long_window: Option<u32>,
    probe_multiplier: Option<u32>,
    seed: Option<u64>,
    limit: u32,
}

const INITIAL_LIMIT: Field<LimitDraft> = Field::optional("initial_limit", |d, v, p| {
    set(&mut d.initial_limit, u32_of(v, p).map(Some))
});
const MIN_LIMIT: Field<LimitDraft> = Field::optional("min_limit", |d, v, p| {
    set(&mut d.min_limit, u32_of(v, p).map(Some))
});
const MAX_LIMIT: Field<LimitDraft> = Field::optional("max_limit", |d, v, p| {
    set(&mut d.max_limit, u32_of(v, p).map(Some))
});
const SMOOTHING: Field<LimitDraft> = Field::optional("smoothing", |d, v, p| {
    set(&mut d.smoothing, f64_of(v, p).map(Some))
});

static AIMD: Table<LimitDraft> = Table {
    fields: &[&[
        INITIAL_LIMIT,
        MIN_LIMIT,
        MAX_LIMIT,
        Field::optional("backoff_ratio", |d, v, p| {
            set(&mut d.backoff_ratio, f64_of(v, p).map(Some))
        }),
        Field::optional("timeout", |d, v, p| {
            set(&mut d.timeout, duration(v, p).map(Some))
        }),
    ]],
    tag: Some("kind"),
    unknown: "unknown field, expected one of `kind`, `initial_limit`, `min_limit`, \
        `max_limit`, `backoff_ratio`, `timeout`",
    missing: "",
};

static GRADIENT2: Table<LimitDraft> = Table {
    fields: &[&[
        INITIAL_LIMIT,
        MIN_LIMIT,
        MAX_LIMIT,
        SMOOTHING,
        Field::optional("queue_size", |d, v, p| {
            set(&mut d.queue_size, f64_of(v, p).map(Some))
        }),
        Field::optional("rtt_tolerance", |d, v, p| {
            set(&mut d.rtt_tolerance, f64_of(v, p).map(Some))
        }),
        Field::optional("long_window", |d, v, p| {
            set(&mut d.long_window, u32_of(v, p).map(Some))
        }),
    ]],
    tag: Some("kind"),
    unknown: "unknown field, expected one of `kind`, `initial_limit`, `min_limit`, \
        `max_limit`, `smoothing`, `queue_size`, `rtt_tolerance`, `long_window`",
    missing: "",
};

static VEGAS: Table<LimitDraft> = Table {
    fields: &[&[
        INITIAL_LIMIT,
        MAX_LIMIT,
        SMOOTHING,
        Field::optional("probe_multiplier", |d, v, p| {
            set(&mut d.probe_multiplier, u32_of(v, p).map(Some))
        }),
        Field::optional("seed", |d, v, p| set(&mut d.seed, u64_of(v, p).map(Some))),
    ]],
    tag: Some("kind"),
    unknown: "unknown field, expected one of `kind`, `initial_limit`, `max_limit`, \
        `smoothing`, `probe_multiplier`, `seed`",
    missing: "",
};

static FIXED: Table<LimitDraft> = Table {
    fields: &[&[Field::required("limit", |d, v, p| {
        set(&mut d.limit, u32_of(v, p))
    })]],
    tag: Some("kind"),
    unknown: "unknown field, expected `kind` or `limit`",
    missing: "required for kind `fixed`: the calls in flight at most",
};

fn limit(value: &Value, path: Path<'_>) -> Result<LimitSettings, ConfigError> {
    let entries = table(
        value,
        path,
        concat!(
            "expected a limit table (map) with a `kind`, one of ",
            limit_kinds!()
        ),
    )?;
    let kind = kind(
        entries,
        path,
        concat!("required, one of ", limit_kinds!()),
        concat!("expected a string, one of ", limit_kinds!()),
    )?;
    let read = |table: &Table<LimitDraft>| table.read(entries, path, LimitDraft::default());
    Ok(match kind {
        "aimd" => {
            let d = read(&AIMD)?;
            LimitSettings::Aimd {
                initial_limit: d.initial_limit,
                min_limit: d.min_limit,
                max_limit: d.max_limit,
                backoff_ratio: d.backoff_ratio,
                timeout: d.timeout,
            }
        }
        "gradient2" => {
            let d = read(&GRADIENT2)?;
            LimitSettings::Gradient2 {
                initial_limit: d.initial_limit,
                min_limit: d.min_limit,
                max_limit: d.max_limit,
                smoothing: d.smoothing,
                queue_size: d.queue_size,
                rtt_tolerance: d.rtt_tolerance,
                long_window: d.long_window,
            }
        }
        "vegas" => {
            let d = read(&VEGAS)?;
            LimitSettings::Vegas {
                initial_limit: d.initial_limit,
                max_limit: d.max_limit,
                smoothing: d.smoothing,
                probe_multiplier: d.probe_multiplier,
                seed: d.seed,
            }
        }
        "fixed" => LimitSettings::Fixed {
            limit: read(&FIXED)?.limit,
        },
        _ => {
            return Err(path.key("kind").error(
                Value::Str(kind.to_owned()),
                concat!("unknown kind, expected one of ", limit_kinds!()),
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys a reason lists between backticks.
    fn listed(reason: &str) -> Vec<&str> {
        reason.split('`').skip(1).step_by(2).collect()
    }

    #[test]
    fn every_unknown_field_reason_lists_its_tables_keys() {
        for (name, unknown, keys) in [
            ("pool", POOL.unknown, POOL.keys()),
            ("hedge", HEDGE.unknown, HEDGE.keys()),
            ("slow_start", SLOW_START.unknown, SLOW_START.keys()),
            ("aimd", AIMD.unknown, AIMD.keys()),
            ("gradient2", GRADIENT2.unknown, GRADIENT2.keys()),
            ("vegas", VEGAS.unknown, VEGAS.keys()),
            ("fixed", FIXED.unknown, FIXED.keys()),
        ] {
            assert_eq!(listed(unknown), keys, "{name}");
        }
        assert_eq!(
            listed(limit_kinds!()),
            ["aimd", "gradient2", "vegas", "fixed"]
        );
    }
}
