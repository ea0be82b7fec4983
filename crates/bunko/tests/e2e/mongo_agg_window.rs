//! `$setWindowFields` through pymongo (issue 13): the manual's `cakeSales` examples on a
//! plain collection (running totals, ranks, `$shift`, range windows by value and by month,
//! output grouped by partition and sorted by `sortBy`), sensor readings in a time-series
//! collection (`$derivative`, `$integral`, `$expMovingAvg`, `$locf`, `$linearFill`, a
//! minute range), MongoDB's specification errors with their codes and names, a
//! partition past the memory budget refused with MongoDB's 5414201; `$fill` (values,
//! `linear`, `locf`) and `$densify` (hourly readings of a time-series collection within
//! explicit bounds, coffee by altitude per partition) with their errors.

use serde_json::json;

use crate::harness::Server;
use crate::mongo::python;

#[test]
fn window_fields_on_cake_sales_as_the_manual_shows_them() {
    let server = Server::start();
    let script = r#"
D = datetime.datetime
db = client().bakery
db.cakeSales.insert_many([
    {"_id": 0, "type": "chocolate", "orderDate": D(2020, 5, 18, 14, 10, 30), "state": "CA", "price": 13, "quantity": 120},
    {"_id": 1, "type": "chocolate", "orderDate": D(2021, 3, 20, 11, 30, 5), "state": "WA", "price": 14, "quantity": 140},
    {"_id": 2, "type": "vanilla", "orderDate": D(2021, 1, 11, 6, 31, 15), "state": "CA", "price": 12, "quantity": 145},
    {"_id": 3, "type": "vanilla", "orderDate": D(2020, 2, 8, 13, 13, 23), "state": "WA", "price": 13, "quantity": 104},
    {"_id": 4, "type": "strawberry", "orderDate": D(2019, 5, 18, 16, 9, 1), "state": "CA", "price": 41, "quantity": 162},
    {"_id": 5, "type": "strawberry", "orderDate": D(2019, 1, 8, 6, 12, 3), "state": "WA", "price": 43, "quantity": 134},
])
def window(spec, *fields):
    rows = db.cakeSales.aggregate([{"$setWindowFields": spec}])
    return [[r["_id"]] + [r.get(f) for f in fields] for r in rows]
out = {}
out["cumulative"] = window({"partitionBy": "$state", "sortBy": {"orderDate": 1}, "output": {
    "total": {"$sum": "$quantity", "window": {"documents": ["unbounded", "current"]}},
    "rank": {"$rank": {}}}}, "total", "rank")
out["by_year"] = window({"partitionBy": {"$year": "$orderDate"}, "sortBy": {"orderDate": 1}, "output": {
    "avg": {"$avg": "$quantity", "window": {"documents": [-1, 0]}},
    "max": {"$max": "$quantity"}}}, "avg", "max")
out["similar"] = window({"partitionBy": "$state", "sortBy": {"price": 1}, "output": {
    "q": {"$sum": "$quantity", "window": {"range": [-10, 10]}}}}, "q")
out["recent"] = [[r[0], [d.strftime("%Y-%m") for d in r[1]]] for r in window(
    {"partitionBy": "$state", "sortBy": {"orderDate": 1}, "output": {
        "recent": {"$push": "$orderDate", "window": {"range": ["unbounded", 10], "unit": "month"}}}},
    "recent")]
out["shift"] = window({"partitionBy": "$state", "sortBy": {"quantity": -1}, "output": {
    "next": {"$shift": {"output": "$quantity", "by": 1, "default": "Not available"}},
    "dense": {"$denseRank": {}}}}, "next", "dense")
out["then"] = list(db.cakeSales.aggregate([
    {"$setWindowFields": {"output": {"n": {"$count": {}}, "types": {"$addToSet": "$type"}}}},
    {"$project": {"_id": 0, "n": 1, "types": {"$size": "$types"}}}, {"$limit": 1}]))
def error(spec):
    try:
        list(db.cakeSales.aggregate([{"$setWindowFields": spec}]))
    except OperationFailure as e:
        return [e.code, e.details.get("codeName")]
out["errors"] = [
    error({"output": {"r": {"$rank": {}}}}),
    error({"sortBy": {"price": 1}, "output": {}, "frame": 1}),
    error({"output": {"s": {"$sum": 1, "window": {"documents": [-1, 0]}}}}),
    error({"sortBy": {"price": 1}, "output": {"s": {"$sum": 1, "window": {"documents": [1, 0]}}}}),
    error({"sortBy": {"orderDate": 1}, "output": {"s": {"$sum": 1, "window": {"range": [-1, 0]}}}}),
    error({"partitionBy": ["$state"], "output": {}}),
    error({"output": {"s": {"$summ": 1}}}),
    error("x"),
]
print(json.dumps(out))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(
        out["cumulative"],
        json!([[4, 162, 1], [0, 282, 2], [2, 427, 3], [5, 134, 1], [3, 238, 2], [1, 378, 3]])
    );
    assert_eq!(
        out["by_year"],
        json!([
            [5, 134.0, 162],
            [4, 148.0, 162],
            [3, 104.0, 120],
            [0, 112.0, 120],
            [2, 145.0, 145],
            [1, 142.5, 145]
        ])
    );
    assert_eq!(out["similar"], json!([[2, 265], [0, 265], [4, 162], [3, 244], [1, 244], [5, 134]]));
    assert_eq!(
        out["recent"],
        json!([
            [4, ["2019-05"]],
            [0, ["2019-05", "2020-05", "2021-01"]],
            [2, ["2019-05", "2020-05", "2021-01"]],
            [5, ["2019-01"]],
            [3, ["2019-01", "2020-02"]],
            [1, ["2019-01", "2020-02", "2021-03"]],
        ])
    );
    assert_eq!(
        out["shift"],
        json!([
            [4, 145, 1],
            [2, 120, 2],
            [0, "Not available", 3],
            [1, 134, 1],
            [5, 104, 2],
            [3, "Not available", 3],
        ])
    );
    assert_eq!(out["then"], json!([{"n": 6, "types": 3}]));
    assert_eq!(
        out["errors"],
        json!([
            [5371602, "Location5371602"],
            [40415, "Location40415"],
            [5339901, "Location5339901"],
            [5339900, "Location5339900"],
            [5429413, "Location5429413"],
            [14, "TypeMismatch"],
            [9, "FailedToParse"],
            [9, "FailedToParse"],
        ])
    );
}

