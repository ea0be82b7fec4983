//! The command table: every command Bunko answers, one module per family, looked up by
//! name as MongoDB does (exact names plus MongoDB's own aliases such as `ismaster` and
//! `buildinfo`). Before a command runs:
//!
//! 1. an unknown name is `CommandNotFound` (59) with MongoDB's message;
//! 2. on a connection that has not authenticated, anything but the handshake and
//!    authentication commands is `Unauthorized` (13);
//! 3. the command's fields are checked against what it implements: fields every command
//!    may carry (`$db`, `lsid`, `$clusterTime`, `$readPreference`, `comment`, `apiVersion`,
//!    ...) are accepted, options not implemented yet are `NotImplemented` (238), and
//!    anything else is MongoDB's unknown-field error (40415). Nothing is silently ignored.
//! 4. `let` is bound into the command's expressions ([`let_vars`]);
//! 5. `lsid`, `txnNumber`, `startTransaction` and `autocommit` route the command into a
//!    session's transaction or make it a retryable write ([`session`]).

mod admin;
mod advise;
mod agg_env;
mod agg_txn;
mod aggregate;
mod bulk;
pub(crate) mod capped;
mod capped_convert;
pub(crate) mod change_stream;
mod clustered;
mod coll_mod_index;
mod coll_mod_unique;
mod coll_options;
mod coll_stats_stage;
mod count;
mod crud;
mod cursor;
mod distinct;
mod explain;
mod handshake;
mod in_txn;
mod index_stats_stage;
mod indexes;
mod let_vars;
mod local_sessions_stage;
mod min_max;
mod pager;
pub(crate) mod point_read;
mod procedure;
mod replset;
pub(crate) mod roles;
mod sasl;
mod search_indexes;
mod session;
mod stats;
mod timeseries;
mod timeseries_coll_mod;
mod timeseries_index;
mod timeseries_modify;
mod timeseries_query;
mod timeseries_write;
mod txn_hint;
mod update;
#[cfg(test)]
mod update_golden;
mod users;
mod users_info;
mod validator_tree;
mod views;

use bson::{Bson, Document, doc};

use crate::error::MongoError;
use crate::{Server, Session};

pub(crate) use agg_env::from_expr as expr_error;

/// What a command runs with.
pub(crate) struct Ctx<'a> {
    pub server: &'a Server,
    pub session: &'a mut Session,
    /// `$db`.
    pub db: String,
    /// The command's `bypassDocumentValidation` (`insert`, `update`, `findAndModify`,
    /// `aggregate` with `$out`/`$merge`): its writes skip the collection validator, which
    /// the engine allows database admins only.
    pub bypass_document_validation: bool,
}

impl Ctx<'_> {
    /// The engine's options for this command's document writes.
    pub(crate) fn write_options(&self) -> bunko_engine::WriteOptions {
        bunko_engine::WriteOptions {
            bypass_document_validation: self.bypass_document_validation,
            ..Default::default()
        }
    }
}

type Handler = fn(&mut Ctx, &Document) -> Result<Document, MongoError>;

/// One entry of the table.
struct Command {
    name: &'static str,
    aliases: &'static [&'static str],
    /// Allowed before authentication.
    public: bool,
    /// Fields the command implements; `None`: it reads what it knows and ignores the rest
    /// (handshake commands, whose drivers send metadata).
    fields: Option<&'static [&'static str]>,
    run: Handler,
}

/// Fields any command may carry.
const GENERIC: &[&str] = &[
    "$db",
    "lsid",
    "$clusterTime",
    "$readPreference",
    "comment",
    "apiVersion",
    "apiStrict",
    "apiDeprecationErrors",
    "readConcern",
];

/// Options MongoDB has that Bunko does not implement yet: `NotImplemented`, not unknown.
const NOT_YET: &[&str] = &[
    "hint",
    "collation",
    "let",
    "maxTimeMS",
    "min",
    "max",
    "returnKey",
    "showRecordId",
    "tailable",
    "awaitData",
    "oplogReplay",
    "noCursorTimeout",
    "allowPartialResults",
    "collectionUUID",
    "bypassDocumentValidation",
    "capped",
    "size",
    "freeStorage",
    "validator",
    "validationLevel",
    "validationAction",
    "timeseries",
    "clusteredIndex",
    "viewOn",
    "pipeline",
    "expireAfterSeconds",
    "changeStreamPreAndPostImages",
    "storageEngine",
    "indexOptionDefaults",
    "encryptedFields",
];

