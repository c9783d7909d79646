//! Which names each type takes: the rule its registry validates `metadata.name` and
//! `metadata.generateName` with (`ValidateObjectMeta`'s name function), and the namespace rule
//! every namespaced object shares.
//!
//! Most built-in types take DNS subdomains (253 characters); Namespaces and StatefulSets take RFC
//! 1123 labels, Services RFC 1035 labels (63); custom resources take subdomains too. Types whose
//! registry sets no rule of its own (Events, RBAC roles and bindings) get only the rule every
//! create passes after the type's own: a path segment, not `.` or `..`, without `/` or `%`.

use super::formats;
use crate::types::TypeDef;
use kube_gc::api::FieldError;

/// How a type's names must be formed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NameRule {
    /// `NameIsDNSSubdomain`.
    DnsSubdomain,
    /// `NameIsDNSLabel` (RFC 1123).
    DnsLabel,
    /// `NameIsDNS1035Label`.
    Dns1035Label,
    /// `ValidatePathSegmentName`, the floor every name stands on.
    PathSegment,
}

impl NameRule {
    /// The rule of `def`'s registry.
    fn of(def: &TypeDef) -> NameRule {
        if def.custom {
            return NameRule::DnsSubdomain;
        }
        match (def.group.as_str(), def.resource.as_str()) {
            ("", "namespaces") | ("apps", "statefulsets") => NameRule::DnsLabel,
            ("", "services") => NameRule::Dns1035Label,
            (
                "",
                "pods"
                | "configmaps"
                | "secrets"
                | "serviceaccounts"
                | "nodes"
                | "persistentvolumes"
                | "replicationcontrollers",
            )
            | ("apps", "deployments" | "replicasets" | "daemonsets" | "controllerrevisions")
            | ("batch", "jobs" | "cronjobs")
            | ("coordination.k8s.io", "leases")
            | ("apiextensions.k8s.io", "customresourcedefinitions") => NameRule::DnsSubdomain,
            _ => NameRule::PathSegment,
        }
    }

    /// The messages `name` earns; a `prefix` (a `generateName`) may end in `-`.
    fn check(self, name: &str, prefix: bool) -> Vec<String> {
        let name = if prefix {
            mask_trailing_dash(name)
        } else {
            name.to_string()
        };
        match self {
            NameRule::DnsSubdomain => formats::dns1123_subdomain(&name),
            NameRule::DnsLabel => formats::dns1123_label(&name),
            NameRule::Dns1035Label => formats::dns1035_label(&name),
            NameRule::PathSegment => formats::path_segment_name(&name, prefix),
        }
    }
}

/// A `generateName` as upstream checks it: a trailing `-` and the character before it stand in
/// for by `a`, so that `web-` passes as the start of `web-x7k2p`.
fn mask_trailing_dash(prefix: &str) -> String {
    match prefix.as_bytes() {
        [head @ .., _, b'-'] => format!("{}a", String::from_utf8_lossy(head)),
        _ => prefix.to_string(),
    }
}

