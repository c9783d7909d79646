//! Test support: an end-to-end [`Harness`] (the whole controller against the simulated cluster,
//! acting as a user would) and a step-by-step [`Rig`] (builder and workers driven by hand, one
//! event or one queue item at a time, as upstream's unit tests drive them). The reference model
//! the differential tests compare the engine with is the library's `kube_gc_sim::model`.
//!
//! Tests run on tokio's paused clock: waits advance virtual time, so backoffs and periods cost
//! nothing, and every wait is bounded and names what it waited for.

#![allow(dead_code)] // each test file uses a different part of the kit

pub mod partition;
pub mod process;
pub mod processes;

use kube_gc::api::layers::{self, Budget, Budgets, Fault, Fence, Stack, Verb};
use kube_gc::api::shard::ShardSelector;
use kube_gc::api::{
    ApiError, ClusterApi, DeleteOptions, Discovery, EventRecord, Gvr, KubeApi, ObjectList, ObjectMeta, OwnerReference,
    PartialObjectMeta, Patch, PropagationPolicy, RestMapper, SharedRestMapper, StatusReason, WatchStream,
};
use kube_gc::builder::GraphBuilder;
use kube_gc::collector::{Collector, CollectorConfig, PartialView};
use kube_gc::controller::{Config, GarbageCollector, Pipeline};
use kube_gc::event::{EventType, GraphEvent};
use kube_gc::graph::{invariants, Graph, Handle, Uid};
use kube_gc::journal::Journal;
use kube_gc::queue::WorkQueue;
use kube_gc::recorder::EventSink;
use kube_gc::router::{PartitionReceiver, Router};
use kube_gc::shard::Shard;
use kube_gc_sim::{SimCluster, TypeDef};
use std::sync::Arc;
use std::time::Duration;

/// How long (virtual time) a test waits for a condition before it fails.
pub const PATIENCE: Duration = Duration::from_secs(600);

/// The repository's top folder: the `it` suite is a test of the `kube-gc` binary's package
/// (`cli/`), one folder down.
pub fn repository() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("cli/ has a parent folder")
}

pub fn pods() -> Gvr {
    Gvr::new("", "v1", "pods")
}
pub fn configmaps() -> Gvr {
    Gvr::new("", "v1", "configmaps")
}
pub fn rcs() -> Gvr {
    Gvr::new("", "v1", "replicationcontrollers")
}
pub fn deployments() -> Gvr {
    Gvr::new("apps", "v1", "deployments")
}
pub fn replicasets() -> Gvr {
    Gvr::new("apps", "v1", "replicasets")
}
pub fn secrets() -> Gvr {
    Gvr::new("", "v1", "secrets")
}
pub fn persistentvolumes() -> Gvr {
    Gvr::new("", "v1", "persistentvolumes")
}
pub fn jobs() -> Gvr {
    Gvr::new("batch", "v1", "jobs")
}
pub fn cronjobs() -> Gvr {
    Gvr::new("batch", "v1", "cronjobs")
}

/// The GVR a type is served and monitored under: its preferred version.
pub fn gvr_of(def: &TypeDef) -> Gvr {
    Gvr::new(&def.group, &def.preferred, &def.resource)
}

/// A ref to an owner named by hand, which need not exist or even be served.
pub fn ref_named(api_version: &str, kind: &str, name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid.into(),
        ..Default::default()
    }
}

/// A ref to `owner`, with the owner's own apiVersion and kind.
pub fn ref_to(owner: &PartialObjectMeta) -> OwnerReference {
    OwnerReference {
        api_version: owner.api_version.clone(),
        kind: owner.kind.clone(),
        name: owner.metadata.name.clone(),
        uid: owner.metadata.uid.clone(),
        ..Default::default()
    }
}

/// A ref to `owner` with `blockOwnerDeletion: true`.
pub fn blocking_ref_to(owner: &PartialObjectMeta) -> OwnerReference {
    OwnerReference {
        block_owner_deletion: Some(true),
        ..ref_to(owner)
    }
}

/// Object metadata for a create.
pub fn meta(namespace: &str, name: &str, owners: Vec<OwnerReference>) -> ObjectMeta {
    ObjectMeta {
        name: name.into(),
        namespace: namespace.into(),
        owner_references: owners,
        ..Default::default()
    }
}

/// Delete options with a propagation policy.
pub fn policy(p: PropagationPolicy) -> DeleteOptions {
    DeleteOptions {
        propagation_policy: Some(p),
        ..Default::default()
    }
}

/// Delete options with the legacy `orphanDependents` flag.
pub fn orphan_dependents(orphan: bool) -> DeleteOptions {
    DeleteOptions {
        orphan_dependents: Some(orphan),
        ..Default::default()
    }
}

