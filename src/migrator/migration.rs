//! One pass over one running migration: the checks that the collector's view of the resource is
//! complete and recent enough, then a rewrite of every object in it stored at or before the
//! migration's resourceVersion.
//!
//! # Invariants
//!
//! - An object is rewritten only from the graph, after the resource's monitor has synced past the
//!   migration's resourceVersion and the builders have applied every event routed so far: the
//!   graph then holds every object that existed at that version and is still there.
//! - A rewrite is a server-side apply of the object's `apiVersion`, `kind`, UID and
//!   resourceVersion only: it changes no field, and an object updated since (its version moved),
//!   deleted, or deleted and created again (its UID changed) answers 409 Conflict, which means it
//!   needs no rewrite (it was written since, or is gone). It can never create an object.
//! - A pass stops at the first error that is not a conflict: a transient one (throttling, 5xx, the
//!   server unreachable) leaves the migration running, to be passed over again later, when the
//!   objects rewritten already have newer versions and are skipped; any other fails it.

use super::progress::Progress;
use super::svm::Svm;
use super::Collected;
use crate::api::{ApiError, ClusterApi, Gvr, StatusReason};
use crate::graph::ResourceVersion;
use futures::StreamExt;
use std::time::{Duration, SystemTime};

/// The field manager of the rewrites, upstream's controller name.
pub const FIELD_MANAGER: &str = "storage-version-migrator-controller";

/// How long after its creation a migration waits for its resource to show in discovery and in
/// the collector's monitors before it fails: discovery is read again every 30 s.
const GRACE: Duration = Duration::from_secs(60);

/// How long a pass waits for the builders to apply what the monitors routed.
const CATCH_UP: Duration = Duration::from_secs(10);

/// What a pass came to.
#[derive(Debug, PartialEq, Eq)]
pub enum Pass {
    /// Every object in this collector's part stored at or before the migration's resourceVersion
    /// was rewritten, or had changed since.
    Done {
        /// Objects rewritten by this pass.
        rewritten: u64,
    },
    /// Not now, for the reason given; the migration is passed over again later.
    NotYet(String),
    /// The migration cannot succeed, for the reason given.
    Failed(String),
}

/// An object to rewrite, as the graph holds it.
struct Target {
    namespace: String,
    name: String,
    uid: String,
    resource_version: ResourceVersion,
}

/// One pass over `svm`, which is running and has its resourceVersion, against `collected`,
/// rewriting through `api` with up to `concurrency` requests in flight; counts into `progress`.
pub async fn pass<M: ClusterApi>(
    collected: &Collected,
    api: &M,
    svm: &Svm,
    concurrency: usize,
    progress: &Progress,
) -> Pass {
    let young = is_young(svm);
    let mapper = collected.mapper.load();
    let Some(resource) = mapper.preferred(&svm.resource.group, &svm.resource.resource).cloned() else {
        return wait_or_fail(
            young,
            "the resource is not in discovery",
            "unable to obtain GVR from discovery",
        );
    };
    let gvr = resource.gvr.clone();
    let status = collected.monitors.status_of(&gvr);
    if !status.as_ref().is_some_and(|s| s.is_synced()) {
        let reason = format!("resource does not exist in GC: no synced monitor of {gvr}");
        return wait_or_fail(young, &reason, &reason);
    }
    let checkpoint = ResourceVersion::parse(&svm.status.resource_version);
    if !checkpoint.is_known() {
        return Pass::Failed(format!(
            "error comparing resource versions between GC and SVM resource: {:?} is not a resourceVersion",
            svm.status.resource_version
        ));
    }
    let seen = status.map(|s| s.last_sync_resource_version()).unwrap_or_default();
    if !seen.is_known() || seen.is_older_than(checkpoint) {
        return Pass::NotYet(format!(
            "GC cache is not up to date: the view of {gvr} is at resourceVersion {seen}, the migration's is {checkpoint}"
        ));
    }
    if !collected.router.caught_up(CATCH_UP).await {
        return Pass::NotYet("the graph builders have not applied every watched event yet".into());
    }
    let targets = match targets(collected, &gvr, &resource.kind, checkpoint) {
        Ok(targets) => targets,
        Err(failure) => return Pass::Failed(failure),
    };
    progress.start(targets.len() as u64);
    rewrite(api, &gvr, &resource.kind, targets, concurrency, progress).await
}

