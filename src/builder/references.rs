//! Owner-reference diffs and the identity helpers of virtual-delete handling (spec §3.3, §3.8).

use crate::graph::{Handle, Identity, OwnerRef, Uid};
use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

/// A ref whose UID an update removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemovedRef {
    /// Its position in the old list.
    pub old: usize,
    /// The owner's UID.
    pub uid: Uid,
    /// True when the ref blocked its owner's deletion.
    pub blocked: bool,
}

/// A ref present before and after an update whose fields changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangedRef {
    /// Its position in the old list.
    pub old: usize,
    /// Its position in the new list.
    pub new: usize,
    /// The owner's UID.
    pub uid: Uid,
    /// True when the change stopped the ref from blocking its owner's deletion.
    pub unblocks: bool,
}

/// The difference between two ownerReferences lists (upstream's `referencesDiffs`), by position
/// in the lists rather than by copies of the refs: a copy of a ref counts a reference to its
/// owner's name, a write to a line of memory the builder seldom has at hand.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReferenceDiff {
    /// Positions in the new list of the refs whose UID is new.
    pub added: Vec<usize>,
    /// Refs whose UID is gone, in their old order.
    pub removed: Vec<RemovedRef>,
    /// Same UID, some other field differs (controller and blockOwnerDeletion count).
    pub changed: Vec<ChangedRef>,
}

impl ReferenceDiff {
    /// True when nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }

    /// The UIDs of the owners the update stopped blocking: refs that blocked and were removed,
    /// then refs that stopped blocking.
    pub fn unblocked_owners(&self) -> impl Iterator<Item = &Uid> {
        let removed = self.removed.iter().filter(|r| r.blocked).map(|r| &r.uid);
        removed.chain(self.changed.iter().filter(|c| c.unblocks).map(|c| &c.uid))
    }
}

/// Matches refs by UID. A UID listed twice in `new` counts as matched once; the second copy is
/// `added`, as upstream's map-based diff makes it. A UID listed twice in `old` is compared through
/// its last ref and, when removed, reported once, as its first ref.
///
/// Every update runs this, and owner lists are short: an unchanged list costs one comparison, and
/// a short one is searched in place, so that the common update allocates nothing.
pub fn references_diffs(old: &[OwnerRef], new: &[OwnerRef]) -> ReferenceDiff {
    let mut diff = ReferenceDiff::default();
    if old == new {
        return diff;
    }
    let index = OldRefs::new(old);
    // matched[i]: a ref of `new` matched the UID whose last ref in `old` is at `i`.
    let mut matched = vec![false; old.len()];
    for (n, r) in new.iter().enumerate() {
        match index.last_of(&r.uid) {
            Some(i) if !matched[i] => {
                matched[i] = true;
                if old[i] != *r {
                    diff.changed.push(ChangedRef {
                        old: i,
                        new: n,
                        uid: r.uid.clone(),
                        unblocks: old[i].blocks_owner_deletion() && !r.blocks_owner_deletion(),
                    });
                }
            }
            _ => diff.added.push(n),
        }
    }
    for (i, r) in old.iter().enumerate() {
        let Some(last) = index.last_of(&r.uid) else { continue };
        if !matched[last] {
            matched[last] = true; // reported once, at its first ref
            diff.removed.push(RemovedRef {
                old: i,
                uid: r.uid.clone(),
                blocked: r.blocks_owner_deletion(),
            });
        }
    }
    diff
}

/// Where the last ref of each UID sits in an old owners list: searched in place while the list is
/// short, through a map beyond, so that a list of thousands of refs still diffs in linear time.
struct OldRefs<'a> {
    refs: &'a [OwnerRef],
    by_uid: Option<HashMap<Uid, usize, foldhash::fast::FixedState>>,
}

impl<'a> OldRefs<'a> {
    /// Longest list searched in place.
    const SCANNED: usize = 16;

    fn new(refs: &'a [OwnerRef]) -> Self {
        let by_uid = (refs.len() > Self::SCANNED).then(|| {
            // Later refs overwrite earlier ones: the last ref of a UID wins.
            refs.iter().enumerate().map(|(i, r)| (r.uid.clone(), i)).collect()
        });
        OldRefs { refs, by_uid }
    }

    fn last_of(&self, uid: &Uid) -> Option<usize> {
        match &self.by_uid {
            Some(map) => map.get(uid).copied(),
            None => self.refs.iter().rposition(|r| r.uid == *uid),
        }
    }
}

/// Splits `dependents` by whether their refs to `owner.uid` agree with `owner` (upstream's
/// `partitionDependents`). A dependent with one agreeing and one disagreeing ref is in both.
pub fn partition_dependents(dependents: &[Handle], owner: &Identity) -> (Vec<Handle>, Vec<Handle>) {
    let (mut matching, mut nonmatching) = (Vec::new(), Vec::new());
    for dep in dependents {
        let (mut found_match, mut found_mismatch) = (false, false);
        if !owner.namespace().is_empty() && owner.namespace() != dep.identity().namespace() {
            found_mismatch = true;
        } else {
            dep.with_owners(|refs| {
                for r in refs.iter().filter(|r| r.uid == owner.uid) {
                    if owner.matches_coordinates(r) {
                        found_match = true;
                    } else {
                        found_mismatch = true;
                    }
                }
            });
        }
        if found_match {
            matching.push(dep.clone());
        }
        if found_mismatch {
            nonmatching.push(dep.clone());
        }
    }
    (matching, nonmatching)
}

