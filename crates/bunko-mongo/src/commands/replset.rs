//! `replSetGetStatus` and `replSetGetConfig` (mongosh's `rs.status()` and `rs.conf()`):
//! the one-member replica set `hello` announces ([`super::handshake`]), whose only member is
//! this server, always `PRIMARY`. MongoDB runs them on `admin` only.

use bson::{Document, doc};

use super::Ctx;
use super::handshake::SET_NAME;
use crate::error::MongoError;

pub(super) fn status(ctx: &mut Ctx, _: &Document) -> Result<Document, MongoError> {
    on_admin(ctx, "replSetGetStatus")?;
    let now = bson::DateTime::now();
    let uptime = ctx.server.started.elapsed().as_secs() as i64;
    Ok(doc! {
        "set": SET_NAME, "date": now, "myState": 1, "term": 1_i64,
        "heartbeatIntervalMillis": 2000_i64, "majorityVoteCount": 1, "writeMajorityCount": 1,
        "votingMembersCount": 1, "writableVotingMembersCount": 1,
        "members": [{
            "_id": 0, "name": ctx.session.local.to_string(), "health": 1.0, "state": 1,
            "stateStr": "PRIMARY", "uptime": uptime, "syncSourceHost": "", "syncSourceId": -1,
            "infoMessage": "", "configVersion": 1, "configTerm": 1, "self": true,
            "lastHeartbeatMessage": "",
        }],
    })
}

pub(super) fn config(ctx: &mut Ctx, _: &Document) -> Result<Document, MongoError> {
    on_admin(ctx, "replSetGetConfig")?;
    Ok(doc! {"config": {
        "_id": SET_NAME, "version": 1, "term": 1, "protocolVersion": 1_i64,
        "writeConcernMajorityJournalDefault": true,
        "members": [{
            "_id": 0, "host": ctx.session.local.to_string(), "arbiterOnly": false,
            "buildIndexes": true, "hidden": false, "priority": 1.0, "tags": {},
            "secondaryDelaySecs": 0_i64, "votes": 1,
        }],
        "settings": {"chainingAllowed": true, "electionTimeoutMillis": 10000_i64},
    }})
}

fn on_admin(ctx: &Ctx, name: &str) -> Result<(), MongoError> {
    if ctx.db == "admin" {
        return Ok(());
    }
    Err(MongoError::unauthorized(format!("{name} may only be run against the admin database.")))
}
