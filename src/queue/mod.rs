//! De-duplicating, rate-limited work queues (spec §7.1): an item is queued at most once, and no
//! two consumers hold the same item at the same time.
//!
//! The model is client-go's `workqueue`:
//!
//! - [`WorkQueue::add`] of an item that is already waiting does nothing. Adding an item a consumer
//!   holds marks it *dirty*; it is queued again, once, when the consumer calls
//!   [`WorkQueue::done`].
//! - [`WorkQueue::add_rate_limited`] re-adds an item after
//!   `max(base · 2^failures capped at max, wait for a token of a global bucket)`; every call counts
//!   one failure for that item, and [`WorkQueue::forget`] clears them. [`RateLimiterConfig`]'s
//!   default is upstream's: 5 ms, 1000 s, 10 qps, burst 100.
//! - [`WorkQueue::add_after`] delivers an item later through one background task per queue, so it
//!   must be called inside a Tokio runtime. Time is Tokio's, so a paused test clock drives both
//!   the delays and the token bucket.
//! - After [`WorkQueue::shut_down`] adds are dropped and consumers drain what is left, then
//!   [`WorkQueue::get`] returns `None`.
//!
//! No operation takes a queue-wide lock: each item's state is one atomic word in a concurrent
//! map, queued items wait in a lock-free FIFO, and delayed adds in a lock-free skip list. The
//! item state machine, why it never hands an item to two consumers and why no wake-up is lost are
//! set out at the top of `work_queue.rs`; `loom_models.rs` model-checks it
//! (`cargo test --release -p kube-gc --lib --features loom -- queue::`). Only the rate limiter's
//! bookkeeping of failures sits behind a mutex, taken once per rate-limited add.
//!
//! Who calls what, in upstream's roles: monitors, and collector workers reporting a vanished
//! object, [`add`](WorkQueue::add) events to [`GRAPH_CHANGES`], which the builder drains; the
//! builder adds node handles to [`ATTEMPT_TO_DELETE`] and [`ATTEMPT_TO_ORPHAN`]; collector workers
//! [`get`](WorkQueue::get) from those, call [`done`](WorkQueue::done) after every item, and then
//! either [`forget`](WorkQueue::forget) it (success) or
//! [`add_rate_limited`](WorkQueue::add_rate_limited) it (retry). Graph changes are never retried.

mod delay;
mod items;
#[cfg(all(test, feature = "loom"))]
mod loom_models;
mod metrics;
mod rate_limiter;
mod slot;
#[cfg(all(test, not(feature = "loom")))]
mod stress;
mod work_queue;

pub use metrics::{DurationHistogram, QueueStats, DURATION_BUCKETS};
pub use rate_limiter::{RateLimiter, RateLimiterConfig};
pub use work_queue::{QueueState, WorkQueue};

/// Name of the queue of graph events (upstream's `graphChanges`).
pub const GRAPH_CHANGES: &str = "garbage_collector_graph_changes";
/// Name of the queue of nodes to consider for deletion (upstream's `attemptToDelete`).
pub const ATTEMPT_TO_DELETE: &str = "garbage_collector_attempt_to_delete";
/// Name of the queue of nodes whose dependents are to be orphaned (upstream's `attemptToOrphan`).
pub const ATTEMPT_TO_ORPHAN: &str = "garbage_collector_attempt_to_orphan";
