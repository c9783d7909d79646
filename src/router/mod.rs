//! The router: events for one UID go to one builder partition, in the order they were sent.
//!
//! Every [`GraphEvent`] enters the graph through [`Router::route`], whether it comes from a
//! monitor's watch or from a collector worker's virtual delete. The partition is
//! `uid.hash64() % partitions`, the same hash the graph shards by; each partition is a FIFO channel
//! drained by one builder, which is what keeps per-object order.
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

/// The partition of `uid` among `partitions` builders: what the router uses, for callers that
/// split a stream ahead of time (benches, `loadgen`).
pub fn partition(uid: &Uid, partitions: usize) -> usize {
    (uid.hash64() % partitions.max(1) as u64) as usize
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

/// The receiving end of one partition, drained by its builder, which reports each event it has
/// applied through [`PartitionReceiver::applied`]. Not `Clone`: it is the partition's only writer
/// of its applied count.
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

    /// The partition that owns `uid`.
    pub fn partition_of(&self, uid: &Uid) -> usize {
        partition(uid, self.partitions.len())
    }

    /// Queues `event` for the builder of its UID's partition. Events routed after the builders
    /// stopped are dropped: the graph is going away with them.
    pub fn route(&self, event: GraphEvent) {
        let p = self.partition_of(&event.object.uid);
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

    /// Counts one received event as applied: its effects on the graph are complete.
    pub fn applied(&mut self) {
        self.applied += 1;
        self.counts.applied[self.partition].store(self.applied, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventType;
    use crate::graph::Graph;

    fn event(graph: &Graph, i: usize) -> GraphEvent {
        let meta = crate::api::ObjectMeta {
            name: format!("p{i}"),
            namespace: "default".into(),
            uid: Uid::new_v4(i as u128 + 1).to_string(),
            ..Default::default()
        };
        GraphEvent::observed(graph, EventType::Add, &meta, "v1", "Pod").expect("an event")
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
                receiver.applied();
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
        let later_uid = later.object.uid;
        router.route(later); // routed after the barrier began: not waited for
        for receiver in &mut receivers {
            while let Some(e) = receiver.try_recv() {
                if e.object.uid != later_uid {
                    receiver.applied();
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
            receivers[0].applied();
        }
        assert!(
            tokio::time::timeout(wait, router.room()).await.is_ok(),
            "3 in flight: room"
        );
    }
}
