//! A dump is a function of the nodes it selects alone: nodes sorted by UID and edges by
//! (dependent, owner), so the same graph always gives the same bytes (spec §8).
//!
//! [`to_dot`] writes the document KCM serves at `/debug/controllers/garbagecollector/graph`, byte
//! for byte; [`to_json`] gives the same selection with the full owner references. Both read the
//! graph without a lock, like every reader, so a dump taken while builders write may mix moments.
//!
//! The selection is the whole graph, or, given UIDs, their transitive closure over owners and
//! dependents (UIDs not in the graph are skipped). In DOT, nodes with neither owners nor
//! dependents are left out, and an owner the graph lacks becomes a vertex marked `missing`.

use super::{Graph, Handle, Node, OwnerRef, Uid};
use crate::api::split_api_version;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// The selected part of `graph` as a Graphviz DOT document; all of it when `uids` is empty.
pub fn to_dot(graph: &Graph, uids: &[Uid]) -> String {
    let (vertices, edges) = layout(&select(graph, uids));
    let mut out = String::from("strict digraph full {\n");
    if !vertices.is_empty() {
        out.push_str("  // Node definitions.\n");
        for vertex in vertices.values() {
            vertex.write_dot(&mut out);
        }
    }
    if !edges.is_empty() {
        out.push_str("  // Edge definitions.\n");
        for (dependent, owner) in &edges {
            out.push_str("  ");
            quote_into(&mut out, &dependent.to_string());
            out.push_str(" -> ");
            quote_into(&mut out, &owner.to_string());
            out.push_str(";\n");
        }
    }
    out.push_str("}\n");
    out
}

/// The selected part of `graph` as `{"nodes": [...]}`, one object per node sorted by UID, with
/// its identity, flags, full owner references and sorted dependent UIDs. Unlike the DOT form it
/// keeps nodes without owners or dependents, and has no vertices for missing owners.
pub fn to_json(graph: &Graph, uids: &[Uid]) -> Value {
    let nodes: Vec<Value> = select(graph, uids).values().map(|node| node_json(node)).collect();
    json!({ "nodes": nodes })
}

fn node_json(node: &Node) -> Value {
    let id = node.identity();
    // A struct of strings and booleans always serializes; the fallback is unreachable.
    let owners: Vec<Value> = node
        .owners()
        .iter()
        .map(|r| serde_json::to_value(r.to_wire()).unwrap_or_default())
        .collect();
    let mut dependents: Vec<Uid> = node.dependents().iter().map(|d| d.identity().uid.clone()).collect();
    dependents.sort();
    json!({
        "uid": id.uid.to_string(),
        "apiVersion": id.api_version().as_str(),
        "kind": id.kind().as_str(),
        "namespace": id.namespace().as_str(),
        "name": id.name.to_string(),
        "virtual": node.is_virtual(),
        "beingDeleted": node.is_being_deleted(),
        "deletingDependents": node.is_deleting_dependents(),
        "owners": owners,
        "dependents": dependents.iter().map(ToString::to_string).collect::<Vec<_>>(),
    })
}

/// The nodes to dump, by UID: every node when `uids` is empty, else the closure of `uids` over
/// owner references and dependents (upstream's `toDOTNodesAndEdgesForObj`).
fn select(graph: &Graph, uids: &[Uid]) -> BTreeMap<Uid, Handle> {
    if uids.is_empty() {
        return graph
            .handles()
            .into_iter()
            .map(|h| (h.identity().uid.clone(), h))
            .collect();
    }
    let mut selected = BTreeMap::new();
    let mut pending = uids.to_vec();
    while let Some(uid) = pending.pop() {
        if selected.contains_key(&uid) {
            continue;
        }
        let Some(node) = graph.get(&uid) else {
            continue;
        };
        node.with_owners(|refs| pending.extend(refs.iter().map(|r| r.uid.clone())));
        pending.extend(node.dependents().iter().map(|d| d.identity().uid.clone()));
        selected.insert(uid, node);
    }
    selected
}

