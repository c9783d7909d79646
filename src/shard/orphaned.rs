//! Owners orphaned lately, remembered beyond one collector instance: the guard against the
//! orphan race (kubernetes#26120) survives a handoff.
//!
//! A dependent created just before its owner's Orphan DELETE, but seen late, still names the
//! owner once the owner is gone; it must lose the reference, not its life. A collector remembers
//! the owners it orphaned ([`crate::collector::partial_view`]), but a sharded replica starts a
//! new collector whenever its ranges change, and a namespace can pass to another replica, which
//! may then be the first to see that dependent. So each replica keeps one [`Orphaned`] for all
//! its collectors, publishes the owners it orphaned on its Lease, and takes in every peer's,
//! dead peers' included (their Leases stay until deleted as gone for good).
//!
//! # Invariants
//!
//! - An owner stays remembered for [`REMEMBERED_FOR`] after it was orphaned or heard of, far
//!   longer than a handoff and a resync of the new holder take.
//! - A report names at most [`MAX_PUBLISHED`] owners, the latest orphaned; keys are the findings'
//!   ([`super::findings::key`]), and a key shared by chance with another owner only keeps a
//!   reference that could have gone: it never deletes.

use super::findings::{key, OwnerSet};
use crate::graph::Uid;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::time::Duration;
use tokio::time::Instant;

/// How long an orphaned owner is remembered.
pub const REMEMBERED_FOR: Duration = Duration::from_secs(600);

/// The most owners a report names as orphaned lately: 4 096 keys, 43 KiB of base64.
pub const MAX_PUBLISHED: usize = 4096;

/// Owners orphaned lately by this replica or its peers; see the [module docs](self).
#[derive(Default)]
pub struct Orphaned {
    /// Every owner remembered, by key, with when it was orphaned or heard of.
    known: papaya::HashMap<u64, Instant, foldhash::fast::RandomState>,
    /// The owners this replica orphaned, oldest first: what it publishes.
    own: Mutex<VecDeque<(Instant, u64)>>,
}

impl std::fmt::Debug for Orphaned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Orphaned").field("known", &self.known.len()).finish()
    }
}

impl Orphaned {
    /// This replica orphaned `uid`.
    pub fn record(&self, uid: &Uid) {
        let (key, now) = (key(uid), Instant::now());
        self.known.pin().insert(key, now);
        let mut own = self.own.lock();
        own.push_back((now, key));
        if own.len() > MAX_PUBLISHED {
            own.pop_front();
        }
    }

    /// True when `uid` was orphaned lately, here or by a peer.
    pub fn contains(&self, uid: &Uid) -> bool {
        !self.known.is_empty()
            && self
                .known
                .pin()
                .get(&key(uid))
                .is_some_and(|at| at.elapsed() < REMEMBERED_FOR)
    }

    /// Takes in the owners a peer published.
    pub fn hear(&self, published: &OwnerSet) {
        let (known, now) = (self.known.pin(), Instant::now());
        for key in published.keys() {
            known.get_or_insert(*key, now);
        }
    }

    /// What this replica publishes: the owners it orphaned within [`REMEMBERED_FOR`], the
    /// latest [`MAX_PUBLISHED`]. Forgets what is older.
    pub fn published(&self) -> OwnerSet {
        self.known.pin().retain(|_, at| at.elapsed() < REMEMBERED_FOR);
        let mut own = self.own.lock();
        while own.front().is_some_and(|(at, _)| at.elapsed() >= REMEMBERED_FOR) {
            own.pop_front();
        }
        OwnerSet::new(own.iter().map(|(_, key)| *key).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uid(i: u128) -> Uid {
        Uid::new_v4(i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c834))
    }

    #[tokio::test(start_paused = true)]
    async fn an_owner_should_be_remembered_from_a_peer_and_forgotten_in_time() {
        let (here, peer) = (Orphaned::default(), Orphaned::default());
        peer.record(&uid(1));
        here.hear(&peer.published());
        assert!(here.contains(&uid(1)) && !here.contains(&uid(2)));
        assert!(here.published().is_empty(), "what it heard is not its own to publish");
        tokio::time::advance(REMEMBERED_FOR).await;
        assert!(!here.contains(&uid(1)));
        assert!(peer.published().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_report_should_name_the_latest_owners_only() {
        let orphaned = Orphaned::default();
        for i in 0..(MAX_PUBLISHED as u128 + 10) {
            orphaned.record(&uid(i));
        }
        let published = orphaned.published();
        assert_eq!(published.len(), MAX_PUBLISHED);
        assert!(published.contains(&uid(MAX_PUBLISHED as u128 + 9)) && !published.contains(&uid(0)));
        assert!(orphaned.contains(&uid(0)), "remembered here all the same");
    }
}
