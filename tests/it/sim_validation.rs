//! The simulated API server refuses over HTTP what a real one refuses, with the real answer: the
//! status code, the `Status` reason, the message, and for a 422 each failure as a
//! `details.causes` entry. One table, one row per rule, each row written through one verb (create,
//! update, each patch type, apply, dry run), since every write meets the same rules. kubectl, the
//! newest on `PATH` and the oldest the tests run (1.27), prints a few of the refusals as it prints
//! a cluster's.

use crate::kubectl::KUBECTL_1_27;
use crate::sim_apiserver::{raw, TestServer};
use crate::support;
use crate::support::process::{kubectl_available, kubectl_command_of, run_bounded, KUBECTL_TIMEOUT};
use axum::http::Method;
use kube_gc::api::Gvr;
use kube_gc_sim::http::ServerOptions;
use kube_gc_sim::SimCluster;
use serde_json::{json, Value};
use std::path::Path;

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const JSON: &str = "application/json";

/// What one request must be answered with.
struct Refusal {
    what: &'static str,
    method: Method,
    path: String,
    content_type: &'static str,
    body: Vec<u8>,
    code: u16,
    /// The `Status.reason`; empty when the server gives none.
    reason: &'static str,
    /// The message, or its start when it ends with `…`.
    message: String,
    /// Each cause's field and type.
    causes: &'static [(&'static str, &'static str)],
}

impl Refusal {
    /// A 422 Invalid for a JSON `body` sent to `path` with `method`.
    fn invalid(
        what: &'static str,
        (method, path): (Method, &str),
        body: &Value,
        message: impl Into<String>,
        causes: &'static [(&'static str, &'static str)],
    ) -> Self {
        Refusal {
            what,
            method,
            path: path.to_string(),
            content_type: JSON,
            body: body.to_string().into_bytes(),
            code: 422,
            reason: "Invalid",
            message: message.into(),
            causes,
        }
    }
}

fn post(path: &str) -> (Method, &str) {
    (Method::POST, path)
}

fn cm(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})
}

/// The text upstream gives for a name that is not a DNS subdomain.
const SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or \
                         '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used \
                         for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

