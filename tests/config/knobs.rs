//! The one set of knobs (`Knobs`): what the builder sets, a file sets too, and each knob
//! changes what the breaker does. Time only from `ManualClock`.

use std::time::Duration;

use lazybreaker::policy::Outcome;
use lazybreaker::{Abandoned, AbandonedAs, Breaker, Knobs, ManualClock, State};

/// A fatal result, then five failures: enough to trip any breaker of these tests (the fatal
/// result alone opens a breaker that can trip).
fn hammer<P: lazybreaker::policy::TripPolicy>(breaker: &Breaker<P>) {
    breaker.allow().unwrap().record(Outcome::Fatal);
    for _ in 0..5 {
        let _ = breaker.execute(|| Err::<(), _>("down"));
    }
}

#[test]
fn never_trips_from_the_builder_keeps_the_breaker_closed_and_counting() {
    let clock = ManualClock::new();
    let build = |never_trips: bool| {
        Breaker::builder()
            .ready_to_trip(|c| c.consecutive_failures >= 1)
            .never_trips(never_trips)
            .clock(clock.clone())
            .build()
    };
    let exempt = build(true);
    hammer(&exempt);
    assert_eq!(exempt.state(), State::Closed);
    assert_eq!(exempt.counts().total_failures, 6);
    assert_eq!(exempt.totals().opened, 0);
    // Manual controls still apply.
    exempt.force_open();
    assert_eq!(exempt.state(), State::Open);

    // The control: the same breaker without the knob opens on the first failure.
    let plain = build(false);
    hammer(&plain);
    assert_eq!(plain.state(), State::Open);
}

#[test]
fn knobs_replace_every_knob_at_once() {
    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .name("old")
        .timeout(Duration::from_secs(5))
        .knobs(Knobs {
            name: "new".into(),
            ..Knobs::default()
        })
        .ready_to_trip(|c| c.consecutive_failures >= 1)
        .clock(clock.clone())
        .build();
    assert_eq!(breaker.name(), "new");
    let _ = breaker.execute(|| Err::<(), _>("down"));
    assert_eq!(breaker.state(), State::Open);
    // The timeout set before `knobs` is gone: back to the default, 60 s.
    clock.advance(Duration::from_secs(6));
    assert_eq!(breaker.state(), State::Open);
    clock.advance(Duration::from_secs(55));
    assert_eq!(breaker.state(), State::HalfOpen);
}

#[test]
fn abandoned_as_from_the_builder_is_the_knob() {
    let breaker = Breaker::builder()
        .knobs(Knobs {
            abandoned_as: Abandoned {
                closed: AbandonedAs::Failure,
                half_open: AbandonedAs::Exclusion,
            },
            ..Knobs::default()
        })
        .clock(ManualClock::new())
        .build();
    drop(breaker.allow().unwrap());
    assert_eq!(breaker.counts().total_failures, 1);
    assert_eq!(breaker.totals().abandoned, 1);
}

#[cfg(feature = "serde")]
mod from_files {
    use super::*;
    use lazybreaker::config::{self, RegistrySettings, Settings, SettingsMap};
    use lazybreaker::DynBreaker;

    fn from_toml(text: &str, clock: &ManualClock) -> DynBreaker {
        let settings: Settings = toml::from_str(text).unwrap_or_else(|e| panic!("{text}\n{e}"));
        settings.to_builder().unwrap().clock(clock.clone()).build()
    }

