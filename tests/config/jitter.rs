//! The jitter in files: `jitter = 0.2` and `jitter_seed = 7` read into `Knobs`, written back
//! the same, and a fraction that is not a number within `[0, 1]` refused naming the breaker
//! and `jitter`, in a file, a map of breakers, a registry's settings and in code.

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
