//! Change streams: `watch()` on a collection, a database (`aggregate: 1`) or the deployment
//! (`admin` with `allChangesForCluster: true`), which drivers send as `aggregate` whose first
//! stage is `$changeStream`. [`open`] is the one entry point; the lead's `aggregate` calls it
//! for such pipelines.
//!
//! A stream reads the engine's change events ([`bunko_engine::events`], the sequence entries
//! that feed CouchDB's `_changes`) of every engine database in its scope, so writes over the
//! HTTP API show up as well. Its position is a [`token::Token`]: the last seq read in each
//! database, by the database's numeric id, so a token resumes after a restart. Open streams
//! live in [`registry::Streams`]; a `getMore` that finds nothing waits (up to `maxTimeMS`,
//! default 1 s) on the databases' change notifications, off the blocking threads
//! (`conn.rs` re-runs the command when one fires).

mod diff;
mod event;
pub(crate) mod registry;
mod token;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::{Bson, Document, doc};
use bunko_doc::ejson;
use bunko_engine::security::UserCtx;
use bunko_engine::{Database, Engine};
use bunko_query::{Dialect, Selector};
use serde_json::Value;

use super::{Ctx, admin, coll_options, int_of};
use crate::error::MongoError;
use crate::names::Namespace;
use crate::projection::Projection;
use token::Token;

/// `fullDocument`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum FullMode {
    Default,
    UpdateLookup,
    WhenAvailable,
    Required,
}

/// `fullDocumentBeforeChange`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum BeforeMode {
    Off,
    WhenAvailable,
    Required,
}

/// What a stream watches.
#[derive(Debug, Clone)]
enum Scope {
    Collection(Namespace),
    Database(String),
    Cluster,
}

/// An open change stream.
pub(crate) struct Stream {
    scope: Scope,
    token: Token,
    /// Names of the databases read so far (for `drop` events).
    names: BTreeMap<u64, Namespace>,
    full: FullMode,
    before: BeforeMode,
    filter: Option<Selector>,
    projection: Option<Projection>,
    user: UserCtx,
    /// The stream was invalidated: nothing follows.
    done: bool,
}

/// `aggregate` with a leading `$changeStream`: opens the stream and answers its first batch.
pub(crate) fn open(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    let pipeline = match command.get("pipeline") {
        Some(Bson::Array(stages)) => stages,
        _ => return Err(MongoError::type_mismatch("'pipeline' option must be an array")),
    };
    let Some(Bson::Document(first)) = pipeline.first() else {
        return Err(MongoError::failed_to_parse("$changeStream must be the first stage"));
    };
    let spec = first.get_document("$changeStream").map_err(|_| {
        MongoError::type_mismatch("the $changeStream stage's specification must be an object")
    })?;
    let (scope, ns_text) = scope(ctx, command, spec)?;
    let mut stream = Stream::new(ctx, scope, spec)?;
    for stage in pipeline.iter().skip(1) {
        stream.add_stage(stage)?;
    }
    let size = batch_size(command)?;
    let (batch, _) = stream.next(&ctx.server.engine, size)?;
    let resume = stream.token.to_doc();
    let user = ctx.session.user.clone();
    let id = ctx.server.streams.open(ns_text.clone(), user, stream);
    Ok(
        doc! {"cursor": {"id": id, "ns": ns_text, "firstBatch": batch, "postBatchResumeToken": resume}},
    )
}

/// `getMore` on a stream cursor: the next events, or (none yet, time left) a request to
/// wait and run again.
pub(crate) fn get_more(
    ctx: &mut Ctx,
    id: i64,
    ns: &str,
    command: &Document,
) -> Result<Document, MongoError> {
    let wait = int_of(command, "maxTimeMS")?.map_or(1000, |ms| ms.clamp(0, 60_000) as u64);
    let until =
        *ctx.session.await_until.get_or_insert(Instant::now() + Duration::from_millis(wait));
    let size = int_of(command, "batchSize")?.map_or(0, |n| usize::try_from(n).unwrap_or(0));
    let engine = ctx.server.engine.clone();
    let user = ctx.session.user.clone();
    let step = ctx.server.streams.step(id, user.as_ref(), ns, |s| {
        let (batch, alive) = s.next(&engine, size)?;
        Ok(((batch, s.token.to_doc(), s.wake_on(&engine)), alive))
    })?;
    let ((batch, resume, wake), alive) = step;
    if batch.is_empty() && alive && Instant::now() < until {
        ctx.session.wait = Some(registry::Wait { wake, until });
        return Ok(Document::new());
    }
    ctx.session.await_until = None;
    let id = if alive { id } else { 0 };
    Ok(doc! {"cursor": {"id": id, "ns": ns, "nextBatch": batch, "postBatchResumeToken": resume}})
}

