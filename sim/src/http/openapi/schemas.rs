//! The schemas of the served kinds: built-in kinds generated from their k8s-openapi types (whose
//! `schemars` implementations carry upstream's definitions and names), custom kinds read from the
//! stored CRD objects.

use crate::TypeDef;
use k8s_openapi::api::{apps, batch, coordination, core, events, rbac, storagemigration};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube_gc::api::PartialObjectMeta;
use schemars::generate::SchemaSettings;
use schemars::transform::ReplaceBoolSchemas;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::{json, Map, Value};
use std::borrow::Cow;

/// Which OpenAPI a document is: where its definitions live and how a `$ref` is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Dialect {
    /// Swagger 2.0: `#/definitions/{name}`.
    V2,
    /// OpenAPI 3.0: `#/components/schemas/{name}`.
    V3,
}

impl Dialect {
    /// The `$ref` of the definition `name`.
    pub(super) fn reference(self, name: &str) -> String {
        match self {
            Dialect::V2 => format!("#/definitions/{name}"),
            Dialect::V3 => format!("#/components/schemas/{name}"),
        }
    }

    /// A schema generator writing refs as this dialect does. OpenAPI 3 takes schemars' own
    /// settings (a `$ref` with siblings becomes `allOf: [$ref]`, as upstream's v3 documents have
    /// it); Swagger 2.0 keeps `$ref` beside its `description`, as upstream's v2 document does.
    fn generator(self) -> SchemaGenerator {
        let mut settings = SchemaSettings::openapi3();
        if self == Dialect::V2 {
            settings.definitions_path = "/definitions".into();
            let mut bool_schemas = ReplaceBoolSchemas::default();
            bool_schemas.skip_additional_properties = true;
            settings.transforms = vec![Box::new(bool_schemas)];
        }
        settings.meta_schema = None;
        SchemaGenerator::new(settings)
    }
}

/// A built-in kind and its k8s-openapi type, as two functions of that type.
struct Builtin {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    /// Adds the type's schema (and every schema it refers to) to the generator.
    generate: fn(&mut SchemaGenerator) -> Schema,
    /// The upstream definition name, e.g. `io.k8s.api.apps.v1.Deployment`.
    name: fn() -> Cow<'static, str>,
}

fn builtin<T: JsonSchema>(group: &'static str, version: &'static str, kind: &'static str) -> Builtin {
    Builtin {
        group,
        version,
        kind,
        generate: SchemaGenerator::subschema_for::<T>,
        name: T::schema_name,
    }
}

/// Every built-in kind of [`crate::SimCluster::new`]'s catalogue, with its type.
fn builtins() -> Vec<Builtin> {
    vec![
        builtin::<core::v1::Pod>("", "v1", "Pod"),
        builtin::<core::v1::ConfigMap>("", "v1", "ConfigMap"),
        builtin::<core::v1::Secret>("", "v1", "Secret"),
        builtin::<core::v1::ServiceAccount>("", "v1", "ServiceAccount"),
        builtin::<core::v1::Service>("", "v1", "Service"),
        builtin::<core::v1::Namespace>("", "v1", "Namespace"),
        builtin::<core::v1::Node>("", "v1", "Node"),
        builtin::<core::v1::PersistentVolume>("", "v1", "PersistentVolume"),
        builtin::<core::v1::ReplicationController>("", "v1", "ReplicationController"),
        builtin::<core::v1::Event>("", "v1", "Event"),
        builtin::<apps::v1::Deployment>("apps", "v1", "Deployment"),
        builtin::<apps::v1::ReplicaSet>("apps", "v1", "ReplicaSet"),
        builtin::<apps::v1::StatefulSet>("apps", "v1", "StatefulSet"),
        builtin::<apps::v1::DaemonSet>("apps", "v1", "DaemonSet"),
        builtin::<apps::v1::ControllerRevision>("apps", "v1", "ControllerRevision"),
        builtin::<batch::v1::Job>("batch", "v1", "Job"),
        builtin::<batch::v1::CronJob>("batch", "v1", "CronJob"),
        builtin::<rbac::v1::Role>("rbac.authorization.k8s.io", "v1", "Role"),
        builtin::<rbac::v1::RoleBinding>("rbac.authorization.k8s.io", "v1", "RoleBinding"),
        builtin::<rbac::v1::ClusterRole>("rbac.authorization.k8s.io", "v1", "ClusterRole"),
        builtin::<rbac::v1::ClusterRoleBinding>("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding"),
        builtin::<coordination::v1::Lease>("coordination.k8s.io", "v1", "Lease"),
        builtin::<events::v1::Event>("events.k8s.io", "v1", "Event"),
        builtin::<CustomResourceDefinition>("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        builtin::<storagemigration::v1beta1::StorageVersionMigration>(
            "storagemigration.k8s.io",
            "v1beta1",
            "StorageVersionMigration",
        ),
    ]
}

