//! The tree as text: a pure function of the [`Listing`], the clock and the collector's reasons,
//! so that what a person reads is tested line by line without a cluster.
//!
//! The object is the one line at the left margin. Its dependents hang below it as kubectl-tree
//! draws them (`├─`, `└─`, one level per two columns); its owners stand above it as the same tree
//! drawn upside down (`┌─` closes a level upward), so an object with two owners shows both, and an
//! owner's owners sit above it one level further in. A dependent with two owners appears under
//! each owner that is in the tree. A reference cycle is cut where it closes: the object that
//! closes it is marked `(cycle)` and not followed again.
//!
//! Columns: NAME (`Kind/name`, then `-n NAMESPACE` when the object is in another namespace than
//! the tree's), STATE ([`State`]), AGE (as kubectl rounds it: seconds below two minutes, minutes
//! below two hours, hours below two days, then days; `-` for an owner that does not exist), and
//! WHY, only when a collector answered: its reasons for each object that is being deleted or
//! misses an owner, joined by `; `.

use super::{Listing, Object, State};
use k8s_openapi::jiff::Timestamp;
use kube_gc::api::OwnerReference;
use std::collections::HashMap;

/// What to draw.
#[derive(Clone, Copy, Debug)]
pub struct View<'a> {
    /// Every object read.
    pub listing: &'a Listing,
    /// The UID of the object the tree is of; it must be in `listing`.
    pub target: &'a str,
    /// The namespace the tree was asked for: objects elsewhere have theirs shown.
    pub namespace: &'a str,
    /// The time ages count to.
    pub now: Timestamp,
    /// The collector's reasons by UID, or `None` when no collector answered (no WHY column).
    pub why: Option<&'a HashMap<String, Vec<String>>>,
}

/// One line before the columns are aligned.
struct Row {
    /// Tree glyphs then `Kind/name`.
    name: String,
    state: String,
    age: String,
    why: String,
}

/// The tree of `view`, one line per row with a header line, columns aligned, no trailing spaces.
/// An empty string when the target is not in the listing.
pub fn render(view: &View<'_>) -> String {
    let Some(target) = view.listing.get(view.target) else {
        return String::new();
    };
    let mut rows = Vec::new();
    let mut path = vec![target.uid.as_str()];
    view.owners(target, "", &mut path, &mut rows);
    // The owners were drawn top-down from the object; upside down they stand above it.
    rows.reverse();
    for row in &mut rows {
        row.name = row.name.replace('└', "┌");
    }
    rows.push(view.row("", target, false));
    view.dependents(target, "", &mut path, &mut rows);
    table(&rows, view.why.is_some())
}

impl<'a> View<'a> {
    /// Rows of `object`'s owners, theirs and so on, drawn as a tree growing downward.
    fn owners(&self, object: &'a Object, prefix: &str, path: &mut Vec<&'a str>, rows: &mut Vec<Row>) {
        let last = object.owners.len().saturating_sub(1);
        for (i, reference) in object.owners.iter().enumerate() {
            let (glyph, below) = glyphs(prefix, i == last);
            let Some(owner) = self.listing.get(&reference.uid) else {
                rows.push(absent(&glyph, reference));
                continue;
            };
            let cycle = path.contains(&owner.uid.as_str());
            rows.push(self.row(&glyph, owner, cycle));
            if !cycle {
                path.push(&owner.uid);
                self.owners(owner, &below, path, rows);
                path.pop();
            }
        }
    }

    /// Rows of `object`'s dependents, theirs and so on.
    fn dependents(&self, object: &'a Object, prefix: &str, path: &mut Vec<&'a str>, rows: &mut Vec<Row>) {
        let dependents = self.listing.dependents_of(&object.uid);
        let last = dependents.len().saturating_sub(1);
        for (i, dependent) in dependents.into_iter().enumerate() {
            let (glyph, below) = glyphs(prefix, i == last);
            let cycle = path.contains(&dependent.uid.as_str());
            rows.push(self.row(&glyph, dependent, cycle));
            if !cycle {
                path.push(&dependent.uid);
                self.dependents(dependent, &below, path, rows);
                path.pop();
            }
        }
    }

    fn row(&self, glyph: &str, object: &Object, cycle: bool) -> Row {
        let mut name = format!("{glyph}{}/{}", object.kind, object.name);
        if !object.namespace.is_empty() && object.namespace != self.namespace {
            name.push_str(" -n ");
            name.push_str(&object.namespace);
        }
        if cycle {
            name.push_str(" (cycle)");
        }
        let state = self.listing.state(object);
        let explained = state != State::Present || self.listing.misses_an_owner(object);
        let why = match self.why.and_then(|why| why.get(&object.uid)) {
            Some(reasons) if explained => reasons.join("; "),
            _ => String::new(),
        };
        Row {
            name,
            state: state.to_string(),
            age: object
                .created
                .as_deref()
                .map_or_else(|| "-".to_string(), |c| age(c, self.now)),
            why,
        }
    }
}

