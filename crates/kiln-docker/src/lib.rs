//! kiln-docker.