fn table() -> Vec<Refusal> {
    let deployments = "/apis/apps/v1/namespaces/default/deployments";
    let long = "n".repeat(254);
    let event_owner = json!({"apiVersion": "v1", "kind": "Event", "name": "ev", "uid": "ev-uid"});
    let mut big_notes = cm("notes");
    big_notes["metadata"]["annotations"] = json!({"note": "x".repeat(256 * 1024)});
    let mut huge = cm("huge");
    huge["data"] = json!({"blob": "x".repeat(2 * 1024 * 1024)});
    let mut rows = vec![
        Refusal::invalid(
            "an upper-case Deployment name",
            post(deployments),
            &json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "Bad_Name"}}),
            format!("Deployment.apps \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": {SUBDOMAIN}"),
            &[("metadata.name", "FieldValueInvalid")],
        ),
        Refusal::invalid(
            "a 254-character name",
            post(CMS),
            &cm(&long),
            format!("ConfigMap \"{long}\" is invalid: metadata.name: Invalid value: \"{long}\": must be no more than 253 characters"),
            &[("metadata.name", "FieldValueInvalid")],
        ),
        Refusal::invalid(
            "no name at all",
            post(CMS),
            &json!({"metadata": {}}),
            "ConfigMap \"\" is invalid: metadata.name: Required value: name or generateName is required",
            &[("metadata.name", "FieldValueRequired")],
        ),
        Refusal::invalid(
            "a dotted Namespace name",
            post("/api/v1/namespaces"),
            &json!({"metadata": {"name": "team.a"}}),
            "Namespace \"team.a\" is invalid: metadata.name: Invalid value: \"team.a\": must not contain dots",
            &[("metadata.name", "FieldValueInvalid")],
        ),
        Refusal::invalid(
            "a Service name starting with a digit",
            post("/api/v1/namespaces/default/services"),
            &json!({"metadata": {"name": "1web"}}),
            "Service \"1web\" is invalid: metadata.name: Invalid value: \"1web\": a DNS-1035 label must consist \
             of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an \
             alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is \
             '[a-z]([-a-z0-9]*[a-z0-9])?')",
            &[("metadata.name", "FieldValueInvalid")],
        ),
        Refusal::invalid(
            "a Role name with a slash",
            post("/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles"),
            &json!({"metadata": {"name": "a/b"}}),
            "Role.rbac.authorization.k8s.io \"a/b\" is invalid: metadata.name: Invalid value: \"a/b\": may not contain '/'",
            &[("metadata.name", "FieldValueInvalid")],
        ),
        Refusal::invalid(
            "an Event named ..",
            post("/api/v1/namespaces/default/events"),
            &json!({"metadata": {"name": ".."}}),
            "Event \"..\" is invalid: metadata.name: Invalid value: \"..\": may not be '..'",
            &[("metadata.name", "FieldValueInvalid")],
        ),
        Refusal::invalid(
            "a 53-character CronJob name",
            post("/apis/batch/v1/namespaces/default/cronjobs"),
            &json!({"metadata": {"name": "c".repeat(53)}}),
            format!(
                "CronJob.batch \"{0}\" is invalid: metadata.name: Invalid value: \"{0}\": must be no more than 52 characters",
                "c".repeat(53)
            ),
            &[("metadata.name", "FieldValueInvalid")],
        ),
        Refusal::invalid(
            "an upper-case generateName",
            post(CMS),
            &json!({"metadata": {"generateName": "Bad-"}}),
            "ConfigMap \"Bad-…",
            &[("metadata.generateName", "FieldValueInvalid"), ("metadata.name", "FieldValueInvalid")],
        ),
        Refusal::invalid(
            "annotations over 256 KiB",
            post(CMS),
            &big_notes,
            "ConfigMap \"notes\" is invalid: metadata.annotations: Too long: must have at most 262144 bytes",
            &[("metadata.annotations", "FieldValueTooLong")],
        ),
        Refusal::invalid(
            "a core Event as an owner",
            post(CMS),
            &json!({"metadata": {"name": "owned", "ownerReferences": [event_owner]}}),
            "ConfigMap \"owned\" is invalid: metadata.ownerReferences: Invalid value: v1.OwnerReference{APIVersion:\"v1\", \
             Kind:\"Event\", Name:\"ev\", UID:\"ev-uid\", Controller:(*bool)(nil), BlockOwnerDeletion:(*bool)(nil)}: \
             /v1, Kind=Event is disallowed from being an owner",
            &[("metadata.ownerReferences", "FieldValueInvalid")],
        ),
        Refusal::invalid(
            "an owner without a uid",
            post(CMS),
            &json!({"metadata": {"name": "owned", "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p"}]}}),
            "ConfigMap \"owned\" is invalid: metadata.ownerReferences.uid: Invalid value: \"\": uid must not be empty",
            &[("metadata.ownerReferences.uid", "FieldValueInvalid")],
        ),
        Refusal::invalid(
            "a dry-run create of a bad name",
            post(&format!("{CMS}?dryRun=All")),
            &cm("Dry_Run"),
            "ConfigMap \"Dry_Run\" is invalid: metadata.name: Invalid value: \"Dry_Run\": a lowercase RFC 1123 subdomain…",
            &[("metadata.name", "FieldValueInvalid")],
        ),
        Refusal::invalid(
            "an update with an upper-case label key prefix",
            (Method::PUT, &format!("{CMS}/target")),
            &json!({"metadata": {"name": "target", "labels": {"Example.com/tier": "web"}}}),
            "ConfigMap \"target\" is invalid: metadata.labels: Invalid value: \"Example.com/tier\": prefix part a \
             lowercase RFC 1123 subdomain…",
            &[("metadata.labels", "FieldValueInvalid")],
        ),
    ];
    let target = format!("{CMS}/target");
    let label_value =
        "ConfigMap \"target\" is invalid: metadata.labels: Invalid value: \"-web\": a valid label must be an \
                       empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end \
                       with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for \
                       validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
    let patches: [(&str, &str, Value); 4] = [
        (
            "a merge patch",
            "application/merge-patch+json",
            json!({"metadata": {"labels": {"app": "-web"}}}),
        ),
        (
            "a strategic merge patch",
            "application/strategic-merge-patch+json",
            json!({"metadata": {"labels": {"app": "-web"}}}),
        ),
        (
            "a JSON patch",
            "application/json-patch+json",
            json!([{"op": "add", "path": "/metadata/labels", "value": {"app": "-web"}}]),
        ),
        (
            "an apply",
            "application/apply-patch+yaml",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "target", "labels": {"app": "-web"}}}),
        ),
    ];
    for (what, content_type, body) in patches {
        let query = if content_type.starts_with("application/apply") {
            "?fieldManager=test"
        } else {
            ""
        };
        rows.push(Refusal {
            what,
            method: Method::PATCH,
            path: format!("{target}{query}"),
            content_type,
            body: body.to_string().into_bytes(),
            ..Refusal::invalid(
                what,
                post(&target),
                &json!({}),
                label_value,
                &[("metadata.labels", "FieldValueInvalid")],
            )
        });
    }
    rows.push(Refusal {
        what: "a body over 3 MiB",
        body: json!({"metadata": {"name": "big"}, "data": {"k": "x".repeat(3 * 1024 * 1024)}})
            .to_string()
            .into_bytes(),
        code: 413,
        reason: "RequestEntityTooLarge",
        message: "Request entity too large: limit is 3145728".into(),
        causes: &[],
        ..Refusal::invalid("", post(CMS), &json!({}), "", &[])
    });
    rows.push(Refusal {
        what: "an object over etcd's 1.5 MiB",
        code: 500,
        reason: "",
        message: "etcdserver: request is too large".into(),
        causes: &[],
        ..Refusal::invalid("", post(CMS), &huge, "", &[])
    });
    rows
}

