//! Cloudant Geo: design documents' `st_indexes` (`{name: {"index": "function(doc) { if
//! (doc.geometry) st_index(doc.geometry); }"}}`), queried with
//! `GET /{db}/_design/{ddoc}/_geo/{index}`.
//!
//! An index keeps each document's rev and GeoJSON geometry in the store (`geo_store.rs`)
//! and, in memory, only an R*-tree (`rstar`) of their bounding boxes with the document ids,
//! built from `_changes` through the index framework like search indexes (~100 bytes a
//! document: the tree of 200,000 points is ~20 MB, where the geometries and their JSON in
//! memory as well took ~300 MB). Every page of changes writes the documents' entries and
//! the checkpoint to the store in one commit; opening the index reads them back a page at
//! a time and bulk-loads the tree, so a restart runs no JavaScript. An update first drops
//! the documents purged since the saved purge seq (`Database::purged_since`). A query finds
//! the candidates whose boxes meet the query's box in the tree, reads their geometries from
//! the store (a `Point`'s box is its geometry: the tree marks points, which need no read),
//! then checks the exact relation (`geo`'s DE-9IM `Relate`) or
//! the haversine distance; a query without a box (`disjoint`, or `nearest` without a
//! radius) takes every entry of the tree (or reads every entry of the store in one scan
//! when most are not points).
//!
//! Query parameters: `bbox=minlon,minlat,maxlon,maxlat`; `lat`, `lon` and `radius`
//! (metres); `g` (WKT) with `relation` (`intersects` by default, `contains`, `within`,
//! `overlaps`, `crosses`, `touches`, `disjoint`, `equals`, `contains_properly`,
//! `covered_by`, `covers`: how the query geometry relates to the document's); `nearest`
//! (order by distance from `lat`/`lon` or the query geometry's centre); `limit` (25),
//! `skip`, `bookmark`, `include_docs`; `format` (`view`, the default; `geojson`, `legacy`
//! and `application/vnd.geo+json` give a GeoJSON FeatureCollection).

use std::sync::atomic::{AtomicU64, Ordering};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bunko_doc::id::{DocKind, kind};
use bunko_engine::changes::{ChangesFilter, ChangesQuery};
use bunko_engine::{Database, Error, Result};
use bunko_indexer::{Activity, Page, Update};
use bunko_js::{CompiledViews, Limits, Runtime};
use bunko_storage::Batch;
use geo::{
    BoundingRect, Centroid, Closest, ClosestPoint, Contains, Distance, Geometry, Haversine, Point,
    Rect, Relate, coord,
};
use md5::{Digest, Md5};
use parking_lot::{Mutex, RwLock};
use rstar::primitives::{GeomWithData, Rectangle};
use rstar::{AABB, RTree};
use serde_json::{Map, Value, json};

use crate::geo_store::GeoKeys;

/// Changes indexed per checkpoint.
const BATCH: u64 = 5000;

/// Metres per degree of latitude.
const METRES_PER_DEGREE: f64 = 111_320.0;

/// A tree entry: a document's bounding box, id and whether it is a point.
type Entry = GeomWithData<Rectangle<[f64; 2]>, TreeDoc>;

/// What the tree keeps of a document besides its box.
#[derive(Debug, Clone, PartialEq)]
struct TreeDoc {
    id: Box<str>,
    /// The geometry is a GeoJSON `Point`: its box's corner is the whole geometry, so a
    /// query decides on it without reading the store.
    point: bool,
}

/// One `st_indexes` member of a design document.
#[derive(Debug, Clone)]
pub struct GeoDef {
    pub ddoc: String,
    pub name: String,
    pub source: String,
    pub sig: String,
}

impl GeoDef {
    pub fn from_ddoc(ddoc: &str, body: &Map<String, Value>, name: &str) -> Result<GeoDef> {
        let source = body
            .get("st_indexes")
            .and_then(|i| i.get(name))
            .and_then(|d| d.get("index"))
            .and_then(Value::as_str)
            .ok_or_else(|| Error::NotFound(format!("Geo index {name} not found")))?;
        let sig = hex::encode(Md5::digest(json!(["geo", source]).to_string().as_bytes()));
        Ok(GeoDef { ddoc: ddoc.into(), name: name.into(), source: source.into(), sig })
    }

