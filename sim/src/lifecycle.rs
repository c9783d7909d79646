//! Containers that outlive their deletion until they are empty: namespaces and CRDs.
//!
//! A real cluster never removes a namespace or a CustomResourceDefinition at its DELETE. The
//! namespace turns `Terminating` and the namespace controller deletes what it holds; the CRD gets
//! the `customresourcecleanup.apiextensions.k8s.io` finalizer and the CRD finalizer deletes its
//! custom resources. Each goes once the last object in it is gone, which may be much later: an
//! object held by a finalizer holds its container too. Monitors see every one of those deletions
//! as a watch event, the container's last.
//!
//! Here the two controllers are rules of the store, applied within the write that makes them
//! apply, so the cluster is never seen in a state a real one would not pass through:
//!
//! - The first DELETE of a namespace whose `spec.finalizers` holds `kubernetes` (every namespace
//!   gets it on create) marks it `Terminating` instead of removing it, and deletes its contents in
//!   the background in the namespace controller's order (Kubernetes 1.33 on, `OrderedNamespaceDeletion`):
//!   its pods first, and everything else once no pod is left, so that a pod never outlives the
//!   policies and secrets it runs with; a pod held by a finalizer holds the rest of the namespace.
//!   The first DELETE of a CRD adds the cleanup finalizer and a `Terminating` condition, and
//!   deletes its custom resources in the background.
//! - After every write, each terminating container that is now empty lets go: the namespace's
//!   `kubernetes` finalizer and the CRD's cleanup finalizer are removed, and the container goes
//!   unless other finalizers hold it. A removed CRD stops serving its type.
//! - Creating in a terminating container is refused, as the API server refuses it: 403 in a
//!   namespace, 405 for a custom resource. With [`State::set_namespaces_enforced`], a create in a
//!   namespace that does not exist is 404 too; in-memory tests leave that off and use any
//!   namespace they name.
//!
//! Invariants: `terminating` holds exactly the containers marked for deletion that still exist;
//! `pods_first` holds the terminating namespaces whose other objects have not been deleted yet,
//! each of which still holds a pod. Neither is saved; a restored cluster rebuilds both from the
//! stored objects ([`State::resume_terminating`]), a namespace that still holds pods being one
//! whose other objects are (deleted again) once they are gone.

use super::status::not_found;
use super::store::State;
use super::types::{CRD_GROUP, CRD_RESOURCE};
use kube_gc::api::{ApiError, DeleteOptions, Gvr, PartialObjectMeta, PropagationPolicy, StatusReason};
use serde_json::{json, Value};

/// The finalizer the namespace controller removes once the namespace is empty.
pub const FINALIZER_KUBERNETES: &str = "kubernetes";
/// The finalizer the CRD finalizer removes once a CRD's custom resources are gone.
pub const FINALIZER_CRD_CLEANUP: &str = "customresourcecleanup.apiextensions.k8s.io";

/// The namespaces every real cluster starts with.
pub const DEFAULT_NAMESPACES: [&str; 4] = ["default", "kube-system", "kube-public", "kube-node-lease"];

/// A namespace or a CRD, by name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Container {
    Namespace(String),
    Crd(String),
}

fn namespaces() -> Gvr {
    Gvr::new("", "v1", "namespaces")
}

/// True for the pods type, which a namespace deletes first.
fn is_pods(group: &str, resource: &str) -> bool {
    group.is_empty() && resource == "pods"
}

fn crds() -> Gvr {
    Gvr::new(CRD_GROUP, "v1", CRD_RESOURCE)
}

/// True for the namespaces type.
pub(super) fn is_namespace_type(gvr: &Gvr) -> bool {
    gvr.group.is_empty() && gvr.resource == "namespaces"
}

fn is_crd_type(gvr: &Gvr) -> bool {
    gvr.group == CRD_GROUP && gvr.resource == CRD_RESOURCE
}

/// True for the types whose objects are containers (namespaces and CRDs): only their deletion
/// has rules of its own here ([`mark_for_deletion`], [`held_by_spec`]).
pub(super) fn is_container_type(gvr: &Gvr) -> bool {
    is_namespace_type(gvr) || is_crd_type(gvr)
}

/// `(group, plural)` of the type a CRD object describes.
fn crd_type(crd: &PartialObjectMeta) -> Option<(String, String)> {
    let spec = crd.rest.get("spec")?;
    let group = spec.get("group")?.as_str()?;
    let plural = spec.get("names")?.get("plural")?.as_str()?;
    Some((group.to_string(), plural.to_string()))
}

