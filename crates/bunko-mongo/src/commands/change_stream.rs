//! `$changeStream` as the first stage of an `aggregate`: the one place a change-stream
//! cursor is opened. Not implemented yet: the pipeline gets a clear `NotImplemented`.

use bson::Document;

use super::Ctx;
use crate::error::MongoError;

/// Opens a change stream for `aggregate` `command` (whose first stage is `$changeStream`).
pub(super) fn open(_ctx: &mut Ctx, _command: &Document) -> Result<Document, MongoError> {
    Err(MongoError::not_implemented("$changeStream is not supported yet"))
}