    /// The signatures of every geo index `body` defines.
    pub fn sigs_of(ddoc: &str, body: &Map<String, Value>) -> Vec<String> {
        let Some(Value::Object(indexes)) = body.get("st_indexes") else { return Vec::new() };
        indexes
            .keys()
            .filter_map(|n| GeoDef::from_ddoc(ddoc, body, n).ok())
            .map(|d| d.sig)
            .collect()
    }

    /// The index function with `st_index(geometry)` in scope, each call an emitted row.
    fn program(&self) -> String {
        let source = self.source.trim().trim_end_matches(';');
        format!(
            "(function () {{ var st_index = function (geometry) {{ emit(geometry, null); }}; \
             return ({source}\n); }})()"
        )
    }
}

/// The tree entries of documents as the store holds them now, before a change replaces
/// or removes them (their boxes are what finds them in the tree).
fn stored_entries(keys: &GeoKeys, db: &Database, ids: &[String]) -> Result<Vec<Entry>> {
    let read = db.store().snapshot();
    let mut out = Vec::new();
    for id in ids {
        if let Some((_, json)) = keys.get(read.as_ref(), id)?
            && let Some(old) = parse_geojson(&json).and_then(|g| entry(id, &g))
        {
            out.push(old);
        }
    }
    Ok(out)
}

/// One geo index.
pub struct GeoIndex {
    pub def: GeoDef,
    keys: GeoKeys,
    tree: RwLock<RTree<Entry>>,
    seq: AtomicU64,
    /// The purge seq applied (saved with `seq`).
    purge_seq: AtomicU64,
    build: Mutex<Option<CompiledViews>>,
    /// Set once cleanup removed the index: updates stop writing to the store.
    retired: std::sync::atomic::AtomicBool,
    pub activity: Activity,
}

impl std::fmt::Debug for GeoIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GeoIndex").field("sig", &self.def.sig).finish()
    }
}

fn entry(id: &str, geometry: &Geometry<f64>) -> Option<Entry> {
    let rect = geometry.bounding_rect()?;
    let (lo, hi) = (rect.min(), rect.max());
    let doc = TreeDoc { id: id.into(), point: matches!(geometry, Geometry::Point(_)) };
    Some(GeomWithData::new(Rectangle::from_corners([lo.x, lo.y], [hi.x, hi.y]), doc))
}

/// A GeoJSON geometry as `geo` types.
fn parse_geojson(value: &Value) -> Option<Geometry<f64>> {
    let geometry = geojson::Geometry::from_json_value(value.clone()).ok()?;
    Geometry::<f64>::try_from(geometry).ok()
}

impl GeoIndex {
    /// Opens the index `db`'s store holds (empty if it was never built).
    pub fn open(def: GeoDef, db: &Database) -> Result<GeoIndex> {
        let keys = GeoKeys::new(db.id(), &def.sig);
        let read = db.store().snapshot();
        let (seq, purge_seq) = keys.checkpoint_of(read.as_ref())?;
        let mut entries = Vec::new();
        for stored in keys.entries(read) {
            let (id, _, json) = stored?;
            entries.extend(parse_geojson(&json).and_then(|geometry| entry(&id, &geometry)));
        }
        Ok(GeoIndex {
            def,
            keys,
            tree: RwLock::new(RTree::bulk_load(entries)),
            seq: AtomicU64::new(seq),
            purge_seq: AtomicU64::new(purge_seq),
            build: Mutex::new(None),
            retired: Default::default(),
            activity: Activity::default(),
        })
    }

    pub fn seq(&self) -> u64 {
        self.seq.load(Ordering::Acquire)
    }

    /// Number of indexed documents (with a geometry that has a bounding box).
    pub fn doc_count(&self) -> usize {
        self.tree.read().size()
    }

    /// Brings the index up to the database's latest change.
    pub fn update(&self, db: &Database) -> Result<()> {
        if self.seq() >= db.update_seq() {
            return Ok(());
        }
        let mut compiled = self.build.lock();
        if self.retired.load(Ordering::Acquire) {
            return Ok(());
        }
        if compiled.is_none() {
            let runtime = Runtime::new(Limits::default());
            *compiled = Some(runtime.compile_view_set(None, &[&self.def.program()])?);
        }
        let Some(views) = compiled.as_ref() else { return Ok(()) };
        self.apply_purges(db)?;
        bunko_indexer::run(&mut GeoUpdate { db, index: self, views }, &self.activity, 1)
    }

