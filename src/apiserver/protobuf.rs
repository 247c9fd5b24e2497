//! Request bodies in the Kubernetes protobuf encoding (`application/vnd.kubernetes.
//! protobuf`), which client-go's typed clients send for built-in kinds: `kubectl create
//! namespace` does, and client-go falls back to JSON only after a 415 to a CBOR body,
//! never to a protobuf one. So the server must read them.
//!
//! Only decoding, and only the messages listed here (a Namespace, and the DeleteOptions
//! a typed client's delete carries), each described by a table of its fields. Other
//! kinds in protobuf get 415 Unsupported Media Type, which says why. Responses are
//! always JSON, which every client that sends protobuf also accepts.
//!
//! The wire format: `k8s\0`, then a `runtime.Unknown` holding the TypeMeta and the
//! object's own protobuf bytes. gogo-protobuf writes every non-pointer field, zero or
//! not; JSON omits the zero ones (`omitempty`), so decoding drops them too, except for
//! pointer fields, where a zero was set on purpose.

use k8s_openapi::jiff::Timestamp;
use serde_json::{Map, Value, json};

use super::status::ApiError;

pub(crate) const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The envelope's magic number.
const MAGIC: &[u8] = b"k8s\0";

#[derive(Clone, Copy)]
enum Kind {
    String,
    Int,
    Bool,
    /// `metav1.Time`: seconds and nanos, RFC 3339 in JSON; empty is the zero time (null).
    Time,
    Message(&'static [Field]),
    Strings,
    Messages(&'static [Field]),
    /// `map<string, string>`: repeated entries of key (1) and value (2).
    StringMap,
}

#[derive(Clone, Copy)]
struct Field {
    number: u64,
    name: &'static str,
    kind: Kind,
    /// A pointer in Go: present means set, even to a zero value.
    pointer: bool,
}

const fn f(number: u64, name: &'static str, kind: Kind) -> Field {
    Field {
        number,
        name,
        kind,
        pointer: false,
    }
}

const fn ptr(number: u64, name: &'static str, kind: Kind) -> Field {
    Field {
        number,
        name,
        kind,
        pointer: true,
    }
}

// Field numbers from k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto and
// k8s.io/api/core/v1/generated.proto. Server-owned fields (uid, resourceVersion,
// managedFields, ...) are not read: the server sets them.
const OBJECT_META: &[Field] = &[
    f(1, "name", Kind::String),
    f(2, "generateName", Kind::String),
    f(3, "namespace", Kind::String),
    f(6, "resourceVersion", Kind::String),
    f(8, "creationTimestamp", Kind::Time),
    f(11, "labels", Kind::StringMap),
    f(12, "annotations", Kind::StringMap),
    f(13, "ownerReferences", Kind::Messages(OWNER_REFERENCE)),
    f(14, "finalizers", Kind::Strings),
];

const OWNER_REFERENCE: &[Field] = &[
    f(1, "kind", Kind::String),
    f(3, "name", Kind::String),
    f(4, "uid", Kind::String),
    f(5, "apiVersion", Kind::String),
    ptr(6, "controller", Kind::Bool),
    ptr(7, "blockOwnerDeletion", Kind::Bool),
];

const NAMESPACE: &[Field] = &[
    f(1, "metadata", Kind::Message(OBJECT_META)),
    f(2, "spec", Kind::Message(NAMESPACE_SPEC)),
    f(3, "status", Kind::Message(NAMESPACE_STATUS)),
];

const NAMESPACE_SPEC: &[Field] = &[f(1, "finalizers", Kind::Strings)];

const NAMESPACE_STATUS: &[Field] = &[
    f(1, "phase", Kind::String),
    f(2, "conditions", Kind::Messages(NAMESPACE_CONDITION)),
];

const NAMESPACE_CONDITION: &[Field] = &[
    f(1, "type", Kind::String),
    f(2, "status", Kind::String),
    f(4, "lastTransitionTime", Kind::Time),
    f(5, "reason", Kind::String),
    f(6, "message", Kind::String),
];

const DELETE_OPTIONS: &[Field] = &[
    ptr(1, "gracePeriodSeconds", Kind::Int),
    ptr(2, "preconditions", Kind::Message(PRECONDITIONS)),
    ptr(3, "orphanDependents", Kind::Bool),
    ptr(4, "propagationPolicy", Kind::String),
    f(5, "dryRun", Kind::Strings),
];

const PRECONDITIONS: &[Field] = &[
    ptr(1, "uid", Kind::String),
    ptr(2, "resourceVersion", Kind::String),
];

/// The messages this server reads, by `kind`.
fn schema_of(kind: &str) -> Option<&'static [Field]> {
    match kind {
        "Namespace" => Some(NAMESPACE),
        "DeleteOptions" => Some(DELETE_OPTIONS),
        _ => None,
    }
}

/// Can a body of `kind` be sent in protobuf? (What 415 answers list as accepted.)
pub(crate) fn decodes(kind: &str) -> bool {
    schema_of(kind).is_some()
}

fn malformed(why: &str) -> ApiError {
    ApiError::bad_request(format!("error decoding request body: protobuf: {why}"))
}

/// One field off the wire.
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    /// A fixed-width value; no message here has one, so it is skipped.
    Fixed,
}

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, ApiError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self
                .buf
                .split_first()
                .ok_or_else(|| malformed("truncated varint"))?;
            self.buf = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(malformed("varint too long"))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], ApiError> {
        if n > self.buf.len() {
            return Err(malformed("field runs past the end of its message"));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    /// The next (field number, value), or `None` at the end of the message.
    fn next(&mut self) -> Result<Option<(u64, Wire<'a>)>, ApiError> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let wire = match key & 7 {
            0 => Wire::Varint(self.varint()?),
            1 => self.take(8).map(|_| Wire::Fixed)?,
            2 => {
                let len = usize::try_from(self.varint()?)
                    .map_err(|_| malformed("length out of range"))?;
                Wire::Bytes(self.take(len)?)
            }
            5 => self.take(4).map(|_| Wire::Fixed)?,
            other => return Err(malformed(&format!("unsupported wire type {other}"))),
        };
        Ok(Some((key >> 3, wire)))
    }
}

