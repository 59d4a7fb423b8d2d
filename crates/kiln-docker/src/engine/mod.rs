//! [`DockerRuntime`]: [`ContainerRuntime`](kiln_core::ContainerRuntime) on the Docker Engine
//! API through bollard.
//!
//! The modules: `container_runtime` (the trait implementation, call by call) over `client`
//! (the connection, Podman's caveats, the error of a failed request), `exec` (a command run to
//! its end, the backstop, OOM kills, a container stopped under a command) and `images` (image
//! lists, a failed build's step images, registry credentials); at the bottom `errors` (what a
//! bollard error says) and `names` (ids, tags, labels as the engine spells them).

mod client;
mod container_runtime;
mod errors;
mod exec;
mod images;
mod names;

pub use client::DockerRuntime;
