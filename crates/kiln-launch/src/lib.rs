//! kiln-launch.
