//! The format-agnostic half of reading configuration: [`Value`], the tree a self-describing
//! format hands to `deserialize_any`; [`Path`], where a value is; the scalar readers; and
//! [`Table`], the one table-driven reader of a table's fields. Nothing here knows this
//! crate's file shape (that is [`super::schema`]).

use std::cell::Cell;
use std::fmt::{self, Display, Write as _};
use std::time::Duration;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use crate::error::ConfigError;
use crate::serde_duration;

// -----------------------------------------------------------------------------------------
// The value tree

/// A value as a self-describing format wrote it, before it is known what it should be.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Value {
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
pub(super) const TOML_DATETIME: &str = "$__toml_private_datetime";

/// The key under which serde_json hands a number to `deserialize_any` when its
/// `arbitrary_precision` feature is on (anywhere in the build), as a one-entry map.
pub(super) const JSON_NUMBER: &str = "$serde_json::private::Number";

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let named = Cell::new(false);
        deserializer.deserialize_any(ValueVisitor(Some((Path::Root("value"), &named))))
    }
}

/// Reads a [`Value`]; with a place, a format's error inside it (a JSON number beyond `f64`)
/// names the field it failed at, once (`named`: the innermost table or list did).
#[derive(Clone, Copy)]
pub(super) struct ValueVisitor<'p>(pub(super) Option<(Path<'p>, &'p Cell<bool>)>);

/// A table's or a list's item, at `path`.
struct Item<'p> {
    path: Path<'p>,
    named: &'p Cell<bool>,
}

impl<'de> DeserializeSeed<'de> for Item<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer
            .deserialize_any(ValueVisitor(Some((self.path, self.named))))
            .map_err(|err| {
                if self.named.replace(true) {
                    err
                } else {
                    de::Error::custom(format_args!("invalid `{}`: {err}", self.path.render()))
                }
            })
    }
}

impl<'de> Visitor<'de> for ValueVisitor<'_> {
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
        deserializer.deserialize_any(self)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        let unnamed = Cell::new(true);
        let (parent, named) = self.0.unwrap_or((Path::Root("value"), &unnamed));
        loop {
            let path = parent.index(items.len());
            match seq.next_element_seed(Item { path, named })? {
                Some(item) => items.push(item),
                None => break,
            }
        }
        Ok(Value::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0).min(64));
        let unnamed = Cell::new(true);
        let (parent, named) = self.0.unwrap_or((Path::Root("value"), &unnamed));
        while let Some(Key(key)) = map.next_key::<Key>()? {
            let path = parent.key(&key);
            let value = map.next_value_seed(Item { path, named })?;
            entries.push((key, value));
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
pub(super) struct Key(pub(super) String);

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(KeyVisitor)
    }
}

pub(super) struct KeyVisitor;

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
pub(super) enum Path<'a> {
    /// The value being read, named for an error about itself (`settings`, `policy`).
    Root(&'static str),
    /// A field of a table.
    Key(&'a Path<'a>, &'a str),
    /// An item of a list.
    Index(&'a Path<'a>, usize),
}

impl<'a> Path<'a> {
    pub(super) fn key(&'a self, key: &'a str) -> Path<'a> {
        Path::Key(self, key)
    }

    pub(super) fn index(&'a self, index: usize) -> Path<'a> {
        Path::Index(self, index)
    }

    pub(super) fn render(&self) -> String {
        match *self {
            Path::Root(name) => name.to_owned(),
            Path::Key(Path::Root(_), key) => key.to_owned(),
            Path::Key(parent, key) => format!("{}.{key}", parent.render()),
            Path::Index(parent, index) => format!("{}[{index}]", parent.render()),
        }
    }

    pub(super) fn error(&self, value: impl Display, reason: &'static str) -> ConfigError {
        ConfigError::new(self.render(), value, reason)
    }

    pub(super) fn missing(&self, reason: &'static str) -> ConfigError {
        self.error("(missing)", reason)
    }
}

// -----------------------------------------------------------------------------------------
// Scalars

/// A table's entries, each key once.
pub(super) fn table<'v>(
    value: &'v Value,
    path: Path<'_>,
    expected: &'static str,
) -> Result<&'v [(String, Value)], ConfigError> {
    let Value::Map(entries) = value else {
        return Err(path.error(value, expected));
    };
    // A set, not a pairwise check: a table of n keys costs O(n), not O(n²).
    let mut keys = std::collections::HashSet::with_capacity(entries.len());
    for (key, value) in entries {
        if !keys.insert(key.as_str()) {
            return Err(path.key(key).error(value, "duplicate field"));
        }
    }
    Ok(entries)
}

pub(super) fn string(value: &Value, path: Path<'_>) -> Result<String, ConfigError> {
    match value {
        Value::Str(text) => Ok(text.clone()),
        _ => Err(path.error(value, "expected a string")),
    }
}

