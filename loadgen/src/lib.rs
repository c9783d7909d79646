//! loadgen: watch streams for kube-gc, generated or recorded, and replays that measure the
//! collector on them.
//!
//! - [`stream`]: the on-disk format, read and written;
//! - [`generate`]: synthetic streams from a topology and a seed;
//! - [`record`]: a real cluster's watch events, metadata only, recorded into a stream;
//! - [`replay`]: a stream applied to the graph builders alone, or to the whole collector against
//!   the in-memory cluster, measured in a [`report`];
//! - [`progress`]: progress bars for the long steps;
//! - [`sync`]: `kube-gc run` syncing a simulated cluster over HTTP, timed and measured.

pub mod generate;
pub mod progress;
pub mod record;
pub mod replay;
pub mod report;
pub mod stream;
pub mod sync;
