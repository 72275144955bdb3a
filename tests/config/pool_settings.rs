//! `PoolSettings`: a pool in plain values, its hedge, slow start and adaptive concurrency
//! limit, in code and in a file; every setting out of range refused with an error naming its
//! path.

use std::time::Duration;

use lazybreaker::config::{HedgeSettings, LimitSettings, PoolSettings, SlowStartSettings};

#[test]
fn settings_in_code_build_the_pool_they_describe() {
    let settings = PoolSettings {
        deadline: Some(Duration::from_millis(300)),
        hedge: Some(HedgeSettings {
            delay: Some(Duration::from_millis(20)),
            max_attempts: 3,
            ..HedgeSettings::default()
        }),
        slow_start: Some(SlowStartSettings {
            window: Duration::from_secs(30),
            aggression: 2.0,
            ..SlowStartSettings::default()
        }),
        ..PoolSettings::default()
    };
    let pool = settings.build::<String>().unwrap();
    let hedge = pool.hedge_policy().unwrap();
    assert_eq!(hedge.delay(), Some(Duration::from_millis(20)));
    assert_eq!(hedge.attempts(), 3);
    assert_eq!(
        pool.slow_start_settings().unwrap().window(),
        Duration::from_secs(30)
    );
    pool.set(["10.0.0.1:80".to_owned()]);
    assert_eq!(
        pool.breaker(&"10.0.0.1:80".to_owned()).unwrap().name(),
        "10.0.0.1:80"
    );
}

#[test]
fn every_setting_out_of_range_is_refused_naming_its_path() {
    let hedge = |delay, percentile, max_attempts| PoolSettings {
        hedge: Some(HedgeSettings {
            delay,
            percentile,
            max_attempts,
        }),
        ..PoolSettings::default()
    };
    let slow = |window, aggression, min_weight_percent| PoolSettings {
        slow_start: Some(SlowStartSettings {
            window,
            aggression,
            min_weight_percent,
        }),
        ..PoolSettings::default()
    };
    let ms = Some(Duration::from_millis(5));
    let s = Duration::from_secs(1);
    for (settings, field) in [
        (hedge(None, None, 2), "hedge"),
        (hedge(ms, Some(0.9), 2), "hedge"),
        (hedge(None, Some(0.0), 2), "hedge.percentile"),
        (hedge(None, Some(1.0), 2), "hedge.percentile"),
        (hedge(None, Some(f64::NAN), 2), "hedge.percentile"),
        (hedge(ms, None, 0), "hedge.max_attempts"),
        (slow(Duration::ZERO, 1.0, 10.0), "slow_start.window"),
        (slow(s, -1.0, 10.0), "slow_start.aggression"),
        (slow(s, f64::NAN, 10.0), "slow_start.aggression"),
        (slow(s, f64::INFINITY, 10.0), "slow_start.aggression"),
        (slow(s, 1.0, -5.0), "slow_start.min_weight_percent"),
        (slow(s, 1.0, 101.0), "slow_start.min_weight_percent"),
        (
            PoolSettings {
                max_isolated: Some(1.5),
                ..PoolSettings::default()
            },
            "max_isolated",
        ),
    ] {
        let err = settings.validate().unwrap_err();
        assert_eq!(err.field(), field, "{settings:?}");
        assert_eq!(settings.build::<String>().unwrap_err().field(), field);
    }
}

fn aimd(initial_limit: Option<u32>, backoff_ratio: Option<f64>) -> LimitSettings {
    LimitSettings::Aimd {
        initial_limit,
        min_limit: Some(5),
        max_limit: None,
        backoff_ratio,
        timeout: Some(Duration::from_secs(2)),
    }
}

fn gradient2(max_limit: Option<u32>, smoothing: Option<f64>) -> LimitSettings {
    LimitSettings::Gradient2 {
        initial_limit: Some(40),
        min_limit: None,
        max_limit,
        smoothing,
        queue_size: Some(2.0),
        rtt_tolerance: None,
        long_window: Some(100),
    }
}

fn vegas(max_limit: Option<u32>, probe_multiplier: Option<u32>) -> LimitSettings {
    LimitSettings::Vegas {
        initial_limit: Some(60),
        max_limit,
        smoothing: Some(0.5),
        probe_multiplier,
        seed: Some(7),
    }
}

fn with_limit(limit: LimitSettings) -> PoolSettings {
    PoolSettings {
        limit: Some(limit),
        ..PoolSettings::default()
    }
}

