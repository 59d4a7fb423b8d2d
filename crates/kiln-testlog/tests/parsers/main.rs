//! Data-driven parser tests over real captured logs in `tests/data/<format>/`.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a panic is how a test fails"
)]

mod api;
mod cargo;
mod check;
mod cxx;
mod go;
mod harness_grade;
mod harness_ids;
mod js;
mod junit;
mod node;
mod pytest;
mod tap;
mod unittest;
