//! The play itself: a copy of the part of the cluster the delete reaches, changed round by round
//! by the collector's rules until a round changes nothing; see the [module docs](super).
//!
//! Each round takes the work the previous one produced: *judge* a dependent
//! (`attempt_to_delete_item`), or *settle* an owner (what an owner that went or is being deleted
//! does to its dependents, `process_transitions`). The round an object goes in is its wave. A
//! namespace's deletion adds the namespace controller, which looks once at the start of each
//! round ([`Termination`]).
//!
//! Objects are named by their position in the snapshot, and references by their position in
//! their object's `ownerReferences`; the [`Index`] resolves both once, so that the play's
//! millions of reads hash nothing.

use super::index::{scope_of, Index, Link, Target, NOWHERE};
use super::{Calls, Fate, Hold, Object, ObjectRef, Plan, Remover, Served, Snapshot, Step};
use crate::api::{OwnerReference, PropagationPolicy, FINALIZER_FOREGROUND, FINALIZER_ORPHAN};
use std::collections::BTreeSet;

/// The finalizers of one object of the play. The collector's two and the namespace controller's
/// come and go; the others stay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Finalizers {
    orphan: bool,
    foreground: bool,
    kubernetes: bool,
    others: bool,
}

impl Finalizers {
    fn of(object: &Object) -> Finalizers {
        let has = |name: &str| object.finalizers.iter().any(|f| f == name);
        Finalizers {
            orphan: has(FINALIZER_ORPHAN),
            foreground: has(FINALIZER_FOREGROUND),
            kubernetes: has(FINALIZER_KUBERNETES),
            others: object.finalizers.iter().any(|f| !is_played(f)),
        }
    }

    fn is_empty(&self) -> bool {
        !(self.orphan || self.foreground || self.kubernetes || self.others)
    }

    /// The names of those that are not the collector's, as `object` lists them.
    fn not_the_collectors(&self, object: &Object) -> Vec<String> {
        let mut names: Vec<String> = object.finalizers.iter().filter(|f| !is_played(f)).cloned().collect();
        if self.kubernetes {
            names.push(FINALIZER_KUBERNETES.into());
        }
        names
    }
}

/// True for a finalizer the play adds and removes.
fn is_played(finalizer: &str) -> bool {
    [FINALIZER_ORPHAN, FINALIZER_FOREGROUND, FINALIZER_KUBERNETES].contains(&finalizer)
}

/// One object of the play, as it is now.
#[derive(Clone, Debug)]
struct Live {
    deleting: bool,
    finalizers: Finalizers,
    /// The positions of the owner references it still has, once the play removed some; all of
    /// the snapshot's until then.
    kept: Option<Vec<u32>>,
    /// Its references stopped blocking their owners (the cycle heuristic's PATCH).
    unblocked: bool,
    /// How it was deleted, once it was.
    policy: Option<PropagationPolicy>,
    /// The round it went in.
    gone_in: Option<u32>,
    /// The owners (positions) that orphaned it.
    orphaned_from: Vec<u32>,
    /// The references (positions) it lost to owners that went or wait while another kept it.
    stripped: Vec<u32>,
    /// The reference (position) the collector cannot read, and why ([`Index::why`]).
    stuck: Option<(u32, u32)>,
    /// The owner (position) through which the delete first reached it.
    via: Option<u32>,
    /// Its dependents were queued for judging since it began to wait for them.
    announced: bool,
    /// It is, or once was, deleting its dependents in the foreground (the cycle heuristic reads
    /// it).
    waited: bool,
    /// Who deleted it, once someone did.
    by: Option<Remover>,
}

impl Live {
    /// Its copy in the play, as the snapshot has it.
    fn of(object: &Object) -> Self {
        Live {
            deleting: object.deleting,
            finalizers: Finalizers::of(object),
            kept: None,
            unblocked: false,
            policy: None,
            gone_in: None,
            orphaned_from: Vec::new(),
            stripped: Vec::new(),
            stuck: None,
            via: None,
            announced: false,
            waited: waited_in_snapshot(object),
            by: None,
        }
    }

    /// Its owner references, to change: all of the snapshot's `count` until the first change.
    fn kept_mut(&mut self, count: usize) -> &mut Vec<u32> {
        self.kept.get_or_insert_with(|| (0..count as u32).collect())
    }

