//! Reading configuration (the `serde` feature): every value's `Deserialize`, and the typed
//! route [`Settings::from_deserializer`].
//!
//! serde's derived internally tagged enums buffer a table before they know its `kind`, and
//! then report a wrong type inside it against the whole table, without the field's name. So
//! nothing here is derived: each table is read into a small self-describing [`Value`] tree
//! (through `deserialize_any`), then converted into its typed value by functions that track
//! the path (`policy.policies[1].min_requests`) and answer a [`ConfigError`] naming that path,
//! the value as written, why it does not fit, and the breaker (the table's `name`, or its key
//! in [`Breakers`]). Through a format crate the message is the `ConfigError`'s own
//! (`D::Error::custom`); [`Settings::from_deserializer`] keeps it typed.

use std::collections::BTreeMap;
use std::fmt::{self, Display, Write as _};
use std::time::Duration;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use super::{Breakers, OpenDurationConfig, PolicyConfig, Settings};
use crate::policy::{ConsecutiveFailures, EmaConfig};
use crate::serde_duration;
use crate::ConfigError;

/// Why configuration could not be read: the input is not valid in its format, or it is but
/// does not describe valid configuration.
///
/// Returned by [`Settings::from_deserializer`], [`PolicyConfig::from_deserializer`] and
/// [`Breakers::from_deserializer`], which keep apart what the format crate reports and what
/// this crate does. (Through `Deserialize`, e.g. `toml::from_str`, both arrive as the format's
/// error, with the [`ConfigError`]'s message.) A [`ConfigError`] converts into it, so the
/// range checks of [`Settings::validate`] join with `?`.
///
/// # Examples
///
/// ```
/// use lazybreaker::config::{DeserializeError, Settings};
///
/// fn load(json: &str) -> Result<Settings, DeserializeError<serde_json::Error>> {
///     let mut de = serde_json::Deserializer::from_str(json);
///     let settings = Settings::from_deserializer(&mut de)?;
///     de.end().map_err(DeserializeError::Format)?; // nothing after the settings
///     settings.validate()?; // the range checks, through `From<ConfigError>`
///     Ok(settings)
/// }
///
/// assert!(matches!(load(r#"{"name": "#), Err(DeserializeError::Format(_))));
/// let Err(DeserializeError::Config(err)) = load(r#"{"name": "a", "timeout": 30}"#) else {
///     panic!("a number is not a duration");
/// };
/// assert_eq!((err.breaker(), err.field(), err.value()), (Some("a"), "timeout", "30"));
/// let zero = r#"{"policy": {"kind": "consecutive_failures", "threshold": 0}}"#;
/// let Err(DeserializeError::Config(err)) = load(zero) else {
///     panic!("a threshold of 0 is out of range");
/// };
/// assert_eq!(err.field(), "policy.threshold");
/// assert!(load(r#"{"timeout": "30s"}"#).is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DeserializeError<E> {
    /// The format's own error: the input is not valid TOML, JSON, … (a syntax error), or the
    /// format could not read it (an I/O error of a reader, a nesting limit). The value is as
    /// the format crate made it, with its line and column where it has them.
    #[error(transparent)]
    Format(E),
    /// The input is valid in its format, but not configuration of this shape (an unknown
    /// field, a wrong type, a duration that does not parse, an unknown `kind`), or, from
    /// `From<ConfigError>`, a value out of range: the [`ConfigError`] names the breaker, the
    /// field's path and the value.
    #[error(transparent)]
    Config(ConfigError),
}

impl<E> From<ConfigError> for DeserializeError<E> {
    fn from(err: ConfigError) -> Self {
        DeserializeError::Config(err)
    }
}

