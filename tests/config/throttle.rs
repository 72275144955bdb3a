//! The throttle in files: `throttle = { k = 2.0, min_requests = 20, max_probability = 0.9,
//! seed = 7 }` read into `Knobs::throttle`, written back the same, in a registry's default
//! settings too, and every bad value refused naming the breaker and `throttle.<field>`.

#![cfg(feature = "serde")]

use lazybreaker::config::{RegistrySettings, Settings};
use lazybreaker::throttle::Throttle;
use lazybreaker::{Knobs, ManualClock, Rejected};

#[test]
fn a_throttle_table_reads_into_the_knobs_and_back() {
    let settings: Settings = toml::from_str(
        r#"
        name = "orders"
        never_trips = true
        throttle = { k = 2.0, min_requests = 20, max_probability = 0.9, seed = 7 }
        "#,
    )
    .unwrap();
    let expected = Throttle::new(2.0)
        .unwrap()
        .min_requests(20)
        .max_probability(0.9)
        .seed(7);
    assert_eq!(settings.knobs.throttle, Some(expected));
    assert!(!expected.count_throttled);
    // Omitted fields take the defaults; only `k` is required.
    let knobs: Knobs = toml::from_str("throttle = { k = 1.5, count_throttled = true }").unwrap();
    let t = knobs.throttle.unwrap();
    assert_eq!(
        (t.k, t.min_requests, t.max_probability, t.seed),
        (1.5, 20, 0.9, 0)
    );
    assert!(t.count_throttled);
    assert_eq!(
        toml::from_str::<Knobs>(&toml::to_string(&knobs).unwrap()).unwrap(),
        knobs
    );

    // The breaker it builds throttles.
    let breaker = settings
        .to_builder()
        .unwrap()
        .clock(ManualClock::new())
        .build();
    let mut throttled = 0;
    for _ in 0..200 {
        match breaker.allow() {
            Ok(permit) => permit.failure(),
            Err(Rejected::Throttled { .. }) => throttled += 1,
            Err(other) => panic!("{other}"),
        }
    }
    assert!(throttled > 100, "{throttled}");
}

#[test]
fn bad_throttle_values_are_refused_naming_the_breaker_and_the_field() {
    let cases = [
        ("throttle = { k = 0.5 }", "throttle.k"),
        (
            "throttle = { k = 2.0, max_probability = 1.5 }",
            "throttle.max_probability",
        ),
        (
            "throttle = { k = 2.0, max_probability = -0.1 }",
            "throttle.max_probability",
        ),
        (
            "throttle = { k = 2.0, min_requests = -1 }",
            "throttle.min_requests",
        ),
        ("throttle = { k = 2.0, seed = \"seven\" }", "throttle.seed"),
        ("throttle = { k = 2.0, sede = 7 }", "throttle.sede"),
        ("throttle = { min_requests = 20 }", "throttle.k"),
        ("throttle = 2.0", "throttle"),
    ];
    for (text, field) in cases {
        let err = toml::from_str::<Settings>(&format!("name = \"orders\"\n{text}")).unwrap_err();
        let message = err.message();
        assert!(
            message.starts_with(&format!("breaker `orders`: invalid `{field}`")),
            "{text}: {message}"
        );
    }
    // A count window holds results: the throttled calls cannot count in it.
    let settings: Settings = toml::from_str(
        "name = \"orders\"\ncount_window = 100\nthrottle = { k = 2.0, count_throttled = true }",
    )
    .unwrap();
    let err = settings.to_builder().err().unwrap();
    assert_eq!(err.field(), "throttle.count_throttled");
    assert_eq!(err.breaker(), Some("orders"));
}

#[test]
fn a_registrys_default_settings_throttle_every_key() {
    let settings: RegistrySettings = toml::from_str(
        r#"
        [default]
        never_trips = true
        throttle = { k = 1.0, min_requests = 5, max_probability = 0.5, seed = 9 }
        "#,
    )
    .unwrap();
    let registry = settings.build().unwrap();
    for key in ["a", "b"] {
        let mut throttled = 0;
        for _ in 0..400 {
            match registry.breaker(key).allow() {
                Ok(permit) => permit.failure(),
                Err(Rejected::Throttled { probability }) => {
                    assert_eq!(probability, 0.5);
                    throttled += 1;
                }
                Err(other) => panic!("{other}"),
            }
        }
        assert!((120..280).contains(&throttled), "{key}: {throttled}");
    }
}
