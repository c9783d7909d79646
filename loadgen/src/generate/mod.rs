//! `loadgen generate`: the watch stream of a [`Topology`] and a seed, as the one generator
//! ([`kube_gc_sim::generate`]) yields it. This module only writes: each step becomes a watch event
//! with the next resourceVersion.
//!
//! # The stream
//!
//! 1. ADDED events for every object, in the generator's order.
//! 2. A BOOKMARK annotated `k8s.io/initial-events-end: "true"`, as a watch-list stream ends its
//!    initial listing.
//! 3. Churn: MODIFIED events on Deployment pods.
//! 4. Deletions of roots, as a watch shows them: Background as the root's DELETED event,
//!    Foreground and Orphan as the MODIFIED event that sets `deletionTimestamp` and adds the
//!    `foregroundDeletion` or `orphan` finalizer. The cascade itself is left to the collector.
//!
//! The stream is a function of the topology and the seed alone, and what the collector leaves
//! of it does not depend on timing (the generator's docs say why), so that the full replay can
//! compare the cluster with an oracle.

pub use kube_gc_sim::generate::{Amount, Preset, Topology};

use crate::stream::{StreamError, StreamWriter};
use indicatif::ProgressBar;
use kube_gc::api::{
    ObjectMeta, PartialObjectMeta, PropagationPolicy, WatchEvent, WatchEventType, FINALIZER_FOREGROUND,
    FINALIZER_ORPHAN,
};
use kube_gc_sim::generate::{GenerateError, Step};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// The annotation that marks the end of a watch-list stream's initial events.
pub const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// The deletionTimestamp of generated deletions: fixed, so streams are reproducible.
const DELETION_TIMESTAMP: &str = "2025-01-01T00:00:00Z";
/// Where generated events go.
pub trait Emit {
    /// Takes one event.
    fn emit(&mut self, event: &WatchEvent) -> Result<(), StreamError>;
}

impl Emit for StreamWriter {
    fn emit(&mut self, event: &WatchEvent) -> Result<(), StreamError> {
        self.write(event)
    }
}

impl Emit for Vec<WatchEvent> {
    fn emit(&mut self, event: &WatchEvent) -> Result<(), StreamError> {
        self.push(event.clone());
        Ok(())
    }
}

/// What a generated stream holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Objects created, by kind.
    pub objects_by_kind: BTreeMap<String, usize>,
    /// Events written, by type.
    pub events_by_type: BTreeMap<&'static str, usize>,
    /// Deletions, by policy.
    pub deletions: BTreeMap<&'static str, usize>,
    /// Special cases made, by name; fewer than asked when a namespace could not hold one.
    pub special: BTreeMap<&'static str, usize>,
}

impl Summary {
    /// Objects created.
    pub fn objects(&self) -> usize {
        self.objects_by_kind.values().sum()
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |m: Vec<(&str, usize)>| m.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ");
        let kinds = self.objects_by_kind.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        writeln!(f, "objects: {} ({})", self.objects(), list(kinds))?;
        writeln!(
            f,
            "events: {}",
            list(self.events_by_type.iter().map(|(k, v)| (*k, *v)).collect())
        )?;
        writeln!(
            f,
            "deletions: {}",
            list(self.deletions.iter().map(|(k, v)| (*k, *v)).collect())
        )?;
        write!(
            f,
            "special cases: {}",
            list(self.special.iter().map(|(k, v)| (*k, *v)).collect())
        )
    }
}

/// Writes the stream of `topology` for `seed` to `out`, ticking `progress` once per event.
pub fn generate(
    topology: &Topology,
    seed: u64,
    out: &mut impl Emit,
    progress: &ProgressBar,
) -> anyhow::Result<Summary> {
    let mut events_by_type: BTreeMap<&'static str, usize> = BTreeMap::new();
    // The first event is resourceVersion 1001, as in every stream written so far.
    let mut resource_version: u64 = 1000;
    let mut write = |event_type: WatchEventType, mut object: PartialObjectMeta| {
        resource_version += 1;
        object.metadata.resource_version = resource_version.to_string();
        *events_by_type.entry(type_name(event_type)).or_default() += 1;
        out.emit(&WatchEvent {
            event_type,
            object: Arc::new(object),
        })?;
        progress.inc(1);
        Ok::<_, StreamError>(())
    };
    let generated = kube_gc_sim::generate::generate(topology, seed, |step| match step {
        Step::Create { object, .. } => write(WatchEventType::Added, object),
        Step::Listed => write(WatchEventType::Bookmark, bookmark()),
        Step::Modify { object, .. } => write(WatchEventType::Modified, object),
        Step::Delete { policy, mut object, .. } => {
            let finalizer = match policy {
                PropagationPolicy::Background => return write(WatchEventType::Deleted, object),
                PropagationPolicy::Foreground => FINALIZER_FOREGROUND,
                PropagationPolicy::Orphan => FINALIZER_ORPHAN,
            };
            object.metadata.deletion_timestamp = Some(DELETION_TIMESTAMP.into());
            object.metadata.finalizers = vec![finalizer.into()];
            write(WatchEventType::Modified, object)
        }
    })
    .map_err(|e| match e {
        GenerateError::Topology(reason) => anyhow::Error::msg(reason),
        GenerateError::Sink(e) => anyhow::Error::new(e),
    })?;
    Ok(Summary {
        objects_by_kind: generated.objects_by_kind,
        events_by_type,
        deletions: generated.deletions,
        special: generated.special,
    })
}

/// The BOOKMARK that ends the initial listing.
fn bookmark() -> PartialObjectMeta {
    PartialObjectMeta {
        api_version: "meta.k8s.io/v1".into(),
        kind: "PartialObjectMetadata".into(),
        metadata: ObjectMeta {
            annotations: BTreeMap::from([(INITIAL_EVENTS_END.to_string(), "true".to_string())]),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// A watch event type's name on the wire.
pub(crate) fn type_name(t: WatchEventType) -> &'static str {
    match t {
        WatchEventType::Added => "ADDED",
        WatchEventType::Modified => "MODIFIED",
        WatchEventType::Deleted => "DELETED",
        WatchEventType::Bookmark => "BOOKMARK",
    }
}
