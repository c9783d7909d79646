//! The play itself: a copy of the part of the cluster the delete reaches, changed round by round
//! by the collector's rules until a round changes nothing; see the [module docs](super).
//!
//! Each round takes the work the previous one produced: *judge* a dependent
//! (`attempt_to_delete_item`), or *settle* an owner (what an owner that went or is being deleted
//! does to its dependents, `process_transitions`). The round an object goes in is its wave. A
//! namespace's deletion adds the namespace controller, which looks once at the start of each
//! round ([`Termination`]).

use super::{Calls, Fate, Hold, Object, ObjectRef, Plan, Remover, Scope, Served, Snapshot, Step};
use crate::api::{OwnerReference, PropagationPolicy, FINALIZER_FOREGROUND, FINALIZER_ORPHAN};
use std::collections::{BTreeSet, HashMap, HashSet};

/// One object of the play, as it is now.
#[derive(Clone, Debug)]
struct Live {
    deleting: bool,
    finalizers: Vec<String>,
    owners: Vec<OwnerReference>,
    /// How it was deleted, once it was.
    policy: Option<PropagationPolicy>,
    /// The round it went in.
    gone_in: Option<u32>,
    /// References it lost to orphaning owners, and to owners that went or wait while another kept
    /// it.
    orphaned_from: Vec<ObjectRef>,
    stripped: Vec<ObjectRef>,
    /// Why the collector never judges it.
    stuck: Option<(ObjectRef, String)>,
    /// The owner through which the delete first reached it.
    via: Option<String>,
    /// Its dependents were queued for judging since it began to wait for them.
    announced: bool,
    /// It is, or once was, deleting its dependents in the foreground (the cycle heuristic reads
    /// it).
    waited: bool,
    /// Who deleted it, once someone did.
    by: Option<Remover>,
}

impl Live {
    fn has(&self, finalizer: &str) -> bool {
        self.finalizers.iter().any(|f| f == finalizer)
    }

    /// It went: the round it went in is known.
    fn gone(&self) -> bool {
        self.gone_in.is_some()
    }

    fn waits_for_dependents(&self) -> bool {
        self.deleting && !self.gone() && self.has(FINALIZER_FOREGROUND)
    }
}

/// Work for a round.
#[derive(Clone, Debug)]
enum Work {
    /// `attempt_to_delete_item` of a dependent.
    Judge(String),
    /// What an owner that went or is being deleted does to its dependents.
    Settle(String),
}

/// How one reference reads against the play.
enum Reading {
    Solid,
    Waiting,
    Dangling,
}

/// The namespace controller's part in a namespace's deletion.
struct Termination {
    /// The namespace's UID.
    uid: String,
    /// Its name.
    name: String,
    /// The UIDs of its pods, deleted first.
    pods: Vec<String>,
    /// The UIDs of its other objects, deleted once every pod is gone.
    rest: Vec<String>,
    phase: Phase,
}

/// Where the namespace controller is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Pods deleted, waiting for them to go.
    Pods,
    /// Everything deleted, waiting for the namespace to be empty.
    Rest,
    /// Its `kubernetes` finalizer removed.
    Done,
}

/// The finalizer a namespace carries in `spec.finalizers` until the namespace controller has
/// emptied it.
const FINALIZER_KUBERNETES: &str = "kubernetes";

struct Play<'s, S> {
    snapshot: &'s Snapshot,
    served: &'s S,
    live: HashMap<String, Live>,
    round: u32,
    next: Vec<Work>,
    /// The owners [`Work::Settle`] is queued for in `next`, so that an owner whose dependents
    /// go by the thousand in one round is settled once in the next.
    settling: HashSet<String>,
    calls: Calls,
    termination: Option<Termination>,
}

