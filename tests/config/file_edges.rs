//! Files at the edges: a registry's bad settings refused naming their full path (a zero
//! `max_keys`, a positional array, ill-typed fields, a duration beyond the clock's range, a
//! JSON number beyond `f64`), duplicate keys refused and a table of 60 000 keys read, a
//! maximum open period shorter than the timeout refused. (Items 7 and 8 of the third
//! reliability round, and its maximum open period.)
#![cfg(feature = "serde")]

use lazybreaker::config::{RegistrySettings, Settings};

fn registry_toml(text: &str) -> String {
    match toml::from_str::<RegistrySettings>(text) {
        Ok(settings) => match settings.build() {
            Ok(_) => panic!("accepted: {text}"),
            Err(err) => err.to_string(),
        },
        Err(err) => err.message().to_owned(),
    }
}

fn registry_json(text: &str) -> String {
    match serde_json::from_str::<RegistrySettings>(text) {
        Ok(settings) => match settings.build() {
            Ok(_) => panic!("accepted: {text}"),
            Err(err) => err.to_string(),
        },
        Err(err) => err.to_string(),
    }
}

#[test]
fn item_7_max_keys_zero_is_refused_naming_it() {
    let err = registry_toml("max_keys = 0");
    assert!(
        err.starts_with("invalid `max_keys` = 0: must be at least 1"),
        "{err}"
    );
    let settings = RegistrySettings {
        max_keys: Some(0),
        ..RegistrySettings::default()
    };
    let err = settings.build().err().unwrap();
    assert_eq!(err.field(), "max_keys");
    let ok: RegistrySettings = toml::from_str("max_keys = 1").unwrap();
    assert_eq!(ok.build().unwrap().key_limit(), Some(1));
}

