//! `$rename` (moves a field; neither path may go through an array) and `$currentDate` (the
//! current time as a date or a timestamp).

use bson::{Bson, DateTime, Document, Timestamp};

use super::{UpdateError, path, render, type_name};

/// The destination of `$rename` from `field`.
pub fn parse_rename(field: &str, to: &Bson) -> Result<Vec<String>, UpdateError> {
    let spec = || format!("{{{field}: {}}}", render::value(to));
    let Bson::String(to_text) = to else {
        return Err(UpdateError::bad_value(format!(
            "The 'to' field for $rename must be a string: {}",
            spec()
        )));
    };
    let from = path::parse(field)?;
    let dest = path::parse(to_text)?;
    if from.iter().any(|s| path::positional(s).is_some()) {
        return Err(UpdateError::bad_value(format!(
            "The source field for $rename may not be dynamic: {field}"
        )));
    }
    if dest.iter().any(|s| path::positional(s).is_some()) {
        return Err(UpdateError::bad_value(format!(
            "The destination field for $rename may not be dynamic: {to_text}"
        )));
    }
    if from == dest {
        return Err(UpdateError::bad_value(format!(
            "The source and target field for $rename must differ: {}",
            spec()
        )));
    }
    if from.starts_with(&dest) || dest.starts_with(&from) {
        return Err(UpdateError::bad_value(format!(
            "The source and target field for $rename must not be on the same path: {}",
            spec()
        )));
    }
    Ok(dest)
}

pub fn rename(doc: &mut Document, from: &[String], to: &[String]) -> Result<(), UpdateError> {
    let in_array = |doc: &Document, p: &[String], which: &str| {
        path::array_on_path(doc, p).map(|seg| {
            UpdateError::bad_value(format!(
                "The {which} field cannot be an array element, '{}' in doc with {} has an array field called '{seg}'",
                p.join("."),
                render::id_of(doc)
            ))
        })
    };
    if let Some(err) = in_array(doc, from, "source") {
        return Err(err);
    }
    let Some(value) = path::get(doc, from).cloned() else { return Ok(()) };
    if let Some(err) = in_array(doc, to, "destination") {
        return Err(err);
    }
    path::unset(doc, from);
    path::set(doc, to, value)
}

/// `$currentDate`'s argument: whether it asks for a timestamp (else a date).
pub fn parse_current_date(spec: &Bson) -> Result<bool, UpdateError> {
    match spec {
        Bson::Boolean(_) => Ok(false),
        Bson::Document(d) if d.len() == 1 && d.contains_key("$type") => match d.get("$type") {
            Some(Bson::String(t)) if t == "date" => Ok(false),
            Some(Bson::String(t)) if t == "timestamp" => Ok(true),
            _ => Err(UpdateError::bad_value(
                "The '$type' string field is required to be 'date' or 'timestamp': {$currentDate: {field : {$type: 'date'}}}",
            )),
        },
        Bson::Document(_) => Err(UpdateError::bad_value(format!(
            "Unrecognized $currentDate option: {}",
            render::value(spec)
        ))),
        other => Err(UpdateError::bad_value(format!(
            "{} is not valid type for $currentDate. Please use a boolean ('true') or a $type expression ({{$type: 'timestamp/date'}}).",
            type_name(other)
        ))),
    }
}

pub fn current_date(doc: &mut Document, at: &[String], timestamp: bool) -> Result<(), UpdateError> {
    let now = DateTime::now();
    let value = if timestamp {
        let time = u32::try_from(now.timestamp_millis() / 1000).unwrap_or(u32::MAX);
        Bson::Timestamp(Timestamp { time, increment: 1 })
    } else {
        Bson::DateTime(now)
    };
    path::set(doc, at, value)
}
