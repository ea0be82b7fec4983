//! Golden tests of the expression evaluator: MongoDB's documented examples (values and
//! types), and its errors for bad arguments.

use bson::{Bson, DateTime, Document, bson, doc};

use super::{Expr, ExprError, Vars};

fn eval(expr: Bson, on: Document) -> Result<Bson, ExprError> {
    Expr::parse(&expr)?.eval(&mut Vars::new(&on, DateTime::from_millis(0)))
}

fn code(expr: Bson) -> i32 {
    eval(expr, doc! {}).err().map_or(0, |e| e.code)
}

#[test]
fn arithmetic_keeps_mongodb_types() -> Result<(), ExprError> {
    let on = doc! {"price": 10, "fee": 2.5_f64, "qty": 3_i64, "big": i32::MAX};
    assert_eq!(eval(bson!({"$add": ["$price", "$fee"]}), on.clone())?, Bson::Double(12.5));
    assert_eq!(eval(bson!({"$add": ["$price", "$qty"]}), on.clone())?, Bson::Int64(13));
    assert_eq!(eval(bson!({"$add": ["$big", 1]}), on.clone())?, Bson::Int64(2_147_483_648));
    assert_eq!(eval(bson!({"$multiply": ["$price", "$qty"]}), on.clone())?, Bson::Int64(30));
    assert_eq!(eval(bson!({"$divide": ["$price", 4]}), on.clone())?, Bson::Double(2.5));
    assert_eq!(eval(bson!({"$subtract": ["$price", "$missing"]}), on.clone())?, Bson::Null);
    assert_eq!(eval(bson!({"$mod": [10, 3]}), on.clone())?, Bson::Int32(1));
    assert_eq!(eval(bson!({"$round": [2.5]}), on.clone())?, Bson::Double(2.0));
    assert_eq!(eval(bson!({"$round": [19.25, 1]}), on.clone())?, Bson::Double(19.2));
    assert_eq!(eval(bson!({"$trunc": [7.85, 1]}), on.clone())?, Bson::Double(7.8));
    assert_eq!(eval(bson!({"$pow": [5, 2]}), on.clone())?, Bson::Int32(25));
    assert_eq!(eval(bson!({"$abs": -5}), on)?, Bson::Int32(5));
    assert_eq!(code(bson!({"$add": ["a", 1]})), 16554);
    assert_eq!(code(bson!({"$divide": [1, 0]})), 16608);
    assert_eq!(code(bson!({"$subtract": [1, 2, 3]})), 16020);
    assert_eq!(code(bson!({"$frob": 1})), 168);
    Ok(())
}

#[test]
fn comparison_boolean_and_conditionals() -> Result<(), ExprError> {
    let on = doc! {"qty": 250, "item": "abc1", "desc": null};
    assert_eq!(eval(bson!({"$cmp": ["$qty", 250.0]}), on.clone())?, Bson::Int32(0));
    assert_eq!(eval(bson!({"$gt": ["$qty", 200]}), on.clone())?, Bson::Boolean(true));
    // BSON order: a string is greater than any number.
    assert_eq!(eval(bson!({"$lt": ["$qty", "1"]}), on.clone())?, Bson::Boolean(true));
    assert_eq!(eval(bson!({"$and": [1, "green"]}), on.clone())?, Bson::Boolean(true));
    assert_eq!(eval(bson!({"$or": [null, 0, "$missing"]}), on.clone())?, Bson::Boolean(false));
    assert_eq!(eval(bson!({"$not": [[false]]}), on.clone())?, Bson::Boolean(false));
    let cond = bson!({"$cond": {"if": {"$gte": ["$qty", 250]}, "then": 30, "else": 20}});
    assert_eq!(eval(cond, on.clone())?, Bson::Int32(30));
    assert_eq!(
        eval(bson!({"$ifNull": ["$desc", "Unspecified"]}), on.clone())?,
        "Unspecified".into()
    );
    let switch = bson!({"$switch": {"branches": [
        {"case": {"$lt": ["$qty", 100]}, "then": "low"},
        {"case": {"$lt": ["$qty", 300]}, "then": "mid"}], "default": "high"}});
    assert_eq!(eval(switch, on.clone())?, "mid".into());
    let let_ = bson!({"$let": {"vars": {"total": {"$add": ["$qty", 10]}}, "in": {"$multiply": ["$$total", 2]}}});
    assert_eq!(eval(let_, on.clone())?, Bson::Int32(520));
    assert_eq!(eval(bson!("$$ROOT.item"), on.clone())?, "abc1".into());
    assert_eq!(eval(bson!("$$NOW"), on)?, Bson::DateTime(DateTime::from_millis(0)));
    assert_eq!(code(bson!({"$switch": {"branches": []}})), 40066);
    assert_eq!(code(bson!("$$undefinedVar")), 17276);
    Ok(())
}