#[test]
fn window_functions_over_a_time_series_collection() {
    let server = Server::start();
    let script = r#"
D = datetime.datetime
db = client().plant
db.create_collection("power", timeseries={"timeField": "t", "metaField": "meter", "granularity": "seconds"})
rows = []
for meter, kws in [("1", [2.95, 2.7, 2.6, 2.98]), ("2", [2.5, None, 2.75, 2.82])]:
    for i, kw in enumerate(kws):
        doc = {"meter": meter, "t": D(2020, 5, 18, 14, 10, 30) + datetime.timedelta(seconds=30 * i)}
        if kw is not None:
            doc["kw"] = kw
        rows.append(doc)
db.power.insert_many(rows)
pipeline = [
    {"$setWindowFields": {"partitionBy": "$meter", "sortBy": {"t": 1}, "output": {
        "filled": {"$linearFill": "$kw"},
        "carried": {"$locf": "$kw"},
        "n": {"$documentNumber": {}},
        "lastMinute": {"$count": {}, "window": {"range": [-1, 0], "unit": "minute"}},
    }}},
    {"$setWindowFields": {"partitionBy": "$meter", "sortBy": {"t": 1}, "output": {
        "kwh": {"$integral": {"input": "$filled", "unit": "hour"},
                "window": {"range": ["unbounded", "current"], "unit": "hour"}},
        "slope": {"$derivative": {"input": "$filled", "unit": "minute"},
                  "window": {"documents": [-1, 0]}},
        "ema": {"$expMovingAvg": {"input": "$filled", "alpha": 0.5}},
    }}},
    {"$project": {"_id": 0, "meter": 1, "n": 1, "filled": 1, "carried": 1, "lastMinute": 1,
                  "kwh": {"$round": ["$kwh", 6]}, "slope": {"$round": ["$slope", 6]},
                  "ema": {"$round": ["$ema", 6]}}},
]
out = {"rows": list(db.power.aggregate(pipeline))}
try:
    list(db.power.aggregate([{"$setWindowFields": {"sortBy": {"t": 1}, "output": {
        "s": {"$sum": "$kw", "window": {"range": [-1, 0]}}}}}]))
except OperationFailure as e:
    out["no_unit"] = [e.code, e.details.get("codeName")]
print(json.dumps(out))
"#;
    let Some(out) = python(&server, script) else { return };
    let row = |meter: &str,
               n,
               filled: f64,
               carried: f64,
               last,
               kwh: f64,
               slope: serde_json::Value,
               ema: f64| {
        json!({"meter": meter, "n": n, "filled": filled, "carried": carried, "lastMinute": last,
               "kwh": kwh, "slope": slope, "ema": ema})
    };
    assert_eq!(
        out["rows"],
        json!([
            row("1", 1, 2.95, 2.95, 1, 0.0, json!(null), 2.95),
            row("1", 2, 2.7, 2.7, 2, 0.023542, json!(-0.5), 2.825),
            row("1", 3, 2.6, 2.6, 3, 0.045625, json!(-0.2), 2.7125),
            row("1", 4, 2.98, 2.98, 3, 0.068875, json!(0.76), 2.84625),
            row("2", 1, 2.5, 2.5, 1, 0.0, json!(null), 2.5),
            row("2", 2, 2.625, 2.5, 2, 0.021354, json!(0.25), 2.5625),
            row("2", 3, 2.75, 2.75, 3, 0.04375, json!(0.25), 2.65625),
            row("2", 4, 2.82, 2.82, 3, 0.066958, json!(0.14), 2.738125),
        ])
    );
    assert_eq!(out["no_unit"], json!([5429413, "Location5429413"]));
}

