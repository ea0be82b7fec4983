//! `_stats`, as `builtin_stats`/`stat_values` in couch_query_servers.erl: each number
//! becomes `{sum, count, min, max, sumsqr}`; arrays are handled element-wise (all values
//! the same length); an object with those five members counts as a pre-aggregated
//! statistic, which is also how reductions are combined. Anything else fails the
//! reduction with `invalid_value`.

use serde_json::{Map, Value};

use super::number::{Num, erl_term};
use crate::error::{Error, Result};

/// `{Sum, Count, Min, Max, SumSqr}`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Stat {
    sum: Num,
    count: Num,
    min: Num,
    max: Num,
    sumsqr: Num,
}

/// The accumulator: one statistic or, for array values, one per element.
#[derive(Debug, Clone, PartialEq)]
enum Acc {
    Stat(Stat),
    List(Vec<Acc>),
}

const FIELDS: [&str; 5] = ["sum", "count", "min", "max", "sumsqr"];

impl Stat {
    fn of(x: Num) -> Stat {
        Stat { sum: x, count: Num::Int(1), min: x, max: x, sumsqr: x.mul(x) }
    }

    fn merge(self, acc: Stat) -> Stat {
        Stat {
            sum: self.sum.add(acc.sum),
            count: self.count.add(acc.count),
            min: self.min.min(acc.min),
            max: self.max.max(acc.max),
            sumsqr: self.sumsqr.add(acc.sumsqr),
        }
    }

    /// `unpack_stats`: the five members of a pre-aggregated statistic.
    fn unpack(members: &Map<String, Value>) -> Result<Stat> {
        let get = |key: &str| -> Result<Num> {
            match members.get(key) {
                Some(Value::Number(n)) => Ok(Num::from_number(n)),
                None => Err(Error::InvalidValue(format!(
                    "user _stats input missing required field {key} ({})",
                    erl_proplist(members)
                ))),
                Some(other) => Err(Error::InvalidValue(format!(
                    "non-numeric _stats input received for {key}: {}",
                    erl_term(other)
                ))),
            }
        };
        Ok(Stat {
            sum: get("sum")?,
            count: get("count")?,
            min: get("min")?,
            max: get("max")?,
            sumsqr: get("sumsqr")?,
        })
    }

    fn pack(self) -> Value {
        let numbers = [self.sum, self.count, self.min, self.max, self.sumsqr];
        Value::Object(
            FIELDS.iter().zip(numbers).map(|(k, n)| ((*k).to_owned(), n.to_value())).collect(),
        )
    }
}

impl Acc {
    fn pack(self) -> Value {
        match self {
            Acc::Stat(stat) => stat.pack(),
            Acc::List(items) => Value::Array(items.into_iter().map(Acc::pack).collect()),
        }
    }
}

/// `builtin_stats` over map values or earlier reductions; the result is packed, so it
/// can be fed back in (rereduce) and needs no finalizing.
pub(crate) fn stats<'a>(values: impl IntoIterator<Item = &'a Value>) -> Result<Value> {
    let mut values = values.into_iter();
    let Some(first) = values.next() else {
        let zero = Num::Int(0);
        return Ok(Stat { sum: zero, count: zero, min: zero, max: zero, sumsqr: zero }.pack());
    };
    let mut acc = initial(first)?;
    for value in values {
        acc = stat_values(value, acc)?;
    }
    Ok(acc.pack())
}

/// `build_initial_accumulator`.
fn initial(value: &Value) -> Result<Acc> {
    match value {
        Value::Array(items) => items.iter().map(initial).collect::<Result<_>>().map(Acc::List),
        Value::Number(n) => Ok(Acc::Stat(Stat::of(Num::from_number(n)))),
        Value::Object(members) => Stat::unpack(members).map(Acc::Stat),
        other => Err(Error::InvalidValue(format!("non-numeric _stats input: {}", erl_term(other)))),
    }
}

/// `stat_values(Value, Acc)`.
fn stat_values(value: &Value, acc: Acc) -> Result<Acc> {
    match (value, acc) {
        (Value::Array(items), Acc::List(accs)) => {
            if items.len() != accs.len() {
                // lists:zipwith crashes on lists of different lengths.
                return Err(Error::InvalidValue(format!(
                    "_stats arrays must all have the same length, not {} and {}",
                    items.len(),
                    accs.len()
                )));
            }
            items
                .iter()
                .zip(accs)
                .map(|(v, a)| stat_values(v, a))
                .collect::<Result<_>>()
                .map(Acc::List)
        }
        (Value::Object(members), Acc::Stat(acc)) => {
            Ok(Acc::Stat(Stat::unpack(members)?.merge(acc)))
        }
        (Value::Number(n), Acc::Stat(acc)) => {
            Ok(Acc::Stat(Stat::of(Num::from_number(n)).merge(acc)))
        }
        (Value::Number(n), Acc::List(_)) => {
            // Erlang converts the number to a tuple first and then finds no clause.
            let s = Stat::of(Num::from_number(n));
            Err(stat_error(&format!("{{{},{},{},{},{}}}", s.sum, s.count, s.min, s.max, s.sumsqr)))
        }
        (Value::Object(members), Acc::List(_)) => {
            let s = Stat::unpack(members)?;
            Err(stat_error(&format!("{{{},{},{},{},{}}}", s.sum, s.count, s.min, s.max, s.sumsqr)))
        }
        (other, _) => Err(stat_error(&erl_term(other))),
    }
}

/// CouchDB's `?STATERROR`.
fn stat_error(term: &str) -> Error {
    Error::InvalidValue(format!(
        "The _stats function requires that map values be numbers or arrays of numbers, not '{term}'"
    ))
}

fn erl_proplist(members: &Map<String, Value>) -> String {
    let items: Vec<String> = members
        .iter()
        .map(|(k, v)| format!("{{<<{}>>,{}}}", Value::String(k.clone()), erl_term(v)))
        .collect();
    format!("[{}]", items.join(","))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn numbers_and_arrays() -> Result<()> {
        let got = stats(&[json!(1), json!(2), json!(3.5)])?;
        assert_eq!(got, json!({"sum": 6.5, "count": 3, "min": 1, "max": 3.5, "sumsqr": 17.25}));
        let got = stats(&[json!([1, 10]), json!([2, 20])])?;
        assert_eq!(got[1], json!({"sum": 30, "count": 2, "min": 10, "max": 20, "sumsqr": 500}));
        assert_eq!(stats(&[])?, json!({"sum": 0, "count": 0, "min": 0, "max": 0, "sumsqr": 0}));
        Ok(())
    }

    #[test]
    fn pre_aggregated_objects_combine() -> Result<()> {
        let a = stats(&[json!(1), json!(5)])?;
        let b = stats(&[json!(-2)])?;
        assert_eq!(
            stats(&[a, b])?,
            json!({"sum": 4, "count": 3, "min": -2, "max": 5, "sumsqr": 30})
        );
        Ok(())
    }

    #[test]
    fn bad_values_fail_with_couchdb_texts() {
        let err = |values: &[Value]| stats(values).err().map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(err(&[json!("a")]), r#"non-numeric _stats input: <<"a">>"#);
        assert_eq!(
            err(&[json!(1), json!("a")]),
            r#"The _stats function requires that map values be numbers or arrays of numbers, not '<<"a">>'"#
        );
        assert_eq!(
            err(&[json!({"sum": 1})]),
            r#"user _stats input missing required field count ([{<<"sum">>,1}])"#
        );
        assert_eq!(
            err(&[json!({"sum": "x", "count": 1})]),
            r#"non-numeric _stats input received for sum: <<"x">>"#
        );
    }
}
