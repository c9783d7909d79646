//! Cascade plans ([`kube_gc::plan`]) against the reference model ([`kube_gc_sim::model`]): for
//! random clusters (the differential tests' generator: owner chains, shared dependents, cycles of
//! blocking references, cluster-scoped owners, references to kinds nobody serves, user
//! finalizers), the model settles the cluster, a plan of deleting one object with one policy is
//! taken from it, then the model carries the delete out, and every object's fate must be the one
//! the plan gave: removed, held by a finalizer or a dependent, left with exactly the references
//! the plan left it, or untouched.
//!
//! A case whose outcome depends on the order the collector works in (the model's region, see its
//! docs) is skipped: the plan shows one order's outcome there. `PROPTEST_CASES` sets the number of
//! cases (default [`DEFAULT_CASES`]).

use crate::differential::{build, raw_case};
use kube_gc::api::PropagationPolicy;
use kube_gc::plan::{self, Fate, Scope, Served, Snapshot};
use kube_gc_sim::model::{Action, Model, Object};
use proptest::prelude::*;
use proptest::sample::Index;
use std::collections::BTreeMap;

/// Cases per run unless `PROPTEST_CASES` says otherwise.
const DEFAULT_CASES: u32 = 512;

/// The model's served types, as a plan reads them.
struct Kinds<'m>(&'m Model);

impl Served for Kinds<'_> {
    fn scope(&self, api_version: &str, kind: &str) -> Option<Scope> {
        let kind = self.0.served(api_version, kind)?;
        Some(if kind.namespaced {
            Scope::Namespaced
        } else {
            Scope::Cluster
        })
    }
}

/// A model object as a plan reads it.
fn plan_object(o: &Object) -> plan::Object {
    plan::Object {
        uid: o.uid.clone(),
        api_version: o.kind.api_version.to_string(),
        kind: o.kind.kind.to_string(),
        namespace: o.namespace.clone(),
        name: o.name.clone(),
        deleting: o.deleting,
        finalizers: o.finalizers.clone(),
        owners: o.owner_references.clone(),
    }
}

const POLICIES: [PropagationPolicy; 3] = [
    PropagationPolicy::Background,
    PropagationPolicy::Foreground,
    PropagationPolicy::Orphan,
];

/// Where the plan and the model part, one line per object; empty when they agree.
fn disagreements(before: &BTreeMap<String, Object>, plan: &plan::Plan, model: &Model) -> Vec<String> {
    let fates: BTreeMap<&str, &Fate> = plan.steps.iter().map(|s| (s.object.uid.as_str(), &s.fate)).collect();
    let mut found = Vec::new();
    for (uid, was) in before {
        let now = model.get(uid);
        let fate = fates.get(uid.as_str()).copied();
        let agrees = match (fate, now) {
            (Some(Fate::Removed { .. }), None) => true,
            (Some(Fate::Removed { .. }), Some(_)) | (_, None) => false,
            (Some(Fate::Held { .. }), Some(now)) => now.deleting && !was.deleting,
            (Some(Fate::Orphaned { loses } | Fate::Kept { loses, .. }), Some(now)) => {
                let mut kept = was.owner_references.clone();
                kept.retain(|r| !loses.iter().any(|l| l.uid == r.uid));
                now.deleting == was.deleting && now.owner_references == kept
            }
            (Some(Fate::Stuck { .. }), Some(now)) => now == was,
            (None, Some(now)) => now == was,
        };
        if !agrees {
            found.push(format!("{}: was {was:?}, plan {fate:?}, model {now:?}", was.display()));
        }
    }
    found
}

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_CASES);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn a_plan_should_give_every_object_the_fate_the_model_gives_it(
        case in raw_case(),
        pick in any::<Index>(),
        policy in 0..POLICIES.len(),
    ) {
        let mut model = Model::new(build(&case));
        if model.settle().is_err() {
            return Ok(()); // out of the model's region from the start
        }
        let before: BTreeMap<String, Object> = model.objects().map(|o| (o.uid.clone(), o.clone())).collect();
        let candidates: Vec<&Object> = before.values().filter(|o| !o.deleting).collect();
        if candidates.is_empty() {
            return Ok(());
        }
        let root = candidates[pick.index(candidates.len())].uid.clone();
        let policy = POLICIES[policy];
        let snapshot = Snapshot::new(before.values().map(plan_object));
        let plan = plan::simulate(&snapshot, &Kinds(&model), std::slice::from_ref(&root), policy);
        model.apply(&Action::Delete { uid: root.clone(), policy: Some(policy) });
        if model.settle().is_err() {
            return Ok(()); // the delete leaves the region
        }
        let found = disagreements(&before, &plan, &model);
        prop_assert!(found.is_empty(), "deleting {} ({policy:?}):\n{}\nplan: {:#?}", before[&root].display(), found.join("\n"), plan.steps);
    }
}
