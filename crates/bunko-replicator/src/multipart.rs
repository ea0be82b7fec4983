//! Documents with attachments are written as CouchDB's replicator writes them
//! (`couch_replicator_api_wrap:update_doc` with `couch_doc:doc_to_multi_part_stream`):
//! `PUT /{db}/{id}?new_edits=false` with a `multipart/related` body, the document's JSON
//! first (each attachment `"follows": true` with its `length`), then one part per
//! attachment with its raw bytes, instead of base64 inside `_bulk_docs`.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

/// Whether `doc` carries attachment data (fetched inline with `attachments=true`).
pub fn has_data(doc: &Value) -> bool {
    doc.get("_attachments")
        .and_then(Value::as_object)
        .is_some_and(|atts| atts.values().any(|a| a.get("data").is_some()))
}

/// The `multipart/related` body of `doc` with `boundary`; `None` if an attachment's data
/// is not base64.
pub fn related(doc: &Value, boundary: &str) -> Option<Vec<u8>> {
    let mut doc = doc.clone();
    let mut parts = Vec::new();
    for (name, att) in doc.get_mut("_attachments")?.as_object_mut()? {
        let Some(att) = att.as_object_mut() else { continue };
        let Some(data) = att.remove("data") else { continue };
        let bytes = STANDARD.decode(data.as_str()?).ok()?;
        att.insert("follows".into(), Value::Bool(true));
        att.insert("length".into(), Value::from(bytes.len()));
        let content_type =
            att.get("content_type").and_then(Value::as_str).unwrap_or("application/octet-stream");
        parts.push((name.clone(), content_type.to_string(), bytes));
    }
    let mut body =
        format!("--{boundary}\r\nContent-Type: application/json\r\n\r\n{doc}").into_bytes();
    for (name, content_type, bytes) in parts {
        let name = serde_json::to_string(&name).unwrap_or_default();
        body.extend(
            format!(
                "\r\n--{boundary}\r\nContent-Disposition: attachment; filename={name}\r\n\
                 Content-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
                bytes.len()
            )
            .into_bytes(),
        );
        body.extend(bytes);
    }
    body.extend(format!("\r\n--{boundary}--").into_bytes());
    Some(body)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn attachments_follow_the_json_as_raw_parts() {
        let doc = json!({"_id": "d", "_rev": "2-ab", "_attachments": {
            "a.txt": {"content_type": "text/plain", "revpos": 2, "digest": "md5-x",
                      "data": "5ZC+6Lyp"},
            "old": {"content_type": "text/plain", "revpos": 1, "stub": true, "length": 3}}});
        assert!(has_data(&doc));
        let body = related(&doc, "b").unwrap_or_default();
        let json = json!({"_id": "d", "_rev": "2-ab", "_attachments": {
            "a.txt": {"content_type": "text/plain", "revpos": 2, "digest": "md5-x",
                      "follows": true, "length": 6},
            "old": {"content_type": "text/plain", "revpos": 1, "stub": true, "length": 3}}});
        let mut want = format!("--b\r\nContent-Type: application/json\r\n\r\n{json}").into_bytes();
        want.extend_from_slice(
            "\r\n--b\r\nContent-Disposition: attachment; filename=\"a.txt\"\r\n\
             Content-Type: text/plain\r\nContent-Length: 6\r\n\r\n吾輩\r\n--b--"
                .as_bytes(),
        );
        assert_eq!(String::from_utf8_lossy(&body), String::from_utf8_lossy(&want));
    }
}
