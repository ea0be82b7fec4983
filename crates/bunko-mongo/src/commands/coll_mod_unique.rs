//! `collMod`'s `index` conversions between regular and unique indexes (MongoDB 6+), in
//! MongoDB's two steps: `prepareUnique: true` makes the index refuse new duplicate keys
//! (those stored stay), then `unique: true` converts it when no two documents share a key,
//! else `CannotConvertIndexToUnique` (359) lists them (`violations: [{ids: […]}, …]`, one
//! entry per shared key, up to 8 MB of ids as MongoDB). `forceNonUnique: true` turns a
//! unique index back into a regular one. Part of [`super::coll_mod_index`].

use bson::{Bson, Document, doc};
use bunko_doc::ejson;
use bunko_engine::Database;
use bunko_engine::index::mongo::MongoIndexChange;

use super::coll_mod_index::{Target, flag, invalid};
use crate::error::MongoError;

/// How many bytes of violating ids `CannotConvertIndexToUnique` lists at most (MongoDB:
/// half its largest document).
const VIOLATIONS_MAX: usize = 8 * 1024 * 1024;

/// The `unique`, `prepareUnique` and `forceNonUnique` a `collMod` asks for.
pub(super) struct Uniqueness {
    unique: Option<bool>,
    prepare: Option<bool>,
    force_non_unique: Option<bool>,
}

impl Uniqueness {
    pub(super) fn requested(index: &Document) -> Result<Self, MongoError> {
        Ok(Uniqueness {
            unique: flag(index, "unique")?,
            prepare: flag(index, "prepareUnique")?,
            force_non_unique: flag(index, "forceNonUnique")?,
        })
    }

    /// Whether `unique: true` converts the index (`None`: not asked, or already unique),
    /// after MongoDB's checks.
    pub(super) fn unique_change(&self, target: &Target) -> Result<Option<bool>, MongoError> {
        match (self.unique, target) {
            (None, _) => Ok(None),
            (Some(false), _) => Err(MongoError::bad_value("Cannot make index non-unique")),
            (Some(true), Target::Id) => Ok(None),
            (Some(true), Target::Index(_, spec)) if spec.unique => Ok(None),
            (Some(true), Target::Index(_, spec)) if !spec.prepare_unique => Err(invalid(
                "Cannot make index unique with 'prepareUnique=false'. Run collMod to set it first.",
            )),
            (Some(true), Target::Index(..)) => Ok(Some(true)),
        }
    }

    /// Adds the unique conversions to `change` and names them in `reply`.
    pub(super) fn apply(
        &self,
        target: &Target,
        unique: Option<bool>,
        change: &mut MongoIndexChange,
        reply: &mut Document,
    ) -> Result<(), MongoError> {
        if unique == Some(true) {
            // `prepareUnique` is reset by the conversion, as in MongoDB.
            (change.unique, change.prepare_unique) = (Some(true), Some(false));
            reply.insert("unique_new", true);
        }
        if let (Some(prepare), Target::Index(_, spec)) = (self.prepare, target) {
            if spec.hashed.is_some() && prepare {
                return Err(MongoError::not_implemented(
                    "prepareUnique on a hashed index is not supported",
                ));
            }
            // Setting it to what it is, or on a unique index, changes nothing.
            if spec.prepare_unique != prepare && !spec.unique {
                change.prepare_unique = Some(prepare);
                reply.insert("prepareUnique_old", spec.prepare_unique);
                reply.insert("prepareUnique_new", prepare);
            }
        }
        match (self.force_non_unique, target) {
            (None, _) => Ok(()),
            (Some(false), _) => {
                Err(MongoError::bad_value("'forceNonUnique: false' is not supported"))
            }
            (Some(true), Target::Id) => {
                Err(MongoError::not_implemented("forceNonUnique on the _id index is not supported"))
            }
            (Some(true), Target::Index(_, spec)) => {
                if spec.unique {
                    change.unique = Some(false);
                    reply.insert("forceNonUnique_new", true);
                }
                Ok(())
            }
        }
    }
}

/// Refuses to make the index `name` unique while documents share a key:
/// `CannotConvertIndexToUnique` with their `_id`s.
pub(super) fn check_no_duplicates(db: &Database, name: &str) -> Result<(), MongoError> {
    let groups = db.mongo_duplicates(name)?;
    if groups.is_empty() {
        return Ok(());
    }
    let (mut violations, mut size, mut complete) = (Vec::new(), 0, true);
    'groups: for group in groups {
        let mut ids = Vec::new();
        for id in group {
            size += id.len();
            if size > VIOLATIONS_MAX && !(violations.is_empty() && ids.is_empty()) {
                complete = false;
                if !ids.is_empty() {
                    violations.push(Bson::Document(doc! {"ids": ids}));
                }
                break 'groups;
            }
            ids.push(ejson::id_value(&id));
        }
        violations.push(Bson::Document(doc! {"ids": ids}));
    }
    let msg = match complete {
        true => {
            "Cannot convert the index to unique. Please resolve conflicting documents before running collMod again."
        }
        false => {
            "Cannot convert the index to unique. Too many conflicting documents were detected. Please resolve them and rerun collMod."
        }
    };
    let mut err = MongoError::new(359, "CannotConvertIndexToUnique", msg);
    err.extra = Some(Box::new(doc! {"violations": violations}));
    Err(err)
}
