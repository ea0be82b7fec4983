//! The JavaScript sandbox the engine's design-document functions are compiled in
//! (`validate_doc_update`, triggers, procedures, and the checks of a design document's
//! functions on save).

use bunko_js::{Limits, Runtime};

/// The runtime every design-document function of the engine is compiled with.
pub(crate) fn runtime() -> Runtime {
    Runtime::new(Limits::default())
}
