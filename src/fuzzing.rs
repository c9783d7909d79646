//! The engine's functions that the fuzz targets of `tests/fuzz` run, one per target, each over the
//! bytes libFuzzer gives it: every input a tenant of the cluster writes (names, namespaces, UIDs,
//! kinds, owner references, annotations, finalizers) reaches the code that reads it here; the
//! simulated API server's targets (request paths, queries, headers and patch bodies) are in its
//! own crate's `fuzzing` module. Hidden from the docs: the fuzz crate and the test that replays
//! its corpus (`tests/it/fuzz_corpus.rs`) are its only callers.
//!
//! Each function panics exactly when an invariant of the code it drives is broken, so a panic is
//! a finding, whichever engine (libFuzzer, or the replay on stable) ran it.

use crate::api::watch_wire::{self, Decoded};
use crate::api::{self, validate_owner_references, ObjectMeta, OwnerReference, WatchEvent};
use crate::event::{EventType, GraphEvent, InvalidObject};
use crate::graph::{Graph, Identity, Name, OwnerRef, Sym, TypeMeta, Uid};
use crate::journal::{self, Action, Answer, Entry, Evidence, OwnerState, Record, Seen, Source};
use futures::StreamExt;
use std::sync::LazyLock;

/// The fields of an input: its bytes cut at `0xff` (a byte UTF-8 never uses), each read as UTF-8
/// with invalid sequences replaced.
fn fields(data: &[u8]) -> impl Iterator<Item = String> + '_ {
    data.split(|&b| b == 0xff)
        .map(|f| String::from_utf8_lossy(f).into_owned())
}

/// The watch stream a collector reads from the server: the body `data` is cut into lines as
/// [`watch_wire::events`] cuts it, and each line is decoded.
///
/// Invariants: the stream yields exactly what decoding each non-blank line yields, up to the
/// first line cut short; a line the generic decoder of [`WatchEvent`] (what `loadgen` reads)
/// accepts is accepted by the collector's decoder with the same metadata; an event written back
/// out as JSON decodes to itself.
pub fn watch_events(data: &[u8]) {
    let mut expected = Vec::new();
    for line in data.split(|&b| b == b'\n').map(<[u8]>::trim_ascii) {
        if line.is_empty() {
            continue;
        }
        match watch_wire::decode(line, "v1", "Pod") {
            Err(e) if e.is_eof() => break,
            Err(_) => expected.push(None),
            Ok(Decoded::Error(_)) => expected.push(None),
            Ok(Decoded::Event(event)) => {
                agrees_with_the_generic_decoder(line, &event);
                round_trips(&event);
                expected.push(Some(event));
            }
        }
        if let Ok(generic) = serde_json::from_slice::<WatchEvent>(line) {
            let Ok(Decoded::Event(event)) = watch_wire::decode(line, "v1", "Pod") else {
                panic!("the collector refused a line the generic decoder reads: {generic:?}");
            };
            agrees_with_the_generic_decoder(line, &event);
        }
    }
    let body = futures::io::Cursor::new(data.to_vec());
    let streamed: Vec<Option<WatchEvent>> = futures::executor::block_on(
        watch_wire::events(body, "v1".into(), "Pod".into())
            .map(Result::ok)
            .collect(),
    );
    assert_eq!(streamed, expected);
}

/// The fields the collector keeps agree with the generic decoding of `line`, when it has one.
fn agrees_with_the_generic_decoder(line: &[u8], event: &WatchEvent) {
    let Ok(generic) = serde_json::from_slice::<WatchEvent>(line) else {
        return;
    };
    let (kept, full) = (&event.object.metadata, &generic.object.metadata);
    assert_eq!(event.event_type, generic.event_type);
    assert_eq!(
        (&kept.name, &kept.namespace, &kept.uid, &kept.resource_version),
        (&full.name, &full.namespace, &full.uid, &full.resource_version)
    );
    assert_eq!(kept.deletion_timestamp, full.deletion_timestamp);
    assert_eq!(kept.owner_references, full.owner_references);
    assert_eq!(kept.finalizers, full.finalizers);
    assert_eq!(event.is_initial_events_end(), generic.is_initial_events_end());
}