/// What `createUser` and `updateUser` take.
const USER_FIELDS: &[&str] = &[
    "pwd",
    "customData",
    "roles",
    "mechanisms",
    "digestPassword",
    "writeConcern",
    "authenticationRestrictions",
];

/// The writes that `txnNumber` makes retryable outside a transaction.
const RETRYABLE: &[&str] = &["insert", "update", "delete", "findAndModify", "bulkWrite"];

#[rustfmt::skip]
const TABLE: &[Command] = &[
    Command { name: "hello", aliases: &[], public: true, fields: None, run: handshake::hello },
    Command { name: "isMaster", aliases: &["ismaster"], public: true, fields: None, run: handshake::is_master },
    Command { name: "ping", aliases: &[], public: true, fields: None, run: handshake::ping },
    Command { name: "buildInfo", aliases: &["buildinfo"], public: true, fields: None, run: handshake::build_info },
    Command { name: "saslStart", aliases: &[], public: true, fields: None, run: sasl::start },
    Command { name: "saslContinue", aliases: &[], public: true, fields: None, run: sasl::next },
    Command { name: "logout", aliases: &[], public: true, fields: None, run: sasl::logout },
    Command { name: "connectionStatus", aliases: &[], public: true, fields: None, run: handshake::connection_status },
    Command { name: "endSessions", aliases: &[], public: true, fields: None, run: session::end_sessions },
    Command { name: "killSessions", aliases: &[], public: false, fields: None, run: session::end_sessions },
    Command { name: "killAllSessions", aliases: &[], public: false, fields: None, run: session::kill_all_sessions },
    Command { name: "commitTransaction", aliases: &[], public: false, fields: Some(&["writeConcern", "recoveryToken", "maxTimeMS"]), run: session::outside },
    Command { name: "abortTransaction", aliases: &[], public: false, fields: Some(&["writeConcern", "recoveryToken", "maxTimeMS"]), run: session::outside },
    Command { name: "getParameter", aliases: &[], public: false, fields: None, run: handshake::get_parameter },
    Command { name: "configureFailPoint", aliases: &[], public: false, fields: None, run: handshake::configure_fail_point },
    Command { name: "replSetGetStatus", aliases: &[], public: false, fields: Some(&[]), run: replset::status },
    Command { name: "replSetGetConfig", aliases: &[], public: false, fields: Some(&[]), run: replset::config },
    Command { name: "getCmdLineOpts", aliases: &[], public: false, fields: None, run: handshake::get_cmd_line_opts },
    Command { name: "hostInfo", aliases: &[], public: false, fields: None, run: handshake::host_info },
    Command { name: "serverStatus", aliases: &[], public: false, fields: None, run: handshake::server_status },
    Command { name: "whatsmyuri", aliases: &[], public: false, fields: None, run: handshake::whatsmyuri },
    Command { name: "getLog", aliases: &[], public: false, fields: None, run: handshake::get_log },
    Command { name: "listDatabases", aliases: &[], public: false, fields: Some(&["filter", "nameOnly", "authorizedDatabases"]), run: admin::list_databases },
    Command { name: "listCollections", aliases: &[], public: false, fields: Some(&["filter", "nameOnly", "authorizedCollections", "cursor"]), run: admin::list_collections },
    Command { name: "create", aliases: &[], public: false, fields: Some(&["writeConcern", "capped", "size", "max", "validator", "validationLevel", "validationAction", "changeStreamPreAndPostImages", "viewOn", "pipeline", "clusteredIndex", "timeseries", "expireAfterSeconds"]), run: admin::create },
    Command { name: "collMod", aliases: &[], public: false, fields: Some(&["writeConcern", "validator", "validationLevel", "validationAction", "changeStreamPreAndPostImages", "cappedSize", "cappedMax", "timeseries", "expireAfterSeconds", "index"]), run: admin::coll_mod },
    Command { name: "drop", aliases: &[], public: false, fields: Some(&["writeConcern"]), run: admin::drop },
    Command { name: "dropDatabase", aliases: &[], public: false, fields: Some(&["writeConcern"]), run: admin::drop_database },
    Command { name: "insert", aliases: &[], public: false, fields: Some(&["bypassDocumentValidation", "documents", "ordered", "writeConcern", "txnNumber"]), run: crud::insert },
    Command { name: "find", aliases: &[], public: false, fields: Some(&["filter", "projection", "sort", "skip", "limit", "batchSize", "singleBatch", "readConcern", "allowDiskUse", "hint", "collation", "tailable", "awaitData", "maxTimeMS", "min", "max", "returnKey", "showRecordId"]), run: crud::find },
    Command { name: "delete", aliases: &[], public: false, fields: Some(&["deletes", "ordered", "writeConcern", "txnNumber"]), run: crud::delete },
    Command { name: "count", aliases: &[], public: false, fields: Some(&["query", "limit", "skip", "readConcern", "hint", "collation", "maxTimeMS"]), run: count::count },
    Command { name: "update", aliases: &[], public: false, fields: Some(&["bypassDocumentValidation", "updates", "ordered", "writeConcern", "txnNumber"]), run: update::update },
    Command { name: "findAndModify", aliases: &["findandmodify"], public: false, fields: Some(&["bypassDocumentValidation", "query", "sort", "remove", "update", "new", "fields", "upsert", "arrayFilters", "hint", "collation", "writeConcern", "txnNumber"]), run: update::find_and_modify },
    Command { name: "distinct", aliases: &[], public: false, fields: Some(&["key", "query", "readConcern", "hint", "collation", "maxTimeMS"]), run: distinct::distinct },
    Command { name: "explain", aliases: &[], public: false, fields: Some(&["verbosity"]), run: explain::explain },
    Command { name: "listIndexes", aliases: &[], public: false, fields: Some(&["cursor"]), run: indexes::list_indexes },
    Command { name: "createIndexes", aliases: &["createindexes"], public: false, fields: Some(&["indexes", "writeConcern", "commitQuorum"]), run: indexes::create_indexes },
    Command { name: "dropIndexes", aliases: &["dropindexes", "deleteIndexes"], public: false, fields: Some(&["index", "writeConcern"]), run: indexes::drop_indexes },
    Command { name: "createSearchIndexes", aliases: &[], public: false, fields: None, run: search_indexes::refuse },
    Command { name: "updateSearchIndex", aliases: &[], public: false, fields: None, run: search_indexes::refuse },
    Command { name: "dropSearchIndex", aliases: &[], public: false, fields: None, run: search_indexes::refuse },
    Command { name: "cloneCollectionAsCapped", aliases: &[], public: false, fields: Some(&["toCollection", "size", "writeConcern"]), run: capped_convert::clone_collection_as_capped },
    Command { name: "convertToCapped", aliases: &[], public: false, fields: Some(&["size", "writeConcern"]), run: capped_convert::convert_to_capped },
    Command { name: "renameCollection", aliases: &["renamecollection"], public: false, fields: Some(&["to", "dropTarget", "writeConcern"]), run: stats::rename_collection },
    Command { name: "collStats", aliases: &["collstats"], public: false, fields: Some(&["scale"]), run: stats::coll_stats },
    Command { name: "dbStats", aliases: &["dbstats"], public: false, fields: Some(&["scale"]), run: admin::db_stats },
    Command { name: "callProcedure", aliases: &[], public: false, fields: Some(&["designDoc", "procedure", "arg"]), run: procedure::call },
    Command { name: "advise", aliases: &[], public: false, fields: Some(&["sampleSize", "timeBudgetMS"]), run: advise::advise },
    Command { name: "aggregate", aliases: &[], public: false, fields: Some(&["pipeline", "cursor", "explain", "allowDiskUse", "let", "hint", "collation", "maxTimeMS", "readConcern", "writeConcern", "bypassDocumentValidation"]), run: aggregate::aggregate },
    Command { name: "bulkWrite", aliases: &[], public: false, fields: Some(&["ops", "nsInfo", "ordered", "errorsOnly", "cursor", "writeConcern", "txnNumber", "bypassDocumentValidation"]), run: bulk::bulk_write },
    Command { name: "createUser", aliases: &[], public: false, fields: Some(USER_FIELDS), run: users::create_user },
    Command { name: "updateUser", aliases: &[], public: false, fields: Some(USER_FIELDS), run: users::update_user },
    Command { name: "dropUser", aliases: &[], public: false, fields: Some(&["writeConcern"]), run: users::drop_user },
    Command { name: "usersInfo", aliases: &[], public: false, fields: Some(&["showCredentials", "showCustomData", "showPrivileges", "showAuthenticationRestrictions", "filter"]), run: users_info::users_info },
    Command { name: "grantRolesToUser", aliases: &[], public: false, fields: Some(&["roles", "writeConcern"]), run: users::grant_roles },
    Command { name: "revokeRolesFromUser", aliases: &[], public: false, fields: Some(&["roles", "writeConcern"]), run: users::revoke_roles },
    Command { name: "rolesInfo", aliases: &[], public: false, fields: Some(&["showBuiltinRoles", "showPrivileges", "showAuthenticationRestrictions"]), run: users::roles_info },
    Command { name: "getMore", aliases: &[], public: false, fields: Some(&["collection", "batchSize", "maxTimeMS"]), run: cursor::get_more },
    Command { name: "killCursors", aliases: &[], public: false, fields: Some(&["cursors"]), run: cursor::kill_cursors },
];

