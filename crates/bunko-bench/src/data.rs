//! The documents the workloads write: ~1 KB JSON, generated deterministically from an
//! index so that any workload can name an existing document without remembering it.
//!
//! - [`Readings`]: IoT readings as in Cloudant's partition walkthrough, ids
//!   `bridge-{infra}:device-{n}-{ts}` (the partition is the bridge), fields `deviceID`,
//!   `infrastructureID`, `ts`, `reading`, `type: "reading"`. Reading `i` comes from device
//!   `i % devices` at `T0 + (i / devices) * 60`: consecutive indexes are one minute of all
//!   devices, so a batch touches many partitions, as live sensor traffic does.
//!   [`Readings::blocked`] lays them out the other way for databases that grow step by
//!   step (`scale`): every run of 100 indexes is one partition of two devices, so each
//!   prefix of the indexes is whole partitions of the same size.
//! - [`Students`]: the single-collection pattern, `links: [{target, doc_type}]` to classes
//!   and a school, for `$elemMatch`.
//!
//! Every document is padded with hex noise (not compressible to nothing) to [`DOC_SIZE`].

use std::fmt::Write;

/// Target size of a document as sent, in bytes.
pub const DOC_SIZE: usize = 1000;

/// The first reading's timestamp (2023-11-14T22:13:20Z).
pub const T0: u64 = 1_700_000_000;

/// Seconds between two readings of one device.
pub const INTERVAL: u64 = 60;

/// A set of `docs` readings over `partitions` bridges and `devices` devices.
#[derive(Debug, Clone, Copy)]
pub struct Readings {
    pub docs: usize,
    pub partitions: usize,
    pub devices: usize,
    /// Consecutive indexes: one device after another (`true`) or one minute of all.
    pub blocked: bool,
}

/// Readings per device in [`Readings::blocked`].
pub const BLOCK_PER_DEVICE: usize = 50;

/// Devices per partition in [`Readings::blocked`].
pub const BLOCK_DEVICES: usize = 2;

impl Readings {
    /// `docs` readings over up to 1000 partitions (10 documents each at least) and one
    /// device per 50 readings (at least one per partition).
    pub fn new(docs: usize) -> Readings {
        let partitions = (docs / 10).clamp(1, 1000);
        let devices = (docs / 50).max(partitions);
        Readings { docs, partitions, devices, blocked: false }
    }

    /// `docs` readings in partitions of `per_partition` documents each (fewer only if
    /// `docs` is smaller), one device per 50 readings (at least one per partition): the
    /// same partition size at every database size.
    pub fn partitioned(docs: usize, per_partition: usize) -> Readings {
        let partitions = (docs / per_partition.max(1)).max(1);
        let devices = (docs / 50).max(partitions);
        Readings { docs, partitions, devices, blocked: false }
    }

    /// Up to `docs` readings, device after device: [`BLOCK_PER_DEVICE`] readings of a
    /// device, [`BLOCK_DEVICES`] devices per partition. The first `n` of them are the same
    /// documents whatever `docs` is, so a database can grow by loading the next indexes.
    pub fn blocked(docs: usize) -> Readings {
        let devices = docs.div_ceil(BLOCK_PER_DEVICE).max(1);
        let partitions = devices.div_ceil(BLOCK_DEVICES);
        Readings { docs, partitions, devices, blocked: true }
    }

    pub fn device(&self, i: usize) -> usize {
        if self.blocked { i / BLOCK_PER_DEVICE } else { i % self.devices }
    }

    /// The bridge (partition number) a device belongs to.
    pub fn infra(&self, device: usize) -> usize {
        if self.blocked { device / BLOCK_DEVICES } else { device % self.partitions }
    }

    pub fn ts(&self, i: usize) -> u64 {
        let minute = if self.blocked { i % BLOCK_PER_DEVICE } else { i / self.devices };
        T0 + minute as u64 * INTERVAL
    }

    /// How many readings each device has (the last minute may be partial).
    pub fn per_device(&self) -> usize {
        if self.blocked { BLOCK_PER_DEVICE } else { self.docs.div_ceil(self.devices) }
    }

    /// The partition name of bridge `infra` (the id prefix before `:`).
    pub fn partition(infra: usize) -> String {
        format!("bridge-{infra}")
    }

    pub fn id(&self, i: usize) -> String {
        let device = self.device(i);
        format!("bridge-{}:device-{device}-{}", self.infra(device), self.ts(i))
    }

    /// Reading `i` as JSON with `_id`.
    pub fn doc(&self, i: usize) -> String {
        let mut doc = format!("{{\"_id\":\"{}\",", self.id(i));
        self.fields(i, &mut doc);
        doc
    }

