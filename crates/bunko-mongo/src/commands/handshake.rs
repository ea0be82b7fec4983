//! The handshake and the server-information commands drivers and shells send on connect:
//! `hello`/`isMaster` (a one-member replica set, so drivers enable sessions), `ping`,
//! `buildInfo`, `getParameter`, `getCmdLineOpts`, `hostInfo`, `serverStatus`,
//! `connectionStatus`, `whatsmyuri`, `getLog`, `endSessions`.

use bson::{Bson, Document, doc};

use super::{Ctx, sasl};
use crate::error::MongoError;
use crate::wire::{self, Compressor};

/// The MongoDB version Bunko answers as (drivers gate features on it).
const VERSION: &str = "8.0.0";
const VERSION_ARRAY: [i32; 4] = [8, 0, 0, 0];
/// MongoDB 8.0's wire version.
const MAX_WIRE_VERSION: i32 = 25;
/// The replica set's name.
pub const SET_NAME: &str = "bunko";

pub(super) fn hello(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    topology(ctx, command, "isWritablePrimary")
}

pub(super) fn is_master(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    topology(ctx, command, "ismaster")
}

fn topology(
    ctx: &mut Ctx,
    command: &Document,
    primary_field: &str,
) -> Result<Document, MongoError> {
    let app = command.get_document("client").and_then(|c| c.get_document("application"));
    if let Ok(name) = app.and_then(|a| a.get_str("name")) {
        ctx.session.app_name = Some(name.to_string());
    }
    let me = ctx.session.local.to_string();
    let now = bson::DateTime::now();
    let mut reply = Document::new();
    if command.contains_key("helloOk") {
        reply.insert("helloOk", true);
    }
    reply.insert(primary_field, true);
    reply.insert("topologyVersion", doc! {"processId": ctx.server.process_id, "counter": 0_i64});
    reply.extend(doc! {
        "hosts": [&me], "setName": SET_NAME, "setVersion": 1, "secondary": false,
        "primary": &me, "me": &me,
        "electionId": bson::oid::ObjectId::from_bytes([0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 1]),
        "lastWrite": {
            "opTime": {"ts": bson::Timestamp { time: now_secs(), increment: 1 }, "t": 1_i64},
            "lastWriteDate": now,
            "majorityOpTime": {"ts": bson::Timestamp { time: now_secs(), increment: 1 }, "t": 1_i64},
            "majorityWriteDate": now,
        },
        "maxBsonObjectSize": wire::MAX_BSON_SIZE as i32,
        "maxMessageSizeBytes": wire::MAX_MESSAGE_SIZE as i32,
        "maxWriteBatchSize": 100_000,
        "localTime": now,
        "logicalSessionTimeoutMinutes": 30,
        "connectionId": ctx.session.id as i32,
        "minWireVersion": 0,
        "maxWireVersion": MAX_WIRE_VERSION,
        "readOnly": false,
    });
    if let Some(Bson::Array(asked)) = command.get("compression") {
        let chosen = negotiate(asked);
        ctx.session.compressors = chosen.iter().map(|(_, c)| *c).collect();
        reply.insert("compression", chosen.into_iter().map(|(n, _)| n).collect::<Vec<_>>());
    }
    if let Ok(user) = command.get_str("saslSupportedMechs") {
        // `db.user`: users are server-wide, so the database part is not looked at.
        let name = user.split_once('.').map_or(user, |(_, name)| name);
        reply.insert("saslSupportedMechs", ctx.server.auth.mechanisms(&ctx.server.engine, name));
    }
    if let Some(Bson::Document(spec)) = command.get("speculativeAuthenticate") {
        // The driver's first SCRAM step, answered in the hello reply; if it fails the
        // driver simply authenticates the long way.
        if let Ok(step) = sasl::speculative(ctx, spec) {
            reply.insert("speculativeAuthenticate", step);
        }
    }
    Ok(reply)
}

/// The compressors the client offered that Bunko has, in the client's order.
fn negotiate(asked: &[Bson]) -> Vec<(String, Compressor)> {
    asked
        .iter()
        .filter_map(Bson::as_str)
        .filter_map(|name| match name {
            "zstd" => Some((name.to_string(), Compressor::Zstd)),
            "snappy" => Some((name.to_string(), Compressor::Snappy)),
            "zlib" => Some((name.to_string(), Compressor::Zlib)),
            _ => None,
        })
        .collect()
}

fn now_secs() -> u32 {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    u32::try_from(secs).unwrap_or(u32::MAX)
}

pub(super) fn ping(_: &mut Ctx, _: &Document) -> Result<Document, MongoError> {
    Ok(Document::new())
}

pub(super) fn build_info(_: &mut Ctx, _: &Document) -> Result<Document, MongoError> {
    Ok(doc! {
        "version": VERSION, "gitVersion": "bunko", "versionArray": VERSION_ARRAY.to_vec(),
        "bunkoVersion": env!("CARGO_PKG_VERSION"), "modules": [], "allocator": "jemalloc",
        "javascriptEngine": "none", "sysInfo": "deprecated", "bits": 64, "debug": false,
        "maxBsonObjectSize": wire::MAX_BSON_SIZE as i32, "storageEngines": ["bunko"],
        "openssl": {"running": "disabled", "compiled": "disabled"},
        "buildEnvironment": {"target_os": std::env::consts::OS, "target_arch": std::env::consts::ARCH},
    })
}

