//! Breakers for a map of named settings: [`build_all`] and [`SettingsMap`].

use std::borrow::Borrow;
use std::collections::btree_map::{self, BTreeMap};
use std::ops::{Deref, DerefMut};

use super::{DynBreaker, Settings};
use crate::error::ConfigError;

/// Breakers for a map of named settings (e.g. one breaker per downstream, as a file's tables
/// name them: a [`SettingsMap`], a `BTreeMap<String, Settings>`, an array of pairs), in the
/// map's order, each paired with its key; with the default clock and no callbacks (see
/// [From configuration](super#from-configuration) to add them).
///
/// A breaker's name is its `name` when that is set, and its map key otherwise: a file can key
/// its tables by a short id and still give a breaker a longer name. Errors name the breaker
/// by that same name.
///
/// # Errors
///
/// The first invalid entry's [`ConfigError`] (see [`Settings::to_builder`]), naming the
/// breaker.
///
/// # Examples
///
/// ```
/// use lazybreaker::config::{self, PolicyConfig, Settings};
/// use lazybreaker::policy::EmaConfig;
/// use lazybreaker::Knobs;
/// use std::time::Duration;
///
/// let with_policy = |policy| Settings { policy, ..Settings::default() };
/// let settings = [
///     ("inventory", with_policy(PolicyConfig::ConsecutiveFailures { threshold: 3 })),
///     ("payments", Settings {
///         knobs: Knobs { name: "payments-eu".into(), ..Knobs::default() },
///         ..Settings::default()
///     }),
///     ("search", with_policy(PolicyConfig::Ema(EmaConfig {
///         min_isolation: Duration::from_secs(60),
///         max_isolation: Duration::from_secs(30),
///         ..EmaConfig::default()
///     }))),
/// ];
/// let err = config::build_all(settings.clone()).unwrap_err();
/// assert_eq!(err.breaker(), Some("search"));
/// assert_eq!(err.field(), "policy.min_isolation");
///
/// let fine = settings[..2].iter().map(|(key, settings)| (key, settings));
/// let breakers = config::build_all(fine)?;
/// assert_eq!(breakers[0].1.name(), "inventory");
/// assert_eq!((breakers[1].0.as_str(), breakers[1].1.name()), ("payments", "payments-eu"));
/// # Ok::<(), lazybreaker::ConfigError>(())
/// ```
pub fn build_all<I, K, S>(settings: I) -> Result<Vec<(String, DynBreaker)>, ConfigError>
where
    I: IntoIterator<Item = (K, S)>,
    K: AsRef<str>,
    S: Borrow<Settings>,
{
    settings
        .into_iter()
        .map(|(key, settings)| {
            let (key, settings) = (key.as_ref(), settings.borrow());
            let name = if settings.knobs.name.is_empty() {
                key
            } else {
                &settings.knobs.name
            };
            // `to_builder` checks everything `build_strict` would.
            let builder = settings.to_builder().map_err(|err| err.for_breaker(name))?;
            Ok((key.to_owned(), builder.name(name).build()))
        })
        .collect()
}

/// A file of breakers: [`Settings`] keyed by breaker name, in key order.
///
/// A `BTreeMap<String, Settings>` (it dereferences to one, and converts both ways) that, with
/// the `serde` feature, reads a file whose top-level tables are the breakers. Unlike a plain
/// map, whose [`Settings`] cannot know the key they are read under, it attributes an error
/// inside an entry to that entry's breaker: `` breaker `search`: invalid `intervall` =
/// "10s": unknown field, … `` for a typo in `[search]`. [`build_all`] builds its breakers;
/// see [From configuration](super#from-configuration).
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "serde")]
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use lazybreaker::config::SettingsMap;
///
/// let breakers: SettingsMap = toml::from_str(r#"
///     [payments]
///     timeout = "30s"
///     [search.policy]
///     kind = "consecutive_failures"
///     threshold = 3
/// "#)?;
/// assert_eq!(breakers.len(), 2);
/// assert!(breakers.get("search").is_some());
///
/// let err = toml::from_str::<SettingsMap>(r#"
///     [payments]
///     timeout = "30s"
///     [search]
///     policy = { kind = "consecutive_failures", threshold = -3 }
/// "#)
/// .unwrap_err();
/// assert_eq!(
///     err.message(),
///     "breaker `search`: invalid `policy.threshold` = -3: expected a non-negative integer"
/// );
/// # Ok(())
/// # }
/// # #[cfg(not(feature = "serde"))]
/// # fn main() {}
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize), serde(transparent))]
pub struct SettingsMap(pub BTreeMap<String, Settings>);

impl Deref for SettingsMap {
    type Target = BTreeMap<String, Settings>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl DerefMut for SettingsMap {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl From<BTreeMap<String, Settings>> for SettingsMap {
    fn from(map: BTreeMap<String, Settings>) -> Self {
        Self(map)
    }
}

impl From<SettingsMap> for BTreeMap<String, Settings> {
    fn from(map: SettingsMap) -> Self {
        map.0
    }
}

impl<K: Into<String>> FromIterator<(K, Settings)> for SettingsMap {
    fn from_iter<I: IntoIterator<Item = (K, Settings)>>(iter: I) -> Self {
        Self(iter.into_iter().map(|(k, s)| (k.into(), s)).collect())
    }
}

impl IntoIterator for SettingsMap {
    type Item = (String, Settings);
    type IntoIter = btree_map::IntoIter<String, Settings>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a SettingsMap {
    type Item = (&'a String, &'a Settings);
    type IntoIter = btree_map::Iter<'a, String, Settings>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}