/// `event`, written out as the server would, decodes to itself.
fn round_trips(event: &WatchEvent) {
    let line = serde_json::to_vec(event).expect("an event serialises");
    match watch_wire::decode(&line, "v1", "Pod") {
        Ok(Decoded::Event(again)) => assert_eq!(&again, event),
        Ok(Decoded::Error(status)) => panic!("an event read back as an error: {status:?}"),
        Err(e) => panic!("an event read back as {e}: {}", String::from_utf8_lossy(&line)),
    }
}

/// Object metadata from the fields of `data`: name, namespace, uid, resourceVersion,
/// deletionTimestamp (none when empty), finalizers (comma-separated), then owner references of
/// five fields each (apiVersion, kind, name, uid, and the flags `controller` and
/// `blockOwnerDeletion` as `t`, `f` or absent).
fn object_meta(data: &[u8]) -> ObjectMeta {
    let mut fields = fields(data);
    let mut next = || fields.next().unwrap_or_default();
    let mut meta = ObjectMeta {
        name: next(),
        namespace: next(),
        uid: next(),
        resource_version: next(),
        ..ObjectMeta::default()
    };
    meta.deletion_timestamp = Some(next()).filter(|t| !t.is_empty());
    meta.finalizers = next().split(',').filter(|f| !f.is_empty()).map(String::from).collect();
    let flag = |flags: &str, at: usize| match flags.as_bytes().get(at) {
        Some(b't') => Some(true),
        Some(b'f') => Some(false),
        _ => None,
    };
    let rest: Vec<String> = fields.collect();
    meta.owner_references = rest
        .chunks(5)
        .map(|r| {
            let field = |i: usize| r.get(i).cloned().unwrap_or_default();
            OwnerReference {
                api_version: field(0),
                kind: field(1),
                name: field(2),
                uid: field(3),
                controller: flag(&field(4), 0),
                block_owner_deletion: flag(&field(4), 1),
            }
        })
        .collect();
    meta
}

/// The graph every [`graph_event`] input names its objects in; names are shared through it.
static GRAPH: LazyLock<Graph> = LazyLock::new(Graph::new);

/// A [`GraphEvent`] built from object metadata, as a monitor builds one from a watched object.
///
/// Invariants: an object is refused exactly when it has no UID or its owner references are
/// invalid, for that reason; an event's identity and owner references give back the exact
/// strings they were built from (every UID, name, namespace, apiVersion and kind, and each
/// reference's flags); two UIDs are equal exactly when their strings are; an add and a delete of
/// one object name the same identity; a virtual delete of an identity names it again.
pub fn graph_event(data: &[u8]) {
    let meta = object_meta(data);
    let (api_version, kind) = ("example.com/v1", "Widget");
    let added = GraphEvent::observed(&*GRAPH, EventType::Add, &meta, api_version, kind);
    let deleted = GraphEvent::observed(&*GRAPH, EventType::Delete, &meta, api_version, kind);
    let refused = if meta.uid.is_empty() {
        Some(InvalidObject::MissingUid {
            namespace: meta.namespace.clone(),
            name: meta.name.clone(),
        })
    } else {
        validate_owner_references(&meta.owner_references)
            .err()
            .map(|source| InvalidObject::OwnerReference {
                namespace: meta.namespace.clone(),
                name: meta.name.clone(),
                source,
            })
    };
    let (added, deleted) = match (added, deleted, refused) {
        (Ok(added), Ok(deleted), None) => (added, deleted),
        (Err(a), Err(d), Some(why)) => {
            assert_eq!((a, d), (why.clone(), why));
            return;
        }
        other => panic!("refused for no reason, or accepted though invalid: {other:?}"),
    };
    let identity = added.identity();
    assert_eq!(identity.uid.to_string(), meta.uid);
    assert_eq!(identity.name.to_string(), meta.name);
    assert_eq!(identity.namespace().as_str(), meta.namespace);
    assert_eq!(
        (identity.api_version().as_str(), identity.kind().as_str()),
        (api_version, kind)
    );
    let owners = added.object.owners.as_slice();
    let wire: Vec<OwnerReference> = owners.iter().map(OwnerRef::to_wire).collect();
    assert_eq!(wire, meta.owner_references);
    for (owner, r) in owners.iter().zip(&meta.owner_references) {
        assert_eq!(
            owner.uid == identity.uid,
            r.uid == meta.uid,
            "{:?} {:?}",
            r.uid,
            meta.uid
        );
    }
    let observation = &added.object.observation;
    let rv = observation.resource_version;
    assert!(!rv.is_known() || rv.to_string() == meta.resource_version);
    assert_eq!(observation.being_deleted, meta.deletion_timestamp.is_some());
    assert_eq!(
        (observation.finalizers.orphan, observation.finalizers.foreground),
        (
            meta.has_finalizer(api::FINALIZER_ORPHAN),
            meta.has_finalizer(api::FINALIZER_FOREGROUND)
        )
    );
    assert_eq!(deleted.identity(), identity);
    assert_eq!(deleted.object.owners, added.object.owners);
    assert_eq!(GraphEvent::virtual_delete(&identity).identity(), identity);
}