/// Creates an object in a cluster no collector watches yet (objects that exist before the
/// controller starts, as after a controller-manager restart).
pub fn create_in(cluster: &SimCluster, gvr: &Gvr, meta: ObjectMeta) -> PartialObjectMeta {
    let name = format!("{}/{}", meta.namespace, meta.name);
    cluster
        .create(
            gvr,
            PartialObjectMeta {
                metadata: meta,
                ..Default::default()
            },
        )
        .unwrap_or_else(|e| panic!("create {gvr} {name}: {e}"))
}

/// Waits (virtual time) until `cond` holds; fails naming `what` after [`PATIENCE`].
pub async fn eventually(what: &str, cond: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "likely stuck: never saw {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A `CustomResourceDefinition` serving the namespaced `example.com/v1` resource `plural` of
/// `kind`, with a schema that keeps every field.
pub fn crd_manifest(plural: &str, kind: &str) -> serde_json::Value {
    crd_manifest_in("example.com", plural, kind)
}

/// [`crd_manifest`] in the API group `group`.
pub fn crd_manifest_in(group: &str, plural: &str, kind: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            }],
        },
    })
}

/// The client configuration a user gets from the kubeconfig a simulated API server on `addr`
/// hands out.
pub async fn client_config(addr: std::net::SocketAddr) -> kube::Config {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&kube_gc_sim::http::kubeconfig(addr))
        .expect("the server's kubeconfig parses");
    kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("the server's kubeconfig makes a client config")
}

/// A kube-rs client of the simulated API server on `addr`, configured as [`client_config`] says.
pub async fn client_of(addr: std::net::SocketAddr) -> kube::Client {
    kube::Client::try_from(client_config(addr).await).expect("a plain-HTTP client")
}

/// A kube-rs client of the simulated API server on `addr` as `kube-gc run` builds it: retries are
/// left to the collector's layers.
pub async fn collector_client(addr: std::net::SocketAddr) -> kube::Client {
    let mut config = client_config(addr).await;
    config.default_retry = false;
    kube::Client::try_from(config).expect("a plain-HTTP client")
}

/// The collector's layers over `client`, with no rate limit and the fence `fence`.
pub fn layered(client: kube::Client, fence: Fence) -> Stack<KubeApi> {
    let unlimited = Budget::UNLIMITED;
    layers::stack(
        KubeApi::new(client),
        Budgets::new(unlimited, unlimited, unlimited),
        fence,
    )
}

/// How long [`start_collector`] waits for the monitors to sync, in real time.
pub const SYNC_PATIENCE: Duration = Duration::from_secs(30);

/// The whole collector over HTTP through `client` (see [`collector_client`]), in [`layered`] with
/// an open fence, re-reading discovery every 500 ms so that a new CRD's type is monitored at once;
/// returns once the monitors have synced.
pub async fn start_collector(client: kube::Client) -> Arc<GarbageCollector<Stack<KubeApi>>> {
    start_collector_with(client, Config::default()).await
}

/// [`start_collector`] with `config`, but for the discovery period.
pub async fn start_collector_with(client: kube::Client, config: Config) -> Arc<GarbageCollector<Stack<KubeApi>>> {
    let config = Config {
        sync_period: Duration::from_millis(500),
        ..config
    };
    let gc = GarbageCollector::start(Arc::new(layered(client, Fence::open())), config).await;
    assert!(gc.wait_for_sync(SYNC_PATIENCE).await, "monitors never synced");
    gc
}