    /// Drops the documents purged since the index's purge seq (everything, from seq 0,
    /// when compaction already dropped the records it needed) and saves.
    fn apply_purges(&self, db: &Database) -> Result<()> {
        let (latest, ids) = db.purged_since(self.purge_seq.load(Ordering::Acquire))?;
        if latest <= self.purge_seq.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut seq = self.seq();
        let mut batch = Batch::new();
        match ids {
            Some(ids) => {
                let old = stored_entries(&self.keys, db, &ids)?;
                for id in &ids {
                    self.keys.delete(&mut batch, id);
                }
                let mut tree = self.tree.write();
                for old in &old {
                    tree.remove(old);
                }
            }
            None => {
                self.keys.clear(db)?;
                *self.tree.write() = RTree::new();
                seq = 0;
            }
        }
        self.keys.put_checkpoint(&mut batch, seq, latest);
        db.store().commit(batch)?;
        self.purge_seq.store(latest, Ordering::Release);
        self.seq.store(seq, Ordering::Release);
        Ok(())
    }

    /// Bytes of the index's keys and values in the store.
    pub fn disk_size(&self, db: &Database) -> u64 {
        self.keys.size(db)
    }

    /// Removes the index from the store, once any running update is done; it writes no
    /// more.
    pub fn retire(&self, db: &Database) -> Result<()> {
        let _update = self.build.lock();
        self.retired.store(true, Ordering::Release);
        self.keys.clear(db)
    }
}

/// One update of a geo index, as the index framework drives it.
struct GeoUpdate<'a> {
    db: &'a Database,
    index: &'a GeoIndex,
    views: &'a CompiledViews,
}

impl bunko_indexer::Build for GeoUpdate<'_> {
    type Error = Error;

    fn pending(&mut self) -> Result<u64> {
        self.db.pending_changes(self.index.seq())
    }

    fn step(&mut self) -> Result<Option<Page>> {
        let since = self.index.seq();
        let query = ChangesQuery {
            since,
            limit: Some(BATCH),
            descending: false,
            include_docs: true,
            all_leaves: false,
            filter: ChangesFilter::All,
        };
        let (mut last, mut changes, mut gone, mut inputs) = (since, 0, Vec::new(), Vec::new());
        // An index reads every document whole, as CouchDB's indexers do (as an admin).
        for row in self.db.changes(&bunko_engine::security::UserCtx::system(), query)? {
            let row = row?;
            last = row.seq;
            changes += 1;
            gone.push(row.id.clone());
            if row.deleted || kind(&row.id) == DocKind::Design {
                continue;
            }
            if let Some(doc) = row.doc {
                inputs.push((row.id, doc.rev.to_string(), crate::index::map_input(&doc)));
            }
        }
        if last == since {
            return Ok(None);
        }
        let texts: Vec<&str> = inputs.iter().map(|(_, _, t)| t.as_str()).collect();
        let outputs = self.views.map_batch_json(&texts)?;
        let keys = &self.index.keys;
        let old = stored_entries(keys, self.db, &gone)?;
        let mut batch = Batch::new();
        let mut found = Vec::new();
        for id in &gone {
            keys.delete(&mut batch, id);
        }
        for ((id, rev, _), output) in inputs.iter().zip(outputs) {
            output.trace(&self.index.def.ddoc);
            let rows = output.rows.into_iter().next().unwrap_or_default();
            let Some((json, _)) = rows.into_iter().next() else { continue };
            let Some(geometry) = parse_geojson(&json) else { continue };
            keys.put(&mut batch, id, rev, &json);
            found.extend(entry(id, &geometry));
        }
        keys.put_checkpoint(&mut batch, last, self.index.purge_seq.load(Ordering::Acquire));
        self.db.store().commit(batch)?;
        let mut tree = self.index.tree.write();
        for old in &old {
            tree.remove(old);
        }
        for new in found {
            tree.insert(new);
        }
        drop(tree);
        self.index.seq.store(last, Ordering::Release);
        Ok(Some(Page { changes, more: true }))
    }

    fn sync(&mut self) -> Result<()> {
        Ok(())
    }

    fn stopped(&self) -> bool {
        self.index.seq() >= self.db.update_seq() || self.db.is_dropped()
    }
}

