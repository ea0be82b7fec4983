//! The `japanese` analyzer as a tantivy tokenizer: lindera's morphological analysis over
//! IPADIC (the dictionary of Lucene's Kuromoji) in search mode (long compounds decomposed),
//! then the steps of Lucene's `JapaneseAnalyzer`: base forms (買いました → 買う), the default
//! part-of-speech stop tags (particles, auxiliary verbs, conjunctions, symbols, fillers),
//! full-width/half-width folding, katakana stemming (コンピューター → コンピュータ) and
//! lower case (the last applied by the analyzer's `LowerCaser`).
//!
//! Not done: Kuromoji's list of Japanese stop words (frequent content words such as
//! こと or ある stay indexed).

use std::sync::OnceLock;

use lindera_core::mode::{Mode, Penalty};
use lindera_dictionary::{DictionaryConfig, DictionaryKind};
use lindera_tokenizer::tokenizer::{Tokenizer as Lindera, TokenizerConfig};
use tantivy::tokenizer::{Token, TokenStream, Tokenizer};
use unicode_normalization::UnicodeNormalization;

/// Katakana words at least this long lose one trailing prolonged sound mark (Kuromoji's
/// `JapaneseKatakanaStemFilter` default).
const KATAKANA_STEM_MIN: usize = 4;

/// The prolonged sound mark (ー).
const PROLONGED: char = '\u{30FC}';

/// The shared lindera tokenizer; `None` if the embedded dictionary does not load.
fn lindera() -> Option<&'static Lindera> {
    static TOKENIZER: OnceLock<Option<Lindera>> = OnceLock::new();
    TOKENIZER
        .get_or_init(|| {
            let config = TokenizerConfig {
                dictionary: DictionaryConfig { kind: Some(DictionaryKind::IPADIC), path: None },
                user_dictionary: None,
                mode: Mode::Decompose(Penalty::default()),
            };
            Lindera::from_config(config).map_err(|e| tracing::error!("japanese analyzer: {e}")).ok()
        })
        .as_ref()
}

/// Whether the analyzer can run (its dictionary loaded).
pub fn available() -> bool {
    lindera().is_some()
}

/// Kuromoji's default stop tags: IPADIC parts of speech whose words are not indexed.
fn is_stop_tag(pos: &[&str]) -> bool {
    match pos.first().copied() {
        Some("助詞" | "助動詞" | "接続詞" | "フィラー" | "非言語音") => true,
        Some("記号") => pos.get(1) != Some(&"アルファベット"),
        Some("その他") => pos.get(1) == Some(&"間投"),
        _ => false,
    }
}

/// Full-width ASCII to ASCII and half-width katakana to full width (Lucene's
/// `CJKWidthFilter`), by compatibility normalization of the half/full-width block only.
fn fold_width(text: &str) -> String {
    if !text.chars().any(|c| ('\u{FF00}'..='\u{FFEF}').contains(&c)) {
        return text.to_string();
    }
    text.nfkc().collect()
}

/// Drops one trailing ー of a long all-katakana word.
fn stem_katakana(mut text: String) -> String {
    let katakana = text.chars().all(|c| ('\u{30A0}'..='\u{30FF}').contains(&c));
    if katakana && text.chars().count() >= KATAKANA_STEM_MIN && text.ends_with(PROLONGED) {
        text.pop();
    }
    text
}

/// The indexed tokens of `text`; positions keep the gaps stop tags leave, as Lucene's do.
fn analyze(text: &str) -> Vec<Token> {
    let Some(tokenizer) = lindera() else { return Vec::new() };
    let Ok(tokens) = tokenizer.tokenize(text) else { return Vec::new() };
    let mut out = Vec::new();
    for (position, mut token) in tokens.into_iter().enumerate() {
        let (start, end, surface) = (token.byte_start, token.byte_end, token.text);
        let details = token.get_details().unwrap_or_default();
        if is_stop_tag(&details) {
            continue;
        }
        let base = match details.get(6) {
            Some(&base) if base != "*" && !base.is_empty() => base,
            _ => surface,
        };
        if base.trim().is_empty() {
            continue;
        }
        out.push(Token {
            offset_from: start,
            offset_to: end,
            position,
            text: stem_katakana(fold_width(base)),
            position_length: 1,
        });
    }
    out
}

/// The tantivy tokenizer of the `japanese` analyzer.
#[derive(Clone, Default)]
pub struct JapaneseTokenizer;

impl Tokenizer for JapaneseTokenizer {
    type TokenStream<'a> = Tokens;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> Tokens {
        Tokens { tokens: analyze(text), next: 0, none: Token::default() }
    }
}

/// The tokens of one value.
pub struct Tokens {
    tokens: Vec<Token>,
    next: usize,
    /// What `token` answers before the first `advance` or after the last.
    none: Token,
}

impl TokenStream for Tokens {
    fn advance(&mut self) -> bool {
        self.next = (self.next + 1).min(self.tokens.len() + 1);
        self.next <= self.tokens.len()
    }

    fn token(&self) -> &Token {
        self.next.checked_sub(1).and_then(|i| self.tokens.get(i)).unwrap_or(&self.none)
    }

    fn token_mut(&mut self) -> &mut Token {
        match self.next.checked_sub(1) {
            Some(i) if i < self.tokens.len() => &mut self.tokens[i],
            _ => &mut self.none,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(text: &str) -> Vec<String> {
        analyze(text).into_iter().map(|t| t.text).collect()
    }

    #[test]
    fn words_base_forms_stop_tags_and_katakana_stems() {
        assert_eq!(
            texts("データベースには、大きなメリットがあります。"),
            ["データベース", "大きな", "メリット", "ある"]
        );
        assert_eq!(texts("コンピューターが動かなかった"), ["コンピュータ", "動く"]);
        assert_eq!(texts("ﾃﾞｰﾀﾍﾞｰｽ"), ["データベース"]);
    }
}
