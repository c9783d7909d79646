//! The watch stream on the wire, decoded straight into the monitors' [`WatchEvent`]: one JSON
//! event per line, `{"object": …, "type": …}`, or (`…protobuf;stream=watch`) a 4-byte big-endian
//! length before each protobuf `WatchEvent` ([`super::protobuf`]).
//!
//! Invariant: an event is decoded into the few metadata fields the collector reads (name, namespace,
//! UID, resourceVersion, deletion timestamp, owner references, finalizers, and whether a bookmark
//! ends a watch-list's initial events) and nothing else is kept: labels, other annotations,
//! managed fields and the rest of the object are skipped as they are parsed.
//!
//! Why not kube-rs's `request_events`: its event is an adjacently tagged enum, which serde can
//! only decode without buffering when `type` comes before `object`; kube-apiserver (and the
//! simulated server) write `object` first, so every object was first parsed into a generic tree
//! and then into the struct, whose own flattened "other fields" map parsed it once more. Syncing a
//! million objects, that double parse and its allocations were about a sixth of the collector's
//! CPU. Here the line is read into one buffer reused for every line and parsed once.
//!
//! The stream ends, as kube-rs's does, when the server closes it, when the connection breaks mid
//! line or mid frame (an unexpected EOF, which a long watch meets), or when a read times out: the
//! monitor then resumes from the last resourceVersion it saw. Any other read error, a line or
//! frame that is not a watch event, and a frame longer than [`super::protobuf::MAX_FRAME`], is an
//! [`ApiError::Transport`]; an `ERROR` event is the server's `Status`.

use super::protobuf::{self, Frame};
use super::{ApiError, ObjectMeta, OwnerReference, PartialObjectMeta, TransportError, WatchEvent, WatchEventType};
use super::{WatchStream, INITIAL_EVENTS_END};
use futures::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt};
use futures::StreamExt;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;

/// The events of a JSON watch response's body, each object stamped with `api_version` and `kind`.
pub(crate) fn events(body: impl AsyncBufRead + Send + 'static, api_version: String, kind: String) -> WatchStream {
    read(body, Framing::Lines, api_version, kind)
}

/// The events of a protobuf watch response's body, each object stamped with `api_version` and
/// `kind`.
pub(crate) fn frames(body: impl AsyncBufRead + Send + 'static, api_version: String, kind: String) -> WatchStream {
    read(body, Framing::Frames, api_version, kind)
}

fn read(body: impl AsyncBufRead + Send + 'static, framing: Framing, api_version: String, kind: String) -> WatchStream {
    let body = Body {
        body: Box::pin(body),
        framing,
        buf: Vec::new(),
        api_version,
        kind,
    };
    futures::stream::unfold(body, |mut body| async move {
        let event = match body.framing {
            Framing::Lines => body.next_line().await,
            Framing::Frames => body.next_frame().await,
        }?;
        Some((event, body))
    })
    .boxed()
}

/// How a body's events are delimited.
#[derive(Clone, Copy)]
enum Framing {
    /// JSON, one event per line.
    Lines,
    /// Protobuf, a length before each event.
    Frames,
}

/// A body being read event by event.
struct Body {
    body: Pin<Box<dyn AsyncBufRead + Send>>,
    framing: Framing,
    /// The line or frame being read; its allocation serves every one.
    buf: Vec<u8>,
    api_version: String,
    kind: String,
}

impl Body {
    /// The next event of a protobuf body, or `None` once the stream has ended.
    async fn next_frame(&mut self) -> Option<Result<WatchEvent, ApiError>> {
        let mut length = [0; 4];
        if let Err(e) = self.body.read_exact(&mut length).await {
            return ended(e);
        }
        let length = u32::from_be_bytes(length) as usize;
        if length > protobuf::MAX_FRAME {
            return Some(Err(transport(protobuf::DecodeError::FRAME_TOO_LONG)));
        }
        self.buf.resize(length, 0);
        if let Err(e) = self.body.read_exact(&mut self.buf).await {
            return ended(e);
        }
        Some(match protobuf::decode_watch_event(&self.buf) {
            Err(e) => Err(transport(e)),
            Ok(Frame::Error(status)) => Err(super::kube_client::api_error(::kube::Error::Api(status))),
            Ok(Frame::Event(event_type, mut object)) => {
                object.api_version.clone_from(&self.api_version);
                object.kind.clone_from(&self.kind);
                Ok(WatchEvent {
                    event_type,
                    object: Arc::new(object),
                })
            }
        })
    }