#[test]
fn strings() -> Result<(), ExprError> {
    let on = doc! {"item": "ABC1", "desc": "product 1", "city": "Bakersfield, California, CA"};
    assert_eq!(
        eval(bson!({"$concat": ["$item", " - ", "$desc"]}), on.clone())?,
        "ABC1 - product 1".into()
    );
    assert_eq!(eval(bson!({"$concat": ["$item", "$missing"]}), on.clone())?, Bson::Null);
    assert_eq!(eval(bson!({"$toLower": "$item"}), on.clone())?, "abc1".into());
    assert_eq!(eval(bson!({"$substrCP": ["寿司と天ぷら", 3, 3]}), on.clone())?, "天ぷら".into());
    assert_eq!(eval(bson!({"$substrBytes": ["$item", 0, 2]}), on.clone())?, "AB".into());
    assert_eq!(eval(bson!({"$strLenCP": "寿司"}), on.clone())?, Bson::Int32(2));
    assert_eq!(eval(bson!({"$strLenBytes": "寿司"}), on.clone())?, Bson::Int32(6));
    assert_eq!(eval(bson!({"$indexOfCP": ["cafétéria", "é"]}), on.clone())?, Bson::Int32(3));
    assert_eq!(eval(bson!({"$indexOfCP": ["$item", "X"]}), on.clone())?, Bson::Int32(-1));
    assert_eq!(
        eval(bson!({"$split": ["$city", ", "]}), on.clone())?,
        bson!(["Bakersfield", "California", "CA"])
    );
    assert_eq!(eval(bson!({"$trim": {"input": "  x  "}}), on.clone())?, "x".into());
    assert_eq!(
        eval(bson!({"$ltrim": {"input": "xxaxx", "chars": "x"}}), on.clone())?,
        "axx".into()
    );
    assert_eq!(
        eval(
            bson!({"$replaceAll": {"input": "a.b.c", "find": ".", "replacement": "/"}}),
            on.clone()
        )?,
        "a/b/c".into()
    );
    assert_eq!(
        eval(
            bson!({"$regexMatch": {"input": "$desc", "regex": "^PRO", "options": "i"}}),
            on.clone()
        )?,
        true.into()
    );
    assert_eq!(
        eval(bson!({"$regexFind": {"input": "$desc", "regex": "(\\d)"}}), on)?,
        bson!({"match": "1", "idx": 8, "captures": ["1"]})
    );
    assert_eq!(code(bson!({"$split": [1, ","]})), 40085);
    assert_eq!(code(bson!({"$concat": [1]})), 16702);
    Ok(())
}

