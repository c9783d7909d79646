//! What a request asks for. The path names a discovery or OpenAPI document or a resource, the method
//! and path together give the verb, the query refines a resource request, and the `Accept` header
//! picks the representation. Nothing here reads the cluster.

use super::review;
use super::selector::{FieldSelector, LabelSelector};
use axum::extract::Query;
use axum::http::request::Parts;
use axum::http::Method;
use kube_gc::api::shard::ShardSelector;
use kube_gc::api::{ApiError, Gvr, ObjectMeta, PropagationPolicy, StatusReason};
use std::collections::BTreeMap;
use std::time::Duration;

/// What a request asks for, as read from its method, path and query before anything is served:
/// what the router dispatches on and the audit log records.
#[derive(Debug)]
pub(super) struct Call {
    /// The request's method.
    pub(super) method: Method,
    /// What the path names.
    pub(super) target: Target,
    /// The verb on a resource path; `None` on other paths, and for a method the path does not take.
    pub(super) verb: Option<HttpVerb>,
    /// The query's parameters, or why they could not be read (which a resource request answers
    /// with 400).
    pub(super) query: Result<BTreeMap<String, String>, String>,
}

impl Call {
    /// Reads what `parts` asks for; this never fails, so that even a bad request can be recorded.
    pub(super) fn read(parts: &Parts) -> Call {
        // The path's segments are read decoded, as the API server reads them: a client escapes a
        // space or `?` in a name, and the name is what it named.
        let path = percent_encoding::percent_decode_str(parts.uri.path()).decode_utf8_lossy();
        let mut query = Query::<BTreeMap<String, String>>::try_from_uri(&parts.uri)
            .map(|Query(query)| query)
            .map_err(|e| e.to_string());
        if let Some(watched) = legacy_watch(&path) {
            let target = watch_target(parse_path(&watched), &mut query);
            let verb =
                (parts.method == Method::GET && matches!(target, Target::Resource(_))).then_some(HttpVerb::Watch);
            return Call {
                method: parts.method.clone(),
                target,
                verb,
                query,
            };
        }
        let target = parse_path(&path);
        let verb = match &target {
            Target::Resource(path) => {
                let watch = query.as_ref().is_ok_and(|query| flag(query, "watch"));
                HttpVerb::of(&parts.method, path.name.is_some(), watch)
            }
            _ => None,
        };
        Call {
            method: parts.method.clone(),
            target,
            verb,
            query,
        }
    }
}

/// The path a legacy watch path (`/api/v1/watch/…`, `/apis/{group}/{version}/watch/…`) watches,
/// without its `watch` segment; `None` for any other path. Clients older than `?watch=true` use
/// them, and the API server still serves them the same way.
fn legacy_watch(path: &str) -> Option<String> {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let at = match segments.as_slice() {
        ["api", _, "watch", _, ..] => 2,
        ["apis", _, _, "watch", _, ..] => 3,
        _ => return None,
    };
    let kept: Vec<&str> = segments
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != at)
        .map(|(_, s)| *s)
        .collect();
    Some(format!("/{}", kept.join("/")))
}

/// A legacy watch of `target`: of its collection, or, when it names an object, of the collection
/// narrowed to that name by a field selector, as the API server serves it. A subresource is not
/// watched.
fn watch_target(target: Target, query: &mut Result<BTreeMap<String, String>, String>) -> Target {
    let Target::Resource(mut path) = target else {
        return Target::Unknown;
    };
    if path.subresource.is_some() {
        return Target::Unknown;
    }
    if let (Some(name), Ok(query)) = (path.name.take(), query.as_mut()) {
        let by_name = format!("metadata.name={name}");
        let selector = match query.remove("fieldSelector").filter(|s| !s.is_empty()) {
            Some(given) => format!("{given},{by_name}"),
            None => by_name,
        };
        query.insert("fieldSelector".into(), selector);
    }
    Target::Resource(path)
}

