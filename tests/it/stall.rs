//! Stall alarms over the simulated cluster, in virtual time: a foreground owner held by a
//! blocking dependent nobody lets go (kubernetes#77081) raises `kube_gc_stalled` and shows in
//! `/debug/stuck` with that dependent named, until the dependent goes; an API outage is never
//! reported as a stall.
//!
//! The endpoints are asked through their router directly, without a socket, so that tokio's
//! paused clock can run the minutes a stall takes.

use crate::support;

use kube_gc::api::layers::Verb;
use kube_gc::api::{PropagationPolicy, StatusReason};
use kube_gc::controller::{Config, GarbageCollector};
use kube_gc_sim::SimCluster;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use support::{blocking_ref_to, configmaps, fault, meta, policy, rcs, Harness};
use tower::ServiceExt;

/// The stall threshold of these tests.
const STALL_AFTER: Duration = Duration::from_secs(60);
/// A finalizer no controller removes.
const HOLD: &str = "example.com/hold";

fn config() -> Config {
    Config {
        stall_after: STALL_AFTER,
        ..Config::default()
    }
}

/// A GET of `path` from the collector's endpoints: the status code and the body.
async fn get(gc: &Arc<GarbageCollector<SimCluster>>, path: &str) -> (u16, String) {
    let app = kube_gc_cli::server::router(kube_gc_cli::server::Slot::with(gc.clone()));
    let request = http::Request::get(path)
        .body(axum::body::Body::empty())
        .expect("a request");
    let response = app.oneshot(request).await.expect("an answer");
    let code = response.status().as_u16();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("a body");
    (code, String::from_utf8_lossy(&body).into_owned())
}

/// The value of the unlabelled sample `name` in `/metrics`.
async fn sample(gc: &Arc<GarbageCollector<SimCluster>>, name: &str) -> String {
    let (code, text) = get(gc, "/metrics").await;
    assert_eq!(code, 200, "{text}");
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ').map(str::to_string))
        .unwrap_or_else(|| panic!("no sample {name} in:\n{text}"))
}

async fn stuck(gc: &Arc<GarbageCollector<SimCluster>>, query: &str) -> Value {
    let (code, body) = get(gc, &format!("/debug/stuck{query}")).await;
    assert_eq!(code, 200, "/debug/stuck{query}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("/debug/stuck is not JSON ({e}): {body}"))
}

#[tokio::test(start_paused = true)]
async fn a_foreground_owner_held_by_an_undeletable_blocking_dependent_should_raise_a_stall_until_it_goes() {
    let h = Harness::start_with(SimCluster::new(), config()).await;
    let owner = h.create(&rcs(), meta("default", "owner", vec![]));
    let mut held = meta("default", "held", vec![blocking_ref_to(&owner)]);
    held.finalizers.push(HOLD.to_string());
    let held = h.create(&configmaps(), held);
    h.wait_in_graph(&[&owner, &held]).await;
    h.delete(&rcs(), &owner, policy(PropagationPolicy::Foreground));
    h.eventually("the dependent deleted in the foreground, held by its finalizer", || {
        h.get(&configmaps(), &held)
            .is_some_and(|d| d.metadata.deletion_timestamp.is_some() && d.metadata.finalizers == [HOLD])
    })
    .await;
    assert_eq!(sample(&h.gc, "kube_gc_stalled").await, "0", "not yet");

    h.wait(STALL_AFTER * 2).await;
    assert!(h.gc.stall_status().stalled, "{:?}", h.gc.stall_status());
    assert_eq!(sample(&h.gc, "kube_gc_stalled").await, "1");
    let listed = stuck(&h.gc, "?older-than=30s").await;
    assert_eq!(listed["stalled"], true, "{listed}");
    assert_eq!(listed["total"], 1, "only the owner waits: {listed}");
    let entry = &listed["objects"][0];
    assert_eq!(entry["uid"], owner.metadata.uid, "{listed}");
    assert_eq!(entry["waitingFor"], serde_json::json!(["foregroundDeletion finalizer"]));
    assert!(entry["waitingSeconds"].as_f64().unwrap_or(0.0) >= 60.0, "{entry}");
    let reason = entry["explain"]["reasons"][0].as_str().unwrap_or_default();
    assert!(
        reason.contains("ConfigMap default/held (being deleted, held by a finalizer the collector does not remove)"),
        "the blocking dependent is named: {reason}"
    );
    assert_eq!(entry["explain"]["blockingDependents"][0]["uid"], held.metadata.uid);
    assert_eq!(
        stuck(&h.gc, "").await["total"],
        1,
        "the default threshold is --stall-after"
    );
    assert_eq!(stuck(&h.gc, "?older-than=1h").await["total"], 0);
    let (code, body) = get(&h.gc, "/debug/stuck?older-than=5x").await;
    assert_eq!((code, body.contains("unknown unit `x`")), (400, true), "{body}");
    let (code, body) = get(&h.gc, "/debug/stuck?limit=many").await;
    assert_eq!((code, body.contains("limit=many")), (400, true), "{body}");
    let none_shown = stuck(&h.gc, "?older-than=30s&limit=0").await;
    assert_eq!(
        (
            none_shown["total"].as_u64(),
            none_shown["objects"].as_array().map(Vec::len)
        ),
        (Some(1), Some(0)),
        "the limit bounds the list, not the count: {none_shown}"
    );

    h.edit(&configmaps(), &held, |m| m.finalizers.clear());
    h.eventually("the owner collected once its dependent went", || {
        !h.exists(&rcs(), &owner)
    })
    .await;
    h.wait(Duration::from_secs(10)).await;
    assert!(!h.gc.stall_status().stalled, "{:?}", h.gc.stall_status());
    assert_eq!(sample(&h.gc, "kube_gc_stalled").await, "0");
    assert_eq!(stuck(&h.gc, "?older-than=0").await["total"], 0);
    h.gc.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn an_api_outage_should_not_be_reported_as_a_stall() {
    let h = Harness::start_with(SimCluster::new(), config()).await;
    let owner = h.create(&rcs(), meta("default", "owner", vec![]));
    let dependent = h.create(
        &configmaps(),
        meta("default", "dependent", vec![blocking_ref_to(&owner)]),
    );
    h.wait_in_graph(&[&owner, &dependent]).await;
    for verb in Verb::ALL {
        h.cluster.inject_fault(fault(
            verb,
            None,
            StatusReason::ServiceUnavailable,
            "the server is down",
        ));
    }
    h.delete(&rcs(), &owner, policy(PropagationPolicy::Foreground));

    for _ in 0..25 {
        h.wait(Duration::from_secs(12)).await;
        let status = h.gc.stall_status();
        assert!(!status.stalled, "an outage reported as a stall: {status:?}");
    }
    let status = h.gc.stall_status();
    assert!(status.api_trouble && status.objects == 1, "{status:?}");
    assert!(h.exists(&configmaps(), &dependent), "nothing could be deleted");
    assert_eq!(sample(&h.gc, "kube_gc_stalled").await, "0");

    h.cluster.clear_faults();
    h.eventually("the owner and its dependent collected after the outage", || {
        !h.exists(&rcs(), &owner) && !h.exists(&configmaps(), &dependent)
    })
    .await;
    assert!(!h.gc.stall_status().stalled);
    h.gc.shutdown().await;
}