/// Waits, in real time, until `cond` holds; fails naming `what` after `patience`. For tests
/// with sockets or processes, which do not follow tokio's paused clock.
pub async fn within_real_time(what: &str, patience: Duration, cond: impl AsyncFn() -> bool) {
    let deadline = std::time::Instant::now() + patience;
    while !cond().await {
        assert!(std::time::Instant::now() < deadline, "never saw {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// How long [`http_get`] waits for an answer.
pub const HTTP_PATIENCE: Duration = Duration::from_secs(30);

/// A GET over a fresh loopback connection, in real time: the status code and the body.
pub async fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    http_request(addr, "GET", path).await
}

/// A request of `method` without a body over a fresh loopback connection, in real time: the
/// status code and the body.
pub async fn http_request(addr: std::net::SocketAddr, method: &str, path: &str) -> (u16, String) {
    let exchange = async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let request =
            format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.expect("send");
        let mut response = String::new();
        stream.read_to_string(&mut response).await.expect("receive");
        response
    };
    let response = tokio::time::timeout(HTTP_PATIENCE, exchange)
        .await
        .expect("an answer in time");
    status_and_body(&response)
}

/// The status code and the body of a whole HTTP/1.1 response.
pub fn status_and_body(response: &str) -> (u16, String) {
    let (head, body) = response.split_once("\r\n\r\n").expect("a full response");
    let code = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status code");
    (code, body.to_string())
}

/// A simulated API server on a loopback port, served by a runtime of its own (one worker
/// thread), so that the test thread may block on a program meanwhile; with a kubeconfig for it in
/// a temporary directory. Dropping the runtime stops the server.
pub struct OwnServer {
    pub runtime: tokio::runtime::Runtime,
    pub cluster: Arc<SimCluster>,
    pub addr: std::net::SocketAddr,
    pub dir: tempfile::TempDir,
    pub kubeconfig: std::path::PathBuf,
}

/// Starts the whole collector over HTTP against the server at `addr`, on `runtime`, and serves
/// its endpoints on a loopback port as `kube-gc run --insecure-bind-address` does; returns their
/// address once the monitors have synced.
pub fn collector_endpoints(runtime: &tokio::runtime::Runtime, addr: std::net::SocketAddr) -> std::net::SocketAddr {
    runtime.block_on(async {
        let gc = start_collector(collector_client(addr).await).await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let endpoints = listener.local_addr().expect("the bound address");
        tokio::spawn(kube_gc_cli::server::serve(
            listener,
            kube_gc_cli::server::Slot::with(gc),
            std::future::pending(),
        ));
        endpoints
    })
}

/// Serves `cluster` with `options` on a runtime of its own; see [`OwnServer`].
pub fn serve_on_own_runtime(cluster: SimCluster, options: kube_gc_sim::http::ServerOptions) -> OwnServer {
    use kube_gc_sim::http;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let cluster = Arc::new(cluster);
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("a loopback port");
    let addr = listener.local_addr().expect("the bound address");
    runtime.spawn(http::serve(
        listener,
        Arc::clone(&cluster),
        options,
        std::future::pending(),
    ));
    let dir = tempfile::tempdir().expect("a temporary directory");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, http::kubeconfig(addr)).expect("write the kubeconfig");
    OwnServer {
        runtime,
        cluster,
        addr,
        dir,
        kubeconfig,
    }
}

/// The whole controller against a simulated cluster, which it reaches through `C`: the cluster
/// itself, or a wrapper that misbehaves on cue.
pub struct Harness<C = SimCluster> {
    pub cluster: Arc<SimCluster>,
    pub gc: Arc<GarbageCollector<C>>,
}

impl Harness {
    /// A collector over a cluster with the built-in types.
    pub async fn start() -> Harness {
        Harness::start_with(SimCluster::new(), Config::default()).await
    }

    /// A collector over `cluster` with `config`; returns once the monitors have synced.
    pub async fn start_with(cluster: SimCluster, config: Config) -> Harness {
        let cluster = Arc::new(cluster);
        Harness::start_over(cluster.clone(), cluster, config).await
    }
}

impl<C: ClusterApi> Harness<C> {
    /// A collector reaching `cluster` through `api`, with `config`; returns once the monitors
    /// have synced.
    pub async fn start_over(cluster: Arc<SimCluster>, api: Arc<C>, config: Config) -> Harness<C> {
        let gc = GarbageCollector::start(api, config).await;
        let harness = Harness { cluster, gc };
        assert!(
            harness.gc.wait_for_sync(Duration::from_secs(60)).await,
            "monitors never synced"
        );
        harness
    }

    /// Creates an object as a user would; panics with the server's answer on failure.
    pub fn create(&self, gvr: &Gvr, meta: ObjectMeta) -> PartialObjectMeta {
        create_in(&self.cluster, gvr, meta)
    }

    /// Deletes an object as a user would.
    pub fn delete(&self, gvr: &Gvr, obj: &PartialObjectMeta, options: DeleteOptions) {
        let m = &obj.metadata;
        self.cluster
            .delete_object(gvr, &m.namespace, &m.name, &options)
            .unwrap_or_else(|e| panic!("delete {gvr} {}/{}: {e}", m.namespace, m.name));
    }

    /// The object's current state, if it still exists under the same UID.
    pub fn get(&self, gvr: &Gvr, obj: &PartialObjectMeta) -> Option<PartialObjectMeta> {
        let m = &obj.metadata;
        self.cluster
            .get_object(gvr, &m.namespace, &m.name)
            .ok()
            .filter(|o| o.metadata.uid == m.uid)
    }

    /// True while the object exists under the same UID.
    pub fn exists(&self, gvr: &Gvr, obj: &PartialObjectMeta) -> bool {
        self.get(gvr, obj).is_some()
    }

