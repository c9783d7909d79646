//! The router: events for one UID go to one builder partition, in the order they were sent.
//!
//! Every [`GraphEvent`] enters the graph through [`Router::route`], whether it comes from a
//! monitor's watch or from a collector worker's virtual delete. The partition is
//! `uid.hash64() % partitions`, the same hash the graph shards by; each partition is a FIFO channel drained by one builder, which is what
//! keeps per-object order. `in_flight` counts events routed but not yet applied, so callers can
//! tell when the builders are quiet.

use crate::event::GraphEvent;
use crate::graph::Uid;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc;

/// The partition of `uid` among `partitions` builders: what the router uses, for callers that
/// split a stream ahead of time (benches, `loadgen`).
pub fn partition(uid: &Uid, partitions: usize) -> usize {
    (uid.hash64() % partitions.max(1) as u64) as usize
}

/// The receiving end of one partition, drained by its builder.
pub type PartitionReceiver = mpsc::UnboundedReceiver<GraphEvent>;

/// Sends events to builder partitions. Cheap to clone.
#[derive(Clone)]
pub struct Router {
    partitions: Arc<[mpsc::UnboundedSender<GraphEvent>]>,
    in_flight: Arc<AtomicUsize>,
}

impl Router {
    /// A router over `partitions` FIFOs (at least one), with the receiver of each.
    pub fn new(partitions: usize) -> (Router, Vec<PartitionReceiver>) {
        let (senders, receivers): (Vec<_>, Vec<_>) = (0..partitions.max(1)).map(|_| mpsc::unbounded_channel()).unzip();
        let router = Router {
            partitions: senders.into(),
            in_flight: Arc::new(AtomicUsize::new(0)),
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
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        if self.partitions[p].send(event).is_err() {
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Builder only: one event was applied.
    pub fn applied(&self) {
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
    }

    /// Events routed but not yet applied.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// Number of partitions.
    pub fn partitions(&self) -> usize {
        self.partitions.len()
    }
}
