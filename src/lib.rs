//! kube-gc: the Kubernetes garbage collector, rebuilt for clusters with millions of objects.
//!
//! Events flow through one module per stage (see the data-flow diagram of the README and of docs/design.md):
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
//! Beside the flow: [`migrator`] carries out storage version migrations over the graph, and
//! [`plan`] plays a delete forward on a snapshot of it, to show what it would do before it is
//! sent.
//!
//! This crate is the engine alone, for a program to embed: it serves no HTTP and holds no
//! simulator. Beside it in the workspace, `kube-gc-sim` (`sim/`) is the simulated API server with
//! the generator of synthetic clusters and the reference model of the collector's decisions, and
//! `kube-gc-cli` (`cli/`) is the `kube-gc` command with the collector's HTTP endpoints and
//! `kube-gc tree`.
//!
//! `gc-spec` section numbers in the docs refer to the behavioural contract kube-gc follows.

#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
// Unsafe code lives in three places only, each allowed it where it is declared: the graph's
// `raw` module, the allocator's glue and the `sync` shim's word lock.
#![deny(unsafe_code)]
// `graph::Handle` hashes and compares by pointer, so the interior mutability of the node behind it
// never changes a set or map key.
#![allow(clippy::mutable_key_type)]
// Module docs name the private modules and items that carry their invariants out; developers read
// them with `cargo doc --document-private-items`, where every such link resolves.
#![allow(rustdoc::private_intra_doc_links)]

#[allow(unsafe_code)]
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
pub mod graph;
pub mod journal;
pub mod leader;
pub mod migrator;
pub mod monitor;
pub mod plan;
pub mod queue;
pub mod rate;
pub mod recorder;
pub mod router;
pub mod shard;
#[allow(unsafe_code)]
mod sync;