/// Journal lines about objects with tenant-written names: the inputs of `data` are cut at `0xfe`
/// into records, each read as the fields of [`record`].
///
/// Invariants: each line the writer formats ends with its only newline; the lines read back as
/// exactly the entries written, in order; and a file cut anywhere (a process killed mid-write)
/// reads back as the entries whose lines it holds whole, a last line that lost only its newline
/// included (its JSON is whole, and no shorter cut of a line is JSON).
pub fn journal_lines(data: &[u8]) {
    let (cut, data) = data.split_first().unwrap_or((&0, &[]));
    let entries: Vec<Entry> = data.split(|&b| b == 0xfe).map(record).collect();
    let mut text = Vec::new();
    let mut ends = Vec::new();
    let mut line = Vec::new();
    for entry in &entries {
        journal::writer::format_line(entry, &mut line).expect("an entry formats");
        assert_eq!(line.iter().position(|&b| b == b'\n'), Some(line.len() - 1));
        text.extend_from_slice(&line);
        ends.push(text.len());
    }
    let text = String::from_utf8(text).expect("a journal is UTF-8");
    assert_eq!(journal::parse(&text, "fuzz").as_ref(), Ok(&entries));
    let mut cut = text.len() * usize::from(*cut) / 255;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let whole = ends.iter().filter(|&&end| end <= cut + 1).count();
    let read = journal::parse(&text[..cut], "fuzz").expect("a cut journal reads");
    assert_eq!(read, entries[..whole]);
}

/// A journal entry about the object and owners of `data`'s fields: kind, apiVersion, name,
/// namespace, uid, resource, the Status reason and message of the answer, then owners of four
/// fields (apiVersion, kind, name, uid). The refs and the patch name every owner's UID, as an
/// orphaning patch does.
fn record(data: &[u8]) -> Entry {
    let mut fields = fields(data);
    let mut next = || fields.next().unwrap_or_default();
    let (kind, api_version, name, namespace, uid) = (next(), next(), next(), next(), next());
    let type_meta = TypeMeta::new(Sym::new(&api_version), Sym::new(&kind));
    let object = Identity::new(type_meta, Name::new(&name), Uid::parse(&uid), Sym::new(&namespace));
    let mut record = Record::new(Source::Sent, Action::Orphan, &object, Evidence::Graph, "fuzzed");
    record.resource = Sym::new(&next());
    let (reason, message) = (next(), next());
    let rest: Vec<String> = fields.collect();
    record.owners = rest
        .chunks(4)
        .map(|o| {
            let field = |i: usize| o.get(i).map_or("", String::as_str);
            let type_meta = TypeMeta::new(Sym::new(field(0)), Sym::new(field(1)));
            let owner = OwnerRef::new(type_meta, Name::new(field(2)), Uid::parse(field(3)), None, Some(true));
            (owner, OwnerState::Orphaning, Seen::Graph)
        })
        .collect();
    record.refs = record.owners.iter().map(|(o, ..)| o.uid.clone()).collect();
    let deleted: Vec<_> = record
        .refs
        .iter()
        .map(|u| serde_json::json!({"$patch": "delete", "uid": u.to_string()}))
        .collect();
    record.patch = Some(serde_json::json!({"metadata": {"ownerReferences": deleted, "uid": uid}}));
    record.answer = Some(Answer {
        code: 422,
        reason: Some(reason),
        message: Some(message),
    });
    record.to_entry("2026-01-01T00:00:00.000001Z".into())
}