pub(super) fn u64_of(value: &Value, path: Path<'_>) -> Result<u64, ConfigError> {
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

pub(super) fn u32_of(value: &Value, path: Path<'_>) -> Result<u32, ConfigError> {
    let n = u64_of(value, path)?;
    u32::try_from(n).map_err(|_| path.error(value, "expected an integer within [0, 4294967295]"))
}

pub(super) fn f64_of(value: &Value, path: Path<'_>) -> Result<f64, ConfigError> {
    match *value {
        Value::Float(x) => Ok(x),
        // As serde reads an `f64`: an integer is a number too.
        Value::Int(n) => Ok(n as f64),
        _ => Err(path.error(value, "expected a number")),
    }
}

pub(super) fn bool_of(value: &Value, path: Path<'_>) -> Result<bool, ConfigError> {
    match *value {
        Value::Bool(b) => Ok(b),
        _ => Err(path.error(value, "expected true or false")),
    }
}

/// A duration, at most the clock's range (`u64` nanoseconds, about 584 years): a longer one
/// would be cut to it silently (an interval and its bucket period both, into one window).
pub(super) fn duration(value: &Value, path: Path<'_>) -> Result<Duration, ConfigError> {
    let read = match value {
        Value::Str(text) => serde_duration::parse(text).map_err(|reason| path.error(value, reason)),
        _ => Err(path.error(value, serde_duration::EXPECTED)),
    }?;
    if read.as_nanos() > u128::from(u64::MAX) {
        return Err(path.error(
            value,
            "exceeds the clock's range (18446744073709551615ns, about 584 years)",
        ));
    }
    Ok(read)
}

// -----------------------------------------------------------------------------------------
// Tables of fields

/// How a field's value is read into the `T` being built (its slot in a draft).
pub(super) type Read<T> = fn(&mut T, &Value, Path<'_>) -> Result<(), ConfigError>;

/// One field a table may hold: its key, whether the table must have it, and how to read it.
pub(super) struct Field<T> {
    key: &'static str,
    required: bool,
    read: Read<T>,
}

impl<T> Field<T> {
    /// A field that may be omitted: the draft's value stays.
    pub(super) const fn optional(key: &'static str, read: Read<T>) -> Self {
        Self {
            key,
            required: false,
            read,
        }
    }

    /// A field the table must have.
    pub(super) const fn required(key: &'static str, read: Read<T>) -> Self {
        Self {
            key,
            required: true,
            read,
        }
    }
}

/// The shape of a table: its fields (in groups, so that two tables can share one group), a
/// key read elsewhere (a tagged table's `kind`), and the reasons for an unknown and a missing
/// field. The reasons are `&'static str` ([`ConfigError::reason`]), so each is spelled out:
/// a unit test checks that every `unknown` reason lists its table's keys.
pub(super) struct Table<T: 'static> {
    pub(super) fields: &'static [&'static [Field<T>]],
    pub(super) tag: Option<&'static str>,
    pub(super) unknown: &'static str,
    pub(super) missing: &'static str,
}

impl<T> Table<T> {
    /// Reads `entries` into `draft` (which holds the defaults of the optional fields), in the
    /// order written, stopping at the first unknown or ill-typed field; then refuses the first
    /// required field (in the table's order) that was not there.
    pub(super) fn read(
        &self,
        entries: &[(String, Value)],
        path: Path<'_>,
        mut draft: T,
    ) -> Result<T, ConfigError> {
        let mut seen = 0_u64; // a bit per field, in the table's order
        for (key, value) in entries {
            if self.tag == Some(key.as_str()) {
                continue;
            }
            let at = path.key(key);
            let (i, field) = self
                .all()
                .enumerate()
                .find(|(_, field)| field.key == key)
                .ok_or_else(|| at.error(value, self.unknown))?;
            (field.read)(&mut draft, value, at)?;
            seen |= 1 << i;
        }
        match self
            .all()
            .enumerate()
            .find(|(i, field)| field.required && seen & (1 << i) == 0)
        {
            Some((_, field)) => Err(path.key(field.key).missing(self.missing)),
            None => Ok(draft),
        }
    }

    /// Every field, in order.
    fn all(&self) -> impl Iterator<Item = &Field<T>> {
        self.fields.iter().flat_map(|group| group.iter())
    }

    /// The keys, the tag first (for the unit tests of the `unknown` reasons).
    #[cfg(test)]
    pub(super) fn keys(&self) -> Vec<&'static str> {
        self.tag
            .into_iter()
            .chain(self.all().map(|field| field.key))
            .collect()
    }
}

/// Stores a field's value read by `read`, for the [`Read`] functions of the tables.
pub(super) fn set<V>(slot: &mut V, read: Result<V, ConfigError>) -> Result<(), ConfigError> {
    *slot = read?;
    Ok(())
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
}