    /// Reading `i` without `_id`: what a server stores as the body.
    pub fn body(&self, i: usize) -> String {
        let mut doc = String::from("{");
        self.fields(i, &mut doc);
        doc
    }

    fn fields(&self, i: usize, doc: &mut String) {
        let device = self.device(i);
        let mut rng = seed(i as u64);
        let reading = (xorshift(&mut rng) % 10_000) as f64 / 100.0;
        let _ = write!(
            doc,
            "\"deviceID\":\"device-{device}\",\"infrastructureID\":\"bridge-{}\",\"ts\":{},\
             \"reading\":{reading:.2},\"type\":\"reading\",",
            self.infra(device),
            self.ts(i),
        );
        pad(doc, &mut rng);
    }

    /// A `_bulk_docs` body with readings `range`.
    pub fn bulk(&self, range: std::ops::Range<usize>) -> String {
        bulk(range.map(|i| self.doc(i)))
    }
}

/// A set of `docs` students linked to classes and schools.
#[derive(Debug, Clone, Copy)]
pub struct Students {
    pub docs: usize,
    /// Number of classes; each student links to three.
    pub classes: usize,
}

impl Students {
    /// About 300 students per class.
    pub fn new(docs: usize) -> Students {
        Students { docs, classes: (docs / 100).max(1) }
    }

    pub fn class(&self, n: usize) -> String {
        format!("class-{n}")
    }

    pub fn doc(&self, i: usize) -> String {
        let classes = [i % self.classes, (i * 7 + 1) % self.classes, (i * 13 + 2) % self.classes];
        let mut doc = format!("{{\"_id\":\"student-{i:07}\",\"type\":\"student\",\"links\":[");
        for class in classes {
            let _ = write!(doc, "{{\"target\":\"{}\",\"doc_type\":\"class\"}},", self.class(class));
        }
        let _ = write!(doc, "{{\"target\":\"school-{}\",\"doc_type\":\"school\"}}],", i % 10);
        pad(&mut doc, &mut seed(i as u64));
        doc
    }

    pub fn bulk(&self, range: std::ops::Range<usize>) -> String {
        bulk(range.map(|i| self.doc(i)))
    }
}

/// `{"docs":[...]}` of the given documents.
fn bulk(docs: impl Iterator<Item = String>) -> String {
    let mut body = String::from("{\"docs\":[");
    for (n, doc) in docs.enumerate() {
        if n > 0 {
            body.push(',');
        }
        body.push_str(&doc);
    }
    body.push_str("]}");
    body
}

/// Appends `"pad":"<hex>"}` so that `doc` ends up [`DOC_SIZE`] bytes long (or just over).
fn pad(doc: &mut String, rng: &mut u64) {
    doc.push_str("\"pad\":\"");
    while doc.len() + 2 + 16 <= DOC_SIZE {
        let _ = write!(doc, "{:016x}", xorshift(rng));
    }
    while doc.len() + 2 < DOC_SIZE {
        doc.push('0');
    }
    doc.push_str("\"}");
}

fn seed(i: u64) -> u64 {
    (i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_are_1kb_json_with_unique_partitioned_ids() {
        let readings = Readings::new(10_000);
        assert_eq!((readings.partitions, readings.devices), (1000, 1000));
        let mut ids = std::collections::HashSet::new();
        for i in 0..readings.docs {
            assert!(ids.insert(readings.id(i)), "duplicate id for {i}");
        }
        let doc: serde_json::Value = serde_json::from_str(&readings.doc(1234)).unwrap();
        assert_eq!(readings.doc(1234).len(), DOC_SIZE);
        assert_eq!(doc["_id"], "bridge-234:device-234-1700000060");
        assert_eq!(doc["deviceID"], "device-234");
        assert_eq!(doc["infrastructureID"], "bridge-234");
        assert_eq!(doc["type"], "reading");
        let body: serde_json::Value = serde_json::from_str(&readings.body(1234)).unwrap();
        assert!(body.get("_id").is_none());
    }

    #[test]
    fn students_link_three_classes_and_a_school() {
        let students = Students::new(1000);
        let doc: serde_json::Value = serde_json::from_str(&students.doc(42)).unwrap();
        assert_eq!(students.doc(42).len(), DOC_SIZE);
        let links = doc["links"].as_array().unwrap();
        assert_eq!(links.len(), 4);
        assert_eq!(links[0]["target"], "class-2");
        assert_eq!(links[3]["doc_type"], "school");
    }

    #[test]
    fn bulk_bodies_are_json() {
        let body = Readings::new(100).bulk(0..3);
        let parsed: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(parsed["docs"].as_array().map(Vec::len), Some(3));
    }
}
