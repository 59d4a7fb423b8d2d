//! kiln-store.
