//! absentOwnerCache: owners known not to exist (spec §1.4).
//!
//! An LRU keyed by the full identity (coordinates plus namespace); both [`add`] and [`has`] count
//! as a use. The builder writes it when an owner with dependents is deleted; workers write it
//! after a GET proves an owner absent, and read it before every owner GET. UIDs are never reused,
//! so an entry can only go stale by eviction, never by becoming wrong.
//!
//! [`add`]: AbsentOwnerCache::add
//! [`has`]: AbsentOwnerCache::has

use crate::graph::Identity;
use lru::LruCache;
use parking_lot::Mutex;
use std::num::NonZeroUsize;

/// Upstream's capacity.
pub const DEFAULT_CAPACITY: usize = 500;

/// A thread-safe LRU set of absent owner identities.
pub struct AbsentOwnerCache {
    lru: Mutex<LruCache<Identity, ()>>,
}

impl AbsentOwnerCache {
    /// A cache holding at most `capacity` identities (at least one).
    pub fn new(capacity: usize) -> Self {
        let capacity = NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN);
        AbsentOwnerCache {
            lru: Mutex::new(LruCache::new(capacity)),
        }
    }

    /// Records `identity` as absent.
    pub fn add(&self, identity: Identity) {
        self.lru.lock().put(identity, ());
    }

    /// True when `identity` is recorded; promotes it.
    pub fn has(&self, identity: &Identity) -> bool {
        self.lru.lock().get(identity).is_some()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.lru.lock().len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every entry.
    pub fn clear(&self) {
        self.lru.lock().clear();
    }
}

impl Default for AbsentOwnerCache {
    fn default() -> Self {
        Self::new(DEFAULT_CAPACITY)
    }
}
