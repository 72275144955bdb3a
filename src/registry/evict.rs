//! Eviction, evaluated lazily: when a bounded registry is full, the insertion that needs
//! room evicts idle breakers, least recently used first, in batches (and, when a scan finds
//! nothing idle at all, skips the scans of the next batch of insertions), so that a flood of
//! new keys costs a bounded amount per key, amortised; and the sweeps callers run themselves
//! ([`remove_idle`](super::Registry::remove_idle)).
//!
//! An insertion answers [`RegistryFull`](super::RegistryFull) only after a scan that found no
//! idle breaker at all. A scan that found idle breakers but evicted none (a concurrent scan
//! evicted them first), or an eviction whose room another insertion took, is retried: some
//! other insertion made progress meanwhile, so the retries end. The skip counter is the one
//! approximation: it is set only by a scan that found nothing idle, and cleared by every
//! control of the registry that can make a breaker idle
//! ([`release_all`](super::Registry::release_all),
//! [`force_closed_all`](super::Registry::force_closed_all)). A breaker that becomes idle
//! behind the registry's back (its last permit or `Arc` dropped, a probe closing it, a control
//! called on the breaker itself) is found by the first scan after the skipped ones: at most
//! `max_keys / 16 - 1` new keys later.
//!
//! A breaker can be evicted when it is *idle*: closed and not forced (an open or half-open
//! breaker is protecting its dependency, a forced one carries an operator's decision), and
//! held by nobody but the registry (no owned permit outstanding, no `Arc` kept by a caller).
//! The last check is made as part of the removal, which is one step of the map; a lookup that
//! races it may still get the breaker being evicted, which stays valid for that caller like
//! any removed breaker (its next lookup builds the key a new one), and a call lent the
//! breaker by [`with`](super::Registry::with) does not hold it.

use std::hash::{BuildHasher, Hash};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::nanos::Nanos;
use crate::observe::Observer;
use crate::policy::TripPolicy;

use super::{Registry, Slot, REFERENCED};

/// At most this share of the bound is evicted per full insertion (at least one breaker):
/// one scan then makes room for many insertions.
const BATCH_DIVISOR: usize = 16;

impl<P: TripPolicy, O: Observer> Slot<P, O> {
    /// The last use as the latest scan recorded it.
    fn seen(&self) -> Nanos {
        self.used.load(Ordering::Relaxed) & !REFERENCED
    }

    /// Whether the breaker can be evicted: see the module documentation.
    fn evictable(&self) -> bool {
        Arc::strong_count(&self.breaker) == 1 && self.breaker.is_closed_and_unforced()
    }
}

impl<K, P: TripPolicy, O: Observer, S> Registry<K, P, O, S>
where
    K: Hash + Eq,
    S: BuildHasher + Clone,
{
    /// Makes room for one insertion into a full registry: whether the insertion should try
    /// again (a scan found idle breakers, whether it or a concurrent scan evicted them). After
    /// a scan that found nothing idle (every breaker open, half-open, forced or in use), the
    /// next `batch - 1` full insertions are answered at once without scanning, so that a flood
    /// of new keys into a registry that cannot make room costs a bounded amount per key too:
    /// one scan of `max_keys` slots per `max_keys / 16` keys, at most 16 slots per key.
    pub(super) fn evict_for_room(&self, max_keys: usize) -> bool {
        let skipped = self
            .skip_scans
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok();
        if skipped {
            return false;
        }
        if self.evict_lru(max_keys).is_some() {
            return true;
        }
        let batch = (max_keys / BATCH_DIVISOR).max(1);
        self.skip_scans.store(batch - 1, Ordering::Relaxed);
        false
    }

    /// The skipped scans end: something may have become idle (see the module documentation).
    pub(super) fn rescan(&self) {
        self.skip_scans.store(0, Ordering::Relaxed);
    }

    /// Evicts up to a batch of idle breakers, least recently used first; returns how many,
    /// or `None` if the scan found none idle (`Some(0)`: a concurrent scan took them first).
    fn evict_lru(&self, max_keys: usize) -> Option<usize> {
        let batch = (max_keys / BATCH_DIVISOR).max(1);
        let now = self.clock.now();
        // The `batch` oldest idle last-use times: the threshold to evict at or below.
        let mut oldest: Vec<Nanos> = self
            .map
            .pin()
            .iter()
            .map(|(_, slot)| slot)
            .filter(|slot| slot.evictable())
            .map(|slot| slot.last_used(now))
            .collect();
        if oldest.is_empty() {
            return None;
        }
        let nth = batch.min(oldest.len()) - 1;
        let (_, &mut threshold, _) = oldest.select_nth_unstable(nth);
        let mut evicted = self.evict_where(|slot| slot.seen() <= threshold, batch);
        // None at or below the threshold any more (a concurrent scan or sweep marked them
        // used again since): any idle one will do, so that two scans that keep marking each
        // other's candidates cannot both retry for ever. `Some(0)` is left only when nothing
        // is idle at this second look, because another scan evicted it or a caller holds it.
        if evicted == 0 {
            evicted = self.evict_where(|_| true, 1);
        }
        Some(evicted)
    }

    /// Evicts up to `limit` idle breakers that `pick` chooses; returns how many. Each
    /// removal checks, as one step of the map, that the breaker is still idle and chosen.
    pub(super) fn evict_where(&self, pick: impl Fn(&Slot<P, O>) -> bool, limit: usize) -> usize {
        let map = self.map.pin();
        let mut evicted = 0;
        for (key, slot) in map.iter() {
            if evicted == limit {
                break;
            }
            if pick(slot)
                && slot.evictable()
                && self.remove_slot(&map, key, |now| pick(now) && now.evictable())
            {
                evicted += 1;
            }
        }
        evicted
    }
}
