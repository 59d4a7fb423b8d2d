//! Integration tests of kiln-store, in one binary.

#![allow(
    clippy::unwrap_used,
    clippy::print_stdout,
    clippy::print_stderr,
    missing_docs
)]

mod analytics;
mod convert;
mod crash;
mod release;
mod run;
mod samples;
mod stage;
