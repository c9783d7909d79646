//! What a tree is drawn from: discovery, the object, the listing of its namespace, and the
//! collector's reasons. Its requests go through a kube client of its own, not the collector's
//! layered client: one of the exceptions the [`kube_gc::api`] docs list.
//!
//! Every read is metadata only (`PartialObjectMetadata`), so a Pod's spec never travels. Lists go
//! in pages of [`PAGE_SIZE`], resource by resource, [`LIST_CONCURRENCY`] resources at a time;
//! within one resource the pages follow each other, as continue tokens require.
//!
//! Discovery is read here rather than through [`ClusterApi::discover`](kube_gc::api::ClusterApi):
//! resolving a KIND needs each resource's singular and short names, which the collector's
//! discovery drops. Its entries still feed the collector's [`RestMapper`], which maps an owner
//! reference that the listing cannot settle to a resource to read it from.
//!
//! The collector is asked over plain HTTP (its endpoints have no TLS), one `/explain?uid=` per
//! object that is being deleted or misses an owner, [`LIST_CONCURRENCY`] at a time; the first
//! answer, about the object itself, says whether a collector is there at all.

use super::resolve::{Catalogue, Resource, UnknownKind};
use super::{Listing, Object};
use futures::{StreamExt, TryStreamExt};
use http::{header, Request};
use kube_gc::api::{
    rest_path as path, with_query, Gvr, PartialObjectMeta, RestMapper, ACCEPT_METADATA, ACCEPT_METADATA_LIST,
};
use serde::Deserialize;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// Objects per list page, as kubectl and client-go's pager ask for.
pub const PAGE_SIZE: usize = 500;

/// Resources listed at once, and explanations asked for at once. A namespace's listing is a few
/// large resources (Pods, ReplicaSets) and many small or empty ones; eight in flight keep the
/// server busy through the small ones while the large ones page, without a burst a real API
/// server's priority and fairness would throttle.
pub const LIST_CONCURRENCY: usize = 8;

/// How long the collector may take to answer one question before it counts as not there.
const COLLECTOR_PATIENCE: Duration = Duration::from_secs(2);

