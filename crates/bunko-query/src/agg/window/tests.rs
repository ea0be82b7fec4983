//! `$setWindowFields` on the MongoDB manual's examples (`cakeSales`, `deliveryFleet`,
//! `powerConsumption`, `stockPrices`), the numbers worked out by hand, and its
//! specification errors with MongoDB's codes.

use bson::{Bson, DateTime, Document, bson, doc};

use crate::agg::tests::{Mem, run};
use crate::expr::Result;

fn date(s: &str) -> Bson {
    Bson::DateTime(DateTime::parse_rfc3339_str(s).expect("a date"))
}

fn cake_sales() -> Vec<Document> {
    vec![
        doc! {"_id": 0, "type": "chocolate", "orderDate": date("2020-05-18T14:10:30Z"), "state": "CA", "price": 13, "quantity": 120},
        doc! {"_id": 1, "type": "chocolate", "orderDate": date("2021-03-20T11:30:05Z"), "state": "WA", "price": 14, "quantity": 140},
        doc! {"_id": 2, "type": "vanilla", "orderDate": date("2021-01-11T06:31:15Z"), "state": "CA", "price": 12, "quantity": 145},
        doc! {"_id": 3, "type": "vanilla", "orderDate": date("2020-02-08T13:13:23Z"), "state": "WA", "price": 13, "quantity": 104},
        doc! {"_id": 4, "type": "strawberry", "orderDate": date("2019-05-18T16:09:01Z"), "state": "CA", "price": 41, "quantity": 162},
        doc! {"_id": 5, "type": "strawberry", "orderDate": date("2019-01-08T06:12:03Z"), "state": "WA", "price": 43, "quantity": 134},
    ]
}

/// Runs `stage` over `docs`, then keeps `_id` and `field` of each output document.
fn column(docs: Vec<Document>, stage: Bson, field: &str) -> Result<Vec<(i32, Bson)>> {
    let out = run(&Mem::default(), docs, bson!([stage]))?;
    Ok(out
        .iter()
        .map(|d| (d.get_i32("_id").unwrap_or(-1), d.get(field).cloned().unwrap_or(Bson::Null)))
        .collect())
}

fn ints(pairs: &[(i32, i32)]) -> Vec<(i32, Bson)> {
    pairs.iter().map(|(id, v)| (*id, Bson::Int32(*v))).collect()
}

/// The numbers of a column, with their `_id`s (for comparisons within rounding).
fn numbers(col: &[(i32, Bson)]) -> Vec<(i32, Option<f64>)> {
    col.iter().map(|(id, v)| (*id, crate::expr::value::to_f64(v))).collect()
}

fn close(got: &[(i32, Option<f64>)], want: &[(i32, Option<f64>)]) -> bool {
    got.len() == want.len()
        && got.iter().zip(want).all(|((a, x), (b, y))| {
            a == b
                && match (x, y) {
                    (Some(x), Some(y)) => (x - y).abs() < 1e-9,
                    (None, None) => true,
                    _ => false,
                }
        })
}

#[test]
fn cumulative_quantity_for_state_runs_by_partition_in_sort_order() -> Result<()> {
    let stage = bson!({"$setWindowFields": {
        "partitionBy": "$state", "sortBy": {"orderDate": 1},
        "output": {"cumulativeQuantityForState": {
            "$sum": "$quantity", "window": {"documents": ["unbounded", "current"]}}}}});
    let got = column(cake_sales(), stage, "cumulativeQuantityForState")?;
    assert_eq!(got, ints(&[(4, 162), (0, 282), (2, 427), (5, 134), (3, 238), (1, 378)]));
    Ok(())
}

#[test]
fn moving_average_and_whole_year_totals_by_year() -> Result<()> {
    let stage = bson!({"$setWindowFields": {
    "partitionBy": {"$year": "$orderDate"}, "sortBy": {"orderDate": 1},
    "output": {
        "averageQuantity": {"$avg": "$quantity", "window": {"documents": [-1, 0]}},
        "total": {"$sum": "$quantity"},
        "max": {"$max": "$quantity", "window": {"documents": ["unbounded", "unbounded"]}},
    }}});
    let out = run(&Mem::default(), cake_sales(), bson!([stage]))?;
    let rows: Vec<(i32, Bson, Bson, Bson)> = out
        .iter()
        .map(|d| {
            let get = |k: &str| d.get(k).cloned().unwrap_or(Bson::Null);
            (d.get_i32("_id").unwrap_or(-1), get("averageQuantity"), get("total"), get("max"))
        })
        .collect();
    let row =
        |id, avg: f64, total, max| (id, Bson::Double(avg), Bson::Int32(total), Bson::Int32(max));
    assert_eq!(
        rows,
        vec![
            row(5, 134.0, 296, 162),
            row(4, 148.0, 296, 162),
            row(3, 104.0, 224, 120),
            row(0, 112.0, 224, 120),
            row(2, 145.0, 285, 145),
            row(1, 142.5, 285, 145),
        ]
    );
    Ok(())
}