/// Runs one command; the reply and whether it must go uncompressed (handshake and
/// authentication replies, as the compression spec requires).
pub(crate) fn run(
    server: &Server,
    session: &mut Session,
    command: &Document,
) -> Result<(Document, bool), MongoError> {
    let Some((name, _)) = command.iter().next() else {
        return Err(MongoError::failed_to_parse("no command name in the request"));
    };
    tracing::debug!(fields = ?command.keys().collect::<Vec<_>>(), "mongo command");
    let Some(entry) = TABLE.iter().find(|c| c.name == name || c.aliases.contains(&name.as_str()))
    else {
        return Err(MongoError::command_not_found(name));
    };
    crate::auth::refresh(&server.engine, &mut session.user, &mut session.user_seq);
    if !entry.public && session.user.is_none() {
        return Err(MongoError::unauthorized(format!(
            "Command {} requires authentication",
            entry.name
        )));
    }
    let bound = let_vars::bind(entry.name, command)?;
    let command = bound.as_ref().unwrap_or(command);
    let txn = session::Fields::parse(command)?;
    let ends_txn = matches!(entry.name, "commitTransaction" | "abortTransaction");
    // An insert's documents kept as bytes ([`wire::Request::documents`]) go to `crud::insert`;
    // inside a transaction they are decoded into the command as before.
    let decoded;
    let command = match session.documents.take() {
        Some(docs) if txn.in_txn || entry.name != "insert" => {
            decoded = with_documents(command, &docs)?;
            &decoded
        }
        docs => {
            session.documents = docs;
            command
        }
    };
    if let Some(fields) = entry.fields {
        let extra: &[&str] = if txn.in_txn || ends_txn {
            session::SESSION_FIELDS
        } else if txn.txn_number.is_some() && RETRYABLE.contains(&entry.name) {
            &["stmtId", "stmtIds"]
        } else {
            &[]
        };
        check_fields(entry.name, command, fields, extra)?;
    }
    let db = match command.get("$db") {
        Some(Bson::String(db)) => db.clone(),
        Some(_) => return Err(MongoError::type_mismatch("$db must be a string")),
        None => {
            return Err(MongoError::failed_to_parse(
                "BSON field '$db' is missing but a required field",
            ));
        }
    };
    crate::names::check_db(&db)?;
    let reads = entry.fields.is_some_and(|f| f.contains(&"readConcern"));
    check_read_concern(entry.name, command, txn.in_txn, reads)?;
    let plain = entry.public || entry.name == "getParameter";
    let bypass_document_validation = bool_of(command, "bypassDocumentValidation", false)?;
    let retryable_write =
        (txn.txn_number.is_some() && !txn.in_txn && RETRYABLE.contains(&entry.name)) || ends_txn;
    let failure = server.fail_points.check(entry.name, session.app_name.as_deref());
    if let Some(failure) = &failure {
        if let Some(block) = failure.block {
            std::thread::sleep(block);
        }
        if failure.close_connection {
            session.close = true;
            return Err(MongoError::internal("connection closed by a fail point"));
        }
        let context = crate::fail_point::Context {
            retryable_write,
            in_txn: txn.in_txn && !ends_txn,
            commit: entry.name == "commitTransaction",
            get_more: entry.name == "getMore",
        };
        if let Some(err) = failure.error(context) {
            return Err(err);
        }
    }
    let retryable = txn.txn_number.is_some() && !txn.in_txn && RETRYABLE.contains(&entry.name);
    let close_after = if retryable && !session::done_before(server, session, &txn) {
        match server.fail_points.check_primary_write(statements(command, session)) {
            Some(crate::fail_point::PrimaryWriteFailure::Fail(err)) => return Err(err),
            Some(crate::fail_point::PrimaryWriteFailure::CloseBefore) => {
                session.close = true;
                return Err(MongoError::internal("connection closed by a fail point"));
            }
            Some(crate::fail_point::PrimaryWriteFailure::CloseAfter) => true,
            None => false,
        }
    } else {
        false
    };
    // Writes over HTTP since the last command have a cluster time too.
    server.clock.observe(bunko_engine::db_updates::global().last_seq());
    // A write advances the cluster time when it is done (also when it failed part-way), so
    // a snapshot taken at a cluster time holds every write up to it.
    let _tick = crate::clock::TickAfter(writes(entry.name, command).then_some(&server.clock));
    let mut ctx = Ctx { server, session, db, bypass_document_validation };
    // A command's own `collation` (`aggregate` reads its own; write statements carry theirs;
    // `explain` plans the explained command under that command's).
    let collation = match (entry.fields, command.get("explain")) {
        (_, Some(Bson::Document(explained))) if entry.name == "explain" => {
            crate::query::collation_of(explained)?
        }
        (Some(fields), _) if fields.contains(&"collation") && entry.name != "aggregate" => {
            crate::query::collation_of(command)?
        }
        _ => None,
    };
    let deadline = read_deadline(server, entry.name, command)?;
    let run = || {
        bunko_query::collation::with(collation, || {
            let retryable = txn.txn_number.is_some() && RETRYABLE.contains(&entry.name);
            // A retryable write runs a view's (a time-series collection's) write once too.
            let view = match txn.in_txn || ends_txn {
                false if retryable => None,
                false => views::run(&mut ctx, entry.name, command)?,
                true => timeseries::outside_transactions(&ctx, command).map(|()| None)?,
            };
            if let Some(reply) = view {
                Ok(reply)
            } else if txn.in_txn || ends_txn {
                session::in_transaction(&mut ctx, entry.name, &txn, command)
            } else if snapshot_read(command) {
                session::snapshot_read(&mut ctx, entry.name, command)
            } else if retryable {
                session::retryable(&mut ctx, &txn, |ctx| {
                    match views::run(ctx, entry.name, command)? {
                        Some(reply) => Ok(reply),
                        None => (entry.run)(ctx, command),
                    }
                })
            } else {
                (entry.run)(&mut ctx, command)
            }
        })
    };
    let mut reply = bunko_engine::deadline::with(deadline, run)?;
    if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
        // Past `maxTimeMS`: the answer is dropped, and so is its cursor.
        if let Some(id) = reply.get_document("cursor").ok().and_then(|c| c.get_i64("id").ok()) {
            let user = ctx.session.user.as_ref();
            let _ = server.cursors.kill(id, user) || server.tails.kill(id, user);
        }
        return Err(crud::max_time_expired());
    }
    if let Some(failure) = failure {
        failure.add_write_concern_error(&mut reply, retryable_write);
    }
    ctx.session.close |= close_after;
    reply.insert("ok", 1.0);
    Ok((reply, plain))
}