#[test]
fn arrays() -> Result<(), ExprError> {
    let on = doc! {"items": [1, 2, 3, 4], "names": ["b", "a"], "scores": [{"s": 5}, {"s": 9}]};
    assert_eq!(eval(bson!({"$size": "$items"}), on.clone())?, Bson::Int32(4));
    assert_eq!(eval(bson!({"$arrayElemAt": ["$items", -1]}), on.clone())?, Bson::Int32(4));
    assert_eq!(eval(bson!({"$slice": ["$items", 1, 2]}), on.clone())?, bson!([2, 3]));
    assert_eq!(eval(bson!({"$slice": ["$items", -2]}), on.clone())?, bson!([3, 4]));
    let filter = bson!({"$filter": {"input": "$items", "as": "n", "cond": {"$gte": ["$$n", 3]}}});
    assert_eq!(eval(filter, on.clone())?, bson!([3, 4]));
    let map = bson!({"$map": {"input": "$items", "in": {"$multiply": ["$$this", 2]}}});
    assert_eq!(eval(map, on.clone())?, bson!([2, 4, 6, 8]));
    let reduce = bson!({"$reduce": {"input": "$items", "initialValue": 0, "in": {"$add": ["$$value", "$$this"]}}});
    assert_eq!(eval(reduce, on.clone())?, Bson::Int32(10));
    assert_eq!(eval(bson!({"$in": [2, "$items"]}), on.clone())?, true.into());
    assert_eq!(
        eval(bson!({"$concatArrays": ["$items", "$names"]}), on.clone())?,
        bson!([1, 2, 3, 4, "b", "a"])
    );
    assert_eq!(
        eval(bson!({"$sortArray": {"input": "$names", "sortBy": 1}}), on.clone())?,
        bson!(["a", "b"])
    );
    assert_eq!(
        eval(bson!({"$sortArray": {"input": "$scores", "sortBy": {"s": -1}}}), on.clone())?,
        bson!([{"s": 9}, {"s": 5}])
    );
    assert_eq!(eval(bson!({"$first": "$items"}), on.clone())?, Bson::Int32(1));
    assert_eq!(eval(bson!({"$last": "$names"}), on.clone())?, "a".into());
    assert_eq!(eval(bson!({"$range": [0, 10, 3]}), on.clone())?, bson!([0, 3, 6, 9]));
    assert_eq!(eval(bson!({"$reverseArray": "$names"}), on.clone())?, bson!(["a", "b"]));
    assert_eq!(
        eval(bson!({"$zip": {"inputs": ["$items", "$names"]}}), on.clone())?,
        bson!([[1, "b"], [2, "a"]])
    );
    assert_eq!(eval(bson!({"$indexOfArray": ["$names", "a"]}), on.clone())?, Bson::Int32(1));
    assert_eq!(eval(bson!("$scores.s"), on.clone())?, bson!([5, 9]));
    assert_eq!(eval(bson!({"$sum": "$items"}), on.clone())?, Bson::Int32(10));
    assert_eq!(eval(bson!({"$avg": "$scores.s"}), on.clone())?, Bson::Double(7.0));
    assert_eq!(eval(bson!({"$maxN": {"input": "$items", "n": 2}}), on)?, bson!([4, 3]));
    assert_eq!(code(bson!({"$size": "x"})), 17124);
    assert_eq!(code(bson!({"$arrayElemAt": ["x", 0]})), 28689);
    Ok(())
}

