//! Date operators, on BSON dates (milliseconds since the epoch, UTC) through the `time`
//! crate's calendar. A `timezone` ([`Zone`]) may be `UTC`, a fixed offset (`+09:00`) or an
//! Olson name (`America/New_York`): parts are read in the offset in force at the instant,
//! and calendar arithmetic (`$dateAdd` by days or months, `$dateTrunc`, `$dateFromParts`)
//! is done in local time, so it follows daylight saving time as MongoDB's does.

use bson::{Bson, DateTime};
use time::{Date, Month, OffsetDateTime, Weekday};

use super::ops::{eval_named, named};
use super::value::{int_or_long, is_nullish, is_number, to_int, type_name};
use super::zone::Zone;
use super::{Args, ExprError, Result, Vars};

/// A date with the offset (minutes) its parts are read in.
struct Local {
    at: OffsetDateTime,
}

fn to_odt(ms: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

fn millis(at: OffsetDateTime) -> i64 {
    (at.unix_timestamp_nanos() / 1_000_000) as i64
}

/// The ISO form MongoDB prints for a date (`2024-01-02T03:04:05.006Z`).
pub fn iso(d: DateTime) -> String {
    format_date(to_odt(d.timestamp_millis()), 0, "%Y-%m-%dT%H:%M:%S.%LZ")
}

/// A value as a date (dates, timestamps and ObjectIds are dates).
fn as_date(_op: &str, v: &Bson) -> Result<i64> {
    match v {
        Bson::DateTime(d) => Ok(d.timestamp_millis()),
        Bson::Timestamp(t) => Ok(i64::from(t.time) * 1000),
        Bson::ObjectId(o) => Ok(o.timestamp().timestamp_millis()),
        other => Err(ExprError::location(
            16006,
            format!("can't convert from BSON type {} to Date", type_name(other)),
        )),
    }
}

/// An offset written in a date string (`Z`, `UTC`, `+09:00`), in seconds.
fn string_offset(s: &str) -> Option<i32> {
    match Zone::parse(&Bson::String(s.to_string())).ok()? {
        Zone::Fixed(offset) => Some(offset),
        Zone::Olson(_) => None,
    }
}

/// The date argument of a part operator and its timezone offset; `None` for null.
fn date_and_zone(op: &str, args: &Args, vars: &mut Vars, key: &str) -> Result<Option<(i64, Zone)>> {
    let (date, zone) = match args {
        Args::List(items) => {
            if items.len() != 1 {
                return Err(ExprError::location(
                    40536,
                    format!(
                        "{op} accepts exactly one argument if given an array, but was given {}",
                        items.len()
                    ),
                ));
            }
            (items.first().map(|e| e.eval(vars)).transpose()?.unwrap_or(Bson::Null), Bson::Null)
        }
        Args::Named(_) => (eval_named(args, key, vars)?, eval_named(args, "timezone", vars)?),
    };
    if is_nullish(&date) {
        return Ok(None);
    }
    let zone = Zone::parse(&zone)?;
    Ok(Some((as_date(op, &date)?, zone)))
}

fn local(ms: i64, zone: &Zone) -> Local {
    Local { at: to_odt(zone.local(ms)) }
}

pub fn part(op: &str, args: &Args, vars: &mut Vars) -> Result<Bson> {
    let Some((ms, zone)) = date_and_zone(op, args, vars, "date")? else { return Ok(Bson::Null) };
    let at = local(ms, &zone).at;
    let v: i64 = match op {
        "$year" => i64::from(at.year()),
        "$month" => i64::from(u8::from(at.month())),
        "$dayOfMonth" => i64::from(at.day()),
        "$hour" => i64::from(at.hour()),
        "$minute" => i64::from(at.minute()),
        "$second" => i64::from(at.second()),
        "$millisecond" => i64::from(at.millisecond()),
        "$dayOfWeek" => i64::from(at.weekday().number_from_sunday()),
        "$dayOfYear" => i64::from(at.ordinal()),
        "$week" => i64::from(at.sunday_based_week()),
        "$isoWeek" => i64::from(at.iso_week()),
        // MongoDB's ISO year is a long (its time zone answers a `long long`).
        "$isoWeekYear" => return Ok(Bson::Int64(i64::from(at.to_iso_week_date().0))),
        _ => i64::from(at.weekday().number_from_monday()),
    };
    Ok(int_or_long(v))
}

fn format_date(at: OffsetDateTime, zone: i32, format: &str) -> String {
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let piece = match chars.next() {
            Some('Y') => format!("{:04}", at.year()),
            Some('m') => format!("{:02}", u8::from(at.month())),
            Some('d') => format!("{:02}", at.day()),
            Some('H') => format!("{:02}", at.hour()),
            Some('M') => format!("{:02}", at.minute()),
            Some('S') => format!("{:02}", at.second()),
            Some('L') => format!("{:03}", at.millisecond()),
            Some('j') => format!("{:03}", at.ordinal()),
            Some('w') => at.weekday().number_from_sunday().to_string(),
            Some('u') => at.weekday().number_from_monday().to_string(),
            Some('U') => format!("{:02}", at.sunday_based_week()),
            Some('V') => format!("{:02}", at.iso_week()),
            Some('G') => format!("{:04}", at.to_iso_week_date().0),
            Some('b') => format!("{:.3}", at.month().to_string()),
            Some('B') => at.month().to_string(),
            Some('z') => {
                let (sign, z) = if zone < 0 { ('-', -zone) } else { ('+', zone) };
                format!("{sign}{:02}{:02}", z / 3600, z % 3600 / 60)
            }
            Some('Z') => (zone / 60).to_string(),
            Some('%') => "%".to_string(),
            Some(other) => format!("%{other}"),
            None => "%".to_string(),
        };
        out.push_str(&piece);
    }
    out
}

