//! Integration tests of kiln-github: ingest of task files, and the crawl against the fake
//! GitHub of kiln-testkit.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a panic is how a test fails"
)]

mod crawl;
mod fidelity;
mod ingest;