/// When a read with a `maxTimeMS` (`find`, `aggregate`, `count`, `distinct`; `0`: none) that
/// starts now must be done (now under the `maxTimeAlwaysTimeOut` fail point).
fn read_deadline(
    server: &Server,
    name: &str,
    command: &Document,
) -> Result<Option<std::time::Instant>, MongoError> {
    if !["find", "aggregate", "count", "distinct"].contains(&name) {
        return Ok(None);
    }
    let Some(ms) = crud::non_negative(command, "maxTimeMS")?.filter(|&ms| ms > 0) else {
        return Ok(None);
    };
    let now = std::time::Instant::now();
    Ok(Some(match server.fail_points.max_time_always() {
        true => now,
        false => now + std::time::Duration::from_millis(ms as u64),
    }))
}

/// How many statements a write command holds (`insert`'s documents, `update`'s and
/// `delete`'s statements, `bulkWrite`'s operations; `findAndModify` is one).
fn statements(command: &Document, session: &Session) -> u64 {
    if let Some(docs) = &session.documents {
        return docs.len() as u64;
    }
    let list = ["documents", "updates", "deletes", "ops"].iter().find_map(|f| command.get(*f));
    match list {
        Some(Bson::Array(items)) => items.len() as u64,
        _ => 1,
    }
}

