//! Server-side apply through the cluster's user face: merge, ownership, removal and conflicts.

use crate::tests::{crds, NS};
use crate::{SimCluster, Written};
use kube_gc::api::{ApiError, Gvr, PartialObjectMeta, PatchType, StatusReason};
use serde_json::{json, Value};

fn deployments() -> Gvr {
    Gvr::new("apps", "v1", "deployments")
}

fn deployment(spec: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": NS}, "spec": spec})
}

fn apply_as(cluster: &SimCluster, manager: &str, config: &Value, force: bool) -> Result<Written, ApiError> {
    cluster
        .writes(false)
        .by(manager)
        .apply(&deployments(), NS, "d", config, force)
}

fn apply(cluster: &SimCluster, manager: &str, config: Value) -> PartialObjectMeta {
    apply_as(cluster, manager, &config, false).expect("applies").object
}

/// The deployment's spec less the fields that hold their defaults, so that each step shows what
/// the managers wrote (a field an applier drops is defaulted again, as upstream does).
fn spec(cluster: &SimCluster) -> Value {
    let d = cluster.get_object(&deployments(), NS, "d").expect("exists");
    let mut spec = d.rest.get("spec").cloned().unwrap_or_default();
    let blank = SimCluster::new();
    let defaults = apply(&blank, "a", deployment(json!({}))).rest["spec"].clone();
    if let (Some(spec), Some(defaults)) = (spec.as_object_mut(), defaults.as_object()) {
        spec.retain(|key, value| defaults.get(key) != Some(value));
    }
    spec
}

/// `(manager, operation)` of each managedFields entry of the deployment, in order.
fn managers(cluster: &SimCluster) -> Vec<(String, String)> {
    let d = cluster.get_object(&deployments(), NS, "d").expect("exists");
    let list = cluster.managed_fields(&d.metadata.uid);
    let entries = list.as_deref().and_then(Value::as_array).cloned().unwrap_or_default();
    let text = |e: &Value, key: &str| e[key].as_str().unwrap_or_default().to_string();
    entries
        .iter()
        .map(|e| (text(e, "manager"), text(e, "operation")))
        .collect()
}

/// The fieldsV1 of `manager`'s entry of `operation`.
fn fields_of(cluster: &SimCluster, manager: &str, operation: &str) -> Value {
    let d = cluster.get_object(&deployments(), NS, "d").expect("exists");
    let list = cluster.managed_fields(&d.metadata.uid).expect("managed");
    let entries = list.as_array().expect("a list");
    let entry = entries
        .iter()
        .find(|e| e["manager"] == manager && e["operation"] == operation);
    entry.map(|e| e["fieldsV1"].clone()).unwrap_or_default()
}

fn owned(manager: &str, operation: &str) -> (String, String) {
    (manager.to_string(), operation.to_string())
}

fn patch_as(cluster: &SimCluster, manager: &str, body: Value) {
    cluster
        .writes(false)
        .by(manager)
        .patch_object(&deployments(), NS, "d", PatchType::Merge, &body)
        .expect("patches");
}