impl Settings {
    /// Reads settings from any self-describing serde [`Deserializer`] (a TOML document, a
    /// JSON value, …), keeping the format's errors and the shape's apart.
    ///
    /// This checks the shape only, as `Deserialize` does: field names, types, durations and
    /// `kind`s. The ranges are checked when the breaker is built, or by
    /// [`validate`](Settings::validate), whose error converts into [`DeserializeError`].
    ///
    /// # Errors
    ///
    /// [`DeserializeError::Format`] with the deserializer's error when the input is not valid
    /// in its format; [`DeserializeError::Config`] with a [`ConfigError`] naming the field by
    /// its path, the value as written and why it does not fit, and the breaker by the table's
    /// `name` when it has one.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::config::{DeserializeError, Settings};
    ///
    /// let text = r#"
    ///     name = "payments"
    ///     policy = { kind = "any_of", policies = [
    ///         { kind = "consecutive_failures", threshold = 5 },
    ///         { kind = "failure_ratio", ratio = 0.5, min_requests = -1 },
    ///     ] }
    /// "#;
    /// let document = toml::Deserializer::parse(text)?; // a TOML syntax error stops here
    /// let Err(DeserializeError::Config(err)) = Settings::from_deserializer(document) else {
    ///     panic!("-1 requests");
    /// };
    /// assert_eq!(err.breaker(), Some("payments"));
    /// assert_eq!(err.field(), "policy.policies[1].min_requests");
    /// assert_eq!(err.value(), "-1");
    /// assert_eq!(
    ///     err.to_string(),
    ///     "breaker `payments`: invalid `policy.policies[1].min_requests` = -1: \
    ///      expected a non-negative integer"
    /// );
    ///
    /// // Through `Deserialize`, the same message is the format's.
    /// let err = toml::from_str::<Settings>(text).unwrap_err();
    /// assert_eq!(
    ///     err.message(),
    ///     "breaker `payments`: invalid `policy.policies[1].min_requests` = -1: \
    ///      expected a non-negative integer"
    /// );
    /// # Ok::<(), toml::de::Error>(())
    /// ```
    pub fn from_deserializer<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Self, DeserializeError<D::Error>> {
        read(deserializer, |value| {
            settings(value, Path::Root("settings"))
        })
    }
}

impl PolicyConfig {
    /// Reads a policy from any self-describing serde [`Deserializer`], as
    /// [`Settings::from_deserializer`] does settings. Paths are relative to the policy, as in
    /// [`PolicyConfig::build`]'s errors: `ratio`, `policies[1].min_requests`.
    ///
    /// # Errors
    ///
    /// As [`Settings::from_deserializer`]; no breaker is named.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::config::{DeserializeError, PolicyConfig};
    /// use serde_json::json;
    ///
    /// let Err(DeserializeError::Config(err)) =
    ///     PolicyConfig::from_deserializer(json!({ "kind": "failure_ratio", "ratio": "0.5" }))
    /// else {
    ///     panic!("a string is not a ratio");
    /// };
    /// assert_eq!(err.to_string(), r#"invalid `ratio` = "0.5": expected a number"#);
    /// ```
    pub fn from_deserializer<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Self, DeserializeError<D::Error>> {
        read(deserializer, |value| policy(value, Path::Root("policy")))
    }
}

impl Breakers {
    /// Reads a file of breakers (a table of [`Settings`] keyed by breaker name) from any
    /// self-describing serde [`Deserializer`], as [`Settings::from_deserializer`] does one.
    ///
    /// # Errors
    ///
    /// As [`Settings::from_deserializer`], for the first entry that does not fit; its error
    /// names the breaker by the entry's `name`, or else by its key.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::config::{Breakers, DeserializeError};
    ///
    /// let text = r#"
    ///     [payments]
    ///     timeout = "30s"
    ///     [search]
    ///     intervall = "10s"
    /// "#;
    /// let document = toml::Deserializer::parse(text)?;
    /// let Err(DeserializeError::Config(err)) = Breakers::from_deserializer(document) else {
    ///     panic!("a typo");
    /// };
    /// assert_eq!((err.breaker(), err.field()), (Some("search"), "intervall"));
    /// assert!(err.reason().starts_with("unknown field, expected one of `name`, `max_requests`"));
    /// # Ok::<(), toml::de::Error>(())
    /// ```
    pub fn from_deserializer<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Self, DeserializeError<D::Error>> {
        let mut failed = None;
        let result = deserializer.deserialize_any(BreakersVisitor {
            failed: &mut failed,
        });
        match (result, failed) {
            (Ok(breakers), _) => Ok(breakers),
            // The format passed our error through, perhaps with a location added.
            (Err(_), Some(err)) => Err(DeserializeError::Config(err)),
            (Err(err), None) => Err(DeserializeError::Format(err)),
        }
    }
}

// `Deserialize` through the typed route: a `ConfigError` becomes the format's error, with
// exactly the `ConfigError`'s message.

impl<'de> serde::Deserialize<'de> for Settings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Settings::from_deserializer(deserializer).map_err(into_format_error)
    }
}

impl<'de> serde::Deserialize<'de> for PolicyConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        PolicyConfig::from_deserializer(deserializer).map_err(into_format_error)
    }
}