#[test]
fn a_partition_past_the_memory_budget_is_refused_with_mongodb_code() {
    let server = Server::start_with(&["--mongo-agg-memory-limit", "20000"], &[]);
    let script = r#"
db = client().big
db.readings.insert_many([{"_id": i, "g": i % 10, "pad": "x" * 100} for i in range(400)])
out = {}
for disk in [True, False]:
    try:
        db.command("aggregate", "readings", cursor={}, allowDiskUse=disk,
                   pipeline=[{"$setWindowFields": {"output": {"n": {"$sum": 1}}}}])
    except OperationFailure as e:
        out[str(disk)] = [e.code, e.details.get("codeName"), e.details.get("errmsg").endswith("max allowed is 20000")]
# Partitions that fit pass, the sort before them spilling.
rows = list(db.readings.aggregate([{"$setWindowFields": {"partitionBy": "$g", "sortBy": {"_id": -1},
    "output": {"n": {"$documentNumber": {}}}}}, {"$match": {"n": 1}}, {"$project": {"g": 1, "n": 1}}]))
out["fits"] = rows
print(json.dumps(out))
"#;
    let Some(out) = python(&server, script) else { return };
    let refused = json!([5414201, "Location5414201", true]);
    assert_eq!(out["True"], refused);
    assert_eq!(out["False"], refused);
    // Ten partitions of 40 documents, each first the largest `_id`.
    let fits: Vec<_> = (0..10).map(|g| json!({"_id": 390 + g, "g": g, "n": 1})).collect();
    assert_eq!(out["fits"], json!(fits));
}