    /// It went: the round it went in is known.
    fn gone(&self) -> bool {
        self.gone_in.is_some()
    }

    fn waits_for_dependents(&self) -> bool {
        self.deleting && !self.gone() && self.finalizers.foreground
    }
}

/// Work for a round, on an object's position.
#[derive(Clone, Copy, Debug)]
enum Work {
    /// `attempt_to_delete_item` of a dependent.
    Judge(u32),
    /// What an owner that went or is being deleted does to its dependents.
    Settle(u32),
}

/// How one reference reads against the play.
enum Reading {
    Solid,
    Waiting,
    Dangling,
}

/// The namespace controller's part in a namespace's deletion.
struct Termination<'s> {
    /// The namespace's position.
    at: u32,
    /// Its name.
    name: &'s str,
    /// Its pods, deleted first.
    pods: Vec<u32>,
    /// Its other objects, deleted once every pod is gone.
    rest: Vec<u32>,
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
    index: Index,
    /// By position: the objects the play touched.
    live: Vec<Option<Live>>,
    round: u32,
    next: Vec<Work>,
    /// By position: the round whose `next` holds a [`Work::Settle`] of the object, so that an
    /// owner whose dependents go by the thousand in one round is settled once in the next.
    settle_queued: Vec<u32>,
    calls: Calls,
    termination: Option<Termination<'s>>,
}

/// The plan of deleting `requested` (UIDs of `snapshot`'s objects; others are ignored) with
/// `policy`, against the types `served`.
pub fn simulate(snapshot: &Snapshot, served: &impl Served, requested: &[String], policy: PropagationPolicy) -> Plan {
    let mut play = Play::new(snapshot, served);
    let requested: Vec<u32> = requested.iter().filter_map(|uid| snapshot.position(uid)).collect();
    for &at in &requested {
        play.delete(at, policy, Remover::Request);
    }
    play.run();
    let requested = requested.into_iter().map(|at| play.object_ref(at)).collect();
    play.into_plan(requested, policy)
}