#[test]
fn range_windows_by_price_and_by_months() -> Result<()> {
    let similar = bson!({"$setWindowFields": {
        "partitionBy": "$state", "sortBy": {"price": 1},
        "output": {"q": {"$sum": "$quantity", "window": {"range": [-10, 10]}}}}});
    let got = column(cake_sales(), similar, "q")?;
    assert_eq!(got, ints(&[(2, 265), (0, 265), (4, 162), (3, 244), (1, 244), (5, 134)]));

    let recent = |hi: i32| {
        bson!({"$setWindowFields": {
            "partitionBy": "$state", "sortBy": {"orderDate": 1},
            "output": {"recent": {"$push": "$orderDate",
                "window": {"range": ["unbounded", hi], "unit": "month"}}}}})
    };
    let dates = |ds: &[&str]| Bson::Array(ds.iter().map(|d| date(d)).collect());
    let (ca4, ca0, ca2) = ("2019-05-18T16:09:01Z", "2020-05-18T14:10:30Z", "2021-01-11T06:31:15Z");
    let (wa5, wa3, wa1) = ("2019-01-08T06:12:03Z", "2020-02-08T13:13:23Z", "2021-03-20T11:30:05Z");
    assert_eq!(
        column(cake_sales(), recent(10), "recent")?,
        vec![
            (4, dates(&[ca4])),
            (0, dates(&[ca4, ca0, ca2])),
            (2, dates(&[ca4, ca0, ca2])),
            (5, dates(&[wa5])),
            (3, dates(&[wa5, wa3])),
            (1, dates(&[wa5, wa3, wa1])),
        ]
    );
    assert_eq!(
        column(cake_sales(), recent(-10), "recent")?,
        vec![
            (4, dates(&[])),
            (0, dates(&[ca4])),
            (2, dates(&[ca4])),
            (5, dates(&[])),
            (3, dates(&[wa5])),
            (1, dates(&[wa5, wa3])),
        ]
    );
    Ok(())
}

#[test]
fn ranks_and_shift() -> Result<()> {
    let docs: Vec<Document> =
        [1, 2, 2, 3].iter().enumerate().map(|(i, x)| doc! {"_id": i as i32, "x": *x}).collect();
    for (op, want) in
        [("$rank", [1, 2, 2, 4]), ("$denseRank", [1, 2, 2, 3]), ("$documentNumber", [1, 2, 3, 4])]
    {
        let stage = bson!({"$setWindowFields": {"sortBy": {"x": 1}, "output": {"r": {op: {}}}}});
        let got = column(docs.clone(), stage, "r")?;
        let want: Vec<(i32, i32)> = want.iter().enumerate().map(|(i, r)| (i as i32, *r)).collect();
        assert_eq!(got, ints(&want), "{op}");
    }
    let shift = bson!({"$setWindowFields": {
        "partitionBy": "$state", "sortBy": {"quantity": -1},
        "output": {"next": {"$shift": {"output": "$quantity", "by": 1, "default": "Not available"}}}}});
    let na = Bson::String("Not available".into());
    assert_eq!(
        column(cake_sales(), shift, "next")?,
        vec![
            (4, Bson::Int32(145)),
            (2, Bson::Int32(120)),
            (0, na.clone()),
            (1, Bson::Int32(134)),
            (5, Bson::Int32(104)),
            (3, na),
        ]
    );
    Ok(())
}

