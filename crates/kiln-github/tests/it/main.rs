//! Integration tests of kiln-github: ingest of task files, and the crawl against the fake
//! GitHub of kiln-testkit.
#![allow(clippy::unwrap_used)]

mod crawl;
mod fidelity;
mod ingest;
