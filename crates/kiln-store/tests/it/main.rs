//! Integration tests of kiln-store, in one binary.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a panic is how a test fails"
)]
mod analytics;
mod convert;
mod crash;
mod release;
mod run;
mod samples;
mod stage;
