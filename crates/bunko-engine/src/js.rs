//! The JavaScript sandbox the engine's design-document functions are compiled in
//! (`validate_doc_update`, triggers, procedures, and the checks of a design document's
//! functions on save).

use bunko_js::{Limits, Runtime};

/// The runtime every design-document function of the engine is compiled with.
pub(crate) fn runtime() -> Runtime {
    Runtime::new(Limits::default())
}

/// Run with `cargo test -p bunko-engine --no-default-features --lib js::`.
#[cfg(all(test, not(feature = "js")))]
mod tests {
    use std::sync::Arc;

    use bunko_storage::Memory;

    use crate::security::UserCtx;
    use crate::{Config, Engine, Error, Result, WriteOptions};

    #[test]
    fn without_js_documents_work_and_javascript_functions_are_refused() -> Result<()> {
        let admin = UserCtx::admin("test");
        let engine = Engine::open(Arc::new(Memory::new()), Config::default())?;
        let db = engine.create_db(&admin, "plain", false)?;
        let parse = |json: &str| bunko_doc::body::parse(json.as_bytes(), &Default::default());
        db.put(&admin, parse(r#"{"_id": "a", "n": 1}"#)?, WriteOptions::default())?;
        assert_eq!(db.get("a", None)?.body, br#"{"n":1}"#);
        let validator = r#"{"_id": "_design/v", "validate_doc_update": "function(n, o) {}"}"#;
        let refused = db.put(&admin, parse(validator)?, WriteOptions::default());
        assert!(
            matches!(&refused, Err(Error::Invalid { error: "compilation_error", reason })
                if reason.contains("not available")),
            "{refused:?}"
        );
        Ok(())
    }
}