/// The plan of deleting `requested` (UIDs of `snapshot`'s objects; others are ignored) with
/// `policy`, against the types `served`.
pub fn simulate(snapshot: &Snapshot, served: &impl Served, requested: &[String], policy: PropagationPolicy) -> Plan {
    let mut play = Play::new(snapshot, served);
    let requested: Vec<&Object> = requested.iter().filter_map(|uid| snapshot.get(uid)).collect();
    for object in &requested {
        play.delete(&object.uid, policy, Remover::Request);
    }
    play.run();
    play.into_plan(requested.into_iter().map(ObjectRef::of).collect(), policy)
}

/// The plan of deleting the namespace `uid` of `snapshot` (which holds every object in it) with
/// `policy`: the namespace controller's deletions, in its order, and the collector's work on them.
/// A `uid` that is not a namespace of `snapshot` gives an empty plan.
pub fn simulate_namespace(snapshot: &Snapshot, served: &impl Served, uid: &str, policy: PropagationPolicy) -> Plan {
    let mut play = Play::new(snapshot, served);
    let Some(namespace) = snapshot.get(uid).filter(|o| is_namespace(o)) else {
        return play.into_plan(Vec::new(), policy);
    };
    let (pods, rest): (Vec<String>, Vec<String>) = snapshot
        .objects()
        .filter(|o| o.namespace == namespace.name)
        .map(|o| o.uid.clone())
        .partition(|uid| snapshot.get(uid).is_some_and(is_pod));
    play.live(uid)
        .expect("in the snapshot")
        .finalizers
        .push(FINALIZER_KUBERNETES.into());
    play.delete(uid, policy, Remover::Request);
    for pod in &pods {
        play.delete(pod, PropagationPolicy::Background, Remover::NamespaceController);
    }
    for object in &rest {
        play.live(object); // in the plan even if nothing happens to it
    }
    play.termination = Some(Termination {
        uid: uid.to_string(),
        name: namespace.name.clone(),
        pods,
        rest,
        phase: Phase::Pods,
    });
    play.run();
    play.into_plan(vec![ObjectRef::of(namespace)], policy)
}

fn is_namespace(object: &Object) -> bool {
    object.kind == "Namespace" && object.api_version == "v1" && object.namespace.is_empty()
}

fn is_pod(object: &Object) -> bool {
    object.kind == "Pod" && object.api_version == "v1"
}

impl<'s, S: Served> Play<'s, S> {
    fn new(snapshot: &'s Snapshot, served: &'s S) -> Self {
        Play {
            snapshot,
            served,
            live: HashMap::new(),
            round: 0,
            next: Vec::new(),
            settling: HashSet::new(),
            calls: Calls::default(),
            termination: None,
        }
    }

    /// Rounds until one changes nothing.
    fn run(&mut self) {
        loop {
            self.round += 1;
            self.settling.clear();
            let terminated = self.terminate();
            let work = std::mem::take(&mut self.next);
            if work.is_empty() && !terminated {
                break;
            }
            for work in work {
                match work {
                    Work::Judge(uid) => self.judge(&uid),
                    Work::Settle(uid) => self.settle(&uid),
                }
            }
        }
    }

    /// The namespace controller's look at the start of a round: once every pod is gone it
    /// deletes the rest, and once everything is gone it lets the namespace go. True when it did
    /// something.
    fn terminate(&mut self) -> bool {
        let Some(t) = &self.termination else { return false };
        let all_gone = |uids: &[String]| uids.iter().all(|u| self.live.get(u).is_some_and(Live::gone));
        let (phase, deleting) = match t.phase {
            Phase::Pods if all_gone(&t.pods) => (Phase::Rest, t.rest.clone()),
            Phase::Rest if all_gone(&t.rest) => (Phase::Done, Vec::new()),
            _ => return false,
        };
        let namespace = t.uid.clone();
        self.termination.as_mut().expect("matched above").phase = phase;
        for uid in &deleting {
            if self.live.get(uid).is_some_and(|l| !l.gone()) {
                self.delete(uid, PropagationPolicy::Background, Remover::NamespaceController);
            }
        }
        if phase == Phase::Done {
            self.release(&namespace, FINALIZER_KUBERNETES);
        }
        true
    }