fn batch_size(command: &Document) -> Result<usize, MongoError> {
    let cursor = super::doc_of(command, "cursor")?;
    Ok(int_of(&cursor, "batchSize")?.map_or(0, |n| usize::try_from(n).unwrap_or(0)))
}

/// The stream's scope and the namespace its cursor reports.
fn scope(ctx: &Ctx, command: &Document, spec: &Document) -> Result<(Scope, String), MongoError> {
    let cluster = super::bool_of(spec, "allChangesForCluster", false)?;
    match command.iter().next() {
        Some((_, Bson::String(_))) if cluster => Err(MongoError::new(
            INVALID_OPTIONS,
            "InvalidOptions",
            "A $changeStream with 'allChangesForCluster:true' may only be opened on the 'admin' database, and with no collection name",
        )),
        Some((_, Bson::String(_))) => {
            let ns = super::namespace(ctx, command)?;
            let text = ns.full();
            Ok((Scope::Collection(ns), text))
        }
        Some((_, Bson::Int32(1) | Bson::Int64(1) | Bson::Double(1.0))) => {
            let text = format!("{}.$cmd.aggregate", ctx.db);
            match (ctx.db.as_str(), cluster) {
                ("admin", true) => Ok((Scope::Cluster, text)),
                (_, true) | ("admin", false) => Err(MongoError::new(
                    INVALID_OPTIONS,
                    "InvalidOptions",
                    "$changeStream on the admin database needs 'allChangesForCluster: true', and only there",
                )),
                _ => Ok((Scope::Database(ctx.db.clone()), text)),
            }
        }
        _ => Err(MongoError::failed_to_parse(
            "Invalid aggregate namespace: the first field must be a collection name or 1",
        )),
    }
}

/// MongoDB's `InvalidOptions`.
const INVALID_OPTIONS: i32 = 72;

impl Stream {
    fn new(ctx: &Ctx, scope: Scope, spec: &Document) -> Result<Stream, MongoError> {
        let full = match spec.get_str("fullDocument") {
            Err(_) | Ok("default") => FullMode::Default,
            Ok("updateLookup") => FullMode::UpdateLookup,
            Ok("whenAvailable") => FullMode::WhenAvailable,
            Ok("required") => FullMode::Required,
            Ok(other) => return Err(bad_mode("fullDocument", other)),
        };
        let before = match spec.get_str("fullDocumentBeforeChange") {
            Err(_) | Ok("off") => BeforeMode::Off,
            Ok("whenAvailable") => BeforeMode::WhenAvailable,
            Ok("required") => BeforeMode::Required,
            Ok(other) => return Err(bad_mode("fullDocumentBeforeChange", other)),
        };
        // The expanded events (`create`, `createIndexes`, `modify`, ...) are not reported yet:
        // asking for them must not wait for events that never come.
        if spec.get("showExpandedEvents").and_then(Bson::as_bool) == Some(true) {
            return Err(MongoError::not_implemented(
                "$changeStream showExpandedEvents: true is not supported yet",
            ));
        }
        for key in spec.keys() {
            let known = [
                "fullDocument",
                "fullDocumentBeforeChange",
                "resumeAfter",
                "startAfter",
                "startAtOperationTime",
                "allChangesForCluster",
                "showExpandedEvents",
            ];
            if !known.contains(&key.as_str()) {
                return Err(MongoError::new(
                    40415,
                    "Location40415",
                    format!("BSON field '$changeStream.{key}' is an unknown field."),
                ));
            }
        }
        let user = admin::user(ctx);
        let mut stream = Stream {
            scope,
            token: Token::default(),
            names: BTreeMap::new(),
            full,
            before,
            filter: None,
            projection: None,
            user,
            done: false,
        };
        stream.start(&ctx.server.engine, spec)?;
        Ok(stream)
    }

