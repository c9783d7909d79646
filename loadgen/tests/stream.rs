//! The stream format: both layouts of a stream written elsewhere, and zstd.

use kube_gc::api::{WatchEvent, WatchEventType};
use loadgen::stream::{StreamReader, StreamWriter};
use std::path::{Path, PathBuf};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

fn read_all(path: &Path) -> Vec<WatchEvent> {
    StreamReader::open(path, false, |f| Box::new(f))
        .expect("open")
        .map(|r| r.expect("a valid event").event)
        .collect()
}

#[test]
fn both_layouts_of_the_independent_stream_should_read_as_the_same_events() {
    let lines = read_all(&data("independent-small.jsonl"));
    let indented = read_all(&data("independent-small.kubectl.json"));
    assert_eq!(lines, indented);
    let count = |t: WatchEventType| lines.iter().filter(|e| e.event_type == t).count();
    assert_eq!(count(WatchEventType::Added), 180);
    assert_eq!(count(WatchEventType::Bookmark), 1);
    assert_eq!(count(WatchEventType::Modified), 23);
    assert_eq!(count(WatchEventType::Deleted), 27);
}

#[test]
fn a_zstd_stream_should_read_back_as_the_events_written() {
    let events = read_all(&data("independent-small.jsonl"));
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("copy.jsonl.zst");
    let mut writer = StreamWriter::create(&path).expect("create");
    for e in &events {
        writer.write(e).expect("write");
    }
    writer.finish().expect("finish");
    let bytes = std::fs::read(&path).expect("read back");
    assert_eq!(bytes[..4], [0x28, 0xb5, 0x2f, 0xfd], "a zstd frame");
    assert_eq!(read_all(&path), events);
}