    /// The object `uid` as the play has it, copied from the snapshot the first time.
    fn live(&mut self, uid: &str) -> Option<&mut Live> {
        if !self.live.contains_key(uid) {
            let object = self.snapshot.get(uid)?;
            let live = Live {
                deleting: object.deleting,
                finalizers: object.finalizers.clone(),
                owners: object.owners.clone(),
                policy: None,
                gone_in: None,
                orphaned_from: Vec::new(),
                stripped: Vec::new(),
                stuck: None,
                via: None,
                announced: false,
                waited: object.deleting && object.finalizers.iter().any(|f| f == FINALIZER_FOREGROUND),
                by: None,
            };
            self.live.insert(uid.to_string(), live);
        }
        self.live.get_mut(uid)
    }

    /// The API server's DELETE of `uid` with `policy`: the collector's finalizers become the
    /// policy's, and the object goes at once when no finalizer is left (and the owners waiting
    /// for it look again, whoever deleted it).
    fn delete(&mut self, uid: &str, policy: PropagationPolicy, by: Remover) {
        let round = self.round;
        let Some(live) = self.live(uid) else { return };
        live.deleting = true;
        live.policy = Some(policy);
        live.by = Some(by);
        live.finalizers
            .retain(|f| f != FINALIZER_ORPHAN && f != FINALIZER_FOREGROUND);
        match policy {
            PropagationPolicy::Orphan => live.finalizers.push(FINALIZER_ORPHAN.into()),
            PropagationPolicy::Foreground => {
                live.finalizers.push(FINALIZER_FOREGROUND.into());
                live.waited = true;
            }
            PropagationPolicy::Background => {}
        }
        let gone = live.finalizers.is_empty();
        if gone {
            live.gone_in = Some(round);
        }
        self.queue_settle(uid);
        if gone {
            self.owners_may_go(uid);
        }
    }

    /// Queues [`Work::Settle`] of `uid` for the next round, once.
    fn queue_settle(&mut self, uid: &str) {
        if self.settling.insert(uid.to_string()) {
            self.next.push(Work::Settle(uid.to_string()));
        }
    }

    /// Queues the judging of each dependent of `owner` that still refers to it.
    fn judge_dependents(&mut self, owner: &str) {
        for dependent in self.snapshot.dependents_of(owner).to_vec() {
            if self.refers(&dependent, owner) {
                let live = self.live(&dependent).expect("a dependent of the snapshot");
                live.via.get_or_insert_with(|| owner.to_string());
                self.next.push(Work::Judge(dependent));
            }
        }
    }

    /// True when `dependent` exists in the play and still has a reference to `owner`.
    fn refers(&mut self, dependent: &str, owner: &str) -> bool {
        self.live(dependent)
            .is_some_and(|d| !d.gone() && d.owners.iter().any(|r| r.uid == owner))
    }

    /// `process_transitions` of `uid`, which went or is being deleted.
    fn settle(&mut self, uid: &str) {
        let Some(live) = self.live(uid) else { return };
        if live.gone() {
            return self.judge_dependents(uid);
        }
        if !live.deleting {
            return;
        }
        if live.has(FINALIZER_ORPHAN) {
            self.orphan_dependents(uid);
            self.remove_finalizer(uid, FINALIZER_ORPHAN);
        }
        let live = self.live(uid).expect("settled above");
        if live.waits_for_dependents() {
            if !std::mem::replace(&mut live.announced, true) {
                self.judge_dependents(uid);
            }
            if !self.is_blocked(uid) {
                self.remove_finalizer(uid, FINALIZER_FOREGROUND);
            }
        }
    }