#[test]
fn dates_types_and_objects() -> Result<(), ExprError> {
    // 2014-01-01T08:15:39.736Z, MongoDB's date operator example.
    let on = doc! {"date": DateTime::from_millis(1_388_564_139_736), "n": "42", "o": {"a": 1}};
    assert_eq!(eval(bson!({"$year": "$date"}), on.clone())?, Bson::Int32(2014));
    assert_eq!(eval(bson!({"$dayOfYear": "$date"}), on.clone())?, Bson::Int32(1));
    assert_eq!(eval(bson!({"$hour": "$date"}), on.clone())?, Bson::Int32(8));
    assert_eq!(eval(bson!({"$dayOfWeek": "$date"}), on.clone())?, Bson::Int32(4));
    assert_eq!(eval(bson!({"$week": "$date"}), on.clone())?, Bson::Int32(0));
    assert_eq!(
        eval(bson!({"$hour": {"date": "$date", "timezone": "+09:00"}}), on.clone())?,
        Bson::Int32(17)
    );
    assert_eq!(
        eval(
            bson!({"$dateToString": {"format": "%Y-%m-%d %H:%M:%S.%L", "date": "$date"}}),
            on.clone()
        )?,
        "2014-01-01 08:15:39.736".into()
    );
    assert_eq!(
        eval(bson!({"$dateTrunc": {"date": "$date", "unit": "hour"}}), on.clone())?,
        Bson::DateTime(DateTime::from_millis(1_388_563_200_000))
    );
    assert_eq!(
        eval(
            bson!({"$dateAdd": {"startDate": "$date", "unit": "month", "amount": 1}}),
            on.clone()
        )?,
        Bson::DateTime(DateTime::from_millis(1_388_564_139_736 + 31 * 86_400_000))
    );
    let diff = bson!({"$dateDiff": {"startDate": "$date", "endDate": {"$dateFromString": {"dateString": "2014-03-01"}}, "unit": "month"}});
    assert_eq!(eval(diff, on.clone())?, Bson::Int64(2));
    assert_eq!(eval(bson!({"$type": "$n"}), on.clone())?, "string".into());
    assert_eq!(eval(bson!({"$type": "$missing"}), on.clone())?, "missing".into());
    assert_eq!(eval(bson!({"$toInt": "$n"}), on.clone())?, Bson::Int32(42));
    assert_eq!(eval(bson!({"$toDouble": true}), on.clone())?, Bson::Double(1.0));
    assert_eq!(eval(bson!({"$toString": 2.5}), on.clone())?, "2.5".into());
    assert_eq!(
        eval(bson!({"$convert": {"input": "x", "to": "int", "onError": -1}}), on.clone())?,
        Bson::Int32(-1)
    );
    assert_eq!(eval(bson!({"$isNumber": "$n"}), on.clone())?, false.into());
    assert_eq!(
        eval(bson!({"$mergeObjects": ["$o", {"b": 2}]}), on.clone())?,
        bson!({"a": 1, "b": 2})
    );
    assert_eq!(eval(bson!({"$objectToArray": "$o"}), on.clone())?, bson!([{"k": "a", "v": 1}]));
    assert_eq!(eval(bson!({"$arrayToObject": [[["x", 1]]]}), on.clone())?, bson!({"x": 1}));
    assert_eq!(eval(bson!({"$getField": "n"}), on.clone())?, "42".into());
    assert_eq!(
        eval(bson!({"$setField": {"field": "c", "input": "$o", "value": 3}}), on.clone())?,
        bson!({"a": 1, "c": 3})
    );
    assert_eq!(eval(bson!({"$literal": "$notAPath"}), on)?, "$notAPath".into());
    assert_eq!(eval(bson!({"$toInt": "x"}), doc! {}).err().map(|e| e.code), Some(241));
    Ok(())
}

fn date(iso: &str) -> Bson {
    Bson::DateTime(DateTime::parse_rfc3339_str(iso).unwrap_or(DateTime::from_millis(0)))
}

#[test]
fn olson_time_zones_follow_daylight_saving_time() -> Result<(), ExprError> {
    // MongoDB's documented `$dateToParts`, `$dateToString` and `$dateFromParts` examples.
    let on = doc! {"date": date("2017-01-01T01:29:09.123Z")};
    let parts =
        eval(bson!({"$dateToParts": {"date": "$date", "timezone": "America/New_York"}}), on)?;
    assert_eq!(
        parts,
        bson!({"year": 2016, "month": 12, "day": 31, "hour": 20, "minute": 29, "second": 9, "millisecond": 123})
    );
    let on = doc! {"date": date("2014-01-01T08:15:39.736Z")};
    let ny = |format: &str| bson!({"$dateToString": {"format": format, "date": "$date", "timezone": "America/New_York"}});
    assert_eq!(eval(ny("%H:%M:%S:%L%z"), on.clone())?, "03:15:39:736-0500".into());
    assert_eq!(eval(ny("%Z"), on)?, "-300".into());
    let from = bson!({"$dateFromParts": {"year": 2017, "month": 2, "day": 8, "hour": 12, "timezone": "America/New_York"}});
    assert_eq!(eval(from, doc! {})?, date("2017-02-08T17:00:00Z"));
    // Summer time in New York, none in Tokyo.
    let hour = |d: &str, tz: &str| bson!({"$hour": {"date": date(d), "timezone": tz}});
    assert_eq!(eval(hour("2014-07-01T08:15:39Z", "America/New_York"), doc! {})?, Bson::Int32(4));
    assert_eq!(eval(hour("2024-01-01T00:00:00Z", "Asia/Tokyo"), doc! {})?, Bson::Int32(9));
    // A day is 23 hours across the March change: the local time of day stays.
    let add = |unit: &str, n: i32| bson!({"$dateAdd": {"startDate": date("2021-03-13T12:00:00Z"), "unit": unit, "amount": n, "timezone": "America/New_York"}});
    assert_eq!(eval(add("day", 1), doc! {})?, date("2021-03-14T11:00:00Z"));
    assert_eq!(eval(add("hour", 24), doc! {})?, date("2021-03-14T12:00:00Z"));
    let trunc = bson!({"$dateTrunc": {"date": date("2021-03-14T15:00:00Z"), "unit": "day", "timezone": "America/New_York"}});
    assert_eq!(eval(trunc, doc! {})?, date("2021-03-14T05:00:00Z"));
    assert_eq!(code(hour("2024-01-01T00:00:00Z", "Mars/Olympus_Mons")), 40485);
    Ok(())
}