/// What a path names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Target {
    /// `/version`.
    Version,
    /// `/healthz`, `/readyz`, `/livez` and their sub-checks.
    Health,
    /// `/api`: the core group's versions.
    CoreVersions,
    /// `/apis`: every group.
    Groups,
    /// `/apis/{group}`.
    Group(String),
    /// `/api/v1` or `/apis/{group}/{version}`: the resources of a group-version.
    GroupVersion(String, String),
    /// `/openapi/v2` or `/openapi/v3[/…]`: an OpenAPI document.
    OpenApi(OpenApiPath),
    /// A collection or an object.
    Resource(ResourcePath),
    /// An access review's collection ([`super::review`]).
    Review(String),
    /// `/sim/storage/api/{version}/{resource}` or `/sim/storage/apis/{group}/{version}/{resource}`:
    /// the resource's objects by storage generation ([`crate::StorageReport`]); a POST moves the
    /// resource to its next generation first.
    Storage(Gvr),
    /// Anything else.
    Unknown,
}

/// The OpenAPI documents a path can name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum OpenApiPath {
    /// `/openapi/v2`: one Swagger 2.0 document for every served type.
    V2,
    /// `/openapi/v3`: the index of the group-version documents.
    V3Index,
    /// `/openapi/v3/api/v1` or `/openapi/v3/apis/{group}/{version}`.
    V3(String, String),
}

/// A resource path: `[/namespaces/{ns}]/{resource}[/{name}[/{subresource}]]` under a group-version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ResourcePath {
    pub(super) gvr: Gvr,
    /// `None` for a cluster-wide path, which for a namespaced type means all namespaces.
    pub(super) namespace: Option<String>,
    /// `None` for the collection.
    pub(super) name: Option<String>,
    /// `status`, `scale`, …: never served.
    pub(super) subresource: Option<String>,
}

/// The subresources of a namespace, which make `/namespaces/{name}/{x}` an object path rather
/// than a namespaced collection.
const NAMESPACE_SUBRESOURCES: [&str; 2] = ["status", "finalize"];

/// Parses a request path.
pub(super) fn parse_path(path: &str) -> Target {
    let parts: Vec<&str> = path.trim_matches('/').split('/').filter(|p| !p.is_empty()).collect();
    match parts.as_slice() {
        ["version"] => Target::Version,
        ["openapi", "v2"] => Target::OpenApi(OpenApiPath::V2),
        ["openapi", "v3"] => Target::OpenApi(OpenApiPath::V3Index),
        ["openapi", "v3", "api", version] => Target::OpenApi(OpenApiPath::V3(String::new(), version.to_string())),
        ["openapi", "v3", "apis", group, version] => {
            Target::OpenApi(OpenApiPath::V3(group.to_string(), version.to_string()))
        }
        ["healthz" | "readyz" | "livez", ..] => Target::Health,
        ["api"] => Target::CoreVersions,
        ["apis"] => Target::Groups,
        ["apis", group] => Target::Group(group.to_string()),
        ["api", version] => Target::GroupVersion(String::new(), version.to_string()),
        ["apis", group, version] => Target::GroupVersion(group.to_string(), version.to_string()),
        ["apis", group, review::VERSION, resource] if review::kind_of(group, resource).is_some() => {
            Target::Review(resource.to_string())
        }
        ["sim", "storage", "api", version, resource] => Target::Storage(Gvr::new("", version, resource)),
        ["sim", "storage", "apis", group, version, resource] => Target::Storage(Gvr::new(group, version, resource)),
        ["api", version, rest @ ..] => resource_path("", version, rest),
        ["apis", group, version, rest @ ..] => resource_path(group, version, rest),
        _ => Target::Unknown,
    }
}