/// The DOT vertices and (dependent, owner) edges of the selected nodes.
fn layout(selected: &BTreeMap<Uid, Handle>) -> (BTreeMap<Uid, Vertex>, BTreeSet<(Uid, Uid)>) {
    let mut vertices: BTreeMap<Uid, Vertex> = selected
        .iter()
        .filter(|(_, node)| node.dependents_len() > 0 || node.with_owners(|refs| !refs.is_empty()))
        .map(|(uid, node)| (uid.clone(), Vertex::observed(node)))
        .collect();
    // A set, because the graph is a strict digraph: two refs to one owner are one edge.
    let mut edges = BTreeSet::new();
    for (uid, node) in selected {
        for owner in node.owners() {
            // Upstream files the synthetic vertex under the *dependent's* UID, so a second
            // dependent of the same missing owner adds a duplicate vertex and later edges can leave
            // from the wrong vertex. Filing it under the owner's UID is the evident intent.
            vertices
                .entry(owner.uid.clone())
                .or_insert_with(|| Vertex::missing(&owner));
            edges.insert((uid.clone(), owner.uid));
        }
    }
    (vertices, edges)
}

/// One DOT vertex: a node of the graph, or an owner the graph lacks.
struct Vertex {
    uid: String,
    group: String,
    version: String,
    kind: String,
    namespace: String,
    name: String,
    missing: bool,
    being_deleted: bool,
    deleting_dependents: bool,
    is_virtual: bool,
}

impl Vertex {
    fn observed(node: &Node) -> Vertex {
        let id = node.identity();
        let (group, version) = group_version(id.api_version().as_str());
        Vertex {
            uid: id.uid.to_string(),
            group: group.to_string(),
            version: version.to_string(),
            kind: id.kind().to_string(),
            namespace: id.namespace().to_string(),
            name: id.name.to_string(),
            missing: false,
            being_deleted: node.is_being_deleted(),
            deleting_dependents: node.is_deleting_dependents(),
            is_virtual: node.is_virtual(),
        }
    }

    /// An owner the graph lacks: its ref's coordinates, and no namespace since refs carry none.
    fn missing(owner: &OwnerRef) -> Vertex {
        let (group, version) = group_version(owner.api_version().as_str());
        Vertex {
            uid: owner.uid.to_string(),
            group: group.to_string(),
            version: version.to_string(),
            kind: owner.kind().to_string(),
            namespace: String::new(),
            name: owner.name.to_string(),
            missing: true,
            being_deleted: false,
            deleting_dependents: false,
            is_virtual: false,
        }
    }

    /// `uid=…\nnamespace=…\n<Kind>.<version>[.<group>]/<name>\n`, then the conditions that hold.
    fn label(&self) -> String {
        let mut label = format!(
            "uid={}\nnamespace={}\n{}.{}",
            self.uid, self.namespace, self.kind, self.version
        );
        if !self.group.is_empty() {
            label.push('.');
            label.push_str(&self.group);
        }
        label.push('/');
        label.push_str(&self.name);
        label.push('\n');
        let conditions: Vec<&str> = [
            (self.being_deleted, "beingDeleted"),
            (self.deleting_dependents, "deletingDependents"),
            (self.is_virtual, "virtual"),
            (self.missing, "missingFromGraph"),
        ]
        .into_iter()
        .filter_map(|(holds, name)| holds.then_some(name))
        .collect();
        if !conditions.is_empty() {
            label.push_str(&conditions.join(","));
            label.push('\n');
        }
        label
    }

    fn write_dot(&self, out: &mut String) {
        let flag = |b: bool| if b { "true" } else { "false" };
        let label = self.label();
        let attributes = [
            ("label", label.as_str()),
            ("group", &self.group),
            ("version", &self.version),
            ("kind", &self.kind),
            ("namespace", &self.namespace),
            ("name", &self.name),
            ("uid", &self.uid),
            ("missing", flag(self.missing)),
            ("beingDeleted", flag(self.being_deleted)),
            ("deletingDependents", flag(self.deleting_dependents)),
            ("virtual", flag(self.is_virtual)),
        ];
        out.push_str("  ");
        quote_into(out, &self.uid);
        out.push_str(" [\n");
        for (key, value) in attributes {
            out.push_str("    ");
            out.push_str(key);
            out.push('=');
            quote_into(out, value);
            out.push('\n');
        }
        out.push_str("  ];\n");
    }
}

/// Group and version as `schema.ParseGroupVersion` reads them: `v1` is the core group, `g/v`
/// splits, and a value with more than one slash is malformed and dumps as empty.
fn group_version(api_version: &str) -> (&str, &str) {
    match split_api_version(api_version) {
        (_, version) if version.contains('/') => ("", ""),
        parts => parts,
    }
}

