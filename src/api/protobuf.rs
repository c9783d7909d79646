//! Metadata in protobuf: `PartialObjectMetadata`, its list, the watch stream's frames and
//! `Status`, as the API server's protobuf serializer writes them and client-go's metadata client
//! reads them (`application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`).
//!
//! # The format
//!
//! A body is the 4 bytes `k8s\0`, then a `runtime.Unknown` message: its `typeMeta` (1) names the
//! apiVersion (1) and kind (2) of the object, its `raw` (2) is the object's own message. The
//! messages read and written here, by field number:
//!
//! - `PartialObjectMetadata`: `metadata` (1), an `ObjectMeta`.
//! - `PartialObjectMetadataList`: `metadata` (1), a `ListMeta`; `items` (2).
//! - `ObjectMeta`: name 1, generateName 2, namespace 3, uid 5, resourceVersion 6, generation 7,
//!   creationTimestamp 8, deletionTimestamp 9, deletionGracePeriodSeconds 10, labels 11,
//!   annotations 12 (map entries: key 1, value 2), ownerReferences 13, finalizers 14,
//!   managedFields 17.
//! - `OwnerReference`: kind 1, name 3, uid 4, apiVersion 5, controller 6, blockOwnerDeletion 7.
//! - `ListMeta`: resourceVersion 2, continue 3, remainingItemCount 4.
//! - `Time`: seconds 1, nanos 2.
//! - `ManagedFieldsEntry`: manager 1, operation 2, apiVersion 3, time 4, fieldsType 6,
//!   fieldsV1 7 (its `Raw` (1) is the JSON of the field set), subresource 8.
//! - `WatchEvent`: type 1, object 2, a `RawExtension` whose `raw` (1) is a whole body as above.
//! - `Status`: status 2, message 3, reason 4, details 5 (name 1, group 2, kind 3, causes 4
//!   (reason 1, message 2, field 3), retryAfterSeconds 5, uid 6), code 6.
//!
//! A watch response (`…;stream=watch`) is a sequence of frames, each a 4-byte big-endian length
//! and that many bytes of a `WatchEvent` body.
//!
//! # Invariants
//!
//! - No input panics a decoder: a body cut short, a length past its end, a varint over ten bytes
//!   or a wire type protobuf does not have is a [`DecodeError`]; fields this module does not know
//!   are skipped, as protobuf readers do, so a newer server's fields never fail a read.
//! - What the encoders write, the decoders read back into the same values (the round-trip tests),
//!   and a protobuf library generated from the Kubernetes `.proto` files reads it too (the
//!   simulated server's tests).
//! - A watch event is decoded lean, as the JSON watch is ([`super::watch_wire`]): the fields the
//!   collector reads and the initial-events-end annotation, nothing else. A GET or a LIST page
//!   decodes every field [`ObjectMeta`] types.
//!
//! `ListMeta.shardInfo` has no field in the released `.proto` files, so a sharded LIST asks for
//! JSON (see [`super::kube_client`]).

use super::{ObjectMeta, OwnerReference, PartialObjectMeta, WatchEventType, INITIAL_EVENTS_END};
use std::collections::BTreeMap;

/// The protobuf media type.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// The media type of a protobuf watch response.
pub const STREAM_MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";
/// What starts every protobuf body.
const MAGIC: &[u8; 4] = b"k8s\0";
/// `apiVersion` of the metadata messages.
const META_V1: &str = "meta.k8s.io/v1";
/// The most a watch frame may hold; a larger length is a broken stream, not an allocation.
pub const MAX_FRAME: usize = 64 << 20;

/// A body that is not what it should be.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("protobuf body: {0}")]
pub struct DecodeError(&'static str);

impl DecodeError {
    /// A watch frame's length over [`MAX_FRAME`].
    pub const FRAME_TOO_LONG: DecodeError = DecodeError("a watch frame longer than the most one may hold");
}

type Result<T> = std::result::Result<T, DecodeError>;

// ---------------------------------------------------------------------------------------------
// Wire primitives.

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const FIXED32: u8 = 5;

/// One field as read: a varint, or the bytes of a length-delimited field (string, bytes, message).
enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    /// A fixed-width field, which no message here uses.
    Fixed,
}

/// Reads the fields of one message in order.
struct Fields<'a> {
    rest: &'a [u8],
}

impl<'a> Fields<'a> {
    fn of(message: &'a [u8]) -> Self {
        Fields { rest: message }
    }

