//! `_sum` (and `_count`'s rereduce), clause for clause as `builtin_sum_rows`/`sum_values`
//! in couch_query_servers.erl: numbers add; arrays add element-wise, a number counting as
//! a one-element array; objects add key-wise, recursively. A value that cannot be added
//! does not fail the reduction: the result becomes CouchDB's
//! `{"error":"builtin_reduce_error","reason":...,"caused_by":...}` object, and an earlier
//! such object in a rereduce is passed through.

use serde_json::{Map, Value};

use super::number::Num;
use crate::error::{Error, Result};

/// CouchDB's `?SUMERROR` text: the `reason` of a `_sum` over values it cannot add.
pub const SUM_ERROR: &str = "The _sum function requires that map values be numbers, \
arrays of numbers, or objects. Objects cannot be mixed with other data structures. Objects \
can be arbitrarily nested, provided that the values for all fields are themselves numbers, \
arrays of numbers, or objects.";

/// A partial sum: numbers are kept as [`Num`]s, everything else as it came.
#[derive(Debug, Clone)]
enum Acc {
    Num(Num),
    List(Vec<Acc>),
    /// Members in the order CouchDB holds them (sorted by key once merged).
    Object(Vec<(String, Acc)>),
    Other(Value),
}

/// Why `sum_values` stopped.
enum Stop {
    /// `throw({invalid_value, ?SUMERROR, Cause})`.
    Invalid(Value),
    /// An earlier `builtin_reduce_error` object.
    Passed(Value),
    /// An Erlang `case_clause` crash (an object added to a number other than 0 or to an
    /// array); CouchDB fails the reduction there.
    Crash,
}

impl Acc {
    fn from_value(value: &Value) -> Acc {
        match value {
            Value::Number(n) => Acc::Num(Num::from_number(n)),
            Value::Array(items) => Acc::List(items.iter().map(Acc::from_value).collect()),
            Value::Object(members) => {
                Acc::Object(members.iter().map(|(k, v)| (k.clone(), Acc::from_value(v))).collect())
            }
            other => Acc::Other(other.clone()),
        }
    }

    fn into_value(self) -> Value {
        match self {
            Acc::Num(n) => n.to_value(),
            Acc::List(items) => Value::Array(items.into_iter().map(Acc::into_value).collect()),
            Acc::Object(members) => Value::Object(
                members.into_iter().map(|(k, v)| (k, v.into_value())).collect::<Map<_, _>>(),
            ),
            Acc::Other(value) => value,
        }
    }
}

/// `builtin_sum_rows`: the sum of `values`, or the error object in its place.
pub(crate) fn sum_rows<'a>(values: impl IntoIterator<Item = &'a Value>) -> Result<Value> {
    let mut acc = Acc::Num(Num::Int(0));
    for value in values {
        acc = match sum_values(value, acc) {
            Ok(next) => next,
            Err(Stop::Passed(object)) => return Ok(object),
            Err(Stop::Invalid(cause)) => {
                let mut error = Map::new();
                error.insert("error".into(), "builtin_reduce_error".into());
                error.insert("reason".into(), SUM_ERROR.into());
                error.insert("caused_by".into(), cause);
                return Ok(Value::Object(error));
            }
            Err(Stop::Crash) => return Err(Error::InvalidValue(SUM_ERROR.into())),
        };
    }
    Ok(acc.into_value())
}

fn sum_values(value: &Value, acc: Acc) -> Result<Acc, Stop> {
    match (value, acc) {
        (Value::Number(n), Acc::Num(a)) => Ok(Acc::Num(a.add(Num::from_number(n)))),
        (Value::Array(items), Acc::List(xs)) => sum_arrays(xs, items),
        (Value::Number(_), Acc::List(xs)) => sum_arrays(xs, std::slice::from_ref(value)),
        (Value::Array(items), Acc::Num(a)) => sum_arrays(vec![Acc::Num(a)], items),
        (Value::Object(members), acc) => {
            // lists:keyfind: the first "error" member decides.
            if members.get("error").and_then(Value::as_str) == Some("builtin_reduce_error") {
                return Err(Stop::Passed(value.clone()));
            }
            match acc {
                Acc::Num(a) if a.is_int_zero() => Ok(Acc::from_value(value)),
                Acc::Object(acc_members) => sum_objects(members, acc_members),
                _ => Err(Stop::Crash),
            }
        }
        (other, _) => Err(Stop::Invalid(other.clone())),
    }
}