impl<'de> serde::Deserialize<'de> for OpenDurationConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        read(deserializer, |value| {
            open_duration(value, Path::Root("open_duration"))
        })
        .map_err(into_format_error)
    }
}

impl<'de> serde::Deserialize<'de> for EmaConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        read(deserializer, |value| {
            let root = Path::Root("ema");
            let entries = table(value, root, "expected a table (map) of ema fields")?;
            ema(entries, root, false)
        })
        .map_err(into_format_error)
    }
}

impl<'de> serde::Deserialize<'de> for Breakers {
    /// Attributes an error inside an entry to that entry's breaker: its `name`, or else its
    /// key (which a plain `BTreeMap<String, Settings>` cannot do).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // The format's own error, which carries the message and, in toml, the entry's place.
        deserializer.deserialize_any(BreakersVisitor { failed: &mut None })
    }
}

fn into_format_error<E: de::Error>(err: DeserializeError<E>) -> E {
    match err {
        DeserializeError::Format(err) => err,
        DeserializeError::Config(err) => E::custom(err),
    }
}

/// Reads a [`Value`] tree, then converts it.
fn read<'de, D: Deserializer<'de>, T>(
    deserializer: D,
    convert: impl FnOnce(&Value) -> Result<T, ConfigError>,
) -> Result<T, DeserializeError<D::Error>> {
    let value = Value::deserialize(deserializer).map_err(DeserializeError::Format)?;
    convert(&value).map_err(DeserializeError::Config)
}

// -----------------------------------------------------------------------------------------
// The value tree

/// A value as a self-describing format wrote it, before it is known what it should be.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Seq(Vec<Value>),
    /// Entries in the order written; duplicates kept, for the converter to refuse.
    Map(Vec<(String, Value)>),
}

/// The key under which toml hands a datetime to `deserialize_any`, as a one-entry map.
const TOML_DATETIME: &str = "$__toml_private_datetime";

/// The key under which serde_json hands a number to `deserialize_any` when its
/// `arbitrary_precision` feature is on (anywhere in the build), as a one-entry map.
const JSON_NUMBER: &str = "$serde_json::private::Number";

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Int(v.into()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Int(v.into()))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Value, E> {
        Ok(Value::Int(v))
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Value, E> {
        // Past i128, no integer here is in range anyway: keep its magnitude.
        Ok(i128::try_from(v).map_or(Value::Float(v as f64), Value::Int))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(Value::Float(v))
    }

    fn visit_char<E: de::Error>(self, v: char) -> Result<Value, E> {
        Ok(Value::Str(v.into()))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::Str(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::Str(v))
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Value, E> {
        match std::str::from_utf8(v) {
            Ok(text) => Ok(Value::Str(text.to_owned())),
            Err(_) => Err(E::invalid_type(de::Unexpected::Bytes(v), &self)),
        }
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        Value::deserialize(deserializer)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Value, D::Error> {
        Value::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0).min(64));
        while let Some(key) = map.next_key::<Key>()? {
            entries.push((key.0, map.next_value()?));
        }
        if let [(key, Value::Str(number))] = entries.as_slice() {
            if key == JSON_NUMBER {
                if let Ok(n) = number.parse() {
                    return Ok(Value::Int(n));
                }
                if let Ok(x) = number.parse() {
                    return Ok(Value::Float(x));
                }
            }
        }
        Ok(Value::Map(entries))
    }
}

/// A map key: a string, or a scalar some formats allow as a key (YAML's `1:`), as text.
struct Key(String);

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(KeyVisitor)
    }
}

struct KeyVisitor;

