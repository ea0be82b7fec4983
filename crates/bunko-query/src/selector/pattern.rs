//! `$regex` patterns.
//!
//! CouchDB runs Erlang's `re` (PCRE) without the `unicode` option, so a pattern sees a
//! string as bytes: `.` matches one byte of a UTF-8 sequence, `\w` and `(?i)` are ASCII-only.
//! We compile with the `regex` crate on bytes with Unicode mode off, which behaves the same
//! for those; a pattern that only makes sense in Unicode mode (`\p{L}`, a non-ASCII
//! character inside `[...]`) is compiled in Unicode mode instead of being refused.
//!
//! Known differences from PCRE: no look-around, backreferences, atomic groups or possessive
//! quantifiers (such patterns are `bad_arg` here, accepted by CouchDB), and `$` matches only
//! at the very end (PCRE also matches before a final newline). Matching is linear-time.

use regex::bytes::{Regex, RegexBuilder};

/// A compiled `$regex` argument.
#[derive(Clone, Debug)]
pub struct Pattern {
    source: String,
    regex: Regex,
    prefix: Option<String>,
}

impl Pattern {
    /// Compiles `source`; `None` when it is not a valid pattern.
    pub(crate) fn new(source: &str) -> Option<Self> {
        let regex = RegexBuilder::new(source)
            .unicode(false)
            .build()
            .or_else(|_| RegexBuilder::new(source).build())
            .ok()?;
        Some(Self { source: source.to_owned(), regex, prefix: literal_prefix(source) })
    }

    /// The pattern as the client wrote it.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether the pattern matches somewhere in `text` (unanchored, like `re:run`).
    pub fn is_match(&self, text: &str) -> bool {
        self.regex.is_match(text.as_bytes())
    }

    /// A string every match must start with, for patterns anchored with `^` followed by
    /// literal text (`"^abc"`, `"^a\.b.*"`): lets a planner scan only a prefix range. `None`
    /// when there is no such non-empty prefix, or when the pattern contains `|` anywhere.
    pub fn literal_prefix(&self) -> Option<&str> {
        self.prefix.as_deref()
    }
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

fn literal_prefix(source: &str) -> Option<String> {
    let rest = source.strip_prefix('^')?;
    if source.contains('|') {
        return None;
    }
    let mut prefix = String::new();
    let mut chars = rest.chars().peekable();
    while let Some(&c) = chars.peek() {
        let literal = match c {
            '\\' => {
                chars.next();
                match chars.peek() {
                    Some(&e) if e.is_ascii_punctuation() => e,
                    _ => break,
                }
            }
            '.' | '[' | ']' | '(' | ')' | '{' | '}' | '*' | '+' | '?' | '^' | '$' => break,
            c => c,
        };
        chars.next();
        prefix.push(literal);
    }
    // A quantifier after the last literal makes that literal optional or repeated.
    if matches!(chars.peek(), Some('*' | '?' | '{')) {
        prefix.pop();
    }
    (!prefix.is_empty()).then_some(prefix)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_semantics_like_pcre() {
        let m = |p: &str, s: &str| Pattern::new(p).is_some_and(|p| p.is_match(s));
        assert!(!m("^.$", "é"));
        assert!(m("^..$", "é"));
        assert!(m("(?i)new.*", "New York"));
        assert!(!m("(?i)É", "é"));
        assert!(m("é", "café"));
        assert!(m("[é]", "é"));
        assert!(m("\\p{L}", "a"));
        assert!(m("^[0-9a-f]+$", "3a0df5e"));
        assert!(!m("^[0-9a-f]+$", ""));
        assert!(Pattern::new("(").is_none());
        assert!(Pattern::new("a(?=b)").is_none());
    }

    #[test]
    fn literal_prefixes() {
        let prefix = |p: &str| Pattern::new(p).and_then(|p| p.literal_prefix().map(String::from));
        assert_eq!(prefix("^abc"), Some("abc".into()));
        assert_eq!(prefix("^abc.*"), Some("abc".into()));
        assert_eq!(prefix("^a\\.b"), Some("a.b".into()));
        assert_eq!(prefix("^abc?"), Some("ab".into()));
        assert_eq!(prefix("^ab+"), Some("ab".into()));
        assert_eq!(prefix("^a*"), None);
        assert_eq!(prefix("abc"), None);
        assert_eq!(prefix("^abc|d"), None);
        assert_eq!(prefix("^\\d"), None);
        assert_eq!(prefix("(?i)^abc"), None);
        assert_eq!(prefix("^日本"), Some("日本".into()));
    }
}