fn resource_path(group: &str, version: &str, rest: &[&str]) -> Target {
    let (namespace, rest) = match rest {
        ["namespaces", ns, resource, tail @ ..] if !NAMESPACE_SUBRESOURCES.contains(resource) => {
            (Some(ns.to_string()), [&[*resource], tail].concat())
        }
        _ => (None, rest.to_vec()),
    };
    let (resource, name, subresource) = match rest.as_slice() {
        [resource] => (resource, None, None),
        [resource, name] => (resource, Some(name.to_string()), None),
        [resource, name, sub] => (resource, Some(name.to_string()), Some(sub.to_string())),
        _ => return Target::Unknown,
    };
    Target::Resource(ResourcePath {
        gvr: Gvr::new(group, version, resource),
        namespace,
        name,
        subresource,
    })
}

/// The verb a method applies to a collection or an object, as the API server names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HttpVerb {
    /// GET of an object.
    Get,
    /// GET of a collection.
    List,
    /// GET of a collection with `watch=true`.
    Watch,
    /// POST to a collection.
    Create,
    /// PUT of an object.
    Update,
    /// PATCH of an object.
    Patch,
    /// DELETE of an object.
    Delete,
    /// DELETE of a collection.
    DeleteCollection,
}

impl HttpVerb {
    /// The verb of `method` on an object (`named`) or a collection, or `None` when the pair makes
    /// no request (405).
    pub(super) fn of(method: &Method, named: bool, watch: bool) -> Option<HttpVerb> {
        Some(match (method.as_str(), named) {
            ("GET", true) => HttpVerb::Get,
            ("GET", false) if watch => HttpVerb::Watch,
            ("GET", false) => HttpVerb::List,
            ("POST", false) => HttpVerb::Create,
            ("PUT", true) => HttpVerb::Update,
            ("PATCH", true) => HttpVerb::Patch,
            ("DELETE", true) => HttpVerb::Delete,
            ("DELETE", false) => HttpVerb::DeleteCollection,
            _ => return None,
        })
    }

    /// The verb's name in discovery and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            HttpVerb::Get => "get",
            HttpVerb::List => "list",
            HttpVerb::Watch => "watch",
            HttpVerb::Create => "create",
            HttpVerb::Update => "update",
            HttpVerb::Patch => "patch",
            HttpVerb::Delete => "delete",
            HttpVerb::DeleteCollection => "deletecollection",
        }
    }

    /// Every verb, in discovery order.
    pub const ALL: [HttpVerb; 8] = [
        HttpVerb::Get,
        HttpVerb::List,
        HttpVerb::Watch,
        HttpVerb::Create,
        HttpVerb::Update,
        HttpVerb::Patch,
        HttpVerb::Delete,
        HttpVerb::DeleteCollection,
    ];
}

/// What the table rows carry, from `includeObject`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum IncludeObject {
    /// No object.
    None,
    /// The object's metadata (the default).
    #[default]
    Metadata,
    /// The whole object.
    Object,
}

/// The query parameters of a resource request.
#[derive(Debug, Default)]
pub(super) struct Params {
    pub(super) resource_version: String,
    pub(super) limit: Option<usize>,
    pub(super) continue_token: Option<String>,
    pub(super) labels: LabelSelector,
    pub(super) fields: FieldSelector,
    /// `shardSelector` (sharded list and watch).
    pub(super) shards: ShardFilter,
    pub(super) timeout: Option<Duration>,
    pub(super) allow_bookmarks: bool,
    /// `sendInitialEvents`, when given ([`super::list_options`]).
    pub(super) send_initial_events: Option<bool>,
    pub(super) resource_version_match: Option<String>,
    pub(super) propagation_policy: Option<PropagationPolicy>,
    pub(super) orphan_dependents: Option<bool>,
    pub(super) include_object: IncludeObject,
    /// `fieldManager`: who a write is recorded as ([`crate::Writes::by`]).
    pub(super) field_manager: Option<String>,
    /// `force`: an apply takes the fields other managers own; only an apply may ask for it.
    pub(super) force: Option<bool>,
}

