//! Map throughput for `function(doc){ emit(doc.deviceID, doc.infrastructureID) }` over
//! ~1 KB documents.
//!
//! ```text
//! cargo run --release -p bunko-js --example map_speed [docs]
//! ```
//!
//! Rates are given per second of the measuring thread's CPU time (Linux schedstat) and of
//! wall time, so that they stay comparable on a busy machine.
//!
//! Part 1 compares ways of getting a document into QuickJS on bare rquickjs: JSON text
//! read by `JSON.parse` inside QuickJS, or the object built from a `serde_json::Value`
//! through rquickjs, each without and with CouchDB's deep freeze. Part 2 measures the
//! crate's API (Rust-built frozen documents, per-function realms), one document per call
//! and in batches; part 3 two threads with a compiled set each.

use std::time::Instant;

use bunko_js::{CompiledViews, Runtime};
use rquickjs::object::Property;
use rquickjs::{Array, Context, Ctx, Function, Object, Value as JsValue};
use serde_json::{Value, json};

const MAP: &str = "function(doc){ emit(doc.deviceID, doc.infrastructureID) }";

fn document(i: usize) -> Value {
    let readings: Vec<Value> = (0..6)
        .map(|s| json!({"sensor": format!("s{s}"), "value": (i * 7 + s) as f64 / 10.0, "unit": "C", "ok": s % 2 == 0}))
        .collect();
    json!({
        "_id": format!("reading-{i:08}"),
        "_rev": "1-9f86d081884c7d659a2feaa0c55ad015",
        "type": "reading",
        "deviceID": format!("device-{:05}", i % 5000),
        "infrastructureID": format!("infra-{:03}", i % 97),
        "timestamp": "2024-05-01T12:34:56.789Z",
        "location": {"lat": 52.52 + (i % 100) as f64 / 1000.0, "lon": 13.405, "site": "Berlin-Mitte", "floor": i % 12},
        "readings": readings,
        "tags": ["outdoor", "calibrated", "v2"],
        "firmware": {"version": "4.2.17", "channel": "stable", "updated": "2024-04-12"},
        "notes": "Routine measurement; no anomalies detected during the sampling window. Battery nominal.",
    })
}

/// CPU time of the calling thread in nanoseconds (0 where schedstat is missing).
fn cpu_nanos() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Runs `f` and prints its rate over `count` documents.
fn measure<E>(label: &str, count: usize, f: impl FnOnce() -> Result<(), E>) -> Result<(), E> {
    let (wall, cpu) = (Instant::now(), cpu_nanos());
    f()?;
    let cpu_secs = (cpu_nanos() - cpu) as f64 / 1e9;
    let wall_secs = wall.elapsed().as_secs_f64();
    println!(
        "  {label:<44} {:>8.0} docs/cpu-s {:>8.0} docs/s",
        count as f64 / cpu_secs,
        count as f64 / wall_secs
    );
    Ok(())
}

const HARNESS: &str = r#"
    var rows = [];
    function emit(k, v) { rows.push([k, v]); }
    var fun = (function(doc){ emit(doc.deviceID, doc.infrastructureID) });
    function deepFreeze(value) {
        Object.freeze(value);
        for (var k in value) {
            var m = value[k];
            if (typeof m === "object" && m !== null) deepFreeze(m);
        }
    }
    function viaText(text, freeze) {
        rows = []; var doc = JSON.parse(text); if (freeze) deepFreeze(doc); fun(doc); return JSON.stringify(rows);
    }
    function viaObject(doc) { rows = []; fun(doc); return JSON.stringify(rows); }
"#;

/// Part 1 on bare rquickjs.
fn compare_conversions(docs: &[Value], texts: &[String]) -> rquickjs::Result<()> {
    let runtime = rquickjs::Runtime::new()?;
    let context = Context::full(&runtime)?;
    context.with(|ctx| -> rquickjs::Result<()> {
        ctx.eval::<(), _>(HARNESS)?;
        let via_text: Function = ctx.globals().get("viaText")?;
        let via_object: Function = ctx.globals().get("viaObject")?;
        let freezer: (Function, Function) =
            (ctx.eval("Object.freeze")?, ctx.eval("Object.preventExtensions")?);
        for freeze in [false, true] {
            let label = if freeze {
                "JSON text, JSON.parse + JS deep freeze"
            } else {
                "JSON text, JSON.parse"
            };
            measure(label, texts.len(), || {
                for text in texts {
                    let out: String = via_text.call((text.as_str(), freeze))?;
                    std::hint::black_box(serde_json::from_str::<Value>(&out).ok());
                }
                Ok::<(), rquickjs::Error>(())
            })?;
        }
        for freeze in [false, true] {
            let label = if freeze {
                "Value, built frozen via rquickjs (bunko-js)"
            } else {
                "Value, built via rquickjs"
            };
            measure(label, docs.len(), || {
                for doc in docs {
                    let object = to_js(&ctx, doc, freeze.then_some(&freezer))?;
                    let out: String = via_object.call((object,))?;
                    std::hint::black_box(serde_json::from_str::<Value>(&out).ok());
                }
                Ok::<(), rquickjs::Error>(())
            })?;
        }
        Ok(())
    })
}

