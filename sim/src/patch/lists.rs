//! How each list of an object merges: the one table of list keys that both strategic merge patch
//! ([`super::strategic`]) and server-side apply ([`super::apply`], [`crate::managed`]) read.
//!
//! Built-in types go by field name, as the Go types' tags do for the lists clients write:
//!
//! - `metadata.ownerReferences` is keyed by `uid`, `metadata.finalizers` is a set;
//! - `containers`, `initContainers`, `ephemeralContainers`, `volumes`, `imagePullSecrets` are keyed
//!   by `name`, `hostAliases` by `ip`, `topologySpreadConstraints` by `topologyKey`, `conditions`
//!   by `type`; in a container, `env` by `name`, `ports` by `containerPort`, `volumeMounts` by
//!   `mountPath`, `volumeDevices` by `devicePath`; a Service's `ports` by `port`;
//! - every other list is atomic: it is replaced whole.
//!
//! Custom resources keep those metadata rules; below their metadata, a list is keyed or a set only
//! where their CRD's schema says so (`x-kubernetes-list-type: map` with
//! `x-kubernetes-list-map-keys`, or `set`), and atomic everywhere else.
//!
//! Upstream keys a few of these lists by two fields (a container's `ports` by `containerPort` and
//! `protocol`); one key each is enough to tell the items of every manifest apart that does not
//! list one port twice with two protocols.

use serde_json::Value;

/// Where in a built-in object a map sits, as far as the list rules care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Level {
    Root,
    Metadata,
    /// An element of a list of containers.
    Container,
    /// A Service's `spec`.
    ServiceSpec,
    Other,
}

impl Level {
    /// The level of the map under `key`, in an object that is a Service when `service` is set.
    pub(crate) fn child(self, key: &str, service: bool) -> Level {
        match (self, key) {
            (Level::Root, "metadata") => Level::Metadata,
            (Level::Root, "spec") if service => Level::ServiceSpec,
            _ => Level::Other,
        }
    }
}

/// How a list field of a built-in type merges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ListRule {
    /// By this key of its elements, which are maps at the given level.
    Keyed(&'static str, Level),
    /// As a set of scalars.
    Set,
    /// Replaced whole.
    Atomic,
}

/// The rule of the list under `key` in a map at `level`.
pub(crate) fn list_rule(level: Level, key: &str) -> ListRule {
    match (level, key) {
        (Level::Metadata, "ownerReferences") => ListRule::Keyed("uid", Level::Other),
        (Level::Metadata, "finalizers") => ListRule::Set,
        (_, "containers" | "initContainers" | "ephemeralContainers") => ListRule::Keyed("name", Level::Container),
        (Level::Container, "env") => ListRule::Keyed("name", Level::Other),
        (Level::Container, "ports") => ListRule::Keyed("containerPort", Level::Other),
        (Level::Container, "volumeMounts") => ListRule::Keyed("mountPath", Level::Other),
        (Level::Container, "volumeDevices") => ListRule::Keyed("devicePath", Level::Other),
        (Level::ServiceSpec, "ports") => ListRule::Keyed("port", Level::Other),
        (Level::Metadata | Level::Container, _) => ListRule::Atomic,
        (_, "volumes" | "imagePullSecrets") => ListRule::Keyed("name", Level::Other),
        (_, "hostAliases") => ListRule::Keyed("ip", Level::Other),
        (_, "topologySpreadConstraints") => ListRule::Keyed("topologyKey", Level::Other),
        (_, "conditions") => ListRule::Keyed("type", Level::Other),
        _ => ListRule::Atomic,
    }
}

/// What a list is, for server-side apply: its items' identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ListKind {
    /// Items are maps told apart by these keys (an associative list).
    Map(Vec<String>),
    /// Items are scalars, each present once.
    Set,
    /// The list is one value.
    Atomic,
}

