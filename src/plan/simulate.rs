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
use foldhash::{HashMap, HashSet};
use std::collections::BTreeSet;

/// One object of the play, as it is now.
#[derive(Clone, Debug)]
struct Live<'s> {
    /// The object as the snapshot has it.
    object: &'s Object,
    deleting: bool,
    finalizers: Vec<String>,
    /// Its owner references once the play changed them; the snapshot's until then.
    owners: Option<Vec<OwnerReference>>,
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
    via: Option<&'s str>,
    /// Its dependents were queued for judging since it began to wait for them.
    announced: bool,
    /// It is, or once was, deleting its dependents in the foreground (the cycle heuristic reads
    /// it).
    waited: bool,
    /// Who deleted it, once someone did.
    by: Option<Remover>,
}

impl<'s> Live<'s> {
    /// Its copy in the play, as the snapshot has it.
    fn of(object: &'s Object) -> Self {
        Live {
            object,
            deleting: object.deleting,
            finalizers: object.finalizers.clone(),
            owners: None,
            policy: None,
            gone_in: None,
            orphaned_from: Vec::new(),
            stripped: Vec::new(),
            stuck: None,
            via: None,
            announced: false,
            waited: waits_in_snapshot(object),
            by: None,
        }
    }

    fn owners(&self) -> &[OwnerReference] {
        self.owners.as_deref().unwrap_or(&self.object.owners)
    }

    /// Its owner references, to change: copied from the snapshot the first time.
    fn owners_mut(&mut self) -> &mut Vec<OwnerReference> {
        self.owners.get_or_insert_with(|| self.object.owners.clone())
    }

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
#[derive(Clone, Copy, Debug)]
enum Work<'s> {
    /// `attempt_to_delete_item` of a dependent.
    Judge(&'s str),
    /// What an owner that went or is being deleted does to its dependents.
    Settle(&'s str),
}

/// How one reference reads against the play.
enum Reading {
    Solid,
    Waiting,
    Dangling,
}

/// The namespace controller's part in a namespace's deletion.
struct Termination<'s> {
    /// The namespace's UID.
    uid: &'s str,
    /// Its name.
    name: &'s str,
    /// The UIDs of its pods, deleted first.
    pods: Vec<&'s str>,
    /// The UIDs of its other objects, deleted once every pod is gone.
    rest: Vec<&'s str>,
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
    /// The objects the play touched, by the snapshot's own UID strings.
    live: HashMap<&'s str, Live<'s>>,
    round: u32,
    next: Vec<Work<'s>>,
    /// The owners [`Work::Settle`] is queued for in `next`, so that an owner whose dependents
    /// go by the thousand in one round is settled once in the next.
    settling: HashSet<&'s str>,
    calls: Calls,
    termination: Option<Termination<'s>>,
}

/// The plan of deleting `requested` (UIDs of `snapshot`'s objects; others are ignored) with
/// `policy`, against the types `served`.
pub fn simulate(snapshot: &Snapshot, served: &impl Served, requested: &[String], policy: PropagationPolicy) -> Plan {
    let mut play = Play::new(snapshot, served);
    let requested: Vec<&Object> = requested.iter().filter_map(|uid| snapshot.get(uid)).collect();
    for object in &requested {
        play.delete(object.uid.as_str(), policy, Remover::Request);
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
    let (pods, rest): (Vec<&Object>, Vec<&Object>) = snapshot
        .objects()
        .filter(|o| o.namespace == namespace.name)
        .partition(|o| is_pod(o));
    let (pods, rest) = (uids(pods), uids(rest));
    let uid = namespace.uid.as_str();
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
        uid,
        name: namespace.name.as_str(),
        pods,
        rest,
        phase: Phase::Pods,
    });
    play.run();
    play.into_plan(vec![ObjectRef::of(namespace)], policy)
}