    /// Every dependent of `owner` loses its references to it, then is judged again.
    fn orphan_dependents(&mut self, owner: &str) {
        let object = self.snapshot.get(owner).map(ObjectRef::of);
        for dependent in self.snapshot.dependents_of(owner).to_vec() {
            if !self.refers(&dependent, owner) {
                continue;
            }
            let live = self.live(&dependent).expect("a dependent of the snapshot");
            live.owners.retain(|r| r.uid != owner);
            live.orphaned_from.extend(object.clone());
            live.via.get_or_insert_with(|| owner.to_string());
            self.calls.patches += 1;
            self.next.push(Work::Judge(dependent));
        }
    }

    /// True while a dependent still there refers to `owner` with `blockOwnerDeletion`.
    fn is_blocked(&mut self, owner: &str) -> bool {
        let dependents = self.snapshot.dependents_of(owner).to_vec();
        dependents
            .iter()
            .any(|d| self.live(d).is_some_and(|l| blocks(l, owner)))
    }

    /// The collector removes `finalizer` from `uid` (a PATCH).
    fn remove_finalizer(&mut self, uid: &str, finalizer: &str) {
        self.calls.patches += 1;
        self.release(uid, finalizer);
    }

    /// `finalizer` leaves `uid`; the object goes when it was the last one.
    fn release(&mut self, uid: &str, finalizer: &str) {
        let round = self.round;
        let live = self.live(uid).expect("a deleting object of the play");
        live.finalizers.retain(|f| f != finalizer);
        if live.finalizers.is_empty() {
            live.gone_in = Some(round);
            self.queue_settle(uid);
            self.owners_may_go(uid);
        }
    }

    /// `uid` went or lost references: each owner it referred to that waits for its dependents
    /// looks again.
    fn owners_may_go(&mut self, uid: &str) {
        let Some(object) = self.snapshot.get(uid) else { return };
        for owner in &object.owners {
            if self.live(&owner.uid).is_some_and(|o| o.waits_for_dependents()) {
                self.queue_settle(&owner.uid);
            }
        }
    }

    /// `attempt_to_delete_item` of `uid`.
    fn judge(&mut self, uid: &str) {
        let Some(object) = self.snapshot.get(uid) else { return };
        let live = self.live(uid).expect("an object of the snapshot").clone();
        if live.gone() || live.deleting || live.owners.is_empty() || live.stuck.is_some() {
            return;
        }
        let mut solid = Vec::new();
        let mut lost = Vec::new();
        let mut waiting = false;
        for r in &live.owners {
            match self.read(object, r) {
                Err(why) => {
                    let owner = ObjectRef::of_ref(r, &object.namespace);
                    self.live(uid).expect("judged").stuck = Some((owner, why));
                    return;
                }
                Ok((Reading::Solid, owner)) => solid.push(owner),
                Ok((Reading::Waiting, owner)) => {
                    waiting = true;
                    lost.push(owner);
                }
                Ok((Reading::Dangling, owner)) => lost.push(owner),
            }
        }
        if !solid.is_empty() {
            return self.strip(uid, lost);
        }
        let has_dependents = self
            .snapshot
            .dependents_of(uid)
            .to_vec()
            .iter()
            .any(|d| self.refers(d, uid));
        let policy = if waiting && has_dependents {
            self.unblock_on_cycle(uid);
            PropagationPolicy::Foreground
        } else if live.has(FINALIZER_ORPHAN) {
            PropagationPolicy::Orphan
        } else if live.has(FINALIZER_FOREGROUND) {
            PropagationPolicy::Foreground
        } else {
            PropagationPolicy::Background
        };
        self.calls.deletes += 1;
        self.delete(uid, policy, Remover::Collector);
    }