    fn varint(&mut self) -> Result<u64> {
        let mut value = 0u64;
        for shift in (0..70).step_by(7) {
            let (&byte, rest) = self.rest.split_first().ok_or(DecodeError("a varint is cut short"))?;
            self.rest = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError("a varint is longer than ten bytes"))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.rest.len() {
            return Err(DecodeError("a field's length runs past the end of its message"));
        }
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(head)
    }

    /// The next field and its number, or `None` at the end of the message.
    fn next(&mut self) -> Result<Option<(u64, Value<'a>)>> {
        if self.rest.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let value = match (key & 7) as u8 {
            VARINT => Value::Varint(self.varint()?),
            LEN => {
                let n = usize::try_from(self.varint()?).map_err(|_| DecodeError("a length overflows"))?;
                Value::Bytes(self.take(n)?)
            }
            FIXED64 => {
                self.take(8)?;
                Value::Fixed
            }
            FIXED32 => {
                self.take(4)?;
                Value::Fixed
            }
            _ => return Err(DecodeError("a wire type protobuf does not have")),
        };
        Ok(Some((key >> 3, value)))
    }
}

impl<'a> Value<'a> {
    fn bytes(&self) -> Result<&'a [u8]> {
        match self {
            Value::Bytes(b) => Ok(b),
            _ => Err(DecodeError("a varint where a length-delimited field belongs")),
        }
    }

    fn string(&self) -> Result<String> {
        Ok(self.str()?.to_owned())
    }

    fn str(&self) -> Result<&'a str> {
        std::str::from_utf8(self.bytes()?).map_err(|_| DecodeError("a string that is not UTF-8"))
    }

    fn int(&self) -> Result<i64> {
        match self {
            // Negative int64 and int32 values are ten-byte two's complement varints.
            Value::Varint(v) => Ok(*v as i64),
            _ => Err(DecodeError("a length-delimited field where a varint belongs")),
        }
    }
}

/// Writes fields into one buffer; a message's length is written once its fields are.
#[derive(Default)]
struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    fn raw_varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    fn key(&mut self, field: u64, wire: u8) {
        self.raw_varint(field << 3 | u64::from(wire));
    }

    fn int(&mut self, field: u64, v: i64) {
        self.key(field, VARINT);
        self.raw_varint(v as u64);
    }

    fn bytes(&mut self, field: u64, b: &[u8]) {
        self.key(field, LEN);
        self.raw_varint(b.len() as u64);
        self.buf.extend_from_slice(b);
    }

    /// A string field, left out when empty, as Go leaves out what its JSON omits.
    fn string(&mut self, field: u64, s: &str) {
        if !s.is_empty() {
            self.bytes(field, s.as_bytes());
        }
    }

    fn message(&mut self, field: u64, fields: impl FnOnce(&mut Self)) {
        self.key(field, LEN);
        let at = self.buf.len();
        self.buf.push(0);
        fields(self);
        let len = self.buf.len() - at - 1;
        if len < 0x80 {
            self.buf[at] = len as u8;
        } else {
            let mut head = Writer::default();
            head.raw_varint(len as u64);
            self.buf.splice(at..=at, head.buf);
        }
    }

    /// `k8s\0` and the `Unknown` holding a message of `api_version`/`kind`.
    fn envelope(api_version: &str, kind: &str, raw: impl FnOnce(&mut Self)) -> Vec<u8> {
        let mut w = Writer { buf: MAGIC.to_vec() };
        w.message(1, |w| {
            w.string(1, api_version);
            w.string(2, kind);
        });
        w.message(2, raw);
        w.buf
    }
}

/// The `raw` of a body's `Unknown`: the object's own message.
fn unwrap_envelope(body: &[u8]) -> Result<&[u8]> {
    let unknown = body.strip_prefix(MAGIC).ok_or(DecodeError("no k8s\\0 prefix"))?;
    let mut raw: &[u8] = &[];
    let mut fields = Fields::of(unknown);
    while let Some((field, value)) = fields.next()? {
        if field == 2 {
            raw = value.bytes()?;
        }
    }
    Ok(raw)
}

// ---------------------------------------------------------------------------------------------
// Objects.

/// How much of an `ObjectMeta` a read keeps.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keep {
    /// Every field [`ObjectMeta`] types.
    All,
    /// What the collector reads from a watch event (see the [module docs](self)).
    Lean,
}

/// A `PartialObjectMetadata` body, as a GET answers it.
pub fn decode_object(body: &[u8]) -> Result<PartialObjectMeta> {
    partial_object(unwrap_envelope(body)?, Keep::All)
}

fn partial_object(message: &[u8], keep: Keep) -> Result<PartialObjectMeta> {
    let mut object = PartialObjectMeta::default();
    let mut fields = Fields::of(message);
    while let Some((field, value)) = fields.next()? {
        if field == 1 {
            object.metadata = object_meta(value.bytes()?, keep)?;
        }
    }
    Ok(object)
}