fn uids(objects: Vec<&Object>) -> Vec<&str> {
    objects.into_iter().map(|o| o.uid.as_str()).collect()
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
            live: HashMap::with_capacity_and_hasher(snapshot.len(), Default::default()),
            round: 0,
            next: Vec::new(),
            settling: HashSet::default(),
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
                    Work::Judge(uid) => self.judge(uid),
                    Work::Settle(uid) => self.settle(uid),
                }
            }
        }
    }

    /// The namespace controller's look at the start of a round: once every pod is gone it
    /// deletes the rest, and once everything is gone it lets the namespace go. True when it did
    /// something.
    fn terminate(&mut self) -> bool {
        let Some(t) = &self.termination else { return false };
        let all_gone = |uids: &[&str]| uids.iter().all(|u| self.live.get(u).is_some_and(Live::gone));
        let (phase, deleting) = match t.phase {
            Phase::Pods if all_gone(&t.pods) => (Phase::Rest, t.rest.clone()),
            Phase::Rest if all_gone(&t.rest) => (Phase::Done, Vec::new()),
            _ => return false,
        };
        let namespace = t.uid;
        self.termination.as_mut().expect("matched above").phase = phase;
        for uid in deleting {
            if self.live.get(uid).is_some_and(|l| !l.gone()) {
                self.delete(uid, PropagationPolicy::Background, Remover::NamespaceController);
            }
        }
        if phase == Phase::Done {
            self.release(namespace, FINALIZER_KUBERNETES);
        }
        true
    }

    /// The object `uid` as the play has it, copied from the snapshot the first time.
    fn live(&mut self, uid: &str) -> Option<&mut Live<'s>> {
        let (key, object) = self.snapshot.objects.get_key_value(uid)?;
        Some(self.live.entry(key.as_str()).or_insert_with(|| Live::of(object)))
    }

    /// The API server's DELETE of `uid` with `policy`: the collector's finalizers become the
    /// policy's, and the object goes at once when no finalizer is left (and the owners waiting
    /// for it look again, whoever deleted it).
    fn delete(&mut self, uid: &'s str, policy: PropagationPolicy, by: Remover) {
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
    fn queue_settle(&mut self, uid: &'s str) {
        if self.settling.insert(uid) {
            self.next.push(Work::Settle(uid));
        }
    }

    /// Queues the judging of each dependent of `owner` that still refers to it.
    fn judge_dependents(&mut self, owner: &'s str) {
        let snapshot = self.snapshot;
        for dependent in snapshot.dependents_of(owner) {
            if self.refers(dependent, owner) {
                let live = self.live(dependent).expect("a dependent of the snapshot");
                live.via.get_or_insert(owner);
                self.next.push(Work::Judge(dependent));
            }
        }
    }

    // Readings that copy nothing into the play: an object the play has not touched is as the
    // snapshot has it.

    /// The owner references `uid` has now; `None` when it went or is not in the snapshot.
    fn owners_now(&self, uid: &str) -> Option<&[OwnerReference]> {
        match self.live.get(uid) {
            Some(live) if live.gone() => None,
            Some(live) => Some(live.owners()),
            None => self.snapshot.get(uid).map(|o| o.owners.as_slice()),
        }
    }

    /// True when `uid` is deleting its dependents in the foreground now.
    fn waits_now(&self, uid: &str) -> bool {
        match self.live.get(uid) {
            Some(live) => live.waits_for_dependents(),
            None => self.snapshot.get(uid).is_some_and(waits_in_snapshot),
        }
    }

    /// True when `uid` is, or once was, deleting its dependents in the foreground.
    fn waited(&self, uid: &str) -> bool {
        match self.live.get(uid) {
            Some(live) => live.waited,
            None => self.snapshot.get(uid).is_some_and(waits_in_snapshot),
        }
    }

    /// True when `dependent` exists in the play and still has a reference to `owner`.
    fn refers(&self, dependent: &str, owner: &str) -> bool {
        self.owners_now(dependent)
            .is_some_and(|owners| owners.iter().any(|r| r.uid == owner))
    }

    /// `process_transitions` of `uid`, which went or is being deleted.
    fn settle(&mut self, uid: &'s str) {
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
    fn orphan_dependents(&mut self, owner: &'s str) {
        let snapshot = self.snapshot;
        let object = snapshot.get(owner).map(ObjectRef::of);
        for dependent in snapshot.dependents_of(owner) {
            if !self.refers(dependent, owner) {
                continue;
            }
            let live = self.live(dependent).expect("a dependent of the snapshot");
            live.owners_mut().retain(|r| r.uid != owner);
            live.orphaned_from.extend(object.clone());
            live.via.get_or_insert(owner);
            self.calls.patches += 1;
            self.next.push(Work::Judge(dependent));
        }
    }

    /// True while a dependent still there refers to `owner` with `blockOwnerDeletion`.
    fn is_blocked(&self, owner: &str) -> bool {
        self.snapshot
            .dependents_of(owner)
            .iter()
            .any(|d| self.owners_now(d).is_some_and(|owners| blocks(owners, owner)))
    }

    /// The collector removes `finalizer` from `uid` (a PATCH).
    fn remove_finalizer(&mut self, uid: &'s str, finalizer: &str) {
        self.calls.patches += 1;
        self.release(uid, finalizer);
    }

    /// `finalizer` leaves `uid`; the object goes when it was the last one.
    fn release(&mut self, uid: &'s str, finalizer: &str) {
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
            if self.waits_now(&owner.uid) {
                self.queue_settle(&owner.uid);
            }
        }
    }

    /// `attempt_to_delete_item` of `uid`.
    fn judge(&mut self, uid: &'s str) {
        let snapshot = self.snapshot;
        let Some(live) = self.live(uid) else { return };
        let object = live.object;
        if live.gone() || live.deleting || live.owners().is_empty() || live.stuck.is_some() {
            return;
        }
        let live = &self.live[uid];
        let (orphan, foreground) = (live.has(FINALIZER_ORPHAN), live.has(FINALIZER_FOREGROUND));
        let mut solid = false;
        let mut waiting = false;
        let mut lost = Vec::new();
        for r in live.owners() {
            match self.read(object, r) {
                Err(why) => {
                    let stuck = (ObjectRef::of_ref(r, &object.namespace), why);
                    self.live(uid).expect("judged").stuck = Some(stuck);
                    return;
                }
                Ok(Reading::Solid) => solid = true,
                Ok(Reading::Waiting) => {
                    waiting = true;
                    lost.push(r);
                }
                Ok(Reading::Dangling) => lost.push(r),
            }
        }
        if solid {
            let lost = lost.into_iter().map(|r| self.shown(object, r)).collect();
            return self.strip(uid, lost);
        }
        let has_dependents = snapshot.dependents_of(uid).iter().any(|d| self.refers(d, uid));
        let policy = if waiting && has_dependents {
            self.unblock_on_cycle(uid);
            PropagationPolicy::Foreground
        } else if orphan {
            PropagationPolicy::Orphan
        } else if foreground {
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
    fn unblock_on_cycle(&mut self, uid: &'s str) {
        let cycle = self
            .snapshot
            .dependents_of(uid)
            .iter()
            .any(|d| self.refers(d, uid) && self.waited(d));
        let live = self.live(uid).expect("judged");
        let blocking: Vec<&mut OwnerReference> = live
            .owners_mut()
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
    fn strip(&mut self, uid: &'s str, lost: Vec<ObjectRef>) {
        if lost.is_empty() {
            return;
        }
        let live = self.live(uid).expect("judged");
        live.owners_mut().retain(|r| !lost.iter().any(|l| l.uid == r.uid));
        live.stripped.extend(lost);
        self.calls.patches += 1;
        self.owners_may_go(uid);
    }

    /// The namespace `dependent`'s reference `r` is read in: the dependent's for a namespaced
    /// owner, none for a cluster-scoped one; an error says why it cannot be read at all.
    fn scope_of(&self, dependent: &'s Object, r: &OwnerReference) -> Result<&'s str, String> {
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
        Ok(match scope {
            Scope::Namespaced => dependent.namespace.as_str(),
            Scope::Cluster => "",
        })
    }

    /// The owner `r` of `dependent`, as the plan names it.
    fn shown(&self, dependent: &'s Object, r: &OwnerReference) -> ObjectRef {
        ObjectRef::of_ref(r, self.scope_of(dependent, r).unwrap_or_default())
    }

    /// How `dependent`'s reference `r` reads now; an error says why it cannot be read at all.
    fn read(&self, dependent: &'s Object, r: &OwnerReference) -> Result<Reading, String> {
        let namespace = self.scope_of(dependent, r)?;
        let present = self.snapshot.get(&r.uid).is_some_and(|o| {
            o.name == r.name
                && o.kind == r.kind
                && group(&o.api_version) == group(&r.api_version)
                && o.namespace == namespace
        });
        Ok(if !present || self.live.get(r.uid.as_str()).is_some_and(Live::gone) {
            Reading::Dangling
        } else if self.waits_now(&r.uid) {
            Reading::Waiting
        } else {
            Reading::Solid
        })
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
                    via: live.via.map(str::to_string),
                    fate,
                },
            ));
        }
        // Sorted by index: a step is too large to move around a hundred thousand times.
        let mut order: Vec<usize> = (0..steps.len()).collect();
        order.sort_unstable_by(|&i, &j| {
            let ((a, x), (b, y)) = (&steps[i], &steps[j]);
            a.cmp(b).then_with(|| x.object.cmp(&y.object))
        });
        let mut steps: Vec<Option<Step>> = steps.into_iter().map(|(_, s)| Some(s)).collect();
        Plan {
            policy,
            requested,
            steps: order.into_iter().filter_map(|i| steps[i].take()).collect(),
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
                let left: Vec<&str> = contents
                    .filter(|u| !self.live.get(**u).is_some_and(Live::gone))
                    .copied()
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
                .owners()
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
    fn held_among(&self, uids: &[&str]) -> Vec<ObjectRef> {
        let mut held: Vec<ObjectRef> = uids
            .iter()
            .filter(|u| self.live.get(**u).is_some_and(|l| l.deleting && !l.gone()))
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
            .filter(|d| self.owners_now(d).is_some_and(|owners| blocks(owners, owner)))
            .filter_map(|d| self.snapshot.get(d).map(ObjectRef::of))
            .collect();
        blocking.sort();
        blocking
    }
}

/// True when `owners` (a dependent's, while it is there) refer to `owner` with
/// `blockOwnerDeletion`.
fn blocks(owners: &[OwnerReference], owner: &str) -> bool {
    owners
        .iter()
        .any(|r| r.uid == owner && r.block_owner_deletion == Some(true))
}

/// True when `object`, untouched by the play, is deleting its dependents in the foreground.
fn waits_in_snapshot(object: &Object) -> bool {
    object.deleting && object.finalizers.iter().any(|f| f == FINALIZER_FOREGROUND)
}

/// The group of an apiVersion (`apps/v1` → `apps`, `v1` → ``).
fn group(api_version: &str) -> &str {
    api_version.split_once('/').map_or("", |(g, _)| g)
}
