//! End-to-end tests: the real `bunko` binary, spawned per test on port 0 with a fresh data
//! directory, driven over HTTP exactly as a CouchDB 3.4 client would.
//!
//! Expected results follow CouchDB 3.4 (its `test/elixir` suite, `chttpd`/`couch` sources and the
//! API docs); where a test pins a CouchDB detail, the comment names where it comes from.
//! Run with `cargo test -p bunko --test e2e`.

mod harness;

mod advisor;
mod all_docs;
mod attachments;
mod attachments_couch;
mod attachments_gzip;
mod auth;
mod auth_config;
mod bad_input;
mod bulk;
mod changes;
mod changes_filters;
mod clients;
mod config;
mod console;
mod console_api;
mod couch_api;
mod couchdb_interop;
mod crash;
mod databases;
mod documents;
mod encoding;
mod escalation;
mod http_headers;
mod login;
mod mango;
mod mango_explain;
mod mango_text;
mod mongo;
mod mongo_agg;
mod mongo_bulk;
mod mongo_capped;
mod mongo_capped_order;
mod mongo_capped_reads;
mod mongo_causal;
mod mongo_collation;
mod mongo_collections;
mod mongo_conformance;
mod mongo_couch_dbs;
mod mongo_count_scan;
mod mongo_covered;
mod mongo_crash;
mod mongo_distinct_scan;
mod mongo_escalation;
mod mongo_exhaust;
mod mongo_index;
mod mongo_meta;
mod mongo_options;
mod mongo_out;
mod mongo_out_targets;
mod mongo_projection;
mod mongo_query_ops;
mod mongo_return_key;
mod mongo_sha1;
mod mongo_sort_merge;
mod mongo_stream;
mod mongo_timeseries;
mod mongo_timeseries_writes;
mod mongo_txn;
mod mongo_types;
mod mongo_update;
mod mongo_users;
mod mongo_validation;
mod mongo_views;
mod partitions;
mod persistence;
mod procedures;
mod purge;
mod raw_targets;
mod read_escalation;
mod replication;
mod rewrites;
mod search;
mod search_japanese;
mod search_state;
mod server;
mod show_list;
mod transactions;
mod validate;
mod views;