#[test]
fn derivative_and_integral_over_time_ranges() -> Result<()> {
    let readings = |name: &str, rows: &[(&str, &str, f64)]| -> Vec<Document> {
        rows.iter()
            .enumerate()
            .map(|(i, (id, t, v))| doc! {"_id": i as i32, "m": *id, "t": date(t), name: *v})
            .collect()
    };
    let fleet = readings(
        "miles",
        &[
            ("1", "2020-05-18T14:10:30Z", 1295.1),
            ("1", "2020-05-18T14:11:00Z", 1295.63),
            ("1", "2020-05-18T14:11:30Z", 1296.18),
            ("1", "2020-05-18T14:12:00Z", 1296.71),
            ("2", "2020-05-18T14:10:30Z", 10234.12),
            ("2", "2020-05-18T14:11:00Z", 10234.33),
            ("2", "2020-05-18T14:11:30Z", 10234.73),
            ("2", "2020-05-18T14:12:00Z", 10235.13),
        ],
    );
    let speed = bson!({"$setWindowFields": {"partitionBy": "$m", "sortBy": {"t": 1}, "output": {
        "speed": {"$derivative": {"input": "$miles", "unit": "hour"},
                  "window": {"range": [-30, 0], "unit": "second"}}}}});
    let got = numbers(&column(fleet, speed, "speed")?);
    let want = [None, Some(63.6), Some(66.0), Some(63.6), None, Some(25.2), Some(48.0), Some(48.0)];
    let want: Vec<(i32, Option<f64>)> =
        want.into_iter().enumerate().map(|(i, v)| (i as i32, v)).collect();
    assert!(close(&got, &want), "{got:?}");

    let power = readings(
        "kw",
        &[
            ("1", "2020-05-18T14:10:30Z", 2.95),
            ("1", "2020-05-18T14:11:00Z", 2.7),
            ("1", "2020-05-18T14:11:30Z", 2.6),
            ("1", "2020-05-18T14:12:00Z", 2.98),
            ("2", "2020-05-18T14:10:30Z", 2.5),
            ("2", "2020-05-18T14:11:00Z", 2.25),
            ("2", "2020-05-18T14:11:30Z", 2.75),
            ("2", "2020-05-18T14:12:00Z", 2.82),
        ],
    );
    let kwh = bson!({"$setWindowFields": {"partitionBy": "$m", "sortBy": {"t": 1}, "output": {
        "kwh": {"$integral": {"input": "$kw", "unit": "hour"},
                "window": {"range": ["unbounded", "current"], "unit": "hour"}}}}});
    let got = numbers(&column(power, kwh, "kwh")?);
    // Each 30-second step adds the mean of its ends / 120 kilowatt-hours.
    let steps = |ys: [f64; 4]| {
        let mut total = 0.0;
        let mut out = vec![0.0];
        for w in ys.windows(2) {
            total += (w[0] + w[1]) / 2.0 / 120.0;
            out.push(total);
        }
        out
    };
    let want: Vec<(i32, Option<f64>)> = steps([2.95, 2.7, 2.6, 2.98])
        .into_iter()
        .chain(steps([2.5, 2.25, 2.75, 2.82]))
        .enumerate()
        .map(|(i, v)| (i as i32, Some(v)))
        .collect();
    assert!(close(&got, &want), "{got:?}");
    assert!((want[3].1.unwrap_or(0.0) - 0.068875).abs() < 1e-12);
    Ok(())
}