/// A position in an object's shape: what the maps and lists below it are. Copy-cheap; it borrows
/// the CRD schema it walks, if any.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Shape<'s> {
    /// In a built-in object (or a custom resource's metadata), at this level; `service` tells a
    /// Service apart, whose `spec.ports` are keyed by `port`.
    BuiltIn { level: Level, service: bool },
    /// At the top of a custom resource, whose root schema (if known) is this.
    CustomRoot(Option<&'s Value>),
    /// Below the top of a custom resource, at this node of its schema (none: no schema known).
    Schema(Option<&'s Value>),
}

impl<'s> Shape<'s> {
    /// The top of an object of `kind`: a custom resource's shape follows `schema` (its version's
    /// `openAPIV3Schema`), a built-in one the table above.
    pub(crate) fn root(kind: &str, custom: bool, schema: Option<&'s Value>) -> Shape<'s> {
        if custom {
            Shape::CustomRoot(schema)
        } else {
            Shape::BuiltIn {
                level: Level::Root,
                service: kind == "Service",
            }
        }
    }

    /// The shape of the value under `key` of a map here.
    pub(crate) fn field(self, key: &str) -> Shape<'s> {
        match self {
            Shape::BuiltIn { level, service } => Shape::BuiltIn {
                level: level.child(key, service),
                service,
            },
            Shape::CustomRoot(_) if key == "metadata" => Shape::BuiltIn {
                level: Level::Metadata,
                service: false,
            },
            Shape::CustomRoot(node) | Shape::Schema(node) => Shape::Schema(node.and_then(|n| property(n, key))),
        }
    }

    /// What the list under `key` of a map here is.
    pub(crate) fn list(self, key: &str) -> ListKind {
        match self {
            Shape::BuiltIn { level, .. } => match list_rule(level, key) {
                ListRule::Keyed(merge_key, _) => ListKind::Map(vec![merge_key.to_string()]),
                ListRule::Set => ListKind::Set,
                ListRule::Atomic => ListKind::Atomic,
            },
            Shape::CustomRoot(node) | Shape::Schema(node) => node
                .and_then(|n| property(n, key))
                .map_or(ListKind::Atomic, schema_list_kind),
        }
    }

    /// The shape of the items of the list under `key` of a map here.
    pub(crate) fn item(self, key: &str) -> Shape<'s> {
        match self {
            Shape::BuiltIn { level, service } => match list_rule(level, key) {
                ListRule::Keyed(_, items) => Shape::BuiltIn { level: items, service },
                ListRule::Set | ListRule::Atomic => Shape::BuiltIn {
                    level: Level::Other,
                    service,
                },
            },
            Shape::CustomRoot(node) | Shape::Schema(node) => {
                Shape::Schema(node.and_then(|n| property(n, key)).and_then(|list| list.get("items")))
            }
        }
    }
}

/// The schema of `key` in an object schema: its property, or what `additionalProperties` says of
/// every key.
fn property<'s>(node: &'s Value, key: &str) -> Option<&'s Value> {
    node.get("properties")
        .and_then(|p| p.get(key))
        .or_else(|| node.get("additionalProperties").filter(|a| a.is_object()))
}

/// A list schema's kind from its `x-kubernetes-list-type` (atomic when absent, as for structural
/// schemas).
fn schema_list_kind(node: &Value) -> ListKind {
    match node.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("map") => {
            let keys = node.get("x-kubernetes-list-map-keys").and_then(Value::as_array);
            let keys: Vec<String> = keys
                .into_iter()
                .flatten()
                .filter_map(|k| k.as_str().map(String::from))
                .collect();
            if keys.is_empty() {
                ListKind::Atomic
            } else {
                ListKind::Map(keys)
            }
        }
        Some("set") => ListKind::Set,
        _ => ListKind::Atomic,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn built_in_shapes_should_key_pod_template_lists_and_service_ports() {
        let deployment = Shape::root("Deployment", false, None);
        let pod_spec = deployment.field("spec").field("template").field("spec");
        assert_eq!(pod_spec.list("containers"), ListKind::Map(vec!["name".into()]));
        let container = pod_spec.item("containers");
        assert_eq!(container.list("ports"), ListKind::Map(vec!["containerPort".into()]));
        assert_eq!(container.list("args"), ListKind::Atomic);
        let service = Shape::root("Service", false, None).field("spec");
        assert_eq!(service.list("ports"), ListKind::Map(vec!["port".into()]));
        let metadata = deployment.field("metadata");
        assert_eq!(metadata.list("finalizers"), ListKind::Set);
        assert_eq!(metadata.list("ownerReferences"), ListKind::Map(vec!["uid".into()]));
    }

    #[test]
    fn custom_shapes_should_follow_the_schema_and_keep_the_metadata_rules() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                      "x-kubernetes-list-map-keys": ["name", "protocol"],
                      "items": {"type": "object", "properties": {"tags": {
                          "type": "array", "x-kubernetes-list-type": "set"}}}},
            "args": {"type": "array"},
            "containers": {"type": "array"},
        }}}});
        let root = Shape::root("Widget", true, Some(&schema));
        let spec = root.field("spec");
        assert_eq!(
            spec.list("ports"),
            ListKind::Map(vec!["name".into(), "protocol".into()])
        );
        assert_eq!(spec.item("ports").list("tags"), ListKind::Set);
        assert_eq!(spec.list("args"), ListKind::Atomic);
        assert_eq!(
            spec.list("containers"),
            ListKind::Atomic,
            "no built-in rule below a custom root"
        );
        assert_eq!(root.field("metadata").list("finalizers"), ListKind::Set);
        let unknown = Shape::root("Widget", true, None).field("spec");
        assert_eq!(unknown.list("ports"), ListKind::Atomic);
    }
}