    /// The cycle heuristic: before `uid` is deleted in the foreground, if one of its dependents
    /// is or was deleting its own dependents, `uid`'s references stop blocking their owners (one
    /// PATCH), so that a cycle of blocking references cannot hold every owner on it forever.
    fn unblock_on_cycle(&mut self, uid: &str) {
        let dependents = self.snapshot.dependents_of(uid).to_vec();
        let cycle = dependents
            .iter()
            .any(|d| self.refers(d, uid) && self.live(d).is_some_and(|l| l.waited));
        let live = self.live(uid).expect("judged");
        let blocking: Vec<&mut OwnerReference> = live
            .owners
            .iter_mut()
            .filter(|r| r.block_owner_deletion == Some(true))
            .collect();
        if !cycle || blocking.is_empty() {
            return;
        }
        for r in blocking {
            r.block_owner_deletion = Some(false);
        }
        self.calls.patches += 1;
        self.owners_may_go(uid);
    }

    /// `uid` keeps its solid owners and loses its references to the owners in `lost`.
    fn strip(&mut self, uid: &str, lost: Vec<ObjectRef>) {
        if lost.is_empty() {
            return;
        }
        let live = self.live(uid).expect("judged");
        live.owners.retain(|r| !lost.iter().any(|l| l.uid == r.uid));
        live.stripped.extend(lost);
        self.calls.patches += 1;
        self.owners_may_go(uid);
    }

    /// How `dependent`'s reference `r` reads now, with its owner; an error says why it cannot be
    /// read at all.
    fn read(&mut self, dependent: &Object, r: &OwnerReference) -> Result<(Reading, ObjectRef), String> {
        let scope = self
            .served
            .scope(&r.api_version, &r.kind)
            .ok_or_else(|| format!("no version of {}'s group serves kind {}", r.api_version, r.kind))?;
        if scope == Scope::Namespaced && dependent.namespace.is_empty() {
            return Err(format!(
                "a cluster-scoped object cannot have a namespaced owner ({})",
                r.kind
            ));
        }
        let namespace = if scope == Scope::Namespaced {
            dependent.namespace.as_str()
        } else {
            ""
        };
        let shown = ObjectRef::of_ref(r, namespace);
        let present = self.snapshot.get(&r.uid).is_some_and(|o| {
            o.name == r.name
                && o.kind == r.kind
                && group(&o.api_version) == group(&r.api_version)
                && o.namespace == namespace
        });
        let live = present.then(|| self.live(&r.uid)).flatten().filter(|o| !o.gone());
        let reading = match live {
            None => Reading::Dangling,
            Some(o) if o.waits_for_dependents() => Reading::Waiting,
            Some(_) => Reading::Solid,
        };
        Ok((reading, shown))
    }

    /// The plan the play came to.
    fn into_plan(self, requested: Vec<ObjectRef>, policy: PropagationPolicy) -> Plan {
        let rounds: BTreeSet<u32> = self.live.values().filter_map(|l| l.gone_in).collect();
        let wave_of = |round: u32| rounds.iter().position(|r| *r == round).map_or(0, |i| i as u32 + 1);
        let mut steps: Vec<(u32, Step)> = Vec::new();
        for (uid, live) in &self.live {
            let object = ObjectRef::of(self.snapshot.get(uid).expect("played objects are the snapshot's"));
            let fate = match self.fate(uid, live, &wave_of) {
                Some(fate) => fate,
                None => continue,
            };
            let order = match fate {
                Fate::Removed { wave, .. } => wave,
                _ => u32::MAX,
            };
            steps.push((
                order,
                Step {
                    object,
                    via: live.via.clone(),
                    fate,
                },
            ));
        }
        steps.sort_by(|(a, x), (b, y)| a.cmp(b).then_with(|| x.object.cmp(&y.object)));
        Plan {
            policy,
            requested,
            steps: steps.into_iter().map(|(_, s)| s).collect(),
            calls: self.calls,
        }
    }