    #[test]
    fn abandoned_as_from_a_file_changes_how_an_abandoned_call_counts() {
        let clock = ManualClock::new();
        let counted_as = |text: &str| {
            let breaker = from_toml(text, &clock);
            drop(breaker.allow().unwrap()); // no verdict
            let c = breaker.counts();
            (c.total_failures, c.total_exclusions, c.consecutive_failures)
        };
        assert_eq!(counted_as(""), (0, 1, 0));
        assert_eq!(
            counted_as(r#"abandoned_as = { closed = "exclusion" }"#),
            (0, 1, 0)
        );
        assert_eq!(
            counted_as(r#"abandoned_as = { closed = "failure" }"#),
            (1, 0, 1)
        );
        // The half-open setting alone leaves the closed state's default.
        assert_eq!(
            counted_as(r#"abandoned_as = { half_open = "failure" }"#),
            (0, 1, 0)
        );
    }

    #[test]
    fn abandoned_as_half_open_from_a_file_reopens_on_an_abandoned_probe() {
        let clock = ManualClock::new();
        let after_abandoned_probe = |text: &str| {
            let breaker = from_toml(
                &format!(
                    "timeout = \"10s\"\npolicy = {{ kind = \"consecutive_failures\", threshold = 1 }}\n{text}"
                ),
                &clock,
            );
            let _ = breaker.execute(|| Err::<(), _>("down"));
            assert_eq!(breaker.state(), State::Open);
            clock.advance(Duration::from_secs(11));
            assert_eq!(breaker.state(), State::HalfOpen);
            drop(breaker.allow().unwrap());
            breaker.state()
        };
        assert_eq!(after_abandoned_probe(""), State::HalfOpen);
        assert_eq!(
            after_abandoned_probe(r#"abandoned_as = { half_open = "failure" }"#),
            State::Open
        );
    }

    #[test]
    fn never_trips_from_a_file_keeps_the_breaker_closed_through_failures_and_a_fatal_result() {
        let clock = ManualClock::new();
        let policy = r#"policy = { kind = "consecutive_failures", threshold = 1 }"#;
        let exempt = from_toml(&format!("never_trips = true\n{policy}"), &clock);
        hammer(&exempt);
        assert_eq!(exempt.state(), State::Closed);
        assert_eq!(exempt.counts().total_failures, 6);

        let plain = from_toml(&format!("never_trips = false\n{policy}"), &clock);
        hammer(&plain);
        assert_eq!(plain.state(), State::Open);

        // In a map too, and through `Breaker::from_settings`.
        let map: SettingsMap =
            toml::from_str(&format!("[health]\nnever_trips = true\n{policy}")).unwrap();
        let breakers = config::build_all(&map).unwrap();
        hammer(&breakers[0].1);
        assert_eq!(breakers[0].1.state(), State::Closed);
        let one = Breaker::from_settings(&map["health"]).unwrap();
        hammer(&one);
        assert_eq!(one.state(), State::Closed);
    }

    #[test]
    fn verdict_at_latest_from_a_file_counts_a_success_whose_window_ended() {
        let clock = ManualClock::new();
        for (text, dropped) in [("verdict_at_latest = true", 0), ("", 1)] {
            let breaker = from_toml(&format!("interval = \"10s\"\n{text}"), &clock);
            let permit = breaker.allow().unwrap();
            clock.advance(Duration::from_secs(11));
            permit.success();
            assert_eq!(breaker.totals().dropped, dropped, "{text:?}");
        }
        let settings: Settings = toml::from_str("verdict_at_latest = true").unwrap();
        assert!(settings.knobs.verdict_at_latest);
        let text = toml::to_string(&settings).unwrap();
        assert!(text.contains("verdict_at_latest = true"), "{text}");
        let plain = toml::to_string(&Settings::default()).unwrap();
        assert!(
            !plain.contains("verdict_at_latest"),
            "written only when set: {plain}"
        );
        let err = toml::from_str::<Settings>("verdict_at_latest = 1").unwrap_err();
        assert!(
            err.message().contains("verdict_at_latest"),
            "{}",
            err.message()
        );
    }

    #[test]
    fn a_registry_entry_may_set_never_trips_itself() {
        let settings: RegistrySettings = toml::from_str(
            r#"
            exempt = ["Health"]
            [default]
            policy = { kind = "consecutive_failures", threshold = 1 }
            [breakers.Ping]
            never_trips = true
            policy = { kind = "consecutive_failures", threshold = 1 }
            "#,
        )
        .unwrap();
        let registry = settings.build().unwrap();
        for key in ["Get", "Health", "Ping"] {
            hammer(&registry.breaker(key));
        }
        assert_eq!(registry.breaker("Get").state(), State::Open);
        assert_eq!(registry.breaker("Health").state(), State::Closed);
        assert_eq!(registry.breaker("Ping").state(), State::Closed);
        assert_eq!(registry.breaker("Health").name(), "Health");
    }

    #[test]
    fn the_new_knobs_round_trip_through_toml_and_json() {
        let settings = Settings {
            knobs: Knobs {
                name: "payments".into(),
                timeout: Duration::from_secs(90),
                abandoned_as: Abandoned {
                    closed: AbandonedAs::Failure,
                    half_open: AbandonedAs::Exclusion,
                },
                never_trips: true,
                ..Knobs::default()
            },
            ..Settings::default()
        };
        let text = toml::to_string(&settings).unwrap();
        assert!(text.contains("never_trips = true"), "{text}");
        assert!(text.contains(r#"closed = "failure""#), "{text}");
        assert_eq!(toml::from_str::<Settings>(&text).unwrap(), settings);

        let json = serde_json::to_string(&settings).unwrap();
        assert!(
            json.contains(
                r#""abandoned_as":{"closed":"failure","half_open":"exclusion"},"never_trips":true"#
            ),
            "{json}"
        );
        assert_eq!(serde_json::from_str::<Settings>(&json).unwrap(), settings);

        // Knobs alone round-trip too; defaults are left out.
        let knobs_text = toml::to_string(&settings.knobs).unwrap();
        assert_eq!(
            toml::from_str::<Knobs>(&knobs_text).unwrap(),
            settings.knobs
        );
        let defaults = serde_json::to_string(&Settings::default()).unwrap();
        assert!(!defaults.contains("abandoned_as"), "{defaults}");
        assert!(!defaults.contains("never_trips"), "{defaults}");
    }

    #[test]
    fn the_new_knobs_name_the_field_by_its_path_when_they_do_not_fit() {
        for (text, message) in [
            (
                r#"abandoned_as = { closed = "failed" }"#,
                r#"invalid `abandoned_as.closed` = "failed": unknown value, expected `exclusion` or `failure`"#,
            ),
            (
                r#"abandoned_as = { half_open = 1 }"#,
                r#"invalid `abandoned_as.half_open` = 1: expected a string, `exclusion` or `failure`"#,
            ),
            (
                r#"abandoned_as = { open = "failure" }"#,
                r#"invalid `abandoned_as.open` = "failure": unknown field, expected `closed` or `half_open`"#,
            ),
            (
                r#"abandoned_as = "failure""#,
                r#"invalid `abandoned_as` = "failure": expected a table (map) such as { closed = "failure", half_open = "exclusion" }"#,
            ),
            (
                r#"never_trips = "yes""#,
                r#"invalid `never_trips` = "yes": expected true or false"#,
            ),
        ] {
            let err = toml::from_str::<Settings>(text).unwrap_err();
            assert_eq!(err.message(), message, "{text}");
            let named =
                toml::from_str::<Settings>(&format!("name = \"orders\"\n{text}")).unwrap_err();
            assert_eq!(named.message(), format!("breaker `orders`: {message}"));
            let in_map = toml::from_str::<SettingsMap>(&format!("[search]\n{text}")).unwrap_err();
            assert_eq!(in_map.message(), format!("breaker `search`: {message}"));
        }
        // Knobs alone refuse what is not a knob, listing the knobs.
        let err = toml::from_str::<Knobs>(r#"policy = { kind = "ema" }"#).unwrap_err();
        assert!(
            err.message().ends_with(
                "unknown field, expected one of `name`, `max_requests`, `interval`, \
                 `bucket_period`, `count_window`, `timeout`, `max_open_duration`, `abandoned_as`, `never_trips`, \
                 `dry_run`, `verdict_at_latest`, `check_timeout`, `probe_timeout`, `backoff`, `jitter`, `jitter_seed`, `throttle`"
            ),
            "{}",
            err.message()
        );
    }
}
