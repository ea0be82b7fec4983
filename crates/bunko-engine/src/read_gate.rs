//! The read gate: the one place that decides what a reader sees of a document, the
//! read-side twin of the write gate (`gate.rs`), as CouchDB's `after_doc_read` hooks.
//!
//! Every engine method that hands documents to a caller takes the reading [`UserCtx`]:
//! [`Database::get`], [`Database::open_revs`], [`Database::all_docs`] and
//! [`Database::all_docs_keys`] with `include_docs`, [`Database::changes`] (`include_docs`
//! and the document filters: `_selector`, JavaScript filters), [`Database::find`] (Mango and
//! MongoDB queries match the document as the reader sees it, so a selector cannot probe a
//! hidden field), [`Database::change_events`] (the change journal, whole bodies: only for
//! members whose sight is whole, the others get `403 forbidden`). Each turns the reader into a [`Sight`] once ([`Database::sight`]) and
//! passes every document through [`Sight::apply`] before it leaves the engine. Routes built
//! on those (`GET`, `_bulk_get`, `open_revs`, views and `_show`/`_list`/`_update` reading
//! documents, the MongoDB front end, a replication reading the database) cannot skip it:
//! there is no unchecked variant to call.
//!
//! | database | reader | sees |
//! |---|---|---|
//! | `_replicator` | its admins, the replicator (role `_replicator`), the document's `owner` | the document |
//! | `_replicator` | anyone else | `source`/`target` without URL credentials, endpoint objects without `headers` and `auth`, under a made-up revision (CouchDB's `couch_replicator_docs:after_doc_read`) |
//! | the users database | its admins, the user whose document it is | the document |
//! | the users database | anyone else | `404 missing`; design documents `403 forbidden` (`couch_users_db:after_doc_read`) |
//! | any other | members | the document |

use bunko_doc::RevId;
use bunko_doc::id::{DocKind, kind};
use serde_json::{Map, Value};

use crate::database::Database;
use crate::read::DocOut;
use crate::records::DocInfo;
use crate::replicator_doc::{REPLICATOR_DB, REPLICATOR_ROLE};
use crate::security::UserCtx;
use crate::users::USER_PREFIX;
use crate::{Error, Result};

/// What one reader may see of one database's documents, decided once per request.
#[derive(Debug, Clone)]
pub struct Sight(Rule);

#[derive(Debug, Clone)]
enum Rule {
    /// Documents as stored.
    Whole,
    /// `_replicator` for a reader who is not an admin: documents owned by others (the
    /// reader's name, JSON `null` when anonymous) lose their credentials.
    Replicator(Value),
    /// The users database for a reader who is not an admin: only their own document.
    Users(Option<String>),
}

impl Database {
    /// What `reader` sees of this database's documents.
    pub fn sight(&self, reader: &UserCtx) -> Result<Sight> {
        // Decided from the name alone (one lock, no body parsed) for every other database.
        let name = self.name();
        let replicator = name == REPLICATOR_DB;
        if !replicator && name != self.config.get().users_db {
            return Ok(Sight(Rule::Whole));
        }
        if self.security_object()?.is_admin(reader) {
            return Ok(Sight(Rule::Whole));
        }
        Ok(Sight(if !replicator {
            Rule::Users(reader.name.clone())
        } else if reader.roles.iter().any(|r| r == REPLICATOR_ROLE) {
            Rule::Whole
        } else {
            Rule::Replicator(reader.name.clone().map_or(Value::Null, Value::String))
        }))
    }
}

impl Sight {
    /// Whether documents pass unchanged (no body needs to be looked at).
    pub fn is_whole(&self) -> bool {
        matches!(self.0, Rule::Whole)
    }

    /// The document as the reader may see it: unchanged, with credentials stripped, or an
    /// error (`404 missing`, `403 forbidden`).
    pub fn apply(&self, doc: DocOut) -> Result<DocOut> {
        match &self.0 {
            Rule::Whole => Ok(doc),
            Rule::Users(name) => users(name.as_deref(), doc),
            Rule::Replicator(name) => replicator(name, doc),
        }
    }