    /// Changes an object's metadata with a PUT at its current resourceVersion, as a user would
    /// (adding a ref, removing a finalizer); returns the object as written.
    pub fn edit(&self, gvr: &Gvr, obj: &PartialObjectMeta, change: impl FnOnce(&mut ObjectMeta)) -> PartialObjectMeta {
        let m = &obj.metadata;
        let mut current = self
            .get(gvr, obj)
            .unwrap_or_else(|| panic!("edit {gvr} {}/{}: gone", m.namespace, m.name));
        change(&mut current.metadata);
        self.cluster
            .update(gvr, current)
            .unwrap_or_else(|e| panic!("edit {gvr} {}/{}: {e}", m.namespace, m.name))
    }

    /// Serves a custom type and waits until the collector monitors it, as a new CRD is picked up
    /// by the next sync round (spec §7.7); returns the GVR it is served under.
    pub async fn serve(&self, def: TypeDef) -> Gvr {
        let gvr = gvr_of(&def);
        self.cluster.register(def);
        self.gc.sync_once().await;
        assert!(
            self.gc.wait_for_sync(Duration::from_secs(60)).await,
            "the monitor of {gvr} never synced"
        );
        assert!(
            self.gc.monitor_states().contains_key(&gvr),
            "no monitor for {gvr} after a sync"
        );
        gvr
    }

    /// True when the graph has a node for the object.
    pub fn in_graph(&self, obj: &PartialObjectMeta) -> bool {
        self.gc.graph().contains(&Uid::parse(&obj.metadata.uid))
    }

    /// Waits (virtual time) until `cond` holds; fails naming `what` after [`PATIENCE`].
    pub async fn eventually(&self, what: &str, cond: impl Fn() -> bool) {
        eventually(what, cond).await;
    }

    /// Waits until the objects are in the graph (the upstream tests wait for this before deleting
    /// owners whose dependents must be orphaned, spec §12.9).
    pub async fn wait_in_graph(&self, objs: &[&PartialObjectMeta]) {
        self.eventually("the objects in the graph", || objs.iter().all(|o| self.in_graph(o)))
            .await;
    }

    /// Lets the collector run until it is quiet (or `PATIENCE` passes: virtual nodes may poll
    /// forever), then checks the graph invariants.
    pub async fn settle(&self) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        let mut quiet = 0;
        while quiet < 3 && tokio::time::Instant::now() < deadline {
            quiet = if self.gc.is_quiet() { quiet + 1 } else { 0 };
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        invariants::assert_ok(self.gc.graph());
    }

    /// Waits `d` of virtual time.
    pub async fn wait(&self, d: Duration) {
        tokio::time::sleep(d).await;
    }
}

/// The builder and the workers, driven by hand.
pub struct Rig {
    pub cluster: Arc<SimCluster>,
    pub graph: Arc<Graph>,
    pub collector: Arc<Collector<SimCluster>>,
    pub router: Router,
    /// The router, the builders and their receivers, as [`Rig::apply`] uses them.
    applier: Applier,
    pub events: EventSink,
}

impl Rig {
    /// A rig over `cluster` with an absentOwnerCache of 500 and the default workers.
    pub async fn new(cluster: SimCluster) -> Rig {
        Rig::with_config(cluster, 500, CollectorConfig::default()).await
    }

    /// A rig whose workers run with `config`, over a graph that keeps tombstones only when they
    /// would read them (as the controller builds it).
    pub async fn with_config(cluster: SimCluster, cache_capacity: usize, config: CollectorConfig) -> Rig {
        Rig::with_views(cluster, cache_capacity, config, PartialView::complete()).await
    }

    /// A rig whose workers see the monitors' views through `partial_view`.
    pub async fn with_views(
        cluster: SimCluster,
        cache_capacity: usize,
        config: CollectorConfig,
        partial_view: PartialView,
    ) -> Rig {
        Rig::build(
            Arc::new(cluster),
            cache_capacity,
            config,
            partial_view,
            1,
            Shard::whole(),
        )
        .await
    }

    /// A rig over a cluster other rigs may share, acting on `shard`'s part of it, as a sharded
    /// replica's collector does.
    pub async fn sharded(cluster: Arc<SimCluster>, shard: Shard) -> Rig {
        Rig::build(
            cluster,
            500,
            CollectorConfig::default(),
            PartialView::complete(),
            1,
            shard,
        )
        .await
    }

    /// A rig like [`Rig::with_config`] whose router spreads events over `partitions` builders.
    pub async fn with_partitions(
        cluster: SimCluster,
        cache_capacity: usize,
        config: CollectorConfig,
        partitions: usize,
    ) -> Rig {
        Rig::build(
            Arc::new(cluster),
            cache_capacity,
            config,
            PartialView::complete(),
            partitions,
            Shard::whole(),
        )
        .await
    }

