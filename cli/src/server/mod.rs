//! The collector's HTTP endpoints: the graph dump, explanations, metrics and health.
//!
//! | path | answer |
//! |---|---|
//! | `/debug/controllers/garbagecollector/graph[?uid=…]` | the DOT dump of spec §8 |
//! | `/explain?uid=U` | JSON: why an object is not collected yet (`explain.rs`) |
//! | `/debug/journal[?limit=N]` | the latest journal lines, oldest first, as JSON Lines ([`kube_gc::journal`]) |
//! | `/debug/stuck[?older-than=D&limit=N]` | JSON: the objects waiting on the collector for at least `D` (default `--stall-after`), oldest first, each explained (`stuck.rs`) |
//! | `/debug/migrations` | JSON: the storage version migrations in progress, each with its pass's figures or what it waits for ([`kube_gc::migrator`]) |
//! | `/debug/plan?uid=U[&uid=…][&policy=P]` | JSON: what deleting the objects with the policy (`background`, the default, `foreground` or `orphan`) would do, played on the graph ([`kube_gc::plan`]) |
//! | `/debug/plan?namespace=NAME[&policy=P]` | JSON: the same for deleting a namespace, with the namespace controller's deletions |
//! | `/metrics` | OpenMetrics text (`metrics.rs`) |
//! | `/healthz` | `ok` while the process serves |
//! | `/readyz` | `ok` once the monitors have synced or the initial sync wait has passed, else 503 |
//!
//! The endpoints serve a [`Slot`], which is empty until the collector has started. While a replica
//! stands by for the leader lease, `/healthz` and `/readyz` answer `ok` (a standby is healthy and
//! ready to take over, and a rolling update must not wait on it); while a collector starts,
//! `/readyz` answers 503. Either way the collector's endpoints answer 503 until it runs.
//!
//! These endpoints are served as they are by [`serve`] (plain HTTP, for loopback), and over TLS
//! ([`tls`]) behind delegated authentication and authorization ([`auth`]) on the secure port.
//!
//! Every handler only reads: the graph without locks (a dump taken while builders write may mix
//! moments, as the module docs of [`kube_gc::graph::dump`] say), the queues and counters through
//! their snapshots. Nothing here can change what the collector decides.

pub mod auth;
mod explain;
mod metrics;
mod stuck;
pub mod tls;

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use kube_gc::api::{ClusterApi, PropagationPolicy};
use kube_gc::controller::GarbageCollector;
use kube_gc::graph::{dump, Uid};
use parking_lot::RwLock;
use std::future::Future;
use std::sync::Arc;

/// Where the graph dump is mounted, as on kube-controller-manager's debug handler.
pub const GRAPH_PATH: &str = "/debug/controllers/garbagecollector/graph";

/// Where the latest journal lines are served.
pub const JOURNAL_PATH: &str = "/debug/journal";
/// Where the list of objects stuck waiting on the collector is mounted.
pub const STUCK_PATH: &str = "/debug/stuck";
/// The path of the migrations in progress.
pub const MIGRATIONS_PATH: &str = "/debug/migrations";
/// Where the cascade plans are served.
pub const PLAN_PATH: &str = "/debug/plan";

/// The collector the endpoints describe: empty until it has started, and while a shard's ranges
/// change hands.
pub struct Slot<C> {
    gc: RwLock<Option<Arc<GarbageCollector<C>>>>,
    /// Whether an empty slot means a replica standing by for the lease, rather than a collector
    /// still starting.
    standby: bool,
}

impl<C> Slot<C> {
    /// An empty slot, for a replica standing by for the leader lease: ready.
    pub fn standing_by() -> Arc<Self> {
        Arc::new(Slot {
            gc: RwLock::new(None),
            standby: true,
        })
    }

    /// An empty slot, for a collector that is starting: not ready yet.
    pub fn starting() -> Arc<Self> {
        Arc::new(Slot {
            gc: RwLock::new(None),
            standby: false,
        })
    }

    /// A slot holding `gc`.
    pub fn with(gc: Arc<GarbageCollector<C>>) -> Arc<Self> {
        let slot = Slot::starting();
        slot.fill(gc);
        slot
    }

    /// Puts the running collector in, in place of the one before.
    pub fn fill(&self, gc: Arc<GarbageCollector<C>>) {
        *self.gc.write() = Some(gc);
    }

    /// Takes the collector out: it is stopping.
    pub fn clear(&self) {
        *self.gc.write() = None;
    }

    /// The collector, or why there is none yet.
    fn collector(&self) -> Result<Arc<GarbageCollector<C>>, Unavailable> {
        self.gc.read().clone().ok_or(Unavailable { standby: self.standby })
    }
}

/// The 503 of a collector endpoint while the slot is empty.
struct Unavailable {
    standby: bool,
}

