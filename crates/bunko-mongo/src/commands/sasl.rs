//! Authentication commands: `saslStart` and `saslContinue` (SCRAM-SHA-256 and SCRAM-SHA-1, `auth.rs`), the
//! `speculativeAuthenticate` first step inside `hello`, and `logout`. A successful exchange
//! sets the connection's user; a failed one leaves the connection unauthenticated.

use bson::spec::BinarySubtype;
use bson::{Binary, Bson, Document, doc};

use super::{Ctx, bool_of};
use crate::error::MongoError;

pub(super) fn start(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    let skip = command
        .get_document("options")
        .map(|o| bool_of(o, "skipEmptyExchange", false))
        .unwrap_or(Ok(false))?;
    begin(ctx, command, skip)
}

/// `speculativeAuthenticate` in `hello`: the same first step (drivers that send it also
/// skip the empty exchange).
pub(super) fn speculative(ctx: &mut Ctx, spec: &Document) -> Result<Document, MongoError> {
    begin(ctx, spec, true)
}

fn begin(ctx: &mut Ctx, command: &Document, skip: bool) -> Result<Document, MongoError> {
    let mechanism =
        command.get_str("mechanism").map_err(|_| MongoError::bad_value("mechanism is required"))?;
    let payload = payload(command)?;
    let engine = &ctx.server.engine;
    let (conversation, reply) = ctx.server.auth.start(engine, mechanism, &payload)?;
    ctx.session.scram = Some((conversation, skip));
    ctx.session.user = None;
    Ok(doc! {"conversationId": 1, "done": false, "payload": binary(reply)})
}

pub(super) fn next(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    let payload = payload(command)?;
    let Some((mut conversation, skip)) = ctx.session.scram.take() else {
        return Err(MongoError::new(17, "ProtocolError", "No SASL session state found"));
    };
    // The login lockout is the engine's, shared with HTTP; a locked-out client gets the
    // same AuthenticationFailed as a wrong password (MongoDB does not reveal lockouts).
    let (engine, peer) = (&ctx.server.engine, Some(ctx.session.peer.ip()));
    if engine.logins().is_locked_out(engine, &conversation.name, peer)? {
        return Err(MongoError::auth_failed());
    }
    let step = match conversation.step(&payload, skip) {
        Ok(step) => step,
        Err(err) => {
            if err.code == 18 {
                engine.logins().record_failure(engine, &conversation.name, peer)?;
            }
            return Err(err);
        }
    };
    if step.done {
        ctx.session.user = step.user;
        ctx.session.user_seq = None;
    } else {
        ctx.session.scram = Some((conversation, skip));
    }
    Ok(doc! {"conversationId": 1, "done": step.done, "payload": binary(step.payload)})
}

pub(super) fn logout(ctx: &mut Ctx, _: &Document) -> Result<Document, MongoError> {
    ctx.session.user = None;
    ctx.session.scram = None;
    Ok(Document::new())
}

fn payload(command: &Document) -> Result<Vec<u8>, MongoError> {
    match command.get("payload") {
        Some(Bson::Binary(bin)) => Ok(bin.bytes.clone()),
        Some(Bson::String(s)) => Ok(s.clone().into_bytes()),
        _ => Err(MongoError::bad_value("payload must be binary data")),
    }
}

fn binary(bytes: Vec<u8>) -> Bson {
    Bson::Binary(Binary { subtype: BinarySubtype::Generic, bytes })
}
