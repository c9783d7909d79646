//! The in-memory simulated cluster.