/// The glyph of a child of a row drawn at `prefix`, and the prefix of that child's own children.
fn glyphs(prefix: &str, last: bool) -> (String, String) {
    if last {
        (format!("{prefix}└─"), format!("{prefix}  "))
    } else {
        (format!("{prefix}├─"), format!("{prefix}│ "))
    }
}

/// The row of an owner that does not exist, from the reference to it.
fn absent(glyph: &str, reference: &OwnerReference) -> Row {
    Row {
        name: format!("{glyph}{}/{}", reference.kind, reference.name),
        state: State::Absent.to_string(),
        age: "-".to_string(),
        why: String::new(),
    }
}

/// How long ago `created` was, rounded down as kubectl's AGE column does; `?` for a timestamp that
/// does not parse.
fn age(created: &str, now: Timestamp) -> String {
    let Ok(created) = created.parse::<Timestamp>() else {
        return "?".to_string();
    };
    let seconds = (now.as_second() - created.as_second()).max(0);
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 2 * 3600 => format!("{}m", s / 60),
        s if s < 2 * 86_400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// The rows as aligned columns under a header.
fn table(rows: &[Row], with_why: bool) -> String {
    let width = |cell: fn(&Row) -> &str, header: &str| {
        rows.iter()
            .map(|r| cell(r).chars().count())
            .chain([header.len()])
            .max()
            .unwrap_or(0)
    };
    let name_width = width(|r| &r.name, "NAME");
    let state_width = width(|r| &r.state, "STATE");
    let age_width = width(|r| &r.age, "AGE");
    let mut out = String::new();
    let mut line = |name: &str, state: &str, age: &str, why: &str| {
        let mut text = format!("{name:<name_width$}  {state:<state_width$}  {age:<age_width$}");
        if with_why {
            text.push_str("  ");
            text.push_str(why);
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line("NAME", "STATE", "AGE", "WHY");
    for r in rows {
        line(&r.name, &r.state, &r.age, &r.why);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_gc::api::{FINALIZER_FOREGROUND, FINALIZER_ORPHAN};

    const NOW: &str = "2026-01-01T12:00:00Z";

    fn object(kind: &str, name: &str, uid: &str, owners: &[(&str, &str, bool)]) -> Object {
        Object {
            api_version: "v1".into(),
            uid: uid.into(),
            kind: kind.into(),
            namespace: "shop".into(),
            name: name.into(),
            created: Some("2026-01-01T11:00:00Z".into()),
            deleting: false,
            waited: false,
            finalizers: Vec::new(),
            owners: owners
                .iter()
                .map(|(kind, uid, blocks)| OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: kind.to_string(),
                    name: format!("{}-name", uid),
                    uid: uid.to_string(),
                    controller: Some(true),
                    block_owner_deletion: Some(*blocks),
                })
                .collect(),
        }
    }

    fn deleting(mut o: Object, finalizers: &[&str]) -> Object {
        o.deleting = true;
        o.finalizers = finalizers.iter().map(|f| f.to_string()).collect();
        o
    }

    fn draw(listing: &Listing, target: &str, why: Option<&HashMap<String, Vec<String>>>) -> String {
        render(&View {
            listing,
            target,
            namespace: "shop",
            now: NOW.parse().unwrap(),
            why,
        })
    }

    /// A Deployment, its ReplicaSet and three Pods, one of which also names a ConfigMap and an
    /// owner that does not exist.
    fn shop() -> Listing {
        Listing::new([
            object("Deployment", "web", "d", &[]),
            object("ReplicaSet", "web-1", "rs", &[("Deployment", "d", true)]),
            object("Pod", "web-1-a", "pa", &[("ReplicaSet", "rs", true)]),
            object(
                "Pod",
                "web-1-b",
                "pb",
                &[("ReplicaSet", "rs", true), ("ConfigMap", "cm", false)],
            ),
            object(
                "Pod",
                "web-1-c",
                "pc",
                &[("ReplicaSet", "rs", true), ("ReplicaSet", "gone", false)],
            ),
            object("ConfigMap", "settings", "cm", &[]),
            object("Pod", "unrelated", "pu", &[]),
        ])
    }

    #[test]
    fn render_should_draw_dependents_below_the_object() {
        let expected = "\
NAME                STATE    AGE
Deployment/web      present  60m
└─ReplicaSet/web-1  present  60m
  ├─Pod/web-1-a     present  60m
  ├─Pod/web-1-b     present  60m
  └─Pod/web-1-c     present  60m
";
        assert_eq!(draw(&shop(), "d", None), expected);
    }

    #[test]
    fn render_should_draw_owners_above_the_object_upside_down() {
        let expected = "\
NAME                    STATE    AGE
┌─ReplicaSet/gone-name  absent   -
│ ┌─Deployment/web      present  60m
├─ReplicaSet/web-1      present  60m
Pod/web-1-c             present  60m
";
        assert_eq!(draw(&shop(), "pc", None), expected);
        let two_owners = draw(&shop(), "pb", None);
        let names: Vec<&str> = two_owners.lines().map(|l| l.split("  ").next().unwrap()).collect();
        assert_eq!(
            names,
            [
                "NAME",
                "┌─ConfigMap/settings",
                "│ ┌─Deployment/web",
                "├─ReplicaSet/web-1",
                "Pod/web-1-b"
            ]
        );
    }

    #[test]
    fn render_should_show_each_deletion_state() {
        let listing = Listing::new([
            deleting(object("Deployment", "fg", "d1", &[]), &[FINALIZER_FOREGROUND]),
            object("ReplicaSet", "fg-1", "r1", &[("Deployment", "d1", true)]),
            object("ReplicaSet", "fg-2", "r2", &[("Deployment", "d1", true)]),
            object("ConfigMap", "fg-3", "c1", &[("Deployment", "d1", false)]),
            deleting(object("Deployment", "or", "d2", &[]), &[FINALIZER_ORPHAN]),
            deleting(object("Deployment", "bg", "d3", &[]), &["example.com/hold"]),
            deleting(object("Deployment", "done", "d4", &[]), &[FINALIZER_FOREGROUND]),
        ]);
        let state = |uid: &str| listing.state(listing.get(uid).unwrap()).to_string();
        assert_eq!(state("d1"), "waiting on 2 dependents (foreground)");
        assert_eq!(state("d2"), "being deleted (orphan)");
        assert_eq!(state("d3"), "being deleted");
        assert_eq!(state("d4"), "being deleted (foreground)");
        assert_eq!(state("r1"), "present");
    }

    #[test]
    fn render_should_show_the_collectors_reasons_only_where_they_explain_something() {
        let listing = Listing::new([
            deleting(object("Deployment", "web", "d", &[]), &[FINALIZER_FOREGROUND]),
            object(
                "ReplicaSet",
                "web-1",
                "rs",
                &[("Deployment", "d", true), ("Job", "gone", false)],
            ),
            object("ConfigMap", "web-cfg", "cm", &[("Deployment", "d", false)]),
        ]);
        let why: HashMap<String, Vec<String>> = [
            ("d", vec!["being deleted in the foreground", "second reason"]),
            ("rs", vec!["has live owner(s): web"]),
            ("cm", vec!["has live owner(s): web"]),
        ]
        .into_iter()
        .map(|(uid, reasons)| (uid.to_string(), reasons.into_iter().map(String::from).collect()))
        .collect();
        let expected = "\
NAME                 STATE                                AGE  WHY
Deployment/web       waiting on 1 dependent (foreground)  60m  being deleted in the foreground; second reason
├─ConfigMap/web-cfg  present                              60m
└─ReplicaSet/web-1   present                              60m  has live owner(s): web
";
        assert_eq!(draw(&listing, "d", Some(&why)), expected);
    }

    #[test]
    fn render_should_name_another_namespace_and_cut_cycles() {
        let mut elsewhere = object("ConfigMap", "copy", "x", &[("ConfigMap", "b", false)]);
        elsewhere.namespace = "other".into();
        let mut cluster_scoped = object("Fleet", "f", "f", &[]);
        cluster_scoped.namespace = String::new();
        let listing = Listing::new([
            object(
                "ConfigMap",
                "a",
                "a",
                &[("ConfigMap", "b", false), ("Fleet", "f", false)],
            ),
            object("ConfigMap", "b", "b", &[("ConfigMap", "a", false)]),
            elsewhere,
            cluster_scoped,
        ]);
        let expected = "\
NAME                         STATE    AGE
┌─Fleet/f                    present  60m
│ ┌─ConfigMap/a (cycle)      present  60m
├─ConfigMap/b                present  60m
ConfigMap/a                  present  60m
└─ConfigMap/b                present  60m
  ├─ConfigMap/copy -n other  present  60m
  └─ConfigMap/a (cycle)      present  60m
";
        assert_eq!(draw(&listing, "a", None), expected);
    }

    #[test]
    fn age_should_round_down_as_kubectl_does() {
        let now: Timestamp = NOW.parse().unwrap();
        assert_eq!(age("2026-01-01T11:59:01Z", now), "59s");
        assert_eq!(age("2026-01-01T11:58:01Z", now), "119s");
        assert_eq!(age("2026-01-01T11:58:00Z", now), "2m");
        assert_eq!(age("2026-01-01T10:00:01Z", now), "119m");
        assert_eq!(age("2025-12-30T12:00:01Z", now), "47h");
        assert_eq!(age("2025-12-01T12:00:00Z", now), "31d");
        assert_eq!(age("2026-01-01T12:00:05Z", now), "0s", "a clock behind the server's");
        assert_eq!(age("yesterday", now), "?");
    }
}