impl Visitor<'_> for KeyVisitor {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
        Ok(Key(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Key, E> {
        Ok(Key(v))
    }

    fn visit_char<E: de::Error>(self, v: char) -> Result<Key, E> {
        Ok(Key(v.into()))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Key, E> {
        Ok(Key(v.to_string()))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Key, E> {
        Ok(Key(v.to_string()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Key, E> {
        Ok(Key(v.to_string()))
    }
}

/// Values as written, compact and on one line; long tables and lists are cut short.
impl Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const LONGEST: usize = 80;
        let mut text = String::new();
        self.write(&mut text)?;
        if text.chars().count() > LONGEST {
            let cut: String = text.chars().take(LONGEST - 1).collect();
            write!(f, "{cut}…")
        } else {
            f.write_str(&text)
        }
    }
}

impl Value {
    fn write(&self, out: &mut String) -> fmt::Result {
        match self {
            Value::Null => out.write_str("null"),
            Value::Bool(v) => write!(out, "{v}"),
            Value::Int(v) => write!(out, "{v}"),
            // Debug: `2.0` stays a float, and `1e300` stays short.
            Value::Float(v) => write!(out, "{v:?}"),
            Value::Str(v) => write!(out, "{v:?}"),
            Value::Seq(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    item.write(out)?;
                }
                out.write_char(']')
            }
            Value::Map(entries) => match entries.as_slice() {
                [(key, Value::Str(datetime))] if key == TOML_DATETIME => out.write_str(datetime),
                [] => out.write_str("{}"),
                entries => {
                    out.push_str("{ ");
                    for (i, (key, value)) in entries.iter().enumerate() {
                        if i > 0 {
                            out.push_str(", ");
                        }
                        write!(out, "{key} = ")?;
                        value.write(out)?;
                    }
                    out.write_str(" }")
                }
            },
        }
    }
}

// -----------------------------------------------------------------------------------------
// Paths and errors

/// Where a value is, from the root of what is being read; displayed only for an error.
#[derive(Debug, Clone, Copy)]
enum Path<'a> {
    /// The value being read, named for an error about itself (`settings`, `policy`).
    Root(&'static str),
    /// A field of a table.
    Key(&'a Path<'a>, &'a str),
    /// An item of a list.
    Index(&'a Path<'a>, usize),
}

impl<'a> Path<'a> {
    fn key(&'a self, key: &'a str) -> Path<'a> {
        Path::Key(self, key)
    }

    fn index(&'a self, index: usize) -> Path<'a> {
        Path::Index(self, index)
    }

    fn render(&self) -> String {
        match *self {
            Path::Root(name) => name.to_owned(),
            Path::Key(Path::Root(_), key) => key.to_owned(),
            Path::Key(parent, key) => format!("{}.{key}", parent.render()),
            Path::Index(parent, index) => format!("{}[{index}]", parent.render()),
        }
    }

    fn error(&self, value: impl Display, reason: &'static str) -> ConfigError {
        ConfigError::new(self.render(), value, reason)
    }

    fn missing(&self, reason: &'static str) -> ConfigError {
        self.error("(missing)", reason)
    }
}

// -----------------------------------------------------------------------------------------
// Shapes

// The reasons are `&'static str`: each list is spelled once, in a macro, for `concat!`.

macro_rules! policy_kinds {
    () => {
        "`consecutive_failures`, `failure_ratio`, `failure_count`, `slow_calls`, `ema`, `any_of`"
    };
}

macro_rules! open_duration_kinds {
    () => {
        "`policy`, `exponential`"
    };
}

macro_rules! ema_fields {
    () => {
        "`short_window_size`, `short_window_error_percent`, `long_window_size`, \
         `long_window_error_percent`, `min_error_cost`, `max_failed_latency_multiple`, \
         `min_isolation`, `max_isolation`, `epsilon`, `half_open_window_size`"
    };
}

const SETTINGS_FIELDS: &str = "unknown field, expected one of `name`, `max_requests`, \
    `interval`, `bucket_period`, `timeout`, `policy`, `open_duration`";
const CONSECUTIVE_FIELDS: &str = "unknown field, expected `kind` or `threshold`";
const RATIO_FIELDS: &str = "unknown field, expected one of `kind`, `ratio`, `min_requests`";
const COUNT_FIELDS: &str = "unknown field, expected one of `kind`, `failures`, `min_requests`";
const SLOW_FIELDS: &str = "unknown field, expected one of `kind`, `threshold`, `ratio`, \
     `min_requests`, `probes_on_latency_alone`";
const ANY_OF_FIELDS: &str = "unknown field, expected `kind` or `policies`";
const EMA_FIELDS: &str = concat!("unknown field, expected one of ", ema_fields!());
const EMA_POLICY_FIELDS: &str = concat!("unknown field, expected one of `kind`, ", ema_fields!());
const OPEN_POLICY_FIELDS: &str = "unknown field, expected only `kind`";
const EXPONENTIAL_FIELDS: &str = "unknown field, expected one of `kind`, `initial`, `max`";

/// A table's entries, each key once.
fn table<'v>(
    value: &'v Value,
    path: Path<'_>,
    expected: &'static str,
) -> Result<&'v [(String, Value)], ConfigError> {
    let Value::Map(entries) = value else {
        return Err(path.error(value, expected));
    };
    for (i, (key, value)) in entries.iter().enumerate() {
        if entries[..i].iter().any(|(earlier, _)| earlier == key) {
            return Err(path.key(key).error(value, "duplicate field"));
        }
    }
    Ok(entries)
}

fn string(value: &Value, path: Path<'_>) -> Result<String, ConfigError> {
    match value {
        Value::Str(text) => Ok(text.clone()),
        _ => Err(path.error(value, "expected a string")),
    }
}

fn u64_of(value: &Value, path: Path<'_>) -> Result<u64, ConfigError> {
    match *value {
        Value::Int(n) => u64::try_from(n).map_err(|_| {
            if n < 0 {
                path.error(value, "expected a non-negative integer")
            } else {
                path.error(
                    value,
                    "expected an integer within [0, 18446744073709551615]",
                )
            }
        }),
        _ => Err(path.error(value, "expected a non-negative integer")),
    }
}

fn u32_of(value: &Value, path: Path<'_>) -> Result<u32, ConfigError> {
    let n = u64_of(value, path)?;
    u32::try_from(n).map_err(|_| path.error(value, "expected an integer within [0, 4294967295]"))
}

fn f64_of(value: &Value, path: Path<'_>) -> Result<f64, ConfigError> {
    match *value {
        Value::Float(x) => Ok(x),
        // As serde reads an `f64`: an integer is a number too.
        Value::Int(n) => Ok(n as f64),
        _ => Err(path.error(value, "expected a number")),
    }
}

fn bool_of(value: &Value, path: Path<'_>) -> Result<bool, ConfigError> {
    match *value {
        Value::Bool(b) => Ok(b),
        _ => Err(path.error(value, "expected true or false")),
    }
}

fn duration(value: &Value, path: Path<'_>) -> Result<Duration, ConfigError> {
    match value {
        Value::Str(text) => serde_duration::parse(text).map_err(|reason| path.error(value, reason)),
        _ => Err(path.error(value, serde_duration::EXPECTED)),
    }
}

fn settings(value: &Value, path: Path<'_>) -> Result<Settings, ConfigError> {
    let entries = table(value, path, "expected a table (map) of settings")?;
    let name = match entries.iter().find(|(key, _)| key == "name") {
        Some((_, Value::Str(name))) => name.as_str(),
        _ => "",
    };
    settings_fields(entries, path).map_err(|err| err.for_breaker(name))
}

fn settings_fields(entries: &[(String, Value)], path: Path<'_>) -> Result<Settings, ConfigError> {
    let mut settings = Settings::default();
    for (key, value) in entries {
        let at = path.key(key);
        match key.as_str() {
            "name" => settings.name = string(value, at)?,
            "max_requests" => settings.max_requests = u32_of(value, at)?,
            "interval" => settings.interval = duration(value, at)?,
            "bucket_period" => settings.bucket_period = duration(value, at)?,
            "timeout" => settings.timeout = duration(value, at)?,
            "policy" => settings.policy = policy(value, at)?,
            "open_duration" => settings.open_duration = open_duration(value, at)?,
            _ => return Err(at.error(value, SETTINGS_FIELDS)),
        }
    }
    Ok(settings)
}

/// The `kind` of a tagged table, checked to be a string.
fn kind<'v>(
    entries: &'v [(String, Value)],
    path: Path<'_>,
    missing: &'static str,
    not_a_string: &'static str,
) -> Result<&'v str, ConfigError> {
    match entries.iter().find(|(key, _)| key == "kind") {
        None => Err(path.key("kind").missing(missing)),
        Some((_, Value::Str(kind))) => Ok(kind),
        Some((_, other)) => Err(path.key("kind").error(other, not_a_string)),
    }
}