fn object_meta(message: &[u8], keep: Keep) -> Result<ObjectMeta> {
    let mut meta = ObjectMeta::default();
    let all = keep == Keep::All;
    let mut fields = Fields::of(message);
    while let Some((field, value)) = fields.next()? {
        match field {
            1 => meta.name = value.string()?,
            2 if all => meta.generate_name = value.string()?,
            3 => meta.namespace = value.string()?,
            5 => meta.uid = value.string()?,
            6 => meta.resource_version = value.string()?,
            7 if all => meta.generation = Some(value.int()?),
            8 if all => meta.creation_timestamp = time(value.bytes()?)?,
            9 => meta.deletion_timestamp = time(value.bytes()?)?,
            10 if all => meta.deletion_grace_period_seconds = Some(value.int()?),
            11 if all => insert_entry(&mut meta.labels, value.bytes()?)?,
            12 if all => insert_entry(&mut meta.annotations, value.bytes()?)?,
            12 => {
                let (key, text) = entry(value.bytes()?)?;
                if key == INITIAL_EVENTS_END {
                    meta.annotations.insert(key.to_owned(), text.to_owned());
                }
            }
            13 => meta.owner_references.push(owner_reference(value.bytes()?)?),
            14 => meta.finalizers.push(value.string()?),
            _ => {}
        }
    }
    Ok(meta)
}

fn owner_reference(message: &[u8]) -> Result<OwnerReference> {
    let mut owner = OwnerReference::default();
    let mut fields = Fields::of(message);
    while let Some((field, value)) = fields.next()? {
        match field {
            1 => owner.kind = value.string()?,
            3 => owner.name = value.string()?,
            4 => owner.uid = value.string()?,
            5 => owner.api_version = value.string()?,
            6 => owner.controller = Some(value.int()? != 0),
            7 => owner.block_owner_deletion = Some(value.int()? != 0),
            _ => {}
        }
    }
    Ok(owner)
}

/// A map entry's key and value.
fn entry(message: &[u8]) -> Result<(&str, &str)> {
    let (mut key, mut text) = ("", "");
    let mut fields = Fields::of(message);
    while let Some((field, value)) = fields.next()? {
        match field {
            1 => key = value.str()?,
            2 => text = value.str()?,
            _ => {}
        }
    }
    Ok((key, text))
}

fn insert_entry(map: &mut BTreeMap<String, String>, message: &[u8]) -> Result<()> {
    let (key, text) = entry(message)?;
    map.insert(key.to_owned(), text.to_owned());
    Ok(())
}

/// A `Time` as `metav1.Time` writes it in JSON; none for Go's zero time, which JSON leaves out.
fn time(message: &[u8]) -> Result<Option<String>> {
    let mut seconds = 0;
    let mut fields = Fields::of(message);
    while let Some((field, value)) = fields.next()? {
        if field == 1 {
            seconds = value.int()?;
        }
    }
    if seconds == GO_ZERO_TIME {
        return Ok(None);
    }
    super::time::rfc3339_of_seconds(seconds)
        .map(Some)
        .ok_or(DecodeError("a time out of range"))
}

/// Seconds since the Unix epoch of Go's zero `time.Time` (year 1), which `metav1.Time` writes
/// for an unset time.
const GO_ZERO_TIME: i64 = -62_135_596_800;

/// `meta` and its managed fields (a JSON list of `ManagedFieldsEntry`) as `PartialObjectMetadata`.
pub fn encode_object(meta: &ObjectMeta, managed_fields: Option<&serde_json::Value>) -> Vec<u8> {
    Writer::envelope(META_V1, "PartialObjectMetadata", |w| {
        w.message(1, |w| write_object_meta(w, meta, managed_fields));
    })
}

