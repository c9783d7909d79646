//! The [`StreamReader`] over any bytes, for the fuzz target `watch_events` (`tests/fuzz` at the
//! repository's top) and the test that replays its corpus.
//!
//! Invariants checked, beside the [module's](super) "input never panics": skipping bad values
//! yields every event in line order, each keeping the rules of [`super`]; without skipping, the
//! read yields the same events up to the first bad value, which is the first one skipping counts,
//! and then ends.

use super::{StreamError, StreamReader};
use kube_gc::api::{validate_owner_references, WatchEventType};

/// Reads `data` as a stream file, once skipping bad values and once stopping at the first.
pub fn read(data: &[u8]) {
    let reader = |skip_bad| {
        let input = Box::new(std::io::Cursor::new(data.to_vec()));
        StreamReader::from_input("fuzz.jsonl".into(), input, skip_bad).expect("in-memory input")
    };
    let mut skipping = reader(true);
    let records: Vec<_> = skipping.by_ref().map(|r| r.expect("bad values are skipped")).collect();
    for pair in records.windows(2) {
        assert!(pair[0].line < pair[1].line, "{} then {}", pair[0].line, pair[1].line);
    }
    for record in &records {
        let (event, meta) = (&record.event, &record.event.object.metadata);
        if event.event_type != WatchEventType::Bookmark {
            let object = &event.object;
            assert!(![&object.api_version, &object.kind, &meta.name, &meta.uid]
                .iter()
                .any(|field| field.is_empty()));
            assert_eq!(validate_owner_references(&meta.owner_references), Ok(()));
        }
    }
    let mut stopping = reader(false);
    for record in &records {
        match stopping.next() {
            Some(Ok(read)) => assert_eq!(&read, record),
            Some(Err(StreamError::Bad(bad))) => {
                assert_eq!(Some(&bad), skipping.first_skipped().first());
                assert!(bad.line < record.line, "{bad} is read after line {}", record.line);
                assert!(stopping.next().is_none(), "the read goes on after {bad}");
                return;
            }
            other => panic!("{other:?} where skipping read {record:?}"),
        }
    }
    match stopping.next() {
        None => assert_eq!(skipping.skipped(), 0),
        Some(Err(StreamError::Bad(bad))) => assert_eq!(Some(&bad), skipping.first_skipped().first()),
        other => panic!("{other:?} after the events skipping read"),
    }
    assert!(stopping.next().is_none(), "the read goes on after its first bad value");
}

#[cfg(test)]
mod tests {
    /// The `watch_events` target's committed seeds and regressions, replayed on stable.
    #[test]
    fn the_reader_should_keep_its_invariants_on_every_committed_fuzz_input() {
        let fuzz = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fuzz");
        let mut replayed = 0;
        for kind in ["seeds", "regressions"] {
            let Ok(dir) = std::fs::read_dir(fuzz.join(kind).join("watch_events")) else {
                continue;
            };
            for file in dir {
                let path = file.expect("a readable directory").path();
                let data = std::fs::read(&path).expect("a readable input");
                let outcome = std::panic::catch_unwind(|| super::read(&data));
                assert!(outcome.is_ok(), "the reader fails on {}", path.display());
                replayed += 1;
            }
        }
        assert!(replayed > 0, "no seeds in {}", fuzz.display());
    }
}