/// The parameters Bunko knows (`getParameter: "*"` lists them all).
fn parameters(ctx: &Ctx) -> Document {
    let lifetime = ctx.server.engine.config().txn_lifetime.as_secs();
    doc! {
        "featureCompatibilityVersion": {"version": "8.0"},
        "authenticationMechanisms": ["SCRAM-SHA-1", "SCRAM-SHA-256"],
        "requireApiVersion": false,
        // Test commands (`configureFailPoint`) only on a server started for tests.
        "enableTestCommands": ctx.server.config.test_commands,
        "maxBSONObjectSize": wire::MAX_BSON_SIZE as i32,
        "transactionLifetimeLimitSeconds": i32::try_from(lifetime).unwrap_or(i32::MAX),
    }
}

pub(super) fn get_parameter(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    let all = parameters(ctx);
    let star = matches!(command.get("getParameter"), Some(Bson::String(s)) if s == "*")
        || matches!(command.get("getParameter"), Some(Bson::Document(d)) if d.get("allParameters").is_some_and(|v| v.as_bool() == Some(true)));
    if star {
        return Ok(all);
    }
    let mut reply = Document::new();
    for key in
        command.keys().skip(1).filter(|k| !k.starts_with('$') && *k != "lsid" && *k != "comment")
    {
        let value = all
            .get(key)
            .ok_or_else(|| MongoError::new(72, "InvalidOptions", "no option found to get"))?;
        reply.insert(key.clone(), value.clone());
    }
    if reply.is_empty() {
        return Err(MongoError::new(72, "InvalidOptions", "no option found to get"));
    }
    Ok(reply)
}

/// `configureFailPoint` ([`crate::fail_point`]): server admins, on a server started with
/// test commands; elsewhere it does not exist.
pub(super) fn configure_fail_point(
    ctx: &mut Ctx,
    command: &Document,
) -> Result<Document, MongoError> {
    if !ctx.server.config.test_commands {
        return Err(MongoError::command_not_found("configureFailPoint"));
    }
    if !super::admin::user(ctx).is_server_admin() {
        return Err(MongoError::unauthorized(
            "not authorized on admin to execute command { configureFailPoint }",
        ));
    }
    ctx.server.fail_points.configure(command)
}

pub(super) fn get_cmd_line_opts(ctx: &mut Ctx, _: &Document) -> Result<Document, MongoError> {
    let argv: Vec<String> = std::env::args().collect();
    let local = ctx.session.local;
    Ok(doc! {
        "argv": argv,
        "parsed": {
            "net": {"bindIp": local.ip().to_string(), "port": i32::from(local.port())},
            "storage": {"dbPath": &ctx.server.config.data_dir},
            "replication": {"replSet": SET_NAME},
        },
    })
}

pub(super) fn host_info(_: &mut Ctx, _: &Document) -> Result<Document, MongoError> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as i32;
    let hostname =
        std::fs::read_to_string("/etc/hostname").map(|h| h.trim().to_string()).unwrap_or_default();
    Ok(doc! {
        "system": {
            "currentTime": bson::DateTime::now(), "hostname": hostname, "cpuAddrSize": 64,
            "numCores": cores, "cpuArch": std::env::consts::ARCH, "numaEnabled": false,
        },
        "os": {"type": std::env::consts::OS, "name": std::env::consts::OS},
        "extra": {},
    })
}

pub(super) fn server_status(ctx: &mut Ctx, _: &Document) -> Result<Document, MongoError> {
    let uptime = ctx.server.started.elapsed();
    let (current, total) = ctx.server.connections();
    Ok(doc! {
        "host": ctx.session.local.to_string(), "version": VERSION, "process": "bunko",
        "pid": i64::from(std::process::id()), "uptime": uptime.as_secs_f64(),
        "uptimeMillis": uptime.as_millis() as i64, "uptimeEstimate": uptime.as_secs() as i64,
        "localTime": bson::DateTime::now(),
        "connections": {"current": current as i32, "available": 1_000_000, "totalCreated": total},
        "storageEngine": {"name": "bunko", "supportsCommittedReads": true, "persistent": true},
    })
}

pub(super) fn connection_status(ctx: &mut Ctx, _: &Document) -> Result<Document, MongoError> {
    let (users, roles): (Vec<Document>, Vec<Document>) = match &ctx.session.user {
        Some(user) => (
            vec![doc! {"user": user.name.clone().unwrap_or_default(), "db": "admin"}],
            user.roles.iter().map(|r| doc! {"role": r, "db": "admin"}).collect(),
        ),
        None => (Vec::new(), Vec::new()),
    };
    Ok(doc! {"authInfo": {"authenticatedUsers": users, "authenticatedUserRoles": roles}})
}

pub(super) fn whatsmyuri(ctx: &mut Ctx, _: &Document) -> Result<Document, MongoError> {
    Ok(doc! {"you": ctx.session.peer.to_string()})
}

pub(super) fn get_log(_: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    match command.get("getLog") {
        Some(Bson::String(s)) if s == "*" => Ok(doc! {"names": ["global", "startupWarnings"]}),
        Some(Bson::String(s)) if s == "global" || s == "startupWarnings" => {
            Ok(doc! {"totalLinesWritten": 0, "log": []})
        }
        _ => Err(MongoError::new(72, "InvalidOptions", "log does not exist")),
    }
}