impl IntoResponse for Unavailable {
    fn into_response(self) -> Response {
        let why = if self.standby {
            "standing by: another replica holds the leader lease\n"
        } else {
            "starting: the collector is not running yet\n"
        };
        (StatusCode::SERVICE_UNAVAILABLE, why).into_response()
    }
}

type Shared<C> = State<Arc<Slot<C>>>;

/// The endpoints over `slot`.
pub fn router<C: ClusterApi>(slot: Arc<Slot<C>>) -> Router {
    Router::new()
        .route(GRAPH_PATH, get(graph::<C>))
        .route("/explain", get(explain::<C>))
        .route(JOURNAL_PATH, get(journal::<C>))
        .route(STUCK_PATH, get(stuck::<C>))
        .route(MIGRATIONS_PATH, get(migrations::<C>))
        .route(PLAN_PATH, get(plan::<C>))
        .route("/metrics", get(metrics::<C>))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz::<C>))
        .with_state(slot)
}

/// Serves the endpoints on `listener` until `shutdown` completes.
pub async fn serve<C: ClusterApi>(
    listener: tokio::net::TcpListener,
    slot: Arc<Slot<C>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(slot))
        .with_graceful_shutdown(shutdown)
        .await
}

/// The `uid` parameters of a query, in order; a query may repeat `uid`.
fn uids(query: &str) -> Vec<Uid> {
    query
        .split('&')
        .filter_map(|pair| pair.strip_prefix("uid="))
        .filter(|uid| !uid.is_empty())
        .map(Uid::parse)
        .collect()
}

async fn graph<C: ClusterApi>(State(slot): Shared<C>, uri: axum::http::Uri) -> Result<Response, Unavailable> {
    let gc = slot.collector()?;
    let selected = uids(uri.query().unwrap_or(""));
    let body = dump::to_dot(gc.graph(), &selected);
    let headers = [
        (header::CONTENT_TYPE, "text/vnd.graphviz"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    ];
    Ok((headers, body).into_response())
}

#[derive(serde::Deserialize)]
struct ExplainQuery {
    uid: Option<String>,
}

async fn explain<C: ClusterApi>(
    State(slot): Shared<C>,
    Query(query): Query<ExplainQuery>,
) -> Result<Response, Unavailable> {
    let gc = slot.collector()?;
    let Some(uid) = query.uid.filter(|u| !u.is_empty()) else {
        return Ok((StatusCode::BAD_REQUEST, "explain needs ?uid=\n").into_response());
    };
    Ok(axum::Json(explain::explain(&gc, Uid::parse(&uid))).into_response())
}

#[derive(serde::Deserialize)]
struct JournalQuery {
    limit: Option<String>,
}

async fn journal<C: ClusterApi>(
    State(slot): Shared<C>,
    Query(query): Query<JournalQuery>,
) -> Result<Response, Unavailable> {
    let gc = slot.collector()?;
    let limit = match limit(query.limit.as_deref(), kube_gc::journal::LATEST) {
        Ok(n) => n,
        Err(why) => return Ok((StatusCode::BAD_REQUEST, why).into_response()),
    };
    let mut body = String::new();
    for entry in gc.journal().latest(limit) {
        body.push_str(&serde_json::to_string(&*entry).unwrap_or_default());
        body.push('\n');
    }
    Ok(([(header::CONTENT_TYPE, "application/jsonl")], body).into_response())
}

#[derive(serde::Deserialize)]
struct StuckQuery {
    #[serde(rename = "older-than")]
    older_than: Option<String>,
    limit: Option<String>,
}

async fn stuck<C: ClusterApi>(
    State(slot): Shared<C>,
    Query(query): Query<StuckQuery>,
) -> Result<Response, Unavailable> {
    let gc = slot.collector()?;
    let older_than = match query.older_than.as_deref() {
        None | Some("") => gc.stall().stall_after(),
        Some(text) => match kube_gc::duration::parse(text) {
            Ok(d) => d,
            Err(e) => return Ok((StatusCode::BAD_REQUEST, format!("older-than={text}: {e}\n")).into_response()),
        },
    };
    let limit = match limit(query.limit.as_deref(), stuck::DEFAULT_LIMIT) {
        Ok(n) => n,
        Err(why) => return Ok((StatusCode::BAD_REQUEST, why).into_response()),
    };
    Ok(axum::Json(stuck::stuck(&gc, older_than, limit)).into_response())
}

async fn migrations<C: ClusterApi>(State(slot): Shared<C>) -> Result<Response, Unavailable> {
    let gc = slot.collector()?;
    Ok(axum::Json(gc.migrations().active()).into_response())
}

/// `/debug/plan`'s answer: the plan, and what it was played on.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanAnswer {
    /// The plan.
    pub plan: kube_gc::plan::Plan,
    /// Objects of the graph the plan read.
    pub snapshot_objects: usize,
    /// Items waiting in the collector's queues now, which its writes would come after.
    pub queue_depth: usize,
    /// How long the snapshot and the play took, in seconds.
    pub seconds: f64,
}

