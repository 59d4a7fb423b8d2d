//! The ecosystems kiln builds, one folder each (its planner, image, repair rules and registry
//! `ENTRY`), and the registry that asks them in order. Adding an ecosystem is a folder here and
//! a line in `registry`.

pub(crate) mod entry;
pub(crate) mod go;
pub(crate) mod java;
pub(crate) mod native;
pub(crate) mod node;
pub(crate) mod python;
mod registry;
pub(crate) mod rust;

pub use entry::Ecosystem;
pub use registry::{
    applies_everywhere, bare, choose, fresh_install, interpreter_image, interpreter_name,
    leave_out, package_index, rewrites, rule_table, rules,
};