fn write_object_meta(w: &mut Writer, meta: &ObjectMeta, managed_fields: Option<&serde_json::Value>) {
    w.string(1, &meta.name);
    w.string(2, &meta.generate_name);
    w.string(3, &meta.namespace);
    w.string(5, &meta.uid);
    w.string(6, &meta.resource_version);
    if let Some(generation) = meta.generation {
        w.int(7, generation);
    }
    write_time(w, 8, meta.creation_timestamp.as_deref());
    write_time(w, 9, meta.deletion_timestamp.as_deref());
    if let Some(grace) = meta.deletion_grace_period_seconds {
        w.int(10, grace);
    }
    for (field, map) in [(11, &meta.labels), (12, &meta.annotations)] {
        for (key, value) in map {
            w.message(field, |w| {
                w.bytes(1, key.as_bytes());
                w.bytes(2, value.as_bytes());
            });
        }
    }
    for owner in &meta.owner_references {
        w.message(13, |w| {
            w.string(1, &owner.kind);
            w.string(3, &owner.name);
            w.string(4, &owner.uid);
            w.string(5, &owner.api_version);
            if let Some(controller) = owner.controller {
                w.int(6, i64::from(controller));
            }
            if let Some(block) = owner.block_owner_deletion {
                w.int(7, i64::from(block));
            }
        });
    }
    for finalizer in &meta.finalizers {
        w.bytes(14, finalizer.as_bytes());
    }
    for entry in managed_fields
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
    {
        w.message(17, |w| write_managed_fields_entry(w, entry));
    }
}

fn write_managed_fields_entry(w: &mut Writer, entry: &serde_json::Value) {
    let text = |key: &str| entry.get(key).and_then(serde_json::Value::as_str).unwrap_or("");
    w.string(1, text("manager"));
    w.string(2, text("operation"));
    w.string(3, text("apiVersion"));
    write_time(w, 4, entry.get("time").and_then(serde_json::Value::as_str));
    w.string(6, text("fieldsType"));
    if let Some(fields) = entry.get("fieldsV1") {
        w.message(7, |w| w.bytes(1, fields.to_string().as_bytes()));
    }
    w.string(8, text("subresource"));
}

fn write_time(w: &mut Writer, field: u64, rfc3339: Option<&str>) {
    if let Some(seconds) = rfc3339.and_then(super::time::seconds_of_rfc3339) {
        w.message(field, |w| w.int(1, seconds));
    }
}

// ---------------------------------------------------------------------------------------------
// Lists.

/// What a list page says of itself (`ListMeta`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListMeta {
    /// The collection's resourceVersion at the list.
    pub resource_version: String,
    /// Where the next page starts; empty on the last.
    pub continue_token: String,
    /// How many objects the next pages hold, when the server counted them.
    pub remaining_item_count: Option<i64>,
}

/// A page of a `PartialObjectMetadataList`: its objects and where it stands.
pub fn decode_list(body: &[u8]) -> Result<(Vec<PartialObjectMeta>, ListMeta)> {
    let mut items = Vec::new();
    let mut start = ListMeta::default();
    let mut fields = Fields::of(unwrap_envelope(body)?);
    while let Some((field, value)) = fields.next()? {
        match field {
            1 => start = list_meta(value.bytes()?)?,
            2 => items.push(partial_object(value.bytes()?, Keep::All)?),
            _ => {}
        }
    }
    Ok((items, start))
}

fn list_meta(message: &[u8]) -> Result<ListMeta> {
    let mut start = ListMeta::default();
    let mut fields = Fields::of(message);
    while let Some((field, value)) = fields.next()? {
        match field {
            2 => start.resource_version = value.string()?,
            3 => start.continue_token = value.string()?,
            4 => start.remaining_item_count = Some(value.int()?),
            _ => {}
        }
    }
    Ok(start)
}

