//! Integration tests of kiln-docker against the real Docker engine (started in CI by
//! `scripts/docker-engine.sh start`; `debian:bookworm` comes from `scripts/base-images.sh`).
//! Tests that need the engine fail when it is missing: they never skip.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a panic is how a test fails"
)]
mod engine;
mod floor;
mod images;
mod support;