fn policy(value: &Value, path: Path<'_>) -> Result<PolicyConfig, ConfigError> {
    let entries = table(value, path, "expected a policy table (map) with a `kind`")?;
    let kind = kind(
        entries,
        path,
        concat!("required, one of ", policy_kinds!()),
        concat!("expected a string, one of ", policy_kinds!()),
    )?;
    let fields = entries.iter().filter(|(key, _)| key != "kind");
    match kind {
        "consecutive_failures" => {
            let mut threshold = ConsecutiveFailures::default().threshold();
            for (key, value) in fields {
                let at = path.key(key);
                match key.as_str() {
                    "threshold" => threshold = u64_of(value, at)?,
                    _ => return Err(at.error(value, CONSECUTIVE_FIELDS)),
                }
            }
            Ok(PolicyConfig::ConsecutiveFailures { threshold })
        }
        "failure_ratio" => {
            let (mut ratio, mut min_requests) = (None, None);
            for (key, value) in fields {
                let at = path.key(key);
                match key.as_str() {
                    "ratio" => ratio = Some(f64_of(value, at)?),
                    "min_requests" => min_requests = Some(u64_of(value, at)?),
                    _ => return Err(at.error(value, RATIO_FIELDS)),
                }
            }
            let required = "required for kind `failure_ratio`";
            Ok(PolicyConfig::FailureRatio {
                ratio: ratio.ok_or_else(|| path.key("ratio").missing(required))?,
                min_requests: min_requests
                    .ok_or_else(|| path.key("min_requests").missing(required))?,
            })
        }
        "failure_count" => {
            let (mut failures, mut min_requests) = (None, None);
            for (key, value) in fields {
                let at = path.key(key);
                match key.as_str() {
                    "failures" => failures = Some(u64_of(value, at)?),
                    "min_requests" => min_requests = Some(u64_of(value, at)?),
                    _ => return Err(at.error(value, COUNT_FIELDS)),
                }
            }
            let required = "required for kind `failure_count`";
            Ok(PolicyConfig::FailureCount {
                failures: failures.ok_or_else(|| path.key("failures").missing(required))?,
                min_requests: min_requests
                    .ok_or_else(|| path.key("min_requests").missing(required))?,
            })
        }
        "slow_calls" => {
            let (mut threshold, mut ratio, mut min_requests) = (None, None, None);
            let mut probes_on_latency_alone = false;
            for (key, value) in fields {
                let at = path.key(key);
                match key.as_str() {
                    "probes_on_latency_alone" => probes_on_latency_alone = bool_of(value, at)?,
                    "threshold" => threshold = Some(duration(value, at)?),
                    "ratio" => ratio = Some(f64_of(value, at)?),
                    "min_requests" => min_requests = Some(u64_of(value, at)?),
                    _ => return Err(at.error(value, SLOW_FIELDS)),
                }
            }
            let required = "required for kind `slow_calls`";
            Ok(PolicyConfig::SlowCalls {
                threshold: threshold.ok_or_else(|| path.key("threshold").missing(required))?,
                ratio: ratio.ok_or_else(|| path.key("ratio").missing(required))?,
                min_requests: min_requests
                    .ok_or_else(|| path.key("min_requests").missing(required))?,
                probes_on_latency_alone,
            })
        }
        "ema" => ema(entries, path, true).map(PolicyConfig::Ema),
        "any_of" => {
            let mut policies = None;
            for (key, value) in fields {
                let at = path.key(key);
                match key.as_str() {
                    "policies" => {
                        let Value::Seq(items) = value else {
                            return Err(at.error(value, "expected a list of policy tables"));
                        };
                        let list = items
                            .iter()
                            .enumerate()
                            .map(|(i, item)| policy(item, at.index(i)))
                            .collect::<Result<Vec<_>, _>>()?;
                        policies = Some(list);
                    }
                    _ => return Err(at.error(value, ANY_OF_FIELDS)),
                }
            }
            Ok(PolicyConfig::AnyOf {
                policies: policies.ok_or_else(|| {
                    path.key("policies")
                        .missing("required for kind `any_of`: a list of policy tables")
                })?,
            })
        }
        _ => Err(path.key("kind").error(
            Value::Str(kind.to_owned()),
            concat!("unknown kind, expected one of ", policy_kinds!()),
        )),
    }
}

