//! Write-time checks of `_replicator` documents (CouchDB 3.4's `before_doc_update`, which
//! parses every interactive write with `couch_replicator_parse:parse_rep_doc_without_id`
//! and refuses what it cannot parse with `403 forbidden`). The reasons are CouchDB's,
//! including the Erlang terms it prints for `bad_request` throws and runtime errors
//! (`{throw,{bad_request,<<"…">>}}`, `{error,badarg}`): options, proxies (`proxy`
//! exclusive with `source_proxy`/`target_proxy`, `http`, `https` or `socks5` URLs),
//! endpoints, their `auth` and `headers` (objects, with string header values), filters.
//! Local database names stay allowed as endpoints (CouchDB 3 refuses them; Bunko
//! replicates them).

use serde_json::{Map, Value};

/// The reason CouchDB gives for a document it cannot parse, or `None` when it parses. A
/// cancellation naming its replication id needs no endpoints.
pub(crate) fn refusal(body: &Map<String, Value>) -> Option<String> {
    let proxies = match proxies(body) {
        Ok(proxies) => proxies,
        Err(refused) => return Some(refused),
    };
    let refused = options(body);
    let cancel_by_id = body.get("cancel") == Some(&Value::Bool(true))
        && ["_local_id", "replication_id", "id"].iter().any(|k| body.contains_key(*k));
    if refused.is_some() || cancel_by_id {
        return refused;
    }
    endpoint(body.get("source"), proxies.0)
        .or_else(|| endpoint(body.get("target"), proxies.1))
        .or_else(|| filter(body))
}

/// `parse_proxy_settings`: the proxies of the source and the target (`proxy` for both, or
/// `source_proxy` and `target_proxy`; `""` is none).
fn proxies(body: &Map<String, Value>) -> Result<(&Value, &Value), String> {
    const NONE: &Value = &Value::Null;
    let given = |key: &str| body.get(key).filter(|v| v.as_str() != Some(""));
    let exclusive = |other: &str| {
        format!("{{throw,{{bad_request,\"`proxy` is mutually exclusive with `{other}`\"}}}}")
    };
    match (given("proxy"), given("source_proxy"), given("target_proxy")) {
        (Some(_), Some(_), _) => Err(exclusive("source_proxy")),
        (Some(_), _, Some(_)) => Err(exclusive("target_proxy")),
        (Some(proxy), _, _) => Ok((proxy, proxy)),
        (None, source, target) => Ok((source.unwrap_or(NONE), target.unwrap_or(NONE))),
    }
}

/// `parse_proxy_params`: an `http`, `https` or `socks5` URL (`ibrowse_lib:parse_url`).
fn proxy(proxy: &Value) -> Option<String> {
    let url = match proxy {
        Value::Null => return None,
        Value::String(url) if url.is_empty() => return None,
        Value::String(url) => url,
        _ => return Some("Invalid proxy url".into()),
    };
    let Some((scheme, rest)) = url.split_once("://") else {
        return Some("{error,{badmatch,{error,invalid_uri}}}".into());
    };
    if rest.is_empty() {
        return Some("{error,{badmatch,{error,invalid_uri}}}".into());
    }
    (!matches!(scheme, "http" | "https" | "socks5")).then(|| "proxy has an invalid url".into())
}

/// `parse_rep_db` of an endpoint object: `auth` and `headers` must be objects (a
/// `badmatch` otherwise) whose header values are strings (`badarg`).
fn auth_and_headers(endpoint: &Map<String, Value>) -> Option<String> {
    for key in ["auth", "headers"] {
        match endpoint.get(key) {
            None | Some(Value::Object(_)) => {}
            Some(other) => return Some(format!("{{error,{{badmatch,{}}}}}", erlang_term(other))),
        }
    }
    let headers = endpoint.get("headers").and_then(Value::as_object);
    headers.is_some_and(|h| !h.values().all(Value::is_string)).then(|| BADARG.into())
}

/// How Erlang's `~p` prints a decoded JSON value that is not an object.
fn erlang_term(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("<<{}>>", erlang_string(s)),
        Value::Array(items) => {
            let printable = |v: &Value| v.as_u64().is_some_and(|c| (32..127).contains(&c));
            if !items.is_empty() && items.iter().all(printable) {
                let text: String =
                    items.iter().filter_map(Value::as_u64).map(|c| c as u8 as char).collect();
                return erlang_string(&text);
            }
            let inner: Vec<String> = items.iter().map(erlang_term).collect();
            format!("[{}]", inner.join(","))
        }
        Value::Object(_) => "{[]}".into(),
    }
}

