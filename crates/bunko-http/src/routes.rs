//! Every path the router serves, for the tests that must cover all of them: the
//! escalation table in `crates/bunko/tests/e2e/escalation.rs` tries every write method on
//! each path. A unit test keeps this list equal to the `.route(...)` calls in the source, so
//! a new route cannot be left out of that table.

/// The router's path templates, as written in the `.route(...)` calls.
pub const PATHS: &[&str] = &[
    "/",
    "/_active_tasks",
    "/_all_dbs",
    "/_db_updates",
    "/_dbs_info",
    "/_membership",
    "/_node/{node}",
    "/_node/{node}/_config",
    "/_node/{node}/_config/_reload",
    "/_node/{node}/_config/{section}",
    "/_node/{node}/_config/{section}/{key}",
    "/_node/{node}/_prometheus",
    "/_node/{node}/_stats",
    "/_node/{node}/_versions",
    "/_replicate",
    "/_scheduler/docs",
    "/_scheduler/docs/{db}",
    "/_scheduler/docs/{db}/{*docid}",
    "/_scheduler/jobs",
    "/_session",
    "/_transaction",
    "/_up",
    "/_utils",
    "/_utils/",
    "/_utils/console.css",
    "/_utils/console.js",
    "/_utils/login.js",
    "/_uuids",
    "/{db}",
    "/{db}/",
    "/{db}/_advise",
    "/{db}/_all_docs",
    "/{db}/_bulk_docs",
    "/{db}/_bulk_get",
    "/{db}/_changes",
    "/{db}/_compact",
    "/{db}/_compact/{ddoc}",
    "/{db}/_design/{ddoc}/_geo/{index}",
    "/{db}/_design/{ddoc}/_geo_info/{index}",
    "/{db}/_design/{ddoc}/_info",
    "/{db}/_design/{ddoc}/_procedures/{name}",
    "/{db}/_design/{ddoc}/_rewrite",
    "/{db}/_design/{ddoc}/_rewrite/{*path}",
    "/{db}/_design/{ddoc}/_list/{name}",
    "/{db}/_design/{ddoc}/_list/{name}/{other}/{view}",
    "/{db}/_design/{ddoc}/_list/{name}/{view}",
    "/{db}/_design/{ddoc}/_search/{index}",
    "/{db}/_design/{ddoc}/_search_info/{index}",
    "/{db}/_design/{ddoc}/_show",
    "/{db}/_design/{ddoc}/_show/",
    "/{db}/_design/{ddoc}/_show/{name}",
    "/{db}/_design/{ddoc}/_show/{name}/{*docid}",
    "/{db}/_design/{ddoc}/_update",
    "/{db}/_design/{ddoc}/_update/",
    "/{db}/_design/{ddoc}/_update/{name}",
    "/{db}/_design/{ddoc}/_update/{name}/",
    "/{db}/_design/{ddoc}/_update/{name}/{*docid}",
    "/{db}/_design/{ddoc}/_view/{view}",
    "/{db}/_design/{ddoc}/_view/{view}/queries",
    "/{db}/_design/{id}",
    "/{db}/_design/{id}/{*attachment}",
    "/{db}/_design_docs",
    "/{db}/_ensure_full_commit",
    "/{db}/_explain",
    "/{db}/_find",
    "/{db}/_geo_cleanup",
    "/{db}/_index",
    "/{db}/_index/{*rest}",
    "/{db}/_local",
    "/{db}/_local/",
    "/{db}/_local/{id}",
    "/{db}/_local/{id}/{*attachment}",
    "/{db}/_local_docs",
    "/{db}/_partition",
    "/{db}/_partition/",
    "/{db}/_partition/{*rest}",
    "/{db}/_partitions",
    "/{db}/_purge",
    "/{db}/_purged_infos",
    "/{db}/_purged_infos_limit",
    "/{db}/_revs_diff",
    "/{db}/_revs_limit",
    "/{db}/_search_cleanup",
    "/{db}/_security",
    "/{db}/_temp_view",
    "/{db}/_view_cleanup",
    "/{db}/{id}",
    "/{db}/{id}/{*attachment}",
];

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    /// The first string literal after each `.route(` in `text`.
    fn routes_in(text: &str) -> Vec<String> {
        text.split(".route(")
            .skip(1)
            .filter_map(|rest| {
                let rest = rest.trim_start().strip_prefix('"')?;
                rest.split_once('"').map(|(path, _)| path.to_string())
            })
            .collect()
    }

    #[test]
    fn paths_list_every_route_in_the_source() -> std::io::Result<()> {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut found = BTreeSet::new();
        for entry in std::fs::read_dir(src)? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("routes.rs") {
                found.extend(routes_in(&std::fs::read_to_string(path)?));
            }
        }
        let listed: BTreeSet<String> = super::PATHS.iter().map(|p| p.to_string()).collect();
        assert_eq!(found, listed, "routes.rs must list exactly the router's paths");
        Ok(())
    }

    #[test]
    fn multi_line_route_calls_are_found() {
        let text = ".route(\n    \"/a\",\n    get(x),\n)\n.route(\"/b\", get(y))";
        assert_eq!(routes_in(text), ["/a", "/b"]);
    }
}
