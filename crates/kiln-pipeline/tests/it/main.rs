//! kiln-pipeline's integration tests: the runner and its stages on the real file system, with
//! container engines written for the purpose (one that fails, one that records what it is
//! asked to remove), so that faults land exactly where a test puts them.

#![allow(clippy::unwrap_used, missing_docs)]

mod engine;
mod faults;
mod locks;