impl Params {
    /// Parses the query; an unparsable value is 400, an unknown parameter is ignored as the API
    /// server ignores it.
    pub(super) fn parse(query: &BTreeMap<String, String>) -> Result<Params, ApiError> {
        let number = |key: &str| -> Result<Option<u64>, ApiError> {
            query
                .get(key)
                .map(|v| v.parse().map_err(|_| bad(format!("{key}: invalid value {v:?}"))))
                .transpose()
        };
        Ok(Params {
            resource_version: query.get("resourceVersion").cloned().unwrap_or_default(),
            limit: number("limit")?.filter(|&l| l > 0).map(|l| l as usize),
            continue_token: query.get("continue").filter(|c| !c.is_empty()).cloned(),
            labels: LabelSelector::parse(query.get("labelSelector").map_or("", String::as_str))?,
            fields: FieldSelector::parse(query.get("fieldSelector").map_or("", String::as_str))?,
            shards: ShardFilter::parse(query.get("shardSelector"))?,
            timeout: number("timeoutSeconds")?.map(Duration::from_secs),
            allow_bookmarks: flag(query, "allowWatchBookmarks"),
            send_initial_events: query
                .get("sendInitialEvents")
                .map(|v| match v.as_str() {
                    "true" | "1" => Ok(true),
                    "false" | "0" => Ok(false),
                    other => Err(bad(format!("sendInitialEvents: invalid value {other:?}"))),
                })
                .transpose()?,
            resource_version_match: query.get("resourceVersionMatch").cloned(),
            propagation_policy: query.get("propagationPolicy").map(|p| parse_policy(p)).transpose()?,
            orphan_dependents: query.get("orphanDependents").map(|v| v == "true"),
            include_object: match query.get("includeObject").map(String::as_str) {
                None | Some("Metadata") => IncludeObject::Metadata,
                Some("None") => IncludeObject::None,
                Some("Object") => IncludeObject::Object,
                Some(other) => return Err(bad(format!("includeObject: unsupported value {other:?}"))),
            },
            field_manager: query.get("fieldManager").filter(|m| !m.is_empty()).cloned(),
            force: query.get("force").map(|v| parse_bool("force", v)).transpose()?,
        })
    }
}

/// A request's `shardSelector`, with the text it was given in, which a list echoes back
/// (`metadata.shardInfo.selector`) so that the client can tell the server applied it; none
/// selects everything.
#[derive(Clone, Debug, Default)]
pub(super) struct ShardFilter(Option<(ShardSelector, String)>);

impl ShardFilter {
    /// An absent or empty parameter selects everything; a malformed one is 400.
    fn parse(given: Option<&String>) -> Result<ShardFilter, ApiError> {
        let Some(text) = given.filter(|t| !t.is_empty()) else {
            return Ok(ShardFilter(None));
        };
        let selector = ShardSelector::parse(text).map_err(|e| bad(e.to_string()))?;
        Ok(ShardFilter(Some((selector, text.clone()))))
    }

    /// True when `meta`'s object is in the selected shards.
    pub(super) fn matches(&self, meta: &ObjectMeta) -> bool {
        self.0
            .as_ref()
            .is_none_or(|(s, _)| s.matches(&meta.namespace, &meta.uid))
    }

    /// The selector as the request gave it, if any.
    pub(super) fn given(&self) -> Option<&str> {
        self.0.as_ref().map(|(_, text)| text.as_str())
    }
}

/// The longest field manager name, as upstream validates it.
const FIELD_MANAGER_MAX_BYTES: usize = 128;

/// The field manager a write without `fieldManager` is recorded as, as upstream derives it: the
/// User-Agent up to its first `/` (`kubectl`, `python-requests`, `OpenAPI-Generator`), without
/// unprintable characters and cut at 128 bytes; `None` when that leaves nothing.
pub(super) fn manager_from_user_agent(user_agent: &str) -> Option<String> {
    let product = user_agent.split('/').next().unwrap_or_default();
    let mut manager = String::new();
    for c in product.chars().filter(|c| !c.is_control()) {
        if manager.len() + c.len_utf8() > FIELD_MANAGER_MAX_BYTES {
            break;
        }
        manager.push(c);
    }
    (!manager.is_empty()).then_some(manager)
}