/// A quoted Erlang string with `"` and `\` escaped.
fn erlang_string(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// `{throw,{bad_request,<<"msg">>}}`: how CouchDB prints a `bad_request` throw.
fn bad_request(msg: &str) -> Option<String> {
    Some(format!("{{throw,{{bad_request,<<\"{msg}\">>}}}}"))
}

const BADARG: &str = "{error,badarg}";
const FUNCTION_CLAUSE: &str = "{error,function_clause}";

/// `convert_options` (in the document's order, first refusal wins), then `check_options`.
fn options(body: &Map<String, Value>) -> Option<String> {
    for (key, value) in body {
        let boolean = |name: &str| {
            (!value.is_boolean())
                .then(|| bad_request(&format!("parameter `{name}` must be a boolean")))?
        };
        let refused = match key.as_str() {
            k @ ("cancel" | "create_target" | "winning_revs_only" | "continuous"
            | "use_bulk_get") => boolean(k),
            "create_target_params" if !value.is_object() => {
                bad_request("parameter `create_target_params` must be a JSON object")
            }
            "query_params" if !value.is_object() => {
                bad_request("parameter `query_params` must be an object")
            }
            "doc_ids" => doc_ids(value),
            "selector" if !value.is_object() => {
                bad_request("parameter `selector` must be a JSON object")
            }
            "worker_processes"
            | "worker_batch_size"
            | "http_connections"
            | "connection_timeout"
            | "retries_per_request"
            | "checkpoint_interval" => integer(value),
            _ => None,
        };
        if refused.is_some() {
            return refused;
        }
    }
    let present = |k: &str| body.get(k).is_some_and(|v| !(k == "doc_ids" && v.is_null()));
    let given = ["doc_ids", "filter", "selector"].iter().filter(|k| present(k)).count();
    (given > 1).then(|| {
        "{throw,{bad_request,\"`doc_ids`,`filter`,`selector` are mutually exclusive\"}}".into()
    })
}

fn doc_ids(value: &Value) -> Option<String> {
    match value {
        Value::Null => None,
        Value::Array(ids) if ids.iter().all(Value::is_string) => None,
        Value::Array(_) => Some(FUNCTION_CLAUSE.into()),
        _ => bad_request("parameter `doc_ids` must be an array"),
    }
}

/// `couch_util:to_integer`: an integer, or a string of one.
fn integer(value: &Value) -> Option<String> {
    match value {
        Value::Number(n) if n.is_i64() || n.is_u64() => None,
        Value::String(s) if s.parse::<i64>().is_ok() => None,
        Value::String(_) => Some(BADARG.into()),
        _ => Some(FUNCTION_CLAUSE.into()),
    }
}

/// `parse_rep_db`: a URL, an object with a `url` (then its proxy, `auth` and `headers`),
/// or (Bunko) a local database name.
fn endpoint(value: Option<&Value>, via: &Value) -> Option<String> {
    let (url, object) = match value {
        None => return Some("Missing replicator database".into()),
        Some(Value::String(s)) if !s.starts_with("http://") && !s.starts_with("https://") => {
            return None;
        }
        Some(Value::String(s)) => (Some(s.as_str()), None),
        Some(Value::Object(o)) => (o.get("url").and_then(Value::as_str), Some(o)),
        Some(_) => return Some(FUNCTION_CLAUSE.into()),
    };
    if !url.is_some_and(valid_url) {
        return Some("endpoint has an invalid url".into());
    }
    proxy(via).or_else(|| object.and_then(auth_and_headers))
}

/// An `http` or `https` URL naming a host.
fn valid_url(url: &str) -> bool {
    let Some((scheme, rest)) = url.split_once("://") else { return false };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = authority.rsplit('@').next().unwrap_or_default();
    matches!(scheme, "http" | "https") && !host.is_empty() && !host.starts_with(':')
}

/// `couch_replicator_filters`: `_view` needs `query_params.view` = `ddoc/view`, and a
/// design-document filter must be `ddoc/name`.
fn filter(body: &Map<String, Value>) -> Option<String> {
    let filter = body.get("filter")?;
    if filter == "_view" {
        let view = body.get("query_params").and_then(|q| q.get("view"));
        return match view.and_then(Value::as_str) {
            None => Some(BADARG.into()),
            Some(v) if v.split('/').count() == 2 => None,
            Some(_) => bad_request("Invalid `view` parameter."),
        };
    }
    match filter.as_str() {
        None => Some(BADARG.into()),
        Some(f) if f.starts_with('_') || f.contains('/') => None,
        Some(_) => Some("Invalid filter. Must match `ddocname/filtername`.".into()),
    }
}