    /// Sets the starting position: a resume token, a time, or now.
    fn start(&mut self, engine: &Engine, spec: &Document) -> Result<(), MongoError> {
        let resume = match (spec.get("resumeAfter"), spec.get("startAfter")) {
            (Some(_), Some(_)) => {
                return Err(MongoError::new(
                    50865,
                    "Location50865",
                    "Do not specify both 'resumeAfter' and 'startAfter' in a $changeStream stage",
                ));
            }
            (Some(token), None) => {
                let token = Token::parse(token)?;
                if token.invalidate {
                    return Err(MongoError::new(
                        260,
                        "InvalidResumeToken",
                        "Attempting to resume a change stream using 'resumeAfter' is not allowed from an invalidate notification.",
                    ));
                }
                Some(token)
            }
            (None, Some(token)) => Some(Token::parse(token)?),
            (None, None) => None,
        };
        if let Some(token) = resume {
            self.token = token;
            return Ok(());
        }
        let at = match spec.get("startAtOperationTime") {
            None => None,
            Some(Bson::Timestamp(at)) => Some(u64::from(at.time) * 1000),
            Some(_) => {
                return Err(MongoError::type_mismatch("startAtOperationTime must be a timestamp"));
            }
        };
        for (id, (ns, db)) in self.databases(engine) {
            self.names.insert(id, ns);
            let seq = match at {
                Some(ms) => db.seq_before(ms)?,
                None => durable_seq(&db),
            };
            self.token.seqs.insert(id, seq);
            self.token.horizon = self.token.horizon.max(id);
        }
        Ok(())
    }

    /// `$match` and `$project` after `$changeStream` (the simple forms: a query filter on
    /// the event, an inclusion or exclusion projection).
    fn add_stage(&mut self, stage: &Bson) -> Result<(), MongoError> {
        let Bson::Document(stage) = stage else {
            return Err(MongoError::type_mismatch("each pipeline stage must be an object"));
        };
        match stage.iter().next() {
            Some((name, Bson::Document(spec))) if name == "$match" && self.filter.is_none() => {
                self.filter = Some(crate::query::selector(spec)?);
            }
            Some((name, Bson::Document(spec)))
                if name == "$project" && self.projection.is_none() =>
            {
                self.projection = Projection::parse(spec)?;
            }
            Some((name, _)) => {
                return Err(MongoError::not_implemented(format!(
                    "stage {name} after $changeStream is not supported yet (only one $match and one $project)"
                )));
            }
            None => return Err(MongoError::failed_to_parse("an empty pipeline stage")),
        }
        Ok(())
    }

    /// The engine databases in scope that the user may read, by id.
    fn databases(&self, engine: &Engine) -> BTreeMap<u64, (Namespace, Arc<Database>)> {
        let mut out = BTreeMap::new();
        for name in engine.db_names() {
            let Some(ns) = Namespace::from_engine(&name) else { continue };
            let inside = match &self.scope {
                Scope::Collection(want) => *want == ns,
                Scope::Database(db) => *db == ns.db,
                Scope::Cluster => !matches!(ns.db.as_str(), "admin" | "config" | "local"),
            };
            if !inside {
                continue;
            }
            if let Some(db) = engine.get_db(&name)
                && admin::readable(&db, &self.user)
            {
                out.insert(db.id(), (ns, db));
            }
        }
        out
    }

    /// The next batch (at most `size` events; `0`: 1000) and whether the stream goes on.
    fn next(&mut self, engine: &Engine, size: usize) -> Result<(Vec<Document>, bool), MongoError> {
        let limit = if size == 0 { 1000 } else { size };
        let mut batch = Vec::new();
        if self.done {
            return Ok((batch, false));
        }
        let live = self.databases(engine);
        self.dropped(engine, &live, &mut batch);
        if self.done {
            return Ok((batch, false));
        }
        for (id, (ns, db)) in &live {
            if let Some(old) = self.names.get(id).filter(|old| *old != ns) {
                batch.push(self.renamed(old, ns));
            }
            self.names.insert(*id, ns.clone());
            // A database the token does not name starts at its beginning if it was created
            // after the token (a higher id), else now (it was not readable then).
            let since = match self.token.seqs.get(id) {
                Some(seq) => *seq,
                None if *id > self.token.horizon => 0,
                None => durable_seq(db),
            };
            self.token.horizon = self.token.horizon.max(*id);
            let left = limit.saturating_sub(batch.len());
            if left == 0 {
                break;
            }
            self.read(db, ns, since, left as u64, &mut batch)?;
        }
        Ok((batch, true))
    }

    /// A `rename` event: the collection `from` is now `to` (`renameCollection`, which keeps
    /// the engine database and its id).
    fn renamed(&self, from: &Namespace, to: &Namespace) -> Document {
        let mut event = event::header(self.token.to_doc(), "rename", from, event::now_ms(), 0);
        event.insert("to", doc! {"db": &to.db, "coll": &to.coll});
        event
    }