#[test]
fn exp_moving_avg_covariance_locf_and_linear_fill() -> Result<()> {
    let prices: Vec<Document> = [("ABC", 13.0), ("ABC", 15.4), ("ABC", 12.0), ("ABC", 11.7)]
        .iter()
        .enumerate()
        .map(|(i, (s, p))| doc! {"_id": i as i32, "stock": *s, "day": i as i32, "price": *p})
        .collect();
    let ema = bson!({"$setWindowFields": {"partitionBy": "$stock", "sortBy": {"day": 1},
        "output": {"ema": {"$expMovingAvg": {"input": "$price", "N": 2}}}}});
    let got = numbers(&column(prices, ema, "ema")?);
    let want = [13.0, 14.6, 12.866666666666667, 12.088888888888889];
    let want: Vec<_> = want.into_iter().enumerate().map(|(i, v)| (i as i32, Some(v))).collect();
    assert!(close(&got, &want), "{got:?}");

    let cov = bson!({"$setWindowFields": {"partitionBy": "$state", "sortBy": {"orderDate": 1},
        "output": {"c": {"$covariancePop": [{"$year": "$orderDate"}, "$quantity"],
                         "window": {"documents": ["unbounded", "current"]}}}}});
    let got = numbers(&column(cake_sales(), cov, "c")?);
    // CA: (2019, 162), (2020, 120), (2021, 145); WA: (2019, 134), (2020, 104), (2021, 140).
    let want = [(4, 0.0), (0, -10.5), (2, -17.0 / 3.0), (5, 0.0), (3, -7.5), (1, 2.0)];
    let want: Vec<_> = want.into_iter().map(|(i, v)| (i, Some(v))).collect();
    assert!(close(&got, &want), "{got:?}");

    let gaps: Vec<Document> = [Some(10), None, None, Some(40), None]
        .iter()
        .enumerate()
        .map(|(i, y)| match y {
            Some(y) => doc! {"_id": i as i32, "x": i as i32 + 1, "y": *y},
            None => doc! {"_id": i as i32, "x": i as i32 + 1, "y": Bson::Null},
        })
        .collect();
    let fill = bson!({"$setWindowFields": {"sortBy": {"x": 1}, "output": {
        "locf": {"$locf": "$y"}, "linear": {"$linearFill": "$y"}}}});
    let out = run(&Mem::default(), gaps, bson!([fill]))?;
    let get = |k: &str| out.iter().map(|d| d.get(k).cloned()).collect::<Vec<_>>();
    let i = |v: i32| Some(Bson::Int32(v));
    assert_eq!(get("locf"), vec![i(10), i(10), i(10), i(40), i(40)]);
    let d = |v: f64| Some(Bson::Double(v));
    assert_eq!(get("linear"), vec![i(10), d(20.0), d(30.0), i(40), Some(Bson::Null)]);
    Ok(())
}

#[test]
fn no_partition_or_sort_keeps_the_input_order() -> Result<()> {
    let stage = bson!({"$setWindowFields": {"output": {
        "n": {"$count": {}}, "all": {"$push": "$_id"}, "first": {"$first": "$_id"}}}});
    let out = run(&Mem::default(), cake_sales(), bson!([stage]))?;
    let ids: Vec<i32> = out.iter().filter_map(|d| d.get_i32("_id").ok()).collect();
    assert_eq!(ids, vec![0, 1, 2, 3, 4, 5]);
    assert!(out.iter().all(|d| d.get("n") == Some(&Bson::Int32(6))
        && d.get("first") == Some(&Bson::Int32(0))
        && d.get_array("all").is_ok_and(|a| a.len() == 6)));
    // `$shift` and `$last` of a missing field leave the output out (and an existing one
    // removed); `$shift` past the partition is its default, null.
    let docs = vec![doc! {"_id": 1, "x": 1, "s": 0}, doc! {"_id": 2, "s": 0}];
    let stage = bson!({"$setWindowFields": {"sortBy": {"_id": 1}, "output": {
        "s": {"$shift": {"output": "$x", "by": 1}},
        "l": {"$last": "$x", "window": {"documents": ["current", "current"]}}}}});
    assert_eq!(
        run(&Mem::default(), docs, bson!([stage]))?,
        vec![doc! {"_id": 1, "x": 1, "l": 1}, doc! {"_id": 2, "s": Bson::Null}]
    );
    // Missing partition values are null's partition; a dotted output sets a sub-document.
    let docs = vec![doc! {"_id": 1, "g": Bson::Null}, doc! {"_id": 2}, doc! {"_id": 3, "g": 1}];
    let stage = bson!({"$setWindowFields": {"partitionBy": "$g",
        "output": {"s.n": {"$sum": 1}}}});
    let out = run(&Mem::default(), docs, bson!([stage]))?;
    assert_eq!(
        out,
        vec![
            doc! {"_id": 1, "g": Bson::Null, "s": {"n": 2}},
            doc! {"_id": 2, "s": {"n": 2}},
            doc! {"_id": 3, "g": 1, "s": {"n": 1}},
        ]
    );
    Ok(())
}

/// The code of the error `stage` fails with over `docs`.
fn code(docs: Vec<Document>, stage: Bson) -> Option<i32> {
    run(&Mem::default(), docs, bson!([{"$setWindowFields": stage}])).err().map(|e| e.code)
}