#[test]
fn an_apply_should_create_and_record_exactly_the_applied_fields() {
    let cluster = SimCluster::new();
    let config =
        deployment(json!({"replicas": 2, "template": {"spec": {"containers": [{"name": "app", "image": "nginx"}]}}}));
    let written = apply_as(&cluster, "kubectl", &config, false).expect("creates");
    assert!(written.created);
    assert!(!written.object.metadata.uid.is_empty());
    let list = written.managed_fields.expect("managed fields in the answer");
    let entry = &list.as_array().expect("a list")[0];
    assert_eq!(
        (
            &entry["manager"],
            &entry["operation"],
            &entry["apiVersion"],
            &entry["fieldsType"]
        ),
        (
            &json!("kubectl"),
            &json!("Apply"),
            &json!("apps/v1"),
            &json!("FieldsV1")
        )
    );
    assert!(entry["time"].as_str().is_some_and(|t| t.ends_with('Z')));
    assert_eq!(
        entry["fieldsV1"],
        json!({"f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
            "k:{\"name\":\"app\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}})
    );
    let again = apply_as(&cluster, "kubectl", &config, false).expect("re-applies");
    assert!(!again.created);
}

#[test]
fn re_applying_should_update_remove_dropped_fields_and_keep_what_others_own() {
    // Each step: who applies or patches what, then the spec and the managers that follow.
    let cluster = SimCluster::new();
    apply(
        &cluster,
        "a",
        deployment(json!({"replicas": 1, "paused": true, "minReadySeconds": 5})),
    );
    apply(
        &cluster,
        "a",
        deployment(json!({"replicas": 3, "paused": true, "minReadySeconds": 5})),
    );
    assert_eq!(
        spec(&cluster),
        json!({"replicas": 3, "paused": true, "minReadySeconds": 5})
    );

    apply(&cluster, "a", deployment(json!({"replicas": 3, "minReadySeconds": 5})));
    assert_eq!(
        spec(&cluster),
        json!({"replicas": 3, "minReadySeconds": 5}),
        "paused is gone"
    );

    patch_as(&cluster, "other", json!({"spec": {"minReadySeconds": 7}}));
    assert_eq!(managers(&cluster), [owned("a", "Apply"), owned("other", "Update")]);
    apply(&cluster, "a", deployment(json!({"replicas": 3})));
    assert_eq!(
        spec(&cluster),
        json!({"replicas": 3, "minReadySeconds": 7}),
        "a field another manager took stays"
    );

    let mut nothing = deployment(json!({}));
    nothing.as_object_mut().expect("an object").remove("spec");
    apply(&cluster, "a", nothing);
    assert_eq!(spec(&cluster), json!({"minReadySeconds": 7}));
    assert_eq!(
        managers(&cluster),
        [owned("other", "Update")],
        "an applier that owns nothing goes"
    );
}

#[test]
fn keyed_lists_sets_and_maps_should_merge_by_item_and_atomic_lists_be_replaced() {
    let cluster = SimCluster::new();
    let containers = |names: &[&str]| -> Value {
        names
            .iter()
            .map(|n| json!({"name": n, "image": format!("{n}:1"), "args": ["-v"]}))
            .collect()
    };
    let with = |names: &[&str], finalizers: &[&str], labels: Value| {
        let mut config = deployment(json!({"template": {"spec": {"containers": containers(names)}}}));
        config["metadata"]["finalizers"] = json!(finalizers);
        config["metadata"]["labels"] = labels;
        config
    };
    apply(&cluster, "a", with(&["x", "y"], &["f/a"], json!({"app": "web"})));
    apply(&cluster, "b", with(&["z"], &["f/b"], json!({"tier": "front"})));
    let d = cluster.get_object(&deployments(), NS, "d").expect("exists");
    let names = |d: &PartialObjectMeta| -> Vec<String> {
        let list = d.rest["spec"]["template"]["spec"]["containers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        list.iter()
            .map(|c| c["name"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(names(&d), ["x", "y", "z"], "b's container joins a's");
    assert_eq!(d.metadata.finalizers, ["f/a", "f/b"]);
    assert_eq!(d.metadata.labels.len(), 2);

    let mut drop_y = with(&["x"], &[], json!({"app": "web"}));
    drop_y["spec"]["template"]["spec"]["containers"][0]["args"] = json!(["-q"]);
    apply(&cluster, "a", drop_y);
    let d = cluster.get_object(&deployments(), NS, "d").expect("exists");
    assert_eq!(names(&d), ["x", "z"], "a's dropped container goes, b's stays");
    assert_eq!(d.metadata.finalizers, ["f/b"], "a's dropped finalizer goes");
    assert_eq!(
        d.rest["spec"]["template"]["spec"]["containers"][0]["args"],
        json!(["-q"]),
        "an atomic list is replaced"
    );
    assert_eq!(
        fields_of(&cluster, "b", "Apply")["f:metadata"],
        json!({"f:finalizers": {"v:\"f/b\"": {}}, "f:labels": {"f:tier": {}}})
    );
}

#[test]
fn changing_another_managers_field_should_conflict_unless_forced_and_the_same_value_be_shared() {
    let cluster = SimCluster::new();
    apply(&cluster, "kubectl", deployment(json!({"replicas": 2})));
    patch_as(&cluster, "kubectl-client-side-apply", json!({"spec": {"replicas": 5}}));
    assert_eq!(
        fields_of(&cluster, "kubectl-client-side-apply", "Update"),
        json!({"f:spec": {"f:replicas": {}}})
    );
    assert_eq!(
        managers(&cluster),
        [owned("kubectl-client-side-apply", "Update")],
        "the update took replicas"
    );

    let err = apply_as(&cluster, "kubectl", &deployment(json!({"replicas": 3})), false).expect_err("conflicts");
    assert_eq!(err.reason(), Some(StatusReason::Conflict));
    let ApiError::Status { message, .. } = &err else {
        panic!("a status: {err:?}")
    };
    assert_eq!(
        message,
        "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using apps/v1: .spec.replicas"
    );
    let cause = &err.causes()[0];
    assert_eq!(
        (cause.reason.as_str(), cause.field.as_str(), cause.message.as_str()),
        (
            "FieldManagerConflict",
            ".spec.replicas",
            "conflict with \"kubectl-client-side-apply\" using apps/v1"
        )
    );
    assert_eq!(spec(&cluster)["replicas"], 5, "nothing written");

    apply(&cluster, "kubectl", deployment(json!({"replicas": 5})));
    assert_eq!(
        managers(&cluster),
        [owned("kubectl", "Apply"), owned("kubectl-client-side-apply", "Update")],
        "the same value is shared"
    );

    apply_as(&cluster, "kubectl", &deployment(json!({"replicas": 3})), true).expect("forced");
    assert_eq!(spec(&cluster)["replicas"], 3);
    assert_eq!(managers(&cluster), [owned("kubectl", "Apply")], "force takes the field");
}

#[test]
fn conflicts_with_several_fields_should_be_listed_by_manager() {
    let cluster = SimCluster::new();
    apply(&cluster, "a", deployment(json!({"replicas": 1, "paused": false})));
    apply(&cluster, "b", deployment(json!({"minReadySeconds": 1})));
    let err = apply_as(
        &cluster,
        "c",
        &deployment(json!({"replicas": 2, "paused": true, "minReadySeconds": 2})),
        false,
    )
    .expect_err("conflicts");
    let ApiError::Status { message, .. } = &err else {
        panic!("a status: {err:?}")
    };
    assert_eq!(
        message,
        "Apply failed with 3 conflicts: conflicts with \"a\":\n- .spec.paused\n- .spec.replicas\nconflicts with \"b\":\n- .spec.minReadySeconds"
    );
    assert_eq!(err.causes().len(), 3);
}

#[test]
fn re_applying_the_same_configuration_should_write_nothing() {
    let cluster = SimCluster::new();
    let config = deployment(json!({"replicas": 2}));
    let first = apply(&cluster, "a", config.clone());
    let rv = cluster.resource_version();
    let again = apply(&cluster, "a", config);
    assert_eq!(again.metadata.resource_version, first.metadata.resource_version);
    assert_eq!(cluster.resource_version(), rv);
    apply(&cluster, "b", deployment(json!({"replicas": 2})));
    assert!(
        cluster.resource_version() > rv,
        "a new co-owner changes the managed fields: a write"
    );
}

#[test]
fn a_dry_run_apply_should_answer_with_the_managers_and_store_nothing() {
    let cluster = SimCluster::new();
    let config = deployment(json!({"replicas": 2}));
    let dry = cluster
        .dry_run()
        .by("a")
        .apply(&deployments(), NS, "d", &config, false)
        .expect("a dry apply");
    assert!(dry.managed_fields.is_some());
    assert!(cluster.get_object(&deployments(), NS, "d").is_err());
    assert_eq!(
        cluster
            .writes(false)
            .by("m")
            .create(&deployments(), serde_json::from_value(config).unwrap())
            .map(|w| w.created),
        Ok(true)
    );
    let rv = cluster.resource_version();
    let changed = deployment(json!({"replicas": 4}));
    let dry = cluster
        .dry_run()
        .by("a")
        .apply(&deployments(), NS, "d", &changed, true)
        .expect("a dry apply");
    assert_eq!(dry.object.rest["spec"]["replicas"], 4);
    assert_eq!(cluster.resource_version(), rv);
    assert_eq!(spec(&cluster)["replicas"], 2);
    assert_eq!(managers(&cluster), [owned("m", "Update")]);
}

#[test]
fn bad_configurations_should_be_refused_with_a_status() {
    let cluster = SimCluster::new();
    let no_manager = cluster
        .writes(false)
        .apply(&deployments(), NS, "d", &deployment(json!({})), false);
    let cases: Vec<(Result<Written, ApiError>, StatusReason, &str)> = vec![
        (
            no_manager,
            StatusReason::Invalid,
            "fieldManager: Required value: is required for apply patch",
        ),
        (
            apply_as(&cluster, "a", &json!(["a list"]), false),
            StatusReason::BadRequest,
            "must be an object",
        ),
        (
            apply_as(
                &cluster,
                "a",
                &json!({"apiVersion": "apps/v2", "kind": "Deployment"}),
                false,
            ),
            StatusReason::BadRequest,
            "Specified patch version: apps/v2, expected: apps/v1",
        ),
        (
            apply_as(
                &cluster,
                "a",
                &json!({"apiVersion": "apps/v1", "kind": "ReplicaSet"}),
                false,
            ),
            StatusReason::BadRequest,
            "Incorrect kind",
        ),
        (
            apply_as(
                &cluster,
                "a",
                &json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "d", "managedFields": [{}]}}),
                false,
            ),
            StatusReason::BadRequest,
            "metadata.managedFields must be nil",
        ),
        (
            apply_as(
                &cluster,
                "a",
                &deployment(json!({"template": {"spec": {"containers": [{"image": "x"}]}}})),
                false,
            ),
            StatusReason::Invalid,
            "omits key field \"name\"",
        ),
        (
            apply_as(
                &cluster,
                "a",
                &json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "other"}}),
                false,
            ),
            StatusReason::BadRequest,
            "does not match the name on the URL",
        ),
    ];
    for (result, reason, words) in cases {
        let err = result.expect_err(words);
        assert_eq!(err.reason(), Some(reason), "{err}");
        assert!(err.to_string().contains(words), "{err}");
    }
    assert_eq!(cluster.object_count(), 0);
}

