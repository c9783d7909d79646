//! The Swagger 2.0 document in protobuf, as gnostic's `openapi.v2.Document` message, which is
//! the only form client-go's `OpenAPISchema` (and so kubectl's client-side validation) reads.
//!
//! Only what a document of definitions holds is encoded: `swagger`, `info`, an empty `paths`, and
//! each definition's schema. Schema keywords Swagger 2.0 lacks (`anyOf`, `oneOf`, `nullable`, …)
//! are left out, as upstream's v2 document leaves them out; vendor extensions are kept, with their
//! values written as YAML (JSON is YAML), as gnostic does.

use serde_json::Value;

/// A protobuf message being written: fields appended in order.
#[derive(Default)]
struct Writer(Vec<u8>);

const VARINT: u32 = 0;
const FIXED64: u32 = 1;
const BYTES: u32 = 2;

impl Writer {
    fn varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.0.push((value as u8) | 0x80);
            value >>= 7;
        }
        self.0.push(value as u8);
    }

    fn key(&mut self, field: u32, wire: u32) {
        self.varint(u64::from(field << 3 | wire));
    }

    fn bytes(&mut self, field: u32, bytes: &[u8]) {
        self.key(field, BYTES);
        self.varint(bytes.len() as u64);
        self.0.extend_from_slice(bytes);
    }

    fn string(&mut self, field: u32, value: &str) {
        self.bytes(field, value.as_bytes());
    }

    fn message(&mut self, field: u32, write: impl FnOnce(&mut Writer)) {
        let mut inner = Writer::default();
        write(&mut inner);
        self.bytes(field, &inner.0);
    }

    fn int(&mut self, field: u32, value: i64) {
        self.key(field, VARINT);
        // Protobuf's int64: a negative number is its two's complement, ten bytes long.
        self.varint(value as u64);
    }

    fn boolean(&mut self, field: u32, value: bool) {
        self.key(field, VARINT);
        self.varint(u64::from(value));
    }

    fn double(&mut self, field: u32, value: f64) {
        self.key(field, FIXED64);
        self.0.extend_from_slice(&value.to_le_bytes());
    }

    /// An `openapi.v2.Any`: the value as YAML.
    fn any(&mut self, field: u32, value: &Value) {
        self.message(field, |any| any.string(2, &value.to_string()));
    }

    /// A `Named*` pair.
    fn named(&mut self, field: u32, name: &str, write: impl FnOnce(&mut Writer)) {
        self.message(field, |pair| {
            pair.string(1, name);
            pair.message(2, write);
        });
    }
}

/// The `openapi.v2.Document` of the Swagger 2.0 JSON document `doc`.
pub(super) fn document(doc: &Value) -> Vec<u8> {
    let mut w = Writer::default();
    w.string(1, doc["swagger"].as_str().unwrap_or("2.0"));
    w.message(2, |info| {
        info.string(1, doc["info"]["title"].as_str().unwrap_or_default());
        info.string(2, doc["info"]["version"].as_str().unwrap_or_default());
    });
    w.message(8, |_| {});
    w.message(9, |definitions| {
        for (name, schema) in doc["definitions"].as_object().into_iter().flatten() {
            definitions.named(1, name, |w| write_schema(w, schema));
        }
    });
    w.0
}

/// An `openapi.v2.Schema`, fields in their numbers' order.
fn write_schema(w: &mut Writer, schema: &Value) {
    let Some(s) = schema.as_object() else { return };
    // One reader per JSON type, each writing the field only when the schema has it.
    let string = |w: &mut Writer, field, key: &str| s.get(key).and_then(Value::as_str).map(|v| w.string(field, v));
    let number = |w: &mut Writer, field, key: &str| s.get(key).and_then(Value::as_f64).map(|v| w.double(field, v));
    let int = |w: &mut Writer, field, key: &str| s.get(key).and_then(Value::as_i64).map(|v| w.int(field, v));
    let flag = |w: &mut Writer, field, key: &str| s.get(key).and_then(Value::as_bool).map(|v| w.boolean(field, v));
    string(w, 1, "$ref");
    string(w, 2, "format");
    string(w, 3, "title");
    string(w, 4, "description");
    if let Some(default) = s.get("default") {
        w.any(5, default);
    }
    number(w, 6, "multipleOf");
    number(w, 7, "maximum");
    flag(w, 8, "exclusiveMaximum");
    number(w, 9, "minimum");
    flag(w, 10, "exclusiveMinimum");
    int(w, 11, "maxLength");
    int(w, 12, "minLength");
    string(w, 13, "pattern");
    int(w, 14, "maxItems");
    int(w, 15, "minItems");
    flag(w, 16, "uniqueItems");
    int(w, 17, "maxProperties");
    int(w, 18, "minProperties");
    for required in s.get("required").and_then(Value::as_array).into_iter().flatten() {
        if let Some(name) = required.as_str() {
            w.string(19, name);
        }
    }
    for value in s.get("enum").and_then(Value::as_array).into_iter().flatten() {
        w.any(20, value);
    }
    write_structure(w, s);
    flag(w, 27, "readOnly");
    if let Some(example) = s.get("example") {
        w.any(30, example);
    }
    for (name, value) in s.iter().filter(|(k, _)| k.starts_with("x-")) {
        w.named(31, name, |any| any.string(2, &value.to_string()));
    }
}

/// Fields 21 to 25: `additionalProperties`, `type`, `items`, `allOf`, `properties`.
fn write_structure(w: &mut Writer, s: &serde_json::Map<String, Value>) {
    match s.get("additionalProperties") {
        Some(Value::Bool(allowed)) => w.message(21, |item| item.boolean(2, *allowed)),
        Some(schema @ Value::Object(_)) => w.message(21, |item| item.message(1, |w| write_schema(w, schema))),
        _ => {}
    }
    match s.get("type") {
        Some(Value::String(t)) => w.message(22, |item| item.string(1, t)),
        Some(Value::Array(types)) => w.message(22, |item| {
            types.iter().filter_map(Value::as_str).for_each(|t| item.string(1, t));
        }),
        _ => {}
    }
    match s.get("items") {
        Some(schema @ Value::Object(_)) => w.message(23, |item| item.message(1, |w| write_schema(w, schema))),
        Some(Value::Array(schemas)) => w.message(23, |item| {
            schemas
                .iter()
                .for_each(|schema| item.message(1, |w| write_schema(w, schema)));
        }),
        _ => {}
    }
    for schema in s.get("allOf").and_then(Value::as_array).into_iter().flatten() {
        w.message(24, |w| write_schema(w, schema));
    }
    if let Some(properties) = s.get("properties").and_then(Value::as_object) {
        w.message(25, |props| {
            for (name, schema) in properties {
                props.named(1, name, |w| write_schema(w, schema));
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn varints_and_fields_should_be_encoded_as_protobuf_does() {
        let mut w = Writer::default();
        w.varint(300);
        assert_eq!(w.0, [0xac, 0x02]);
        let doc = json!({"swagger": "2.0", "info": {"title": "T", "version": "v"}, "definitions": {}});
        let bytes = document(&doc);
        // swagger (field 1, bytes) "2.0", then info (field 2) holding title and version.
        assert_eq!(&bytes[..5], &[0x0a, 3, b'2', b'.', b'0']);
        assert_eq!(&bytes[5..7], &[0x12, 6]);
    }
}
