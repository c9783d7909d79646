//! [`StreamWriter`]: JSON Lines, zstd-compressed when the file name ends in `.zst`.

use super::{is_zstd, StreamError};
use kube_gc::api::WatchEvent;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

/// zstd level for written streams: level 3 (zstd's default) compresses the 1M-object stream about
/// 10× while writing faster than events are made; higher levels slowed generation for a few
/// percent of size.
const ZSTD_LEVEL: i32 = 3;

/// Where the bytes go.
enum Sink {
    Plain(BufWriter<File>),
    Zstd(zstd::Encoder<'static, BufWriter<File>>),
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Sink::Plain(w) => w.write(buf),
            Sink::Zstd(w) => w.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Sink::Plain(w) => w.flush(),
            Sink::Zstd(w) => w.flush(),
        }
    }
}

/// Writes watch events one per line. [`StreamWriter::finish`] must be called to end the file
/// (for zstd, the frame's end); an unfinished writer leaves a truncated file.
#[must_use = "a stream must be finished"]
pub struct StreamWriter {
    path: String,
    sink: Sink,
    events: u64,
}

impl StreamWriter {
    /// Creates (or truncates) `path`.
    pub fn create(path: &Path) -> Result<StreamWriter, StreamError> {
        let shown = path.display().to_string();
        let file = File::create(path).map_err(|e| StreamError::io(&shown, e))?;
        let out = BufWriter::with_capacity(1 << 16, file);
        let sink = if is_zstd(path) {
            Sink::Zstd(zstd::Encoder::new(out, ZSTD_LEVEL).map_err(|e| StreamError::io(&shown, e))?)
        } else {
            Sink::Plain(out)
        };
        Ok(StreamWriter {
            path: shown,
            sink,
            events: 0,
        })
    }

    /// Appends one event.
    pub fn write(&mut self, event: &WatchEvent) -> Result<(), StreamError> {
        serde_json::to_writer(&mut self.sink, event)
            .map_err(std::io::Error::from)
            .and_then(|()| self.sink.write_all(b"\n"))
            .map_err(|e| StreamError::io(&self.path, e))?;
        self.events += 1;
        Ok(())
    }

    /// Events written so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Ends the file and flushes what is buffered.
    pub fn finish(self) -> Result<(), StreamError> {
        let out = match self.sink {
            Sink::Plain(out) => out,
            Sink::Zstd(encoder) => encoder.finish().map_err(|e| StreamError::io(&self.path, e))?,
        };
        out.into_inner()
            .map(drop)
            .map_err(|e| StreamError::io(&self.path, e.into_error()))
    }
}