/// A boolean query parameter as Go's `strconv.ParseBool` reads it (`true`, `True`, `1`, `f`, …),
/// which is how the Python client's `True` reaches the API server; anything else is 400.
fn parse_bool(key: &str, value: &str) -> Result<bool, ApiError> {
    match value {
        "1" | "t" | "T" | "true" | "True" | "TRUE" => Ok(true),
        "0" | "f" | "F" | "false" | "False" | "FALSE" => Ok(false),
        other => Err(bad(format!("{key}: invalid value {other:?}"))),
    }
}

/// A boolean query parameter: set by `true` or `1`.
fn flag(query: &BTreeMap<String, String>, key: &str) -> bool {
    query.get(key).is_some_and(|v| v == "true" || v == "1")
}

fn parse_policy(policy: &str) -> Result<PropagationPolicy, ApiError> {
    serde_json::from_value(serde_json::Value::String(policy.to_string()))
        .map_err(|_| bad(format!("propagationPolicy: unsupported value {policy:?}")))
}

fn bad(message: String) -> ApiError {
    ApiError::status(StatusReason::BadRequest, message)
}

/// How a response presents objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Representation {
    /// The objects as stored.
    Full,
    /// `PartialObjectMetadata` / `PartialObjectMetadataList`.
    Metadata,
    /// A `meta.k8s.io` Table, as `kubectl get` asks for.
    Table,
}

/// How a response's bodies are encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Encoding {
    /// JSON.
    Json,
    /// Protobuf ([`kube_gc::api::protobuf`]): `PartialObjectMetadata` and its list only.
    Protobuf,
}

/// Picks the first representation and encoding of the `Accept` header the server can produce;
/// 406 when none. Protobuf is offered (when `protobuf` is on) for the metadata representations
/// alone, as a server that serves no other type in protobuf offers it.
pub(super) fn negotiate(accept: Option<&str>, protobuf: bool) -> Result<(Representation, Encoding), ApiError> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Ok((Representation::Full, Encoding::Json));
    };
    accept
        .split(',')
        .find_map(|range| media_range(range, protobuf))
        .ok_or_else(|| {
            let offered = if protobuf {
                "application/json, application/vnd.kubernetes.protobuf (as PartialObjectMetadata or \
                 PartialObjectMetadataList)"
            } else {
                "application/json"
            };
            ApiError::status(
                StatusReason::NotAcceptable,
                format!("only the following media types are accepted: {offered}; none of {accept:?}"),
            )
        })
}

/// The encoding of an error's `Status`: the request's, JSON when it negotiated none.
pub(super) fn error_encoding(accept: Option<&str>, protobuf: bool) -> Encoding {
    negotiate(accept, protobuf).map_or(Encoding::Json, |(_, encoding)| encoding)
}