#[test]
fn decimal_arithmetic_stays_decimal() -> Result<(), ExprError> {
    let dec = |s: &str| s.parse::<bson::Decimal128>().map(Bson::Decimal128).unwrap_or(Bson::Null);
    let on = doc! {"a": dec("0.1"), "b": dec("0.2"), "p": dec("1.10"), "q": dec("2.20")};
    assert_eq!(eval(bson!({"$add": ["$a", "$b"]}), on.clone())?, dec("0.3"));
    assert_eq!(eval(bson!({"$add": ["$p", "$q"]}), on.clone())?, dec("3.30"));
    assert_eq!(eval(bson!({"$add": ["$a", 1]}), on.clone())?, dec("1.1"));
    assert_eq!(eval(bson!({"$subtract": [dec("10"), dec("0.01")]}), on.clone())?, dec("9.99"));
    assert_eq!(eval(bson!({"$multiply": [dec("1.5"), 2]}), on.clone())?, dec("3.0"));
    assert_eq!(
        eval(bson!({"$divide": [dec("1"), 3]}), on.clone())?,
        dec("0.3333333333333333333333333333333333")
    );
    assert_eq!(eval(bson!({"$divide": [dec("10"), 4]}), on.clone())?, dec("2.5"));
    assert_eq!(eval(bson!({"$sum": [["$a", "$a", "$a"]]}), on.clone())?, dec("0.3"));
    assert_eq!(eval(bson!({"$avg": [[dec("1"), dec("2")]]}), on.clone())?, dec("1.5"));
    // A double enters as MongoDB converts it: 15 significant digits.
    assert_eq!(eval(bson!({"$avg": [[0.1, "$a"]]}), on)?, dec("0.100000000000000"));
    assert_eq!(eval(bson!({"$add": [dec("1"), 0.1]}), doc! {})?, dec("1.100000000000000"));
    // MongoDB's documented $toDecimal examples.
    assert_eq!(eval(bson!({"$toDecimal": 2.5}), doc! {})?, dec("2.50000000000000"));
    assert_eq!(eval(bson!({"$toDecimal": 5}), doc! {})?, dec("5"));
    assert_eq!(eval(bson!({"$toDecimal": true}), doc! {})?, dec("1"));
    assert_eq!(eval(bson!({"$toDecimal": "-5.5"}), doc! {})?, dec("-5.5"));
    let date = bson::DateTime::from_millis(1_522_039_108_044);
    assert_eq!(eval(bson!({"$toDecimal": date}), doc! {})?, dec("1522039108044"));
    assert_eq!(code(bson!({"$divide": [dec("1"), dec("0")]})), 16608);
    Ok(())
}

#[test]
fn rand_is_a_double_in_the_unit_interval() -> Result<(), ExprError> {
    for _ in 0..100 {
        match eval(bson!({"$rand": {}}), Document::new())? {
            Bson::Double(x) => assert!((0.0..1.0).contains(&x), "{x}"),
            other => panic!("not a double: {other}"),
        }
    }
    assert!(Expr::parse(&bson!({"$rand": {"seed": 1}})).is_err());
    Ok(())
}

