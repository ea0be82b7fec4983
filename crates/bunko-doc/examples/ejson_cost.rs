//! Measures the stored-form choices for MongoDB documents (docs/architecture/mongo.md):
//! per 1 KB document, BSON bytes → stored JSON text → BSON bytes (design b': JSON text with
//! Extended JSON wrappers) against BSON bytes → `Document` → BSON bytes (design b: BSON
//! stored as is), and the CouchDB read path (stored JSON spliced, no parse) for scale.
//!
//! `cargo run --release -p bunko-doc --example ejson_cost`

use std::time::Instant;

use bson::{Bson, Document, doc, oid::ObjectId};
use bunko_doc::ejson;

fn sample(i: i32) -> Document {
    let addresses: Vec<Bson> = (0..4)
        .map(|n| {
            Bson::Document(doc! {
                "street": format!("{n}-chome 1-2, Sakae"), "city": "Nagoya", "zip": "460-0008",
                "location": { "type": "Point", "coordinates": [136.9 + f64::from(n), 35.17] },
            })
        })
        .collect();
    doc! {
        "_id": ObjectId::new(), "name": "Sato Hanako", "age": 30 + i % 40, "score": 12.5,
        "visits": 1_234_567_890_123_i64, "joined": bson::DateTime::from_millis(1_700_000_000_000),
        "tags": ["customer", "gold", "newsletter"], "addresses": addresses,
        "notes": "a free text note ".repeat(12),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n = 100_000;
    let docs: Vec<Vec<u8>> = (0..n).map(|i| sample(i).to_vec()).collect::<Result<_, _>>()?;
    let size = docs.iter().map(Vec::len).sum::<usize>() / docs.len();
    let texts: Vec<Vec<u8>> = docs
        .iter()
        .map(|b| Ok(serde_json::to_vec(&ejson::to_json(&Document::from_reader(&b[..])?))?))
        .collect::<Result<_, Box<dyn std::error::Error>>>()?;
    let text_size = texts.iter().map(Vec::len).sum::<usize>() / texts.len();
    println!("document: {size} B as BSON, {text_size} B as stored JSON text");

    let bench = |name: &str, f: &dyn Fn(usize) -> usize| {
        let start = Instant::now();
        let mut sink = 0;
        for i in 0..n as usize {
            sink += f(i);
        }
        let per = start.elapsed().as_nanos() as f64 / f64::from(n) / 1000.0;
        println!("{name:<58} {per:>6.2} µs/doc  ({sink})");
    };
    // Write path: a BSON document from the wire becomes what is stored.
    bench("write (b'): BSON -> Document -> stored JSON text", &|i| {
        let d = Document::from_reader(&docs[i][..]).unwrap_or_default();
        serde_json::to_vec(&ejson::to_json(&d)).map_or(0, |v| v.len())
    });
    bench("write (b):  BSON -> Document -> BSON bytes", &|i| {
        let d = Document::from_reader(&docs[i][..]).unwrap_or_default();
        d.to_vec().map_or(0, |v| v.len())
    });
    // Read path: what is stored becomes BSON on the wire.
    bench("read (b'):  stored JSON text -> Document -> BSON bytes", &|i| {
        let map = serde_json::from_slice(&texts[i]).unwrap_or_default();
        ejson::from_json(&map).to_vec().map_or(0, |v| v.len())
    });
    bench("read (b):   BSON bytes -> Document -> BSON bytes", &|i| {
        let d = Document::from_reader(&docs[i][..]).unwrap_or_default();
        d.to_vec().map_or(0, |v| v.len())
    });
    bench("read (b), raw: BSON bytes copied into the reply", &|i| docs[i].to_vec().len());
    bench("CouchDB GET: stored JSON spliced (copy, no parse)", &|i| texts[i].to_vec().len());
    Ok(())
}