/// Appends `s` quoted as Go's `%q` (`strconv.Quote`) does: `"` and `\` escaped, the C escapes
/// for their control characters, `\xNN`, `\uNNNN` or `\UNNNNNNNN` for anything else unprintable,
/// and printable Unicode as is.
fn quote_into(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if is_printable(c) => out.push(c),
            // Writing into a String cannot fail.
            c if c < ' ' || c == '\u{7f}' => drop(write!(out, "\\x{:02x}", u32::from(c))),
            c if u32::from(c) < 0x1_0000 => drop(write!(out, "\\u{:04x}", u32::from(c))),
            c => drop(write!(out, "\\U{:08x}", u32::from(c))),
        }
    }
    out.push('"');
}

/// Go's `strconv.IsPrint`: letters, marks, numbers, punctuation, symbols and the ASCII space.
/// Rust has no general-category lookup, so this rules out what it can name: controls, every
/// space but U+0020, format characters and private use. Unassigned code points, which Go also
/// escapes, pass as printable; which ones are unassigned depends on the Unicode version anyway.
fn is_printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    let code = u32::from(c);
    !(c.is_control()
        || c.is_whitespace()
        || FORMAT.iter().any(|&(lo, hi)| (lo..=hi).contains(&code))
        || PRIVATE_USE.iter().any(|&(lo, hi)| (lo..=hi).contains(&code)))
}

/// The format characters (general category Cf) of Unicode 15.
const FORMAT: [(u32, u32); 21] = [
    (0x00AD, 0x00AD),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x180E, 0x180E),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x2064),
    (0x2066, 0x206F),
    (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
];

