//! Integration tests of kiln-docker against the real Docker engine (started in CI by
//! `scripts/docker-engine.sh start`; `debian:bookworm` comes from `scripts/base-images.sh`).
//! Tests that need the engine fail when it is missing: they never skip.

#![allow(clippy::unwrap_used, clippy::print_stderr, missing_docs)]

mod engine;
mod images;
mod support;
