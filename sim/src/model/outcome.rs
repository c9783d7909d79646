//! What the collector leaves behind, and how two such results differ.

use super::Object;
use kube_gc::api::OwnerReference;
use std::collections::BTreeMap;

/// Every object by UID, finalizers sorted (their order is the API server's business): an object
/// absent from it was deleted, one whose references shrank was orphaned by those owners or had
/// dangling or waiting references stripped.
pub type Outcome = BTreeMap<String, Object>;

/// The outcome of `objects`, as [`Model::outcome`](super::Model::outcome) gives its own; for
/// objects read back from a cluster.
pub fn outcome_of(objects: impl IntoIterator<Item = Object>) -> Outcome {
    objects
        .into_iter()
        .map(|mut o| {
            o.finalizers.sort();
            (o.uid.clone(), o)
        })
        .collect()
}

/// Where two outcomes differ, one line per difference, `expected` first.
pub fn differences(expected: &Outcome, actual: &Outcome) -> Vec<String> {
    let mut out = Vec::new();
    for (uid, e) in expected {
        match actual.get(uid) {
            None => out.push(format!("{} ({uid}) should exist but is gone", e.display())),
            Some(a) => {
                if a.deleting != e.deleting {
                    out.push(format!(
                        "{}: deletionTimestamp should be {}",
                        e.display(),
                        if e.deleting { "set" } else { "unset" }
                    ));
                }
                if a.finalizers != e.finalizers {
                    out.push(format!(
                        "{}: finalizers should be {:?}, are {:?}",
                        e.display(),
                        e.finalizers,
                        a.finalizers
                    ));
                }
                if a.owner_references != e.owner_references {
                    out.push(format!(
                        "{}: ownerReferences should be {}, are {}",
                        e.display(),
                        show_refs(&e.owner_references),
                        show_refs(&a.owner_references)
                    ));
                }
            }
        }
    }
    for (uid, a) in actual {
        if !expected.contains_key(uid) {
            out.push(format!("{} ({uid}) should be gone but exists", a.display()));
        }
    }
    out
}

/// References in short form: `kind/name@uid` plus `+c` (controller) and `+b`/`-b` (blocking).
pub fn show_refs(refs: &[OwnerReference]) -> String {
    let shown: Vec<String> = refs
        .iter()
        .map(|r| {
            let controller = if r.controller == Some(true) { "+c" } else { "" };
            let block = match r.block_owner_deletion {
                Some(true) => "+b",
                Some(false) => "-b",
                None => "",
            };
            format!("{}/{}@{}{controller}{block}", r.kind, r.name, short_uid(&r.uid))
        })
        .collect();
    format!("[{}]", shown.join(", "))
}

/// The distinguishing tail of a UID.
pub fn short_uid(uid: &str) -> &str {
    uid.rsplit('-').next().unwrap_or(uid).trim_start_matches('0')
}
