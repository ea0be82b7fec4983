//! MongoDB collations: how strings compare under a command's `collation` (`{locale:
//! "en_US", strength: 2}`), with ICU4X's implementation of the Unicode Collation Algorithm
//! and CLDR's locale data, compiled into the binary (MongoDB uses ICU with the same data).
//!
//! A command with a collation runs inside [`with`]: every string comparison of MongoDB's
//! order ([`crate::bson_order::compare`]) on that thread then goes through the collator, so
//! filters (`$eq`, `$in`, ranges), sorts and `distinct`'s equality all honour it, as in
//! MongoDB. `{locale: "simple"}` (or no collation) is MongoDB's binary comparison.
//!
//! Supported: `locale` (a CLDR locale such as `en_US`, `fr`, `de@collation=phonebook` is
//! refused), `strength` 1–5 (MongoDB's default 3, tertiary), `caseLevel`,
//! `numericOrdering`; `caseFirst`, `alternate`, `maxVariable`, `normalization` and
//! `backwards` only at their defaults.

use std::cell::RefCell;
use std::cmp::Ordering;
use std::sync::Arc;

use icu_collator::options::{CaseLevel, CollatorOptions, Strength};
use icu_collator::preferences::CollationNumericOrdering;
use icu_collator::{Collator, CollatorBorrowed, CollatorPreferences};
use serde_json::{Map, Value};

/// A non-simple collation.
pub struct Collation {
    collator: CollatorBorrowed<'static>,
    /// The collation as given, for error messages and explain.
    pub spec: Map<String, Value>,
}

impl std::fmt::Debug for Collation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Collation({:?})", self.spec)
    }
}

/// A collation that cannot be used: MongoDB's `BadValue` (the message) or an option Bunko
/// does not implement (`NotImplemented`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CollationError {
    BadValue(String),
    NotImplemented(String),
}

impl Collation {
    /// Parses a command's `collation` document (as JSON); `None` for the simple collation.
    pub fn parse(spec: &Map<String, Value>) -> Result<Option<Arc<Collation>>, CollationError> {
        let bad = |m: String| CollationError::BadValue(m);
        let locale = match spec.get("locale") {
            Some(Value::String(l)) => l.as_str(),
            Some(_) => return Err(bad("collation locale must be a string".into())),
            None => return Err(bad("Missing expected field \"locale\"".into())),
        };
        if locale == "simple" {
            return match spec.keys().find(|k| *k != "locale") {
                Some(k) => {
                    Err(bad(format!("If 'locale' is set to 'simple', '{k}' must not be set")))
                }
                None => Ok(None),
            };
        }
        let mut options = CollatorOptions::default();
        let mut numeric = false;
        for (key, value) in spec {
            match (key.as_str(), value) {
                ("locale", _) => {}
                ("strength", v) => options.strength = Some(strength(v)?),
                ("caseLevel", Value::Bool(on)) => {
                    options.case_level = Some(if *on { CaseLevel::On } else { CaseLevel::Off });
                }
                ("numericOrdering", Value::Bool(on)) => numeric = *on,
                ("caseFirst", Value::String(s)) if s == "off" => {}
                ("alternate", Value::String(s)) if s == "non-ignorable" => {}
                ("maxVariable", Value::String(s)) if s == "punct" => {}
                ("normalization" | "backwards", Value::Bool(false)) => {}
                ("version", _) => {}
                ("caseFirst" | "alternate" | "maxVariable" | "normalization" | "backwards", _) => {
                    return Err(CollationError::NotImplemented(format!(
                        "collation option '{key}' other than its default is not supported yet"
                    )));
                }
                ("caseLevel" | "numericOrdering", _) => {
                    return Err(bad(format!("collation {key} must be a boolean")));
                }
                _ => return Err(bad(format!("unknown collation field '{key}'"))),
            }
        }
        let tag = locale.replace('_', "-");
        let parsed: icu_locale_core::Locale = tag.parse().map_err(|_| {
            bad(format!("Field 'locale' is invalid in: {}", Value::Object(spec.clone())))
        })?;
        let mut prefs = CollatorPreferences::from(&parsed);
        if numeric {
            prefs.numeric_ordering = Some(CollationNumericOrdering::True);
        }
        let collator = Collator::try_new(prefs, options).map_err(|_| {
            bad(format!("Field 'locale' is invalid in: {}", Value::Object(spec.clone())))
        })?;
        Ok(Some(Arc::new(Collation { collator, spec: spec.clone() })))
    }

    /// Compares two strings under this collation.
    pub fn compare(&self, a: &str, b: &str) -> Ordering {
        self.collator.compare(a, b)
    }

    /// The ICU4X sort key of a string: keys compare as bytes as [`Collation::compare`]
    /// compares the strings (a collated index holds these).
    pub fn sort_key(&self, s: &str) -> Vec<u8> {
        let mut key = Vec::with_capacity(2 * s.len() + 8);
        let Ok(()) = self.collator.write_sort_key_to(s, &mut key);
        key
    }

    /// The collation with every field filled in, as MongoDB's `listIndexes` shows an index's
    /// (`version` is the ICU version MongoDB reports). Two collations given differently
    /// (`strength: 3` or left out) that collate alike have the same full form.
    pub fn full_spec(&self) -> Map<String, Value> {
        let given = |key: &str, default: Value| self.spec.get(key).cloned().unwrap_or(default);
        let strength = self.spec.get("strength").and_then(Value::as_f64).unwrap_or(3.0);
        let mut out = Map::new();
        out.insert("locale".into(), given("locale", Value::Null));
        out.insert("caseLevel".into(), given("caseLevel", Value::Bool(false)));
        out.insert("caseFirst".into(), Value::from("off"));
        out.insert("strength".into(), Value::from(strength as i64));
        out.insert("numericOrdering".into(), given("numericOrdering", Value::Bool(false)));
        out.insert("alternate".into(), Value::from("non-ignorable"));
        out.insert("maxVariable".into(), Value::from("punct"));
        out.insert("normalization".into(), Value::Bool(false));
        out.insert("backwards".into(), Value::Bool(false));
        out.insert("version".into(), Value::from(ICU_VERSION));
        out
    }
}