#[test]
fn item_7_a_positional_array_is_refused() {
    let err = registry_json(r#"[64, ["Health"], {}, {}]"#);
    assert!(
        err.contains("expected a table (map) of registry settings"),
        "{err}"
    );
}

#[test]
fn item_7_ill_typed_fields_are_named() {
    let err = registry_toml("max_keys = -1");
    assert!(err.starts_with("invalid `max_keys` = -1"), "{err}");
    let err = registry_toml(r#"exempt = "Health""#);
    assert!(err.starts_with(r#"invalid `exempt` = "Health""#), "{err}");
    let err = registry_toml(r#"exempt = ["Health", 3]"#);
    assert!(err.starts_with("invalid `exempt[1]` = 3"), "{err}");
}

#[test]
fn item_7_errors_inside_default_name_the_full_path() {
    let err = registry_toml("[default]\npolicy = { kind = \"failure_ratio\", ratio = \"half\" }");
    assert!(err.starts_with("invalid `default.policy.ratio`"), "{err}");
    let err = registry_toml("[default]\ntimeout = 3");
    assert!(err.starts_with("invalid `default.timeout` = 3"), "{err}");
    let err = registry_toml("[default]\nintervall = \"1s\"");
    assert!(err.starts_with("invalid `default.intervall`"), "{err}");
    // Range errors too (they were already).
    let err = registry_toml(
        "[default]\npolicy = { kind = \"failure_ratio\", ratio = 1.5, min_requests = 1 }",
    );
    assert!(
        err.starts_with("invalid `default.policy.ratio` = 1.5"),
        "{err}"
    );
    // A listed breaker's name their breaker.
    let err = registry_toml("[breakers.Sub]\ntimeout = 3");
    assert!(
        err.starts_with("breaker `Sub`: invalid `timeout` = 3"),
        "{err}"
    );
}

#[test]
fn item_7_a_duration_beyond_the_clocks_range_is_refused() {
    // Both saturate the clock's u64 nanoseconds (one fixed window would result).
    let err =
        registry_toml("[default]\ninterval = \"1000000000000h\"\nbucket_period = \"1000000000h\"");
    assert!(err.contains("exceeds the clock's range"), "{err}");
    assert!(
        err.starts_with("invalid `default.interval`")
            || err.starts_with("invalid `default.bucket_period`"),
        "{err}"
    );
    let err = registry_toml("[default]\ninterval = \"1000000000000h\"");
    assert!(
        err.starts_with(
            "invalid `default.interval` = \"1000000000000h\": exceeds the clock's range"
        ),
        "{err}"
    );
    let err = toml::from_str::<Settings>("timeout = \"600y\"").unwrap_err();
    assert!(
        err.message().starts_with("invalid `timeout`"),
        "{}",
        err.message()
    );
    // Within it: accepted.
    let settings: Settings =
        toml::from_str("interval = \"500y\"\nbucket_period = \"100y\"").unwrap();
    settings.validate().unwrap();
}

#[test]
fn item_7_a_json_number_beyond_f64_is_named() {
    let err =
        registry_json(r#"{"default": {"policy": {"kind": "failure_ratio", "ratio": 1e400}}}"#);
    assert!(err.starts_with("invalid `default.policy.ratio`"), "{err}");
    let err = registry_json(
        r#"{"breakers": {"Sub": {"policy": {"kind": "failure_ratio", "ratio": 1e400}}}}"#,
    );
    assert!(err.contains("`breakers.Sub.policy.ratio`"), "{err}");
    let err = serde_json::from_str::<Settings>(
        r#"{"policy": {"kind": "failure_ratio", "ratio": 1e400}}"#,
    )
    .unwrap_err()
    .to_string();
    assert!(err.starts_with("invalid `policy.ratio`"), "{err}");
}

#[test]
fn item_8_duplicate_keys_are_still_refused() {
    let err =
        serde_json::from_str::<Settings>(r#"{"timeout": "1s", "name": "a", "timeout": "2s"}"#)
            .unwrap_err()
            .to_string();
    assert!(
        err.contains("invalid `timeout` = \"2s\": duplicate field"),
        "{err}"
    );
    let err = registry_json(r#"{"max_keys": 2, "max_keys": 3}"#);
    assert!(
        err.contains("invalid `max_keys` = 3: duplicate field"),
        "{err}"
    );
}

#[test]
fn item_8_a_table_of_60_000_keys_parses() {
    let mut json = String::from("{\"breakers\": {");
    for i in 0..60_000 {
        if i > 0 {
            json.push(',');
        }
        json.push_str(&format!("\"k{i}\": {{}}"));
    }
    json.push_str("}}");
    let settings: RegistrySettings = serde_json::from_str(&json).unwrap();
    assert_eq!(settings.breakers.iter().count(), 60_000);
    // A duplicate among them is found.
    let json = json.replacen("\"k59999\"", "\"k0\"", 1);
    let err = registry_json(&json);
    assert!(
        err.contains("`breakers.k0`") && err.contains("duplicate"),
        "{err}"
    );
}

#[test]
fn max_open_duration_shorter_than_timeout_is_refused_from_a_file() {
    let text = "name = \"payments\"\ntimeout = \"10m\"\nmax_open_duration = \"5m\"";
    let settings: Settings = toml::from_str(text).unwrap();
    let err = settings.validate().unwrap_err();
    assert_eq!(
        err.to_string(),
        "breaker `payments`: invalid `max_open_duration` = 300s: must not be shorter than `timeout`"
    );
    let err = registry_toml("[default]\ntimeout = \"10m\"\nmax_open_duration = \"5m\"");
    assert!(
        err.starts_with("invalid `default.max_open_duration` = 300s: must not be shorter"),
        "{err}"
    );
    let err = registry_toml("[breakers.Sub]\ntimeout = \"10m\"\nmax_open_duration = \"5m\"");
    assert!(
        err.starts_with("breaker `Sub`: invalid `max_open_duration` = 300s"),
        "{err}"
    );
    let fits: Settings = toml::from_str("timeout = \"5m\"\nmax_open_duration = \"5m\"").unwrap();
    fits.validate().unwrap();
}