#[test]
fn specification_errors_carry_mongodb_codes() {
    let d = || vec![doc! {"_id": 1, "x": 1, "a": [1, 2], "t": date("2020-01-01T00:00:00Z")}];
    let sum =
        |window: Bson| bson!({"sortBy": {"x": 1}, "output": {"s": {"$sum": 1, "window": window}}});
    let cases: Vec<(Bson, i32)> = vec![
        (bson!("x"), 9),
        (bson!({"output": {}, "what": 1}), 40415),
        (bson!({"sortBy": {"x": 1}}), 40414),
        (bson!({"sortBy": "x", "output": {}}), 14),
        (bson!({"partitionBy": [1], "output": {}}), 14),
        (bson!({"partitionBy": ["$x"], "output": {}}), 14),
        (bson!({"partitionBy": "$a", "output": {"s": {"$sum": 1}}}), 14),
        (bson!({"output": {"s": 1}}), 9),
        (bson!({"output": {"s": {"x": 1}}}), 9),
        (bson!({"output": {"s": {"$summ": 1}}}), 9),
        (bson!({"output": {"s": {"$sum": 1, "$max": 1}}}), 9),
        (bson!({"output": {"s": {"$sum": 1, "frame": 1}}}), 9),
        (bson!({"output": {"a": {"$sum": 1}, "a.b": {"$sum": 1}}}), 6307900),
        (bson!({"output": {"$a": {"$sum": 1}}}), 16410),
        (bson!({"output": {"a..b": {"$sum": 1}}}), 15998),
        (bson!({"output": {"r": {"$rank": {}}}}), 5371602),
        (bson!({"sortBy": {"x": 1, "t": 1}, "output": {"r": {"$rank": {}}}}), 5371602),
        (bson!({"sortBy": {"x": 1}, "output": {"r": {"$rank": 1}}}), 5371603),
        (bson!({"sortBy": {"x": 1}, "output": {"r": {"$rank": {}, "window": {}}}}), 5371601),
        (bson!({"output": {"s": {"$sum": 1, "window": {"documents": [-1, 0]}}}}), 5339901),
        (bson!({"output": {"s": {"$sum": 1, "window": {"range": [-1, 0]}}}}), 5339902),
        (
            bson!({"sortBy": {"x": -1}, "output": {"s": {"$sum": 1, "window": {"range": [-1, 0]}}}}),
            8947401,
        ),
        (sum(bson!({"documents": [1, 0]})), 5339900),
        (sum(bson!({"documents": [0.5, 1]})), 9),
        (sum(bson!({"documents": ["now", 1]})), 9),
        (sum(bson!({"documents": [0]})), 9),
        (sum(bson!({"documents": [0, 1], "range": [0, 1]})), 9),
        (sum(bson!({"documents": [0, 1], "unit": "day"})), 9),
        (sum(bson!({"range": [0, 1], "unit": "fortnight"})), 9),
        (sum(bson!({"range": [0, 1.5], "unit": "day"})), 9),
        (sum(bson!({"range": ["a", 1]})), 9),
        (sum(bson!("x")), 9),
        (sum(bson!({"range": [0, 1], "unit": "day"})), 5429513),
        (
            bson!({"sortBy": {"t": 1}, "output": {"s": {"$sum": 1, "window": {"range": [0, 1]}}}}),
            5429413,
        ),
        (
            bson!({"sortBy": {"a": 1}, "output": {"s": {"$sum": 1, "window": {"range": [0, 1]}}}}),
            5429414,
        ),
        (bson!({"output": {"s": {"$shift": {"output": "$x", "by": 1}}}}), 9),
        (bson!({"sortBy": {"x": 1}, "output": {"s": {"$shift": {"output": "$x", "by": 1.5}}}}), 9),
        (
            bson!({"sortBy": {"x": 1}, "output": {"s": {"$shift": {"output": "$x", "by": 1, "default": "$x"}}}}),
            9,
        ),
        (bson!({"sortBy": {"x": 1}, "output": {"s": {"$shift": {"output": "$x"}}}}), 9),
        (
            bson!({"sortBy": {"x": 1}, "output": {"s": {"$shift": {"output": "$x", "by": 1}, "window": {}}}}),
            9,
        ),
        (
            bson!({"output": {"s": {"$derivative": {"input": "$x"}, "window": {"documents": [-1, 0]}}}}),
            9,
        ),
        (bson!({"sortBy": {"x": 1}, "output": {"s": {"$derivative": {"input": "$x"}}}}), 9),
        (
            bson!({"sortBy": {"x": 1}, "output": {"s": {"$integral": {"input": "$x", "unit": "month"}}}}),
            5490710,
        ),
        (
            bson!({"sortBy": {"t": 1}, "output": {"s": {"$derivative": {"input": "$x"}, "window": {"documents": [-1, 0]}}}}),
            5624901,
        ),
        (
            bson!({"sortBy": {"x": 1}, "output": {"s": {"$derivative": {"input": "$x", "unit": "day"}, "window": {"documents": [-1, 0]}}}}),
            5624900,
        ),
        (
            bson!({"sortBy": {"x": 1}, "output": {"s": {"$integral": {"input": "$x", "unit": "day"}}}}),
            5423901,
        ),
        (bson!({"sortBy": {"x": 1}, "output": {"s": {"$integral": {"input": "$t"}}}}), 5423900),
        (bson!({"output": {"s": {"$expMovingAvg": {"input": "$x", "N": 2}}}}), 9),
        (
            bson!({"sortBy": {"x": 1}, "output": {"s": {"$expMovingAvg": {"input": "$x", "N": 0}}}}),
            9,
        ),
        (
            bson!({"sortBy": {"x": 1}, "output": {"s": {"$expMovingAvg": {"input": "$x", "alpha": 1}}}}),
            9,
        ),
        (bson!({"sortBy": {"x": 1}, "output": {"s": {"$expMovingAvg": {"input": "$x"}}}}), 9),
        (bson!({"output": {"s": {"$locf": "$x", "window": {}}}}), 9),
        (bson!({"output": {"s": {"$linearFill": "$x"}}}), 605001),
        (bson!({"sortBy": {"x": 1}, "output": {"s": {"$linearFill": "$t"}}}), 14),
    ];
    for (stage, want) in cases {
        assert_eq!(code(d(), stage.clone()), Some(want), "{stage}");
    }
    let twice = vec![doc! {"_id": 1, "x": 1, "y": 1}, doc! {"_id": 2, "x": 1, "y": Bson::Null}];
    let fill = bson!({"sortBy": {"x": 1}, "output": {"s": {"$linearFill": "$y"}}});
    assert_eq!(code(twice, fill), Some(6050106));
}