    /// [`Sight::apply_listed`] for a body a query read directly: the revision and body the
    /// reader sees, if any.
    pub(crate) fn body(
        &self,
        id: &str,
        info: &DocInfo,
        rev: &RevId,
        deleted: bool,
        body: Vec<u8>,
    ) -> Result<Option<(RevId, Vec<u8>)>> {
        if self.is_whole() {
            return Ok(Some((rev.clone(), body)));
        }
        let (id, rev, info) = (id.to_string(), rev.clone(), info.clone());
        let revs_limit = usize::MAX;
        let doc =
            DocOut { id, rev, deleted, body, info, revs_info: None, stored_rev: None, revs_limit };
        Ok(self.apply_listed(doc)?.map(|doc| (doc.rev, doc.body)))
    }

    /// [`Sight::apply`] for a listing (`include_docs`): a document the reader may not see
    /// is left out (`None`) rather than failing the whole answer.
    pub fn apply_listed(&self, doc: DocOut) -> Result<Option<DocOut>> {
        match self.apply(doc) {
            Ok(doc) => Ok(Some(doc)),
            Err(Error::NotFound(_) | Error::Forbidden(_)) => Ok(None),
            Err(err) => Err(err),
        }
    }
}

/// `couch_users_db:after_doc_read` without public fields.
fn users(name: Option<&str>, doc: DocOut) -> Result<DocOut> {
    if kind(&doc.id) == DocKind::Design {
        return Err(Error::Forbidden(
            "Only administrators can view design docs in the users database.".into(),
        ));
    }
    let own = name.is_some_and(|n| doc.id.strip_prefix(USER_PREFIX) == Some(n));
    if own { Ok(doc) } else { Err(crate::error::missing()) }
}

/// `couch_replicator_docs:after_doc_read`: a document owned by someone else loses its
/// credentials, and its revision is made up (the id the stripped body would have), so
/// that no client mistakes it for the stored one.
fn replicator(name: &Value, mut doc: DocOut) -> Result<DocOut> {
    if kind(&doc.id) == DocKind::Design {
        return Ok(doc);
    }
    let mut body: Map<String, Value> = serde_json::from_slice(&doc.body)
        .map_err(|_| Error::Corrupt(format!("the body of {}", doc.id)))?;
    if body.get("owner") == Some(name) {
        return Ok(doc);
    }
    for key in ["source", "target"] {
        // CouchDB writes its `undefined` for a missing endpoint (deleted documents).
        let stripped = body.get(key).map_or(Value::from("undefined"), strip_credentials);
        body.insert(key.into(), stripped);
    }
    let atts = crate::attachments::of_body(&doc.body);
    let hashed: Vec<_> =
        atts.iter().rev().map(|a| (a.name.as_str(), a.content_type.as_str(), a.md5)).collect();
    let mut fields = body.clone();
    fields.remove("_attachments");
    let parent = doc.parent_rev();
    let fake = RevId::next_for(parent.as_ref(), doc.deleted, &fields, &hashed);
    doc.body = serde_json::to_vec(&body).map_err(|e| Error::Corrupt(e.to_string()))?;
    doc.stored_rev = Some(std::mem::replace(&mut doc.rev, fake));
    Ok(doc)
}

/// `strip_credentials`: a URL loses `user:password@`, an endpoint object its `headers`
/// and `auth`; anything else is kept.
fn strip_credentials(endpoint: &Value) -> Value {
    match endpoint {
        Value::String(url) => Value::String(strip_url(url)),
        Value::Object(map) => {
            let mut map = map.clone();
            map.remove("headers");
            map.remove("auth");
            Value::Object(map)
        }
        other => other.clone(),
    }
}