/// Why no tree could be drawn.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No answer from the API server at all.
    #[error("cannot reach the API server of the kubeconfig's current context")]
    Unreachable(#[source] kube::Error),
    /// The KIND argument names no served resource.
    #[error(transparent)]
    UnknownKind(#[from] UnknownKind),
    /// The object does not exist.
    #[error("{resource} {name:?} not found{}", in_namespace(namespace))]
    NotFound {
        /// The resource, as `deployments.apps`.
        resource: String,
        /// The name asked for.
        name: String,
        /// The namespace looked in; empty for a cluster-scoped resource.
        namespace: String,
    },
    /// A name that cannot be part of a request's path.
    #[error("cannot ask the API server for {uri:?}: not a valid request path")]
    Request {
        /// The path.
        uri: String,
        /// What the HTTP library said.
        #[source]
        source: http::Error,
    },
    /// Another failure of a request.
    #[error("{what}")]
    Api {
        /// The request, in words.
        what: String,
        /// What kube-rs said.
        #[source]
        source: kube::Error,
    },
}

fn in_namespace(namespace: &str) -> String {
    if namespace.is_empty() {
        String::new()
    } else {
        format!(" in namespace {namespace:?}")
    }
}

/// Whether `error` means the request got no answer at all: no connection, or one that broke.
fn unreachable(error: &kube::Error) -> bool {
    matches!(error, kube::Error::HyperError(_) | kube::Error::Service(_))
}

/// A failure of the request described by `what`, unreachable servers told apart.
fn failed(what: impl FnOnce() -> String) -> impl FnOnce(kube::Error) -> Error {
    move |source| {
        if unreachable(&source) {
            Error::Unreachable(source)
        } else {
            Error::Api { what: what(), source }
        }
    }
}

fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

/// The served resources: every version of every group, the core group first, in discovery order.
/// A group-version whose discovery fails is left out, as kubectl leaves it out.
pub async fn discover(client: &kube::Client) -> Result<Catalogue, Error> {
    let core = client
        .list_core_api_versions()
        .await
        .map_err(failed(|| "reading discovery (/api)".into()))?;
    let groups = client
        .list_api_groups()
        .await
        .map_err(failed(|| "reading discovery (/apis)".into()))?;
    let mut group_versions: Vec<(String, String, bool)> = core
        .versions
        .into_iter()
        .map(|v| (String::new(), v.clone(), v == "v1"))
        .collect();
    for group in groups.groups {
        let preferred = group.preferred_version.map(|p| p.version).unwrap_or_default();
        for v in group.versions {
            let is_preferred = v.version == preferred;
            group_versions.push((group.name.clone(), v.version, is_preferred));
        }
    }
    let lists: Vec<Vec<Resource>> = futures::stream::iter(group_versions)
        .map(|(group, version, preferred)| async move {
            let list = if group.is_empty() {
                client.list_core_api_resources(&version).await
            } else {
                client.list_api_group_resources(&format!("{group}/{version}")).await
            };
            match list {
                Ok(list) => Ok(resources_of(&group, &version, preferred, list)),
                Err(e) if unreachable(&e) => Err(Error::Unreachable(e)),
                Err(_) => Ok(Vec::new()),
            }
        })
        .buffered(LIST_CONCURRENCY)
        .try_collect()
        .await?;
    Ok(Catalogue::new(lists.into_iter().flatten().collect()))
}

/// The resources of one group-version's discovery document, subresources left out.
fn resources_of(
    group: &str,
    version: &str,
    preferred: bool,
    list: k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList,
) -> Vec<Resource> {
    list.resources
        .into_iter()
        .filter(|r| !r.name.contains('/'))
        .map(|r| Resource {
            gvr: Gvr::new(group, version, &r.name),
            singular: if r.singular_name.is_empty() {
                r.kind.to_ascii_lowercase()
            } else {
                r.singular_name
            },
            kind: r.kind,
            short_names: r.short_names.unwrap_or_default(),
            namespaced: r.namespaced,
            verbs: r.verbs,
            preferred,
        })
        .collect()
}

/// A GET of `uri`; an object name given on the command line can make it no valid URI.
fn get_request(uri: &str, accept: &str) -> Result<Request<Vec<u8>>, Error> {
    Request::get(uri)
        .header(header::ACCEPT, accept)
        .body(Vec::new())
        .map_err(|source| Error::Request {
            uri: uri.to_string(),
            source,
        })
}

/// The object `name` of `resource` (in `namespace` when namespaced), or `None` when it does not
/// exist.
pub async fn get(
    client: &kube::Client,
    resource: &Resource,
    namespace: &str,
    name: &str,
) -> Result<Option<Object>, Error> {
    let namespace = if resource.namespaced { namespace } else { "" };
    // A name no object can have is refused before a request: nothing has it.
    let Ok(uri) = path(&resource.gvr, namespace, Some(name)) else {
        return Ok(None);
    };
    match client
        .request::<PartialObjectMeta>(get_request(&uri, ACCEPT_METADATA)?)
        .await
    {
        Ok(meta) => Ok(Some(super::object_of(meta, resource))),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(failed(|| format!("reading {} {name:?}", resource.qualified()))(e)),
    }
}

/// One page of a metadata list.
#[derive(Deserialize)]
struct Page {
    #[serde(default)]
    metadata: PageMeta,
    #[serde(default)]
    items: Vec<PartialObjectMeta>,
}

#[derive(Default, Deserialize)]
struct PageMeta {
    #[serde(default, rename = "continue")]
    continue_token: String,
}

/// Every object of `resource` in `namespace` (all namespaces when empty), page by page.
async fn list(client: &kube::Client, resource: &Resource, namespace: &str) -> Result<Vec<Object>, Error> {
    list_selected(client, resource, namespace, "").await
}

/// The objects of `resource` in `namespace` (all namespaces when empty) that the label selector
/// `selector` (kubectl's `-l` syntax; everything when empty) picks, page by page.
pub async fn list_selected(
    client: &kube::Client,
    resource: &Resource,
    namespace: &str,
    selector: &str,
) -> Result<Vec<Object>, Error> {
    // A namespace no object can be in holds nothing.
    let Ok(collection) = path(&resource.gvr, namespace, None) else {
        return Ok(Vec::new());
    };
    let limit = PAGE_SIZE.to_string();
    let mut objects = Vec::new();
    let mut continue_token = String::new();
    loop {
        let mut query = vec![("limit", limit.as_str())];
        if !selector.is_empty() {
            query.push(("labelSelector", selector));
        }
        if !continue_token.is_empty() {
            query.push(("continue", continue_token.as_str()));
        }
        let uri = with_query(&collection, &query);
        let page: Page = client
            .request(get_request(&uri, ACCEPT_METADATA_LIST)?)
            .await
            .map_err(failed(|| format!("listing {}", resource.qualified())))?;
        objects.extend(page.items.into_iter().map(|m| super::object_of(m, resource)));
        if page.metadata.continue_token.is_empty() {
            return Ok(objects);
        }
        continue_token = page.metadata.continue_token;
    }
}

/// The listing a tree of an object in `namespace` is drawn from, and what could not be listed.
pub struct Fetched {
    /// Every object read.
    pub listing: Listing,
    /// Resources whose list failed, with the reason; their objects are missing from the tree.
    pub unlisted: Vec<(String, String)>,
}

/// Lists every listable resource at its preferred version: the namespaced ones in `namespace`
/// (every namespace when empty) and the cluster-scoped ones; then reads by name the owners the
/// listing could not settle, for objects of the trees of `targets`.
pub async fn fetch(
    client: &kube::Client,
    catalogue: &Catalogue,
    namespace: &str,
    targets: &[Object],
) -> Result<Fetched, Error> {
    let listable: Vec<&Resource> = catalogue
        .resources()
        .iter()
        .filter(|r| r.preferred && r.is_listable())
        .collect();
    let results: Vec<(&Resource, Result<Vec<Object>, Error>)> = futures::stream::iter(listable)
        .map(|r| async move {
            let scope = if r.namespaced { namespace } else { "" };
            (r, list(client, r, scope).await)
        })
        .buffer_unordered(LIST_CONCURRENCY)
        .collect()
        .await;
    let mut listed = HashSet::new();
    let mut unlisted = Vec::new();
    let mut objects = Vec::new();
    for (resource, result) in results {
        match result {
            Ok(found) => {
                listed.insert((resource.gvr.group.clone(), resource.gvr.resource.clone()));
                objects.extend(found);
            }
            Err(e @ Error::Unreachable(_)) => return Err(e),
            Err(e) => unlisted.push((resource.qualified(), kube_gc::api::one_line(&e))),
        }
    }
    unlisted.sort();
    let mut listing = Listing::new(objects);
    for target in targets {
        listing.insert(target.clone());
        settle_owners(client, catalogue, &listed, &mut listing, &target.uid).await?;
    }
    Ok(Fetched { listing, unlisted })
}

/// Reads by name each owner that a shown object names but the listing does not hold, when the
/// owner's resource was not listed (so its absence from the listing proves nothing), and adds
/// the ones that exist with the UID the reference names. Every other owner the listing misses
/// does not exist.
async fn settle_owners(
    client: &kube::Client,
    catalogue: &Catalogue,
    listed: &HashSet<(String, String)>,
    listing: &mut Listing,
    target: &str,
) -> Result<(), Error> {
    let api_resources: Vec<_> = catalogue.resources().iter().map(Resource::api_resource).collect();
    let mapper = RestMapper::new(&api_resources);
    let mut asked = HashSet::new();
    loop {
        let mut reads = Vec::new();
        for uid in listing.shown_with(target) {
            let Some(object) = listing.get(&uid) else { continue };
            for owner in &object.owners {
                if listing.get(&owner.uid).is_some() || !asked.insert(owner.uid.clone()) {
                    continue;
                }
                // A kind no resource serves has no objects: the owner does not exist.
                let Ok(mapping) = mapper.rest_mapping(&owner.api_version, &owner.kind) else {
                    continue;
                };
                if listed.contains(&(mapping.gvr.group.clone(), mapping.gvr.resource.clone())) {
                    continue;
                }
                let resource = catalogue.resources().iter().find(|r| r.gvr == mapping.gvr);
                if let Some(resource) = resource {
                    reads.push((resource, object.namespace.clone(), owner.clone()));
                }
            }
        }
        if reads.is_empty() {
            return Ok(());
        }
        for (resource, namespace, owner) in reads {
            if let Some(found) = get(client, resource, &namespace, &owner.name).await? {
                if found.uid == owner.uid {
                    listing.insert(found);
                }
            }
        }
    }
}

/// The client of a running collector's HTTP endpoints, as `--collector` names them: `http://HOST:PORT`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CollectorClient {
    host: String,
    port: u16,
}

