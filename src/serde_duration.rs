//! `Duration`s as humantime strings (`"250ms"`, `"1m 30s"`): the serde side of every duration
//! in the crate's configuration, [`config`](crate::config) and
//! [`EmaConfig`](crate::policy::EmaConfig) alike. A leaf: it needs only std, serde and
//! humantime.

use std::fmt;
use std::time::Duration;

use serde::{de, Deserializer, Serializer};

/// Writes `value` as a humantime string, for `#[serde(serialize_with = "…")]`.
pub(crate) fn serialize<S: Serializer>(value: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&humantime::format_duration(*value))
}

/// Reads a humantime string, for `#[serde(deserialize_with = "…")]`.
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Duration, D::Error> {
    deserializer.deserialize_str(Visitor)
}

struct Visitor;

impl de::Visitor<'_> for Visitor {
    type Value = Duration;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(r#"a duration string such as "250ms", "10s" or "1m30s""#)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Duration, E> {
        humantime::parse_duration(text)
            .map_err(|err| E::custom(format_args!("invalid duration {text:?}: {err}")))
    }
}