/// The failures of `metadata.generateName` and `metadata.name` under `def`'s rule; the name is
/// required (a `generateName` has been turned into one before this is called).
pub(super) fn name(def: &TypeDef, name: &str, generate_name: &str) -> Vec<FieldError> {
    let rule = NameRule::of(def);
    let mut errors: Vec<FieldError> = Vec::new();
    if !generate_name.is_empty() {
        let messages = rule.check(generate_name, true);
        errors.extend(
            messages
                .into_iter()
                .map(|m| FieldError::invalid("metadata.generateName", generate_name, m)),
        );
    }
    if name.is_empty() {
        errors.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else {
        let messages = rule.check(name, false);
        errors.extend(
            messages
                .into_iter()
                .map(|m| FieldError::invalid("metadata.name", name, m)),
        );
    }
    errors
}

/// The longest CronJob name: its Jobs are named after it with an 11-character suffix, and a Job
/// name must stay a 63-character label.
const CRON_JOB_NAME_LENGTH: usize = formats::LABEL_LENGTH - 11;

/// A CronJob's name is at most 52 characters, checked on create beside its type's rule.
pub(super) fn cron_job_name(def: &TypeDef, name: &str) -> Vec<FieldError> {
    if (def.group.as_str(), def.resource.as_str()) != ("batch", "cronjobs") || name.len() <= CRON_JOB_NAME_LENGTH {
        return Vec::new();
    }
    let detail = format!("must be no more than {CRON_JOB_NAME_LENGTH} characters");
    vec![FieldError::invalid("metadata.name", name, detail)]
}

/// `metadata.namespace`: required (an RFC 1123 label, a Namespace's name) on a namespaced type,
/// forbidden on a cluster-scoped one.
pub(super) fn namespace(def: &TypeDef, namespace: &str) -> Vec<FieldError> {
    match (def.namespaced, namespace.is_empty()) {
        (true, true) => vec![FieldError::required("metadata.namespace", "")],
        (true, false) => NameRule::DnsLabel
            .check(namespace, false)
            .into_iter()
            .map(|m| FieldError::invalid("metadata.namespace", namespace, m))
            .collect(),
        (false, false) => vec![FieldError::forbidden("metadata.namespace", "not allowed on this type")],
        (false, true) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(group: &str, kind: &str, resource: &str, namespaced: bool) -> TypeDef {
        TypeDef::new(group, "v1", kind, resource, namespaced)
    }

    fn refused(def: &TypeDef, name: &str) -> Vec<String> {
        super::name(def, name, "").iter().map(ToString::to_string).collect()
    }

    #[test]
    fn each_type_should_take_its_registrys_names() {
        let deployment = def("apps", "Deployment", "deployments", true);
        let namespace = def("", "Namespace", "namespaces", false);
        let service = def("", "Service", "services", true);
        let role = def("rbac.authorization.k8s.io", "Role", "roles", true);
        let event = def("", "Event", "events", true);
        let widget = def("example.com", "Widget", "widgets", true).custom();
        // (type, name, refused)
        let table: [(&TypeDef, &str, bool); 14] = [
            (&deployment, "web.v2", false),
            (&deployment, "Bad_Name", true),
            (&deployment, &"n".repeat(253), false),
            (&deployment, &"n".repeat(254), true),
            (&namespace, "team-a", false),
            (&namespace, "team.a", true),
            (&service, "web", false),
            (&service, "1web", true),
            (&role, "system:controller:x", false),
            (&role, "a/b", true),
            (&event, "pod.17a8b", false),
            (&event, "..", true),
            (&widget, "w1", false),
            (&widget, "W1", true),
        ];
        for (def, name, expected) in table {
            assert_eq!(!refused(def, name).is_empty(), expected, "{} {name:?}", def.kind);
        }
    }

    #[test]
    fn a_refused_name_should_be_worded_as_upstream_words_it() {
        let deployment = def("apps", "Deployment", "deployments", true);
        assert_eq!(
            refused(&deployment, "Bad_Name"),
            [
                "metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower \
              case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character \
              (e.g. 'example.com', regex used for validation is \
              '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
            ]
        );
        assert_eq!(
            refused(&deployment, &"n".repeat(254)),
            [format!(
                "metadata.name: Invalid value: {:?}: must be no more than 253 characters",
                "n".repeat(254)
            )]
        );
        assert_eq!(
            refused(&deployment, ""),
            ["metadata.name: Required value: name or generateName is required"]
        );
    }

    #[test]
    fn a_generate_name_may_end_in_a_dash_but_is_otherwise_checked_alike() {
        let pod = def("", "Pod", "pods", true);
        assert!(super::name(&pod, "web-x7k2p", "web-").is_empty());
        let errors = super::name(&pod, "Web-x7k2p", "Web-");
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["metadata.generateName", "metadata.name"]);
        assert_eq!(mask_trailing_dash("web-"), "wea");
        assert_eq!(mask_trailing_dash("-"), "-");
    }

    #[test]
    fn a_cron_job_name_should_leave_room_for_its_jobs_suffix() {
        let cron = def("batch", "CronJob", "cronjobs", true);
        assert!(cron_job_name(&cron, &"c".repeat(52)).is_empty());
        assert_eq!(
            cron_job_name(&cron, &"c".repeat(53))[0].body(),
            format!(
                "Invalid value: {:?}: must be no more than 52 characters",
                "c".repeat(53)
            )
        );
        assert!(cron_job_name(&def("batch", "Job", "jobs", true), &"c".repeat(60)).is_empty());
    }

    #[test]
    fn a_namespace_should_be_required_forbidden_or_a_label_by_scope() {
        let pod = def("", "Pod", "pods", true);
        let node = def("", "Node", "nodes", false);
        assert_eq!(namespace(&pod, "")[0].to_string(), "metadata.namespace: Required value");
        assert_eq!(
            namespace(&node, "default")[0].to_string(),
            "metadata.namespace: Forbidden: not allowed on this type"
        );
        assert!(namespace(&pod, "Bad_NS")[0]
            .to_string()
            .starts_with("metadata.namespace: Invalid value: \"Bad_NS\": a lowercase RFC 1123 label"));
        assert!(namespace(&pod, "default").is_empty() && namespace(&node, "").is_empty());
    }
}
