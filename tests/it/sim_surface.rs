//! What the simulated API server gives a client beyond metadata, as a cluster gives it: the
//! built-in types' defaults, the `status` and `scale` subresources, each type's table columns,
//! the legacy watch paths, and server-side apply of a JSON body.
//!
//! The HTTP tests send requests to the server's router without a socket; the kubectl tests serve
//! it on a loopback port and run the kubectl releases 1.27 and 1.33 against it, each where it is
//! installed (missing, a release is a note outside CI and a failure in CI).

use crate::support::process::{kubectl_available, kubectl_command_of, run_bounded, KUBECTL_TIMEOUT};
use crate::support::{serve_on_own_runtime, OwnServer};
use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use futures::StreamExt;
use kube_gc_sim::http::{router, ServerOptions};
use kube_gc_sim::SimCluster;
use serde_json::{json, Value};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt;

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";
const MERGE: &str = "application/merge-patch+json";
const APPLY: &str = "application/apply-patch+yaml";

fn server() -> Router {
    router(Arc::new(SimCluster::new()), ServerOptions::default())
}

/// One request to `router`: its status and its body as JSON.
async fn call(router: &Router, method: Method, uri: &str, content_type: &str, body: Value) -> (StatusCode, Value) {
    call_accepting(router, method, uri, content_type, "application/json", body).await
}

async fn call_accepting(
    router: &Router,
    method: Method,
    uri: &str,
    content_type: &str,
    accept: &str,
    body: Value,
) -> (StatusCode, Value) {
    let body = if body.is_null() {
        Body::empty()
    } else {
        Body::from(body.to_string())
    };
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::CONTENT_TYPE, content_type)
        .header(header::ACCEPT, accept)
        .body(body)
        .expect("a request");
    let response = router
        .clone()
        .oneshot(request)
        .await
        .unwrap_or_else(|never| match never {});
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .expect("the body");
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

async fn create(router: &Router, collection: &str, body: Value) -> Value {
    let (status, created) = call(router, Method::POST, collection, "application/json", body).await;
    assert_eq!(status, StatusCode::CREATED, "{collection}: {created}");
    created
}

fn deployment(name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "main", "image": "nginx:1.25"}]}}}})
}

const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";

