//! The rules of the breakers built alike, shared: one [`Rules`] for all of them, not a copy
//! in each (a registry's keys, a pool's endpoints, built by one factory).
//!
//! The rules of the last breaker built are kept; a breaker built by the same rules shares
//! them, one built by others keeps its own and is kept in their place. Rules are plain
//! values, read-only once built: sharing them changes nothing but the memory they take.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::machine::{Rules, RulesRef};

/// The rules of the last breaker built.
static LAST: Mutex<Option<Arc<Rules>>> = Mutex::new(None);

/// `rules`: a default breaker's in their static; any others shared with every breaker built
/// by the same ones since the last built by others.
pub(super) fn shared(rules: Rules) -> RulesRef {
    RulesRef::of(rules, |rules| {
        let mut last = LAST.lock();
        match last.as_ref() {
            Some(kept) if **kept == rules => Arc::clone(kept),
            _ => Arc::clone(last.insert(Arc::new(rules))),
        }
    })
}
