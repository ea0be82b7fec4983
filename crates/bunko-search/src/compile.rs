//! Lucene query syntax to a tantivy query. tantivy's own grammar parses the text
//! ([`tantivy::query_grammar::parse_query`]: fields, phrases, `AND`/`OR`/`NOT`, `+`/`-`,
//! groups, ranges, boosts, `*` prefixes, `~` slop); this module maps each leaf onto the
//! index's schema (`index.rs`), as Clouseau's query parser maps Lucene's:
//! - a field-less term searches the field `default`;
//! - a term or phrase is analyzed with its field's analyzer; one token is a term query,
//!   several a phrase (with the slop of `"..."~N`);
//! - `term~N` without quotes is a fuzzy term (at most 2 edits; `term~` alone means 2);
//! - `*` and `?` wildcards become a regular expression over the field's tokens;
//! - a term or range whose bounds read as numbers searches the numbers (`n`), as
//!   Clouseau turns `price:5` and `price:[1 TO 10]` into numeric ranges; other ranges
//!   compare the field's (lower-cased) tokens.
//!
//! The searched tokens are collected per field for `highlight_fields`.

use std::collections::{HashMap, HashSet};
use std::ops::Bound;

use bunko_engine::{Error, Result};
use tantivy::Term;
use tantivy::query::{
    AllQuery, BooleanQuery, BoostQuery, EmptyQuery, FuzzyTermQuery, Occur, PhraseQuery, Query,
    RangeQuery, RegexQuery, TermQuery,
};
use tantivy::query_grammar::{
    Delimiter, Occur as UserOccur, UserInputAst, UserInputBound, UserInputLeaf, UserInputLiteral,
};
use tantivy::schema::IndexRecordOption;

use crate::analyzer::Analyzers;
use crate::index::{Fields, SEP, number_path};

/// A compiled query and the tokens it searches, by field.
pub struct Compiled {
    pub query: Box<dyn Query>,
    pub terms: HashMap<String, HashSet<String>>,
}

/// Parses and compiles `text`.
pub fn compile(text: &str, fields: Fields, analyzers: &Analyzers) -> Result<Compiled> {
    let ast = tantivy::query_grammar::parse_query(&default_fuzziness(text))
        .map_err(|_| Error::BadRequest(format!("cannot parse query: {text}")))?;
    let mut compiler = Compiler { fields, analyzers, terms: HashMap::new() };
    let query = compiler.ast(ast)?;
    Ok(Compiled { query, terms: compiler.terms })
}

/// Lucene's `term~` (no number) means up to 2 edits, and `*:*` all documents; tantivy's
/// grammar wants the number, and `*`.
fn default_fuzziness(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 4);
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        match c {
            '\\' => out.extend(chars.next()),
            '"' => quoted = !quoted,
            '*' if !quoted && text_at(&chars, ":*") => {
                chars.next();
                chars.next();
            }
            '~' if !quoted && !chars.peek().is_some_and(|n| n.is_ascii_digit()) => out.push('2'),
            _ => {}
        }
    }
    out
}

/// Whether the characters ahead start with `s`.
fn text_at(chars: &std::iter::Peekable<std::str::Chars<'_>>, s: &str) -> bool {
    chars.clone().take(s.len()).eq(s.chars())
}

struct Compiler<'a> {
    fields: Fields,
    analyzers: &'a Analyzers,
    terms: HashMap<String, HashSet<String>>,
}

