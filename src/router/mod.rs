//! The router: events for one UID go to one builder partition, in the order they were sent.
//!
//! Every [`GraphEvent`] enters the graph through [`Router::route`], whether it comes from a
//! monitor's watch or from a collector worker's virtual delete. The partition is chosen by the
//! object's namespace, and by its UID when it is cluster-scoped ([`partition`]); each partition is
//! a FIFO channel drained by one builder. An object's namespace and UID never change, so all its
//! events take one channel, which is what keeps per-object order.
//!
//! Why the namespace: ownerReferences never cross namespaces (except to cluster-scoped owners),
//! so an object and its namespaced owners share a builder, and the edges a builder writes are
//! almost all on nodes that no other builder writes. Partitioned by UID instead, a ReplicaSet's
//! pods were spread over every partition, and each pod's builder locked and grew the ReplicaSet's
//! dependents: the owner's cache lines moved between cores at nearly every event (on the 1M
//! stream, P = 2 / P = 1 throughput 1.23–1.26 by UID, 1.53–1.57 by namespace). The price: a
//! namespace is never split, so a cluster whose objects sit in a few namespaces gets no more
//! builders than it has namespaces.
//!
//! # Counts
//!
//! Each partition has two counts on cache lines of their own: events routed to it, raised by
//! whoever routes, and events its builder applied, written by that partition's
//! [`PartitionReceiver`] alone with a plain store (its builder pays no read-modify-write and
//! shares no line with another builder). Everything else is derived from them: the events in
//! flight ([`Router::in_flight`], which tells callers when the builders are quiet) and the
//! builders' metrics ([`crate::builder::metrics`]).
//!
//! # Room
//!
//! The partitions' channels have no bound of their own, because two kinds of sender share them:
//! monitors, and collector workers routing virtual deletes. A worker must never wait on a
//! builder: a builder fills the workers' queues, so a full channel could close a cycle. Monitors
//! may wait, and do ([`Router::room`]): before they route a list page, and every 64 watch events,
//! they wait while [`MAX_IN_FLIGHT`] events are in flight. So the channels hold at most that many
//! events plus one page or 64 events per monitor plus the workers' virtual deletes, which are bounded by
//! the work queues' items; builders never wait on anything, so the wait always ends.
//!
//! Invariant: an event is counted as routed before it is sent, and as applied only after its
//! builder applied it (a Release store, read with Acquire). [`Router::in_flight`] reads every
//! applied count before any routed count, so it never reports fewer events in flight than there
//! were when it began, and 0 means every routed event's effects are visible.

use crate::event::GraphEvent;
use crate::graph::Uid;
use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc;

/// The partition among `partitions` builders of the object `uid` in `namespace` (`""` when
/// cluster-scoped): what the router uses, for callers that split a stream ahead of time (benches,
/// `loadgen`). See the [module docs](self) for why the namespace.
pub fn partition(namespace: &str, uid: &Uid, partitions: usize) -> usize {
    let hash = if namespace.is_empty() {
        uid.hash64()
    } else {
        namespace_hash(namespace)
    };
    (hash % partitions.max(1) as u64) as usize
}

/// The namespace's hash under foldhash's fixed seed (the hasher the graph's own sets use): the
/// same in every process, so a stream split ahead of time matches the router.
fn namespace_hash(namespace: &str) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::default().hash_one(namespace)
}

/// Events in flight above which monitors wait for the builders ([`Router::room`]): about a
/// hundred megabytes of decoded objects, and seconds of the builders' work.
pub const MAX_IN_FLIGHT: u64 = 1 << 18;

/// The two counts of every partition, by index.
struct Counts {
    routed: Box<[CachePadded<AtomicU64>]>,
    applied: Box<[CachePadded<AtomicU64>]>,
}

/// Sends events to builder partitions. Cheap to clone.
#[derive(Clone)]
pub struct Router {
    partitions: Arc<[mpsc::UnboundedSender<GraphEvent>]>,
    counts: Arc<Counts>,
    /// Events in flight above which [`Router::room`] waits.
    room: u64,
}

/// The receiving end of one partition, drained by its builder, which reports the events it has
/// applied through [`PartitionReceiver::applied`], a run of events at a time. Not `Clone`: it is
/// the partition's only writer of its applied count.
pub struct PartitionReceiver {
    events: mpsc::UnboundedReceiver<GraphEvent>,
    counts: Arc<Counts>,
    partition: usize,
    /// This partition's applied count, which only this receiver changes.
    applied: u64,
}

