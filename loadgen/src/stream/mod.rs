//! Watch streams on disk: Kubernetes watch events (`{"type": …, "object": …}`) one JSON value
//! after another, decoded into [`kube_gc::api::WatchEvent`].
//!
//! Invariant: every event the [`StreamReader`] yields is well formed: a known type and, except for
//! a BOOKMARK (which only carries a resourceVersion), an object with an apiVersion, a kind, a name,
//! a UID and valid owner references. Anything else is a [`BadValue`] naming the file, the line and
//! the reason; it ends the read, or, with `skip_bad`, is counted and skipped. Input never panics.
//!
//! Layouts:
//!
//! - **JSON Lines**, one event per line: what [`StreamWriter`] writes.
//! - **Concatenated indented JSON**, as `kubectl get --watch --output-watch-events -o json`
//!   prints it: each event opens with a `{` alone at column 0 and closes with a `}` at column 0.
//!
//! The reader tells them apart by the first non-blank line: a lone `{` means indented JSON.
//! A file whose name ends in `.zst` is zstd-compressed, for reading and for writing.

#[doc(hidden)]
pub mod fuzzing;
mod read;
mod write;

pub use read::{Record, StreamReader};
pub use write::StreamWriter;

use std::path::Path;
use thiserror::Error;

/// One value of a stream that is not a well-formed watch event.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("{path}:{line}: {reason}")]
pub struct BadValue {
    /// The stream's file.
    pub path: String,
    /// Line of the error (1-based; for a value that parses but breaks a rule, its first line).
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

/// Why a stream could not be read or written.
#[derive(Debug, Error)]
pub enum StreamError {
    /// The file could not be opened, created, read or written.
    #[error("{path}")]
    Io {
        /// The stream's file.
        path: String,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// A malformed value, and `skip_bad` was off.
    #[error(transparent)]
    Bad(#[from] BadValue),
}

impl StreamError {
    fn io(path: &str, source: std::io::Error) -> Self {
        StreamError::Io {
            path: path.to_string(),
            source,
        }
    }
}

/// True when `path` names a zstd-compressed stream.
fn is_zstd(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "zst")
}