    /// Adds `drop` events, or `rename` events for databases that live on under a name out
    /// of scope, for databases read before that are gone (and, for a collection stream, or a
    /// database stream whose last collection was dropped, what invalidates it).
    fn dropped(
        &mut self,
        engine: &Engine,
        live: &BTreeMap<u64, (Namespace, Arc<Database>)>,
        batch: &mut Vec<Document>,
    ) {
        let gone: Vec<u64> =
            self.token.seqs.keys().filter(|id| !live.contains_key(id)).copied().collect();
        if gone.is_empty() {
            return;
        }
        let (mut any, mut drop) = (None, false);
        for id in gone {
            self.token.seqs.remove(&id);
            if let Some(ns) = self.names.remove(&id) {
                let event = match renamed_to(engine, id) {
                    Some(to) => self.renamed(&ns, &to),
                    None => {
                        drop = true;
                        event::header(self.token.to_doc(), "drop", &ns, event::now_ms(), 0)
                    }
                };
                batch.push(event);
                any = Some(ns);
            }
        }
        let Some(ns) = any else { return };
        let ends = match &self.scope {
            Scope::Collection(_) => true,
            Scope::Database(_) if drop && live.is_empty() => {
                let mut dropped =
                    event::header(self.token.to_doc(), "dropDatabase", &ns, event::now_ms(), 0);
                dropped.insert("ns", doc! {"db": &ns.db});
                batch.push(dropped);
                true
            }
            _ => false,
        };
        if ends {
            self.token.invalidate = true;
            let mut invalidate =
                event::header(self.token.to_doc(), "invalidate", &ns, event::now_ms(), 0);
            invalidate.remove("ns");
            batch.push(invalidate);
            self.done = true;
        }
    }

    fn read(
        &mut self,
        db: &Arc<Database>,
        ns: &Namespace,
        since: u64,
        limit: u64,
        batch: &mut Vec<Document>,
    ) -> Result<(), MongoError> {
        let Some((events, reached)) = db.change_events(since, limit)? else {
            return Err(MongoError::new(
                286,
                "ChangeStreamHistoryLost",
                format!(
                    "Resume of change stream was not possible, as the resume point may no longer be in the journal of {} (trimmed by _compact)",
                    ns.full()
                ),
            ));
        };
        let options = coll_options::read(db);
        let render = event::Render {
            db,
            ns,
            full: self.full,
            before: self.before,
            images: coll_options::images(&options),
        };
        for ev in &events {
            self.token.seqs.insert(db.id(), ev.seq);
            let event = render.event(self.token.to_doc(), ev)?;
            if let Some(event) = self.shaped(event) {
                batch.push(event);
            }
        }
        self.token.seqs.insert(db.id(), reached);
        Ok(())
    }

    /// The event after the stream's `$match` and `$project`, if it passes.
    fn shaped(&self, event: Document) -> Option<Document> {
        if let Some(filter) = &self.filter {
            let view = ejson::match_view(&Value::Object(ejson::to_json(&event)));
            if !filter.matches(&view, Dialect::Mongo) {
                return None;
            }
        }
        Some(match &self.projection {
            Some(p) => p.apply(&event),
            None => event,
        })
    }

    /// What a waiting `getMore` wakes on: the change notifications of the databases in
    /// scope, and (`poll`) a short tick when new collections may appear.
    fn wake_on(&self, engine: &Engine) -> registry::Wake {
        let live = self.databases(engine);
        let poll = !matches!(self.scope, Scope::Collection(_)) || live.is_empty() || self.done;
        registry::Wake { receivers: live.values().map(|(_, db)| db.subscribe()).collect(), poll }
    }
}

/// The collection the engine database `id` is now, if it still exists (renamed).
fn renamed_to(engine: &Engine, id: u64) -> Option<Namespace> {
    engine.db_names().into_iter().find_map(|name| {
        engine.get_db(&name).filter(|db| db.id() == id)?;
        Namespace::from_engine(&name)
    })
}

/// The latest durable seq of `db`: where a new stream starts.
fn durable_seq(db: &Database) -> u64 {
    *db.subscribe().borrow()
}

fn bad_mode(field: &str, value: &str) -> MongoError {
    MongoError::bad_value(format!("'{value}' is not a valid value for {field}"))
}
