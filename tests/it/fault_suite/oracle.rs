//! The oracle: what the cluster must look like once the collector has done its work, computed
//! from the objects that existed and what the workload deleted, with the rules of cascading
//! deletion and nothing of the collector's code.
//!
//! - A reference to an owner deleted with the Orphan policy is removed; the object lives on.
//! - An object is garbage when it had at least one owner reference and every reference left
//!   points to an owner that is gone: deleted by the workload, never existed, or garbage itself
//!   (a fixed point, so cascades of any depth are followed).
//! - Every other object must live, keeping each reference to an owner that lives.
//! - An object with a reference to an owner deleted with the Orphan policy *and* one to an owner
//!   that goes with a cascade may end either way: if the cascade reaches it first, its ref to the
//!   orphaning owner keeps it (the ref counts as a solid owner until stripped); if the orphaning
//!   comes first, it is collected. Upstream decides by timing too, so such objects, and their own
//!   dependents, are left out of the verdict.

use std::collections::{BTreeMap, BTreeSet, HashMap};

/// How the workload deleted an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Policy {
    Background,
    Foreground,
    Orphan,
}

/// Where an object lives: resource (plural, with its group), namespace, name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    pub group: String,
    pub resource: String,
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() {
            String::new()
        } else {
            format!(".{}", self.group)
        };
        write!(f, "{}{group} {}/{}", self.resource, self.namespace, self.name)
    }
}

/// An object as the oracle sees it.
#[derive(Clone, Debug)]
pub struct Obj {
    pub key: Key,
    pub uid: String,
    /// Owner UIDs, each with its blockOwnerDeletion.
    pub owners: Vec<(String, bool)>,
}

/// The cluster before the deletions, and what became of it.
#[derive(Default)]
pub struct Universe {
    pub objects: BTreeMap<String, Obj>,
    pub deleted: HashMap<String, Policy>,
}

/// What the oracle expects.
pub struct Expected {
    /// UIDs that must be gone.
    pub gone: BTreeSet<String>,
    /// For each UID that must live, the owner UIDs it must still name.
    pub live: BTreeMap<String, BTreeSet<String>>,
    /// UIDs whose fate depends on timing; in neither set.
    pub either: BTreeSet<String>,
}

impl Universe {
    pub fn add(&mut self, obj: Obj) {
        self.objects.insert(obj.uid.clone(), obj);
    }

    /// The UID of the object at `key`, if the oracle knows it.
    pub fn uid_of(&self, key: &Key) -> Option<&str> {
        self.objects.values().find(|o| &o.key == key).map(|o| o.uid.as_str())
    }

    pub fn expected(&self) -> Expected {
        let orphaned: BTreeSet<&str> = self
            .deleted
            .iter()
            .filter(|(_, p)| **p == Policy::Orphan)
            .map(|(uid, _)| uid.as_str())
            .collect();
        let mut gone: BTreeSet<String> = self.deleted.keys().cloned().collect();
        loop {
            let newly: Vec<String> = self
                .objects
                .values()
                .filter(|o| !gone.contains(&o.uid))
                .filter(|o| {
                    let refs: Vec<&str> = o
                        .owners
                        .iter()
                        .map(|(uid, _)| uid.as_str())
                        .filter(|uid| !orphaned.contains(uid))
                        .collect();
                    !refs.is_empty()
                        && refs
                            .iter()
                            .all(|uid| gone.contains(*uid) || !self.objects.contains_key(*uid))
                })
                .map(|o| o.uid.clone())
                .collect();
            if newly.is_empty() {
                break;
            }
            gone.extend(newly);
        }
        let either = self.timing_dependent(&orphaned, &gone);
        gone.retain(|uid| !either.contains(uid));
        let live = self
            .objects
            .values()
            .filter(|o| !gone.contains(&o.uid) && !either.contains(&o.uid))
            .map(|o| {
                let kept = o
                    .owners
                    .iter()
                    .map(|(uid, _)| uid)
                    .filter(|uid| self.objects.contains_key(*uid) && !gone.contains(*uid))
                    .cloned()
                    .collect();
                (o.uid.clone(), kept)
            })
            .collect();
        Expected { gone, live, either }
    }

    /// Objects naming both an orphaning owner and a cascading one, and their dependents.
    fn timing_dependent(&self, orphaned: &BTreeSet<&str>, gone: &BTreeSet<String>) -> BTreeSet<String> {
        let mut either: BTreeSet<String> = self
            .objects
            .values()
            .filter(|o| !self.deleted.contains_key(&o.uid))
            .filter(|o| {
                let names = |pred: &dyn Fn(&str) -> bool| o.owners.iter().any(|(uid, _)| pred(uid));
                names(&|uid| orphaned.contains(uid)) && names(&|uid| !orphaned.contains(uid) && gone.contains(uid))
            })
            .map(|o| o.uid.clone())
            .collect();
        loop {
            let more: Vec<String> = self
                .objects
                .values()
                .filter(|o| !either.contains(&o.uid) && !self.deleted.contains_key(&o.uid))
                .filter(|o| o.owners.iter().any(|(uid, _)| either.contains(uid)))
                .map(|o| o.uid.clone())
                .collect();
            if more.is_empty() {
                return either;
            }
            either.extend(more);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(uid: &str, owners: &[&str]) -> Obj {
        Obj {
            key: Key {
                group: String::new(),
                resource: "pods".into(),
                namespace: "default".into(),
                name: uid.into(),
            },
            uid: uid.into(),
            owners: owners.iter().map(|o| (o.to_string(), true)).collect(),
        }
    }

    #[test]
    fn the_oracle_should_follow_each_policy_and_keep_refs_to_living_owners() {
        let mut u = Universe::default();
        for (uid, owners) in [
            ("d", &[][..]),
            ("rs", &["d"][..]),
            ("p", &["rs"][..]),
            ("job", &[][..]),
            ("jp", &["job"][..]),
            ("multi", &["d", "job2"][..]),
            ("job2", &[][..]),
            ("ghost-child", &["never-existed"][..]),
        ] {
            u.add(obj(uid, owners));
        }
        u.deleted.insert("d".into(), Policy::Background);
        u.deleted.insert("job".into(), Policy::Orphan);
        let e = u.expected();
        for uid in ["d", "rs", "p", "job", "ghost-child"] {
            assert!(e.gone.contains(uid), "{uid} gone");
        }
        assert_eq!(e.live["jp"], BTreeSet::new(), "orphaned");
        assert_eq!(
            e.live["multi"],
            BTreeSet::from(["job2".to_string()]),
            "keeps its living owner"
        );
    }

    #[test]
    fn an_object_of_an_orphaning_and_a_cascading_owner_should_be_left_to_timing() {
        let mut u = Universe::default();
        for (uid, owners) in [
            ("d", &[][..]),
            ("job", &[][..]),
            ("both", &["d", "job"][..]),
            ("child", &["both"][..]),
        ] {
            u.add(obj(uid, owners));
        }
        u.deleted.insert("d".into(), Policy::Background);
        u.deleted.insert("job".into(), Policy::Orphan);
        let e = u.expected();
        assert_eq!(e.either, BTreeSet::from(["both".to_string(), "child".to_string()]));
        assert!(!e.gone.contains("both") && !e.live.contains_key("both"));
    }
}
