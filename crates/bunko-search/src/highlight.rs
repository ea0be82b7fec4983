//! `highlight_fields` (the searched tokens of a stored text, wrapped in the pre and post
//! tags, in fragments of about `highlight_size` characters) and the Lucene ranges of the
//! `ranges` facet.

use std::collections::{HashMap, HashSet};

use bunko_engine::{Error, Result};
use serde_json::{Map, Value, json};
use tantivy::query_grammar::{UserInputAst, UserInputBound, UserInputLeaf};

use crate::analyzer::{Analyzers, Token};
use crate::query::{Highlight, Hit};

/// The highlights of `hit`: per field, up to `number` fragments holding searched tokens.
pub fn highlights(
    hit: &Hit,
    h: &Highlight,
    terms: &HashMap<String, HashSet<String>>,
    analyzers: &Analyzers,
) -> Value {
    let mut out = Map::new();
    for field in &h.fields {
        let searched = terms.get(field).or_else(|| terms.get("default"));
        let mut fragments = Vec::new();
        for (name, value, _, _) in &hit.fields {
            let (Some(text), Some(searched)) = (value.as_str(), searched) else { continue };
            if name != field {
                continue;
            }
            let tokens: Vec<Token> = analyzers
                .tokens(field, text)
                .into_iter()
                .filter(|t| searched.contains(&t.text))
                .collect();
            fragments.extend(fragments_of(text, &tokens, h));
        }
        fragments.truncate(h.number);
        out.insert(field.clone(), json!(fragments));
    }
    Value::Object(out)
}

/// Fragments of `text` around `tokens` (in order), each at most about `h.size` bytes.
fn fragments_of(text: &str, tokens: &[Token], h: &Highlight) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() && out.len() < h.number {
        let start = floor(text, tokens[i].from.saturating_sub(h.size / 4));
        let end = floor(text, (start + h.size).min(text.len()).max(tokens[i].to));
        let mut fragment = String::new();
        let mut at = start;
        while i < tokens.len() && tokens[i].to <= end {
            fragment.push_str(&text[at..tokens[i].from]);
            fragment.push_str(&h.pre);
            fragment.push_str(&text[tokens[i].from..tokens[i].to]);
            fragment.push_str(&h.post);
            at = tokens[i].to;
            i += 1;
        }
        fragment.push_str(&text[at..end.max(at)]);
        out.push(fragment);
    }
    out
}

/// The largest char boundary of `text` at or before `at`.
fn floor(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// A numeric range of the `ranges` facet.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bounds {
    lower: (f64, bool),
    upper: (f64, bool),
}

impl Bounds {
    pub fn contains(&self, x: f64) -> bool {
        let above = if self.lower.1 { x >= self.lower.0 } else { x > self.lower.0 };
        let below = if self.upper.1 { x <= self.upper.0 } else { x < self.upper.0 };
        above && below
    }
}

/// Reads a Lucene range such as `[0 TO 100]` or `{100 TO Infinity}`.
pub fn parse_range(range: &str) -> Result<Bounds> {
    let bad = || Error::BadRequest(format!("bad range: {range}"));
    let ast = tantivy::query_grammar::parse_query(&format!("f:{range}")).map_err(|_| bad())?;
    let UserInputAst::Leaf(leaf) = ast else { return Err(bad()) };
    let UserInputLeaf::Range { lower, upper, .. } = *leaf else { return Err(bad()) };
    let bound = |b: &UserInputBound, open: f64| -> Result<(f64, bool)> {
        let inclusive = matches!(b, UserInputBound::Inclusive(_));
        match b.term_str() {
            "*" => Ok((open, true)),
            "Infinity" => Ok((f64::INFINITY, inclusive)),
            "-Infinity" => Ok((f64::NEG_INFINITY, inclusive)),
            s => s.parse().map(|x| (x, inclusive)).map_err(|_| bad()),
        }
    };
    Ok(Bounds { lower: bound(&lower, f64::NEG_INFINITY)?, upper: bound(&upper, f64::INFINITY)? })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_read_lucene_brackets() -> Result<()> {
        let cheap = parse_range("[0 TO 100]")?;
        assert!(cheap.contains(0.0) && cheap.contains(100.0) && !cheap.contains(100.5));
        let dear = parse_range("{100 TO Infinity}")?;
        assert!(!dear.contains(100.0) && dear.contains(1e9));
        assert!(parse_range("nonsense").is_err());
        Ok(())
    }
}