/// A `PartialObjectMetadataList` of `items`, each with its managed fields.
pub fn encode_list<'a>(
    items: impl IntoIterator<Item = (&'a ObjectMeta, Option<&'a serde_json::Value>)>,
    start: &ListMeta,
) -> Vec<u8> {
    Writer::envelope(META_V1, "PartialObjectMetadataList", |w| {
        w.message(1, |w| {
            w.string(2, &start.resource_version);
            w.string(3, &start.continue_token);
            if let Some(remaining) = start.remaining_item_count {
                w.int(4, remaining);
            }
        });
        for (meta, managed_fields) in items {
            w.message(2, |w| w.message(1, |w| write_object_meta(w, meta, managed_fields)));
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Watch events.

/// One decoded watch frame.
// One per frame, moved once into the stream's item, as the JSON watch's `Decoded` is: boxing the
// object would cost an allocation per event.
#[allow(clippy::large_enum_variant)]
pub enum Frame {
    /// An ADDED, MODIFIED, DELETED or BOOKMARK event; the object keeps what the collector reads.
    Event(WatchEventType, PartialObjectMeta),
    /// An ERROR event: its object is the server's `Status`.
    Error(Box<::kube::core::Status>),
}

/// A frame's `WatchEvent` body (without its length prefix).
pub fn decode_watch_event(frame: &[u8]) -> Result<Frame> {
    let mut event_type = "";
    let mut object: &[u8] = &[];
    let mut fields = Fields::of(unwrap_envelope(frame)?);
    while let Some((field, value)) = fields.next()? {
        match field {
            1 => event_type = value.str()?,
            2 => {
                let mut raw = Fields::of(value.bytes()?);
                while let Some((field, value)) = raw.next()? {
                    if field == 1 {
                        object = value.bytes()?;
                    }
                }
            }
            _ => {}
        }
    }
    let event_type = match event_type {
        "ADDED" => WatchEventType::Added,
        "MODIFIED" => WatchEventType::Modified,
        "DELETED" => WatchEventType::Deleted,
        "BOOKMARK" => WatchEventType::Bookmark,
        "ERROR" => return decode_status(object).map(|status| Frame::Error(Box::new(status))),
        _ => return Err(DecodeError("a watch event of no known type")),
    };
    Ok(Frame::Event(
        event_type,
        partial_object(unwrap_envelope(object)?, Keep::Lean)?,
    ))
}

/// A watch frame, its length prefix included, of an event whose object is the body `object`
/// ([`encode_object`] or [`encode_status`]).
pub fn encode_watch_event(event_type: &str, object: &[u8]) -> Vec<u8> {
    let body = Writer::envelope(META_V1, "WatchEvent", |w| {
        w.string(1, event_type);
        w.message(2, |w| w.bytes(1, object));
    });
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
    frame.extend_from_slice(&body);
    frame
}

// ---------------------------------------------------------------------------------------------
// Status.

/// A `Status` body.
pub fn decode_status(body: &[u8]) -> Result<::kube::core::Status> {
    let mut status = ::kube::core::Status::default();
    let mut fields = Fields::of(unwrap_envelope(body)?);
    while let Some((field, value)) = fields.next()? {
        match field {
            2 => {
                status.status = match value.str()? {
                    "Success" => Some(::kube::core::response::StatusSummary::Success),
                    "Failure" => Some(::kube::core::response::StatusSummary::Failure),
                    _ => None,
                }
            }
            3 => status.message = value.string()?,
            4 => status.reason = value.string()?,
            5 => status.details = Some(status_details(value.bytes()?)?),
            6 => status.code = u16::try_from(value.int()?).unwrap_or(0),
            _ => {}
        }
    }
    Ok(status)
}

fn status_details(message: &[u8]) -> Result<::kube::core::response::StatusDetails> {
    let mut details = ::kube::core::response::StatusDetails {
        name: String::new(),
        group: String::new(),
        kind: String::new(),
        uid: String::new(),
        causes: Vec::new(),
        retry_after_seconds: 0,
    };
    let mut fields = Fields::of(message);
    while let Some((field, value)) = fields.next()? {
        match field {
            1 => details.name = value.string()?,
            2 => details.group = value.string()?,
            3 => details.kind = value.string()?,
            4 => details.causes.push(status_cause(value.bytes()?)?),
            5 => details.retry_after_seconds = u32::try_from(value.int()?).unwrap_or(0),
            6 => details.uid = value.string()?,
            _ => {}
        }
    }
    Ok(details)
}

fn status_cause(message: &[u8]) -> Result<::kube::core::response::StatusCause> {
    let mut cause = ::kube::core::response::StatusCause {
        reason: String::new(),
        message: String::new(),
        field: String::new(),
    };
    let mut fields = Fields::of(message);
    while let Some((field, value)) = fields.next()? {
        match field {
            1 => cause.reason = value.string()?,
            2 => cause.message = value.string()?,
            3 => cause.field = value.string()?,
            _ => {}
        }
    }
    Ok(cause)
}

/// `status` as a `Status` body.
pub fn encode_status(status: &::kube::core::Status) -> Vec<u8> {
    Writer::envelope("v1", "Status", |w| {
        w.message(1, |_| {});
        let summary = match status.status {
            Some(::kube::core::response::StatusSummary::Success) => "Success",
            Some(::kube::core::response::StatusSummary::Failure) => "Failure",
            None => "",
        };
        w.string(2, summary);
        w.string(3, &status.message);
        w.string(4, &status.reason);
        if let Some(details) = &status.details {
            w.message(5, |w| {
                w.string(1, &details.name);
                w.string(2, &details.group);
                w.string(3, &details.kind);
                for cause in &details.causes {
                    w.message(4, |w| {
                        w.string(1, &cause.reason);
                        w.string(2, &cause.message);
                        w.string(3, &cause.field);
                    });
                }
                if details.retry_after_seconds > 0 {
                    w.int(5, i64::from(details.retry_after_seconds));
                }
                w.string(6, &details.uid);
            });
        }
        w.int(6, i64::from(status.code));
    })
}

#[cfg(test)]
mod tests;
