//! `kube-gc shadow-report`: a shadow's decisions against what the live collector did.
//!
//! The shadow's journal holds both sides: its own decisions ([`Source::DryRun`]) and the
//! collector writes its watches showed ([`Source::Observed`], see [`super::witness`]). Each side
//! is reduced to the set of its keys ([`Entry::key`]: object, action, and the policy, finalizer
//! or refs), the first line of each key kept as its example, since a shadow decides the same
//! write again each time the object comes back to its queue. Then:
//!
//! - **agreed**: both sides hold the key;
//! - **missed by the shadow**: the live collector wrote it, the shadow never decided it;
//! - **done only by the shadow**: the shadow decided it, no collector was seen writing it.
//!
//! An observed deletion of an object whose owner still looked solid
//! ([`Entry::is_collector_write`] false) agrees with a decision of the shadow's, but is never
//! counted as missed: it may be a user's deletion, or a collector's whose owner's event the
//! shadow had not applied yet.
//!
//! A comparison made while the live collector is still at work lists its pending writes as
//! done only by the shadow; compare once the cluster is quiet. A shadow slower than the live
//! collector may find a write already made when it comes to decide it, and then decides
//! nothing: that write is listed as missed by the shadow. Upstream's collector reads the object
//! and its owners live before each write, so a shadow next to it is normally the faster.

use super::{Entry, Source};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The comparison; each list ordered by object UID.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Writes both sides made: the shadow's line of each.
    pub agreed: Vec<Entry>,
    /// Writes the live collector made that the shadow did not decide: the observed lines.
    pub missed_by_shadow: Vec<Entry>,
    /// Writes the shadow decided that no collector made: the shadow's lines.
    pub done_only_by_shadow: Vec<Entry>,
}

impl Report {
    /// Compares the two sides of a shadow's journal (module docs).
    pub fn compare(entries: &[Entry]) -> Report {
        let decided = first_by_key(entries, |e| e.source == Source::DryRun);
        let mut observed = first_by_key(entries, |e| e.source == Source::Observed);
        let mut report = Report::default();
        for (key, entry) in decided {
            if observed.remove(&key).is_some() {
                report.agreed.push(entry);
            } else {
                report.done_only_by_shadow.push(entry);
            }
        }
        report.missed_by_shadow = observed.into_values().filter(Entry::is_collector_write).collect();
        report
    }

    /// True when the two sides made exactly the same writes.
    pub fn agrees(&self) -> bool {
        self.missed_by_shadow.is_empty() && self.done_only_by_shadow.is_empty()
    }

    /// The report as text: the counts, then each difference with its object and reason.
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "{} agreed, {} missed by the shadow, {} done only by the shadow\n",
            self.agreed.len(),
            self.missed_by_shadow.len(),
            self.done_only_by_shadow.len()
        );
        for (title, entries) in [
            (
                "missed by the shadow (the live collector made these writes)",
                &self.missed_by_shadow,
            ),
            (
                "done only by the shadow (no collector made these writes)",
                &self.done_only_by_shadow,
            ),
        ] {
            if !entries.is_empty() {
                let _ = writeln!(out, "\n{title}:");
                for entry in entries {
                    let _ = writeln!(out, "  {}", describe(entry));
                }
            }
        }
        out
    }
}

/// One line of a difference: action, detail, object, reason, owners.
pub fn describe(entry: &Entry) -> String {
    let mut line = entry.action.as_str().to_string();
    if let Some(policy) = entry.policy {
        let _ = write!(line, " ({})", policy.as_str());
    }
    if let Some(finalizer) = &entry.finalizer {
        let _ = write!(line, " {finalizer}");
    }
    let _ = write!(line, " {}: {}", entry.object, entry.reason);
    if !entry.owners.is_empty() {
        let owners: Vec<String> = entry
            .owners
            .iter()
            .map(|o| {
                format!(
                    "{} {} {} via {}",
                    o.kind,
                    o.name,
                    wire_name(&o.state),
                    wire_name(&o.seen)
                )
            })
            .collect();
        let _ = write!(line, "; owners: {}", owners.join(", "));
    }
    line
}

/// A unit variant's name as the journal writes it (`absent-owner-cache`).
fn wire_name(value: &impl Serialize) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

type Key = (String, super::Action, String);

fn first_by_key(entries: &[Entry], keep: impl Fn(&Entry) -> bool) -> BTreeMap<Key, Entry> {
    let mut first = BTreeMap::new();
    for entry in entries.iter().filter(|e| keep(e)) {
        first.entry(entry.key()).or_insert_with(|| entry.clone());
    }
    first
}