    async fn build(
        cluster: Arc<SimCluster>,
        cache_capacity: usize,
        config: CollectorConfig,
        partial_view: PartialView,
        partitions: usize,
        shard: Shard,
    ) -> Rig {
        let discovery = cluster.discover().await.expect("discovery");
        let Pipeline {
            graph,
            router,
            partitions: receivers,
            builder,
            collector,
            events,
        } = Pipeline::builder(cluster.clone())
            .partitions(partitions)
            .absent_owner_cache_capacity(cache_capacity)
            .collector(config)
            .journal(Journal::in_memory())
            .shard(Arc::new(shard))
            .partial_view(partial_view)
            .mapper(Arc::new(SharedRestMapper::new(RestMapper::new(&discovery.resources))))
            .build();
        let applier = Applier {
            graph: graph.clone(),
            router: router.clone(),
            builders: Arc::new(vec![builder; receivers.len()]),
            receivers: Arc::new(parking_lot::Mutex::new(receivers)),
        };
        Rig {
            cluster,
            graph,
            collector,
            router,
            applier,
            events,
        }
    }

    /// Runs the workers and applies what they route until nothing is queued (bounded).
    pub async fn settle(&mut self) {
        for _ in 0..100 {
            let worked = self.step_delete().await | self.step_orphan().await;
            let applied = self.apply_routed();
            if !worked && applied == 0 {
                return;
            }
        }
        panic!("likely looping: the workers never went quiet");
    }

    /// An observed event for `obj` as the monitor of `api_version`/`kind` would route it.
    pub fn event(&self, event_type: EventType, obj: &ObjectMeta, api_version: &str, kind: &str) -> GraphEvent {
        self.applier.event(event_type, obj, api_version, kind)
    }

    /// Routes one event and lets every partition's builder apply it; see [`Applier::apply`].
    pub fn apply(&self, event: GraphEvent) {
        self.applier.apply(event);
    }

    /// A handle that applies events as [`Rig::apply`] does, for a thread that feeds the builders
    /// while the workers run.
    pub fn applier(&self) -> Applier {
        self.applier.clone()
    }

    /// The events workers routed (virtual deletes), without applying them, partition by
    /// partition: the router keeps their order within a partition only.
    pub fn take_routed(&mut self) -> Vec<GraphEvent> {
        let mut out = Vec::new();
        for receiver in self.applier.receivers.lock().iter_mut() {
            while let Some(e) = receiver.try_recv() {
                receiver.applied(1);
                out.push(e);
            }
        }
        out
    }

    /// Applies every routed event.
    pub fn apply_routed(&mut self) -> usize {
        let events = self.take_routed();
        let n = events.len();
        for e in events {
            self.apply(e);
        }
        n
    }

    /// Runs one attemptToDelete worker step on the next queued item; false if none was queued.
    pub async fn step_delete(&self) -> bool {
        if self.collector.attempt_to_delete().is_empty() {
            return false;
        }
        self.collector.process_attempt_to_delete_worker().await
    }

    /// Runs one attemptToOrphan worker step; false if none was queued.
    pub async fn step_orphan(&self) -> bool {
        if self.collector.attempt_to_orphan().is_empty() {
            return false;
        }
        self.collector.process_attempt_to_orphan_worker().await
    }

    /// The immediately queued items of attemptToDelete, taken out of the queue (and marked done).
    pub async fn drain_delete_queue(&self) -> Vec<Handle> {
        drain(self.collector.attempt_to_delete()).await
    }

    /// The immediately queued items of attemptToOrphan, taken out of the queue.
    pub async fn drain_orphan_queue(&self) -> Vec<Handle> {
        drain(self.collector.attempt_to_orphan()).await
    }

    /// The events the builder recorded so far.
    pub fn recorded_events(&mut self) -> Vec<kube_gc::api::EventRecord> {
        let mut out = Vec::new();
        while let Ok(e) = self.events.try_recv() {
            out.push(e);
        }
        out
    }

    /// The immediately queued items of attemptToDelete, in queue order, left queued in that order.
    pub async fn peek_delete_queue(&self) -> Vec<Handle> {
        let items = self.drain_delete_queue().await;
        for item in &items {
            self.collector.attempt_to_delete().add(item.clone());
        }
        items
    }

    /// Advances the paused clock until every rate-limited attemptToDelete item has come due and
    /// joined the back of the queue.
    pub async fn release_delayed(&self) {
        release(self.collector.attempt_to_delete(), "attemptToDelete").await;
    }

    /// The same for attemptToOrphan.
    pub async fn release_delayed_orphans(&self) {
        release(self.collector.attempt_to_orphan(), "attemptToOrphan").await;
    }

    /// A collector over `api` (a wrapper around this rig's cluster) that shares this rig's REST
    /// mapper, graph, queues, router and absentOwnerCache, for tests whose cluster must misbehave
    /// on cue or be watched call by call.
    pub async fn collector_over<C: ClusterApi>(&self, api: Arc<C>) -> Arc<Collector<C>> {
        Arc::new(self.collector.with_api(api, PartialView::complete()))
    }
}