#[test]
fn each_kind_of_limit_builds_the_pools_limit() {
    for (limit, initial) in [
        (aimd(Some(30), Some(0.8)), 30),
        (aimd(None, None), 20),
        (gradient2(Some(400), Some(0.5)), 40),
        (vegas(Some(500), Some(10)), 60),
        (LimitSettings::Fixed { limit: 8 }, 8),
    ] {
        let settings = with_limit(limit.clone());
        settings.validate().unwrap();
        let pool = settings.build::<String>().unwrap();
        let algorithm = pool.limit_algorithm().expect("a limit");
        assert_eq!(algorithm.limit(), initial, "{limit:?}");
        assert_eq!(limit.to_algorithm().unwrap().limit(), initial);
    }
    // Left out: the algorithm's own defaults.
    let defaults = LimitSettings::Vegas {
        initial_limit: None,
        max_limit: None,
        smoothing: None,
        probe_multiplier: None,
        seed: None,
    };
    assert_eq!(defaults.to_algorithm().unwrap().limit(), 20);
    // A fixed limit learns nothing; the others do.
    assert!(!LimitSettings::Fixed { limit: 1 }
        .to_algorithm()
        .unwrap()
        .learns());
    assert!(aimd(None, None).to_algorithm().unwrap().learns());
    // No limit unless one is set.
    let pool = PoolSettings::default().build::<String>().unwrap();
    assert!(pool.limit_algorithm().is_none());
}

#[test]
fn a_limit_out_of_range_is_refused_naming_its_path() {
    for (limit, field) in [
        (aimd(None, Some(1.0)), "limit.backoff_ratio"),
        (aimd(None, Some(0.4)), "limit.backoff_ratio"),
        (aimd(None, Some(f64::NAN)), "limit.backoff_ratio"),
        (
            LimitSettings::Aimd {
                initial_limit: None,
                min_limit: Some(50),
                max_limit: Some(40),
                backoff_ratio: None,
                timeout: None,
            },
            "limit.max_limit",
        ),
        (
            LimitSettings::Aimd {
                initial_limit: None,
                min_limit: None,
                max_limit: None,
                backoff_ratio: None,
                timeout: Some(Duration::ZERO),
            },
            "limit.timeout",
        ),
        (gradient2(None, Some(0.0)), "limit.smoothing"),
        (gradient2(Some(10), None), "limit.max_limit"),
        (
            LimitSettings::Gradient2 {
                initial_limit: None,
                min_limit: None,
                max_limit: None,
                smoothing: None,
                queue_size: Some(-1.0),
                rtt_tolerance: Some(0.5),
                long_window: None,
            },
            "limit.rtt_tolerance",
        ),
        (
            LimitSettings::Gradient2 {
                initial_limit: None,
                min_limit: None,
                max_limit: None,
                smoothing: None,
                queue_size: Some(-1.0),
                rtt_tolerance: None,
                long_window: Some(0),
            },
            "limit.long_window",
        ),
        (vegas(Some(70_000), None), "limit.max_limit"),
        (vegas(None, Some(0)), "limit.probe_multiplier"),
        (LimitSettings::Fixed { limit: 0 }, "limit.limit"),
    ] {
        assert_eq!(
            limit.to_algorithm().unwrap_err().field(),
            field,
            "{limit:?}"
        );
        let settings = with_limit(limit);
        let err = settings.validate().unwrap_err();
        assert_eq!(err.field(), field, "{settings:?}");
        assert_eq!(settings.build::<String>().unwrap_err().field(), field);
    }
}

#[cfg(feature = "serde")]
mod file {
    use super::*;

    #[test]
    fn a_file_describes_a_pool_and_is_written_back() {
        let text = r#"
            deadline = "300ms"
            max_isolated = 0.3
            hedge = { percentile = 0.95, max_attempts = 2 }
            slow_start = { window = "30s", min_weight_percent = 5.0 }
            [endpoint]
            timeout = "2s"
            policy = { kind = "consecutive_failures", threshold = 3 }
        "#;
        let settings: PoolSettings = toml::from_str(text).unwrap();
        assert_eq!(settings.deadline, Some(Duration::from_millis(300)));
        assert_eq!(settings.max_isolated, Some(0.3));
        let hedge = settings.hedge.clone().unwrap();
        assert_eq!(
            (hedge.delay, hedge.percentile, hedge.max_attempts),
            (None, Some(0.95), 2)
        );
        let slow = settings.slow_start.clone().unwrap();
        assert_eq!(slow.window, Duration::from_secs(30));
        assert_eq!((slow.aggression, slow.min_weight_percent), (1.0, 5.0));
        assert_eq!(settings.endpoint.knobs.timeout, Duration::from_secs(2));
        let pool = settings.build::<String>().unwrap();
        assert_eq!(pool.hedge_policy().unwrap().percentile(), Some(0.95));

        let written = toml::to_string(&settings).unwrap();
        let again: PoolSettings = toml::from_str(&written).unwrap();
        assert_eq!(again, settings, "{written}");
    }