/// The `onNull` argument's value, or null.
pub fn on_null(args: &Args, vars: &mut Vars) -> Result<Bson> {
    named(args, "onNull").map_or(Ok(Bson::Null), |e| e.eval(vars))
}

pub fn date_to_string(op: &str, args: &Args, vars: &mut Vars) -> Result<Bson> {
    let date = eval_named(args, "date", vars)?;
    if is_nullish(&date) {
        return on_null(args, vars);
    }
    let zone = Zone::parse(&eval_named(args, "timezone", vars)?)?;
    let format = match eval_named(args, "format", vars)? {
        Bson::String(s) => s,
        v if is_nullish(&v) && zone.is_utc() => "%Y-%m-%dT%H:%M:%S.%LZ".to_string(),
        v if is_nullish(&v) => "%Y-%m-%dT%H:%M:%S.%L".to_string(),
        v => {
            return Err(ExprError::location(
                18533,
                format!(
                    "$dateToString requires that 'format' be a string, found: {} with value {v}",
                    type_name(&v)
                ),
            ));
        }
    };
    if let Some(bad) = format
        .split('%')
        .skip(1)
        .find_map(|s| s.chars().next().filter(|c| !"YmdHMSLjwuUVGbBzZ%".contains(*c)))
    {
        return Err(ExprError::location(
            18536,
            format!("Invalid format character '%{bad}' in format string"),
        ));
    }
    let ms = as_date(op, &date)?;
    Ok(Bson::String(format_date(local(ms, &zone).at, zone.offset_at(ms), &format)))
}