#[test]
fn fill_by_value_linear_and_locf_through_the_driver() {
    let server = Server::start();
    let script = r#"
D = datetime.datetime
db = client().market
db.stock.insert_many([{"_id": i, "time": D(2021, 3, 8, 9, i), "sym": "A"} for i in range(6)])
for i, p in [(0, 500), (2, 515), (5, 530)]:
    db.stock.update_one({"_id": i}, {"$set": {"price": p}})
out = {"filled": [[r["_id"], r["price"], r["carried"], r["volume"]] for r in db.stock.aggregate([
    {"$set": {"carried": "$price"}},
    {"$fill": {"sortBy": {"time": 1}, "partitionByFields": ["sym"], "output": {
        "price": {"method": "linear"}, "carried": {"method": "locf"}, "volume": {"value": 0}}}}])]}
def error(spec):
    try:
        list(db.stock.aggregate([{"$fill": spec}]))
    except OperationFailure as e:
        return [e.code, e.details.get("codeName")]
out["errors"] = [
    error({"output": {"price": {"method": "nearest"}}}),
    error({"output": {"price": {"method": "linear"}}}),
    error({"output": {}}),
]
print(json.dumps(out))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(
        out["filled"],
        json!([
            [0, 500, 500, 0],
            [1, 507.5, 500, 0],
            [2, 515, 515, 0],
            [3, 520.0, 515, 0],
            [4, 525.0, 515, 0],
            [5, 530, 530, 0],
        ])
    );
    assert_eq!(
        out["errors"],
        json!([
            [6050202, "Location6050202"],
            [605001, "Location605001"],
            [6050203, "Location6050203"]
        ])
    );
}

#[test]
fn densify_fills_gaps_in_a_time_series_and_by_partition() {
    let server = Server::start();
    let script = r#"
D = datetime.datetime
db = client().weather
db.create_collection("temps", timeseries={"timeField": "timestamp", "metaField": "metadata"})
db.temps.insert_many([{"metadata": {"sensorId": 5578}, "timestamp": D(2021, 5, 18, h), "temp": t}
                      for h, t in [(0, 12), (4, 11), (8, 11), (12, 12)]])
hours = [[r["timestamp"].hour, r.get("temp"), r.get("metadata")] for r in db.temps.aggregate([
    {"$densify": {"field": "timestamp",
                  "range": {"step": 1, "unit": "hour", "bounds": [D(2021, 5, 18, 0), D(2021, 5, 18, 8)]}}},
    {"$fill": {"output": {"metadata": {"value": "generated"}}}},
    {"$project": {"_id": 0}}])]
db.coffee.insert_many([{"altitude": a, "variety": v, "score": 1} for a, v in
    [(600, "A"), (750, "A"), (950, "A"), (1250, "G"), (1700, "G"), (1600, "S"), (1800, "S"), (2000, "S")]])
by_partition = [[r["variety"], r["altitude"], "score" in r] for r in db.coffee.aggregate([
    {"$densify": {"field": "altitude", "partitionByFields": ["variety"], "range": {"bounds": "partition", "step": 200}}}])]
def error(spec):
    try:
        list(db.coffee.aggregate([{"$densify": spec}]))
    except OperationFailure as e:
        return [e.code, e.details.get("codeName")]
errors = [
    error({"field": "altitude", "range": {"step": 1, "bounds": "partition"}}),
    error({"field": "altitude", "range": {"step": -1, "bounds": "full"}}),
    error({"field": "altitude", "range": {"step": 1, "bounds": [D(2021, 1, 1), D(2021, 1, 2)]}}),
]
print(json.dumps({"hours": hours, "by_partition": by_partition, "errors": errors}))
"#;
    let Some(out) = python(&server, script) else { return };
    let meta = json!({"sensorId": 5578});
    let hours: Vec<_> = [0, 1, 2, 3, 4, 5, 6, 7, 8, 12]
        .iter()
        .map(|h| match h {
            0 | 12 => json!([h, 12, meta]),
            4 | 8 => json!([h, 11, meta]),
            _ => json!([h, null, "generated"]),
        })
        .collect();
    assert_eq!(out["hours"], json!(hours));
    assert_eq!(
        out["by_partition"],
        json!([
            ["A", 600, true],
            ["A", 750, true],
            ["A", 800, false],
            ["A", 950, true],
            ["G", 1250, true],
            ["G", 1450, false],
            ["G", 1650, false],
            ["G", 1700, true],
            ["S", 1600, true],
            ["S", 1800, true],
            ["S", 2000, true],
        ])
    );
    assert_eq!(
        out["errors"],
        json!([
            [5733408, "Location5733408"],
            [5733401, "Location5733401"],
            [5733410, "Location5733410"]
        ])
    );
}