fn utf8(bytes: &[u8]) -> Result<&str, ApiError> {
    std::str::from_utf8(bytes).map_err(|_| malformed("a string is not UTF-8"))
}

/// Decodes a message by its field table into the JSON its Go type marshals to.
fn message(bytes: &[u8], fields: &[Field]) -> Result<Map<String, Value>, ApiError> {
    let mut out = Map::new();
    let mut reader = Reader { buf: bytes };
    while let Some((number, wire)) = reader.next()? {
        // Fields this server does not read are skipped, as unknown fields are.
        let Some(field) = fields.iter().find(|f| f.number == number) else {
            continue;
        };
        let name = field.name;
        match (field.kind, wire) {
            (Kind::Strings, Wire::Bytes(b)) => push(&mut out, name, json!(utf8(b)?)),
            (Kind::Messages(inner), Wire::Bytes(b)) => {
                push(&mut out, name, Value::Object(message(b, inner)?));
            }
            (Kind::StringMap, Wire::Bytes(b)) => {
                let (k, v) = map_entry(b)?;
                let map = out.entry(name).or_insert_with(|| json!({}));
                if let Some(m) = map.as_object_mut() {
                    m.insert(k, json!(v));
                }
            }
            (_, wire) => {
                // A later occurrence of a field replaces an earlier one.
                if let Some(v) = single(field, wire)? {
                    out.insert(name.into(), v);
                } else {
                    out.remove(name);
                }
            }
        }
    }
    Ok(out)
}

fn push(out: &mut Map<String, Value>, name: &str, item: Value) {
    let list = out.entry(name).or_insert_with(|| json!([]));
    if let Some(a) = list.as_array_mut() {
        a.push(item);
    }
}

/// A field that occurs once; `None` for a zero value JSON would omit.
fn single(field: &Field, wire: Wire<'_>) -> Result<Option<Value>, ApiError> {
    let keep = field.pointer;
    Ok(match (field.kind, wire) {
        (Kind::String, Wire::Bytes(b)) => {
            let s = utf8(b)?;
            (keep || !s.is_empty()).then(|| json!(s))
        }
        // int64 on the wire is two's complement in a varint.
        (Kind::Int, Wire::Varint(v)) => (keep || v != 0).then(|| json!(v as i64)),
        (Kind::Bool, Wire::Varint(v)) => (keep || v != 0).then(|| json!(v != 0)),
        (Kind::Time, Wire::Bytes(b)) => time(b)?,
        (Kind::Message(inner), Wire::Bytes(b)) => Some(Value::Object(message(b, inner)?)),
        _ => {
            return Err(malformed(&format!(
                "field {} has the wrong wire type",
                field.name
            )));
        }
    })
}