#[test]
fn a_partition_past_the_budget_is_refused() -> Result<()> {
    let docs: Vec<Document> =
        (0..200).map(|i| doc! {"_id": i, "g": i % 2, "pad": "x".repeat(100)}).collect();
    let stage = |spec: Bson| bson!([{"$setWindowFields": spec}]);
    let whole = bson!({"output": {"n": {"$sum": 1}}});
    let by_g = bson!({"partitionBy": "$g", "sortBy": {"_id": 1}, "output": {"n": {"$sum": 1}}});
    for disk in [false, true] {
        let tight = Mem::limited(Some(10_000), disk);
        let err = run(&tight, docs.clone(), stage(whole.clone())).err();
        assert_eq!(err.as_ref().map(|e| e.code), Some(5414201));
        let message = err.map(|e| e.message).unwrap_or_default();
        assert!(message.ends_with("bytes but max allowed is 10000"), "{message}");
    }
    // Without allowDiskUse the sort before the partitions is refused first, as MongoDB's.
    let err = run(&Mem::limited(Some(10_000), false), docs.clone(), stage(by_g.clone())).err();
    assert_eq!(err.map(|e| e.code), Some(292));
    // Partitions that fit pass, the sort spilling.
    let fits = Mem::limited(Some(15_000), true);
    let out = run(&fits, docs, stage(by_g))?;
    assert_eq!(out.len(), 200);
    assert!(out.iter().all(|d| d.get("n") == Some(&Bson::Int32(100))));
    assert_eq!(out.first().and_then(|d| d.get("g")), Some(&Bson::Int32(0)));
    Ok(())
}

