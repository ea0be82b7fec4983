//! `updateDescription`: what changed between two revisions of a document, in MongoDB's
//! form (the delta of its update oplog entries). Sub-documents are compared field by field
//! (`a.b`), arrays element by element: changed elements are named by index (`tags.1`, or
//! `a.0.b` inside an element that is a document), appended ones too (`tags.2`), and an
//! array cut short is listed in `truncatedArrays` with its new size. `disambiguatedPaths`
//! (with `showExpandedEvents`) spells out, for every path with an array index or a field
//! name that looks like one (or has a dot), its parts: indexes as integers, names as strings.

use bson::{Bson, Document, doc};

/// The lists of an `updateDescription`.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Diff {
    pub updated: Document,
    pub removed: Vec<String>,
    pub truncated: Vec<Document>,
    pub disambiguated: Document,
}

/// A path being walked: its parts (names as strings, array indexes as integers).
type Parts = Vec<Bson>;

impl Diff {
    pub fn between(old: &Document, new: &Document) -> Diff {
        let mut diff = Diff::default();
        diff.objects(&mut Vec::new(), old, new);
        diff
    }

    /// Whether no top-level field of `old` kept its value while some were removed: the
    /// change stream reports such an edit as a `replace`.
    pub fn is_replacement(&self, old: &Document, new: &Document) -> bool {
        let kept = old.iter().any(|(k, v)| k != "_id" && new.get(k) == Some(v));
        !self.removed.is_empty() && !kept
    }

    /// The `updateDescription` document; `expanded` adds `disambiguatedPaths`.
    pub fn to_doc(&self, expanded: bool) -> Document {
        let mut out = doc! {
            "updatedFields": self.updated.clone(),
            "removedFields": self.removed.clone(),
            "truncatedArrays": self.truncated.clone(),
        };
        if expanded {
            out.insert("disambiguatedPaths", self.disambiguated.clone());
        }
        out
    }

    /// The dotted path of `parts`, noting its parts when the dotted form is ambiguous.
    fn path(&mut self, parts: &Parts) -> String {
        let text: Vec<String> = parts
            .iter()
            .map(|p| match p {
                Bson::String(name) => name.clone(),
                other => other.to_string(),
            })
            .collect();
        let path = text.join(".");
        let ambiguous = parts.iter().any(|p| match p {
            Bson::String(name) => name.contains('.') || name.parse::<u64>().is_ok(),
            _ => true,
        });
        if ambiguous {
            self.disambiguated.insert(path.clone(), parts.clone());
        }
        path
    }

    fn set(&mut self, parts: &Parts, value: &Bson) {
        let path = self.path(parts);
        self.updated.insert(path, value.clone());
    }

    fn objects(&mut self, parts: &mut Parts, old: &Document, new: &Document) {
        for (key, value) in new {
            parts.push(Bson::String(key.clone()));
            self.values(parts, old.get(key), value);
            parts.pop();
        }
        for key in old.keys().filter(|k| !new.contains_key(*k)) {
            parts.push(Bson::String(key.clone()));
            let path = self.path(parts);
            self.removed.push(path);
            parts.pop();
        }
    }

    /// The change at `parts` from `was` (absent: a new field) to `now`.
    fn values(&mut self, parts: &mut Parts, was: Option<&Bson>, now: &Bson) {
        match (was, now) {
            (Some(was), now) if was == now => {}
            (Some(Bson::Document(was)), Bson::Document(now)) => self.objects(parts, was, now),
            (Some(Bson::Array(was)), Bson::Array(now)) => self.arrays(parts, was, now),
            _ => self.set(parts, now),
        }
    }

    fn arrays(&mut self, parts: &mut Parts, old: &[Bson], new: &[Bson]) {
        if new.len() < old.len() {
            let field = self.path(parts);
            let size = i32::try_from(new.len()).unwrap_or(i32::MAX);
            self.truncated.push(doc! {"field": field, "newSize": size});
        }
        for (i, value) in new.iter().enumerate() {
            parts.push(Bson::Int32(i32::try_from(i).unwrap_or(i32::MAX)));
            self.values(parts, old.get(i), value);
            parts.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_elements_and_numeric_names_are_disambiguated() {
        let old = doc! {"a": {"1": 1}, "b": [{"1": 1}, "x"], "c": [1, 2, 3]};
        let new = doc! {"a": {"1": 2}, "b": [{"1": 2}, "x"], "c": [1, 9]};
        let diff = Diff::between(&old, &new);
        assert_eq!(diff.updated, doc! {"a.1": 2, "b.0.1": 2, "c.1": 9});
        assert_eq!(diff.truncated, vec![doc! {"field": "c", "newSize": 2}]);
        assert_eq!(
            diff.disambiguated,
            doc! {"a.1": ["a", "1"], "b.0.1": ["b", 0, "1"], "c.1": ["c", 1]}
        );
    }

    #[test]
    fn diffs_name_nested_fields_appends_and_truncations() {
        let old = doc! {"title": "猫", "pages": 10, "tags": ["a", "b"], "meta": {"x": 1, "y": 2}, "gone": 1, "cut": [1, 2, 3]};
        let new = doc! {"title": "猫", "pages": 11, "tags": ["a", "b", "c"], "meta": {"x": 1, "z": 3}, "cut": [1]};
        let diff = Diff::between(&old, &new);
        assert_eq!(diff.updated, doc! {"pages": 11, "tags.2": "c", "meta.z": 3});
        assert_eq!(diff.removed, vec!["meta.y".to_string(), "gone".to_string()]);
        assert_eq!(diff.truncated, vec![doc! {"field": "cut", "newSize": 1}]);
        assert!(!diff.is_replacement(&old, &new));
        assert_eq!(diff.disambiguated, doc! {"tags.2": ["tags", 2]});
        let other = doc! {"name": "new"};
        assert!(Diff::between(&old, &other).is_replacement(&old, &other));
        let set_only = doc! {"title": "犬"};
        let one = doc! {"title": "猫"};
        assert!(!Diff::between(&one, &set_only).is_replacement(&one, &set_only));
    }
}
