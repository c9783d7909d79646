//! What the simulated API server's audit logs say the collector did: who deleted what, when each
//! object was removed, and whether two replicas ever wrote in turns.
//!
//! A server restarted from its state file writes a new log, numbered from 1 again, so a request's
//! place in time is (incarnation, seq). An object's *removal* is the collector's last successful
//! write to it (a DELETE, or the PATCH that removed its last finalizer); the workload never
//! recreates a name, so a name stands for one object.

use super::oracle::Key;
use serde::Deserialize;
use std::collections::HashMap;
use std::path::Path;

/// One line of an audit log.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Line {
    pub seq: u64,
    pub verb: String,
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub resource: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub name: String,
    pub code: u16,
    #[serde(default)]
    pub user_agent: String,
    /// The cluster's resourceVersion once the request's writes were applied; none if it wrote
    /// nothing. Unlike `seq`, it orders writes that raced as the server applied them.
    #[serde(default)]
    pub committed_resource_version: Option<u64>,
    /// The server's incarnation: the index of the log it came from.
    #[serde(skip)]
    pub incarnation: usize,
}

impl Line {
    pub fn key(&self) -> Key {
        Key {
            group: self.group.clone(),
            resource: self.resource.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }

    pub fn when(&self) -> (usize, u64) {
        (self.incarnation, self.seq)
    }

    pub fn is_write(&self) -> bool {
        matches!(self.verb.as_str(), "patch" | "delete" | "update" | "create")
    }

    pub fn succeeded(&self) -> bool {
        (200..300).contains(&self.code)
    }

    pub fn by_collector(&self) -> bool {
        self.user_agent.contains("kube-gc/")
    }

    /// A write the server applied: it committed a resourceVersion. A request it refused (a
    /// precondition that no longer held, an object already gone) or that changed nothing wrote
    /// nothing, whoever sent it.
    pub fn wrote(&self) -> bool {
        self.is_write() && self.committed_resource_version.is_some()
    }
}

/// Every line of the logs, in order.
pub fn read(logs: &[impl AsRef<Path>]) -> Vec<Line> {
    let mut lines = Vec::new();
    for (incarnation, path) in logs.iter().enumerate() {
        let text = std::fs::read_to_string(path.as_ref()).unwrap_or_default();
        for raw in text.lines().filter(|l| !l.trim().is_empty()) {
            let mut line: Line = serde_json::from_str(raw).unwrap_or_else(|e| panic!("an audit line ({e}): {raw}"));
            line.incarnation = incarnation;
            lines.push(line);
        }
    }
    lines
}

/// When the collector removed each object: its last successful DELETE or PATCH of it, by server
/// incarnation and the resourceVersion it committed at (the log's order may differ from the
/// commits' for requests that raced). The workload's own DELETEs only mark what a finalizer holds,
/// so they are no removal.
pub fn removals(lines: &[Line]) -> HashMap<Key, (usize, u64)> {
    let mut out: HashMap<Key, (usize, u64)> = HashMap::new();
    for line in lines
        .iter()
        .filter(|l| l.succeeded() && l.by_collector() && matches!(l.verb.as_str(), "delete" | "patch"))
    {
        let Some(rv) = line.committed_resource_version else {
            continue; // wrote nothing
        };
        let at = (line.incarnation, rv);
        let last = out.entry(line.key()).or_insert(at);
        *last = (*last).max(at);
    }
    out
}

/// The collector's successful DELETEs.
pub fn collector_deletes(lines: &[Line]) -> impl Iterator<Item = &Line> {
    lines
        .iter()
        .filter(|l| l.verb == "delete" && l.succeeded() && l.by_collector())
}

/// Requests the collector sent.
pub fn collector_requests(lines: &[Line]) -> usize {
    lines.iter().filter(|l| l.by_collector()).count()
}

/// A pair of replicas whose writes interleave, if any: once a replica has written after another,
/// the other must never write again. Only applied writes count ([`Line::wrote`]): a replica
/// stopped (SIGSTOP) between its fence's check and the request leaving its socket sends that
/// request when it wakes, after its successor's writes; the server must refuse it or find it
/// changes nothing, and this is where the suite checks that it did.
pub fn interleaved_writes(lines: &[Line]) -> Option<String> {
    let writes: Vec<&Line> = lines.iter().filter(|l| l.by_collector() && l.wrote()).collect();
    interleaved(writes)
}

/// Per object, the same rule: for sharded replicas, each writing its own objects at once, whose
/// objects change hands only one way (a shard dies, or a new one takes a share).
pub fn interleaved_writes_per_object(lines: &[Line]) -> Option<String> {
    let mut by_object: std::collections::BTreeMap<Key, Vec<&Line>> = std::collections::BTreeMap::new();
    // A create names no object in its path (each replica creates its own Lease).
    for l in lines
        .iter()
        .filter(|l| l.by_collector() && l.wrote() && !l.name.is_empty())
    {
        by_object.entry(l.key()).or_default().push(l);
    }
    by_object
        .into_iter()
        .find_map(|(key, writes)| interleaved(writes).map(|why| format!("{}/{}: {why}", key.namespace, key.name)))
}

fn interleaved(writes: Vec<&Line>) -> Option<String> {
    let mut finished: Vec<&str> = Vec::new();
    let mut current: Option<&str> = None;
    for w in writes {
        let agent = w.user_agent.as_str();
        if current == Some(agent) {
            continue;
        }
        if finished.contains(&agent) {
            return Some(format!(
                "{agent} wrote again (request {:?}) after another replica had written",
                w.when()
            ));
        }
        if let Some(previous) = current {
            finished.push(previous);
        }
        current = Some(agent);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(seq: u64, agent: &str, verb: &str, code: u16, committed: Option<u64>) -> Line {
        Line {
            seq,
            verb: verb.into(),
            group: String::new(),
            resource: "configmaps".into(),
            namespace: "fs-ns-1".into(),
            name: "fs-multi-1".into(),
            code,
            user_agent: format!("kube-gc/0.1.0 ({agent})"),
            committed_resource_version: committed,
            incarnation: 0,
        }
    }

    #[test]
    fn a_request_sent_after_a_takeover_should_count_only_if_the_server_applied_it() {
        let before = [
            line(1, "a", "patch", 200, Some(10)),
            line(2, "b", "delete", 200, Some(11)),
        ];
        let refused = [line(3, "a", "patch", 404, None)];
        let unchanged = [line(3, "a", "patch", 200, None)];
        let applied = [line(3, "a", "patch", 200, Some(12))];
        for (after, interleaves) in [(&refused, false), (&unchanged, false), (&applied, true)] {
            let lines: Vec<Line> = before.iter().chain(after).cloned().collect();
            assert_eq!(
                interleaved_writes_per_object(&lines).is_some(),
                interleaves,
                "{after:?}"
            );
            assert_eq!(interleaved_writes(&lines).is_some(), interleaves, "{after:?}");
        }
    }
}