#[test]
fn fill_by_value_linear_and_locf_as_the_manual_shows_them() -> Result<()> {
    let sales = vec![
        doc! {"_id": 1, "bootsSold": 10, "sandalsSold": 20, "sneakersSold": 12},
        doc! {"_id": 2, "bootsSold": 7, "sneakersSold": 18},
        doc! {"_id": 3, "sneakersSold": 5},
    ];
    let zero = bson!([{"$fill": {"output": {
        "bootsSold": {"value": 0}, "sandalsSold": {"value": 0}, "sneakersSold": {"value": 0}}}}]);
    assert_eq!(
        run(&Mem::default(), sales, zero)?,
        vec![
            doc! {"_id": 1, "bootsSold": 10, "sandalsSold": 20, "sneakersSold": 12},
            doc! {"_id": 2, "bootsSold": 7, "sneakersSold": 18, "sandalsSold": 0},
            doc! {"_id": 3, "sneakersSold": 5, "bootsSold": 0, "sandalsSold": 0},
        ]
    );
    let prices: Vec<Document> = [Some(500), None, Some(515), None, None, Some(530)]
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let t = date(&format!("2021-03-08T09:0{i}:00Z"));
            match p {
                Some(p) => doc! {"_id": i as i32, "time": t, "price": *p},
                None => doc! {"_id": i as i32, "time": t},
            }
        })
        .collect();
    let linear =
        bson!({"$fill": {"sortBy": {"time": 1}, "output": {"price": {"method": "linear"}}}});
    let got = numbers(&column(prices.clone(), linear, "price")?);
    let want = [500.0, 507.5, 515.0, 520.0, 525.0, 530.0];
    let want: Vec<_> = want.into_iter().enumerate().map(|(i, v)| (i as i32, Some(v))).collect();
    assert!(close(&got, &want), "{got:?}");
    let reviews = vec![
        doc! {"_id": 0, "r": "a", "day": 1, "score": 5},
        doc! {"_id": 1, "r": "b", "day": 1, "score": 2},
        doc! {"_id": 2, "r": "a", "day": 2},
        doc! {"_id": 3, "r": "b", "day": 2, "score": Bson::Null},
        doc! {"_id": 4, "r": "a", "day": 3, "score": 8},
        doc! {"_id": 5, "r": "b", "day": 3},
    ];
    let locf = bson!({"$fill": {"sortBy": {"day": 1}, "partitionByFields": ["r"],
        "output": {"score": {"method": "locf"}}}});
    assert_eq!(
        column(reviews, locf, "score")?,
        ints(&[(0, 5), (2, 5), (4, 8), (1, 2), (3, 2), (5, 2)])
    );
    Ok(())
}

#[test]
fn fill_specification_errors_carry_mongodb_codes() {
    let d = || vec![doc! {"_id": 1, "x": 1}];
    let fill =
        |spec: Bson| run(&Mem::default(), d(), bson!([{"$fill": spec}])).err().map(|e| e.code);
    let cases: Vec<(Bson, i32)> = vec![
        (bson!(1), 9),
        (bson!({"sortBy": {"x": 1}}), 40414),
        (bson!({"output": {}}), 6050203),
        (bson!({"output": {"x": 1}}), 6050200),
        (bson!({"output": {"x": {"method": "locf", "value": 1}}}), 6050201),
        (bson!({"output": {"x": {"method": "nearest"}}}), 6050202),
        (bson!({"output": {"x": {"how": "locf"}}}), 40415),
        (bson!({"output": {"x": {"value": 1}}, "bogus": 1}), 40415),
        (bson!({"output": {"x": {"value": 1}}, "partitionBy": 1}), 14),
        (
            bson!({"partitionBy": "$a", "partitionByFields": ["a"], "output": {"x": {"value": 1}}}),
            6050204,
        ),
        (bson!({"output": {"x": {"method": "linear"}}}), 605001),
    ];
    for (spec, want) in cases {
        assert_eq!(fill(spec.clone()), Some(want), "{spec}");
    }
}

#[test]
fn range_windows_match_a_scan_of_the_partition() -> Result<()> {
    // Repeated values in shuffled input; each count checked against a scan.
    let docs: Vec<Document> = (0..600).map(|i| doc! {"_id": i, "x": (i * 7 % 300) / 3}).collect();
    let xs: Vec<i32> = docs.iter().filter_map(|d| d.get_i32("x").ok()).collect();
    for (lo, hi) in [(-5, 2), (-10, -3), (0, 0), (1, 4)] {
        let stage = bson!({"$setWindowFields": {"sortBy": {"x": 1},
            "output": {"n": {"$count": {}, "window": {"range": [lo, hi]}}}}});
        let out = run(&Mem::default(), docs.clone(), bson!([stage]))?;
        for d in &out {
            let x = d.get_i32("x").unwrap_or(0);
            let want = xs.iter().filter(|v| **v >= x + lo && **v <= x + hi).count() as i32;
            assert_eq!(d.get_i32("n").ok(), Some(want), "x {x} window [{lo}, {hi}]");
        }
        assert_eq!(out.len(), 600);
    }
    Ok(())
}