/// The private-use areas (general category Co).
const PRIVATE_USE: [(u32, u32); 3] = [(0xE000, 0xF8FF), (0xF_0000, 0xF_FFFD), (0x10_0000, 0x10_FFFD)];

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;
    use crate::graph::{GraphWriter, Identity, OwnerRefs, Sym, TypeMeta};

    /// Builds graphs by hand: identities with explicit coordinates, and owner references that
    /// copy the owner's identity.
    struct Builder {
        graph: GraphWriter,
    }

    impl Builder {
        fn new() -> Self {
            Builder {
                graph: GraphWriter::new(),
            }
        }

        fn identity(&self, api_version: &str, kind: &str, namespace: &str, name: &str, uid: &str) -> Identity {
            Identity::new(
                TypeMeta::new(Sym::new(api_version), Sym::new(kind)),
                name,
                Uid::parse(uid),
                Sym::new(namespace),
            )
        }

        fn bare(&self, uid: &str) -> Identity {
            self.identity("", "", "", "", uid)
        }

        /// Inserts `id` owned by `owners` and registers it with those owners already present.
        fn node(&self, id: Identity, owners: &[&Identity]) -> Handle {
            let refs: Vec<OwnerRef> = owners.iter().map(|o| owner_ref(o)).collect();
            let handle = Handle::new(id, refs.as_slice(), false);
            for owner in owners {
                if let Some(owner) = self.graph.get(&owner.uid) {
                    owner.add_dependent(handle.clone());
                }
            }
            self.graph.insert(handle.clone());
            handle
        }
    }

    fn owner_ref(owner: &Identity) -> OwnerRef {
        OwnerRef::new(
            TypeMeta::new(owner.api_version().clone(), owner.kind().clone()),
            owner.name.to_name(),
            owner.uid.clone(),
            Some(true),
            None,
        )
    }

    /// Upstream's fixture: alpha is owned by bravo and charlie, delta by foxtrot, foxtrot by golf;
    /// echo has no references at all. Owners go in first so they learn their dependents.
    fn two_chains() -> Builder {
        let b = Builder::new();
        let [alpha, bravo, charlie, delta, echo, foxtrot, golf] =
            ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf"].map(|uid| b.bare(uid));
        b.node(bravo.clone(), &[]);
        b.node(charlie.clone(), &[]);
        b.node(alpha, &[&bravo, &charlie]);
        b.node(golf.clone(), &[]);
        b.node(foxtrot.clone(), &[&golf]);
        b.node(delta, &[&foxtrot]);
        b.node(echo, &[]);
        b
    }

    fn uids(list: &[&str]) -> Vec<Uid> {
        list.iter().map(|u| Uid::parse(u)).collect()
    }

    fn json_uids(graph: &Graph, selection: &[&str]) -> Vec<String> {
        let dump = to_json(graph, &uids(selection));
        let nodes = dump["nodes"].as_array().cloned().unwrap_or_default();
        nodes
            .iter()
            .filter_map(|n| n["uid"].as_str().map(String::from))
            .collect()
    }

    /// Upstream's escaping fixture: quotes, a backslash, brackets, accents and an emoji in the
    /// identity of a node whose owner is observed.
    fn escaping() -> Builder {
        let b = Builder::new();
        let i18n = "Iñtërnâtiônàlizætiøn,🐹";
        let ref1 = b.identity(
            "ref1group/version",
            &format!("ref1kind-{i18n}"),
            "ref1ns",
            &format!("ref1name-{i18n}"),
            &format!("ref1-[]\"\\{i18n}"),
        );
        let ref2 = b.identity("ref2group/version", "ref2kind-", "ref2ns", "ref2name-", "ref2-");
        b.node(ref2.clone(), &[]);
        b.node(ref1, &[&ref2]);
        b
    }

    /// Item 44: each fixture's DOT dump is its golden file, byte for byte (the simple one drops
    /// echo, which has no reference at all).
    #[test]
    fn s44_dot_dumps_should_match_the_golden_files() {
        type Case = (&'static str, fn() -> Builder, &'static str);
        let cases: [Case; 3] = [
            ("empty", Builder::new, include_str!("../../tests/golden/empty.dot")),
            ("simple", two_chains, include_str!("../../tests/golden/simple.dot")),
            ("escaping", escaping, include_str!("../../tests/golden/escaping.dot")),
        ];
        for (name, fixture, golden) in cases {
            assert_eq!(to_dot(&fixture().graph, &[]), golden, "{name}.dot");
        }
    }

    #[test]
    fn dot_should_draw_a_missing_owner_once_under_its_own_uid() {
        let b = Builder::new();
        let owner = b.identity("apps/v1", "ReplicaSet", "ns", "rs", "owner");
        b.node(b.identity("v1", "Pod", "ns", "a", "pod-a"), &[&owner]);
        b.node(b.identity("v1", "Pod", "ns", "b", "pod-b"), &[&owner]);
        let dot = to_dot(&b.graph, &[]);

        let missing = concat!(
            "  \"owner\" [\n",
            "    label=\"uid=owner\\nnamespace=\\nReplicaSet.v1.apps/rs\\nmissingFromGraph\\n\"\n",
            "    group=\"apps\"\n",
            "    version=\"v1\"\n",
            "    kind=\"ReplicaSet\"\n",
            "    namespace=\"\"\n",
            "    name=\"rs\"\n",
            "    uid=\"owner\"\n",
            "    missing=\"true\"\n",
            "    beingDeleted=\"false\"\n",
            "    deletingDependents=\"false\"\n",
            "    virtual=\"false\"\n",
            "  ];\n",
        );
        assert_eq!(dot.matches(missing).count(), 1, "{dot}");
        assert_eq!(dot.matches(" [\n").count(), 3, "two pods and one missing owner: {dot}");
        assert!(
            dot.ends_with("  \"pod-a\" -> \"owner\";\n  \"pod-b\" -> \"owner\";\n}\n"),
            "{dot}"
        );
    }

    #[test]
    fn dot_label_should_list_the_conditions_that_hold() {
        let b = Builder::new();
        let owner = b.node(b.identity("v1", "Secret", "ns", "s", "owner"), &[]);
        b.node(b.identity("v1", "Pod", "ns", "p", "pod"), &[owner.identity()]);
        owner.mark_deleting_dependents();
        let virtual_owner = Handle::new(
            b.identity("v1", "ConfigMap", "ns", "c", "virtual"),
            OwnerRefs::NONE,
            true,
        );
        b.graph.insert(virtual_owner.clone());
        b.node(b.identity("v1", "Pod", "ns", "q", "pod2"), &[virtual_owner.identity()]);

        let dot = to_dot(&b.graph, &[]);
        assert!(
            dot.contains("Secret.v1/s\\nbeingDeleted,deletingDependents\\n\""),
            "{dot}"
        );
        assert!(dot.contains("ConfigMap.v1/c\\nvirtual\\n\""), "{dot}");
        assert!(dot.contains("    virtual=\"true\"\n"), "{dot}");
    }

    #[test]
    fn selection_should_be_the_closure_over_owners_and_dependents() {
        let b = two_chains();
        let all = ["alpha", "bravo", "charlie", "delta", "foxtrot", "golf"];
        assert_eq!(json_uids(&b.graph, &["bravo"]), ["alpha", "bravo", "charlie"]);
        assert_eq!(json_uids(&b.graph, &["golf"]), ["delta", "foxtrot", "golf"]);
        assert_eq!(json_uids(&b.graph, &["delta"]), ["delta", "foxtrot", "golf"]);
        assert_eq!(json_uids(&b.graph, &["delta", "charlie"]), all);
        assert_eq!(
            json_uids(&b.graph, &["no-such-uid", "golf"]),
            ["delta", "foxtrot", "golf"]
        );
        assert!(json_uids(&b.graph, &["no-such-uid"]).is_empty());
    }

    #[test]
    fn dot_selection_should_skip_unknown_uids_and_unreferenced_nodes() {
        let b = two_chains();
        let empty = include_str!("../../tests/golden/empty.dot");
        assert_eq!(to_dot(&b.graph, &uids(&["no-such-uid"])), empty);
        assert_eq!(to_dot(&b.graph, &uids(&["echo"])), empty);
        let chain = to_dot(&b.graph, &uids(&["golf"]));
        assert!(
            chain.contains("  \"delta\" -> \"foxtrot\";\n  \"foxtrot\" -> \"golf\";\n}"),
            "{chain}"
        );
        assert!(!chain.contains("alpha"), "{chain}");
    }

    #[test]
    fn json_should_describe_identity_flags_owners_and_sorted_dependents() {
        let b = Builder::new();
        let owner = b.node(b.identity("apps/v1", "ReplicaSet", "ns", "rs", "owner"), &[]);
        b.node(b.identity("v1", "Pod", "ns", "z", "pod-z"), &[owner.identity()]);
        b.node(b.identity("v1", "Pod", "ns", "a", "pod-a"), &[owner.identity()]);
        let deleting = crate::graph::Observation {
            being_deleted: true,
            ..Default::default()
        };
        owner.observe(None, deleting);

        let dump = to_json(&b.graph, &uids(&["owner"]));
        assert_eq!(
            dump["nodes"][0],
            json!({
                "uid": "owner", "apiVersion": "apps/v1", "kind": "ReplicaSet", "namespace": "ns",
                "name": "rs", "virtual": false, "beingDeleted": true, "deletingDependents": false,
                "owners": [], "dependents": ["pod-a", "pod-z"],
            })
        );
        assert_eq!(
            dump["nodes"][1]["owners"],
            json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "owner", "controller": true}])
        );
    }

    #[test]
    fn quote_should_escape_like_go() {
        let cases = [
            ("plain", r#""plain""#),
            ("a\"b\\c", r#""a\"b\\c""#),
            (
                "line\nbreak\ttab\r\u{7}\u{8}\u{c}\u{b}",
                r#""line\nbreak\ttab\r\a\b\f\v""#,
            ),
            ("\u{1}\u{1f}\u{7f}", r#""\x01\x1f\x7f""#),
            (
                "\u{85}\u{a0}\u{200b}\u{2028}\u{feff}",
                r#""\u0085\u00a0\u200b\u2028\ufeff""#,
            ),
            ("\u{e000}\u{e0001}", r#""\ue000\U000e0001""#),
            (
                "Iñtërnâtiônàlizætiøn 🐹 日本 e\u{301}",
                "\"Iñtërnâtiônàlizætiøn 🐹 日本 e\u{301}\"",
            ),
        ];
        for (input, expected) in cases {
            let mut out = String::new();
            quote_into(&mut out, input);
            assert_eq!(out, expected, "quoting {input:?}");
        }
    }

    #[test]
    fn group_version_should_parse_like_upstream() {
        assert_eq!(group_version("v1"), ("", "v1"));
        assert_eq!(group_version("apps/v1"), ("apps", "v1"));
        assert_eq!(group_version(""), ("", ""));
        assert_eq!(group_version("/"), ("", ""));
        assert_eq!(group_version("a/b/c"), ("", ""));
    }
}