    #[test]
    fn each_kind_of_limit_in_a_file_builds_the_pools_limit() {
        for (text, expected, initial) in [
            (
                r#"limit = { kind = "aimd", initial_limit = 30, min_limit = 5, backoff_ratio = 0.8, timeout = "2s" }"#,
                aimd(Some(30), Some(0.8)),
                30,
            ),
            (
                r#"limit = { kind = "gradient2", initial_limit = 40, max_limit = 400, smoothing = 0.5, queue_size = 2, long_window = 100 }"#,
                gradient2(Some(400), Some(0.5)),
                40,
            ),
            (
                r#"limit = { kind = "vegas", initial_limit = 60, max_limit = 500, smoothing = 0.5, probe_multiplier = 10, seed = 7 }"#,
                vegas(Some(500), Some(10)),
                60,
            ),
            (
                r#"limit = { kind = "fixed", limit = 8 }"#,
                LimitSettings::Fixed { limit: 8 },
                8,
            ),
            (
                r#"limit = { kind = "aimd" }"#,
                LimitSettings::Aimd {
                    initial_limit: None,
                    min_limit: None,
                    max_limit: None,
                    backoff_ratio: None,
                    timeout: None,
                },
                20,
            ),
        ] {
            let settings: PoolSettings = toml::from_str(text).unwrap();
            assert_eq!(settings.limit.as_ref(), Some(&expected), "{text}");
            let pool = settings.build::<String>().unwrap();
            assert_eq!(pool.limit_algorithm().unwrap().limit(), initial, "{text}");

            // Written back and read again: the same settings, defaults still left out.
            let written = toml::to_string(&settings).unwrap();
            let again: PoolSettings = toml::from_str(&written).unwrap();
            assert_eq!(again, settings, "{written}");
            // In JSON too.
            let json = serde_json::to_string(&settings).unwrap();
            assert_eq!(
                serde_json::from_str::<PoolSettings>(&json).unwrap(),
                settings
            );
            // A limit alone, through its own `Deserialize`.
            let alone = toml::to_string(&expected).unwrap();
            assert_eq!(toml::from_str::<LimitSettings>(&alone).unwrap(), expected);
        }
        let written = toml::to_string(&with_limit(aimd(None, Some(0.8)))).unwrap();
        assert!(written.contains(r#"timeout = "2s""#), "{written}");
        assert!(!written.contains("initial_limit"), "{written}");
    }

    #[test]
    fn a_limit_out_of_shape_names_its_path() {
        let message = |text: &str| {
            toml::from_str::<PoolSettings>(text)
                .unwrap_err()
                .message()
                .to_owned()
        };
        let err = message(r#"limit = { kind = "bbr" }"#);
        assert!(err.contains("`limit.kind`"), "{err}");
        assert!(
            err.contains("unknown kind, expected one of `aimd`, `gradient2`, `vegas`, `fixed`"),
            "{err}"
        );
        let err = message("limit = { max_limit = 10 }");
        assert!(
            err.contains("`limit.kind` = (missing): required, one of `aimd`"),
            "{err}"
        );
        let err = message("limit = { kind = 3 }");
        assert!(err.contains("`limit.kind` = 3: expected a string"), "{err}");
        let err = message(r#"limit = { kind = "aimd", backoff_ratio = "high" }"#);
        assert!(
            err.contains(r#"invalid `limit.backoff_ratio` = "high": expected a number"#),
            "{err}"
        );
        let err = message(r#"limit = { kind = "aimd", timeout = 5 }"#);
        assert!(err.contains("`limit.timeout` = 5"), "{err}");
        let err = message(r#"limit = { kind = "gradient2", initial_limit = -1 }"#);
        assert!(err.contains("`limit.initial_limit` = -1"), "{err}");
        let err = message(r#"limit = { kind = "fixed" }"#);
        assert!(
            err.contains("`limit.limit` = (missing): required for kind `fixed`"),
            "{err}"
        );
        let err = message("limit = 10");
        assert!(
            err.contains("invalid `limit` = 10: expected a limit table"),
            "{err}"
        );
        // An unknown field lists the fields of its kind.
        for (text, expected) in [
            (
                r#"limit = { kind = "aimd", smoothing = 0.5 }"#,
                "invalid `limit.smoothing` = 0.5: unknown field, expected one of `kind`, \
                 `initial_limit`, `min_limit`, `max_limit`, `backoff_ratio`, `timeout`",
            ),
            (
                r#"limit = { kind = "gradient2", timeout = "1s" }"#,
                "invalid `limit.timeout` = \"1s\": unknown field, expected one of `kind`, \
                 `initial_limit`, `min_limit`, `max_limit`, `smoothing`, `queue_size`, \
                 `rtt_tolerance`, `long_window`",
            ),
            (
                r#"limit = { kind = "vegas", min_limit = 1 }"#,
                "invalid `limit.min_limit` = 1: unknown field, expected one of `kind`, \
                 `initial_limit`, `max_limit`, `smoothing`, `probe_multiplier`, `seed`",
            ),
            (
                r#"limit = { kind = "fixed", limit = 4, max_limit = 8 }"#,
                "invalid `limit.max_limit` = 8: unknown field, expected `kind` or `limit`",
            ),
        ] {
            let err = message(text);
            assert!(err.contains(expected), "{text}: {err}");
        }
        // The same paths in JSON, and from a limit read alone.
        let err =
            serde_json::from_str::<PoolSettings>(r#"{"limit": {"kind": "vegas", "seed": "x"}}"#)
                .unwrap_err();
        assert!(err.to_string().contains("`limit.seed`"), "{err}");
        let err = toml::from_str::<LimitSettings>(
            r#"kind = "aimd"
backoff_ratio = true"#,
        )
        .unwrap_err();
        assert!(
            err.message().contains("`limit.backoff_ratio`"),
            "{}",
            err.message()
        );
        let err = toml::from_str::<LimitSettings>(r#"kind = "bbr""#).unwrap_err();
        assert!(err.message().contains("`limit.kind`"), "{}", err.message());
    }

    #[test]
    fn a_limit_in_a_file_out_of_range_names_its_path() {
        for (text, field) in [
            (
                r#"limit = { kind = "aimd", backoff_ratio = 1.5 }"#,
                "limit.backoff_ratio",
            ),
            (
                r#"limit = { kind = "aimd", timeout = "0s" }"#,
                "limit.timeout",
            ),
            (
                r#"limit = { kind = "gradient2", smoothing = 0 }"#,
                "limit.smoothing",
            ),
            (
                r#"limit = { kind = "gradient2", max_limit = 10 }"#,
                "limit.max_limit",
            ),
            (
                r#"limit = { kind = "vegas", probe_multiplier = 0 }"#,
                "limit.probe_multiplier",
            ),
            (r#"limit = { kind = "fixed", limit = 0 }"#, "limit.limit"),
        ] {
            let settings: PoolSettings = toml::from_str(text).unwrap();
            assert_eq!(settings.validate().unwrap_err().field(), field, "{text}");
            assert_eq!(
                settings.build::<String>().unwrap_err().field(),
                field,
                "{text}"
            );
        }
    }

    #[test]
    fn a_file_out_of_shape_or_range_names_the_path() {
        for (text, field) in [
            ("hedge = { delay = 20 }", "hedge.delay"),
            ("hedge = { percentile = \"high\" }", "hedge.percentile"),
            ("hedge = { when = 1 }", "hedge.when"),
            ("slow_start = { aggression = 1.0 }", "slow_start.window"),
            (
                "slow_start = { window = \"1s\", aggression = true }",
                "slow_start.aggression",
            ),
            ("deadline = \"soon\"", "deadline"),
            ("retries = 3", "retries"),
            ("[endpoint]\ntimeout = 5", "endpoint.timeout"),
        ] {
            let err = toml::from_str::<PoolSettings>(text).unwrap_err();
            assert!(
                err.message().contains(&format!("`{field}`")),
                "{text}: {}",
                err.message()
            );
        }
        // In range is checked when the pool is built.
        for (text, field) in [
            ("hedge = { percentile = 1.5 }", "hedge.percentile"),
            ("hedge = { percentile = nan }", "hedge.percentile"),
            (
                "hedge = { delay = \"5ms\", max_attempts = 0 }",
                "hedge.max_attempts",
            ),
            (
                "slow_start = { window = \"1s\", aggression = -1.0 }",
                "slow_start.aggression",
            ),
            (
                "slow_start = { window = \"1s\", aggression = nan }",
                "slow_start.aggression",
            ),
            ("slow_start = { window = \"0s\" }", "slow_start.window"),
        ] {
            let settings: PoolSettings = toml::from_str(text).unwrap();
            let err = settings.build::<String>().unwrap_err();
            assert_eq!(err.field(), field, "{text}");
        }
    }
}