#[tokio::test]
async fn creates_should_read_back_with_a_clusters_defaults() {
    let router = server();
    let cases = [
        (
            "/api/v1/namespaces/default/secrets",
            json!({"metadata": {"name": "s"}, "data": {}}),
            "/type",
            json!("Opaque"),
        ),
        (
            "/api/v1/namespaces/default/services",
            json!({"metadata": {"name": "svc"}, "spec": {"selector": {"app": "a"}, "ports": [{"port": 80}]}}),
            "/spec",
            json!({"type": "ClusterIP", "sessionAffinity": "None", "internalTrafficPolicy": "Cluster",
                   "clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1"], "ipFamilies": ["IPv4"],
                   "ipFamilyPolicy": "SingleStack", "selector": {"app": "a"},
                   "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}]}),
        ),
        (DEPLOYMENTS, deployment("d"), "/spec/replicas", json!(1)),
        (
            DEPLOYMENTS,
            deployment("e"),
            "/spec/progressDeadlineSeconds",
            json!(600),
        ),
        (
            DEPLOYMENTS,
            deployment("f"),
            "/spec/template/spec/containers/0/imagePullPolicy",
            json!("IfNotPresent"),
        ),
        (
            "/apis/batch/v1/namespaces/default/jobs",
            json!({"metadata": {"name": "j"}, "spec": {"template": {"spec": {"restartPolicy": "Never",
                   "containers": [{"name": "c", "image": "busybox"}]}}}}),
            "/spec/backoffLimit",
            json!(6),
        ),
        (
            "/api/v1/namespaces/default/configmaps",
            json!({"metadata": {"name": "c"}, "data": {"a": "1"}}),
            "/data",
            json!({"a": "1"}),
        ),
    ];
    for (collection, body, pointer, expected) in cases {
        let created = create(&router, collection, body).await;
        assert_eq!(
            created.pointer(pointer),
            Some(&expected),
            "{collection} {pointer}: {created}"
        );
    }
}

#[tokio::test]
async fn status_should_be_written_only_through_its_subresource() {
    let router = server();
    let created = create(&router, DEPLOYMENTS, deployment("web")).await;
    let status_uri = format!("{DEPLOYMENTS}/web/status");
    let mut with_status = created.clone();
    with_status["status"] = json!({"replicas": 2, "readyReplicas": 1});
    with_status["spec"]["replicas"] = json!(5);
    let (code, written) = call(
        &router,
        Method::PUT,
        &status_uri,
        "application/json",
        with_status.clone(),
    )
    .await;
    assert_eq!(code, StatusCode::OK, "{written}");
    assert_eq!(written["status"]["readyReplicas"], 1);
    assert_eq!(written["spec"]["replicas"], 1, "a status write keeps the spec");

    let mut main = written.clone();
    main["status"] = json!({"replicas": 9});
    main["spec"]["replicas"] = json!(3);
    let (code, updated) = call(
        &router,
        Method::PUT,
        &format!("{DEPLOYMENTS}/web"),
        "application/json",
        main,
    )
    .await;
    assert_eq!(code, StatusCode::OK, "{updated}");
    assert_eq!(updated["spec"]["replicas"], 3);
    assert_eq!(updated["status"]["replicas"], 2, "the object's write keeps the status");

    let patch = json!({"status": {"availableReplicas": 1}});
    let (code, patched) = call(&router, Method::PATCH, &status_uri, MERGE, patch).await;
    assert_eq!(code, StatusCode::OK, "{patched}");
    assert_eq!(
        patched["status"],
        json!({"replicas": 2, "readyReplicas": 1, "availableReplicas": 1})
    );
    let (code, read) = call(&router, Method::GET, &status_uri, "", Value::Null).await;
    assert_eq!((code, &read["status"]), (StatusCode::OK, &patched["status"]));

    for (uri, method, code) in [
        (
            "/api/v1/namespaces/default/configmaps/x/status",
            Method::GET,
            StatusCode::NOT_FOUND,
        ),
        (
            &format!("{DEPLOYMENTS}/web/bogus") as &str,
            Method::GET,
            StatusCode::NOT_FOUND,
        ),
        (&status_uri, Method::DELETE, StatusCode::METHOD_NOT_ALLOWED),
    ] {
        assert_eq!(call(&router, method, uri, "", Value::Null).await.0, code, "{uri}");
    }
}

#[tokio::test]
async fn scale_should_read_and_write_the_replicas_as_an_autoscaling_scale() {
    let router = server();
    create(&router, DEPLOYMENTS, deployment("web")).await;
    let scale_uri = format!("{DEPLOYMENTS}/web/scale");
    let (code, scale) = call(&router, Method::GET, &scale_uri, "", Value::Null).await;
    assert_eq!(code, StatusCode::OK, "{scale}");
    assert_eq!(
        (scale["apiVersion"].as_str(), scale["kind"].as_str()),
        (Some("autoscaling/v1"), Some("Scale"))
    );
    assert_eq!(scale["spec"], json!({"replicas": 1}));
    assert_eq!(scale["status"], json!({"replicas": 0, "selector": "app=web"}));

    let (code, patched) = call(
        &router,
        Method::PATCH,
        &scale_uri,
        MERGE,
        json!({"spec": {"replicas": 3}}),
    )
    .await;
    assert_eq!(
        (code, &patched["spec"]["replicas"]),
        (StatusCode::OK, &json!(3)),
        "{patched}"
    );
    let mut put = patched.clone();
    put["spec"]["replicas"] = json!(4);
    let (code, updated) = call(&router, Method::PUT, &scale_uri, "application/json", put.clone()).await;
    assert_eq!(
        (code, &updated["spec"]["replicas"]),
        (StatusCode::OK, &json!(4)),
        "{updated}"
    );
    let (_, web) = call(&router, Method::GET, &format!("{DEPLOYMENTS}/web"), "", Value::Null).await;
    assert_eq!(web["spec"]["replicas"], 4);

    let (code, _) = call(&router, Method::PUT, &scale_uri, "application/json", put).await;
    assert_eq!(code, StatusCode::CONFLICT, "a stale Scale's resourceVersion");
    let negative = json!({"spec": {"replicas": -1}});
    let (code, _) = call(&router, Method::PATCH, &scale_uri, MERGE, negative).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY);

    let (_, resources) = call(&router, Method::GET, "/apis/apps/v1", "", Value::Null).await;
    let names: Vec<&str> = resources["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    for name in [
        "deployments/scale",
        "deployments/status",
        "statefulsets/scale",
        "daemonsets/status",
    ] {
        assert!(names.contains(&name), "{name} not in {names:?}");
    }
}

/// The names of a table's columns, those of priority 1 marked with a `+`.
fn columns(table: &Value) -> Vec<String> {
    table["columnDefinitions"]
        .as_array()
        .expect("column definitions")
        .iter()
        .map(|c| {
            let wide = if c["priority"] == 1 { "+" } else { "" };
            format!("{wide}{}", c["name"].as_str().unwrap_or_default())
        })
        .collect()
}