#[tokio::test]
async fn each_rule_should_be_refused_with_the_api_servers_code_reason_message_and_causes() {
    let server = TestServer::start().await;
    let created = raw(
        &server.client,
        Method::POST,
        CMS,
        JSON,
        cm("target").to_string().into_bytes(),
    )
    .await;
    assert_eq!(created.status.as_u16(), 201, "{}", created.body);
    for row in table() {
        let answer = raw(
            &server.client,
            row.method.clone(),
            &row.path,
            row.content_type,
            row.body.clone(),
        )
        .await;
        let what = row.what;
        assert_eq!(answer.status.as_u16(), row.code, "{what}: {}", answer.body);
        let body = &answer.body;
        assert_eq!(
            (body["kind"].as_str(), body["code"].as_u64()),
            (Some("Status"), Some(u64::from(row.code))),
            "{what}"
        );
        assert_eq!(
            body["reason"].as_str().unwrap_or_default(),
            row.reason,
            "{what}: {body}"
        );
        let message = body["message"].as_str().unwrap_or_default();
        match row.message.strip_suffix('…') {
            Some(start) => assert!(message.starts_with(start), "{what}: {message}"),
            None => assert_eq!(message, row.message, "{what}"),
        }
        let causes: Vec<(&str, &str)> = body["details"]["causes"]
            .as_array()
            .map(|causes| {
                causes
                    .iter()
                    .map(|c| {
                        (
                            c["field"].as_str().unwrap_or_default(),
                            c["reason"].as_str().unwrap_or_default(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(causes, row.causes, "{what}: {body}");
        for cause in body["details"]["causes"].as_array().into_iter().flatten() {
            let (field, text) = (
                cause["field"].as_str().unwrap_or_default(),
                cause["message"].as_str().unwrap_or_default(),
            );
            assert!(
                message.contains(&format!("{field}: {text}")),
                "{what}: the cause {cause} is in the message"
            );
        }
    }
    let target = raw(&server.client, Method::GET, &format!("{CMS}/target"), JSON, Vec::new())
        .await
        .body;
    assert!(
        target["metadata"].get("labels").is_none(),
        "no refused write changed the object: {target}"
    );
}

/// What kubectl prints for each refusal, as it prints a cluster's: a 422 as `The <Kind> "<name>"
/// is invalid:` and its causes (read from the `Status` details), any other failure as `Error from
/// server (<reason>):` and the message. (A body over 3 MiB is left to the HTTP table: kubectl 1.33
/// reports the connection cut while it still sends, not the 413.)
fn kubectl_refusals(binary: &Path) {
    let server = support::serve_on_own_runtime(SimCluster::new(), ServerOptions::default());
    let dir = server.dir.path();
    // kubectl checks the schema's required fields before it sends, as it would for a cluster.
    let bad_name = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: Bad_Name}\nspec:\n  \
                    selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    \
                    spec: {containers: [{name: main, image: 'nginx:1'}]}\n"
        .to_string();
    let notes = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\n  annotations: {{note: {}}}\n",
        "x".repeat(256 * 1024)
    );
    let owned = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: owned\n  ownerReferences:\n  \
                 - {apiVersion: v1, kind: Event, name: ev, uid: ev-uid}\n"
        .to_string();
    let huge = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: huge}}\ndata: {{k: {}}}\n",
        "x".repeat(2 * 1024 * 1024)
    );
    let table: [(&str, String, String); 4] = [
        (
            "bad-name.yaml",
            bad_name,
            format!("The Deployment \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": {SUBDOMAIN}"),
        ),
        (
            "notes.yaml",
            notes,
            "The ConfigMap \"notes\" is invalid: metadata.annotations: Too long: must have at most 262144 bytes".into(),
        ),
        (
            "owned.yaml",
            owned,
            "The ConfigMap \"owned\" is invalid: metadata.ownerReferences: Invalid value: v1.OwnerReference{".into(),
        ),
        (
            "huge.yaml",
            huge,
            "Error from server: error when creating \"huge.yaml\": etcdserver: request is too large".into(),
        ),
    ];
    for (file, yaml, expected) in table {
        std::fs::write(dir.join(file), yaml).expect("write the manifest");
        let mut command = kubectl_command_of(binary, &server.kubeconfig, dir, &["create", "-f", file]);
        command.current_dir(dir);
        let run = run_bounded(&mut command, KUBECTL_TIMEOUT);
        assert!(
            !run.status.success(),
            "{} {file}: created:\n{}",
            binary.display(),
            run.stdout
        );
        assert!(
            run.stderr.lines().any(|line| line.starts_with(&expected)),
            "{} {file}: expected a line starting {expected:?}, got:\n{}",
            binary.display(),
            run.stderr
        );
    }
    let names: Vec<String> = server
        .cluster
        .list_objects(&Gvr::new("", "v1", "configmaps"))
        .into_iter()
        .map(|o| o.metadata.name)
        .collect();
    assert!(names.is_empty(), "nothing refused was stored: {names:?}");
}

#[test]
fn kubectl_should_print_each_refusal_as_it_prints_a_clusters() {
    if kubectl_available() {
        kubectl_refusals(Path::new("kubectl"));
    }
}

#[test]
fn the_oldest_kubectl_should_print_each_refusal_as_it_prints_a_clusters() {
    let binary = Path::new(KUBECTL_1_27);
    if !binary.exists() {
        eprintln!("note: {KUBECTL_1_27} is not installed; skipping");
        return;
    }
    kubectl_refusals(binary);
}