impl Compiler<'_> {
    fn ast(&mut self, ast: UserInputAst) -> Result<Box<dyn Query>> {
        Ok(match ast {
            UserInputAst::Clause(clauses) => {
                let mut out = Vec::with_capacity(clauses.len());
                let all_negative = clauses.iter().all(|(o, _)| *o == Some(UserOccur::MustNot));
                for (occur, sub) in clauses {
                    let occur = match occur {
                        Some(UserOccur::Must) => Occur::Must,
                        Some(UserOccur::MustNot) => Occur::MustNot,
                        Some(UserOccur::Should) | None => Occur::Should,
                    };
                    out.push((occur, self.ast(sub)?));
                }
                if all_negative {
                    // Lucene matches nothing for a purely negative query; Clouseau adds
                    // all documents so that `-field:x` means "all but".
                    out.push((Occur::Must, Box::new(AllQuery)));
                }
                Box::new(BooleanQuery::new(out))
            }
            UserInputAst::Boost(sub, boost) => {
                Box::new(BoostQuery::new(self.ast(*sub)?, boost as f32))
            }
            UserInputAst::Leaf(leaf) => self.leaf(*leaf)?,
        })
    }

    fn leaf(&mut self, leaf: UserInputLeaf) -> Result<Box<dyn Query>> {
        match leaf {
            UserInputLeaf::All => Ok(Box::new(AllQuery)),
            UserInputLeaf::Literal(literal) => self.literal(literal),
            UserInputLeaf::Range { field, lower, upper } => {
                self.range(field.as_deref().unwrap_or("default"), &lower, &upper)
            }
            UserInputLeaf::Set { field, elements } => {
                let field = field.unwrap_or_else(|| "default".into());
                let mut out = Vec::new();
                for element in elements {
                    out.push((Occur::Should, self.word(&field, &element, 0, false)?));
                }
                Ok(Box::new(BooleanQuery::new(out)))
            }
            UserInputLeaf::Exists { field } => self.wildcard(&field, "*"),
        }
    }

    fn literal(&mut self, literal: UserInputLiteral) -> Result<Box<dyn Query>> {
        let field = literal.field_name.unwrap_or_else(|| "default".into());
        let phrase = literal.phrase;
        if field == "*" && phrase == "*" {
            return Ok(Box::new(AllQuery));
        }
        if literal.delimiter != Delimiter::None {
            return self.words(&field, &phrase, literal.slop);
        }
        if literal.prefix || phrase.contains(['*', '?']) {
            let pattern = if literal.prefix { format!("{phrase}*") } else { phrase };
            return self.wildcard(&field, &pattern);
        }
        // tantivy's grammar reads `term~N` as one word.
        if let Some((term, edits)) = phrase.rsplit_once('~')
            && let Ok(edits) = edits.parse::<u32>()
        {
            return self.word(&field, term, edits.max(1), true);
        }
        self.word(&field, &phrase, literal.slop, true)
    }

    /// An unquoted term: numeric if it reads as a number, fuzzy with a slop.
    fn word(&mut self, field: &str, word: &str, slop: u32, fuzzy: bool) -> Result<Box<dyn Query>> {
        let text = if fuzzy && slop > 0 {
            let tokens = self.analyzers.tokens(field, word);
            let Some(token) = tokens.first() else { return Ok(Box::new(EmptyQuery)) };
            self.note(field, &token.text);
            let term = self.text_term(field, &token.text);
            Box::new(FuzzyTermQuery::new(term, slop.min(2) as u8, true)) as Box<dyn Query>
        } else {
            self.words(field, word, 0)?
        };
        match word.parse::<f64>() {
            Ok(x) if x.is_finite() => {
                let num = self.number(field, if x == 0.0 { 0.0 } else { x });
                let num =
                    Box::new(RangeQuery::new(Bound::Included(num.clone()), Bound::Included(num)));
                Ok(Box::new(BooleanQuery::new(vec![(Occur::Should, num), (Occur::Should, text)])))
            }
            _ => Ok(text),
        }
    }

    /// Analyzed text: a term, or a phrase of the tokens with `slop`.
    fn words(&mut self, field: &str, text: &str, slop: u32) -> Result<Box<dyn Query>> {
        let tokens = self.analyzers.tokens(field, text);
        for token in &tokens {
            self.note(field, &token.text);
        }
        let Some(first) = tokens.first() else { return Ok(Box::new(EmptyQuery)) };
        if tokens.len() == 1 {
            let term = self.text_term(field, &first.text);
            return Ok(Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs)));
        }
        let base = first.position;
        let terms =
            tokens.iter().map(|t| (t.position - base, self.text_term(field, &t.text))).collect();
        Ok(Box::new(PhraseQuery::new_with_offset_and_slop(terms, slop)))
    }

    /// `*` (any run) and `?` (one character) over the field's tokens, lower-cased as
    /// Lucene lower-cases expanded terms.
    fn wildcard(&mut self, field: &str, pattern: &str) -> Result<Box<dyn Query>> {
        let mut regex = regex::escape(&format!("{field}{SEP}"));
        for c in pattern.to_lowercase().chars() {
            match c {
                '*' => regex.push_str(".*"),
                '?' => regex.push('.'),
                c => regex.push_str(&regex::escape(&c.to_string())),
            }
        }
        let query = RegexQuery::from_pattern(&regex, self.fields.text)
            .map_err(|e| Error::BadRequest(format!("bad wildcard {pattern}: {e}")))?;
        Ok(Box::new(query))
    }

    fn range(
        &mut self,
        field: &str,
        lower: &UserInputBound,
        upper: &UserInputBound,
    ) -> Result<Box<dyn Query>> {
        let number = |b: &UserInputBound| match b {
            UserInputBound::Unbounded => Some(None),
            _ => match b.term_str() {
                "*" => Some(None),
                "Infinity" => Some(Some(f64::INFINITY)),
                "-Infinity" => Some(Some(f64::NEG_INFINITY)),
                s => s.parse::<f64>().ok().map(Some),
            },
        };
        if let (Some(lo), Some(hi)) = (number(lower), number(upper)) {
            let exclusive = |b: &UserInputBound| matches!(b, UserInputBound::Exclusive(_));
            let bound = |x: Option<f64>, open: f64, b: &UserInputBound| {
                let term = self.number(field, x.unwrap_or(open));
                if x.is_some() && exclusive(b) {
                    Bound::Excluded(term)
                } else {
                    Bound::Included(term)
                }
            };
            let lo = bound(lo, f64::NEG_INFINITY, lower);
            let hi = bound(hi, f64::INFINITY, upper);
            return Ok(Box::new(RangeQuery::new(lo, hi)));
        }
        let text = self.fields.text;
        let term =
            |s: &str| Term::from_field_text(text, &format!("{field}{SEP}{}", s.to_lowercase()));
        let lo = match lower {
            UserInputBound::Inclusive(s) if s != "*" => Bound::Included(term(s)),
            UserInputBound::Exclusive(s) if s != "*" => Bound::Excluded(term(s)),
            _ => Bound::Included(Term::from_field_text(text, &format!("{field}{SEP}"))),
        };
        let hi = match upper {
            UserInputBound::Inclusive(s) if s != "*" => Bound::Included(term(s)),
            UserInputBound::Exclusive(s) if s != "*" => Bound::Excluded(term(s)),
            _ => Bound::Excluded(Term::from_field_text(text, &format!("{field}{}", '\u{2}'))),
        };
        Ok(Box::new(RangeQuery::new(lo, hi)))
    }

    /// The term of number `x` in field `field` of the `n` column.
    fn number(&self, field: &str, x: f64) -> Term {
        let mut term = Term::from_field_json_path(self.fields.num, &number_path(field), false);
        term.append_type_and_fast_value(x);
        term
    }

    fn text_term(&self, field: &str, token: &str) -> Term {
        Term::from_field_text(self.fields.text, &format!("{field}{SEP}{token}"))
    }

    fn note(&mut self, field: &str, token: &str) {
        self.terms.entry(field.to_string()).or_default().insert(token.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::default_fuzziness;

    #[test]
    fn a_bare_tilde_means_two_edits_outside_phrases() {
        assert_eq!(default_fuzziness("name:jon~ AND x~1"), "name:jon~2 AND x~1");
        assert_eq!(default_fuzziness("*:* -a:b"), "* -a:b");
        assert_eq!(default_fuzziness(r#""a~ b" c~"#), r#""a~ b" c~2"#);
    }
}
