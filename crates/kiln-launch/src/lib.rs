//! The launch stage: build an executable environment for one candidate at its base commit.
//!
//! Rules first: the repository's own files choose a deterministic plan (Python, Rust, Node,
//! Go, C/C++ or Java; the registry is `ecosystems`), whose typed steps run in a container from
//! the plan's base image. Unpinned dependencies are resolved as of the base commit's date. The
//! build counts when the test command's output parses into statuses and enough of them pass;
//! the container is then committed to a tagged image. Any failure is a row with a failure
//! class, the deciding command and its log tail, never an error that stops the stage: only an
//! unreachable engine does that.
//!
//! Modules depend one way: `build` (the launch loop) over `ecosystems` (the registry) over one
//! folder per ecosystem, over the shared `repair` engine, `images` and `dockerfile`, over the
//! vocabulary (`plan`, `steps`, `shell`, `debian`).

mod about;
mod agent;
mod build;
mod ci;
mod ci_variables;
mod classify;
pub mod debian;
pub mod dockerfile;
mod ecosystems;
mod environment;
mod fallback;
mod images;
mod layer;
mod output;
mod package_index;
mod plan;
pub mod recipe;
mod repair;
pub mod repo;
mod request;
mod services;
mod shell;
mod steps;
#[cfg(test)]
mod testutil;
mod verify;

pub use build::{LaunchError, PackedCheckout, launch, packed_checkout};
pub use ecosystems::node::JASMINE_REPORTER;
pub use ecosystems::python::default_image as python_image;
pub use ecosystems::{Ecosystem, applies_everywhere, rule_table};
pub use images::{base_image, ensure_image, tagged};
pub use layer::{PREFIX as LAYER_PREFIX, tag as layer_tag};
pub use repair::{Phase, Rule, Target};
pub use request::{AgentModel, LaunchRequest, ReuseSource};