/// How the query geometry must relate to a document's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Relation {
    Intersects,
    Contains,
    ContainsProperly,
    Within,
    Overlaps,
    Crosses,
    Touches,
    Disjoint,
    Equals,
    CoveredBy,
    Covers,
}

impl Relation {
    fn parse(name: &str) -> Result<Relation> {
        Ok(match name {
            "intersects" => Relation::Intersects,
            "contains" => Relation::Contains,
            "contains_properly" => Relation::ContainsProperly,
            "within" => Relation::Within,
            "overlaps" => Relation::Overlaps,
            "crosses" => Relation::Crosses,
            "touches" => Relation::Touches,
            "disjoint" => Relation::Disjoint,
            "equals" => Relation::Equals,
            "covered_by" => Relation::CoveredBy,
            "covers" => Relation::Covers,
            other => return Err(Error::BadRequest(format!("Unknown relation: {other}"))),
        })
    }

    /// Whether `query` relates so to `doc`.
    fn holds(self, query: &Geometry<f64>, doc: &Geometry<f64>) -> bool {
        let m = query.relate(doc);
        match self {
            Relation::Intersects => m.is_intersects(),
            Relation::Contains => m.is_contains(),
            // Contains, and the document does not touch the query geometry's boundary.
            Relation::ContainsProperly => m.matches("T**FF*FF*").unwrap_or(false),
            Relation::Within => m.is_within(),
            Relation::Overlaps => m.is_overlaps(),
            Relation::Crosses => m.is_crosses(),
            Relation::Touches => m.is_touches(),
            Relation::Disjoint => m.is_disjoint(),
            Relation::Equals => m.is_equal_topo(),
            Relation::CoveredBy => m.is_coveredby(),
            Relation::Covers => m.is_covers(),
        }
    }
}

/// The shape of a geo answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    View,
    GeoJson,
}

/// A geo request.
#[derive(Debug)]
pub struct GeoQuery {
    shape: Shape,
    nearest: bool,
    limit: usize,
    skip: usize,
    include_docs: bool,
    format: Format,
    pub update: Update,
}

#[derive(Debug)]
enum Shape {
    /// A geometry and the relation it must have to the document's.
    Relate(Geometry<f64>, Relation),
    /// Within `radius` metres of a point.
    Circle(Point<f64>, f64),
    /// Every document, by distance from a point (`lat`/`lon` with `nearest` only).
    Around(Point<f64>),
}

impl GeoQuery {
    /// Reads the parameters given by `get`.
    pub fn parse(get: &dyn Fn(&str) -> Option<String>) -> Result<GeoQuery> {
        let bad = |m: &str| Error::BadRequest(m.to_string());
        let number = |name: &str| -> Result<Option<f64>> {
            get(name)
                .map(|v| {
                    v.trim().parse::<f64>().map_err(|_| bad(&format!("{name} must be a number")))
                })
                .transpose()
        };
        let flag = |name: &str| get(name).is_some_and(|v| v == "true");
        let relation = Relation::parse(get("relation").as_deref().unwrap_or("intersects"))?;
        let point = match (number("lat")?, number("lon")?) {
            (Some(lat), Some(lon)) => Some(Point::new(lon, lat)),
            _ => None,
        };
        let shape = if let Some(bbox) = get("bbox") {
            let c: Vec<f64> = bbox.split(',').filter_map(|x| x.trim().parse().ok()).collect();
            let [x0, y0, x1, y1] = c[..] else {
                return Err(bad("bbox must be minlon,minlat,maxlon,maxlat"));
            };
            let rect = Rect::new(coord! {x: x0, y: y0}, coord! {x: x1, y: y1});
            Shape::Relate(Geometry::Rect(rect), relation)
        } else if let Some(text) = get("g") {
            use wkt::TryFromWkt;
            let geometry = Geometry::<f64>::try_from_wkt_str(&text)
                .map_err(|e| bad(&format!("invalid WKT: {e}")))?;
            Shape::Relate(geometry, relation)
        } else if let (Some(p), Some(radius)) = (point, number("radius")?) {
            Shape::Circle(p, radius)
        } else if let (Some(p), true) = (point, flag("nearest")) {
            Shape::Around(p)
        } else {
            return Err(bad(
                "A geo query needs bbox, g, lat/lon with radius, or lat/lon with nearest=true",
            ));
        };
        let skip = match get("bookmark") {
            Some(b) => decode_bookmark(&b)?,
            None => number("skip")?.map_or(0, |s| s.max(0.0) as usize),
        };
        let format = match get("format").as_deref() {
            None | Some("view") => Format::View,
            Some("geojson" | "legacy" | "application/vnd.geo+json") => Format::GeoJson,
            Some(other) => return Err(bad(&format!("Unknown format: {other}"))),
        };
        let update = Update::parse(get("update").as_deref(), get("stale").as_deref())
            .map_err(|name| bad(&format!("Invalid value for `{name}`.")))?;
        Ok(GeoQuery {
            shape,
            nearest: flag("nearest"),
            limit: number("limit")?.map_or(25, |l| l.max(0.0) as usize),
            skip,
            include_docs: flag("include_docs"),
            format,
            update,
        })
    }
}