/// Parses the ISO-8601 forms MongoDB reads without a format (`2024-01-02`,
/// `2024-01-02T03:04:05`, with `.mmm`, `Z` or an offset).
pub fn parse_date(s: &str) -> Option<DateTime> {
    if let Ok(d) = DateTime::parse_rfc3339_str(s) {
        return Some(d);
    }
    let s = s.trim();
    let (body, zone) = match s.strip_suffix('Z') {
        Some(b) => (b, 0),
        None => match s.rfind(['+', '-']).filter(|&i| i > 10) {
            Some(i) => (&s[..i], string_offset(&s[i..])?),
            None => (s, 0),
        },
    };
    let (date, time) = body.split_once(['T', ' ']).unwrap_or((body, "00:00:00"));
    let mut d = date.splitn(3, '-').map(|p| p.parse::<i32>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let mut t = hms.splitn(3, ':').map(|p| p.parse::<i64>().ok());
    let (h, mi, sec) =
        (t.next()??, t.next().flatten().unwrap_or(0), t.next().flatten().unwrap_or(0));
    let ms: i64 = format!("{frac:0<3}").get(0..3)?.parse().ok()?;
    assemble([i64::from(y), i64::from(m), i64::from(day), h, mi, sec, ms], zone)
}

/// The date of calendar parts `[year, month, day, hour, minute, second, millisecond]` read
/// at offset `zone` (seconds); `None` for an impossible calendar date.
fn assemble(parts: [i64; 7], zone: i32) -> Option<DateTime> {
    let [y, mo, d, h, mi, sec, ms] = parts;
    let date = Date::from_calendar_date(
        i32::try_from(y).ok()?,
        Month::try_from(u8::try_from(mo).ok()?).ok()?,
        u8::try_from(d).ok()?,
    )
    .ok()?;
    let base = millis(date.midnight().assume_utc());
    Some(DateTime::from_millis(
        base + ((h * 60 + mi) * 60 + sec) * 1000 + ms - i64::from(zone) * 1000,
    ))
}

/// Parses `s` by a `$dateFromString` format (`%Y %m %d %H %M %S %L %z %%`).
fn parse_with(s: &str, format: &str) -> Option<DateTime> {
    let (mut y, mut mo, mut d, mut h, mut mi, mut sec, mut ms, mut zone) =
        (1970i64, 1i64, 1i64, 0i64, 0i64, 0i64, 0i64, 0i32);
    let mut rest = s;
    let mut f = format.chars();
    let take = |rest: &mut &str, n: usize| -> Option<i64> {
        let end = rest.char_indices().take_while(|(i, c)| *i < n && c.is_ascii_digit()).count();
        let v = rest.get(..end)?.parse().ok()?;
        *rest = rest.get(end..)?;
        Some(v)
    };
    while let Some(c) = f.next() {
        if c != '%' {
            rest = rest.strip_prefix(c)?;
            continue;
        }
        match f.next()? {
            'Y' => y = take(&mut rest, 4)?,
            'm' => mo = take(&mut rest, 2)?,
            'd' => d = take(&mut rest, 2)?,
            'H' => h = take(&mut rest, 2)?,
            'M' => mi = take(&mut rest, 2)?,
            'S' => sec = take(&mut rest, 2)?,
            'L' => ms = take(&mut rest, 3)?,
            'z' | 'Z' => {
                let end = rest
                    .find(|c: char| !(c.is_ascii_digit() || c == '+' || c == '-' || c == ':'))
                    .unwrap_or(rest.len());
                zone = string_offset(rest.get(..end)?)?;
                rest = rest.get(end..)?;
            }
            '%' => rest = rest.strip_prefix('%')?,
            _ => return None,
        }
    }
    if !rest.is_empty() {
        return None;
    }
    assemble([y, mo, d, h, mi, sec, ms], zone)
}

pub fn date_from_string(_: &str, args: &Args, vars: &mut Vars) -> Result<Bson> {
    let input = eval_named(args, "dateString", vars)?;
    if is_nullish(&input) {
        return on_null(args, vars);
    }
    let zone = Zone::parse(&eval_named(args, "timezone", vars)?)?;
    let format = eval_named(args, "format", vars)?;
    let parsed = match (&input, &format) {
        (Bson::String(s), Bson::String(f)) => parse_with(s, f),
        (Bson::String(s), _) => parse_date(s),
        _ => None,
    };
    match parsed {
        Some(d) => Ok(Bson::DateTime(DateTime::from_millis(zone.utc(d.timestamp_millis())))),
        None => match named(args, "onError") {
            Some(e) => e.eval(vars),
            None => Err(ExprError::new(
                241,
                "ConversionFailure",
                format!("Error parsing date string '{input}'"),
            )),
        },
    }
}

const UNITS: &[&str] =
    &["year", "quarter", "month", "week", "day", "hour", "minute", "second", "millisecond"];

pub(crate) fn unit(v: &Bson) -> Result<&'static str> {
    match v {
        Bson::String(s) => UNITS
            .iter()
            .copied()
            .find(|u| u == s)
            .ok_or_else(|| ExprError::failed_to_parse(format!("unknown time unit value: {s}"))),
        other => Err(ExprError::location(
            5439013,
            format!("unit must be a string, found {}", type_name(other)),
        )),
    }
}

pub(crate) fn unit_ms(unit: &str) -> i64 {
    match unit {
        "week" => 7 * 86_400_000,
        "day" => 86_400_000,
        "hour" => 3_600_000,
        "minute" => 60_000,
        "second" => 1000,
        _ => 1,
    }
}

fn months_of(at: OffsetDateTime) -> i64 {
    i64::from(at.year()) * 12 + i64::from(u8::from(at.month())) - 1
}

