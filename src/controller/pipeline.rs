//! The one assembly of the stages between the monitors and the cluster: the graph, the router
//! with its partitions, the builders, the two work queues, the absent-owner cache, the event
//! recorder, and the [`Collector`] whose workers read them.
//!
//! Invariants the assembly keeps, so that no caller has to:
//!
//! - every stage shares one graph, one pair of queues and one absent-owner cache: what a builder
//!   queues is what a worker takes, and an owner a worker finds absent is one the builder skips;
//! - only the builders get the graph's [`GraphWriter`]; the collector, and whoever holds the
//!   pipeline, read it through [`Graph`];
//! - the graph keeps tombstones of deleted owners only for workers that trust it (tombstones
//!   serve the fast path; `verify_with_get` reads every owner live instead).
//!
//! The controller ([`GarbageCollector::start`](super::GarbageCollector::start)), the end-to-end
//! tests' rig and the benches all build their pipeline here.

use crate::api::{ClusterApi, SharedRestMapper};
use crate::builder::GraphBuilder;
use crate::collector::{Collector, CollectorConfig, PartialView};
use crate::graph::{AbsentOwnerCache, Graph, GraphWriter, DEFAULT_TOMBSTONE_CAPACITY};
use crate::journal::Journal;
use crate::queue::{self, RateLimiterConfig, WorkQueue};
use crate::recorder::{EventRecorder, EventSink};
use crate::router::{PartitionReceiver, Router};
use crate::shard::Shard;
use std::sync::Arc;

/// The assembled stages. The caller runs [`builder`](Pipeline::builder) once per partition
/// receiver, the collector's workers, and drains [`events`](Pipeline::events) to the cluster.
pub struct Pipeline<C> {
    /// The graph, read-only: only the builders write it.
    pub graph: Arc<Graph>,
    /// Where monitors and workers send graph events.
    pub router: Router,
    /// One receiver per builder partition, in partition order.
    pub partitions: Vec<PartitionReceiver>,
    /// The builder every partition runs (clones share the graph's writer, queues and cache).
    pub builder: GraphBuilder,
    /// The workers' side.
    pub collector: Arc<Collector<C>>,
    /// The Events that the builder and the workers recorded, to send to the cluster.
    pub events: EventSink,
}

impl<C: ClusterApi> Pipeline<C> {
    /// Settings for a pipeline over `api`, each at its default until set.
    pub fn builder(api: Arc<C>) -> PipelineBuilder<C> {
        PipelineBuilder {
            api,
            partitions: 1,
            rate_limiter: RateLimiterConfig::default(),
            absent_owner_cache_capacity: crate::graph::DEFAULT_ABSENT_OWNER_CACHE_CAPACITY,
            collector: CollectorConfig::default(),
            journal: Journal::disabled(),
            shard: Arc::new(Shard::whole()),
            partial_view: PartialView::complete(),
            mapper: Arc::new(SharedRestMapper::default()),
        }
    }
}

/// The settings of a [`Pipeline`]; [`build`](PipelineBuilder::build) assembles it.
#[must_use]
pub struct PipelineBuilder<C> {
    api: Arc<C>,
    partitions: usize,
    rate_limiter: RateLimiterConfig,
    absent_owner_cache_capacity: usize,
    collector: CollectorConfig,
    journal: Journal,
    shard: Arc<Shard>,
    partial_view: PartialView,
    mapper: Arc<SharedRestMapper>,
}

impl<C: ClusterApi> PipelineBuilder<C> {
    /// Builder partitions (default 1).
    pub fn partitions(self, partitions: usize) -> Self {
        PipelineBuilder { partitions, ..self }
    }

    /// The work queues' rate limiter.
    pub fn rate_limiter(self, rate_limiter: RateLimiterConfig) -> Self {
        PipelineBuilder { rate_limiter, ..self }
    }

    /// The absent-owner cache's capacity.
    pub fn absent_owner_cache_capacity(self, absent_owner_cache_capacity: usize) -> Self {
        PipelineBuilder {
            absent_owner_cache_capacity,
            ..self
        }
    }

    /// The workers' settings.
    pub fn collector(self, collector: CollectorConfig) -> Self {
        PipelineBuilder { collector, ..self }
    }

    /// Where writes are journaled; in shadow mode the builders also witness other collectors'
    /// writes into it (default: no journal).
    pub fn journal(self, journal: Journal) -> Self {
        PipelineBuilder { journal, ..self }
    }

    /// The part of the cluster the workers act on (default: the whole of it).
    pub fn shard(self, shard: Arc<Shard>) -> Self {
        PipelineBuilder { shard, ..self }
    }

    /// What the workers know of the monitors' views (default: complete).
    pub fn partial_view(self, partial_view: PartialView) -> Self {
        PipelineBuilder { partial_view, ..self }
    }

    /// The REST mapper the workers resolve owner references with (default: empty until the
    /// controller's first discovery fills it).
    pub fn mapper(self, mapper: Arc<SharedRestMapper>) -> Self {
        PipelineBuilder { mapper, ..self }
    }

    /// Assembles the stages.
    pub fn build(self) -> Pipeline<C> {
        let tombstones = if self.collector.verify_with_get {
            0
        } else {
            DEFAULT_TOMBSTONE_CAPACITY
        };
        let writer = GraphWriter::with_tombstones(tombstones);
        let graph = writer.graph().clone();
        let (router, partitions) = Router::new(self.partitions);
        let attempt_to_delete = WorkQueue::new(queue::ATTEMPT_TO_DELETE, self.rate_limiter);
        let attempt_to_orphan = WorkQueue::new(queue::ATTEMPT_TO_ORPHAN, self.rate_limiter);
        let absent_owner_cache = Arc::new(AbsentOwnerCache::new(self.absent_owner_cache_capacity));
        let (recorder, events) = EventRecorder::new();
        let builder = GraphBuilder::new(
            writer,
            attempt_to_delete.clone(),
            attempt_to_orphan.clone(),
            absent_owner_cache.clone(),
            recorder.clone(),
        )
        .witnessing(self.journal.clone());
        let collector = Arc::new(Collector {
            api: self.api,
            mapper: self.mapper,
            graph: graph.clone(),
            router: router.clone(),
            attempt_to_delete,
            attempt_to_orphan,
            absent_owner_cache,
            partial_view: self.partial_view,
            config: self.collector,
            journal: self.journal,
            events: recorder,
            shard: self.shard,
        });
        Pipeline {
            graph,
            router,
            partitions,
            builder,
            collector,
            events,
        }
    }
}
