//! BSON values as MongoDB's error messages print them (`BSONObj::toString`): `{ a: 1, b:
//! "x" }`, `[ 1, 2 ]`, doubles with a fraction (`5.0`), `ObjectId('…')`, `new Date(ms)`.

use bson::{Bson, Document};

/// A value in MongoDB's message form.
pub fn value(v: &Bson) -> String {
    match v {
        Bson::Double(d) if d.is_finite() && d.fract() == 0.0 && d.abs() < 1e16 => format!("{d:.1}"),
        Bson::Double(d) => d.to_string(),
        Bson::String(s) => format!("{s:?}"),
        Bson::Document(d) => document(d),
        Bson::Array(items) if items.is_empty() => "[]".into(),
        Bson::Array(items) => {
            format!("[ {} ]", items.iter().map(value).collect::<Vec<_>>().join(", "))
        }
        Bson::ObjectId(id) => format!("ObjectId('{id}')"),
        Bson::DateTime(d) => format!("new Date({})", d.timestamp_millis()),
        Bson::Int64(i) => i.to_string(),
        Bson::Int32(i) => i.to_string(),
        Bson::Boolean(b) => b.to_string(),
        Bson::Null => "null".into(),
        Bson::Timestamp(t) => format!("Timestamp({}, {})", t.time, t.increment),
        Bson::RegularExpression(re) => format!("/{}/{}", re.pattern, re.options),
        other => other.to_string(),
    }
}

/// A document in MongoDB's message form.
pub fn document(d: &Document) -> String {
    if d.is_empty() {
        return "{}".into();
    }
    let fields: Vec<String> = d.iter().map(|(k, v)| format!("{k}: {}", value(v))).collect();
    format!("{{ {} }}", fields.join(", "))
}

/// `{_id: …}` of a document for messages that name it (`no id` without one).
pub fn id_of(doc: &Document) -> String {
    doc.get("_id").map_or_else(|| "no id".into(), |id| format!("_id: {}", value(id)))
}
