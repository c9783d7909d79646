//! The parts of the `kube-gc` command that other programs and the end-to-end tests reach too: the
//! collector's HTTP endpoints ([`server`]) and `kube-gc tree` ([`tree`]). The subcommands' flags
//! and their wiring live in the binary (`src/main.rs` and `src/command/`).
//!
//! This crate is where kube-gc meets HTTP serving (axum, hyper, TLS): the engine (`kube_gc`)
//! serves nothing itself.

#![deny(missing_docs)]
#![allow(clippy::mutable_key_type)]
#![allow(rustdoc::private_intra_doc_links)]

pub mod plan;
pub mod server;
pub mod tree;
