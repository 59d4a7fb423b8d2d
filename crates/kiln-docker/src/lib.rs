//! kiln's container runtime on the Docker Engine API.
//!
//! [`DockerRuntime`] implements [`kiln_core::ContainerRuntime`] with bollard. Every command runs
//! under the container's own `timeout -s KILL`, because the engine has no API to kill an exec
//! and a client-side timeout leaves the process running; containers themselves only live for
//! their spec's `max_lifetime`, so the container is the final backstop. What a container
//! writes is bounded by its limits' `disk_bytes`, watched by a task per container (`disk`),
//! and while they run the engine's free space is kept over their `min_free_bytes` by one task
//! per runtime that stops the containers writing the most (`floor`).
//!
//! The images themselves (Dockerfiles, CA bundle) are chosen by the launch stage and live in
//! `kiln-launch`; this crate only builds and runs what it is given.

mod build;
mod disk;
mod engine;
mod floor;

pub use engine::DockerRuntime;
pub use kiln_core::capture::HeadTail;