/// `sum_arrays(Xs, Ys)` with `Xs` the accumulator: pairs add while both are numbers; the
/// longer tail is kept unchecked; a non-number pair throws with what is left of `Xs`.
fn sum_arrays(xs: Vec<Acc>, ys: &[Value]) -> Result<Acc, Stop> {
    let mut out = Vec::with_capacity(xs.len().max(ys.len()));
    let mut xs = xs.into_iter();
    let mut ys = ys.iter();
    loop {
        match (xs.next(), ys.next()) {
            (None, None) => break,
            (Some(x), None) => {
                out.push(x);
                out.extend(xs);
                break;
            }
            (None, Some(y)) => {
                out.push(Acc::from_value(y));
                out.extend(ys.map(Acc::from_value));
                break;
            }
            (Some(Acc::Num(x)), Some(Value::Number(y))) => {
                out.push(Acc::Num(x.add(Num::from_number(y))))
            }
            (Some(x), Some(_)) => {
                let rest = std::iter::once(x).chain(xs).map(Acc::into_value).collect();
                return Err(Stop::Invalid(Value::Array(rest)));
            }
        }
    }
    Ok(Acc::List(out))
}

/// `sum_objects(lists:sort(Props), lists:sort(AccProps))`: a merge by key; shared keys add.
fn sum_objects(members: &Map<String, Value>, acc: Vec<(String, Acc)>) -> Result<Acc, Stop> {
    let mut mine: Vec<(&String, &Value)> = members.iter().collect();
    mine.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let mut theirs = acc;
    theirs.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let mut out = Vec::with_capacity(mine.len().max(theirs.len()));
    let mut mine = mine.into_iter().peekable();
    let mut theirs = theirs.into_iter().peekable();
    loop {
        let order = match (mine.peek(), theirs.peek()) {
            (None, None) => break,
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (Some((k1, _)), Some((k2, _))) => k1.as_bytes().cmp(k2.as_bytes()),
        };
        match order {
            std::cmp::Ordering::Less => {
                if let Some((k, v)) = mine.next() {
                    out.push((k.clone(), Acc::from_value(v)));
                }
            }
            std::cmp::Ordering::Greater => out.extend(theirs.next()),
            std::cmp::Ordering::Equal => {
                if let (Some((k, v)), Some((_, a))) = (mine.next(), theirs.next()) {
                    out.push((k.clone(), sum_values(v, a)?));
                }
            }
        }
    }
    Ok(Acc::Object(out))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn sum(values: &[Value]) -> Value {
        sum_rows(values).unwrap_or_else(|e| json!({"crash": e.to_string()}))
    }

    #[test]
    fn sums_like_couchdb_sum_values_test() {
        // couch_query_servers.erl sum_values_test, through the reducer.
        let x = json!({"a": 1, "b": [1, 2], "c": {"d": 3}, "g": 1});
        let y = json!({"a": 2, "b": 3, "c": {"e": 5}, "f": 1, "g": 1});
        let z = json!({"a": 3, "b": [4, 2], "c": {"d": 3, "e": 5}, "f": 1, "g": 2});
        assert_eq!(sum(&[x.clone(), y.clone()]), z);
        assert_eq!(sum(&[y, x]), z);
        assert_eq!(sum(&[json!(1), json!([1, 4, 6])]), json!([2, 4, 6]));
        assert_eq!(sum(&[json!([3, 2, 4]), json!([0, 3, 3])]), json!([3, 5, 7]));
    }

    #[test]
    fn bad_values_become_the_error_object() {
        let got = sum(&[json!(1), json!("x")]);
        assert_eq!(got["error"], "builtin_reduce_error");
        assert_eq!(got["reason"], SUM_ERROR);
        assert_eq!(got["caused_by"], "x");
        // A non-number inside arrays: caused_by is what is left of the accumulator.
        let got = sum(&[json!([1, 2]), json!([1, "b"])]);
        assert_eq!(got["caused_by"], json!([2]));
        // An earlier error object is passed through unchanged.
        let earlier = json!({"error": "builtin_reduce_error", "reason": "r", "caused_by": 1});
        assert_eq!(sum(&[json!(1), earlier.clone(), json!(2)]), earlier);
    }

    #[test]
    fn one_value_is_kept_as_it_came() {
        // An object as the first value is taken whole (`0 -> {Props}`), members unchecked.
        assert_eq!(sum(&[json!({"b": "x", "a": 1})]), json!({"b": "x", "a": 1}));
        assert_eq!(sum(&[]), json!(0));
    }

    #[test]
    fn object_on_a_number_fails_the_reduction() {
        assert!(sum_rows(&[json!(1), json!({"a": 1})]).is_err());
    }
}
