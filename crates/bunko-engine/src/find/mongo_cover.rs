//! Covered MongoDB queries: a query whose filter, sort and wanted paths are all fields of
//! the index it scans is answered from the index entries alone, without reading a
//! document (MongoDB's `PROJECTION_COVERED` over `IXSCAN`, `totalDocsExamined: 0`).
//!
//! Each entry of a MongoDB index keeps the document's stored values at the index paths
//! (`crate::index::mongo::covered_fields`), so the covered answer is exactly what a
//! projection of the fetched document gives, BSON types and missing fields included. As
//! in MongoDB, an index does not cover a path at which it is multikey, a hashed or collated
//! index covers nothing, nor does a query under a non-simple collation, and a filter
//! covers only as `bunko_query::covered::filter_covered` says (no `null` equality, no
//! `$exists`). An index created before entries kept these values
//! (`crate::index::IndexMeta::covering` unset) covers nothing until it is built again.

use bunko_query::covered::filter_covered;
use bunko_query::{Direction, FieldPath, Selector, collation};

use super::mongo_index::MongoScan;

impl MongoScan {
    /// Whether the scan answers a query over `selector`, sorted by `order`, whose caller
    /// needs only the paths `reads` (`_id` among them unless excluded), from its entries.
    pub fn covered(
        &self,
        selector: &Selector,
        reads: &[FieldPath],
        order: &[(FieldPath, Direction)],
    ) -> bool {
        let Some(spec) = &self.index.def.mongo else { return false };
        let meta = self.index.meta();
        if !meta.covering
            || spec.hashed.is_some()
            || spec.collation.is_some()
            || collation::current().is_some()
        {
            return false;
        }
        let multikey = |i: usize| meta.multikey.get(i).is_some_and(|p| !p.is_empty());
        let paths = self.index.compiled.paths().iter().enumerate();
        let usable: Vec<FieldPath> =
            paths.filter(|(i, _)| !multikey(*i)).map(|(_, p)| p.clone()).collect();
        let sorted = order.iter().map(|(p, _)| p);
        reads.iter().chain(sorted).all(|p| usable.contains(p)) && filter_covered(selector, &usable)
    }
}