#[tokio::test]
async fn tables_should_have_each_types_columns_and_cells() {
    let router = server();
    create(&router, DEPLOYMENTS, deployment("web")).await;
    create(
        &router,
        "/api/v1/namespaces/default/configmaps",
        json!({"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}}),
    )
    .await;
    let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "image": "x"}]}});
    create(&router, "/api/v1/namespaces/default/pods", pod).await;
    let cases = [
        (
            DEPLOYMENTS,
            "Name Ready Up-to-date Available Age +Containers +Images +Selector",
            json!(["web", "0/1", 0, 0]),
        ),
        (
            "/api/v1/namespaces/default/configmaps",
            "Name Data Age",
            json!(["c", 2]),
        ),
        (
            "/api/v1/namespaces/default/pods",
            "Name Ready Status Restarts Age +IP +Node +Nominated Node +Readiness Gates",
            json!(["p", "0/1", "Pending", "0"]),
        ),
        ("/api/v1/namespaces", "Name Status Age", json!([])),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            "Name Created At",
            json!([]),
        ),
    ];
    for (uri, expected_columns, first_cells) in cases {
        let (code, table) = call_accepting(&router, Method::GET, uri, "", TABLE, Value::Null).await;
        assert_eq!(code, StatusCode::OK, "{uri}: {table}");
        assert_eq!(columns(&table).join(" "), expected_columns, "{uri}");
        let expected = first_cells.as_array().expect("cells");
        if let Some(row) = table["rows"].as_array().and_then(|rows| rows.first()) {
            let cells = row["cells"].as_array().expect("cells");
            assert_eq!(
                cells.len(),
                table["columnDefinitions"].as_array().map_or(0, Vec::len),
                "{uri}"
            );
            assert_eq!(&cells[..expected.len()], &expected[..], "{uri}");
        }
    }
}

/// A watch's stream of events, one JSON object a line, however the body's frames cut them.
struct Events {
    frames: futures::stream::BoxStream<'static, Result<axum::body::Bytes, axum::Error>>,
    pending: Vec<u8>,
}

impl Events {
    /// The next event, or `None` when none comes within a second.
    async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=end).collect();
                return serde_json::from_slice(&line).ok();
            }
            let frame = tokio::time::timeout(Duration::from_secs(1), self.frames.next())
                .await
                .ok()??
                .ok()?;
            self.pending.extend_from_slice(&frame);
        }
    }
}

/// Opens the watch `uri`: its status and its events.
async fn open_watch(router: &Router, uri: &str) -> (StatusCode, Events) {
    let request = Request::builder().uri(uri).body(Body::empty()).expect("a request");
    let response = router
        .clone()
        .oneshot(request)
        .await
        .unwrap_or_else(|never| match never {});
    let status = response.status();
    let frames = response.into_body().into_data_stream().boxed();
    (
        status,
        Events {
            frames,
            pending: Vec::new(),
        },
    )
}

