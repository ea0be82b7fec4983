//! Fuzz target: query strings as `curl` and the SDKs send them, through CouchDB's typing of
//! parameters (booleans, integers, JSON keys). Every value gets a value or a `400`.

use bunko_http::params::Params;

#[test]
fn query_strings() {
    bunko_fuzz::bolero::check!().for_each(|bytes: &[u8]| {
        let query = String::from_utf8_lossy(bytes);
        let params = Params::parse(Some(&query));
        for name in ["key", "keys", "startkey", "limit", "skip", "descending", "include_docs"] {
            let _ = (params.bool(name), params.u64(name), params.json(name));
            let _ = params.json_any(&[name, "start_key"]);
        }
    });
}
