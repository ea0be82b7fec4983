//! `callProcedure`: runs a procedure of a design document of the collection's database in one
//! engine transaction ([`bunko_engine::Engine::call_procedure`], `docs/procedures.md`), as
//! `POST /{db}/_design/{d}/_procedures/{name}` does over HTTP:
//! `db.runCommand({callProcedure: "books", designDoc: "library", procedure: "addBook",
//! arg: {...}})` answers `{result: <what it returned>, ok: 1}` once its writes are committed.
//! The argument and the result cross as the stored Extended JSON form of their values.

use bson::{Bson, Document, doc};
use bunko_doc::ejson;

use super::admin::user;
use super::{Ctx, namespace};
use crate::error::MongoError;

pub(super) fn call(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    let ns = namespace(ctx, command)?;
    let text = |field: &str| {
        command
            .get_str(field)
            .map_err(|_| MongoError::bad_value(format!("{field} must be a string")))
    };
    let (ddoc, name) = (text("designDoc")?, text("procedure")?);
    let arg = ejson::value_to_json(command.get("arg").unwrap_or(&Bson::Null));
    let engine = &ctx.server.engine;
    let result = engine.call_procedure(&user(ctx), &ns.engine_name(), ddoc, name, &arg)?;
    Ok(doc! {"result": ejson::value_from_json(&result)})
}