#[tokio::test]
async fn legacy_watch_paths_should_stream_as_a_watch_query_does() {
    let config_maps = "/api/v1/namespaces/default/configmaps";
    let cases = [
        ("/api/v1/watch/namespaces/default/configmaps", vec!["a", "b"]),
        ("/api/v1/watch/configmaps", vec!["a", "b"]),
        ("/api/v1/watch/namespaces/default/configmaps/b", vec!["b"]),
    ];
    for (uri, names) in cases {
        // A fresh server each time: a watch from "" starts with the objects that exist.
        let router = server();
        let (status, mut events) = open_watch(&router, uri).await;
        assert_eq!(status, StatusCode::OK, "{uri}");
        for name in ["a", "b"] {
            call(
                &router,
                Method::DELETE,
                &format!("{config_maps}/{name}"),
                "",
                Value::Null,
            )
            .await;
            create(&router, config_maps, json!({"metadata": {"name": name}})).await;
        }
        let mut seen = Vec::new();
        while let Some(event) = events.next().await {
            if event["type"] == "ADDED" {
                seen.push(
                    event["object"]["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                );
            }
        }
        assert_eq!(seen, names, "{uri}");
    }
    let router = server();
    let (status, _) = open_watch(&router, "/apis/apps/v1/watch/namespaces/default/deployments").await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = call(
        &router,
        Method::POST,
        "/api/v1/watch/namespaces/default/configmaps",
        "",
        Value::Null,
    )
    .await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn server_side_apply_should_take_a_json_body_and_record_its_manager() {
    let router = server();
    let uri = "/api/v1/namespaces/default/configmaps/applied?fieldManager=tool-a";
    let config = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": {"a": "1"}});
    let (code, created) = call(&router, Method::PATCH, uri, APPLY, config).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    assert_eq!(created["data"], json!({"a": "1"}));
    let managers: Vec<&str> = created["metadata"]["managedFields"]
        .as_array()
        .expect("managed fields")
        .iter()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert_eq!(managers, ["tool-a"]);
    let rival = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": {"a": "2"}});
    let uri_b = "/api/v1/namespaces/default/configmaps/applied?fieldManager=tool-b";
    let (code, _) = call(&router, Method::PATCH, uri_b, APPLY, rival.clone()).await;
    assert_eq!(code, StatusCode::CONFLICT, "tool-a owns data.a");
    let (code, forced) = call(&router, Method::PATCH, &format!("{uri_b}&force=true"), APPLY, rival).await;
    assert_eq!((code, &forced["data"]["a"]), (StatusCode::OK, &json!("2")), "{forced}");
}

// ---------------------------------------------------------------------------------------------
// kubectl

/// The kubectl releases the tests run, where installed.
const RELEASES: [&str; 2] = [
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.27",
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.33",
];

/// The releases installed; a missing one is a failure in CI and a note elsewhere.
fn releases() -> Vec<&'static Path> {
    if !kubectl_available() {
        return Vec::new();
    }
    let in_ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
    RELEASES
        .iter()
        .map(Path::new)
        .filter(|binary| {
            let found = binary.is_file();
            assert!(found || !in_ci, "{} is missing and CI is set", binary.display());
            if !found {
                eprintln!("note: {} is not installed; skipping it", binary.display());
            }
            found
        })
        .collect()
}

fn kubectl(served: &OwnServer, binary: &Path, args: &[&str]) -> String {
    let mut command = kubectl_command_of(binary, &served.kubeconfig, served.dir.path(), args);
    let run = run_bounded(&mut command, KUBECTL_TIMEOUT);
    assert!(
        run.status.success(),
        "{} {args:?}:\n{}{}",
        binary.display(),
        run.stdout,
        run.stderr
    );
    run.stdout
}

/// The header of a `kubectl get` table, its column names joined by single spaces.
fn header(table: &str) -> String {
    let line = table.lines().next().unwrap_or_default();
    // Column names are separated by at least two spaces; a name holds at most one.
    line.split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

const WORKLOADS: &str = "apiVersion: v1
kind: Namespace
metadata: {name: team}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: main, image: 'nginx:1.25'}]}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {a: '1'}
---
apiVersion: v1
kind: Secret
metadata: {name: token}
data: {t: dG9rZW4=}
---
apiVersion: batch/v1
kind: Job
metadata: {name: once}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: main, image: busybox}]
";

#[test]
fn kubectl_should_print_wide_tables_scale_and_apply_server_side_as_on_a_cluster() {
    for binary in releases() {
        let served = serve_on_own_runtime(SimCluster::new(), ServerOptions::default());
        let manifest = served.dir.path().join("workloads.yaml");
        std::fs::write(&manifest, WORKLOADS).expect("write the manifest");
        let manifest = manifest.to_str().expect("a UTF-8 path");
        let said = kubectl(&served, binary, &["apply", "--server-side", "-f", manifest]);
        assert!(
            said.contains("deployment.apps/web serverside-applied"),
            "{}: {said}",
            binary.display()
        );

        let cases = [
            (
                "deployments",
                "NAME READY UP-TO-DATE AVAILABLE AGE CONTAINERS IMAGES SELECTOR",
            ),
            ("services", "NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE SELECTOR"),
            ("configmaps", "NAME DATA AGE"),
            ("secrets", "NAME TYPE DATA AGE"),
            (
                "jobs",
                "NAME STATUS COMPLETIONS DURATION AGE CONTAINERS IMAGES SELECTOR",
            ),
            ("namespaces", "NAME STATUS AGE"),
        ];
        for (resource, expected) in cases {
            let table = kubectl(&served, binary, &["get", resource, "-o", "wide"]);
            assert_eq!(
                header(&table),
                expected,
                "{} get {resource} -o wide:\n{table}",
                binary.display()
            );
        }
        let services = kubectl(&served, binary, &["get", "services", "-o", "wide"]);
        assert!(
            services.contains("10.96.0.1") && services.contains("80/TCP"),
            "{services}"
        );

        kubectl(&served, binary, &["scale", "deployment/web", "--replicas=3"]);
        let replicas = kubectl(
            &served,
            binary,
            &["get", "deployment", "web", "-o", "jsonpath={.spec.replicas}"],
        );
        assert_eq!(replicas, "3", "{}", binary.display());
        let managers = kubectl(
            &served,
            binary,
            &[
                "get",
                "configmap",
                "settings",
                "--show-managed-fields",
                "-o",
                "jsonpath={.metadata.managedFields[*].manager}",
            ],
        );
        assert_eq!(managers, "kubectl", "{}", binary.display());
    }
}
