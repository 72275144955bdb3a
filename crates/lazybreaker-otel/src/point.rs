//! What the instruments' data points share: an attribute pair, a count as a level.

use opentelemetry::KeyValue;

/// `[attribute, name = value]`.
pub(crate) fn pair(attribute: &KeyValue, name: &'static str, value: &'static str) -> [KeyValue; 2] {
    [attribute.clone(), KeyValue::new(name, value)]
}

/// A count as a gauge's or up-down counter's value (saturating: never above `i64::MAX`).
pub(crate) fn level(n: impl TryInto<i64>) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}