#[test]
fn writes_should_record_updates_by_their_manager_and_cost_nothing_without_one() {
    let cluster = SimCluster::new();
    let created = cluster
        .create(
            &deployments(),
            serde_json::from_value(deployment(json!({"replicas": 1}))).unwrap(),
        )
        .unwrap();
    assert_eq!(
        cluster.managed_fields(&created.metadata.uid),
        None,
        "no manager, nothing kept"
    );
    patch_as(&cluster, "kubectl-edit", json!({"metadata": {"labels": {"a": "b"}}}));
    assert_eq!(
        fields_of(&cluster, "kubectl-edit", "Update"),
        json!({"f:metadata": {"f:labels": {"f:a": {}}}}),
        "an update owns what it changed"
    );
    cluster
        .patch_object(
            &deployments(),
            NS,
            "d",
            PatchType::Merge,
            &json!({"metadata": {"labels": null}}),
        )
        .expect("a patch by no manager");
    assert_eq!(
        cluster.managed_fields(&created.metadata.uid),
        None,
        "removed fields leave their owners"
    );
    apply(&cluster, "a", deployment(json!({"replicas": 1})));
    cluster
        .delete_object(&deployments(), NS, "d", &Default::default())
        .expect("deleted");
    assert!(
        cluster.managed_fields(&created.metadata.uid).is_none(),
        "gone with the object"
    );
}