/// An [`EmaConfig`] from a table's fields (a `kind` among them for a policy table), each
/// optional with brpc's default.
fn ema(
    entries: &[(String, Value)],
    path: Path<'_>,
    policy_table: bool,
) -> Result<EmaConfig, ConfigError> {
    let unknown = if policy_table {
        EMA_POLICY_FIELDS
    } else {
        EMA_FIELDS
    };
    let mut config = EmaConfig::default();
    for (key, value) in entries {
        let at = path.key(key);
        match key.as_str() {
            "kind" if policy_table => {}
            "short_window_size" => config.short_window_size = u32_of(value, at)?,
            "short_window_error_percent" => config.short_window_error_percent = u32_of(value, at)?,
            "long_window_size" => config.long_window_size = u32_of(value, at)?,
            "long_window_error_percent" => config.long_window_error_percent = u32_of(value, at)?,
            "min_error_cost" => config.min_error_cost = duration(value, at)?,
            "max_failed_latency_multiple" => {
                config.max_failed_latency_multiple = u32_of(value, at)?
            }
            "min_isolation" => config.min_isolation = duration(value, at)?,
            "max_isolation" => config.max_isolation = duration(value, at)?,
            "epsilon" => config.epsilon = f64_of(value, at)?,
            "half_open_window_size" => config.half_open_window_size = u32_of(value, at)?,
            _ => return Err(at.error(value, unknown)),
        }
    }
    Ok(config)
}