impl Router {
    /// A router over `partitions` FIFOs (at least one), with the receiver of each.
    pub fn new(partitions: usize) -> (Router, Vec<PartitionReceiver>) {
        Router::with_room(partitions, MAX_IN_FLIGHT)
    }

    /// [`Router::new`], with monitors waiting while `room` events are in flight.
    pub fn with_room(partitions: usize, room: u64) -> (Router, Vec<PartitionReceiver>) {
        let partitions = partitions.max(1);
        let zeros = || (0..partitions).map(|_| CachePadded::new(AtomicU64::new(0))).collect();
        let counts = Arc::new(Counts {
            routed: zeros(),
            applied: zeros(),
        });
        let (senders, receivers): (Vec<_>, Vec<_>) = (0..partitions)
            .map(|partition| {
                let (sender, events) = mpsc::unbounded_channel();
                let receiver = PartitionReceiver {
                    events,
                    counts: counts.clone(),
                    partition,
                    applied: 0,
                };
                (sender, receiver)
            })
            .unzip();
        let router = Router {
            partitions: senders.into(),
            counts,
            room: room.max(1),
        };
        (router, receivers)
    }

    /// Queues `event` for the builder of its object's partition. Events routed after the builders
    /// stopped are dropped: the graph is going away with them.
    pub fn route(&self, event: GraphEvent) {
        let object = &event.object;
        let p = partition(event.namespace(), &object.uid, self.partitions.len());
        self.counts.routed[p].fetch_add(1, Ordering::AcqRel);
        if self.partitions[p].send(event).is_err() {
            self.counts.routed[p].fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Events routed but not yet applied; see the [module docs](self).
    pub fn in_flight(&self) -> u64 {
        let applied: u64 = self.applied_totals().iter().sum();
        let routed: u64 = self.counts.routed.iter().map(|r| r.load(Ordering::Acquire)).sum();
        routed.saturating_sub(applied)
    }

    /// Events each partition's builder has applied, by partition.
    pub fn applied_totals(&self) -> Vec<u64> {
        self.counts.applied.iter().map(|a| a.load(Ordering::Acquire)).collect()
    }

    /// Waits, at most `patience`, until every event routed before the call has been applied;
    /// true if they were. Events routed meanwhile may still be in flight.
    ///
    /// This is the barrier a worker passes before a decision that rests on the graph holding
    /// *everything* already received (DESIGN §3b): events of one watch go to different
    /// partitions, so the event that made an item due can be applied before an earlier event of
    /// another partition. False means the builders did not catch up in time (or stopped), and the
    /// caller must not decide now.
    pub async fn caught_up(&self, patience: std::time::Duration) -> bool {
        let routed: Vec<u64> = self.counts.routed.iter().map(|r| r.load(Ordering::Acquire)).collect();
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            let behind = self
                .counts
                .applied
                .iter()
                .zip(&routed)
                .any(|(applied, &routed)| applied.load(Ordering::Acquire) < routed);
            if !behind {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }

    /// Waits while the builders are `room` events behind; see the [module docs](self). Only
    /// monitors call it; it polls, because it waits only when the builders are overrun.
    pub async fn room(&self) {
        while self.in_flight() >= self.room {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }

    /// Number of partitions.
    pub fn partitions(&self) -> usize {
        self.partitions.len()
    }
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router")
            .field("partitions", &self.partitions.len())
            .field("in_flight", &self.in_flight())
            .finish()
    }
}

impl PartitionReceiver {
    /// The next event, once one is routed; `None` once every router is gone.
    pub async fn recv(&mut self) -> Option<GraphEvent> {
        self.events.recv().await
    }

    /// The next event if one is waiting.
    pub fn try_recv(&mut self) -> Option<GraphEvent> {
        self.events.try_recv().ok()
    }

    /// Counts `events` more received events as applied: their effects on the graph are complete.
    pub fn applied(&mut self, events: u64) {
        self.applied += events;
        self.counts.applied[self.partition].store(self.applied, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventType;
    use crate::graph::Graph;

    fn event(graph: &Graph, i: usize) -> GraphEvent {
        event_in(graph, &format!("ns-{i}"), i)
    }

    fn event_in(graph: &Graph, namespace: &str, i: usize) -> GraphEvent {
        let meta = crate::api::ObjectMeta {
            name: format!("p{i}"),
            namespace: namespace.into(),
            uid: Uid::new_v4(i as u128 + 1).to_string(),
            ..Default::default()
        };
        GraphEvent::observed(graph, EventType::Add, &meta, "v1", "Pod").expect("an event")
    }

    #[test]
    fn partition_should_keep_a_namespace_together_and_spread_namespaces_and_cluster_scoped_uids() {
        let uids: Vec<Uid> = (0..200).map(|i| Uid::new_v4(i + 1)).collect();
        for partitions in [1, 2, 4] {
            let of_namespace: std::collections::HashSet<usize> =
                uids.iter().map(|u| partition("team-0042", u, partitions)).collect();
            assert_eq!(of_namespace.len(), 1, "one namespace, one partition (P = {partitions})");
            let cluster_scoped: std::collections::HashSet<usize> =
                uids.iter().map(|u| partition("", u, partitions)).collect();
            assert_eq!(cluster_scoped.len(), partitions, "cluster-scoped objects spread by UID");
            let mut per_partition = vec![0; partitions];
            for n in 0..100 {
                per_partition[partition(&format!("team-{n:04}"), &uids[0], partitions)] += 1;
            }
            assert!(
                per_partition.iter().all(|&count| count >= 100 / partitions / 2),
                "namespaces spread over the partitions: {per_partition:?}"
            );
        }
    }

    #[test]
    fn route_should_send_an_object_to_its_namespace_partition() {
        let graph = Graph::new();
        let (router, mut receivers) = Router::new(4);
        for i in 0..40 {
            router.route(event_in(&graph, "apps", i));
        }
        let expected = partition("apps", &Uid::new_v4(1), 4);
        for (p, receiver) in receivers.iter_mut().enumerate() {
            let mut received = 0;
            while receiver.try_recv().is_some() {
                received += 1;
            }
            assert_eq!(received, if p == expected { 40 } else { 0 }, "partition {p}");
        }
    }

    #[tokio::test]
    async fn in_flight_should_count_routed_events_until_their_builder_applies_them() {
        let graph = Graph::new();
        let (router, mut receivers) = Router::new(2);
        for i in 0..10 {
            router.route(event(&graph, i));
        }
        assert_eq!(router.in_flight(), 10);
        let mut applied = 0;
        for receiver in &mut receivers {
            while receiver.try_recv().is_some() {
                receiver.applied(1);
                applied += 1;
                assert_eq!(router.in_flight(), 10 - applied);
            }
        }
        assert_eq!(applied, 10);
        let totals = router.applied_totals();
        assert_eq!(totals.iter().sum::<u64>(), 10, "{totals:?}");
        drop(receivers);
        router.route(event(&graph, 11));
        assert_eq!(
            router.in_flight(),
            0,
            "an event no builder will receive is not in flight"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn caught_up_should_wait_for_events_routed_before_it_and_no_others() {
        let graph = Graph::new();
        let (router, mut receivers) = Router::new(2);
        for i in 0..6 {
            router.route(event(&graph, i));
        }
        let patience = std::time::Duration::from_secs(1);
        assert!(!router.caught_up(patience).await, "nothing applied yet");
        let waiter = tokio::spawn({
            let router = router.clone();
            async move { router.caught_up(patience).await }
        });
        tokio::task::yield_now().await;
        let later = event(&graph, 100);
        let later_uid = later.object.uid.clone();
        router.route(later); // routed after the barrier began: not waited for
        for receiver in &mut receivers {
            while let Some(e) = receiver.try_recv() {
                if e.object.uid != later_uid {
                    receiver.applied(1);
                }
            }
        }
        assert_eq!(router.in_flight(), 1, "only the later event is left unapplied");
        assert!(
            waiter.await.expect("the barrier task"),
            "every earlier event was applied"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn room_should_hold_monitors_while_the_builders_are_behind_and_never_workers() {
        let graph = Graph::new();
        let (router, mut receivers) = Router::with_room(1, 4);
        for i in 0..4 {
            router.route(event(&graph, i));
        }
        let wait = std::time::Duration::from_secs(1);
        assert!(
            tokio::time::timeout(wait, router.room()).await.is_err(),
            "4 in flight: no room"
        );
        router.route(event(&graph, 4)); // a worker's virtual delete never waits
        assert_eq!(router.in_flight(), 5);
        for _ in 0..2 {
            receivers[0].try_recv().expect("routed");
            receivers[0].applied(1);
        }
        assert!(
            tokio::time::timeout(wait, router.room()).await.is_ok(),
            "3 in flight: room"
        );
    }
}
