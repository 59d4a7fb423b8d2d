//! kiln-testkit.
