//! The sandbox of a build without the `quickjs` feature: no function compiles, so no
//! JavaScript runs, and every design-document function is refused with a
//! `compilation_error` saying why (a validator or trigger is never skipped silently).
//! Built-in reducers need no sandbox and keep working.

use std::convert::Infallible;

pub(crate) use crate::calls::{Answer, Doc, Kind, Op};
use crate::error::{Error, Result};
use crate::views::Limits;

/// A sandbox that cannot exist: [`Sandbox::new`] always fails.
pub(crate) struct Sandbox(Infallible);

impl Sandbox {
    pub(crate) fn new(_limits: &Limits) -> Result<Self> {
        Err(Error::Compilation(
            "JavaScript is not available in this build (bunko-js without `quickjs`)".into(),
        ))
    }

    pub(crate) fn set_lib(&self, _lib_json: &str) -> Result<()> {
        match self.0 {}
    }

    pub(crate) fn set_root(&self, _ddoc_json: &str) -> Result<()> {
        match self.0 {}
    }

    pub(crate) fn compile(&self, _source: &str, _kind: Kind) -> Result<u32> {
        match self.0 {}
    }

    pub(crate) fn map_docs(&self, _ids: &[u32], _docs: &[Doc]) -> Result<String> {
        match self.0 {}
    }

    pub(crate) fn reduce(&self, _id: u32, _input_json: &str, _rereduce: bool) -> Result<String> {
        match self.0 {}
    }

    pub(crate) fn validate(&self, _id: u32, _args_json: &str) -> Result<String> {
        match self.0 {}
    }

    pub(crate) fn install_db(&self, _answer: Answer) -> Result<()> {
        match self.0 {}
    }

    pub(crate) fn script(&self, _id: u32, _text: &str, _db_at: usize) -> Result<String> {
        match self.0 {}
    }

    pub(crate) fn render(&self, _op: &str, _id: u32, _text: &str) -> Result<String> {
        match self.0 {}
    }
}
