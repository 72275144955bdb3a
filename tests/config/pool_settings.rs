//! `PoolSettings`: a pool in plain values, its hedge and slow start, in code and in a file;
//! every setting out of range refused with an error naming its path.

use std::time::Duration;

use lazybreaker::config::{HedgeSettings, PoolSettings, SlowStartSettings};

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