    /// What became of one object of the play; `None` when nothing did.
    fn fate(&self, uid: &str, live: &Live, wave_of: &impl Fn(u32) -> u32) -> Option<Fate> {
        if let Some(round) = live.gone_in {
            return Some(Fate::Removed {
                wave: wave_of(round),
                policy: live.policy.unwrap_or(PropagationPolicy::Background),
                by: live.by.unwrap_or(Remover::Collector),
            });
        }
        if let Some(t) = self.termination.as_ref().filter(|t| t.phase == Phase::Pods) {
            let object = self.snapshot.get(uid).expect("played objects are the snapshot's");
            if !live.deleting && object.namespace == t.name && !is_pod(object) {
                return Some(Fate::WaitsForPods {
                    pods: self.held_among(&t.pods),
                });
            }
        }
        let released = self.snapshot.get(uid).is_some_and(|o| o.finalizers != live.finalizers);
        if live.deleting && (live.policy.is_some() || released) {
            let others: Vec<String> = live
                .finalizers
                .iter()
                .filter(|f| *f != FINALIZER_ORPHAN && *f != FINALIZER_FOREGROUND)
                .cloned()
                .collect();
            let why = if live.has(FINALIZER_KUBERNETES) && self.termination.as_ref().is_some_and(|t| t.uid == uid) {
                let t = self.termination.as_ref().expect("checked");
                let contents = t.pods.iter().chain(&t.rest);
                let left: Vec<String> = contents
                    .filter(|u| !self.live.get(*u).is_some_and(Live::gone))
                    .cloned()
                    .collect();
                Hold::Contents {
                    left: left.len(),
                    held: self.held_among(&left),
                }
            } else if others.is_empty() {
                let blocking = self.still_blocking(uid);
                Hold::BlockingDependents { dependents: blocking }
            } else {
                Hold::Finalizers { finalizers: others }
            };
            return Some(Fate::Held { why });
        }
        if !live.orphaned_from.is_empty() {
            let mut loses = live.orphaned_from.clone();
            loses.extend(live.stripped.iter().cloned());
            return Some(Fate::Orphaned { loses });
        }
        if let Some((owner, why)) = &live.stuck {
            return Some(Fate::Stuck {
                owner: owner.clone(),
                why: why.clone(),
            });
        }
        if !live.stripped.is_empty() {
            let by = live
                .owners
                .iter()
                .map(|r| {
                    let namespace = self.snapshot.get(&r.uid).map_or("", |o| o.namespace.as_str());
                    ObjectRef::of_ref(r, namespace)
                })
                .collect();
            return Some(Fate::Kept {
                by,
                loses: live.stripped.clone(),
            });
        }
        None
    }

    /// The objects among `uids` still there and being deleted at the end: held.
    fn held_among(&self, uids: &[String]) -> Vec<ObjectRef> {
        let mut held: Vec<ObjectRef> = uids
            .iter()
            .filter(|u| self.live.get(*u).is_some_and(|l| l.deleting && !l.gone()))
            .filter_map(|u| self.snapshot.get(u).map(ObjectRef::of))
            .collect();
        held.sort();
        held
    }

    /// The dependents of `owner` still blocking it at the end.
    fn still_blocking(&self, owner: &str) -> Vec<ObjectRef> {
        let mut blocking: Vec<ObjectRef> = self
            .snapshot
            .dependents_of(owner)
            .iter()
            .filter(|d| self.live.get(*d).is_some_and(|l| blocks(l, owner)))
            .filter_map(|d| self.snapshot.get(d).map(ObjectRef::of))
            .collect();
        blocking.sort();
        blocking
    }
}

/// True when `dependent` is still there and refers to `owner` with `blockOwnerDeletion`.
fn blocks(dependent: &Live, owner: &str) -> bool {
    !dependent.gone()
        && dependent
            .owners
            .iter()
            .any(|r| r.uid == owner && r.block_owner_deletion == Some(true))
}

/// The group of an apiVersion (`apps/v1` → `apps`, `v1` → ``).
fn group(api_version: &str) -> &str {
    api_version.split_once('/').map_or("", |(g, _)| g)
}
