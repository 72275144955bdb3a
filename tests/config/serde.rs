//! Configuration from files (`config`), and the serde forms of the value types.
#![cfg(feature = "serde")]

use std::collections::BTreeMap;
use std::time::Duration;

use lazybreaker::config::{self, DynBreaker, OpenDurationConfig, PolicyConfig, Settings};
use lazybreaker::policy::{ConsecutiveFailures, EmaConfig, FailureRatio, TripPolicy};
use lazybreaker::{Breaker, Builder, Counts, Knobs, ManualClock, Rejected, State, Totals};

fn toml_settings(text: &str) -> Settings {
    toml::from_str(text).unwrap_or_else(|e| panic!("{text}\n{e}"))
}

/// The breaker a TOML text of settings describes, on `clock`.
fn on_clock(text: &str, clock: &ManualClock) -> DynBreaker {
    toml_settings(text)
        .to_builder()
        .unwrap()
        .clock(clock.clone())
        .build()
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

// ---------------------------------------------------------------------------------------
// Durations

#[test]
fn durations_are_human_strings() {
    let s = toml_settings(
        r#"
        interval = "1m30s"
        bucket_period = "250ms"
        timeout = "10s"
        "#,
    );
    assert_eq!(s.knobs.interval, secs(90));
    assert_eq!(s.knobs.bucket_period, ms(250));
    assert_eq!(s.knobs.timeout, secs(10));

    for (text, expected) in [
        ("1m 30s", secs(90)),
        ("2h", secs(7200)),
        ("1s 500ms", ms(1500)),
        ("750us", Duration::from_micros(750)),
        ("0s", Duration::ZERO),
        ("0", Duration::ZERO),
    ] {
        let s = toml_settings(&format!("timeout = {text:?}"));
        assert_eq!(s.knobs.timeout, expected, "{text}");
    }
}

#[test]
fn durations_are_written_back_as_human_strings() {
    let settings = Settings {
        knobs: Knobs {
            name: "payments".into(),
            max_requests: 3,
            interval: secs(10),
            bucket_period: ms(250),
            timeout: secs(90),
            ..Knobs::default()
        },
        policy: PolicyConfig::FailureRatio {
            ratio: 0.5,
            min_requests: 20,
        },
        open_duration: OpenDurationConfig::Policy {},
    };
    assert_eq!(
        serde_json::to_string(&settings).unwrap(),
        concat!(
            r#"{"name":"payments","max_requests":3,"interval":"10s","bucket_period":"250ms","#,
            r#""timeout":"1m 30s","policy":{"kind":"failure_ratio","ratio":0.5,"min_requests":20}}"#
        )
    );
    let text = toml::to_string(&settings).unwrap();
    assert!(text.contains(r#"timeout = "1m 30s""#), "{text}");
    assert!(text.contains(r#"bucket_period = "250ms""#), "{text}");
    // An empty name is left out.
    let text = serde_json::to_string(&Settings::default()).unwrap();
    assert!(!text.contains("name"), "{text}");
}

// ---------------------------------------------------------------------------------------
// Round trips

fn ema_all_knobs() -> EmaConfig {
    // Every knob away from brpc's default, so a knob lost on the way shows.
    EmaConfig {
        short_window_size: 100,
        short_window_error_percent: 30,
        long_window_size: 400,
        long_window_error_percent: 15,
        min_error_cost: Duration::from_micros(750),
        max_failed_latency_multiple: 3,
        min_isolation: ms(250),
        max_isolation: secs(90),
        epsilon: 0.05,
        half_open_window_size: 4,
    }
}

/// One settings value per policy shape.
fn every_policy() -> Vec<(&'static str, PolicyConfig)> {
    use PolicyConfig::*;
    vec![
        ("consecutive", ConsecutiveFailures { threshold: 3 }),
        (
            "ratio",
            FailureRatio {
                ratio: 0.25,
                min_requests: 40,
            },
        ),
        (
            "count",
            FailureCount {
                failures: 5,
                min_requests: 20,
            },
        ),
        (
            "slow",
            SlowCalls {
                threshold: ms(1500),
                ratio: 0.5,
                min_requests: 10,
                probes_on_latency_alone: true,
            },
        ),
        ("ema default", Ema(EmaConfig::default())),
        ("ema all knobs", Ema(ema_all_knobs())),
        (
            "any_of one",
            AnyOf {
                policies: vec![ConsecutiveFailures { threshold: 2 }],
            },
        ),
        (
            "any_of flat",
            AnyOf {
                policies: vec![
                    ConsecutiveFailures { threshold: 20 },
                    FailureRatio {
                        ratio: 0.5,
                        min_requests: 10,
                    },
                    Ema(ema_all_knobs()),
                ],
            },
        ),
        (
            "any_of nested",
            AnyOf {
                policies: vec![
                    AnyOf {
                        policies: vec![
                            ConsecutiveFailures { threshold: 5 },
                            Ema(EmaConfig::default()),
                        ],
                    },
                    FailureRatio {
                        ratio: 1.0,
                        min_requests: 0,
                    },
                ],
            },
        ),
    ]
}

fn settings_with(name: &str, policy: PolicyConfig) -> Settings {
    Settings {
        knobs: Knobs {
            name: name.into(),
            max_requests: 2,
            interval: secs(60),
            bucket_period: secs(5),
            timeout: ms(1500),
            ..Knobs::default()
        },
        policy,
        open_duration: OpenDurationConfig::Policy {},
    }
}

#[test]
fn every_policy_round_trips_through_json_and_toml() {
    for (label, policy) in every_policy() {
        let settings = settings_with(label, policy);

        let json = serde_json::to_string(&settings).unwrap();
        let back: Settings = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{json}: {e}"));
        assert_eq!(back, settings, "{label}: {json}");

        let text = toml::to_string(&settings).unwrap();
        let back = toml_settings(&text);
        assert_eq!(back, settings, "{label}: {text}");
        // And once more from the text: parse → serialise → parse.
        assert_eq!(toml::to_string(&back).unwrap(), text, "{label}");

        Breaker::from_settings(&settings).unwrap_or_else(|e| panic!("{label}: {e}"));

        // With an exponential open duration too.
        let settings = Settings {
            open_duration: OpenDurationConfig::Exponential {
                initial: ms(500),
                max: secs(90),
            },
            ..settings
        };
        let text = toml::to_string(&settings).unwrap();
        assert!(
            text.contains(r#"initial = "500ms""#) && text.contains(r#"max = "1m 30s""#),
            "{text}"
        );
        assert_eq!(toml_settings(&text), settings, "{label}: {text}");
        let json = serde_json::to_string(&settings).unwrap();
        assert_eq!(serde_json::from_str::<Settings>(&json).unwrap(), settings);
        Breaker::from_settings(&settings).unwrap_or_else(|e| panic!("{label}: {e}"));
    }
}

#[test]
fn a_hand_written_file_round_trips() {
    let text = r#"
        name = "search"
        timeout = "1m30s"

        [policy]
        kind = "any_of"

        [[policy.policies]]
        kind = "consecutive_failures"
        threshold = 20

        [[policy.policies]]
        kind = "ema"
        short_window_size = 100
        min_isolation = "250ms"
        max_isolation = "1m"

        [[policy.policies]]
        kind = "any_of"
        policies = [{ kind = "failure_ratio", ratio = 0.5, min_requests = 10 }]
    "#;
    let parsed = toml_settings(text);
    let expected = Settings {
        knobs: Knobs {
            name: "search".into(),
            timeout: secs(90),
            ..Knobs::default()
        },
        policy: PolicyConfig::AnyOf {
            policies: vec![
                PolicyConfig::ConsecutiveFailures { threshold: 20 },
                PolicyConfig::Ema(EmaConfig {
                    short_window_size: 100,
                    min_isolation: ms(250),
                    max_isolation: secs(60),
                    ..EmaConfig::default()
                }),
                PolicyConfig::AnyOf {
                    policies: vec![PolicyConfig::FailureRatio {
                        ratio: 0.5,
                        min_requests: 10,
                    }],
                },
            ],
        },
        ..Settings::default()
    };
    assert_eq!(parsed, expected);
    let again = toml_settings(&toml::to_string(&parsed).unwrap());
    assert_eq!(again, parsed);
    let again: Settings = serde_json::from_str(&serde_json::to_string(&parsed).unwrap()).unwrap();
    assert_eq!(again, parsed);
}

#[test]
fn policies_made_in_code_convert_to_their_config() {
    assert_eq!(
        PolicyConfig::from(ConsecutiveFailures::new(4).unwrap()),
        PolicyConfig::ConsecutiveFailures { threshold: 4 }
    );
    assert_eq!(
        PolicyConfig::from(FailureRatio::new(0.3, 7).unwrap()),
        PolicyConfig::FailureRatio {
            ratio: 0.3,
            min_requests: 7
        }
    );
    assert_eq!(
        PolicyConfig::from(ema_all_knobs()),
        PolicyConfig::Ema(ema_all_knobs())
    );
}

// ---------------------------------------------------------------------------------------
// Defaults

/// Drives a breaker through a script that every knob changes the outcome of, and records
/// what it sees: the same trace means the same configuration, as far as behaviour goes.
fn trace<P: TripPolicy>(builder: impl FnOnce(ManualClock) -> Breaker<P>) -> Vec<String> {
    let clock = ManualClock::new();
    let breaker = builder(clock.clone());
    let mut out = Vec::new();
    let line = |what: &str, b: &Breaker<P>| format!("{what}: {:?} {:?}", b.state(), b.counts());
    // Failures, one per 100 ms, until the breaker opens (or 12 of them).
    for i in 0..12 {
        let _ = breaker.execute(|| Err::<(), _>("boom"));
        out.push(line(&format!("failure {i}"), &breaker));
        clock.advance(ms(100));
    }
    // Wait, a second at a time, until it admits probes (or two minutes).
    for s in 0..120 {
        out.push(line(&format!("t+{s}s"), &breaker));
        clock.advance(secs(1));
    }
    // How many probes it admits at once.
    let permits: Vec<_> = (0..4).map_while(|_| breaker.allow().ok()).collect();
    out.push(format!("probes admitted: {}", permits.len()));
    for p in permits {
        p.success();
    }
    out.push(line("after the probes", &breaker));
    // Failures spread over a long time: does the window ever clear them?
    for i in 0..3 {
        let _ = breaker.execute(|| Err::<(), _>("boom"));
        clock.advance(secs(3));
        out.push(line(&format!("late failure {i}"), &breaker));
    }
    clock.advance(secs(3600));
    out.push(line("an hour later", &breaker));
    out
}

fn trace_settings(settings: &Settings) -> Vec<String> {
    trace(|clock| settings.to_builder().unwrap().clock(clock).build())
}

fn trace_builder<P: TripPolicy>(builder: Builder<P>) -> Vec<String> {
    trace(|clock| builder.clock(clock).build())
}

#[test]
fn omitted_fields_take_the_builders_defaults() {
    let expected = trace_builder(Breaker::builder());
    // The trace sees the default breaker trip and recover.
    assert!(expected.iter().any(|l| l.contains("Open")));
    assert!(expected.iter().any(|l| l.contains("HalfOpen")));

    assert_eq!(toml_settings(""), Settings::default());
    assert_eq!(
        serde_json::from_str::<Settings>("{}").unwrap(),
        Settings::default()
    );
    assert_eq!(trace_settings(&toml_settings("")), expected);
    assert_eq!(
        trace(|clock| {
            Settings::default()
                .to_builder()
                .unwrap()
                .clock(clock)
                .build()
        }),
        expected
    );

    // The trace notices each knob, so the equality above says something.
    for changed in [
        r#"max_requests = 2"#,
        r#"interval = "2s""#,
        r#"interval = "4s"
           bucket_period = "1s""#,
        r#"timeout = "30s""#,
        r#"policy = { kind = "consecutive_failures", threshold = 5 }"#,
    ] {
        assert_ne!(
            trace_settings(&toml_settings(changed)),
            expected,
            "{changed}"
        );
    }
}

#[test]
fn settings_build_the_breaker_the_builder_builds() {
    let settings = toml_settings(
        r#"
        max_requests = 2
        interval = "4s"
        bucket_period = "1s"
        timeout = "30s"
        policy = { kind = "failure_ratio", ratio = 0.5, min_requests = 3 }
        "#,
    );
    let by_hand = Breaker::builder()
        .max_requests(2)
        .interval(secs(4))
        .bucket_period(secs(1))
        .timeout(secs(30))
        .policy(FailureRatio::new(0.5, 3).unwrap());
    assert_eq!(trace_settings(&settings), trace_builder(by_hand));
}

#[test]
fn omitted_policy_parameters_take_the_policies_defaults() {
    assert_eq!(
        PolicyConfig::default(),
        PolicyConfig::from(ConsecutiveFailures::default())
    );
    assert_eq!(
        toml_settings("policy = { kind = \"consecutive_failures\" }").policy,
        PolicyConfig::from(ConsecutiveFailures::default())
    );
    assert_eq!(
        toml_settings("policy = { kind = \"ema\" }").policy,
        PolicyConfig::Ema(EmaConfig::default())
    );
    assert_eq!(
        toml_settings("policy = { kind = \"ema\", epsilon = 0.1, max_isolation = \"5s\" }").policy,
        PolicyConfig::Ema(EmaConfig {
            epsilon: 0.1,
            max_isolation: secs(5),
            ..EmaConfig::default()
        })
    );
}

// ---------------------------------------------------------------------------------------
// Bad values: a `ConfigError` naming the breaker, the field's path and the value

#[test]
fn bad_values_name_the_breaker_the_field_and_the_value() {
    // (the table's body, the field's path, the value as reported)
    let table: &[(&str, &str, &str)] = &[
        (
            r#"policy = { kind = "failure_ratio", ratio = 1.5, min_requests = 10 }"#,
            "policy.ratio",
            "1.5",
        ),
        (
            r#"policy = { kind = "failure_ratio", ratio = -0.25, min_requests = 10 }"#,
            "policy.ratio",
            "-0.25",
        ),
        (
            r#"policy = { kind = "failure_ratio", ratio = nan, min_requests = 10 }"#,
            "policy.ratio",
            "NaN",
        ),
        (
            r#"policy = { kind = "failure_ratio", ratio = inf, min_requests = 10 }"#,
            "policy.ratio",
            "inf",
        ),
        (
            r#"policy = { kind = "consecutive_failures", threshold = 0 }"#,
            "policy.threshold",
            "0",
        ),
        (
            r#"open_duration = { kind = "exponential", initial = "2m", max = "1m" }"#,
            "open_duration.initial",
            "120s",
        ),
        (
            r#"open_duration = { kind = "exponential", initial = "0s", max = "1m" }"#,
            "open_duration.initial",
            "0ns",
        ),
        (
            r#"policy = { kind = "ema", short_window_size = 0 }"#,
            "policy.short_window_size",
            "0",
        ),
        (
            r#"policy = { kind = "ema", long_window_size = 0 }"#,
            "policy.long_window_size",
            "0",
        ),
        (
            r#"policy = { kind = "ema", short_window_error_percent = 100 }"#,
            "policy.short_window_error_percent",
            "100",
        ),
        (
            r#"policy = { kind = "ema", long_window_error_percent = 250 }"#,
            "policy.long_window_error_percent",
            "250",
        ),
        (
            r#"policy = { kind = "ema", min_isolation = "1m", max_isolation = "30s" }"#,
            "policy.min_isolation",
            "60s",
        ),
        (
            r#"policy = { kind = "ema", epsilon = 0.0 }"#,
            "policy.epsilon",
            "0",
        ),
        (
            r#"policy = { kind = "ema", epsilon = 1.0 }"#,
            "policy.epsilon",
            "1",
        ),
        (r#"bucket_period = "1s""#, "bucket_period", "1s"),
        (
            r#"interval = "10s"
               bucket_period = "20s""#,
            "bucket_period",
            "20s",
        ),
        (
            r#"interval = "10s"
               bucket_period = "3s""#,
            "bucket_period",
            "3s",
        ),
        (
            r#"interval = "2s"
               bucket_period = "1ms""#,
            "bucket_period",
            "1ms",
        ),
        (
            r#"policy = { kind = "any_of", policies = [] }"#,
            "policy.policies",
            "[]",
        ),
        (
            r#"policy = { kind = "any_of", policies = [
                 { kind = "consecutive_failures", threshold = 0 },
               ] }"#,
            "policy.policies[0].threshold",
            "0",
        ),
        (
            r#"policy = { kind = "any_of", policies = [
                 { kind = "consecutive_failures", threshold = 3 },
                 { kind = "failure_ratio", ratio = 2.0, min_requests = 10 },
               ] }"#,
            "policy.policies[1].ratio",
            "2",
        ),
        (
            r#"policy = { kind = "any_of", policies = [
                 { kind = "consecutive_failures", threshold = 3 },
                 { kind = "any_of", policies = [{ kind = "ema", epsilon = 1.5 }] },
               ] }"#,
            "policy.policies[1].policies[0].epsilon",
            "1.5",
        ),
    ];
    assert!(table.len() >= 15);
    for &(body, field, value) in table {
        // Named in the settings.
        let settings = toml_settings(&format!("name = \"orders\"\n{body}"));
        let err = Breaker::from_settings(&settings).expect_err(body);
        assert_eq!(err.breaker(), Some("orders"), "{body}");
        assert_eq!(err.field(), field, "{body}");
        assert_eq!(err.value(), value, "{body}");
        assert_eq!(
            err.to_string(),
            format!(
                "breaker `orders`: invalid `{field}` = {value}: {}",
                err.reason()
            ),
        );
        // The same check behind every entry point.
        assert_eq!(settings.validate().unwrap_err(), err, "{body}");
        assert_eq!(settings.to_builder().err(), Some(err.clone()), "{body}");

        // Named by its key in a file of several breakers.
        let file = format!("[fine]\n[orders]\n{body}\n[zzz]\n");
        let map: BTreeMap<String, Settings> = toml::from_str(&file).unwrap();
        let err2 = config::build_all(&map).map(drop).unwrap_err();
        assert_eq!(err2, err, "{body}");
        let as_map: config::SettingsMap = toml::from_str(&file).unwrap();
        assert_eq!(
            config::build_all(&as_map).map(drop).unwrap_err(),
            err,
            "{body}"
        );

        // Without a name, no breaker is named.
        let unnamed = toml_settings(body);
        let err3 = Breaker::from_settings(&unnamed).expect_err(body);
        assert_eq!((err3.breaker(), err3.field()), (None, field), "{body}");
        assert_eq!(
            err3.to_string(),
            format!("invalid `{field}` = {value}: {}", err.reason())
        );
    }
}

#[test]
fn the_message_says_which_breaker_which_field_and_why() {
    let settings = toml_settings(
        r#"
        name = "payments"
        policy = { kind = "failure_ratio", ratio = 1.5, min_requests = 10 }
        "#,
    );
    let err = Breaker::from_settings(&settings).unwrap_err();
    assert_eq!(
        err.to_string(),
        "breaker `payments`: invalid `policy.ratio` = 1.5: must be within [0, 1]"
    );
    let map: BTreeMap<String, Settings> = toml::from_str(
        r#"
        [search.policy]
        kind = "any_of"
        [[search.policy.policies]]
        kind = "ema"
        min_isolation = "2m"
        "#,
    )
    .unwrap();
    assert_eq!(
        config::build_all(&map).map(drop).unwrap_err().to_string(),
        "breaker `search`: invalid `policy.policies[0].min_isolation` = 120s: \
         must not exceed `max_isolation`"
    );
}

#[test]
fn direct_constructors_keep_their_plain_field_names() {
    let err = FailureRatio::new(1.5, 1).unwrap_err();
    assert_eq!((err.field(), err.breaker()), ("ratio", None));
    let err = EmaConfig {
        min_isolation: secs(60),
        ..EmaConfig::default()
    }
    .validate()
    .unwrap_err();
    assert_eq!((err.field(), err.breaker()), ("min_isolation", None));
    let err = PolicyConfig::FailureRatio {
        ratio: 1.5,
        min_requests: 1,
    }
    .build()
    .map(drop)
    .unwrap_err();
    assert_eq!(err.field(), "ratio");
}

// ---------------------------------------------------------------------------------------
// Bad shapes: reported while parsing, naming the field by its path
// (tests/config_errors.rs has the full table)

#[test]
fn typos_and_wrong_types_are_reported_while_parsing_with_the_field() {
    // (TOML of one breaker, the field's path, what the message must say)
    let table: &[(&str, &str, &[&str])] = &[
        (
            r#"intervall = "10s""#,
            "intervall",
            &["unknown field, expected one of `name`", "`interval`"],
        ),
        (r#"max_request = 3"#, "max_request", &["unknown field"]),
        (
            r#"policy = { kind = "failure_ratio", ratoi = 0.5, min_requests = 1 }"#,
            "policy.ratoi",
            &["unknown field, expected one of", "`ratio`"],
        ),
        (
            r#"policy = { kind = "ema", min_isolation_ms = 100 }"#,
            "policy.min_isolation_ms",
            &["unknown field, expected one of", "`min_isolation`"],
        ),
        (
            r#"policy = { kind = "any_of", policies = [{ kind = "consecutive_failures", treshold = 3 }] }"#,
            "policy.policies[0].treshold",
            &["unknown field, expected `kind` or `threshold`"],
        ),
        (
            r#"policy = { kind = "ratio", ratio = 0.5 }"#,
            "policy.kind",
            &[
                r#"= "ratio": unknown kind, expected one of"#,
                "`failure_ratio`",
            ],
        ),
        (
            r#"policy = { threshold = 3 }"#,
            "policy.kind",
            &["= (missing): required, one of `consecutive_failures`"],
        ),
        (
            r#"open_duration = { kind = "policy", max = "1m" }"#,
            "open_duration.max",
            &["unknown field, expected only `kind`"],
        ),
        (
            r#"open_duration = { kind = "exponential", initial = "1s", maximum = "1m" }"#,
            "open_duration.maximum",
            &["unknown field, expected one of", "`max`"],
        ),
        (
            r#"policy = { kind = "failure_ratio", ratio = 0.5 }"#,
            "policy.min_requests",
            &["= (missing): required for kind `failure_ratio`"],
        ),
        (
            r#"timeout = "10x""#,
            "timeout",
            &[r#"= "10x": unknown time unit"#],
        ),
        (
            r#"interval = 10"#,
            "interval",
            &[r#"= 10: expected a duration string such as "250ms""#],
        ),
        (
            r#"policy = { kind = "ema", max_isolation = "" }"#,
            "policy.max_isolation",
            &[
                r#"= "": expected a duration such as"#,
                "not an empty string",
            ],
        ),
        (
            r#"max_requests = -1"#,
            "max_requests",
            &["= -1: expected a non-negative integer"],
        ),
        (
            r#"max_requests = "3""#,
            "max_requests",
            &[r#"= "3": expected a non-negative integer"#],
        ),
        (
            r#"policy = { kind = "consecutive_failures", threshold = 2.5 }"#,
            "policy.threshold",
            &["= 2.5: expected a non-negative integer"],
        ),
    ];
    for &(text, field, needles) in table {
        let err = toml::from_str::<Settings>(text).expect_err(text);
        let message = err.message();
        assert!(
            message.starts_with(&format!("invalid `{field}` = ")),
            "{text}: {message}"
        );
        for needle in needles {
            assert!(
                message.contains(needle),
                "{text}: `{needle}` not in\n{message}"
            );
        }
        // Named, the breaker is named too, and the rest of the message is the same.
        let named =
            toml::from_str::<Settings>(&format!("name = \"orders\"\n{text}")).expect_err(text);
        assert_eq!(named.message(), format!("breaker `orders`: {message}"));
    }
}

#[test]
fn json_reports_the_same_shape_errors() {
    for (json, message) in [
        (
            r#"{"intervall": "10s"}"#,
            r#"invalid `intervall` = "10s": unknown field, expected one of `name`, `max_requests`, `interval`, `bucket_period`, `count_window`, `timeout`, `max_open_duration`, `abandoned_as`, `never_trips`, `dry_run`, `verdict_at_latest`, `check_timeout`, `probe_timeout`, `backoff`, `jitter`, `jitter_seed`, `throttle`, `policy`, `open_duration`"#,
        ),
        (
            r#"{"name": "search", "policy": {"kind": "ema", "epsilonn": 0.1}}"#,
            "breaker `search`: invalid `policy.epsilonn` = 0.1: unknown field, expected one of \
             `kind`, `short_window_size`, `short_window_error_percent`, `long_window_size`, \
             `long_window_error_percent`, `min_error_cost`, `max_failed_latency_multiple`, \
             `min_isolation`, `max_isolation`, `epsilon`, `half_open_window_size`",
        ),
        (
            r#"{"timeout": "ten seconds"}"#,
            r#"invalid `timeout` = "ten seconds": expected a duration such as "250ms", "10s" or "1m30s""#,
        ),
        (
            r#"{"policy": {"kind": "none"}}"#,
            r#"invalid `policy.kind` = "none": unknown kind, expected one of `consecutive_failures`, `failure_ratio`, `failure_count`, `slow_calls`, `ema`, `any_of`"#,
        ),
    ] {
        let err = serde_json::from_str::<Settings>(json).expect_err(json);
        assert_eq!(err.to_string(), message, "{json}");
    }
}

#[test]
fn a_typo_in_a_file_of_breakers_points_at_its_table() {
    let file = "[payments]\ntimeout = \"30s\"\n\n[search]\nintervall = \"10s\"\n";
    // A plain map: toml points at the entry; its settings cannot know their key.
    let err = toml::from_str::<BTreeMap<String, Settings>>(file).unwrap_err();
    assert_eq!(err.span().map(|s| &file[s]), Some("[search]"));
    let text = err.to_string();
    assert!(text.contains("line 4"), "{text}");
    assert!(
        err.message()
            .starts_with("invalid `intervall` = \"10s\": unknown field, expected one of"),
        "{text}"
    );
    // `SettingsMap`: the same place, and the entry's key names the breaker.
    let err = toml::from_str::<config::SettingsMap>(file).unwrap_err();
    assert_eq!(err.span().map(|s| &file[s]), Some("[search]"));
    assert!(
        err.message().starts_with(
            "breaker `search`: invalid `intervall` = \"10s\": unknown field, expected one of"
        ),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------
// The breakers settings build

#[test]
fn a_map_names_its_breakers_by_key_unless_they_have_a_name() {
    let map: BTreeMap<String, Settings> = toml::from_str(
        r#"
        inventory = {}
        payments = { name = "payments-eu", policy = { kind = "consecutive_failures", threshold = 0 } }
        "#,
    )
    .unwrap();
    let err = config::build_all(&map).map(drop).unwrap_err();
    assert_eq!(err.breaker(), Some("payments-eu"));

    let mut map = map;
    map.get_mut("payments").unwrap().policy = PolicyConfig::default();
    let breakers = config::build_all(&map).unwrap();
    let names: Vec<_> = breakers
        .iter()
        .map(|(k, b)| (k.as_str(), b.name()))
        .collect();
    assert_eq!(
        names,
        [("inventory", "inventory"), ("payments", "payments-eu")]
    );
    // An owned map works too, and so does any iterator of pairs.
    let owned = config::build_all(map.clone()).unwrap();
    assert_eq!(owned.len(), 2);
    let pairs = config::build_all(vec![("a", Settings::default())]).unwrap();
    assert_eq!(pairs[0].1.name(), "a");
}

#[test]
fn a_file_of_breakers_round_trips_and_builds() {
    let text = r#"
        [payments]
        timeout = "30s"
        policy = { kind = "failure_ratio", ratio = 0.5, min_requests = 20 }

        [search]
        name = "search-eu"
        open_duration = { kind = "exponential", initial = "1s", max = "1m" }

        [search.policy]
        kind = "ema"
        min_isolation = "250ms"
    "#;
    let breakers: config::SettingsMap = toml::from_str(text).unwrap();
    let map: BTreeMap<String, Settings> = toml::from_str(text).unwrap();
    assert_eq!(*breakers, map);
    assert_eq!(breakers.len(), 2);
    assert_eq!(breakers.get("payments").unwrap().knobs.timeout, secs(30));
    // Written back as the plain map writes, and read back the same.
    assert_eq!(
        toml::to_string(&breakers).unwrap(),
        toml::to_string(&map).unwrap()
    );
    let json = serde_json::to_string(&breakers).unwrap();
    assert_eq!(json, serde_json::to_string(&map).unwrap());
    assert_eq!(
        serde_json::from_str::<config::SettingsMap>(&json).unwrap(),
        breakers
    );
    let again: config::SettingsMap = toml::from_str(&toml::to_string(&breakers).unwrap()).unwrap();
    assert_eq!(again, breakers);

    let built = config::build_all(&breakers).unwrap();
    let names: Vec<_> = built.iter().map(|(k, b)| (k.as_str(), b.name())).collect();
    assert_eq!(names, [("payments", "payments"), ("search", "search-eu")]);
    assert_eq!(config::build_all(breakers.iter()).unwrap().len(), 2);
    let owned: BTreeMap<String, Settings> = breakers.clone().into();
    assert_eq!(owned, map);
    let mut collected: config::SettingsMap = breakers.clone().into_iter().collect();
    collected.insert("extra".into(), Settings::default());
    assert_eq!(collected.len(), 3);
    assert!(config::SettingsMap::default().is_empty());
}

#[test]
fn a_ratio_from_settings_trips_at_its_ratio() {
    let breaker = Breaker::from_settings(&toml_settings(
        r#"policy = { kind = "failure_ratio", ratio = 0.5, min_requests = 4 }"#,
    ))
    .unwrap();
    for _ in 0..3 {
        let _ = breaker.execute(|| Err::<(), _>("boom"));
    }
    assert_eq!(breaker.state(), State::Closed, "below min_requests");
    let _ = breaker.execute(|| Err::<(), _>("boom"));
    assert_eq!(breaker.state(), State::Open);
}

#[test]
fn the_timeout_from_settings_is_the_open_duration() {
    let clock = ManualClock::new();
    let breaker = on_clock(
        r#"
        timeout = "1m30s"
        policy = { kind = "consecutive_failures", threshold = 1 }
        "#,
        &clock,
    );
    let _ = breaker.execute(|| Err::<(), _>("boom"));
    clock.advance(secs(90));
    assert_eq!(breaker.state(), State::Open);
    clock.advance(Duration::from_nanos(1));
    assert_eq!(breaker.state(), State::HalfOpen);
}

#[test]
fn an_exponential_open_duration_doubles_on_failed_recoveries() {
    let clock = ManualClock::new();
    let breaker = on_clock(
        r#"
        timeout = "1h"
        policy = { kind = "consecutive_failures", threshold = 1 }
        open_duration = { kind = "exponential", initial = "1s", max = "3s" }
        "#,
        &clock,
    );
    let _ = breaker.execute(|| Err::<(), _>("boom"));
    for open_for in [secs(1), secs(2), secs(3), secs(3)] {
        assert_eq!(breaker.state(), State::Open);
        clock.advance(open_for);
        assert_eq!(breaker.state(), State::Open, "{open_for:?}");
        clock.advance(Duration::from_nanos(1));
        assert_eq!(breaker.state(), State::HalfOpen, "{open_for:?}");
        let _ = breaker.execute(|| Err::<(), _>("still down"));
    }
    // Recovered: the next trip opens for `initial` again.
    clock.advance(secs(3) + Duration::from_nanos(1));
    breaker.execute(|| Ok::<_, ()>(())).unwrap();
    assert_eq!(breaker.state(), State::Closed);
    let _ = breaker.execute(|| Err::<(), _>("boom"));
    clock.advance(secs(1) + Duration::from_nanos(1));
    assert_eq!(breaker.state(), State::HalfOpen);
}

#[test]
fn ema_from_settings_opens_for_its_isolation_not_the_timeout() {
    let clock = ManualClock::new();
    let breaker = on_clock(
        r#"
        timeout = "1h"
        [policy]
        kind = "ema"
        short_window_size = 10
        short_window_error_percent = 20
        long_window_size = 20
        long_window_error_percent = 10
        min_isolation = "250ms"
        "#,
        &clock,
    );
    // As in `Ema`'s documentation: the third failure during the first samples breaks it.
    for _ in 0..3 {
        let permit = breaker.allow().unwrap();
        clock.advance(ms(2));
        permit.failure();
    }
    assert_eq!(breaker.state(), State::Open);
    clock.advance(ms(250));
    assert_eq!(breaker.state(), State::Open);
    clock.advance(Duration::from_nanos(1));
    assert_eq!(breaker.state(), State::HalfOpen);
}

#[test]
fn any_of_from_settings_trips_on_any_member() {
    let text = |first: u64| {
        format!(
            r#"policy = {{ kind = "any_of", policies = [
                {{ kind = "consecutive_failures", threshold = {first} }},
                {{ kind = "failure_ratio", ratio = 0.5, min_requests = 4 }},
            ] }}"#
        )
    };
    // The first member trips.
    let breaker = Breaker::from_settings(&toml_settings(&text(2))).unwrap();
    for _ in 0..2 {
        let _ = breaker.execute(|| Err::<(), _>("boom"));
    }
    assert_eq!(breaker.state(), State::Open);
    // The second member trips: 2 failures of 4 requests, never 2 in a row.
    let breaker = Breaker::from_settings(&toml_settings(&text(100))).unwrap();
    for ok in [false, true, true] {
        let _ = breaker.execute(|| if ok { Ok(()) } else { Err("boom") });
    }
    assert_eq!(breaker.state(), State::Closed);
    let _ = breaker.execute(|| Err::<(), _>("boom"));
    assert_eq!(breaker.state(), State::Open);
}

// ---------------------------------------------------------------------------------------
// Snapshots of the value types

#[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
struct Snapshot {
    state: State,
    counts: Counts,
    totals: Totals,
}

fn snapshot<P: TripPolicy>(b: &Breaker<P>) -> Snapshot {
    Snapshot {
        state: b.state(),
        counts: b.counts(),
        totals: b.totals(),
    }
}

#[test]
fn a_snapshot_exports_as_json() {
    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .policy(ConsecutiveFailures::new(2).unwrap())
        .timeout(secs(10))
        .clock(clock.clone())
        .build();
    let _ = breaker.execute(|| Ok::<_, &str>(()));
    let _ = breaker.execute(|| Ok::<_, &str>(()));
    let _ = breaker.execute(|| Err::<(), _>("boom"));
    breaker.allow().unwrap().exclude();
    let closed = snapshot(&breaker);
    assert_eq!(
        serde_json::to_string(&closed).unwrap(),
        concat!(
            r#"{"state":"closed","#,
            r#""counts":{"requests":4,"total_successes":2,"total_failures":1,"total_exclusions":1,"#,
            r#""consecutive_successes":0,"consecutive_failures":1,"slow_calls":0,"throttled":0},"#,
            r#""totals":{"admitted":4,"successes":2,"failures":1,"exclusions":1,"dropped":0,"opened":0,"abandoned":0,"#,
            r#""rejected_open":0,"rejected_half_open":0,"rejected_forced":0,"health_checks":0,"health_checks_failed":0,"would_reject":0,"probes_taken_over":0,"rejected_throttled":0,"#,
            r#""retries":0,"retries_budget_denied":0,"retries_exhausted":0,"retries_throttled":0}}"#
        )
    );
    let back: Snapshot = serde_json::from_str(&serde_json::to_string(&closed).unwrap()).unwrap();
    assert_eq!(back, closed);

    // The second failure in a row trips it: a new generation, counts cleared.
    let _ = breaker.execute(|| Err::<(), _>("boom"));
    assert!(matches!(breaker.allow(), Err(Rejected::Open { .. })));
    assert_eq!(
        serde_json::to_string(&snapshot(&breaker)).unwrap(),
        concat!(
            r#"{"state":"open","#,
            r#""counts":{"requests":0,"total_successes":0,"total_failures":0,"total_exclusions":0,"#,
            r#""consecutive_successes":0,"consecutive_failures":0,"slow_calls":0,"throttled":0},"#,
            r#""totals":{"admitted":5,"successes":2,"failures":2,"exclusions":1,"dropped":0,"opened":1,"abandoned":0,"#,
            r#""rejected_open":1,"rejected_half_open":0,"rejected_forced":0,"health_checks":0,"health_checks_failed":0,"would_reject":0,"probes_taken_over":0,"rejected_throttled":0,"#,
            r#""retries":0,"retries_budget_denied":0,"retries_exhausted":0,"retries_throttled":0}}"#
        )
    );
    clock.advance(secs(11));
    assert_eq!(
        serde_json::to_string(&breaker.state()).unwrap(),
        r#""half-open""#
    );
}

/// `Breaker::snapshot` serializes whole: durations as in configuration files.
#[test]
fn the_breakers_own_snapshot_serializes() {
    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .name("payments")
        .policy(ConsecutiveFailures::new(1).unwrap())
        .timeout(secs(10))
        .clock(clock.clone())
        .build();
    let _ = breaker.execute(|| Err::<(), _>("boom"));
    clock.advance(secs(4));
    let json: serde_json::Value = serde_json::to_value(breaker.snapshot()).unwrap();
    assert_eq!(json["name"], "payments");
    assert_eq!(json["state"], "open");
    assert_eq!(json["at"], "4s");
    assert_eq!(
        json["retry_after"], "6s",
        "the open period's rest, 10 s - 4 s"
    );
    assert_eq!(json["forced"], serde_json::Value::Null);
    assert_eq!(json["times_opened"], 1);
    assert_eq!(json["recent_failures"], 1);
    assert_eq!(json["totals"]["failures"], 1);
    assert_eq!(json["policy"], serde_json::json!({}));
}

/// A snapshot's `retry_after` is the open period's rest, as configured: `"500ms"` at the
/// trip, not `"500ms 1ns"` (the nanosecond by which the strict expiry outlasts the period).
#[test]
fn a_snapshots_retry_after_is_the_configured_open_period() {
    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .name("payments")
        .policy(ConsecutiveFailures::new(1).unwrap())
        .timeout(Duration::from_millis(500))
        .clock(clock.clone())
        .build();
    clock.advance(secs(3));
    let _ = breaker.execute(|| Err::<(), _>("boom"));
    let json: serde_json::Value = serde_json::to_value(breaker.snapshot()).unwrap();
    assert_eq!(json["state"], "open");
    assert_eq!(json["retry_after"], "500ms");
    clock.advance(Duration::from_millis(200));
    let json: serde_json::Value = serde_json::to_value(breaker.snapshot()).unwrap();
    assert_eq!(json["retry_after"], "300ms");
    clock.advance(Duration::from_millis(300));
    let json: serde_json::Value = serde_json::to_value(breaker.snapshot()).unwrap();
    assert_eq!(json["state"], "open", "the open period's last instant");
    assert_eq!(json["retry_after"], "1ns");
    clock.advance(Duration::from_nanos(1));
    let json: serde_json::Value = serde_json::to_value(breaker.snapshot()).unwrap();
    assert_eq!(json["state"], "half-open");
    assert_eq!(json["retry_after"], serde_json::Value::Null);
}

/// Walks a JSON report and fails on a duration written against the rule of every JSON the
/// crates emit (`docs/integrations.md`, "Durations in JSON"): a field in another unit
/// (`_ns`, `_us`, `_s`, ...); a duration string (exact, as humantime writes it) without its
/// whole milliseconds beside it under `x_ms`, or with other milliseconds than the rounding
/// (`waits` up, any other to the nearest); an `x_ms` that is not an integer, or without `x`
/// beside it. `policy` holds the policy's figures by their metrics' names and is left out.
/// Returns the durations seen, by name, and whether each was set.
fn check_durations(value: &serde_json::Value, at: &str, waits: &[&str]) -> Vec<(String, bool)> {
    use serde_json::Value;
    let mut seen = Vec::new();
    match value {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                seen.extend(check_durations(item, &format!("{at}[{i}]"), waits));
            }
        }
        Value::Object(fields) => {
            for (key, field) in fields {
                let path = format!("{at}.{key}");
                for unit in ["_ns", "_nanos", "_us", "_micros", "_s", "_secs", "_seconds"] {
                    assert!(!key.ends_with(unit), "{path}: a duration in another unit");
                }
                if key == "policy" {
                    continue;
                }
                if let Some(base) = key.strip_suffix("_ms") {
                    let duration = fields.get(base);
                    assert!(
                        duration.is_some_and(|d| d.is_null() || d.is_string()),
                        "{path} without a duration string `{base}` beside it"
                    );
                    assert!(field.is_null() || field.is_u64(), "{path} = {field}");
                    continue;
                }
                let Value::String(text) = field else {
                    if field.is_null() && fields.contains_key(&format!("{key}_ms")) {
                        assert!(fields[&format!("{key}_ms")].is_null(), "{path}_ms");
                        seen.push((key.clone(), false));
                    } else {
                        seen.extend(check_durations(field, &path, waits));
                    }
                    continue;
                };
                let Ok(d) = humantime::parse_duration(text) else {
                    continue; // not a duration: a name, a state, an origin
                };
                let nanos = d.as_nanos();
                let expected = if waits.contains(&key.as_str()) {
                    nanos.div_ceil(1_000_000)
                } else {
                    (nanos + 500_000) / 1_000_000
                };
                let ms = fields.get(&format!("{key}_ms"));
                assert_eq!(
                    ms.and_then(serde_json::Value::as_u64).map(u128::from),
                    Some(expected),
                    "{path} = {text:?}: its `{key}_ms`"
                );
                seen.push((key.clone(), true));
            }
        }
        _ => {}
    }
    seen
}

/// A snapshot and a recorded change serialize as structs, every field known up front, so a
/// format that needs that (postcard: no map of unknown length) takes them; and what it
/// writes reads back as the same fields (a view of them, postcard being positional): the
/// name, then the time taken exact and in whole milliseconds.
#[test]
fn reports_serialize_as_structs_in_formats_that_need_their_length() {
    use lazybreaker::observe::History;
    use std::sync::Arc;

    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Head {
        name: String,
        at: Option<String>,
        at_ms: Option<u64>,
    }
    let clock = ManualClock::new();
    let history = Arc::new(History::new(8));
    let breaker = Breaker::builder()
        .name("bytes")
        .policy(ConsecutiveFailures::new(1).unwrap())
        .clock(clock.clone())
        .observer(Arc::clone(&history))
        .build();
    clock.advance(Duration::from_millis(1_500));
    let _ = breaker.execute(|| Err::<(), _>("down"));
    let bytes = postcard::to_allocvec(&breaker.snapshot()).expect("a snapshot as postcard");
    let (head, _rest): (Head, _) = postcard::take_from_bytes(&bytes).expect("its head back");
    assert_eq!(
        head,
        Head {
            name: "bytes".into(),
            at: Some("1s 500ms".into()),
            at_ms: Some(1_500),
        }
    );
    let recent = history.recent();
    assert_eq!(recent.len(), 1, "the trip");
    postcard::to_allocvec(&recent).expect("the history as postcard");
}

/// A snapshot and the history's changes write each duration by the rule of every JSON the
/// crates emit: `x` exact, `x_ms` beside it in whole milliseconds (a wait rounded up, any
/// other duration to the nearest). Odd nanoseconds, to see the rounding.
#[test]
fn every_duration_of_a_report_has_its_whole_milliseconds_beside_it() {
    use lazybreaker::observe::History;
    use std::sync::Arc;

    let clock = ManualClock::new();
    let history = Arc::new(History::new(8));
    let breaker = Breaker::builder()
        .name("odd")
        .policy(ConsecutiveFailures::new(1).unwrap())
        .timeout(secs(1))
        .clock(clock.clone())
        .observer(Arc::clone(&history))
        .build();
    // Tripped at 2.5 ms for 1 s, read 400.000001 ms later: `at` 402.500001 ms (403 to the
    // nearest), 599.999999 ms left to wait (600, rounded up).
    clock.advance(Duration::from_micros(2_500));
    let _ = breaker.execute(|| Err::<(), _>("down"));
    clock.advance(Duration::from_nanos(400_000_001));
    let json = serde_json::to_value(breaker.snapshot()).unwrap();
    let seen = check_durations(&json, "snapshot", &["retry_after"]);
    assert_eq!(seen, [("at".into(), true), ("retry_after".into(), true)]);
    assert_eq!(
        (&json["at"], &json["at_ms"]),
        (&"402ms 500us 1ns".into(), &403.into())
    );
    assert_eq!(
        (&json["retry_after"], &json["retry_after_ms"]),
        (&"599ms 999us 999ns".into(), &600.into())
    );

    // Half-open: no wait; then closed again.
    clock.advance(secs(1));
    let json = serde_json::to_value(breaker.snapshot()).unwrap();
    assert_eq!(
        check_durations(&json, "snapshot", &["retry_after"]),
        [("at".into(), true), ("retry_after".into(), false)]
    );
    assert_eq!(json["retry_after_ms"], serde_json::Value::Null);
    breaker.execute(|| Ok::<_, ()>(())).unwrap();

    let json = serde_json::to_value(history.recent()).unwrap();
    let seen = check_durations(&json, "history", &[]);
    for (name, set) in [
        ("at", true),
        ("open_for", true),
        ("open_for", false),
        ("first_at", true),
    ] {
        assert!(
            seen.contains(&(name.into(), set)),
            "{name} ({set}) in {json}"
        );
    }
    let trip = &json[0];
    assert_eq!(
        (&trip["at"], &trip["at_ms"]),
        (&"2ms 500us".into(), &3.into())
    );
    assert_eq!(
        (&trip["open_for"], &trip["open_for_ms"]),
        (&"1s".into(), &1_000.into())
    );
    assert_eq!(trip["first_at_ms"], 3);
    // Instants of the wall clock are milliseconds since the Unix epoch, not durations.
    assert!(
        trip["wall"]
            .as_u64()
            .is_some_and(|ms| ms > 1_600_000_000_000),
        "{trip}"
    );
}

/// Totals written before the health-check counters existed still read, as zero checks.
#[test]
fn totals_without_the_health_check_counters_still_deserialize() {
    let old = concat!(
        r#"{"admitted":5,"successes":2,"failures":2,"exclusions":1,"dropped":0,"opened":1,"#,
        r#""abandoned":0,"rejected_open":1,"rejected_half_open":0,"rejected_forced":0}"#
    );
    let totals: Totals = serde_json::from_str(old).unwrap();
    assert_eq!((totals.admitted, totals.opened), (5, 1));
    assert_eq!((totals.health_checks, totals.health_checks_failed), (0, 0));
}
