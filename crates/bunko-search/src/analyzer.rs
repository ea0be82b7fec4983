//! Cloudant's analyzers on tantivy's tokenizers and filters: `standard` and `classic`
//! (words, lower case, Lucene's English stop words), `keyword` (the whole value as one
//! token), `simple` (runs of letters, lower case), `whitespace` (split on white space),
//! the language analyzers (words, lower case, the language's stop words and Snowball
//! stemmer) and `perfield` (`{"name": "perfield", "default": a, "fields": {field: a}}`).
//!
//! `japanese` (Kuromoji in Cloudant) is `crate::japanese`'s morphological tokenizer
//! (feature `japanese`, on by default) followed by lower case.

use std::collections::HashMap;

use serde_json::Value;
use tantivy::tokenizer::{
    Language, LowerCaser, RawTokenizer, RegexTokenizer, RemoveLongFilter, SimpleTokenizer, Stemmer,
    StopWordFilter, TextAnalyzer, TokenStream, WhitespaceTokenizer,
};

use bunko_engine::{Error, Result};

/// Lucene's `StandardAnalyzer` stop words (its English stop set).
const LUCENE_STOP_WORDS: [&str; 33] = [
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
    "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
    "they", "this", "to", "was", "will", "with",
];

/// Tokens longer than this are dropped, as Lucene's standard tokenizer does at 255.
const MAX_TOKEN: usize = 255;

/// One analyzer, by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Analyzer {
    Standard,
    Keyword,
    Simple,
    Whitespace,
    Japanese,
    Language(String),
}

impl Analyzer {
    fn parse(name: &str) -> Result<Analyzer> {
        Ok(match name {
            "standard" | "classic" | "email" => Analyzer::Standard,
            "keyword" => Analyzer::Keyword,
            "simple" => Analyzer::Simple,
            "whitespace" => Analyzer::Whitespace,
            #[cfg(feature = "japanese")]
            "japanese" if crate::japanese::available() => Analyzer::Japanese,
            other if language(other).is_some() => Analyzer::Language(other.to_string()),
            other => return Err(Error::BadRequest(format!("Unsupported analyzer: {other}"))),
        })
    }

    fn build(&self) -> TextAnalyzer {
        let words = || {
            TextAnalyzer::builder(SimpleTokenizer::default())
                .filter(RemoveLongFilter::limit(MAX_TOKEN))
                .filter(LowerCaser)
        };
        match self {
            Analyzer::Standard => words()
                .filter(StopWordFilter::remove(LUCENE_STOP_WORDS.iter().map(|w| w.to_string())))
                .build(),
            Analyzer::Keyword => TextAnalyzer::builder(RawTokenizer::default()).build(),
            Analyzer::Simple => match RegexTokenizer::new(r"\p{L}+") {
                Ok(tokenizer) => TextAnalyzer::builder(tokenizer).filter(LowerCaser).build(),
                Err(_) => words().build(),
            },
            Analyzer::Whitespace => TextAnalyzer::builder(WhitespaceTokenizer::default()).build(),
            #[cfg(feature = "japanese")]
            Analyzer::Japanese => {
                TextAnalyzer::builder(crate::japanese::JapaneseTokenizer).filter(LowerCaser).build()
            }
            #[cfg(not(feature = "japanese"))]
            Analyzer::Japanese => words().build(),
            Analyzer::Language(name) => {
                let lang = language(name).unwrap_or(Language::English);
                let stop = StopWordFilter::new(lang).unwrap_or_else(|| {
                    StopWordFilter::remove(LUCENE_STOP_WORDS.iter().map(|w| w.to_string()))
                });
                words().filter(stop).filter(Stemmer::new(lang)).build()
            }
        }
    }
}

/// The Snowball language of an analyzer name.
fn language(name: &str) -> Option<Language> {
    Some(match name {
        "arabic" => Language::Arabic,
        "danish" => Language::Danish,
        "dutch" => Language::Dutch,
        "english" => Language::English,
        "finnish" => Language::Finnish,
        "french" => Language::French,
        "german" => Language::German,
        "greek" => Language::Greek,
        "hungarian" => Language::Hungarian,
        "italian" => Language::Italian,
        "norwegian" => Language::Norwegian,
        "portuguese" => Language::Portuguese,
        "romanian" => Language::Romanian,
        "russian" => Language::Russian,
        "spanish" => Language::Spanish,
        "swedish" => Language::Swedish,
        "turkish" => Language::Turkish,
        _ => return None,
    })
}

