//! [`StreamReader`]: one watch event at a time, from a buffered (and maybe zstd-decoded) file.
//!
//! The file is cut into candidate values first (a line, or an indented value), and each is then
//! parsed on its own with `serde_json::from_slice`. Cutting first is what lets a bad value be
//! skipped without losing the ones after it, and what gives every error an exact line.

use super::{is_zstd, BadValue, StreamError};
use kube_gc::api::{validate_owner_references, WatchEvent, WatchEventType};
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// Bad values kept for the report when `skip_bad` skips them; the rest are only counted.
const KEPT_BAD_VALUES: usize = 10;

/// One event and where it starts.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// First line of the value (1-based).
    pub line: usize,
    /// The event.
    pub event: WatchEvent,
}

/// How the values of a file are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// One value per line.
    Lines,
    /// Indented values, each opening with a `{` at column 0.
    Indented,
}

/// The file's lines, counted.
struct Lines {
    input: Box<dyn BufRead + Send>,
    /// Lines consumed so far.
    count: usize,
}

impl Lines {
    /// Appends one line (newline included) to `buf`; false at the end of the file.
    fn read(&mut self, buf: &mut Vec<u8>) -> std::io::Result<bool> {
        let n = self.input.read_until(b'\n', buf)?;
        self.count += usize::from(n > 0);
        Ok(n > 0)
    }
}

/// Reads a stream; see the [module docs](super) for the formats. An iterator of [`Record`]s that
/// ends at the end of the file, or after the first error.
pub struct StreamReader {
    path: String,
    lines: Lines,
    layout: Layout,
    /// The next value's first line (number, bytes), already read; `None` at the end of the file.
    next_start: Option<(usize, Vec<u8>)>,
    /// The value cut last; its buffer is reused for the line after the next one.
    value: Vec<u8>,
    skip_bad: bool,
    skipped: usize,
    first_skipped: Vec<BadValue>,
    failed: bool,
}

impl StreamReader {
    /// Opens `path` (zstd-decoded when it ends in `.zst`). With `skip_bad`, malformed values are
    /// skipped and counted instead of ending the read. `wrap` sees the raw file bytes as they are
    /// read, for a progress bar.
    pub fn open(
        path: &Path,
        skip_bad: bool,
        wrap: impl FnOnce(File) -> Box<dyn Read + Send>,
    ) -> Result<StreamReader, StreamError> {
        let shown = path.display().to_string();
        let file = File::open(path).map_err(|e| StreamError::io(&shown, e))?;
        let raw = wrap(file);
        let input: Box<dyn BufRead + Send> = if is_zstd(path) {
            let decoder = zstd::Decoder::new(raw).map_err(|e| StreamError::io(&shown, e))?;
            Box::new(BufReader::with_capacity(1 << 16, decoder))
        } else {
            Box::new(BufReader::with_capacity(1 << 16, raw))
        };
        StreamReader::from_input(shown, input, skip_bad)
    }

    /// Reads from `input`, naming it `path` in errors.
    pub fn from_input(
        path: String,
        input: Box<dyn BufRead + Send>,
        skip_bad: bool,
    ) -> Result<StreamReader, StreamError> {
        let mut reader = StreamReader {
            path,
            lines: Lines { input, count: 0 },
            layout: Layout::Lines,
            next_start: None,
            value: Vec::new(),
            skip_bad,
            skipped: 0,
            first_skipped: Vec::new(),
            failed: false,
        };
        reader
            .read_ahead(Vec::new())
            .map_err(|e| StreamError::io(&reader.path, e))?;
        if let Some((_, first)) = &reader.next_start {
            if first.trim_ascii() == b"{" {
                reader.layout = Layout::Indented;
            }
        }
        Ok(reader)
    }

    /// How many malformed values were skipped.
    pub fn skipped(&self) -> usize {
        self.skipped
    }

    /// The first few skipped values, in file order.
    pub fn first_skipped(&self) -> &[BadValue] {
        &self.first_skipped
    }

    /// Reads the next non-blank line into `line` and keeps it as the next value's start.
    fn read_ahead(&mut self, mut line: Vec<u8>) -> std::io::Result<()> {
        loop {
            line.clear();
            if !self.lines.read(&mut line)? {
                return Ok(());
            }
            if !line.trim_ascii().is_empty() {
                self.next_start = Some((self.lines.count, line));
                return Ok(());
            }
        }
    }

    /// Cuts the next candidate value into `self.value`; returns its first line, or `None` at the
    /// end of the file.
    fn next_value(&mut self) -> std::io::Result<Option<usize>> {
        let Some((start, first)) = self.next_start.take() else {
            return Ok(None);
        };
        let spare = std::mem::replace(&mut self.value, first);
        match self.layout {
            Layout::Lines => self.read_ahead(spare)?,
            Layout::Indented => loop {
                let at = self.value.len();
                if !self.lines.read(&mut self.value)? {
                    break;
                }
                if self.value[at] == b'{' {
                    self.next_start = Some((self.lines.count, self.value.split_off(at)));
                    break;
                }
            },
        }
        Ok(Some(start))
    }