/// The namespace's `spec.finalizers`.
fn spec_finalizers(namespace: &PartialObjectMeta) -> Vec<String> {
    let list = namespace.rest.get("spec").and_then(|s| s.get("finalizers"));
    let names = list.and_then(Value::as_array).into_iter().flatten();
    names.filter_map(Value::as_str).map(String::from).collect()
}

fn set_spec_finalizers(namespace: &mut PartialObjectMeta, finalizers: &[String]) {
    let spec = namespace.rest.entry("spec").or_insert_with(|| json!({}));
    if let Some(spec) = spec.as_object_mut() {
        spec.insert("finalizers".into(), json!(finalizers));
    }
}

fn set_phase(namespace: &mut PartialObjectMeta, phase: &str) {
    namespace.rest.insert("status".into(), json!({ "phase": phase }));
}

/// True when a namespace's `spec.finalizers` keep it after its last metadata finalizer is gone.
pub(super) fn held_by_spec(group: &str, resource: &str, object: &PartialObjectMeta) -> bool {
    group.is_empty() && resource == "namespaces" && !spec_finalizers(object).is_empty()
}

/// What the namespace registry sets on create: the `kubernetes` finalizer and the Active phase.
pub(super) fn prepare_namespace(namespace: &mut PartialObjectMeta) {
    let spec = namespace.rest.get("spec");
    if spec.is_none_or(|s| s.get("finalizers").is_none()) {
        set_spec_finalizers(namespace, &[FINALIZER_KUBERNETES.to_string()]);
    }
    set_phase(namespace, "Active");
}

/// How a container's first DELETE marks it, besides the deletionTimestamp: `None` when the
/// object is no container, or is one that need not wait.
pub(super) fn mark_for_deletion(gvr: &Gvr, object: &mut PartialObjectMeta) -> Option<Container> {
    if object.metadata.deletion_timestamp.is_some() {
        return None;
    }
    if is_namespace_type(gvr) {
        if spec_finalizers(object).is_empty() {
            return None;
        }
        set_phase(object, "Terminating");
        return Some(Container::Namespace(object.metadata.name.clone()));
    }
    if is_crd_type(gvr) {
        if !object.metadata.has_finalizer(FINALIZER_CRD_CLEANUP) {
            object.metadata.finalizers.push(FINALIZER_CRD_CLEANUP.to_string());
        }
        add_terminating_condition(object);
        return Some(Container::Crd(object.metadata.name.clone()));
    }
    None
}

fn add_terminating_condition(crd: &mut PartialObjectMeta) {
    let status = crd.rest.entry("status").or_insert_with(|| json!({}));
    let Some(status) = status.as_object_mut() else { return };
    let conditions = status.entry("conditions").or_insert_with(|| json!([]));
    if let Some(conditions) = conditions.as_array_mut() {
        conditions.retain(|c| c.get("type").and_then(Value::as_str) != Some("Terminating"));
        conditions.push(json!({
            "type": "Terminating", "status": "True", "reason": "InstanceDeletionPending",
            "message": "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
        }));
    }
}

impl State {
    /// Makes creates in a namespace that does not exist fail with 404, as on a real cluster.
    pub(super) fn set_namespaces_enforced(&mut self, enforced: bool) {
        self.namespaces_enforced = enforced;
    }

    /// Refuses a create the containers forbid: in a namespace that is missing (when enforced) or
    /// terminating, or of a custom resource whose CRD is terminating.
    ///
    /// Every create asks, so the lookups borrow the stored objects rather than copy them.
    pub(super) fn check_create_allowed(&self, gvr: &Gvr, namespace: &str) -> Result<(), ApiError> {
        if !namespace.is_empty() {
            match self.stored_object("", "namespaces", "", namespace) {
                Some(ns) if ns.metadata.deletion_timestamp.is_some() => {
                    return Err(ApiError::status(
                        StatusReason::Forbidden,
                        format!("unable to create new content in namespace {namespace} because it is being terminated"),
                    ))
                }
                None if self.namespaces_enforced => {
                    let def = &self.type_of(&namespaces())?.def;
                    return Err(not_found(def, namespace));
                }
                _ => {}
            }
        }
        // A CRD's group always has a dot; built-in groups need no lookup.
        if !gvr.group.contains('.') || gvr.group == CRD_GROUP {
            return Ok(());
        }
        let crd_name = format!("{}.{}", gvr.resource, gvr.group);
        let crd = self.stored_object(CRD_GROUP, CRD_RESOURCE, "", &crd_name);
        if crd.is_some_and(|crd| crd.metadata.deletion_timestamp.is_some()) {
            return Err(ApiError::status(
                StatusReason::MethodNotAllowed,
                "create not allowed while custom resource definition is terminating",
            ));
        }
        Ok(())
    }

