//! Tombstones: the UIDs of owners whose deletion a watch reported, so that a collector can tell
//! a dangling owner reference from the graph alone.
//!
//! Invariant: a UID is recorded only once a builder has applied a watch's delete event for it (a
//! real one, never a worker's virtual delete), and Kubernetes never reuses a UID, so an entry
//! never turns false; it can only be forgotten. Forgetting costs a lookup: the collector then
//! verifies the owner with a GET, as upstream always does.
//!
//! Model: builders record, collector workers look up, each under the lock of one of [`SHARDS`]
//! shards chosen by UID. Each shard keeps two generations of at most `capacity / SHARDS / 2`
//! UIDs: when the young one is full it becomes the old one and the old one is dropped, so memory
//! stays bounded (about 20–40 bytes per entry, as a hash set of 16-byte UIDs) and the newest
//! deletions, the ones whose dependents are being collected, are the ones remembered.
//! Upstream's absentOwnerCache holds 500 entries; a cascade through a million-object cluster
//! deletes far more owners than that before their dependents are reached, hence
//! [`DEFAULT_CAPACITY`].

use super::Uid;
use parking_lot::Mutex;
use std::collections::HashSet;

/// Entries kept by default: owners of a million-object cascade (owners are a fraction of the
/// objects), at most about 40 MB.
pub const DEFAULT_CAPACITY: usize = 1 << 20;

/// Shards of the set; enough that workers and builders on a few cores rarely meet on one lock.
const SHARDS: usize = 16;

type UidSet = HashSet<Uid, foldhash::fast::FixedState>;

/// A bounded set of deleted UIDs; see the [module docs](self).
pub struct Tombstones {
    shards: Box<[Mutex<Generations>]>,
    /// Entries per generation of one shard; 0 keeps nothing.
    generation: usize,
}

#[derive(Default)]
struct Generations {
    young: UidSet,
    old: UidSet,
}

impl Tombstones {
    /// A set remembering about `capacity` UIDs (none for 0).
    pub fn new(capacity: usize) -> Self {
        Tombstones {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            generation: capacity / SHARDS / 2,
        }
    }

    fn shard(&self, uid: &Uid) -> &Mutex<Generations> {
        &self.shards[(uid.hash64() % SHARDS as u64) as usize]
    }

    /// `uid` is to be remembered: by the builders in the graph's set, when a watch reported it
    /// deleted; by the collector workers in their own set of orphaned owners.
    pub fn record(&self, uid: Uid) {
        if self.generation == 0 {
            return;
        }
        let mut shard = self.shard(&uid).lock();
        if shard.young.len() >= self.generation {
            shard.old = std::mem::take(&mut shard.young);
        }
        shard.young.insert(uid);
    }

    /// True when `uid` is remembered.
    pub fn contains(&self, uid: &Uid) -> bool {
        let shard = self.shard(uid).lock();
        shard.young.contains(uid) || shard.old.contains(uid)
    }

    /// How many UIDs are remembered.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| {
                let s = s.lock();
                s.young.len() + s.old.len()
            })
            .sum()
    }

    /// True when nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Default for Tombstones {
    fn default() -> Self {
        Tombstones::new(DEFAULT_CAPACITY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tombstones_should_remember_the_newest_uids_within_their_capacity() {
        let tombstones = Tombstones::new(SHARDS * 2 * 4); // 4 per generation of a shard
        let uids: Vec<Uid> = (0..1000u128).map(Uid::new_v4).collect();
        for uid in &uids {
            tombstones.record(uid.clone());
        }
        assert!(tombstones.len() <= SHARDS * 2 * 4, "{}", tombstones.len());
        assert!(tombstones.contains(uids.last().expect("a uid")), "the newest is kept");
        assert!(!tombstones.contains(&uids[0]), "the oldest is forgotten");
        assert!(!tombstones.contains(&Uid::new_v4(5000)), "never recorded");
    }

    #[test]
    fn tombstones_of_capacity_zero_should_keep_nothing() {
        let tombstones = Tombstones::new(0);
        tombstones.record(Uid::new_v4(1));
        assert!(tombstones.is_empty());
        assert!(!tombstones.contains(&Uid::new_v4(1)));
    }
}
