//! loadgen: watch streams for kube-gc, generated or recorded, and replays that measure the
//! collector on them.
//!
//! - [`stream`]: the on-disk format, read and written.

pub mod stream;
