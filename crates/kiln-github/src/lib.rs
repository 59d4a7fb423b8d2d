//! kiln-github.