    /// The next event of a JSON body, or `None` once the stream has ended.
    async fn next_line(&mut self) -> Option<Result<WatchEvent, ApiError>> {
        loop {
            self.buf.clear();
            match self.body.read_until(b'\n', &mut self.buf).await {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) => return ended(e),
            }
            let line = self.buf.trim_ascii();
            if line.is_empty() {
                continue;
            }
            return match decode(line, &self.api_version, &self.kind) {
                // A last line cut short, as a closed connection may leave it.
                Err(e) if e.is_eof() => None,
                Err(e) => Some(Err(transport(e))),
                Ok(Decoded::Event(event)) => Some(Ok(event)),
                Ok(Decoded::Error(status)) => Some(Err(super::kube_client::api_error(::kube::Error::Api(status)))),
            };
        }
    }
}

/// A read error: the stream's quiet end (`None`; at a frame's boundary too, where `read_exact`
/// meets the end of the body), or an error.
fn ended(error: std::io::Error) -> Option<Result<WatchEvent, ApiError>> {
    if ends_the_stream(&error) {
        tracing::debug!(%error, "watch stream ended by the connection");
        return None;
    }
    Some(Err(transport(error)))
}

/// Whether a read error ends the stream quietly, for the monitor to resume it: the connection
/// broke (an unexpected EOF anywhere in the error's chain: the chunked decoder's or a TLS
/// stack's) or a read timed out.
fn ends_the_stream(error: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    if matches!(error.kind(), ErrorKind::UnexpectedEof | ErrorKind::TimedOut) {
        return true;
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = error.get_ref().map(|inner| inner as _);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            if matches!(io.kind(), ErrorKind::UnexpectedEof | ErrorKind::TimedOut) {
                return true;
            }
        }
        source = cause.source();
    }
    false
}

fn transport(error: impl std::error::Error + Send + Sync + 'static) -> ApiError {
    ApiError::Transport {
        source: TransportError::new(error),
    }
}

/// A decoded line.
// One per line, moved once into the stream's item: boxing the event would cost an allocation per
// event to save a copy of a few hundred bytes.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Decoded {
    Event(WatchEvent),
    Error(Box<::kube::core::Status>),
}

pub(crate) fn decode(line: &[u8], api_version: &str, kind: &str) -> Result<Decoded, serde_json::Error> {
    let wire: WireEvent = serde_json::from_slice(line)?;
    let event_type = match wire.event_type {
        WireType::Added => WatchEventType::Added,
        WireType::Modified => WatchEventType::Modified,
        WireType::Deleted => WatchEventType::Deleted,
        WireType::Bookmark => WatchEventType::Bookmark,
        // Rare: the line is read again, for the `Status` its object is.
        WireType::Error => {
            let error: WireError = serde_json::from_slice(line)?;
            return Ok(Decoded::Error(Box::new(error.object)));
        }
    };
    let meta = wire.object.metadata;
    let mut annotations = BTreeMap::new();
    if meta.initial_events_end {
        annotations.insert(INITIAL_EVENTS_END.to_owned(), "true".to_owned());
    }
    let object = PartialObjectMeta {
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
        metadata: ObjectMeta {
            name: meta.name,
            namespace: meta.namespace,
            uid: meta.uid,
            resource_version: meta.resource_version,
            deletion_timestamp: meta.deletion_timestamp,
            annotations,
            owner_references: meta.owner_references,
            finalizers: meta.finalizers,
            ..ObjectMeta::default()
        },
        rest: serde_json::Map::new(),
    };
    Ok(Decoded::Event(WatchEvent {
        event_type,
        object: Arc::new(object),
    }))
}

/// `{"type": …, "object": …}`, in either order.
#[derive(Deserialize)]
struct WireEvent {
    #[serde(rename = "type")]
    event_type: WireType,
    #[serde(default)]
    object: WireObject,
}

#[derive(Deserialize)]
#[serde(rename_all = "UPPERCASE")]
enum WireType {
    Added,
    Modified,
    Deleted,
    Bookmark,
    Error,
}