/// MongoDB's manual, `$bitAnd`/`$bitOr`/`$bitXor`/`$bitNot`: the `switches` collection
/// (`a`, `b` as ints; `$bitAnd` of ints is an int, with a long a long).
#[test]
fn bitwise_operators_on_the_manuals_switches() -> Result<(), ExprError> {
    let switches = [(0, 127), (2, 3), (3, 5)];
    let of = |op: &str| -> Result<Vec<Bson>, ExprError> {
        let e = bson!({ op: ["$a", "$b"] });
        switches.iter().map(|(a, b)| eval(e.clone(), doc! {"a": a, "b": b})).collect()
    };
    assert_eq!(of("$bitAnd")?, [0, 2, 1].map(Bson::Int32));
    assert_eq!(of("$bitOr")?, [127, 3, 7].map(Bson::Int32));
    assert_eq!(of("$bitXor")?, [127, 1, 6].map(Bson::Int32));
    let not: Vec<Bson> = switches
        .iter()
        .map(|(a, _)| eval(bson!({"$bitNot": "$a"}), doc! {"a": a}))
        .collect::<Result<_, _>>()?;
    assert_eq!(not, [-1, -3, -4].map(Bson::Int32));
    assert_eq!(eval(bson!({"$bitAnd": [3_i64, 5]}), doc! {})?, Bson::Int64(1));
    assert_eq!(eval(bson!({"$bitNot": 0_i64}), doc! {})?, Bson::Int64(-1));
    assert_eq!(eval(bson!({"$bitOr": [1, "$missing"]}), doc! {})?, Bson::Null);
    assert_eq!(eval(bson!({"$bitAnd": []}), doc! {})?, Bson::Int32(-1));
    assert_eq!(code(bson!({"$bitAnd": [1, 1.5]})), 14);
    assert_eq!(code(bson!({"$bitNot": 1.5})), 14);
    assert_eq!(code(bson!({"$bitNot": "a"})), 28765);
    Ok(())
}

/// Trigonometry: doubles out (Decimal128 for a Decimal128), null for null, MongoDB's
/// domain errors (50989) with its text.
#[test]
fn trigonometry_keeps_types_and_domains() -> Result<(), ExprError> {
    let pi = std::f64::consts::PI;
    assert_eq!(eval(bson!({"$sin": 0}), doc! {})?, Bson::Double(0.0));
    assert_eq!(eval(bson!({"$cos": 0}), doc! {})?, Bson::Double(1.0));
    assert_eq!(eval(bson!({"$degreesToRadians": 180}), doc! {})?, Bson::Double(pi));
    assert_eq!(eval(bson!({"$radiansToDegrees": pi}), doc! {})?, Bson::Double(180.0));
    assert_eq!(eval(bson!({"$atan2": [1, 1]}), doc! {})?, Bson::Double(pi / 4.0));
    assert_eq!(eval(bson!({"$acosh": 1}), doc! {})?, Bson::Double(0.0));
    assert_eq!(eval(bson!({"$atanh": 1}), doc! {})?, Bson::Double(f64::INFINITY));
    assert_eq!(eval(bson!({"$tanh": "$missing"}), doc! {})?, Bson::Null);
    let dec = "0".parse::<bson::Decimal128>().map(Bson::Decimal128).unwrap_or(Bson::Null);
    assert!(matches!(eval(bson!({"$sinh": dec}), doc! {})?, Bson::Decimal128(_)));
    let err = eval(bson!({"$acos": 2}), doc! {}).err();
    assert_eq!(
        err.map(|e| (e.code, e.message)),
        Some((50989, "cannot apply $acos to 2, value must be in [-1,1]".to_string()))
    );
    let err = eval(bson!({"$sin": f64::INFINITY}), doc! {}).err();
    assert_eq!(
        err.map(|e| e.message),
        Some("cannot apply $sin to inf, value must be in (-inf,inf)".to_string())
    );
    assert_eq!(code(bson!({"$sin": "a"})), 28765);
    assert_eq!(code(bson!({"$atan2": [1, "a"]})), 51044);
    Ok(())
}
