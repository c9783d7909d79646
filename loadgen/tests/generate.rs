//! `generate`: determinism, the counts a topology promises, and the stream's shape.

use indicatif::ProgressBar;
use kube_gc::api::{WatchEvent, WatchEventType};
use loadgen::generate::{generate, Preset, Summary};
use std::collections::{BTreeMap, HashSet};

fn small(seed: u64) -> (Vec<WatchEvent>, Summary) {
    let mut events = Vec::new();
    let summary = generate(&Preset::Small.topology(), seed, &mut events, &ProgressBar::hidden()).expect("generate");
    (events, summary)
}

#[test]
fn generate_should_write_the_same_stream_for_the_same_seed() {
    let (first, _) = small(7);
    let (again, _) = small(7);
    let (other, _) = small(8);
    assert_eq!(first, again);
    assert_ne!(first, other);
}

#[test]
fn generate_small_should_make_the_kinds_its_topology_promises() {
    let t = Preset::Small.topology();
    let (events, summary) = small(1);
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for e in events.iter().filter(|e| e.event_type == WatchEventType::Added) {
        *kinds.entry(e.object.kind.clone()).or_default() += 1;
    }
    let (n, d) = (t.namespaces, t.namespaces * t.deployments);
    let fleets = t.cluster_owners / 2;
    let roles = t.cluster_owners - fleets;
    let expected = BTreeMap::from([
        ("ClusterRole".to_string(), roles),
        ("ClusterRoleBinding".to_string(), roles * t.cluster_dependents),
        (
            "ConfigMap".to_string(),
            fleets * t.cluster_dependents + t.multi_owner + t.cross_namespace + 2 * t.cycles,
        ),
        ("Deployment".to_string(), d),
        ("Fleet".to_string(), fleets),
        ("Job".to_string(), n * t.jobs),
        (
            "Pod".to_string(),
            d * t.replicasets * t.pods + n * t.jobs * t.job_pods + t.dangling,
        ),
        ("ReplicaSet".to_string(), d * t.replicasets),
        ("Widget".to_string(), n * t.chains * t.chain_depth),
    ]);
    assert_eq!(kinds, expected);
    assert_eq!(summary.objects_by_kind, expected);
    assert_eq!(summary.objects(), t.objects());
    let roots = t.roots();
    let deletions: Vec<usize> = ["Background", "Foreground", "Orphan"]
        .iter()
        .map(|p| summary.deletions[p])
        .collect();
    let asked = [t.delete_background, t.delete_foreground, t.delete_orphan].map(|a| a.of(roots));
    assert_eq!(deletions, asked);
    assert_eq!(asked, [49, 24, 24], "10 %, 5 % and 5 % of 486 roots");
    let modified = events
        .iter()
        .filter(|e| e.event_type == WatchEventType::Modified)
        .count();
    assert_eq!(modified, t.churn + deletions[1] + deletions[2]);
}

#[test]
fn generate_should_list_every_object_before_the_bookmark_and_never_reuse_a_uid_or_name() {
    let (events, _) = small(3);
    let bookmark = events
        .iter()
        .position(|e| e.event_type == WatchEventType::Bookmark)
        .expect("a bookmark");
    assert!(events[..bookmark].iter().all(|e| e.event_type == WatchEventType::Added));
    assert!(events[bookmark + 1..]
        .iter()
        .all(|e| e.event_type != WatchEventType::Added));
    let mut uids = HashSet::new();
    let mut names = HashSet::new();
    for e in &events[..bookmark] {
        let m = &e.object.metadata;
        assert!(uids.insert(m.uid.clone()), "uid {} twice", m.uid);
        assert!(names.insert((e.object.kind.clone(), m.namespace.clone(), m.name.clone())));
    }
    let owners: HashSet<&str> = events[..bookmark]
        .iter()
        .flat_map(|e| &e.object.metadata.owner_references)
        .map(|r| r.uid.as_str())
        .collect();
    let dangling = owners.iter().filter(|u| !uids.contains(**u)).count();
    assert_eq!(dangling, Preset::Small.topology().dangling);
}