/// An `ERROR` event: its object is a `Status`.
#[derive(Deserialize)]
struct WireError {
    object: ::kube::core::Status,
}

#[derive(Default, Deserialize)]
struct WireObject {
    #[serde(default)]
    metadata: WireMeta,
}

/// The metadata fields the collector reads; every other field is skipped unparsed into values.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireMeta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    uid: String,
    #[serde(default)]
    resource_version: String,
    #[serde(default)]
    deletion_timestamp: Option<String>,
    #[serde(default, rename = "annotations", deserialize_with = "initial_events_end")]
    initial_events_end: bool,
    #[serde(default, deserialize_with = "super::types::null_as_default")]
    owner_references: Vec<OwnerReference>,
    #[serde(default, deserialize_with = "super::types::null_as_default")]
    finalizers: Vec<String>,
}

/// Whether an `annotations` map (or `null`) holds [`INITIAL_EVENTS_END`]`: "true"`; no other
/// annotation is kept, nor its key copied.
fn initial_events_end<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    struct Annotations;
    impl<'de> Visitor<'de> for Annotations {
        type Value = bool;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a map of annotations")
        }

        fn visit_unit<E>(self) -> Result<bool, E> {
            Ok(false)
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
            let mut ends = false;
            while let Some(is_end) = map.next_key_seed(IsInitialEventsEnd)? {
                if is_end {
                    ends = map.next_value::<String>()? == "true";
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(ends)
        }
    }
    d.deserialize_any(Annotations)
}

/// An annotation key, read as whether it is [`INITIAL_EVENTS_END`].
struct IsInitialEventsEnd;

impl<'de> DeserializeSeed<'de> for IsInitialEventsEnd {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for IsInitialEventsEnd {
    type Value = bool;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an annotation key")
    }