/// One `map<string, string>` entry: key (1) and value (2).
fn map_entry(bytes: &[u8]) -> Result<(String, String), ApiError> {
    let (mut key, mut value) = (String::new(), String::new());
    let mut reader = Reader { buf: bytes };
    while let Some((number, wire)) = reader.next()? {
        match (number, wire) {
            (1, Wire::Bytes(b)) => key = utf8(b)?.to_owned(),
            (2, Wire::Bytes(b)) => value = utf8(b)?.to_owned(),
            _ => return Err(malformed("a map entry is not a string pair")),
        }
    }
    Ok((key, value))
}

/// `metav1.Time` (seconds 1, nanos 2); the zero time is written as an empty message
/// and is null (omitted) in JSON. JSON carries whole seconds.
fn time(bytes: &[u8]) -> Result<Option<Value>, ApiError> {
    let mut seconds = None;
    let mut reader = Reader { buf: bytes };
    while let Some((number, wire)) = reader.next()? {
        if let (1, Wire::Varint(v)) = (number, wire) {
            seconds = Some(v as i64);
        }
    }
    let Some(seconds) = seconds else {
        return Ok(None);
    };
    let t = Timestamp::from_second(seconds).map_err(|_| malformed("a time is out of range"))?;
    Ok(Some(json!(t.to_string())))
}

/// The `runtime.Unknown` inside the envelope: (apiVersion, kind, the object's bytes).
fn unwrap_envelope(body: &[u8]) -> Result<(String, String, &[u8]), ApiError> {
    let inner = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| malformed("the body does not start with the k8s envelope"))?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    let mut reader = Reader { buf: inner };
    while let Some((number, wire)) = reader.next()? {
        match (number, wire) {
            (1, Wire::Bytes(type_meta)) => {
                let (v, k) = map_entry(type_meta)?;
                (api_version, kind) = (v, k);
            }
            (2, Wire::Bytes(b)) => raw = b,
            (3, Wire::Bytes(encoding)) if !encoding.is_empty() => {
                return Err(malformed("content encodings are not supported"));
            }
            _ => {}
        }
    }
    Ok((api_version, kind, raw))
}

/// A protobuf request body as the JSON object it stands for.
pub(crate) fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let (api_version, kind, raw) = unwrap_envelope(body)?;
    let fields = schema_of(&kind).ok_or_else(|| {
        ApiError::bad_request(format!(
            "error decoding request body: no protobuf decoding for kind {kind:?}"
        ))
    })?;
    let mut obj = message(raw, fields)?;
    if !api_version.is_empty() {
        obj.insert("apiVersion".into(), json!(api_version));
    }
    obj.insert("kind".into(), json!(kind));
    Ok(Value::Object(obj))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `kubectl create ns team-a` (v1.32) sends.
    const KUBECTL_CREATE_NS: &[u8] = b"k8s\x00\x0a\x0f\x0a\x02v1\x12\x09Namespace\x12\x1e\x0a\x16\x0a\x06team-a\x12\x00\x1a\x00\x22\x00\x2a\x00\x32\x00\x38\x00\x42\x00\x12\x00\x1a\x02\x0a\x00\x1a\x00\x22\x00";

    #[test]
    fn kubectls_namespace_decodes_to_what_its_json_would_be() {
        let v = decode(KUBECTL_CREATE_NS).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}, "spec": {}, "status": {}})
        );
    }

    #[test]
    fn truncated_or_foreign_bodies_are_bad_requests() {
        for bad in [
            &b"{}"[..],
            b"k8s\x00\x0a\xff",
            &KUBECTL_CREATE_NS[..KUBECTL_CREATE_NS.len() - 3],
        ] {
            assert_eq!(decode(bad).unwrap_err().code, 400, "{bad:?}");
        }
        let lease = b"k8s\x00\x0a\x0b\x0a\x02v1\x12\x05Lease";
        assert_eq!(decode(lease).unwrap_err().code, 400);
    }

    #[test]
    fn delete_options_keep_set_zero_values() {
        let pre = [0x0a, 0x01, b'u'];
        let mut raw = vec![0x08, 0x00, 0x12, pre.len() as u8];
        raw.extend(pre);
        let mut body = b"k8s\x00\x0a\x11\x0a\x00\x12\x0dDeleteOptions\x12".to_vec();
        body.push(raw.len() as u8);
        body.extend(raw);
        assert_eq!(
            decode(&body).unwrap(),
            json!({"kind": "DeleteOptions", "gracePeriodSeconds": 0, "preconditions": {"uid": "u"}})
        );
    }
}
