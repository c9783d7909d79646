//! kube-gc's integration tests, as one test binary so that the crate is linked once.
//!
//! Each module is one area, as gc-spec.md and docs/ name them; `support` is the kit they
//! share (the [`support::Harness`] and [`support::Rig`], the reference model, process helpers).
//! Run one area with `cargo test --test it AREA::`, for example `cargo test --test it
//! conformance_graph::`.

mod support;

mod api_layers;
mod audit;
mod bad_input;
mod conformance_cluster;
mod conformance_graph;
mod conformance_units;
mod crd_churn;
mod differential;
mod downtime;
mod drop_in;
mod fast_path;
mod fault_suite;
mod fuzz_corpus;
mod hostile_names;
mod kubectl;
mod layout;
mod list_pages;
mod membership_sim;
mod monitor;
mod over_http;
mod partial_view;
mod plan;
mod protobuf;
mod python_client;
mod ruby_client;
mod secure_serving;
mod shards;
mod sim_apiserver;
mod sim_apiserver_restart;
mod sim_surface;
mod sim_validation;
mod stall;
mod storage_migration;
mod tree;
mod unserved_version;