/// Advances the paused clock until every rate-limited item of `queue` has come due.
async fn release(queue: &WorkQueue<Handle>, name: &str) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while queue.delayed_len() > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "likely stuck: delayed {name} items never came due"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// The router and the builders of a [`Rig`], with the partitions' receivers: cheap to clone, so
/// a thread of its own can apply events while the rig's workers run.
#[derive(Clone)]
pub struct Applier {
    graph: Arc<Graph>,
    router: Router,
    /// One builder per partition, by partition index. They share the graph, queues and cache, as
    /// the controller's do; what sets them apart is which events the router hands each.
    builders: Arc<Vec<GraphBuilder>>,
    /// The partitions' receivers, by index: locked only while [`Applier::apply`] drains them (or
    /// [`Rig::take_routed`] takes what they hold), so both can stay `&self`.
    receivers: Arc<parking_lot::Mutex<Vec<PartitionReceiver>>>,
}

impl Applier {
    /// An observed event for `obj` as the monitor of `api_version`/`kind` would route it.
    pub fn event(&self, event_type: EventType, obj: &ObjectMeta, api_version: &str, kind: &str) -> GraphEvent {
        GraphEvent::observed(&self.graph, event_type, obj, api_version, kind).expect("a readable object")
    }

    /// Routes one event and lets every partition's builder apply what it was handed, checking
    /// the graph invariants after each event (as upstream's tests do). Events a worker routed
    /// and the test has not taken are applied too, before or after this one as their partition
    /// orders them: a builder drains its partition in order.
    pub fn apply(&self, event: GraphEvent) {
        self.router.route(event);
        let mut receivers = self.receivers.lock();
        for (builder, receiver) in self.builders.iter().zip(receivers.iter_mut()) {
            while let Some(e) = receiver.try_recv() {
                builder.process_graph_changes(e);
                receiver.applied(1);
                invariants::assert_ok(&self.graph);
            }
        }
    }
}

async fn drain(queue: &WorkQueue<Handle>) -> Vec<Handle> {
    let mut out = Vec::new();
    while !queue.is_empty() {
        let item = queue.get().await.expect("queue not shut down");
        queue.done(&item);
        out.push(item);
    }
    out
}

impl Harness {
    /// Like [`Harness::start_with`], but returns at once, without waiting for the monitors to
    /// sync (for clusters with a resource that never syncs).
    pub async fn start_unsynced(cluster: SimCluster, config: Config) -> Harness {
        let cluster = Arc::new(cluster);
        let gc = GarbageCollector::start(cluster.clone(), config).await;
        Harness { cluster, gc }
    }
}

impl<C: ClusterApi> Harness<C> {
    /// The monitored resources, by plural name, sorted.
    pub fn monitored(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .gc
            .monitor_states()
            .keys()
            .map(|gvr| gvr.resource.clone())
            .collect();
        names.sort();
        names
    }
}

/// A fault on `verb` calls about `(group, resource)` (every resource if `None`), answering
/// `reason` with `message` until cleared.
pub fn fault(verb: Verb, resource: Option<(&str, &str)>, reason: StatusReason, message: &str) -> Fault {
    Fault {
        verb,
        resource: resource.map(|(g, r)| (g.to_string(), r.to_string())),
        error: ApiError::status(reason, message),
        times: None,
    }
}

/// A user action run on the cluster at a chosen moment of the collector's work.
pub type UserAction<C> = Box<dyn FnOnce(&C) + Send>;

/// A [`ClusterApi`] between the collector and a cluster: it writes down every call it passes on,
/// as `"<verb> <gvr> <ns>/<name>"` (upstream's unit tests assert on the exact requests the
/// collector sends), keeps the options of every DELETE, can run a user action right before the
/// next DELETE or server-side apply, and can add objects no API server would store to one
/// resource's LIST and WATCH.
pub struct Recorder<C> {
    pub inner: Arc<C>,
    log: parking_lot::Mutex<Vec<String>>,
    deletes: parking_lot::Mutex<Vec<DeleteOptions>>,
    before_delete: parking_lot::Mutex<Option<UserAction<C>>>,
    before_apply: parking_lot::Mutex<Option<UserAction<C>>>,
    injected: parking_lot::Mutex<Option<(Gvr, Vec<PartialObjectMeta>)>>,
    /// What goes wrong with the next watch-list of a resource.
    trouble: parking_lot::Mutex<Option<(Gvr, WatchListTrouble)>>,
}