/// `command` with an insert's documents kept as bytes decoded into its `documents`.
fn with_documents(
    command: &Document,
    docs: &[bson::RawDocumentBuf],
) -> Result<Document, MongoError> {
    let mut out = command.clone();
    let decoded = docs.iter().map(|raw| crate::wire::decoded(raw).map(Bson::Document));
    out.insert("documents", decoded.collect::<Result<Vec<_>, _>>()?);
    Ok(out)
}

/// Whether a command outside a transaction asks for a snapshot read.
fn snapshot_read(command: &Document) -> bool {
    command
        .get_document("readConcern")
        .is_ok_and(|c| c.get_str("level").is_ok_and(|l| l == "snapshot"))
}

/// Whether a command writes, so that it advances the cluster time ([`crate::clock`]).
fn writes(name: &str, command: &Document) -> bool {
    const WRITES: &[&str] = &[
        "insert",
        "update",
        "delete",
        "findAndModify",
        "bulkWrite",
        "commitTransaction",
        "create",
        "collMod",
        "drop",
        "dropDatabase",
        "createIndexes",
        "dropIndexes",
        "renameCollection",
        "cloneCollectionAsCapped",
        "convertToCapped",
        "createUser",
        "updateUser",
        "dropUser",
        "grantRolesToUser",
        "revokeRolesFromUser",
    ];
    let out = |stage: &Bson| matches!(stage, Bson::Document(s) if s.contains_key("$out") || s.contains_key("$merge"));
    WRITES.contains(&name)
        || (name == "aggregate"
            && matches!(command.get("pipeline"), Some(Bson::Array(p)) if p.iter().any(out)))
}

