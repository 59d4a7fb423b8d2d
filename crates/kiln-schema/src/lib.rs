//! Row types of every table kiln writes, their column descriptions, and format versions.
//!
//! Each table is a plain serde struct declared with the [`table!`] macro, which also derives the
//! column list ([`Row::columns`]). The column list is the single source from which `kiln-store`
//! builds Arrow schemas and from which the JSON Schema files in `schemas/` are generated, so the
//! three cannot drift apart. This crate does no IO.

mod columns;
mod id;
mod status;
mod tables;
mod test_list;

pub use columns::{
    Column, ColumnKind, ColumnSink, ColumnType, Row, SCHEMA_VERSION, json_schema, rows_by_id,
};
pub use id::{IdError, InstanceId, MAX_ID_BYTES, safe_name, shown};
pub use status::{
    BuiltBy, CandidateStatus, Difficulty, DropReason, EnvironmentStatus, FailureClass, Relation,
    TestStatus, TestStatuses, ValidationStatus,
};
pub use tables::*;
pub use test_list::TestList;

/// Confounder flags an LM judge may raise on a verdict (after SWE-rebench V2's annotations):
/// tests that assert exact strings the issue does not give, tests or fix that need the network,
/// several issues solved by one pull request, an issue whose substance is only in an image.
pub const CONFOUNDER_FLAGS: &[&str] = &[
    "exact-string-assertions",
    "network-access",
    "multiple-issues",
    "image-only",
];

/// Every table kiln writes, as (name, doc, columns), in pipeline order.
#[must_use]
pub fn all_tables() -> Vec<(&'static str, &'static str, Vec<Column>)> {
    fn entry<R: Row>() -> (&'static str, &'static str, Vec<Column>) {
        (R::TABLE, R::DOC, R::columns())
    }
    vec![
        entry::<Candidate>(),
        entry::<Verdict>(),
        entry::<PlatformLabel>(),
        entry::<EnvironmentRecord>(),
        entry::<ValidationRecord>(),
        entry::<ReleaseInstance>(),
    ]
}