/// The plan of deleting the namespace `uid` of `snapshot` (which holds every object in it) with
/// `policy`: the namespace controller's deletions, in its order, and the collector's work on them.
/// A `uid` that is not a namespace of `snapshot` gives an empty plan.
pub fn simulate_namespace(snapshot: &Snapshot, served: &impl Served, uid: &str, policy: PropagationPolicy) -> Plan {
    let mut play = Play::new(snapshot, served);
    let Some(at) = snapshot
        .position(uid)
        .filter(|at| is_namespace(&snapshot.objects[*at as usize]))
    else {
        return play.into_plan(Vec::new(), policy);
    };
    let name = snapshot.objects[at as usize].name.as_str();
    let (pods, rest): (Vec<u32>, Vec<u32>) = (0..snapshot.len() as u32)
        .filter(|i| snapshot.objects[*i as usize].namespace == name)
        .partition(|i| is_pod(&snapshot.objects[*i as usize]));
    play.touch(at).finalizers.kubernetes = true;
    play.delete(at, policy, Remover::Request);
    for &pod in &pods {
        play.delete(pod, PropagationPolicy::Background, Remover::NamespaceController);
    }
    for &object in &rest {
        play.touch(object); // in the plan even if nothing happens to it
    }
    play.termination = Some(Termination {
        at,
        name,
        pods,
        rest,
        phase: Phase::Pods,
    });
    play.run();
    let requested = vec![play.object_ref(at)];
    play.into_plan(requested, policy)
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
            index: Index::new(snapshot, served),
            live: vec![None; snapshot.len()],
            round: 0,
            next: Vec::new(),
            settle_queued: vec![u32::MAX; snapshot.len()],
            calls: Calls::default(),
            termination: None,
        }
    }

    /// Rounds until one changes nothing.
    fn run(&mut self) {
        loop {
            self.round += 1;
            let terminated = self.terminate();
            let work = std::mem::take(&mut self.next);
            if work.is_empty() && !terminated {
                break;
            }
            for work in work {
                match work {
                    Work::Judge(at) => self.judge(at),
                    Work::Settle(at) => self.settle(at),
                }
            }
        }
    }

    /// The namespace controller's look at the start of a round: once every pod is gone it
    /// deletes the rest, and once everything is gone it lets the namespace go. True when it did
    /// something.
    fn terminate(&mut self) -> bool {
        let Some(t) = &self.termination else { return false };
        let all_gone = |objects: &[u32]| objects.iter().all(|at| self.is_gone(*at));
        let (phase, deleting) = match t.phase {
            Phase::Pods if all_gone(&t.pods) => (Phase::Rest, t.rest.clone()),
            Phase::Rest if all_gone(&t.rest) => (Phase::Done, Vec::new()),
            _ => return false,
        };
        let namespace = t.at;
        self.termination.as_mut().expect("matched above").phase = phase;
        for at in deleting {
            if !self.is_gone(at) {
                self.delete(at, PropagationPolicy::Background, Remover::NamespaceController);
            }
        }
        if phase == Phase::Done {
            self.release(namespace, |f| f.kubernetes = false);
        }
        true
    }

    /// The object at `at` as the snapshot has it.
    fn object(&self, at: u32) -> &'s Object {
        &self.snapshot.objects[at as usize]
    }

    fn object_ref(&self, at: u32) -> ObjectRef {
        ObjectRef::of(self.object(at))
    }

    /// The object at `at` as the play has it, copied from the snapshot the first time.
    fn touch(&mut self, at: u32) -> &mut Live {
        let object = self.object(at);
        self.live[at as usize].get_or_insert_with(|| Live::of(object))
    }

    /// The object at `at` as the play has it, once touched.
    fn played(&self, at: u32) -> Option<&Live> {
        self.live[at as usize].as_ref()
    }

    fn is_gone(&self, at: u32) -> bool {
        self.played(at).is_some_and(Live::gone)
    }

    /// The API server's DELETE of `at` with `policy`: the collector's finalizers become the
    /// policy's, and the object goes at once when no finalizer is left (and the owners waiting
    /// for it look again, whoever deleted it).
    fn delete(&mut self, at: u32, policy: PropagationPolicy, by: Remover) {
        let round = self.round;
        let live = self.touch(at);
        live.deleting = true;
        live.policy = Some(policy);
        live.by = Some(by);
        live.finalizers.orphan = policy == PropagationPolicy::Orphan;
        live.finalizers.foreground = policy == PropagationPolicy::Foreground;
        live.waited |= policy == PropagationPolicy::Foreground;
        let gone = live.finalizers.is_empty();
        if gone {
            live.gone_in = Some(round);
        }
        self.queue_settle(at);
        if gone {
            self.owners_may_go(at);
        }
    }

    /// Queues [`Work::Settle`] of `at` for the next round, once.
    fn queue_settle(&mut self, at: u32) {
        let queued = &mut self.settle_queued[at as usize];
        if *queued != self.round {
            *queued = self.round;
            self.next.push(Work::Settle(at));
        }
    }

    /// Queues the judging of each dependent of `owner` that still refers to it.
    fn judge_dependents(&mut self, owner: u32) {
        let snapshot = self.snapshot;
        for &dependent in snapshot.dependents_at(owner) {
            if self.refers(dependent, owner) {
                self.touch(dependent).via.get_or_insert(owner);
                self.next.push(Work::Judge(dependent));
            }
        }
    }

    // Readings that copy nothing into the play: an object the play has not touched is as the
    // snapshot has it.

    /// The links of the references `at` has now: none once it went.
    fn links_now(&self, at: u32) -> impl Iterator<Item = (u32, &Link)> {
        let links = self.index.links(at);
        let (all, kept) = match self.played(at) {
            Some(live) if live.gone() => (0, &[][..]),
            Some(Live { kept: Some(kept), .. }) => (0, kept.as_slice()),
            _ => (links.len() as u32, &[][..]),
        };
        (0..all)
            .chain(kept.iter().copied())
            .map(move |k| (k, &links[k as usize]))
    }

    /// True when `at` is deleting its dependents in the foreground now.
    fn waits_now(&self, at: u32) -> bool {
        match self.played(at) {
            Some(live) => live.waits_for_dependents(),
            None => waits_in_snapshot(self.object(at)),
        }
    }

    /// True when `at` is, or once was, deleting its dependents in the foreground.
    fn waited(&self, at: u32) -> bool {
        match self.played(at) {
            Some(live) => live.waited,
            None => waited_in_snapshot(self.object(at)),
        }
    }

    /// True when `dependent` exists in the play and still has a reference to `owner`.
    fn refers(&self, dependent: u32, owner: u32) -> bool {
        self.links_now(dependent).any(|(_, l)| l.at == owner)
    }

    /// True when `dependent` exists in the play and refers to `owner` with `blockOwnerDeletion`.
    fn blocks(&self, dependent: u32, owner: u32) -> bool {
        if self.played(dependent).is_some_and(|l| l.unblocked) {
            return false;
        }
        let owners = &self.object(dependent).owners;
        self.links_now(dependent)
            .any(|(k, l)| l.at == owner && owners[k as usize].block_owner_deletion == Some(true))
    }

    /// `process_transitions` of `at`, which went or is being deleted.
    fn settle(&mut self, at: u32) {
        let live = self.touch(at);
        if live.gone() {
            return self.judge_dependents(at);
        }
        if !live.deleting {
            return;
        }
        if live.finalizers.orphan {
            self.orphan_dependents(at);
            self.remove_finalizer(at, |f| f.orphan = false);
        }
        let live = self.touch(at);
        if live.waits_for_dependents() {
            if !std::mem::replace(&mut live.announced, true) {
                self.judge_dependents(at);
            }
            if !self.is_blocked(at) {
                self.remove_finalizer(at, |f| f.foreground = false);
            }
        }
    }

    /// Every dependent of `owner` loses its references to it, then is judged again.
    fn orphan_dependents(&mut self, owner: u32) {
        let snapshot = self.snapshot;
        for &dependent in snapshot.dependents_at(owner) {
            if !self.refers(dependent, owner) {
                continue;
            }
            let live = self.lose_references(dependent, |link, _| link.at == owner);
            live.orphaned_from.push(owner);
            live.via.get_or_insert(owner);
            self.next.push(Work::Judge(dependent));
        }
    }

    /// `at` loses the references `lose` picks (one PATCH); its play's copy, to note why.
    fn lose_references(&mut self, at: u32, lose: impl Fn(&Link, &OwnerReference) -> bool) -> &mut Live {
        let snapshot = self.snapshot;
        let (links, owners) = (self.index.links(at), &snapshot.objects[at as usize].owners);
        let live = self.live[at as usize].get_or_insert_with(|| Live::of(&snapshot.objects[at as usize]));
        live.kept_mut(links.len())
            .retain(|k| !lose(&links[*k as usize], &owners[*k as usize]));
        self.calls.patches += 1;
        live
    }

    /// True while a dependent still there refers to `owner` with `blockOwnerDeletion`.
    fn is_blocked(&self, owner: u32) -> bool {
        self.snapshot
            .dependents_at(owner)
            .iter()
            .any(|d| self.blocks(*d, owner))
    }

    /// The collector removes a finalizer from `at` (a PATCH).
    fn remove_finalizer(&mut self, at: u32, remove: impl FnOnce(&mut Finalizers)) {
        self.calls.patches += 1;
        self.release(at, remove);
    }

    /// A finalizer leaves `at`; the object goes when it was the last one.
    fn release(&mut self, at: u32, remove: impl FnOnce(&mut Finalizers)) {
        let round = self.round;
        let live = self.touch(at);
        remove(&mut live.finalizers);
        if live.finalizers.is_empty() {
            live.gone_in = Some(round);
            self.queue_settle(at);
            self.owners_may_go(at);
        }
    }

    /// `at` went or lost references: each owner it referred to that waits for its dependents
    /// looks again.
    fn owners_may_go(&mut self, at: u32) {
        for i in 0..self.index.links(at).len() {
            let owner = self.index.links(at)[i].at;
            if owner != NOWHERE && self.waits_now(owner) {
                self.queue_settle(owner);
            }
        }
    }

    /// `attempt_to_delete_item` of `at`.
    fn judge(&mut self, at: u32) {
        let live = self.touch(at);
        if live.gone() || live.deleting || live.stuck.is_some() {
            return;
        }
        let (orphan, foreground) = (live.finalizers.orphan, live.finalizers.foreground);
        let mut solid = false;
        let mut waiting = false;
        let mut lost = Vec::new();
        let mut stuck = None;
        for (k, link) in self.links_now(at) {
            match self.read(link) {
                Err(why) => {
                    stuck = Some((k, why));
                    break;
                }
                Ok(Reading::Solid) => solid = true,
                Ok(Reading::Waiting) => {
                    waiting = true;
                    lost.push(k);
                }
                Ok(Reading::Dangling) => lost.push(k),
            }
        }
        if stuck.is_some() {
            self.touch(at).stuck = stuck;
            return;
        }
        if solid {
            return self.strip(at, lost);
        }
        if lost.is_empty() {
            return; // no reference left: nothing to judge
        }
        let has_dependents = self.snapshot.dependents_at(at).iter().any(|d| self.refers(*d, at));
        let policy = if waiting && has_dependents {
            self.unblock_on_cycle(at);
            PropagationPolicy::Foreground
        } else if orphan {
            PropagationPolicy::Orphan
        } else if foreground {
            PropagationPolicy::Foreground
        } else {
            PropagationPolicy::Background
        };
        self.calls.deletes += 1;
        self.delete(at, policy, Remover::Collector);
    }

    /// The cycle heuristic: before `at` is deleted in the foreground, if one of its dependents
    /// is or was deleting its own dependents, `at`'s references stop blocking their owners (one
    /// PATCH), so that a cycle of blocking references cannot hold every owner on it forever.
    fn unblock_on_cycle(&mut self, at: u32) {
        let cycle = self
            .snapshot
            .dependents_at(at)
            .iter()
            .any(|d| self.refers(*d, at) && self.waited(*d));
        let owners = &self.object(at).owners;
        let blocking = self
            .links_now(at)
            .any(|(k, _)| owners[k as usize].block_owner_deletion == Some(true));
        if !cycle || !blocking || self.played(at).is_some_and(|l| l.unblocked) {
            return;
        }
        self.touch(at).unblocked = true;
        self.calls.patches += 1;
        self.owners_may_go(at);
    }

    /// `at` keeps its solid owners and loses its references (positions `lost`) to the others,
    /// with every other reference to the same UIDs.
    fn strip(&mut self, at: u32, lost: Vec<u32>) {
        if lost.is_empty() {
            return;
        }
        let snapshot = self.snapshot;
        let owners = &snapshot.objects[at as usize].owners;
        let same_uid = |r: &OwnerReference| lost.iter().any(|l| owners[*l as usize].uid == r.uid);
        let live = self.lose_references(at, |_, r| same_uid(r));
        live.stripped.extend(lost);
        self.owners_may_go(at);
    }

    /// How a reference through `link` reads now; an error names why it cannot be read at all
    /// ([`Index::why`]).
    fn read(&self, link: &Link) -> Result<Reading, u32> {
        Ok(match link.target {
            Target::Unreadable(why) => return Err(why),
            Target::Absent => Reading::Dangling,
            Target::Owner if self.is_gone(link.at) => Reading::Dangling,
            Target::Owner if self.waits_now(link.at) => Reading::Waiting,
            Target::Owner => Reading::Solid,
        })
    }

    /// The owner reference `k` of `dependent`, as the plan names it.
    fn shown(&self, dependent: u32, k: u32) -> ObjectRef {
        let object = self.object(dependent);
        let r = &object.owners[k as usize];
        ObjectRef::of_ref(r, scope_of(self.served, object, r).unwrap_or_default())
    }

    /// The plan the play came to.
    fn into_plan(self, requested: Vec<ObjectRef>, policy: PropagationPolicy) -> Plan {
        let played = || {
            self.live
                .iter()
                .enumerate()
                .filter_map(|(at, l)| Some((at as u32, l.as_ref()?)))
        };
        let rounds: BTreeSet<u32> = played().filter_map(|(_, l)| l.gone_in).collect();
        let wave_of = |round: u32| rounds.iter().position(|r| *r == round).map_or(0, |i| i as u32 + 1);
        let mut steps: Vec<(u32, Step)> = Vec::new();
        for (at, live) in played() {
            let Some(fate) = self.fate(at, live, &wave_of) else {
                continue;
            };
            let order = match fate {
                Fate::Removed { wave, .. } => wave,
                _ => u32::MAX,
            };
            let step = Step {
                object: self.object_ref(at),
                via: live.via.map(|owner| self.object(owner).uid.clone()),
                fate,
            };
            steps.push((order, step));
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
    fn fate(&self, at: u32, live: &Live, wave_of: &impl Fn(u32) -> u32) -> Option<Fate> {
        let object = self.object(at);
        if let Some(round) = live.gone_in {
            return Some(Fate::Removed {
                wave: wave_of(round),
                policy: live.policy.unwrap_or(PropagationPolicy::Background),
                by: live.by.unwrap_or(Remover::Collector),
            });
        }
        if let Some(t) = self.termination.as_ref().filter(|t| t.phase == Phase::Pods) {
            if !live.deleting && object.namespace == t.name && !is_pod(object) {
                return Some(Fate::WaitsForPods {
                    pods: self.held_among(&t.pods),
                });
            }
        }
        let released = Finalizers::of(object) != live.finalizers;
        if live.deleting && (live.policy.is_some() || released) {
            return Some(Fate::Held {
                why: self.hold(at, live),
            });
        }
        let stripped = || live.stripped.iter().map(|k| self.shown(at, *k));
        if !live.orphaned_from.is_empty() {
            let orphaned_from = live.orphaned_from.iter().map(|owner| self.object_ref(*owner));
            return Some(Fate::Orphaned {
                loses: orphaned_from.chain(stripped()).collect(),
            });
        }
        if let Some((k, why)) = &live.stuck {
            let r = &object.owners[*k as usize];
            return Some(Fate::Stuck {
                owner: ObjectRef::of_ref(r, &object.namespace),
                why: self.index.why(*why).to_string(),
            });
        }
        if !live.stripped.is_empty() {
            let by = self
                .links_now(at)
                .map(|(k, link)| {
                    let namespace = (link.at != NOWHERE).then(|| self.object(link.at).namespace.as_str());
                    ObjectRef::of_ref(&object.owners[k as usize], namespace.unwrap_or(""))
                })
                .collect();
            return Some(Fate::Kept {
                by,
                loses: stripped().collect(),
            });
        }
        None
    }

    /// Why `at`, being deleted, is still there at the end.
    fn hold(&self, at: u32, live: &Live) -> Hold {
        let others = live.finalizers.not_the_collectors(self.object(at));
        match &self.termination {
            Some(t) if live.finalizers.kubernetes && t.at == at => {
                let contents = t.pods.iter().chain(&t.rest);
                let left: Vec<u32> = contents.copied().filter(|c| !self.is_gone(*c)).collect();
                Hold::Contents {
                    left: left.len(),
                    held: self.held_among(&left),
                }
            }
            _ if others.is_empty() => Hold::BlockingDependents {
                dependents: self.still_blocking(at),
            },
            _ => Hold::Finalizers { finalizers: others },
        }
    }

    /// The objects among `objects` still there and being deleted at the end: held.
    fn held_among(&self, objects: &[u32]) -> Vec<ObjectRef> {
        let mut held: Vec<ObjectRef> = objects
            .iter()
            .filter(|at| self.played(**at).is_some_and(|l| l.deleting && !l.gone()))
            .map(|at| self.object_ref(*at))
            .collect();
        held.sort();
        held
    }

    /// The dependents of `owner` still blocking it at the end.
    fn still_blocking(&self, owner: u32) -> Vec<ObjectRef> {
        let dependents = self.snapshot.dependents_at(owner).iter();
        let mut blocking: Vec<ObjectRef> = dependents
            .filter(|d| self.blocks(**d, owner))
            .map(|d| self.object_ref(*d))
            .collect();
        blocking.sort();
        blocking
    }
}

/// True when `object`, untouched by the play, is deleting its dependents in the foreground.
fn waits_in_snapshot(object: &Object) -> bool {
    object.deleting && object.finalizers.iter().any(|f| f == FINALIZER_FOREGROUND)
}

/// True when `object`, untouched by the play, is or once was deleting its dependents in the
/// foreground.
fn waited_in_snapshot(object: &Object) -> bool {
    object.waited || waits_in_snapshot(object)
}
