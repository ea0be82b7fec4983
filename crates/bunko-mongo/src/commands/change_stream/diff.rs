//! `updateDescription`: what changed between two revisions of a document, in MongoDB's
//! form. Sub-documents are compared field by field (`a.b`); an array that grew by appends
//! reports its new elements (`tags.2`), one cut short reports `truncatedArrays`; any other
//! change reports the whole new value.

use bson::{Bson, Document, doc};

/// The three lists of an `updateDescription`.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Diff {
    pub updated: Document,
    pub removed: Vec<String>,
    pub truncated: Vec<Document>,
}

impl Diff {
    pub fn between(old: &Document, new: &Document) -> Diff {
        let mut diff = Diff::default();
        diff.objects("", old, new);
        diff
    }

    /// Whether no top-level field of `old` kept its value while some were removed: the
    /// change stream reports such an edit as a `replace`.
    pub fn is_replacement(&self, old: &Document, new: &Document) -> bool {
        let kept = old.iter().any(|(k, v)| k != "_id" && new.get(k) == Some(v));
        !self.removed.is_empty() && !kept
    }

    pub fn to_doc(&self) -> Document {
        doc! {
            "updatedFields": self.updated.clone(),
            "removedFields": self.removed.clone(),
            "truncatedArrays": self.truncated.clone(),
        }
    }

    fn objects(&mut self, prefix: &str, old: &Document, new: &Document) {
        for (key, value) in new {
            let path = format!("{prefix}{key}");
            match (old.get(key), value) {
                (Some(was), now) if was == now => {}
                (Some(Bson::Document(was)), Bson::Document(now)) => {
                    self.objects(&format!("{path}."), was, now);
                }
                (Some(Bson::Array(was)), Bson::Array(now)) => self.arrays(&path, was, now),
                _ => {
                    self.updated.insert(path, value.clone());
                }
            }
        }
        for key in old.keys().filter(|k| !new.contains_key(*k)) {
            self.removed.push(format!("{prefix}{key}"));
        }
    }

    fn arrays(&mut self, path: &str, old: &[Bson], new: &[Bson]) {
        if new.len() > old.len() && new.starts_with(old) {
            for (i, value) in new.iter().enumerate().skip(old.len()) {
                self.updated.insert(format!("{path}.{i}"), value.clone());
            }
        } else if new.len() < old.len() && old.starts_with(new) {
            let size = i32::try_from(new.len()).unwrap_or(i32::MAX);
            self.truncated.push(doc! {"field": path, "newSize": size});
        } else {
            self.updated.insert(path.to_string(), Bson::Array(new.to_vec()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diffs_name_nested_fields_appends_and_truncations() {
        let old = doc! {"title": "猫", "pages": 10, "tags": ["a", "b"], "meta": {"x": 1, "y": 2}, "gone": 1, "cut": [1, 2, 3]};
        let new = doc! {"title": "猫", "pages": 11, "tags": ["a", "b", "c"], "meta": {"x": 1, "z": 3}, "cut": [1]};
        let diff = Diff::between(&old, &new);
        assert_eq!(diff.updated, doc! {"pages": 11, "tags.2": "c", "meta.z": 3});
        assert_eq!(diff.removed, vec!["meta.y".to_string(), "gone".to_string()]);
        assert_eq!(diff.truncated, vec![doc! {"field": "cut", "newSize": 1}]);
        assert!(!diff.is_replacement(&old, &new));
        let other = doc! {"name": "new"};
        assert!(Diff::between(&old, &other).is_replacement(&old, &other));
        let set_only = doc! {"title": "犬"};
        let one = doc! {"title": "猫"};
        assert!(!Diff::between(&one, &set_only).is_replacement(&one, &set_only));
    }
}
