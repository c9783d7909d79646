//! kube-gc: the Kubernetes garbage collector, rebuilt for clusters with millions of objects.
//!
//! Events flow through one module per stage (see the README's data-flow diagram):
//!
//! - [`monitor`]: one watch per deletable resource turns objects into [`event::GraphEvent`]s;
//! - [`router`]: sends each event to the builder partition that owns its UID;
//! - [`builder`]: applies events to the shared [`graph`] and feeds the work queues;
//! - [`queue`]: de-duplicating, rate-limited work queues of node handles;
//! - [`collector`]: workers that decide and carry out deletion, orphaning and finalizer removal
//!   through [`api::ClusterApi`];
//! - [`controller`]: wires the stages together and owns configuration and lifecycle;
//! - [`audit`]: now and then compares a sample of the graph with the API server and routes what a
//!   relist would for the drift it finds.
//!
//! Beside the flow, [`model`] is the reference model of the collector's decisions that the
//! differential tests and `loadgen replay --mode full` check the engine against, and [`tree`]
//! draws one object's owners and dependents for a person (`kube-gc tree`).
//!
//! `gc-spec` section numbers in the docs refer to the behavioural contract kube-gc follows.

#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
// `graph::Handle` hashes and compares by pointer, so the interior mutability of the node behind it
// never changes a set or map key.
#![allow(clippy::mutable_key_type)]
// Module docs name the private modules and items that carry their invariants out; developers read
// them with `cargo doc --document-private-items`, where every such link resolves.
#![allow(rustdoc::private_intra_doc_links)]

pub mod allocator;
pub mod api;
pub mod audit;
pub mod builder;
pub mod collector;
pub mod controller;
pub mod duration;
pub mod event;
pub mod feature_gates;
#[doc(hidden)]
pub mod fuzzing;
pub mod generate;
pub mod graph;
pub mod journal;
pub mod leader;
pub mod model;
pub mod monitor;
pub mod queue;
pub mod rate;
pub mod recorder;
pub mod router;
pub mod server;
pub mod shard;
pub mod sim;
pub mod simulate;
mod sync;
pub mod tree;