impl std::str::FromStr for CollectorClient {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let refuse = |why: &str| format!("{text:?} is not a collector address: {why} (expected http://HOST:PORT)");
        let uri: http::Uri = text.parse().map_err(|_| refuse("not a URL"))?;
        if uri.scheme_str() != Some("http") {
            return Err(refuse("the collector's endpoints are served over plain http"));
        }
        if uri
            .path_and_query()
            .is_some_and(|p| p.as_str() != "/" && !p.as_str().is_empty())
        {
            return Err(refuse("a path or query is not expected"));
        }
        let host = uri.host().ok_or_else(|| refuse("no host"))?;
        Ok(CollectorClient {
            host: host.trim_start_matches('[').trim_end_matches(']').to_string(),
            port: uri.port_u16().unwrap_or(80),
        })
    }
}

impl std::fmt::Display for CollectorClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "http://[{}]:{}", self.host, self.port)
        } else {
            write!(f, "http://{}:{}", self.host, self.port)
        }
    }
}

/// Why the collector gave no reasons.
#[derive(Debug, thiserror::Error)]
pub enum CollectorError {
    /// Nothing answered.
    #[error("no answer: {0}")]
    Unreachable(#[source] std::io::Error),
    /// Nothing answered within [`COLLECTOR_PATIENCE`].
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// An answer other than 200.
    #[error("answered {code}: {body}")]
    Status {
        /// The HTTP status.
        code: u16,
        /// The body's first line.
        body: String,
    },
    /// An answer that is not what was asked for.
    #[error("answered something that is not what was asked for")]
    Garbled,
}

/// The `reasons` of one `/explain?uid=` answer.
#[derive(Deserialize)]
struct Explanation {
    reasons: Vec<String>,
}

impl CollectorClient {
    /// The collector's reasons about `uid`.
    pub async fn explain(&self, uid: &str) -> Result<Vec<String>, CollectorError> {
        let query = form_urlencoded::Serializer::new(String::new())
            .append_pair("uid", uid)
            .finish();
        let explanation: Explanation = self.get_json(&format!("/explain?{query}")).await?;
        Ok(explanation.reasons)
    }

