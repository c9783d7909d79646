//! `kube-gc plan`'s side of a cascade plan ([`kube_gc::plan`]): the text of a plan, kubectl's way: a table, the
//! objects removed first in wave order and indented under the owner through which the delete
//! reaches them, then a summary of counts, writes and time.
//!
//! Invariant: [`render`] is a pure function of the answer and the write rate, so the tests read
//! the same text a user does.

use crate::server::PlanAnswer;
use kube_gc::plan::{Fate, Hold, Remover, Step};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

/// Seconds the collector needs for `answer`'s writes at `qps` writes a second, after the items
/// already in its queues (one write each); `None` without a limit.
pub fn seconds(answer: &PlanAnswer, qps: f64) -> Option<f64> {
    (qps > 0.0).then(|| (answer.plan.calls.total() + answer.queue_depth as u64) as f64 / qps)
}

/// The table and summary of `answer`, the collector writing at `qps` a second.
pub fn render(answer: &PlanAnswer, qps: f64) -> String {
    let plan = &answer.plan;
    let depth = depths(&plan.steps);
    let mut rows = vec![["WAVE".to_string(), "ACTION".into(), "OBJECT".into(), "DETAIL".into()]];
    for step in &plan.steps {
        let indent = "  ".repeat(depth.get(step.object.uid.as_str()).copied().unwrap_or(0));
        let (wave, action, detail) = describe(&step.fate);
        rows.push([wave, action.into(), format!("{indent}{}", step.object), detail]);
    }
    let mut out = String::new();
    let widths: Vec<usize> = (0..4)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    for row in &rows {
        let line: Vec<String> = (0..3).map(|c| format!("{:<w$}", row[c], w = widths[c])).collect();
        let _ = writeln!(out, "{}   {}", line.join("   "), row[3]);
    }
    out.push('\n');
    summary(&mut out, answer, qps);
    out
}

/// WAVE, ACTION and DETAIL of one fate.
fn describe(fate: &Fate) -> (String, &'static str, String) {
    match fate {
        Fate::Removed { wave, policy, by } => {
            let by = match by {
                Remover::Request => "requested",
                Remover::NamespaceController => "by the namespace controller",
                Remover::Collector => "by the collector",
            };
            (wave.to_string(), "delete", format!("{by}, {}", policy.as_str()))
        }
        Fate::Orphaned { loses } => ("-".into(), "orphan", format!("loses {}", list(loses))),
        Fate::Kept { by, loses } => (
            "-".into(),
            "keep",
            format!("kept by {}; loses {}", list(by), list(loses)),
        ),
        Fate::Held {
            why: Hold::Finalizers { finalizers },
        } => (
            "-".into(),
            "held",
            format!("deleting, held by {}", finalizers.join(", ")),
        ),
        Fate::Held {
            why: Hold::BlockingDependents { dependents },
        } => (
            "-".into(),
            "held",
            format!("deleting, waits on blocking dependents that stay: {}", list(dependents)),
        ),
        Fate::Held {
            why: Hold::Contents { left, held },
        } => (
            "-".into(),
            "held",
            format!(
                "deleting, waits for its {left} objects that stay; held by finalizers: {}",
                or_none(held)
            ),
        ),
        Fate::WaitsForPods { pods } => (
            "-".into(),
            "waits",
            format!(
                "never deleted: the namespace's pods go first, and these stay: {}",
                or_none(pods)
            ),
        ),
        Fate::Stuck { owner, why } => ("-".into(), "stuck", format!("never judged: {why} ({owner})")),
    }
}

fn list(objects: &[kube_gc::plan::ObjectRef]) -> String {
    let names: Vec<String> = objects.iter().map(ToString::to_string).collect();
    names.join(", ")
}

/// [`list`], or `none` (the count of objects that stay says the rest).
fn or_none(objects: &[kube_gc::plan::ObjectRef]) -> String {
    if objects.is_empty() {
        "none".into()
    } else {
        list(objects)
    }
}

/// How deep each step sits under the requested objects, following `via`.
fn depths(steps: &[Step]) -> HashMap<&str, usize> {
    let via: HashMap<&str, &str> = steps
        .iter()
        .filter_map(|s| Some((s.object.uid.as_str(), s.via.as_deref()?)))
        .collect();
    steps
        .iter()
        .map(|s| {
            let mut depth = 0;
            let mut at = s.object.uid.as_str();
            while let Some(owner) = via.get(at) {
                depth += 1;
                at = owner;
                if depth > steps.len() {
                    break; // a cycle of `via`; the play never makes one
                }
            }
            (s.object.uid.as_str(), depth)
        })
        .collect()
}

/// The counts by fate, by kind and by namespace, the writes and the time.
fn summary(out: &mut String, answer: &PlanAnswer, qps: f64) {
    let plan = &answer.plan;
    let mut fates: BTreeMap<&str, usize> = BTreeMap::new();
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    let mut namespaces: BTreeMap<&str, usize> = BTreeMap::new();
    for step in &plan.steps {
        *fates.entry(describe(&step.fate).1).or_default() += 1;
        if matches!(step.fate, Fate::Removed { .. }) {
            *kinds.entry(&step.object.kind).or_default() += 1;
            let namespace = step.object.namespace.as_str();
            *namespaces
                .entry(if namespace.is_empty() { "(cluster)" } else { namespace })
                .or_default() += 1;
        }
    }
    let counts = |m: &BTreeMap<&str, usize>| m.iter().map(|(k, n)| format!("{k} {n}")).collect::<Vec<_>>().join(", ");
    let _ = writeln!(
        out,
        "removed: {} in {} waves ({}); by namespace: {}",
        fates.get("delete").copied().unwrap_or(0),
        plan.waves(),
        counts(&kinds),
        counts(&namespaces)
    );
    let others =
        ["orphan", "keep", "held", "waits", "stuck"].map(|f| format!("{f} {}", fates.get(f).copied().unwrap_or(0)));
    let _ = writeln!(out, "other objects reached: {}", others.join(", "));
    let _ = writeln!(
        out,
        "collector writes: {} DELETE, {} PATCH; {} items queued before them",
        plan.calls.deletes, plan.calls.patches, answer.queue_depth
    );
    match seconds(answer, qps) {
        Some(s) => {
            let _ = writeln!(out, "time at {qps} writes/s: about {s:.1} s");
        }
        None => out.push_str("time: no write limit given\n"),
    }
    let _ = writeln!(
        out,
        "(planned on {} objects in {:.3} s)",
        answer.snapshot_objects, answer.seconds
    );
}
