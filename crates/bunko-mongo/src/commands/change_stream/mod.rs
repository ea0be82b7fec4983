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

mod ddl;
mod diff;
mod event;
pub(crate) mod registry;
mod steps;
mod token;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use bson::{Bson, Document, doc};
use bunko_engine::security::UserCtx;
use bunko_engine::{Database, Engine};

use super::{Ctx, admin, coll_options, int_of};
use crate::Server;
use crate::error::MongoError;
use crate::names::Namespace;
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
    /// The stages after `$changeStream`.
    steps: Vec<steps::Step>,
    user: UserCtx,
    /// `showExpandedEvents`: DDL events, `collectionUUID`, `operationDescription`.
    expanded: bool,
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
    stream.steps = pipeline.iter().skip(1).map(steps::parse).collect::<Result<_, _>>()?;
    let size = batch_size(command)?;
    let (batch, alive) = stream.next(ctx.server, size)?;
    let resume = stream.token.to_doc();
    let user = ctx.session.user.clone();
    // A stream invalidated in its first batch has no cursor left to read.
    let id = if alive { ctx.server.streams.open(ns_text.clone(), user, stream) } else { 0 };
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
    let until = registry::deadline(ctx, command)?;
    let size = int_of(command, "batchSize")?.map_or(0, |n| usize::try_from(n).unwrap_or(0));
    let server = ctx.server;
    let user = ctx.session.user.clone();
    let step = ctx.server.streams.step(id, user.as_ref(), ns, |s| {
        let (batch, alive) = s.next(server, size)?;
        Ok(((batch, s.token.to_doc(), s.wake_on(&server.engine)), alive))
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
            // A collection the user may not follow is refused, as `find` and `_changes` are
            // (wider streams leave such collections out, as the listings do).
            let db = super::crud::readable_db(ctx, &ns, "aggregate")?;
            if db.is_some_and(|db| !watchable(&db, &admin::user(ctx))) {
                return Err(MongoError::unauthorized(format!(
                    "not authorized on {} to execute command {{ aggregate: \"{}\" }}",
                    ns.db, ns.coll
                )));
            }
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

/// Whether `user` may follow the events of `db`: a member who sees its documents whole,
/// as the read gate decides in `Database::change_events` (the users database, which may be
/// a CouchDB database without `$`, `_couchdb.<name>`, streams only for its admins). Asked
/// here too so that wider streams leave such databases out instead of failing.
fn watchable(db: &Database, user: &UserCtx) -> bool {
    admin::readable(db, user) && db.sight(user).is_ok_and(|sight| sight.is_whole())
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
        let expanded = super::bool_of(spec, "showExpandedEvents", false)?;
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
            steps: Vec::new(),
            user,
            expanded,
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
                && watchable(&db, &self.user)
            {
                out.insert(db.id(), (ns, db));
            }
        }
        out
    }

    /// The next batch (at most `size` events; `0`: 1000) and whether the stream goes on.
    fn next(&mut self, server: &Server, size: usize) -> Result<(Vec<Document>, bool), MongoError> {
        let limit = if size == 0 { 1000 } else { size };
        let mut batch = Vec::new();
        if self.done {
            return Ok((batch, false));
        }
        let live = self.databases(&server.engine);
        self.dropped(server, &live, &mut batch)?;
        if self.done {
            return Ok((batch, false));
        }
        for (id, (ns, db)) in &live {
            if batch.len() >= limit {
                break;
            }
            // A database the token does not name starts at its beginning if it was created
            // after the token (a higher id), else now (it was not readable then).
            let since = match self.token.seqs.get(id) {
                Some(seq) => *seq,
                None if *id > self.token.horizon => {
                    self.token.seqs.insert(*id, 0);
                    if self.expanded {
                        self.push(
                            ddl::create(self.token.to_doc(), db, ns, &self.user),
                            &mut batch,
                        )?;
                    }
                    0
                }
                None => durable_seq(db),
            };
            self.token.horizon = self.token.horizon.max(*id);
            // Renamed since it was last read (or, not read yet, renamed after `since`):
            // writes made before the rename are reported under the old name.
            let renamed = ddl::renamed(db);
            let old = match self.names.get(id) {
                Some(old) => Some(old.clone()),
                None => renamed.as_ref().filter(|r| r.seq > since).map(|r| r.from.clone()),
            };
            if let Some(old) = old.filter(|old| old != ns) {
                let until = renamed.map(|r| r.seq);
                let left = limit.saturating_sub(batch.len()) as u64;
                self.read(db, &old, since, left, until, &mut batch)?;
                if until.is_some_and(|u| self.token.seqs.get(id).is_some_and(|s| *s < u)) {
                    break;
                }
                self.push(self.renamed(db, &old, ns), &mut batch)?;
            }
            self.names.insert(*id, ns.clone());
            let since = self.token.seqs.get(id).copied().unwrap_or(since);
            let left = limit.saturating_sub(batch.len());
            if left == 0 {
                break;
            }
            self.read(db, ns, since, left as u64, None, &mut batch)?;
        }
        Ok((batch, true))
    }

    /// A `rename` event: the collection `from` (engine id `id`) is now `to`
    /// (`renameCollection`, which keeps the engine database and its id).
    fn renamed(&self, db: &Database, from: &Namespace, to: &Namespace) -> Document {
        let mut event = event::header(self.token.to_doc(), "rename", from, event::now_ms(), 0);
        let target = doc! {"db": &to.db, "coll": &to.coll};
        event.insert("to", target.clone());
        if self.expanded {
            event.insert("collectionUUID", ddl::uuid(db.id()));
            let mut description = doc! {"to": target};
            if let Some(dropped) = ddl::renamed(db).and_then(|r| r.dropped) {
                description.insert("dropTarget", ddl::uuid(dropped));
            }
            event.insert("operationDescription", description);
        }
        event
    }

    /// Adds `drop` events, or `rename` events for databases that live on under a name out
    /// of scope, for databases read before that are gone (and, for a collection stream, or a
    /// database stream whose last collection was dropped, what invalidates it).
    fn dropped(
        &mut self,
        server: &Server,
        live: &BTreeMap<u64, (Namespace, Arc<Database>)>,
        batch: &mut Vec<Document>,
    ) -> Result<(), MongoError> {
        let gone: Vec<u64> =
            self.token.seqs.keys().filter(|id| !live.contains_key(id)).copied().collect();
        if gone.is_empty() {
            return Ok(());
        }
        let (mut any, mut drop) = (None, false);
        for id in gone {
            let Some(ns) = self.last_name(server, id) else {
                self.token.seqs.remove(&id);
                continue;
            };
            let event = match renamed_to(&server.engine, id) {
                Some((to, db)) => {
                    // Its writes before the rename first, under the old name.
                    let since = self.token.seqs.get(&id).copied().unwrap_or_default();
                    let until = ddl::renamed(&db).map(|r| r.seq);
                    self.read(&db, &ns, since, 1000, until, batch)?;
                    self.renamed(&db, &ns, &to)
                }
                None => {
                    drop = true;
                    let mut event =
                        event::header(self.token.to_doc(), "drop", &ns, event::now_ms(), 0);
                    if self.expanded {
                        event.insert("collectionUUID", ddl::uuid(id));
                    }
                    event
                }
            };
            self.token.seqs.remove(&id);
            self.names.remove(&id);
            self.push(event, batch)?;
            any = Some(ns);
        }
        let Some(ns) = any else { return Ok(()) };
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
        Ok(())
    }

    /// The name under which the stream last read the database `id`: the one it read, or,
    /// for a stream resumed from a token, the name the database had before a rename the
    /// stream has not reported.
    fn last_name(&self, server: &Server, id: u64) -> Option<Namespace> {
        if let Some(ns) = self.names.get(&id) {
            return Some(ns.clone());
        }
        let since = self.token.seqs.get(&id).copied().unwrap_or_default();
        let (_, db) = renamed_to(&server.engine, id)?;
        ddl::renamed(&db).filter(|r| r.seq > since).map(|r| r.from)
    }

    /// Reads the events of `db` (named `ns`) after `since`, at most `limit`, and none past
    /// `until`.
    fn read(
        &mut self,
        db: &Arc<Database>,
        ns: &Namespace,
        since: u64,
        limit: u64,
        until: Option<u64>,
        batch: &mut Vec<Document>,
    ) -> Result<(), MongoError> {
        let Some((events, reached)) = db.change_events(&self.user, since, limit)? else {
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
            user: &self.user,
            ns,
            full: self.full,
            before: self.before,
            images: coll_options::images(&options),
            expanded: self.expanded,
        };
        for ev in events.iter().take_while(|ev| until.is_none_or(|u| ev.seq <= u)) {
            self.token.seqs.insert(db.id(), ev.seq);
            let token = self.token.to_doc();
            if ev.id == coll_options::DDOC && self.expanded {
                for event in ddl::events(&token, db.id(), ns, ev) {
                    self.push(event, batch)?;
                }
            } else if !ev.id.starts_with("_design/") {
                let event = render.event(token, ev)?;
                self.push(event, batch)?;
            }
        }
        let reached = until.map_or(reached, |u| reached.min(u).max(since));
        self.token.seqs.insert(db.id(), reached);
        Ok(())
    }

    /// Adds `event` to `batch` after the stream's stages, if it passes their `$match`.
    fn push(&self, event: Document, batch: &mut Vec<Document>) -> Result<(), MongoError> {
        if let Some(event) = steps::apply(&self.steps, event)? {
            batch.push(event);
        }
        Ok(())
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
fn renamed_to(engine: &Engine, id: u64) -> Option<(Namespace, Arc<Database>)> {
    engine.db_names().into_iter().find_map(|name| {
        let db = engine.get_db(&name).filter(|db| db.id() == id)?;
        Some((Namespace::from_engine(&name)?, db))
    })
}

/// The latest durable seq of `db`: where a new stream starts.
fn durable_seq(db: &Database) -> u64 {
    *db.subscribe().borrow()
}

fn bad_mode(field: &str, value: &str) -> MongoError {
    MongoError::bad_value(format!("'{value}' is not a valid value for {field}"))
}