    /// The collector's plan of deleting the objects `uids` with `policy` (`/debug/plan`).
    pub async fn plan(&self, uids: &[&str], policy: &str) -> Result<crate::server::PlanAnswer, CollectorError> {
        let mut query = form_urlencoded::Serializer::new(String::new());
        for uid in uids {
            query.append_pair("uid", uid);
        }
        self.plan_query(query, policy).await
    }

    /// The collector's plan of deleting the namespace `name` with `policy` (`/debug/plan`).
    pub async fn plan_namespace(&self, name: &str, policy: &str) -> Result<crate::server::PlanAnswer, CollectorError> {
        let mut query = form_urlencoded::Serializer::new(String::new());
        query.append_pair("namespace", name);
        self.plan_query(query, policy).await
    }

    async fn plan_query(
        &self,
        mut query: form_urlencoded::Serializer<'_, String>,
        policy: &str,
    ) -> Result<crate::server::PlanAnswer, CollectorError> {
        query.append_pair("policy", policy);
        self.get_json(&format!("{}?{}", crate::server::PLAN_PATH, query.finish()))
            .await
    }

    /// The JSON answer to a GET of `path_and_query`.
    async fn get_json<T: serde::de::DeserializeOwned>(&self, path_and_query: &str) -> Result<T, CollectorError> {
        let answer = tokio::time::timeout(COLLECTOR_PATIENCE, self.get(path_and_query))
            .await
            .map_err(|_| CollectorError::Timeout(COLLECTOR_PATIENCE))?
            .map_err(CollectorError::Unreachable)?;
        let (head, body) = answer.split_once("\r\n\r\n").ok_or(CollectorError::Garbled)?;
        let code: u16 = head
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .ok_or(CollectorError::Garbled)?;
        if code != 200 {
            let body = body.lines().next().unwrap_or_default().to_string();
            return Err(CollectorError::Status { code, body });
        }
        serde_json::from_str(body).map_err(|_| CollectorError::Garbled)
    }

