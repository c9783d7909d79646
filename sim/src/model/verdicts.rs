//! Object by object: what every explored order agrees on, for clusters where the outcome as a
//! whole depends on order.
//!
//! [`Model::settle`] makes a claim about a whole cluster or none. A workload that deletes many
//! owners at once, with all three policies, almost always holds one object whose end depends on
//! timing (a dependent of an owner deleted with the Orphan policy and of one deleted with a
//! cascade: whichever reaches it first decides), and then `settle` says nothing about the
//! thousands of others. [`Model::verdicts`] gives a verdict per object instead:
//!
//! - The cluster is cut into its parts linked by ownership: two objects are in one part when one
//!   holds a reference to the other's UID, directly or through others. Every rule reads only an
//!   object, its owners and its dependents by UID (a reference that resolves by name to another
//!   UID dangles whatever that object does), so each part settles on its own, and exploring the
//!   orders of a part costs what its size costs, not the cluster's.
//! - Each part is settled in every explored order (module docs of [`super`]). An object whose end
//!   every order agrees on has that verdict: it lives, in that state, or it is gone. An object
//!   whose end differs between two orders is *undecided*, and so is every object of a part that
//!   leaves the region in another way (a foreground deletion on a cycle, for example).

use super::{Model, Object, OutOfRegion, Outcome};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// What every explored order agrees on, object by object; see the [module docs](self).
#[derive(Clone, Debug, Default)]
pub struct Verdicts {
    /// The objects that live in every order, each in the state every order leaves it in
    /// (finalizers sorted).
    pub live: Outcome,
    /// The objects every order deletes, of those the model held when asked; an object a user
    /// action already removed is in none of the three sets.
    pub gone: BTreeSet<String>,
    /// The objects whose end depends on order, each with why.
    pub undecided: BTreeMap<String, String>,
}

impl Model {
    /// Lets the collector run to its fixpoint in every explored order, part by part, and says
    /// for each object what every order agrees on; the model itself is left as it was.
    pub fn verdicts(&self) -> Verdicts {
        let mut verdicts = Verdicts::default();
        for uids in self.parts() {
            let mut part = self.part(&uids);
            let mut differ: BTreeSet<String> = BTreeSet::new();
            let explored = part.explore(|_, first, run| {
                let ends_apart = |uid: &&String| settled(first.get(uid)) != settled(run.get(uid));
                differ.extend(uids.iter().filter(ends_apart).cloned());
                Ok(())
            });
            match explored {
                Ok(end) => {
                    for uid in uids {
                        if differ.contains(&uid) {
                            verdicts.undecided.insert(uid, "its end depends on order".into());
                        } else if let Some(object) = settled(end.get(&uid)) {
                            verdicts.live.insert(uid, object);
                        } else {
                            verdicts.gone.insert(uid);
                        }
                    }
                }
                Err(why) => verdicts
                    .undecided
                    .extend(uids.into_iter().map(|uid| (uid, why.to_string()))),
            }
        }
        verdicts
    }

    /// The UIDs of each part linked by ownership, in UID order.
    fn parts(&self) -> Vec<Vec<String>> {
        let index: HashMap<&str, usize> = self.objects.keys().enumerate().map(|(i, u)| (u.as_str(), i)).collect();
        let mut parent: Vec<usize> = (0..index.len()).collect();
        fn root(parent: &mut [usize], mut i: usize) -> usize {
            while parent[i] != i {
                parent[i] = parent[parent[i]];
                i = parent[i];
            }
            i
        }
        for (i, entry) in self.objects.values().enumerate() {
            for owner in entry
                .object
                .owner_references
                .iter()
                .filter_map(|r| index.get(r.uid.as_str()))
            {
                let (a, b) = (root(&mut parent, i), root(&mut parent, *owner));
                parent[a] = b;
            }
        }
        let mut parts: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        for (i, uid) in self.objects.keys().enumerate() {
            parts.entry(root(&mut parent, i)).or_default().push(uid.clone());
        }
        parts.into_values().collect()
    }

