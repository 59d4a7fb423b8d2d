//! kiln-pipeline's integration tests: the runner and its stages on the real file system, with
//! container engines written for the purpose (one that fails, one that records what it is
//! asked to remove), so that faults land exactly where a test puts them; `gc` against a build
//! in progress on the real engine.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a panic is how a test fails"
)]
mod engine;
mod faults;
mod gc;
mod locks;
mod merge;
mod reuse;
mod shards;