fn open_duration(value: &Value, path: Path<'_>) -> Result<OpenDurationConfig, ConfigError> {
    let entries = table(
        value,
        path,
        "expected an open_duration table (map) with a `kind`",
    )?;
    let kind = kind(
        entries,
        path,
        concat!("required, one of ", open_duration_kinds!()),
        concat!("expected a string, one of ", open_duration_kinds!()),
    )?;
    let mut fields = entries.iter().filter(|(key, _)| key != "kind");
    match kind {
        "policy" => match fields.next() {
            Some((key, value)) => Err(path.key(key).error(value, OPEN_POLICY_FIELDS)),
            None => Ok(OpenDurationConfig::Policy {}),
        },
        "exponential" => {
            let (mut initial, mut max) = (None, None);
            for (key, value) in fields {
                let at = path.key(key);
                match key.as_str() {
                    "initial" => initial = Some(duration(value, at)?),
                    "max" => max = Some(duration(value, at)?),
                    _ => return Err(at.error(value, EXPONENTIAL_FIELDS)),
                }
            }
            let required = "required for kind `exponential`";
            Ok(OpenDurationConfig::Exponential {
                initial: initial.ok_or_else(|| path.key("initial").missing(required))?,
                max: max.ok_or_else(|| path.key("max").missing(required))?,
            })
        }
        _ => Err(path.key("kind").error(
            Value::Str(kind.to_owned()),
            concat!("unknown kind, expected one of ", open_duration_kinds!()),
        )),
    }
}

// -----------------------------------------------------------------------------------------
// A file of breakers

/// Reads a table of breakers entry by entry, so that a format that knows where each entry is
/// (toml) points its error at the entry; an entry's [`ConfigError`] is also kept in `failed`,
/// for [`Breakers::from_deserializer`] to return typed.
struct BreakersVisitor<'a> {
    failed: &'a mut Option<ConfigError>,
}

