//! How a function's source text becomes a program QuickJS can evaluate.
//!
//! CouchDB stores view functions as bare expressions such as `function(doc) { ... }`,
//! often with a trailing `;` (`"function (doc) {emit(doc.integer, doc.integer)};"`).
//! Standard JavaScript rejects an anonymous `function` at the start of a statement, so
//! CouchDB 3.4 patches its QuickJS ("Spidermonkey 1.8.5 mode",
//! `src/couch_quickjs/patches/01-spidermonkey-185-mode.patch`): a statement starting with
//! `function (` (or `async function (`) is parsed as an expression statement and the
//! program's completion value is the function.
//!
//! We cannot patch the QuickJS that `rquickjs` builds, so [`program`] gets the same effect
//! by prefixing such a source with `0,`: the first statement becomes the comma expression
//! `0, function (...) {...}`, whose value is the function, and everything after it parses
//! exactly as in CouchDB. Every other source is evaluated unchanged, so a named function
//! declaration (`function f(doc) {}`) completes with `undefined` and is rejected with
//! "Expression does not eval to a function.", as in CouchDB.

/// The program text to evaluate for a function source.
pub(crate) fn program(source: &str) -> std::borrow::Cow<'_, str> {
    if starts_with_anonymous_function(source) {
        std::borrow::Cow::Owned(format!("0,{source}"))
    } else {
        std::borrow::Cow::Borrowed(source)
    }
}

/// Whether the first tokens, after whitespace and comments, are `function (` or
/// `async function (`.
fn starts_with_anonymous_function(source: &str) -> bool {
    let rest = skip_trivia(source);
    let rest = match keyword(rest, "async") {
        Some(after) if keyword(skip_trivia(after), "function").is_some() => skip_trivia(after),
        _ => rest,
    };
    match keyword(rest, "function") {
        Some(after) => skip_trivia(after).starts_with('('),
        None => false,
    }
}

/// `text` after `word` when it starts with `word` as a whole identifier.
fn keyword<'a>(text: &'a str, word: &str) -> Option<&'a str> {
    let after = text.strip_prefix(word)?;
    let continues =
        after.chars().next().is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$');
    (!continues).then_some(after)
}

/// Skips JavaScript whitespace, line terminators and comments.
fn skip_trivia(mut text: &str) -> &str {
    loop {
        let trimmed = text.trim_start_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
        if let Some(comment) = trimmed.strip_prefix("//") {
            text = comment.find(['\n', '\r', '\u{2028}', '\u{2029}']).map_or("", |i| &comment[i..]);
        } else if let Some(comment) = trimmed.strip_prefix("/*") {
            match comment.find("*/") {
                Some(end) => text = &comment[end + 2..],
                // Unterminated: leave it for the parser to report.
                None => return trimmed,
            }
        } else {
            return trimmed;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::program;

    #[test]
    fn anonymous_functions_are_made_expressions() {
        for source in [
            "function(doc) { emit(doc._id, 1) }",
            "function (doc) {emit(doc.integer, doc.integer)};",
            "  \n// map\n/* c */ function\n(doc) {}",
            "async function (doc) {}",
        ] {
            assert_eq!(program(source), format!("0,{source}"), "{source}");
        }
    }

    #[test]
    fn other_sources_are_unchanged() {
        for source in [
            "(function(doc) {})",
            "function named(doc) {}",
            "functional(doc)",
            "var f = function(doc) {}; f",
            "async(function(){})",
            "/* unterminated",
        ] {
            assert_eq!(program(source), source, "{source}");
        }
    }
}