/// The ICU version MongoDB reports in a collation's `version`.
pub const ICU_VERSION: &str = "57.1";

/// Whether two collations (`None`: simple) collate alike.
pub fn same(a: Option<&Collation>, b: Option<&Collation>) -> bool {
    a.map(Collation::full_spec) == b.map(Collation::full_spec)
}

fn strength(value: &Value) -> Result<Strength, CollationError> {
    match value.as_f64() {
        Some(1.0) => Ok(Strength::Primary),
        Some(2.0) => Ok(Strength::Secondary),
        Some(3.0) => Ok(Strength::Tertiary),
        Some(4.0) => Ok(Strength::Quaternary),
        Some(5.0) => Ok(Strength::Identical),
        _ => Err(CollationError::BadValue(format!(
            "unable to parse collation: strength must be an integer 1 through 5, found {value}"
        ))),
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<Collation>>> = const { RefCell::new(None) };
}

/// Runs `f` with `collation` as this thread's collation (restored afterwards, also on a
/// panic's unwinding).
pub fn with<R>(collation: Option<Arc<Collation>>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Arc<Collation>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            CURRENT.with(|c| *c.borrow_mut() = previous);
        }
    }
    let previous = CURRENT.with(|c| c.replace(collation));
    let _restore = Restore(previous);
    f()
}

/// This thread's collation (for work that continues on another thread: a cursor's next
/// batch).
pub fn current() -> Option<Arc<Collation>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Whether a non-simple collation is in force on this thread (an index built with the
/// simple collation cannot then answer string conditions).
pub fn active() -> bool {
    CURRENT.with(|c| c.borrow().is_some())
}

/// The sort key of a string under this thread's collation (`None` without one).
pub fn sort_key(s: &str) -> Option<Vec<u8>> {
    CURRENT.with(|c| c.borrow().as_ref().map(|collation| collation.sort_key(s)))
}

/// Compares two strings under this thread's collation (bytes without one).
pub fn compare_str(a: &str, b: &str) -> Ordering {
    CURRENT.with(|c| match c.borrow().as_ref() {
        Some(collation) => collation.compare(a, b),
        None => a.as_bytes().cmp(b.as_bytes()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(spec: Value) -> Result<Option<Arc<Collation>>, CollationError> {
        Collation::parse(spec.as_object().expect("object"))
    }

    #[test]
    fn strength_two_ignores_case_but_not_accents() {
        let c = parse(json!({"locale": "en_US", "strength": 2})).unwrap().unwrap();
        assert_eq!(c.compare("PING", "ping"), Ordering::Equal);
        assert_ne!(c.compare("cote", "côte"), Ordering::Equal);
        let c = parse(json!({"locale": "en_US", "strength": 1})).unwrap().unwrap();
        assert_eq!(c.compare("cote", "Côte"), Ordering::Equal);
        let c = parse(json!({"locale": "en_US"})).unwrap().unwrap();
        assert_eq!(c.compare("a", "B"), Ordering::Less);
        assert_ne!(c.compare("a", "A"), Ordering::Equal);
    }

    #[test]
    fn the_thread_collation_applies_inside_with_only() {
        let c = parse(json!({"locale": "fr", "strength": 1})).unwrap();
        assert!(with(c, || compare_str("É", "e").is_eq() && active()));
        assert!(!active());
        assert_eq!(compare_str("É", "e"), Ordering::Greater); // bytes: 0xC3 > 0x65
        let numeric = parse(json!({"locale": "en", "numericOrdering": true})).unwrap();
        assert!(with(numeric, || compare_str("10", "9").is_gt()));
    }

    #[test]
    fn sort_keys_order_as_the_collator_and_full_specs_fill_defaults() {
        let c = parse(json!({"locale": "en", "strength": 2.0})).unwrap().unwrap();
        assert_eq!(c.sort_key("PING"), c.sort_key("ping"));
        assert!(c.sort_key("apple") < c.sort_key("Banana"));
        let full = c.full_spec();
        assert_eq!(
            Value::Object(full.clone()),
            json!({"locale": "en", "caseLevel": false, "caseFirst": "off", "strength": 2,
                   "numericOrdering": false, "alternate": "non-ignorable", "maxVariable": "punct",
                   "normalization": false, "backwards": false, "version": "57.1"})
        );
        let again = parse(Value::Object(full)).unwrap().unwrap();
        assert!(same(Some(&c), Some(&again)));
        let tertiary = parse(json!({"locale": "en"})).unwrap().unwrap();
        assert!(!same(Some(&c), Some(&tertiary)));
        assert!(!same(Some(&c), None));
        assert!(with(Some(c), || sort_key("x").is_some()));
        assert_eq!(sort_key("x"), None);
    }

    #[test]
    fn simple_and_bad_collations() {
        assert!(parse(json!({"locale": "simple"})).unwrap().is_none());
        assert!(matches!(parse(json!({})), Err(CollationError::BadValue(_))));
        assert!(matches!(
            parse(json!({"locale": "en", "strength": 9})),
            Err(CollationError::BadValue(_))
        ));
        assert!(matches!(
            parse(json!({"locale": "en", "caseFirst": "upper"})),
            Err(CollationError::NotImplemented(_))
        ));
        assert!(matches!(
            parse(json!({"locale": "simple", "strength": 1})),
            Err(CollationError::BadValue(_))
        ));
    }
}