/// An index's analyzers: a default and, with `perfield`, one per field name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Analyzers {
    default: Analyzer,
    fields: HashMap<String, Analyzer>,
}

impl Default for Analyzers {
    fn default() -> Self {
        Analyzers { default: Analyzer::Standard, fields: HashMap::new() }
    }
}

impl Analyzers {
    /// Reads an index's `analyzer` member: absent, a name, or `{"name": ...}` (with
    /// `default` and `fields` for `perfield`).
    pub fn from_spec(spec: &Value) -> Result<Analyzers> {
        let name = match spec {
            Value::Null => return Ok(Analyzers::default()),
            Value::String(name) => name.as_str(),
            Value::Object(o) => o.get("name").and_then(Value::as_str).unwrap_or("standard"),
            _ => return Err(Error::BadRequest("analyzer must be a string or an object".into())),
        };
        if name != "perfield" {
            return Ok(Analyzers { default: Analyzer::parse(name)?, fields: HashMap::new() });
        }
        let default = match spec.get("default").and_then(Value::as_str) {
            Some(name) => Analyzer::parse(name)?,
            None => Analyzer::Standard,
        };
        let mut fields = HashMap::new();
        if let Some(Value::Object(map)) = spec.get("fields") {
            for (field, name) in map {
                let name = name.as_str().ok_or_else(|| {
                    Error::BadRequest(format!("analyzer of field {field} must be a string"))
                })?;
                fields.insert(field.clone(), Analyzer::parse(name)?);
            }
        }
        Ok(Analyzers { default, fields })
    }

    /// The analyzer of `field`.
    pub fn of(&self, field: &str) -> &Analyzer {
        self.fields.get(field).unwrap_or(&self.default)
    }

    /// The tokens of `text` in `field`: `(position, text, byte range)`.
    pub fn tokens(&self, field: &str, text: &str) -> Vec<Token> {
        let mut analyzer = self.of(field).build();
        let mut stream = analyzer.token_stream(text);
        let mut out = Vec::new();
        while stream.advance() {
            let t = stream.token();
            out.push(Token {
                position: t.position,
                text: t.text.clone(),
                from: t.offset_from,
                to: t.offset_to,
            });
        }
        out
    }
}

/// One token of an analyzed value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub position: usize,
    pub text: String,
    pub from: usize,
    pub to: usize,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn texts(a: &Analyzers, field: &str, text: &str) -> Vec<String> {
        a.tokens(field, text).into_iter().map(|t| t.text).collect()
    }

    #[test]
    fn analyzers_tokenize_as_cloudant_documents() -> Result<()> {
        let standard = Analyzers::default();
        assert_eq!(texts(&standard, "f", "The Quick brown-fox"), ["quick", "brown", "fox"]);
        let keyword = Analyzers::from_spec(&json!("keyword"))?;
        assert_eq!(texts(&keyword, "f", "New York"), ["New York"]);
        let english = Analyzers::from_spec(&json!("english"))?;
        assert_eq!(texts(&english, "f", "running bridges"), ["run", "bridg"]);
        let white = Analyzers::from_spec(&json!({"name": "whitespace"}))?;
        assert_eq!(texts(&white, "f", "A-b  C"), ["A-b", "C"]);
        let simple = Analyzers::from_spec(&json!("simple"))?;
        assert_eq!(texts(&simple, "f", "R2D2 is"), ["r", "d", "is"]);
        let per = Analyzers::from_spec(
            &json!({"name": "perfield", "default": "english", "fields": {"id": "keyword"}}),
        )?;
        assert_eq!(texts(&per, "id", "AB-1"), ["AB-1"]);
        assert_eq!(texts(&per, "text", "cats"), ["cat"]);
        assert!(Analyzers::from_spec(&json!("klingon")).is_err());
        #[cfg(feature = "japanese")]
        {
            let japanese = Analyzers::from_spec(&json!("japanese"))?;
            assert_eq!(
                texts(&japanese, "f", "ＣｏｕｃｈＤＢのデータを買いました"),
                ["couchdb", "データ", "買う"]
            );
        }
        Ok(())
    }
}
