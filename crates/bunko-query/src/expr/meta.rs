//! `{$meta: …}`: the metadata MongoDB attaches to the documents a query produces (text
//! and search scores, the sort key, index keys, record ids). `sortKey`, `indexKey` and
//! `recordId` are expressions ([`super::Expr::SortKey`], [`super::Expr::IndexKey`],
//! [`super::Expr::RecordId`], computed from the document where it has one). No other is
//! produced, so an expression reading one is refused as MongoDB refuses it: an argument
//! that is no string is `Location17307`, one MongoDB does not know `Location17308`
//! (MongoDB 8's wording), a text score (no query has one: `$text` is not supported)
//! `Location40218`, and the others MongoDB knows are `NotImplemented`.

use bson::Bson;

use super::ExprError;

/// The `$meta` arguments MongoDB 8 knows.
const KNOWN: &[&str] = &[
    "textScore",
    "randVal",
    "searchScore",
    "searchHighlights",
    "searchScoreDetails",
    "searchSequenceToken",
    "geoNearDistance",
    "geoNearPoint",
    "recordId",
    "indexKey",
    "sortKey",
    "vectorSearchScore",
    "score",
    "scoreDetails",
];

/// Why `{$meta: arg}` is refused (see the module doc).
pub fn unavailable(arg: &Bson) -> ExprError {
    match arg {
        Bson::String(name) if name == "textScore" => ExprError::location(
            40218,
            "query requires text score metadata, but it is not available",
        ),
        Bson::String(name) if KNOWN.contains(&name.as_str()) => {
            ExprError::new(238, "NotImplemented", format!("$meta \"{name}\" is not supported yet"))
        }
        Bson::String(name) => {
            ExprError::location(17308, format!("Unsupported $meta field: {name}"))
        }
        _ => ExprError::location(17307, "$meta only supports string arguments"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_arguments_are_refused_as_mongodb_refuses_them() {
        let code = |arg: Bson| unavailable(&arg).code;
        assert_eq!(code(Bson::String("textScore".into())), 40218);
        assert_eq!(code(Bson::String("indexKey".into())), 238);
        assert_eq!(code(Bson::String("zzz".into())), 17308);
        assert_eq!(
            unavailable(&Bson::String("zzz".into())).message,
            "Unsupported $meta field: zzz"
        );
        assert_eq!(code(Bson::Int32(1)), 17307);
    }
}