async fn plan<C: ClusterApi>(State(slot): Shared<C>, uri: axum::http::Uri) -> Result<Response, Unavailable> {
    let gc = slot.collector()?;
    let query = uri.query().unwrap_or("").to_string();
    let param = |name: &str| {
        form_urlencoded::parse(query.as_bytes())
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.into_owned())
    };
    let requested = uids(&query);
    let namespace = param("namespace").filter(|n| !n.is_empty());
    if requested.is_empty() == namespace.is_none() {
        return Ok((StatusCode::BAD_REQUEST, "plan needs ?uid= or ?namespace=, not both\n").into_response());
    }
    let policy = match param("policy").as_deref().map(str::to_ascii_lowercase).as_deref() {
        None | Some("" | "background") => PropagationPolicy::Background,
        Some("foreground") => PropagationPolicy::Foreground,
        Some("orphan") => PropagationPolicy::Orphan,
        Some(other) => {
            let why = format!("policy={other}: expected background, foreground or orphan\n");
            return Ok((StatusCode::BAD_REQUEST, why).into_response());
        }
    };
    // A plan of a large cascade takes a while: off the runtime's threads, which serve the
    // collector's watches; its encoding too, which for such a plan is tens of megabytes.
    let answer = tokio::task::spawn_blocking(move || {
        play(&gc, requested, namespace.as_deref(), policy).map(|answer| serde_json::to_vec(&answer))
    })
    .await;
    let json = [(header::CONTENT_TYPE, "application/json")];
    Ok(match answer {
        Ok(Some(Ok(body))) => (json, body).into_response(),
        Ok(None) => (StatusCode::NOT_FOUND, "the graph holds no such namespace\n").into_response(),
        Ok(Some(Err(e))) => (StatusCode::INTERNAL_SERVER_ERROR, format!("encoding the plan: {e}\n")).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("the plan failed: {e}\n")).into_response(),
    })
}

/// The plan of deleting `requested`, or the namespace `namespace`, on `gc`'s graph; `None` for a
/// namespace the graph does not hold.
fn play<C: ClusterApi>(
    gc: &GarbageCollector<C>,
    requested: Vec<Uid>,
    namespace: Option<&str>,
    policy: PropagationPolicy,
) -> Option<PlanAnswer> {
    let started = std::time::Instant::now();
    let mapper = gc.mapper().load();
    let (snapshot, plan) = match namespace {
        None => {
            let snapshot = kube_gc::plan::from_graph(gc.graph(), &requested);
            let names: Vec<String> = requested.iter().map(ToString::to_string).collect();
            let plan = kube_gc::plan::simulate(&snapshot, &*mapper, &names, policy);
            (snapshot, plan)
        }
        Some(name) => {
            let (uid, roots) = kube_gc::plan::namespace_roots(gc.graph(), name)?;
            let snapshot = kube_gc::plan::from_graph(gc.graph(), &roots);
            let plan = kube_gc::plan::simulate_namespace(&snapshot, &*mapper, &uid.to_string(), policy);
            (snapshot, plan)
        }
    };
    Some(PlanAnswer {
        plan,
        snapshot_objects: snapshot.len(),
        queue_depth: gc.attempt_to_delete().len() + gc.attempt_to_orphan().len(),
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// A `limit=` parameter: `default` when absent or empty, else a whole number, or what the 400
/// says was expected.
fn limit(text: Option<&str>, default: usize) -> Result<usize, String> {
    match text {
        None | Some("") => Ok(default),
        Some(text) => text
            .parse()
            .map_err(|_| format!("limit={text}: expected a whole number of objects, e.g. 100\n")),
    }
}

async fn metrics<C: ClusterApi>(State(slot): Shared<C>) -> Result<Response, Unavailable> {
    let gc = slot.collector()?;
    let content_type = [(header::CONTENT_TYPE, metrics::CONTENT_TYPE)];
    Ok((content_type, metrics::render(&gc)).into_response())
}

async fn readyz<C: ClusterApi>(State(slot): Shared<C>) -> Response {
    let ready = match slot.gc.read().as_ref() {
        Some(gc) => gc.is_ready(),
        None => slot.standby,
    };
    if ready {
        (StatusCode::OK, "ok").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "monitors not synced yet\n").into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_should_take_every_uid_parameter_in_order() {
        let a = "6f1a4a3e-0000-4000-8000-000000000001";
        let b = "6f1a4a3e-0000-4000-8000-000000000002";
        let got = uids(&format!("uid={a}&x=1&uid=&uid={b}"));
        assert_eq!(got, vec![Uid::parse(a), Uid::parse(b)]);
    }
}
