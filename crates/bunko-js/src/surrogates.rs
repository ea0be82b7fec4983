//! Lone UTF-16 surrogates in JSON text written by JavaScript.
//!
//! JavaScript strings are UTF-16 and may hold a surrogate without its pair
//! (`"\ud800"`, or half of an emoji cut by `substring`); `JSON.stringify` writes such a
//! code unit as a `\uXXXX` escape, which no UTF-8 string can hold, so serde_json refuses the
//! whole text. CouchDB fails the index update in that case (`invalid_json`, apache/couchdb
//! #2756 shows the same failure), leaving the view unusable until the map function
//! changes; Bunko instead reads a lone surrogate as U+FFFD, the replacement character,
//! as `String::from_utf16_lossy` does.

/// `text` with every lone surrogate escape replaced by `\ufffd`, or `None` when it has
/// none. Escapes are read pairwise (`\\` is one escape), so a literal backslash followed by
/// `ud800` is left alone.
pub(crate) fn replace_lone(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut lone: Vec<usize> = Vec::new();
    let mut pending_high: Option<usize> = None;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            lone.extend(pending_high.take());
            i += 1;
            continue;
        }
        let unit = (bytes.get(i + 1) == Some(&b'u'))
            .then(|| text.get(i + 2..i + 6).and_then(|h| u16::from_str_radix(h, 16).ok()))
            .flatten();
        match unit {
            Some(0xD800..=0xDBFF) => {
                lone.extend(pending_high.replace(i));
            }
            Some(0xDC00..=0xDFFF) => {
                if pending_high.take().is_none() {
                    lone.push(i);
                }
            }
            _ => lone.extend(pending_high.take()),
        }
        i += if unit.is_some() { 6 } else { 2 };
    }
    lone.extend(pending_high);
    if lone.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    for at in lone {
        out.push_str(&text[from..at]);
        out.push_str("\\ufffd");
        from = at + 6;
    }
    out.push_str(&text[from..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> serde_json::Value {
        let fixed = replace_lone(text);
        serde_json::from_str(fixed.as_deref().unwrap_or(text)).expect("valid JSON")
    }

    #[test]
    fn lone_surrogates_become_replacement_characters_and_pairs_stay() {
        assert_eq!(replace_lone(r#"["a\n\"b\"","\ud83d\ude00"]"#), None);
        assert_eq!(parsed(r#"["\ud800"]"#), serde_json::json!(["\u{fffd}"]));
        assert_eq!(parsed(r#"["x\udc00y"]"#), serde_json::json!(["x\u{fffd}y"]));
        assert_eq!(parsed(r#"["\ud800\ud800\udc00"]"#), serde_json::json!(["\u{fffd}\u{10000}"]));
        assert_eq!(parsed(r#"["\ud83d", "\ude00"]"#), serde_json::json!(["\u{fffd}", "\u{fffd}"]));
        assert_eq!(
            parsed(r#"{"\udbff":"\ud800\n"}"#),
            serde_json::json!({"\u{fffd}": "\u{fffd}\n"})
        );
        // An escaped backslash followed by `ud800` is text, not an escape.
        assert_eq!(replace_lone(r#"["\\ud800"]"#), None);
        assert_eq!(parsed(r#"["\\\ud800"]"#), serde_json::json!(["\\\u{fffd}"]));
    }
}