    /// Starts a container's termination: everything in it is deleted in the background.
    pub(super) fn begin_termination(&mut self, container: Container) {
        if self.dry_run {
            return;
        }
        let pods_first = match &container {
            Container::Namespace(ns) if self.holds_pods(ns) => Some(ns.clone()),
            _ => None,
        };
        let contents = self.contents(&container, pods_first.is_some());
        self.terminating.insert(container);
        self.pods_first.extend(pods_first);
        self.delete_in_background(contents);
    }

    /// Deletes each of `objects` with the Background policy, as both controllers do.
    fn delete_in_background(&mut self, objects: Vec<(Gvr, String, String)>) {
        let background = DeleteOptions {
            propagation_policy: Some(PropagationPolicy::Background),
            ..DeleteOptions::default()
        };
        for (gvr, namespace, name) in objects {
            // Each object exists and the options are valid; one already gone is no matter.
            let _ = self.delete(&gvr, &namespace, &name, &background);
        }
    }

    /// True while `namespace` holds a pod.
    fn holds_pods(&self, namespace: &str) -> bool {
        self.holds_in_namespace("", "pods", namespace)
    }

    /// Every object in `container` (only the pods of a namespace when `pods_only`), as
    /// `(gvr, namespace, name)`.
    fn contents(&self, container: &Container, pods_only: bool) -> Vec<(Gvr, String, String)> {
        let types: Vec<(Gvr, Option<&str>)> = match container {
            Container::Namespace(ns) => self
                .defs()
                .filter(|def| def.namespaced && (!pods_only || is_pods(&def.group, &def.resource)))
                .map(|def| (Gvr::new(&def.group, &def.preferred, &def.resource), Some(ns.as_str())))
                .collect(),
            Container::Crd(name) => self.crd_gvr(name).map(|gvr| (gvr, None)).into_iter().collect(),
        };
        let mut out = Vec::new();
        for (gvr, namespace) in types {
            let items = self.snapshot(&gvr, namespace).map(|s| s.items).unwrap_or_default();
            let keys = items
                .iter()
                .map(|o| (o.metadata.namespace.clone(), o.metadata.name.clone()));
            out.extend(keys.map(|(namespace, name)| (gvr.clone(), namespace, name)));
        }
        out
    }

    /// True when nothing is left in `container`.
    fn is_empty(&self, container: &Container) -> bool {
        match container {
            Container::Namespace(ns) => self.namespace_is_empty(ns),
            Container::Crd(name) => self
                .crd_gvr(name)
                .is_none_or(|gvr| self.count(&gvr.group, &gvr.resource) == 0),
        }
    }

    /// The served type of the CRD `name`, if it is stored and served.
    fn crd_gvr(&self, name: &str) -> Option<Gvr> {
        let crd = self.get(&crds(), "", name).ok()?;
        let (group, resource) = crd_type(&crd)?;
        let def = self.defs().find(|d| d.group == group && d.resource == resource)?;
        Some(Gvr::new(&def.group, &def.preferred, &def.resource))
    }

    /// Lets every terminating container that is now empty go (module docs).
    pub(super) fn finish_terminating(&mut self) {
        if self.terminating.is_empty() {
            return;
        }
        self.delete_after_pods();
        let empty: Vec<Container> = self.terminating.iter().filter(|c| self.is_empty(c)).cloned().collect();
        for container in empty {
            self.terminating.remove(&container);
            let (gvr, name, finalizer) = match &container {
                Container::Namespace(name) => (namespaces(), name, FINALIZER_KUBERNETES),
                Container::Crd(name) => (crds(), name, FINALIZER_CRD_CLEANUP),
            };
            self.release(&gvr, name, finalizer);
        }
    }

    /// Deletes the other objects of each terminating namespace whose last pod went.
    fn delete_after_pods(&mut self) {
        let ready: Vec<String> = self
            .pods_first
            .iter()
            .filter(|ns| !self.holds_pods(ns))
            .cloned()
            .collect();
        for namespace in ready {
            // Out of the set before the deletes, whose own writes come back here.
            self.pods_first.remove(&namespace);
            let rest = self.contents(&Container::Namespace(namespace), false);
            self.delete_in_background(rest);
        }
    }