/// The first day of the month `m` months after year 0 January, at midnight UTC (ms).
fn month_start(m: i64) -> Option<i64> {
    let date = Date::from_calendar_date(
        i32::try_from(m.div_euclid(12)).ok()?,
        Month::try_from(u8::try_from(m.rem_euclid(12) + 1).ok()?).ok()?,
        1,
    )
    .ok()?;
    Some(millis(date.midnight().assume_utc()))
}

fn start_of_week(v: &Bson) -> Result<Weekday> {
    let s = match v {
        v if is_nullish(v) => return Ok(Weekday::Sunday),
        Bson::String(s) => s.to_lowercase(),
        _ => return Err(ExprError::location(5439015, "startOfWeek must be a string")),
    };
    let days = [
        Weekday::Monday,
        Weekday::Tuesday,
        Weekday::Wednesday,
        Weekday::Thursday,
        Weekday::Friday,
        Weekday::Saturday,
        Weekday::Sunday,
    ];
    days.into_iter()
        .find(|d| {
            let n = d.to_string().to_lowercase();
            n == s || n.get(..3) == Some(s.as_str())
        })
        .ok_or_else(|| ExprError::location(5439016, format!("unknown startOfWeek value: {s}")))
}

pub fn date_trunc(op: &str, args: &Args, vars: &mut Vars) -> Result<Bson> {
    let Some((ms, zone)) = date_and_zone(op, args, vars, "date")? else { return Ok(Bson::Null) };
    let unit = unit(&eval_named(args, "unit", vars)?)?;
    let bin = match eval_named(args, "binSize", vars)? {
        v if is_nullish(&v) => 1,
        v => to_int(&v)
            .filter(|b| *b > 0 && is_number(&v))
            .ok_or_else(|| ExprError::location(5439017, "binSize must be a positive integer"))?,
    };
    let week_start = start_of_week(&eval_named(args, "startOfWeek", vars)?)?;
    let local_ms = zone.local(ms);
    let at = to_odt(local_ms);
    // MongoDB's bins count from 2000-01-01T00:00:00 (local time).
    let reference = 946_684_800_000_i64;
    let out = match unit {
        "year" | "quarter" | "month" => {
            let per = match unit {
                "year" => 12,
                "quarter" => 3,
                _ => 1,
            } * bin;
            let m = months_of(at) - 2000 * 12;
            month_start(2000 * 12 + m.div_euclid(per) * per).unwrap_or(local_ms)
        }
        _ => {
            let reference = if unit == "week" {
                // The first `startOfWeek` day on or after 2000-01-01 (a Saturday).
                let ahead = (i64::from(week_start.number_days_from_sunday()) + 1).rem_euclid(7);
                reference + ahead * 86_400_000
            } else {
                reference
            };
            let width = unit_ms(unit) * bin;
            reference + (local_ms - reference).div_euclid(width) * width
        }
    };
    Ok(Bson::DateTime(DateTime::from_millis(zone.utc(out))))
}

pub fn date_add(op: &str, args: &Args, vars: &mut Vars) -> Result<Bson> {
    let Some((ms, zone)) = date_and_zone(op, args, vars, "startDate")? else {
        return Ok(Bson::Null);
    };
    let unit = unit(&eval_named(args, "unit", vars)?)?;
    let amount = eval_named(args, "amount", vars)?;
    if is_nullish(&amount) {
        return Ok(Bson::Null);
    }
    let Some(mut amount) = to_int(&amount).filter(|_| is_number(&amount)) else {
        return Err(ExprError::location(
            5166403,
            format!("{op} requires integer 'amount' to be provided"),
        ));
    };
    if op == "$dateSubtract" {
        amount = -amount;
    }
    let local_ms = zone.local(ms);
    let out = match unit {
        "year" | "quarter" | "month" => {
            let per = match unit {
                "year" => 12,
                "quarter" => 3,
                _ => 1,
            };
            let at = to_odt(local_ms);
            let target = months_of(at) + amount * per;
            let first = month_start(target)
                .ok_or_else(|| ExprError::location(5166406, format!("{op} overflowed")))?;
            let days_in = time::util::days_in_month(to_odt(first).month(), to_odt(first).year());
            let day = at.day().min(days_in);
            let time_of_day = local_ms - millis(at.date().midnight().assume_utc());
            zone.utc(first + i64::from(day - 1) * 86_400_000 + time_of_day)
        }
        // Days keep the local time of day across a DST change.
        "week" | "day" => zone.utc(local_ms + amount.saturating_mul(unit_ms(unit))),
        _ => ms + amount.saturating_mul(unit_ms(unit)),
    };
    Ok(Bson::DateTime(DateTime::from_millis(out)))
}