/// Not ready: wait while the migration is young, else fail with `failure`.
fn wait_or_fail(young: bool, waiting: &str, failure: &str) -> Pass {
    if young {
        Pass::NotYet(waiting.to_string())
    } else {
        Pass::Failed(failure.to_string())
    }
}

/// True while `svm` is younger than [`GRACE`].
fn is_young(svm: &Svm) -> bool {
    let created = svm.object.metadata.creation_timestamp.as_deref().unwrap_or_default();
    crate::api::time::parse_rfc3339(created)
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .is_none_or(|age| age < GRACE)
}

/// The objects of kind `kind` read through `gvr` that this collector acts on, stored at or before
/// `checkpoint`; fails on one whose resourceVersion the graph could not keep as a number.
fn targets(collected: &Collected, gvr: &Gvr, kind: &str, checkpoint: ResourceVersion) -> Result<Vec<Target>, String> {
    let api_version = gvr.api_version();
    let shard = &collected.shard;
    let mut targets = Vec::new();
    let mut unknown = None;
    collected.graph.for_each_node(|node| {
        let identity = node.identity();
        if node.is_virtual()
            || identity.kind().as_str() != kind
            || identity.api_version().as_str() != api_version
            || !shard.owns(identity)
        {
            return;
        }
        let resource_version = node.observation().resource_version;
        if !resource_version.is_known() {
            unknown.get_or_insert_with(|| identity.to_string());
        } else if !checkpoint.is_older_than(resource_version) {
            targets.push(Target {
                namespace: identity.namespace().to_string(),
                name: identity.name.to_string(),
                uid: identity.uid.to_string(),
                resource_version,
            });
        }
    });
    match unknown {
        Some(object) => Err(format!(
            "unable to compare the resource version of {object}: it is not a number"
        )),
        None => Ok(targets),
    }
}

/// Rewrites `targets`, up to `concurrency` at once, stopping at the first error that is not a
/// conflict (see the [module docs](self)).
async fn rewrite<M: ClusterApi>(
    api: &M,
    gvr: &Gvr,
    kind: &str,
    targets: Vec<Target>,
    concurrency: usize,
    progress: &Progress,
) -> Pass {
    let api_version = gvr.api_version();
    let mut answers = futures::stream::iter(targets)
        .map(|t| {
            let config = serde_json::json!({
                "apiVersion": api_version,
                "kind": kind,
                "metadata": {"uid": t.uid, "resourceVersion": t.resource_version.to_string()},
            });
            async move { api.apply(gvr, &t.namespace, &t.name, FIELD_MANAGER, &config).await }
        })
        .buffer_unordered(concurrency.max(1));
    let mut rewritten = 0;
    while let Some(answer) = answers.next().await {
        match answer {
            Ok(_) => {
                rewritten += 1;
                progress.rewritten();
            }
            Err(e) if e.is_conflict() => progress.skipped(),
            Err(e) if is_transient(&e) => return Pass::NotYet(format!("a rewrite of {gvr} failed for now: {e}")),
            Err(e) => return Pass::Failed(format!("migration encountered unhandled error: {e}")),
        }
    }
    Pass::Done { rewritten }
}

/// The errors after which the same request may well succeed later (upstream's list: throttling,
/// timeouts, an unavailable or failing server, a connection that broke).
fn is_transient(e: &ApiError) -> bool {
    matches!(
        e.reason(),
        Some(
            StatusReason::TooManyRequests
                | StatusReason::ServiceUnavailable
                | StatusReason::InternalError
                | StatusReason::Timeout
        )
    )
}