    /// One HTTP/1.1 GET on a connection of its own, read to its close: the whole answer.
    async fn get(&self, path_and_query: &str) -> std::io::Result<String> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect((self.host.as_str(), self.port)).await?;
        let request = format!(
            "GET {path_and_query} HTTP/1.1\r\nHost: {}:{}\r\nConnection: close\r\n\r\n",
            self.host, self.port
        );
        stream.write_all(request.as_bytes()).await?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await?;
        Ok(answer)
    }

    /// The reasons for each object of the tree of `target` that is being deleted or misses an
    /// owner. The target is asked first, whatever its state: an error then means no collector
    /// answers, and nothing more is asked. A later question that fails only leaves its object
    /// without reasons.
    pub async fn reasons(
        &self,
        listing: &Listing,
        target: &str,
    ) -> Result<HashMap<String, Vec<String>>, CollectorError> {
        let mut why = HashMap::new();
        why.insert(target.to_string(), self.explain(target).await?);
        let asked: Vec<String> = listing
            .shown_with(target)
            .into_iter()
            .filter(|uid| uid != target)
            .filter(|uid| {
                listing
                    .get(uid)
                    .is_some_and(|o| o.deleting || listing.misses_an_owner(o))
            })
            .collect();
        let answers: Vec<(String, Result<Vec<String>, CollectorError>)> = futures::stream::iter(asked)
            .map(|uid| async move {
                let answer = self.explain(&uid).await;
                (uid, answer)
            })
            .buffer_unordered(LIST_CONCURRENCY)
            .collect()
            .await;
        why.extend(answers.into_iter().filter_map(|(uid, a)| Some((uid, a.ok()?))));
        Ok(why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_collector_address_should_be_plain_http_with_a_host() {
        let collector: CollectorClient = "http://127.0.0.1:10257".parse().unwrap();
        assert_eq!(collector.to_string(), "http://127.0.0.1:10257");
        let collector: CollectorClient = "http://[::1]:8080/".parse().unwrap();
        assert_eq!(collector.to_string(), "http://[::1]:8080");
        for bad in [
            "https://127.0.0.1:10257",
            "127.0.0.1:10257",
            "http://h:1/explain",
            "nonsense",
        ] {
            let error = bad.parse::<CollectorClient>().unwrap_err();
            assert!(error.contains("is not a collector address"), "{bad}: {error}");
        }
    }
}
