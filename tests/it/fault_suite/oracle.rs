//! The oracle: what the cluster must look like once the collector has done its work.
//!
//! The verdicts are the reference model's ([`kube_gc_sim::model`]), object by object
//! ([`Model::verdicts`]): the objects as they were created, the workload's deletions applied as
//! user actions, then every explored order of the collector's steps. An object every order
//! deletes must go; one every order keeps must live, with the references every order leaves it;
//! one whose end depends on order (a dependent of an owner deleted with the Orphan policy and of
//! one deleted with a cascade: whichever reaches it first decides, as upstream's timing does) is
//! left out of the verdict, with its own dependents. This file only carries the workload's
//! objects, read through kube-rs, to the model and its verdicts back to the checks.

use kube::api::{ApiResource, DynamicObject};
use kube_gc::api::{self, Gvr, OwnerReference, PropagationPolicy};
use kube_gc_sim::model::{Action, Kind, Model, Object};
use std::collections::{BTreeMap, BTreeSet, HashMap};

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

/// A served resource, as the suite lists it and the model types it.
#[derive(Clone)]
pub struct Resource {
    pub ar: ApiResource,
    pub kind: Kind,
}

impl Resource {
    pub fn new(ar: ApiResource, namespaced: bool) -> Resource {
        let served = api::ApiResource {
            gvr: Gvr::new(&ar.group, &ar.version, &ar.plural),
            kind: ar.kind.clone(),
            namespaced,
            verbs: Vec::new(),
            preferred: true,
        };
        Resource {
            kind: Kind::of(&served),
            ar,
        }
    }
}

/// An object as read from the cluster.
#[derive(Clone, Debug)]
pub struct Obj {
    pub key: Key,
    pub object: Object,
}

impl Obj {
    /// `o`, read as a `resource`.
    pub fn of(resource: &Resource, o: &DynamicObject) -> Obj {
        let m = &o.metadata;
        let owner_references = m
            .owner_references
            .iter()
            .flatten()
            .map(|r| OwnerReference {
                api_version: r.api_version.clone(),
                kind: r.kind.clone(),
                name: r.name.clone(),
                uid: r.uid.clone(),
                controller: r.controller,
                block_owner_deletion: r.block_owner_deletion,
            })
            .collect();
        let object = Object {
            kind: resource.kind.clone(),
            namespace: m.namespace.clone().unwrap_or_default(),
            name: m.name.clone().unwrap_or_default(),
            uid: m.uid.clone().unwrap_or_default(),
            owner_references,
            finalizers: m.finalizers.clone().unwrap_or_default(),
            deleting: m.deletion_timestamp.is_some(),
        };
        let key = Key {
            group: resource.ar.group.clone(),
            resource: resource.ar.plural.clone(),
            namespace: object.namespace.clone(),
            name: object.name.clone(),
        };
        Obj { key, object }
    }

    pub fn uid(&self) -> &str {
        &self.object.uid
    }

    /// The UIDs of its owners.
    pub fn owners(&self) -> impl Iterator<Item = &str> {
        self.object.owner_references.iter().map(|r| r.uid.as_str())
    }
}

/// The cluster as it was created, what the workload deleted, and the model of both.
pub struct Universe {
    /// Every object, as created, by UID.
    pub objects: BTreeMap<String, Obj>,
    /// The workload's deletions, by UID: the last policy each was deleted with.
    pub deleted: HashMap<String, PropagationPolicy>,
    /// Owners deleted in the Foreground way, then with the Orphan policy mid-cascade.
    pub switched: BTreeSet<String>,
    model: Model,
}

/// What the oracle expects.
pub struct Expected {
    /// UIDs that must be gone.
    pub gone: BTreeSet<String>,
    /// For each UID that must live, the owner UIDs it must still name.
    pub live: BTreeMap<String, BTreeSet<String>>,
    /// UIDs whose end depends on timing, each with why; in neither set.
    pub undecided: BTreeMap<String, String>,
}

