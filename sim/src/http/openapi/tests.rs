use super::*;
use serde_json::json;

/// Every `$ref` in `value`.
fn refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(r)) = map.get("$ref") {
                out.push(r.clone());
            }
            map.values().for_each(|v| refs(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
        _ => {}
    }
}

/// Asserts that every `$ref` of `doc` names a definition under `prefix` that `definitions` holds.
fn assert_refs_resolve(doc: &Value, prefix: &str, definitions: &Value) {
    let mut all = Vec::new();
    refs(doc, &mut all);
    assert!(!all.is_empty(), "no $ref at all");
    for r in all {
        let name = r
            .strip_prefix(prefix)
            .unwrap_or_else(|| panic!("{r} is not under {prefix}"));
        assert!(definitions.get(name).is_some(), "{r} does not resolve");
    }
}

/// Asserts that `definitions` has `name`, naming `gvk` among its kinds.
fn assert_kind(definitions: &Value, name: &str, gvk: Value) {
    let kinds = definitions[name][schemas::GVK]
        .as_array()
        .unwrap_or_else(|| panic!("{name} has no group-version-kind"));
    assert!(kinds.contains(&gvk), "{name}: {kinds:?}");
}

fn json_of(doc: &Document) -> Value {
    serde_json::from_slice(&doc.json).expect("a JSON document")
}

/// A cluster serving the built-ins and the CRD `widgets.example.com`, with a schema.
fn cluster_with_widgets() -> SimCluster {
    let cluster = SimCluster::new();
    let crd: PartialObjectMeta = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "kind": "Widget", "categories": ["all"]},
                 "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                     "type": "object",
                     "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer", "description": "How big."}}}}}}}]},
    }))
    .expect("a CRD");
    let crds = Gvr::new("apiextensions.k8s.io", "v1", "customresourcedefinitions");
    cluster.create(&crds, crd).expect("the CRD is created");
    cluster
}

#[test]
fn every_v3_document_should_name_each_served_kind_and_resolve_every_ref() {
    let cluster = cluster_with_widgets();
    let (defs, _) = cluster.served_types();
    for (group, version) in group_versions(&defs) {
        let doc = json_of(&v3_document(&cluster, &defs, &group, &version).expect("a document"));
        assert_eq!(doc["openapi"], "3.0.0");
        assert!(doc["paths"].is_object() && doc["info"].is_object());
        let definitions = &doc["components"]["schemas"];
        assert_refs_resolve(&doc, "#/components/schemas/", definitions);
        for kind in served(&defs, |d, v| d.group == group && v == version) {
            let gvk = json!({"group": group, "version": version, "kind": kind.def.kind});
            assert_kind(definitions, &kind.name(), gvk);
        }
    }
}

#[test]
fn built_in_kinds_should_carry_upstreams_names_and_fields() {
    let cluster = SimCluster::new();
    let (defs, _) = cluster.served_types();
    let apps = json_of(&v3_document(&cluster, &defs, "apps", "v1").expect("apps/v1"));
    let schemas = &apps["components"]["schemas"];
    let replicas = &schemas["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]["replicas"];
    assert!(replicas["description"]
        .as_str()
        .is_some_and(|d| d.contains("desired pods")));
    assert!(schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"].is_object());
    let core = json_of(&v3_document(&cluster, &defs, "", "v1").expect("v1"));
    assert_kind(
        &core["components"]["schemas"],
        "io.k8s.api.core.v1.Pod",
        json!({"group": "", "version": "v1", "kind": "Pod"}),
    );
    assert!(v3_document(&cluster, &defs, "nope.example.com", "v1").is_none());
}

#[test]
fn a_crds_schema_should_be_served_with_metadata_in_v2_and_v3() {
    let cluster = cluster_with_widgets();
    let (defs, _) = cluster.served_types();
    let doc = json_of(&v3_document(&cluster, &defs, "example.com", "v1").expect("example.com/v1"));
    let widget = &doc["components"]["schemas"]["com.example.v1.Widget"];
    assert_eq!(widget["properties"]["spec"]["properties"]["size"]["type"], "integer");
    assert_eq!(
        widget["properties"]["metadata"]["allOf"][0]["$ref"],
        "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    );

    let v2 = v2(&served(&defs, |_, _| true), &crds(&cluster));
    assert_eq!(v2["swagger"], "2.0");
    let definitions = &v2["definitions"];
    assert_refs_resolve(&v2, "#/definitions/", definitions);
    for kind in served(&defs, |_, _| true) {
        let gvk = json!({"group": kind.def.group, "version": kind.version, "kind": kind.def.kind});
        assert_kind(definitions, &kind.name(), gvk);
    }
    assert!(!proto::document(&v2).is_empty());
}

#[test]
fn the_index_should_list_every_group_version_by_a_hashed_url() {
    let cluster = cluster_with_widgets();
    let (defs, _) = cluster.served_types();
    let index = index(&cluster, &defs);
    for path in ["api/v1", "apis/apps/v1", "apis/batch/v1", "apis/example.com/v1"] {
        let url = index["paths"][path]["serverRelativeURL"].as_str().unwrap_or_default();
        assert!(url.starts_with(&format!("/openapi/v3/{path}?hash=")), "{path}: {url:?}");
    }
}

#[test]
fn v2_should_answer_protobuf_or_json_as_accepted_and_refuse_neither() {
    let accept = |value: &str| {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_str(value).expect("a header value"));
        v2_form(&headers)
    };
    assert_eq!(accept(PROTOBUF_V2).ok(), Some(Form::Protobuf));
    assert_eq!(accept("application/json, */*").ok(), Some(Form::Json));
    assert_eq!(v2_form(&HeaderMap::new()).ok(), Some(Form::Json));
    let refused = accept("application/yaml").expect_err("YAML is not served");
    assert_eq!(refused.reason(), Some(StatusReason::NotAcceptable));
}
