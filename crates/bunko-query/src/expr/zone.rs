//! The `timezone` of date operators: `UTC`/`GMT`/`Z`, a fixed offset (`+09:00`, `-0530`,
//! `+03`), or an Olson name (`Asia/Tokyo`, `America/New_York`) whose offset depends on the
//! instant (daylight saving time), from the tz database `jiff` bundles. An unknown name is
//! MongoDB's unknown-zone error (40485).

use bson::Bson;
use jiff::Timestamp;
use jiff::tz::{Offset, TimeZone};

use super::value::{is_nullish, type_name};
use super::{ExprError, Result};

/// A time zone as date operators use it.
#[derive(Clone, Debug)]
pub enum Zone {
    /// A fixed offset in seconds (UTC is 0).
    Fixed(i32),
    Olson(TimeZone),
}

impl Zone {
    /// The `timezone` argument `v` (null or missing: UTC).
    pub fn parse(v: &Bson) -> Result<Zone> {
        let s = match v {
            v if is_nullish(v) => return Ok(Zone::Fixed(0)),
            Bson::String(s) => s.as_str(),
            other => {
                return Err(ExprError::location(
                    40517,
                    format!("timezone must evaluate to a string, found {}", type_name(other)),
                ));
            }
        };
        if matches!(s, "UTC" | "GMT" | "Z" | "Etc/UTC" | "Etc/GMT") {
            return Ok(Zone::Fixed(0));
        }
        if let Some(offset) = fixed(s) {
            return Ok(Zone::Fixed(offset));
        }
        match TimeZone::get(s).ok() {
            Some(tz) => Ok(Zone::Olson(tz)),
            None => Err(ExprError::location(
                40485,
                format!("unrecognized time zone identifier: \"{s}\""),
            )),
        }
    }

    /// Whether this is UTC.
    pub fn is_utc(&self) -> bool {
        matches!(self, Zone::Fixed(0))
    }

    /// The offset (seconds east of UTC) in force at the instant `ms` (milliseconds since
    /// the epoch).
    pub fn offset_at(&self, ms: i64) -> i32 {
        match self {
            Zone::Fixed(offset) => *offset,
            Zone::Olson(tz) => {
                Timestamp::from_millisecond(ms).map_or(0, |ts| tz.to_offset(ts).seconds())
            }
        }
    }

    /// The instant whose local time is `local` (milliseconds since the epoch as if the
    /// zone were UTC). A local time skipped by a DST change is read with the offset before
    /// it and a repeated one is its first occurrence (RFC 5545's "compatible" rule).
    pub fn utc(&self, local: i64) -> i64 {
        let tz = match self {
            Zone::Fixed(offset) => return local - i64::from(*offset) * 1000,
            Zone::Olson(tz) => tz,
        };
        let Ok(as_utc) = Timestamp::from_millisecond(local) else { return local };
        let civil = Offset::UTC.to_datetime(as_utc);
        match tz.to_ambiguous_timestamp(civil).compatible() {
            Ok(ts) => ts.as_millisecond(),
            Err(_) => local - i64::from(self.offset_at(local)) * 1000,
        }
    }

    /// The local time of the instant `ms` (milliseconds since the epoch as if the zone
    /// were UTC).
    pub fn local(&self, ms: i64) -> i64 {
        ms + i64::from(self.offset_at(ms)) * 1000
    }
}

/// A fixed offset `±HH`, `±HHMM` or `±HH:MM` in seconds.
pub fn fixed(s: &str) -> Option<i32> {
    let (sign, rest) = match s.as_bytes().first() {
        Some(b'+') => (1, s.get(1..)?),
        Some(b'-') => (-1, s.get(1..)?),
        _ => return None,
    };
    let digits: String = rest.chars().filter(|c| *c != ':').collect();
    if !digits.chars().all(|c| c.is_ascii_digit()) || !matches!(digits.len(), 2 | 4) {
        return None;
    }
    let h: i32 = digits.get(0..2)?.parse().ok()?;
    let m: i32 = digits.get(2..4).and_then(|x| x.parse().ok()).unwrap_or(0);
    Some(sign * (h * 3600 + m * 60))
}
