//! A scripted container runtime: [`ScriptedRuntime`] implements kiln's
//! [`ContainerRuntime`](kiln_core::ContainerRuntime) without an engine, so the logic of launch
//! and validate can be tested in milliseconds.
//!
//! Commands are not run. Each exec is answered by the first [`Script`] whose pattern matches
//! the command's script (a substring or a regular expression, optionally only its Nth match,
//! only in containers of one image, or only after another command ran in the same container),
//! or by the default [`Answer`] (exit 0, no output). A script's answers are used in turn, the
//! last one repeating, which models flaky tests. Images are tracked by tag: a commit creates
//! an image later containers can start from, a container from an unknown image fails as the
//! engine does ([`RuntimeError::ImageNotFound`](kiln_core::RuntimeError::ImageNotFound)).
//! Engine failures are injected by call number ([`ScriptedRuntime::fail`]), and every call is
//! logged ([`ScriptedRuntime::calls`], [`ScriptedRuntime::containers`]) for tests to assert on.
//!
//! The modules, from the top: `container_runtime` (the trait implementation: each call
//! answered from the bookkeeping), `scripted` (the runtime and what tests set up and read on
//! it), `state` (what is behind its lock); below them `script` (answers and scripts, and the
//! choice of the script that answers), `images` (the image bookkeeping), `container` (the
//! containers and their exec records), `calls` (the call log and injected faults) and `files`
//! (the file model: paths and contents, archives, changes).

mod calls;
mod container;
mod container_runtime;
mod files;
mod images;
mod script;
mod scripted;
mod state;

pub use calls::{Call, Operation};
pub use container::{Container, ExecRecord, ExecResult};
pub use files::CopiedIn;
pub use images::{Image, ImageOrigin};
pub use script::{Answer, Pattern, Script};
pub use scripted::ScriptedRuntime;