/// What a [`Recorder`] does to the next watch-list of a resource.
#[derive(Clone, Copy, Debug)]
pub enum WatchListTrouble {
    /// It closes after this many events, as a connection that drops.
    CutAfter(usize),
    /// It never sends the bookmark that ends its initial events, as a server that ignores
    /// `sendInitialEvents`; it stays open with the changes that follow.
    NoBookmark,
    /// Every watch-list of the resource, not just the next, closes after this many events, as
    /// behind a server or proxy that ends every watch after a count of events.
    CutEachAfter(usize),
}

impl<C> Recorder<C> {
    pub fn new(inner: Arc<C>) -> Self {
        Recorder {
            inner,
            log: parking_lot::Mutex::new(Vec::new()),
            deletes: parking_lot::Mutex::new(Vec::new()),
            before_delete: parking_lot::Mutex::new(None),
            before_apply: parking_lot::Mutex::new(None),
            injected: parking_lot::Mutex::new(None),
            trouble: parking_lot::Mutex::new(None),
        }
    }

    /// The calls so far, in order.
    pub fn calls(&self) -> Vec<String> {
        self.log.lock().clone()
    }

    /// How many recorded calls equal `call`.
    pub fn count(&self, call: &str) -> usize {
        self.log.lock().iter().filter(|c| *c == call).count()
    }

    /// The options of every DELETE so far.
    pub fn deletes(&self) -> Vec<DeleteOptions> {
        self.deletes.lock().clone()
    }

    /// Runs `action` on the cluster right before the next DELETE reaches it.
    pub fn before_next_delete(&self, action: impl FnOnce(&C) + Send + 'static) {
        *self.before_delete.lock() = Some(Box::new(action));
    }

    /// Runs `action` on the cluster right before the next server-side apply reaches it.
    pub fn before_next_apply(&self, action: impl FnOnce(&C) + Send + 'static) {
        *self.before_apply.lock() = Some(Box::new(action));
    }

    /// Runs the action waiting in `slot`, if any.
    fn run_before(&self, slot: &parking_lot::Mutex<Option<UserAction<C>>>) {
        let action = slot.lock().take();
        if let Some(action) = action {
            action(&self.inner);
        }
    }

    /// Adds `objects` to the last page of every LIST of `gvr`, as MODIFIED events at the start of
    /// every WATCH, and as ADDED events at the start of every watch-list.
    pub fn inject(&self, gvr: Gvr, objects: Vec<PartialObjectMeta>) {
        *self.injected.lock() = Some((gvr, objects));
    }

    /// Makes `trouble` with the next watch-list of `gvr`.
    pub fn trouble_next_watch_list(&self, gvr: Gvr, trouble: WatchListTrouble) {
        *self.trouble.lock() = Some((gvr, trouble));
    }

    /// `stream` after the objects injected into `gvr`'s watches, as `event_type` events.
    fn after_injected(&self, gvr: &Gvr, event_type: kube_gc::api::WatchEventType, stream: WatchStream) -> WatchStream {
        use futures::StreamExt;
        let injected: Vec<_> = self
            .injected_for(gvr)
            .into_iter()
            .map(|object| {
                Ok(kube_gc::api::WatchEvent {
                    event_type,
                    object: Arc::new(object),
                })
            })
            .collect();
        futures::stream::iter(injected).chain(stream).boxed()
    }

    fn injected_for(&self, gvr: &Gvr) -> Vec<PartialObjectMeta> {
        match &*self.injected.lock() {
            Some((target, objects)) if target == gvr => objects.clone(),
            _ => Vec::new(),
        }
    }

    fn note(&self, verb: &str, gvr: &Gvr, namespace: &str, name: &str) {
        self.log.lock().push(format!("{verb} {gvr} {namespace}/{name}"));
    }
}

impl<C: ClusterApi> ClusterApi for Recorder<C> {
    async fn discover(&self) -> Result<Discovery, ApiError> {
        self.log.lock().push("discover".into());
        self.inner.discover().await
    }

    async fn get(&self, gvr: &Gvr, namespace: &str, name: &str) -> Result<PartialObjectMeta, ApiError> {
        self.note("get", gvr, namespace, name);
        self.inner.get(gvr, namespace, name).await
    }

    async fn patch(&self, gvr: &Gvr, namespace: &str, name: &str, edit: &Patch) -> Result<PartialObjectMeta, ApiError> {
        self.note("patch", gvr, namespace, name);
        self.inner.patch(gvr, namespace, name, edit).await
    }

    async fn delete(&self, gvr: &Gvr, namespace: &str, name: &str, options: &DeleteOptions) -> Result<(), ApiError> {
        self.note("delete", gvr, namespace, name);
        self.run_before(&self.before_delete);
        self.deletes.lock().push(options.clone());
        self.inner.delete(gvr, namespace, name, options).await
    }