/// A `Value` as a JavaScript value; with `freezer`, frozen the way `convert.rs` does it.
fn to_js<'js>(
    ctx: &Ctx<'js>,
    value: &Value,
    freezer: Option<&(Function<'js>, Function<'js>)>,
) -> rquickjs::Result<JsValue<'js>> {
    Ok(match value {
        Value::Null => JsValue::new_null(ctx.clone()),
        Value::Bool(b) => JsValue::new_bool(ctx.clone(), *b),
        Value::Number(n) => JsValue::new_float(ctx.clone(), n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => rquickjs::String::from_str(ctx.clone(), s)?.into_value(),
        Value::Array(items) => {
            let array = Array::new(ctx.clone())?;
            for (i, item) in items.iter().enumerate() {
                array.set(i, to_js(ctx, item, freezer)?)?;
            }
            if let Some((freeze, _)) = freezer {
                freeze.call::<_, ()>((array.clone(),))?;
            }
            array.into_value()
        }
        Value::Object(members) => {
            let object = Object::new(ctx.clone())?;
            for (key, item) in members {
                let item = to_js(ctx, item, freezer)?;
                match freezer {
                    Some(_) => object.prop(key.as_str(), Property::from(item).enumerable())?,
                    None => object.set(key.as_str(), item)?,
                }
            }
            if let Some((_, prevent_extensions)) = freezer {
                prevent_extensions.call::<_, ()>((object.clone(),))?;
            }
            object.into_value()
        }
    })
}

/// Part 2: the crate's API.
fn measure_api(views: &CompiledViews, docs: &[Value], texts: &[String]) -> bunko_js::Result<()> {
    measure("map(&Value), one per call", docs.len(), || {
        docs.iter().try_for_each(|doc| views.map(doc).map(|out| drop(std::hint::black_box(out))))
    })?;
    measure("map_json(&str), one per call", texts.len(), || {
        texts
            .iter()
            .try_for_each(|text| views.map_json(text).map(|out| drop(std::hint::black_box(out))))
    })?;
    for batch in [10, 100, 1000] {
        measure(&format!("map_batch(&[Value]), {batch} per call"), docs.len(), || {
            docs.chunks(batch).try_for_each(|chunk| {
                views.map_batch(chunk).map(|out| drop(std::hint::black_box(out)))
            })
        })?;
    }
    measure("map_batch_json(&[&str]), 100 per call", texts.len(), || {
        texts.chunks(100).try_for_each(|chunk| {
            views.map_batch_json(chunk).map(|out| drop(std::hint::black_box(out)))
        })
    })?;
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let count: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let docs: Vec<Value> = (0..count).map(document).collect();
    let texts: Vec<String> = docs.iter().map(Value::to_string).collect();
    let average = texts.iter().map(String::len).sum::<usize>() / count.max(1);
    println!("{count} documents of {average} bytes of JSON on average; map: {MAP}");

    println!("1. getting documents into QuickJS (bare rquickjs, one realm):");
    compare_conversions(&docs, &texts)?;

    println!("2. bunko-js, one thread:");
    let runtime = Runtime::default();
    measure_api(&runtime.compile_view_set(None, &[MAP])?, &docs, &texts)?;

    println!("3. bunko-js, two threads, a compiled set each, map_batch 100 per call:");
    let started = Instant::now();
    std::thread::scope(|scope| -> Result<(), Box<dyn std::error::Error>> {
        let handles: Vec<_> = docs
            .chunks(count.div_ceil(2))
            .map(|half| {
                let runtime = runtime.clone();
                scope.spawn(move || -> bunko_js::Result<()> {
                    let views = runtime.compile_view_set(None, &[MAP])?;
                    measure("this thread", half.len(), || {
                        half.chunks(100).try_for_each(|c| {
                            views.map_batch(c).map(|o| drop(std::hint::black_box(o)))
                        })
                    })
                })
            })
            .collect();
        for handle in handles {
            handle.join().map_err(|_| "worker panicked")??;
        }
        Ok(())
    })?;
    println!(
        "  both threads together, wall time: {:>22.0} docs/s",
        count as f64 / started.elapsed().as_secs_f64()
    );
    Ok(())
}