/// The commands that read at a snapshot outside transactions.
const SNAPSHOT_READS: &[&str] = &["find", "aggregate", "distinct", "count"];

/// Every read sees one storage snapshot per batch, which is what `local`, `available` and
/// (on one node) `majority` and `linearizable` promise; a transaction reads one snapshot
/// throughout, which is `snapshot`; `snapshot` outside a transaction is [`snapshot_read`].
/// `afterClusterTime` is met by any read (one node: every acknowledged write is visible).
/// Every command may carry a `readConcern` (a generic argument: causally consistent
/// sessions send `afterClusterTime` on writes too); one that reads nothing takes no level
/// but `local`, as in MongoDB.
fn check_read_concern(
    name: &str,
    command: &Document,
    in_txn: bool,
    reads: bool,
) -> Result<(), MongoError> {
    let Ok(concern) = command.get_document("readConcern") else { return Ok(()) };
    if !reads && !in_txn && concern.get_str("level").is_ok_and(|l| l != "local") {
        return Err(MongoError::new(
            72,
            "InvalidOptions",
            format!("Command {name} does not support {{ readConcern: {concern} }}"),
        ));
    }
    match concern.get_str("level") {
        Err(_) | Ok("local" | "available" | "majority") => Ok(()),
        Ok("snapshot") if in_txn || SNAPSHOT_READS.contains(&name) => Ok(()),
        // One node: a read sees every acknowledged write, which is what linearizable asks.
        Ok("linearizable") if !in_txn && name == "aggregate" && writes(name, command) => {
            Err(MongoError::new(
                72,
                "InvalidOptions",
                "$out and $merge cannot be used with a 'linearizable' read concern level",
            ))
        }
        Ok("linearizable") if !in_txn && SNAPSHOT_READS.contains(&name) => Ok(()),
        Ok(level) => Err(MongoError::not_implemented(format!(
            "readConcern level '{level}' is not supported yet"
        ))),
    }
}