/// CouchDB's `http(s)?://(?:[^:]+):[^@]+@(.*)$` → `http\1://\2`.
fn strip_url(url: &str) -> String {
    let (scheme, rest) = if let Some(rest) = url.strip_prefix("https://") {
        ("https://", rest)
    } else if let Some(rest) = url.strip_prefix("http://") {
        ("http://", rest)
    } else {
        return url.to_string();
    };
    // `[^:]+:` is the user (at least one character, no colon), `[^@]+@` the password.
    let Some(colon) = rest.find(':').filter(|&c| c > 0) else { return url.to_string() };
    let after = &rest[colon + 1..];
    match after.find('@').filter(|&at| at > 0) {
        Some(at) => format!("{scheme}{}", &after[at + 1..]),
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::revtree::RevTree;

    fn stored(id: &str, revs: &[&str], body: &str) -> DocOut {
        let mut tree = RevTree::default();
        let mut parent = None;
        for rev in revs {
            let rev: RevId = rev.parse().unwrap_or_else(|_| panic!("a rev: {rev}"));
            tree.push(rev, parent, false);
            parent = tree.nodes().len().checked_sub(1);
        }
        let rev = tree.nodes().last().map(|n| n.rev.clone()).unwrap_or_else(|| panic!("revs"));
        let info = DocInfo { seq: 1, tree, size: 0 };
        let body = body.as_bytes().to_vec();
        let (revs_info, stored_rev, revs_limit) = (None, None, usize::MAX);
        DocOut { id: id.into(), rev, deleted: false, body, info, revs_info, stored_rev, revs_limit }
    }

    /// CouchDB 3.4.3 showed this document (`owner` admin) to another member as below,
    /// under the revision `1-6d81f89a…` (`couch_replicator_docs:after_doc_read`).
    #[test]
    fn another_users_document_loses_its_credentials_under_couchdbs_made_up_rev() -> Result<()> {
        let body = r#"{"source":"http://bob:hunter2@127.0.0.1:25984/s23sec_a","target":{"url":"http://127.0.0.1:25984/s23sec_b","headers":{"Authorization":"Basic eDp5"},"auth":{"basic":{"username":"u","password":"p"}}},"continuous":false,"note":"x","owner":"admin"}"#;
        let doc = stored("r1", &["1-653205205704b292d0453ad6392794a6"], body);
        let shown = Sight(Rule::Replicator(Value::from("kana"))).apply(doc.clone())?;
        assert_eq!(
            String::from_utf8_lossy(&shown.body),
            r#"{"source":"http://127.0.0.1:25984/s23sec_a","target":{"url":"http://127.0.0.1:25984/s23sec_b"},"continuous":false,"note":"x","owner":"admin"}"#
        );
        assert_eq!(shown.rev.to_string(), "1-6d81f89a95888bddb86edb78838ecf80");
        assert_eq!(shown.stored_rev, Some(doc.rev.clone()));
        assert_eq!(shown.revisions(), (1, vec!["6d81f89a95888bddb86edb78838ecf80".to_string()]));
        let owners = Sight(Rule::Replicator(Value::from("admin"))).apply(doc.clone())?;
        assert_eq!(owners.body, doc.body, "the owner sees the document");
        assert_eq!(owners.rev, doc.rev);
        Ok(())
    }

    #[test]
    fn the_users_database_shows_a_user_their_own_document_only() {
        let doc = stored(
            "org.couchdb.user:kana",
            &["1-0123456789abcdef0123456789abcdef"],
            r#"{"name":"kana"}"#,
        );
        assert!(Sight(Rule::Users(Some("kana".into()))).apply(doc.clone()).is_ok());
        let other = Sight(Rule::Users(Some("taro".into()))).apply(doc.clone());
        assert!(matches!(other, Err(Error::NotFound(_))), "{other:?}");
        assert!(matches!(Sight(Rule::Users(None)).apply_listed(doc), Ok(None)));
        let ddoc = stored("_design/auth", &["1-0123456789abcdef0123456789abcdef"], "{}");
        let refused = Sight(Rule::Users(Some("kana".into()))).apply(ddoc);
        assert!(matches!(refused, Err(Error::Forbidden(_))), "{refused:?}");
    }

    #[test]
    fn urls_lose_their_userinfo_as_couchdbs_regex_does() {
        for (url, want) in [
            ("https://foo:bar@remote_server/database", "https://remote_server/database"),
            ("http://u:p@host:5984/db", "http://host:5984/db"),
            ("http://host/db", "http://host/db"),
            ("http://user@host/db", "http://user@host/db"),
            ("localdb", "localdb"),
            ("ftp://u:p@host/db", "ftp://u:p@host/db"),
        ] {
            assert_eq!(strip_url(url), want, "{url}");
        }
        let object = serde_json::json!({"url": "http://h/db", "headers": {"a": "b"}, "auth": {}});
        assert_eq!(strip_credentials(&object), serde_json::json!({"url": "http://h/db"}));
    }
}
