//! The sandbox's limits: runaway time, memory and recursion end the call with a clean
//! error, never a hang or a panic; fatal errors stop the call as CouchDB's query server
//! does; compiled sets work from other threads.

use std::time::{Duration, Instant};

use bunko_js::{Error, Limits, Runtime};
use serde_json::json;

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn limited(time_ms: u64, memory_bytes: usize) -> Runtime {
    Runtime::new(Limits {
        time_per_call: Duration::from_millis(time_ms),
        memory_bytes,
        ..Limits::default()
    })
}

#[test]
fn an_infinite_loop_times_out_within_the_deadline() -> TestResult {
    let views =
        limited(200, 64 << 20).compile_view_set(None, &["function(doc) { while (true) {} }"])?;
    let started = Instant::now();
    let err = views.map(&json!({"_id": "a"})).err();
    let took = started.elapsed();
    assert_eq!(err, Some(Error::Timeout { limit_ms: 200 }));
    assert!(took >= Duration::from_millis(200) && took < Duration::from_secs(2), "{took:?}");
    Ok(())
}

#[test]
fn the_deadline_is_per_document_in_a_batch() -> TestResult {
    // Each document takes ~50 ms; a batch of 8 runs past 300 ms in total but not per doc.
    let source = "function(doc) { var end = Date.now() + 50; while (Date.now() < end) {} emit(doc._id, null); }";
    let views = limited(300, 64 << 20).compile_view_set(None, &[source])?;
    let docs: Vec<_> = (0..8).map(|i| json!({"_id": i.to_string()})).collect();
    let out = views.map_batch(&docs)?;
    assert_eq!(out.len(), 8);
    assert!(out.iter().all(|o| o.rows[0].len() == 1));
    Ok(())
}

#[test]
fn catching_does_not_escape_the_deadline() -> TestResult {
    let source = "function(doc) { for (;;) { try { while (true) {} } catch (e) { emit('caught', String(e)); } } }";
    let views = limited(150, 64 << 20).compile_view_set(None, &[source])?;
    assert_eq!(views.map(&json!({"_id": "a"})).err(), Some(Error::Timeout { limit_ms: 150 }));
    Ok(())
}

#[test]
fn a_runtime_works_again_after_a_timeout() -> TestResult {
    let source = "function(doc) { if (doc.spin) { while (true) {} } emit(doc._id, 1); }";
    let views = limited(100, 64 << 20).compile_view_set(None, &[source])?;
    assert!(matches!(views.map(&json!({"_id": "a", "spin": true})), Err(Error::Timeout { .. })));
    assert_eq!(views.map(&json!({"_id": "b"}))?.rows[0], vec![(json!("b"), json!(1))]);
    Ok(())
}

#[test]
fn reduce_is_time_limited_too() -> TestResult {
    let reduce = limited(100, 64 << 20).compile_reduce("function(k, v) { while (true) {} }")?;
    assert_eq!(reduce.rereduce(&[json!(1)]).err(), Some(Error::Timeout { limit_ms: 100 }));
    Ok(())
}

#[test]
fn memory_exhaustion_is_an_error() -> TestResult {
    // view_errors_test.exs "infinite loop": emitting forever runs out of memory first. A
    // function that swallows the out-of-memory error runs into the time limit instead.
    let runtime = limited(1500, 16 << 20);
    for source in [
        "function(doc) { while (true) { emit(doc, doc); } }",
        "function(doc) { var a = []; while (true) { a.push('x' + a.length); } }",
        "function(doc) { var o = {}; for (var i = 0; ; i++) { o['k' + i] = [i]; } }",
        "function(doc) { var a = []; for (;;) { try { a.push(new Array(1000)); } catch (e) {} } }",
    ] {
        let views = runtime.compile_view_set(None, &[source])?;
        let started = Instant::now();
        let err = views.map(&json!({"_id": "a", "pad": "y".repeat(100)})).err();
        assert!(
            matches!(
                err,
                Some(Error::OutOfMemory { limit_bytes: 16777216 }) | Some(Error::Timeout { .. })
            ),
            "{source}: {err:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(3));
    }
    Ok(())
}

#[test]
fn the_memory_limit_holds_again_after_an_interrupt() -> TestResult {
    // Swallowing out-of-memory errors forever ends at the deadline (the interrupt lifts the
    // limit just long enough to throw); afterwards the limit applies again.
    let source = r#"function(doc) {
        var a = [];
        if (doc.swallow) { for (;;) { try { a.push(new Array(1000)); } catch (e) {} } }
        for (;;) { a.push(new Array(1000)); }
    }"#;
    // The deadline is generous so that filling 8 MiB in the second call (a debug build on a
    // loaded machine) cannot reach it first.
    let views = limited(1500, 8 << 20).compile_view_set(None, &[source])?;
    assert_eq!(
        views.map(&json!({"_id": "a", "swallow": true})).err(),
        Some(Error::Timeout { limit_ms: 1500 })
    );
    assert_eq!(
        views.map(&json!({"_id": "b"})).err(),
        Some(Error::OutOfMemory { limit_bytes: 8 << 20 })
    );
    Ok(())
}