    /// Removes a container's own finalizer, as its controller does once it is empty; the
    /// container goes unless other finalizers hold it.
    fn release(&mut self, gvr: &Gvr, name: &str, finalizer: &str) {
        let Ok(mut object) = self.get(gvr, "", name) else {
            return;
        };
        if is_namespace_type(gvr) {
            let left: Vec<String> = spec_finalizers(&object)
                .into_iter()
                .filter(|f| f != finalizer)
                .collect();
            set_spec_finalizers(&mut object, &left);
        } else {
            object.metadata.finalizers.retain(|f| f != finalizer);
        }
        object.metadata.resource_version.clear();
        let Ok(mut w) = self.writer(gvr) else { return };
        let Ok(old) = w.existing("", name) else { return };
        // The update rules remove a marked object that nothing holds any more.
        if w.replace(&old, object).is_ok() {
            self.after_write(gvr);
        }
    }

    /// Rebuilds the terminating set of a restored cluster from its stored containers.
    pub(super) fn resume_terminating(&mut self) {
        let marked = |o: &PartialObjectMeta| o.metadata.deletion_timestamp.is_some();
        let namespaces = self.stored("", "namespaces").filter(|o| marked(o));
        let mut found: Vec<Container> = namespaces
            .filter(|o| !spec_finalizers(o).is_empty())
            .map(|o| Container::Namespace(o.metadata.name.clone()))
            .collect();
        let crds = self.stored(CRD_GROUP, CRD_RESOURCE).filter(|o| marked(o));
        found.extend(
            crds.filter(|o| o.metadata.has_finalizer(FINALIZER_CRD_CLEANUP))
                .map(|o| Container::Crd(o.metadata.name.clone())),
        );
        let with_pods = found.iter().filter_map(|c| match c {
            Container::Namespace(ns) if self.holds_pods(ns) => Some(ns.clone()),
            _ => None,
        });
        self.pods_first = with_pods.collect();
        self.terminating.extend(found);
        self.finish_terminating();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{crds, gadget_crd, gadgets, object, pods, NS};
    use crate::SimCluster;
    use futures::StreamExt;
    use kube_gc::api::{ObjectMeta, WatchEventType};

    /// A finalizer nothing removes but the test.
    const HOLD: &str = "example.com/hold";

    fn namespace(name: &str) -> PartialObjectMeta {
        PartialObjectMeta {
            metadata: ObjectMeta {
                name: name.into(),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn held(mut obj: PartialObjectMeta) -> PartialObjectMeta {
        obj.metadata.finalizers = vec![HOLD.into()];
        obj
    }

    fn release(cluster: &SimCluster, gvr: &Gvr, namespace: &str, name: &str) {
        let body = json!({"metadata": {"finalizers": null}});
        cluster
            .patch_object(gvr, namespace, name, kube_gc::api::PatchType::Merge, &body)
            .expect("release");
    }

    fn reason<T: std::fmt::Debug>(result: Result<T, ApiError>) -> Option<StatusReason> {
        result.expect_err("refused").reason()
    }

    #[tokio::test]
    async fn a_namespace_should_terminate_until_its_last_object_is_gone() {
        let cluster = SimCluster::new();
        let created = cluster.create(&namespaces(), namespace("team")).expect("namespace");
        assert_eq!(created.rest["spec"]["finalizers"], json!(["kubernetes"]));
        assert_eq!(created.rest["status"]["phase"], "Active");
        cluster.create(&pods(), object("team", "free")).expect("pod");
        cluster.create(&pods(), held(object("team", "held"))).expect("pod");
        let mut pod_events = cluster.watch_objects(&pods(), "").expect("watch").stream;
        let mut ns_events = cluster.watch_objects(&namespaces(), "").expect("watch").stream;

        let deletion = cluster
            .delete_object(&namespaces(), "", "team", &DeleteOptions::default())
            .expect("delete");
        let terminating = deletion.object();
        assert!(!deletion.is_removed(), "a namespace with content stays");
        assert_eq!(terminating.rest["status"]["phase"], "Terminating");
        assert_eq!(terminating.metadata.deletion_grace_period_seconds, Some(0));
        let refused = cluster.create(&pods(), object("team", "late"));
        assert_eq!(reason(refused), Some(StatusReason::Forbidden));
        let held_pod = cluster
            .get_object(&pods(), "team", "held")
            .expect("held by its finalizer");
        assert!(held_pod.metadata.deletion_timestamp.is_some(), "its content is deleted");
        assert!(cluster.get_object(&pods(), "team", "free").is_err());

        release(&cluster, &pods(), "team", "held");
        assert!(cluster.get_object(&namespaces(), "", "team").is_err(), "empty, it goes");
        let mut last_pod_event = None;
        while let Some(Some(Ok(e))) = futures::FutureExt::now_or_never(pod_events.next()) {
            last_pod_event = Some(e.event_type);
        }
        assert_eq!(last_pod_event, Some(WatchEventType::Deleted));
        let mut ns_types = Vec::new();
        while let Some(Some(Ok(e))) = futures::FutureExt::now_or_never(ns_events.next()) {
            ns_types.push(e.event_type);
        }
        assert_eq!(ns_types.last(), Some(&WatchEventType::Deleted), "{ns_types:?}");
    }

    #[test]
    fn a_namespace_should_delete_its_pods_first_and_the_rest_once_they_are_gone() {
        let cluster = SimCluster::new();
        cluster.create(&namespaces(), namespace("team")).expect("namespace");
        cluster.create(&pods(), held(object("team", "held"))).expect("pod");
        let configmaps = Gvr::new("", "v1", "configmaps");
        cluster
            .create(&configmaps, object("team", "policy"))
            .expect("configmap");
        cluster
            .delete_object(&namespaces(), "", "team", &DeleteOptions::default())
            .expect("delete");
        let pod = cluster
            .get_object(&pods(), "team", "held")
            .expect("held by its finalizer");
        assert!(pod.metadata.deletion_timestamp.is_some(), "pods are deleted first");
        let policy = cluster.get_object(&configmaps, "team", "policy").expect("still there");
        assert!(
            policy.metadata.deletion_timestamp.is_none(),
            "the rest waits while a pod is left"
        );

        release(&cluster, &pods(), "team", "held");
        assert!(
            cluster.get_object(&configmaps, "team", "policy").is_err(),
            "then the rest goes"
        );
        assert!(
            cluster.get_object(&namespaces(), "", "team").is_err(),
            "and the namespace"
        );
    }

    #[test]
    fn a_create_in_a_missing_namespace_should_be_refused_once_enforced() {
        let cluster = SimCluster::new();
        cluster
            .create(&pods(), object("nowhere", "a"))
            .expect("lenient by default");
        cluster.enforce_namespaces(true);
        let refused = cluster.create(&pods(), object("elsewhere", "b"));
        let err = refused.expect_err("no such namespace");
        assert_eq!(err.reason(), Some(StatusReason::NotFound));
        assert!(err.to_string().contains("namespaces \"elsewhere\" not found"), "{err}");
        cluster.create(&namespaces(), namespace(NS)).expect("namespace");
        cluster
            .create(&pods(), object(NS, "c"))
            .expect("in an existing namespace");
    }

    #[test]
    fn a_crd_should_keep_serving_until_its_held_resources_are_gone() {
        let cluster = SimCluster::new();
        cluster.create(&crds(), gadget_crd()).expect("CRD");
        cluster.create(&gadgets(), object(NS, "free")).expect("gadget");
        cluster.create(&gadgets(), held(object(NS, "held"))).expect("gadget");

        let deletion = cluster
            .delete_object(&crds(), "", "gadgets.example.com", &DeleteOptions::default())
            .expect("delete");
        let crd = deletion.object();
        assert_eq!(crd.metadata.finalizers, [FINALIZER_CRD_CLEANUP]);
        let conditions = crd.rest["status"]["conditions"].as_array().expect("conditions");
        assert!(conditions.iter().any(|c| c["type"] == "Terminating"), "{conditions:?}");
        assert!(cluster.get_object(&gadgets(), NS, "free").is_err(), "deleted at once");
        let refused = cluster.create(&gadgets(), object(NS, "late"));
        assert_eq!(reason(refused), Some(StatusReason::MethodNotAllowed));

        release(&cluster, &gadgets(), NS, "held");
        assert!(cluster.get_object(&crds(), "", "gadgets.example.com").is_err());
        assert!(cluster.type_def(&gadgets()).is_err(), "its type is no longer served");
    }

    #[test]
    fn a_delete_should_tell_a_removed_object_from_a_marked_one() {
        let cluster = SimCluster::new();
        cluster.create(&pods(), object(NS, "free")).expect("pod");
        cluster.create(&pods(), held(object(NS, "held"))).expect("pod");
        let removed = cluster
            .delete_object(&pods(), NS, "free", &DeleteOptions::default())
            .expect("delete");
        assert!(removed.is_removed());
        assert_eq!(removed.object().metadata.name, "free");
        let marked = cluster
            .delete_object(&pods(), NS, "held", &DeleteOptions::default())
            .expect("delete");
        assert!(!marked.is_removed());
        assert_eq!(marked.object().metadata.deletion_grace_period_seconds, Some(0));
    }
}