impl Universe {
    /// An empty cluster serving `resources`.
    pub fn serving<'a>(resources: impl IntoIterator<Item = &'a Resource>) -> Universe {
        Universe {
            objects: BTreeMap::new(),
            deleted: HashMap::new(),
            switched: BTreeSet::new(),
            model: Model::serving(resources.into_iter().map(|r| r.kind.clone())),
        }
    }

    /// An object that was created.
    pub fn add(&mut self, obj: Obj) {
        self.model.apply(&Action::Create(obj.object.clone()));
        self.objects.insert(obj.uid().to_string(), obj);
    }

    /// A deletion the workload made.
    pub fn delete(&mut self, uid: &str, policy: PropagationPolicy) {
        let action = Action::Delete {
            uid: uid.into(),
            policy: Some(policy),
        };
        self.model.apply(&action);
        self.deleted.insert(uid.into(), policy);
    }

    /// A deletion of `uid`, being deleted in the Foreground way, with the Orphan policy: what the
    /// cascade deleted before the collector saw the switch is gone, the rest is orphaned, and
    /// which is which is timing's.
    pub fn switch_to_orphan(&mut self, uid: &str) {
        self.delete(uid, PropagationPolicy::Orphan);
        self.switched.insert(uid.into());
    }

    /// The objects that name `owner` among their owners.
    pub fn dependents_of<'a>(&'a self, owner: &'a str) -> impl Iterator<Item = &'a Obj> {
        self.objects.values().filter(move |o| o.owners().any(|u| u == owner))
    }

    /// The UID of the object at `key`, if the oracle knows it.
    pub fn uid_of(&self, key: &Key) -> Option<&str> {
        self.objects.values().find(|o| &o.key == key).map(Obj::uid)
    }

    /// The model's verdicts: an object a deletion removed at once is gone, as is every object
    /// all orders delete; an object all orders keep lives with the owners they leave it.
    pub fn expected(&self) -> Expected {
        let verdicts = self.model.verdicts();
        let removed = self.objects.keys().filter(|uid| self.model.get(uid).is_none());
        let mut gone: BTreeSet<String> = verdicts.gone.iter().chain(removed).cloned().collect();
        let mut live: BTreeMap<String, BTreeSet<String>> = verdicts
            .live
            .iter()
            .map(|(uid, o)| (uid.clone(), o.owner_references.iter().map(|r| r.uid.clone()).collect()))
            .collect();
        let mut undecided = verdicts.undecided;
        for owner in &self.switched {
            for dependent in self.dependents_of(owner) {
                let uid = dependent.uid().to_string();
                gone.remove(&uid);
                live.remove(&uid);
                undecided.insert(
                    uid,
                    "its owner's Foreground deletion turned to Orphan mid-cascade".into(),
                );
            }
        }
        Expected { gone, live, undecided }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pods() -> Resource {
        Resource::new(ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&()), true)
    }

    fn obj(uid: &str, owners: &[&str]) -> Obj {
        let refs: Vec<_> = owners
            .iter()
            .map(|o| serde_json::json!({"apiVersion": "v1", "kind": "Pod", "name": o, "uid": o}))
            .collect();
        let manifest = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": uid, "namespace": "default", "uid": uid, "ownerReferences": refs}});
        Obj::of(&pods(), &serde_json::from_value(manifest).expect("a pod"))
    }

    #[test]
    fn the_oracle_should_follow_each_policy_and_keep_refs_to_living_owners() {
        let mut u = Universe::serving([&pods()]);
        for (uid, owners) in [
            ("d", &[][..]),
            ("rs", &["d"][..]),
            ("p", &["rs"][..]),
            ("job", &[][..]),
            ("jp", &["job"][..]),
            ("job2", &[][..]),
            ("multi", &["d", "job2"][..]),
            ("ghost-child", &["never-existed"][..]),
            ("both", &["d", "job"][..]),
        ] {
            u.add(obj(uid, owners));
        }
        u.delete("d", PropagationPolicy::Background);
        u.delete("job", PropagationPolicy::Orphan);
        let e = u.expected();
        let gone: Vec<&str> = e.gone.iter().map(String::as_str).collect();
        assert_eq!(gone, ["d", "ghost-child", "job", "p", "rs"]);
        assert_eq!(e.live["jp"], BTreeSet::new(), "orphaned");
        assert_eq!(
            e.live["multi"],
            BTreeSet::from(["job2".to_string()]),
            "keeps its living owner"
        );
        assert!(
            !e.gone.contains("both") && !e.live.contains_key("both"),
            "left to timing"
        );
    }
}
