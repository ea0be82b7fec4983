//! Password requirements: CouchDB's `[couch_httpd_auth] password_regexp` (or
//! `[chttpd_auth]`'s), checked on every new password written to the users database.
//!
//! The setting is an Erlang list, as CouchDB reads it: each element a regular expression
//! string, `{"regexp"}`, or `{"regexp", "reason"}`, e.g.
//! `[{".{10,}"}, {"[A-Z]+", "Requirement 2."}, "[0-9]+"]`. A password that does not match
//! one of them is refused with `400 bad_request` "Password does not conform to
//! requirements." and that element's reason; a setting that is not such a list refuses
//! every new password with `403 forbidden` "Server cannot hash passwords at this time.",
//! as CouchDB does.

use crate::{Error, Result};

const REQUIREMENT_ERROR: &str = "Password does not conform to requirements.";
const SERVER_ERROR: &str = "Server cannot hash passwords at this time.";

/// Checks `password` against the `password_regexp` setting, if any.
pub(crate) fn check(password: &str, setting: Option<&str>) -> Result<()> {
    let setting = setting.map(str::trim).unwrap_or_default();
    if setting.is_empty() || setting == "[]" {
        return Ok(());
    }
    let server_error = || Error::Forbidden(SERVER_ERROR.to_string());
    let rules = parse(setting).ok_or_else(server_error)?;
    for (pattern, reason) in rules {
        let regex = regex::Regex::new(&pattern).map_err(|_| server_error())?;
        if !regex.is_match(password) {
            let message = match reason.filter(|r| !r.is_empty()) {
                Some(reason) => format!("{REQUIREMENT_ERROR} {reason}"),
                None => REQUIREMENT_ERROR.to_string(),
            };
            return Err(Error::BadRequest(message));
        }
    }
    Ok(())
}

/// One requirement: a pattern and its optional reason.
type Rule = (String, Option<String>);

/// Parses the Erlang list; `None` for anything else.
fn parse(text: &str) -> Option<Vec<Rule>> {
    let mut p = Parser { chars: text.trim().trim_end_matches('.').chars().peekable() };
    p.expect('[')?;
    let mut rules = Vec::new();
    if p.eat(']') {
        return p.end().then_some(rules);
    }
    loop {
        rules.push(p.rule()?);
        if p.eat(']') {
            break;
        }
        p.expect(',')?;
    }
    p.end().then_some(rules)
}

struct Parser<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
}

impl Parser<'_> {
    fn skip_space(&mut self) {
        while self.chars.peek().is_some_and(|c| c.is_whitespace()) {
            self.chars.next();
        }
    }

    fn eat(&mut self, want: char) -> bool {
        self.skip_space();
        if self.chars.peek() == Some(&want) {
            self.chars.next();
            return true;
        }
        false
    }

    fn expect(&mut self, want: char) -> Option<()> {
        self.eat(want).then_some(())
    }

    fn end(&mut self) -> bool {
        self.skip_space();
        self.chars.peek().is_none()
    }

    /// `"re"`, `{"re"}` or `{"re", "reason"}`.
    fn rule(&mut self) -> Option<Rule> {
        if !self.eat('{') {
            return Some((self.string()?, None));
        }
        let pattern = self.string()?;
        let reason = if self.eat(',') { Some(self.string()?) } else { None };
        self.expect('}')?;
        Some((pattern, reason))
    }

    /// An Erlang string literal, its escapes resolved.
    fn string(&mut self) -> Option<String> {
        self.expect('"')?;
        let mut out = String::new();
        loop {
            match self.chars.next()? {
                '"' => return Some(out),
                '\\' => out.push(match self.chars.next()? {
                    'n' => '\n',
                    't' => '\t',
                    other => other,
                }),
                c => out.push(c),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULES: &str = r#"[{".{10,}"}, {"[A-Z]+", "Requirement 2."}, {"[a-z]+", ""}, {"\\d+", "Req 4."}, "[!.,()]+"]"#;

    fn reason(password: &str, rules: &str) -> Option<String> {
        match check(password, Some(rules)) {
            Ok(()) => None,
            Err(Error::BadRequest(r) | Error::Forbidden(r)) => Some(r),
            Err(other) => Some(format!("{other:?}")),
        }
    }

    #[test]
    fn each_requirement_in_turn_with_its_reason() {
        let base = "Password does not conform to requirements.";
        assert_eq!(reason("funnybone", RULES).as_deref(), Some(base));
        let two = format!("{base} Requirement 2.");
        assert_eq!(reason("funnnnnybone", RULES), Some(two));
        assert_eq!(reason("FUNNNNNYBONE", RULES).as_deref(), Some(base));
        assert_eq!(reason("funnnnnyBONE", RULES), Some(format!("{base} Req 4.")));
        assert_eq!(reason("funnnnnyB0N3", RULES).as_deref(), Some(base));
        assert_eq!(reason("funnnnnyB0N3!", RULES), None);
    }

    #[test]
    fn a_setting_that_is_not_a_list_refuses_every_password() {
        let refused = reason("anything at all", r#"{{".{10,}"}}"#);
        assert_eq!(refused.as_deref(), Some("Server cannot hash passwords at this time."));
        assert_eq!(reason("x", "[]"), None);
        assert_eq!(reason("x", ""), None);
    }
}
