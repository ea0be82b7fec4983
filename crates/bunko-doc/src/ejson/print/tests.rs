//! The printer against the old conversion (decode to `bson::Document`, `to_json`, then
//! serialise the map and write its revision term): [`prints_as_before`] is called by the
//! one-pass conversion's tests (`from_bson/tests.rs`) on every document they make, the
//! type zoo, its edges and seeded random documents.

use bson::{Document, RawDocumentBuf};

use super::body;
use crate::body::ParsedDoc;
use crate::ejson::{from_bson, json_depth, to_json};
use crate::{RevId, etf};

/// Whether `raw` was printed (`false`: a key repeats in it, left to the map); when it was,
/// with and without `_id`, the text, the revision term and the depths are the old ones.
pub(in crate::ejson) fn prints_as_before(raw: &RawDocumentBuf) -> bool {
    let Ok(doc) = Document::try_from(raw.as_ref()) else { panic!("valid bytes: {raw:?}") };
    let whole = to_json(&doc);
    for skip in [None, Some("_id")] {
        let printed = match body(raw, skip) {
            Ok(Some(printed)) => printed,
            Ok(None) => return false,
            Err(err) => panic!("printing {raw:?}: {err}"),
        };
        let mut want = whole.clone();
        if let Some(key) = skip {
            want.shift_remove(key);
        }
        let text = String::from_utf8(printed.printed.json.clone()).ok();
        assert_eq!(text, serde_json::to_string(&want).ok(), "{raw:?}");
        let mut term = etf::Writer::default();
        term.object(&want);
        assert_eq!(printed.printed.term, term.finish(), "{raw:?}");
        let members = raw.iter().filter_map(Result::ok).filter(|(k, _)| Some(k.as_str()) != skip);
        let deepest = members.filter_map(|(_, v)| from_bson::value(v).ok()).map(|(_, d)| d).max();
        assert_eq!(printed.depth, 1 + deepest.unwrap_or(0), "{raw:?}");
        assert_eq!(printed.json_depth, want.values().map(json_depth).max().unwrap_or(0));
        let doc = ParsedDoc { printed: Some(printed.printed), ..Default::default() };
        let parent = RevId { pos: 3, hash: "0123456789abcdef0123456789abcdef".into() };
        assert_eq!(
            doc.next_rev(Some(&parent), &[]),
            RevId::next_for(Some(&parent), false, &want, &[])
        );
    }
    true
}

/// A printed body read back for what needs the user's fields is the old map.
#[test]
fn a_printed_body_materializes_as_the_map() -> crate::Result<()> {
    let raw = RawDocumentBuf::try_from(&bson::doc! {"_id": 1_i32, "a": 1.5, "b": {"c": [1_i32]}})
        .map_err(|e| crate::Error::BadRequest(e.to_string()))?;
    let Ok(Some(printed)) = body(&raw, Some("_id")) else { panic!("printed") };
    let mut doc = ParsedDoc { printed: Some(printed.printed), ..Default::default() };
    let stored = doc.body_json();
    doc.materialize()?;
    assert!(doc.printed.is_none());
    assert_eq!(doc.body_json(), stored);
    assert_eq!(String::from_utf8_lossy(&stored), r#"{"a":1.5,"b":{"c":[1]}}"#);
    Ok(())
}