/// Orders identities by kind, apiVersion, namespace, name, then uid (upstream's
/// `referenceLessThan`).
pub fn reference_cmp(a: &Identity, b: &Identity) -> Ordering {
    (&a.kind(), &a.api_version(), &a.namespace(), &a.name)
        .cmp(&(&b.kind(), &b.api_version(), &b.namespace(), &b.name))
        .then_with(|| a.uid.to_string().cmp(&b.uid.to_string()))
}

/// Another identity the dependents use for `absent.uid`, to try next after `absent` was verified
/// absent: the first that sorts after `absent`, wrapping around to the smallest (upstream's
/// `getAlternateOwnerIdentity`).
pub fn alternate_owner_identity(dependents: &[Handle], absent: &Identity) -> Option<Identity> {
    let absent_is_cluster_scoped = absent.namespace().is_empty();
    let mut seen: HashSet<Identity> = HashSet::from([absent.clone()]);
    let (mut first, mut first_following): (Option<Identity>, Option<Identity>) = (None, None);
    for dep in dependents {
        let dep_ns = dep.identity().namespace();
        for r in dep.owners().into_iter().filter(|r| r.uid == absent.uid) {
            if absent.matches_coordinates(&r) && (absent_is_cluster_scoped || absent.namespace() == dep_ns) {
                continue; // this very reference was verified absent
            }
            let mut candidate = r.identity_in(dep_ns);
            if absent_is_cluster_scoped && candidate.type_meta() == absent.type_meta() {
                // absent proved this apiVersion/kind cluster-scoped
                candidate = candidate.with_namespace(absent.namespace().clone());
            }
            if !seen.insert(candidate.clone()) {
                continue;
            }
            if first.as_ref().is_none_or(|f| reference_cmp(&candidate, f).is_lt()) {
                first = Some(candidate.clone());
            }
            let follows = reference_cmp(absent, &candidate).is_lt();
            if follows
                && first_following
                    .as_ref()
                    .is_none_or(|f| reference_cmp(&candidate, f).is_lt())
            {
                first_following = Some(candidate);
            }
        }
    }
    first_following.or(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{Name, Sym, TypeMeta};
    use proptest::prelude::*;

    /// A diff as copies of the refs: (added, removed, changed as old and new).
    type Resolved = (Vec<OwnerRef>, Vec<OwnerRef>, Vec<(OwnerRef, OwnerRef)>);

    /// The diff as spec §3.3 states it, with maps: the model the in-place search must agree with.
    fn model(old: &[OwnerRef], new: &[OwnerRef]) -> Resolved {
        let by_uid: HashMap<_, &OwnerRef> = old.iter().map(|r| (r.uid.clone(), r)).collect();
        let mut unmatched: HashSet<_> = by_uid.keys().cloned().collect();
        let (mut added, mut changed) = (Vec::new(), Vec::new());
        for r in new {
            if unmatched.remove(&r.uid) {
                if by_uid[&r.uid] != r {
                    changed.push((by_uid[&r.uid].clone(), r.clone()));
                }
            } else {
                added.push(r.clone());
            }
        }
        let mut seen = HashSet::new();
        let removed = old
            .iter()
            .filter(|r| unmatched.contains(&r.uid) && seen.insert(r.uid.clone()))
            .cloned()
            .collect();
        (added, removed, changed)
    }

    /// `diff` with its positions replaced by the refs they point at, its other fields checked
    /// against those refs.
    fn resolve(diff: &ReferenceDiff, old: &[OwnerRef], new: &[OwnerRef]) -> Resolved {
        for r in &diff.removed {
            assert_eq!(
                (r.uid.clone(), r.blocked),
                (old[r.old].uid.clone(), old[r.old].blocks_owner_deletion())
            );
        }
        for c in &diff.changed {
            let (o, n) = (&old[c.old], &new[c.new]);
            assert_eq!(c.uid, n.uid);
            assert_eq!(c.unblocks, o.blocks_owner_deletion() && !n.blocks_owner_deletion());
        }
        (
            diff.added.iter().map(|&i| new[i].clone()).collect(),
            diff.removed.iter().map(|r| old[r.old].clone()).collect(),
            diff.changed
                .iter()
                .map(|c| (old[c.old].clone(), new[c.new].clone()))
                .collect(),
        )
    }

    /// Refs drawn from eight UIDs, so that lists share, repeat and change refs.
    fn refs(max: usize) -> impl Strategy<Value = Vec<OwnerRef>> {
        let one = (0u8..8, any::<Option<bool>>(), any::<Option<bool>>()).prop_map(|(u, controller, block)| {
            OwnerRef::new(
                TypeMeta::new(Sym::new("apps/v1"), Sym::new("ReplicaSet")),
                Name::new(&format!("rs-{u}")),
                Uid::new_v4(u128::from(u) + 1),
                controller,
                block,
            )
        });
        proptest::collection::vec(one, 0..max)
    }

    proptest! {
        #[test]
        fn references_diffs_should_agree_with_the_map_based_model(old in refs(40), new in refs(40)) {
            prop_assert_eq!(resolve(&references_diffs(&old, &new), &old, &new), model(&old, &new));
        }
    }
}
