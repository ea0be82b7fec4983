//! Cursor commands: `getMore` (the next batch of an open cursor, only for the user and
//! namespace that opened it) and `killCursors`; [`answer`] opens a cursor over an answer
//! held in memory.

use std::collections::VecDeque;

use bson::{Bson, Document, doc};

use super::crud::take_batch;
use super::{Ctx, cursor_reply, int_of};
use crate::error::MongoError;

/// The first batch of `docs` (`batch` documents, 0: all), and a cursor holding the rest
/// unless there is none or `single` (`singleBatch`) asks for none.
pub(super) fn answer(
    ctx: &Ctx,
    ns: &str,
    docs: Vec<Document>,
    batch: usize,
    single: bool,
) -> Document {
    let mut buffer: VecDeque<Document> = docs.into();
    let first = take_batch(&mut buffer, batch);
    let id = if buffer.is_empty() || single {
        0
    } else {
        let next = Box::new(move |n| {
            let batch = take_batch(&mut buffer, n);
            Ok((batch, !buffer.is_empty()))
        });
        ctx.server.cursors.open(ns.to_string(), ctx.session.user.clone(), next)
    };
    cursor_reply(id, ns, "firstBatch", first)
}

pub(super) fn get_more(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    let id = match command.get("getMore") {
        Some(Bson::Int64(id)) => *id,
        _ => {
            return Err(MongoError::type_mismatch(
                "BSON field 'getMore.getMore' is the wrong type, expected type 'long'",
            ));
        }
    };
    let coll = command.get_str("collection").map_err(|_| {
        MongoError::failed_to_parse(
            "BSON field 'getMore.collection' is missing but a required field",
        )
    })?;
    let ns = format!("{}.{coll}", ctx.db);
    if ctx.server.streams.owns(id) {
        return super::change_stream::get_more(ctx, id, &ns, command);
    }
    if ctx.server.tails.owns(id) {
        return super::capped::get_more(ctx, id, &ns, command);
    }
    let size = int_of(command, "batchSize")?.map_or(0, |n| usize::try_from(n).unwrap_or(0));
    let user = ctx.session.user.as_ref();
    let check = |_: &_| awaits_data(command, false);
    let expired = || ctx.server.fail_points.max_time_always();
    let (batch, alive) = ctx.server.cursors.next(id, user, &ns, size, check, expired)?;
    Ok(cursor_reply(if alive { id } else { 0 }, &ns, "nextBatch", batch))
}

/// A `getMore`'s `maxTimeMS` is how long an `awaitData` cursor waits for news; on any other
/// cursor MongoDB refuses it (`BadValue`, 2), leaving the cursor open.
pub(super) fn awaits_data(command: &Document, await_data: bool) -> Result<(), MongoError> {
    if command.contains_key("maxTimeMS") && !await_data {
        return Err(MongoError::bad_value(
            "cannot set maxTimeMS on getMore command for a non-awaitData cursor",
        ));
    }
    Ok(())
}

pub(super) fn kill_cursors(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    let Some(Bson::Array(ids)) = command.get("cursors") else {
        return Err(MongoError::failed_to_parse(
            "BSON field 'killCursors.cursors' is missing but a required field",
        ));
    };
    let user = ctx.session.user.as_ref();
    let (mut killed, mut missing) = (Vec::new(), Vec::new());
    for id in ids {
        let Bson::Int64(id) = id else {
            return Err(MongoError::type_mismatch("cursor ids must be longs"));
        };
        let server = ctx.server;
        if server.cursors.kill(*id, user)
            || server.streams.kill(*id, user)
            || server.tails.kill(*id, user)
        {
            killed.push(*id)
        } else {
            missing.push(*id)
        }
    }
    Ok(
        doc! {"cursorsKilled": killed, "cursorsNotFound": missing, "cursorsAlive": [], "cursorsUnknown": []},
    )
}