fn decode_bookmark(bookmark: &str) -> Result<usize> {
    let bad = || Error::BadRequest("Invalid bookmark".into());
    let bytes = URL_SAFE_NO_PAD.decode(bookmark).map_err(|_| bad())?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    value.get(0).and_then(Value::as_u64).map(|n| n as usize).ok_or_else(bad)
}

/// Haversine metres from `p` to the nearest point of `g` (0 inside it).
fn distance(p: &Point<f64>, g: &Geometry<f64>) -> f64 {
    if g.contains(p) {
        return 0.0;
    }
    match g.closest_point(p) {
        Closest::SinglePoint(q) | Closest::Intersection(q) => Haversine.distance(*p, q),
        Closest::Indeterminate => f64::INFINITY,
    }
}

impl Shape {
    /// The box a matching document's box meets (`None`: any document may match).
    fn bounds(&self) -> Option<Rect<f64>> {
        match self {
            Shape::Relate(_, Relation::Disjoint) | Shape::Around(_) => None,
            Shape::Relate(geometry, _) => geometry.bounding_rect(),
            Shape::Circle(p, radius) => {
                let dlat = radius / METRES_PER_DEGREE;
                let dlon = dlat / p.y().to_radians().cos().abs().max(1e-6);
                Some(Rect::new(
                    coord! {x: p.x() - dlon, y: p.y() - dlat},
                    coord! {x: p.x() + dlon, y: p.y() + dlat},
                ))
            }
        }
    }

    /// Whether a document's geometry matches.
    fn matches(&self, doc: &Geometry<f64>) -> bool {
        match self {
            Shape::Relate(geometry, relation) => relation.holds(geometry, doc),
            Shape::Circle(p, radius) => distance(p, doc) <= *radius,
            Shape::Around(_) => true,
        }
    }

    /// The point `nearest` orders by.
    fn centre(&self) -> Option<Point<f64>> {
        match self {
            Shape::Relate(geometry, _) => geometry.centroid(),
            Shape::Circle(p, _) | Shape::Around(p) => Some(*p),
        }
    }
}

/// A tree entry as a query candidate: its id, and its geometry when it is a point.
fn candidate(e: &Entry) -> (Box<str>, Option<Point<f64>>) {
    let [x, y] = e.geom().lower();
    (e.data.id.clone(), e.data.point.then(|| Point::new(x, y)))
}

