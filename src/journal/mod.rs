//! The deletion journal: one JSON line for every write the collector makes, with why.
//!
//! Every DELETE, orphaning patch, ref removal, `blockOwnerDeletion` unblocking and finalizer
//! removal the workers send is recorded by [`crate::collector`] right after the server answers
//! ([`Source::Sent`]): the object, the action and policy, each owner with the state it was found
//! in and where that was read (graph, tombstone, absentOwnerCache or a live GET), which reading of
//! the object the write rests on, the preconditions sent and the answer. In shadow mode
//! (`kube-gc run --dry-run`) the workers send nothing and record each write as
//! [`Source::DryRun`]; the builders then also record the writes another collector is seen making
//! in the watch streams ([`witness`], [`Source::Observed`]), which [`report`] compares with the
//! shadow's own decisions.
//!
//! Invariants:
//! - Recording never makes a worker format or wait on the disk: it hands a [`Record`] of cheap
//!   clones to the journal's thread ([`writer`]) over a bounded channel; only a thread a whole
//!   channel behind makes a worker wait, so no line is ever dropped.
//! - The latest [`LATEST`] lines stay in memory for `/debug/journal`, journal file or not.
//! - A disabled journal ([`Journal::disabled`], loadgen and benches) costs one branch per write.

mod entry;
pub mod report;
pub mod witness;
pub(crate) mod writer;

pub use entry::{Action, Answer, Entry, Evidence, ObjectRef, OwnerSeen, OwnerState, Record, Seen, Source};
pub use writer::{numbered, FileConfig};

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;
use writer::{Latest, Writer};

/// Lines kept in memory for `/debug/journal`.
pub const LATEST: usize = 1000;

/// What the journal records and where.
#[derive(Clone, Debug, Default)]
pub struct JournalConfig {
    /// The file, when there is one (`--journal`).
    pub file: Option<FileConfig>,
    /// Shadow mode: the workers record their writes instead of sending them.
    pub dry_run: bool,
    /// Post a Kubernetes Event on the owners of each object the collector deletes.
    pub owner_events: bool,
}

/// The journal; cheap to clone. See the [module docs](self).
#[derive(Clone, Default)]
pub struct Journal {
    inner: Option<Arc<Inner>>,
}

struct Inner {
    config: JournalConfig,
    latest: Latest,
    writer: Writer,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let config = self.inner.as_ref().map(|i| &i.config);
        f.debug_struct("Journal").field("config", &config).finish()
    }
}

impl Journal {
    /// A journal that records nothing and sends every write.
    pub fn disabled() -> Journal {
        Journal::default()
    }

    /// A journal as `config` says, its file opened for appending and its thread started.
    pub fn open(config: JournalConfig) -> std::io::Result<Journal> {
        let latest: Latest = Arc::new(Mutex::new(VecDeque::with_capacity(LATEST)));
        let writer = Writer::start(config.file.clone(), latest.clone(), LATEST)?;
        Ok(Journal {
            inner: Some(Arc::new(Inner { config, latest, writer })),
        })
    }

    /// A journal kept in memory only (the latest lines), sending every write.
    pub fn in_memory() -> Journal {
        Journal::open(JournalConfig::default()).expect("no file to open")
    }

    /// True when lines are recorded.
    pub fn is_enabled(&self) -> bool {
        self.inner.is_some()
    }

    /// True in shadow mode: writes are recorded, never sent.
    pub fn is_dry_run(&self) -> bool {
        self.inner.as_ref().is_some_and(|i| i.config.dry_run)
    }

    /// True when deletions are also told to the owners as Kubernetes Events.
    pub fn owner_events(&self) -> bool {
        self.inner
            .as_ref()
            .is_some_and(|i| i.config.owner_events && !i.config.dry_run)
    }

    /// Records one line.
    pub fn record(&self, record: Record) {
        if let Some(inner) = &self.inner {
            inner.writer.send(record);
        }
    }

    /// The latest lines written out, oldest first, at most `limit`.
    pub fn latest(&self, limit: usize) -> Vec<Arc<Entry>> {
        let Some(inner) = &self.inner else {
            return Vec::new();
        };
        let latest = inner.latest.lock();
        latest
            .iter()
            .skip(latest.len().saturating_sub(limit))
            .cloned()
            .collect()
    }

    /// Waits until every line recorded so far is written out: in the file and among the latest.
    pub fn flush(&self) {
        if let Some(inner) = &self.inner {
            inner.writer.flush();
        }
    }
}

/// Reads a journal file: every line, in order; a line that is not an entry is an error naming
/// its number. A last line without its newline that is not an entry is the write a killed process
/// left torn (the writer buffers, so `kill -9` can stop it anywhere in a line), and is skipped.
pub fn read(path: &std::path::Path) -> Result<Vec<Entry>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    parse(&text, &path.display().to_string())
}

/// The entries of a journal's `text`, as [`read`] reads a file; errors name `origin`.
pub(crate) fn parse(text: &str, origin: &str) -> Result<Vec<Entry>, String> {
    let (whole, torn) = match text.rsplit_once('\n') {
        Some((whole, rest)) => (whole, rest),
        None => ("", text),
    };
    let mut entries: Vec<Entry> = whole
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(n, line)| {
            serde_json::from_str(line).map_err(|e| format!("{origin}:{}: not a journal entry: {e}", n + 1))
        })
        .collect::<Result<_, _>>()?;
    entries.extend(serde_json::from_str(torn).ok());
    Ok(entries)
}

#[cfg(test)]
mod tests;