    async fn list_page(
        &self,
        gvr: &Gvr,
        shard: Option<&ShardSelector>,
        continue_token: &str,
        limit: usize,
    ) -> Result<ObjectList, ApiError> {
        self.note("list", gvr, "", "");
        let mut page = self.inner.list_page(gvr, shard, continue_token, limit).await?;
        if page.continue_token.is_empty() {
            page.items.extend(self.injected_for(gvr));
        }
        Ok(page)
    }

    async fn watch(
        &self,
        gvr: &Gvr,
        shard: Option<&ShardSelector>,
        resource_version: &str,
    ) -> Result<WatchStream, ApiError> {
        self.note("watch", gvr, "", "");
        let stream = self.inner.watch(gvr, shard, resource_version).await?;
        Ok(self.after_injected(gvr, kube_gc::api::WatchEventType::Modified, stream))
    }

    async fn watch_list(
        &self,
        gvr: &Gvr,
        shard: Option<&ShardSelector>,
        resource_version: &str,
    ) -> Result<WatchStream, ApiError> {
        use futures::StreamExt;
        self.note("watch-list", gvr, "", "");
        let mut stream = self.inner.watch_list(gvr, shard, resource_version).await?;
        let trouble = {
            let mut trouble = self.trouble.lock();
            match &*trouble {
                Some((target, each @ WatchListTrouble::CutEachAfter(_))) if target == gvr => Some(*each),
                _ => trouble.take_if(|(target, _)| target == gvr).map(|(_, t)| t),
            }
        };
        match trouble {
            Some(WatchListTrouble::CutAfter(events) | WatchListTrouble::CutEachAfter(events)) => {
                stream = stream.take(events).boxed()
            }
            Some(WatchListTrouble::NoBookmark) => {
                let withheld = |e: &Result<kube_gc::api::WatchEvent, ApiError>| {
                    std::future::ready(!e.as_ref().is_ok_and(kube_gc::api::WatchEvent::is_initial_events_end))
                };
                stream = stream.filter(withheld).boxed();
            }
            None => {}
        }
        Ok(self.after_injected(gvr, kube_gc::api::WatchEventType::Added, stream))
    }

    async fn create_event(&self, event: &EventRecord) -> Result<(), ApiError> {
        self.log.lock().push("create_event".into());
        self.inner.create_event(event).await
    }

    async fn apply(
        &self,
        gvr: &Gvr,
        namespace: &str,
        name: &str,
        field_manager: &str,
        config: &serde_json::Value,
    ) -> Result<PartialObjectMeta, ApiError> {
        self.note("apply", gvr, namespace, name);
        self.run_before(&self.before_apply);
        self.inner.apply(gvr, namespace, name, field_manager, config).await
    }

    async fn list_whole(&self, gvr: &Gvr) -> Result<ObjectList, ApiError> {
        self.note("list-whole", gvr, "", "");
        self.inner.list_whole(gvr).await
    }

    async fn get_whole(&self, gvr: &Gvr, name: &str) -> Result<PartialObjectMeta, ApiError> {
        self.note("get-whole", gvr, "", name);
        self.inner.get_whole(gvr, name).await
    }

    async fn replace_status(&self, gvr: &Gvr, object: &PartialObjectMeta) -> Result<PartialObjectMeta, ApiError> {
        self.note("update-status", gvr, "", &object.metadata.name);
        self.inner.replace_status(gvr, object).await
    }
}

impl Rig {
    /// A second collector sharing this rig's graph, queues, router and absentOwnerCache, whose
    /// calls go through a [`Recorder`].
    pub async fn recording_collector(&self) -> (Arc<Collector<Recorder<SimCluster>>>, Arc<Recorder<SimCluster>>) {
        let recorder = Arc::new(Recorder::new(self.cluster.clone()));
        (self.collector_over(recorder.clone()).await, recorder)
    }

    /// Creates an object as a user would; panics with the server's answer on failure.
    pub fn create(&self, gvr: &Gvr, meta: ObjectMeta) -> PartialObjectMeta {
        create_in(&self.cluster, gvr, meta)
    }

    /// Applies an observed event for `obj` as its monitor would route it (apiVersion and kind
    /// from the object as the server returned it).
    pub fn observe(&self, event_type: EventType, obj: &PartialObjectMeta) {
        self.apply(self.event(event_type, &obj.metadata, &obj.api_version, &obj.kind));
    }
}

/// The resourceVersion of a fresh LIST of `api`'s collection: the version a watch opened from it
/// starts after.
pub async fn list_version<K>(api: &kube::Api<K>) -> String
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&Default::default())
        .await
        .expect("the list that pins a watch's start")
        .metadata
        .resource_version
        .expect("a list carries its resourceVersion")
}

/// The lines of a simulated API server's audit log as JSON, read once the requests under test
/// have been answered.
pub fn audit_lines(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .expect("the audit log exists")
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("an audit line is not JSON ({e}): {line}")))
        .collect()
}