/// The ids of the documents of `index` that match `q`, in answer order: the candidates the
/// tree gives (all of them when the shape has no box), points decided from the tree alone
/// and other geometries read from the store (no snapshot: most queries have a few candidates
/// or none, and opening one per query is work they do not need), or every entry from one
/// snapshot when the shape has no box and most documents are not points.
fn matching(index: &GeoIndex, db: &Database, q: &GeoQuery) -> Result<Vec<String>> {
    let centre = q.shape.centre().filter(|_| q.nearest);
    let mut found: Vec<(String, f64)> = Vec::new();
    let mut offer = |id: String, geometry: Option<Geometry<f64>>| {
        if let Some(geometry) = geometry.filter(|g| q.shape.matches(g)) {
            let d = centre.map_or(0.0, |c| distance(&c, &geometry));
            found.push((id, d));
        }
    };
    let tree = index.tree.read();
    let candidates: Vec<(Box<str>, Option<Point<f64>>)> = match q.shape.bounds() {
        Some(r) => {
            let envelope = AABB::from_corners([r.min().x, r.min().y], [r.max().x, r.max().y]);
            tree.locate_in_envelope_intersecting(&envelope).map(candidate).collect()
        }
        None => tree.iter().map(candidate).collect(),
    };
    drop(tree);
    let shapes = candidates.iter().filter(|(_, point)| point.is_none()).count();
    if q.shape.bounds().is_none() && shapes * 4 > candidates.len() {
        // Mostly shapes, every one needed: one scan reads them cheaper than a read each.
        for stored in index.keys.entries(db.store().snapshot()) {
            let (id, _, json) = stored?;
            offer(id, parse_geojson(&json));
        }
    } else {
        for (id, point) in candidates {
            if let Some(point) = point {
                offer(id.into(), Some(Geometry::Point(point)));
            } else if let Some((_, json)) = index.keys.get(db.store().as_ref(), &id)? {
                offer(id.into(), parse_geojson(&json));
            }
        }
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    if centre.is_some() {
        found.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    }
    Ok(found.into_iter().map(|(id, _)| id).collect())
}

/// Runs `q` on `index` of `db`; `doc` loads a document for `include_docs`.
pub fn run(
    index: &GeoIndex,
    db: &Database,
    q: &GeoQuery,
    doc: &dyn Fn(&str) -> Option<Value>,
) -> Result<Value> {
    let found = matching(index, db, q)?;
    let page: Vec<&String> = found.iter().skip(q.skip).take(q.limit).collect();
    let bookmark = URL_SAFE_NO_PAD.encode(json!([q.skip + page.len()]).to_string());
    let mut rows = Vec::new();
    for id in page {
        let Some((rev, geometry)) = index.keys.get(db.store().as_ref(), id)? else { continue };
        let loaded = if q.include_docs { doc(id) } else { None };
        rows.push(match q.format {
            Format::View => {
                let mut row = json!({"id": id, "rev": rev, "geometry": geometry});
                if q.include_docs {
                    row["doc"] = loaded.unwrap_or(Value::Null);
                }
                row
            }
            Format::GeoJson => {
                let mut feature =
                    json!({"type": "Feature", "_id": id, "_rev": rev, "geometry": geometry});
                if let Some(doc) = loaded {
                    feature["properties"] = doc.get("properties").cloned().unwrap_or(doc);
                }
                feature
            }
        });
    }
    Ok(match q.format {
        Format::View => json!({"bookmark": bookmark, "rows": rows}),
        Format::GeoJson => {
            json!({"bookmark": bookmark, "type": "FeatureCollection", "features": rows})
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relations_read_the_query_geometry_against_the_documents() {
        let square = Geometry::Rect(Rect::new(coord! {x: 0.0, y: 0.0}, coord! {x: 10.0, y: 10.0}));
        let inside = Geometry::Point(Point::new(5.0, 5.0));
        let edge = Geometry::Point(Point::new(10.0, 5.0));
        assert!(Relation::Contains.holds(&square, &inside));
        assert!(Relation::ContainsProperly.holds(&square, &inside));
        assert!(!Relation::ContainsProperly.holds(&square, &edge));
        assert!(Relation::Touches.holds(&square, &edge));
        assert!(Relation::Within.holds(&inside, &square));
        assert!(Relation::Disjoint.holds(&square, &Geometry::Point(Point::new(20.0, 0.0))));
    }

    #[test]
    fn distances_are_haversine_metres() {
        let london = Point::new(-0.1278, 51.5074);
        let paris = Geometry::Point(Point::new(2.3522, 48.8566));
        let d = distance(&london, &paris);
        assert!((340_000.0..350_000.0).contains(&d), "{d}");
    }
}