/// True when `def` at `version` is a kind whose schema comes from its k8s-openapi type; any
/// other served kind (a CRD's, or one registered directly) is custom.
pub(super) fn is_builtin(def: &TypeDef, version: &str) -> bool {
    !def.custom
        && builtins()
            .iter()
            .any(|b| b.group == def.group && b.version == version && b.kind == def.kind)
}

/// One served kind at one version.
#[derive(Clone, Debug)]
pub(super) struct Served {
    pub(super) def: TypeDef,
    pub(super) version: String,
}

impl Served {
    fn gvk(&self) -> Value {
        json!({"group": self.def.group, "version": self.version, "kind": self.def.kind})
    }

    /// The definition name: upstream's for a built-in kind; for a custom kind, the group
    /// reversed, then version and kind (`com.example.v1.Widget`), as the API server names it.
    pub(super) fn name(&self) -> String {
        let builtin = builtins().into_iter().find(|b| {
            !self.def.custom && b.group == self.def.group && b.version == self.version && b.kind == self.def.kind
        });
        match builtin {
            Some(b) => (b.name)().into_owned(),
            None => {
                let group: Vec<&str> = self.def.group.split('.').rev().collect();
                format!("{}.{}.{}", group.join("."), self.version, self.def.kind)
            }
        }
    }
}

/// Every definition the kinds `served` need, each kind's carrying its group-version-kind.
/// `crds` are the stored CRD objects, read for the schemas of custom kinds.
pub(super) fn definitions(served: &[Served], crds: &[PartialObjectMeta], dialect: Dialect) -> Map<String, Value> {
    let mut generator = dialect.generator();
    let table = builtins();
    let mut custom = Vec::new();
    for kind in served {
        let entry = table.iter().find(|b| {
            !kind.def.custom && b.group == kind.def.group && b.version == kind.version && b.kind == kind.def.kind
        });
        match entry {
            Some(b) => drop((b.generate)(&mut generator)),
            None => custom.push(kind),
        }
    }
    if !custom.is_empty() {
        generator.subschema_for::<ObjectMeta>();
    }
    let mut definitions = generator.take_definitions(true);
    for kind in served {
        let name = kind.name();
        if let Some(Value::Object(schema)) = definitions.get_mut(&name) {
            schema.insert(GVK.to_string(), json!([kind.gvk()]));
        }
    }
    for kind in custom {
        let schema = custom_schema(kind, crds, dialect);
        definitions.insert(kind.name(), schema);
    }
    definitions
}

/// The vendor extension naming the kinds a definition is the schema of.
pub(super) const GVK: &str = "x-kubernetes-group-version-kind";

/// The `openAPIV3Schema` a stored CRD gives `kind`'s version, if any.
fn crd_schema(kind: &Served, crds: &[PartialObjectMeta]) -> Option<Value> {
    let spec = crds.iter().filter_map(|crd| crd.rest.get("spec")).find(|spec| {
        spec["group"] == kind.def.group.as_str() && spec["names"]["plural"] == kind.def.resource.as_str()
    })?;
    let version = spec["versions"]
        .as_array()?
        .iter()
        .find(|v| v["name"] == kind.version.as_str())?;
    version["schema"]["openAPIV3Schema"]
        .as_object()
        .map(|s| Value::Object(s.clone()))
}

/// A custom kind's schema: its CRD's (or, without one, any object), with `apiVersion`, `kind`
/// and `metadata` as every object has them, and its group-version-kind.
fn custom_schema(kind: &Served, crds: &[PartialObjectMeta], dialect: Dialect) -> Value {
    let mut schema = crd_schema(kind, crds)
        .unwrap_or_else(|| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
    if dialect == Dialect::V2 {
        // Swagger 2.0 has no way to say "these fields, and any others": like the API server, the
        // v2 document drops the fields of such an object, so that clients validate none of them.
        drop_fields_of_open_objects(&mut schema);
    }
    let meta = dialect.reference(&ObjectMeta::schema_name());
    let metadata = match dialect {
        Dialect::V2 => json!({"$ref": meta, "description": METADATA}),
        Dialect::V3 => json!({"allOf": [{"$ref": meta}], "description": METADATA}),
    };
    let open = schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    schema["type"] = json!("object");
    schema[GVK] = json!([kind.gvk()]);
    if dialect == Dialect::V2 && open {
        // Listing even the standard fields would make clients take the others for unknown ones.
        return schema;
    }
    let properties = &mut schema["properties"];
    if !properties.is_object() {
        *properties = json!({});
    }
    properties["apiVersion"] = json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."});
    properties["kind"] = json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents."});
    properties["metadata"] = metadata;
    schema
}

const METADATA: &str = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// Removes `properties` (and `required`) under every `x-kubernetes-preserve-unknown-fields: true`.
fn drop_fields_of_open_objects(schema: &mut Value) {
    let Some(object) = schema.as_object_mut() else { return };
    if object.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
        object.remove("properties");
        object.remove("required");
    }
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        properties.values_mut().for_each(drop_fields_of_open_objects);
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = object.get_mut(key) {
            drop_fields_of_open_objects(child);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(children)) = object.get_mut(key) {
            children.iter_mut().for_each(drop_fields_of_open_objects);
        }
    }
}
