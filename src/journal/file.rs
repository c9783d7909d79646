//! The journal's file: JSON Lines appended by one thread, rotated by size.
//!
//! Invariant: only the writer thread touches the file, so lines never interleave; a rotation
//! renames `PATH` to `PATH.1` (and `PATH.1` to `PATH.2`, up to `max_files`) only between two
//! whole lines, so every file holds whole lines. Workers hand entries over a bounded channel
//! and never wait on the disk unless the thread falls a whole channel behind.

use super::Entry;
use crossbeam_channel::{Receiver, Sender};
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Entries in flight to the writer thread at most, before a worker waits.
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

/// What the writer thread is sent.
pub(super) enum Message {
    Line(Arc<Entry>),
    /// Flush, then answer on the channel.
    Flush(Sender<()>),
}

/// The sending end of the writer thread.
pub(super) struct FileSink {
    tx: Sender<Message>,
}

impl FileSink {
    /// Opens (appending to) the file and starts its writer thread.
    pub fn open(config: FileConfig) -> io::Result<FileSink> {
        let writer = Rotating::open(config)?;
        let (tx, rx) = crossbeam_channel::bounded(IN_FLIGHT);
        std::thread::Builder::new()
            .name("kube-gc-journal".into())
            .spawn(move || writer.run(rx))?;
        Ok(FileSink { tx })
    }

    /// Hands `entry` to the writer thread.
    pub fn send(&self, entry: Arc<Entry>) {
        // The thread ends only when every sender is gone, so a send cannot fail while we hold one.
        let _ = self.tx.send(Message::Line(entry));
    }

    /// Waits until every entry sent so far is written to the file.
    pub fn flush(&self) {
        let (done, wait) = crossbeam_channel::bounded(1);
        if self.tx.send(Message::Flush(done)).is_ok() {
            let _ = wait.recv();
        }
    }
}

/// The file and its size, on the writer thread.
struct Rotating {
    config: FileConfig,
    out: BufWriter<File>,
    written: u64,
}

impl Rotating {
    fn open(config: FileConfig) -> io::Result<Rotating> {
        let file = append(&config.path)?;
        let written = file.metadata()?.len();
        Ok(Rotating {
            config,
            out: BufWriter::with_capacity(256 * 1024, file),
            written,
        })
    }

    fn run(mut self, rx: Receiver<Message>) {
        let mut failed = false;
        while let Ok(message) = rx.recv() {
            let result = match message {
                Message::Line(entry) => self.write(&entry),
                Message::Flush(done) => {
                    let result = self.out.flush();
                    let _ = done.send(());
                    result
                }
            };
            // One log line per run of failures: a full disk must not flood the log.
            match result {
                Err(e) if !failed => {
                    tracing::error!(path = %self.config.path.display(), error = %e, "journal write failed");
                    failed = true;
                }
                Err(_) => {}
                Ok(()) => failed = false,
            }
            if rx.is_empty() {
                let _ = self.out.flush();
            }
        }
        let _ = self.out.flush();
    }

    fn write(&mut self, entry: &Entry) -> io::Result<()> {
        let mut line = serde_json::to_vec(entry).map_err(io::Error::other)?;
        line.push(b'\n');
        if self.written > 0 && self.written + line.len() as u64 > self.config.max_bytes {
            self.rotate()?;
        }
        self.out.write_all(&line)?;
        self.written += line.len() as u64;
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

fn append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// `PATH.n`.
pub fn numbered(path: &Path, n: usize) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}