impl<'de> Visitor<'de> for BreakersVisitor<'_> {
    type Value = Breakers;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a table of breakers keyed by name")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Breakers, A::Error> {
        let mut breakers = BTreeMap::new();
        while let Some(Key(key)) = map.next_key()? {
            let entry = map.next_value_seed(Entry {
                key: &key,
                failed: &mut *self.failed,
            })?;
            if breakers.contains_key(&key) {
                let err = Path::Root("breakers")
                    .key(&key)
                    .error("{ … }", "duplicate breaker: each key names one");
                return Err(fail(self.failed, err));
            }
            breakers.insert(key, entry);
        }
        Ok(Breakers::from(breakers))
    }

    // Anything but a table: read it whole, to show it in the error.

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Breakers, A::Error> {
        let value = ValueVisitor.visit_seq(seq)?;
        Err(self.not_a_table(&value))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Breakers, E> {
        Err(self.not_a_table(&Value::Bool(v)))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Breakers, E> {
        Err(self.not_a_table(&Value::Int(v.into())))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Breakers, E> {
        Err(self.not_a_table(&Value::Int(v.into())))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Breakers, E> {
        Err(self.not_a_table(&Value::Float(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Breakers, E> {
        Err(self.not_a_table(&Value::Str(v.to_owned())))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Breakers, E> {
        Err(self.not_a_table(&Value::Null))
    }

    fn visit_none<E: de::Error>(self) -> Result<Breakers, E> {
        Err(self.not_a_table(&Value::Null))
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Breakers, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Breakers, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl BreakersVisitor<'_> {
    fn not_a_table<E: de::Error>(self, value: &Value) -> E {
        let err =
            Path::Root("breakers").error(value, "expected a table (map) of breakers keyed by name");
        fail(self.failed, err)
    }
}

/// Keeps `err` for the typed route and hands it to the format.
fn fail<E: de::Error>(failed: &mut Option<ConfigError>, err: ConfigError) -> E {
    let format_error = E::custom(&err);
    *failed = Some(err);
    format_error
}

/// One entry of a table of breakers: its settings, with errors attributed to the breaker its
/// `name` or else its `key` names.
struct Entry<'a> {
    key: &'a str,
    failed: &'a mut Option<ConfigError>,
}

impl<'de> DeserializeSeed<'de> for Entry<'_> {
    type Value = Settings;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Settings, D::Error> {
        let value = Value::deserialize(deserializer)?;
        settings(&value, Path::Root("settings"))
            .map_err(|err| fail(self.failed, err.for_breaker(self.key)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path_of(path: Path<'_>) -> String {
        path.render()
    }

    #[test]
    fn paths_read_as_written() {
        let root = Path::Root("settings");
        assert_eq!(path_of(root), "settings");
        let policy = root.key("policy");
        let policies = policy.key("policies");
        let second = policies.index(1);
        assert_eq!(
            path_of(second.key("min_requests")),
            "policy.policies[1].min_requests"
        );
        let standalone = Path::Root("policy");
        let policies = standalone.key("policies");
        assert_eq!(path_of(policies.index(0)), "policies[0]");
    }

    #[test]
    fn values_show_as_written_and_long_ones_are_cut() {
        let map = Value::Map(vec![
            ("kind".into(), Value::Str("failure_ratio".into())),
            ("ratio".into(), Value::Float(2.0)),
            ("min_requests".into(), Value::Int(-1)),
        ]);
        assert_eq!(
            map.to_string(),
            r#"{ kind = "failure_ratio", ratio = 2.0, min_requests = -1 }"#
        );
        let seq = Value::Seq(vec![
            Value::Str("payments".into()),
            Value::Int(3),
            Value::Null,
        ]);
        assert_eq!(seq.to_string(), r#"["payments", 3, null]"#);
        assert_eq!(Value::Float(f64::NAN).to_string(), "NaN");
        assert_eq!(Value::Float(1e300).to_string(), "1e300");
        assert_eq!(Value::Map(vec![]).to_string(), "{}");
        let long = Value::Seq(vec![Value::Int(1_000_000); 40]).to_string();
        assert_eq!(long.chars().count(), 80);
        assert!(long.ends_with('…'));
        let datetime = Value::Map(vec![(
            TOML_DATETIME.into(),
            Value::Str("1979-05-27".into()),
        )]);
        assert_eq!(datetime.to_string(), "1979-05-27");
    }

    #[test]
    fn a_number_of_arbitrary_precision_is_a_number() {
        use serde::de::value::{Error, MapDeserializer};
        let read = |number: &str| {
            Value::deserialize(MapDeserializer::<_, Error>::new(
                [(JSON_NUMBER, number)].into_iter(),
            ))
            .unwrap()
        };
        assert_eq!(read("3"), Value::Int(3));
        assert_eq!(read("-1"), Value::Int(-1));
        assert_eq!(read("0.5"), Value::Float(0.5));
        assert_eq!(read("1e400"), Value::Float(f64::INFINITY));
    }

    #[test]
    fn the_lists_of_expected_fields_are_complete() {
        let listed = |reason: &str| {
            reason
                .split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            listed(SETTINGS_FIELDS),
            [
                "name",
                "max_requests",
                "interval",
                "bucket_period",
                "timeout",
                "policy",
                "open_duration"
            ]
        );
        let ema = listed(EMA_FIELDS);
        assert_eq!(ema.len(), 10);
        assert_eq!(listed(EMA_POLICY_FIELDS)[1..], ema[..]);
        assert_eq!(
            listed(policy_kinds!()),
            [
                "consecutive_failures",
                "failure_ratio",
                "failure_count",
                "slow_calls",
                "ema",
                "any_of"
            ]
        );
        // Every listed EMA field is read.
        for field in &ema {
            let value = Value::Map(vec![(field.clone(), Value::Int(1))]);
            let entries = table(&value, Path::Root("ema"), "").unwrap();
            let err = ema_err(entries);
            assert_ne!(err, Some(EMA_FIELDS), "{field}");
        }
    }

    fn ema_err(entries: &[(String, Value)]) -> Option<&'static str> {
        ema(entries, Path::Root("ema"), false)
            .err()
            .map(|err| err.reason())
    }
}