fn check_fields(
    name: &str,
    command: &Document,
    fields: &[&str],
    extra: &[&str],
) -> Result<(), MongoError> {
    for key in command.keys().skip(1) {
        let key = key.as_str();
        if GENERIC.contains(&key) || fields.contains(&key) || extra.contains(&key) {
            continue;
        }
        if NOT_YET.contains(&key) {
            return Err(MongoError::not_implemented(format!(
                "option '{key}' of {name} is not supported yet"
            )));
        }
        return Err(MongoError::unknown_field(&format!("{name}.{key}")));
    }
    Ok(())
}

/// The namespace `coll` names in the current database (the command's first value).
pub(crate) fn namespace(
    ctx: &Ctx,
    command: &Document,
) -> Result<crate::names::Namespace, MongoError> {
    match command.iter().next() {
        Some((_, Bson::String(coll))) => crate::names::Namespace::new(&ctx.db, coll),
        Some((name, _)) => Err(MongoError::new(
            73,
            "InvalidNamespace",
            format!("collection name has invalid type {}", type_of(command.get(name))),
        )),
        None => Err(MongoError::failed_to_parse("no collection name")),
    }
}

pub(crate) fn type_of(value: Option<&Bson>) -> String {
    value.map(|v| format!("{:?}", v.element_type())).unwrap_or_default().to_lowercase()
}

/// A cursor reply (`firstBatch`/`nextBatch`).
pub(crate) fn cursor_reply(id: i64, ns: &str, key: &str, docs: Vec<Document>) -> Document {
    doc! { "cursor": { "id": id, "ns": ns, key: docs } }
}

/// A field as an integer of any numeric type.
pub(crate) fn int_of(command: &Document, field: &str) -> Result<Option<i64>, MongoError> {
    match command.get(field) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Int32(i)) => Ok(Some(i64::from(*i))),
        Some(Bson::Int64(i)) => Ok(Some(*i)),
        Some(Bson::Double(d)) if d.fract() == 0.0 => Ok(Some(*d as i64)),
        Some(_) => Err(MongoError::type_mismatch(format!(
            "BSON field '{field}' is the wrong type, expected a number"
        ))),
    }
}

/// A boolean field (MongoDB also takes numbers).
pub(crate) fn bool_of(command: &Document, field: &str, default: bool) -> Result<bool, MongoError> {
    match command.get(field) {
        None => Ok(default),
        Some(Bson::Boolean(b)) => Ok(*b),
        Some(Bson::Int32(i)) => Ok(*i != 0),
        Some(Bson::Int64(i)) => Ok(*i != 0),
        Some(Bson::Double(d)) => Ok(*d != 0.0),
        Some(_) => Err(MongoError::type_mismatch(format!(
            "BSON field '{field}' is the wrong type, expected a boolean"
        ))),
    }
}

/// A document field (absent: empty).
pub(crate) fn doc_of(command: &Document, field: &str) -> Result<Document, MongoError> {
    match command.get(field) {
        None | Some(Bson::Null) => Ok(Document::new()),
        Some(Bson::Document(d)) => Ok(d.clone()),
        Some(_) => Err(MongoError::type_mismatch(format!(
            "BSON field '{field}' is the wrong type, expected an object"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_and_alias_is_unique() {
        let mut names: Vec<&str> = TABLE
            .iter()
            .flat_map(|c| std::iter::once(c.name).chain(c.aliases.iter().copied()))
            .collect();
        let total = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), total);
    }
}