#[test]
fn runaway_recursion_is_fatal() -> TestResult {
    let views = Runtime::default().compile_view_set(
        None,
        &["function(doc) { function f(n) { return f(n + 1) + 1; } f(0); }"],
    )?;
    let err = views.map(&json!({"_id": "a"})).err();
    assert_eq!(
        err,
        Some(Error::Fatal { error: "InternalError".into(), reason: "stack overflow".into() })
    );
    Ok(())
}

#[test]
fn fatal_errors_stop_the_call() -> TestResult {
    // views.js handleViewError: 'fatal_error' and ["fatal", ...] are not per-document errors.
    let views = Runtime::default().compile_view_set(
        None,
        &["function(doc) { emit(1, 1); }", "function(doc) { throw 'fatal_error'; }"],
    )?;
    assert_eq!(
        views.map(&json!({"_id": "a"})).err(),
        Some(Error::Fatal {
            error: "map_runtime_error".into(),
            reason: "function raised 'fatal_error'".into()
        })
    );
    let views = Runtime::default()
        .compile_view_set(None, &["function(doc) { throw ['fatal', 'my_error', 'because']; }"])?;
    let err = views.map(&json!({"_id": "a"})).err();
    assert_eq!(err.as_ref().map(Error::name), Some("my_error"));
    assert_eq!(err.map(|e| e.reason()), Some("because".into()));
    Ok(())
}

#[test]
fn no_host_access_from_map_functions() -> TestResult {
    let views = Runtime::default().compile_view_set(
        None,
        &[r#"function(doc) {
            emit('require', typeof require === 'function');
            emit('io', [typeof print, typeof readline, typeof std, typeof os, typeof gc, typeof evalcx, typeof fetch, typeof setTimeout]);
            emit('eval', eval('1 + 1'));
            emit('this', this === globalThis);
        }"#],
    )?;
    let out = views.map(&json!({"_id": "a"}))?;
    assert_eq!(
        out.rows[0],
        vec![
            (json!("require"), json!(true)),
            (json!("io"), serde_json::Value::from(vec!["undefined"; 8])),
            (json!("eval"), json!(2)),
            (json!("this"), json!(true)),
        ]
    );
    Ok(())
}

#[test]
fn compiled_sets_map_in_parallel_on_worker_threads() -> TestResult {
    let runtime = Runtime::default();
    let source = "function(doc) { emit(doc.n, doc.n * 2); }";
    let handles: Vec<_> = (0..2)
        .map(|worker| {
            let runtime = runtime.clone();
            std::thread::spawn(move || -> Result<i64, Error> {
                let views = runtime.compile_view_set(None, &[source])?;
                let docs: Vec<_> = (0..500)
                    .map(|i| json!({"_id": i.to_string(), "n": worker * 1000 + i}))
                    .collect();
                let mut total = 0;
                for out in views.map_batch(&docs)? {
                    total += out.rows[0][0].1.as_i64().unwrap_or(0);
                }
                Ok(total)
            })
        })
        .collect();
    let mut totals = Vec::new();
    for handle in handles {
        totals.push(handle.join().map_err(|_| "worker panicked")??);
    }
    assert_eq!(totals, vec![249500, 1249500]);
    // A compiled set also moves to another thread.
    let views = runtime.compile_view_set(None, &[source])?;
    let moved = std::thread::spawn(move || views.map(&json!({"_id": "a", "n": 4})).map(|o| o.rows));
    assert_eq!(moved.join().map_err(|_| "panicked")??, vec![vec![(json!(4), json!(8))]]);
    Ok(())
}
