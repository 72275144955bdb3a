//! `Duration`s as humantime strings (`"250ms"`, `"1m 30s"`): the serde side of every duration
//! in the crate's configuration, [`config`](crate::config) and
//! [`EmaConfig`](crate::policy::EmaConfig) alike, and the test that leaves a default knob out
//! of what is written; and a report's duration with its whole milliseconds beside it
//! ([`fields_ms`]). A leaf: it needs only std, serde and humantime.

use std::time::Duration;

use humantime::DurationError;
use serde::ser::SerializeStruct;
use serde::Serializer;

/// What a duration looks like, for the errors of a value that is not one.
pub(crate) const EXPECTED: &str = r#"expected a duration string such as "250ms", "10s" or "1m30s""#;

/// Writes `value` as a humantime string, for `#[serde(serialize_with = "…")]`; [`parse`]
/// reads it back exactly.
pub(crate) fn serialize<S: Serializer>(value: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&humantime::format_duration(*value))
}

/// How a report rounds a duration to its whole milliseconds: a wait up
/// ([`human::wait_ms`](crate::human::wait_ms)), any other duration to the nearest ([`human::span_ms`](crate::human::span_ms)).
pub(crate) type Round = fn(Duration) -> u64;

/// Writes a report's duration as two fields of the struct `fields`: `name`, the exact
/// humantime string (as [`serialize`] writes it), and `name_ms` beside it, whole milliseconds
/// as `round` rounds them; both `null` for `None`. The rule of every JSON the crates emit
/// (see `docs/integrations.md`, "Durations in JSON"). Struct fields, not a flattened map, so
/// that formats which need a struct's fields up front (bincode, postcard) take a report too.
pub(crate) fn fields_ms<S: SerializeStruct>(
    fields: &mut S,
    (name, name_ms): (&'static str, &'static str),
    value: Option<Duration>,
    round: Round,
) -> Result<(), S::Error> {
    let exact = value.map(|d| humantime::format_duration(d).to_string());
    fields.serialize_field(name, &exact)?;
    fields.serialize_field(name_ms, &value.map(round))
}

/// Whether `value` is its type's default, for `#[serde(skip_serializing_if = "…")]`: a knob
/// left at its default is not written out, so files stay as short as they were written.
pub(crate) fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// Reads a humantime string; on error, why it is not a duration (lowercase, no period).
pub(crate) fn parse(text: &str) -> Result<Duration, &'static str> {
    humantime::parse_duration(text).map_err(|err| match err {
        DurationError::Empty => {
            r#"expected a duration such as "250ms", "10s" or "1m30s", not an empty string"#
        }
        DurationError::UnknownUnit { .. } => {
            r#"unknown time unit, expected ns, us, ms, s, m, h, d or w, as in "250ms" or "1m30s""#
        }
        DurationError::NumberOverflow => "too long a duration, or finer than a nanosecond",
        DurationError::InvalidCharacter(_) | DurationError::NumberExpected(_) => {
            r#"expected a duration such as "250ms", "10s" or "1m30s""#
        }
    })
}

#[cfg(test)]
mod tests {
    use super::parse;
    use std::time::Duration;

    #[test]
    fn humantime_strings_and_why_not() {
        assert_eq!(parse("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("1m 30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("0"), Ok(Duration::ZERO));
        assert!(parse("").unwrap_err().contains("empty"));
        assert!(parse("10x").unwrap_err().starts_with("unknown time unit"));
        assert!(parse("ten seconds")
            .unwrap_err()
            .starts_with("expected a duration"));
        assert!(parse("-1s").unwrap_err().starts_with("expected a duration"));
        assert!(parse("99999999999999999999s")
            .unwrap_err()
            .starts_with("too long"));
        // What `serialize` writes, `parse` reads back.
        for d in [
            Duration::from_nanos(1),
            Duration::from_millis(1500),
            Duration::MAX,
        ] {
            assert_eq!(parse(&humantime::format_duration(d).to_string()), Ok(d));
        }
    }
}
