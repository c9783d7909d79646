//! The journal's thread: it writes out the [`Record`]s the workers and builders hand over, keeps
//! the latest for `/debug/journal`, and appends them to the file, rotated by size.
//!
//! Invariants:
//! - Only this thread formats a line or touches the file, so recording costs a worker no
//!   formatting and lines never interleave.
//! - A rotation renames `PATH` to `PATH.1` (and `PATH.1` to `PATH.2`, up to `max_files`) only
//!   between two whole lines, so every file holds whole lines.
//! - Records wait in a bounded channel; a worker waits only when the thread is a whole channel
//!   behind, so no line is ever dropped.

use super::{Entry, Record};
use crossbeam_channel::{Receiver, Sender};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Records in flight to the thread at most, before a worker waits.
const IN_FLIGHT: usize = 65_536;

/// Where and how large the journal's files are.
#[derive(Clone, Debug)]
pub struct FileConfig {
    /// The current file; older ones are `PATH.1`, `PATH.2`, ….
    pub path: PathBuf,
    /// Bytes after which the file is rotated.
    pub max_bytes: u64,
    /// Files kept besides the current one.
    pub max_files: usize,
}

/// The latest lines, shared by the thread (which writes) and `/debug/journal` (which reads).
pub(super) type Latest = Arc<Mutex<VecDeque<Arc<Entry>>>>;

/// What the thread is sent.
enum Message {
    Line(Box<Record>),
    /// Write out everything before it, then answer.
    Flush(Sender<()>),
}

/// The sending end of the journal's thread.
pub(super) struct Writer {
    tx: Sender<Message>,
}

impl Writer {
    /// Opens the file (appending), if any, and starts the thread, which keeps up to `keep` lines
    /// in `latest`.
    pub fn start(file: Option<FileConfig>, latest: Latest, keep: usize) -> io::Result<Writer> {
        let file = file.map(Rotating::open).transpose()?;
        let (tx, rx) = crossbeam_channel::bounded(IN_FLIGHT);
        let thread = Thread {
            file,
            latest,
            keep,
            clock: Clock::default(),
        };
        std::thread::Builder::new()
            .name("kube-gc-journal".into())
            .spawn(move || thread.run(rx))?;
        Ok(Writer { tx })
    }

    /// Hands `record` to the thread.
    pub fn send(&self, record: Record) {
        // The thread ends only when every sender is gone, so a send cannot fail while we hold one.
        let _ = self.tx.send(Message::Line(Box::new(record)));
    }

    /// Waits until every record sent so far is written out.
    pub fn flush(&self) {
        let (done, wait) = crossbeam_channel::bounded(1);
        if self.tx.send(Message::Flush(done)).is_ok() {
            let _ = wait.recv();
        }
    }
}

/// The thread's state.
struct Thread {
    file: Option<Rotating>,
    latest: Latest,
    keep: usize,
    clock: Clock,
}

impl Thread {
    fn run(mut self, rx: Receiver<Message>) {
        let mut failed = false;
        while let Ok(message) = rx.recv() {
            let result = match message {
                Message::Line(record) => self.write(&record),
                Message::Flush(done) => {
                    let result = self.flush();
                    let _ = done.send(());
                    result
                }
            };
            // One log line per run of failures: a full disk must not flood the log.
            match result {
                Err(e) if !failed => {
                    tracing::error!(error = %e, "journal write failed");
                    failed = true;
                }
                Err(_) => {}
                Ok(()) => failed = false,
            }
            if rx.is_empty() {
                let _ = self.flush();
            }
        }
        let _ = self.flush();
    }

    fn write(&mut self, record: &Record) -> io::Result<()> {
        let entry = Arc::new(record.to_entry(self.clock.format(record.at)));
        if let Some(file) = &mut self.file {
            file.write(&entry)?;
        }
        let mut latest = self.latest.lock();
        if latest.len() == self.keep {
            latest.pop_front();
        }
        latest.push_back(entry);
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.as_mut().map_or(Ok(()), |f| f.out.flush())
    }
}

/// RFC 3339 times with microseconds, the date and time of day formatted once per second.
#[derive(Default)]
struct Clock {
    second: u64,
    prefix: String,
}

impl Clock {
    fn format(&mut self, at: SystemTime) -> String {
        let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
        if since.as_secs() != self.second || self.prefix.is_empty() {
            self.second = since.as_secs();
            self.prefix = k8s_openapi::jiff::Timestamp::from_second(since.as_secs() as i64)
                .map(|t| t.strftime("%Y-%m-%dT%H:%M:%S").to_string())
                .unwrap_or_default();
        }
        format!("{}.{:06}Z", self.prefix, since.subsec_micros())
    }
}

/// The file and its size.
struct Rotating {
    config: FileConfig,
    out: BufWriter<File>,
    written: u64,
    line: Vec<u8>,
}

impl Rotating {
    fn open(config: FileConfig) -> io::Result<Rotating> {
        let file = append(&config.path)?;
        let written = file.metadata()?.len();
        Ok(Rotating {
            config,
            out: BufWriter::with_capacity(256 * 1024, file),
            written,
            line: Vec::with_capacity(1024),
        })
    }

    fn write(&mut self, entry: &Entry) -> io::Result<()> {
        format_line(entry, &mut self.line)?;
        let len = self.line.len() as u64;
        if self.written > 0 && self.written + len > self.config.max_bytes {
            self.rotate()?;
        }
        self.out.write_all(&self.line)?;
        self.written += len;
        Ok(())
    }

    fn rotate(&mut self) -> io::Result<()> {
        self.out.flush()?;
        let path = &self.config.path;
        for n in (1..self.config.max_files).rev() {
            let from = numbered(path, n);
            if from.exists() {
                std::fs::rename(&from, numbered(path, n + 1))?;
            }
        }
        if self.config.max_files > 0 {
            std::fs::rename(path, numbered(path, 1))?;
        } else {
            std::fs::remove_file(path)?;
        }
        self.out = BufWriter::with_capacity(256 * 1024, append(path)?);
        self.written = 0;
        Ok(())
    }
}

/// `entry` as one line of the file, its newline included, in `line` (cleared first). JSON escapes
/// every control character in a string, so the newline that ends the line is its only one.
pub(crate) fn format_line(entry: &Entry, line: &mut Vec<u8>) -> io::Result<()> {
    line.clear();
    serde_json::to_writer(&mut *line, entry).map_err(io::Error::other)?;
    line.push(b'\n');
    Ok(())
}

fn append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// `PATH.n`.
pub fn numbered(path: &Path, n: usize) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}
