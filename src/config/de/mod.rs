//! Reading configuration (the `serde` feature): every value's `Deserialize`, and the typed
//! route [`Settings::from_deserializer`]. [`value`] holds the format-agnostic part (the
//! value tree, paths, the table reader), [`schema`] this crate's file shape.
//!
//! serde's derived internally tagged enums buffer a table before they know its `kind`, and
//! then report a wrong type inside it against the whole table, without the field's name. So
//! nothing here is derived: each table is read into a small self-describing [`Value`] tree
//! (through `deserialize_any`), then converted into its typed value by functions that track
//! the path (`policy.policies[1].min_requests`) and answer a [`ConfigError`] naming that path,
//! the value as written, why it does not fit, and the breaker (the table's `name`, or its key
//! in a [`SettingsMap`]). Through a format crate the message is the `ConfigError`'s own
//! (`D::Error::custom`); [`Settings::from_deserializer`] keeps it typed.
//!
//! [`Settings::from_deserializer`]: crate::config::Settings::from_deserializer
//! [`SettingsMap`]: crate::config::SettingsMap

mod pool;
mod schema;
mod value;

use serde::de::{self, Deserialize, Deserializer};

use crate::error::ConfigError;
use value::Value;

/// Why configuration could not be read: the input is not valid in its format, or it is but
/// does not describe valid configuration.
///
/// Returned by [`Settings::from_deserializer`], [`PolicyConfig::from_deserializer`] and
/// [`SettingsMap::from_deserializer`], which keep apart what the format crate reports and
/// what this crate does. (Through `Deserialize`, e.g. `toml::from_str`, both arrive as the format's
/// error, with the [`ConfigError`]'s message.) A [`ConfigError`] converts into it, so the
/// range checks of [`Settings::validate`] join with `?`.
///
/// [`Settings::from_deserializer`]: crate::config::Settings::from_deserializer
/// [`PolicyConfig::from_deserializer`]: crate::config::PolicyConfig::from_deserializer
/// [`SettingsMap::from_deserializer`]: crate::config::SettingsMap::from_deserializer
/// [`Settings::validate`]: crate::config::Settings::validate
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
