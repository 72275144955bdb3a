//! [`RegistrySettings`]: a [`Registry`] described by plain values: settings for named keys, a
//! default for every other key, and keys that are never broken.

use std::collections::BTreeSet;

use crate::breaker::Breaker;
use crate::error::ConfigError;
use crate::policy::{ConsecutiveFailures, TripPolicy};
use crate::registry::Registry;

use super::{DynBuilder, Settings, SettingsMap};

/// A [`Registry`] of breakers keyed by name (a method, a host, an endpoint): the settings of
/// the keys listed in `breakers`, `default` for every other key, and `exempt` keys that are
/// never broken (Kitex's "Health must not break"): their breakers count every call but no
/// policy or failure, not even a fatal one, ever trips them (a manual control, including a permit's
/// `failure_open_for`, still applies to them, as to any breaker).
///
/// In a file (with the `serde` feature):
///
/// ```toml
/// max_keys = 1000
/// exempt = ["Health"]
///
/// [default]
/// timeout = "30s"
/// policy = { kind = "consecutive_failures", threshold = 5 }
///
/// [breakers.Sub]
/// policy = { kind = "failure_ratio", ratio = 0.5, min_requests = 20 }
/// ```
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "serde")]
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use lazybreaker::config::RegistrySettings;
/// use lazybreaker::State;
///
/// let settings: RegistrySettings = toml::from_str(r#"
///     exempt = ["Health"]
///     [default]
///     policy = { kind = "consecutive_failures", threshold = 1 }
///     [breakers.Sub]
///     policy = { kind = "consecutive_failures", threshold = 3 }
/// "#)?;
/// let registry = settings.build()?;
/// for method in ["Get", "Sub", "Health"] {
///     let _ = registry.breaker(method).execute(|| Err::<(), _>("down"));
/// }
/// assert_eq!(registry.breaker("Get").state(), State::Open);     // the default: 1 failure
/// assert_eq!(registry.breaker("Sub").state(), State::Closed);   // its own: 3 failures
/// assert_eq!(registry.breaker("Health").state(), State::Closed); // never broken
/// # Ok(())
/// # }
/// # #[cfg(not(feature = "serde"))]
/// # fn main() {}
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RegistrySettings {
    /// The bound on the registry's keys ([`Registry::max_keys`]); none by default. Zero is
    /// refused (by a file and by [`build`](RegistrySettings::build)): a registry holds at
    /// least one key, and an unbounded one leaves `max_keys` out.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub max_keys: Option<usize>,
    /// Keys whose breakers never trip ([`Knobs::never_trips`](crate::Knobs::never_trips)):
    /// they count every call (for metrics), built from their own entry's other settings if
    /// `breakers` lists them, else from `default`'s. (An entry may also set `never_trips`
    /// itself.)
    pub exempt: BTreeSet<String>,
    /// The settings of every key not listed in `breakers`. Its `name` is ignored: each
    /// breaker is named after its key.
    pub default: Settings,
    /// Settings per key.
    pub breakers: SettingsMap,
}

impl RegistrySettings {
    /// The registry these settings describe, after checking every entry as
    /// [`Settings::to_builder`] does.
    ///
    /// # Errors
    ///
    /// A `max_keys` of zero; or the first invalid entry's [`ConfigError`]: a listed key's
    /// names its breaker; the default's names the field under `default`
    /// (`default.policy.ratio`).
    pub fn build(&self) -> Result<Registry<String, Box<dyn TripPolicy>>, ConfigError> {
        if self.max_keys == Some(0) {
            return Err(ConfigError::new(
                "max_keys",
                0,
                "must be at least 1 (leave `max_keys` out for a registry without a bound)",
            ));
        }
        let registry = Registry::new(self.factory()?);
        Ok(match self.max_keys {
            Some(max) => registry.max_keys(max),
            None => registry,
        })
    }

    /// The factory [`build`](RegistrySettings::build) gives its registry, after the same
    /// checks: a builder per key, named after it, from its entry or the default. For a
    /// registry that adds to every builder (an observer, a callback) or sets its own clock;
    /// `max_keys` is then the caller's to apply.
    ///
    /// # Errors
    ///
    /// As [`build`](RegistrySettings::build).
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::config::RegistrySettings;
    /// use lazybreaker::{ManualClock, Registry};
    ///
    /// let settings = RegistrySettings::default();
    /// let factory = settings.factory()?;
    /// let registry = Registry::new(move |key: &String| {
    ///     factory(key).on_state_change(|name, from, to| println!("{name}: {from} -> {to}"))
    /// })
    /// .clock(ManualClock::new());
    /// assert_eq!(registry.breaker("Get").name(), "Get");
    /// # Ok::<(), lazybreaker::ConfigError>(())
    /// ```
    pub fn factory(
        &self,
    ) -> Result<impl Fn(&String) -> DynBuilder + Send + Sync + 'static, ConfigError> {
        self.default
            .validate()
            .map_err(|err| err.within("default"))?;
        for (key, settings) in self.breakers.iter() {
            settings.validate().map_err(|err| err.for_breaker(key))?;
        }
        let settings = self.clone();
        Ok(move |key: &String| settings.builder_for(key))
    }

    /// The builder for `key`, named after it, never tripping if `key` is exempt. Every entry
    /// was checked by `factory`, so the fallback (the builder's defaults) is never used.
    fn builder_for(&self, key: &str) -> DynBuilder {
        let mut settings = self.breakers.get(key).unwrap_or(&self.default).clone();
        settings.knobs.name = key.to_owned();
        settings.knobs.never_trips |= self.exempt.contains(key);
        settings.to_builder().unwrap_or_else(|_| {
            Breaker::builder()
                .knobs(settings.knobs)
                .policy(Box::new(ConsecutiveFailures::default()) as Box<dyn TripPolicy>)
        })
    }
}
