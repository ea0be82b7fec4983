//! Errors of query input, each with CouchDB's `error` name and `reason` text.
//!
//! Names and reasons are those of `mango_error:info/2` (CouchDB 3.4); offending values are
//! rendered as Erlang prints them ([`crate::erl`]), so a reason reads byte for byte as
//! CouchDB's. All of these are the client's fault: HTTP 400.

use serde_json::Value;

use crate::erl;

/// A selector, `sort` or `fields` argument CouchDB would refuse.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The selector is not a JSON object.
    #[error("Selector must be a JSON object, not: {}", erl::w(.0))]
    InvalidSelectorJson(Value),
    /// A top-level condition has no field name, e.g. `{"$gt": 1}`.
    #[error("One or more conditions is missing a field name.")]
    MissingFieldName,
    /// An operator's argument has the wrong shape, e.g. `{"$in": 5}`.
    #[error("Bad argument for operator {op}: {}", erl::w(arg))]
    BadArg { op: String, arg: Value },
    /// A MongoDB operator CouchDB knows but does not implement (`$where`, `$near`, ...).
    #[error("Unsupported operator: {0}")]
    NotSupported(String),
    /// An unknown `$` operator, or a known one whose argument CouchDB does not even
    /// recognise (`$regex`/`$beginsWith` with a non-string).
    #[error("Invalid operator: {0}")]
    InvalidOperator(String),
    /// A field path with an empty segment, e.g. `a..b`.
    #[error("Invalid field name: {0}")]
    InvalidFieldName(String),
    /// `sort` is not an array.
    #[error("Sort must be an array of sort specs, not: {}", erl::p(.0))]
    InvalidSortJson(Value),
    /// A `sort` entry is neither a field name nor `{"field": "asc" | "desc"}`.
    #[error("Invalid sort field: {}", erl::p(.0))]
    InvalidSortField(Value),
    /// `sort` mixes `asc` and `desc`.
    #[error("Sorts currently only support a single direction for all fields.")]
    UnsupportedMixedSort,
    /// A text-index sort field without `:string`/`:number` whose type the selector does not
    /// tell (`mango_selector_text:get_sort_type`).
    #[error(
        "Unspecified or ambiguous sort type. Try appending :number or :string to the sort field. {0}"
    )]
    TextSortError(String),
    /// `fields` is not an array.
    #[error("Fields must be an array of strings, not: {}", erl::w(.0))]
    InvalidFieldsJson(Value),
    /// A `fields` entry is not a string.
    #[error("Invalid JSON for field spec: {}", erl::w(.0))]
    InvalidFieldJson(Value),
}

impl Error {
    pub(crate) fn bad_arg(op: &str, arg: &Value) -> Self {
        Self::BadArg { op: op.to_owned(), arg: arg.clone() }
    }

    /// CouchDB's `error` member.
    pub fn error_name(&self) -> &'static str {
        match self {
            Self::InvalidSelectorJson(_) => "invalid_selector_json",
            Self::MissingFieldName => "invalid_selector",
            Self::BadArg { .. } => "bad_arg",
            Self::NotSupported(_) => "not_supported",
            Self::InvalidOperator(_) => "invalid_operator",
            Self::InvalidFieldName(_) => "invalid_field_name",
            Self::InvalidSortJson(_) => "invalid_sort_json",
            Self::InvalidSortField(_) => "invalid_sort_field",
            Self::UnsupportedMixedSort => "unsupported_mixed_sort",
            Self::TextSortError(_) => "text_sort_error",
            Self::InvalidFieldsJson(_) => "invalid_fields",
            Self::InvalidFieldJson(_) => "invalid_field",
        }
    }

    /// CouchDB's `reason` member (the `Display` text).
    pub fn reason(&self) -> String {
        self.to_string()
    }

    /// The HTTP status CouchDB answers with: 400 for every one of these.
    pub fn status(&self) -> u16 {
        400
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn reasons_read_as_couchdb() {
        let cases = [
            (
                Error::bad_arg("$in", &json!("x")),
                "bad_arg",
                "Bad argument for operator $in: <<120>>",
            ),
            (
                Error::MissingFieldName,
                "invalid_selector",
                "One or more conditions is missing a field name.",
            ),
            (Error::InvalidOperator("$foo".into()), "invalid_operator", "Invalid operator: $foo"),
            (Error::NotSupported("$where".into()), "not_supported", "Unsupported operator: $where"),
            (
                Error::InvalidSortField(json!({"a": "up"})),
                "invalid_sort_field",
                "Invalid sort field: {[{<<\"a\">>,<<\"up\">>}]}",
            ),
            (
                Error::InvalidFieldsJson(json!("a")),
                "invalid_fields",
                "Fields must be an array of strings, not: <<97>>",
            ),
        ];
        for (error, name, reason) in cases {
            assert_eq!(error.error_name(), name);
            assert_eq!(error.reason(), reason);
            assert_eq!(error.status(), 400);
        }
    }
}