fn media_range(range: &str, protobuf: bool) -> Option<(Representation, Encoding)> {
    let mut parts = range.split(';').map(str::trim);
    let media = parts.next()?;
    let encoding = match media {
        "application/json" | "application/*" | "*/*" => Encoding::Json,
        "application/vnd.kubernetes.protobuf" if protobuf => Encoding::Protobuf,
        _ => return None,
    };
    let params: BTreeMap<&str, &str> = parts.filter_map(|p| p.split_once('=')).collect();
    let meta_group = || params.get("g") == Some(&"meta.k8s.io") && matches!(params.get("v"), Some(&("v1" | "v1beta1")));
    let representation = match params.get("as") {
        None => Representation::Full,
        Some(&"Table") if meta_group() => Representation::Table,
        Some(&("PartialObjectMetadata" | "PartialObjectMetadataList")) if meta_group() => Representation::Metadata,
        Some(_) => return None,
    };
    match (representation, encoding) {
        (Representation::Metadata, _) | (_, Encoding::Json) => Some((representation, encoding)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_agent_should_name_its_manager_up_to_the_first_slash() {
        let cases = [
            ("kubectl/v1.33.0 (linux/amd64) kubernetes/abc", Some("kubectl")),
            ("OpenAPI-Generator/37.0.2/python", Some("OpenAPI-Generator")),
            ("python-requests/2.32", Some("python-requests")),
            ("no-slash", Some("no-slash")),
            ("tab\there/1", Some("tabhere")),
            ("/1.0", None),
            ("", None),
        ];
        for (user_agent, manager) in cases {
            assert_eq!(
                manager_from_user_agent(user_agent).as_deref(),
                manager,
                "{user_agent:?}"
            );
        }
        let long = "m".repeat(200);
        assert_eq!(manager_from_user_agent(&long).map(|m| m.len()), Some(128));
    }

    fn resource(group: &str, version: &str, resource: &str, ns: Option<&str>, name: Option<&str>) -> Target {
        Target::Resource(ResourcePath {
            gvr: Gvr::new(group, version, resource),
            namespace: ns.map(String::from),
            name: name.map(String::from),
            subresource: None,
        })
    }

    fn call(method: Method, uri: &str) -> Call {
        let request = axum::http::Request::builder()
            .method(method)
            .uri(uri)
            .body(())
            .expect("request");
        Call::read(&request.into_parts().0)
    }

    #[test]
    fn a_legacy_watch_path_should_watch_its_collection_or_one_object() {
        let cases = [
            ("/api/v1/watch/pods", resource("", "v1", "pods", None, None), None),
            (
                "/api/v1/watch/namespaces/ns/pods",
                resource("", "v1", "pods", Some("ns"), None),
                None,
            ),
            (
                "/api/v1/watch/namespaces/ns/pods/p",
                resource("", "v1", "pods", Some("ns"), None),
                Some("metadata.name=p"),
            ),
            (
                "/api/v1/watch/namespaces/ns",
                resource("", "v1", "namespaces", None, None),
                Some("metadata.name=ns"),
            ),
            (
                "/apis/apps/v1/watch/namespaces/ns/deployments/d?fieldSelector=metadata.namespace%3Dns",
                resource("apps", "v1", "deployments", Some("ns"), None),
                Some("metadata.namespace=ns,metadata.name=d"),
            ),
            (
                "/apis/apps/v1/watch/deployments",
                resource("apps", "v1", "deployments", None, None),
                None,
            ),
        ];
        for (uri, target, selector) in cases {
            let watch = call(Method::GET, uri);
            assert_eq!(watch.target, target, "{uri}");
            assert_eq!(watch.verb, Some(HttpVerb::Watch), "{uri}");
            let query = watch.query.expect("a query");
            assert_eq!(query.get("fieldSelector").map(String::as_str), selector, "{uri}");
        }
        assert_eq!(call(Method::POST, "/api/v1/watch/pods").verb, None, "only GET watches");
        assert_eq!(
            call(Method::GET, "/api/v1/watch/namespaces/ns/pods/p/status").target,
            Target::Unknown
        );
        assert_eq!(
            call(Method::GET, "/api/v1/pods").verb,
            Some(HttpVerb::List),
            "not a legacy path"
        );
    }

    #[test]
    fn parse_path_should_tell_namespaces_from_namespaced_collections() {
        assert_eq!(
            parse_path("/api/v1/namespaces"),
            resource("", "v1", "namespaces", None, None)
        );
        assert_eq!(
            parse_path("/api/v1/namespaces/a"),
            resource("", "v1", "namespaces", None, Some("a"))
        );
        assert_eq!(
            parse_path("/api/v1/namespaces/a/pods"),
            resource("", "v1", "pods", Some("a"), None)
        );
        assert_eq!(
            parse_path("/apis/apps/v1/namespaces/a/deployments/d"),
            resource("apps", "v1", "deployments", Some("a"), Some("d"))
        );
        assert_eq!(
            parse_path("/apis/apps/v1/deployments"),
            resource("apps", "v1", "deployments", None, None)
        );
        let Target::Resource(status) = parse_path("/api/v1/namespaces/a/status") else {
            panic!("not a resource")
        };
        assert_eq!(
            (status.name.as_deref(), status.subresource.as_deref()),
            (Some("a"), Some("status"))
        );
        assert_eq!(
            parse_path("/apis/apps/v1"),
            Target::GroupVersion("apps".into(), "v1".into())
        );
        assert_eq!(parse_path("/healthz/ping"), Target::Health);
        assert_eq!(
            parse_path("/apis/apps/v1/namespaces/a/deployments/d/status/x"),
            Target::Unknown
        );
    }

    #[test]
    fn parse_path_should_name_the_openapi_documents() {
        let openapi = |path| match parse_path(path) {
            Target::OpenApi(doc) => Some(doc),
            _ => None,
        };
        assert_eq!(openapi("/openapi/v2"), Some(OpenApiPath::V2));
        assert_eq!(openapi("/openapi/v3"), Some(OpenApiPath::V3Index));
        assert_eq!(
            openapi("/openapi/v3/api/v1"),
            Some(OpenApiPath::V3(String::new(), "v1".into()))
        );
        assert_eq!(
            openapi("/openapi/v3/apis/apps/v1"),
            Some(OpenApiPath::V3("apps".into(), "v1".into()))
        );
        assert_eq!(parse_path("/openapi/v3/apis/apps"), Target::Unknown);
    }

    #[test]
    fn negotiate_should_pick_the_first_servable_range() {
        use {Encoding::*, Representation::*};
        let table = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
        assert_eq!(negotiate(Some(table), true).unwrap(), (Table, Json));
        let meta = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
        assert_eq!(negotiate(Some(meta), true).unwrap(), (Metadata, Json));
        let discovery = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
        assert_eq!(negotiate(Some(discovery), true).unwrap(), (Full, Json));
        assert_eq!(negotiate(None, true).unwrap(), (Full, Json));
        // Full objects and tables are never protobuf here: the next range serves.
        let err = negotiate(Some("application/vnd.kubernetes.protobuf"), true).unwrap_err();
        assert_eq!(err.reason(), Some(StatusReason::NotAcceptable));
        let typed = "application/vnd.kubernetes.protobuf, */*";
        assert_eq!(negotiate(Some(typed), true).unwrap(), (Full, Json));
        assert_eq!(error_encoding(Some(typed), true), Json);
    }

    #[test]
    fn negotiate_should_offer_protobuf_metadata_when_it_is_on() {
        use {Encoding::*, Representation::*};
        let metadata = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,\
                        application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
        assert_eq!(negotiate(Some(metadata), true).unwrap(), (Metadata, Protobuf));
        assert_eq!(error_encoding(Some(metadata), true), Protobuf);
        // A server that offers no protobuf answers the JSON range.
        assert_eq!(negotiate(Some(metadata), false).unwrap(), (Metadata, Json));
        assert_eq!(error_encoding(Some(metadata), false), Json);
        let only = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
        let err = negotiate(Some(only), false).unwrap_err();
        assert_eq!(err.reason(), Some(StatusReason::NotAcceptable));
    }

    #[test]
    fn params_should_reject_bad_numbers_and_policies() {
        let query = |k: &str, v: &str| BTreeMap::from([(k.to_string(), v.to_string())]);
        assert!(Params::parse(&query("limit", "ten")).is_err());
        assert!(Params::parse(&query("propagationPolicy", "Sideways")).is_err());
        let p = Params::parse(&query("propagationPolicy", "Foreground")).unwrap();
        assert_eq!(p.propagation_policy, Some(PropagationPolicy::Foreground));
    }
}