    /// Parses and checks the value cut last, which starts at line `start`.
    fn parse(&self, start: usize) -> Result<WatchEvent, BadValue> {
        let bad = |line: usize, reason: String| BadValue {
            path: self.path.clone(),
            line,
            reason,
        };
        // Without the trailing newline, an error at the end of the value is reported on its last
        // line rather than on the line after it.
        let value = self.value.trim_ascii_end();
        let event: WatchEvent =
            serde_json::from_slice(value).map_err(|e| bad(start + e.line().saturating_sub(1), describe(&e)))?;
        check(&event).map_err(|reason| bad(start, reason))?;
        Ok(event)
    }

    fn skip(&mut self, bad: BadValue) {
        self.skipped += 1;
        if self.first_skipped.len() < KEPT_BAD_VALUES {
            self.first_skipped.push(bad);
        }
    }
}

impl Iterator for StreamReader {
    type Item = Result<Record, StreamError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.failed {
            let start = match self.next_value() {
                Ok(Some(start)) => start,
                Ok(None) => return None,
                Err(e) => {
                    self.failed = true;
                    return Some(Err(StreamError::io(&self.path, e)));
                }
            };
            match self.parse(start) {
                Ok(event) => return Some(Ok(Record { line: start, event })),
                Err(bad) if self.skip_bad => self.skip(bad),
                Err(bad) => {
                    self.failed = true;
                    return Some(Err(bad.into()));
                }
            }
        }
        None
    }
}

/// serde_json's message without its position (the caller reports the line), plus the column.
fn describe(e: &serde_json::Error) -> String {
    let message = e.to_string();
    let message = message.rsplit_once(" at line ").map_or(message.as_str(), |(m, _)| m);
    format!("{message} (column {})", e.column())
}

/// The rules a decoded event must keep (module docs of [`super`]).
fn check(event: &WatchEvent) -> Result<(), String> {
    if event.event_type == WatchEventType::Bookmark {
        return Ok(());
    }
    let object = &event.object;
    let meta = &object.metadata;
    let missing = [
        ("apiVersion", object.api_version.is_empty()),
        ("kind", object.kind.is_empty()),
        ("metadata.name", meta.name.is_empty()),
        ("metadata.uid", meta.uid.is_empty()),
    ];
    if let Some((field, _)) = missing.iter().find(|(_, empty)| *empty) {
        return Err(format!("the object has no {field}"));
    }
    validate_owner_references(&meta.owner_references).map_err(|e| format!("metadata.ownerReferences: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(text: &str, skip_bad: bool) -> StreamReader {
        let input = Box::new(std::io::Cursor::new(text.as_bytes().to_vec()));
        StreamReader::from_input("s.jsonl".into(), input, skip_bad).expect("in-memory input")
    }

    const POD: &str = r#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"n","uid":"u"}}}"#;

    #[test]
    fn reader_should_skip_blank_lines_and_number_lines_from_one() {
        let text = format!("\n{POD}\n\n{POD}\n");
        let lines: Vec<usize> = reader(&text, false).map(|r| r.expect("valid").line).collect();
        assert_eq!(lines, [2, 4]);
    }

    #[test]
    fn reader_should_report_the_line_of_a_syntax_error_inside_an_indented_value() {
        let text = "{\n  \"type\": \"ADDED\",\n  \"object\": {\n    \"kind\" \"Pod\"\n  }\n}\n";
        let err = reader(text, false).next().expect("one value").expect_err("malformed");
        let StreamError::Bad(bad) = err else {
            panic!("not a bad value: {err}")
        };
        assert_eq!(bad.line, 4, "{bad}");
        assert!(bad.reason.contains("expected `:`"), "{bad}");
    }

    #[test]
    fn reader_should_reject_an_object_without_uid_at_its_first_line() {
        let text = POD.replace(r#","uid":"u""#, "");
        let err = reader(&format!("{POD}\n{text}\n"), false).nth(1).expect("two values");
        let message = err.expect_err("no uid").to_string();
        assert_eq!(message, "s.jsonl:2: the object has no metadata.uid");
    }

    #[test]
    fn reader_should_accept_a_bookmark_that_only_has_a_resource_version() {
        let text = r#"{"type":"BOOKMARK","object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"7","creationTimestamp":null}}}"#;
        let record = reader(text, false).next().expect("one").expect("valid");
        assert_eq!(record.event.event_type, WatchEventType::Bookmark);
    }

    #[test]
    fn reader_should_stop_after_the_first_error_without_skip_bad() {
        let text = format!("{POD}\nnot json\n{POD}\n");
        let results: Vec<_> = reader(&text, false).collect();
        assert_eq!(results.len(), 2);
        assert!(results[1].is_err());
    }

    #[test]
    fn reader_should_count_skipped_values_with_skip_bad() {
        let text = format!("{POD}\nnot json\n{{\"type\":\"ERROR\",\"object\":{{}}}}\n{POD}\n");
        let mut r = reader(&text, true);
        let lines: Vec<usize> = r.by_ref().map(|x| x.expect("skipped").line).collect();
        assert_eq!(lines, [1, 4]);
        assert_eq!(r.skipped(), 2);
        assert_eq!(r.first_skipped()[1].line, 3);
        assert!(r.first_skipped()[1].reason.contains("unknown variant `ERROR`"));
    }
}
