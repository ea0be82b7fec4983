//! The Atlas Search index commands (`createSearchIndexes`, `updateSearchIndex`,
//! `dropSearchIndex`). A MongoDB 8 server without a search index manager (any self-managed
//! one without `mongot`) answers each of them, before reading its arguments, with
//! `SearchNotEnabled` (31082) and the message drivers and tools test for ("... requires
//! additional configuration. Please connect to Atlas ..."); Bunko is such a server and
//! answers the same, so that a driver's search index helpers fail as they do there rather
//! than with `CommandNotFound`. The `$listSearchIndexes` stage is refused the same way
//! (`bunko_query::agg`).

use bson::Document;
use bunko_query::agg::SEARCH_INDEXES_NOT_ENABLED;

use super::Ctx;
use crate::error::MongoError;

pub(super) fn refuse(_ctx: &mut Ctx, _command: &Document) -> Result<Document, MongoError> {
    Err(MongoError::new(31082, "SearchNotEnabled", SEARCH_INDEXES_NOT_ENABLED))
}