    /// A model of only the objects `uids`, each with its marks, serving the same types.
    fn part(&self, uids: &[String]) -> Model {
        let mut part = Model::serving_as(self);
        part.actions = self.actions;
        part.checking_stuck = self.checking_stuck;
        part.left_region = self
            .left_region
            .clone()
            .filter(|out| out.uid().is_none_or(|uid| uids.iter().any(|u| u == uid)));
        for uid in uids {
            let entry = self.objects[uid].clone();
            part.names[entry.ty]
                .entry(entry.object.namespace.clone())
                .or_default()
                .insert(entry.object.name.clone(), uid.clone());
            for r in &entry.object.owner_references {
                part.dependents.entry(r.uid.clone()).or_default().insert(uid.clone());
            }
            part.objects.insert(uid.clone(), entry);
        }
        part.orphaned = self.orphaned.clone();
        part
    }
}

/// An object's end as outcomes compare it: finalizers sorted, `None` when it is gone.
fn settled(object: Option<&Object>) -> Option<Object> {
    object.map(|o| {
        let mut o = o.clone();
        o.finalizers.sort();
        o
    })
}

impl OutOfRegion {
    /// The object the scenario left the region through, when it is one object.
    pub fn uid(&self) -> Option<&str> {
        match self {
            OutOfRegion::ForegroundOnCycle { uid }
            | OutOfRegion::StuckBecameDecidable { uid }
            | OutOfRegion::CreatedUnderWaitingOwner { uid }
            | OutOfRegion::CreatedUnderOrphanedOwner { uid } => Some(uid),
            OutOfRegion::OrderDependent { .. } | OutOfRegion::NoFixpoint => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Action, Kind, CONFIG_MAP, DEPLOYMENT, POD};
    use kube_gc::api::{OwnerReference, PropagationPolicy};

    fn object(kind: Kind, uid: &str, owners: &[(&Kind, &str)]) -> Object {
        Object {
            kind,
            namespace: "default".into(),
            name: uid.into(),
            uid: uid.into(),
            owner_references: owners
                .iter()
                .map(|(kind, owner)| OwnerReference {
                    api_version: kind.api_version.to_string(),
                    kind: kind.kind.to_string(),
                    name: owner.to_string(),
                    uid: owner.to_string(),
                    block_owner_deletion: Some(true),
                    ..Default::default()
                })
                .collect(),
            finalizers: Vec::new(),
            deleting: false,
        }
    }

    fn delete(uid: &str, policy: PropagationPolicy) -> Action {
        Action::Delete {
            uid: uid.into(),
            policy: Some(policy),
        }
    }

    #[test]
    fn each_object_should_get_the_verdict_every_order_agrees_on() {
        let (d, cm, pod) = (DEPLOYMENT, CONFIG_MAP, POD);
        let mut model = Model::new([
            object(d.clone(), "d", &[]),
            object(d.clone(), "j", &[]),
            object(d.clone(), "kept", &[]),
            object(pod.clone(), "p", &[(&d, "d")]),
            object(cm.clone(), "both", &[(&d, "d"), (&d, "j")]),
            object(cm.clone(), "below-both", &[(&cm, "both")]),
            object(pod.clone(), "of-kept", &[(&d, "kept")]),
            object(pod.clone(), "of-ghost", &[(&d, "ghost")]),
        ]);
        model.apply(&delete("d", PropagationPolicy::Background));
        model.apply(&delete("j", PropagationPolicy::Orphan));
        assert!(
            model.clone().settle().is_err(),
            "the cluster as a whole depends on order"
        );

        let verdicts = model.verdicts();
        let gone: Vec<&str> = verdicts.gone.iter().map(String::as_str).collect();
        assert_eq!(
            gone,
            ["j", "of-ghost", "p"],
            "d went with its DELETE, before any verdict"
        );
        let live: Vec<&str> = verdicts.live.keys().map(String::as_str).collect();
        assert_eq!(live, ["kept", "of-kept"]);
        assert_eq!(
            verdicts.live["of-kept"].owner_references.len(),
            1,
            "keeps its living owner"
        );
        let undecided: Vec<&str> = verdicts.undecided.keys().map(String::as_str).collect();
        assert_eq!(
            undecided,
            ["below-both", "both"],
            "an orphaning and a cascading owner race"
        );
        assert!(model.get("p").is_some(), "the model itself is left as it was");
    }
}
