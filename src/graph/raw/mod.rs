//! Every `unsafe` block of the graph, in one place: the representations and the lock-free table
//! whose soundness the compiler cannot check, each block with the `SAFETY:` proof of why it
//! holds. The rest of the graph, and the rest of the crate, is safe code
//! (`#![deny(unsafe_code)]` at the crate's root; this module alone is allowed it).
//!
//! - [`table`]: the sharded lock-free `uid → node` table, and [`reclaim`], the deferred
//!   reclamation of what its writers take out;
//! - [`handle`]: node handles as the raw pointers the table's slots hold;
//! - [`uid`]: a UID packed into 128 bits, or an index into the table of other strings;
//! - [`name`]: an object's name in one block with its count and length;
//! - [`object_name`]: an identity's name, whole or a shared stem and an inline suffix;
//! - [`links`]: a node's owners and dependents in one word;
//! - [`intern`]: interned strings, (apiVersion, kind) pairs and (namespace, apiVersion, kind)
//!   scopes, counted by their holders.
//!
//! Their atomics come from [`crate::sync`], so that the loom models (`graph::loom_models`)
//! explore the table's and reclamation's interleavings; the counts of names and interned values
//! take `crate::sync`'s process-wide atomics, which are `std`'s in every build, since an interned
//! value outlives any one loom execution. Miri runs every test of this module (the CI's Miri
//! step), loom the table's models.

pub(in crate::graph) mod handle;
pub(in crate::graph) mod intern;
pub(in crate::graph) mod links;
pub(in crate::graph) mod name;
pub(in crate::graph) mod object_name;
pub(in crate::graph) mod reclaim;
pub(in crate::graph) mod table;
pub(in crate::graph) mod uid;