pub fn date_diff(op: &str, args: &Args, vars: &mut Vars) -> Result<Bson> {
    let Some((start, zone)) = date_and_zone(op, args, vars, "startDate")? else {
        return Ok(Bson::Null);
    };
    let end = eval_named(args, "endDate", vars)?;
    if is_nullish(&end) {
        return Ok(Bson::Null);
    }
    let end = as_date(op, &end)?;
    let unit = unit(&eval_named(args, "unit", vars)?)?;
    let week_start = start_of_week(&eval_named(args, "startOfWeek", vars)?)?;
    let (a, b) = (to_odt(zone.local(start)), to_odt(zone.local(end)));
    let n = match unit {
        "year" => i64::from(b.year() - a.year()),
        "quarter" => months_of(b).div_euclid(3) - months_of(a).div_euclid(3),
        "month" => months_of(b) - months_of(a),
        "week" => {
            let week_of = |t: OffsetDateTime| {
                let days = (millis(t.date().midnight().assume_utc())).div_euclid(86_400_000);
                // 1970-01-01 was a Thursday.
                let back = (i64::from(t.weekday().number_days_from_sunday())
                    - i64::from(week_start.number_days_from_sunday()))
                .rem_euclid(7);
                (days - back).div_euclid(7)
            };
            week_of(b) - week_of(a)
        }
        _ => {
            let w = unit_ms(unit);
            zone.local(end).div_euclid(w) - zone.local(start).div_euclid(w)
        }
    };
    Ok(Bson::Int64(n))
}

pub fn date_from_parts(_: &str, args: &Args, vars: &mut Vars) -> Result<Bson> {
    let mut parts = [0i64; 7];
    for (i, (name, default)) in [
        ("year", 1970),
        ("month", 1),
        ("day", 1),
        ("hour", 0),
        ("minute", 0),
        ("second", 0),
        ("millisecond", 0),
    ]
    .into_iter()
    .enumerate()
    {
        let v = eval_named(args, name, vars)?;
        if v == Bson::Null {
            return Ok(Bson::Null);
        }
        parts[i] = if v == super::MISSING {
            default
        } else {
            to_int(&v).filter(|_| is_number(&v)).ok_or_else(|| {
                ExprError::location(
                    40515,
                    format!(
                        "'{name}' must evaluate to an integer, found {} with value {v}",
                        type_name(&v)
                    ),
                )
            })?
        };
    }
    let [y, mo, d, h, mi, s, ms] = parts;
    if !(1..=9999).contains(&y) {
        return Err(ExprError::location(
            40523,
            format!("'year' must evaluate to an integer in the range 1 to 9999, found {y}"),
        ));
    }
    let zone = Zone::parse(&eval_named(args, "timezone", vars)?)?;
    let first = month_start(y * 12 + mo - 1).unwrap_or(0);
    let local = first + (d - 1) * 86_400_000 + ((h * 60 + mi) * 60 + s) * 1000 + ms;
    Ok(Bson::DateTime(DateTime::from_millis(zone.utc(local))))
}

pub fn date_to_parts(op: &str, args: &Args, vars: &mut Vars) -> Result<Bson> {
    let Some((ms, zone)) = date_and_zone(op, args, vars, "date")? else { return Ok(Bson::Null) };
    let at = local(ms, &zone).at;
    let iso = super::value::truthy(&eval_named(args, "iso8601", vars)?);
    let mut d = bson::Document::new();
    if iso {
        let (y, w, wd) = at.to_iso_week_date();
        d.insert("isoWeekYear", y);
        d.insert("isoWeek", i32::from(w));
        d.insert("isoDayOfWeek", i32::from(wd.number_from_monday()));
    } else {
        d.insert("year", at.year());
        d.insert("month", i32::from(u8::from(at.month())));
        d.insert("day", i32::from(at.day()));
    }
    d.insert("hour", i32::from(at.hour()));
    d.insert("minute", i32::from(at.minute()));
    d.insert("second", i32::from(at.second()));
    d.insert("millisecond", i32::from(at.millisecond()));
    Ok(Bson::Document(d))
}
