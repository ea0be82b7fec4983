//! The documents of the crate's ignored micro-benchmarks: the bench's IoT readings.

use std::fmt::Write;

/// Reading `i` of 4000 devices as stored JSON text of about 1 kB, its `ts` written as
/// `ts` renders the timestamp (a plain number, or an Extended JSON wrapper).
pub(crate) fn iot_reading(i: usize, ts: impl Fn(usize) -> String) -> String {
    let mut doc = format!(
        r#"{{"deviceID":"device-{0}","infrastructureID":"bridge-{1}","ts":{2},"reading":{3}.25,"type":"reading","pad":""#,
        i % 4000,
        i % 100,
        ts(1_700_000_000 + i),
        i % 97
    );
    while doc.len() < 980 {
        let _ = write!(doc, "{:016x}", (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    }
    doc.push_str("\"}");
    doc
}
