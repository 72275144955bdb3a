//! The jitter in files: `jitter = 0.2` and `jitter_seed = 7` read into `Knobs`, written back
//! the same, and a fraction that is not a number within `[0, 1]` refused naming the breaker
//! and `jitter`, in a file, a map of breakers, a registry's settings, a pool's settings and in
//! code.

use lazybreaker::config::Settings;
use lazybreaker::{Breaker, Knobs};

#[test]
fn a_fraction_out_of_range_is_refused_in_code_naming_the_field() {
    for bad in [f64::NAN, -0.1, 1.5, f64::INFINITY] {
        let settings = Settings {
            knobs: Knobs {
                name: "payments".into(),
                jitter: Some(bad),
                ..Knobs::default()
            },
            ..Settings::default()
        };
        let err = settings.validate().unwrap_err();
        assert_eq!(err.field(), "jitter", "{bad}");
        assert_eq!(err.breaker(), Some("payments"));
        assert!(Breaker::from_settings(&settings).is_err());
    }
    let ok = Settings {
        knobs: Knobs {
            jitter: Some(1.0),
            jitter_seed: Some(3),
            ..Knobs::default()
        },
        ..Settings::default()
    };
    assert!(ok.validate().is_ok());
}

#[test]
fn a_pools_settings_carry_its_jitter_and_refuse_one_out_of_range() {
    use lazybreaker::config::PoolSettings;
    use lazybreaker::ManualClock;
    use std::time::Duration;

    for bad in [f64::NAN, -0.1, 1.5] {
        let pool = PoolSettings {
            jitter: Some(bad),
            ..PoolSettings::default()
        };
        assert_eq!(pool.validate().unwrap_err().field(), "jitter", "{bad}");
        // An endpoint's own, under `endpoint`.
        let endpoint = PoolSettings {
            endpoint: Settings {
                knobs: Knobs {
                    jitter: Some(bad),
                    ..Knobs::default()
                },
                ..Settings::default()
            },
            ..PoolSettings::default()
        };
        assert_eq!(endpoint.validate().unwrap_err().field(), "endpoint.jitter");
    }
    // A pool built from settings with a spread: its endpoints' first open periods (the
    // pool's 100 ms) within [50 ms, 100 ms], each its own.
    let clock = ManualClock::new();
    let pool = PoolSettings {
        jitter: Some(0.5),
        ..PoolSettings::default()
    }
    .build::<String>()
    .unwrap()
    .clock(clock)
    .max_isolated(1.0);
    let keys: Vec<String> = (0..4).map(|i| format!("10.0.0.{i}:80")).collect();
    pool.set(keys.clone());
    let periods: Vec<Duration> = keys
        .iter()
        .map(|key| {
            let breaker = pool.breaker(key).unwrap();
            while let Ok(permit) = breaker.allow() {
                permit.failure(); // the default policy: trips after a few failures
            }
            breaker.allow().unwrap_err().retry_after().unwrap()
        })
        .collect();
    let (low, high) = (Duration::from_millis(50), Duration::from_millis(100));
    assert!(
        periods.iter().all(|d| (low..=high).contains(d)),
        "{periods:?}"
    );
    assert!(periods.iter().any(|d| *d != periods[0]), "{periods:?}");
}

#[cfg(feature = "serde")]
mod files {
    use super::*;
    use std::time::Duration;

    use lazybreaker::config::{self, RegistrySettings, SettingsMap};
    use lazybreaker::{ManualClock, Rejected};

    #[test]
    fn jitter_and_its_seed_read_into_the_knobs_and_back() {
        let settings: Settings = toml::from_str(
            r#"
            name = "orders"
            timeout = "10s"
            jitter = 0.2
            jitter_seed = 7
            "#,
        )
        .unwrap();
        assert_eq!(
            (settings.knobs.jitter, settings.knobs.jitter_seed),
            (Some(0.2), Some(7))
        );
        let text = toml::to_string(&settings).unwrap();
        assert!(text.contains("jitter = 0.2"), "{text}");
        assert!(text.contains("jitter_seed = 7"), "{text}");
        assert_eq!(toml::from_str::<Settings>(&text).unwrap(), settings);
        // Unset: written out as nothing, read back as unset.
        let text = toml::to_string(&Settings::default()).unwrap();
        assert!(!text.contains("jitter"), "{text}");
        // An integer is a number too.
        let knobs: Knobs = toml::from_str("jitter = 1").unwrap();
        assert_eq!(knobs.jitter, Some(1.0));

        // The breaker runs by it: a trip opens for 8 s to 10 s.
        let clock = ManualClock::new();
        let breaker = settings.to_builder().unwrap().clock(clock).build();
        for _ in 0..6 {
            let _ = breaker.execute(|| Err::<(), _>("down"));
        }
        let retry_after = match breaker.allow() {
            Err(Rejected::Open { retry_after }) => retry_after,
            other => panic!("open: {other:?}"),
        };
        let (low, high) = (Duration::from_secs(8), Duration::from_secs(10));
        assert!((low..=high).contains(&retry_after), "{retry_after:?}");
    }

    #[test]
    fn a_file_with_a_fraction_out_of_range_is_refused_naming_the_field() {
        for (value, shown) in [
            ("1.5", "1.5"),
            ("nan", "NaN"),
            ("-0.5", "-0.5"),
            ("inf", "inf"),
        ] {
            let settings: Settings =
                toml::from_str(&format!("name = \"payments\"\njitter = {value}")).unwrap();
            let err = Breaker::from_settings(&settings).unwrap_err();
            assert_eq!(err.field(), "jitter", "{value}");
            assert_eq!(err.breaker(), Some("payments"));
            assert_eq!(
                err.to_string(),
                format!(
                    "breaker `payments`: invalid `jitter` = {shown}: must be a number within [0, 1]"
                )
            );
            // In a map of breakers, the key names the breaker.
            let map: SettingsMap = toml::from_str(&format!("[search]\njitter = {value}")).unwrap();
            let err = config::build_all(&map).unwrap_err();
            assert_eq!((err.breaker(), err.field()), (Some("search"), "jitter"));
            // In a registry's default settings, the field under `default`.
            let registry: RegistrySettings =
                toml::from_str(&format!("[default]\njitter = {value}")).unwrap();
            let err = registry.build().unwrap_err();
            assert_eq!(err.field(), "default.jitter", "{value}");
        }
    }

    #[test]
    fn a_pools_file_reads_its_jitter() {
        let pool: lazybreaker::config::PoolSettings =
            toml::from_str("jitter = 0.1\n[endpoint]\njitter = 0.0").unwrap();
        assert_eq!(
            (pool.jitter, pool.endpoint.knobs.jitter),
            (Some(0.1), Some(0.0))
        );
        let text = toml::to_string(&pool).unwrap();
        assert_eq!(
            toml::from_str::<lazybreaker::config::PoolSettings>(&text).unwrap(),
            pool
        );
        let pool: lazybreaker::config::PoolSettings = toml::from_str("jitter = 2").unwrap();
        assert_eq!(pool.validate().unwrap_err().field(), "jitter");
    }

    #[test]
    fn a_jitter_of_the_wrong_shape_is_refused_while_parsing() {
        let err = toml::from_str::<Settings>(r#"jitter = "0.1""#).unwrap_err();
        assert_eq!(
            err.message(),
            r#"invalid `jitter` = "0.1": expected a number"#
        );
        let err = toml::from_str::<Settings>("jitter_seed = -1").unwrap_err();
        assert_eq!(
            err.message(),
            "invalid `jitter_seed` = -1: expected a non-negative integer"
        );
    }
}