#[test]
fn custom_resources_should_merge_lists_as_their_crd_schema_says() {
    let cluster = SimCluster::new();
    let crd = json!({"metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                     "type": "object", "properties": {"spec": {"type": "object", "properties": {
                         "ports": {"type": "array", "x-kubernetes-list-type": "map",
                                   "x-kubernetes-list-map-keys": ["name"], "items": {"type": "object"}},
                         "tags": {"type": "array", "items": {"type": "string"}}}}}}}}]}});
    cluster
        .create(&crds(), serde_json::from_value(crd).unwrap())
        .expect("a CRD");
    let widgets = Gvr::new("example.com", "v1", "widgets");
    let widget = |ports: Value, tags: Value| {
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
               "spec": {"ports": ports, "tags": tags}})
    };
    let apply_widget = |manager: &str, config: Value| {
        cluster
            .writes(false)
            .by(manager)
            .apply(&widgets, NS, "w", &config, false)
            .expect("applies")
            .object
    };
    apply_widget("a", widget(json!([{"name": "http", "port": 80}]), json!(["x"])));
    let w = apply_widget("b", widget(json!([{"name": "grpc", "port": 90}]), json!(["x"])));
    assert_eq!(
        w.rest["spec"]["ports"],
        json!([{"name": "http", "port": 80}, {"name": "grpc", "port": 90}]),
        "a map list merges by its keys"
    );
    assert_eq!(w.metadata.namespace, NS, "the namespace comes from the request");
    let err = cluster
        .writes(false)
        .by("b")
        .apply(
            &widgets,
            NS,
            "w",
            &widget(json!([{"name": "grpc", "port": 90}]), json!(["y"])),
            false,
        )
        .expect_err("an atomic list changed under another owner");
    assert_eq!(err.causes()[0].field, ".spec.tags");
}
