//! loadgen: watch streams for kube-gc, generated or recorded, and replays that measure the
//! collector on them.
//!
//! - [`stream`]: the on-disk format, read and written;
//! - [`generate`]: synthetic streams from a topology and a seed;
//! - [`record`]: a real cluster's watch events, metadata only, recorded into a stream;
//! - [`replay`]: a stream applied to the graph builders alone, or to the whole collector against
//!   the in-memory cluster, measured in a [`report`];
//! - [`curve`]: builder replays of several stream sizes, as a table, a JSON report and an SVG;
//! - [`memory_probe`]: the machine's cost of a random memory load by working-set size, beside
//!   which the curve's per-event cost at large sizes reads;
//! - [`perf_gate`]: CI's checks against the Go model and of scaling, ratios measured in one run;
//! - [`sync`]: `kube-gc run` syncing a simulated cluster over HTTP, timed and measured;
//! - [`plan`]: a running collector's plans of a large cascade, timed, and what they cost its
//!   graph builders;
//! - [`progress`]: progress bars for the long steps;
//! - `heap_profile` (with the `heap-profile` feature): the live heap by block size, counted.

pub mod curve;
pub mod generate;
#[cfg(feature = "heap-profile")]
pub mod heap_profile;
pub mod hostile;
pub mod memory_probe;
pub mod perf_gate;
pub mod plan;
pub mod progress;
pub mod record;
pub mod replay;
pub mod report;
pub mod shards;
pub mod stream;
pub mod sync;