    fn visit_str<E>(self, key: &str) -> Result<bool, E> {
        Ok(key == INITIAL_EVENTS_END)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(line: &str) -> WatchEvent {
        match decode(line.as_bytes(), "v1", "Pod") {
            Ok(Decoded::Event(event)) => event,
            Ok(Decoded::Error(status)) => panic!("an ERROR event: {status:?}"),
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn an_event_with_its_object_first_should_keep_what_the_collector_reads() {
        let line = r#"{"object":{"apiVersion":"meta.k8s.io/v1","kind":"PartialObjectMetadata","metadata":{"creationTimestamp":"2026-01-01T00:00:00Z","name":"p","namespace":"n","labels":{"app":"a"},"annotations":{"x":"y"},"managedFields":[{"manager":"m","fieldsV1":{"f:a":{}}}],"ownerReferences":[{"apiVersion":"apps/v1","blockOwnerDeletion":true,"controller":true,"kind":"ReplicaSet","name":"r","uid":"d215481d-a37b-4297-915f-0a112fe3a8b2"}],"deletionTimestamp":"2026-01-01T00:00:01Z","finalizers":["orphan"],"resourceVersion":"45","uid":"52224327-8725-4086-8a48-4a297f840ed5"}},"type":"MODIFIED"}"#;
        let event = event(line);
        assert_eq!(event.event_type, WatchEventType::Modified);
        let meta = &event.object.metadata;
        assert_eq!((meta.name.as_str(), meta.namespace.as_str()), ("p", "n"));
        assert_eq!(meta.uid, "52224327-8725-4086-8a48-4a297f840ed5");
        assert_eq!(meta.resource_version, "45");
        assert_eq!(meta.deletion_timestamp.as_deref(), Some("2026-01-01T00:00:01Z"));
        assert_eq!(meta.finalizers, ["orphan"]);
        assert_eq!(meta.owner_references.len(), 1);
        assert_eq!(meta.owner_references[0].block_owner_deletion, Some(true));
        assert!(meta.labels.is_empty() && meta.annotations.is_empty());
        assert_eq!(
            (event.object.api_version.as_str(), event.object.kind.as_str()),
            ("v1", "Pod")
        );
        assert!(!event.is_initial_events_end());
    }

    #[test]
    fn a_bookmark_should_say_whether_it_ends_the_initial_events() {
        let end = event(
            r#"{"object":{"metadata":{"annotations":{"a":"b","k8s.io/initial-events-end":"true"},"resourceVersion":"10011"}},"type":"BOOKMARK"}"#,
        );
        assert!(end.is_initial_events_end());
        assert_eq!(end.object.metadata.resource_version, "10011");
        let plain = event(r#"{"type":"BOOKMARK","object":{"metadata":{"annotations":null,"resourceVersion":"7"}}}"#);
        assert!(!plain.is_initial_events_end());
        let not_true =
            event(r#"{"type":"BOOKMARK","object":{"metadata":{"annotations":{"k8s.io/initial-events-end":"false"}}}}"#);
        assert!(!not_true.is_initial_events_end());
    }

    #[test]
    fn an_error_event_should_be_the_servers_status() {
        let line = r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (2)","reason":"Expired","code":410}}"#;
        let Ok(Decoded::Error(status)) = decode(line.as_bytes(), "v1", "Pod") else {
            panic!("not an error");
        };
        assert_eq!(status.code, 410);
        assert!(super::super::kube_client::api_error(::kube::Error::Api(status)).is_gone());
    }

    #[tokio::test]
    async fn a_body_should_stream_its_lines_skip_blank_ones_and_end_at_a_cut_line() {
        let body = concat!(
            r#"{"type":"ADDED","object":{"metadata":{"name":"a","uid":"1"}}}"#,
            "\n\n",
            r#"{"type":"DELETED","object":{"metadata":{"name":"b","uid":"2"}}}"#,
            "\n",
            r#"{"type":"ADDED","object":{"metadata":{"na"#,
        );
        let mut stream = events(
            futures::io::Cursor::new(body.as_bytes().to_vec()),
            "v1".into(),
            "Pod".into(),
        );
        let first = stream.next().await.unwrap().unwrap();
        assert_eq!(
            (first.event_type, first.object.metadata.name.as_str()),
            (WatchEventType::Added, "a")
        );
        let second = stream.next().await.unwrap().unwrap();
        assert_eq!(
            (second.event_type, second.object.metadata.name.as_str()),
            (WatchEventType::Deleted, "b")
        );
        assert!(stream.next().await.is_none());
    }

    #[tokio::test]
    async fn a_protobuf_body_should_stream_its_frames_and_end_at_a_cut_frame() {
        let object = |name: &str, uid: &str| {
            let meta = ObjectMeta {
                name: name.into(),
                uid: uid.into(),
                labels: BTreeMap::from([("app".into(), "a".into())]),
                ..ObjectMeta::default()
            };
            protobuf::encode_object(&meta, None)
        };
        let mut body = protobuf::encode_watch_event("ADDED", &object("a", "1"));
        body.extend(protobuf::encode_watch_event("DELETED", &object("b", "2")));
        let cut = protobuf::encode_watch_event("ADDED", &object("c", "3"));
        body.extend_from_slice(&cut[..cut.len() - 3]);
        let mut stream = frames(futures::io::Cursor::new(body), "v1".into(), "Pod".into());
        let first = stream.next().await.unwrap().unwrap();
        assert_eq!(
            (
                first.event_type,
                first.object.metadata.name.as_str(),
                first.object.kind.as_str()
            ),
            (WatchEventType::Added, "a", "Pod")
        );
        assert!(first.object.metadata.labels.is_empty(), "a watch keeps no labels");
        let second = stream.next().await.unwrap().unwrap();
        assert_eq!(
            (second.event_type, second.object.metadata.uid.as_str()),
            (WatchEventType::Deleted, "2")
        );
        assert!(stream.next().await.is_none());
    }

    #[tokio::test]
    async fn a_frame_longer_than_the_limit_should_be_an_error_not_an_allocation() {
        let body = u32::MAX.to_be_bytes().to_vec();
        let mut stream = frames(futures::io::Cursor::new(body), "v1".into(), "Pod".into());
        assert!(matches!(stream.next().await, Some(Err(ApiError::Transport { .. }))));
    }

    #[tokio::test]
    async fn a_line_that_is_no_event_should_be_an_error() {
        let body = "{\"type\":\"SOMETHING\",\"object\":{}}\n";
        let mut stream = events(
            futures::io::Cursor::new(body.as_bytes().to_vec()),
            "v1".into(),
            "Pod".into(),
        );
        assert!(matches!(stream.next().await, Some(Err(ApiError::Transport { .. }))));
    }
}
